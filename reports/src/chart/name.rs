//! The names of apron's charts ([`ChartName`]): the CLI word, the PNG's
//! file name and the title each chart draws, and the error for a name that
//! is none of them. Which chart draws what is left to the chart modules.

use std::fmt;
use std::str::FromStr;

/// One of apron's charts; its [`name`](ChartName::name) is the CLI word and
/// the PNG's file stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChartName {
    /// GPUs busy, idle with memory held, and idle and empty, over time.
    FleetState,
    /// Idle cost per team, ranked.
    IdleCost,
    /// Busy and idle spend per team, stacked.
    TeamSpend,
    /// Mean utilization by weekday and hour (UTC).
    HourOfWeek,
    /// Busy share of every physical GPU on every day.
    GpuDays,
    /// Fleet power and cumulative energy.
    Power,
    /// One GPU's activity and memory while a job held it (`apron job`); not
    /// one of the report's charts, so not in [`ChartName::ALL`].
    JobTimeline,
}

impl ChartName {
    /// Every chart, in report order.
    pub const ALL: [ChartName; 6] = [
        ChartName::FleetState,
        ChartName::IdleCost,
        ChartName::TeamSpend,
        ChartName::HourOfWeek,
        ChartName::GpuDays,
        ChartName::Power,
    ];

    /// The chart's name: `"fleet-state"`, `"idle-cost"`, `"team-spend"`,
    /// `"hour-of-week"`, `"gpu-days"`, `"power"`.
    pub fn name(self) -> &'static str {
        match self {
            ChartName::FleetState => "fleet-state",
            ChartName::IdleCost => "idle-cost",
            ChartName::TeamSpend => "team-spend",
            ChartName::HourOfWeek => "hour-of-week",
            ChartName::GpuDays => "gpu-days",
            ChartName::Power => "power",
            ChartName::JobTimeline => "job-timeline",
        }
    }

    /// The PNG file name the report uses, e.g. `"fleet-state.png"`.
    pub fn file_name(self) -> String {
        format!("{}.png", self.name())
    }

    /// The title drawn on the chart and used as its alt text.
    pub fn title(self) -> &'static str {
        match self {
            ChartName::FleetState => "Fleet state: busy and idle GPUs over time",
            ChartName::IdleCost => "Idle cost by team",
            ChartName::TeamSpend => "Spend by team: busy and idle",
            ChartName::HourOfWeek => "GPU activity by hour of the week",
            ChartName::GpuDays => "Busy share of every GPU, day by day",
            ChartName::Power => "Fleet power and energy",
            ChartName::JobTimeline => "A job's GPU: activity and memory",
        }
    }
}

impl fmt::Display for ChartName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A chart name that is none of [`ChartName::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown chart '{given}'; known charts: {}", known_names())]
pub struct UnknownChart {
    /// The name as given.
    pub given: String,
}

fn known_names() -> String {
    ChartName::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

impl FromStr for ChartName {
    type Err = UnknownChart;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChartName::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| UnknownChart { given: s.to_owned() })
    }
}
