//! Stretches of minutes in a row, followed GPU by GPU and process by
//! process as the days go by: a GPU idle long enough to reclaim
//! (`queries/reclaim.sql`) and a process holding memory on an idle GPU long
//! enough to be a zombie (`queries/zombies.sql`), by those queries' rules:
//! a minute missing, busy or of unknown activity breaks a stretch, and so
//! does a change of the GPU's host or index. A partitioned GPU's own row
//! (the MIG slices no instance holds) is never a reclaim stretch. A process's stretch also
//! sums what its GPU did meanwhile ([`Traffic`]), which tells a zombie from
//! a process starved of data (`queries/starved.sql`); the reports tell the
//! two apart ([`crate::report::figures::zombies`]).

use std::collections::BTreeSet;

use crate::ledger::map::HashMap;

use apron_schemas::time::{DAY_MS, HOUR_MS, MINUTE_MS};

use super::minutes::{AllocMinuteState, GpuMinuteState, ProcMinuteState, State, max_opt};

/// What the stretches must be to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// Least memory a zombie holds (bytes); an unknown amount counts.
    pub zombie_min_mem_bytes: i64,
    /// Shortest zombie stretch (minutes).
    pub zombie_min_minutes: i64,
    /// Shortest reclaim stretch (minutes).
    pub reclaim_min_minutes: i64,
}

/// A stretch of consecutive minutes.
#[derive(Debug, Clone)]
pub struct Stretch<T> {
    /// The GPU's host, as an interned id in [`Names`](super::read::Names).
    pub host: u32,
    /// The GPU's NVML index (`gpu_index`).
    pub gpu_index: i32,
    /// Its first minute (ms since the epoch, UTC).
    pub since: i64,
    /// Its last minute (ms since the epoch, UTC).
    pub last: i64,
    /// Its length (minutes).
    pub minutes: i64,
    /// Its minutes, each counted by the capacity share of its GPU-minute
    /// (a MIG instance's slices of its parent's).
    pub gpu_minutes: f64,
    /// Whether it is a MIG instance's.
    pub instance: bool,
    /// What it records: [`Holders`] for a reclaim stretch, [`Holding`] for a zombie's.
    pub about: T,
}

/// What a reclaim stretch records: the users who held memory during it,
/// and the pods and Slurm jobs the GPU was allocated to meanwhile.
#[derive(Debug, Clone, Default)]
pub struct Holders {
    /// The users as shown, as interned ids.
    pub users: BTreeSet<u32>,
    /// The holders as shown ("pod NAMESPACE/POD", "job N"), as interned ids.
    pub allocated: BTreeSet<u32>,
}

/// What a zombie stretch records: the process holding memory on the idle GPU.
#[derive(Debug, Clone, Copy)]
pub struct Holding {
    /// The most memory it held over the stretch (`used_mem_bytes`; bytes; `None`: unknown).
    pub used_mem_bytes: Option<i64>,
    /// The process's command name at the stretch's last minute, as an
    /// interned id in [`Names`](super::read::Names); `None`: unknown. Its
    /// user and team below are also the last minute's.
    pub comm: Option<u32>,
    /// Its user as shown, as an interned id in [`Names`](super::read::Names).
    pub user: u32,
    /// Its team, as an interned id in [`Names`](super::read::Names).
    pub team: u32,
    /// What its GPU did over the stretch.
    pub traffic: Traffic,
    /// What ending it after the zombie rule would have freed: its share of
    /// its minutes past the rule, and of those the minutes reclaiming its
    /// GPU would not have freed anyway ([`StretchFinder::free`]).
    pub freed: Freed,
    /// Of `freed`, what reclaiming its GPU would not have freed anyway.
    pub freed_alone: Freed,
}

/// GPU-seconds and their cost, and of that cost the cash that using them
/// less would not spend: their energy, and their operating cost where the
/// config says it is avoidable.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Freed {
    /// GPU-seconds (s).
    pub seconds: f64,
    /// Their exact cost (currency).
    pub cost: f64,
    /// The energy's part of `cost`.
    pub energy_cost: f64,
    /// The avoidable operating cost's part of `cost` (0 where the config
    /// does not mark it avoidable).
    pub ops_cost: f64,
}

impl Freed {
    /// Adds `other`.
    pub fn add(&mut self, other: Freed) {
        self.seconds += other.seconds;
        self.cost += other.cost;
        self.energy_cost += other.energy_cost;
        self.ops_cost += other.ops_cost;
    }

    /// Its part `share` (0–1).
    pub fn scaled(self, share: f64) -> Freed {
        Freed {
            seconds: self.seconds * share,
            cost: self.cost * share,
            energy_cost: self.energy_cost * share,
            ops_cost: self.ops_cost * share,
        }
    }
}

/// The hour of the week of the minute starting at `ms` (milliseconds since
/// the epoch): 0 for Monday 00:00–01:00 UTC, 167 for Sunday 23:00.
pub fn hour_of_week(ms: i64) -> usize {
    // 1 January 1970 was a Thursday, day 3 of a week from Monday.
    let day = (ms.div_euclid(DAY_MS) + 3).rem_euclid(7);
    (day * 24 + ms.rem_euclid(DAY_MS) / HOUR_MS) as usize
}

/// What a GPU did over the minutes of a stretch, as sums of value ×
/// seconds and of the seconds where the value is known, from which
/// `queries/starved.sql`'s seconds-weighted means come.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    seconds: f64,
    activity: f64,
    rx: f64,
    rx_seconds: f64,
    tx: f64,
    tx_seconds: f64,
}

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

impl Traffic {
    /// These sums with the GPU-minute `g`'s added.
    pub fn with(self, g: &GpuMinuteState) -> Traffic {
        let weighted = |sum: f64, known: f64, value: Option<f64>| match value {
            Some(v) => (sum + v * g.seconds, known + g.seconds),
            None => (sum, known),
        };
        let (activity, _) = weighted(self.activity, 0.0, g.activity_pct);
        let (rx, rx_seconds) = weighted(self.rx, self.rx_seconds, g.pcie_rx_bytes_per_s);
        let (tx, tx_seconds) = weighted(self.tx, self.tx_seconds, g.pcie_tx_bytes_per_s);
        Traffic { seconds: self.seconds + g.seconds, activity, rx, rx_seconds, tx, tx_seconds }
    }

    /// The GPU's mean activity (%); `None` without a recorded second.
    pub fn activity_pct(&self) -> Option<f64> {
        (self.seconds > 0.0).then(|| self.activity / self.seconds)
    }

    /// Mean PCIe traffic into the GPU (MiB/s); `None` when unknown throughout.
    pub fn rx_mib_per_s(&self) -> Option<f64> {
        (self.rx_seconds > 0.0).then(|| self.rx / self.rx_seconds / MIB)
    }

    /// Mean PCIe traffic out of the GPU (MiB/s); `None` when unknown throughout.
    pub fn tx_mib_per_s(&self) -> Option<f64> {
        (self.tx_seconds > 0.0).then(|| self.tx / self.tx_seconds / MIB)
    }
}

/// A process: GPU, pid, start.
pub type Process = (u32, i32, Option<i64>);

/// The stretches so far, open and closed.
#[derive(Debug)]
pub struct StretchFinder {
    rules: Rules,
    idle: HashMap<u32, Stretch<Holders>>,
    holding: HashMap<Process, Stretch<Holding>>,
    /// Closed reclaim stretches long enough to count, by GPU (interned
    /// `gpu_uuid`).
    pub reclaim: Vec<(u32, Stretch<Holders>)>,
    /// Closed zombie stretches long enough to count, by process.
    pub zombies: Vec<(Process, Stretch<Holding>)>,
    /// Each GPU's newest minute.
    pub newest: HashMap<u32, i64>,
    /// Each process's newest minute.
    pub last_seen: HashMap<Process, i64>,
    /// Each (GPU, holder)'s first allocated minute of the period.
    pub first_allocated: HashMap<(u32, u32), i64>,
    /// What ending each zombie stretch (process, first minute) would have
    /// freed that reclaiming its GPU would not, by hour of the week: cost.
    pub alone_at: HashMap<(Process, i64, usize), f64>,
}

impl StretchFinder {
    /// No stretches yet, to be found by `rules`.
    pub fn new(rules: Rules) -> Self {
        StretchFinder {
            rules,
            idle: HashMap::default(),
            holding: HashMap::default(),
            reclaim: Vec::new(),
            zombies: Vec::new(),
            newest: HashMap::default(),
            first_allocated: HashMap::default(),
            last_seen: HashMap::default(),
            alone_at: HashMap::default(),
        }
    }

    /// The rules the stretches are found by.
    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// Follows one GPU-minute with its processes and allocations; minutes come in order
    /// for each GPU.
    pub fn minute(&mut self, g: &GpuMinuteState, procs: &[ProcMinuteState], allocated: &[AllocMinuteState]) {
        let newest = self.newest.entry(g.gpu_uuid).or_insert(g.minute);
        *newest = (*newest).max(g.minute);
        // A partitioned GPU's own row is capacity no instance holds: not a
        // GPU anyone could hand back (its stretches would be the MIG
        // layout's, not idleness), so it starts no reclaim stretch.
        if g.state.is_idle() && !g.partitioned() {
            let users = procs.iter().filter(|p| p.held).map(|p| p.user);
            let holders = allocated.iter().map(|a| a.holder);
            match self.idle.get_mut(&g.gpu_uuid) {
                Some(s) if continues(s, g) => {
                    s.last = g.minute;
                    s.minutes += 1;
                    s.gpu_minutes += g.capacity_share;
                    s.about.users.extend(users);
                    s.about.allocated.extend(holders);
                }
                _ => {
                    let fresh = start(g, Holders { users: users.collect(), allocated: holders.collect() });
                    if let Some(old) = self.idle.insert(g.gpu_uuid, fresh) {
                        self.close_idle(g.gpu_uuid, old);
                    }
                }
            }
        }
        if g.state == State::IdleHeld {
            let min_mem = self.rules.zombie_min_mem_bytes;
            for p in procs.iter().filter(|p| p.held && p.used_mem_bytes.is_none_or(|m| m >= min_mem)) {
                let key = (p.gpu_uuid, p.pid, p.proc_start);
                let traffic = Traffic::default().with(g);
                let (freed, freed_alone) = (Freed::default(), Freed::default());
                let now = Holding {
                    used_mem_bytes: p.used_mem_bytes,
                    comm: p.comm,
                    user: p.user,
                    team: p.team,
                    traffic,
                    freed,
                    freed_alone,
                };
                match self.holding.get_mut(&key) {
                    Some(s) if continues(s, g) => {
                        s.last = g.minute;
                        s.minutes += 1;
                        s.gpu_minutes += g.capacity_share;
                        let traffic = s.about.traffic.with(g);
                        let (freed, freed_alone) = (s.about.freed, s.about.freed_alone);
                        let mem_max = max_opt(s.about.used_mem_bytes, p.used_mem_bytes);
                        s.about = Holding { used_mem_bytes: mem_max, traffic, freed, freed_alone, ..now };
                    }
                    _ => {
                        if let Some(old) = self.holding.insert(key, start(g, now)) {
                            self.close_holding(key, old);
                        }
                    }
                }
            }
        }
    }

    /// How many minutes GPU `gpu` has been idle in a row up to `minute`
    /// (counting it), if it is idle then: call after [`StretchFinder::minute`].
    pub fn idle_for(&self, gpu: u32, minute: i64) -> Option<i64> {
        self.idle.get(&gpu).filter(|s| s.last == minute).map(|s| s.minutes)
    }

    /// How many minutes process `key` has held memory on its idle GPU in a
    /// row up to `minute` (counting it), if it did then: call after
    /// [`StretchFinder::minute`].
    pub fn holding_for(&self, key: Process, minute: i64) -> Option<i64> {
        self.holding.get(&key).filter(|s| s.last == minute).map(|s| s.minutes)
    }

    /// Adds to what ending process `key`'s open stretch would have freed
    /// of the minute starting at `minute`: `part`, `alone` when reclaiming
    /// its GPU would not have freed it.
    pub fn free(&mut self, key: Process, minute: i64, part: Freed, alone: bool) {
        if let Some(s) = self.holding.get_mut(&key) {
            s.about.freed.add(part);
            if alone {
                s.about.freed_alone.add(part);
                *self.alone_at.entry((key, s.since, hour_of_week(minute))).or_default() += part.cost;
            }
        }
    }

    /// Notes an allocation-minute (with or without its GPU-minute): the
    /// first minute of the period its holder held its GPU.
    pub fn allocated(&mut self, a: &AllocMinuteState) {
        let first = self.first_allocated.entry((a.gpu_uuid, a.holder)).or_insert(a.minute);
        *first = (*first).min(a.minute);
    }

    /// Notes a process-minute (with or without its GPU-minute).
    pub fn seen(&mut self, p: &ProcMinuteState) {
        let last = self.last_seen.entry((p.gpu_uuid, p.pid, p.proc_start)).or_insert(p.minute);
        *last = (*last).max(p.minute);
    }

    /// Closes every open stretch: the period is over.
    pub fn finish(&mut self) {
        for (gpu, s) in std::mem::take(&mut self.idle) {
            self.close_idle(gpu, s);
        }
        for (key, s) in std::mem::take(&mut self.holding) {
            self.close_holding(key, s);
        }
    }

    fn close_idle(&mut self, gpu: u32, s: Stretch<Holders>) {
        if s.minutes >= self.rules.reclaim_min_minutes {
            self.reclaim.push((gpu, s));
        }
    }

    fn close_holding(&mut self, key: Process, s: Stretch<Holding>) {
        if s.minutes >= self.rules.zombie_min_minutes {
            self.zombies.push((key, s));
        }
    }
}

fn continues<T>(s: &Stretch<T>, g: &GpuMinuteState) -> bool {
    s.last + MINUTE_MS == g.minute && s.host == g.host && s.gpu_index == g.gpu_index
}

fn start<T>(g: &GpuMinuteState, about: T) -> Stretch<T> {
    Stretch {
        host: g.host,
        gpu_index: g.gpu_index,
        since: g.minute,
        last: g.minute,
        minutes: 1,
        gpu_minutes: g.capacity_share,
        instance: g.parent_gpu_uuid.is_some(),
        about,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_of_the_week_start_on_monday_utc() {
        // Monday 2 November 2026 00:00 UTC, and 10:30 that day.
        let monday = 1_793_577_600_000;
        assert_eq!(hour_of_week(monday), 0);
        assert_eq!(hour_of_week(monday + 10 * HOUR_MS + 30 * MINUTE_MS), 10);
        assert_eq!(hour_of_week(monday - MINUTE_MS), 167, "Sunday 23:59");
        assert_eq!(hour_of_week(0), 3 * 24, "1 January 1970 was a Thursday");
    }
}
