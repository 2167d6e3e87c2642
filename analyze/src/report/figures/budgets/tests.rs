//! Budgets worked by hand on November 2026 (1 November is a Sunday, the
//! month has 30 days).

use super::*;
use crate::config::Team;

const HOUR: i64 = HOUR_MS;

/// 2026-11-DD HH:00 UTC.
fn at(day: u32, hour: u32) -> i64 {
    chrono::NaiveDate::from_ymd_opt(2026, 11, day)
        .and_then(|d| d.and_hms_opt(hour, 0, 0))
        .map(|t| t.and_utc().timestamp_millis())
        .expect("a date in November 2026")
}

fn november() -> Period {
    Period { start_ms: at(1, 0), end_ms: at(30, 0) + 24 * HOUR }
}

fn config(budgets: &[(&str, Option<f64>)]) -> Config {
    let team = budgets
        .iter()
        .map(|&(name, budget)| Team {
            name: name.to_owned(),
            users: vec![name.to_owned()],
            uids: Vec::new(),
            k8s_namespaces: Vec::new(),
            k8s_labels: Default::default(),
            slurm_accounts: Vec::new(),
            budget_per_month: budget,
        })
        .collect();
    Config { team, ..Config::default() }
}

/// The first week, 1 November 00:00 to 8 November 00:00: "vision" spends 1
/// an hour Monday to Friday 09:00–17:00 (40 hours), "(unallocated)" 0.5
/// every hour, so every hour is recorded.
fn first_week() -> Vec<TeamHour> {
    let mut hours = Vec::new();
    for h in 0..7 * 24 {
        let hour = at(1, 0) + h * HOUR;
        hours.push(TeamHour { team: "(unallocated)".into(), hour, cost: 0.5 });
        let t = DateTime::from_timestamp_millis(hour).expect("a time");
        if t.weekday().num_days_from_monday() < 5 && (9..17).contains(&t.hour()) {
            hours.push(TeamHour { team: "vision".into(), hour, cost: 1.0 });
        }
    }
    hours
}

#[test]
fn the_rest_of_the_month_goes_as_its_hours_of_the_week_went() {
    // Spent 40 in the first week; 16 weekdays remain (9–13, 16–20, 23–27
    // and Monday 30), 8 hours each: 40 + 128 = 168. Over 100 after 60 more
    // hours: 9–13 (80), 16 (88), 17 (96), 18 at 09–12 (100, not above),
    // 13:00 (101).
    let b = of_hours(&config(&[("vision", Some(100.0))]), november(), at(8, 0), at(8, 0), &first_week());
    assert!(!b.over);
    let row = b.of("vision").expect("a row for vision");
    assert!((row.spent - 40.0).abs() < 1e-9, "{row:?}");
    assert!((row.forecast - 168.0).abs() < 1e-9, "{row:?}");
    assert_eq!(row.exceeded_at, None);
    assert_eq!(row.forecast_exceeded_at, Some(at(18, 13)));
    assert_eq!(row.used_pct(), Some(40.0));
    assert_eq!(b.forecast_exceeded().count(), 1);
    assert_eq!(b.exceeded().count(), 0);
    assert_eq!(
        b.header_lines("USD"),
        [
            "Budgets:  vision: $40.00 of $100.00 (40.0%), forecast $168.00 (168.0%), over budget by 2026-11-18 13:00 at this rate"
        ]
    );
}

#[test]
fn spend_past_the_budget_is_dated_by_its_hour() {
    // 8 on Monday 2, Tuesday 3, Wednesday 4 (24); Thursday 5 from 09:00: 30
    // at 14:00 (not above), 31 at 15:00.
    let b = of_hours(&config(&[("vision", Some(30.0))]), november(), at(8, 0), at(8, 0), &first_week());
    let row = b.of("vision").expect("a row");
    assert_eq!(row.exceeded_at, Some(at(5, 15)));
    assert_eq!(row.forecast_exceeded_at, Some(at(5, 15)));
    assert_eq!(b.exceeded().count(), 1);
    assert_eq!(b.forecast_exceeded().count(), 0);
}

#[test]
fn a_month_that_is_over_forecasts_what_it_spent() {
    // Now is past the month: the data stopped on the 8th, nothing is projected.
    let now = november().end_ms + HOUR;
    let b = of_hours(
        &config(&[("vision", Some(100.0)), ("nlp", None)]),
        november(),
        at(8, 0),
        now,
        &first_week(),
    );
    assert!(b.over);
    assert_eq!(b.rows.len(), 1, "only teams with a budget");
    let row = &b.rows[0];
    assert_eq!((row.spent, row.forecast, row.forecast_exceeded_at), (40.0, 40.0, None));
    assert_eq!(b.header_lines("EUR"), ["Budgets:  vision: €40.00 of €100.00 (40.0%)"]);
}

#[test]
fn hours_of_the_week_not_yet_recorded_take_the_mean_hour() {
    // Monday 2 November 00:00 cost 2 and 01:00 cost 4; the data ends at
    // 02:30. The hour from 02:00 was recorded in part: not a mean. Each hour
    // ahead takes the mean of 3: half of 02:00–03:00 (1.5), then 03:00 (3).
    let recorded = [at(2, 0), at(2, 1), at(2, 2)];
    let spent: BTreeMap<i64, f64> = [(at(2, 0), 2.0), (at(2, 1), 4.0), (at(2, 2), 10.0)].into();
    let ahead = forecast(&recorded, &spent, at(2, 2) + HOUR / 2, at(2, 4));
    assert_eq!(ahead, [(at(2, 2), 1.5), (at(2, 3), 3.0)]);
    // A recorded hour a team has no row in cost it nothing: the mean halves.
    let recorded = [at(2, 0), at(2, 1), at(2, 2), at(2, 3)];
    let spent: BTreeMap<i64, f64> = [(at(2, 0), 2.0), (at(2, 1), 6.0)].into();
    assert_eq!(forecast(&recorded, &spent, at(2, 4), at(2, 5)), [(at(2, 4), 2.0)]);
    assert_eq!(forecast(&[], &spent, at(2, 4), at(2, 5)), []);
}

#[test]
fn a_zero_budget_is_passed_by_the_first_cost() {
    let b = of_hours(&config(&[("vision", Some(0.0))]), november(), at(8, 0), at(8, 0), &first_week());
    let row = b.of("vision").expect("a row");
    assert_eq!(row.exceeded_at, Some(at(2, 9)));
    assert_eq!(row.used_pct(), None);
}

#[test]
fn a_calendar_month_is_known_as_one() {
    assert_eq!(month_of(&november()), Some(november()));
    assert_eq!(month_of(&Period { start_ms: at(1, 0), end_ms: at(30, 0) }), None);
    assert_eq!(month_holding(at(18, 13) + 5), Some(november()));
}
