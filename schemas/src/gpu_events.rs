//! `gpu_events`: what went wrong with a GPU, one row per event, as it
//! happened.
//!
//! Three kinds of source write it, all on the recorder's own host and never
//! from anything a process says about itself:
//!
//! - **the driver's events** (an NVML event set the recorder waits on): a
//!   critical XID error (`xid`, with its code), a single- or double-bit ECC
//!   error (`ecc_sbe`, `ecc_dbe`), a performance-state or clock change
//!   (`pstate`, `clock`), a power-source change (`power_source`), a MIG
//!   reconfiguration (`mig_config`);
//! - **the GPU's answers**: a GPU that stops answering because it is lost
//!   (NVML's `GPU_IS_LOST`, fallen off the bus) is `gpu_lost`, and the first
//!   sample after it answers again is `gpu_back`;
//! - **error counters**, read every minute: a counter that moved is a row
//!   whose `kind` names the counter, `value` its reading and `delta` how much
//!   it grew since the reading before ([`COUNTER_KINDS`]). The first reading
//!   after the recorder starts has no reading before it: when it is not 0 it
//!   is a row with `value` and no `delta` (a GPU that comes up with pending
//!   remaps says so at once).
//!
//! A file holds the events of the recorder's open file when it closed, in
//! (`gpu_uuid`, `ts`, `kind`) order, with the same name and partitions as
//! the samples of the same minutes. Events are kept as long as the minute
//! tables (they are few, and a fault's history is what they are for).

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::gpu_samples::Text;
use crate::ts_type;

/// A critical XID error the driver reported (`xid` holds its code).
pub const XID: &str = "xid";
/// A single-bit (corrected) ECC error event.
pub const ECC_SBE: &str = "ecc_sbe";
/// A double-bit (uncorrected) ECC error event.
pub const ECC_DBE: &str = "ecc_dbe";
/// The GPU's performance state changed.
pub const PSTATE: &str = "pstate";
/// The GPU's clocks changed.
pub const CLOCK: &str = "clock";
/// The board's power source changed.
pub const POWER_SOURCE: &str = "power_source";
/// The GPU's MIG configuration changed.
pub const MIG_CONFIG: &str = "mig_config";
/// The GPU stopped answering: lost, fallen off the bus.
pub const GPU_LOST: &str = "gpu_lost";
/// A lost GPU answered again.
pub const GPU_BACK: &str = "gpu_back";

/// Corrected ECC errors since the driver loaded (volatile).
pub const ECC_CORRECTED: &str = "ecc_corrected";
/// Uncorrected ECC errors since the driver loaded (volatile).
pub const ECC_UNCORRECTED: &str = "ecc_uncorrected";
/// Corrected ECC errors over the GPU's life (aggregate).
pub const ECC_CORRECTED_AGGREGATE: &str = "ecc_corrected_aggregate";
/// Uncorrected ECC errors over the GPU's life (aggregate).
pub const ECC_UNCORRECTED_AGGREGATE: &str = "ecc_uncorrected_aggregate";
/// Rows remapped for correctable errors.
pub const REMAPPED_CORRECTABLE: &str = "remapped_correctable";
/// Rows remapped for uncorrectable errors.
pub const REMAPPED_UNCORRECTABLE: &str = "remapped_uncorrectable";
/// A row remapping waits for a GPU reset (`value` 1) or not (0).
pub const REMAP_PENDING: &str = "remap_pending";
/// A row remapping failed (`value` 1): the GPU needs servicing.
pub const REMAP_FAILURE: &str = "remap_failure";
/// Pages retired for multiple single-bit errors (GPUs before Ampere).
pub const RETIRED_SBE: &str = "retired_sbe";
/// Pages retired for double-bit errors (GPUs before Ampere).
pub const RETIRED_DBE: &str = "retired_dbe";
/// A page retirement waits for a reboot (`value` 1) or not (0).
pub const RETIRED_PENDING: &str = "retired_pending";
/// PCIe replays (link-level retransmissions).
pub const PCIE_REPLAY: &str = "pcie_replay";
/// NVLink errors of one link (`detail` names the link and the counter).
pub const NVLINK_ERRORS: &str = "nvlink_errors";

/// The kinds of rows written for a counter that moved.
pub const COUNTER_KINDS: [&str; 13] = [
    ECC_CORRECTED,
    ECC_UNCORRECTED,
    ECC_CORRECTED_AGGREGATE,
    ECC_UNCORRECTED_AGGREGATE,
    REMAPPED_CORRECTABLE,
    REMAPPED_UNCORRECTABLE,
    REMAP_PENDING,
    REMAP_FAILURE,
    RETIRED_SBE,
    RETIRED_DBE,
    RETIRED_PENDING,
    PCIE_REPLAY,
    NVLINK_ERRORS,
];

/// The kinds of rows the driver's event set writes.
pub const EVENT_KINDS: [&str; 7] = [XID, ECC_SBE, ECC_DBE, PSTATE, CLOCK, POWER_SOURCE, MIG_CONFIG];

/// The kinds of rows a GPU's answers write.
pub const ANSWER_KINDS: [&str; 2] = [GPU_LOST, GPU_BACK];

/// One event of one GPU.
/// Whether one row of `gpu_events` takes its GPU out of service until it
/// is repaired (reset, rebooted or replaced): an XID NVIDIA's catalogue
/// calls fatal ([`crate::xid`]), a double-bit ECC error, a GPU that
/// stopped answering, uncorrectable ECC errors counted (`delta` above 0),
/// and a row remapping or page retirement pending or a remapping failed
/// (`value` 1). The GPU's time from such a fault until it next does work
/// is the time faults took (the docs' "Faults").
pub fn takes_gpu_down(kind: &str, xid: Option<i32>, value: Option<i64>, delta: Option<i64>) -> bool {
    match kind {
        XID => xid
            .and_then(|c| u32::try_from(c).ok())
            .and_then(crate::xid::xid)
            .is_some_and(|x| x.fatal == Some(true)),
        ECC_DBE | GPU_LOST => true,
        ECC_UNCORRECTED => delta.is_some_and(|d| d > 0),
        REMAP_PENDING | REMAP_FAILURE | RETIRED_PENDING => value.is_some_and(|v| v > 0),
        _ => false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct GpuEvent {
    /// When it happened (the driver's event: when the recorder received
    /// it; a counter: when it was read), milliseconds since the Unix epoch.
    pub ts: i64,
    /// The GPU (or MIG instance) it is about.
    pub gpu_uuid: Text,
    /// NVML index of the GPU on its host.
    pub gpu_index: i32,
    /// What happened: one of the kinds above.
    pub kind: Text,
    /// The XID code of an `xid` event.
    pub xid: Option<i32>,
    /// The process the driver named, when it named one.
    pub pid: Option<i32>,
    /// A counter's reading (a state's: 1 or 0).
    pub value: Option<i64>,
    /// How much the counter grew since the reading before (`None` at the
    /// first reading).
    pub delta: Option<i64>,
    /// Anything else the source said (`link 2 crc_flit`, `gi 1 ci 0`, the
    /// error of a lost GPU).
    pub detail: Option<Text>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("ts", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int32, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("xid", DataType::Int32, true),
        Field::new("pid", DataType::Int32, true),
        Field::new("value", DataType::Int64, true),
        Field::new("delta", DataType::Int64, true),
        Field::new("detail", DataType::Utf8, true),
    ]))
});

/// The Arrow schema of `gpu_events` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[GpuEvent]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut ts = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut index = Int32Builder::with_capacity(n);
    let mut kind = StringBuilder::with_capacity(n, n * 12);
    let (mut xid, mut pid) = (Int32Builder::with_capacity(n), Int32Builder::with_capacity(n));
    let (mut value, mut delta) = (Int64Builder::with_capacity(n), Int64Builder::with_capacity(n));
    let mut detail = StringBuilder::with_capacity(n, n * 8);
    for r in rows {
        ts.append_value(r.ts);
        uuid.append_value(&r.gpu_uuid);
        index.append_value(r.gpu_index);
        kind.append_value(&r.kind);
        xid.append_option(r.xid);
        pid.append_option(r.pid);
        value.append_option(r.value);
        delta.append_option(r.delta);
        detail.append_option(r.detail.as_deref());
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ts.finish()),
        Arc::new(uuid.finish()),
        Arc::new(index.finish()),
        Arc::new(kind.finish()),
        Arc::new(xid.finish()),
        Arc::new(pid.finish()),
        Arc::new(value.finish()),
        Arc::new(delta.finish()),
        Arc::new(detail.finish()),
    ];
    RecordBatch::try_new(schema(), columns)
}

/// The sort order of every `gpu_events` file: by GPU, time, then kind.
pub fn sort(rows: &mut [GpuEvent]) {
    rows.sort_by(|a, b| (&a.gpu_uuid, a.ts, &a.kind).cmp(&(&b.gpu_uuid, b.ts, &b.kind)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_has_every_column_and_keeps_nulls() {
        let mut rows = vec![
            GpuEvent {
                ts: 2_000,
                gpu_uuid: "GPU-b".into(),
                kind: REMAP_PENDING.into(),
                value: Some(1),
                delta: Some(1),
                ..Default::default()
            },
            GpuEvent {
                ts: 1_000,
                gpu_uuid: "GPU-b".into(),
                kind: XID.into(),
                xid: Some(79),
                ..Default::default()
            },
            GpuEvent { ts: 3_000, gpu_uuid: "GPU-a".into(), kind: GPU_LOST.into(), ..Default::default() },
        ];
        sort(&mut rows);
        let keys: Vec<_> = rows.iter().map(|r| (&*r.gpu_uuid, r.ts)).collect();
        assert_eq!(keys, [("GPU-a", 3_000), ("GPU-b", 1_000), ("GPU-b", 2_000)]);
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_columns(), schema().fields().len());
        let xid = batch.column_by_name("xid").expect("exists");
        assert!(xid.is_null(0) && xid.is_valid(1) && xid.is_null(2));
        assert!(batch.column_by_name("delta").expect("exists").is_valid(2));
    }

    #[test]
    fn kinds_are_distinct() {
        let mut all: Vec<&str> =
            COUNTER_KINDS.iter().chain(&EVENT_KINDS).chain(&ANSWER_KINDS).copied().collect();
        all.sort_unstable();
        let n = all.len();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
