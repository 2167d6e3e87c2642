//! The time units every table, file name and report counts in: timestamps
//! are milliseconds since the Unix epoch (UTC), so these are the one place
//! that says how many milliseconds a minute, an hour and a day hold, and
//! how many seconds (durations, `seconds` columns) and minutes they hold.

/// Milliseconds in a minute: the step of the minute tables (`gpu_minutes`,
/// `proc_minutes`).
pub const MINUTE_MS: i64 = 60_000;

/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 3_600_000;

/// Milliseconds in a UTC day: a `date=` partition spans one.
pub const DAY_MS: i64 = 86_400_000;

/// Seconds in a minute.
pub const MINUTE_SECS: u64 = 60;

/// Seconds in an hour: a GPU-hour is this many GPU-seconds.
pub const HOUR_SECS: u64 = 3_600;

/// Seconds in a UTC day.
pub const DAY_SECS: u64 = 86_400;

/// Minutes in an hour: a GPU-hour is this many GPU-minutes.
pub const HOUR_MINUTES: u64 = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_agree_with_each_other_and_with_chrono() {
        assert_eq!(HOUR_MS, 60 * MINUTE_MS);
        assert_eq!(DAY_MS, 24 * HOUR_MS);
        assert_eq!(DAY_MS, DAY_SECS as i64 * 1000);
        assert_eq!(MINUTE_MS, MINUTE_SECS as i64 * 1000);
        assert_eq!(HOUR_MS, HOUR_SECS as i64 * 1000);
        assert_eq!(HOUR_SECS, HOUR_MINUTES * MINUTE_SECS);
        assert_eq!(DAY_SECS, 24 * HOUR_SECS);
        assert_eq!(chrono::TimeDelta::days(1).num_milliseconds(), DAY_MS);
        assert_eq!(chrono::TimeDelta::minutes(1).num_milliseconds(), MINUTE_MS);
    }
}
