//! Spend: what each team's GPU time cost in the period
//! (`queries/spend.sql` over `minute_costs`), money rounded to the cent so
//! that the rows add up to the fleet total, and the fleet totals that the
//! header, the monthly report and its comparison with the month before
//! state.

use apron_reports::money;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::budgets::{self, Budgets};
use super::{ReportContext, query, unreadable};
use crate::config::Config;
use crate::error::Error;
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::header::hours;
use crate::report::rounding::{cents_keeping_total, round_to, split_cents};
use crate::session::queries;

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
    /// Of which with no activity known (neither busy nor idle).
    pub unknown_gpu_hours: f64,
    /// Energy of its share, kWh before PUE (exact); `None` when no minute
    /// of it had a known energy.
    pub energy_kwh: Option<f64>,
    /// Its cost (currency, to the cent: the rows add up to the total).
    pub cost: f64,
    /// Cost of its busy share (to the cent).
    pub busy_cost: f64,
    /// Cost of its idle share (to the cent).
    pub idle_cost: f64,
    /// Cost of its share with no activity known (to the cent);
    /// `busy_cost + idle_cost + unknown_cost = cost`.
    pub unknown_cost: f64,
    /// Its cost as a share of the fleet's (%), from the rounded costs.
    pub share_pct: f64,
    /// Its `budget_per_month`, when the period is a calendar month and the
    /// team has one ([`super::budgets`]).
    pub budget: Option<f64>,
    /// Its cost as a share of the budget (%); `None` without a budget or
    /// for a budget of 0.
    pub budget_used_pct: Option<f64>,
    /// What it will have spent by the month's end ([`super::budgets`]);
    /// its cost when the month is over.
    pub forecast: Option<f64>,
}

/// The fleet totals of a spend result.
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

    /// The mean number of GPUs in each state over `hours` (the period's
    /// length, hours).
    pub fn mean_gpus(&self, hours: f64) -> MeanGpus {
        MeanGpus {
            busy: self.busy_gpu_hours / hours,
            idle_held: self.idle_held_gpu_hours / hours,
            idle_empty: self.idle_empty_gpu_hours / hours,
            unknown: self.unknown_gpu_hours / hours,
        }
    }

    /// The header line: `Cost:     $1,234.56 for 576.0 GPU-hours; idle
    /// $800.00 (64.8%)`, and `; activity unknown $12.00 (3.0 GPU-hours)`
    /// when some minutes had no activity known.
    pub fn header_line(&self, currency: &str) -> String {
        let mut line = format!(
            "Cost:     {} for {} GPU-hours; idle {} ({:.1}%)",
            money(self.cost, currency),
            hours(self.gpu_hours),
            money(self.idle_cost, currency),
            self.idle_pct()
        );
        if self.unknown_gpu_hours > 0.0 {
            line.push_str(&format!(
                "; activity unknown {} ({} GPU-hours)",
                money(self.unknown_cost, currency),
                hours(self.unknown_gpu_hours)
            ));
        }
        line
    }
}

/// How many GPUs were in each state on average over a period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanGpus {
    /// Busy GPUs.
    pub busy: f64,
    /// Idle GPUs some process held memory on.
    pub idle_held: f64,
    /// Idle, empty GPUs.
    pub idle_empty: f64,
    /// GPUs with no activity known.
    pub unknown: f64,
}

/// The spend of a period: a row per team, highest cost first, and the
/// fleet totals.
#[derive(Debug, Clone, PartialEq)]
pub struct Spend {
    /// One row per team.
    pub rows: Vec<SpendRow>,
    /// The fleet.
    pub totals: Totals,
    /// The budgets, when the config has some and the period is a calendar
    /// month.
    pub budgets: Option<Budgets>,
}

impl Spend {
    /// The header lines of the budgets: each team's, or where to see them
    /// when the period is not a calendar month.
    pub fn budget_lines(&self, config: &Config) -> Vec<String> {
        match &self.budgets {
            Some(b) => b.header_lines(&config.currency),
            None if config.any_budget() => {
                vec!["Budgets:  per calendar month: give --month YYYY-MM to see them".to_owned()]
            }
            None => Vec::new(),
        }
    }
}

/// The spend of `report` (which has `minute_costs` registered): money
/// rounded to the cent keeping the total, each row's busy and idle cost
/// adding up to its cost.
pub async fn spend(report: &ReportContext) -> Result<Spend, Error> {
    let batch = query(&report.session, queries::SPEND, Vec::new()).await?;
    let exact = read(&batch).map_err(unreadable)?;
    let cost = cents_keeping_total(&exact.iter().map(|r| r.cost).collect::<Vec<_>>())?;
    let part = |f: fn(&SpendRow) -> f64| exact.iter().map(f).collect::<Vec<_>>();
    let (busy, idle, unknown) = (part(|r| r.busy_cost), part(|r| r.idle_cost), part(|r| r.unknown_cost));
    let split = split_cents(&cost, &[&busy, &idle, &unknown])?;
    let total: i64 = cost.iter().sum();
    let part_total = |k: usize| split.iter().map(|parts| parts[k]).sum::<i64>() as f64 / 100.0;
    let totals = Totals {
        cost: total as f64 / 100.0,
        idle_cost: part_total(1),
        unknown_cost: part_total(2),
        gpu_hours: report.coverage.recorded_hours,
        busy_gpu_hours: exact.iter().map(|r| r.busy_gpu_hours).sum(),
        idle_held_gpu_hours: exact.iter().map(|r| r.idle_held_gpu_hours).sum(),
        idle_empty_gpu_hours: exact.iter().map(|r| r.idle_empty_gpu_hours).sum(),
        unknown_gpu_hours: exact.iter().map(|r| r.unknown_gpu_hours).sum(),
        energy_kwh: exact.iter().map(|r| r.energy_kwh.unwrap_or(0.0)).sum(),
    };
    let mut budgets = match budgets::month_of(&report.period) {
        Some(month) if report.config.any_budget() => {
            let data_end = report.data_end_ms();
            Some(budgets::budgets(&report.session, &report.config, month, data_end, report.now_ms).await?)
        }
        _ => None,
    };
    let mut rows: Vec<SpendRow> = exact
        .into_iter()
        .zip(cost.iter().zip(&split))
        .map(|(row, (cents, parts))| SpendRow {
            cost: *cents as f64 / 100.0,
            busy_cost: parts[0] as f64 / 100.0,
            idle_cost: parts[1] as f64 / 100.0,
            unknown_cost: parts[2] as f64 / 100.0,
            share_pct: if total > 0 { 100.0 * *cents as f64 / total as f64 } else { 0.0 },
            ..row
        })
        .collect();
    if let Some(b) = &mut budgets {
        // Spent as the rows print it (to the cent, keeping the total), and
        // what is still to come on top.
        for team in &mut b.rows {
            let cost = rows.iter().find(|r| r.team == team.team).map_or(0.0, |r| r.cost);
            team.forecast = cost + (team.forecast - team.spent);
            team.spent = cost;
        }
        for row in &mut rows {
            if let Some(team) = b.of(&row.team) {
                row.budget = Some(team.budget);
                row.budget_used_pct = team.used_pct();
                row.forecast = Some(team.forecast);
            }
        }
    }
    Ok(Spend { rows, totals, budgets })
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
    let unknown_gpu_hours = c.f64("unknown_gpu_hours")?;
    let (energy_kwh, cost, busy_cost, idle_cost, unknown_cost) = (
        c.f64_opt("energy_kwh")?,
        c.f64_opt("cost")?,
        c.f64_opt("busy_cost")?,
        c.f64_opt("idle_cost")?,
        c.f64_opt("unknown_cost")?,
    );
    Ok((0..c.len())
        .map(|i| SpendRow {
            team: team[i].clone(),
            gpu_hours: gpu_hours[i],
            busy_gpu_hours: busy_gpu_hours[i],
            idle_held_gpu_hours: idle_held_gpu_hours[i],
            idle_empty_gpu_hours: idle_empty_gpu_hours[i],
            unknown_gpu_hours: unknown_gpu_hours[i],
            energy_kwh: energy_kwh[i],
            // A team whose minutes have no price costs nothing known.
            cost: cost[i].unwrap_or(0.0),
            busy_cost: busy_cost[i].unwrap_or(0.0),
            idle_cost: idle_cost[i].unwrap_or(0.0),
            unknown_cost: unknown_cost[i].unwrap_or(0.0),
            // Computed from the rounded costs, so the shares match them.
            share_pct: 0.0,
            budget: None,
            budget_used_pct: None,
            forecast: None,
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
            ("unknown_gpu_hours", hours(|row| row.unknown_gpu_hours)),
            ("energy_kwh", columns::float(r.iter().map(|row| row.energy_kwh.map(|e| round_to(e, 2))))),
            ("cost", columns::float(r.iter().map(|row| row.cost))),
            ("busy_cost", columns::float(r.iter().map(|row| row.busy_cost))),
            ("idle_cost", columns::float(r.iter().map(|row| row.idle_cost))),
            ("unknown_cost", columns::float(r.iter().map(|row| row.unknown_cost))),
            ("share_pct", columns::float(r.iter().map(|row| round_to(row.share_pct, 1)))),
            ("budget", columns::float(r.iter().map(|row| row.budget))),
            (
                "budget_used_pct",
                columns::float(r.iter().map(|row| row.budget_used_pct.map(|p| round_to(p, 1)))),
            ),
            ("forecast", columns::float(r.iter().map(|row| row.forecast.map(|f| round_to(f, 2))))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(team: &str, gpu_hours: f64, energy_kwh: Option<f64>, cost: f64, idle_cost: f64) -> SpendRow {
        SpendRow {
            team: team.to_owned(),
            gpu_hours,
            busy_gpu_hours: gpu_hours / 3.0,
            idle_held_gpu_hours: gpu_hours * 2.0 / 3.0,
            idle_empty_gpu_hours: 0.0,
            unknown_gpu_hours: 0.0,
            energy_kwh,
            cost,
            busy_cost: cost - idle_cost,
            idle_cost,
            unknown_cost: 0.0,
            share_pct: 200.0 / 3.0,
            budget: None,
            budget_used_pct: None,
            forecast: None,
        }
    }

    #[test]
    fn spend_prints_its_columns_in_order_rounded_as_before() {
        let totals = Totals {
            cost: 150.0,
            idle_cost: 37.5,
            unknown_cost: 0.0,
            gpu_hours: 576.0,
            busy_gpu_hours: 0.0,
            idle_held_gpu_hours: 0.0,
            idle_empty_gpu_hours: 0.0,
            unknown_gpu_hours: 0.0,
            energy_kwh: 0.0,
        };
        let spend = Spend {
            rows: vec![row("vision", 10.0, Some(1.23456), 100.0, 25.0), row("nlp", 0.5, None, 50.0, 12.5)],
            totals,
            budgets: None,
        };
        let batch = spend.to_batch().expect("columns of one length");
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "team",
                "gpu_hours",
                "busy_gpu_hours",
                "idle_held_gpu_hours",
                "idle_empty_gpu_hours",
                "unknown_gpu_hours",
                "energy_kwh",
                "cost",
                "busy_cost",
                "idle_cost",
                "unknown_cost",
                "share_pct",
                "budget",
                "budget_used_pct",
                "forecast"
            ]
        );
        let c = Columns::of(&batch);
        // 10 / 3 and 20 / 3 hours to 2 decimals; 66.67% to 1; no energy stays unknown.
        assert_eq!(c.f64("busy_gpu_hours").expect("hours"), [3.33, 0.17]);
        assert_eq!(c.f64("idle_held_gpu_hours").expect("hours"), [6.67, 0.33]);
        assert_eq!(c.f64_opt("energy_kwh").expect("energy"), [Some(1.23), None]);
        assert_eq!(c.f64("share_pct").expect("shares"), [66.7, 66.7]);
        assert_eq!(c.f64("busy_cost").expect("money"), [75.0, 37.5]);
        assert_eq!(totals.header_line("USD"), "Cost:     $150.00 for 576.0 GPU-hours; idle $37.50 (25.0%)");
        let unknown = Totals { unknown_cost: 12.0, unknown_gpu_hours: 3.0, ..totals };
        assert_eq!(
            unknown.header_line("USD"),
            "Cost:     $150.00 for 576.0 GPU-hours; idle $37.50 (25.0%); activity unknown $12.00 (3.00 GPU-hours)"
        );
        let nothing = Totals { cost: 0.0, idle_cost: 0.0, gpu_hours: 0.0, ..totals };
        assert_eq!((nothing.idle_pct(), nothing.busy_pct()), (0.0, 0.0));
    }
}
