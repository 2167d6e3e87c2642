//! End to end: `apron pick` ranks a host's GPUs from files written by the
//! real writer, and refuses to guess for a host without recent samples.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::{bin, files_under, signal, wait_with_timeout};

const GIB: i64 = 1 << 30;

/// One GPU's sample: `util` percent, `used` GiB of 80 GiB in use.
fn gpu(ts: i64, index: i32, util: i32, used_gib: i64) -> GpuSample {
    GpuSample {
        ts,
        gpu_uuid: format!("GPU-{index}").into(),
        gpu_index: index,
        interval_ms: 1_000,
        gpu_util_pct: Some(util),
        fb_used_bytes: Some(used_gib * GIB),
        fb_total_bytes: Some(80 * GIB),
        ..Default::default()
    }
}

fn write(data: &std::path::Path, host: &str, ticks: impl Iterator<Item = (i64, Vec<GpuSample>)>) {
    let mut w = RollingWriter::new(DataLayout::new(data), host, Duration::from_secs(600)).expect("host");
    for (ts, gpus) in ticks {
        w.push(ts, &Tick { gpus, ..Default::default() }).expect("push");
    }
    w.close().expect("close");
}

fn pick(data: &std::path::Path, args: &[&str]) -> Output {
    Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("apron runs")
}

#[test]
fn pick_prints_the_least_loaded_gpu_ties_going_to_free_memory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let now = chrono::Utc::now().timestamp_millis() / 1_000 * 1_000;
    // The last two minutes, one sample a second (all inside the 10-minute
    // window): GPU 0 busy (50%); GPUs 1 and 2 alternate 0% and 20%, a mean
    // of 10%, with 40 GiB and 20 GiB in use: GPU 2 has more free memory and
    // wins; GPU 3 is 90% busy.
    write(
        &data,
        "n1",
        (1..=120).rev().map(|s| {
            let ts = now - s * 1_000;
            let alt = if s % 2 == 0 { 0 } else { 20 };
            (ts, vec![gpu(ts, 0, 50, 10), gpu(ts, 1, alt, 40), gpu(ts, 2, alt, 20), gpu(ts, 3, 90, 1)])
        }),
    );
    let out = pick(&data, &["pick", "--host", "n1", "--window", "10m"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\n", "only the index, for CUDA_VISIBLE_DEVICES");

    let out = pick(&data, &["--format", "json", "pick", "--host", "n1", "--window", "10m"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let order: Vec<i64> = rows.iter().map(|r| r["gpu_index"].as_i64().expect("index")).collect();
    assert_eq!(order, [2, 1, 0, 3]);
    let mean = |i: usize| rows[i]["mean_util_pct"].as_f64().expect("mean");
    assert!((mean(0) - 10.0).abs() < 1e-9 && (mean(2) - 50.0).abs() < 1e-9 && (mean(3) - 90.0).abs() < 1e-9);
    assert_eq!(rows[0]["free_bytes"], 60 * GIB);
    assert_eq!(rows[0]["samples"], 120);
}

#[test]
fn a_host_without_recent_samples_is_an_error_not_a_guess() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let two_hours_ago = chrono::Utc::now().timestamp_millis() / 1_000 * 1_000 - 7_200_000;
    write(
        &data,
        "stale",
        (0..10).map(|s| (two_hours_ago + s * 1_000, vec![gpu(two_hours_ago + s * 1_000, 0, 0, 0)])),
    );
    for (host, names_newest) in [("stale", true), ("nosuchhost", false)] {
        let out = pick(&data, &["pick", "--host", host]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(out.stdout.is_empty(), "nothing a script could take for an index");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("no samples from host {host} in the last 5m")), "{err}");
        assert_eq!(err.contains("newest sample at"), names_newest, "{err}");
    }
    let out = pick(&data, &["pick", "--host", "stale", "--window", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--window"));
}

#[test]
fn a_mig_instance_is_picked_by_its_uuid_and_its_parent_never() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let now = chrono::Utc::now().timestamp_millis() / 1_000 * 1_000;
    // GPU 0 whole at 30 %; GPU 1 partitioned (its own row has no
    // utilization) into MIG-1a (SM activity 5 %) and MIG-1b (60 %).
    let instance = |ts: i64, uuid: &str, sm: f32| GpuSample {
        ts,
        gpu_uuid: uuid.into(),
        gpu_index: 1,
        interval_ms: 1_000,
        sm_active_pct: Some(sm),
        fb_used_bytes: Some(GIB),
        fb_total_bytes: Some(40 * GIB),
        parent_gpu_uuid: Some("GPU-1".into()),
        mig_profile: Some("3g.40gb".into()),
        mig_slices: Some(3),
        mig_total_slices: Some(7),
        ..Default::default()
    };
    write(
        &data,
        "mig1",
        (1..=60).rev().map(|s| {
            let ts = now - s * 1_000;
            let parent = GpuSample { gpu_util_pct: None, mig_total_slices: Some(7), ..gpu(ts, 1, 0, 2) };
            (ts, vec![gpu(ts, 0, 30, 50), parent, instance(ts, "MIG-1a", 5.0), instance(ts, "MIG-1b", 60.0)])
        }),
    );
    let out = pick(&data, &["pick", "--host", "mig1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "MIG-1a\n", "what CUDA_VISIBLE_DEVICES takes for it");
    let out = pick(&data, &["--format", "json", "pick", "--host", "mig1"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let order: Vec<&str> = rows.iter().map(|r| r["device"].as_str().expect("device")).collect();
    assert_eq!(order, ["MIG-1a", "0", "MIG-1b"], "the partitioned GPU itself is no candidate");
}

/// The host names the recorder gave the partition folders under `data`.
fn recorded_hosts(data: &std::path::Path) -> Vec<String> {
    let mut hosts: Vec<String> = files_under(data)
        .iter()
        .flat_map(|f| f.ancestors())
        .filter_map(|d| d.file_name()?.to_str()?.strip_prefix("host=").map(str::to_owned))
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

#[test]
fn pick_without_host_answers_for_the_host_the_recorder_names() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // The real recorder, left to name this machine itself (no --host).
    let child = Command::new(bin("apron-recorder"))
        .args(["--source", "sim", "--sim-gpus", "2", "--interval", "200ms", "--rotate", "1s", "--data"])
        .arg(&data)
        .env("APRON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    let t0 = std::time::Instant::now();
    while recorded_hosts(&data.join("gpu_samples")).is_empty() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(&child, libc::SIGTERM);
    let out = wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "recorder: {}", String::from_utf8_lossy(&out.stderr));
    let hosts = recorded_hosts(&data.join("gpu_samples"));
    assert_eq!(hosts.len(), 1, "one host recorded: {hosts:?}");
    let host = &hosts[0];
    println!("the recorder named this host {host}");

    // Without --host, pick ranks that host's GPUs: the same answer as with it.
    let named = pick(&data, &["--format", "csv", "pick", "--host", host]);
    assert!(named.status.success(), "{}", String::from_utf8_lossy(&named.stderr));
    let unnamed = pick(&data, &["--format", "csv", "pick"]);
    assert!(unnamed.status.success(), "{}", String::from_utf8_lossy(&unnamed.stderr));
    assert_eq!(String::from_utf8_lossy(&unnamed.stdout), String::from_utf8_lossy(&named.stdout));
    let rows = String::from_utf8_lossy(&unnamed.stdout).lines().count();
    assert_eq!(rows, 3, "a header and the two simulated GPUs: {}", String::from_utf8_lossy(&unnamed.stdout));
    let out = pick(&data, &["pick"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let device = String::from_utf8_lossy(&out.stdout);
    assert!(["0\n", "1\n"].contains(&device.as_ref()), "an index: {device:?}");

    // A data folder of other hosts only: one line naming this host and
    // saying how to name another, nothing on stdout.
    let other = tmp.path().join("other");
    let now = chrono::Utc::now().timestamp_millis() / 1_000 * 1_000;
    write(
        &other,
        "elsewhere",
        (1..=10).rev().map(|s| (now - s * 1_000, vec![gpu(now - s * 1_000, 0, 10, 1)])),
    );
    let out = pick(&other, &["pick"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&format!("this host ({host})")), "{err}");
    assert!(err.contains("--host"), "{err}");
}
