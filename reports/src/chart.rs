//! The six PNG charts of apron's monthly report, and the types they take.
//!
//! Each chart is a function from a plain data series to a PNG file:
//! [`fleet_state`], [`idle_cost`], [`team_spend`], [`hour_of_week`],
//! [`gpu_days`], [`power`]. The caller computes the series (in apron that is
//! apron-analyze, from SQL); this module only draws. Every chart has a
//! title, axis titles with units, a legend when it shows more than one
//! series, and a footer with the period and the data folder. An empty series
//! draws the same frame with "no data in this period" in the middle.
//!
//! Files are written atomically, so re-running a report overwrites cleanly.
//! Times are UTC milliseconds since the Unix epoch, shown in UTC.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::fonts::FontError;

mod axis;
mod canvas;
mod fleet_state;
mod frame;
mod gpu_days;
mod heatmap;
mod hour_of_week;
mod idle_cost;
mod legend;
mod palette;
mod power;
mod team_bars;
mod team_spend;
mod text;
mod time_axis;

pub use fleet_state::fleet_state;
pub use gpu_days::gpu_days;
pub use hour_of_week::hour_of_week;
pub use idle_cost::idle_cost;
pub use power::power;
pub use team_spend::team_spend;

/// What every chart needs besides its series: the words for the footer, the
/// currency for money axes, and the canvas size in pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartContext {
    /// The report period as the reader should see it, e.g.
    /// `"2026-11-01 00:00 – 2026-12-01 00:00 UTC"`.
    pub period: String,
    /// The data folder the figures came from, as the user gave it.
    pub data: String,
    /// ISO 4217 code of every money amount, e.g. `"USD"`; see [`crate::money`].
    pub currency: String,
    /// Canvas width in pixels (at least [`ChartContext::MIN_WIDTH`]).
    pub width: u32,
    /// Canvas height in pixels (at least [`ChartContext::MIN_HEIGHT`]).
    pub height: u32,
}

impl ChartContext {
    /// Default canvas width in pixels.
    pub const DEFAULT_WIDTH: u32 = 1600;
    /// Default canvas height in pixels.
    pub const DEFAULT_HEIGHT: u32 = 900;
    /// Smallest canvas width a chart accepts, in pixels.
    pub const MIN_WIDTH: u32 = 480;
    /// Smallest canvas height a chart accepts, in pixels.
    pub const MIN_HEIGHT: u32 = 320;
    /// Largest canvas width or height a chart accepts, in pixels.
    pub const MAX_SIDE: u32 = 8000;

    /// A context for a 1600x900 canvas.
    pub fn new(period: impl Into<String>, data: impl Into<String>, currency: impl Into<String>) -> Self {
        Self {
            period: period.into(),
            data: data.into(),
            currency: currency.into(),
            width: Self::DEFAULT_WIDTH,
            height: Self::DEFAULT_HEIGHT,
        }
    }

    /// The same context with another canvas size in pixels.
    pub fn with_size(mut self, width: u32, height: u32) -> Self {
        self.width = width;
        self.height = height;
        self
    }
}

impl Default for ChartContext {
    fn default() -> Self {
        Self::new("", "", "USD")
    }
}

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
    /// Mean utilization of every GPU on every day.
    GpuDays,
    /// Fleet power and cumulative energy.
    Power,
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
            ChartName::HourOfWeek => "GPU utilization by hour of the week",
            ChartName::GpuDays => "Utilization of every GPU, day by day",
            ChartName::Power => "Fleet power and energy",
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

/// How many GPUs were in each state over one time bucket, for
/// [`fleet_state`]. The three counts are means over the bucket, so they
/// may be fractional; their sum is the fleet size seen in that bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FleetStatePoint {
    /// Bucket start, UTC milliseconds since the Unix epoch.
    pub t_ms: i64,
    /// GPUs doing work.
    pub busy: f64,
    /// GPUs idle while a process holds memory on them.
    pub idle_held: f64,
    /// GPUs idle with no process on them.
    pub idle_empty: f64,
    /// GPUs whose activity is unknown (neither utilization nor SM activity
    /// reported): neither busy nor idle.
    pub unknown: f64,
}

/// What one team's GPU time cost, for [`idle_cost`] and [`team_spend`].
/// Amounts are in [`ChartContext::currency`].
#[derive(Debug, Clone, PartialEq)]
pub struct TeamCost {
    /// The team's name as the report shows it.
    pub team: String,
    /// Cost of the team's GPU time while the GPUs were busy.
    pub busy_cost: f64,
    /// Cost of the team's GPU time while the GPUs sat idle.
    pub idle_cost: f64,
}

/// Mean utilization in one hour of the week, for [`hour_of_week`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HourOfWeekCell {
    /// Day of the week, 0 = Monday … 6 = Sunday (UTC).
    pub dow: u32,
    /// Hour of the day, 0..24 (UTC).
    pub hour: u32,
    /// Mean utilization in percent, 0–100; `None` when no sample fell in
    /// this hour of the week.
    pub mean_util_pct: Option<f64>,
}

/// Mean utilization of one GPU on one day, for [`gpu_days`].
#[derive(Debug, Clone, PartialEq)]
pub struct GpuDayCell {
    /// The GPU's row label, e.g. `"node01/3"` (host / index).
    pub gpu: String,
    /// The UTC day.
    pub day: chrono::NaiveDate,
    /// Mean utilization in percent, 0–100; `None` when the GPU has no
    /// samples that day.
    pub mean_util_pct: Option<f64>,
}

/// Fleet power over one time bucket, for [`power`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerPoint {
    /// Bucket start, UTC milliseconds since the Unix epoch.
    pub t_ms: i64,
    /// Mean power draw of the whole fleet over the bucket, in kilowatts.
    pub power_kw: f64,
    /// Energy used since the period start, up to the end of this bucket,
    /// in kilowatt-hours.
    pub energy_kwh: f64,
}

/// A chart that could not be drawn or written. Every variant names the
/// output file.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The canvas size in [`ChartContext`] is outside what a chart can lay out.
    #[error(
        "cannot draw chart {chart} into {path}: a {width}x{height} canvas is outside {}x{} to {max}x{max}",
        ChartContext::MIN_WIDTH,
        ChartContext::MIN_HEIGHT,
        max = ChartContext::MAX_SIDE
    )]
    CanvasSize {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The requested width in pixels.
        width: u32,
        /// The requested height in pixels.
        height: u32,
    },
    /// The embedded font did not load.
    #[error("cannot draw chart {chart} into {path}")]
    Font {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// Which font failed.
        #[source]
        source: FontError,
    },
    /// plotters failed while drawing.
    #[error("cannot draw chart {chart} into {path}")]
    Draw {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// plotters' error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The drawn pixels did not encode as PNG.
    #[error("cannot encode chart {chart} as PNG for {path}")]
    Encode {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: image::ImageError,
    },
    /// The PNG could not be written (missing folder, no permission, disk full).
    #[error("cannot write chart {chart} to {path}")]
    Write {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests;
