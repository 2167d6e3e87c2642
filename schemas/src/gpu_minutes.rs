//! `gpu_minutes`: one row per GPU per UTC minute, the rollup of the
//! `gpu_samples` (and `proc_samples`) rows of one closed file.
//!
//! The recorder computes these rows when it closes a file (see
//! `apron_recorder::rollup` for how each column is computed); they make
//! month-long reports fast but are an accelerator, not the truth.
//!
//! **A GPU-minute may have more than one row.** Rollups are computed per
//! closed file, and a minute split across two files (a `--rotate` that does
//! not divide a minute, a restart mid-minute) has a row in each. Queries must
//! therefore aggregate by (`gpu_uuid`, `minute`) before using a row
//! as "the" GPU-minute:
//!
//! - `seconds`, `samples`, `energy_j`: `sum(…)` (energy: null when every part
//!   is null);
//! - `*_mean`: seconds-weighted, `sum(x_mean * seconds) / sum(seconds)` over
//!   the parts where `x_mean` is not null (exact when the metric was present
//!   in every sample, as it is unless NVML failed mid-minute);
//! - `*_max`, `fb_total_bytes`: `max(…)`;
//! - `proc_held`: `bool_or(…)`;
//! - `proc_count`: `max(…)` is a lower bound (a process seen in both parts is
//!   one process); count distinct (`pid`, `proc_start`) in `proc_minutes`
//!   for the exact number.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::gpu_samples::Text;
use crate::ts_type;

/// One GPU over one UTC minute (or the part of it one file holds). A
/// metric is `None` when no sample of the minute had it (a mean over no
/// values is unknown, not 0).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuMinute {
    /// Start of the UTC minute, milliseconds since the Unix epoch.
    pub minute: i64,
    /// GPU UUID as NVML gives it.
    pub gpu_uuid: Text,
    /// NVML index of the GPU on its host (of the minute's last sample).
    pub gpu_index: i32,
    /// Product name (the minute's last known one).
    pub gpu_model: Option<Text>,
    /// Recorded time: the sum of `interval_ms` of the minute's samples,
    /// divided by 1000 (computed from the integer sum, so exact to the
    /// millisecond). At most 60 for a steady recorder; less when ticks were
    /// missed or the recorder started or stopped in the minute.
    pub seconds: f64,
    /// `gpu_samples` rows in the minute.
    pub samples: i32,
    /// Interval-weighted mean of `gpu_util_pct` over the samples that have it.
    pub gpu_util_pct_mean: Option<f64>,
    /// Highest `gpu_util_pct` of the minute.
    pub gpu_util_pct_max: Option<i32>,
    /// Interval-weighted mean of `mem_util_pct` (memory controller busy).
    pub mem_util_pct_mean: Option<f64>,
    /// Interval-weighted mean of `sm_active_pct` (GPM; Hopper and newer,
    /// and MIG instances, which have no `gpu_util_pct`). Files written
    /// before this column existed read it as null.
    pub sm_active_pct_mean: Option<f64>,
    /// Highest `fb_used_bytes` of the minute, bytes.
    pub fb_used_bytes_max: Option<i64>,
    /// Framebuffer size, bytes (the minute's highest).
    pub fb_total_bytes: Option<i64>,
    /// Energy drawn over the minute's samples, joules: per sample the energy
    /// counter's delta to the previous sample of the GPU when that sample is
    /// exactly one interval earlier, else `power_mw × interval_ms`; `None`
    /// when no sample had either.
    pub energy_j: Option<f64>,
    /// Interval-weighted mean of `power_mw`, milliwatts.
    pub power_mw_mean: Option<f64>,
    /// Interval-weighted mean of `pcie_tx_bytes_per_s`, bytes per second.
    pub pcie_tx_bytes_per_s_mean: Option<f64>,
    /// Interval-weighted mean of `pcie_rx_bytes_per_s`, bytes per second.
    pub pcie_rx_bytes_per_s_mean: Option<f64>,
    /// Some process held memory on the GPU in the minute: a `proc_samples`
    /// row with `used_mem_bytes` above 0, or unknown (null; NVML lists a
    /// process on a GPU only while it has a context, and a context is memory).
    pub proc_held: bool,
    /// Distinct processes (`pid`, `proc_start`) on the GPU in the minute.
    pub proc_count: i32,
    /// MIG (see `gpu_samples`): the parent GPU's UUID of an instance, the
    /// minute's last known. Files written before these four columns read
    /// them as null: whole GPUs.
    pub parent_gpu_uuid: Option<Text>,
    /// MIG: the instance's profile.
    pub mig_profile: Option<Text>,
    /// MIG: the instance's compute slices.
    pub mig_slices: Option<i32>,
    /// MIG: the whole GPU's compute slices (on instances and on a
    /// partitioned GPU's own row).
    pub mig_total_slices: Option<i32>,
    /// Interval-weighted mean of `tensor_active_pct` (GPM: tensor pipes
    /// active). Files written before these two columns read them as null.
    pub tensor_active_pct_mean: Option<f64>,
    /// Interval-weighted mean of `dram_active_pct` (GPM: DRAM bandwidth active).
    pub dram_active_pct_mean: Option<f64>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let f64n = |name: &str| Field::new(name, DataType::Float64, true);
    let i32n = |name: &str| Field::new(name, DataType::Int32, true);
    let i64n = |name: &str| Field::new(name, DataType::Int64, true);
    Arc::new(Schema::new(vec![
        Field::new("minute", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int32, false),
        Field::new("gpu_model", DataType::Utf8, true),
        Field::new("seconds", DataType::Float64, false),
        Field::new("samples", DataType::Int32, false),
        f64n("gpu_util_pct_mean"),
        i32n("gpu_util_pct_max"),
        f64n("mem_util_pct_mean"),
        f64n("sm_active_pct_mean"),
        i64n("fb_used_bytes_max"),
        i64n("fb_total_bytes"),
        f64n("energy_j"),
        f64n("power_mw_mean"),
        f64n("pcie_tx_bytes_per_s_mean"),
        f64n("pcie_rx_bytes_per_s_mean"),
        Field::new("proc_held", DataType::Boolean, false),
        Field::new("proc_count", DataType::Int32, false),
        Field::new("parent_gpu_uuid", DataType::Utf8, true),
        Field::new("mig_profile", DataType::Utf8, true),
        i32n("mig_slices"),
        i32n("mig_total_slices"),
        f64n("tensor_active_pct_mean"),
        f64n("dram_active_pct_mean"),
    ]))
});

/// The Arrow schema of `gpu_minutes` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[GpuMinute]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut minute = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut index = Int32Builder::with_capacity(n);
    let mut model = StringBuilder::with_capacity(n, n * 24);
    let mut seconds = Float64Builder::with_capacity(n);
    let mut samples = Int32Builder::with_capacity(n);
    let mut util_mean = Float64Builder::with_capacity(n);
    let mut util_max = Int32Builder::with_capacity(n);
    let mut mem_mean = Float64Builder::with_capacity(n);
    let mut sm_active_mean = Float64Builder::with_capacity(n);
    let mut fb_used_max = Int64Builder::with_capacity(n);
    let mut fb_total = Int64Builder::with_capacity(n);
    let mut energy = Float64Builder::with_capacity(n);
    let mut power_mean = Float64Builder::with_capacity(n);
    let mut tx_mean = Float64Builder::with_capacity(n);
    let mut rx_mean = Float64Builder::with_capacity(n);
    let mut held = BooleanBuilder::with_capacity(n);
    let mut count = Int32Builder::with_capacity(n);
    let mut parent = StringBuilder::new();
    let mut profile = StringBuilder::new();
    let mut slices = Int32Builder::with_capacity(n);
    let mut total_slices = Int32Builder::with_capacity(n);
    let mut tensor_mean = Float64Builder::with_capacity(n);
    let mut dram_mean = Float64Builder::with_capacity(n);
    for r in rows {
        minute.append_value(r.minute);
        uuid.append_value(&r.gpu_uuid);
        index.append_value(r.gpu_index);
        model.append_option(r.gpu_model.as_deref());
        seconds.append_value(r.seconds);
        samples.append_value(r.samples);
        util_mean.append_option(r.gpu_util_pct_mean);
        util_max.append_option(r.gpu_util_pct_max);
        mem_mean.append_option(r.mem_util_pct_mean);
        sm_active_mean.append_option(r.sm_active_pct_mean);
        fb_used_max.append_option(r.fb_used_bytes_max);
        fb_total.append_option(r.fb_total_bytes);
        energy.append_option(r.energy_j);
        power_mean.append_option(r.power_mw_mean);
        tx_mean.append_option(r.pcie_tx_bytes_per_s_mean);
        rx_mean.append_option(r.pcie_rx_bytes_per_s_mean);
        held.append_value(r.proc_held);
        count.append_value(r.proc_count);
        parent.append_option(r.parent_gpu_uuid.as_deref());
        profile.append_option(r.mig_profile.as_deref());
        slices.append_option(r.mig_slices);
        total_slices.append_option(r.mig_total_slices);
        tensor_mean.append_option(r.tensor_active_pct_mean);
        dram_mean.append_option(r.dram_active_pct_mean);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(minute.finish()),
        Arc::new(uuid.finish()),
        Arc::new(index.finish()),
        Arc::new(model.finish()),
        Arc::new(seconds.finish()),
        Arc::new(samples.finish()),
        Arc::new(util_mean.finish()),
        Arc::new(util_max.finish()),
        Arc::new(mem_mean.finish()),
        Arc::new(sm_active_mean.finish()),
        Arc::new(fb_used_max.finish()),
        Arc::new(fb_total.finish()),
        Arc::new(energy.finish()),
        Arc::new(power_mean.finish()),
        Arc::new(tx_mean.finish()),
        Arc::new(rx_mean.finish()),
        Arc::new(held.finish()),
        Arc::new(count.finish()),
        Arc::new(parent.finish()),
        Arc::new(profile.finish()),
        Arc::new(slices.finish()),
        Arc::new(total_slices.finish()),
        Arc::new(tensor_mean.finish()),
        Arc::new(dram_mean.finish()),
    ];
    RecordBatch::try_new(schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_has_every_column_and_keeps_nulls() {
        let rows = vec![GpuMinute {
            minute: 60_000,
            gpu_uuid: "GPU-a".into(),
            seconds: 60.0,
            samples: 60,
            gpu_util_pct_mean: Some(0.0),
            ..Default::default()
        }];
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_columns(), schema().fields().len());
        assert!(batch.column_by_name("gpu_util_pct_mean").expect("exists").is_valid(0));
        assert!(batch.column_by_name("energy_j").expect("exists").is_null(0));
    }
}
