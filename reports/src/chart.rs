//! The six PNG charts of apron's monthly report, and the types they take.
//!
//! Each chart is a function from a plain data series to a PNG file:
//! [`fleet_state`], [`idle_cost`], [`team_spend`], [`hour_of_week`],
//! [`gpu_days`], [`power`]; and one of a job's GPUs, [`job_timeline`]. The caller computes the series (in apron that is
//! apron-analyze, from SQL); this module only draws. Every chart has a
//! title, axis titles with units, a legend when it shows more than one
//! series, and a footer with the period and the data folder. An empty series
//! draws the same frame with "no data in this period" in the middle.
//!
//! Files are written atomically, so re-running a report overwrites cleanly.
//! Times are UTC milliseconds since the Unix epoch, shown in UTC.
//!
//! This module only declares and re-exports: the types every chart takes
//! live in `context.rs`, `name.rs`, `series.rs` and `error.rs` beside the
//! charts, which import no chart, so the charts take them from there and
//! never import this module back.

mod axis;
mod canvas;
mod context;
mod error;
mod fleet_state;
mod frame;
mod gpu_days;
mod heatmap;
mod hour_of_week;
mod idle_cost;
mod job_timeline;
mod legend;
mod name;
mod palette;
mod power;
mod rect;
mod series;
mod team_bars;
mod team_spend;
mod text;
mod time_axis;

pub use context::ChartContext;
pub use error::ChartError;
pub use fleet_state::fleet_state;
pub use gpu_days::gpu_days;
pub use hour_of_week::hour_of_week;
pub use idle_cost::idle_cost;
pub use job_timeline::job_timeline;
pub use name::{ChartName, UnknownChart};
pub use power::power;
pub use series::{
    FleetStatePoint, GpuDayCell, HourOfWeek, HourOfWeekCell, PowerPoint, TeamCost, TimelinePoint, WeekRun,
    WeekWindow,
};
pub use team_spend::team_spend;

#[cfg(test)]
mod tests;
