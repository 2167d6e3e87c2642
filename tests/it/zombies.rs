//! End to end: `apron zombies` on hand-built data written by the real
//! writer: memory held on idle GPUs, the thresholds, teams from the config,
//! and whether the process still runs.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::bin;

const STEP_MS: i64 = 10_000;
const MIN_MS: i64 = 60_000;
const MIB: i64 = 1 << 20;

#[test]
fn zombies_are_processes_holding_memory_on_idle_gpus() {
    bin("apron"); // built before the clock is read
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let end = chrono::Utc::now().timestamp_millis() / MIN_MS * MIN_MS;
    let start = end - 60 * MIN_MS;
    let mut w = RollingWriter::new(DataLayout::new(&data), "z", Duration::from_secs(3_600)).expect("host");
    let mut ts = start;
    while ts < end {
        let m = (ts - start) / MIN_MS;
        let gpu = |index: i32, util: i32| GpuSample {
            ts,
            gpu_uuid: format!("GPU-{index}").into(),
            gpu_index: index,
            interval_ms: STEP_MS as i32,
            gpu_util_pct: Some(util),
            ..Default::default()
        };
        let proc = |index: i32, pid: i32, user: &str, mem: i64| ProcSample {
            ts,
            gpu_uuid: format!("GPU-{index}").into(),
            pid,
            interval_ms: STEP_MS as i32,
            identity: ProcIdentity {
                user: Some(user.into()),
                comm: Some("python".into()),
                ..Default::default()
            },
            used_mem_bytes: Some(mem),
            ..Default::default()
        };
        // GPU 0 idle: alice holds 1 GiB all hour, bob 100 MiB.
        // GPU 1 busy: carol's 10 GiB is in use, not a zombie.
        // GPU 2 idle: dave holds 2 GiB for the first 30 minutes, then exits.
        let mut procs = vec![
            proc(0, 100, "alice", 1024 * MIB),
            proc(0, 200, "bob", 100 * MIB),
            proc(1, 300, "carol", 10_240 * MIB),
        ];
        if m < 30 {
            procs.push(proc(2, 400, "dave", 2048 * MIB));
        }
        let tick = Tick { gpus: vec![gpu(0, 0), gpu(1, 90), gpu(2, 1)], procs, ..Default::default() };
        w.push(ts, &tick).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, "[[team]]\nname = \"vision\"\nusers = [\"alice\", \"bob\"]\n").expect("config");

    let run = |extra: &[&str]| {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .args(["--format", "json", "zombies"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
        rows.into_iter()
            .map(|r| {
                (
                    r["pid"].as_i64().expect("pid"),
                    (
                        r["user"].as_str().expect("user").to_owned(),
                        r["team"].as_str().expect("team").to_owned(),
                        r["used_mem_bytes"].as_i64().expect("mem"),
                        r["idle_minutes"].as_i64().expect("minutes"),
                        r["still_running"].as_bool().expect("still_running"),
                    ),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    let s = |x: &str| x.to_owned();
    // Defaults: at least 256 MiB for at least 10 minutes.
    assert_eq!(
        run(&[]),
        BTreeMap::from([
            (100, (s("alice"), s("vision"), 1024 * MIB, 60, true)),
            (400, (s("dave"), s("unassigned"), 2048 * MIB, 30, false)),
        ])
    );
    // A longer stretch leaves only alice; less memory adds bob.
    assert_eq!(run(&["--min-idle", "45m"]).keys().copied().collect::<Vec<_>>(), [100]);
    assert_eq!(run(&["--min-mem", "50"]).keys().copied().collect::<Vec<_>>(), [100, 200, 400]);
}
