//! Alerts: the default alert rules (`queries/alerts.sql`) checked at one
//! moment with the thresholds of the config: low and high usage, and hosts
//! or GPUs that stopped sending samples (`no_data`).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{query, unreadable};
use crate::columns::{self, Columns, batch_of};
use crate::config::Config;
use crate::error::Error;
use crate::output::Rows;
use crate::queries;
use crate::session::Session;

/// One rule firing on one GPU (or, for `no_data`, on a whole host).
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    /// `low_usage_1h`, `low_usage_4h`, `high_usage_15m` or `no_data`.
    pub rule: String,
    /// Host name.
    pub host: String,
    /// NVML index; `None` for `no_data` on a whole host.
    pub gpu_index: Option<i32>,
    /// GPU UUID; `None` for `no_data` on a whole host.
    pub gpu_uuid: Option<String>,
    /// Mean utilization over the rule's window (%); for `no_data`, minutes
    /// since the newest sample. (`None` only if the query gives none.)
    pub value: Option<f64>,
    /// Since when the rule holds, milliseconds since the epoch (UTC); for
    /// `no_data`, the newest sample. (`None` only if the query gives none.)
    pub since: Option<i64>,
}

/// The rules firing at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Alerts {
    /// One row per rule firing.
    pub rows: Vec<AlertRow>,
}

impl Alerts {
    /// Whether any rule fires.
    pub fn firing(&self) -> bool {
        !self.rows.is_empty()
    }
}

/// The rules of `config` checked over `session` at `now_ms` (milliseconds
/// since the epoch).
pub async fn alerts(session: &Session, config: &Config, now_ms: i64) -> Result<Alerts, Error> {
    // `[alerts] no_data` in milliseconds (the config keeps it under 7 days).
    let no_data_ms = i64::try_from(config.alerts.no_data.as_millis()).unwrap_or(i64::MAX);
    let at = |ms: i64| ScalarValue::TimestampMillisecond(Some(ms), Some(Arc::from("UTC")));
    let params = vec![
        at(now_ms),
        ScalarValue::Float64(Some(config.alerts.low_usage_1h)),
        ScalarValue::Float64(Some(config.alerts.low_usage_4h)),
        ScalarValue::Float64(Some(config.alerts.high_usage_15m)),
        at(now_ms - no_data_ms),
    ];
    let batch = query(session, queries::ALERTS, params).await?;
    Ok(Alerts { rows: read(&batch).map_err(unreadable)? })
}

fn read(batch: &RecordBatch) -> Result<Vec<AlertRow>, ArrowError> {
    let c = Columns::of(batch);
    let (rule, host, gpu_index, gpu_uuid) =
        (c.text("rule")?, c.text("host")?, c.i32_opt("gpu_index")?, c.text_opt("gpu_uuid")?);
    let (value, since) = (c.f64_opt("value")?, c.timestamp_ms_opt("since")?);
    Ok((0..c.len())
        .map(|i| AlertRow {
            rule: rule[i].clone(),
            host: host[i].clone(),
            gpu_index: gpu_index[i],
            gpu_uuid: gpu_uuid[i].clone(),
            value: value[i],
            since: since[i],
        })
        .collect())
}

impl Rows for Alerts {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        batch_of(vec![
            ("rule", columns::text(r.iter().map(|row| row.rule.as_str()))),
            ("host", columns::text(r.iter().map(|row| row.host.as_str()))),
            ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
            ("gpu_uuid", columns::text(r.iter().map(|row| row.gpu_uuid.as_deref()))),
            ("value", columns::float(r.iter().map(|row| row.value))),
            ("since", columns::timestamp_ms(r.iter().map(|row| row.since))),
        ])
    }
}
