//! The data series behind each chart, computed from the same SQL as the
//! reports, and the chart drawn from them by `apron_reports`.
//!
//! Every function here takes a [`Report`] with `minute_costs` registered
//! ([`Report::with_costs`]); the series therefore use the report's period
//! and config.

use std::path::Path;

use apron_reports::{
    ChartContext, ChartName, FleetStatePoint, GpuDayCell, HourOfWeekCell, PowerPoint, TeamCost,
};
use chrono::NaiveDate;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Date32Type, Float64Type, Int32Type, TimestampMillisecondType};
use datafusion::common::ScalarValue;

use crate::cli::IdleBy;
use crate::columns::{f64_column, text_column};
use crate::commands::{Report, idle_cost, spend, windows};
use crate::error::Error;
use crate::queries;

/// Bucket lengths a time chart uses, seconds.
const BUCKETS: [i64; 10] = [60, 300, 900, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200, 86_400];

/// The bucket for a time chart of the period: the shortest of [`BUCKETS`]
/// that draws at most about 800 points (a month: hourly).
pub fn bucket_seconds(report: &Report) -> i64 {
    let seconds = (report.period.end_ms - report.period.start_ms) / 1000;
    BUCKETS.into_iter().find(|b| seconds / b <= 800).unwrap_or(86_400)
}

/// The context every chart of `report` is drawn with.
pub fn context(report: &Report) -> ChartContext {
    ChartContext::new(
        report.period.label(),
        report.session.layout().root().display().to_string(),
        report.config.currency.clone(),
    )
}

/// Draws chart `name` of `report` into `out` (a PNG).
pub async fn render(name: ChartName, report: &Report, ctx: &ChartContext, out: &Path) -> Result<(), Error> {
    let drawn = match name {
        ChartName::FleetState => apron_reports::fleet_state(&fleet_state(report).await?, ctx, out),
        ChartName::IdleCost => apron_reports::idle_cost(&idle_by_team(report).await?, ctx, out),
        ChartName::TeamSpend => apron_reports::team_spend(&team_spend(report).await?, ctx, out),
        ChartName::HourOfWeek => apron_reports::hour_of_week(&hour_of_week(report).await?, ctx, out),
        ChartName::GpuDays => apron_reports::gpu_days(&gpu_days(report).await?, ctx, out),
        ChartName::Power => apron_reports::power(&power(report).await?, ctx, out),
    };
    drawn.map_err(Error::from)
}

async fn rows(report: &Report, sql: &str, params: Vec<ScalarValue>) -> Result<Vec<RecordBatch>, Error> {
    let df = report.session.sql_with_params(sql, params).await?;
    Ok(report.session.collect(df).await?.1)
}

/// `fleet-state`: mean GPUs busy, idle-held, idle-empty and unknown per bucket.
pub async fn fleet_state(report: &Report) -> Result<Vec<FleetStatePoint>, Error> {
    let bucket = bucket_seconds(report);
    let batches = rows(report, queries::FLEET_STATE, vec![ScalarValue::Int64(Some(bucket))]).await?;
    let mut out = Vec::new();
    for b in &batches {
        let t = b.column(0).as_primitive::<TimestampMillisecondType>();
        let (busy, held, empty, unknown) = (
            f64_column(b, "busy"),
            f64_column(b, "idle_held"),
            f64_column(b, "idle_empty"),
            f64_column(b, "unknown"),
        );
        for i in 0..b.num_rows() {
            out.push(FleetStatePoint {
                t_ms: t.value(i),
                busy: busy[i],
                idle_held: held[i],
                idle_empty: empty[i],
                unknown: unknown[i],
            });
        }
    }
    Ok(out)
}

/// `team-spend`: busy and idle cost per team, from `apron spend`.
pub async fn team_spend(report: &Report) -> Result<Vec<TeamCost>, Error> {
    let (batch, _) = spend::spend(report).await?;
    Ok(team_spend_of(&batch))
}

/// The `team-spend` series of `apron spend`'s rows.
pub fn team_spend_of(batch: &RecordBatch) -> Vec<TeamCost> {
    let (busy, idle) = (f64_column(batch, "busy_cost"), f64_column(batch, "idle_cost"));
    text_column(batch, "team")
        .into_iter()
        .enumerate()
        .map(|(i, team)| TeamCost { team: team.unwrap_or_default(), busy_cost: busy[i], idle_cost: idle[i] })
        .collect()
}

/// `idle-cost`: idle cost per team, from `apron idle-cost --by team`.
pub async fn idle_by_team(report: &Report) -> Result<Vec<TeamCost>, Error> {
    let batch = idle_cost::idle_cost(report, IdleBy::Team).await?;
    Ok(idle_by_team_of(&batch))
}

/// The `idle-cost` series of `apron idle-cost --by team`'s rows.
pub fn idle_by_team_of(batch: &RecordBatch) -> Vec<TeamCost> {
    let idle = f64_column(batch, "idle_cost");
    text_column(batch, "team")
        .into_iter()
        .enumerate()
        .map(|(i, team)| TeamCost { team: team.unwrap_or_default(), busy_cost: 0.0, idle_cost: idle[i] })
        .collect()
}

/// `hour-of-week`: mean utilization per hour of the week, from `apron windows`.
pub async fn hour_of_week(report: &Report) -> Result<Vec<HourOfWeekCell>, Error> {
    let profile = windows::profile(report).await?;
    Ok(hour_of_week_of(&profile))
}

/// The `hour-of-week` series of the `apron windows` profile.
pub fn hour_of_week_of(profile: &RecordBatch) -> Vec<HourOfWeekCell> {
    windows::cells(profile)
        .into_iter()
        .map(|c| HourOfWeekCell {
            dow: u32::try_from(c.day).unwrap_or(0),
            hour: u32::try_from(c.hour).unwrap_or(0),
            mean_util_pct: c.mean_util_pct,
        })
        .collect()
}

/// `gpu-days`: each GPU's mean utilization per UTC day, rows labelled
/// `host/index`.
pub async fn gpu_days(report: &Report) -> Result<Vec<GpuDayCell>, Error> {
    let batches = rows(report, queries::GPU_DAYS, Vec::new()).await?;
    let mut out = Vec::new();
    for b in &batches {
        let host = text_column(b, "host");
        let index = b.column(1).as_primitive::<Int32Type>();
        let day = b.column(3).as_primitive::<Date32Type>();
        let util = b.column(4).as_primitive::<Float64Type>();
        for (i, host) in host.iter().enumerate() {
            out.push(GpuDayCell {
                gpu: format!("{}/{}", host.as_deref().unwrap_or("?"), index.value(i)),
                day: Date32Type::to_naive_date_opt(day.value(i)).unwrap_or(NaiveDate::MIN),
                mean_util_pct: util.is_valid(i).then(|| util.value(i)),
            });
        }
    }
    Ok(out)
}

/// `power`: mean fleet power per bucket and the energy since the start.
pub async fn power(report: &Report) -> Result<Vec<PowerPoint>, Error> {
    let bucket = bucket_seconds(report);
    let batches = rows(report, queries::POWER, vec![ScalarValue::Int64(Some(bucket))]).await?;
    let mut out = Vec::new();
    for b in &batches {
        let t = b.column(0).as_primitive::<TimestampMillisecondType>();
        let (kw, kwh) = (f64_column(b, "power_kw"), f64_column(b, "energy_kwh"));
        for i in 0..b.num_rows() {
            out.push(PowerPoint { t_ms: t.value(i), power_kw: kw[i], energy_kwh: kwh[i] });
        }
    }
    Ok(out)
}
