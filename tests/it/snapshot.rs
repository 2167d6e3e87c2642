//! End to end: a query over a data folder a recorder is writing sees every
//! row exactly once, even when a file closes between the moment `apron`
//! reads the write-ahead log and the moment its query lists the Parquet
//! files. `apron` is stopped at that exact step (a test pause point), the
//! recorder closes the file meanwhile, and the query's counts are checked
//! against the Parquet files the recorder leaves when it stops.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use apron_schemas::test_pause::{PAUSE_ENV, points};
use apron_tests::{bin, files_under, signal, wait_stopped, wait_with_timeout};
use arrow::array::AsArray;
use arrow::datatypes::TimestampMillisecondType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const HOST: &str = "snapnode";

fn start_recorder(data: &Path) -> Child {
    Command::new(bin("apron-recorder"))
        .args(["--source", "sim", "--host", HOST, "--sim-gpus", "3", "--interval", "200ms"])
        .args(["--rotate", "2s", "--data"])
        .arg(data)
        .env("APRON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the recorder starts")
}

/// The WAL segments of the host now.
fn segments(data: &Path) -> BTreeSet<PathBuf> {
    files_under(&data.join("wal").join(format!("host={HOST}")))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect()
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        sleep(Duration::from_millis(20));
    }
}

/// Every `gpu_samples` row's time in the Parquet files under `data`.
fn parquet_ticks(data: &Path) -> Vec<i64> {
    let mut out = Vec::new();
    for f in files_under(&data.join("gpu_samples")) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&f).expect("open"))
            .expect("a complete parquet file")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            let ts = batch.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
            out.extend(ts.values().iter().copied());
        }
    }
    out
}

/// Counts a query sees: rows, distinct (GPU, tick) rows, the newest tick,
/// and the samples the minute table holds.
const COUNTS: &str = "select
    (select count(*) from gpu_samples) as n,
    (select count(distinct concat(gpu_uuid, '@', cast(cast(ts as bigint) as varchar))) from gpu_samples) as d,
    (select cast(max(ts) as bigint) from gpu_samples) as newest_ms,
    (select sum(samples) from gpu_minutes) as minute_samples";

/// Runs the counting query stopped at `point` while the recorder closes
/// the segments `apron` saw, then checks the counts.
fn counts_are_exact_when_a_file_closes_at(point: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let recorder = start_recorder(&data);
    // A closed file and an open segment with rows in it.
    wait_for("a closed file", Duration::from_secs(30), || !files_under(&data.join("gpu_samples")).is_empty());
    sleep(Duration::from_millis(600));

    let apron = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .args(["--format", "csv", "sql", COUNTS])
        .env(PAUSE_ENV, point)
        .env("APRON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    wait_stopped(apron.id(), Duration::from_secs(60));
    // The segments apron has seen close into Parquet and go.
    let seen = segments(&data);
    assert!(!seen.is_empty(), "the recorder has an open segment");
    wait_for("the open segment to close", Duration::from_secs(30), || segments(&data).is_disjoint(&seen));
    signal(&recorder, libc::SIGTERM);
    let stopped = wait_with_timeout(recorder, Duration::from_secs(30));
    assert!(stopped.status.success(), "the recorder stops cleanly: {:?}", stopped.status);

    signal(&apron, libc::SIGCONT);
    let out = wait_with_timeout(apron, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "apron failed: {}", String::from_utf8_lossy(&out.stderr));
    let values: Vec<i64> =
        stdout.lines().nth(1).expect("a row").split(',').map(|v| v.parse().expect("a number")).collect();
    let [n, d, newest_ms, minute_samples] = values[..] else { panic!("four columns: {stdout}") };

    // Every row once: no (GPU, tick) twice, and as many samples in the
    // minutes as rows.
    assert_eq!(n, d, "a row was counted twice: {stdout}");
    assert_eq!(minute_samples, n, "gpu_minutes and gpu_samples disagree: {stdout}");
    // Nothing missed: exactly the rows the recorder wrote up to the newest
    // tick the query saw, read from its Parquet files directly.
    let written = parquet_ticks(&data);
    let expected = written.iter().filter(|&&ts| ts <= newest_ms).count() as i64;
    assert_eq!(n, expected, "rows up to {newest_ms}: {stdout}");
    assert!(written.len() as i64 > n, "the recorder went on after the snapshot");
}

#[test]
fn a_file_closed_after_the_log_was_read_is_counted_once() {
    counts_are_exact_when_a_file_closes_at(points::AFTER_WAL_READ);
}

#[test]
fn a_segment_closed_before_it_was_read_is_counted_from_its_files() {
    counts_are_exact_when_a_file_closes_at(points::AFTER_WAL_LIST);
}
