//! How many milliseconds a minute, an hour and a day hold, for the time
//! axes and buckets of the charts (times are UTC milliseconds since the Unix
//! epoch).
//!
//! apron-schemas' `time` module is the workspace's one place for these
//! units; this crate does not depend on apron-schemas, which would bring
//! Arrow and Parquet into a crate that only draws, so it keeps its own copy
//! and a test checks the two agree.

/// Milliseconds in a minute.
pub(crate) const MINUTE_MS: i64 = 60_000;

/// Milliseconds in an hour.
pub(crate) const HOUR_MS: i64 = 60 * MINUTE_MS;

/// Milliseconds in a UTC day.
pub(crate) const DAY_MS: i64 = 24 * HOUR_MS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_are_apron_schemas_units() {
        assert_eq!(MINUTE_MS, apron_schemas::time::MINUTE_MS);
        assert_eq!(HOUR_MS, apron_schemas::time::HOUR_MS);
        assert_eq!(DAY_MS, apron_schemas::time::DAY_MS);
    }
}
