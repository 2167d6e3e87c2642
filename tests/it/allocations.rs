//! End to end: GPUs the cluster allocated to pods and Slurm jobs, written
//! by the real writer (the first hour closed into Parquet, the second left
//! open in its write-ahead log, as a running recorder leaves it), read by
//! the real CLI. An allocated GPU with no process on it is idle-held by its
//! holder, paid for by the holder's team, and named in reclaim; the spend
//! the ledger computes (`apron spend`) and the one SQL computes
//! (`minute_costs` under `apron sql`) both match the figures by hand.
//!
//! # The fleet, by hand
//!
//! Host a1, Monday 2026-11-02 00:00–02:00 UTC (120 minutes), a sample every
//! 10 s, three whole "Test A" GPUs at 300 W. A GPU-minute costs 0.12
//! (0.002 per second) + 0.0013 energy = 0.1213 (`scenario::CONFIG`'s
//! prices). Teams: `serving` by Kubernetes namespace `nlp-*`, `research`
//! by Slurm account `research`.
//!
//! | GPU   | index | allocated to                                  | processes                                     |
//! |-------|-------|-----------------------------------------------|-----------------------------------------------|
//! | GPU-K | 0     | pod nlp-serve/nb-0, 0–120                     | none: idle-held by the pod (serving)          |
//! | GPU-S | 1     | Slurm job 901 (research, dev), minutes 0–60   | job 901's, busy at 80 %, minutes 0–30         |
//! | GPU-T | 2     | pods nlp-a/p1 and other-ns/p2 (time-sliced)   | none: each pod half of each minute            |
//!
//! Spend: serving 120 + 60 = 180 GPU-minutes idle-held, 21.834; research
//! 30 busy (3.639) + 30 idle-held (3.639) = 7.278; unassigned (other-ns)
//! 60 idle-held, 7.278; "(unallocated)" GPU-S's last hour, idle-empty,
//! 7.278. In all 360 GPU-minutes, 43.668.
//!
//! Reclaim (idle 2 h or more): GPU-K, 120 minutes, allocated to pod
//! nlp-serve/nb-0 since 00:00, held by no process; GPU-T, 120 minutes,
//! allocated to both pods. GPU-S is idle 90 minutes only.

use std::path::Path;
use std::time::Duration;

use apron_schemas::{AllocSample, DataLayout, GpuSample, Holder, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::checks::Checks;
use apron_tests::scenario::{Fixture, ms};
use serde_json::Value;

const START: &str = "2026-11-02T00:00:00Z";
const END: &str = "2026-11-02T02:00:00Z";
const STEP_MS: i64 = 10_000;
const MINUTE_MS: i64 = 60_000;
const PER_MINUTE: f64 = 0.1213;

/// The config: the scenario's prices and teams, and two teams by the
/// cluster's names.
fn config() -> String {
    format!(
        "{}\n[[team]]\nname = \"serving\"\nk8s_namespaces = [\"nlp-*\"]\n\n\
         [[team]]\nname = \"research\"\nslurm_accounts = [\"research\"]\n",
        apron_tests::scenario::CONFIG
    )
}

/// Writes the fleet of the module docs into `data`: the first hour's file
/// closed, the second left in its WAL segment.
fn write_fleet(data: &Path) {
    let mut w = RollingWriter::new(DataLayout::new(data), "a1", Duration::from_secs(3_600))
        .expect("a1")
        .with_wal(Duration::from_secs(1))
        .expect("wal");
    let (start, end) = (ms(START), ms(END));
    let mut ts = start;
    while ts < end {
        let m = (ts - start) / MINUTE_MS;
        let gpu = |uuid: &str, index: i32, util: i32| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: index,
            gpu_model: Some("Test A".into()),
            interval_ms: STEP_MS as i32,
            gpu_util_pct: Some(util),
            power_mw: Some(300_000),
            ..Default::default()
        };
        let alloc = |uuid: &str, index: i32, holder: Holder| AllocSample {
            ts,
            interval_ms: STEP_MS as i32,
            gpu_uuid: uuid.into(),
            gpu_index: index,
            holder,
        };
        let pod = |ns: &str, name: &str| {
            Holder::kubernetes(Some(ns.into()), Some(name.into()), Some("main".into()))
        };
        let mut tick = Tick {
            gpus: vec![gpu("GPU-K", 0, 0), gpu("GPU-S", 1, if m < 30 { 80 } else { 0 }), gpu("GPU-T", 2, 0)],
            ..Default::default()
        };
        tick.allocations.push(alloc("GPU-K", 0, pod("nlp-serve", "nb-0")));
        if m < 60 {
            let job =
                Holder::slurm("901".into(), Some("research".into()), Some("gpu".into()), Some("dev".into()));
            tick.allocations.push(alloc("GPU-S", 1, job));
        }
        tick.allocations.push(alloc("GPU-T", 2, pod("nlp-a", "p1")));
        tick.allocations.push(alloc("GPU-T", 2, pod("other-ns", "p2")));
        if m < 30 {
            tick.procs.push(ProcSample {
                ts,
                gpu_uuid: "GPU-S".into(),
                pid: 4_242,
                interval_ms: STEP_MS as i32,
                identity: ProcIdentity {
                    proc_start: Some(start - 60_000),
                    comm: Some("python".into()),
                    user: Some("dev".into()),
                    slurm_job_id: Some("901".into()),
                    slurm_account: Some("research".into()),
                    ..Default::default()
                },
                used_mem_bytes: Some(8 << 30),
                sm_util_pct: Some(80),
                ..Default::default()
            });
        }
        w.push(ts, &tick).expect("push");
        ts += STEP_MS;
    }
    // No close: the second hour stays in its segment, as a running
    // recorder holds it.
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let data = dir.path().join("data");
    write_fleet(&data);
    let config = dir.path().join("apron.toml");
    std::fs::write(&config, self::config()).expect("write apron.toml");
    Fixture { dir, data, config }
}

fn f(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

fn s(row: &Value, key: &str) -> String {
    row[key].as_str().unwrap_or_default().to_owned()
}

#[test]
fn an_allocated_gpu_without_a_process_is_held_by_its_pod_or_job() {
    let fx = fixture();
    let mut c = Checks::default();
    let period = ["--from", START, "--to", END];
    let layout = DataLayout::new(&fx.data);
    c.check(layout.table_dir(apron_schemas::Table::AllocMinutes).is_dir(), || {
        "the first hour's alloc_minutes file is written".to_owned()
    });

    // The ledger's spend (`apron spend`), by team.
    let mut args = vec!["spend"];
    args.extend_from_slice(&period);
    let rows = match fx.json(&fx.config, &args) {
        Ok((rows, _)) => rows,
        Err(e) => panic!("apron spend: {e}"),
    };
    println!("spend: {rows:#?}");
    let want = [
        ("serving", 180.0, 0.0, 180.0, 0.0),
        ("research", 60.0, 30.0, 30.0, 0.0),
        ("unassigned", 60.0, 0.0, 60.0, 0.0),
        ("(unallocated)", 60.0, 0.0, 0.0, 60.0),
    ];
    for (team, minutes, busy, held, empty) in want {
        let row = rows.iter().find(|r| r["team"] == team);
        let row = row.cloned().unwrap_or(Value::Null);
        c.near(&format!("{team}'s GPU-hours"), f(&row, "gpu_hours"), minutes / 60.0, 0.005 + 1e-9);
        c.near(&format!("{team}'s busy GPU-hours"), f(&row, "busy_gpu_hours"), busy / 60.0, 0.005 + 1e-9);
        c.near(
            &format!("{team}'s idle-held GPU-hours"),
            f(&row, "idle_held_gpu_hours"),
            held / 60.0,
            0.005 + 1e-9,
        );
        c.near(
            &format!("{team}'s idle-empty GPU-hours"),
            f(&row, "idle_empty_gpu_hours"),
            empty / 60.0,
            0.005 + 1e-9,
        );
        c.near(&format!("{team}'s cost"), f(&row, "cost"), minutes * PER_MINUTE, 0.005 + 1e-9);
    }
    c.eq("spend has the four teams only", rows.len(), 4);

    // The same by SQL: minute_costs over the same data, summed by team.
    let sql = "SELECT team, round(sum(seconds) / 60, 6) AS minutes, round(sum(cost), 6) AS cost \
               FROM minute_costs GROUP BY team ORDER BY team";
    let mut args = vec!["sql", sql];
    args.extend_from_slice(&period);
    let rows = match fx.json(&fx.config, &args) {
        Ok((rows, _)) => rows,
        Err(e) => panic!("apron sql: {e}"),
    };
    println!("minute_costs by team: {rows:#?}");
    let by_sql: Vec<(String, f64, f64)> =
        rows.iter().map(|r| (s(r, "team"), f(r, "minutes"), f(r, "cost"))).collect();
    let want = [("(unallocated)", 60.0), ("research", 60.0), ("serving", 180.0), ("unassigned", 60.0)];
    let teams: Vec<String> = by_sql.iter().map(|r| r.0.clone()).collect();
    c.eq("minute_costs' teams", teams, want.map(|w| w.0.to_owned()).to_vec());
    for ((team, minutes, cost), (_, want_minutes)) in by_sql.iter().zip(want) {
        c.near(&format!("{team}'s GPU-minutes by SQL"), *minutes, want_minutes, 1e-6);
        c.near(&format!("{team}'s cost by SQL"), *cost, want_minutes * PER_MINUTE, 1e-6);
    }
    let sql = "SELECT DISTINCT team, holder FROM minute_costs WHERE holder IS NOT NULL ORDER BY team, holder";
    let mut args = vec!["sql", sql];
    args.extend_from_slice(&period);
    let rows = fx.json(&fx.config, &args).map(|(rows, _)| rows).unwrap_or_default();
    let holders: Vec<(String, String)> = rows.iter().map(|r| (s(r, "team"), s(r, "holder"))).collect();
    let pair = |t: &str, h: &str| (t.to_owned(), h.to_owned());
    c.eq(
        "the holders paying for minutes no process ran in, by team",
        holders,
        vec![
            pair("research", "job 901"),
            pair("serving", "pod nlp-a/p1"),
            pair("serving", "pod nlp-serve/nb-0"),
            pair("unassigned", "pod other-ns/p2"),
        ],
    );

    // The rollup itself: each allocation's seconds, from the closed hour
    // and the open one together.
    let sql = "SELECT gpu_uuid, source, coalesce(k8s_pod_name, slurm_job_id) AS who, sum(seconds) AS seconds, \
               sum(samples) AS samples FROM alloc_minutes GROUP BY 1, 2, 3 ORDER BY 1, 3";
    let rows = fx.json(&fx.config, &["sql", sql]).map(|(rows, _)| rows).unwrap_or_default();
    let got: Vec<(String, String, String, f64, i64)> = rows
        .iter()
        .map(|r| {
            (
                s(r, "gpu_uuid"),
                s(r, "source"),
                s(r, "who"),
                f(r, "seconds"),
                r["samples"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    let row = |g: &str, src: &str, who: &str, secs: f64| {
        (g.to_owned(), src.to_owned(), who.to_owned(), secs, (secs / 10.0) as i64)
    };
    c.eq(
        "alloc_minutes' seconds per GPU and holder",
        got,
        vec![
            row("GPU-K", "kubernetes", "nb-0", 7_200.0),
            row("GPU-S", "slurm", "901", 3_600.0),
            row("GPU-T", "kubernetes", "p1", 7_200.0),
            row("GPU-T", "kubernetes", "p2", 7_200.0),
        ],
    );

    // Reclaim names what each idle GPU is allocated to, and since when.
    let mut args = vec!["reclaim"];
    args.extend_from_slice(&period);
    let rows = match fx.json(&fx.config, &args) {
        Ok((rows, _)) => rows,
        Err(e) => panic!("apron reclaim: {e}"),
    };
    println!("reclaim: {rows:#?}");
    let got: Vec<(String, i64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                s(r, "gpu_uuid"),
                r["idle_minutes"].as_i64().unwrap_or(-1),
                s(r, "held_by"),
                s(r, "allocated_to"),
            )
        })
        .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    c.eq(
        "reclaim's stretches",
        got_sorted,
        vec![
            ("GPU-K".to_owned(), 120, String::new(), "pod nlp-serve/nb-0".to_owned()),
            ("GPU-T".to_owned(), 120, String::new(), "pod nlp-a/p1,pod other-ns/p2".to_owned()),
        ],
    );
    let since = rows.iter().find(|r| r["gpu_uuid"] == "GPU-K").map(|r| s(r, "allocated_since"));
    c.check(
        since
            .as_deref()
            .is_some_and(|t| t.starts_with("2026-11-02T00:00:00") || t.starts_with("2026-11-02 00:00")),
        || format!("GPU-K allocated since 00:00: {since:?}"),
    );
    c.finish();
}
