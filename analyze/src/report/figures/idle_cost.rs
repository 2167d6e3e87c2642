//! Idle cost: what idle GPU time cost in the period, grouped by team, user,
//! host or GPU (`queries/idle_cost.sql` over `minute_costs`), largest
//! first, money to the cent keeping the total (the idle cost `spend`
//! gives).

use apron_reports::money;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::rounding::{cents_keeping_total, round_to};
use crate::session::queries;

/// How `apron idle-cost` groups idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleBy {
    /// By team (the config's rules); idle-empty time is "(unallocated)".
    Team,
    /// By the user owning the processes; idle-empty time is "(unallocated)".
    User,
    /// By host.
    Host,
    /// By GPU (gpu_uuid, with host and gpu_index).
    Gpu,
}

impl IdleBy {
    /// The name `queries/idle_cost.sql` takes as `$1`.
    pub fn name(self) -> &'static str {
        match self {
            IdleBy::Team => "team",
            IdleBy::User => "user",
            IdleBy::Host => "host",
            IdleBy::Gpu => "gpu",
        }
    }
}

/// The idle cost of one group.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleCostRow {
    /// The team, user, host or gpu_uuid; `None` for a user not recorded.
    pub key: Option<String>,
    /// The GPU's host (grouping by GPU only).
    pub host: Option<String>,
    /// The GPU's NVML index (grouping by GPU only).
    pub gpu_index: Option<i32>,
    /// MIG: an instance's parent GPU (grouping by GPU only).
    pub parent_gpu_uuid: Option<String>,
    /// MIG: an instance's profile (grouping by GPU only).
    pub mig_profile: Option<String>,
    /// Idle GPU-hours (exact).
    pub idle_gpu_hours: f64,
    /// Of which some process held memory.
    pub idle_held_gpu_hours: f64,
    /// Of which the GPU was empty.
    pub idle_empty_gpu_hours: f64,
    /// Their cost (currency, to the cent: the rows add up to the total).
    pub idle_cost: f64,
    /// GPU-hours with no activity known, neither idle nor busy (exact).
    pub unknown_gpu_hours: f64,
    /// Their cost (to the cent, the rows adding up to spend's).
    pub unknown_cost: f64,
}

/// The idle cost of a period, one row per group, highest first.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleCost {
    /// The grouping.
    pub by: IdleBy,
    /// One row per group.
    pub rows: Vec<IdleCostRow>,
}

impl IdleCost {
    /// The idle cost in all (currency, to the cent).
    pub fn total(&self) -> f64 {
        self.rows.iter().map(|r| r.idle_cost).sum()
    }

    /// The header line: `Idle:     $573.78 in all`.
    pub fn header_line(&self, currency: &str) -> String {
        format!("Idle:     {} in all", money(self.total(), currency))
    }

    /// The first `n` groups with some idle cost, "(unallocated)" (idle
    /// time no process or allocation held) among them: (key, idle cost).
    pub fn top(&self, n: usize) -> Vec<(String, f64)> {
        self.rows
            .iter()
            .map(|r| (r.key.clone().unwrap_or_default(), r.idle_cost))
            .filter(|(_, cost)| *cost > 0.0)
            .take(n)
            .collect()
    }
}

/// The idle cost of `report` (which has `minute_costs` registered) grouped
/// `by`.
pub async fn idle_cost(report: &ReportContext, by: IdleBy) -> Result<IdleCost, Error> {
    let params = vec![ScalarValue::Utf8(Some(by.name().to_owned()))];
    let batch = query(&report.session, queries::IDLE_COST, params).await?;
    let mut rows = read(&batch).map_err(unreadable)?;
    let cents = cents_keeping_total(&rows.iter().map(|r| r.idle_cost).collect::<Vec<_>>())?;
    let unknown = cents_keeping_total(&rows.iter().map(|r| r.unknown_cost).collect::<Vec<_>>())?;
    for (row, (cents, unknown)) in rows.iter_mut().zip(cents.into_iter().zip(unknown)) {
        row.idle_cost = cents as f64 / 100.0;
        row.unknown_cost = unknown as f64 / 100.0;
    }
    Ok(IdleCost { by, rows })
}

/// The rows of `queries/idle_cost.sql` as it gives them (money not yet
/// rounded).
fn read(batch: &RecordBatch) -> Result<Vec<IdleCostRow>, ArrowError> {
    let c = Columns::of(batch);
    let (key, host, gpu_index) = (c.text_opt("key")?, c.text_opt("host")?, c.i32_opt("gpu_index")?);
    let (parent, profile) = (c.text_opt("parent_gpu_uuid")?, c.text_opt("mig_profile")?);
    let (idle_gpu_hours, idle_held_gpu_hours, idle_empty_gpu_hours, idle_cost) = (
        c.f64("idle_gpu_hours")?,
        c.f64("idle_held_gpu_hours")?,
        c.f64("idle_empty_gpu_hours")?,
        c.f64_opt("idle_cost")?,
    );
    let (unknown_gpu_hours, unknown_cost) = (c.f64("unknown_gpu_hours")?, c.f64_opt("unknown_cost")?);
    Ok((0..c.len())
        .map(|i| IdleCostRow {
            key: key[i].clone(),
            host: host[i].clone(),
            gpu_index: gpu_index[i],
            parent_gpu_uuid: parent[i].clone(),
            mig_profile: profile[i].clone(),
            idle_gpu_hours: idle_gpu_hours[i],
            idle_held_gpu_hours: idle_held_gpu_hours[i],
            idle_empty_gpu_hours: idle_empty_gpu_hours[i],
            // Minutes without a price cost nothing known.
            idle_cost: idle_cost[i].unwrap_or(0.0),
            unknown_gpu_hours: unknown_gpu_hours[i],
            unknown_cost: unknown_cost[i].unwrap_or(0.0),
        })
        .collect())
}

impl Rows for IdleCost {
    /// The key column named after the grouping (`team`, `user`, `host`, or
    /// `gpu_uuid` followed by `host`, `gpu_index` and for a MIG instance its
    /// `parent_gpu_uuid` and `mig_profile`), hours to 2 decimals,
    /// money to the cent.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        let hours = |f: fn(&IdleCostRow) -> f64| columns::float(r.iter().map(|row| round_to(f(row), 2)));
        let mut batch = match self.by {
            IdleBy::Gpu => vec![
                ("gpu_uuid", columns::text(r.iter().map(|row| row.key.as_deref()))),
                ("host", columns::text(r.iter().map(|row| row.host.as_deref()))),
                ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
                ("parent_gpu_uuid", columns::text(r.iter().map(|row| row.parent_gpu_uuid.as_deref()))),
                ("mig_profile", columns::text(r.iter().map(|row| row.mig_profile.as_deref()))),
            ],
            by => vec![(by.name(), columns::text(r.iter().map(|row| row.key.as_deref())))],
        };
        batch.extend([
            ("idle_gpu_hours", hours(|row| row.idle_gpu_hours)),
            ("idle_held_gpu_hours", hours(|row| row.idle_held_gpu_hours)),
            ("idle_empty_gpu_hours", hours(|row| row.idle_empty_gpu_hours)),
            ("idle_cost", columns::float(r.iter().map(|row| row.idle_cost))),
            ("unknown_gpu_hours", hours(|row| row.unknown_gpu_hours)),
            ("unknown_cost", columns::float(r.iter().map(|row| row.unknown_cost))),
        ]);
        batch_of(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, idle_cost: f64) -> IdleCostRow {
        IdleCostRow {
            key: Some(key.to_owned()),
            host: Some("node01".to_owned()),
            gpu_index: Some(3),
            parent_gpu_uuid: None,
            mig_profile: None,
            idle_gpu_hours: 1.0 / 3.0,
            idle_held_gpu_hours: 0.0,
            idle_empty_gpu_hours: 1.0 / 3.0,
            idle_cost,
            unknown_gpu_hours: 0.0,
            unknown_cost: 0.0,
        }
    }

    fn names(idle: &IdleCost) -> Vec<String> {
        let batch = idle.to_batch().expect("columns of one length");
        batch.schema().fields().iter().map(|f| f.name().clone()).collect()
    }

    #[test]
    fn the_key_column_is_named_after_the_grouping() {
        let rows = vec![row("(unallocated)", 9.0), row("vision", 5.5), row("nlp", 0.0), row("speech", 1.25)];
        let by_team = IdleCost { by: IdleBy::Team, rows: rows.clone() };
        let hours = [
            "idle_gpu_hours",
            "idle_held_gpu_hours",
            "idle_empty_gpu_hours",
            "idle_cost",
            "unknown_gpu_hours",
            "unknown_cost",
        ];
        assert_eq!(names(&by_team), [&["team"][..], &hours].concat());
        let by_gpu = IdleCost { by: IdleBy::Gpu, rows };
        assert_eq!(
            names(&by_gpu),
            [&["gpu_uuid", "host", "gpu_index", "parent_gpu_uuid", "mig_profile"][..], &hours].concat()
        );
        let batch = by_gpu.to_batch().expect("columns of one length");
        assert_eq!(Columns::of(&batch).f64("idle_gpu_hours").expect("hours"), [0.33; 4]);

        // The header's total is every row's; the top teams leave out idle
        // time nobody held and teams that cost nothing.
        assert_eq!(by_team.header_line("EUR"), "Idle:     €15.75 in all");
        assert_eq!(
            by_team.top(3),
            [("(unallocated)".to_owned(), 9.0), ("vision".to_owned(), 5.5), ("speech".to_owned(), 1.25)]
        );
        assert_eq!(by_team.top(1).len(), 1);
    }
}
