//! Reclaim: GPUs idle for at least a given stretch without a break
//! (`queries/reclaim.sql`), longest first, with the idle threshold of the
//! config: capacity that could be handed back. Their hours are GPU-hours
//! (a MIG instance's counted by its share of its GPU), so the rows add up
//! to the headline. A partitioned GPU's slices no MIG instance holds are
//! not among them (nobody holds them: the fix is the MIG layout); they are
//! listed apart ([`Reclaim::unpartitioned`]) with their cost.

use std::time::Duration;

use apron_reports::{grouped, money};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::ReportContext;
use crate::error::Error;
use crate::ledger::ReclaimSum;
use crate::output::Rows;
use crate::report::columns::{self, batch_of};

pub use crate::ledger::stretches::{ReclaimRow, Unpartitioned};

/// The idle stretches of a period, longest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaim {
    /// One row per stretch.
    pub rows: Vec<ReclaimRow>,
    /// What they add up to.
    pub sum: ReclaimSum,
    /// Each partitioned GPU's slices no instance held, by host and index.
    pub unpartitioned: Vec<Unpartitioned>,
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

    /// The header line of the stretches: `Reclaim:  1,161.9 GPU-hours on
    /// 29 GPUs …`, the sum of the rows' `idle_gpu_hours`.
    pub fn headline(&self, idle_for: Duration) -> String {
        format!(
            "Reclaim:  {} GPU-hours on {}, in idle stretches of {} or more (idle_gpu_hours: a MIG instance's hours counted by its share of its GPU)",
            grouped(self.gpu_hours(), 1),
            self.units(),
            humantime::format_duration(idle_for)
        )
    }

    /// One sentence per partitioned GPU with slices no instance held:
    /// `gpu-node03 GPU 3 (GPU-…): 72.0 GPU-hours, $630.00, in slices no MIG
    /// instance holds`.
    pub fn unpartitioned_sentences(&self, currency: &str) -> Vec<String> {
        self.unpartitioned
            .iter()
            .map(|u| {
                format!(
                    "{} GPU {} ({}): {} GPU-hours, {}, in slices no MIG instance holds",
                    u.host,
                    u.gpu_index,
                    u.gpu_uuid,
                    grouped(u.gpu_hours, 2),
                    money(u.cost, currency)
                )
            })
            .collect()
    }

    /// The header lines of the unheld MIG slices, none when there are none.
    pub fn unpartitioned_lines(&self, currency: &str) -> Vec<String> {
        let sentences = self.unpartitioned_sentences(currency);
        if sentences.is_empty() {
            return Vec::new();
        }
        let mut lines = vec![
            "Unused:   MIG capacity no instance holds, not a reclaim candidate (nobody holds it; \
             change the MIG layout to use it):"
                .to_owned(),
        ];
        lines.extend(sentences.into_iter().map(|s| format!("Unused:   {s}")));
        lines
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

/// The idle stretches in the period of `report`, as its ledger found them
/// (at least the `idle_for` of the rules it was prepared with).
pub fn reclaim(report: &ReportContext) -> Result<Reclaim, Error> {
    let ledger = report.ledger()?;
    Ok(Reclaim {
        rows: ledger.reclaim.clone(),
        sum: ledger.reclaim_sum,
        unpartitioned: ledger.unpartitioned.clone(),
    })
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
            (
                "idle_gpu_hours",
                columns::float(
                    r.iter().map(|row| Some(crate::report::rounding::round_to(row.idle_gpu_hours, 2))),
                ),
            ),
            ("held_by", columns::text(r.iter().map(|row| row.held_by.as_str()))),
            ("allocated_to", columns::text(r.iter().map(|row| row.allocated_to.as_str()))),
            ("allocated_since", columns::timestamp_ms(r.iter().map(|row| row.allocated_since))),
            ("still_idle", columns::boolean(r.iter().map(|row| row.still_idle))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::columns::Columns;

    fn row(gpu_uuid: &str, idle_minutes: i64) -> ReclaimRow {
        ReclaimRow {
            host: "node01".into(),
            gpu_index: 0,
            gpu_uuid: gpu_uuid.into(),
            idle_since: 0,
            idle_minutes,
            idle_gpu_hours: idle_minutes as f64 / 60.0,
            held_by: String::new(),
            allocated_to: String::new(),
            allocated_since: None,
            still_idle: true,
        }
    }

    #[test]
    fn gpus_instances_and_hours_as_the_ledger_summed_them() {
        let sum = ReclaimSum { gpu_hours: 6.0, gpus: 2, instances: 0 };
        let reclaim = Reclaim {
            rows: vec![row("GPU-a", 150), row("GPU-b", 120), row("GPU-a", 90)],
            sum,
            unpartitioned: Vec::new(),
        };
        assert_eq!((reclaim.gpus(), reclaim.instances(), reclaim.gpu_hours()), (2, 0, 6.0));
        assert_eq!(reclaim.units(), "2 GPUs");
        let one = |gpus, instances| Reclaim {
            rows: Vec::new(),
            sum: ReclaimSum { gpu_hours: 0.0, gpus, instances },
            unpartitioned: Vec::new(),
        };
        assert_eq!(one(1, 1).units(), "1 GPU and 1 MIG instance");
        assert_eq!(one(3, 4).units(), "3 GPUs and 4 MIG instances");
        let batch = reclaim.to_batch().expect("columns of one length");
        assert_eq!(Columns::of(&batch).i64("idle_minutes").expect("minutes"), [150, 120, 90]);
        assert_eq!(batch.schema().field(9).name(), "still_idle");
        assert!(reclaim.unpartitioned_lines("USD").is_empty());
    }

    #[test]
    fn the_headline_and_the_unheld_slices_in_words() {
        let unheld = Unpartitioned {
            host: "gpu-node03".into(),
            gpu_index: 3,
            gpu_uuid: "GPU-p".into(),
            gpu_hours: 72.0 / 7.0,
            cost: 11.674,
        };
        let reclaim = Reclaim {
            rows: vec![row("GPU-a", 150)],
            sum: ReclaimSum { gpu_hours: 2.5, gpus: 1, instances: 0 },
            unpartitioned: vec![unheld],
        };
        assert_eq!(
            reclaim.headline(Duration::from_secs(7200)),
            "Reclaim:  2.5 GPU-hours on 1 GPU, in idle stretches of 2h or more \
             (idle_gpu_hours: a MIG instance's hours counted by its share of its GPU)"
        );
        let lines = reclaim.unpartitioned_lines("USD");
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("Unused:   MIG capacity no instance holds, not a reclaim candidate"));
        assert_eq!(
            lines[1],
            "Unused:   gpu-node03 GPU 3 (GPU-p): 10.29 GPU-hours, $11.67, in slices no MIG instance holds"
        );
    }
}
