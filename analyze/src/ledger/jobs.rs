//! Each job's GPU time over a period, from the ledger's one pass: a Slurm
//! job, else a Kubernetes pod, else a container, else a process
//! ([`super::minutes::job_name`]), with its share of every GPU-minute it
//! held, priced and attributed exactly as `spend` attributes it to its team
//! (a minute's processes by their shares, a minute no process ran in to the
//! pods and jobs it was allocated to, an idle minute with neither to
//! nobody): so a team's jobs add up to the team's spend.

use std::collections::BTreeSet;

use apron_schemas::minute_state::State;
use apron_schemas::time::{HOUR_SECS, MINUTE_MS};

use super::downtime::Fault;
use super::map::HashMap;
use super::minutes::GpuMinuteState;
use super::read::Names;

/// One GPU a job held.
#[derive(Debug, Clone, Default)]
struct GpuUse {
    gpu_uuid: u32,
    host: u32,
    gpu_index: i32,
    /// Seconds of its share of busy minutes.
    busy_seconds: f64,
    /// The most memory the job's processes held on it (bytes).
    peak_mem: Option<i64>,
    fb_total: Option<i64>,
    /// Its MIG parent (a fault on the parent is one on it); `None`: a whole GPU.
    parent: Option<u32>,
    /// The first and last minute the job held it.
    first: i64,
    last: i64,
}

/// What is summed of one job.
#[derive(Debug, Clone, Default)]
struct JobAcc {
    user: u32,
    team: u32,
    gpus: Vec<GpuUse>,
    first: i64,
    last: i64,
    gpu_seconds: f64,
    cost: f64,
    idle_cost: f64,
    idle_seconds: f64,
    /// Activity × GPU-seconds, and the GPU-seconds it was known for.
    activity: (f64, f64),
    /// SM activity (GPM) × GPU-seconds, and the GPU-seconds it was known for.
    sm_active: (f64, f64),
    /// PCIe traffic (bytes/s, in and out) × GPU-seconds, and the GPU-seconds it was known for.
    pcie: (f64, f64),
    /// Tensor pipe activity (GPM) × GPU-seconds, and the GPU-seconds it was known for.
    tensor_active: (f64, f64),
    /// DRAM activity (GPM) × GPU-seconds, and the GPU-seconds it was known for.
    dram_active: (f64, f64),
}

/// Faults of one kind (and XID code) on a job's GPUs while it held them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFault {
    /// `gpu_events.kind`.
    pub kind: String,
    /// The XID code, for kind `xid`.
    pub xid: Option<i32>,
    /// How many.
    pub events: u32,
    /// The GPUs they were on, as `host/index`, sorted.
    pub gpus: Vec<String>,
    /// Whether any of them took its GPU out of service.
    pub takes_down: bool,
}

/// One job over the period.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    /// `job 1234`, `pod NAMESPACE/POD`, `container ID`, `process PID on HOST since …`.
    pub job: String,
    /// slurm | pod | container | process.
    pub kind: &'static str,
    /// Its user as shown (of its first minute).
    pub user: String,
    /// Its team by the config's rules.
    pub team: String,
    /// The hosts it ran on, sorted.
    pub hosts: Vec<String>,
    /// The GPUs it held, as `host/index`, sorted.
    pub gpus: Vec<String>,
    /// Their UUIDs (a MIG instance's own), in the order of `gpus`.
    pub gpu_uuids: Vec<String>,
    /// Its first minute's start, ms since the epoch.
    pub start_ms: i64,
    /// Its last minute's end, ms since the epoch.
    pub end_ms: i64,
    /// Whether it held a GPU in the data's last minute.
    pub still_running: bool,
    /// GPU-hours it held (a MIG instance's by its share of its GPU; a
    /// minute shared with other processes by its share of it).
    pub gpu_hours: f64,
    /// Their cost (currency).
    pub cost: f64,
    /// Of it, idle minutes' (currency).
    pub idle_cost: f64,
    /// Share of its GPU time that was idle (%).
    pub idle_pct: f64,
    /// Mean activity (utilization, else SM activity) over its GPU time (%; `None`: unknown).
    pub util_pct: Option<f64>,
    /// Mean SM activity (GPM) over its GPU time (%; `None`: not measured).
    pub sm_active_pct: Option<f64>,
    /// Mean tensor pipe activity (GPM) over its GPU time (%; `None`: not measured).
    pub tensor_active_pct: Option<f64>,
    /// Mean DRAM activity (GPM) over its GPU time (%; `None`: not measured).
    pub dram_active_pct: Option<f64>,
    /// The most memory its processes held on one GPU (bytes; `None`: unknown).
    pub peak_mem_bytes: Option<i64>,
    /// That against the GPU's memory, the largest share of any of its GPUs (%; `None`: unknown).
    pub peak_mem_pct: Option<f64>,
    /// Its GPUs that were never busy while it held them.
    pub gpus_unused: usize,
    /// Whether any of its GPUs is a MIG instance.
    pub on_mig: bool,
    /// Mean PCIe traffic of its GPUs over its GPU time, in and out (MiB/s;
    /// `None`: unknown, as on a MIG instance).
    pub pcie_mib_per_s: Option<f64>,
    /// Faults on its GPUs (or on a MIG instance's parent) while it held
    /// them, by kind and XID code, the most frequent first.
    pub faults: Vec<JobFault>,
}

/// Follows the jobs through the pass.
#[derive(Debug, Default)]
pub struct Jobs {
    by_job: HashMap<u32, JobAcc>,
    /// The period's faults (XIDs, and what takes a GPU down).
    faults: Vec<Fault>,
    /// Indices into `faults` by GPU (interned UUID).
    faults_by_gpu: HashMap<u32, Vec<usize>>,
}

impl Jobs {
    /// Follows the jobs, with the period's `faults` to find on their GPUs.
    pub fn new(faults: Vec<Fault>, names: &mut Names) -> Self {
        let mut faults_by_gpu: HashMap<u32, Vec<usize>> = HashMap::default();
        for (i, f) in faults.iter().enumerate() {
            faults_by_gpu.entry(names.id(&f.gpu_uuid)).or_default().push(i);
        }
        Jobs { by_job: HashMap::default(), faults, faults_by_gpu }
    }

    /// Adds `share` of GPU-minute `g` (its GPU-seconds `gpu_seconds`, cost
    /// `cost`) to `job`, whose `user` and `team` they are; `mem`: the most
    /// memory its process held in it.
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &mut self,
        g: &GpuMinuteState,
        (job, user, team): (u32, u32, u32),
        share: f64,
        gpu_seconds: f64,
        cost: f64,
        mem: Option<i64>,
    ) {
        let acc = self.by_job.entry(job).or_insert_with(|| JobAcc {
            user,
            team,
            first: g.minute,
            last: g.minute,
            ..JobAcc::default()
        });
        acc.first = acc.first.min(g.minute);
        acc.last = acc.last.max(g.minute);
        let seconds = gpu_seconds * share;
        acc.gpu_seconds += seconds;
        acc.cost += cost * share;
        let idle = matches!(g.state, State::IdleHeld | State::IdleEmpty);
        if idle {
            acc.idle_cost += cost * share;
            acc.idle_seconds += seconds;
        }
        if let Some(a) = g.activity_pct {
            acc.activity.0 += a * seconds;
            acc.activity.1 += seconds;
        }
        if let Some(a) = g.sm_active_pct {
            acc.sm_active.0 += a * seconds;
            acc.sm_active.1 += seconds;
        }
        if let (Some(tx), Some(rx)) = (g.pcie_tx_bytes_per_s, g.pcie_rx_bytes_per_s) {
            acc.pcie.0 += (tx + rx) * seconds;
            acc.pcie.1 += seconds;
        }
        if let Some(a) = g.tensor_active_pct {
            acc.tensor_active.0 += a * seconds;
            acc.tensor_active.1 += seconds;
        }
        if let Some(a) = g.dram_active_pct {
            acc.dram_active.0 += a * seconds;
            acc.dram_active.1 += seconds;
        }
        let i = match acc.gpus.iter().position(|u| u.gpu_uuid == g.gpu_uuid) {
            Some(i) => i,
            None => {
                acc.gpus.push(GpuUse {
                    gpu_uuid: g.gpu_uuid,
                    host: g.host,
                    gpu_index: g.gpu_index,
                    parent: g.parent_gpu_uuid,
                    first: g.minute,
                    last: g.minute,
                    ..GpuUse::default()
                });
                acc.gpus.len() - 1
            }
        };
        let u = &mut acc.gpus[i];
        u.first = u.first.min(g.minute);
        u.last = u.last.max(g.minute);
        if g.state == State::Busy {
            u.busy_seconds += seconds;
        }
        u.peak_mem = super::minutes::max_opt(u.peak_mem, mem);
        u.fb_total = super::minutes::max_opt(u.fb_total, g.fb_total_bytes);
    }

    /// The jobs, the costliest idle first; `last_minute`: the data's last
    /// minute (a job in it is still running).
    pub fn finish(self, names: &Names, last_minute: Option<i64>) -> Vec<JobRow> {
        let Jobs { by_job, faults, faults_by_gpu } = self;
        let mut rows: Vec<JobRow> = by_job
            .into_iter()
            .map(|(job, a)| {
                let name = names.name(job).to_owned();
                let kind = match name.split_once(' ').map_or("", |(k, _)| k) {
                    "job" => "slurm",
                    "pod" => "pod",
                    "container" => "container",
                    _ => "process",
                };
                let hosts: BTreeSet<&str> = a.gpus.iter().map(|u| names.name(u.host)).collect();
                let gpus: Vec<(&str, i32, &str)> = a
                    .gpus
                    .iter()
                    .map(|u| (names.name(u.host), u.gpu_index, names.name(u.gpu_uuid)))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let peak_mem_bytes = a.gpus.iter().filter_map(|u| u.peak_mem).max();
                let peak_mem_pct = a
                    .gpus
                    .iter()
                    .filter_map(|u| Some(u.peak_mem? as f64 / u.fb_total.filter(|t| *t > 0)? as f64 * 100.0))
                    .reduce(f64::max);
                let mean = |(sum, seconds): (f64, f64)| (seconds > 0.0).then(|| sum / seconds);
                JobRow {
                    job: name,
                    kind,
                    user: names.name(a.user).to_owned(),
                    team: names.name(a.team).to_owned(),
                    hosts: hosts.into_iter().map(str::to_owned).collect(),
                    gpus: gpus.iter().map(|(h, i, _)| format!("{h}/{i}")).collect(),
                    gpu_uuids: gpus.iter().map(|(_, _, u)| (*u).to_owned()).collect(),
                    start_ms: a.first,
                    end_ms: a.last + MINUTE_MS,
                    still_running: last_minute == Some(a.last),
                    gpu_hours: a.gpu_seconds / HOUR_SECS as f64,
                    cost: a.cost,
                    idle_cost: a.idle_cost,
                    idle_pct: if a.gpu_seconds > 0.0 { 100.0 * a.idle_seconds / a.gpu_seconds } else { 0.0 },
                    util_pct: mean(a.activity),
                    sm_active_pct: mean(a.sm_active),
                    tensor_active_pct: mean(a.tensor_active),
                    dram_active_pct: mean(a.dram_active),
                    peak_mem_bytes,
                    peak_mem_pct,
                    gpus_unused: a.gpus.iter().filter(|u| u.busy_seconds <= 0.0).count(),
                    on_mig: a.gpus.iter().any(|u| u.parent.is_some()),
                    pcie_mib_per_s: mean(a.pcie).map(|b| b / (1u64 << 20) as f64),
                    faults: job_faults(&a.gpus, &faults, &faults_by_gpu, names),
                }
            })
            .collect();
        rows.sort_by(|a, b| b.idle_cost.total_cmp(&a.idle_cost).then_with(|| a.job.cmp(&b.job)));
        rows
    }
}

/// The faults on `gpus` (or their MIG parents) from the start of the first
/// minute a job held each to the end of the last, by kind and XID code,
/// the most frequent first.
fn job_faults(
    gpus: &[GpuUse],
    faults: &[Fault],
    by_gpu: &HashMap<u32, Vec<usize>>,
    names: &Names,
) -> Vec<JobFault> {
    if faults.is_empty() {
        return Vec::new();
    }
    let mut by_kind: std::collections::BTreeMap<(&str, Option<i32>), JobFault> = Default::default();
    for u in gpus {
        let own = by_gpu.get(&u.gpu_uuid).into_iter().flatten();
        let parent = u.parent.and_then(|p| by_gpu.get(&p)).into_iter().flatten();
        let gpu = format!("{}/{}", names.name(u.host), u.gpu_index);
        for &i in own.chain(parent) {
            let f = &faults[i];
            if f.ts < u.first || f.ts >= u.last + MINUTE_MS {
                continue;
            }
            let e = by_kind.entry((f.kind.as_str(), f.xid)).or_insert_with(|| JobFault {
                kind: f.kind.clone(),
                xid: f.xid,
                events: 0,
                gpus: Vec::new(),
                takes_down: false,
            });
            e.events += 1;
            e.takes_down |= f.takes_down;
            if !e.gpus.contains(&gpu) {
                e.gpus.push(gpu.clone());
            }
        }
    }
    let mut out: Vec<JobFault> = by_kind.into_values().collect();
    for f in &mut out {
        f.gpus.sort();
    }
    out.sort_by(|a, b| b.events.cmp(&a.events).then_with(|| (&a.kind, a.xid).cmp(&(&b.kind, b.xid))));
    out
}
