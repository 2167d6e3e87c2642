//! End to end: the numbers of apron's cost reports (`spend`, `idle-cost`,
//! `windows`) and of `zombies` and `reclaim`, on the hand-built fleet of
//! `apron_tests::scenario`, each figure worked out by hand below from
//! docs/src/definitions.md, not by re-running the SQL. Then the same
//! reports on the raw files alone (rollups deleted) must say exactly the
//! same.
//!
//! Every mismatch is collected and the test fails once at the end listing
//! them all, so one wrong figure does not hide the others.
//!
//! # The figures, by hand
//!
//! Prices (see `scenario::CONFIG`): a "Test A" GPU-second costs 0.002, a
//! "Test B" one 0.001; a recorded minute's energy is 0.005 kWh, which costs
//! 0.005 × 0.2 × 1.3 = 0.0013. So a full minute of
//!
//! - GPU-A or GPU-C ("Test A") costs 60 × 0.002 + 0.0013 = 0.1213,
//! - GPU-B ("Test B")          costs 60 × 0.001 + 0.0013 = 0.0613.
//!
//! Minutes (threshold 5%): GPU-A m 0–4 busy (50%), shared by memory-time
//! alice 1 GiB : bob 3 GiB = 1/4 : 3/4; GPU-A m 5–9 idle-held, alice alone;
//! GPU-B m 0–9 idle-empty, "(unallocated)"; GPU-C m 0–7 busy, carol alone;
//! GPU-C m 8–9 unrecorded: no row, no cost, not idle.
//!
//! | team (user)      | busy s       | idle-held s  | idle-empty s  | energy J                         | busy cost                   | idle cost           | cost     |
//! |------------------|--------------|--------------|---------------|----------------------------------|-----------------------------|---------------------|----------|
//! | nlp (carol)      | 8 × 60 = 480 | 0            | 0             | 8 × 18 000 = 144 000             | 8 × 0.1213 = 0.9704         | 0                   | 0.9704   |
//! | vision (alice)   | 5 × 15 = 75  | 5 × 60 = 300 | 0             | 5 × 4 500 + 5 × 18 000 = 112 500 | 5 × 0.1213 / 4 = 0.151625   | 5 × 0.1213 = 0.6065 | 0.758125 |
//! | (unallocated)    | 0            | 0            | 10 × 60 = 600 | 10 × 18 000 = 180 000            | 0                           | 10 × 0.0613 = 0.613 | 0.613    |
//! | unassigned (bob) | 5 × 45 = 225 | 0            | 0             | 5 × 13 500 = 67 500              | 5 × 0.1213 × 3/4 = 0.454875 | 0                   | 0.454875 |
//! | fleet            | 780          | 300          | 600           | 504 000 (0.14 kWh)               | 1.5769                      | 1.2195              | 2.7964   |
//!
//! Hours to two decimals: nlp 480 s = 0.1333 → 0.13; vision 375 s = 0.1042
//! → 0.10 (busy 75 s → 0.02, idle-held 300 s → 0.08); "(unallocated)" 600 s
//! → 0.17; unassigned 225 s = 0.0625 → 0.06. Energy: 0.04, 0.03125 → 0.03,
//! 0.05, 0.01875 → 0.02 kWh.
//!
//! Money to the cent keeping the total (largest remainder): the exact
//! amounts are 97.04, 75.8125, 61.3 and 45.4875 cents, 279.64 in all, so
//! the total is 280 cents; rounded down they make 97 + 75 + 61 + 45 = 278,
//! and the 2 cents left go to the largest remainders, vision (.8125) and
//! unassigned (.4875): 0.97, 0.76, 0.61, 0.46 (rounding each on its own
//! would print 2.79 against a 2.80 total). Each row's busy and idle cost
//! must add up to its cost and each be its exact amount to within a cent
//! the right way: vision 0.15 + 0.61 (exact 0.1516 + 0.6065), unassigned
//! 0.46 + 0.00 (bob was never idle: exact idle cost 0). Fleet idle cost
//! 1.2195 → $1.22, 43.6% of $2.80. Shares of the printed total: 97/280 =
//! 34.6%, 76/280 = 27.1%, 61/280 = 21.8%, 46/280 = 16.4%.

use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::checks::Checks;
use apron_tests::number_after;
use apron_tests::scenario::{END, FROM_TO, Fixture, START, ms};
use serde_json::{Value, json};

/// What `apron --format json ARGS…` printed: the rows and the stderr lines
/// (the header), or `None` (recorded as a failure) when it did not succeed.
fn json(checks: &mut Checks, fx: &Fixture, args: &[&str]) -> Option<(Vec<Value>, Vec<String>)> {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = fx.apron(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        checks.fail(format!("apron {}: {}, stderr: {}", args.join(" "), out.status, stderr.trim()));
        return None;
    }
    match serde_json::from_slice::<Vec<Value>>(&out.stdout) {
        // The `Still:` line depends on how long ago the fixture's data ended
        // (header::data_end_line, tested there): left out of the counts.
        Ok(rows) => {
            Some((rows, stderr.lines().filter(|l| !l.starts_with("Still:")).map(str::to_owned).collect()))
        }
        Err(e) => {
            checks.fail(format!("apron {}: stdout is not a JSON array ({e})", args.join(" ")));
            None
        }
    }
}

/// The rows of `apron --format json ARGS…` with the period flags added.
fn rows(checks: &mut Checks, fx: &Fixture, args: &[&str]) -> Vec<Value> {
    let mut all = args.to_vec();
    all.extend_from_slice(&FROM_TO);
    json(checks, fx, &all).map(|(rows, _)| rows).unwrap_or_default()
}

/// The column names of `apron --format csv ARGS…`, in order (JSON objects
/// do not keep it).
fn columns(fx: &Fixture, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--format", "csv"];
    all.extend_from_slice(args);
    all.extend_from_slice(&FROM_TO);
    let out = fx.apron(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().next().unwrap_or_default().split(',').map(str::to_owned).collect()
}

fn spend_row(team: &str, hours: [f64; 5], money: [f64; 3], share_pct: f64) -> Value {
    json!({
        "team": team,
        "gpu_hours": hours[0],
        "busy_gpu_hours": hours[1],
        "idle_held_gpu_hours": hours[2],
        "idle_empty_gpu_hours": hours[3],
        // Every GPU of this fleet reports utilization: nothing is unknown.
        "unknown_gpu_hours": 0.0,
        "energy_kwh": hours[4],
        "cost": money[0],
        "busy_cost": money[1],
        "idle_cost": money[2],
        "unknown_cost": 0.0,
        "share_pct": share_pct,
        // The scenario's config sets no budget.
        "budget": null,
        "budget_used_pct": null,
        "forecast": null,
    })
}

/// Spend per team, highest cost first, as worked out in the module docs.
fn expected_spend() -> Vec<Value> {
    vec![
        spend_row("nlp", [0.13, 0.13, 0.0, 0.0, 0.04], [0.97, 0.97, 0.0], 34.6),
        spend_row("vision", [0.10, 0.02, 0.08, 0.0, 0.03], [0.76, 0.15, 0.61], 27.1),
        spend_row("(unallocated)", [0.17, 0.0, 0.0, 0.17, 0.05], [0.61, 0.0, 0.61], 21.8),
        // Bob was never idle: his 0.46 is all busy cost.
        spend_row("unassigned", [0.06, 0.06, 0.0, 0.0, 0.02], [0.46, 0.46, 0.0], 16.4),
    ]
}

/// A data folder of host h1 whose 60 ticks, 10:00–10:10 every 10 s, are
/// `tick(n, ts)` for n = 0…59, written through the recorder's writer, and
/// `scenario::CONFIG` to price it.
fn fixture_of(tick: impl Fn(i64, i64) -> Tick) -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let data = dir.path().join("data");
    let mut writer =
        RollingWriter::new(DataLayout::new(&data), "h1", Duration::from_secs(3_600)).expect("h1");
    for n in 0..60 {
        let ts = ms(START) + n * 10_000;
        writer.push(ts, &tick(n, ts)).expect("push");
    }
    writer.close().expect("close");
    let config = dir.path().join("apron.toml");
    std::fs::write(&config, apron_tests::scenario::CONFIG).expect("write apron.toml");
    Fixture { dir, data, config }
}

/// A process on `uuid` at `ts`, a `python` started an hour before START,
/// holding `mem` bytes, with its own SM utilization `sm`.
fn process(ts: i64, uuid: &str, pid: i32, user: &str, mem: i64, sm: Option<i32>) -> ProcSample {
    ProcSample {
        ts,
        gpu_uuid: uuid.into(),
        pid,
        interval_ms: 10_000,
        identity: ProcIdentity {
            proc_start: Some(ms(START) - 3_600_000 + i64::from(pid)),
            comm: Some("python".into()),
            user: Some(user.into()),
            ..Default::default()
        },
        used_mem_bytes: Some(mem),
        sm_util_pct: sm,
        ..Default::default()
    }
}

/// Runs `check` on the fixture's data with its minute rollups, then again
/// after removing them (raw files alone), naming each case.
fn with_rollups_then_raw(fx: &Fixture, mut check: impl FnMut(&str)) {
    check("with rollups");
    fx.remove_rollups();
    check("raw files alone");
}

/// The header every report prints first, for the `--from`/`--to` period.
fn check_common_header(checks: &mut Checks, what: &str, fx: &Fixture, lines: &[String]) {
    let want = [
        "Period:   2026-11-02 10:00 – 2026-11-02 10:10 UTC (10 min)".to_owned(),
        format!(
            "Data:     {}: 3 GPUs, first sample 2026-11-02 10:00, last 2026-11-02 10:09:50 UTC",
            fx.data.display()
        ),
        format!("Config:   {}", fx.config.display()),
    ];
    for (i, w) in want.iter().enumerate() {
        checks.eq(
            &format!("{what}: header line {}", i + 1),
            lines.get(i).map(String::as_str),
            Some(w.as_str()),
        );
    }
    // Recorded: GPU-A 10 + GPU-B 10 + GPU-C 8 = 28 GPU-minutes = 0.467 h;
    // unrecorded: GPU-C's minutes 8 and 9, 3 GPUs × 10 min − 28 = 2
    // GPU-minutes = 0.033 h. The header prints two decimals under 10 h.
    let recorded = lines.get(3).map(String::as_str).unwrap_or_default();
    checks.eq(&format!("{what}: recorded line"), recorded.starts_with("Recorded: "), true);
    match (number_after(recorded, "Recorded:"), number_after(recorded, "unrecorded:")) {
        (Some(r), Some(u)) => {
            checks.near(&format!("{what}: recorded GPU-hours"), r, 28.0 / 60.0, 0.005 + 1e-9);
            checks.near(&format!("{what}: unrecorded GPU-hours"), u, 2.0 / 60.0, 0.005 + 1e-9);
        }
        _ => checks.fail(format!("{what}: no recorded/unrecorded figures in {recorded:?}")),
    }
    checks.eq(&format!("{what}: unrecorded not idle"), recorded.ends_with("(not counted as idle)"), true);
}

#[test]
fn hand_built_fleet_costs_add_up_to_the_cent() {
    let fx = Fixture::new();
    let mut c = Checks::default();

    // --- spend ---------------------------------------------------------
    let mut args = vec!["spend"];
    args.extend_from_slice(&FROM_TO);
    if let Some((rows, header)) = json(&mut c, &fx, &args) {
        c.rows("spend", &rows, &expected_spend());
        check_common_header(&mut c, "spend", &fx, &header);
        c.eq("spend: header lines", header.len(), 6);
        c.eq(
            "spend: Cost line",
            header.get(4).map(String::as_str),
            Some("Cost:     $2.80 for 0.47 GPU-hours; idle $1.22 (43.6%)"),
        );
        c.eq(
            "spend: (unallocated) explained",
            header.get(5).map(String::as_str),
            Some("Who:      (unallocated) is no one: GPU time no process or allocation held (an empty GPU), not a team's"),
        );
        // The printed rows add up to the printed total, and each row's busy
        // and idle cost to its cost, to the cent.
        let cents = |r: &Value, k: &str| (r[k].as_f64().unwrap_or(f64::NAN) * 100.0).round() as i64;
        let total = header.get(4).and_then(|l| number_after(l, "Cost:")).unwrap_or(f64::NAN);
        c.eq(
            "spend: Σ cost = Cost: total (cents)",
            rows.iter().map(|r| cents(r, "cost")).sum::<i64>(),
            (total * 100.0).round() as i64,
        );
        for r in &rows {
            c.eq(
                &format!("spend {}: busy_cost + idle_cost = cost (cents)", r["team"]),
                cents(r, "busy_cost") + cents(r, "idle_cost"),
                cents(r, "cost"),
            );
        }
        let idle = header.get(4).and_then(|l| number_after(l, "idle")).unwrap_or(f64::NAN);
        c.eq(
            "spend: Σ idle_cost = header idle (cents)",
            rows.iter().map(|r| cents(r, "idle_cost")).sum::<i64>(),
            (idle * 100.0).round() as i64,
        );
    }
    c.eq(
        "spend: columns in order",
        columns(&fx, &["spend"]).join(","),
        "team,gpu_hours,busy_gpu_hours,idle_held_gpu_hours,idle_empty_gpu_hours,unknown_gpu_hours,energy_kwh,cost,busy_cost,idle_cost,unknown_cost,share_pct,budget,budget_used_pct,forecast"
            .to_owned(),
    );
    // As a table, the header goes above the rows on stdout, nothing on stderr.
    let mut table = vec!["spend"];
    table.extend_from_slice(&FROM_TO);
    let out = fx.apron(&table);
    let stdout = String::from_utf8_lossy(&out.stdout);
    c.eq("spend table: success", out.status.success(), true);
    c.eq("spend table: stderr", String::from_utf8_lossy(&out.stderr).into_owned(), String::new());
    c.eq("spend table: header first", stdout.starts_with("Period:   2026-11-02 10:00"), true);
    c.eq("spend table: Cost line", stdout.contains("\nCost:     $2.80 for 0.47 GPU-hours"), true);

    // --- spend over the month --------------------------------------------
    // The data holds only the ten minutes, so November costs the same. Its
    // unrecorded time is larger: the period runs from Nov 1 00:00 to now
    // (or to Dec 1 once past): 3 GPUs × the elapsed hours − 28/60 h
    // recorded, every hour before 10:00 on Nov 2 and after 10:10 included.
    let before = chrono::Utc::now().timestamp_millis();
    let month = json(&mut c, &fx, &["spend", "--month", "2026-11"]);
    let after = chrono::Utc::now().timestamp_millis();
    if let Some((rows, header)) = month {
        c.rows("spend --month", &rows, &expected_spend());
        c.eq(
            "spend --month: period",
            header.first().map(String::as_str),
            Some("Period:   2026-11-01 00:00 – 2026-12-01 00:00 UTC (30 days)"),
        );
        c.eq(
            "spend --month: Cost line",
            header.get(4).map(String::as_str),
            Some("Cost:     $2.80 for 0.47 GPU-hours; idle $1.22 (43.6%)"),
        );
        let (start, end) = (ms("2026-11-01T00:00:00Z"), ms("2026-12-01T00:00:00Z"));
        let unrecorded = |now: i64| 3.0 * (now.min(end) - start) as f64 / 3_600_000.0 - 28.0 / 60.0;
        let got = header.get(3).and_then(|l| number_after(l, "unrecorded:")).unwrap_or(f64::NAN);
        let (lo, hi) = (unrecorded(before) - 0.05, unrecorded(after) + 0.05);
        if !(lo..=hi).contains(&got) {
            c.fail(format!("spend --month: unrecorded {got} GPU-hours, want {lo}..{hi}"));
        }
    }

    // --- idle-cost ---------------------------------------------------------
    // Idle minutes only: vision (alice) GPU-A m 5–9, 300 s = 0.08 h, 0.6065
    // → 0.61; "(unallocated)" GPU-B m 0–9, 600 s = 0.17 h, 0.613 → 0.61, the
    // larger, so first. nlp and unassigned were never idle: no rows.
    let idle_row = |key: (&str, &str), hours: [f64; 3], cost: f64| {
        let mut row = json!({
            "idle_gpu_hours": hours[0],
            "idle_held_gpu_hours": hours[1],
            "idle_empty_gpu_hours": hours[2],
            "idle_cost": cost,
            "unknown_gpu_hours": 0.0,
            "unknown_cost": 0.0,
        });
        row[key.0] = json!(key.1);
        row
    };
    let unalloc = [0.17, 0.0, 0.17];
    let held = [0.08, 0.08, 0.0];
    for (by, key, holder) in [("team", "team", "vision"), ("user", "user", "alice")] {
        let got = rows(&mut c, &fx, &["idle-cost", "--by", by]);
        let want = vec![idle_row((key, "(unallocated)"), unalloc, 0.61), idle_row((key, holder), held, 0.61)];
        c.rows(&format!("idle-cost --by {by}"), &got, &want);
    }
    // By host: h1's idle minutes together, 900 s = 0.25 h (of which 300 s
    // held → 0.08, 600 s empty → 0.17), 0.6065 + 0.613 = 1.2195 → 1.22; h2
    // was never idle.
    let got = rows(&mut c, &fx, &["idle-cost", "--by", "host"]);
    c.rows("idle-cost --by host", &got, &[idle_row(("host", "h1"), [0.25, 0.08, 0.17], 1.22)]);
    // By GPU: GPU-B (0.613) before GPU-A (0.6065).
    let got = rows(&mut c, &fx, &["idle-cost", "--by", "gpu"]);
    let mut gpu_b = idle_row(("gpu_uuid", "GPU-B"), unalloc, 0.61);
    gpu_b["host"] = json!("h1");
    gpu_b["gpu_index"] = json!(1);
    gpu_b["parent_gpu_uuid"] = json!(null);
    gpu_b["mig_profile"] = json!(null);
    let mut gpu_a = idle_row(("gpu_uuid", "GPU-A"), held, 0.61);
    gpu_a["host"] = json!("h1");
    gpu_a["gpu_index"] = json!(0);
    gpu_a["parent_gpu_uuid"] = json!(null);
    gpu_a["mig_profile"] = json!(null);
    c.rows("idle-cost --by gpu", &got, &[gpu_b, gpu_a]);
    c.eq(
        "idle-cost --by gpu: columns in order",
        columns(&fx, &["idle-cost", "--by", "gpu"]).join(","),
        "gpu_uuid,host,gpu_index,parent_gpu_uuid,mig_profile,idle_gpu_hours,idle_held_gpu_hours,idle_empty_gpu_hours,idle_cost,unknown_gpu_hours,unknown_cost"
            .to_owned(),
    );
    let mut args = vec!["idle-cost", "--by", "team"];
    args.extend_from_slice(&FROM_TO);
    if let Some((_, header)) = json(&mut c, &fx, &args) {
        check_common_header(&mut c, "idle-cost", &fx, &header);
        c.eq("idle-cost: Idle line", header.get(4).map(String::as_str), Some("Idle:     $1.22 in all"));
    }

    // --- windows -------------------------------------------------------------
    // One hour of the week holds data: Monday 10:00 (2026-11-02 is a
    // Monday), recorded once (weeks 1).
    //   mean_util_pct  = (GPU-A 50% × 300 s + 0% × 300 s + GPU-B 0% × 600 s
    //                     + GPU-C 100% × 480 s) / 1680 s = 63 000 / 1680 = 37.5
    //   idle_share_pct = idle 900 s / recorded 1680 s = 53.57 → 53.6
    //   idle_gpu_hours_per_week = 900 s = 0.25 h
    //   idle_cost_per_week      = 0.6065 + 0.613 = 1.2195 → 1.22
    //   gpus                    = 1680 s / 3600 s = 0.467 → 0.47
    let profile = json!({
        "dow": "Mon", "hour": 10, "mean_util_pct": 37.5, "idle_share_pct": 53.6,
        "idle_gpu_hours_per_week": 0.25, "idle_cost_per_week": 1.22, "gpus": 0.47, "weeks": 1,
    });
    let mut args = vec!["windows", "--min-hours", "1", "--min-idle-share", "50"];
    args.extend_from_slice(&FROM_TO);
    if let Some((got, header)) = json(&mut c, &fx, &args) {
        c.rows("windows --show profile", &got, std::slice::from_ref(&profile));
        check_common_header(&mut c, "windows", &fx, &header);
        c.eq(
            "windows: header",
            header.get(4..).map(<[String]>::to_vec),
            Some(vec![
                "Windows:  recurring idle windows (50% idle or more, 1 h or longer), costliest first:"
                    .to_owned(),
                "  Mon 10:00–11:00: 54% of GPU time idle, 0 GPU-hours and $1.22 a week".to_owned(),
            ]),
        );
    }
    // With at least 50% idle asked, Monday 10:00–11:00 is a window: the
    // one hour, so the hour's figures (53.57% idle, not a figure recomputed
    // from rounded ones).
    let got =
        rows(&mut c, &fx, &["windows", "--show", "windows", "--min-hours", "1", "--min-idle-share", "50"]);
    let window = json!({
        "window": "Mon 10:00–11:00", "hours_per_week": 1, "idle_share_pct": 53.6,
        "idle_gpu_hours_per_week": 0.25, "idle_cost_per_week": 1.22,
        "text": "Mon 10:00–11:00: 54% of GPU time idle, 0 GPU-hours and $1.22 a week",
    });
    c.rows("windows --show windows (50%)", &got, &[window]);
    // At 60% it is not.
    let mut args = vec!["windows", "--show", "windows", "--min-hours", "1", "--min-idle-share", "60"];
    args.extend_from_slice(&FROM_TO);
    if let Some((got, header)) = json(&mut c, &fx, &args) {
        c.rows("windows --show windows (60%)", &got, &[]);
        c.eq(
            "windows (60%): header",
            header.get(4).map(String::as_str),
            Some("Windows:  none (no 1 h in a row of the week are 60% idle or more)"),
        );
    }
    // A two-hour window cannot come out of one recorded hour.
    let got =
        rows(&mut c, &fx, &["windows", "--show", "windows", "--min-hours", "2", "--min-idle-share", "50"]);
    c.rows("windows --show windows (2 h)", &got, &[]);

    // --- zombies ---------------------------------------------------------
    // alice held 1 GiB on GPU-A while it was idle in minutes 5–9: 5
    // minutes, still there at GPU-A's last minute. bob held memory only
    // while GPU-A was busy; carol's GPU was always busy.
    let alice = json!({
        "host": "h1", "gpu_index": 0, "gpu_uuid": "GPU-A", "pid": 100,
        "proc_start": "2026-11-02T09:00:00.100Z", "comm": "python", "user": "alice", "team": "vision",
        "used_mem_bytes": 1_073_741_824_i64, "idle_since": "2026-11-02T10:05:00Z", "idle_minutes": 5,
        "still_running": true, "still_idle": true,
    });
    for (flags, want, why) in [
        (
            &["--min-idle", "5m", "--min-mem", "512"][..],
            vec![alice.clone()],
            "5 idle minutes, 1 GiB ≥ 512 MiB",
        ),
        (&["--min-idle", "5m"][..], vec![alice.clone()], "default 256 MiB"),
        (&["--min-idle", "5m", "--min-mem", "1024"][..], vec![alice.clone()], "1 GiB is at least 1024 MiB"),
        (&["--min-idle", "5m", "--min-mem", "1025"][..], vec![], "1 GiB is less than 1025 MiB"),
        (&["--min-idle", "6m"][..], vec![], "5 minutes are less than 6"),
        (&[][..], vec![], "default 10 minutes"),
    ] {
        let mut args = vec!["zombies"];
        args.extend_from_slice(flags);
        let got = rows(&mut c, &fx, &args);
        c.rows(&format!("zombies {} ({why})", flags.join(" ")), &got, &want);
    }

    // --- reclaim ---------------------------------------------------------
    // GPU-B idle from 10:00 for 10 minutes, nobody holding memory; GPU-A
    // idle from 10:05 for 5, alice holding; both up to their last minute.
    // GPU-C's unrecorded minutes are not idle: it never shows. Whole GPUs:
    // their GPU-hours are their minutes / 60, to two decimals in JSON.
    let gpu_b = json!({
        "host": "h1", "gpu_index": 1, "gpu_uuid": "GPU-B", "idle_since": "2026-11-02T10:00:00Z",
        "idle_minutes": 10, "idle_gpu_hours": 0.17, "held_by": "", "allocated_to": "", "allocated_since": null, "still_idle": true,
    });
    let gpu_a = json!({
        "host": "h1", "gpu_index": 0, "gpu_uuid": "GPU-A", "idle_since": "2026-11-02T10:05:00Z",
        "idle_minutes": 5, "idle_gpu_hours": 0.08, "held_by": "alice", "allocated_to": "", "allocated_since": null,
        "still_idle": true,
    });
    for (idle_for, want) in [
        ("1m", vec![gpu_b.clone(), gpu_a.clone()]),
        ("5m", vec![gpu_b.clone(), gpu_a]),
        ("6m", vec![gpu_b]),
        ("11m", vec![]),
    ] {
        let got = rows(&mut c, &fx, &["reclaim", "--for", idle_for]);
        c.rows(&format!("reclaim --for {idle_for}"), &got, &want);
    }
    let mut args = vec!["reclaim", "--for", "5m"];
    args.extend_from_slice(&FROM_TO);
    if let Some((_, header)) = json(&mut c, &fx, &args) {
        check_common_header(&mut c, "reclaim", &fx, &header);
        // The common lines and the Reclaim: line (no MIG: no Unused: line).
        c.eq("reclaim: header lines", header.len(), 5);
        let line = header.iter().find(|l| l.starts_with("Reclaim:")).cloned().unwrap_or_default();
        c.check(line.starts_with("Reclaim:") && line.contains(" GPU-hours on 2 GPUs,"), || {
            format!("the Reclaim: line: {line:?}")
        });
    }

    c.finish();
}

/// Every report invocation checked above, for the raw-files comparison.
fn invocations() -> Vec<Vec<&'static str>> {
    let period = |args: &[&'static str]| {
        let mut v = args.to_vec();
        v.extend_from_slice(&FROM_TO);
        v
    };
    vec![
        period(&["spend"]),
        vec!["spend", "--month", "2026-11"],
        period(&["idle-cost", "--by", "team"]),
        period(&["idle-cost", "--by", "user"]),
        period(&["idle-cost", "--by", "host"]),
        period(&["idle-cost", "--by", "gpu"]),
        period(&["windows", "--min-hours", "1", "--min-idle-share", "50"]),
        period(&["windows", "--show", "windows", "--min-hours", "1", "--min-idle-share", "50"]),
        period(&["zombies", "--min-idle", "5m"]),
        period(&["reclaim", "--for", "5m"]),
    ]
}

#[test]
fn every_report_says_the_same_on_raw_files_alone() {
    let fx = Fixture::new();
    let mut c = Checks::default();
    let run_all = |c: &mut Checks| {
        invocations()
            .into_iter()
            .map(|args| {
                let mut all = vec!["--format", "json"];
                all.extend_from_slice(&args);
                let out = fx.apron(&all);
                if !out.status.success() {
                    c.fail(format!(
                        "apron {}: {}: {}",
                        args.join(" "),
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                (args.join(" "), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
            })
            .collect::<Vec<_>>()
    };
    let with_rollups = run_all(&mut c);
    fx.remove_rollups();
    let raw_only = run_all(&mut c);
    for ((args, stdout, stderr), (_, raw_stdout, raw_stderr)) in with_rollups.iter().zip(&raw_only) {
        let (a, b) = (String::from_utf8_lossy(stdout), String::from_utf8_lossy(raw_stdout));
        c.eq(&format!("apron {args}: rows on raw files alone"), b.as_ref(), a.as_ref());
        // The header too (the month's unrecorded time moves with the clock:
        // compare all but that line there).
        let month = args.contains("--month");
        let keep = |s: &str| {
            s.lines().filter(|l| !(month && l.starts_with("Recorded:"))).collect::<Vec<_>>().join("\n")
        };
        c.eq(&format!("apron {args}: header on raw files alone"), keep(raw_stderr), keep(stderr));
    }
    c.finish();
}

#[test]
fn the_still_line_is_printed_only_above_still_columns() {
    // The fixture's data ended in November 2026, long before now: the
    // `Still:` line explains still_running and still_idle, so it belongs
    // above the rows that have them, and nowhere else.
    let fx = Fixture::new();
    let mut c = Checks::default();
    let commands: [(&[&str], bool); 8] = [
        (&["spend"], false),
        (&["idle-cost", "--by", "team"], false),
        (&["idle-cost", "--by", "gpu"], false),
        (&["windows"], false),
        (&["savings"], false),
        (&["zombies"], true),
        (&["reclaim"], true),
        (&["starved"], true),
    ];
    for (args, still) in commands {
        let mut all = args.to_vec();
        all.extend_from_slice(&FROM_TO);
        let out = fx.apron(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            c.fail(format!(
                "apron {}: {}: {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        // The table's heading row (the first line drawn with `|`).
        let heading = stdout.lines().find(|l| l.starts_with('|')).unwrap_or_default();
        let has_columns = heading.contains("still_running") || heading.contains("still_idle");
        let has_line = stdout.lines().any(|l| l.starts_with("Still:"));
        println!("apron {}: still columns {has_columns}, Still: line {has_line}", args.join(" "));
        c.eq(&format!("apron {}: prints still columns", args.join(" ")), has_columns, still);
        c.eq(&format!("apron {}: prints the Still: line", args.join(" ")), has_line, still);
    }
    c.finish();
}

#[test]
fn unallocated_is_explained_above_the_rows_that_have_it() {
    // GPU-B sat idle and empty (tests/it/reports.rs): "(unallocated)" has a
    // row in spend and in idle-cost by team or user, none by host.
    let fx = Fixture::new();
    let mut c = Checks::default();
    let explained = "Who:      (unallocated) is no one: GPU time no process or allocation held (an empty GPU), not a team's";
    for (args, has) in [
        (&["spend"][..], true),
        (&["idle-cost", "--by", "team"][..], true),
        (&["idle-cost", "--by", "user"][..], true),
        (&["idle-cost", "--by", "host"][..], false),
        (&["savings"][..], true),
    ] {
        let mut all = args.to_vec();
        all.extend_from_slice(&FROM_TO);
        let out = fx.apron(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let row = stdout.lines().any(|l| l.starts_with("| (unallocated)"));
        let line = stdout.lines().any(|l| l == explained);
        println!("apron {}: (unallocated) row {row}, explained {line}", args.join(" "));
        c.eq(&format!("apron {}: an (unallocated) row", args.join(" ")), row, has);
        c.eq(&format!("apron {}: the Who: line", args.join(" ")), line, has);
    }
    c.finish();
}

#[test]
fn the_period_bounds_are_half_open() {
    // [10:05, 10:10) holds GPU-A's idle minutes and GPU-B's second half;
    // [10:00, 10:05) none of GPU-A's idle minutes. Spend's totals of the two
    // halves are the whole (2.7964 = 1.5195 + 1.2769 before rounding).
    let fx = Fixture::new();
    let mut c = Checks::default();
    let mid = "2026-11-02T10:05:00Z";
    let total = |c: &mut Checks, from: &str, to: &str| -> f64 {
        let args = ["spend", "--from", from, "--to", to];
        let Some((_, header)) = json(c, &fx, &args) else { return f64::NAN };
        header.iter().find_map(|l| number_after(l, "Cost:")).unwrap_or(f64::NAN)
    };
    // First half: GPU-A 5 × 0.1213 + GPU-B 5 × 0.0613 + GPU-C 5 × 0.1213 = 1.5195 → 1.52.
    // Second half: GPU-A 5 × 0.1213 + GPU-B 5 × 0.0613 + GPU-C 3 × 0.1213 = 1.2769 → 1.28.
    let got = total(&mut c, START, mid);
    c.near("spend [10:00, 10:05)", got, 1.52, 1e-9);
    let got = total(&mut c, mid, END);
    c.near("spend [10:05, 10:10)", got, 1.28, 1e-9);
    let got = total(&mut c, START, END);
    c.near("spend [10:00, 10:10)", got, 2.80, 1e-9);
    // Reclaim in the first half: only GPU-B, idle 10:00–10:04.
    let args = ["reclaim", "--for", "1m", "--from", START, "--to", mid];
    if let Some((got, _)) = json(&mut c, &fx, &args) {
        let want = json!({
            "host": "h1", "gpu_index": 1, "gpu_uuid": "GPU-B", "idle_since": "2026-11-02T10:00:00Z",
            "idle_minutes": 5, "idle_gpu_hours": 0.08, "held_by": "", "allocated_to": "", "allocated_since": null, "still_idle": true,
        });
        c.rows("reclaim [10:00, 10:05)", &got, &[want]);
    }
    c.finish();
}

/// A GPU time-sliced between two processes that both compute: its busy
/// minutes are split by each process's own SM utilization × time, not by
/// the memory each holds; every other minute by memory-time, as before.
///
/// One "Test A" GPU on host h1, 10:00–10:10, a sample every 10 s; alice
/// (pid 100, 1 GiB, team vision) and bob (pid 200, 3 GiB, unassigned) on it
/// throughout; a full minute costs 0.1213 (module docs).
///
/// | minutes | gpu_util | alice SM % | bob SM %  | state     | split            | alice : bob |
/// |---------|----------|------------|-----------|-----------|------------------|-------------|
/// | 0–5     | 80       | 60         | 20        | busy      | SM-time          | 3/4 : 1/4   |
/// | 6–7     | 80       | 60         | not given | busy      | memory (one lacks SM) | 1/4 : 3/4 |
/// | 8–9     | 2        | 2          | 0         | idle-held | memory (idle)    | 1/4 : 3/4   |
///
/// alice: 6 × 3/4 + 2 × 1/4 + 2 × 1/4 = 5.5 minutes: 330 s, 0.66715
/// (busy 5 × 0.1213 = 0.6065, idle 0.5 × 0.1213 = 0.06065); bob 4.5
/// minutes: 270 s, 0.54585 (busy 0.3639, idle 0.18195). Memory-time
/// throughout would give alice 2.5 minutes (0.30325); SM-time wherever it
/// is known (bob's missing value as 0, or the idle minutes by SM) 7
/// minutes (0.8491). Spend to the cent: 66.715 + 54.585 = 121.3 cents, 121
/// in all; 66 + 54 = 120 and the cent left goes to the larger remainder,
/// vision: 0.67 and 0.54.
#[test]
fn a_time_sliced_gpu_is_split_by_each_process_own_sm_time() {
    let fx = fixture_of(|n, ts| {
        let (util, alice_sm, bob_sm) = match n / 6 {
            0..=5 => (80, Some(60), Some(20)),
            6..=7 => (80, Some(60), None),
            _ => (2, Some(2), Some(0)),
        };
        Tick {
            gpus: vec![GpuSample {
                ts,
                gpu_uuid: "GPU-T".into(),
                gpu_index: 0,
                gpu_model: Some("Test A".into()),
                interval_ms: 10_000,
                gpu_util_pct: Some(util),
                power_mw: Some(300_000),
                energy_mj: Some(1_000_000_000 + n * 3_000_000),
                ..Default::default()
            }],
            procs: vec![
                process(ts, "GPU-T", 100, "alice", 1 << 30, alice_sm),
                process(ts, "GPU-T", 200, "bob", 3 << 30, bob_sm),
            ],
            ..Default::default()
        }
    });

    let mut c = Checks::default();
    with_rollups_then_raw(&fx, |when| {
        // The view, exactly.
        let mut sql = vec![
            "sql",
            "SELECT \"user\", sum(seconds) AS seconds, sum(cost) AS cost, \
             sum(CASE WHEN state = 'busy' THEN cost ELSE 0 END) AS busy_cost \
             FROM minute_costs GROUP BY \"user\" ORDER BY \"user\"",
        ];
        sql.extend_from_slice(&FROM_TO);
        let got = json(&mut c, &fx, &sql).map(|(rows, _)| rows).unwrap_or_default();
        c.eq(&format!("minute_costs users ({when})"), got.len(), 2);
        for (row, (user, seconds, cost, busy)) in
            got.iter().zip([("alice", 330.0, 0.66715, 0.6065), ("bob", 270.0, 0.54585, 0.3639)])
        {
            c.eq(&format!("minute_costs user ({when})"), row["user"].as_str(), Some(user));
            c.near(
                &format!("{user}'s seconds ({when})"),
                row["seconds"].as_f64().unwrap_or(f64::NAN),
                seconds,
                1e-9,
            );
            c.near(&format!("{user}'s cost ({when})"), row["cost"].as_f64().unwrap_or(f64::NAN), cost, 1e-9);
            c.near(
                &format!("{user}'s busy cost ({when})"),
                row["busy_cost"].as_f64().unwrap_or(f64::NAN),
                busy,
                1e-9,
            );
        }
        // The report (the ledger's path), to the cent.
        let spend = rows(&mut c, &fx, &["spend"]);
        let pick = |team: &str, key: &str| {
            spend.iter().find(|r| r["team"] == team).and_then(|r| r[key].as_f64()).unwrap_or(f64::NAN)
        };
        c.eq(&format!("spend teams ({when})"), spend.len(), 2);
        c.near(&format!("vision's cost ({when})"), pick("vision", "cost"), 0.67, 1e-9);
        c.near(&format!("vision's busy cost ({when})"), pick("vision", "busy_cost"), 0.61, 1e-9);
        c.near(&format!("unassigned's cost ({when})"), pick("unassigned", "cost"), 0.54, 1e-9);
        c.near(&format!("unassigned's busy cost ({when})"), pick("unassigned", "busy_cost"), 0.36, 1e-9);
    });
    c.finish();
}

/// MIG: a partitioned GPU's minute is priced once, split among its
/// instances by their share of its compute slices; the slices no instance
/// holds stay with the GPU as idle capacity.
///
/// Host h1, 10:00–10:10, a sample every 10 s. GPU-P ("Test A", 7 slices,
/// 300 W, no utilization: it is in MIG mode) carries the power and energy;
/// a full minute of it costs 0.1213 (module docs). Its instances, each a
/// GPU of its own with its SM activity:
///
/// | instance | profile | slices | minutes | SM active | process          | state      |
/// |----------|---------|--------|---------|-----------|------------------|------------|
/// | MIG-A    | 3g.40gb | 3      | 0–9     | 60 %      | alice (vision)   | busy       |
/// | MIG-B    | 1g.10gb | 1      | 0–9     | 1 %       | bob (unassigned) | idle-held  |
/// | MIG-C    | 3g.40gb | 3      | 5–9     | 0 %       | none             | idle-empty |
///
/// GPU-P's own row keeps the unassigned 3/7 in minutes 0–4 (idle-empty)
/// and has none in minutes 5–9, when every slice is held. So:
/// vision 10 × 0.1213 × 3/7 = 0.519857 (257.14 GPU-s); unassigned
/// 10 × 0.1213 / 7 = 0.173286 (85.71 GPU-s); "(unallocated)" GPU-P's
/// 5 × 3/7 plus MIG-C's 5 × 3/7 = 0.519857; in all 1.213 = 10 × 0.1213
/// over 600 GPU-seconds: the hardware's, once. Spend to the cent: 51.99 +
/// 17.33 + 51.99 = 121.3 cents, 121 printed; 51 + 17 + 51 = 119 and the two
/// cents left go to the larger remainders (.99 each): 0.52, 0.17, 0.52.
#[test]
fn a_mig_gpu_is_priced_once_by_its_instances_slices() {
    let fx = fixture_of(|n, ts| {
        let instance = |uuid: &str, profile: &str, slices: i32, sm: f32| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            gpu_model: Some("Test A".into()),
            interval_ms: 10_000,
            sm_active_pct: Some(sm),
            parent_gpu_uuid: Some("GPU-P".into()),
            mig_profile: Some(profile.into()),
            mig_slices: Some(slices),
            mig_total_slices: Some(7),
            ..Default::default()
        };
        let mut gpus = vec![
            GpuSample {
                ts,
                gpu_uuid: "GPU-P".into(),
                gpu_index: 0,
                gpu_model: Some("Test A".into()),
                interval_ms: 10_000,
                power_mw: Some(300_000),
                energy_mj: Some(1_000_000_000 + n * 3_000_000),
                mig_total_slices: Some(7),
                ..Default::default()
            },
            instance("MIG-A", "3g.40gb", 3, 60.0),
            instance("MIG-B", "1g.10gb", 1, 1.0),
        ];
        if n / 6 >= 5 {
            gpus.push(instance("MIG-C", "3g.40gb", 3, 0.0));
        }
        Tick {
            gpus,
            procs: vec![
                process(ts, "MIG-A", 100, "alice", 1 << 30, None),
                process(ts, "MIG-B", 200, "bob", 2 << 30, None),
            ],
            ..Default::default()
        }
    });

    let mut c = Checks::default();
    let third = 0.1213 * 3.0 / 7.0;
    with_rollups_then_raw(&fx, |when| {
        let mut sql = vec![
            "sql",
            "SELECT team, sum(seconds) AS seconds, sum(cost) AS cost, sum(energy_j) AS energy_j, \
             sum(CASE WHEN state = 'busy' THEN cost ELSE 0 END) AS busy_cost \
             FROM minute_costs GROUP BY team ORDER BY team",
        ];
        sql.extend_from_slice(&FROM_TO);
        let got = json(&mut c, &fx, &sql).map(|(rows, _)| rows).unwrap_or_default();
        let want = [
            ("(unallocated)", 2.0 * 300.0 * 3.0 / 7.0, 10.0 * third, 2.0 * 90_000.0 * 3.0 / 7.0, 0.0),
            ("unassigned", 600.0 / 7.0, 10.0 * 0.1213 / 7.0, 180_000.0 / 7.0, 0.0),
            ("vision", 600.0 * 3.0 / 7.0, 10.0 * third, 180_000.0 * 3.0 / 7.0, 10.0 * third),
        ];
        c.eq(&format!("minute_costs teams ({when})"), got.len(), want.len());
        for (row, (team, seconds, cost, energy, busy)) in got.iter().zip(want) {
            let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
            c.eq(&format!("team ({when})"), row["team"].as_str(), Some(team));
            c.near(&format!("{team}'s GPU-seconds ({when})"), f("seconds"), seconds, 1e-6);
            c.near(&format!("{team}'s cost ({when})"), f("cost"), cost, 1e-9);
            c.near(&format!("{team}'s energy ({when})"), f("energy_j"), energy, 1e-6);
            c.near(&format!("{team}'s busy cost ({when})"), f("busy_cost"), busy, 1e-9);
        }
        // GPU-P's own row: the unassigned slices in minutes 0–4 only.
        let mut states = vec![
            "sql",
            "SELECT gpu_uuid, count(*) AS minutes, min(state) AS state, max(capacity_share) AS share \
             FROM gpu_minute_states GROUP BY gpu_uuid ORDER BY gpu_uuid",
        ];
        states.extend_from_slice(&FROM_TO);
        let got = json(&mut c, &fx, &states).map(|(rows, _)| rows).unwrap_or_default();
        let seen: Vec<(String, i64, String, f64)> = got
            .iter()
            .map(|r| {
                (
                    r["gpu_uuid"].as_str().unwrap_or_default().to_owned(),
                    r["minutes"].as_i64().unwrap_or(-1),
                    r["state"].as_str().unwrap_or_default().to_owned(),
                    (r["share"].as_f64().unwrap_or(f64::NAN) * 7.0).round(),
                )
            })
            .collect();
        let want: Vec<(String, i64, String, f64)> = [
            ("GPU-P", 5, "idle_empty", 3.0),
            ("MIG-A", 10, "busy", 3.0),
            ("MIG-B", 10, "idle_held", 1.0),
            ("MIG-C", 5, "idle_empty", 3.0),
        ]
        .iter()
        .map(|(g, n, s, k)| ((*g).to_owned(), *n, (*s).to_owned(), *k))
        .collect();
        c.eq(&format!("gpu_minute_states ({when})"), seen, want);
        // The reports (the ledger's path), to the cent, and the header
        // counting the hardware: one GPU, 600 GPU-seconds.
        let Some((spend, header)) = json(&mut c, &fx, &["spend", "--from", START, "--to", END]) else {
            return;
        };
        let pick = |team: &str, key: &str| {
            spend.iter().find(|r| r["team"] == team).and_then(|r| r[key].as_f64()).unwrap_or(f64::NAN)
        };
        c.near(&format!("vision's cost ({when})"), pick("vision", "cost"), 0.52, 1e-9);
        c.near(&format!("unassigned's cost ({when})"), pick("unassigned", "cost"), 0.17, 1e-9);
        c.near(&format!("(unallocated)'s cost ({when})"), pick("(unallocated)", "cost"), 0.52, 1e-9);
        c.near(&format!("vision's GPU-hours ({when})"), pick("vision", "gpu_hours"), 0.07, 1e-9);
        let one = header.iter().any(|l| l.starts_with("Data:") && l.contains(": 1 GPUs, first sample"));
        c.check(one, || format!("header counts one GPU ({when}): {header:?}"));
        // Idle cost per GPU: each instance with its parent and profile,
        // MIG-B's idle-held 0.17 and GPU-P's and MIG-C's idle-empty 0.26
        // each (25.99 cents each, rounded keeping the 0.69 total).
        let by_gpu = rows(&mut c, &fx, &["idle-cost", "--by", "gpu"]);
        let mut seen: Vec<(String, Option<String>, Option<String>, f64)> = by_gpu
            .iter()
            .map(|r| {
                (
                    r["gpu_uuid"].as_str().unwrap_or_default().to_owned(),
                    r["parent_gpu_uuid"].as_str().map(str::to_owned),
                    r["mig_profile"].as_str().map(str::to_owned),
                    r["idle_cost"].as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect();
        // GPU-P and MIG-C cost the same: their order is not the point.
        seen.sort_by(|a, b| a.0.cmp(&b.0));
        let s = |x: &str| Some(x.to_owned());
        c.eq(
            &format!("idle-cost --by gpu ({when})"),
            seen,
            vec![
                ("GPU-P".to_owned(), None, None, 0.26),
                ("MIG-B".to_owned(), s("GPU-P"), s("1g.10gb"), 0.17),
                ("MIG-C".to_owned(), s("GPU-P"), s("3g.40gb"), 0.26),
            ],
        );
        // Every other report runs on it.
        for args in [vec!["zombies"], vec!["reclaim"], vec!["windows"]] {
            let mut all = args.clone();
            all.extend_from_slice(&FROM_TO);
            let out = fx.apron(&all);
            c.check(out.status.success(), || {
                format!("apron {} ({when}): {}", all.join(" "), String::from_utf8_lossy(&out.stderr))
            });
        }
        let out_dir = fx.dir.path().join(format!("report {when}"));
        let out = fx.apron(&["report", "--month", "2026-11", "--out", out_dir.to_str().expect("utf-8")]);
        c.check(out.status.success(), || {
            format!("apron report ({when}): {}", String::from_utf8_lossy(&out.stderr))
        });
    });
    c.finish();
}
