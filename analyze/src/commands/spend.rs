//! `apron spend`: what each team's GPU time cost in the period
//! (`queries/spend.sql` over `minute_costs`), with money rounded to the cent
//! so that the printed rows add up to the printed fleet total.

use std::io::Write;

use apron_reports::money;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use crate::cli::{GlobalArgs, SpendArgs};
use crate::columns::{f64_column, replace_f64};
use crate::commands::Report;
use crate::error::Error;
use crate::header::hours;
use crate::queries;
use crate::rounding::{cents_keeping_total, round_columns, split_cents};

/// The fleet totals of a spend result, after rounding.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    /// Cost of every recorded GPU-minute (currency, to the cent).
    pub cost: f64,
    /// Of which idle.
    pub idle_cost: f64,
    /// Of which with no activity known (neither busy nor idle).
    pub unknown_cost: f64,
    /// GPU-hours recorded.
    pub gpu_hours: f64,
    /// Of which busy (exact, before the rows were rounded).
    pub busy_gpu_hours: f64,
    /// Of which idle while some process held memory.
    pub idle_held_gpu_hours: f64,
    /// Of which idle and empty.
    pub idle_empty_gpu_hours: f64,
    /// Of which with no activity known (exact).
    pub unknown_gpu_hours: f64,
    /// Energy of the GPUs, kWh before PUE (exact).
    pub energy_kwh: f64,
}

/// Prints the spend per team.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SpendArgs, mut out: W) -> Result<(), Error> {
    let mut report = Report::prepare(global, &args.period).await?.with_costs().await?;
    let (batch, totals) = spend(&report).await?;
    let currency = &report.config.currency;
    let idle_pct = if totals.cost > 0.0 { 100.0 * totals.idle_cost / totals.cost } else { 0.0 };
    let mut line = format!(
        "Cost:     {} for {} GPU-hours; idle {} ({idle_pct:.1}%)",
        money(totals.cost, currency),
        hours(totals.gpu_hours),
        money(totals.idle_cost, currency),
    );
    if totals.unknown_gpu_hours > 0.0 {
        line.push_str(&format!(
            "; activity unknown {} ({} GPU-hours)",
            money(totals.unknown_cost, currency),
            hours(totals.unknown_gpu_hours)
        ));
    }
    report.header.push(line);
    report.header.print(global.format, &mut out)?;
    crate::output::write_batches(global.format, batch.schema(), &[batch], out)?;
    Ok(())
}

/// The spend rows of `report` (which has `minute_costs` registered), money
/// rounded to the cent keeping the total, and the fleet totals.
pub async fn spend(report: &Report) -> Result<(RecordBatch, Totals), Error> {
    let session = &report.session;
    let df = session.sql(queries::SPEND).await?;
    let batch = session.collect_batch(df).await?;
    let execute = |source: ArrowError| Error::Execute { source: source.into() };
    let exact = |name: &str| f64_column(&batch, name).iter().sum::<f64>();
    let (busy_hours, held_hours, empty_hours, unknown_hours, energy_kwh) = (
        exact("busy_gpu_hours"),
        exact("idle_held_gpu_hours"),
        exact("idle_empty_gpu_hours"),
        exact("unknown_gpu_hours"),
        exact("energy_kwh"),
    );
    let cost = cents_keeping_total(&f64_column(&batch, "cost"))?;
    let parts = ["busy_cost", "idle_cost", "unknown_cost"].map(|name| f64_column(&batch, name));
    let split = split_cents(&cost, &[&parts[0], &parts[1], &parts[2]])?;
    let part = |k: usize| split.iter().map(|s| s[k]).collect::<Vec<i64>>();
    let (busy, idle, unknown) = (part(0), part(1), part(2));
    let total: i64 = cost.iter().sum();
    let share: Vec<f64> =
        cost.iter().map(|c| if total > 0 { 100.0 * *c as f64 / total as f64 } else { 0.0 }).collect();
    let money = |cents: &[i64]| cents.iter().map(|c| *c as f64 / 100.0).collect::<Vec<_>>();
    let batch = replace_f64(&batch, "cost", money(&cost)).map_err(execute)?;
    let batch = replace_f64(&batch, "busy_cost", money(&busy)).map_err(execute)?;
    let batch = replace_f64(&batch, "idle_cost", money(&idle)).map_err(execute)?;
    let batch = replace_f64(&batch, "unknown_cost", money(&unknown)).map_err(execute)?;
    let batch = replace_f64(&batch, "share_pct", share).map_err(execute)?;
    let batch = round_columns(
        &batch,
        &[
            ("gpu_hours", 2),
            ("busy_gpu_hours", 2),
            ("idle_held_gpu_hours", 2),
            ("idle_empty_gpu_hours", 2),
            ("unknown_gpu_hours", 2),
            ("energy_kwh", 2),
            ("share_pct", 1),
        ],
    )
    .map_err(execute)?;
    let totals = Totals {
        cost: total as f64 / 100.0,
        idle_cost: idle.iter().sum::<i64>() as f64 / 100.0,
        unknown_cost: unknown.iter().sum::<i64>() as f64 / 100.0,
        gpu_hours: report.coverage.recorded_hours,
        busy_gpu_hours: busy_hours,
        idle_held_gpu_hours: held_hours,
        idle_empty_gpu_hours: empty_hours,
        unknown_gpu_hours: unknown_hours,
        energy_kwh,
    };
    Ok((batch, totals))
}
