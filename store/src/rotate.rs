//! When an open file closes: pure decisions, tested without I/O.
//!
//! Files cover aligned windows of the rotation period (with `--rotate 10m`:
//! 00:00–00:10, 00:10–00:20, …) and never span a UTC midnight, so each file
//! belongs to exactly one `date=` partition and file names line up across
//! hosts and restarts.

use apron_schemas::time::DAY_MS;

/// The start of the rotation window that holds `ts_ms`.
pub fn window_start(ts_ms: i64, rotate_ms: i64) -> i64 {
    ts_ms.div_euclid(rotate_ms) * rotate_ms
}

/// Whether a tick at `ts_ms` belongs in a new file, given the open file's
/// first tick `file_start_ms` and its last `last_ms`: true when the tick
/// falls in another rotation window or on another UTC day, or does not come
/// after the last one (the clock stepped back), so every file stays sorted
/// by time within each GPU.
pub fn should_rotate(file_start_ms: i64, last_ms: i64, ts_ms: i64, rotate_ms: i64) -> bool {
    ts_ms <= last_ms
        || window_start(ts_ms, rotate_ms) != window_start(file_start_ms, rotate_ms)
        || ts_ms.div_euclid(DAY_MS) != file_start_ms.div_euclid(DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = apron_schemas::time::MINUTE_MS;

    #[test]
    fn rotates_at_aligned_window_boundaries() {
        let ten = 10 * MIN;
        let start = 3 * ten + 5_000; // 00:30:05
        assert!(!should_rotate(start, start, start + 1_000, ten));
        assert!(!should_rotate(start, start, 4 * ten - 1, ten)); // 00:39:59.999
        assert!(should_rotate(start, start, 4 * ten, ten)); // 00:40:00
    }

    #[test]
    fn rotates_at_utc_midnight_even_mid_window() {
        let seven = 7 * MIN; // does not divide a day
        let before = DAY_MS - 1_000;
        assert_eq!(window_start(before, seven), window_start(DAY_MS, seven));
        assert!(should_rotate(before, before, DAY_MS, seven));
    }

    #[test]
    fn a_clock_jump_back_starts_a_new_file() {
        assert!(should_rotate(100 * MIN, 101 * MIN, 99 * MIN, 10 * MIN));
        assert!(should_rotate(100 * MIN, 101 * MIN, 101 * MIN, 10 * MIN), "a repeated tick");
    }
}
