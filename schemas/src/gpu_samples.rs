//! `gpu_samples`: one row per GPU per tick.
//!
//! The partition columns `date` and `host` are not stored in the file; they
//! come from its path (see [`crate::paths`]).

use std::sync::{Arc, LazyLock};

/// A shared string: cloning a row clones a pointer, not the text (a day of
/// one GPU repeats the same UUID and model 86,400 times).
pub type Text = Arc<str>;

use arrow::array::{
    ArrayRef, Float32Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::ts_type;

/// One GPU at one tick. Every metric is `None` when NVML could not give it
/// (not supported, or the call failed); `Some(0)` is a measured zero.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct GpuSample {
    /// Tick time, milliseconds since the Unix epoch (UTC), snapped to the tick.
    pub ts: i64,
    /// GPU UUID as NVML gives it (`GPU-…`).
    pub gpu_uuid: Text,
    /// NVML index of the GPU on its host.
    pub gpu_index: i32,
    /// Product name as NVML gives it (`NVIDIA H100 80GB HBM3`).
    pub gpu_model: Option<Text>,
    /// The time this row stands for, in milliseconds (the tick interval).
    pub interval_ms: i32,
    /// NVML utilization.gpu: percent of time a kernel ran, 0–100.
    pub gpu_util_pct: Option<i32>,
    /// NVML utilization.memory: percent of time the memory controller was busy.
    pub mem_util_pct: Option<i32>,
    /// Framebuffer memory in use, bytes.
    pub fb_used_bytes: Option<i64>,
    /// Framebuffer memory in all, bytes.
    pub fb_total_bytes: Option<i64>,
    /// Board power draw, milliwatts.
    pub power_mw: Option<i32>,
    /// Enforced power limit, milliwatts.
    pub power_limit_mw: Option<i32>,
    /// Raw energy counter since driver load, millijoules.
    pub energy_mj: Option<i64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<i32>,
    /// GPU core temperature, °C.
    pub temp_c: Option<i32>,
    /// Encoder utilization, percent.
    pub enc_util_pct: Option<i32>,
    /// Decoder utilization, percent.
    pub dec_util_pct: Option<i32>,
    /// PCIe transmit throughput, bytes per second (the copy-engine signal).
    pub pcie_tx_bytes_per_s: Option<i64>,
    /// PCIe receive throughput, bytes per second.
    pub pcie_rx_bytes_per_s: Option<i64>,
    /// NVML clock event (throttle) reasons, the raw bitmask.
    pub clock_event_reasons: Option<i64>,
    /// GPM: percent of SMs active (Hopper and newer), else `None`.
    pub sm_active_pct: Option<f32>,
    /// GPM: SM occupancy, percent.
    pub sm_occupancy_pct: Option<f32>,
    /// GPM: tensor pipes active, percent.
    pub tensor_active_pct: Option<f32>,
    /// GPM: DRAM bandwidth active, percent.
    pub dram_active_pct: Option<f32>,
    /// GPM: graphics engine active (any graphics or compute context busy),
    /// percent. Added after the other GPM columns: files written before it
    /// read it as null.
    pub gr_engine_active_pct: Option<f32>,
    /// MIG: on a MIG instance's row, the UUID of the GPU it is carved from
    /// (the instance's own `MIG-…` UUID is `gpu_uuid`); `None` on a whole
    /// GPU and on a partitioned GPU's own row.
    pub parent_gpu_uuid: Option<Text>,
    /// MIG: the instance's profile, e.g. `1g.10gb`.
    pub mig_profile: Option<Text>,
    /// MIG: the instance's compute slices (`1` for a `1g` profile).
    pub mig_slices: Option<i32>,
    /// MIG: the compute slices of the whole GPU (7 on an A100 or H100), on
    /// the instance rows and on the partitioned GPU's own row (which marks
    /// it as partitioned); `None` on a GPU not in MIG mode. An instance is
    /// `mig_slices / mig_total_slices` of its parent.
    pub mig_total_slices: Option<i32>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let i32n = |name: &str| Field::new(name, DataType::Int32, true);
    let i64n = |name: &str| Field::new(name, DataType::Int64, true);
    let f32n = |name: &str| Field::new(name, DataType::Float32, true);
    Arc::new(Schema::new(vec![
        Field::new("ts", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int32, false),
        Field::new("gpu_model", DataType::Utf8, true),
        Field::new("interval_ms", DataType::Int32, false),
        i32n("gpu_util_pct"),
        i32n("mem_util_pct"),
        i64n("fb_used_bytes"),
        i64n("fb_total_bytes"),
        i32n("power_mw"),
        i32n("power_limit_mw"),
        i64n("energy_mj"),
        i32n("sm_clock_mhz"),
        i32n("temp_c"),
        i32n("enc_util_pct"),
        i32n("dec_util_pct"),
        i64n("pcie_tx_bytes_per_s"),
        i64n("pcie_rx_bytes_per_s"),
        i64n("clock_event_reasons"),
        f32n("sm_active_pct"),
        f32n("sm_occupancy_pct"),
        f32n("tensor_active_pct"),
        f32n("dram_active_pct"),
        f32n("gr_engine_active_pct"),
        Field::new("parent_gpu_uuid", DataType::Utf8, true),
        Field::new("mig_profile", DataType::Utf8, true),
        i32n("mig_slices"),
        i32n("mig_total_slices"),
    ]))
});

/// The Arrow schema of `gpu_samples` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[GpuSample]) -> Result<RecordBatch, ArrowError> {
    to_batch_from(rows.iter(), rows.len())
}

/// Builds one record batch from the `n` rows of `rows`, in the order given
/// (e.g. several per-GPU runs chained, without copying rows together).
pub fn to_batch_from<'a, I>(rows: I, n: usize) -> Result<RecordBatch, ArrowError>
where
    I: Iterator<Item = &'a GpuSample>,
{
    // One pass over the rows, appending to every column at once: rows are
    // wide, so a pass per column would stream them from memory 28 times.
    let mut ts = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut index = Int32Builder::with_capacity(n);
    let mut model = StringBuilder::with_capacity(n, n * 24);
    let mut interval = Int32Builder::with_capacity(n);
    let mut parent = StringBuilder::new();
    let mut profile = StringBuilder::new();
    let mut slices = Int32Builder::with_capacity(n);
    let mut total_slices = Int32Builder::with_capacity(n);
    macro_rules! metrics {
        ($($builder:ident $field:ident),* $(,)?) => {{
            #[allow(non_snake_case)]
            struct Builders { $($field: $builder),* }
            let mut b = Builders { $($field: $builder::with_capacity(n)),* };
            for r in rows {
                ts.append_value(r.ts);
                uuid.append_value(&r.gpu_uuid);
                index.append_value(r.gpu_index);
                model.append_option(r.gpu_model.as_deref());
                interval.append_value(r.interval_ms);
                $(b.$field.append_option(r.$field);)*
                parent.append_option(r.parent_gpu_uuid.as_deref());
                profile.append_option(r.mig_profile.as_deref());
                slices.append_option(r.mig_slices);
                total_slices.append_option(r.mig_total_slices);
            }
            let mut columns: Vec<ArrayRef> = vec![
                Arc::new(ts.finish()),
                Arc::new(uuid.finish()),
                Arc::new(index.finish()),
                Arc::new(model.finish()),
                Arc::new(interval.finish()),
            ];
            $(columns.push(Arc::new(b.$field.finish()));)*
            columns.push(Arc::new(parent.finish()));
            columns.push(Arc::new(profile.finish()));
            columns.push(Arc::new(slices.finish()));
            columns.push(Arc::new(total_slices.finish()));
            columns
        }};
    }
    let columns = metrics!(
        Int32Builder gpu_util_pct,
        Int32Builder mem_util_pct,
        Int64Builder fb_used_bytes,
        Int64Builder fb_total_bytes,
        Int32Builder power_mw,
        Int32Builder power_limit_mw,
        Int64Builder energy_mj,
        Int32Builder sm_clock_mhz,
        Int32Builder temp_c,
        Int32Builder enc_util_pct,
        Int32Builder dec_util_pct,
        Int64Builder pcie_tx_bytes_per_s,
        Int64Builder pcie_rx_bytes_per_s,
        Int64Builder clock_event_reasons,
        Float32Builder sm_active_pct,
        Float32Builder sm_occupancy_pct,
        Float32Builder tensor_active_pct,
        Float32Builder dram_active_pct,
        Float32Builder gr_engine_active_pct,
    );
    RecordBatch::try_new(schema(), columns)
}

/// The sort order of every `gpu_samples` file: by GPU, then time.
pub fn sort(rows: &mut [GpuSample]) {
    rows.sort_by(|a, b| (&a.gpu_uuid, a.ts).cmp(&(&b.gpu_uuid, b.ts)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_keeps_nulls_apart_from_zero() {
        let rows = vec![
            GpuSample { ts: 1_000, gpu_uuid: "GPU-b".into(), gpu_util_pct: Some(0), ..Default::default() },
            GpuSample { ts: 2_000, gpu_uuid: "GPU-a".into(), gpu_util_pct: None, ..Default::default() },
        ];
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_rows(), 2);
        let util = batch.column_by_name("gpu_util_pct").expect("column exists");
        assert!(util.is_valid(0));
        assert!(util.is_null(1));
    }

    #[test]
    fn sort_orders_by_gpu_then_time() {
        let mut rows = vec![
            GpuSample { ts: 2, gpu_uuid: "GPU-b".into(), ..Default::default() },
            GpuSample { ts: 3, gpu_uuid: "GPU-a".into(), ..Default::default() },
            GpuSample { ts: 1, gpu_uuid: "GPU-b".into(), ..Default::default() },
        ];
        sort(&mut rows);
        let keys: Vec<_> = rows.iter().map(|r| (&*r.gpu_uuid, r.ts)).collect();
        assert_eq!(keys, [("GPU-a", 3), ("GPU-b", 1), ("GPU-b", 2)]);
    }
}
