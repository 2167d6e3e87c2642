//! Reading segments of format 5, written by builds before a process row
//! and an allocation's holder carried the pod's labels (`k8s_labels`).
//!
//! Format 5's rows are decoded as they were and converted; `k8s_labels`
//! is `None` (not read). Every other field means what it meant.

use serde::{Deserialize, Serialize};

use apron_schemas::{AllocSample, GpuSample, Holder, ProcIdentity, ProcSample, Text};

/// Format 5's version number.
pub(super) const VERSION: u32 = 5;

/// The row fingerprint of format 5's tables, as its builds wrote it (its
/// rows were format 4's).
pub(super) const FINGERPRINT: u32 = 0x53f5_a1ea;

/// [`ProcIdentity`] in format 5: its fields, in its order.
#[derive(Serialize, Deserialize)]
pub(super) struct ProcIdentityV5 {
    proc_start: Option<i64>,
    comm: Option<Text>,
    uid: Option<i64>,
    user: Option<Text>,
    container_id: Option<Text>,
    k8s_pod_uid: Option<Text>,
    k8s_namespace: Option<Text>,
    k8s_pod_name: Option<Text>,
    k8s_container: Option<Text>,
    slurm_job_id: Option<Text>,
    slurm_account: Option<Text>,
    slurm_partition: Option<Text>,
    claimed_k8s_namespace: Option<Text>,
    claimed_slurm_job_id: Option<Text>,
    claimed_slurm_account: Option<Text>,
}

/// `proc_samples`' row in format 5.
#[derive(Serialize, Deserialize)]
pub(super) struct ProcSampleV5 {
    ts: i64,
    gpu_uuid: Text,
    pid: i32,
    interval_ms: i32,
    identity: ProcIdentityV5,
    used_mem_bytes: Option<i64>,
    sm_util_pct: Option<i32>,
    mem_util_pct: Option<i32>,
}

/// [`Holder`] in format 5.
#[derive(Serialize, Deserialize)]
pub(super) struct HolderV5 {
    source: Text,
    k8s_namespace: Option<Text>,
    k8s_pod_name: Option<Text>,
    k8s_container: Option<Text>,
    slurm_job_id: Option<Text>,
    slurm_account: Option<Text>,
    slurm_partition: Option<Text>,
    user: Option<Text>,
}

/// An allocation in format 5.
#[derive(Serialize, Deserialize)]
pub(super) struct AllocSampleV5 {
    ts: i64,
    interval_ms: i32,
    gpu_uuid: Text,
    gpu_index: i32,
    holder: HolderV5,
}

impl From<ProcSampleV5> for ProcSample {
    fn from(r: ProcSampleV5) -> Self {
        let id = r.identity;
        ProcSample {
            ts: r.ts,
            gpu_uuid: r.gpu_uuid,
            pid: r.pid,
            interval_ms: r.interval_ms,
            identity: ProcIdentity {
                proc_start: id.proc_start,
                comm: id.comm,
                uid: id.uid,
                user: id.user,
                container_id: id.container_id,
                k8s_pod_uid: id.k8s_pod_uid,
                k8s_namespace: id.k8s_namespace,
                k8s_pod_name: id.k8s_pod_name,
                k8s_container: id.k8s_container,
                k8s_labels: None,
                slurm_job_id: id.slurm_job_id,
                slurm_account: id.slurm_account,
                slurm_partition: id.slurm_partition,
                claimed_k8s_namespace: id.claimed_k8s_namespace,
                claimed_slurm_job_id: id.claimed_slurm_job_id,
                claimed_slurm_account: id.claimed_slurm_account,
            },
            used_mem_bytes: r.used_mem_bytes,
            sm_util_pct: r.sm_util_pct,
            mem_util_pct: r.mem_util_pct,
        }
    }
}

impl From<AllocSampleV5> for AllocSample {
    fn from(a: AllocSampleV5) -> Self {
        let h = a.holder;
        AllocSample {
            ts: a.ts,
            interval_ms: a.interval_ms,
            gpu_uuid: a.gpu_uuid,
            gpu_index: a.gpu_index,
            holder: Holder {
                source: h.source,
                k8s_namespace: h.k8s_namespace,
                k8s_pod_name: h.k8s_pod_name,
                k8s_container: h.k8s_container,
                k8s_labels: None,
                slurm_job_id: h.slurm_job_id,
                slurm_account: h.slurm_account,
                slurm_partition: h.slurm_partition,
                user: h.user,
            },
        }
    }
}

/// One tick frame of format 5 (`gpu_samples`' row is unchanged).
#[derive(Serialize, Deserialize)]
pub(super) struct TickV5 {
    pub(super) ts: i64,
    pub(super) gpus: Vec<GpuSample>,
    pub(super) procs: Vec<ProcSampleV5>,
    pub(super) allocs: Vec<AllocSampleV5>,
}

/// A decoded tick: its time, rows and allocations.
pub(super) type Tick = (i64, Vec<GpuSample>, Vec<ProcSample>, Vec<AllocSample>);

/// Decodes one tick frame's payload: its time, rows and allocations.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<Tick> {
    let tick: TickV5 = postcard::from_bytes(payload)?;
    Ok((
        tick.ts,
        tick.gpus,
        tick.procs.into_iter().map(ProcSample::from).collect(),
        tick.allocs.into_iter().map(AllocSample::from).collect(),
    ))
}

/// Format 5's rows of today's rows, as its builds wrote them (labels
/// dropped): for the test that rebuilds format 5's bytes.
#[cfg(test)]
pub(super) fn tick_of(ts: i64, gpus: &[GpuSample], procs: &[ProcSample], allocs: &[AllocSample]) -> TickV5 {
    TickV5 {
        ts,
        gpus: gpus.to_vec(),
        procs: procs
            .iter()
            .map(|r| {
                let id = r.identity.clone();
                ProcSampleV5 {
                    ts: r.ts,
                    gpu_uuid: r.gpu_uuid.clone(),
                    pid: r.pid,
                    interval_ms: r.interval_ms,
                    identity: ProcIdentityV5 {
                        proc_start: id.proc_start,
                        comm: id.comm,
                        uid: id.uid,
                        user: id.user,
                        container_id: id.container_id,
                        k8s_pod_uid: id.k8s_pod_uid,
                        k8s_namespace: id.k8s_namespace,
                        k8s_pod_name: id.k8s_pod_name,
                        k8s_container: id.k8s_container,
                        slurm_job_id: id.slurm_job_id,
                        slurm_account: id.slurm_account,
                        slurm_partition: id.slurm_partition,
                        claimed_k8s_namespace: id.claimed_k8s_namespace,
                        claimed_slurm_job_id: id.claimed_slurm_job_id,
                        claimed_slurm_account: id.claimed_slurm_account,
                    },
                    used_mem_bytes: r.used_mem_bytes,
                    sm_util_pct: r.sm_util_pct,
                    mem_util_pct: r.mem_util_pct,
                }
            })
            .collect(),
        allocs: allocs
            .iter()
            .map(|a| {
                let h = a.holder.clone();
                AllocSampleV5 {
                    ts: a.ts,
                    interval_ms: a.interval_ms,
                    gpu_uuid: a.gpu_uuid.clone(),
                    gpu_index: a.gpu_index,
                    holder: HolderV5 {
                        source: h.source,
                        k8s_namespace: h.k8s_namespace,
                        k8s_pod_name: h.k8s_pod_name,
                        k8s_container: h.k8s_container,
                        slurm_job_id: h.slurm_job_id,
                        slurm_account: h.slurm_account,
                        slurm_partition: h.slurm_partition,
                        user: h.user,
                    },
                }
            })
            .collect(),
    }
}
