//! End to end: the data series behind each chart (`apron_analyze::report::charts`)
//! agree with the reports, on the hand-built fleet of
//! `apron_tests::scenario`, with its rollups and on the raw files alone.
//!
//! Each series is computed through apron's library; the reports it must
//! agree with are what the `apron` binary prints (`--format json`), a
//! separate process and path, and, where the figure is easy to state, the
//! hand computation below.
//!
//! # The series, by hand
//!
//! The period is the scenario's ten minutes, so a time chart's bucket is
//! one minute (600 s / 60 s = 10 points, well under the 800 a chart draws).
//! Minute by minute (threshold 5%):
//!
//! | minute | GPU-A (50%, then 0%) | GPU-B (0%)  | GPU-C (100%)  | busy | idle-held | idle-empty | power  |
//! |--------|----------------------|-------------|---------------|------|-----------|------------|--------|
//! | 0–4    | busy                 | idle-empty  | busy          | 2    | 0         | 1          | 0.9 kW |
//! | 5–7    | idle-held (alice)    | idle-empty  | busy          | 1    | 1         | 1          | 0.9 kW |
//! | 8–9    | idle-held (alice)    | idle-empty  | unrecorded    | 0    | 1         | 1          | 0.6 kW |
//!
//! Over the ten buckets: busy 13 GPU-minutes = 780 s, idle-held 5 = 300 s,
//! idle-empty 10 = 600 s (the GPU-hours `apron spend` splits among teams);
//! every recorded minute draws 300 W × 3 GPUs or 2, 18 kJ a GPU-minute:
//! 28 × 18 kJ = 504 kJ = 0.14 kWh, which is also (8 × 0.9 + 2 × 0.6) kW ×
//! 1/60 h.
//!
//! Hour of the week: one cell, Monday 10:00, mean utilization weighted by
//! recorded seconds: (5 × 50 + 5 × 0 + 10 × 0 + 8 × 100) / 28 = 37.5%.
//!
//! GPU-days: one cell per GPU on 2026-11-02, its busy share: h1/0 (GPU-A)
//! 5 busy minutes of 10 = 50%; h1/1 (GPU-B) 0%; h2/0 (GPU-C) 100% (its
//! two unrecorded minutes are not in the share).
//!
//! Money (`team-spend`, `idle-cost`): see `tests/it/reports.rs`; to the cent
//! nlp 0.97 busy, vision 0.15 busy + 0.61 idle, "(unallocated)" 0.61 idle,
//! unassigned 0.46 busy.

use apron_analyze::cli::flag_groups::GlobalArgs;
use apron_analyze::cli::flag_groups::PeriodArgs;
use apron_analyze::commands::ReportContext;
use apron_analyze::output::Format;
use apron_analyze::report::charts;
use apron_tests::checks::Checks;
use apron_tests::scenario::{END, FROM_TO, Fixture, START, ms};
use serde_json::Value;

/// What the chart functions return for the scenario's period, in plain
/// tuples: (t_ms, busy, idle_held, idle_empty), (team, busy_cost,
/// idle_cost), (dow, hour, mean_util_pct), (gpu, day, mean_util_pct),
/// (t_ms, power_kw, energy_kwh).
#[derive(Debug)]
struct Series {
    bucket_seconds: i64,
    fleet_state: Vec<(i64, f64, f64, f64)>,
    team_spend: Vec<(String, f64, f64)>,
    idle_by_team: Vec<(String, f64, f64)>,
    hour_of_week: Vec<(u32, u32, Option<f64>)>,
    gpu_days: Vec<(String, String, Option<f64>)>,
    power: Vec<(i64, f64, f64)>,
}

/// Every chart's series over the scenario's ten minutes, through apron's
/// library, as `apron chart` computes them.
async fn series(fx: &Fixture) -> Series {
    let global = GlobalArgs {
        data: fx.data.clone(),
        config: Some(fx.config.clone()),
        format: Format::Json,
        memory_limit: None,
    };
    let period = PeriodArgs { from: Some(ms(START)), to: Some(ms(END)), ..PeriodArgs::default() };
    let report = ReportContext::prepare_quietly(&global, &period)
        .await
        .expect("the scenario's period has data")
        .with_costs()
        .await
        .expect("minute_costs registers");
    let fleet_state = charts::fleet_state(&report)
        .await
        .expect("fleet_state")
        .iter()
        .map(|p| (p.t_ms, p.busy, p.idle_held, p.idle_empty))
        .collect();
    let team_spend = charts::team_spend(&report)
        .await
        .expect("team_spend")
        .into_iter()
        .map(|t| (t.team, t.busy_cost, t.idle_cost))
        .collect();
    let idle_by_team = charts::idle_by_team(&report)
        .await
        .expect("idle_by_team")
        .into_iter()
        .map(|t| (t.team, t.busy_cost, t.idle_cost))
        .collect();
    let hour_of_week = charts::hour_of_week(&report)
        .await
        .expect("hour_of_week")
        .cells
        .iter()
        .map(|c| (c.dow, c.hour, c.mean_util_pct))
        .collect();
    let gpu_days = charts::gpu_days(&report)
        .await
        .expect("gpu_days")
        .into_iter()
        .map(|c| (c.gpu, c.day.to_string(), c.busy_share_pct))
        .collect();
    let power = charts::power(&report)
        .await
        .expect("power")
        .iter()
        .map(|p| (p.t_ms, p.power_kw, p.energy_kwh))
        .collect();
    Series {
        bucket_seconds: charts::bucket_seconds(&report),
        fleet_state,
        team_spend,
        idle_by_team,
        hour_of_week,
        gpu_days,
        power,
    }
}

/// The rows `apron --format json ARGS… --from … --to …` prints, or none
/// (recorded as a failure) when it did not succeed.
fn cli_rows(c: &mut Checks, fx: &Fixture, variant: &str, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    all.extend_from_slice(&FROM_TO);
    let out = fx.apron(&all);
    if !out.status.success() {
        c.fail(format!(
            "{variant}: apron {}: {}, stderr: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return Vec::new();
    }
    match serde_json::from_slice(&out.stdout) {
        Ok(rows) => rows,
        Err(e) => {
            c.fail(format!("{variant}: apron {}: stdout is not a JSON array ({e})", args.join(" ")));
            Vec::new()
        }
    }
}

fn text(row: &Value, key: &str) -> String {
    row[key].as_str().unwrap_or_default().to_owned()
}

fn number(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

/// Every check of the module docs, on the data as it is now.
fn check_all(c: &mut Checks, fx: &Fixture, rt: &tokio::runtime::Runtime, variant: &str) {
    let s = rt.block_on(series(fx));
    let what = |name: &str| format!("{variant}: {name}");

    // --- bucket --------------------------------------------------------
    c.eq(&what("bucket_seconds of a 10-minute period"), s.bucket_seconds, 60);
    let bucket_hours = s.bucket_seconds as f64 / 3600.0;

    // --- team-spend = apron spend ----------------------------------------
    let spend = cli_rows(c, fx, variant, &["spend"]);
    let from_cli: Vec<(String, f64, f64)> =
        spend.iter().map(|r| (text(r, "team"), number(r, "busy_cost"), number(r, "idle_cost"))).collect();
    c.eq(&what("team-spend: teams, in spend's order"), names(&s.team_spend), names(&from_cli));
    for ((team, busy, idle), (_, cli_busy, cli_idle)) in s.team_spend.iter().zip(&from_cli) {
        c.near(&what(&format!("team-spend {team}: busy_cost = spend's")), *busy, *cli_busy, 1e-9);
        c.near(&what(&format!("team-spend {team}: idle_cost = spend's")), *idle, *cli_idle, 1e-9);
    }
    let by_hand =
        [("nlp", 0.97, 0.0), ("vision", 0.15, 0.61), ("(unallocated)", 0.0, 0.61), ("unassigned", 0.46, 0.0)];
    c.eq(
        &what("team-spend: teams by hand"),
        names(&s.team_spend),
        by_hand.iter().map(|t| t.0.to_owned()).collect(),
    );
    for ((team, busy, idle), (_, want_busy, want_idle)) in s.team_spend.iter().zip(&by_hand) {
        c.near(&what(&format!("team-spend {team}: busy_cost by hand")), *busy, *want_busy, 1e-9);
        c.near(&what(&format!("team-spend {team}: idle_cost by hand")), *idle, *want_idle, 1e-9);
    }

    // --- idle-cost = apron idle-cost --by team ------------------------------
    let idle = cli_rows(c, fx, variant, &["idle-cost", "--by", "team"]);
    let from_cli: Vec<(String, f64, f64)> =
        idle.iter().map(|r| (text(r, "team"), 0.0, number(r, "idle_cost"))).collect();
    c.eq(&what("idle-cost: teams, in idle-cost's order"), names(&s.idle_by_team), names(&from_cli));
    for ((team, busy, cost), (_, _, cli_cost)) in s.idle_by_team.iter().zip(&from_cli) {
        c.near(&what(&format!("idle-cost {team}: = idle-cost --by team")), *cost, *cli_cost, 1e-9);
        c.eq(&what(&format!("idle-cost {team}: no busy cost drawn")), *busy, 0.0);
    }
    let got: Vec<(String, f64)> = s.idle_by_team.iter().map(|t| (t.0.clone(), t.2)).collect();
    c.eq(
        &what("idle-cost by hand"),
        got,
        vec![("(unallocated)".to_owned(), 0.61), ("vision".to_owned(), 0.61)],
    );

    // --- fleet-state × bucket = spend's GPU-hours -----------------------------
    let minute = |m: i64| ms(START) + m * 60_000;
    let want: Vec<(i64, f64, f64, f64)> = (0..10)
        .map(|m| {
            let busy = if m < 5 {
                2.0
            } else if m < 8 {
                1.0
            } else {
                0.0
            };
            let held = if m < 5 { 0.0 } else { 1.0 };
            (minute(m), busy, held, 1.0)
        })
        .collect();
    c.eq(&what("fleet-state: the ten minutes by hand"), s.fleet_state.clone(), want);
    let total = |f: fn(&(i64, f64, f64, f64)) -> f64| s.fleet_state.iter().map(f).sum::<f64>() * bucket_hours;
    let sums = [
        ("busy", total(|p| p.1), 780.0, "busy_gpu_hours"),
        ("idle_held", total(|p| p.2), 300.0, "idle_held_gpu_hours"),
        ("idle_empty", total(|p| p.3), 600.0, "idle_empty_gpu_hours"),
    ];
    for (state, hours, seconds, column) in sums {
        c.near(
            &what(&format!("fleet-state: Σ {state} × bucket (GPU-h) by hand")),
            hours,
            seconds / 3600.0,
            1e-9,
        );
        // spend prints each team's hours to 0.01 h; the sum of four rows
        // is off by at most half a hundredth each.
        let printed: f64 = spend.iter().map(|r| number(r, column)).sum();
        let tolerance = 0.005 * spend.len() as f64 + 1e-9;
        c.near(
            &what(&format!("fleet-state: Σ {state} × bucket = Σ spend {column}")),
            hours,
            printed,
            tolerance,
        );
    }

    // --- power: energy = spend's -------------------------------------------
    let printed_kwh: f64 = spend.iter().map(|r| number(r, "energy_kwh")).sum();
    let tolerance = 0.005 * spend.len() as f64 + 1e-9;
    match s.power.last() {
        Some(&(_, _, kwh)) => {
            c.near(&what("power: last energy_kwh by hand"), kwh, 0.14, 1e-9);
            c.near(&what("power: last energy_kwh = Σ spend energy_kwh"), kwh, printed_kwh, tolerance);
        }
        None => c.fail(what("power: no points")),
    }
    let integrated: f64 = s.power.iter().map(|p| p.1 * bucket_hours).sum();
    c.near(&what("power: Σ power_kw × bucket by hand"), integrated, 0.14, 1e-9);
    c.near(&what("power: Σ power_kw × bucket = Σ spend energy_kwh"), integrated, printed_kwh, tolerance);
    // Point by point, the running energy is the power drawn so far.
    let mut so_far = 0.0;
    for (i, &(t, kw, kwh)) in s.power.iter().enumerate() {
        so_far += kw * bucket_hours;
        c.near(
            &what(&format!("power point {i}: energy_kwh = Σ power_kw × bucket so far")),
            kwh,
            so_far,
            1e-9,
        );
        let want_kw = if i < 8 { 0.9 } else { 0.6 };
        c.near(&what(&format!("power point {i}: power_kw by hand")), kw, want_kw, 1e-9);
        c.eq(&what(&format!("power point {i}: bucket start")), t, minute(i as i64));
    }
    c.eq(&what("power: ten points"), s.power.len(), 10);

    // --- hour-of-week = apron windows' profile ------------------------------
    let profile = cli_rows(c, fx, variant, &["windows"]);
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let mut from_cli: Vec<(u32, u32, Option<f64>)> = profile
        .iter()
        .map(|r| {
            let dow = DAYS.iter().position(|d| *d == text(r, "dow")).map_or(99, |d| d as u32);
            (dow, r["hour"].as_u64().unwrap_or(99) as u32, r["mean_util_pct"].as_f64())
        })
        .collect();
    from_cli.sort_by_key(|c| (c.0, c.1));
    let mut cells = s.hour_of_week.clone();
    cells.sort_by_key(|c| (c.0, c.1));
    let keys = |v: &[(u32, u32, Option<f64>)]| v.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>();
    c.eq(&what("hour-of-week: the windows profile's (dow, hour)"), keys(&cells), keys(&from_cli));
    for (cell, row) in cells.iter().zip(&from_cli) {
        // windows prints one decimal.
        match (cell.2, row.2) {
            (Some(a), Some(b)) => c.near(
                &what(&format!("hour-of-week ({}, {}): = windows' mean_util_pct", cell.0, cell.1)),
                a,
                b,
                0.05 + 1e-9,
            ),
            (a, b) => c.eq(
                &what(&format!("hour-of-week ({}, {}): both known", cell.0, cell.1)),
                a.is_some(),
                b.is_some(),
            ),
        }
    }
    c.eq(&what("hour-of-week: one cell by hand"), keys(&cells), vec![(0, 10)]);
    c.near(
        &what("hour-of-week: Monday 10:00 by hand"),
        cells.first().and_then(|c| c.2).unwrap_or(f64::NAN),
        37.5,
        1e-9,
    );

    // --- gpu-days, by hand -----------------------------------------------------
    let day = "2026-11-02".to_owned();
    let want = vec![
        ("h1/0".to_owned(), day.clone(), Some(50.0)),
        ("h1/1".to_owned(), day.clone(), Some(0.0)),
        ("h2/0".to_owned(), day, Some(100.0)),
    ];
    let mut got = s.gpu_days.clone();
    got.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let keys = |v: &[(String, String, Option<f64>)]| {
        v.iter().map(|c| (c.0.clone(), c.1.clone())).collect::<Vec<_>>()
    };
    c.eq(&what("gpu-days: one cell per (GPU, day)"), keys(&got), keys(&want));
    for (g, w) in got.iter().zip(&want) {
        c.near(
            &what(&format!("gpu-days {} {}: busy_share_pct by hand", g.0, g.1)),
            g.2.unwrap_or(f64::NAN),
            w.2.unwrap_or(f64::NAN),
            1e-9,
        );
    }
}

fn names(rows: &[(String, f64, f64)]) -> Vec<String> {
    rows.iter().map(|r| r.0.clone()).collect()
}

#[test]
fn every_chart_series_agrees_with_the_reports_with_and_without_rollups() {
    let fx = Fixture::new();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let mut c = Checks::default();
    check_all(&mut c, &fx, &rt, "with rollups");
    fx.remove_rollups();
    check_all(&mut c, &fx, &rt, "raw files alone");
    c.finish();
}
