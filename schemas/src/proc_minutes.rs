//! `proc_minutes`: one row per (GPU, process) per UTC minute, the rollup of
//! the `proc_samples` rows of one closed file.
//!
//! As with `gpu_minutes`, a minute split across two files has a row in each:
//! aggregate by (`gpu_uuid`, `pid`, `proc_start`, `minute`) with `sum` of
//! `seconds` and `samples`, seconds-weighted `*_mean`, `max` of `*_max`, and
//! any non-null identity value. The memory-time of a process in a minute
//! (the attribution weight, `used_mem_bytes × interval`) is
//! `used_mem_bytes_mean × seconds`.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::gpu_samples::Text;
use crate::proc_samples::ProcIdentity;
use crate::ts_type;

/// One process on one GPU over one UTC minute (or the part of it one file
/// holds). A metric is `None` when no sample of the minute had it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcMinute {
    /// Start of the UTC minute, milliseconds since the Unix epoch.
    pub minute: i64,
    /// The GPU.
    pub gpu_uuid: Text,
    /// Process id on the host.
    pub pid: i32,
    /// Who the process is; `proc_start` is part of its key. Each field is
    /// the minute's last non-null value.
    pub identity: ProcIdentity,
    /// Recorded time of the process on the GPU: the sum of `interval_ms` of
    /// its samples in the minute, divided by 1000.
    pub seconds: f64,
    /// `proc_samples` rows in the minute.
    pub samples: i32,
    /// Interval-weighted mean of `used_mem_bytes` over the samples that have it.
    pub used_mem_bytes_mean: Option<f64>,
    /// Highest `used_mem_bytes` of the minute, bytes.
    pub used_mem_bytes_max: Option<i64>,
    /// Interval-weighted mean of `sm_util_pct`.
    pub sm_util_pct_mean: Option<f64>,
    /// Interval-weighted mean of `mem_util_pct`.
    pub mem_util_pct_mean: Option<f64>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let s = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("minute", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("pid", DataType::Int32, false),
        Field::new("proc_start", ts_type(), true),
        Field::new("seconds", DataType::Float64, false),
        Field::new("samples", DataType::Int32, false),
        Field::new("used_mem_bytes_mean", DataType::Float64, true),
        Field::new("used_mem_bytes_max", DataType::Int64, true),
        Field::new("sm_util_pct_mean", DataType::Float64, true),
        Field::new("mem_util_pct_mean", DataType::Float64, true),
        s("comm"),
        Field::new("uid", DataType::Int64, true),
        s("user"),
        s("container_id"),
        s("k8s_pod_uid"),
        s("k8s_namespace"),
        s("k8s_pod_name"),
        s("k8s_container"),
        s("k8s_labels"),
        s("slurm_job_id"),
        s("slurm_account"),
        s("slurm_partition"),
        s("claimed_k8s_namespace"),
        s("claimed_slurm_job_id"),
        s("claimed_slurm_account"),
    ]))
});

/// The Arrow schema of `proc_minutes` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[ProcMinute]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut minute = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut pid = Int32Builder::with_capacity(n);
    let mut start = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut seconds = Float64Builder::with_capacity(n);
    let mut samples = Int32Builder::with_capacity(n);
    let mut mem_mean = Float64Builder::with_capacity(n);
    let mut mem_max = Int64Builder::with_capacity(n);
    let mut sm_mean = Float64Builder::with_capacity(n);
    let mut memutil_mean = Float64Builder::with_capacity(n);
    let mut uid = Int64Builder::with_capacity(n);
    let text = || StringBuilder::with_capacity(n, n * 8);
    let (mut comm, mut user, mut container, mut pod, mut ns, mut job, mut account) =
        (text(), text(), text(), text(), text(), text(), text());
    let (mut claimed_ns, mut claimed_job, mut claimed_account) = (text(), text(), text());
    let (mut pod_name, mut k8s_container, mut partition) = (text(), text(), text());
    let mut labels = text();
    for r in rows {
        let id = &r.identity;
        minute.append_value(r.minute);
        uuid.append_value(&r.gpu_uuid);
        pid.append_value(r.pid);
        start.append_option(id.proc_start);
        seconds.append_value(r.seconds);
        samples.append_value(r.samples);
        mem_mean.append_option(r.used_mem_bytes_mean);
        mem_max.append_option(r.used_mem_bytes_max);
        sm_mean.append_option(r.sm_util_pct_mean);
        memutil_mean.append_option(r.mem_util_pct_mean);
        comm.append_option(id.comm.as_deref());
        uid.append_option(id.uid);
        user.append_option(id.user.as_deref());
        container.append_option(id.container_id.as_deref());
        pod.append_option(id.k8s_pod_uid.as_deref());
        ns.append_option(id.k8s_namespace.as_deref());
        pod_name.append_option(id.k8s_pod_name.as_deref());
        k8s_container.append_option(id.k8s_container.as_deref());
        labels.append_option(id.k8s_labels.as_deref());
        job.append_option(id.slurm_job_id.as_deref());
        account.append_option(id.slurm_account.as_deref());
        partition.append_option(id.slurm_partition.as_deref());
        claimed_ns.append_option(id.claimed_k8s_namespace.as_deref());
        claimed_job.append_option(id.claimed_slurm_job_id.as_deref());
        claimed_account.append_option(id.claimed_slurm_account.as_deref());
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(minute.finish()),
        Arc::new(uuid.finish()),
        Arc::new(pid.finish()),
        Arc::new(start.finish()),
        Arc::new(seconds.finish()),
        Arc::new(samples.finish()),
        Arc::new(mem_mean.finish()),
        Arc::new(mem_max.finish()),
        Arc::new(sm_mean.finish()),
        Arc::new(memutil_mean.finish()),
        Arc::new(comm.finish()),
        Arc::new(uid.finish()),
        Arc::new(user.finish()),
        Arc::new(container.finish()),
        Arc::new(pod.finish()),
        Arc::new(ns.finish()),
        Arc::new(pod_name.finish()),
        Arc::new(k8s_container.finish()),
        Arc::new(labels.finish()),
        Arc::new(job.finish()),
        Arc::new(account.finish()),
        Arc::new(partition.finish()),
        Arc::new(claimed_ns.finish()),
        Arc::new(claimed_job.finish()),
        Arc::new(claimed_account.finish()),
    ];
    RecordBatch::try_new(schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_has_every_column_of_the_schema() {
        let rows = vec![ProcMinute {
            minute: 0,
            gpu_uuid: "GPU-a".into(),
            pid: 7,
            identity: ProcIdentity { user: Some("alice".into()), ..Default::default() },
            seconds: 30.0,
            samples: 30,
            used_mem_bytes_max: Some(1 << 30),
            ..Default::default()
        }];
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_columns(), schema().fields().len());
        assert!(batch.column_by_name("sm_util_pct_mean").expect("exists").is_null(0));
        assert!(batch.column_by_name("user").expect("exists").is_valid(0));
    }
}
