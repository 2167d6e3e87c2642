//! Each GPU's state over the last full UTC minute, for `/metrics`: the
//! definition of `queries/gpu_minute_states.sql` (the GPU-minute of docs/src/definitions.md),
//! applied to the ticks as they come instead of to the rollups.
//!
//! A GPU-minute's activity is its interval-weighted mean `gpu_util_pct`
//! where known, else its mean `sm_active_pct`; it is `busy` at or above the
//! idle threshold, else `idle_held` when some process held memory on the
//! GPU in the minute (a process whose highest `used_mem_bytes` is above 0
//! or unknown, as the rollups' `proc_held`) or the cluster had the GPU
//! allocated to a pod or a Slurm job (the tick's allocations, as
//! `alloc_minutes`), else `idle_empty`; `unknown`
//! with no activity known. A minute is reported once it is over: at the
//! first tick of a later minute.
//!
//! Steady state allocates nothing: the per-GPU and per-process entries are
//! kept and reused from minute to minute.

use apron_schemas::time::MINUTE_MS;
use apron_schemas::{AllocSample, GpuSample, ProcSample, Text};

pub use apron_schemas::minute_state::State;
use apron_schemas::minute_state::{WeightedMean, activity_pct, holds_memory};

/// One GPU's last full minute.
#[derive(Debug, Clone, PartialEq)]
pub struct MinuteReport {
    /// The GPU's UUID.
    pub gpu_uuid: Text,
    /// Its NVML index at its last sample.
    pub gpu_index: i32,
    /// Its model at its last sample.
    pub gpu_model: Option<Text>,
    /// The minute's start, ms since the Unix epoch (UTC).
    pub minute_ms: i64,
    /// Seconds recorded in the minute.
    pub seconds: f64,
    /// The minute's activity (%); `None`: unknown.
    pub activity_pct: Option<f64>,
    /// Processes seen on the GPU in the minute (distinct pid and start).
    pub procs: usize,
    /// The minute's state.
    pub state: State,
}

/// What one GPU's open minute has gathered so far.
#[derive(Debug, Default)]
struct Open {
    minute_ms: i64,
    interval_ms: i64,
    /// Mean `gpu_util_pct` and `sm_active_pct`, weighted by `interval_ms`.
    util: WeightedMean,
    sm: WeightedMean,
    /// (pid, start, highest used memory so far; `None`: unknown in every sample).
    procs: Vec<(i32, Option<i64>, Option<i64>)>,
    /// Whether the cluster had the GPU allocated at some tick of it.
    allocated: bool,
}

impl Open {
    fn reset(&mut self, minute_ms: i64) {
        self.minute_ms = minute_ms;
        self.interval_ms = 0;
        self.util = WeightedMean::default();
        self.sm = WeightedMean::default();
        self.procs.clear();
        self.allocated = false;
    }

    fn add_gpu(&mut self, g: &GpuSample) {
        let ms = i64::from(g.interval_ms.max(0));
        self.interval_ms += ms;
        // A tick's interval is at least 1 ms (the tick loop's), so a known
        // value always has weight.
        self.util.add(g.gpu_util_pct.map(f64::from), ms as f64);
        self.sm.add(g.sm_active_pct.map(f64::from), ms as f64);
    }

    fn add_proc(&mut self, p: &ProcSample) {
        let start = p.identity.proc_start;
        match self.procs.iter_mut().find(|(pid, s, _)| *pid == p.pid && *s == start) {
            Some((_, _, max)) => *max = (*max).max(p.used_mem_bytes),
            None => self.procs.push((p.pid, start, p.used_mem_bytes)),
        }
    }

    /// The minute's activity: mean utilization where known, else mean SM activity.
    fn activity(&self) -> Option<f64> {
        activity_pct(self.util.get(), self.sm.get())
    }

    fn held(&self) -> bool {
        self.allocated || self.procs.iter().any(|&(_, _, max)| holds_memory(max))
    }
}

#[derive(Debug)]
struct Entry {
    uuid: Text,
    index: i32,
    model: Option<Text>,
    open: Open,
    /// Whether `open` has had a sample.
    started: bool,
}

/// Each GPU's open minute and last full minute.
#[derive(Debug)]
pub struct MinuteStates {
    threshold_pct: f64,
    entries: Vec<Entry>,
    /// The last full minute of each GPU that has had one, in first-seen order.
    reports: Vec<MinuteReport>,
}

impl MinuteStates {
    /// No GPU seen yet; minutes with activity at or above `threshold_pct` are busy.
    pub fn new(threshold_pct: f64) -> Self {
        MinuteStates { threshold_pct, entries: Vec::new(), reports: Vec::new() }
    }

    /// Each GPU's last full minute (GPUs without one yet are absent).
    pub fn reports(&self) -> &[MinuteReport] {
        &self.reports
    }

    /// Adds one tick's rows and allocations; a GPU's minute that the tick
    /// ends is reported.
    pub fn add(&mut self, gpus: &[GpuSample], procs: &[ProcSample], allocations: &[AllocSample]) {
        for (position, g) in gpus.iter().enumerate() {
            let minute = g.ts.div_euclid(MINUTE_MS) * MINUTE_MS;
            let i = self.entry(position, &g.gpu_uuid);
            let e = &mut self.entries[i];
            e.index = g.gpu_index;
            if e.model != g.gpu_model {
                e.model.clone_from(&g.gpu_model);
            }
            if e.started && minute > e.open.minute_ms {
                let report = report(e, self.threshold_pct);
                match self.reports.iter_mut().find(|r| r.gpu_uuid == report.gpu_uuid) {
                    Some(r) => *r = report,
                    None => self.reports.push(report),
                }
            }
            if !e.started || minute > e.open.minute_ms {
                e.open.reset(minute);
                e.started = true;
            }
            // A clock that stepped back: the sample joins the open minute.
            e.open.add_gpu(g);
        }
        for p in procs {
            if let Some(e) = self.entries.iter_mut().find(|e| e.uuid == p.gpu_uuid) {
                e.open.add_proc(p);
            }
        }
        for a in allocations {
            if let Some(e) = self.entries.iter_mut().find(|e| e.uuid == a.gpu_uuid) {
                e.open.allocated = true;
            }
        }
    }

    /// The entry of the GPU `uuid`, created when new; `hint` is where it
    /// usually is (GPUs come in the same order each tick).
    fn entry(&mut self, hint: usize, uuid: &Text) -> usize {
        if self.entries.get(hint).is_some_and(|e| e.uuid == *uuid) {
            return hint;
        }
        if let Some(i) = self.entries.iter().position(|e| e.uuid == *uuid) {
            return i;
        }
        self.entries.push(Entry {
            uuid: uuid.clone(),
            index: 0,
            model: None,
            open: Open::default(),
            started: false,
        });
        self.entries.len() - 1
    }
}

fn report(e: &Entry, threshold_pct: f64) -> MinuteReport {
    let activity = e.open.activity();
    let state = State::of(activity, threshold_pct, e.open.held());
    MinuteReport {
        gpu_uuid: e.uuid.clone(),
        gpu_index: e.index,
        gpu_model: e.model.clone(),
        minute_ms: e.open.minute_ms,
        seconds: e.open.interval_ms as f64 / 1000.0,
        activity_pct: activity,
        procs: e.open.procs.len(),
        state,
    }
}
