//! The period a report covers: `--month YYYY-MM`, `--from T --to T`,
//! `--last D`, or by default the last 30 days; always half-open
//! `[start, end)` and in UTC.
//!
//! Parsing the flags' values is here (clap calls [`parse_month`] and
//! [`parse_time`]); which rows fall in the period is the SQL's business,
//! with the bounds bound as `$1` and `$2` ([`Period::params`]).

use std::time::Duration;

use apron_schemas::time::{DAY_MS, DAY_SECS, HOUR_MS, HOUR_SECS, MINUTE_MS, MINUTE_SECS};
use chrono::{DateTime, Datelike, Months, NaiveDate, NaiveDateTime, TimeZone, Utc};
use datafusion::common::ScalarValue;

use crate::error::{Error, PeriodError};

/// The default period: the last 30 days, ending now.
pub const DEFAULT_LAST: Duration = Duration::from_secs(30 * DAY_SECS);

/// Bucket lengths a time chart uses, seconds, shortest first.
pub const BUCKETS: [i64; 10] = {
    let (minute, hour, day) = (MINUTE_SECS as i64, HOUR_SECS as i64, DAY_SECS as i64);
    [minute, 5 * minute, 15 * minute, 30 * minute, hour, 2 * hour, 3 * hour, 6 * hour, 12 * hour, day]
};

/// The flags that choose a period, as parsed; see [`Period::choose`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeriodChoice {
    /// `--month`: the first day of a UTC calendar month.
    pub month: Option<NaiveDate>,
    /// `--from`: start, milliseconds since the Unix epoch.
    pub from: Option<i64>,
    /// `--to`: end (exclusive), milliseconds since the Unix epoch.
    pub to: Option<i64>,
    /// `--last`: the period ending now.
    pub last: Option<Duration>,
}

/// A half-open UTC period `[start_ms, end_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// Start, inclusive, milliseconds since the Unix epoch.
    pub start_ms: i64,
    /// End, exclusive, milliseconds since the Unix epoch.
    pub end_ms: i64,
}

impl Period {
    /// The period `choice` names, `now_ms` being the current time: the month,
    /// or `--from`/`--to` (a missing `--to` is now; a missing `--from` is 30
    /// days before `--to`), or the `--last` (default 30 days) up to now.
    /// Fails when the start is not before the end.
    pub fn choose(choice: &PeriodChoice, now_ms: i64) -> Result<Period, Error> {
        // A period ending now ends on a whole second: milliseconds would
        // mean nothing in its label.
        let now_ms = now_ms - now_ms.rem_euclid(1_000);
        let span = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let period = if let Some(first) = choice.month {
            let next = Period::next_month(first);
            let next = next.ok_or(PeriodError::MonthOutOfRange { month: first })?;
            Period { start_ms: midnight_ms(first), end_ms: midnight_ms(next) }
        } else if choice.from.is_some() || choice.to.is_some() {
            let end_ms = choice.to.unwrap_or(now_ms);
            let start_ms = choice.from.unwrap_or_else(|| end_ms.saturating_sub(span(DEFAULT_LAST)));
            Period { start_ms, end_ms }
        } else {
            let last = choice.last.unwrap_or(DEFAULT_LAST);
            Period { start_ms: now_ms.saturating_sub(span(last)), end_ms: now_ms }
        };
        if period.start_ms >= period.end_ms {
            return Err(
                PeriodError::Empty { from: show_ms(period.start_ms), to: show_ms(period.end_ms) }.into()
            );
        }
        Ok(period)
    }

    /// The bucket for a time chart of the period: the shortest of
    /// [`BUCKETS`] that draws at most about 800 points (a month: hourly).
    pub fn chart_bucket_seconds(&self) -> i64 {
        let seconds = (self.end_ms - self.start_ms) / 1000;
        BUCKETS.into_iter().find(|b| seconds / b <= 800).unwrap_or(BUCKETS[BUCKETS.len() - 1])
    }

    /// Start and end as UTC timestamps, to bind as `$1` and `$2`.
    pub fn params(&self) -> [ScalarValue; 2] {
        [timestamp(self.start_ms), timestamp(self.end_ms)]
    }

    /// The period as a reader sees it: `2026-11-01 00:00 – 2026-12-01 00:00 UTC (30 days)`.
    pub fn label(&self) -> String {
        format!("{} – {} UTC ({})", show_ms(self.start_ms), show_ms(self.end_ms), self.length())
    }

    /// The period's length in words: `30 days`, `6 h 30 min`.
    pub fn length(&self) -> String {
        let span = self.end_ms - self.start_ms;
        let (days, hours, mins) = (span / DAY_MS, span % DAY_MS / HOUR_MS, span % HOUR_MS / MINUTE_MS);
        match (days, hours, mins) {
            (1, 0, 0) => "1 day".to_owned(),
            (d, 0, 0) if d > 0 => format!("{d} days"),
            (0, h, 0) => format!("{h} h"),
            (0, 0, m) => format!("{m} min"),
            (_, _, m) => {
                let h = span / HOUR_MS;
                if m == 0 { format!("{h} h") } else { format!("{h} h {m} min") }
            }
        }
    }

    /// Hours of the period that have passed by `now_ms` (a period reaching
    /// into the future is counted up to now): what a GPU could have been
    /// recorded for.
    pub fn elapsed_hours(&self, now_ms: i64) -> f64 {
        let end = self.end_ms.min(now_ms).max(self.start_ms);
        (end - self.start_ms) as f64 / HOUR_MS as f64
    }

    /// The first day of the month before `month`'s.
    pub fn previous_month(month: NaiveDate) -> Option<NaiveDate> {
        month.with_day(1)?.checked_sub_months(Months::new(1))
    }

    /// The first day of the month after `month`'s.
    pub fn next_month(month: NaiveDate) -> Option<NaiveDate> {
        month.with_day(1)?.checked_add_months(Months::new(1))
    }
}

/// A UTC timestamp parameter of `ms`.
pub fn timestamp(ms: i64) -> ScalarValue {
    ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()))
}

/// `ms` as `2026-11-01 00:00` (UTC), with seconds when it has any.
pub fn show_ms(ms: i64) -> String {
    match Utc.timestamp_millis_opt(ms).single() {
        Some(t) if ms % MINUTE_MS == 0 => t.format("%Y-%m-%d %H:%M").to_string(),
        Some(t) if ms % 1000 == 0 => t.format("%Y-%m-%d %H:%M:%S").to_string(),
        Some(t) => t.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        None => format!("{ms} ms"),
    }
}

/// The first millisecond of `day` (UTC).
pub fn midnight_ms(day: NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis())
}

/// The calendar month (UTC) holding `ms`.
pub fn month_holding(ms: i64) -> Option<Period> {
    let first = DateTime::from_timestamp_millis(ms)?.date_naive().with_day(1)?;
    Some(Period { start_ms: midnight_ms(first), end_ms: midnight_ms(Period::next_month(first)?) })
}

/// Parses `--month`: `YYYY-MM`, a UTC calendar month; gives its first day.
pub fn parse_month(s: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(&format!("{s}-01"), "%Y-%m-%d")
        .ok()
        .filter(|_| s.len() == 7)
        .ok_or_else(|| "not a month: expected YYYY-MM, e.g. 2026-11".to_owned())
}

/// Parses `--from` and `--to`: a date `YYYY-MM-DD` (midnight UTC), or an
/// RFC 3339 time (`2026-11-02T08:00:00Z`, `2026-11-02T09:00:00+01:00`), or
/// `YYYY-MM-DDTHH:MM[:SS]` taken as UTC. Gives milliseconds since the epoch.
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(day) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(midnight_ms(day));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    Err("not a date or time: expected YYYY-MM-DD or RFC 3339, e.g. 2026-11-02 or 2026-11-02T08:00:00Z"
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_round_minutes_hours_and_a_day() {
        assert_eq!(BUCKETS, [60, 300, 900, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200, 86_400]);
    }

    const NOW: i64 = 1_796_000_000_000;

    fn ms(s: &str) -> i64 {
        parse_time(s).expect("valid")
    }

    #[test]
    fn a_month_is_its_utc_calendar_month() {
        let choice = PeriodChoice { month: Some(parse_month("2026-11").expect("ok")), ..Default::default() };
        let p = Period::choose(&choice, NOW).expect("valid");
        assert_eq!((p.start_ms, p.end_ms), (ms("2026-11-01"), ms("2026-12-01")));
        assert_eq!(p.label(), "2026-11-01 00:00 – 2026-12-01 00:00 UTC (30 days)");
        let december =
            PeriodChoice { month: Some(parse_month("2026-12").expect("ok")), ..Default::default() };
        let p = Period::choose(&december, NOW).expect("valid");
        assert_eq!(p.end_ms, ms("2027-01-01"));
        assert_eq!(Period::previous_month(parse_month("2026-01").expect("ok")), parse_month("2025-12").ok());
    }

    #[test]
    fn from_and_to_are_half_open_and_default_sensibly() {
        let choice =
            PeriodChoice { from: Some(ms("2026-11-02")), to: Some(ms("2026-11-05")), ..Default::default() };
        let p = Period::choose(&choice, NOW).expect("valid");
        assert_eq!(p.end_ms - p.start_ms, 3 * 86_400_000);
        assert_eq!(p.length(), "3 days");
        let only_from = PeriodChoice { from: Some(NOW - 3_600_000), ..Default::default() };
        assert_eq!(Period::choose(&only_from, NOW).expect("valid").end_ms, NOW);
        let default = Period::choose(&PeriodChoice::default(), NOW).expect("valid");
        assert_eq!((default.start_ms, default.end_ms), (NOW - 30 * 86_400_000, NOW));
        let backwards =
            PeriodChoice { from: Some(ms("2026-11-05")), to: Some(ms("2026-11-02")), ..Default::default() };
        let err = Period::choose(&backwards, NOW).expect_err("backwards");
        assert_eq!(err.to_string(), "--from 2026-11-05 00:00 is not before --to 2026-11-02 00:00");
    }

    #[test]
    fn times_parse_in_utc_and_bad_ones_say_what_is_expected() {
        assert_eq!(ms("2026-11-02T08:00:00Z"), ms("2026-11-02T09:00:00+01:00"));
        assert_eq!(ms("2026-11-02T08:00"), ms("2026-11-02") + 8 * 3_600_000);
        assert!(parse_time("2026-13-02").expect_err("bad").contains("YYYY-MM-DD"));
        assert!(parse_time("yesterday").is_err());
        assert!(parse_month("2026-13").expect_err("bad").contains("YYYY-MM"));
        assert!(parse_month("2026-1").is_err());
        assert!(parse_month("2026-11-01").is_err());
    }

    #[test]
    fn lengths_read_naturally() {
        let p = |mins: i64| Period { start_ms: 0, end_ms: mins * 60_000 };
        assert_eq!(p(5).length(), "5 min");
        assert_eq!(p(120).length(), "2 h");
        assert_eq!(p(1440).length(), "1 day");
        assert_eq!(p(1530).length(), "25 h 30 min");
        assert_eq!(p(2 * 1440).length(), "2 days");
        assert_eq!(p(1445).length(), "24 h 5 min");
        assert_eq!(p(3 * 1440 + 60).length(), "73 h");
        assert_eq!(p(61).length(), "1 h 1 min");
        // Seconds below a whole minute are not shown.
        assert_eq!(Period { start_ms: 0, end_ms: 90_500 }.length(), "1 min");
        assert_eq!(p(5).elapsed_hours(60_000), 1.0 / 60.0);
    }
}
