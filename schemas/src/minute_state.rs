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
}
