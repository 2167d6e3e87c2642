//! Alerts: the default alert rules (`queries/alerts.sql`) checked at one
//! moment with the thresholds of the config: low and high usage, and hosts
//! or GPUs that stopped sending samples (`no_data`); and, for teams with a
//! `budget_per_month`, the month's spend past the budget
//! (`budget_exceeded`) or its forecast past it (`budget_forecast_exceeded`,
//! [`super::budgets`]); and the GPUs' faults (`queries/fault_alerts.sql`):
//! an XID or uncorrectable ECC errors within `[alerts] faults`, a row
//! remapping pending, a GPU lost and not back; and jobs still running
//! that idled through `[alerts] job_idle_for` (`job_idle`: the ledger's
//! jobs over that window, [`crate::ledger::jobs`]).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{budgets, query, unreadable};
use apron_schemas::time::MINUTE_MS;

use crate::config::Config;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::context::MonthSoFar;
use crate::report::context::rules;
use crate::report::period::Period;
use crate::report::rounding::round_to;
use crate::session::Session;
use crate::session::queries;

/// One rule firing on one GPU (for `no_data`, on a whole host; for the
/// budget rules, on a team).
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    /// `low_usage_1h`, `low_usage_4h`, `high_usage_15m`, `no_data`,
    /// `budget_exceeded`, `budget_forecast_exceeded`, `xid`,
    /// `ecc_uncorrectable`, `remap_pending` or `gpu_lost`.
    pub rule: String,
    /// Host name; `None` for the budget rules.
    pub host: Option<String>,
    /// NVML index; `None` for `no_data` on a whole host.
    pub gpu_index: Option<i32>,
    /// GPU UUID; `None` for `no_data` on a whole host.
    pub gpu_uuid: Option<String>,
    /// The team, for the budget rules and `job_idle`.
    pub team: Option<String>,
    /// The job, for `job_idle` (as `apron jobs` names it).
    pub job: Option<String>,
    /// Mean utilization over the rule's window (%); for `no_data`, minutes
    /// since the newest sample; for `budget_exceeded`, what the team spent
    /// this month, for `budget_forecast_exceeded` its forecast for the
    /// month (currency). (`None` only if the query gives none.)
    pub value: Option<f64>,
    /// The unit of `value`: `%`, `minutes`, or the config's currency
    /// (`USD`).
    pub unit: String,
    /// The team's budget for the month (currency), for the budget rules.
    pub budget: Option<f64>,
    /// Since when the rule holds, milliseconds since the epoch (UTC); for
    /// `no_data`, the newest sample; for `budget_exceeded`, the hour the
    /// spend passed the budget; for `budget_forecast_exceeded`, the hour it
    /// will at this rate. (`None` only if the query gives none.)
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
/// since the epoch); the budget rules over `month` ([`MonthSoFar::open`]).
pub async fn alerts(
    session: &Session,
    config: &Config,
    now_ms: i64,
    month: Option<&MonthSoFar>,
) -> Result<Alerts, Error> {
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
    let mut rows = read(&batch).map_err(unreadable)?;
    let faults_ms = i64::try_from(config.alerts.faults.as_millis()).unwrap_or(i64::MAX);
    let batch = query(session, queries::FAULT_ALERTS, vec![at(now_ms), at(now_ms - faults_ms)]).await?;
    rows.extend(read(&batch).map_err(unreadable)?);
    rows.extend(budget_alerts(session, config, now_ms, month).await?);
    rows.extend(job_alerts(session, config, now_ms).await?);
    Ok(Alerts { rows })
}

/// `job_idle` at `now_ms`: the jobs that held GPUs from the first minute of
/// the last `[alerts] job_idle_for` to its last (still running), their mean
/// activity over it below `job_idle_pct`, from the ledger over that window
/// (the jobs `apron jobs` gives, over the window). A job whose activity is
/// unknown does not fire.
async fn job_alerts(session: &Session, config: &Config, now_ms: i64) -> Result<Vec<AlertRow>, Error> {
    let window_ms = i64::try_from(config.alerts.job_idle_for.as_millis()).unwrap_or(i64::MAX);
    let end_ms = now_ms - now_ms.rem_euclid(MINUTE_MS);
    let start_ms = end_ms - window_ms.div_euclid(MINUTE_MS).max(1) * MINUTE_MS;
    let period = Period { start_ms, end_ms };
    let rules = rules(config.zombie.min_idle, config.zombie.min_mem_mib, config.reclaim.idle_for);
    // Hours, not days, of the fleet: 64 hosts' minutes at a time.
    let ledger = Ledger::compute_sliced(session, config, &period, MINUTE_MS, rules, 64).await?;
    // The window's last minute with data: a job in it is still running.
    let Some(last) = ledger.coverage.as_ref().map(|c| c.row.last_minute) else { return Ok(Vec::new()) };
    if last + MINUTE_MS < end_ms - MINUTE_MS {
        // No data in the window's last minutes: `no_data` says so.
        return Ok(Vec::new());
    }
    Ok(ledger
        .jobs
        .into_iter()
        .filter(|j| j.still_running && j.start_ms == start_ms)
        .filter(|j| j.util_pct.is_some_and(|a| a < config.alerts.job_idle_pct))
        .map(|j| AlertRow {
            rule: "job_idle".into(),
            host: j.hosts.first().cloned(),
            gpu_index: None,
            gpu_uuid: None,
            team: Some(j.team),
            job: Some(j.job),
            value: j.util_pct.map(|a| round_to(a, 2)),
            unit: "%".into(),
            budget: None,
            since: Some(start_ms),
        })
        .collect())
}

/// The budget rules at `now_ms`, over `month` so far (none when no team
/// has a budget: `month` is `None`).
async fn budget_alerts(
    session: &Session,
    config: &Config,
    now_ms: i64,
    month: Option<&MonthSoFar>,
) -> Result<Vec<AlertRow>, Error> {
    let Some(month) = month else { return Ok(Vec::new()) };
    let b = budgets::budgets(session, config, month.month, month.data_end_ms, now_ms).await?;
    let row = |rule: &str, r: &budgets::BudgetRow, value: f64, since: Option<i64>| AlertRow {
        rule: rule.to_owned(),
        host: None,
        gpu_index: None,
        gpu_uuid: None,
        team: Some(r.team.clone()),
        job: None,
        value: Some(round_to(value, 2)),
        unit: config.currency.clone(),
        budget: Some(r.budget),
        since,
    };
    let mut rows: Vec<AlertRow> =
        b.exceeded().map(|r| row("budget_exceeded", r, r.spent, r.exceeded_at)).collect();
    rows.extend(
        b.forecast_exceeded().map(|r| row("budget_forecast_exceeded", r, r.forecast, r.forecast_exceeded_at)),
    );
    Ok(rows)
}

/// The unit of a usage, `no_data` or fault rule's value
/// (`queries/alerts.sql`, `queries/fault_alerts.sql`).
fn unit_of(rule: &str) -> &'static str {
    match rule {
        "no_data" | "gpu_lost" => "minutes",
        "xid" => "xid",
        "ecc_uncorrectable" => "errors",
        "remap_pending" => "",
        _ => "%",
    }
}

fn read(batch: &RecordBatch) -> Result<Vec<AlertRow>, ArrowError> {
    let c = Columns::of(batch);
    let (rule, host, gpu_index, gpu_uuid) =
        (c.text("rule")?, c.text("host")?, c.i32_opt("gpu_index")?, c.text_opt("gpu_uuid")?);
    let (value, since) = (c.f64_opt("value")?, c.timestamp_ms_opt("since")?);
    Ok((0..c.len())
        .map(|i| AlertRow {
            rule: rule[i].clone(),
            host: Some(host[i].clone()),
            gpu_index: gpu_index[i],
            gpu_uuid: gpu_uuid[i].clone(),
            team: None,
            job: None,
            value: value[i],
            unit: unit_of(&rule[i]).to_owned(),
            budget: None,
            since: since[i],
        })
        .collect())
}

impl Rows for Alerts {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        batch_of(vec![
            ("rule", columns::text(r.iter().map(|row| row.rule.as_str()))),
            ("host", columns::text(r.iter().map(|row| row.host.as_deref()))),
            ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
            ("gpu_uuid", columns::text(r.iter().map(|row| row.gpu_uuid.as_deref()))),
            ("team", columns::text(r.iter().map(|row| row.team.as_deref()))),
            ("job", columns::text(r.iter().map(|row| row.job.as_deref()))),
            ("value", columns::float(r.iter().map(|row| row.value))),
            ("unit", columns::text(r.iter().map(|row| row.unit.as_str()))),
            ("budget", columns::float(r.iter().map(|row| row.budget))),
            ("since", columns::timestamp_ms(r.iter().map(|row| row.since))),
        ])
    }
}
