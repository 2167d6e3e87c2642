//! Starved: processes that held GPU memory on a GPU idle by the activity
//! rule while the GPU moved data over PCIe (`queries/starved.sql`): waiting
//! on their input, not dead. The stretches are the ledger's, as the
//! zombies'; [`super::zombies::held_idle`] tells the two apart, so a
//! stretch is in one list or the other, never both.

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::error::ArrowError;

use crate::output::Rows;
use crate::report::columns::{self, batch_of};
use crate::report::rounding::round_to;

pub use crate::ledger::stretches::ZombieRow;

/// The data-starved stretches of a period.
#[derive(Debug, Clone, PartialEq)]
pub struct Starved {
    /// One row per stretch, most memory-minutes first, with the GPU's
    /// activity and PCIe traffic over it.
    pub rows: Vec<ZombieRow>,
}

/// The columns of a stretch of memory held on an idle GPU, in order, as
/// `zombies` prints them; `starved` adds the GPU's traffic after them.
pub fn held_idle_columns(r: &[ZombieRow]) -> Vec<(&'static str, ArrayRef)> {
    vec![
        ("host", columns::text(r.iter().map(|row| row.host.as_str()))),
        ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
        ("gpu_uuid", columns::text(r.iter().map(|row| row.gpu_uuid.as_str()))),
        ("pid", columns::int32(r.iter().map(|row| row.pid))),
        ("proc_start", columns::timestamp_ms(r.iter().map(|row| row.proc_start))),
        ("comm", columns::text(r.iter().map(|row| row.comm.as_deref()))),
        ("user", columns::text(r.iter().map(|row| row.user.as_deref()))),
        ("team", columns::text(r.iter().map(|row| row.team.as_str()))),
        ("used_mem_bytes", columns::int64(r.iter().map(|row| row.used_mem_bytes))),
        ("idle_since", columns::timestamp_ms(r.iter().map(|row| row.idle_since))),
        ("idle_minutes", columns::int64(r.iter().map(|row| row.idle_minutes))),
        ("still_running", columns::boolean(r.iter().map(|row| row.still_running))),
        ("still_idle", columns::boolean(r.iter().map(|row| row.still_idle))),
    ]
}

impl Rows for Starved {
    /// The zombies' columns, then the GPU's mean activity (%) and PCIe
    /// traffic in and out (MiB/s) over the stretch, to a tenth.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        let tenth = |v: Option<f64>| v.map(|v| round_to(v, 1));
        let mut columns = held_idle_columns(r);
        columns.extend([
            ("activity_pct", columns::float(r.iter().map(|row| tenth(row.activity_pct)))),
            ("pcie_rx_mib_per_s", columns::float(r.iter().map(|row| tenth(row.pcie_rx_mib_per_s)))),
            ("pcie_tx_mib_per_s", columns::float(r.iter().map(|row| tenth(row.pcie_tx_mib_per_s)))),
        ]);
        batch_of(columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::columns::Columns;

    #[test]
    fn the_traffic_prints_to_a_tenth_and_unknown_as_null() {
        let row = ZombieRow {
            host: "node01".into(),
            gpu_index: 2,
            gpu_uuid: "GPU-c".into(),
            pid: 9,
            proc_start: Some(1_000),
            comm: Some("python".into()),
            user: Some("alice".into()),
            team: "vision".into(),
            used_mem_bytes: Some(1 << 30),
            idle_since: 0,
            idle_minutes: 20,
            still_running: true,
            still_idle: false,
            activity_pct: Some(1.04),
            pcie_rx_mib_per_s: Some(812.345),
            pcie_tx_mib_per_s: None,
        };
        let batch = Starved { rows: vec![row] }.to_batch().expect("columns of one length");
        let c = Columns::of(&batch);
        assert_eq!(c.f64_opt("activity_pct").expect("f64"), [Some(1.0)]);
        assert_eq!(c.f64_opt("pcie_rx_mib_per_s").expect("f64"), [Some(812.3)]);
        assert_eq!(c.f64_opt("pcie_tx_mib_per_s").expect("f64"), [None]);
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names.len(), 16);
        assert_eq!(&names[13..], ["activity_pct", "pcie_rx_mib_per_s", "pcie_tx_mib_per_s"]);
    }
}
