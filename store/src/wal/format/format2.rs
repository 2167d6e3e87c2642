//! Reading segments of format 2, written by builds before `proc_samples`
//! kept what a process's environment claims apart from its trusted
//! identity (the `claimed_*` columns).
//!
//! Format 2's rows are decoded with the process row as it was and
//! converted. Its `k8s_namespace` and `slurm_account` came from the
//! process's environment, and its `slurm_job_id` from the environment
//! whenever the cgroup path gave none: all three are claims now, and move
//! to the `claimed_*` columns. (Its `k8s_pod_uid` and `container_id`
//! came from the cgroup path and are kept; `apron zombies --commands`
//! re-checks the cgroup on the host before it acts on a pod.) Format 1's
//! process rows are format 2's.

use serde::Deserialize;

use apron_schemas::{GpuSample, ProcIdentity, ProcSample, Text};

/// Format 2's version number.
pub(super) const VERSION: u32 = 2;

/// The row fingerprint of format 2's tables, as its builds wrote it.
pub(super) const FINGERPRINT: u32 = 0xd377_572c;

/// [`ProcIdentity`] in formats 1 and 2: the same fields up to
/// `slurm_account`, in the same order.
#[derive(Deserialize)]
pub(super) struct ProcIdentityV2 {
    proc_start: Option<i64>,
    comm: Option<Text>,
    uid: Option<i64>,
    user: Option<Text>,
    container_id: Option<Text>,
    k8s_pod_uid: Option<Text>,
    k8s_namespace: Option<Text>,
    slurm_job_id: Option<Text>,
    slurm_account: Option<Text>,
}

/// `proc_samples`' row in formats 1 and 2.
#[derive(Deserialize)]
pub(super) struct ProcSampleV2 {
    ts: i64,
    gpu_uuid: Text,
    pid: i32,
    interval_ms: i32,
    identity: ProcIdentityV2,
    used_mem_bytes: Option<i64>,
    sm_util_pct: Option<i32>,
    mem_util_pct: Option<i32>,
}

impl From<ProcSampleV2> for ProcSample {
    fn from(r: ProcSampleV2) -> Self {
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
                k8s_namespace: None,
                slurm_job_id: None,
                slurm_account: None,
                claimed_k8s_namespace: id.k8s_namespace,
                claimed_slurm_job_id: id.slurm_job_id,
                claimed_slurm_account: id.slurm_account,
                ..ProcIdentity::default()
            },
            used_mem_bytes: r.used_mem_bytes,
            sm_util_pct: r.sm_util_pct,
            mem_util_pct: r.mem_util_pct,
        }
    }
}

/// One tick frame of format 2 (`gpu_samples`' row is unchanged).
#[derive(Deserialize)]
struct TickV2 {
    ts: i64,
    gpus: Vec<GpuSample>,
    procs: Vec<ProcSampleV2>,
}

/// Decodes one tick frame's payload: its time and rows.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<(i64, Vec<GpuSample>, Vec<ProcSample>)> {
    let tick: TickV2 = postcard::from_bytes(payload)?;
    Ok((tick.ts, tick.gpus, tick.procs.into_iter().map(ProcSample::from).collect()))
}
