//! End to end: `apron reclaim` on hand-built data written by the real
//! writer: idle stretches, breaks by busy or unrecorded minutes, who held
//! memory, and whether the GPU is still idle.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::bin;

const STEP_MS: i64 = 10_000;
const MIN_MS: i64 = 60_000;

#[test]
fn reclaim_lists_unbroken_idle_stretches_with_their_holders() {
    bin("apron"); // built before the clock is read
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let end = chrono::Utc::now().timestamp_millis() / MIN_MS * MIN_MS;
    let start = end - 240 * MIN_MS;
    // Minute m (0..240) of each GPU: its utilization, or None when unrecorded.
    let util = |gpu: i32, m: i64| -> Option<i32> {
        match gpu {
            // Idle for the last 180 minutes, busy before.
            0 => Some(if m >= 60 { 1 } else { 90 }),
            // Idle 150 min, busy 30, idle the last 60.
            1 => Some(if (150..180).contains(&m) { 70 } else { 2 }),
            // Idle throughout, but 5 minutes unrecorded at minute 100.
            2 => (!(100..105).contains(&m)).then_some(0),
            // Busy.
            _ => Some(60),
        }
    };
    let mut w = RollingWriter::new(DataLayout::new(&data), "r", Duration::from_secs(3_600)).expect("host");
    let mut ts = start;
    while ts < end {
        let m = (ts - start) / MIN_MS;
        let gpus: Vec<GpuSample> = (0..4)
            .filter_map(|g| {
                Some(GpuSample {
                    ts,
                    gpu_uuid: format!("GPU-{g}").into(),
                    gpu_index: g,
                    interval_ms: STEP_MS as i32,
                    gpu_util_pct: Some(util(g, m)?),
                    ..Default::default()
                })
            })
            .collect();
        // alice holds memory on GPU 0 throughout; bob on GPU 3 (busy).
        let proc = |gpu: &str, pid: i32, user: &str| ProcSample {
            ts,
            gpu_uuid: gpu.into(),
            pid,
            interval_ms: STEP_MS as i32,
            identity: ProcIdentity { user: Some(user.into()), ..Default::default() },
            used_mem_bytes: Some(1 << 30),
            ..Default::default()
        };
        let procs = vec![proc("GPU-0", 100, "alice"), proc("GPU-3", 200, "bob")];
        w.push(ts, &Tick { gpus, procs, ..Default::default() }).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");

    let run = |extra: &[&str]| {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .args(["--format", "json", "reclaim"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
        rows.into_iter()
            .map(|r| {
                let since = chrono::DateTime::parse_from_rfc3339(r["idle_since"].as_str().expect("since"))
                    .expect("RFC 3339")
                    .timestamp_millis();
                (
                    (r["gpu_index"].as_i64().expect("index"), (since - start) / MIN_MS),
                    (
                        r["idle_minutes"].as_i64().expect("minutes"),
                        r["held_by"].as_str().expect("held_by").to_owned(),
                        r["still_idle"].as_bool().expect("still_idle"),
                    ),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    // Default --for 2h: GPU 0 (180 min, alice, still idle), GPU 1's first
    // stretch (150 min, nobody, over), and of GPU 2, broken in two by the
    // unrecorded minutes (100 and 135 min), only the second half; GPU 3 is
    // busy.
    let got = run(&[]);
    let expected = BTreeMap::from([
        ((0, 60), (180, "alice".to_owned(), true)),
        ((1, 0), (150, String::new(), false)),
        ((2, 105), (135, String::new(), true)),
    ]);
    assert_eq!(got, expected);
    // --for 90m adds GPU 2's first half; GPU 1's last hour stays too short.
    let got = run(&["--for", "90m"]);
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[&(2, 0)], (100, String::new(), false));
    // --for 1h adds GPU 1's last hour, still idle.
    let got = run(&["--for", "1h"]);
    assert_eq!(got[&(1, 180)], (60, String::new(), true));
}
