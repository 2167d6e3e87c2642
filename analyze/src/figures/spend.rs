//! Spend: what each team's GPU time cost in the period
//! (`queries/spend.sql` over `minute_costs`), money rounded to the cent so
//! that the rows add up to the fleet total, and the fleet totals that the
//! header, the monthly report and its comparison with the month before
//! state.

use apron_reports::money;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::{Report, query, unreadable};
use crate::columns::{self, Columns, batch_of};
use crate::error::Error;
use crate::header::hours;
use crate::output::Rows;
use crate::queries;
use crate::rounding::{cents_keeping_total, round_to, split_cents};

/// One team's spend.
#[derive(Debug, Clone, PartialEq)]
pub struct SpendRow {
    /// The team, "unassigned" or "(unallocated)".
    pub team: String,
    /// GPU-hours attributed to it (exact).
    pub gpu_hours: f64,
    /// Of which busy.
    pub busy_gpu_hours: f64,
    /// Of which idle while it held memory.
    pub idle_held_gpu_hours: f64,
    /// Of which idle with nothing on the GPU ("(unallocated)" only).
    pub idle_empty_gpu_hours: f64,
    /// Energy of its share, kWh before PUE (exact); `None` when no minute
    /// of it had a known energy.
    pub energy_kwh: Option<f64>,
    /// Its cost (currency, to the cent: the rows add up to the total).
    pub cost: f64,
    /// Cost of its busy share (to the cent).
    pub busy_cost: f64,
    /// Cost of its idle share (to the cent); `busy_cost + idle_cost = cost`.
    pub idle_cost: f64,
    /// Its cost as a share of the fleet's (%), from the rounded costs.
    pub share_pct: f64,
}

/// The fleet totals of a spend result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    /// Cost of every recorded GPU-minute (currency, to the cent).
    pub cost: f64,
    /// Of which idle.
    pub idle_cost: f64,
    /// GPU-hours recorded.
    pub gpu_hours: f64,
    /// Of which busy (exact, before the rows were rounded).
    pub busy_gpu_hours: f64,
    /// Of which idle while some process held memory.
    pub idle_held_gpu_hours: f64,
    /// Of which idle and empty.
    pub idle_empty_gpu_hours: f64,
    /// Energy of the GPUs, kWh before PUE (exact).
    pub energy_kwh: f64,
}

impl Totals {
    /// Idle cost as a share of the cost (%; 0 when nothing cost anything).
    pub fn idle_pct(&self) -> f64 {
        if self.cost > 0.0 { 100.0 * self.idle_cost / self.cost } else { 0.0 }
    }

    /// Busy GPU-hours as a share of the recorded ones (%; 0 when none were
    /// recorded).
    pub fn busy_pct(&self) -> f64 {
        if self.gpu_hours > 0.0 { 100.0 * self.busy_gpu_hours / self.gpu_hours } else { 0.0 }
    }

    /// The header line: `Cost:     $1,234.56 for 576.0 GPU-hours; idle
    /// $800.00 (64.8%)`.
    pub fn header_line(&self, currency: &str) -> String {
        format!(
            "Cost:     {} for {} GPU-hours; idle {} ({:.1}%)",
            money(self.cost, currency),
            hours(self.gpu_hours),
            money(self.idle_cost, currency),
            self.idle_pct()
        )
    }
}

/// The spend of a period: a row per team, highest cost first, and the
/// fleet totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// One row per team.
    pub rows: Vec<SpendRow>,
    /// The fleet.
    pub totals: Totals,
}

/// The spend of `report` (which has `minute_costs` registered): money
/// rounded to the cent keeping the total, each row's busy and idle cost
/// adding up to its cost.
pub async fn spend(report: &Report) -> Result<Spend, Error> {
    let batch = query(&report.session, queries::SPEND, Vec::new()).await?;
    let exact = read(&batch).map_err(unreadable)?;
    let cost = cents_keeping_total(&exact.iter().map(|r| r.cost).collect::<Vec<_>>())?;
    let split = split_cents(
        &cost,
        &exact.iter().map(|r| r.busy_cost).collect::<Vec<_>>(),
        &exact.iter().map(|r| r.idle_cost).collect::<Vec<_>>(),
    )?;
    let total: i64 = cost.iter().sum();
    let idle_total: i64 = split.iter().map(|(_, idle)| idle).sum();
    let totals = Totals {
        cost: total as f64 / 100.0,
        idle_cost: idle_total as f64 / 100.0,
        gpu_hours: report.coverage.recorded_hours,
        busy_gpu_hours: exact.iter().map(|r| r.busy_gpu_hours).sum(),
        idle_held_gpu_hours: exact.iter().map(|r| r.idle_held_gpu_hours).sum(),
        idle_empty_gpu_hours: exact.iter().map(|r| r.idle_empty_gpu_hours).sum(),
        energy_kwh: exact.iter().map(|r| r.energy_kwh.unwrap_or(0.0)).sum(),
    };
    let rows = exact
        .into_iter()
        .zip(cost.iter().zip(&split))
        .map(|(row, (cents, (busy, idle)))| SpendRow {
            cost: *cents as f64 / 100.0,
            busy_cost: *busy as f64 / 100.0,
            idle_cost: *idle as f64 / 100.0,
            share_pct: if total > 0 { 100.0 * *cents as f64 / total as f64 } else { 0.0 },
            ..row
        })
        .collect();
    Ok(Spend { rows, totals })
}

/// The rows of `queries/spend.sql` as it gives them (money not yet rounded).
fn read(batch: &RecordBatch) -> Result<Vec<SpendRow>, ArrowError> {
    let c = Columns::of(batch);
    let (team, gpu_hours, busy_gpu_hours, idle_held_gpu_hours, idle_empty_gpu_hours) = (
        c.text("team")?,
        c.f64("gpu_hours")?,
        c.f64("busy_gpu_hours")?,
        c.f64("idle_held_gpu_hours")?,
        c.f64("idle_empty_gpu_hours")?,
    );
    let (energy_kwh, cost, busy_cost, idle_cost) =
        (c.f64_opt("energy_kwh")?, c.f64_opt("cost")?, c.f64_opt("busy_cost")?, c.f64_opt("idle_cost")?);
    Ok((0..c.len())
        .map(|i| SpendRow {
            team: team[i].clone(),
            gpu_hours: gpu_hours[i],
            busy_gpu_hours: busy_gpu_hours[i],
            idle_held_gpu_hours: idle_held_gpu_hours[i],
            idle_empty_gpu_hours: idle_empty_gpu_hours[i],
            energy_kwh: energy_kwh[i],
            // A team whose minutes have no price costs nothing known.
            cost: cost[i].unwrap_or(0.0),
            busy_cost: busy_cost[i].unwrap_or(0.0),
            idle_cost: idle_cost[i].unwrap_or(0.0),
            // Computed from the rounded costs, so the shares match them.
            share_pct: 0.0,
        })
        .collect())
}

impl Rows for Spend {
    /// Hours and energy to 2 decimals, the share to 1, money to the cent.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        let hours = |f: fn(&SpendRow) -> f64| columns::float(r.iter().map(|row| round_to(f(row), 2)));
        batch_of(vec![
            ("team", columns::text(r.iter().map(|row| row.team.as_str()))),
            ("gpu_hours", hours(|row| row.gpu_hours)),
            ("busy_gpu_hours", hours(|row| row.busy_gpu_hours)),
            ("idle_held_gpu_hours", hours(|row| row.idle_held_gpu_hours)),
            ("idle_empty_gpu_hours", hours(|row| row.idle_empty_gpu_hours)),
            ("energy_kwh", columns::float(r.iter().map(|row| row.energy_kwh.map(|e| round_to(e, 2))))),
            ("cost", columns::float(r.iter().map(|row| row.cost))),
            ("busy_cost", columns::float(r.iter().map(|row| row.busy_cost))),
            ("idle_cost", columns::float(r.iter().map(|row| row.idle_cost))),
            ("share_pct", columns::float(r.iter().map(|row| round_to(row.share_pct, 1)))),
        ])
    }
}
