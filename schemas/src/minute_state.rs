//! A GPU-minute's state: the one definition (docs/src/definitions.md) of busy, idle-held,
//! idle-empty and unknown, for the Rust code that applies it (the
//! analysis ledger, the recorder's `/metrics`). `queries/gpu_minute_states.sql`
//! states the same rule in SQL; tests hold the two to each other.

/// A GPU-minute's state (`gpu_minute_states.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// Activity at or above the idle threshold.
    Busy,
    /// Below it, with some process holding memory on the GPU.
    IdleHeld,
    /// Below it, with none.
    IdleEmpty,
    /// Neither utilization nor SM activity known: never counted as idle or
    /// as busy.
    Unknown,
}

impl State {
    /// Every state, in the order they are listed.
    pub const ALL: [State; 4] = [State::Busy, State::IdleHeld, State::IdleEmpty, State::Unknown];

    /// The state of a minute whose activity (mean `gpu_util_pct` where
    /// known, else mean `sm_active_pct`; `None`: neither known) and
    /// whether a process held memory on the GPU are given, at the idle
    /// threshold `threshold_pct`.
    pub fn of(activity_pct: Option<f64>, threshold_pct: f64, held: bool) -> State {
        match activity_pct {
            None => State::Unknown,
            Some(a) if a >= threshold_pct => State::Busy,
            Some(_) if held => State::IdleHeld,
            Some(_) => State::IdleEmpty,
        }
    }

    /// As the views spell it.
    pub fn name(self) -> &'static str {
        match self {
            State::Busy => "busy",
            State::IdleHeld => "idle_held",
            State::IdleEmpty => "idle_empty",
            State::Unknown => "unknown",
        }
    }

    /// Whether the minute counts as idle.
    pub fn is_idle(self) -> bool {
        matches!(self, State::IdleHeld | State::IdleEmpty)
    }
}

/// A minute's activity (%) from its mean utilization and mean SM activity:
/// utilization where known, else SM activity; `None` when neither is.
pub fn activity_pct(util_pct: Option<f64>, sm_active_pct: Option<f64>) -> Option<f64> {
    util_pct.or(sm_active_pct)
}

/// Whether a process held memory on its GPU in a minute, from the most
/// memory its samples there show (`used_mem_bytes_max`): above 0, or
/// unknown (NVML lists a process on a GPU only while it has a context there,
/// and a context is memory). The rollups' `proc_held`, the ledger's and
/// `/metrics`' idle-held all read it here.
pub fn holds_memory(used_mem_bytes_max: Option<i64>) -> bool {
    used_mem_bytes_max.is_none_or(|m| m > 0)
}

/// A weighted mean in the making, as the views take a mean: the sum of
/// value × weight, and of the weights where the value is known (seconds
/// or milliseconds); `None` while no value is known.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct WeightedMean {
    weighted: f64,
    weight: Option<f64>,
}

impl WeightedMean {
    /// Adds `value` (ignored when `None`) weighing `weight`.
    pub fn add(&mut self, value: Option<f64>, weight: f64) {
        if let Some(v) = value {
            self.weighted += v * weight;
            self.weight = Some(self.weight.unwrap_or(0.0) + weight);
        }
    }

    /// The mean so far; `None` when no value was known.
    pub fn get(self) -> Option<f64> {
        self.weight.map(|w| self.weighted / w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_itself_is_busy_and_held_decides_idle() {
        assert_eq!(State::of(Some(5.0), 5.0, false), State::Busy);
        assert_eq!(State::of(Some(4.999), 5.0, true), State::IdleHeld);
        assert_eq!(State::of(Some(0.0), 5.0, false), State::IdleEmpty);
        assert_eq!(State::of(None, 5.0, true), State::Unknown);
        assert!(State::IdleEmpty.is_idle() && !State::Unknown.is_idle() && !State::Busy.is_idle());
        let names: Vec<_> = State::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["busy", "idle_held", "idle_empty", "unknown"]);
    }

    #[test]
    fn activity_is_utilization_else_sm_and_unknown_memory_is_held() {
        assert_eq!(activity_pct(Some(3.0), Some(90.0)), Some(3.0));
        assert_eq!(activity_pct(None, Some(90.0)), Some(90.0));
        assert_eq!(activity_pct(None, None), None);
        assert!(holds_memory(None) && holds_memory(Some(1)) && !holds_memory(Some(0)));
        let mut mean = WeightedMean::default();
        assert_eq!(mean.get(), None);
        mean.add(Some(10.0), 30.0);
        mean.add(None, 1000.0);
        mean.add(Some(40.0), 10.0);
        // (10 × 30 + 40 × 10) / 40, the unknown part not counted.
        assert_eq!(mean.get(), Some(17.5));
    }
}
