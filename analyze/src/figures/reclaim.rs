//! Reclaim: GPUs idle for at least a given stretch without a break
//! (`queries/reclaim.sql`), longest first, with the idle threshold of the
//! config: capacity that could be handed back.

use std::time::Duration;

use apron_schemas::time::HOUR_MS;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::Report;
use crate::columns::{self, batch_of};
use crate::error::Error;
use crate::ledger::{Ledger, ReclaimSum};
use crate::output::Rows;
use crate::report_context::rules;

pub use crate::ledger::stretches::ReclaimRow;

/// The idle stretches of a period, longest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaim {
    /// One row per stretch.
    pub rows: Vec<ReclaimRow>,
    /// What they add up to.
    pub sum: ReclaimSum,
}

impl Reclaim {
    /// GPUs (whole or partitioned) with at least one stretch.
    pub fn gpus(&self) -> usize {
        self.sum.gpus
    }

    /// MIG instances with at least one stretch.
    pub fn instances(&self) -> usize {
        self.sum.instances
    }

    /// GPU-hours in the stretches, a MIG instance's counted by its share of
    /// its GPU.
    pub fn gpu_hours(&self) -> f64 {
        self.sum.gpu_hours
    }

    /// "3 GPUs", or "3 GPUs and 2 MIG instances" where instances have
    /// stretches too.
    pub fn units(&self) -> String {
        let gpus = format!("{} GPU{}", self.gpus(), if self.gpus() == 1 { "" } else { "s" });
        match self.instances() {
            0 => gpus,
            1 => format!("{gpus} and 1 MIG instance"),
            n => format!("{gpus} and {n} MIG instances"),
        }
    }
}

/// The idle stretches of at least `idle_for` in the period of `report`.
pub async fn reclaim(report: &Report, idle_for: Duration) -> Result<Reclaim, Error> {
    let zombie = &report.config.zombie;
    let rules = rules(zombie.min_idle, zombie.min_mem_mib, idle_for);
    let (rows, sum) = match &report.ledger {
        Some(ledger) if ledger.rules == rules => (ledger.reclaim.clone(), ledger.reclaim_sum),
        _ => {
            let ledger =
                Ledger::compute(&report.session, &report.config, &report.period, HOUR_MS, rules).await?;
            (ledger.reclaim, ledger.reclaim_sum)
        }
    };
    Ok(Reclaim { rows, sum })
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
    fn gpus_instances_and_hours_as_the_ledger_summed_them() {
        let sum = ReclaimSum { gpu_hours: 6.0, gpus: 2, instances: 0 };
        let reclaim = Reclaim { rows: vec![row("GPU-a", 150), row("GPU-b", 120), row("GPU-a", 90)], sum };
        assert_eq!((reclaim.gpus(), reclaim.instances(), reclaim.gpu_hours()), (2, 0, 6.0));
        assert_eq!(reclaim.units(), "2 GPUs");
        let one = |gpus, instances| Reclaim {
            rows: Vec::new(),
            sum: ReclaimSum { gpu_hours: 0.0, gpus, instances },
        };
        assert_eq!(one(1, 1).units(), "1 GPU and 1 MIG instance");
        assert_eq!(one(3, 4).units(), "3 GPUs and 4 MIG instances");
        let batch = reclaim.to_batch().expect("columns of one length");
        assert_eq!(Columns::of(&batch).i64("idle_minutes").expect("minutes"), [150, 120, 90]);
        assert_eq!(batch.schema().field(6).name(), "still_idle");
    }
}
