//! `proc_samples`: one row per (GPU, process) per tick.
//!
//! A process is identified by (`host`, `pid`, `proc_start`), so a reused pid
//! is a new process. Command lines are never recorded (they carry secrets);
//! `comm`, the kernel's short name, is.

use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, Int32Builder, Int64Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::gpu_samples::Text;
use crate::ts_type;

/// Who a process belongs to, read from `/proc` once per process. Every
/// field is `None` when it could not be read or does not apply (no
/// container, not a Slurm job).
///
/// The fields up to `slurm_partition` come from sources the process cannot
/// write (the kernel, the container runtime, the scheduler): only they may
/// decide a team or an action. The `claimed_*` fields are what the process
/// says about itself in its environment: kept, and shown as claims, never
/// billed by or acted on.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcIdentity {
    /// Process start time, milliseconds since the Unix epoch (UTC).
    pub proc_start: Option<i64>,
    /// Kernel short name of the executable (`/proc/PID/comm`).
    pub comm: Option<Text>,
    /// Real unix uid of the process.
    pub uid: Option<i64>,
    /// User name of `uid`, from the host's user database.
    pub user: Option<Text>,
    /// Container id from the cgroup path, under the container runtime's
    /// own hierarchy (docker, containerd, cri-o, podman run by root).
    pub container_id: Option<Text>,
    /// Kubernetes pod uid from the cgroup path, under the kubelet's
    /// `kubepods` hierarchy.
    pub k8s_pod_uid: Option<Text>,
    /// Kubernetes namespace of the pod `k8s_pod_uid` names, from sources
    /// on the node that pods cannot write (the kubelet's log folders and
    /// pod-resources API); `None` when none names that pod.
    pub k8s_namespace: Option<Text>,
    /// Kubernetes pod name, from the same sources as `k8s_namespace`.
    pub k8s_pod_name: Option<Text>,
    /// The container's name in its pod's spec, from the same sources;
    /// `None` when they do not name it.
    pub k8s_container: Option<Text>,
    /// The pod's labels the recorder was asked to keep (`--k8s-labels`),
    /// from the API server: `key=value` pairs sorted by key, joined by `,`;
    /// `None` when labels are not read or the pod has none of those keys.
    pub k8s_labels: Option<Text>,
    /// Slurm job id from the cgroup path, under Slurm's own hierarchy.
    pub slurm_job_id: Option<Text>,
    /// Slurm account, from Slurm itself (the simulated fleet sets it; on
    /// real nodes it stays `None` until Slurm is asked).
    pub slurm_account: Option<Text>,
    /// Slurm partition of the job, from Slurm itself (the simulated fleet
    /// sets it where its jobs have one).
    pub slurm_partition: Option<Text>,
    /// The Kubernetes namespace the process's environment claims
    /// (`POD_NAMESPACE` and the like): a claim.
    pub claimed_k8s_namespace: Option<Text>,
    /// The Slurm job id its environment claims (`SLURM_JOB_ID`): a claim.
    pub claimed_slurm_job_id: Option<Text>,
    /// The Slurm account its environment claims (`SLURM_JOB_ACCOUNT`): a claim.
    pub claimed_slurm_account: Option<Text>,
}

/// One process on one GPU at one tick.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ProcSample {
    /// Tick time, milliseconds since the Unix epoch (UTC).
    pub ts: i64,
    /// The GPU the process holds memory or runs on.
    pub gpu_uuid: Text,
    /// Process id on the host (not in a container's namespace).
    pub pid: i32,
    /// The time this row stands for, in milliseconds.
    pub interval_ms: i32,
    /// Who the process is.
    pub identity: ProcIdentity,
    /// GPU memory the process holds, bytes (`None` where NVML hides it,
    /// e.g. without permission or under some virtualisation).
    pub used_mem_bytes: Option<i64>,
    /// Percent of the GPU's SM time this process used over the last
    /// sampling period; `None` when NVML had no sample for it.
    pub sm_util_pct: Option<i32>,
    /// Percent of memory-controller time this process used.
    pub mem_util_pct: Option<i32>,
}

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let s = |name: &str| Field::new(name, DataType::Utf8, true);
    Arc::new(Schema::new(vec![
        Field::new("ts", ts_type(), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("pid", DataType::Int32, false),
        Field::new("proc_start", ts_type(), true),
        Field::new("interval_ms", DataType::Int32, false),
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
        Field::new("used_mem_bytes", DataType::Int64, true),
        Field::new("sm_util_pct", DataType::Int32, true),
        Field::new("mem_util_pct", DataType::Int32, true),
    ]))
});

/// The Arrow schema of `proc_samples` files.
pub fn schema() -> SchemaRef {
    SCHEMA.clone()
}

/// Builds one record batch from `rows`, in the order given.
pub fn to_batch(rows: &[ProcSample]) -> Result<RecordBatch, ArrowError> {
    to_batch_from(rows.iter(), rows.len())
}

/// Builds one record batch from the `n` rows of `rows`, in the order given.
pub fn to_batch_from<'a, I>(rows: I, n: usize) -> Result<RecordBatch, ArrowError>
where
    I: Iterator<Item = &'a ProcSample>,
{
    // One pass over the rows, appending to every column at once.
    let mut ts = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut uuid = StringBuilder::with_capacity(n, n * 40);
    let mut pid = Int32Builder::with_capacity(n);
    let mut start = TimestampMillisecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut interval = Int32Builder::with_capacity(n);
    let mut uid = Int64Builder::with_capacity(n);
    let mut used = Int64Builder::with_capacity(n);
    let mut sm = Int32Builder::with_capacity(n);
    let mut mem = Int32Builder::with_capacity(n);
    let text = || StringBuilder::with_capacity(n, n * 8);
    let (mut comm, mut user, mut container, mut pod, mut ns, mut job, mut account) =
        (text(), text(), text(), text(), text(), text(), text());
    let (mut claimed_ns, mut claimed_job, mut claimed_account) = (text(), text(), text());
    let (mut pod_name, mut k8s_container, mut partition) = (text(), text(), text());
    let mut labels = text();
    for r in rows {
        let id = &r.identity;
        ts.append_value(r.ts);
        uuid.append_value(&r.gpu_uuid);
        pid.append_value(r.pid);
        start.append_option(id.proc_start);
        interval.append_value(r.interval_ms);
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
        used.append_option(r.used_mem_bytes);
        sm.append_option(r.sm_util_pct);
        mem.append_option(r.mem_util_pct);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ts.finish()),
        Arc::new(uuid.finish()),
        Arc::new(pid.finish()),
        Arc::new(start.finish()),
        Arc::new(interval.finish()),
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
        Arc::new(used.finish()),
        Arc::new(sm.finish()),
        Arc::new(mem.finish()),
    ];
    RecordBatch::try_new(schema(), columns)
}

/// The sort order of every `proc_samples` file: by GPU, then time, then pid.
pub fn sort(rows: &mut [ProcSample]) {
    rows.sort_by(|a, b| (&a.gpu_uuid, a.ts, a.pid).cmp(&(&b.gpu_uuid, b.ts, b.pid)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_has_every_column_of_the_schema() {
        let rows = vec![ProcSample {
            ts: 1_000,
            gpu_uuid: "GPU-a".into(),
            pid: 42,
            interval_ms: 1_000,
            identity: ProcIdentity { user: Some("alice".into()), ..Default::default() },
            used_mem_bytes: Some(1 << 30),
            sm_util_pct: None,
            mem_util_pct: Some(0),
        }];
        let batch = to_batch(&rows).expect("rows match the schema");
        assert_eq!(batch.num_columns(), schema().fields().len());
        assert!(batch.column_by_name("sm_util_pct").expect("exists").is_null(0));
        assert!(batch.column_by_name("mem_util_pct").expect("exists").is_valid(0));
    }
}
