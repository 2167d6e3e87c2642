//! Who runs what on which GPU, when: the event-driven workload of one host.
//!
//! Each slot, a whole GPU or a MIG instance (both called GPUs below), holds
//! a list of live processes. A free GPU waits for the next job to arrive (a
//! Poisson process thinned by the calendar: work starts in office hours,
//! rarely at night or at weekends; some GPUs are out of the way and get
//! little); the job's kind, team and size are drawn then. A training job
//! may span several free whole GPUs of the host (DDP ranks: one process
//! per GPU, consecutive pids, one Slurm job or pod). A GPU with an idle
//! notebook attracts guests: someone else's debug run squeezed in next to
//! it. When a training or debug process ends, it may stay behind as a
//! zombie that holds its memory until someone kills it. When a notebook
//! run as a Kubernetes pod ends, its pod often stays: the kernel is gone
//! but the pod still has the GPU allocated, idle, until someone deletes it
//! (at the latest when the next job wants the GPU).
//!
//! A MIG instance is used for what MIG is for: more notebooks, inference
//! servers and debug runs than on a whole GPU, less training, and that on
//! the instance alone. No job spans instances or takes a rank on one, and
//! memory is sized to the instance.
//!
//! Events are handled strictly in time order (ties by GPU index) with one
//! seeded ChaCha stream per host, so the schedule depends on the seed and
//! the start time only, never on which ticks were sampled. The history
//! starts two weeks before the recording so the first tick already sees
//! long-running servers, notebooks and zombies.
//!
//! Cost: each event touches only the GPUs it concerns. The earliest event
//! comes from a heap of each GPU's next event, free pids from a set of live
//! ones, and free GPUs for the ranks of a job from a set of GPUs without a
//! primary; so starting a host of n GPUs (its two weeks of history) takes
//! time about linear in n, not quadratic.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashSet};

use apron_schemas::{AllocSample, Holder, ProcIdentity, Text};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::calendar;
use super::hardware::{GpuModel, MigProfile};
use super::noise;
use super::org;
use super::workload::{self, Kind, Work};
use apron_schemas::time::{DAY_MS, HOUR_MS, MINUTE_MS};

/// How long before the first tick the simulated history starts.
pub(super) const PREROLL_MS: i64 = 14 * DAY_MS;

/// The kernel's classic `pid_max`: pids wrap around and get reused (by a
/// different process, with a different start time).
const PID_MAX: i32 = 32_768;
/// Where pids start again after wrapping (the kernel's `RESERVED_PIDS`).
const PID_WRAP_TO: i32 = 300;

/// GPU memory a context takes besides what the process allocates, and that
/// no new process can have.
const CONTEXT_RESERVE_BYTES: i64 = 600 << 20;
/// Less free memory than this and a new job fails at start (out of memory).
const MIN_JOB_BYTES: i64 = 1 << 30;
/// Per-process memory is allocated in 2 MiB pages.
const PAGE_MASK: i64 = !((2 << 20) - 1);

/// Mean time between job arrivals at a free GPU, at full office-hour
/// rate and appetite 1, and between guests on a notebook GPU.
const ARRIVAL_MEAN_MS: f64 = 70.0 * MINUTE_MS as f64;
const GUEST_MEAN_MS: f64 = 10.0 * HOUR_MS as f64;

/// Of notebook pods whose kernel ended, the share (in 1/256) that stay
/// allocated to their GPU, and for how long at most (they go when the next
/// job arrives at the GPU).
const IDLE_POD_SHARE: u64 = 96;
const IDLE_POD_MIN_MS: i64 = 2 * HOUR_MS;
const IDLE_POD_SPREAD_MS: i64 = 46 * HOUR_MS;
/// Salt of the idle pod's hash (of the process's noise key), so the
/// choice draws nothing from the host's random stream.
const IDLE_POD_SALT: u64 = 0x1D1E_90D5_A110_C8ED;

/// How a process came to be on its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// The GPU's main job (one at a time).
    Primary,
    /// A debug run squeezed in next to an idle notebook.
    Guest,
    /// Left behind by a job that ended.
    Zombie,
}

/// One live process on one GPU.
#[derive(Debug, Clone)]
pub(super) struct Proc {
    /// Host pid.
    pub(super) pid: i32,
    /// Who it is; `proc_start` is set.
    pub(super) identity: ProcIdentity,
    /// The pod or Slurm job its identity names ([`holder`]), made once:
    /// its GPU's allocations list it at every tick.
    pub(super) holder: Option<Holder>,
    pub(super) role: Role,
    pub(super) work: Work,
    /// When it appeared on the GPU (its CUDA context opened), ms.
    pub(super) start_ms: i64,
    /// When it leaves the GPU, ms (exclusive).
    pub(super) end_ms: i64,
    /// GPU memory it holds once loaded, bytes.
    pub(super) mem_bytes: i64,
    /// Key of its per-tick noise.
    pub(super) key: u64,
    /// Scratch for the current tick: its utilization, percent, and the
    /// memory it holds, bytes.
    pub(super) tick_util: f32,
    pub(super) tick_mem: i64,
}

/// The workload state of one GPU or MIG instance.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    /// Live processes, in start order.
    pub(super) procs: Vec<Proc>,
    /// The MIG instance's profile; `None` for a whole GPU.
    profile: Option<&'static MigProfile>,
    /// When the next job arrives, while no primary runs; else `i64::MAX`.
    next_arrival: i64,
    /// When the next guest arrives, while an idle notebook is the primary.
    next_guest: i64,
    /// How much work lands on this GPU relative to others (spares, GPUs
    /// nobody knows are free, get little).
    appetite: f32,
    /// A notebook pod whose kernel ended and that still has the GPU
    /// allocated, and until when (exclusive), ms.
    idle_pod: Option<(Holder, i64)>,
}

impl Slot {
    fn next_event(&self) -> i64 {
        let end = self.procs.iter().map(|p| p.end_ms).min().unwrap_or(i64::MAX);
        end.min(self.next_arrival).min(self.next_guest)
    }

    /// Its framebuffer, bytes: the GPU's, or the instance's.
    fn fb_total_bytes(&self, model: &GpuModel) -> i64 {
        self.profile.map_or(model.fb_total_bytes, |p| p.fb_total_bytes)
    }

    /// Appends the GPU's allocations at `ts` to `out`, as the cluster's
    /// books would list them: the pod or Slurm job of each live process but
    /// zombies (their job is over), each once, and an idle pod still
    /// allocated.
    pub(super) fn allocations(
        &self,
        ts: i64,
        interval_ms: i32,
        uuid: &Text,
        index: i32,
        out: &mut Vec<AllocSample>,
    ) {
        let from = out.len();
        let held = self.procs.iter().filter(|p| p.role != Role::Zombie).filter_map(|p| p.holder.as_ref());
        let idle = self.idle_pod.as_ref().filter(|(_, until)| ts < *until).map(|(h, _)| h);
        for h in held.chain(idle) {
            if !out[from..].iter().any(|a| a.holder == *h) {
                out.push(AllocSample {
                    ts,
                    interval_ms,
                    gpu_uuid: uuid.clone(),
                    gpu_index: index,
                    holder: h.clone(),
                });
            }
        }
    }

    fn free_bytes(&self, model: &GpuModel) -> i64 {
        self.fb_total_bytes(model)
            - CONTEXT_RESERVE_BYTES
            - self.procs.iter().map(|p| p.mem_bytes).sum::<i64>()
    }
}

/// The workload of one host. A clone goes on exactly as the original would
/// (its random stream included): that is how a host is sampled GPU by GPU
/// ([`super::SimHost::sample_by_gpu`]).
#[derive(Debug, Clone)]
pub(super) struct Schedule {
    rng: ChaCha8Rng,
    model: &'static GpuModel,
    /// The team that owns the host and starts most of its work.
    home_team: usize,
    /// The last pid handed out, and when.
    last_pid: i32,
    last_pid_ms: i64,
    /// Pids the host's other processes (shells, cron, data-loader workers)
    /// take per second.
    pid_churn_per_s: f64,
    /// The last Slurm job id handed out.
    last_job: u64,
    pub(super) gpus: Vec<Slot>,
    /// Each GPU's next event, as last computed.
    slot_next: Vec<i64>,
    /// (time, GPU) of pending events, earliest first; an entry whose time
    /// is no longer its GPU's `slot_next` is stale and skipped.
    events: BinaryHeap<Reverse<(i64, usize)>>,
    /// GPUs whose next event may have changed since the last refresh.
    dirty: Vec<usize>,
    /// Pids of the live processes of every GPU.
    live_pids: HashSet<i32>,
    /// GPUs and instances without a primary process.
    free: BTreeSet<usize>,
}

impl Schedule {
    /// The workload of a host of GPUs of `model`, one slot per entry of
    /// `slots` (a whole GPU, or a MIG instance of that profile), seeded by
    /// `seed`, with Slurm job ids above `slurm_base`, history starting at
    /// `from_ms`.
    pub(super) fn new(
        seed: u64,
        model: &'static GpuModel,
        slots: &[Option<&'static MigProfile>],
        slurm_base: u64,
        from_ms: i64,
    ) -> Schedule {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let home_team = rng.random_range(0..org::teams().len());
        let last_pid = rng.random_range(2_000..20_000);
        let pid_churn_per_s = 0.1 + 0.4 * rng.random::<f64>();
        let mut s = Schedule {
            rng,
            model,
            home_team,
            last_pid,
            last_pid_ms: from_ms,
            pid_churn_per_s,
            last_job: slurm_base,
            gpus: Vec::new(),
            slot_next: Vec::new(),
            events: BinaryHeap::new(),
            dirty: Vec::new(),
            live_pids: HashSet::new(),
            free: BTreeSet::new(),
        };
        for &profile in slots {
            let appetite = if s.rng.random::<f32>() < 0.12 {
                0.08 + 0.17 * s.rng.random::<f32>()
            } else {
                0.5 + 1.1 * s.rng.random::<f32>()
            };
            let next_arrival = s.arrival_after(from_ms, ARRIVAL_MEAN_MS / f64::from(appetite));
            s.gpus.push(Slot {
                procs: Vec::new(),
                profile,
                next_arrival,
                next_guest: i64::MAX,
                appetite,
                idle_pod: None,
            });
            s.slot_next.push(i64::MAX);
            s.free.insert(s.gpus.len() - 1);
            s.dirty.push(s.gpus.len() - 1);
        }
        s.refresh();
        s
    }

    /// Handles every event at or before `ts`: afterwards each GPU's
    /// processes are those live at `ts`.
    #[inline]
    pub(super) fn advance(&mut self, ts: i64) {
        // Events in (time, GPU) order: the order a scan of every GPU for the
        // earliest would give.
        while let Some(&Reverse((t, g))) = self.events.peek() {
            if self.slot_next[g] != t {
                self.events.pop();
            } else if t <= ts {
                self.events.pop();
                self.step(g, t);
            } else {
                break;
            }
        }
    }

    /// Recomputes the next event of every GPU touched since the last call.
    fn refresh(&mut self) {
        for g in std::mem::take(&mut self.dirty) {
            let t = self.gpus[g].next_event();
            if t != self.slot_next[g] {
                self.slot_next[g] = t;
                if t != i64::MAX {
                    self.events.push(Reverse((t, g)));
                }
            }
        }
    }

    /// Handles the event of GPU `g` at `t`, the earliest of the host.
    fn step(&mut self, g: usize, t: i64) {
        self.dirty.push(g);
        // Its next event may be at `t` again (two at once): it must be
        // pushed again even though `slot_next` already says `t`.
        self.slot_next[g] = i64::MIN;
        let slot = &self.gpus[g];
        let ending = slot.procs.iter().enumerate().min_by_key(|(_, p)| p.end_ms).map(|(i, p)| (i, p.end_ms));
        let arrival = slot.next_arrival;
        // Ends first: what a process frees is there for whoever arrives.
        match ending {
            Some((i, end)) if end == t => self.end(g, i, t),
            _ if arrival == t => self.arrive(g, t),
            _ => self.guest_arrives(g, t),
        }
        self.refresh();
    }

    /// Process `i` of GPU `g` reaches its end at `t`.
    fn end(&mut self, g: usize, i: usize, t: i64) {
        let kind = self.gpus[g].procs[i].work.kind;
        let role = self.gpus[g].procs[i].role;
        let chance = kind.zombie_chance();
        let mut gone = None;
        if chance > 0.0 && self.rng.random::<f32>() < chance {
            let lingers = workload::duration_ms(Kind::Zombie, &mut self.rng);
            let p = &mut self.gpus[g].procs[i];
            p.role = Role::Zombie;
            p.work.kind = Kind::Zombie;
            p.end_ms = t + lingers;
        } else {
            let p = self.gpus[g].procs.remove(i);
            self.live_pids.remove(&p.pid);
            gone = Some(p);
        }
        match role {
            Role::Primary => {
                self.free.insert(g);
                let mean = ARRIVAL_MEAN_MS / f64::from(self.gpus[g].appetite);
                self.gpus[g].next_guest = i64::MAX;
                self.gpus[g].next_arrival = self.arrival_after(t, mean);
                if let Some(p) = gone.filter(|p| kind == Kind::Notebook && p.identity.k8s_pod_uid.is_some()) {
                    // Decided by a hash, so the random stream (and every
                    // other row) stays as it was.
                    let h = noise::mix(p.key ^ IDLE_POD_SALT);
                    if let Some(pod) = (h % 256 < IDLE_POD_SHARE).then_some(p.holder).flatten() {
                        let stays = IDLE_POD_MIN_MS + ((h >> 8) % IDLE_POD_SPREAD_MS as u64) as i64;
                        let until = (t + stays).min(self.gpus[g].next_arrival);
                        self.gpus[g].idle_pod = Some((pod, until));
                    }
                }
            }
            Role::Guest => {
                let notebook = self.gpus[g]
                    .procs
                    .iter()
                    .any(|p| p.role == Role::Primary && p.work.kind == Kind::Notebook);
                if notebook {
                    self.gpus[g].next_guest = self.guest_after(g, t);
                }
            }
            Role::Zombie => {}
        }
    }

    /// A job arrives at free GPU `g` at `t`.
    fn arrive(&mut self, g: usize, t: i64) {
        self.gpus[g].next_arrival = i64::MAX;
        let instance = self.gpus[g].profile.is_some();
        let kind = self.pick_kind(t, instance);
        let team = org::pick_team(&mut self.rng, self.home_team);
        let wanted = workload::memory_bytes(kind, &mut self.rng, self.gpus[g].fb_total_bytes(self.model));
        let mem = wanted.min(self.gpus[g].free_bytes(self.model)) & PAGE_MASK;
        if mem < MIN_JOB_BYTES {
            // Out of memory at start (a zombie holds it): the user tries later.
            let mean = ARRIVAL_MEAN_MS / f64::from(self.gpus[g].appetite);
            self.gpus[g].next_arrival = self.arrival_after(t, mean);
            return;
        }
        // Training on a MIG instance is small: one process, on it alone.
        let ranks = match (kind, self.rng.random::<f32>()) {
            _ if instance => 1,
            (Kind::Training, x) if x < 0.12 => 8,
            (Kind::Training, x) if x < 0.30 => 4,
            (Kind::Training, x) if x < 0.45 => 2,
            _ => 1,
        };
        let mut members = vec![g];
        // The whole GPUs after `g`, wrapping around, that have no primary:
        // only those can take a rank.
        for &j in self.free.range(g + 1..).chain(self.free.range(..g)) {
            if members.len() >= ranks {
                break;
            }
            if self.gpus[j].profile.is_none() && self.gpus[j].free_bytes(self.model) >= mem {
                members.push(j);
            }
        }
        let work = Work::new(kind, &mut self.rng, self.model, org::teams()[team].name == "vision");
        let end = t + workload::duration_ms(kind, &mut self.rng);
        let mut identity = org::identity(team, kind, &mut self.rng, &mut self.last_job);
        let held = holder(&identity);
        // Imports and setup run before the process opens its CUDA context.
        let launched = t - self.rng.random_range(2_000..40_000);
        for (rank, &j) in members.iter().enumerate() {
            let pid = self.next_pid(t, if rank == 0 { 400 } else { 3 });
            let started = launched + rank as i64 * self.rng.random_range(1..20);
            identity.proc_start = Some(started - started.rem_euclid(10));
            let key = self.rng.random();
            let proc = Proc {
                pid,
                identity: identity.clone(),
                holder: held.clone(),
                role: Role::Primary,
                work: work.clone(),
                start_ms: t,
                end_ms: end,
                mem_bytes: mem,
                key,
                tick_util: 0.0,
                tick_mem: 0,
            };
            self.live_pids.insert(pid);
            self.gpus[j].procs.push(proc);
            self.gpus[j].idle_pod = None;
            self.gpus[j].next_arrival = i64::MAX;
            self.free.remove(&j);
            self.dirty.push(j);
            if kind == Kind::Notebook {
                self.gpus[j].next_guest = self.guest_after(j, t);
            }
        }
    }

    /// Someone squeezes a debug run onto notebook GPU `g` at `t`.
    fn guest_arrives(&mut self, g: usize, t: i64) {
        self.gpus[g].next_guest = i64::MAX;
        let team = org::pick_team(&mut self.rng, self.home_team);
        let wanted =
            workload::memory_bytes(Kind::Debug, &mut self.rng, self.gpus[g].fb_total_bytes(self.model));
        let mem = wanted.min(self.gpus[g].free_bytes(self.model)) & PAGE_MASK;
        if mem < MIN_JOB_BYTES {
            self.gpus[g].next_guest = self.guest_after(g, t);
            return;
        }
        let work = Work::new(Kind::Debug, &mut self.rng, self.model, false);
        let end = t + workload::duration_ms(Kind::Debug, &mut self.rng);
        let mut identity = org::identity(team, Kind::Debug, &mut self.rng, &mut self.last_job);
        let started = t - self.rng.random_range(1_000..10_000);
        identity.proc_start = Some(started - started.rem_euclid(10));
        let pid = self.next_pid(t, 400);
        let key = self.rng.random();
        let proc = Proc {
            pid,
            holder: holder(&identity),
            identity,
            role: Role::Guest,
            work,
            start_ms: t,
            end_ms: end,
            mem_bytes: mem,
            key,
            tick_util: 0.0,
            tick_mem: 0,
        };
        self.live_pids.insert(pid);
        self.gpus[g].procs.push(proc);
    }

    /// What kind of job starts at `t`: more training launched for the
    /// night, more notebooks and debugging in office hours; inference boxes
    /// serve more, train less. On a MIG `instance`, notebooks, servers and
    /// debug runs more than training.
    fn pick_kind(&mut self, t: i64, instance: bool) -> Kind {
        const KINDS: [Kind; 4] = [Kind::Training, Kind::Inference, Kind::Notebook, Kind::Debug];
        let mut w = match (instance, calendar::office(t)) {
            (false, true) => [0.34, 0.03, 0.17, 0.46],
            (false, false) => [0.62, 0.05, 0.08, 0.25],
            (true, true) => [0.08, 0.12, 0.35, 0.45],
            (true, false) => [0.25, 0.30, 0.10, 0.35],
        };
        if !instance {
            w[0] *= self.model.training_bias;
            w[1] *= self.model.serving_bias;
        }
        let mut x = self.rng.random::<f32>() * w.iter().sum::<f32>();
        for (kind, weight) in KINDS.iter().zip(w) {
            x -= weight;
            if x < 0.0 {
                return *kind;
            }
        }
        Kind::Debug
    }

    /// The next arrival after `from` of a process with mean gap `mean_ms`
    /// at full rate, thinned by the calendar's start weight.
    fn arrival_after(&mut self, from: i64, mean_ms: f64) -> i64 {
        let mut t = from;
        // The weight is never 0, so this ends long before the bound.
        for _ in 0..100_000 {
            let gap = -(1.0 - self.rng.random::<f64>()).ln() * mean_ms;
            t += gap as i64 + 1_000;
            if self.rng.random::<f32>() < calendar::start_weight(t) {
                break;
            }
        }
        t
    }

    fn guest_after(&mut self, g: usize, from: i64) -> i64 {
        let mean = GUEST_MEAN_MS / f64::from(self.gpus[g].appetite);
        self.arrival_after(from, mean)
    }

    /// A free pid for a process started at `t`: after the last one, past
    /// those the host's other processes took since (their churn, and up to
    /// `max_step - 1` more). Pids wrap at `PID_MAX`.
    fn next_pid(&mut self, t: i64, max_step: i32) -> i32 {
        let since_s = (t - self.last_pid_ms).max(0) as f64 / 1_000.0;
        let churn = (since_s * self.pid_churn_per_s) as i64 % i64::from(PID_MAX - PID_WRAP_TO);
        self.last_pid_ms = self.last_pid_ms.max(t);
        self.last_pid += churn as i32;
        loop {
            self.last_pid += self.rng.random_range(1..=max_step);
            while self.last_pid >= PID_MAX {
                self.last_pid -= PID_MAX - PID_WRAP_TO;
            }
            let pid = self.last_pid;
            if !self.live_pids.contains(&pid) {
                return pid;
            }
        }
    }
}

/// The pod or Slurm job a process belongs to, as the cluster's books name
/// it; `None` for a process outside both.
pub(super) fn holder(id: &ProcIdentity) -> Option<Holder> {
    if id.k8s_pod_uid.is_some() {
        let mut holder =
            Holder::kubernetes(id.k8s_namespace.clone(), id.k8s_pod_name.clone(), id.k8s_container.clone());
        holder.k8s_labels.clone_from(&id.k8s_labels);
        return Some(holder);
    }
    let job = id.slurm_job_id.clone()?;
    Some(Holder::slurm(job, id.slurm_account.clone(), id.slurm_partition.clone(), id.user.clone()))
}
