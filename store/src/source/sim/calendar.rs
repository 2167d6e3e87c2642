//! The fleet's week: when people start work and when inference traffic
//! comes. The simulated organisation works in UTC (the reports' time zone),
//! Monday to Friday; nights and weekends are quiet.

use apron_schemas::time::{DAY_MS, HOUR_MS};

/// Day of the week of `ts_ms`, 0 = Monday (1970-01-01 was a Thursday).
pub(super) fn weekday(ts_ms: i64) -> i64 {
    (ts_ms.div_euclid(DAY_MS) + 3).rem_euclid(7)
}

/// Hour of the day (UTC) of `ts_ms`, 0–23.
pub(super) fn hour(ts_ms: i64) -> i64 {
    ts_ms.rem_euclid(DAY_MS) / HOUR_MS
}

/// Whether `ts_ms` falls in office hours: Monday to Friday, 09:00–18:00.
pub(super) fn office(ts_ms: i64) -> bool {
    weekday(ts_ms) < 5 && (9..18).contains(&hour(ts_ms))
}

/// How likely work starts at `ts_ms`, relative to a weekday afternoon (1):
/// the thinning weight of the job arrival process. Evenings still see
/// overnight runs launched; nights and weekends little.
pub(super) fn start_weight(ts_ms: i64) -> f32 {
    let h = hour(ts_ms);
    if weekday(ts_ms) >= 5 {
        return if (10..20).contains(&h) { 0.06 } else { 0.03 };
    }
    match h {
        0..7 => 0.04,
        7 => 0.3,
        8..18 => 1.0,
        18..22 => 0.35,
        _ => 0.1,
    }
}

/// Inference demand at each hour of a weekday, as a share of the peak.
const DEMAND: [f32; 25] = [
    0.10, 0.08, 0.07, 0.06, 0.06, 0.08, 0.15, 0.30, 0.55, 0.75, 0.85, 0.88, 0.80, 0.85, 0.90, 0.88, 0.80,
    0.65, 0.45, 0.35, 0.28, 0.22, 0.16, 0.12, 0.10,
];

/// What one tick needs to know about the time, computed once per host and
/// tick.
#[derive(Debug, Clone, Copy)]
pub(super) struct Calendar {
    /// Office hours: notebooks get used, people poke at things.
    pub(super) office: bool,
    /// Inference demand, 0–1 of the daily peak.
    pub(super) demand: f32,
}

impl Calendar {
    /// The calendar at `ts_ms`.
    pub(super) fn at(ts_ms: i64) -> Calendar {
        let in_day = ts_ms.rem_euclid(DAY_MS);
        let h = (in_day / HOUR_MS) as usize;
        let f = (in_day % HOUR_MS) as f32 / HOUR_MS as f32;
        let weekday_demand = DEMAND[h] + (DEMAND[h + 1] - DEMAND[h]) * f;
        let demand = if weekday(ts_ms) >= 5 { 0.02 + 0.25 * weekday_demand } else { weekday_demand };
        Calendar { office: office(ts_ms), demand }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 2026-11-30 is a Monday.
    const MONDAY_MS: i64 = 1_795_996_800_000;

    #[test]
    fn weeks_start_on_monday() {
        assert_eq!(weekday(0), 3, "1970-01-01 was a Thursday");
        assert_eq!(weekday(MONDAY_MS), 0);
        assert_eq!(weekday(MONDAY_MS + 5 * DAY_MS), 5);
        assert_eq!(hour(MONDAY_MS + 14 * HOUR_MS + 59 * 60_000), 14);
    }

    #[test]
    fn work_starts_in_office_hours() {
        let afternoon = MONDAY_MS + 14 * HOUR_MS;
        let night = MONDAY_MS + 3 * HOUR_MS;
        let saturday = MONDAY_MS + 5 * DAY_MS + 14 * HOUR_MS;
        assert!(office(afternoon) && !office(night) && !office(saturday));
        assert_eq!(start_weight(afternoon), 1.0);
        assert!(start_weight(night) < 0.1 && start_weight(saturday) < 0.1);
        let noon = Calendar::at(MONDAY_MS + 12 * HOUR_MS);
        assert!(noon.office && noon.demand > 0.7);
        assert!(Calendar::at(night).demand < 0.1);
        assert!(Calendar::at(saturday).demand < 0.4);
    }
}
