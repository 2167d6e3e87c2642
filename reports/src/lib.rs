//! apron's charts and monthly report bundle.
//!
//! This crate owns how apron's findings look: the six PNG charts
//! ([`fleet_state`], [`idle_cost`], [`team_spend`], [`hour_of_week`],
//! [`gpu_days`], [`power`]) and the report folder of `index.html`,
//! `summary.md` and one CSV per table ([`write_bundle`]). It knows nothing
//! about Parquet, SQL or DataFusion: the caller computes every series and
//! figure and passes plain structs in. Money is formatted by [`money`] in
//! both the charts and the bundle so the two always agree.
//!
//! Charts draw their text with a DejaVu Sans font embedded in the binary, so
//! they render the same on a server with no fonts installed. Every file is
//! written through [`apron_files::replace`]: a reader sees the old file or
//! the new one, never half; a symbolic link in the folder is replaced, never
//! written through; a file replaced keeps its mode, a new one gets the
//! umask's.

pub mod bundle;
pub mod chart;
pub mod csv_cell;
mod fonts;
mod number;
mod team;
mod time;

pub use bundle::{
    Assets, BundleError, BundleFiles, COLUMNS, Column, ColumnKind, CsvLines, Figure, KIND_KEY, MARKER,
    OutDirState, Report, Section, TableData, column, mark_out_dir, out_dir_state, write_bundle,
};
pub use chart::{
    ChartContext, ChartError, ChartName, FleetStatePoint, GpuDayCell, HourOfWeek, HourOfWeekCell, PowerPoint,
    TeamCost, TimelinePoint, UnknownChart, WeekRun, WeekWindow, fleet_state, gpu_days, hour_of_week,
    idle_cost, job_timeline, power, team_spend,
};
pub use fonts::FontError;
pub use number::{currency_unit, grouped, money, money_whole};
pub use team::{NO_ONE, UNALLOCATED, team_label};
