//! End to end: what acting on apron's findings is worth, on the hand-built
//! fleet of `apron_tests::scenario` (see tests/it/reports.rs for its minutes
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
            let at = header.iter().position(|l| l.starts_with("Savings:")).unwrap_or(header.len());
            c.eq(
                "savings header",
                header.get(at..at + 3).unwrap_or_default(),
                &[
                    "Savings:  reclaiming GPUs after 2m idle and ending zombies after 3m would have freed 0.18 GPU-hours of capacity, worth $0.85 at cost (69.7% of the $1.22 idle cost):".to_owned(),
                    // vision's 3 minutes on GPU-A were held; GPU-B's 8 empty.
                    "          held by someone (reclaiming takes it back) 0.05 GPU-hours, $0.36; already free on empty GPUs (a scheduler's to use, nothing to reclaim) 0.13 GPU-hours, $0.49".to_owned(),
                    // 11 minutes' energy, 11 × 0.0013 = 0.0143.
                    "          cash not spent: $0.01 of energy; operating cost paid either way (no [[gpu_cost]] entry has ops_avoidable = true); the purchase is written off either way".to_owned(),
                ][..],
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

/// A GPU of a hand-built fleet: its UUID and index on host `h1`, its
/// utilization in each minute, and the process holding memory on it
/// throughout (pid, user, uid), if any.
struct Gpu {
    uuid: &'static str,
    index: i32,
    util: fn(i64) -> i32,
    process: Option<(i32, &'static str, i64)>,
}

/// Writes `minutes` minutes from `start` of `gpus` on host `h1`, one sample
/// a minute, through the recorder's writer. Every GPU is a "Test A" (the
/// scenario's config: 0.001 a second written off, 0.001 a second to
/// operate, and 18 000 J = 0.0013 of energy a minute: 0.1213 a minute).
fn write_fleet(data: &std::path::Path, start: i64, minutes: i64, gpus: &[Gpu]) {
    use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
    use apron_store::source::Tick;
    use apron_store::writer::RollingWriter;
    let mut h1 = RollingWriter::new(DataLayout::new(data), "h1", std::time::Duration::from_secs(3_600))
        .expect("host h1");
    for m in 0..minutes {
        let ts = start + m * 60_000;
        let mut tick = Tick::default();
        for g in gpus {
            tick.gpus.push(GpuSample {
                ts,
                gpu_uuid: g.uuid.into(),
                gpu_index: g.index,
                gpu_model: Some("Test A".into()),
                interval_ms: 60_000,
                gpu_util_pct: Some((g.util)(m)),
                power_mw: Some(300_000),
                energy_mj: Some(1_000_000_000 + m * 18_000_000),
                ..Default::default()
            });
            if let Some((pid, user, uid)) = g.process {
                tick.procs.push(ProcSample {
                    ts,
                    gpu_uuid: g.uuid.into(),
                    pid,
                    interval_ms: 60_000,
                    identity: ProcIdentity {
                        proc_start: Some(start - 3_600_000 + i64::from(pid)),
                        comm: Some("python".into()),
                        uid: Some(uid),
                        user: Some(user.into()),
                        ..Default::default()
                    },
                    used_mem_bytes: Some(1 << 30),
                    ..Default::default()
                });
            }
        }
        h1.push(ts, &tick).expect("push h1");
    }
    h1.close().expect("close h1");
}

/// The rows of a CSV file apron wrote (a header line; cells quoted where
/// they hold a comma or a quote), each as column → cell.
fn csv_rows(path: &std::path::Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let split = |line: &str| {
        let (mut cells, mut cell, mut quoted, mut chars) =
            (Vec::new(), String::new(), false, line.chars().peekable());
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    cell.push('"');
                    chars.next();
                }
                '"' => quoted = !quoted,
                ',' if !quoted => cells.push(std::mem::take(&mut cell)),
                _ => cell.push(c),
            }
        }
        cells.push(cell);
        cells
    };
    let mut lines = text.lines();
    let header = lines.next().map(split).unwrap_or_default();
    lines.map(|l| header.iter().cloned().zip(split(l)).collect()).collect()
}

/// The overlap fleet, Monday 2 November 2026 10:00–10:30 on host h1, every
/// minute costing 0.1213 (0.06 written off, 0.06 to operate, 0.0013 of
/// energy), the rules `[reclaim] for = "10m"` and `[zombie] min_idle = "3m"`:
///
/// - GPU-X: alice (vision) holds 1 GiB all along; idle m 0–14, busy from
///   m 15: a zombie earlier, busy now.
/// - GPU-Y: carol (nlp) holds 1 GiB all along; idle throughout: a zombie now.
/// - GPU-Z: idle and empty throughout.
///
/// Reclaiming frees each GPU's minutes from its 11th idle one on: X m 10–14,
/// Y and Z m 10–29: 45 minutes, 5.4585. Ending zombies frees each one's
/// minutes from its 4th on: X m 3–14, Y m 3–29: 39 minutes, 4.7307. Both
/// together, each minute once: X m 3–14, Y m 3–29, Z m 10–29: 59 minutes,
/// 7.1567, not 10.1892; of which Z's 20 (2.426) were empty and 39 (4.7307)
/// held by someone. Cash not spent: energy 59 × 0.0013 = 0.0767; operating
/// cost 59 × 0.06 = 3.54 only where it is avoidable. Idle cost: 75 minutes,
/// 9.0975.
fn overlap_fixture(ops_avoidable: bool) -> Fixture {
    let fx = Fixture::new();
    std::fs::remove_dir_all(&fx.data).expect("remove the scenario's data");
    let gpus = [
        Gpu {
            uuid: "GPU-X",
            index: 0,
            util: |m| if m < 15 { 0 } else { 50 },
            process: Some((101, "alice", 1001)),
        },
        Gpu { uuid: "GPU-Y", index: 1, util: |_| 0, process: Some((102, "carol", 1003)) },
        Gpu { uuid: "GPU-Z", index: 2, util: |_| 0, process: None },
    ];
    write_fleet(&fx.data, ms(START), 30, &gpus);
    let mut config = std::fs::read_to_string(&fx.config).expect("the config");
    if ops_avoidable {
        config = config.replace("ops_per_gpu_hour = 3.6\n", "ops_per_gpu_hour = 3.6\nops_avoidable = true\n");
    }
    config += "\n[reclaim]\nfor = \"10m\"\n\n[zombie]\nmin_idle = \"3m\"\n";
    std::fs::write(&fx.config, config).expect("write the config");
    fx
}

#[test]
fn actions_together_count_each_gpu_minute_once() {
    let fx = overlap_fixture(false);
    let mut c = Checks::default();
    let dir = fx.dir.path().join("report");
    let out = fx.apron(&["report", "--month", "2026-11", "--out", dir.to_str().expect("UTF-8")]);
    c.eq("report exit code", out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    let actions = csv_rows(&dir.join("actions.csv"));
    let worth = |prefix: &str| -> Option<f64> {
        actions.iter().find(|r| r["action"].starts_with(prefix)).and_then(|r| r["worth"].parse().ok())
    };
    c.eq("reclaim alone", worth("Reclaim GPUs"), Some(5.46));
    c.eq("zombies alone", worth("End zombie"), Some(4.73));
    c.eq("together, each GPU-minute once", worth("Together"), Some(7.16));
    for r in &actions {
        let w: f64 = r["worth"].parse().unwrap_or(f64::NAN);
        c.check(w <= 9.10, || format!("{} is worth {w}, more than the idle cost 9.10", r["action"]));
        let because = &r["because"];
        c.check(!because.contains('_'), || format!("a column name in {because:?}"));
    }
    c.check(stdout.contains("$7.16"), || {
        format!("the headline says what all actions free together: {stdout}")
    });
    // What is what: capacity freed at cost, held by someone or already free,
    // and the cash that would not be spent.
    match fx.json(&fx.config, &["savings", "--month", "2026-11"]) {
        Ok((rows, header)) => {
            let total = rows.iter().find(|r| r["team"] == "(total)").cloned().unwrap_or_default();
            let want = [
                ("freed_gpu_hours", 59.0 / 60.0),
                ("freed_cost", 7.16),
                ("freed_held_gpu_hours", 39.0 / 60.0),
                ("freed_held_cost", 4.73),
                ("freed_empty_gpu_hours", 20.0 / 60.0),
                ("freed_empty_cost", 2.43),
                ("cash_energy_cost", 0.08),
                ("cash_ops_cost", 0.0),
            ];
            for (key, value) in want {
                c.near(&format!("total {key}"), number(&total, key), value, 0.006);
            }
            let text = header.join("\n");
            c.check(text.contains("held by someone") && text.contains("already free"), || text.clone());
            c.check(text.contains("not spent"), || text.clone());
        }
        Err(e) => c.fail(e),
    }
    let fx = overlap_fixture(true);
    match fx.json(&fx.config, &["savings", "--month", "2026-11"]) {
        Ok((rows, _)) => {
            let total = rows.iter().find(|r| r["team"] == "(total)").cloned().unwrap_or_default();
            c.near("avoidable operating cost", number(&total, "cash_ops_cost"), 3.54, 0.006);
        }
        Err(e) => c.fail(e),
    }
    c.finish();
}

#[test]
fn zombies_now_are_those_still_holding_an_idle_gpu() {
    let fx = overlap_fixture(false);
    let mut c = Checks::default();
    let dir = fx.dir.path().join("report");
    let out = fx.apron(&["report", "--month", "2026-11", "--out", dir.to_str().expect("UTF-8")]);
    c.eq("report exit code", out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = stdout.lines().find(|l| l.trim_start().starts_with("zombies")).unwrap_or_default().to_owned();
    println!("{line}");
    // carol's process holds GPU-Y idle now; alice's paused once and is busy now.
    c.check(line.contains(" 1 process") && line.contains("now"), || format!("one zombie now: {line}"));
    c.check(line.contains("2 in the period"), || format!("two in the period: {line}"));
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap_or_default();
    c.check(summary.contains("Zombies idle now"), || format!("the tile counts those idle now: {summary}"));
    let zombie_action = csv_rows(&dir.join("actions.csv"))
        .into_iter()
        .find(|r| r["action"].starts_with("End zombie"))
        .map(|r| r["because"].clone())
        .unwrap_or_default();
    c.check(zombie_action.starts_with("1 process "), || {
        format!("the action counts those idle now: {zombie_action}")
    });
    c.finish();
}

/// Three hours, Monday 2 November 2026 10:00–13:00 in a report of the whole
/// month: GPUs 0–2 idle and empty throughout, GPU 3 idle 10:00–12:00 and
/// busy 12:00–13:00. The fleet is 60 % idle or more in each of the three
/// hours: the window "Mon 10:00–13:00". Its cron lines use GPUs 0–2 (GPU 3
/// is busy in part of it): their idle cost in it is 3 × 180 × 0.1213 =
/// 65.502. The period's idle cost is 660 minutes, 80.058; a week's idle
/// cost × 30/7 would be 343.11. Reclaiming after 2 h frees minutes 120–179
/// of GPUs 0–2, all of them in the window: together 65.50 again.
#[test]
fn the_window_is_worth_its_idle_cost_in_the_period_on_its_gpus() {
    let fx = Fixture::new();
    std::fs::remove_dir_all(&fx.data).expect("remove the scenario's data");
    let idle = |_| 0;
    let gpus = [
        Gpu { uuid: "GPU-0", index: 0, util: idle, process: None },
        Gpu { uuid: "GPU-1", index: 1, util: idle, process: None },
        Gpu { uuid: "GPU-2", index: 2, util: idle, process: None },
        Gpu { uuid: "GPU-3", index: 3, util: |m| if m < 120 { 0 } else { 40 }, process: None },
    ];
    write_fleet(&fx.data, ms(START), 180, &gpus);
    let mut c = Checks::default();
    let dir = fx.dir.path().join("report");
    let out = fx.apron(&["report", "--month", "2026-11", "--out", dir.to_str().expect("UTF-8")]);
    c.eq("report exit code", out.status.code(), Some(0));
    println!("{}", String::from_utf8_lossy(&out.stdout));
    let actions = csv_rows(&dir.join("actions.csv"));
    let worth = |prefix: &str| -> Option<f64> {
        actions.iter().find(|r| r["action"].starts_with(prefix)).and_then(|r| r["worth"].parse().ok())
    };
    c.eq("the window, on its GPUs, in the period", worth("Run batch work"), Some(65.50));
    c.eq("reclaim", worth("Reclaim GPUs"), Some(21.83));
    c.eq("together", worth("Together"), Some(65.50));
    c.finish();
}
