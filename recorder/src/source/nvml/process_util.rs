//! Per-process utilization: which of NVML's samples count, and what a
//! listed process without one measured. Pure, so the rules are unit-tested
//! without a driver; the NVML call itself is [`super::raw`]'s.
//!
//! `nvmlDeviceGetProcessUtilization` returns samples only for processes
//! whose utilization was non-zero in the period: a process on the GPU's
//! list without a sample computed nothing, a measured 0 (as nvitop and
//! nvtop record it). Samples are filtered as nvtop does: the pid is on the
//! list, `smUtil` and `memUtil` are at most 100, and the timestamp is newer
//! than the last one seen. Timestamps are the CPU's wall clock in µs; when
//! that clock steps back, the last seen lies in the future and would hide
//! every new sample, so it is moved back to the tick.

use std::collections::HashMap;

/// One sample as NVML gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtilSample {
    /// Host pid.
    pub pid: u32,
    /// CPU timestamp, µs since the Unix epoch.
    pub timestamp_us: u64,
    /// SM utilization, percent.
    pub sm_util: u32,
    /// Memory controller utilization, percent.
    pub mem_util: u32,
}

/// The window of samples a tick takes: newer than `since_us` (what NVML is
/// asked for, its `lastSeenTimeStamp`) and not after `until_us` (samples
/// from beyond the tick are from before a clock step back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Exclusive lower bound, µs.
    pub since_us: u64,
    /// Inclusive upper bound, µs.
    pub until_us: u64,
}

impl Window {
    /// The window of the tick at `tick_ms` (ms since the epoch) that stands
    /// for `interval_ms`, given the newest timestamp seen at earlier ticks.
    /// A last seen more than two intervals after the tick means the clock
    /// stepped back: the window starts an interval before the tick instead.
    pub fn for_tick(last_seen_us: Option<u64>, tick_ms: i64, interval_ms: i32) -> Window {
        let tick_us = u64::try_from(tick_ms).unwrap_or(0).saturating_mul(1000);
        let interval_us = u64::try_from(interval_ms).unwrap_or(0).saturating_mul(1000);
        let until_us = tick_us.saturating_add(2 * interval_us);
        let since_us = match last_seen_us {
            Some(seen) if seen > until_us => tick_us.saturating_sub(interval_us),
            Some(seen) => seen,
            None => 0,
        };
        Window { since_us, until_us }
    }
}

/// What one listed process's utilization is this tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcUtil {
    /// Its newest valid sample: SM and memory utilization, percent.
    Sampled {
        /// SM utilization, percent.
        sm_util: u32,
        /// Memory controller utilization, percent.
        mem_util: u32,
    },
    /// No sample: it computed nothing in the period, a measured 0.
    Idle,
    /// Only samples with impossible values (over 100%): unknown.
    Invalid,
}

/// The samples of one tick sorted out per listed process.
#[derive(Debug, Default)]
pub struct Picked {
    /// Per listed pid that had at least one sample in the window: its newest
    /// valid one, or `None` when none was valid.
    per_pid: HashMap<u32, Option<(u64, u32, u32)>>,
    /// The newest timestamp in the window, of any pid: the next tick's
    /// last seen.
    pub newest_us: Option<u64>,
}

impl Picked {
    /// Sorts `samples` out for the processes `listed`, keeping only those in
    /// `window`.
    pub fn new(samples: &[UtilSample], listed: &[u32], window: Window) -> Picked {
        let mut picked = Picked::default();
        picked.refill(samples, listed, window);
        picked
    }

    /// [`Picked::new`] in place: forgets what was picked before, keeping
    /// the allocation (a worker picks every tick).
    pub fn refill(&mut self, samples: &[UtilSample], listed: &[u32], window: Window) {
        self.per_pid.clear();
        self.newest_us = None;
        for s in samples {
            if s.timestamp_us <= window.since_us || s.timestamp_us > window.until_us {
                continue;
            }
            self.newest_us = self.newest_us.max(Some(s.timestamp_us));
            if !listed.contains(&s.pid) {
                continue;
            }
            let slot = self.per_pid.entry(s.pid).or_insert(None);
            if s.sm_util > 100 || s.mem_util > 100 {
                continue;
            }
            if slot.is_none_or(|(t, _, _)| s.timestamp_us > t) {
                *slot = Some((s.timestamp_us, s.sm_util, s.mem_util));
            }
        }
    }

    /// What process `pid` (on the list) did.
    pub fn get(&self, pid: u32) -> ProcUtil {
        match self.per_pid.get(&pid) {
            None => ProcUtil::Idle,
            Some(None) => ProcUtil::Invalid,
            Some(Some((_, sm_util, mem_util))) => {
                ProcUtil::Sampled { sm_util: *sm_util, mem_util: *mem_util }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(pid: u32, timestamp_us: u64, sm_util: u32, mem_util: u32) -> UtilSample {
        UtilSample { pid, timestamp_us, sm_util, mem_util }
    }

    const ALL: Window = Window { since_us: 0, until_us: u64::MAX };

    #[test]
    fn the_newest_valid_sample_of_a_listed_pid_wins() {
        let samples =
            [s(1, 200, 40, 1), s(2, 900, 10, 2), s(1, 150, 99, 3), s(1, 300, 101, 4), s(7, 950, 5, 5)];
        let picked = Picked::new(&samples, &[1, 2, 3], ALL);
        assert_eq!(picked.get(1), ProcUtil::Sampled { sm_util: 40, mem_util: 1 });
        assert_eq!(picked.get(2), ProcUtil::Sampled { sm_util: 10, mem_util: 2 });
        // Listed without a sample: idle, a measured 0.
        assert_eq!(picked.get(3), ProcUtil::Idle);
        assert_eq!(picked.newest_us, Some(950));
    }

    #[test]
    fn a_refill_forgets_the_tick_before() {
        let mut picked = Picked::new(&[s(1, 200, 40, 1), s(2, 300, 9, 9)], &[1, 2], ALL);
        picked.refill(&[s(2, 400, 10, 2)], &[1, 2], ALL);
        assert_eq!(picked.get(1), ProcUtil::Idle);
        assert_eq!(picked.get(2), ProcUtil::Sampled { sm_util: 10, mem_util: 2 });
        assert_eq!(picked.newest_us, Some(400));
        picked.refill(&[], &[1, 2], ALL);
        assert_eq!((picked.get(2), picked.newest_us), (ProcUtil::Idle, None));
    }

    #[test]
    fn impossible_values_alone_are_unknown() {
        let picked = Picked::new(&[s(1, 10, 250, 0), s(2, 10, 5, 101)], &[1, 2], ALL);
        assert_eq!(picked.get(1), ProcUtil::Invalid);
        assert_eq!(picked.get(2), ProcUtil::Invalid);
    }

    #[test]
    fn samples_outside_the_window_are_dropped() {
        let window = Window { since_us: 100, until_us: 1_000 };
        let picked = Picked::new(&[s(1, 100, 50, 50), s(1, 2_000, 60, 60), s(2, 101, 7, 8)], &[1, 2], window);
        assert_eq!(picked.get(1), ProcUtil::Idle);
        assert_eq!(picked.get(2), ProcUtil::Sampled { sm_util: 7, mem_util: 8 });
        assert_eq!(picked.newest_us, Some(101));
    }

    #[test]
    fn the_window_follows_a_clock_that_stepped_back() {
        // Steady: from the last seen to two intervals past the tick.
        assert_eq!(
            Window::for_tick(Some(9_500_000), 10_000, 1_000),
            Window { since_us: 9_500_000, until_us: 12_000_000 }
        );
        assert_eq!(Window::for_tick(None, 10_000, 1_000), Window { since_us: 0, until_us: 12_000_000 });
        // The clock went back an hour: the last seen is in the future.
        let tick_ms = 10_000_000;
        let seen = (tick_ms as u64 + 3_600_000) * 1000;
        assert_eq!(
            Window::for_tick(Some(seen), tick_ms, 1_000),
            Window { since_us: (tick_ms as u64 - 1_000) * 1000, until_us: (tick_ms as u64 + 2_000) * 1000 }
        );
    }
}
