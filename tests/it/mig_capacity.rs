//! End to end: a MIG GPU with slices no instance holds, on a hand-built
//! fleet written by the real writer. The unheld slices are not a reclaim
//! candidate (nobody holds them: the MIG layout leaves them unused), so
//! `apron reclaim` and the report list them apart with their cost;
//! reclaim's hours are GPU-hours (an instance counts its share) and add up
//! to its headline; the gpu-days chart draws one row per physical GPU; the
//! hour-of-week chart carries the idle windows `apron windows` reports.
//!
//! # The fleet, by hand
//!
//! Host m1, Monday 2026-11-02 00:00–03:00 UTC (180 minutes), a sample every
//! 10 s. Prices are `scenario::CONFIG`'s: a "Test A" GPU-second costs 0.002
//! and a minute at 300 W 0.005 kWh × 0.2 × 1.3 = 0.0013, so a whole
//! GPU-minute costs 0.1213.
//!
//! | GPU   | what                       | slices | minutes 0–29 | 30–59     | 60–179              |
//! |-------|----------------------------|--------|--------------|-----------|---------------------|
//! | GPU-P | index 0, 7 slices, 300 W   | 3 free | idle-empty   | idle-empty| idle-empty          |
//! | MIG-A | 3g.40gb of GPU-P           | 3      | busy (60 %)  | busy      | idle-held (alice)   |
//! | MIG-B | 1g.10gb of GPU-P           | 1      | idle-empty   | idle-empty| idle-empty          |
//! | GPU-W | index 1, whole, 300 W      | 7/7    | busy (80 %)  | idle-empty| idle-empty          |
//!
//! Reclaim (2h): MIG-B 180 min × 1/7 = 0.428571 GPU-h; GPU-W 150 min =
//! 2.5 GPU-h; MIG-A 120 min × 3/7 = 0.857143 GPU-h (alice); 3.785714
//! GPU-hours in all. GPU-P's own row (the 3 free slices, idle all 180
//! minutes) is not among them: 180 × 3/7 = 77.142857 GPU-minutes =
//! 1.285714 GPU-hours costing 180 × 0.1213 × 3/7 = 9.357429, listed apart.
//!
//! GPU-days: one row per physical GPU. m1/0 is GPU-P and its instances:
//! busy only MIG-A's 60 minutes × 3/7 = 25.714 of its 180 GPU-minutes,
//! 14.2857 %; m1/1 is GPU-W, busy 30 of 180 minutes, 16.6667 %.
//!
//! Hour of the week (Monday 00:00–03:00): hour 0 is idle for MIG-B's 60/7,
//! GPU-P's 180/7 and GPU-W's 30 GPU-minutes of 120, 53.6 %; hours 1 and 2
//! are idle throughout, 100 %. So `apron windows` (60 % or more, 2 h or
//! longer) finds one window, Monday 01:00–03:00.

use std::path::Path;
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
use apron_tests::number_after;
use apron_tests::scenario::{Fixture, ms};
use serde_json::Value;

const START: &str = "2026-11-02T00:00:00Z";
const END: &str = "2026-11-02T03:00:00Z";
const FROM_TO: [&str; 4] = ["--from", START, "--to", END];
const STEP_MS: i64 = 10_000;
const MINUTE_MS: i64 = 60_000;

/// Writes the fleet of the module docs into `data`.
fn write_fleet(data: &Path) {
    let mut w = RollingWriter::new(DataLayout::new(data), "m1", Duration::from_secs(3_600)).expect("m1");
    let (start, end) = (ms(START), ms(END));
    let mut ts = start;
    while ts < end {
        let m = (ts - start) / MINUTE_MS;
        let whole = |uuid: &str, index: i32, util: Option<i32>, total: Option<i32>| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: index,
            gpu_model: Some("Test A".into()),
            interval_ms: STEP_MS as i32,
            gpu_util_pct: util,
            power_mw: Some(300_000),
            mig_total_slices: total,
            ..Default::default()
        };
        let instance = |uuid: &str, profile: &str, slices: i32, sm: f32| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            gpu_model: Some("Test A".into()),
            interval_ms: STEP_MS as i32,
            sm_active_pct: Some(sm),
            parent_gpu_uuid: Some("GPU-P".into()),
            mig_profile: Some(profile.into()),
            mig_slices: Some(slices),
            mig_total_slices: Some(7),
            ..Default::default()
        };
        let gpus = vec![
            whole("GPU-P", 0, None, Some(7)),
            instance("MIG-A", "3g.40gb", 3, if m < 60 { 60.0 } else { 0.0 }),
            instance("MIG-B", "1g.10gb", 1, 0.0),
            whole("GPU-W", 1, Some(if m < 30 { 80 } else { 0 }), None),
        ];
        let procs = vec![ProcSample {
            ts,
            gpu_uuid: "MIG-A".into(),
            pid: 100,
            interval_ms: STEP_MS as i32,
            identity: ProcIdentity {
                proc_start: Some(start - 3_600_000),
                comm: Some("python".into()),
                user: Some("alice".into()),
                ..Default::default()
            },
            used_mem_bytes: Some(1 << 30),
            ..Default::default()
        }];
        w.push(ts, &Tick { gpus, procs, ..Default::default() }).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let data = dir.path().join("data");
    write_fleet(&data);
    let config = dir.path().join("apron.toml");
    std::fs::write(&config, apron_tests::scenario::CONFIG).expect("write apron.toml");
    Fixture { dir, data, config }
}

fn f(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

#[test]
fn unheld_mig_slices_are_listed_apart_and_reclaim_counts_gpu_hours() {
    let fx = fixture();
    let mut c = Checks::default();
    let mut args = vec!["reclaim"];
    args.extend_from_slice(&FROM_TO);
    let (rows, header) = match fx.json(&fx.config, &args) {
        Ok(got) => got,
        Err(e) => panic!("apron reclaim: {e}"),
    };
    println!("header: {header:#?}\nrows: {rows:#?}");
    let got: Vec<(String, i64, String, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["gpu_uuid"].as_str().unwrap_or_default().to_owned(),
                r["idle_minutes"].as_i64().unwrap_or(-1),
                r["held_by"].as_str().unwrap_or_default().to_owned(),
                f(r, "idle_gpu_hours"),
            )
        })
        .collect();
    let want = [
        ("MIG-B", 180, "", 180.0 / 7.0 / 60.0),
        ("GPU-W", 150, "", 2.5),
        ("MIG-A", 120, "alice", 120.0 * 3.0 / 7.0 / 60.0),
    ];
    c.eq(
        "reclaim's stretches: no row for GPU-P's unheld slices",
        got.iter().map(|g| (g.0.clone(), g.1, g.2.clone())).collect::<Vec<_>>(),
        want.iter().map(|w| (w.0.to_owned(), w.1, w.2.to_owned())).collect::<Vec<_>>(),
    );
    // `--format json` gives hours to two decimals (README: what CSV and JSON round).
    for (g, w) in got.iter().zip(&want) {
        c.near(&format!("{}'s idle GPU-hours by hand", g.0), g.3, w.3, 0.005 + 1e-9);
    }
    let sum: f64 = got.iter().map(|g| g.3).sum();
    let by_hand = (180.0 / 7.0 + 150.0 + 120.0 * 3.0 / 7.0) / 60.0;
    c.near("reclaim's GPU-hours add up by hand", sum, by_hand, 0.015 + 1e-9);
    // The headline: the same GPU-hours, share-weighted.
    let line = header.iter().find(|l| l.starts_with("Reclaim:"));
    let headline = line.and_then(|l| number_after(l, "Reclaim:")).unwrap_or(f64::NAN);
    c.near(&format!("the Reclaim: line's GPU-hours ({line:?})"), headline, by_hand, 0.05 + 1e-9);
    // The idle GPU-hours `idle-cost --by gpu` gives the three (all their
    // idle minutes are in the stretches): the same share-weighted hours.
    let mut by_gpu = vec!["idle-cost", "--by", "gpu"];
    by_gpu.extend_from_slice(&FROM_TO);
    let idle: f64 = fx
        .json(&fx.config, &by_gpu)
        .map(|(rows, _)| rows)
        .unwrap_or_default()
        .iter()
        .filter(|r| r["gpu_uuid"] != "GPU-P")
        .map(|r| f(r, "idle_gpu_hours"))
        .sum();
    c.near("reclaim's GPU-hours = idle-cost's share-weighted idle hours", sum, idle, 0.015);
    // The unheld slices, apart, with their cost.
    let unused = header.iter().find(|l| l.starts_with("Unused:") && l.contains("GPU-P"));
    c.check(unused.is_some_and(|l| l.contains("m1 GPU 0") && l.contains("GPU-P")), || {
        format!("an Unused: line names m1 GPU 0 (GPU-P): {header:?}")
    });
    let hours = unused.and_then(|l| number_after(l, "GPU-P):")).unwrap_or(f64::NAN);
    c.near(&format!("unheld slices' GPU-hours ({unused:?})"), hours, 180.0 * 3.0 / 7.0 / 60.0, 0.005 + 1e-9);
    let cost = unused.and_then(|l| l.find('$').and_then(|i| number_after(&l[i..], ""))).unwrap_or(f64::NAN);
    c.near(&format!("unheld slices' cost ({unused:?})"), cost, 180.0 * 0.1213 * 3.0 / 7.0, 0.005 + 1e-9);

    // The report: the same rows, in GPU-hours, and the slices apart.
    let out_dir = fx.dir.path().join("report");
    let out = fx.apron(&["report", "--month", "2026-11", "--out", out_dir.to_str().expect("utf-8")]);
    c.check(out.status.success(), || format!("apron report: {}", String::from_utf8_lossy(&out.stderr)));
    let csv = std::fs::read_to_string(out_dir.join("reclaim.csv")).unwrap_or_default();
    println!("reclaim.csv:\n{csv}");
    let head: Vec<&str> = csv.lines().next().unwrap_or_default().split(',').collect();
    c.check(head.contains(&"idle_gpu_hours"), || format!("reclaim.csv has idle_gpu_hours: {head:?}"));
    c.check(!csv.contains("GPU-P"), || format!("reclaim.csv lists no GPU-P row:\n{csv}"));
    let page = std::fs::read_to_string(out_dir.join("index.html")).unwrap_or_default();
    c.check(page.contains("$9.36") && page.contains("no MIG instance"), || {
        "the report names the unheld slices' $9.36 apart".to_owned()
    });
    c.finish();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

async fn report(fx: &Fixture) -> ReportContext {
    let global = GlobalArgs {
        data: fx.data.clone(),
        config: Some(fx.config.clone()),
        format: Format::Json,
        memory_limit: None,
    };
    let period = PeriodArgs { from: Some(ms(START)), to: Some(ms(END)), ..PeriodArgs::default() };
    ReportContext::prepare_quietly(&global, &period)
        .await
        .expect("the fleet's period has data")
        .with_costs()
        .await
        .expect("minute_costs registers")
}

#[test]
fn gpu_days_draws_one_row_per_physical_gpu_by_busy_share() {
    let fx = fixture();
    let cells = runtime().block_on(async { charts::gpu_days(&report(&fx).await).await.expect("gpu_days") });
    let got: Vec<(String, String, Option<f64>)> =
        cells.iter().map(|c| (c.gpu.clone(), c.day.to_string(), c.busy_share_pct)).collect();
    println!("{got:#?}");
    let keys: Vec<(String, String)> = got.iter().map(|g| (g.0.clone(), g.1.clone())).collect();
    let day = "2026-11-02".to_owned();
    assert_eq!(keys, vec![("m1/0".to_owned(), day.clone()), ("m1/1".to_owned(), day)]);
    let share = |i: usize| got[i].2.unwrap_or(f64::NAN);
    assert!((share(0) - 100.0 * 60.0 * 3.0 / 7.0 / 180.0).abs() < 1e-9, "m1/0: {}", share(0));
    assert!((share(1) - 100.0 * 30.0 / 180.0).abs() < 1e-9, "m1/1: {}", share(1));

    let png = fx.dir.path().join("gpu-days.png");
    let out =
        fx.apron(&["chart", "gpu-days", "--out", png.to_str().expect("utf-8"), "--from", START, "--to", END]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn hour_of_week_carries_the_idle_windows_that_windows_reports() {
    let fx = fixture();
    let week =
        runtime().block_on(async { charts::hour_of_week(&report(&fx).await).await.expect("hour_of_week") });
    println!("{:#?}", week.windows);
    let runs: Vec<(u32, u32)> =
        week.windows.iter().flat_map(|w| w.runs.iter().map(|r| (r.start, r.hours))).collect();
    assert_eq!(runs, vec![(1, 2)], "Monday 01:00, 2 hours");
    assert_eq!(week.windows[0].label, "Mon 01:00–03:00");
    // The same window `apron windows --show windows` prints.
    let mut args = vec!["windows", "--show", "windows"];
    args.extend_from_slice(&FROM_TO);
    let (rows, _) = fx.json(&fx.config, &args).expect("apron windows");
    let labels: Vec<&str> = rows.iter().filter_map(|r| r["window"].as_str()).collect();
    assert_eq!(labels, ["Mon 01:00–03:00"], "{rows:?}");
    assert_eq!(week.cells.len(), 3);
}
