//! The rows each chart draws, one plain struct per kind of series. The
//! caller computes them; the chart modules take them and this module
//! imports none of them.

/// How many GPUs were in each state over one time bucket, for
/// [`fleet_state`](crate::fleet_state). The three counts are means over the
/// bucket, so they may be fractional; their sum is the fleet size seen in
/// that bucket.
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

/// What one team's GPU time cost, for [`idle_cost`](crate::idle_cost) and
/// [`team_spend`](crate::team_spend). Amounts are in
/// [`ChartContext::currency`](crate::ChartContext::currency).
#[derive(Debug, Clone, PartialEq)]
pub struct TeamCost {
    /// The team's name as the report shows it.
    pub team: String,
    /// Cost of the team's GPU time while the GPUs were busy.
    pub busy_cost: f64,
    /// Cost of the team's GPU time while the GPUs sat idle.
    pub idle_cost: f64,
}

/// Mean utilization in one hour of the week, for
/// [`hour_of_week`](crate::hour_of_week).
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

/// The hour-of-week chart's series: its cells and the recurring idle
/// windows to mark on them, for [`hour_of_week`](crate::hour_of_week).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HourOfWeek {
    /// Mean utilization per hour of the week.
    pub cells: Vec<HourOfWeekCell>,
    /// The recurring idle windows found in those cells (as `apron windows`
    /// reports them), each outlined on the chart.
    pub windows: Vec<WeekWindow>,
}

/// A recurring idle window: what `apron windows` calls it and the hours of
/// the week it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct WeekWindow {
    /// How `apron windows` names it: `Mon–Fri 00:00–06:00`.
    pub label: String,
    /// Its runs of consecutive hours, one per day it recurs on (or one run
    /// over several days).
    pub runs: Vec<WeekRun>,
}

/// A run of consecutive hours of the week, on into the next week past
/// Sunday 24:00.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeekRun {
    /// Its first hour of the week, 0 = Monday 00:00 UTC … 167.
    pub start: u32,
    /// Its length in hours, 1–168.
    pub hours: u32,
}

/// The busy share of one physical GPU on one day, for
/// [`gpu_days`](crate::gpu_days).
#[derive(Debug, Clone, PartialEq)]
pub struct GpuDayCell {
    /// The GPU's row label, e.g. `"node01/3"` (host / index); a MIG
    /// instance is part of its parent's row.
    pub gpu: String,
    /// The UTC day.
    pub day: chrono::NaiveDate,
    /// Busy share of the GPU's time that day in percent, 0–100: busy
    /// GPU-seconds over GPU-seconds busy or idle, a MIG instance's counted
    /// by its share of the GPU; `None` when nothing of the day is known.
    pub busy_share_pct: Option<f64>,
}

/// Fleet power over one time bucket, for [`power`](crate::power).
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

/// One GPU's activity and memory over one time bucket while a job held it,
/// for [`job_timeline`](crate::job_timeline). A value that is not finite
/// (NaN: not measured in the bucket) leaves a gap in its line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelinePoint {
    /// Bucket start, UTC milliseconds since the Unix epoch.
    pub t_ms: i64,
    /// Mean GPU utilization (%).
    pub util_pct: f64,
    /// Most memory used on the GPU, by every process on it (% of its memory).
    pub mem_pct: f64,
    /// Mean SM activity, GPM (%).
    pub sm_active_pct: f64,
    /// Mean tensor pipe activity, GPM (%).
    pub tensor_active_pct: f64,
}
