//! `alloc_minutes`: one row per (GPU, holder) per UTC minute: which pod or
//! Slurm job the cluster had allocated the GPU to, whether or not a process
//! of it ran there. It is what makes a GPU allocated but unused *held*: its
//! idle minutes are idle-held by the holder's team, not "(unallocated)".
//!
//! The recorder takes the allocations from the cluster's own books at each
//! tick (the kubelet's pod-resources API: a GPU's or MIG instance's UUID,
//! or a time-sliced replica of a GPU, per container; Slurm's record of each
//! job running on the node: its GPUs by Slurm's index), never from anything
//! a process says about itself, and rolls them up per minute when a file
//! closes, as it does `gpu_minutes`.
//!
//! As with the other minute tables, a minute split across two files has a
//! row in each: aggregate by (`gpu_uuid`, `minute`, `source`,
//! `k8s_namespace`, `k8s_pod_name`, `k8s_container`, `slurm_job_id`) with
//! `sum` of `seconds` and `samples` (and `max` of `k8s_labels`: a pod whose
//! labels changed within a minute has a row per label set). A GPU shared by time-slicing has a row
//! per pod holding a replica of it; a MIG instance's rows name the
//! instance's UUID, as its `gpu_minutes` rows do.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Float64Builder, Int32Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::gpu_samples::Text;
use crate::ts_type;

/// `source` of an allocation the kubelet's pod-resources API gave.
pub const SOURCE_KUBERNETES: &str = "kubernetes";

/// `source` of an allocation Slurm's job record gave.
pub const SOURCE_SLURM: &str = "slurm";

/// Who a GPU is allocated to: a Kubernetes container or a Slurm job, as
/// the cluster's own books name it. Fields that do not apply are `None`.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Holder {
    /// Where the allocation was read: [`SOURCE_KUBERNETES`] or [`SOURCE_SLURM`].
    pub source: Text,
    /// Kubernetes: the pod's namespace.
    pub k8s_namespace: Option<Text>,
    /// Kubernetes: the pod's name.
    pub k8s_pod_name: Option<Text>,
    /// Kubernetes: the container the device is allocated to.
    pub k8s_container: Option<Text>,
    /// Kubernetes: the pod's labels the recorder was asked to keep, as
    /// [`crate::ProcIdentity::k8s_labels`].
    pub k8s_labels: Option<Text>,
    /// Slurm: the job's id.
    pub slurm_job_id: Option<Text>,
    /// Slurm: the job's account.
    pub slurm_account: Option<Text>,
    /// Slurm: the job's partition.
    pub slurm_partition: Option<Text>,
    /// Slurm: the job's user name.
    pub user: Option<Text>,
}

/// The sources' names, made once: a holder made at every tick shares them.
static KUBERNETES: LazyLock<Text> = LazyLock::new(|| SOURCE_KUBERNETES.into());
static SLURM: LazyLock<Text> = LazyLock::new(|| SOURCE_SLURM.into());

impl Holder {
    /// A Kubernetes container, as the kubelet names it.
    pub fn kubernetes(namespace: Option<Text>, pod_name: Option<Text>, container: Option<Text>) -> Holder {
        Holder {
            source: KUBERNETES.clone(),
            k8s_namespace: namespace,
            k8s_pod_name: pod_name,
            k8s_container: container,
            ..Holder::default()
        }
    }

    /// A Slurm job, as Slurm's job record names it.
    pub fn slurm(job_id: Text, account: Option<Text>, partition: Option<Text>, user: Option<Text>) -> Holder {
        Holder {
            source: SLURM.clone(),
            slurm_job_id: Some(job_id),
            slurm_account: account,
            slurm_partition: partition,
            user,
            ..Holder::default()
        }
    }
}

/// One GPU allocated to one holder at one tick.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct AllocSample {
    /// The tick's time, milliseconds since the Unix epoch (UTC).
    pub ts: i64,
    /// The time the tick stands for, milliseconds (as `gpu_samples`).
    pub interval_ms: i32,
    /// The GPU's UUID, or the MIG instance's, as `gpu_samples` names it.
    pub gpu_uuid: Text,
    /// NVML index of the GPU (a MIG instance's: its parent's).
    pub gpu_index: i32,
    /// Who holds it.
    pub holder: Holder,
}

/// One GPU allocated to one holder over one UTC minute (or the part of it
/// one file holds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AllocMinute {
    /// Start of the UTC minute, milliseconds since the Unix epoch.
    pub minute: i64,
    /// The GPU's UUID, or the MIG instance's.
    pub gpu_uuid: Text,
    /// NVML index of the GPU (the minute's last).
    pub gpu_index: i32,
    /// Who held it.
    pub holder: Holder,
    /// Recorded time it was allocated: the sum of the `interval_ms` of the
    /// ticks that saw the allocation in the minute, divided by 1000.
    pub seconds: f64,
    /// Ticks that saw it in the minute.
    pub samples: i32,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let s = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("minute", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int32, false),
        Field::new("source", DataType::Utf8, false),
        s("k8s_namespace"),
        s("k8s_pod_name"),
        s("k8s_container"),
        s("k8s_labels"),
        s("slurm_job_id"),
        s("slurm_account"),
        s("slurm_partition"),
        s("user"),
        Field::new("seconds", DataType::Float64, false),
        Field::new("samples", DataType::Int32, false),
    ]))
});

/// The Arrow schema of `alloc_minutes` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[AllocMinute]) -> Result<RecordBatch, ArrowError> {
    let n = rows.len();
    let mut minute = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut index = Int32Builder::with_capacity(n);
    let text = || StringBuilder::with_capacity(n, n * 8);
    let (mut source, mut ns, mut pod, mut container) = (text(), text(), text(), text());
    let mut labels = text();
    let (mut job, mut account, mut partition, mut user) = (text(), text(), text(), text());
    let mut seconds = Float64Builder::with_capacity(n);
    let mut samples = Int32Builder::with_capacity(n);
    for r in rows {
        let h = &r.holder;
        minute.append_value(r.minute);
        uuid.append_value(&r.gpu_uuid);
        index.append_value(r.gpu_index);
        source.append_value(&h.source);
        ns.append_option(h.k8s_namespace.as_deref());
        pod.append_option(h.k8s_pod_name.as_deref());
        container.append_option(h.k8s_container.as_deref());
        labels.append_option(h.k8s_labels.as_deref());
        job.append_option(h.slurm_job_id.as_deref());
        account.append_option(h.slurm_account.as_deref());
        partition.append_option(h.slurm_partition.as_deref());
        user.append_option(h.user.as_deref());
        seconds.append_value(r.seconds);
        samples.append_value(r.samples);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(minute.finish()),
        Arc::new(uuid.finish()),
        Arc::new(index.finish()),
        Arc::new(source.finish()),
        Arc::new(ns.finish()),
        Arc::new(pod.finish()),
        Arc::new(container.finish()),
        Arc::new(labels.finish()),
        Arc::new(job.finish()),
        Arc::new(account.finish()),
        Arc::new(partition.finish()),
        Arc::new(user.finish()),
        Arc::new(seconds.finish()),
        Arc::new(samples.finish()),
    ];
    RecordBatch::try_new(schema(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_has_every_column_of_the_schema() {
        let rows = vec![AllocMinute {
            minute: 0,
            gpu_uuid: "GPU-a".into(),
            gpu_index: 0,
            holder: Holder {
                source: SOURCE_KUBERNETES.into(),
                k8s_namespace: Some("nlp".into()),
                k8s_pod_name: Some("train-0".into()),
                ..Default::default()
            },
            seconds: 60.0,
            samples: 60,
        }];
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_columns(), schema().fields().len());
        assert!(batch.column_by_name("slurm_job_id").expect("exists").is_null(0));
        assert!(batch.column_by_name("k8s_namespace").expect("exists").is_valid(0));
    }
}
