//! End to end: the recorder binary writes Hive-partitioned Parquet files,
//! live (simulated source, real time, real signals) and in bulk
//! (`simulate`), and the files hold what was sampled, complete and sorted.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::Duration;

use apron_tests::bin;
use apron_tests::files_under;
use apron_tests::{signal, wait_with_timeout};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int32Type, TimeUnit, TimestampMillisecondType};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;

fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let file = File::open(path).expect("open parquet file");
    ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("a complete parquet file")
        .build()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect()
}

/// (gpu_uuid → sorted tick times) over every `gpu_samples` file.
fn gpu_ticks(data: &Path) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for f in files_under(&data.join("gpu_samples")) {
        for b in read_batches(&f) {
            let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
            let uuid = b.column_by_name("gpu_uuid").expect("gpu_uuid").as_string::<i32>();
            for i in 0..b.num_rows() {
                out.entry(uuid.value(i).to_owned()).or_default().push(ts.value(i));
            }
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("the binary runs")
}

fn start_recorder(data: &Path, extra: &[&str]) -> Child {
    Command::new(bin("apron-recorder"))
        .args(["--source", "sim", "--host", "testnode", "--sim-gpus", "3", "--data"])
        .arg(data)
        .args(extra)
        .env("APRON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts")
}

fn live_run_stops_cleanly_on(sig: libc::c_int) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let child = start_recorder(&data, &["--interval", "200ms", "--rotate", "1s"]);
    sleep(Duration::from_millis(3_000));
    signal(&child, sig);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));

    let ticks = gpu_ticks(&data);
    assert_eq!(ticks.len(), 3, "three simulated GPUs: {:?}", ticks.keys());
    for (gpu, ts) in &ticks {
        // Every tick sits on the 200 ms grid, once, 200 ms apart: no drift,
        // no duplicates, nothing lost at shutdown.
        assert!(ts.iter().all(|t| t % 200 == 0), "{gpu}: off-grid tick");
        assert!(ts.windows(2).all(|w| w[1] - w[0] == 200), "{gpu}: gap or duplicate in {ts:?}");
        // How many ticks fit in the 3 s depends on how fast the machine
        // started the recorder, so only a run of several is required.
        assert!(ts.len() >= 3, "{gpu}: {} ticks", ts.len());
    }
    // Rotation every second: several complete files, no temporary ones left.
    let files = files_under(&data.join("gpu_samples"));
    assert!(files.len() >= 3, "{files:?}");
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("utf-8 name");
        assert!(name.ends_with(".parquet") && !name.starts_with('.'), "leftover {name}");
        let host_dir = f.parent().and_then(Path::file_name).and_then(|n| n.to_str());
        assert_eq!(host_dir, Some("host=testnode"));
    }
}

#[test]
fn sigterm_writes_everything_held_and_exits_zero() {
    live_run_stops_cleanly_on(libc::SIGTERM);
}

#[test]
fn sigint_writes_everything_held_and_exits_zero() {
    live_run_stops_cleanly_on(libc::SIGINT);
}

fn simulate(data: &Path, gpus: &str, days: &str, seed: &str) -> Output {
    run(Command::new(bin("apron-recorder")).args(["simulate", "--data"]).arg(data).args([
        "--gpus",
        gpus,
        "--days",
        days,
        "--start",
        "2026-11-01",
        "--seed",
        seed,
        "--interval",
        "10s",
    ]))
}

#[test]
fn simulate_writes_one_row_per_gpu_per_tick_in_hive_partitions() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let out = simulate(&data, "12", "2", "7");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // 12 GPUs → hosts of 8 and 4; 2 days at 10 s = 17,280 ticks per GPU.
    let ticks = gpu_ticks(&data);
    assert_eq!(ticks.len(), 12);
    let start = 1_793_491_200_000; // 2026-11-01T00:00:00Z
    for ts in ticks.values() {
        assert_eq!(ts.len(), 17_280);
        assert_eq!(ts[0], start);
        assert_eq!(ts[ts.len() - 1], start + 2 * 86_400_000 - 10_000);
    }
    let files = files_under(&data.join("gpu_samples"));
    let parts: Vec<String> = files
        .iter()
        .map(|f| {
            let host = f.parent().expect("host dir");
            let date = host.parent().expect("date dir");
            format!(
                "{}/{}",
                date.file_name().expect("d").to_string_lossy(),
                host.file_name().expect("h").to_string_lossy()
            )
        })
        .collect();
    assert_eq!(
        parts,
        [
            "date=2026-11-01/host=gpu-node01",
            "date=2026-11-01/host=gpu-node02",
            "date=2026-11-02/host=gpu-node01",
            "date=2026-11-02/host=gpu-node02"
        ]
    );
    assert!(!files_under(&data.join("proc_samples")).is_empty(), "processes were recorded");
}

#[test]
fn files_are_zstd_sorted_indexed_and_versioned() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    assert!(simulate(&data, "8", "1", "3").status.success());
    for table in ["gpu_samples", "proc_samples"] {
        for f in files_under(&data.join(table)) {
            let reader = SerializedFileReader::new_with_options(
                File::open(&f).expect("open"),
                ReadOptionsBuilder::new().with_page_index().build(),
            )
            .expect("parquet");
            let meta = reader.metadata();
            let kv = meta.file_metadata().key_value_metadata().expect("key-value metadata");
            let get = |k: &str| kv.iter().find(|e| e.key == k).and_then(|e| e.value.clone());
            assert_eq!(get("apron.schema_version").as_deref(), Some(apron_schemas::SCHEMA_VERSION));
            assert_eq!(get("apron.table").as_deref(), Some(table));
            assert!(meta.column_index().is_some() && meta.offset_index().is_some(), "page index");
            for rg in meta.row_groups() {
                let sorting = rg.sorting_columns().expect("sorting columns");
                let names: Vec<String> =
                    sorting.iter().map(|s| rg.column(s.column_idx as usize).column_path().string()).collect();
                assert_eq!(&names[..2], ["gpu_uuid", "ts"]);
                for c in rg.columns() {
                    assert!(matches!(c.compression(), Compression::ZSTD(_)), "{}", c.column_path());
                    assert!(c.statistics().is_some(), "statistics on {}", c.column_path());
                }
            }
            // Rows really are in (gpu_uuid, ts) order.
            let mut prev: Option<(String, i64)> = None;
            for b in read_batches(&f) {
                let ts = b.column_by_name("ts").expect("ts");
                assert_eq!(ts.data_type(), &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())));
                let ts = ts.as_primitive::<TimestampMillisecondType>();
                let uuid = b.column_by_name("gpu_uuid").expect("uuid").as_string::<i32>();
                for i in 0..b.num_rows() {
                    let key = (uuid.value(i).to_owned(), ts.value(i));
                    if let Some(p) = &prev {
                        assert!(p <= &key, "{}: {p:?} before {key:?}", f.display());
                    }
                    prev = Some(key);
                }
            }
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (tmp.path().join("a"), tmp.path().join("b"), tmp.path().join("c"));
    assert!(simulate(&a, "8", "1", "42").status.success());
    assert!(simulate(&b, "8", "1", "42").status.success());
    assert!(simulate(&c, "8", "1", "43").status.success());
    let content = |root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        files_under(root)
            .into_iter()
            .map(|f| (f.strip_prefix(root).expect("under root").to_path_buf(), fs::read(&f).expect("read")))
            .collect()
    };
    assert_eq!(content(&a), content(&b));
    assert_ne!(content(&a), content(&c));
}

#[test]
fn metrics_keep_null_apart_from_zero() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    assert!(simulate(&data, "8", "1", "5").status.success());
    let (mut zero_util, mut rows) = (0usize, 0usize);
    for f in files_under(&data.join("gpu_samples")) {
        for b in read_batches(&f) {
            rows += b.num_rows();
            let util = b.column_by_name("gpu_util_pct").expect("util").as_primitive::<Int32Type>();
            assert_eq!(util.null_count(), 0, "the simulated fleet always measures utilization");
            zero_util += util.iter().filter(|v| *v == Some(0)).count();
        }
    }
    assert!(rows > 0 && zero_util > 0, "idle GPUs report a measured 0, not null");
}

#[test]
fn without_a_driver_nvml_fails_at_once_naming_the_library() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Fails, rather than waiting for a driver: one that waited would be
    // killed at the limit and fail the test.
    let child = Command::new(bin("apron-recorder"))
        .args(["--source", "nvml", "--host", "n1", "--nvml-lib", "/nonexistent/libnvidia-ml.so.1", "--data"])
        .arg(tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    let out = wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libnvidia-ml"), "{err}");
    assert!(err.contains("--source sim"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    assert!(files_under(tmp.path()).is_empty(), "nothing recorded, no silent fallback");
}

#[test]
fn bad_flags_give_one_line_and_exit_two() {
    for args in [
        &["--interval", "soon"][..],
        &["--source", "gpu"][..],
        &["--host", "bad/host", "--source", "sim"][..],
        &["simulate", "--days", "many"][..],
        &["simulate", "--start", "2026-13-01"][..],
        &["--no-such-flag"][..],
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run(Command::new(bin("apron-recorder")).args(args).arg("--data").arg(tmp.path()));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A recording flag before a command that would ignore it is refused,
    // naming both; `--data` is every command's.
    for (args, flag, command) in [
        (&["--metrics", "9400", "compact"][..], "--metrics", "compact"),
        (&["--source", "sim", "ship", "--to", "s3://bucket/apron"][..], "--source", "ship"),
        (&["--sim-gpus", "3", "simulate", "--days", "1"][..], "--sim-gpus", "simulate"),
    ] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run(Command::new(bin("apron-recorder")).args(args).arg("--data").arg(tmp.path()));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(flag) && err.contains(&format!("apron-recorder {command}")), "{args:?}: {err}");
        assert!(files_under(tmp.path()).is_empty(), "{args:?}: nothing done");
    }
}

/// `apron sql` output as JSON rows.
fn query(data: &Path, sql: &str) -> Vec<serde_json::Value> {
    let out = run(Command::new(bin("apron")).arg("--data").arg(data).args(["--format", "json", "sql", sql]));
    assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).expect("a JSON array")
}

#[test]
fn queries_see_the_rows_a_running_recorder_still_holds() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A 10-minute rotation: during this test no file closes, so every row
    // the query sees comes from the write-ahead log.
    let child = start_recorder(&data, &["--interval", "200ms", "--rotate", "10m"]);
    sleep(Duration::from_millis(3_000));
    let now_ms = chrono::Utc::now().timestamp_millis();
    let sql = "SELECT count(*) AS n, count(DISTINCT gpu_uuid) AS gpus, \
               CAST(max(ts) AS BIGINT) AS newest_ms, count(DISTINCT host) AS hosts, \
               CAST(max(date) AS VARCHAR) AS day FROM gpu_samples";
    let live = query(&data, sql);
    // The minute tables hold the open file too: its rows rolled up when the
    // query's session opened (one session, so both counts see the same log).
    let minutes = query(
        &data,
        "SELECT (SELECT count(*) FROM gpu_samples) AS raw_rows, \
         (SELECT CAST(sum(samples) AS BIGINT) FROM gpu_minutes) AS rolled_up",
    );
    signal(&child, libc::SIGTERM);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert!(out.status.success());
    assert!(files_under(&data.join("gpu_samples")).len() <= 1, "no file closed before the stop");

    let row = &live[0];
    assert_eq!(row["gpus"], 3);
    assert_eq!(row["hosts"], 1);
    let newest = row["newest_ms"].as_i64().expect("newest tick");
    assert!(now_ms - newest <= 2_000, "newest row is {} ms old", now_ms - newest);
    assert!(row["n"].as_i64().expect("count") >= 3 * 5, "{row}");
    let today = chrono::Utc::now().date_naive().format("%Y-%m-%d").to_string();
    assert_eq!(row["day"], today.as_str(), "the date partition column is filled for WAL rows");
    assert!(minutes[0]["raw_rows"].as_i64() > Some(0), "{minutes:?}");
    assert_eq!(minutes[0]["raw_rows"], minutes[0]["rolled_up"], "every WAL row is in gpu_minutes");

    // After the stop everything is in Parquet, each row once.
    let after = query(
        &data,
        "SELECT count(*) AS n, count(DISTINCT (gpu_uuid, ts)) AS distinct_rows FROM gpu_samples",
    );
    assert_eq!(after[0]["n"], after[0]["distinct_rows"]);
    assert!(after[0]["n"].as_i64() >= row["n"].as_i64());
}
