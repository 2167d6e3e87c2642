//! Stretches of minutes in a row, followed GPU by GPU and process by
//! process as the days go by: a GPU idle long enough to reclaim
//! (`queries/reclaim.sql`) and a process holding memory on an idle GPU long
//! enough to be a zombie (`queries/zombies.sql`), by those queries' rules:
//! a minute missing, busy or of unknown activity breaks a stretch, and so
//! does a change of the GPU's host or index.

use std::collections::BTreeSet;

use crate::ledger::map::HashMap;

use apron_schemas::time::MINUTE_MS;

use super::minutes::{GpuMinute, ProcMinute, State, max_opt};

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
    pub host: u32,
    pub index: i32,
    pub since: i64,
    pub last: i64,
    pub minutes: i64,
    /// Its minutes, each counted by the capacity share of its GPU-minute
    /// (a MIG instance's slices of its parent's).
    pub gpu_minutes: f64,
    /// Whether it is a MIG instance's.
    pub instance: bool,
    pub about: T,
}

/// What a reclaim stretch records: the users who held memory during it.
pub type Holders = BTreeSet<u32>;

/// What a zombie stretch records.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub mem_max: Option<i64>,
    /// The process's command name, user and team at the stretch's last minute.
    pub comm: Option<u32>,
    pub user: u32,
    pub team: u32,
}

/// A process: GPU, pid, start.
pub type Process = (u32, i32, Option<i64>);

/// The stretches so far, open and closed.
#[derive(Debug)]
pub struct Runs {
    rules: Rules,
    idle: HashMap<u32, Stretch<Holders>>,
    holding: HashMap<Process, Stretch<Held>>,
    /// Closed stretches long enough to count.
    pub reclaim: Vec<(u32, Stretch<Holders>)>,
    pub zombies: Vec<(Process, Stretch<Held>)>,
    /// Each GPU's newest minute.
    pub newest: HashMap<u32, i64>,
    /// Each process's newest minute.
    pub last_seen: HashMap<Process, i64>,
}

impl Runs {
    pub fn new(rules: Rules) -> Self {
        Runs {
            rules,
            idle: HashMap::default(),
            holding: HashMap::default(),
            reclaim: Vec::new(),
            zombies: Vec::new(),
            newest: HashMap::default(),
            last_seen: HashMap::default(),
        }
    }

    /// The rules the stretches are found by.
    pub fn rules(&self) -> Rules {
        self.rules
    }

    /// Follows one GPU-minute with its processes; minutes come in order
    /// for each GPU.
    pub fn minute(&mut self, g: &GpuMinute, procs: &[ProcMinute]) {
        let newest = self.newest.entry(g.gpu).or_insert(g.minute);
        *newest = (*newest).max(g.minute);
        if g.state.is_idle() {
            let holders = procs.iter().filter(|p| p.held).map(|p| p.user);
            match self.idle.get_mut(&g.gpu) {
                Some(s) if continues(s, g) => {
                    s.last = g.minute;
                    s.minutes += 1;
                    s.gpu_minutes += g.capacity_share;
                    s.about.extend(holders);
                }
                _ => {
                    let fresh = start(g, holders.collect());
                    if let Some(old) = self.idle.insert(g.gpu, fresh) {
                        self.close_idle(g.gpu, old);
                    }
                }
            }
        }
        if g.state == State::IdleHeld {
            let min_mem = self.rules.zombie_min_mem_bytes;
            for p in procs.iter().filter(|p| p.held && p.mem_max.is_none_or(|m| m >= min_mem)) {
                let key = (p.gpu, p.pid, p.start);
                let now = Held { mem_max: p.mem_max, comm: p.comm, user: p.user, team: p.team };
                match self.holding.get_mut(&key) {
                    Some(s) if continues(s, g) => {
                        s.last = g.minute;
                        s.minutes += 1;
                        s.gpu_minutes += g.capacity_share;
                        s.about = Held { mem_max: max_opt(s.about.mem_max, p.mem_max), ..now };
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

    /// Notes a process-minute (with or without its GPU-minute).
    pub fn seen(&mut self, p: &ProcMinute) {
        let last = self.last_seen.entry((p.gpu, p.pid, p.start)).or_insert(p.minute);
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

    fn close_holding(&mut self, key: Process, s: Stretch<Held>) {
        if s.minutes >= self.rules.zombie_min_minutes {
            self.zombies.push((key, s));
        }
    }
}

fn continues<T>(s: &Stretch<T>, g: &GpuMinute) -> bool {
    s.last + MINUTE_MS == g.minute && s.host == g.host && s.index == g.index
}

fn start<T>(g: &GpuMinute, about: T) -> Stretch<T> {
    Stretch {
        host: g.host,
        index: g.index,
        since: g.minute,
        last: g.minute,
        minutes: 1,
        gpu_minutes: g.capacity_share,
        instance: g.parent.is_some(),
        about,
    }
}
