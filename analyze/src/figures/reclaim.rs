//! Reclaim: GPUs idle for at least a given stretch without a break
//! (`queries/reclaim.sql`), longest first, with the idle threshold of the
//! config: capacity that could be handed back.

use std::collections::BTreeSet;
use std::time::Duration;

use apron_schemas::time::{HOUR_MINUTES, HOUR_MS};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::Report;
use crate::columns::{self, batch_of};
use crate::error::Error;
use crate::ledger::Ledger;
use crate::output::Rows;
use crate::report_context::rules;

pub use crate::ledger::stretches::ReclaimRow;

/// The idle stretches of a period, longest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaim {
    /// One row per stretch.
    pub rows: Vec<ReclaimRow>,
}

impl Reclaim {
    /// GPUs with at least one stretch.
    pub fn gpus(&self) -> usize {
        self.rows.iter().map(|r| r.gpu_uuid.as_str()).collect::<BTreeSet<_>>().len()
    }

    /// GPU-hours in the stretches.
    pub fn gpu_hours(&self) -> f64 {
        self.rows.iter().map(|r| r.idle_minutes as f64).sum::<f64>() / HOUR_MINUTES as f64
    }
}

/// The idle stretches of at least `idle_for` in the period of `report`.
pub async fn reclaim(report: &Report, idle_for: Duration) -> Result<Reclaim, Error> {
    let zombie = &report.config.zombie;
    let rules = rules(zombie.min_idle, zombie.min_mem_mib, idle_for);
    let rows = match &report.ledger {
        Some(ledger) if ledger.rules == rules => ledger.reclaim.clone(),
        _ => Ledger::compute(&report.session, &report.config, &report.period, HOUR_MS, rules).await?.reclaim,
    };
    Ok(Reclaim { rows })
}

impl Rows for Reclaim {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        batch_of(vec![
            ("host", columns::text(r.iter().map(|row| row.host.as_str()))),
            ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
            ("gpu_uuid", columns::text(r.iter().map(|row| row.gpu_uuid.as_str()))),
            ("idle_since", columns::timestamp_ms(r.iter().map(|row| row.idle_since))),
            ("idle_minutes", columns::int64(r.iter().map(|row| row.idle_minutes))),
            ("held_by", columns::text(r.iter().map(|row| row.held_by.as_str()))),
            ("still_idle", columns::boolean(r.iter().map(|row| row.still_idle))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Columns;

    fn row(gpu_uuid: &str, idle_minutes: i64) -> ReclaimRow {
        ReclaimRow {
            host: "node01".into(),
            gpu_index: 0,
            gpu_uuid: gpu_uuid.into(),
            idle_since: 0,
            idle_minutes,
            held_by: String::new(),
            still_idle: true,
        }
    }

    #[test]
    fn gpus_and_hours_of_the_stretches() {
        let reclaim = Reclaim { rows: vec![row("GPU-a", 150), row("GPU-b", 120), row("GPU-a", 90)] };
        assert_eq!(reclaim.gpus(), 2);
        assert_eq!(reclaim.gpu_hours(), 6.0);
        assert_eq!(Reclaim { rows: Vec::new() }.gpu_hours(), 0.0);
        let batch = reclaim.to_batch().expect("columns of one length");
        assert_eq!(Columns::of(&batch).i64("idle_minutes").expect("minutes"), [150, 120, 90]);
        assert_eq!(batch.schema().field(6).name(), "still_idle");
    }
}
