//! End to end: `apron alerts` on hand-built data written by the real
//! writer: which rules fire, their values, the exit codes cron relies on,
//! and the config's thresholds.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::bin;

const STEP_MS: i64 = 10_000;

/// Samples every 10 s of GPU `index` at `util` percent, for the `minutes`
/// before `end_ms`.
fn series(end_ms: i64, index: i32, util: i32, minutes: i64) -> Vec<GpuSample> {
    let n = minutes * 60_000 / STEP_MS;
    (1..=n)
        .rev()
        .map(|k| GpuSample {
            ts: end_ms - k * STEP_MS,
            gpu_uuid: format!("GPU-{index}").into(),
            gpu_index: index,
            interval_ms: i32::try_from(STEP_MS).expect("fits"),
            gpu_util_pct: Some(util),
            ..Default::default()
        })
        .collect()
}

fn write(data: &Path, host: &str, rows: Vec<GpuSample>) {
    let mut w = RollingWriter::new(DataLayout::new(data), host, Duration::from_secs(3_600)).expect("host");
    let mut rows = rows;
    rows.sort_by_key(|r| r.ts);
    let mut i = 0;
    while i < rows.len() {
        let ts = rows[i].ts;
        let j = rows[i..].iter().position(|r| r.ts != ts).map_or(rows.len(), |p| i + p);
        w.push(ts, &Tick { gpus: rows[i..j].to_vec(), ..Default::default() }).expect("push");
        i = j;
    }
    w.close().expect("close");
}

fn alerts(data: &Path, extra: &[&str]) -> Output {
    Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .args(extra)
        .args(["--format", "json", "alerts"])
        .stdin(Stdio::null())
        .output()
        .expect("apron runs")
}

#[test]
fn the_default_rules_fire_on_the_gpus_that_break_them_and_only_there() {
    bin("apron"); // built before the clock is read, so the windows line up
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let now = chrono::Utc::now().timestamp_millis() / STEP_MS * STEP_MS;
    let mut rows = Vec::new();
    rows.extend(series(now, 0, 2, 300)); // idle for 5 h: both low-usage rules
    rows.extend(series(now, 1, 95, 30)); // busy for the last 30 min only
    rows.extend(series(now, 2, 50, 300)); // steady, nothing to say
    rows.extend(series(now, 3, 2, 20)); // idle, but only 20 min recorded: too little to judge
    write(&data, "a", rows);

    let out = alerts(&data, &[]);
    assert_eq!(out.status.code(), Some(1), "rules fired: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let fired: Vec<(String, i64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().expect("rule").to_owned(),
                r["gpu_index"].as_i64().expect("index"),
                r["value"].as_f64().expect("value"),
            )
        })
        .collect();
    assert_eq!(
        fired,
        [
            ("high_usage_15m".to_owned(), 1, 95.0),
            ("low_usage_1h".to_owned(), 0, 2.0),
            ("low_usage_4h".to_owned(), 0, 2.0)
        ]
    );
    // Each value says its unit: the usage rules' is a mean activity in %.
    for row in &rows {
        assert_eq!(row["unit"], "%", "{row}");
    }
    // `since` is the window's first sample: about 15 min, 1 h, 4 h ago.
    for (row, window_min) in rows.iter().zip([15, 60, 240]) {
        let since = chrono::DateTime::parse_from_rfc3339(row["since"].as_str().expect("since"))
            .expect("RFC 3339")
            .timestamp_millis();
        let expect = now - window_min * 60_000;
        assert!((since - expect).abs() <= 2 * STEP_MS + 60_000, "{row}: since {since}, expected ~{expect}");
        assert_eq!(row["host"], "a");
    }

    // The config's thresholds decide: at 99 % nothing is "high".
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, "[alerts]\nhigh_usage_15m = 99\nlow_usage_1h = 1\nlow_usage_4h = 1\n")
        .expect("write");
    let out = alerts(&data, &["--config", config.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout.is_empty(), "nothing fires, nothing printed");
}

#[test]
fn activity_is_sm_activity_where_utilization_is_unknown_and_unknown_never_fires() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let now = chrono::Utc::now().timestamp_millis() / STEP_MS * STEP_MS;
    let mut rows = Vec::new();
    // A MIG instance: no utilization, SM activity 3 % for 5 h: both low-usage rules.
    rows.extend(series(now, 0, 0, 300).into_iter().map(|r| GpuSample {
        gpu_util_pct: None,
        sm_active_pct: Some(3.0),
        ..r
    }));
    // A GPU reporting neither for 5 h: unknown, never low (nor high).
    rows.extend(series(now, 1, 0, 300).into_iter().map(|r| GpuSample { gpu_util_pct: None, ..r }));
    // Utilization where known beats SM activity: 90 % busy, whatever GPM says.
    rows.extend(series(now, 2, 90, 300).into_iter().map(|r| GpuSample { sm_active_pct: Some(1.0), ..r }));
    write(&data, "a", rows);

    let out = alerts(&data, &[]);
    assert_eq!(out.status.code(), Some(1), "rules fired: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let fired: Vec<(String, i64, f64)> = rows
        .iter()
        .map(|r| {
            let rule = r["rule"].as_str().expect("rule").to_owned();
            (rule, r["gpu_index"].as_i64().expect("index"), r["value"].as_f64().expect("value"))
        })
        .collect();
    assert_eq!(
        fired,
        [
            ("high_usage_15m".to_owned(), 2, 90.0),
            ("low_usage_1h".to_owned(), 0, 3.0),
            ("low_usage_4h".to_owned(), 0, 3.0)
        ]
    );
}

#[test]
fn no_data_is_an_error_with_exit_code_two() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = alerts(&tmp.path().join("missing"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end().lines().count(), 1);
}

/// [`series`] of a GPU with its own UUID (`GPU-<host>-<index>`).
fn series_of(host: &str, end_ms: i64, index: i32, util: i32, minutes: i64) -> Vec<GpuSample> {
    let mut rows = series(end_ms, index, util, minutes);
    for r in &mut rows {
        r.gpu_uuid = format!("GPU-{host}-{index}").into();
    }
    rows
}

/// The rows `apron alerts --format json` printed, with its exit code.
fn fired(out: &Output) -> (Option<i32>, Vec<serde_json::Value>) {
    let rows = if out.stdout.is_empty() {
        Vec::new()
    } else {
        serde_json::from_slice(&out.stdout).expect("one JSON array")
    };
    (out.status.code(), rows)
}

fn ms_of(value: &serde_json::Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(value.as_str().expect("a time"))
        .expect("RFC 3339")
        .timestamp_millis()
}

#[test]
fn a_host_or_gpu_that_stopped_sending_fires_no_data() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let now = chrono::Utc::now().timestamp_millis() / STEP_MS * STEP_MS;
    let hour_ago = now - 3_600_000;
    // Host a stopped an hour ago, both GPUs; on host b, GPU 0 still
    // records and GPU 1 stopped an hour ago.
    let mut a = series_of("a", hour_ago, 0, 50, 30);
    a.extend(series_of("a", hour_ago - 2 * STEP_MS, 1, 50, 30));
    write(&data, "a", a);
    let mut b = series_of("b", now, 0, 50, 30);
    b.extend(series_of("b", hour_ago, 1, 50, 30));
    write(&data, "b", b);

    let (code, rows) = fired(&alerts(&data, &[]));
    assert_eq!(code, Some(1), "{rows:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    // The whole host a, since its newest sample (GPU 0's, a step before
    // the hour mark).
    let host = &rows[0];
    assert_eq!((host["rule"].as_str(), host["host"].as_str()), (Some("no_data"), Some("a")), "{host}");
    assert!(host["gpu_index"].is_null() && host["gpu_uuid"].is_null(), "{host}");
    assert_eq!(ms_of(&host["since"]), hour_ago - STEP_MS, "{host}");
    let minutes = host["value"].as_f64().expect("minutes");
    let elapsed_min = (chrono::Utc::now().timestamp_millis() - (hour_ago - STEP_MS)) as f64 / 60_000.0;
    assert!(minutes > 60.0 && minutes <= elapsed_min + 1e-9, "{minutes} minutes, at most {elapsed_min}");
    assert_eq!(host["unit"], "minutes", "{host}");
    // Only GPU 1 of host b.
    let gpu = &rows[1];
    assert_eq!((gpu["rule"].as_str(), gpu["host"].as_str()), (Some("no_data"), Some("b")), "{gpu}");
    assert_eq!((gpu["gpu_index"].as_i64(), gpu["gpu_uuid"].as_str()), (Some(1), Some("GPU-b-1")), "{gpu}");
    assert_eq!(ms_of(&gpu["since"]), hour_ago - STEP_MS, "{gpu}");

    assert_eq!(gpu["unit"], "minutes", "{gpu}");

    // On a terminal: each value beside its unit, and a cell with nothing
    // to say (host a's GPU, team and budget) empty, never `NULL`.
    let table = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .arg("alerts")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert_eq!(table.status.code(), Some(1));
    let text = String::from_utf8_lossy(&table.stdout);
    println!("{text}");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('|')).collect();
    let cells = |line: &str| line.split('|').map(str::trim).map(str::to_owned).collect::<Vec<_>>();
    let heading = cells(lines[0]);
    let at = |name: &str| {
        heading.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name} in {heading:?}"))
    };
    assert_eq!(at("unit"), at("value") + 1, "the unit beside the value: {heading:?}");
    assert!(!text.contains("NULL"), "empty cells print empty:\n{text}");
    let host_a = cells(lines[1]);
    assert_eq!(
        [
            &host_a[at("rule")],
            &host_a[at("host")],
            &host_a[at("gpu_index")],
            &host_a[at("team")],
            &host_a[at("unit")]
        ],
        ["no_data", "a", "", "", "minutes"],
        "{text}"
    );

    // With [alerts] no_data = "2h", an hour of silence says nothing.
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, "[alerts]\nno_data = \"2h\"\n").expect("write");
    let (code, rows) = fired(&alerts(&data, &["--config", config.to_str().expect("utf-8")]));
    assert_eq!((code, rows.len()), (Some(0), 0), "{rows:?}");
}

#[test]
fn fresh_data_and_data_older_than_a_week_do_not_fire_no_data() {
    bin("apron");
    let now = chrono::Utc::now().timestamp_millis() / STEP_MS * STEP_MS;
    // Fresh: the newest sample a step ago.
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    write(&data, "a", series_of("a", now, 0, 50, 30));
    assert_eq!(fired(&alerts(&data, &[])), (Some(0), Vec::new()));
    // Eight days old: a retired host, not a silent one.
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    write(&data, "a", series_of("a", now - 8 * 86_400_000, 0, 50, 30));
    assert_eq!(fired(&alerts(&data, &[])), (Some(0), Vec::new()));
    // Six days old: still silent.
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    write(&data, "a", series_of("a", now - 6 * 86_400_000, 0, 50, 30));
    let (code, rows) = fired(&alerts(&data, &[]));
    assert_eq!((code, rows.len()), (Some(1), 1), "{rows:?}");
    assert_eq!(rows[0]["rule"], "no_data");
}
