//! The second hand-worked scenario: GPUs whose utilization or energy NVML
//! could not give, a minute split across two files, a process whose memory
//! and owner are unknown, and idle stretches long enough for zombies and
//! reclaim candidates. Every figure below is worked out by hand and
//! asserted against `apron` run as a real process (JSON and the monthly
//! report's CSV files), once with the recorder's rollups and once on the
//! raw files alone.
//!
//! # The fleet
//!
//! Ten minutes, Monday 2026-11-09 08:00–08:10 UTC, one sample every 10 s
//! (`interval_ms` 10 000), sample `n` = 0…59 in minute `m` = n / 6:
//!
//! | host | GPU (index, model)  | activity                                   | power, energy counter          | process (used memory)                  |
//! |------|---------------------|--------------------------------------------|--------------------------------|----------------------------------------|
//! | n1   | GPU-C (0, "Test C") | gpu_util_pct 80                            | 300 W; +3 000 J a sample       | alice pid 100 (2 GiB)                  |
//! | n1   | GPU-M (1, "Test M") | no gpu_util_pct; sm_active_pct 40 in m 0–1, 2 in m 2–7, none in m 8–9 | neither                        | pid 400, no user, no uid, memory unknown |
//! | n2   | GPU-E (0, "Test E") | gpu_util_pct 0                             | 300 W; +1 200 J a sample       | uid 1005, no user name, pid 500 (1 GiB) |
//!
//! Host n2's recorder stops after sample 32 (08:05:20) and a new one starts
//! at sample 34 (08:05:40): sample 33 is missing, and minute 5 of GPU-E is
//! split across two files (30 s in the first, 20 s in the second).
//!
//! # States (gpu_minute_states)
//!
//! - GPU-C: busy (80 ≥ 5) all 10 minutes.
//! - GPU-M: no utilization, so its activity is its SM activity: busy in
//!   m 0–1 (40), idle in m 2–7 (2 < 5), and held (a process with unknown
//!   memory holds memory: NVML lists it only while it has a context), so
//!   idle-held; in m 8–9 it has neither: **unknown**, neither busy nor idle.
//! - GPU-E: idle-held all 10 minutes; minute 5 has 50 s.
//!
//! # Energy
//!
//! - GPU-C: the first sample has no previous one, so power × interval,
//!   300 W × 10 s = 3 000 J, the same as the counter's delta after it:
//!   18 000 J a minute, 180 000 J = 0.05 kWh.
//! - GPU-E: the counter (1 200 J a sample) disagrees with power × time
//!   (3 000 J a sample); the counter's delta wins wherever the previous
//!   sample is exactly one interval earlier. Sample 0 (no previous) and
//!   sample 34 (previous 20 s earlier) fall back to 3 000 J. Minute 0:
//!   3 000 + 5 × 1 200 = 9 000 J; minutes 1–4 and 6–9: 7 200 J each; minute
//!   5: 3 × 1 200 + 3 000 + 1 200 = 7 800 J. In all 9 000 + 8 × 7 200 +
//!   7 800 = 74 400 J = 0.020 67 kWh (power × time would say 177 000 J).
//! - GPU-M: neither counter nor power: 0 J, and the header says "energy
//!   unknown for 0.17 GPU-hours" (600 s).
//!
//! # Cost
//!
//! One "*" price: nothing to write off, 3.6 an hour = 0.001 a second, so
//! 0.06 a 60-second minute; energy at 0.36 a kWh × PUE 1 = 0.0001 a kJ.
//!
//! - GPU-C, all alice's (team vision), busy: 600 s × 0.001 + 180 kJ × 0.0001
//!   = 0.6 + 0.018 = 0.618.
//! - GPU-M, all pid 400's (user "(unknown)", team "unassigned": no rule
//!   matches it): 0.06 a minute; busy 2 × 0.06 = 0.12, idle 6 × 0.06 = 0.36,
//!   unknown 2 × 0.06 = 0.12; 0.60 in all.
//! - GPU-E, all uid 1005's (user "uid 1005", team ops by its uid), idle-held:
//!   590 s × 0.001 + 74.4 kJ × 0.0001 = 0.59 + 0.00744 = 0.59744.
//!
//! Fleet: 1.81544, printed 1.82. Rounded to the cent keeping that total
//! (largest remainders): 61.8 → 62 (remainder .8), 60 → 60, 59.744 → 60
//! (remainder .744): vision 0.62, unassigned 0.60, ops 0.60 = 1.82.
//!
//! `apron spend` (highest exact cost first; hours to 2 decimals):
//!
//! | team       | gpu_hours | busy | idle_held | unknown | energy_kwh | cost | busy_cost | idle_cost | unknown_cost | share_pct |
//! |------------|-----------|------|-----------|---------|------------|------|-----------|-----------|--------------|-----------|
//! | vision     | 0.17      | 0.17 | 0         | 0       | 0.05       | 0.62 | 0.62      | 0         | 0            | 34.1      |
//! | unassigned | 0.17      | 0.03 | 0.10      | 0.03    | 0          | 0.60 | 0.12      | 0.36      | 0.12         | 33.0      |
//! | ops        | 0.16      | 0    | 0.16      | 0       | 0.02       | 0.60 | 0         | 0.60      | 0            | 33.0      |
//!
//! busy + idle + unknown = cost on every row; idle in all 0.96 (52.7% of
//! 1.82), unknown 0.12 over 0.03 GPU-hours (120 s). Recorded: 600 + 600 +
//! 590 = 1 790 s = 0.50 GPU-hours.
//!
//! `apron windows`, the Monday 08:00 hour: mean activity 32.0% (over the
//! 1 670 s whose activity is known), 53.1% idle (950 s of 1 790: the
//! unknown 120 s are not idle), 0.26 idle GPU-hours costing 0.96.
//!
//! `apron idle-cost --by team`: ops 0.60 (idle 0.16 h), unassigned 0.36
//! (idle 0.10 h; unknown 0.03 h, 0.12). By user: "uid 1005" and "(unknown)"
//! with the same figures.
//!
//! The fleet-state chart, minute by minute (busy, idle-held, unknown
//! GPUs): m 0–1 (2, 1, 0); m 2–4 and 6–7 (1, 2, 0); m 5 (1, 1 + 50/60, 0);
//! m 8–9 (1, 1, 1).
//!
//! # Zombies (at least 256 MiB, or unknown, for 3 minutes) and reclaim (4 minutes)
//!
//! - GPU-E pid 500, "uid 1005", ops: 1 GiB, idle-held 08:00–08:10, 10
//!   minutes, still running. GPU-M pid 400, "(unknown)", unassigned: memory
//!   unknown, 08:02–08:08, 6 minutes (the unknown minutes 8–9 end the
//!   stretch), still running (it is in GPU-M's newest minute). Most
//!   memory-minutes first: GPU-E, then GPU-M.
//! - Reclaim: GPU-E idle 10 minutes from 08:00, held by "uid 1005", still
//!   idle; GPU-M 6 minutes from 08:02, held by "(unknown)", not still idle
//!   (its newest minutes are unknown). In the report's CSVs, 10 and 6
//!   minutes are 0.2 and 0.1 hours (zombies), 0.17 and 0.10 GPU-hours
//!   (reclaim's idle_gpu_hours: whole GPUs).
//!
//! Before `gpu_minute_states`, GPU-M had no utilization and so counted as
//! busy throughout: no zombie, no reclaim row, no unknown cost; and reclaim
//! listed nobody holding a GPU whose holder's memory or name was unknown.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_analyze::cli::flag_groups::GlobalArgs;
use apron_analyze::cli::flag_groups::PeriodArgs;
use apron_analyze::commands::ReportContext;
use apron_analyze::output::Format;
use apron_analyze::report::charts;
use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::checks::Checks;
use apron_tests::{bin, number_after};
use serde_json::{Value, json};

/// The first sample: Monday 2026-11-09 08:00:00 UTC.
const START: &str = "2026-11-09T08:00:00Z";

/// The period flags of the ten minutes.
const FROM_TO: [&str; 4] = ["--from", START, "--to", "2026-11-09T08:10:00Z"];

/// Time between samples, and the `interval_ms` of every row.
const STEP_MS: i64 = 10_000;

/// One GiB.
const GIB: i64 = 1 << 30;

/// The config pricing the scenario (see the module docs).
const CONFIG: &str = r#"currency = "USD"

[idle]
threshold_pct = 5

[energy]
price_per_kwh = 0.36
pue = 1

[zombie]
min_mem_mib = 256
min_idle = "3m"

[reclaim]
for = "4m"

[[gpu_cost]]
model = "*"
purchase_price = 0
lifetime_years = 1
ops_per_gpu_hour = 3.6

[[team]]
name = "vision"
users = ["alice"]

[[team]]
name = "ops"
uids = [1005]
"#;

fn start_ms() -> i64 {
    chrono::DateTime::parse_from_rfc3339(START).expect("valid RFC 3339").timestamp_millis()
}

/// Writes the fleet of the module docs under `data`.
fn write(data: &Path) {
    let layout = DataLayout::new(data);
    let start = start_ms();
    let hour = Duration::from_secs(3_600);
    let mut n1 = RollingWriter::new(layout.clone(), "n1", hour).expect("host n1");
    let mut n2 = Some(RollingWriter::new(layout.clone(), "n2", hour).expect("host n2"));
    for n in 0..60 {
        let ts = start + n * STEP_MS;
        let m = n / 6;
        let gpu = |uuid: &str, index: i32, model: &str| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: index,
            gpu_model: Some(model.into()),
            interval_ms: STEP_MS as i32,
            ..Default::default()
        };
        let proc =
            |uuid: &str, pid: i32, user: Option<&str>, uid: Option<i64>, mem: Option<i64>| ProcSample {
                ts,
                gpu_uuid: uuid.into(),
                pid,
                interval_ms: STEP_MS as i32,
                identity: ProcIdentity {
                    proc_start: Some(start - 3_600_000 + i64::from(pid)),
                    comm: Some(if pid == 400 { "worker" } else { "python" }.into()),
                    uid,
                    user: user.map(Into::into),
                    ..Default::default()
                },
                used_mem_bytes: mem,
                ..Default::default()
            };
        let busy = GpuSample {
            gpu_util_pct: Some(80),
            power_mw: Some(300_000),
            energy_mj: Some(1_000_000_000 + n * 3_000_000),
            ..gpu("GPU-C", 0, "Test C")
        };
        let sm_active = match m {
            0..2 => Some(40.0),
            2..8 => Some(2.0),
            _ => None,
        };
        let mig = GpuSample { sm_active_pct: sm_active, ..gpu("GPU-M", 1, "Test M") };
        let tick = Tick {
            gpus: vec![busy, mig],
            procs: vec![
                proc("GPU-C", 100, Some("alice"), Some(1001), Some(2 * GIB)),
                proc("GPU-M", 400, None, None, None),
            ],
            ..Default::default()
        };
        n1.push(ts, &tick).expect("push n1");

        // Host n2's recorder stops after sample 32 and another starts at 34.
        if n == 33 {
            n2.take().expect("the first recorder").close().expect("close n2");
            continue;
        }
        let idle = GpuSample {
            gpu_util_pct: Some(0),
            power_mw: Some(300_000),
            energy_mj: Some(1_000_000_000 + n * 1_200_000),
            ..gpu("GPU-E", 0, "Test E")
        };
        let tick = Tick {
            gpus: vec![idle],
            procs: vec![proc("GPU-E", 500, None, Some(1005), Some(GIB))],
            ..Default::default()
        };
        let writer =
            n2.get_or_insert_with(|| RollingWriter::new(layout.clone(), "n2", hour).expect("host n2"));
        writer.push(ts, &tick).expect("push n2");
    }
    n1.close().expect("close n1");
    n2.expect("the second recorder").close().expect("close n2");
}

/// The scenario's data and config in a temporary folder.
struct Fixture {
    dir: tempfile::TempDir,
    data: PathBuf,
    config: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        write(&data);
        let config = dir.path().join("apron.toml");
        std::fs::write(&config, CONFIG).expect("write apron.toml");
        Fixture { dir, data, config }
    }

    fn apron(&self, args: &[&str]) -> Output {
        Command::new(bin("apron"))
            .arg("--data")
            .arg(&self.data)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs")
    }

    /// The rows of `apron --format json ARGS… --from … --to …` and its
    /// stderr lines (the header).
    fn json(&self, c: &mut Checks, args: &[&str]) -> (Vec<Value>, Vec<String>) {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        all.extend_from_slice(&FROM_TO);
        let out = self.apron(&all);
        let stderr: Vec<String> = String::from_utf8_lossy(&out.stderr).lines().map(str::to_owned).collect();
        if !out.status.success() {
            c.fail(format!("apron {}: {}, stderr: {stderr:?}", args.join(" "), out.status));
            return (Vec::new(), stderr);
        }
        match serde_json::from_slice(&out.stdout) {
            Ok(rows) => (rows, stderr),
            Err(e) => {
                c.fail(format!("apron {}: stdout is not a JSON array ({e})", args.join(" ")));
                (Vec::new(), stderr)
            }
        }
    }
}

/// The fleet-state chart's points, (bucket start, [busy, idle_held,
/// idle_empty, unknown]), as `apron chart fleet-state` computes them.
fn fleet_state(fx: &Fixture) -> Vec<(i64, [f64; 4])> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let global = GlobalArgs {
            data: fx.data.clone(),
            config: Some(fx.config.clone()),
            format: Format::Json,
            memory_limit: None,
        };
        let period =
            PeriodArgs { from: Some(start_ms()), to: Some(start_ms() + 600_000), ..PeriodArgs::default() };
        let report = ReportContext::prepare_quietly(&global, &period)
            .await
            .expect("the scenario's period has data")
            .with_costs()
            .await
            .expect("minute_costs registers");
        charts::fleet_state(&report)
            .await
            .expect("fleet_state")
            .iter()
            .map(|p| (p.t_ms, [p.busy, p.idle_held, p.idle_empty, p.unknown]))
            .collect()
    })
}

/// `rows` with only the columns `keep`, for comparing the figures that
/// matter.
fn only(rows: &[Value], keep: &[&str]) -> Vec<Value> {
    rows.iter()
        .map(|r| Value::Object(keep.iter().map(|k| ((*k).to_owned(), r[*k].clone())).collect()))
        .collect()
}

/// A CSV file of the report as JSON rows keyed by its header (no field of
/// this scenario holds a comma or a quote).
fn csv_rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    lines
        .map(|line| {
            let fields = line.split(',').map(|f| match f.parse::<f64>() {
                Ok(x) => json!(x),
                Err(_) => json!(f),
            });
            Value::Object(header.iter().map(|h| (*h).to_owned()).zip(fields).collect())
        })
        .collect()
}

/// Checks every figure of the module docs on the data as it is now.
fn check_figures(fx: &Fixture, c: &mut Checks, variant: &str) {
    let at = |what: &str| format!("{what} ({variant})");

    // The states, straight from the view: GPU-E's split minute and energy.
    let (states, _) = fx.json(
        c,
        &[
            "sql",
            "SELECT gpu_uuid, count(*) AS minutes, sum(seconds) AS seconds, sum(energy_j) AS energy_j, \
             sum(energy_unknown_seconds) AS energy_unknown_seconds, \
             sum(CASE WHEN state = 'busy' THEN 1 ELSE 0 END) AS busy, \
             sum(CASE WHEN state = 'idle_held' THEN 1 ELSE 0 END) AS idle_held, \
             sum(CASE WHEN state = 'unknown' THEN 1 ELSE 0 END) AS unknown, \
             max(CASE WHEN minute = TIMESTAMP '2026-11-09T08:05:00Z' THEN seconds END) AS m5_seconds, \
             max(CASE WHEN minute = TIMESTAMP '2026-11-09T08:05:00Z' THEN energy_j END) AS m5_energy_j \
             FROM gpu_minute_states GROUP BY gpu_uuid ORDER BY gpu_uuid",
        ],
    );
    let state = |gpu: &str,
                 minutes: i64,
                 seconds: f64,
                 energy: f64,
                 unknown_s: f64,
                 split: [f64; 3],
                 m5: [f64; 2]| {
        json!({
            "gpu_uuid": gpu, "minutes": minutes, "seconds": seconds, "energy_j": energy,
            "energy_unknown_seconds": unknown_s, "busy": split[0], "idle_held": split[1], "unknown": split[2],
            "m5_seconds": m5[0], "m5_energy_j": m5[1],
        })
    };
    c.rows(
        &at("gpu_minute_states per GPU"),
        &states,
        &[
            state("GPU-C", 10, 600.0, 180_000.0, 0.0, [10.0, 0.0, 0.0], [60.0, 18_000.0]),
            state("GPU-E", 10, 590.0, 74_400.0, 0.0, [0.0, 10.0, 0.0], [50.0, 7_800.0]),
            state("GPU-M", 10, 600.0, 0.0, 600.0, [2.0, 6.0, 2.0], [60.0, 0.0]),
        ],
    );

    // spend.
    let (spend, header) = fx.json(c, &["spend"]);
    let row = |team: &str, hours: [f64; 6], money: [f64; 4], share: f64| {
        json!({
            "team": team, "gpu_hours": hours[0], "busy_gpu_hours": hours[1], "idle_held_gpu_hours": hours[2],
            "idle_empty_gpu_hours": hours[3], "unknown_gpu_hours": hours[4], "energy_kwh": hours[5],
            "cost": money[0], "busy_cost": money[1], "idle_cost": money[2], "unknown_cost": money[3],
            "share_pct": share, "budget": null, "budget_used_pct": null, "forecast": null,
        })
    };
    c.rows(
        &at("spend"),
        &spend,
        &[
            row("vision", [0.17, 0.17, 0.0, 0.0, 0.0, 0.05], [0.62, 0.62, 0.0, 0.0], 34.1),
            row("unassigned", [0.17, 0.03, 0.1, 0.0, 0.03, 0.0], [0.60, 0.12, 0.36, 0.12], 33.0),
            row("ops", [0.16, 0.0, 0.16, 0.0, 0.0, 0.02], [0.60, 0.0, 0.60, 0.0], 33.0),
        ],
    );
    for r in &spend {
        let cents = |k: &str| (r[k].as_f64().unwrap_or(f64::NAN) * 100.0).round() as i64;
        c.eq(
            &at(&format!("spend {}: busy + idle + unknown = cost, in cents", r["team"])),
            cents("busy_cost") + cents("idle_cost") + cents("unknown_cost"),
            cents("cost"),
        );
    }
    let cost_line = header.iter().find(|l| l.starts_with("Cost:")).cloned().unwrap_or_default();
    c.eq(
        &at("spend: the Cost line"),
        cost_line.as_str(),
        "Cost:     $1.82 for 0.50 GPU-hours; idle $0.96 (52.7%); activity unknown $0.12 (0.03 GPU-hours)",
    );
    let energy_line = header.iter().find(|l| l.starts_with("Energy:")).cloned().unwrap_or_default();
    c.near(
        &at("spend: energy unknown for N GPU-hours"),
        number_after(&energy_line, "energy unknown for").unwrap_or(f64::NAN),
        0.17,
        1e-9,
    );

    // idle-cost, by team and by user: the same owners as spend names.
    let idle = |key: (&str, &str), idle_h: f64, cost: f64, unknown: [f64; 2]| {
        json!({
            key.0: key.1, "idle_gpu_hours": idle_h, "idle_held_gpu_hours": idle_h, "idle_empty_gpu_hours": 0.0,
            "idle_cost": cost, "unknown_gpu_hours": unknown[0], "unknown_cost": unknown[1],
        })
    };
    let (by_team, header) = fx.json(c, &["idle-cost", "--by", "team"]);
    c.rows(
        &at("idle-cost --by team"),
        &by_team,
        &[
            idle(("team", "ops"), 0.16, 0.60, [0.0, 0.0]),
            idle(("team", "unassigned"), 0.1, 0.36, [0.03, 0.12]),
        ],
    );
    c.check(header.iter().any(|l| l.starts_with("Energy:   energy unknown for 0.17 GPU-hours")), || {
        at(&format!("idle-cost: header says energy unknown for 0.17 GPU-hours: {header:?}"))
    });
    let (by_user, _) = fx.json(c, &["idle-cost", "--by", "user"]);
    c.rows(
        &at("idle-cost --by user"),
        &by_user,
        &[
            idle(("user", "uid 1005"), 0.16, 0.60, [0.0, 0.0]),
            idle(("user", "(unknown)"), 0.1, 0.36, [0.03, 0.12]),
        ],
    );

    // windows: the Monday 08:00 hour. Activity known for 600 + 480 + 590 =
    // 1 670 s: (80 × 600 + 40 × 120 + 2 × 360 + 0 × 590) / 1 670 = 32.05
    // → 32.0; idle 360 + 590 = 950 s of 1 790 recorded (the unknown 120 s
    // are recorded, not idle): 53.07% → 53.1, 0.26 GPU-hours, 0.36 +
    // 0.59744 = 0.96; 1 790 s over the hour: 0.5 GPUs.
    let (windows, _) = fx.json(c, &["windows"]);
    c.rows(
        &at("windows"),
        &windows,
        &[json!({
            "dow": "Mon", "hour": 8, "mean_util_pct": 32.0, "idle_share_pct": 53.1,
            "idle_gpu_hours_per_week": 0.26, "idle_cost_per_week": 0.96, "gpus": 0.5, "weeks": 1,
        })],
    );

    // The fleet-state chart's series (one-minute buckets), through apron's
    // library: GPU-M is busy, then idle-held, then unknown, its own series.
    let fleet = fleet_state(fx);
    let want: Vec<(i64, [f64; 4])> = (0..10)
        .map(|m| {
            let (busy, held, unknown) = match m {
                0..2 => (2.0, 1.0, 0.0),
                5 => (1.0, 1.0 + 50.0 / 60.0, 0.0),
                2..8 => (1.0, 2.0, 0.0),
                _ => (1.0, 1.0, 1.0),
            };
            (start_ms() + m * 60_000, [busy, held, 0.0, unknown])
        })
        .collect();
    let same = fleet.len() == want.len()
        && fleet
            .iter()
            .zip(&want)
            .all(|(g, w)| g.0 == w.0 && g.1.iter().zip(w.1).all(|(a, b)| (a - b).abs() < 1e-9));
    c.check(same, || at(&format!("fleet-state series: got {fleet:?}, want {want:?}")));

    // zombies and reclaim.
    let zombie_keys =
        ["gpu_uuid", "pid", "user", "team", "used_mem_bytes", "idle_since", "idle_minutes", "still_running"];
    let (zombies, _) = fx.json(c, &["zombies"]);
    c.rows(
        &at("zombies"),
        &only(&zombies, &zombie_keys),
        &[
            json!({"gpu_uuid": "GPU-E", "pid": 500, "user": "uid 1005", "team": "ops", "used_mem_bytes": GIB,
                   "idle_since": "2026-11-09T08:00:00Z", "idle_minutes": 10, "still_running": true}),
            json!({"gpu_uuid": "GPU-M", "pid": 400, "user": "(unknown)", "team": "unassigned", "used_mem_bytes": null,
                   "idle_since": "2026-11-09T08:02:00Z", "idle_minutes": 6, "still_running": true}),
        ],
    );
    let reclaim_keys = ["gpu_uuid", "idle_since", "idle_minutes", "held_by", "still_idle"];
    let (reclaim, _) = fx.json(c, &["reclaim"]);
    c.rows(
        &at("reclaim"),
        &only(&reclaim, &reclaim_keys),
        &[
            json!({"gpu_uuid": "GPU-E", "idle_since": "2026-11-09T08:00:00Z", "idle_minutes": 10,
                   "held_by": "uid 1005", "still_idle": true}),
            json!({"gpu_uuid": "GPU-M", "idle_since": "2026-11-09T08:02:00Z", "idle_minutes": 6,
                   "held_by": "(unknown)", "still_idle": false}),
        ],
    );

    // The monthly report's CSV files hold the same rows.
    let out = fx.dir.path().join(format!("report-{}", variant.replace(' ', "-")));
    let run = fx.apron(&["report", "--month", "2026-11", "--out", out.to_str().expect("a UTF-8 path")]);
    if !run.status.success() {
        c.fail(at(&format!("report: {}, stderr: {}", run.status, String::from_utf8_lossy(&run.stderr))));
        return;
    }
    let zombies = csv_rows(&out.join("zombies.csv"));
    c.rows(
        &at("zombies.csv"),
        &only(&zombies, &["gpu_uuid", "pid", "user", "team", "idle_minutes"]),
        &[
            json!({"gpu_uuid": "GPU-E", "pid": 500.0, "user": "uid 1005", "team": "ops", "idle_minutes": 10.0}),
            json!({"gpu_uuid": "GPU-M", "pid": 400.0, "user": "(unknown)", "team": "unassigned", "idle_minutes": 6.0}),
        ],
    );
    let reclaim = csv_rows(&out.join("reclaim.csv"));
    c.rows(
        &at("reclaim.csv"),
        &only(&reclaim, &["gpu_uuid", "idle_minutes", "idle_gpu_hours", "held_by", "still_idle"]),
        &[
            json!({"gpu_uuid": "GPU-E", "idle_minutes": 10.0, "idle_gpu_hours": 0.17, "held_by": "uid 1005", "still_idle": "true"}),
            json!({"gpu_uuid": "GPU-M", "idle_minutes": 6.0, "idle_gpu_hours": 0.1, "held_by": "(unknown)", "still_idle": "false"}),
        ],
    );
    let spend = csv_rows(&out.join("spend.csv"));
    c.rows(
        &at("spend.csv"),
        &only(&spend, &["team", "cost", "busy_cost", "idle_cost", "unknown_cost", "unknown_gpu_hours"]),
        &[
            json!({"team": "vision", "cost": 0.62, "busy_cost": 0.62, "idle_cost": 0.0, "unknown_cost": 0.0, "unknown_gpu_hours": 0.0}),
            json!({"team": "unassigned", "cost": 0.6, "busy_cost": 0.12, "idle_cost": 0.36, "unknown_cost": 0.12, "unknown_gpu_hours": 0.03}),
            json!({"team": "ops", "cost": 0.6, "busy_cost": 0.0, "idle_cost": 0.6, "unknown_cost": 0.0, "unknown_gpu_hours": 0.0}),
        ],
    );
    let page = std::fs::read_to_string(out.join("index.html")).unwrap_or_default();
    c.check(page.contains("energy unknown for 0.17 GPU-hours"), || {
        at("report page: states the GPU-hours whose energy is unknown")
    });
    // The terminal's headline states both as well: 2 unknown minutes of
    // unassigned, 0.12, and the 10 minutes of GPU-U without energy.
    let headline = String::from_utf8_lossy(&run.stdout);
    for line in [
        "  unknown        $0.12 for 0.03 GPU-hours with no activity known (neither busy nor idle)",
        "Energy:   energy unknown for 0.17 GPU-hours (no energy counter or power reading): priced at 0",
    ] {
        c.check(headline.lines().any(|l| l == line), || {
            at(&format!("report headline: {line:?} in {headline}"))
        });
    }
}

#[test]
fn unknown_activity_and_energy_are_their_own_figures_with_and_without_rollups() {
    let fx = Fixture::new();
    let mut c = Checks::default();
    // The recorder wrote GPU-E's minute 5 into two files: two rollup rows.
    let (parts, _) = fx.json(
        &mut c,
        &[
            "sql",
            "SELECT count(*) AS rows FROM gpu_minutes \
             WHERE gpu_uuid = 'GPU-E' AND minute = TIMESTAMP '2026-11-09T08:05:00Z'",
        ],
    );
    c.rows("GPU-E's minute 5 has a rollup row in each file", &parts, &[json!({"rows": 2})]);
    check_figures(&fx, &mut c, "with rollups");
    for table in ["gpu_minutes", "proc_minutes"] {
        std::fs::remove_dir_all(fx.data.join(table)).expect("remove the rollups");
    }
    check_figures(&fx, &mut c, "raw files alone");
    c.finish();
}
