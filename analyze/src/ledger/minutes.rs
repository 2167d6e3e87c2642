//! One day's rollup rows made into GPU-minutes, process-minutes and
//! allocation-minutes, as `queries/gpu_minute_states.sql`,
//! `queries/proc_minute_states.sql` and `queries/alloc_minute_states.sql`
//! define them: the parts of a minute (one per file that holds some of it)
//! summed, its activity, PCIe traffic, energy and state, each process's
//! memory-time, user as shown and team, and each allocation's holder,
//! seconds, user as shown and team.

use crate::ledger::map::HashMap;

use super::read::{AllocPart, GpuPart, Names, ProcPart};
use crate::config::{Config, Who, team_of};

pub use apron_schemas::minute_state::State;
use apron_schemas::minute_state::{WeightedMean, activity_pct, holds_memory};

/// One GPU over one UTC minute.
#[derive(Debug, Clone, Copy)]
pub struct GpuMinuteState {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// Its host (`host`), as an interned id in [`Names`].
    pub host: u32,
    /// Its last known NVML index (`gpu_index`).
    pub gpu_index: i32,
    /// Its last known model (`gpu_model`), as an interned id in [`Names`]; `None`: unknown.
    pub gpu_model: Option<u32>,
    /// Recorded seconds (`seconds`; s).
    pub seconds: f64,
    /// Mean `gpu_util_pct` (`util_pct`; %; `None`: unknown).
    pub util_pct: Option<f64>,
    /// `util_pct` where known, else mean `sm_active_pct` (`activity_pct`; %; `None`: unknown).
    pub activity_pct: Option<f64>,
    /// Energy drawn (`energy_j`; J; measured or power × time, 0 where neither).
    pub energy_j: f64,
    /// Seconds with neither energy nor power (`energy_unknown_seconds`; s).
    pub energy_unknown_seconds: f64,
    /// Busy, idle-held, idle-empty or unknown (`state`).
    pub state: State,
    /// Whether the cluster had allocated the GPU to a pod or a Slurm job
    /// in the minute (`allocated`): then it is held.
    pub allocated: bool,
    /// The part of a physical GPU the minute stands for: 1 for a whole GPU,
    /// a MIG instance's share of its parent's slices, what no instance
    /// holds for a partitioned GPU's own row (`gpu_minute_states`).
    pub capacity_share: f64,
    /// MIG: an instance's parent GPU (`parent_gpu_uuid`), as an interned id in [`Names`]; `None` otherwise.
    pub parent_gpu_uuid: Option<u32>,
    /// MIG: an instance's profile (`mig_profile`), as an interned id in [`Names`]; `None` otherwise.
    pub mig_profile: Option<u32>,
    /// MIG: an instance's slices of its parent's (`mig_slices`); `None` otherwise.
    pub mig_slices: Option<i32>,
    /// MIG: the whole GPU's slices (`mig_total_slices`), on a partitioned GPU and its instances; `None`
    /// otherwise.
    pub mig_total_slices: Option<i32>,
    /// Mean PCIe traffic out of the GPU (`pcie_tx_bytes_per_s`; bytes/s; `None`: unknown, as for a MIG
    /// instance).
    pub pcie_tx_bytes_per_s: Option<f64>,
    /// Mean PCIe traffic into the GPU (`pcie_rx_bytes_per_s`; bytes/s; `None`: unknown).
    pub pcie_rx_bytes_per_s: Option<f64>,
    /// Mean SM activity, GPM (`sm_active_pct`; %; `None`: unknown).
    pub sm_active_pct: Option<f64>,
    /// The GPU's memory (`fb_total_bytes`; bytes; `None`: unknown).
    pub fb_total_bytes: Option<i64>,
    /// Mean tensor pipe activity, GPM (`tensor_active_pct`; %; `None`: unknown).
    pub tensor_active_pct: Option<f64>,
    /// Mean DRAM activity, GPM (`dram_active_pct`; %; `None`: unknown).
    pub dram_active_pct: Option<f64>,
}

impl GpuMinuteState {
    /// Whether the minute is a partitioned GPU's own row: the slices no MIG
    /// instance holds, capacity nobody can use until an instance is made.
    pub fn partitioned(&self) -> bool {
        self.parent_gpu_uuid.is_none() && self.mig_total_slices.is_some()
    }
}

/// One process on one GPU over one UTC minute.
#[derive(Debug, Clone, Copy)]
pub struct ProcMinuteState {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// The process id (`pid`).
    pub pid: i32,
    /// The process's start (`proc_start`; ms since the epoch, UTC; `None`: unknown): a reused pid is another
    /// process.
    pub proc_start: Option<i64>,
    /// Used memory × seconds (`mem_time`; byte-seconds; 0 when unknown).
    pub mem_time: f64,
    /// Its own SM utilization × seconds (percent-seconds; 0 when unknown).
    pub sm_time: f64,
    /// Whether NVML gave its SM utilization in every part of the minute.
    pub sm_known: bool,
    /// The most memory it held (`used_mem_bytes`; bytes; `None`: unknown).
    pub used_mem_bytes: Option<i64>,
    /// Whether it held GPU memory, above 0 or unknown (`held`).
    pub held: bool,
    /// Its command name (`comm`), as an interned id in [`Names`]; `None`: unknown.
    pub comm: Option<u32>,
    /// The user as shown: the name, "uid N" or "(unknown)".
    pub user: u32,
    /// Its team (`team`) by the config's rules, or "unassigned", as an interned id in [`Names`].
    pub team: u32,
    /// The job it is part of, as an interned id in [`Names`] of its name
    /// ([`job_name`]).
    pub job: u32,
}

/// The name of the job a process is part of: its Slurm job (`job N`, as an
/// allocation's holder is named), else its pod (`pod NAMESPACE/POD`), else
/// its container (`container ID`, the first 12 characters), else itself
/// (`process PID on HOST`, with its start when known: a reused pid is
/// another process).
pub fn job_name(
    slurm_job_id: Option<&str>,
    pod: Option<(&str, &str)>,
    container_id: Option<&str>,
    (pid, host, proc_start): (i32, &str, Option<i64>),
) -> String {
    if let Some(job) = slurm_job_id {
        return slurm_holder(job);
    }
    if let Some((namespace, name)) = pod {
        return pod_holder(namespace, name);
    }
    if let Some(id) = container_id {
        return format!("container {}", id.get(..12).unwrap_or(id));
    }
    match proc_start.and_then(chrono::DateTime::from_timestamp_millis) {
        Some(start) => format!("process {pid} on {host} since {}", start.format("%Y-%m-%dT%H:%M:%SZ")),
        None => format!("process {pid} on {host}"),
    }
}

/// How a Slurm job is named as a job and as an allocation's holder: `job N`
/// (as `queries/alloc_minute_states.sql` names it too).
fn slurm_holder(job: &str) -> String {
    format!("job {job}")
}

/// How a pod is named as a job and as an allocation's holder:
/// `pod NAMESPACE/POD` (as `queries/alloc_minute_states.sql` names it too).
fn pod_holder(namespace: &str, name: &str) -> String {
    format!("pod {namespace}/{name}")
}

/// What names a process's job: host, pid, start, Slurm job, namespace, pod, container.
type JobKey = (u32, i32, Option<i64>, Option<u32>, Option<u32>, Option<u32>, Option<u32>);

/// Sorts `rows` by `outer` (the GPU and minute they are grouped by),
/// keeping the order of rows with equal keys, as `sort_by_key` does, but
/// moving each (large) row once: the positions are sorted, then the rows
/// put in their order. Rows already in order (a file's are; a slice's
/// hosts come one after the other) are left as they are.
fn sort_stably<T: Copy, O: Ord>(rows: &mut [T], outer: impl Fn(&T) -> O) {
    if rows.is_sorted_by_key(&outer) {
        return;
    }
    let mut order: Vec<(O, usize)> = rows.iter().enumerate().map(|(i, r)| (outer(r), i)).collect();
    // The position breaks ties: the sort keeps the rows' order.
    order.sort_unstable();
    let sorted: Vec<T> = order.iter().map(|&(_, i)| rows[i]).collect();
    rows.copy_from_slice(&sorted);
}

/// [`sort_stably`] by `outer`, then each group of rows with equal `outer`
/// (a GPU-minute's few) stably by `key`, which begins with `outer`: the
/// whole in `key`'s order without sorting all the rows by it.
fn sort_grouped<T: Copy, O: Ord, K: Ord>(rows: &mut [T], outer: impl Fn(&T) -> O, key: impl Fn(&T) -> K) {
    sort_stably(rows, &outer);
    for group in rows.chunk_by_mut(|a, b| outer(a) == outer(b)) {
        if group.len() > 1 && !group.is_sorted_by_key(&key) {
            group.sort_by_key(&key);
        }
    }
}

/// The larger of two optional numbers, as SQL's `max` (nulls ignored).
pub fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// The larger of two optional texts, as SQL's `max` (nulls ignored).
fn max_text(names: &Names, a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x != y && names.greater(y, x) { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The GPU-minutes of `parts` into `out` (emptied first), sorted by GPU
/// then minute. `threshold` is the idle threshold (%).
pub fn gpu_minutes(parts: &mut [GpuPart], names: &Names, threshold: f64, out: &mut Vec<GpuMinuteState>) {
    // Each file's rows are in this order already, and the files come one
    // after the other (`Session::collect_in_order`): a stable sort merges
    // the runs, if any.
    sort_stably(parts, |p| (p.gpu_uuid, p.minute));
    out.clear();
    for group in parts.chunk_by(|a, b| (a.gpu_uuid, a.minute) == (b.gpu_uuid, b.minute)) {
        let first = group[0];
        let (mut host, mut index, mut model) = (first.host, first.gpu_index, first.gpu_model);
        let (mut seconds, mut util, mut sm) = (0.0, WeightedMean::default(), WeightedMean::default());
        let (mut pcie_tx, mut pcie_rx) = (WeightedMean::default(), WeightedMean::default());
        let (mut tensor, mut dram) = (WeightedMean::default(), WeightedMean::default());
        let (mut energy, mut unknown_seconds, mut held) = (0.0, 0.0, false);
        let (mut parent, mut profile, mut slices, mut total_slices) = (None, None, None, None);
        let mut fb_total = None;
        for p in group {
            fb_total = max_opt(fb_total, p.fb_total_bytes);
            parent = max_text(names, parent, p.parent_gpu_uuid);
            profile = max_text(names, profile, p.mig_profile);
            slices = slices.max(p.mig_slices);
            total_slices = total_slices.max(p.mig_total_slices);
            if p.host != host && names.greater(p.host, host) {
                host = p.host;
            }
            index = index.max(p.gpu_index);
            model = max_text(names, model, p.gpu_model);
            seconds += p.seconds;
            util.add(p.gpu_util_pct_mean, p.seconds);
            sm.add(p.sm_active_pct_mean, p.seconds);
            pcie_tx.add(p.pcie_tx_bytes_per_s_mean, p.seconds);
            pcie_rx.add(p.pcie_rx_bytes_per_s_mean, p.seconds);
            tensor.add(p.tensor_active_pct_mean, p.seconds);
            dram.add(p.dram_active_pct_mean, p.seconds);
            match p.energy_j.or(p.power_mw_mean.map(|mw| mw * p.seconds / 1000.0)) {
                Some(j) => energy += j,
                None => unknown_seconds += p.seconds,
            }
            held |= p.proc_held;
        }
        let (util, sm) = (util.get(), sm.get());
        let activity = activity_pct(util, sm);
        let state = State::of(activity, threshold, held);
        out.push(GpuMinuteState {
            gpu_uuid: first.gpu_uuid,
            minute: first.minute,
            host,
            gpu_index: index,
            gpu_model: model,
            seconds,
            util_pct: util,
            activity_pct: activity,
            energy_j: energy,
            energy_unknown_seconds: unknown_seconds,
            state,
            allocated: false,
            capacity_share: 1.0,
            parent_gpu_uuid: parent,
            mig_profile: profile,
            mig_slices: slices,
            mig_total_slices: total_slices,
            pcie_tx_bytes_per_s: pcie_tx.get(),
            pcie_rx_bytes_per_s: pcie_rx.get(),
            sm_active_pct: sm,
            fb_total_bytes: fb_total,
            tensor_active_pct: tensor.get(),
            dram_active_pct: dram.get(),
        });
    }
    if out.iter().any(|g| g.mig_total_slices.is_some()) {
        share_partitioned(out);
    }
}

/// A capacity share at or below this is none (every slice held, up to
/// rounding), as `gpu_minute_states` has it.
const SHARE_EPSILON: f64 = 1e-9;

/// MIG, as `gpu_minute_states` defines it: each instance stands for its
/// share of its parent's slices and takes that share of the parent's
/// energy; a partitioned GPU's own row keeps what no instance holds (its
/// energy × that share, idle-empty) and is dropped when every slice is
/// held. A parent and its instances are on one host, so they are read in
/// the same slice: `out` holds them all.
fn share_partitioned(out: &mut Vec<GpuMinuteState>) {
    let share_of = |g: &GpuMinuteState| match (g.mig_slices, g.mig_total_slices) {
        (Some(s), Some(t)) if t != 0 => Some(f64::from(s) / f64::from(t)),
        _ => None,
    };
    let mut assigned: HashMap<(u32, i64), f64> = HashMap::default();
    let mut hardware: HashMap<(u32, i64), (f64, f64)> = HashMap::default();
    for g in out.iter() {
        if let Some(parent) = g.parent_gpu_uuid {
            *assigned.entry((parent, g.minute)).or_default() += share_of(g).unwrap_or(0.0);
        } else if g.mig_total_slices.is_some() {
            hardware.insert((g.gpu_uuid, g.minute), (g.energy_j, g.energy_unknown_seconds));
        }
    }
    for g in out.iter_mut() {
        if let Some(parent) = g.parent_gpu_uuid {
            g.capacity_share = share_of(g).unwrap_or(0.0);
            let (energy, unknown) = hardware.get(&(parent, g.minute)).copied().unwrap_or((0.0, g.seconds));
            g.energy_j = energy * g.capacity_share;
            g.energy_unknown_seconds = unknown * g.capacity_share;
        } else if g.mig_total_slices.is_some() {
            let held = assigned.get(&(g.gpu_uuid, g.minute)).copied().unwrap_or(0.0);
            g.capacity_share = (1.0 - held).max(0.0);
            g.energy_j *= g.capacity_share;
            g.energy_unknown_seconds *= g.capacity_share;
            g.state = State::IdleEmpty;
        }
    }
    out.retain(|g| g.capacity_share > SHARE_EPSILON);
}

/// Who a process is, as the team rules see it: user, uid, namespace, account.
type Identity = (Option<u32>, Option<i64>, Option<u32>, Option<u32>, Option<u32>);

/// The team and shown user of each identity met, so the rules run once each.
#[derive(Debug, Default)]
pub struct Teams {
    known: HashMap<Identity, (u32, u32)>,
    /// The job of each process met ([`job_name`]), so each is named once.
    jobs: HashMap<JobKey, u32>,
    /// The holder of each allocation met ([`Teams::holder`]), so each is named once.
    holders: HashMap<HolderKey, u32>,
}

/// What names an allocation's holder: source, namespace, pod, Slurm job.
type HolderKey = (u32, Option<u32>, Option<u32>, Option<u32>);

impl Teams {
    /// The job (interned name) of the process `p`.
    fn job(&mut self, names: &mut Names, p: &ProcPart, namespace: Option<u32>) -> u32 {
        let key = (p.host, p.pid, p.proc_start, p.slurm_job_id, namespace, p.k8s_pod_name, p.container_id);
        if let Some(&found) = self.jobs.get(&key) {
            return found;
        }
        let text = |id: Option<u32>| id.map(|i| names.name(i).to_owned());
        let (job, ns, pod, container) =
            (text(p.slurm_job_id), text(namespace), text(p.k8s_pod_name), text(p.container_id));
        let name = job_name(
            job.as_deref(),
            ns.as_deref().zip(pod.as_deref()),
            container.as_deref(),
            (p.pid, names.name(p.host), p.proc_start),
        );
        let id = names.id(&name);
        self.jobs.insert(key, id);
        id
    }

    /// The holder (interned name) of the allocation `p`: "job N" for a
    /// Slurm job's, "pod NAMESPACE/POD" otherwise.
    fn holder(&mut self, names: &mut Names, p: &AllocPart) -> u32 {
        let key = (p.source, p.k8s_namespace, p.k8s_pod_name, p.slurm_job_id);
        if let Some(&found) = self.holders.get(&key) {
            return found;
        }
        let text = |id: Option<u32>| id.map_or("?", |i| names.name(i));
        let holder = if names.name(p.source) == SLURM {
            slurm_holder(text(p.slurm_job_id))
        } else {
            pod_holder(text(p.k8s_namespace), text(p.k8s_pod_name))
        };
        let id = names.id(&holder);
        self.holders.insert(key, id);
        id
    }

    /// The (team, shown user) of `who`.
    fn of(&mut self, config: &Config, names: &mut Names, who: Identity) -> (u32, u32) {
        if let Some(&found) = self.known.get(&who) {
            return found;
        }
        let (user, uid, namespace, labels, account) = who;
        let text = |id: Option<u32>, names: &Names| id.map(|i| names.name(i).to_owned());
        let (user_name, ns, acct) = (text(user, names), text(namespace, names), text(account, names));
        let labels = text(labels, names);
        let rules = Who {
            user: user_name.as_deref(),
            uid,
            k8s_namespace: ns.as_deref(),
            k8s_labels: labels.as_deref(),
            slurm_account: acct.as_deref(),
        };
        let team = team_of(config, &rules).to_owned();
        let shown = match (&user_name, uid) {
            (Some(name), _) => name.clone(),
            (None, Some(uid)) => format!("uid {uid}"),
            (None, None) => "(unknown)".to_owned(),
        };
        let found = (names.id(&team), names.id(&shown));
        self.known.insert(who, found);
        found
    }
}

/// The process-minutes of `parts` into `out` (emptied first), sorted by
/// GPU, minute, pid, start.
pub fn proc_minutes(
    parts: &mut [ProcPart],
    names: &mut Names,
    teams: &mut Teams,
    config: &Config,
    out: &mut Vec<ProcMinuteState>,
) {
    sort_grouped(parts, |p| (p.gpu_uuid, p.minute), |p| (p.gpu_uuid, p.minute, p.pid, p.proc_start));
    out.clear();
    for group in parts.chunk_by(|a, b| {
        (a.gpu_uuid, a.minute, a.pid, a.proc_start) == (b.gpu_uuid, b.minute, b.pid, b.proc_start)
    }) {
        let first = group[0];
        let (mut mem_time, mut mem_max, mut held) = (0.0, None::<i64>, false);
        let (mut sm_time, mut sm_known) = (0.0, true);
        let (mut comm, mut user, mut uid) = (None, None, None::<i64>);
        let (mut namespace, mut labels, mut account) = (None, None, None);
        for p in group {
            if let Some(mean) = p.used_mem_bytes_mean {
                mem_time += mean * p.seconds;
            }
            match p.sm_util_pct_mean {
                Some(mean) => sm_time += mean * p.seconds,
                None => sm_known = false,
            }
            mem_max = max_opt(mem_max, p.used_mem_bytes_max);
            held |= holds_memory(p.used_mem_bytes_max);
            comm = max_text(names, comm, p.comm);
            user = max_text(names, user, p.user);
            uid = max_opt(uid, p.uid);
            namespace = max_text(names, namespace, p.k8s_namespace);
            labels = max_text(names, labels, p.k8s_labels);
            account = max_text(names, account, p.slurm_account);
        }
        let (team, user) = teams.of(config, names, (user, uid, namespace, labels, account));
        let job = teams.job(names, &first, namespace);
        out.push(ProcMinuteState {
            gpu_uuid: first.gpu_uuid,
            minute: first.minute,
            pid: first.pid,
            proc_start: first.proc_start,
            mem_time,
            sm_time,
            sm_known,
            used_mem_bytes: mem_max,
            held,
            comm,
            user,
            team,
            job,
        });
    }
}

/// One GPU allocated to one holder over one UTC minute.
#[derive(Debug, Clone, Copy)]
pub struct AllocMinuteState {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// The holder as shown (`holder`: "pod NAMESPACE/POD" or "job N"), as an interned id in [`Names`].
    pub holder: u32,
    /// Seconds the allocation was recorded (`seconds`; s).
    pub seconds: f64,
    /// The user as shown (`user`: the Slurm job's user, or "(unknown)"), as an interned id in [`Names`].
    pub user: u32,
    /// Its team (`team`) by the config's rules, or "unassigned", as an interned id in [`Names`].
    pub team: u32,
}

/// `source` of a Slurm job's allocation.
const SLURM: &str = apron_schemas::alloc_minutes::SOURCE_SLURM;

/// The allocation-minutes of `parts` into `out` (emptied first), sorted by
/// GPU then minute: the parts of one (GPU, minute, holder, container)
/// summed, as `alloc_minute_states` groups them.
pub fn alloc_minutes(
    parts: &mut [AllocPart],
    names: &mut Names,
    teams: &mut Teams,
    config: &Config,
    out: &mut Vec<AllocMinuteState>,
) {
    let key = |p: &AllocPart| {
        (p.gpu_uuid, p.minute, p.source, p.k8s_namespace, p.k8s_pod_name, p.k8s_container, p.slurm_job_id)
    };
    sort_grouped(parts, |p| (p.gpu_uuid, p.minute), key);
    out.clear();
    for group in parts.chunk_by(|a, b| key(a) == key(b)) {
        let first = group[0];
        let (mut seconds, mut account, mut user, mut labels) = (0.0, None, None, None);
        for p in group {
            seconds += p.seconds;
            labels = max_text(names, labels, p.k8s_labels);
            account = max_text(names, account, p.slurm_account);
            user = max_text(names, user, p.user);
        }
        let holder = teams.holder(names, &first);
        let (team, user) = teams.of(config, names, (user, None, first.k8s_namespace, labels, account));
        out.push(AllocMinuteState {
            gpu_uuid: first.gpu_uuid,
            minute: first.minute,
            holder,
            seconds,
            user,
            team,
        });
    }
}

/// Marks the GPU-minutes of `gpus` that `allocs` (both sorted by GPU then
/// minute) say were allocated: held, so an idle one is idle-held, as
/// `gpu_minute_states` has it (a partitioned GPU's own row stays
/// idle-empty: no allocation holds the slices no instance has).
pub fn mark_allocated(gpus: &mut [GpuMinuteState], allocs: &[AllocMinuteState]) {
    let mut a = 0;
    for g in gpus.iter_mut() {
        while a < allocs.len() && (allocs[a].gpu_uuid, allocs[a].minute) < (g.gpu_uuid, g.minute) {
            a += 1;
        }
        if a < allocs.len() && (allocs[a].gpu_uuid, allocs[a].minute) == (g.gpu_uuid, g.minute) {
            g.allocated = true;
            if g.state == State::IdleEmpty && !g.partitioned() {
                g.state = State::IdleHeld;
            }
        }
    }
}

/// Each holder's share of a GPU-minute no process ran in, in the order of
/// `on` (the minute's allocations, at least one), as
/// `queries/minute_costs.sql` splits it: by the seconds each held it,
/// equal shares when none has any.
pub fn alloc_shares(on: &[AllocMinuteState]) -> impl Iterator<Item = f64> + '_ {
    let total: f64 = on.iter().map(|a| a.seconds).sum();
    let count = on.len() as f64;
    on.iter().map(move |a| if total > 0.0 { a.seconds / total } else { 1.0 / count })
}

/// Each process's share of a GPU-minute in `state`, in the order of `on`
/// (the minute's processes, at least one), as `queries/minute_costs.sql`
/// splits it: a busy minute whose processes all have their own SM
/// utilization, summing above 0, by SM-time (on a time-sliced GPU the
/// process that computed pays for the computing); every other minute by
/// memory-time, equal shares when none held measurable memory.
pub fn shares(state: State, on: &[ProcMinuteState]) -> impl Iterator<Item = f64> + '_ {
    let sm_total: f64 = on.iter().map(|o| o.sm_time).sum();
    let by_sm = state == State::Busy && sm_total > 0.0 && on.iter().all(|o| o.sm_known);
    let mem_total: f64 = on.iter().map(|o| o.mem_time).sum();
    let count = on.len() as f64;
    on.iter().map(move |o| {
        if by_sm {
            o.sm_time / sm_total
        } else if mem_total > 0.0 {
            o.mem_time / mem_total
        } else {
            1.0 / count
        }
    })
}

#[cfg(test)]
mod sort_tests {
    use super::{sort_grouped, sort_stably};

    #[test]
    fn rows_with_equal_keys_keep_their_order() {
        // (key, arrival): two interleaved runs, as two files read at once.
        let mut rows = [(2, 0), (1, 1), (2, 2), (1, 3), (3, 4), (1, 5)];
        sort_stably(&mut rows, |r| r.0);
        assert_eq!(rows, [(1, 1), (1, 3), (1, 5), (2, 0), (2, 2), (3, 4)]);
        let mut sorted = [(1, 9), (1, 8), (2, 7)];
        sort_stably(&mut sorted, |r| r.0);
        assert_eq!(sorted, [(1, 9), (1, 8), (2, 7)], "rows in order are left as they are");
    }

    #[test]
    fn each_group_is_put_in_the_whole_keys_order() {
        // (group, key, arrival): the groups out of order, and in them the keys.
        let mut rows = [(2, 5, 0), (1, 3, 1), (2, 4, 2), (1, 3, 3), (1, 2, 4)];
        sort_grouped(&mut rows, |r| r.0, |r| (r.0, r.1));
        assert_eq!(rows, [(1, 2, 4), (1, 3, 1), (1, 3, 3), (2, 4, 2), (2, 5, 0)]);
    }
}
