//! End to end: `apron alerts` on hand-built data written by the real
//! writer: which rules fire, their values, the exit codes cron relies on,
//! and the config's thresholds.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_recorder::source::Tick;
use apron_recorder::writer::RollingWriter;
use apron_schemas::{DataLayout, GpuSample};
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
fn no_data_is_an_error_with_exit_code_two() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = alerts(&tmp.path().join("missing"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end().lines().count(), 1);
}
