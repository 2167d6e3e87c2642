//! End to end: what acting on apron's findings is worth, on the hand-built
//! fleet of `apron_tests::scenario` (see tests/reports.rs for its minutes
//! and prices): `apron savings` and the budgets of `spend` and `alerts`,
//! every figure worked out by hand below.
//!
//! # Savings, by hand
//!
//! `--reclaim-after 2m --zombie-after 3m`. GPU-A is idle minutes 5–9 with
//! alice (vision, 1 GiB) holding memory: reclaimed from its third idle
//! minute on (m 7, 8, 9: 3 × 0.1213 = 0.3639, 180 GPU-s); alice's zombie
//! ended from its fourth (m 8, 9: 2 × 0.1213 = 0.2426, 120 s), minutes the
//! reclaim frees already, so vision's freed time is 3 minutes, 0.3639.
//! GPU-B is idle and empty minutes 0–9: reclaimed from m 2 (8 × 0.0613 =
//! 0.4904, 480 s), "(unallocated)"'s. In all 0.8543 freed → $0.85 (0.49 +
//! 0.36, each column to the cent keeping its total), of the $1.22 idle cost:
//! 69.7 %; vision 0.36 of its 0.61 idle (59.0 %), "(unallocated)" 0.49 of
//! 0.61 (80.3 %). nlp and unassigned had no idle time: no row.
//!
//! # Budgets, by hand
//!
//! The scenario's ten minutes written twice, at 10:00 and 11:00 on Monday
//! 2 November 2026: vision spends 0.758125 and nlp 0.9704 in each.
//!
//! - `alerts --at 2026-11-02T11:10:00Z`: the data ends at 11:10; the hour
//!   from 11:00 is recorded in part, so the means come from the 10:00 hour
//!   alone, for every hour of the week (the others are not recorded yet:
//!   the team's mean hour). nlp (budget 5): 1.9408 spent; ahead, 50 minutes
//!   of 11:00 (0.808667, 2.749467), 12:00 (3.719867), 13:00 (4.690267),
//!   14:00 (5.660667 > 5): `budget_forecast_exceeded` since 14:00, forecast
//!   1.9408 + 0.9704 × 684 h 50 min (to 1 December) = 666.50 (666.5031).
//!   vision (budget 1): 0.758125 after the first copy, 1.51625 after the
//!   second, passed at 11:00: `budget_exceeded`, 1.52. research (budget 10)
//!   spent nothing, its forecast 0: no alert.
//! - `spend --month 2026-11` (the month is over): vision's budget 1, its
//!   rounded cost 1.52 (152.0 %), forecast its cost; over budget since
//!   2026-11-02 11:00.

use apron_tests::checks::Checks;
use apron_tests::scenario::{FROM_TO, Fixture, START, ms, write_at};
use serde_json::Value;

fn number(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn savings_replay_the_period_with_the_stretches_ended_by_the_rules() {
    let fx = Fixture::new();
    let mut c = Checks::default();
    let mut args = vec!["savings", "--reclaim-after", "2m", "--zombie-after", "3m"];
    args.extend_from_slice(&FROM_TO);
    match fx.json(&fx.config, &args) {
        Ok((rows, header)) => {
            let teams: Vec<&str> = rows.iter().filter_map(|r| r["team"].as_str()).collect();
            c.eq("savings rows", teams, vec!["(unallocated)", "vision", "(total)"]);
            // team, reclaim h, reclaim $, zombie h, zombie $, freed h, freed $, idle $, %
            let want = [
                ("(unallocated)", [0.13, 0.49, 0.0, 0.0, 0.13, 0.49, 0.61], Some(80.3)),
                ("vision", [0.05, 0.36, 0.03, 0.24, 0.05, 0.36, 0.61], Some(59.0)),
                ("(total)", [0.18, 0.85, 0.03, 0.24, 0.18, 0.85, 1.22], Some(69.7)),
            ];
            let keys = [
                "reclaim_gpu_hours",
                "reclaim_cost",
                "zombie_gpu_hours",
                "zombie_cost",
                "freed_gpu_hours",
                "freed_cost",
                "idle_cost",
            ];
            for (row, (team, values, pct)) in rows.iter().zip(want) {
                for (key, value) in keys.iter().zip(values) {
                    c.near(&format!("{team} {key}"), number(row, key), value, 1e-9);
                }
                c.eq(&format!("{team} freed_pct_of_idle"), row["freed_pct_of_idle"].as_f64(), pct);
            }
            let line = header.iter().find(|l| l.starts_with("Savings:")).cloned().unwrap_or_default();
            c.eq(
                "savings header",
                line.as_str(),
                "Savings:  reclaiming GPUs after 2m idle and ending zombies after 3m would have freed 0.18 GPU-hours, $0.85 of the $1.22 idle cost (69.7%)",
            );
        }
        Err(e) => c.fail(e),
    }
    // The config's rules (reclaim after 2h, zombies after 10m): nothing in ten minutes.
    match fx.json(&fx.config, &[&["savings"], &FROM_TO[..]].concat()) {
        Ok((rows, _)) => {
            let total = rows.iter().find(|r| r["team"] == "(total)");
            c.eq("default rules free nothing", total.map(|r| number(r, "freed_cost")), Some(0.0));
            c.eq("idle teams still listed", rows.len(), 3);
        }
        Err(e) => c.fail(e),
    }
    c.finish();
}

/// The scenario twice, at 10:00 and 11:00, with budgets.
fn budget_fixture() -> Fixture {
    let fx = Fixture::new();
    write_at(&fx.data, ms(START) + 3_600_000);
    let config = std::fs::read_to_string(&fx.config).expect("the config");
    let config = config
        .replace("name = \"vision\"\n", "name = \"vision\"\nbudget_per_month = 1\n")
        .replace("name = \"nlp\"\n", "name = \"nlp\"\nbudget_per_month = 5\n")
        + "\n[[team]]\nname = \"research\"\nusers = [\"nobody\"]\nbudget_per_month = 10\n";
    std::fs::write(&fx.config, config).expect("write the config");
    fx
}

#[test]
fn alerts_fire_on_budgets_passed_and_forecast_to_pass() {
    let fx = budget_fixture();
    let mut c = Checks::default();
    let out = fx.apron(&["--format", "json", "alerts", "--at", "2026-11-02T11:10:00Z"]);
    c.eq("alerts exit code (rules fire)", out.status.code(), Some(1));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let budget: Vec<&Value> = rows.iter().filter(|r| r["team"].is_string()).collect();
    c.eq("budget alerts", budget.len(), 2);
    let find = |rule: &str| budget.iter().find(|r| r["rule"] == rule).copied().cloned().unwrap_or_default();
    let passed = find("budget_exceeded");
    c.eq("passed: team", passed["team"].as_str(), Some("vision"));
    c.near("passed: spent", number(&passed, "value"), 1.52, 1e-9);
    c.near("passed: budget", number(&passed, "budget"), 1.0, 1e-9);
    c.eq("passed: since", passed["since"].as_str(), Some("2026-11-02T11:00:00Z"));
    c.eq("passed: the value is money", passed["unit"].as_str(), Some("USD"));
    c.eq("passed: no host", passed["host"].is_null(), true);
    let ahead = find("budget_forecast_exceeded");
    c.eq("forecast: team", ahead["team"].as_str(), Some("nlp"));
    c.near("forecast: amount", number(&ahead, "value"), 666.5, 1e-9);
    c.near("forecast: budget", number(&ahead, "budget"), 5.0, 1e-9);
    c.eq("forecast: when", ahead["since"].as_str(), Some("2026-11-02T14:00:00Z"));
    c.eq("forecast: the value is money", ahead["unit"].as_str(), Some("USD"));
    // Before the second copy, nothing was passed and nlp's forecast had no
    // whole hour to go on.
    let out = fx.apron(&["--format", "json", "alerts", "--at", "2026-11-02T10:10:00Z"]);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    c.eq("no budget alert at 10:10", rows.iter().filter(|r| r["team"].is_string()).count(), 0);
    c.finish();
}

#[test]
fn spend_of_a_month_shows_each_budget_against_what_was_spent() {
    let fx = budget_fixture();
    let mut c = Checks::default();
    match fx.json(&fx.config, &["spend", "--month", "2026-11"]) {
        Ok((rows, header)) => {
            let vision = rows.iter().find(|r| r["team"] == "vision").cloned().unwrap_or_default();
            c.near("vision cost", number(&vision, "cost"), 1.52, 1e-9);
            c.near("vision budget", number(&vision, "budget"), 1.0, 1e-9);
            c.near("vision used", number(&vision, "budget_used_pct"), 152.0, 1e-9);
            c.near("vision forecast (month over)", number(&vision, "forecast"), 1.52, 1e-9);
            let unassigned = rows.iter().find(|r| r["team"] == "unassigned").cloned().unwrap_or_default();
            c.eq("no budget: null", unassigned["budget"].is_null(), true);
            let lines: Vec<&String> = header.iter().filter(|l| l.contains("of $")).collect();
            c.eq(
                "budget lines",
                lines.iter().map(|l| l.trim_start_matches("Budgets:").trim()).collect::<Vec<_>>(),
                vec![
                    "vision: $1.52 of $1.00 (152.0%), over budget since 2026-11-02 11:00",
                    "nlp: $1.94 of $5.00 (38.8%)",
                    "research: $0.00 of $10.00 (0.0%)",
                ],
            );
        }
        Err(e) => c.fail(e),
    }
    // Not a calendar month: where to see the budgets, no figures.
    match fx.json(&fx.config, &[&["spend"], &FROM_TO[..]].concat()) {
        Ok((rows, header)) => {
            c.eq("no budgets outside a month", rows.iter().all(|r| r["budget"].is_null()), true);
            c.eq(
                "the hint",
                header.iter().any(|l| l.contains("per calendar month: give --month YYYY-MM")),
                true,
            );
        }
        Err(e) => c.fail(e),
    }
    c.finish();
}
