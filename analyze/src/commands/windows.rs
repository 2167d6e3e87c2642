//! `apron windows`: the fleet's week hour by hour (`queries/windows.sql`
//! over `minute_costs`) and the recurring idle windows it shows, stated as
//! a person would: "Mon–Fri 00:00–06:00: 78% of GPU time idle, 310
//! GPU-hours and $1,240 a week".
//!
//! Finding the windows is [`find_windows`], a pure function of the profile.

use std::io::Write;
use std::sync::Arc;

use apron_reports::{grouped, money};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema};
use datafusion::arrow::error::ArrowError;

use crate::cli::{GlobalArgs, WindowsArgs, WindowsShow};
use crate::columns::{f64_column, text_column};
use crate::commands::Report;
use crate::error::{Error, SessionError};
use crate::queries;
use crate::rounding::round_columns;

/// Day names, Monday first.
pub const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

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
    /// GPU-hours recorded in this hour of a typical week.
    pub gpu_hours_per_week: f64,
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
    let mut week: [Option<&Cell>; 168] = [None; 168];
    for c in cells {
        if c.day < 7 && c.hour < 24 {
            week[c.day * 24 + c.hour] = Some(c);
        }
    }
    let idle = |h: usize| week[h % 168].is_some_and(|c| c.idle_share_pct >= min_share_pct);
    if (0..168).all(idle) {
        return vec![summarise("every hour of the week".to_owned(), (0..168).filter_map(|h| week[h]))];
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
    let mut windows: Vec<Window> = groups
        .iter()
        .map(|g| {
            let label = label(g);
            summarise(label, g.iter().flat_map(|&(s, l)| (s..s + l).filter_map(|h| week[h % 168])))
        })
        .collect();
    windows.sort_by(|a, b| b.idle_cost_per_week.total_cmp(&a.idle_cost_per_week));
    windows
}

fn summarise<'a>(label: String, cells: impl Iterator<Item = &'a Cell>) -> Window {
    let (mut hours, mut idle, mut cost, mut recorded) = (0, 0.0, 0.0, 0.0);
    for c in cells {
        hours += 1;
        idle += c.idle_gpu_hours_per_week;
        cost += c.idle_cost_per_week;
        recorded += c.gpu_hours_per_week;
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

/// Prints the profile (or the windows) and the windows in words.
pub async fn run<W: Write>(global: &GlobalArgs, args: &WindowsArgs, mut out: W) -> Result<(), Error> {
    let mut report = Report::prepare(global, &args.period).await?.with_costs().await?;
    let profile = profile(&report).await?;
    let cells = cells(&profile);
    let min_hours = usize::try_from(args.min_hours).unwrap_or(usize::MAX).max(1);
    let windows = find_windows(&cells, args.min_idle_share, min_hours);
    let currency = report.config.currency.clone();
    if windows.is_empty() {
        report.header.push(format!(
            "Windows:  none (no {min_hours} h in a row of the week are {}% idle or more)",
            args.min_idle_share
        ));
    } else {
        report.header.push(format!(
            "Windows:  recurring idle windows ({}% idle or more, {min_hours} h or longer), costliest first:",
            args.min_idle_share
        ));
        for w in &windows {
            report.header.push(format!("  {}", w.sentence(&currency)));
        }
    }
    report.header.print(global.format, &mut out)?;
    let execute = |source: ArrowError| SessionError::Execute { source: source.into() };
    let batch = match args.show {
        WindowsShow::Profile => rounded(&profile).map_err(execute)?,
        WindowsShow::Windows => windows_batch(&windows, &currency).map_err(execute)?,
    };
    crate::output::write_batches(global.format, batch.schema(), &[batch], out)?;
    Ok(())
}

/// The hour-of-week profile of `report` (which has `minute_costs`
/// registered), `weeks` and `gpus` included, unrounded.
pub async fn profile(report: &Report) -> Result<RecordBatch, Error> {
    let session = &report.session;
    let df = session.sql(queries::WINDOWS).await?;
    session.collect_batch(df).await
}

/// `profile` rounded for print.
pub fn rounded(profile: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    round_columns(
        profile,
        &[
            ("mean_util_pct", 1),
            ("idle_share_pct", 1),
            ("idle_gpu_hours_per_week", 2),
            ("idle_cost_per_week", 2),
            ("gpus", 2),
        ],
    )
}

/// The cells of a profile batch.
pub fn cells(profile: &RecordBatch) -> Vec<Cell> {
    let dow = text_column(profile, "dow");
    let Some(hour) = profile.column_by_name("hour").and_then(|c| c.as_primitive_opt::<Int32Type>()) else {
        return Vec::new();
    };
    let util = profile
        .column_by_name("mean_util_pct")
        .map(|c| c.as_primitive::<datafusion::arrow::datatypes::Float64Type>().clone());
    let share = f64_column(profile, "idle_share_pct");
    let idle = f64_column(profile, "idle_gpu_hours_per_week");
    let cost = f64_column(profile, "idle_cost_per_week");
    let gpus = f64_column(profile, "gpus");
    (0..profile.num_rows())
        .filter_map(|i| {
            let name = dow.get(i)?.as_deref()?;
            let day = DAYS.iter().position(|d| *d == name)?;
            Some(Cell {
                day,
                hour: usize::try_from(hour.value(i)).ok()?,
                mean_util_pct: util.as_ref().filter(|u| u.is_valid(i)).map(|u| u.value(i)),
                idle_share_pct: share[i],
                idle_gpu_hours_per_week: idle[i],
                idle_cost_per_week: cost[i],
                gpu_hours_per_week: gpus[i],
            })
        })
        .collect()
}

fn windows_batch(windows: &[Window], currency: &str) -> Result<RecordBatch, ArrowError> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("window", DataType::Utf8, false),
        Field::new("hours_per_week", DataType::UInt32, false),
        Field::new("idle_share_pct", DataType::Float64, false),
        Field::new("idle_gpu_hours_per_week", DataType::Float64, false),
        Field::new("idle_cost_per_week", DataType::Float64, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let round = |x: f64, d: i32| crate::rounding::round_to(x, d);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(windows.iter().map(|w| w.label.as_str()))),
        Arc::new(UInt32Array::from_iter_values(
            windows.iter().map(|w| u32::try_from(w.hours_per_week).unwrap_or(u32::MAX)),
        )),
        Arc::new(Float64Array::from_iter_values(windows.iter().map(|w| round(w.idle_share_pct, 1)))),
        Arc::new(Float64Array::from_iter_values(windows.iter().map(|w| round(w.idle_gpu_hours_per_week, 2)))),
        Arc::new(Float64Array::from_iter_values(windows.iter().map(|w| round(w.idle_cost_per_week, 2)))),
        Arc::new(StringArray::from_iter_values(windows.iter().map(|w| w.sentence(currency)))),
    ];
    RecordBatch::try_new(schema, columns)
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
                    gpu_hours_per_week: 8.0,
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
    fn two_days_are_listed_not_ranged() {
        let cells = week(|d, h| d < 2 && (9..12).contains(&h));
        let windows = find_windows(&cells, 50.0, 2);
        assert_eq!(windows[0].label, "Mon, Tue 09:00–12:00");
        // One run over midnight names both days.
        let cells = week(|d, h| (d == 5 && h >= 20) || (d == 6 && h < 12));
        assert_eq!(find_windows(&cells, 50.0, 2)[0].label, "Sat 20:00 – Sun 12:00");
    }
}
