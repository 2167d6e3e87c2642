//! A time axis in UTC: which instants get a tick and how they read.
//!
//! plotters' own ticks on an integer axis land on round numbers of
//! milliseconds, not on midnights; this picks ticks on whole hours, days or
//! Mondays, few enough that their labels do not touch. Pure arithmetic, so
//! it is tested without drawing.

use chrono::{DateTime, Utc};

use super::axis;
use super::frame::Frame;
use super::text;
use crate::time::{DAY_MS, HOUR_MS, MINUTE_MS};

/// 1970-01-01 was a Thursday; the first Monday was four days later.
const FIRST_MONDAY_MS: i64 = 4 * DAY_MS;

/// Bucket width a time chart assumes when its series has a single point,
/// ms.
pub(super) const LONE_BUCKET_MS: i64 = HOUR_MS;

/// The bucket of a series from its times in order (the smallest step
/// between two, else [`LONE_BUCKET_MS`]) and the span it covers, from the
/// first time to the last plus a bucket: `(bucket, start, end)`; `None`
/// when there are no times.
pub(super) fn bucket_and_span(sorted: &[i64]) -> Option<(i64, i64, i64)> {
    let (first, last) = (*sorted.first()?, *sorted.last()?);
    let bucket = sorted.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0).min().unwrap_or(LONE_BUCKET_MS);
    Some((bucket, first, last.saturating_add(bucket)))
}

/// Tick spacings to try, smallest first (minutes, for a report on a short
/// period).
const STEPS_MS: [i64; 18] = [
    MINUTE_MS,
    5 * MINUTE_MS,
    10 * MINUTE_MS,
    15 * MINUTE_MS,
    30 * MINUTE_MS,
    HOUR_MS,
    2 * HOUR_MS,
    3 * HOUR_MS,
    6 * HOUR_MS,
    12 * HOUR_MS,
    DAY_MS,
    2 * DAY_MS,
    3 * DAY_MS,
    7 * DAY_MS,
    14 * DAY_MS,
    28 * DAY_MS,
    91 * DAY_MS,
    364 * DAY_MS,
];

/// The chosen ticks of a time range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TimeAxis {
    /// The range shown, UTC ms.
    pub(super) range: std::ops::Range<i64>,
    /// Labelled instants, UTC ms, ascending.
    pub(super) ticks: Vec<i64>,
    /// Unlabelled grid instants between the ticks (hours or days), UTC ms.
    pub(super) minor: Vec<i64>,
    /// Spacing of `ticks`, ms.
    pub(super) step_ms: i64,
}

impl TimeAxis {
    /// Ticks for `start..end` (UTC ms) with at most `max_ticks` labels. An
    /// empty or reversed range is widened to one hour from `start`.
    pub(super) fn new(start: i64, end: i64, max_ticks: usize) -> Self {
        let end = if end > start { end } else { start.saturating_add(HOUR_MS) };
        let span = end - start;
        let max_ticks = max_ticks.max(2) as i64;
        let step_ms =
            STEPS_MS.into_iter().find(|step| span / step < max_ticks).unwrap_or(STEPS_MS[STEPS_MS.len() - 1]);
        let ticks = instants(start, end, step_ms);
        let minor_step = if step_ms > DAY_MS {
            DAY_MS
        } else if step_ms > HOUR_MS {
            HOUR_MS
        } else {
            0
        };
        let minor = if minor_step == 0 || span / minor_step > 400 {
            Vec::new()
        } else {
            instants(start, end, minor_step).into_iter().filter(|t| !ticks.contains(t)).collect()
        };
        Self { range: start..end, ticks, minor, step_ms }
    }

    /// How the tick at `t_ms` reads: `"Nov 03"` on midnights and for day
    /// steps, `"06:00"` for the hours between.
    pub(super) fn label(&self, t_ms: i64) -> String {
        let Some(t) = DateTime::<Utc>::from_timestamp_millis(t_ms) else {
            return String::new();
        };
        if self.step_ms >= DAY_MS || t_ms.rem_euclid(DAY_MS) == 0 {
            t.format("%b %d").to_string()
        } else {
            t.format("%H:%M").to_string()
        }
    }
}

/// A time axis for `start..end` (UTC ms) on a plot `plot_width` pixels wide,
/// with as many ticks as fit without their labels touching.
pub(super) fn fitted(frame: &Frame, start: i64, end: i64, plot_width: i32) -> TimeAxis {
    let font = axis::tick_font(frame);
    let label = text::width("Nov 30", &font).max(text::width("00:00", &font));
    let max_ticks = plot_width / (label + frame.px(30.0)).max(1);
    TimeAxis::new(start, end, max_ticks.max(2) as usize)
}

/// Instants in `start..=end` on the grid of `step`: hours and days on UTC
/// boundaries, weeks on Mondays.
fn instants(start: i64, end: i64, step: i64) -> Vec<i64> {
    let origin = if step % (7 * DAY_MS) == 0 { FIRST_MONDAY_MS } else { 0 };
    // Day multiples count from the first midnight in range, so a month
    // shows Nov 01, Nov 03, …, not whichever days divide the epoch evenly.
    let base = if step > DAY_MS && step % (7 * DAY_MS) != 0 { DAY_MS } else { step };
    let first = origin + (start - origin).div_euclid(base) * base;
    let first = if first < start { first + base } else { first };
    let mut out = Vec::new();
    let mut t = first;
    while t <= end {
        out.push(t);
        t += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-01 00:00 UTC, a Sunday.
    const NOV_1: i64 = 1_793_491_200_000;

    #[test]
    fn the_test_date_is_what_it_says() {
        let t = DateTime::<Utc>::from_timestamp_millis(NOV_1).unwrap();
        assert_eq!(t.format("%Y-%m-%d %H:%M %a").to_string(), "2026-11-01 00:00 Sun");
    }

    #[test]
    fn a_month_gets_every_other_midnight() {
        let axis = TimeAxis::new(NOV_1, NOV_1 + 30 * DAY_MS, 16);
        assert_eq!(axis.step_ms, 2 * DAY_MS);
        assert_eq!(axis.ticks.first(), Some(&NOV_1));
        assert_eq!(axis.ticks.len(), 16);
        assert!(axis.ticks.iter().all(|t| t % DAY_MS == 0));
        assert_eq!(axis.label(NOV_1), "Nov 01");
        assert_eq!(axis.label(axis.ticks[1]), "Nov 03");
        assert_eq!(axis.minor.len(), 15, "the days between ticks are minor lines");
    }

    #[test]
    fn weeks_start_on_mondays() {
        let axis = TimeAxis::new(NOV_1, NOV_1 + 90 * DAY_MS, 14);
        assert_eq!(axis.step_ms, 7 * DAY_MS);
        let first = DateTime::<Utc>::from_timestamp_millis(axis.ticks[0]).unwrap();
        assert_eq!(first.format("%a %d").to_string(), "Mon 02");
    }

    #[test]
    fn a_day_gets_hours_with_midnight_as_a_date() {
        let axis = TimeAxis::new(NOV_1 + 30 * MINUTE_MS, NOV_1 + DAY_MS, 8);
        assert_eq!(axis.step_ms, 3 * HOUR_MS);
        assert_eq!(axis.ticks.first(), Some(&(NOV_1 + 3 * HOUR_MS)));
        assert_eq!(axis.label(NOV_1 + 3 * HOUR_MS), "03:00");
        assert_eq!(axis.label(NOV_1 + DAY_MS), "Nov 02");
    }

    #[test]
    fn ten_minutes_get_minute_ticks() {
        let start = NOV_1 + 10 * HOUR_MS;
        let axis = TimeAxis::new(start, start + 10 * MINUTE_MS, 8);
        assert_eq!(axis.step_ms, 5 * MINUTE_MS);
        assert_eq!(axis.ticks.len(), 3);
        assert_eq!(axis.label(start + 5 * MINUTE_MS), "10:05");
    }

    #[test]
    fn an_empty_range_is_widened() {
        let axis = TimeAxis::new(NOV_1, NOV_1, 10);
        assert_eq!(axis.range, NOV_1..NOV_1 + HOUR_MS);
        assert!(!axis.ticks.is_empty());
    }
}
