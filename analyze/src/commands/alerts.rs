//! `apron alerts`: the default alert rules (`queries/alerts.sql`) checked
//! now, with the thresholds of the config: low and high usage, and hosts
//! or GPUs that stopped sending samples (`no_data`). Prints the rules that fire and
//! ends with exit code 1 when any does, 0 when none does (printing nothing,
//! so cron mails only when there is something to say).

use std::io::Write;
use std::sync::Arc;

use chrono::Utc;
use datafusion::common::ScalarValue;

use crate::cli::{AlertsArgs, GlobalArgs};
use crate::commands::Outcome;
use crate::config::Config;
use crate::error::Error;
use crate::queries;
use crate::session::Session;

/// `[alerts] no_data` in milliseconds (the config keeps it under 7 days).
fn no_data_ms(config: &Config) -> i64 {
    i64::try_from(config.alerts.no_data.as_millis()).unwrap_or(i64::MAX)
}

/// Checks the rules over `global.data` and prints those that fire.
pub async fn run<W: Write>(global: &GlobalArgs, _args: &AlertsArgs, out: W) -> Result<Outcome, Error> {
    let config = Config::load(global.config.as_deref())?;
    let session = Session::open(&global.data).await?;
    let now = Utc::now().timestamp_millis();
    let params = vec![
        ScalarValue::TimestampMillisecond(Some(now), Some(Arc::from("UTC"))),
        ScalarValue::Float64(Some(config.alerts.low_usage_1h)),
        ScalarValue::Float64(Some(config.alerts.low_usage_4h)),
        ScalarValue::Float64(Some(config.alerts.high_usage_15m)),
        ScalarValue::TimestampMillisecond(Some(now - no_data_ms(&config)), Some(Arc::from("UTC"))),
    ];
    let df = session.sql_with_params(queries::ALERTS, params).await?;
    let (schema, batches) = session.collect(df).await?;
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(Outcome::Done);
    }
    crate::output::write_batches(global.format, schema, &batches, out)?;
    Ok(Outcome::AlertsFired)
}
