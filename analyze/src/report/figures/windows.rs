//! Windows: the fleet's week hour by hour (`queries/windows.sql` over
//! `minute_costs`) and the recurring idle windows it shows, stated as a
//! person would: "Mon–Fri 00:00–06:00: 78% of GPU time idle, 310 GPU-hours
//! and $1,240 a week".
//!
//! Finding the windows is [`find_windows`], a pure function of the profile.
//! Which GPUs of each host are idle in a window is [`idle_gpus`], a pure
//! function of each GPU's own week (`queries/window_gpus.sql`, read by
//! [`gpu_weeks`]); `apron windows --cron` schedules a job on them. What
//! filling a window is worth ([`window_worth`]) is those GPUs' idle cost in
//! its hours over the period: not a week's cost scaled to a month, nor the
//! whole fleet's.

use std::collections::HashMap;

use apron_reports::{grouped, money};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::rounding::round_to;
use crate::session::queries;

/// Day names, Monday first.
pub const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Hours in a week: hour of the week 0 is Monday 00:00 UTC, 167 Sunday 23:00.
pub const HOURS_PER_WEEK: usize = 168;

/// One hour of the week in the profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Day of the week, 0 = Monday.
    pub day: usize,
    /// Hour of the day, 0–23 (UTC).
    pub hour: usize,
    /// Mean utilization (%), `None` when unknown.
    pub mean_util_pct: Option<f64>,
    /// Idle share of the recorded GPU time (%).
    pub idle_share_pct: f64,
    /// Idle GPU-hours in this hour of a typical week.
    pub idle_gpu_hours_per_week: f64,
    /// Their cost (currency).
    pub idle_cost_per_week: f64,
    /// GPUs recorded in this hour, on average: its recorded GPU-hours in a
    /// typical week.
    pub gpus: f64,
    /// How many times this hour of the week was recorded.
    pub weeks: i64,
}

/// A run of consecutive hours of the week: from hour of the week `start`
/// (0 = Monday 00:00 UTC) for `hours` hours, on into the next week past
/// Sunday 24:00.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Run {
    /// Its first hour of the week, 0–167.
    pub start: usize,
    /// Its length in hours, 1–168.
    pub hours: usize,
}

impl Run {
    /// The hours of the week it covers, in order, each 0–167.
    pub fn hours_of_week(&self) -> impl Iterator<Item = usize> {
        (self.start..self.start + self.hours).map(|h| h % HOURS_PER_WEEK)
    }

    /// The hour of the week it ends at (its last hour's end), 0–167: for
    /// `Sat 20:00 – Mon 06:00`, Monday 06:00.
    pub fn end(&self) -> usize {
        (self.start + self.hours) % HOURS_PER_WEEK
    }
}

/// A recurring idle window: a run of hours of the week, on one or more
/// consecutive days.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// How a person says it: `Mon–Fri 00:00–06:00`, `Sat 00:00 – Mon 08:00`.
    pub label: String,
    /// Hours of the week it covers.
    pub hours_per_week: usize,
    /// Idle share of its recorded GPU time (%).
    pub idle_share_pct: f64,
    /// Idle GPU-hours in it, a typical week.
    pub idle_gpu_hours_per_week: f64,
    /// Their cost, a typical week (currency).
    pub idle_cost_per_week: f64,
}

/// A recurring idle window and the hours of the week it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct RecurringWindow {
    /// The window as the reports state it.
    pub window: Window,
    /// Its runs, earliest start first: one per day it recurs on, all of
    /// one length (`Mon–Fri 00:00–06:00`: five runs of 6 h), or one run
    /// (`Sat 00:00 – Mon 08:00`: 56 h from Saturday 00:00; every hour of
    /// the week: 168 h from Monday 00:00).
    pub runs: Vec<Run>,
}

impl Window {
    /// The window in one sentence, money in `currency`.
    pub fn sentence(&self, currency: &str) -> String {
        format!(
            "{}: {:.0}% of GPU time idle, {} GPU-hours and {} a week",
            self.label,
            self.idle_share_pct,
            grouped(self.idle_gpu_hours_per_week, 0),
            money(self.idle_cost_per_week, currency)
        )
    }
}

/// The recurring idle windows of `cells`: maximal runs of hours of the week
/// (the week wraps from Sunday to Monday) whose idle share is at least
/// `min_share_pct`, at least `min_hours` long; runs of the same hours on
/// consecutive days are one window ("Mon–Fri 00:00–06:00"). Costliest first.
pub fn find_windows(cells: &[Cell], min_share_pct: f64, min_hours: usize) -> Vec<Window> {
    find_recurring(cells, min_share_pct, min_hours).into_iter().map(|r| r.window).collect()
}

/// [`find_windows`], each window with its runs of hours.
pub fn find_recurring(cells: &[Cell], min_share_pct: f64, min_hours: usize) -> Vec<RecurringWindow> {
    let mut week: [Option<&Cell>; 168] = [None; 168];
    for c in cells {
        if c.day < 7 && c.hour < 24 {
            week[c.day * 24 + c.hour] = Some(c);
        }
    }
    let idle = |h: usize| week[h % 168].is_some_and(|c| c.idle_share_pct >= min_share_pct);
    if (0..168).all(idle) {
        let window = summarise("every hour of the week".to_owned(), (0..168).filter_map(|h| week[h]));
        return vec![RecurringWindow { window, runs: vec![Run { start: 0, hours: HOURS_PER_WEEK }] }];
    }
    // Runs start after a non-idle hour; start scanning at one.
    let Some(origin) = (0..168).find(|&h| !idle(h)) else { return Vec::new() };
    let mut runs: Vec<(usize, usize)> = Vec::new(); // (start hour of week, length)
    let mut h = origin + 1;
    while h <= origin + 168 {
        if idle(h) {
            let start = h;
            while idle(h) {
                h += 1;
            }
            if h - start >= min_hours {
                runs.push((start % 168, h - start));
            }
        }
        h += 1;
    }
    runs.sort_unstable();
    // Group runs of the same start hour and length on consecutive days.
    let mut groups: Vec<Vec<(usize, usize)>> = Vec::new();
    for run in runs {
        match groups.last_mut() {
            Some(g) if g.last().is_some_and(|&(s, l)| l == run.1 && s + 24 == run.0) => g.push(run),
            _ => groups.push(vec![run]),
        }
    }
    let mut windows: Vec<RecurringWindow> = groups
        .iter()
        .map(|g| {
            let label = label(g);
            let window =
                summarise(label, g.iter().flat_map(|&(s, l)| (s..s + l).filter_map(|h| week[h % 168])));
            RecurringWindow { window, runs: g.iter().map(|&(start, hours)| Run { start, hours }).collect() }
        })
        .collect();
    windows.sort_by(|a, b| b.window.idle_cost_per_week.total_cmp(&a.window.idle_cost_per_week));
    windows
}

fn summarise<'a>(label: String, cells: impl Iterator<Item = &'a Cell>) -> Window {
    let (mut hours, mut idle, mut cost, mut recorded) = (0, 0.0, 0.0, 0.0);
    for c in cells {
        hours += 1;
        idle += c.idle_gpu_hours_per_week;
        cost += c.idle_cost_per_week;
        recorded += c.gpus;
    }
    Window {
        label,
        hours_per_week: hours,
        idle_share_pct: if recorded > 0.0 { 100.0 * idle / recorded } else { 0.0 },
        idle_gpu_hours_per_week: idle,
        idle_cost_per_week: cost,
    }
}

fn hh(hour_of_week: usize) -> String {
    format!("{:02}:00", hour_of_week % 24)
}

/// `Mon–Fri 00:00–06:00`, `Mon–Thu 22:00–06:00 (overnight)`, `Sat 20:00 – Sun 12:00`,
/// `Sat 00:00 – Mon 08:00`.
fn label(group: &[(usize, usize)]) -> String {
    let (first, len) = group[0];
    let last = group[group.len() - 1].0;
    let days = if group.len() == 1 {
        DAYS[first / 24].to_owned()
    } else {
        let sep = if group.len() == 2 { ", " } else { "–" };
        format!("{}{sep}{}", DAYS[first / 24], DAYS[last / 24])
    };
    let end = first + len;
    let crosses_midnight = end / 24 != first / 24 && end % 24 != 0;
    if len < 24 && !(group.len() == 1 && crosses_midnight) {
        let end_label = if end % 24 == 0 { "24:00".to_owned() } else { hh(end) };
        let overnight = if crosses_midnight { " (overnight)" } else { "" };
        format!("{days} {}–{end_label}{overnight}", hh(first))
    } else {
        format!("{} {} – {} {}", DAYS[first / 24], hh(first), DAYS[(end / 24) % 7], hh(end))
    }
}

/// The least idle share of an hour in a window (%) that `apron windows`
/// looks for by default (`--min-idle-share`), and so the report and the
/// hour-of-week chart.
pub const DEFAULT_MIN_IDLE_SHARE_PCT: f64 = 60.0;

/// The shortest window (hours) `apron windows` reports by default
/// (`--min-hours`).
pub const DEFAULT_MIN_HOURS: usize = 2;

/// The hour-of-week profile of a period: one cell per recorded hour of the
/// week, Monday 00:00 first.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The cells (unrounded).
    pub cells: Vec<Cell>,
}

impl Profile {
    /// The recurring idle windows of the profile with their runs
    /// ([`find_recurring`]), costliest first.
    pub fn recurring_windows(&self, min_share_pct: f64, min_hours: usize) -> Vec<RecurringWindow> {
        find_recurring(&self.cells, min_share_pct, min_hours)
    }

    /// The recurring idle windows of the profile ([`find_windows`]), money
    /// in `currency`.
    pub fn idle_windows(&self, min_share_pct: f64, min_hours: usize, currency: &str) -> IdleWindows {
        IdleWindows {
            windows: find_windows(&self.cells, min_share_pct, min_hours),
            min_share_pct,
            min_hours,
            currency: currency.to_owned(),
        }
    }
}

/// The hour-of-week profile of `report` (which has `minute_costs`
/// registered).
pub async fn profile(report: &ReportContext) -> Result<Profile, Error> {
    let batch = query(&report.session, queries::WINDOWS, Vec::new()).await?;
    Ok(Profile { cells: read(&batch).map_err(unreadable)? })
}

fn read(batch: &RecordBatch) -> Result<Vec<Cell>, ArrowError> {
    let c = Columns::of(batch);
    let (dow, hour, util) = (c.text("dow")?, c.i32("hour")?, c.f64_opt("mean_util_pct")?);
    let (share, idle, cost) =
        (c.f64("idle_share_pct")?, c.f64("idle_gpu_hours_per_week")?, c.f64("idle_cost_per_week")?);
    let (gpus, weeks) = (c.f64("gpus")?, c.i64("weeks")?);
    Ok((0..c.len())
        .filter_map(|i| {
            Some(Cell {
                day: DAYS.iter().position(|d| *d == dow[i])?,
                hour: usize::try_from(hour[i]).ok()?,
                mean_util_pct: util[i],
                idle_share_pct: share[i],
                idle_gpu_hours_per_week: idle[i],
                idle_cost_per_week: cost[i],
                gpus: gpus[i],
                weeks: weeks[i],
            })
        })
        .collect())
}

impl Rows for Profile {
    /// Shares and utilization to 1 decimal, hours, money and GPUs to 2.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.cells;
        let rounded = |f: fn(&Cell) -> f64, d: i32| columns::float(r.iter().map(|c| round_to(f(c), d)));
        batch_of(vec![
            ("dow", columns::text(r.iter().map(|c| DAYS[c.day]))),
            ("hour", columns::int32(r.iter().map(|c| i32::try_from(c.hour).unwrap_or(i32::MAX)))),
            ("mean_util_pct", columns::float(r.iter().map(|c| c.mean_util_pct.map(|u| round_to(u, 1))))),
            ("idle_share_pct", rounded(|c| c.idle_share_pct, 1)),
            ("idle_gpu_hours_per_week", rounded(|c| c.idle_gpu_hours_per_week, 2)),
            ("idle_cost_per_week", rounded(|c| c.idle_cost_per_week, 2)),
            ("gpus", rounded(|c| c.gpus, 2)),
            ("weeks", columns::int64(r.iter().map(|c| c.weeks))),
        ])
    }
}

/// The recurring idle windows of a profile, costliest first, and what they
/// were looked for with.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleWindows {
    /// The windows.
    pub windows: Vec<Window>,
    /// The least idle share of an hour in a window (%).
    pub min_share_pct: f64,
    /// The shortest window (hours).
    pub min_hours: usize,
    /// The currency of the money.
    pub currency: String,
}

impl IdleWindows {
    /// Each window in one sentence.
    pub fn sentences(&self) -> Vec<String> {
        self.windows.iter().map(|w| w.sentence(&self.currency)).collect()
    }

    /// The header lines: the windows in words, or that there are none.
    pub fn header_lines(&self) -> Vec<String> {
        let (share, hours) = (self.min_share_pct, self.min_hours);
        if self.windows.is_empty() {
            return vec![format!(
                "Windows:  none (no {hours} h in a row of the week are {share}% idle or more)"
            )];
        }
        let mut lines = vec![format!(
            "Windows:  recurring idle windows ({share}% idle or more, {hours} h or longer), costliest first:"
        )];
        lines.extend(self.sentences().into_iter().map(|s| format!("  {s}")));
        lines
    }
}

impl Rows for IdleWindows {
    /// One row per window: shares to 1 decimal, hours and money to 2, and
    /// the window in words.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let w = &self.windows;
        let rounded = |f: fn(&Window) -> f64, d: i32| columns::float(w.iter().map(|x| round_to(f(x), d)));
        let sentences = self.sentences();
        batch_of(vec![
            ("window", columns::text(w.iter().map(|x| x.label.as_str()))),
            (
                "hours_per_week",
                columns::uint32(w.iter().map(|x| u32::try_from(x.hours_per_week).unwrap_or(u32::MAX))),
            ),
            ("idle_share_pct", rounded(|x| x.idle_share_pct, 1)),
            ("idle_gpu_hours_per_week", rounded(|x| x.idle_gpu_hours_per_week, 2)),
            ("idle_cost_per_week", rounded(|x| x.idle_cost_per_week, 2)),
            ("text", columns::text(sentences.iter().map(String::as_str))),
        ])
    }
}

/// What a GPU of the data is to CUDA, which `CUDA_VISIBLE_DEVICES` must
/// name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// A whole GPU, named by its NVML index.
    Whole,
    /// A GPU in MIG mode (some MIG instance of the period belongs to it):
    /// CUDA runs on its instances, not on it.
    MigMode,
    /// A MIG instance (`MIG-…`).
    MigInstance,
}

/// One GPU's week (`queries/window_gpus.sql`): how idle it was in each hour
/// of the week.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuWeek {
    /// Its host.
    pub host: String,
    /// Its NVML index at its latest minute in the period (a MIG instance:
    /// its parent's).
    pub gpu_index: i32,
    /// Its UUID (`GPU-…`, `MIG-…`).
    pub gpu_uuid: String,
    /// Whole GPU, GPU in MIG mode, or MIG instance.
    pub partition: Partition,
    /// Idle share of its recorded time (%) in each hour of the week,
    /// Monday 00:00 first ([`HOURS_PER_WEEK`] of them); `None` where it was
    /// never recorded.
    pub idle_share_pct: Vec<Option<f64>>,
    /// The cost of its idle time in each hour of the week, Monday 00:00
    /// first, summed over the period (currency; 0 where never recorded).
    pub idle_cost: Vec<f64>,
}

/// The GPUs of one host that a window may hand to a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGpus {
    /// The host.
    pub host: String,
    /// The NVML indices of its idle whole GPUs, ascending.
    pub gpu_indices: Vec<i32>,
}

/// Each host's GPUs idle in the window of `runs`, hosts by name: the whole
/// GPUs recorded in every hour of the window and at least `min_share_pct` idle
/// in each (the rule of the windows themselves, applied to one GPU: an hour
/// in which the GPU is busy, or was never recorded, keeps it out). MIG
/// instances and GPUs in MIG mode are left out: a CUDA process sees at most
/// one MIG device, so they cannot join a job's GPUs. A host with no such
/// GPU is left out.
pub fn idle_gpus(runs: &[Run], gpus: &[GpuWeek], min_share_pct: f64) -> Vec<HostGpus> {
    let mut hosts: Vec<HostGpus> = Vec::new();
    for gpu in window_gpus(runs, gpus, min_share_pct) {
        match hosts.iter_mut().find(|h| h.host == gpu.host) {
            Some(h) => h.gpu_indices.push(gpu.gpu_index),
            None => hosts.push(HostGpus { host: gpu.host.clone(), gpu_indices: vec![gpu.gpu_index] }),
        }
    }
    for h in &mut hosts {
        h.gpu_indices.sort_unstable();
        h.gpu_indices.dedup();
    }
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    hosts
}

/// The GPUs of `gpus` that [`idle_gpus`] hands to a job in the window of
/// `runs`: the whole GPUs recorded and at least `min_share_pct` idle in
/// every hour of it.
pub fn window_gpus<'a>(runs: &[Run], gpus: &'a [GpuWeek], min_share_pct: f64) -> Vec<&'a GpuWeek> {
    let hours: Vec<usize> = runs.iter().flat_map(Run::hours_of_week).collect();
    let idle = |gpu: &GpuWeek, h: usize| {
        gpu.idle_share_pct.get(h).copied().flatten().is_some_and(|s| s >= min_share_pct)
    };
    gpus.iter()
        .filter(|g| g.partition == Partition::Whole)
        .filter(|g| !hours.is_empty() && hours.iter().all(|&h| idle(g, h)))
        .collect()
}

/// What filling a window is worth over the period: the idle cost of the GPUs
/// its cron lines use ([`window_gpus`]) in its hours, summed over the
/// period, with those GPUs and hours.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowWorth {
    /// The idle cost (currency).
    pub idle_cost: f64,
    /// The GPUs' UUIDs.
    pub gpu_uuids: Vec<String>,
    /// The hours of the week it covers (0 = Monday 00:00 UTC).
    pub hours: Vec<usize>,
}

/// [`WindowWorth`] of the window of `runs` over `gpus`' weeks.
pub fn window_worth(runs: &[Run], gpus: &[GpuWeek], min_share_pct: f64) -> WindowWorth {
    let hours: Vec<usize> = runs.iter().flat_map(Run::hours_of_week).collect();
    let on = window_gpus(runs, gpus, min_share_pct);
    let idle_cost = on.iter().flat_map(|g| hours.iter().filter_map(|&h| g.idle_cost.get(h))).sum();
    WindowWorth { idle_cost, gpu_uuids: on.iter().map(|g| g.gpu_uuid.clone()).collect(), hours }
}

/// Each GPU's week in `report`'s period (which has `cost_buckets`
/// registered), by host, index and UUID. The rows are read batch by batch
/// as the engine yields them, neither sorted nor gathered by the engine
/// first (at thousands of GPUs either asked for many times their size).
pub async fn gpu_weeks(report: &ReportContext) -> Result<Vec<GpuWeek>, Error> {
    let df = report.session.sql(queries::WINDOW_GPUS).await?;
    let mut weeks = GpuWeeks::default();
    report.session.each_batch(df, |batch| weeks.read(&batch).map_err(unreadable)).await?;
    Ok(weeks.by_host_index_uuid())
}

/// The GPUs' weeks read so far from `queries/window_gpus.sql`'s rows, which
/// come in no set order: one [`GpuWeek`] per host and UUID.
#[derive(Default)]
struct GpuWeeks {
    weeks: Vec<GpuWeek>,
    /// Where each GPU's week is in `weeks`, by host, then UUID (looked up
    /// by reference: only a GPU's first row makes a key).
    at: HashMap<String, HashMap<String, usize>>,
}

impl GpuWeeks {
    /// Adds `batch`'s rows to their GPUs' weeks.
    fn read(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        let c = Columns::of(batch);
        let (host, index, uuid) = (c.text("host")?, c.i32("gpu_index")?, c.text("gpu_uuid")?);
        let (parent, mig_mode) = (c.text_opt("parent_gpu_uuid")?, c.bool("mig_mode")?);
        let (dow, hour, share) = (c.text("dow")?, c.i32("hour")?, c.f64_opt("idle_share_pct")?);
        let idle_cost = c.f64("idle_cost")?;
        for i in 0..c.len() {
            let found = self.at.get(&host[i]).and_then(|gpus| gpus.get(&uuid[i])).copied();
            let w = found.unwrap_or_else(|| {
                let partition = match (&parent[i], mig_mode[i]) {
                    (Some(_), _) => Partition::MigInstance,
                    (None, true) => Partition::MigMode,
                    (None, false) => Partition::Whole,
                };
                self.weeks.push(GpuWeek {
                    host: host[i].clone(),
                    gpu_index: index[i],
                    gpu_uuid: uuid[i].clone(),
                    partition,
                    idle_share_pct: vec![None; HOURS_PER_WEEK],
                    idle_cost: vec![0.0; HOURS_PER_WEEK],
                });
                let w = self.weeks.len() - 1;
                self.at.entry(host[i].clone()).or_default().insert(uuid[i].clone(), w);
                w
            });
            let (Some(day), Ok(h)) = (DAYS.iter().position(|d| *d == dow[i]), usize::try_from(hour[i]))
            else {
                continue;
            };
            if h < 24 {
                self.weeks[w].idle_share_pct[day * 24 + h] = share[i];
                self.weeks[w].idle_cost[day * 24 + h] = idle_cost[i];
            }
        }
        Ok(())
    }

    /// The weeks, by host, index and UUID.
    fn by_host_index_uuid(mut self) -> Vec<GpuWeek> {
        self.weeks
            .sort_by(|a, b| (&a.host, a.gpu_index, &a.gpu_uuid).cmp(&(&b.host, b.gpu_index, &b.gpu_uuid)));
        self.weeks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A week where `idle(day, hour)` says which hours are fully idle (8
    /// GPUs, each idle GPU-hour costing 2).
    fn week(idle: impl Fn(usize, usize) -> bool) -> Vec<Cell> {
        let mut cells = Vec::new();
        for day in 0..7 {
            for hour in 0..24 {
                let i = idle(day, hour);
                cells.push(Cell {
                    day,
                    hour,
                    mean_util_pct: Some(if i { 1.0 } else { 70.0 }),
                    idle_share_pct: if i { 100.0 } else { 0.0 },
                    idle_gpu_hours_per_week: if i { 8.0 } else { 0.0 },
                    idle_cost_per_week: if i { 16.0 } else { 0.0 },
                    gpus: 8.0,
                    weeks: 1,
                });
            }
        }
        cells
    }

    #[test]
    fn weeknights_and_weekends_are_stated_as_a_person_would() {
        // Idle Mon–Fri 00:00–06:00 and all weekend long.
        let cells = week(|d, h| d >= 5 || h < 6);
        let windows = find_windows(&cells, 60.0, 2);
        let labels: Vec<&str> = windows.iter().map(|w| w.label.as_str()).collect();
        // The weekend runs on into Monday's night hours.
        assert_eq!(labels, ["Sat 00:00 – Mon 06:00", "Tue–Fri 00:00–06:00"]);
        assert_eq!(windows[0].hours_per_week, 54);
        assert_eq!(windows[0].idle_gpu_hours_per_week, 54.0 * 8.0);
        assert_eq!(windows[0].idle_cost_per_week, 54.0 * 16.0);
        assert_eq!(windows[1].hours_per_week, 24);
        assert_eq!(
            windows[1].sentence("USD"),
            "Tue–Fri 00:00–06:00: 100% of GPU time idle, 192 GPU-hours and $384.00 a week"
        );
    }

    #[test]
    fn overnight_runs_and_short_runs() {
        // Idle 22:00–06:00 every weeknight (Mon night to Fri morning), plus one lone idle hour.
        let cells = week(|d, h| (d < 4 && h >= 22) || ((1..5).contains(&d) && h < 6) || (d == 5 && h == 12));
        let windows = find_windows(&cells, 60.0, 2);
        let labels: Vec<&str> = windows.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(labels, ["Mon–Thu 22:00–06:00 (overnight)"]);
        assert_eq!(find_windows(&cells, 60.0, 1).len(), 2, "the lone hour counts at a 1 h minimum");
        assert!(find_windows(&week(|_, _| false), 60.0, 2).is_empty());
        let all = find_windows(&week(|_, _| true), 60.0, 2);
        assert_eq!(all[0].label, "every hour of the week");
        assert_eq!(all[0].hours_per_week, 168);
    }

    #[test]
    fn the_header_states_the_windows_or_that_there_are_none() {
        let profile = Profile { cells: week(|d, h| d < 5 && h < 6) };
        let found = profile.idle_windows(60.0, 2, "USD");
        assert_eq!(
            found.header_lines(),
            [
                "Windows:  recurring idle windows (60% idle or more, 2 h or longer), costliest first:",
                "  Mon–Fri 00:00–06:00: 100% of GPU time idle, 240 GPU-hours and $480.00 a week",
            ]
        );
        let batch = found.to_batch().expect("columns of one length");
        let c = Columns::of(&batch);
        assert_eq!(c.i64("hours_per_week").expect("hours"), [30]);
        assert_eq!(c.text("text").expect("text"), [found.sentences()[0].clone()]);
        let none = profile.idle_windows(60.0, 7, "USD");
        assert_eq!(
            none.header_lines(),
            ["Windows:  none (no 7 h in a row of the week are 60% idle or more)"]
        );
        // The profile prints a row per cell, Monday 00:00 first.
        let printed = profile.to_batch().expect("columns of one length");
        assert_eq!(printed.num_rows(), 168);
        assert_eq!(Columns::of(&printed).text("dow").expect("days")[167], "Sun");
    }

    #[test]
    fn windows_know_their_runs_over_midnight_and_the_week() {
        // The weekend runs on into Monday 06:00; Tue–Fri nights.
        let found = find_recurring(&week(|d, h| d >= 5 || h < 6), 60.0, 2);
        assert_eq!(found[0].window.label, "Sat 00:00 – Mon 06:00");
        assert_eq!(found[0].runs, [Run { start: 120, hours: 54 }]);
        assert_eq!(found[0].runs[0].end(), 6, "ends Monday 06:00");
        assert_eq!(found[0].runs[0].hours_of_week().collect::<Vec<_>>().len(), 54);
        assert_eq!(found[0].runs[0].hours_of_week().last(), Some(5));
        let nights: Vec<Run> = (1..5).map(|d| Run { start: d * 24, hours: 6 }).collect();
        assert_eq!(found[1].runs, nights);
        // Overnight, Mon–Thu 22:00–06:00.
        let cells = week(|d, h| (d < 4 && h >= 22) || ((1..5).contains(&d) && h < 6));
        let found = find_recurring(&cells, 60.0, 2);
        let overnight: Vec<Run> = (0..4).map(|d| Run { start: d * 24 + 22, hours: 8 }).collect();
        assert_eq!(found[0].runs, overnight);
        // Sunday night into Monday: the run starts on Sunday and ends in the next week.
        let found = find_recurring(&week(|d, h| (d == 6 && h >= 20) || (d == 0 && h < 4)), 60.0, 2);
        assert_eq!(found[0].window.label, "Sun 20:00 – Mon 04:00");
        assert_eq!(found[0].runs, [Run { start: 164, hours: 8 }]);
        assert_eq!(found[0].runs[0].end(), 4);
        let all = find_recurring(&week(|_, _| true), 60.0, 2);
        assert_eq!(all[0].runs, [Run { start: 0, hours: 168 }]);
        // find_windows is find_recurring's windows.
        let cells = week(|d, h| d >= 5 || h < 6);
        let windows: Vec<Window> = find_recurring(&cells, 60.0, 2).into_iter().map(|r| r.window).collect();
        assert_eq!(find_windows(&cells, 60.0, 2), windows);
    }

    /// A GPU of `host` whose idle share in hour of the week `h` is `share(h)`.
    fn gpu(host: &str, index: i32, partition: Partition, share: impl Fn(usize) -> Option<f64>) -> GpuWeek {
        GpuWeek {
            host: host.to_owned(),
            gpu_index: index,
            gpu_uuid: format!("GPU-{host}-{index}"),
            partition,
            idle_share_pct: (0..HOURS_PER_WEEK).map(&share).collect(),
            idle_cost: (0..HOURS_PER_WEEK).map(|h| share(h).unwrap_or(0.0) / 100.0).collect(),
        }
    }

    #[test]
    fn a_gpu_joins_a_window_when_every_hour_of_it_is_idle_enough() {
        // Sat 20:00 – Mon 04:00.
        let runs = [Run { start: 140, hours: 32 }];
        let in_window = |h: usize| !(4..140).contains(&h);
        let gpus = vec![
            gpu("b", 2, Partition::Whole, |_| Some(100.0)),
            gpu("b", 0, Partition::Whole, move |h| Some(if in_window(h) { 60.0 } else { 0.0 })),
            // One hour of the window (Monday 03:00) below the share.
            gpu("b", 1, Partition::Whole, |h| Some(if h == 3 { 59.9 } else { 100.0 })),
            // One hour of the window never recorded.
            gpu("a", 0, Partition::Whole, |h| (h != 150).then_some(100.0)),
            gpu("a", 1, Partition::Whole, |_| Some(100.0)),
            // MIG: left out however idle.
            gpu("c", 0, Partition::MigMode, |_| Some(100.0)),
            gpu("c", 0, Partition::MigInstance, |_| Some(100.0)),
        ];
        let hosts = idle_gpus(&runs, &gpus, 60.0);
        assert_eq!(
            hosts,
            [
                HostGpus { host: "a".into(), gpu_indices: vec![1] },
                HostGpus { host: "b".into(), gpu_indices: vec![0, 2] },
            ]
        );
        assert!(idle_gpus(&[], &gpus, 60.0).is_empty(), "no hours, no GPUs");
        // The window's worth: the idle cost of b0, b2 and a1 in its 32 hours
        // (each GPU's idle cost is its share / 100 an hour): b0 0.6 × 32,
        // b2 and a1 1.0 × 32; not the busy GPU's, nor the MIG GPU's.
        let worth = window_worth(&runs, &gpus, 60.0);
        assert_eq!(worth.gpu_uuids, ["GPU-b-2", "GPU-b-0", "GPU-a-1"]);
        assert_eq!(worth.hours.len(), 32);
        assert!((worth.idle_cost - (0.6 + 1.0 + 1.0) * 32.0).abs() < 1e-9, "{worth:?}");
    }

    #[test]
    fn gpu_weeks_are_gathered_gpu_by_gpu_from_rows_in_any_order() {
        // The query's rows come in no set order: GPU-a's two hours apart,
        // n0's GPU after n1's, an index 1 before an index 0.
        let batch = batch_of(vec![
            ("host", columns::text(["n1", "n1", "n1", "n1", "n0"])),
            ("gpu_index", columns::int32([1, 0, 1, 0, 3])),
            ("gpu_uuid", columns::text(["MIG-x", "GPU-a", "GPU-p", "GPU-a", "GPU-z"])),
            ("parent_gpu_uuid", columns::text([Some("GPU-p"), None, None, None, None])),
            ("mig_mode", columns::boolean([false, false, true, false, false])),
            ("dow", columns::text(["Mon", "Sun", "Mon", "Mon", "Tue"])),
            ("hour", columns::int32([5, 23, 5, 0, 1])),
            ("idle_share_pct", columns::float([Some(100.0), None, Some(10.0), Some(75.0), Some(50.0)])),
            ("idle_cost", columns::float([Some(1.5), Some(0.0), Some(0.0), Some(3.0), Some(0.5)])),
        ])
        .expect("columns of one length");
        // Read as two batches: a GPU's hours may come in either.
        let mut read = GpuWeeks::default();
        read.read(&batch.slice(0, 2)).expect("readable");
        read.read(&batch.slice(2, 3)).expect("readable");
        let weeks = read.by_host_index_uuid();
        let order: Vec<(&str, &str)> = weeks.iter().map(|w| (w.host.as_str(), w.gpu_uuid.as_str())).collect();
        assert_eq!(order, [("n0", "GPU-z"), ("n1", "GPU-a"), ("n1", "GPU-p"), ("n1", "MIG-x")]);
        assert_eq!((weeks[0].gpu_index, weeks[0].idle_share_pct[24 + 1]), (3, Some(50.0)));
        let a = &weeks[1];
        assert_eq!(a.partition, Partition::Whole);
        assert_eq!(a.idle_share_pct[0], Some(75.0));
        assert_eq!((a.idle_cost[0], a.idle_cost[1]), (3.0, 0.0));
        assert_eq!(a.idle_share_pct[167], None);
        assert_eq!(a.idle_share_pct.iter().flatten().count(), 1);
        assert_eq!((weeks[2].partition, weeks[2].idle_share_pct[5]), (Partition::MigMode, Some(10.0)));
        assert_eq!((weeks[3].partition, weeks[3].gpu_index), (Partition::MigInstance, 1));
        assert_eq!(weeks[3].idle_cost[5], 1.5);
    }

    #[test]
    fn two_days_are_listed_not_ranged() {
        let cells = week(|d, h| d < 2 && (9..12).contains(&h));
        let windows = find_windows(&cells, 50.0, 2);
        assert_eq!(windows[0].label, "Mon, Tue 09:00–12:00");
        // One run over midnight names both days.
        let cells = week(|d, h| (d == 5 && h >= 20) || (d == 6 && h < 12));
        assert_eq!(find_windows(&cells, 50.0, 2)[0].label, "Sat 20:00 – Sun 12:00");
    }
}
