//! Reading segments of format 3, written by builds before `proc_samples`
//! had `k8s_pod_name`, `k8s_container` and `slurm_partition`.
//!
//! Format 3's rows are decoded with the process row as it was and
//! converted; the three new fields are `None` (unknown). Every other field
//! means what it meant.

use serde::Deserialize;

use apron_schemas::{GpuSample, ProcIdentity, ProcSample, Text};

/// Format 3's version number.
pub(super) const VERSION: u32 = 3;

/// The row fingerprint of format 3's tables, as its builds wrote it.
pub(super) const FINGERPRINT: u32 = 0xfd71_702e;

/// [`ProcIdentity`] in format 3: its fields, in its order.
#[derive(Deserialize)]
struct ProcIdentityV3 {
    proc_start: Option<i64>,
    comm: Option<Text>,
    uid: Option<i64>,
    user: Option<Text>,
    container_id: Option<Text>,
    k8s_pod_uid: Option<Text>,
    k8s_namespace: Option<Text>,
    slurm_job_id: Option<Text>,
    slurm_account: Option<Text>,
    claimed_k8s_namespace: Option<Text>,
    claimed_slurm_job_id: Option<Text>,
    claimed_slurm_account: Option<Text>,
}

/// `proc_samples`' row in format 3.
#[derive(Deserialize)]
struct ProcSampleV3 {
    ts: i64,
    gpu_uuid: Text,
    pid: i32,
    interval_ms: i32,
    identity: ProcIdentityV3,
    used_mem_bytes: Option<i64>,
    sm_util_pct: Option<i32>,
    mem_util_pct: Option<i32>,
}

impl From<ProcSampleV3> for ProcSample {
    fn from(r: ProcSampleV3) -> Self {
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
                k8s_pod_name: None,
                k8s_container: None,
                k8s_labels: None,
                slurm_job_id: id.slurm_job_id,
                slurm_account: id.slurm_account,
                slurm_partition: None,
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

/// One tick frame of format 3 (`gpu_samples`' row is unchanged).
#[derive(Deserialize)]
struct TickV3 {
    ts: i64,
    gpus: Vec<GpuSample>,
    procs: Vec<ProcSampleV3>,
}

/// Decodes one tick frame's payload: its time and rows.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<(i64, Vec<GpuSample>, Vec<ProcSample>)> {
    let tick: TickV3 = postcard::from_bytes(payload)?;
    Ok((tick.ts, tick.gpus, tick.procs.into_iter().map(ProcSample::from).collect()))
}
