//! End-to-end tests of `apron sql`: the real binary on real Parquet files in
//! a temporary data folder (two hosts, two dates, values chosen by hand),
//! checking the numbers, partition pruning, the three output formats, files
//! written by other tools, and that every user mistake is one line on stderr
//! with exit code 2.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use apron_schemas::{
    DataLayout, GpuSample, ProcIdentity, ProcSample, Table, gpu_samples, parquet_props, proc_samples,
};
use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, UInt16Array, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use chrono::{DateTime, NaiveDate};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::{Value, json};
use tempfile::TempDir;

/// Milliseconds since the epoch of an RFC 3339 instant.
fn ms(rfc3339: &str) -> i64 {
    DateTime::parse_from_rfc3339(rfc3339).expect("valid RFC 3339").timestamp_millis()
}

fn date(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("valid date")
}

/// Writes `batch` as one Parquet file at `path`, making its folders.
fn write_parquet(path: &Path, batch: &RecordBatch, props: Option<WriterProperties>) {
    std::fs::create_dir_all(path.parent().expect("a file has a folder")).expect("create folders");
    let file = File::create(path).expect("create the file");
    let mut writer = ArrowWriter::try_new(file, batch.schema(), props).expect("start the writer");
    writer.write(batch).expect("write the rows");
    writer.close().expect("close the file");
}

fn gpu(ts: &str, uuid: &str, util: Option<i32>, power_mw: Option<i32>) -> GpuSample {
    GpuSample {
        ts: ms(ts),
        gpu_uuid: uuid.into(),
        gpu_index: if uuid.ends_with('1') { 1 } else { 0 },
        gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
        interval_ms: 1_000,
        gpu_util_pct: util,
        power_mw,
        fb_used_bytes: Some(1 << 30),
        ..Default::default()
    }
}

/// A data folder with known rows:
///
/// | host   | date       | gpu      | ts (UTC)              | util | power_mw |
/// |--------|------------|----------|-----------------------|------|----------|
/// | node01 | 2026-11-29 | GPU-n1-0 | 10:00:00              | 10   | 100000   |
/// | node01 | 2026-11-29 | GPU-n1-0 | 10:00:01              | 20   | 110000   |
/// | node01 | 2026-11-29 | GPU-n1-0 | 10:00:02              | 30   | 120000   |
/// | node01 | 2026-11-30 | GPU-n1-0 | 00:00:00              | 0    | 90000    |
/// | node01 | 2026-11-30 | GPU-n1-0 | 00:00:01              | null | null     |
/// | node02 | 2026-11-29 | GPU-n2-0 | 12:00:00              | 50   | 200000   |
/// | node02 | 2026-11-29 | GPU-n2-1 | 12:00:00              | 70   | 210000   |
/// | node02 | 2026-11-30 | GPU-n2-0 | 23:59:59.500          | 100  | 300000   |
///
/// Totals: 8 rows, 7 util values summing to 280, power 1,130,000 mW.
/// node01: 5 rows, util 60; node02: 3 rows, util 220.
/// proc_samples: two rows of pid 4242 (alice) on GPU-n1-0, node01, 2026-11-29.
struct Fleet {
    dir: TempDir,
}

impl Fleet {
    fn new() -> Self {
        let fleet = Fleet { dir: tempfile::tempdir().expect("a temporary folder") };
        let files: [(&str, Vec<GpuSample>); 4] = [
            (
                "node01",
                vec![
                    gpu("2026-11-29T10:00:00Z", "GPU-n1-0", Some(10), Some(100_000)),
                    gpu("2026-11-29T10:00:01Z", "GPU-n1-0", Some(20), Some(110_000)),
                    gpu("2026-11-29T10:00:02Z", "GPU-n1-0", Some(30), Some(120_000)),
                ],
            ),
            (
                "node01",
                vec![
                    gpu("2026-11-30T00:00:00Z", "GPU-n1-0", Some(0), Some(90_000)),
                    gpu("2026-11-30T00:00:01Z", "GPU-n1-0", None, None),
                ],
            ),
            (
                "node02",
                vec![
                    gpu("2026-11-29T12:00:00Z", "GPU-n2-0", Some(50), Some(200_000)),
                    gpu("2026-11-29T12:00:00Z", "GPU-n2-1", Some(70), Some(210_000)),
                ],
            ),
            ("node02", vec![gpu("2026-11-30T23:59:59.500Z", "GPU-n2-0", Some(100), Some(300_000))]),
        ];
        for (host, mut rows) in files {
            gpu_samples::sort(&mut rows);
            let batch = gpu_samples::to_batch(&rows).expect("rows match the schema");
            let path = fleet.layout().file_path(Table::GpuSamples, host, rows[0].ts, 1);
            let props = parquet_props::writer_properties(Table::GpuSamples, host);
            write_parquet(&path, &batch, Some(props));
        }

        let alice = ProcIdentity {
            proc_start: Some(ms("2026-11-29T09:00:00Z")),
            comm: Some("python3".into()),
            uid: Some(1000),
            user: Some("alice".into()),
            ..Default::default()
        };
        let procs = vec![
            ProcSample {
                ts: ms("2026-11-29T10:00:00Z"),
                gpu_uuid: "GPU-n1-0".into(),
                pid: 4242,
                interval_ms: 1_000,
                identity: alice.clone(),
                used_mem_bytes: Some(2 << 30),
                sm_util_pct: Some(0),
                mem_util_pct: Some(5),
            },
            ProcSample {
                ts: ms("2026-11-29T10:00:01Z"),
                gpu_uuid: "GPU-n1-0".into(),
                pid: 4242,
                interval_ms: 1_000,
                identity: alice,
                used_mem_bytes: Some(2 << 30),
                sm_util_pct: None,
                mem_util_pct: None,
            },
        ];
        let batch = proc_samples::to_batch(&procs).expect("rows match the schema");
        let path = fleet.layout().file_path(Table::ProcSamples, "node01", procs[0].ts, 1);
        write_parquet(&path, &batch, Some(parquet_props::writer_properties(Table::ProcSamples, "node01")));
        fleet
    }

    fn data(&self) -> &Path {
        self.dir.path()
    }

    fn layout(&self) -> DataLayout {
        DataLayout::new(self.data())
    }

    /// The folder of `table` on `host` on `day` (`YYYY-MM-DD`).
    fn partition(&self, table: Table, day: &str, host: &str) -> PathBuf {
        self.layout().partition_dir(table, date(day), host)
    }

    /// The one data file of `gpu_samples` on `host` on `day`.
    fn gpu_file(&self, day: &str, host: &str) -> PathBuf {
        let dir = self.partition(Table::GpuSamples, day, host);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("the partition exists")
            .map(|e| e.expect("a folder entry").path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.remove(0)
    }

    /// `apron --data DATA ARGS…`.
    fn apron(&self, args: &[&str]) -> Output {
        apron_in(self.data(), args)
    }

    /// The rows of `sql` from `--format json`.
    fn json(&self, sql: &str) -> Vec<Value> {
        let out = succeed(self.apron(&["--format", "json", "sql", sql]));
        match serde_json::from_str(&out) {
            Ok(Value::Array(rows)) => rows,
            other => panic!("expected one JSON array for {sql}, got {other:?} from {out}"),
        }
    }
}

/// `apron --data DATA ARGS…` with no data folder or log filter from the
/// environment.
fn apron_in(data: &Path, args: &[&str]) -> Output {
    Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .output()
        .expect("apron runs")
}

/// Asserts success and an empty stderr; returns stdout.
fn succeed(out: Output) -> String {
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert!(out.status.success(), "apron failed: {stderr}");
    assert_eq!(stderr, "", "apron succeeded but wrote to stderr");
    stdout
}

/// Asserts exit code 2, nothing on stdout, and exactly one line on stderr
/// starting with `error: ` with no panic or backtrace; returns that line.
fn fail(out: Output) -> String {
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stdout, "", "a failed command printed a result");
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr:?}");
    assert!(stderr.ends_with('\n'));
    let line = stderr.trim_end().to_owned();
    assert!(line.starts_with("error: "), "{line}");
    for word in ["panicked", "backtrace", "RUST_BACKTRACE"] {
        assert!(!line.contains(word), "{line}");
    }
    line
}

#[test]
fn counts_sums_and_groups() {
    let fleet = Fleet::new();
    let rows = fleet.json(
        "SELECT count(*) AS n, count(gpu_util_pct) AS n_util, sum(gpu_util_pct) AS util, \
         sum(power_mw) AS power, count(DISTINCT gpu_uuid) AS gpus FROM gpu_samples",
    );
    assert_eq!(rows, [json!({"n": 8, "n_util": 7, "util": 280, "power": 1_130_000, "gpus": 3})]);

    let rows = fleet.json(
        "SELECT host, count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples GROUP BY host ORDER BY host",
    );
    assert_eq!(
        rows,
        [json!({"host": "node01", "n": 5, "util": 60}), json!({"host": "node02", "n": 3, "util": 220})]
    );

    let rows = fleet.json("SELECT date, count(*) AS n FROM gpu_samples GROUP BY date ORDER BY date");
    assert_eq!(rows, [json!({"date": "2026-11-29", "n": 5}), json!({"date": "2026-11-30", "n": 3})]);

    let rows = fleet.json(
        "SELECT p.user, count(*) AS n, sum(p.used_mem_bytes) AS mem, max(g.gpu_util_pct) AS util \
         FROM proc_samples p JOIN gpu_samples g \
         ON p.host = g.host AND p.gpu_uuid = g.gpu_uuid AND p.ts = g.ts GROUP BY p.user",
    );
    assert_eq!(rows, [json!({"user": "alice", "n": 2, "mem": 4_i64 << 30, "util": 20})]);
}

/// Text is read as `Utf8View` (views into the decoded dictionary, not a
/// copy of every value: `bench/` measures the gain), with the values and
/// the grouping of the files.
#[test]
fn text_columns_are_read_as_views_with_their_values() {
    let fleet = Fleet::new();
    let rows = fleet.json(
        "SELECT gpu_uuid, arrow_typeof(gpu_uuid) AS uuid_type, arrow_typeof(gpu_model) AS model_type, \
         count(*) AS n FROM gpu_samples GROUP BY gpu_uuid, gpu_model ORDER BY gpu_uuid",
    );
    let types = |uuid: &str, n: u32| json!({"gpu_uuid": uuid, "uuid_type": "Utf8View", "model_type": "Utf8View", "n": n});
    assert_eq!(rows, [types("GPU-n1-0", 5), types("GPU-n2-0", 2), types("GPU-n2-1", 1)]);
    let rows = fleet.json(
        "SELECT \"user\", arrow_typeof(\"user\") AS user_type, arrow_typeof(comm) AS comm_type FROM proc_samples",
    );
    let alice = json!({"user": "alice", "user_type": "Utf8View", "comm_type": "Utf8View"});
    assert_eq!(rows, [alice.clone(), alice]);
}

#[test]
fn partition_filters_give_only_their_rows_and_skip_other_folders() {
    let fleet = Fleet::new();
    let rows = fleet.json("SELECT DISTINCT host FROM gpu_samples WHERE host = 'node02'");
    assert_eq!(rows, [json!({"host": "node02"})]);
    let rows =
        fleet.json("SELECT count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples WHERE host = 'node02'");
    assert_eq!(rows, [json!({"n": 3, "util": 220})]);
    let rows =
        fleet.json("SELECT count(*) AS n, sum(power_mw) AS power FROM gpu_samples WHERE date = '2026-11-30'");
    assert_eq!(rows, [json!({"n": 3, "power": 390_000})]);

    // A broken file in node02's folders: a query restricted to node01 never
    // opens it, so it still answers; one that reads node02 names the file.
    let bad = fleet.partition(Table::GpuSamples, "2026-11-30", "node02").join("broken.parquet");
    std::fs::write(&bad, b"this is not a parquet file").expect("write the broken file");
    let rows = fleet.json("SELECT count(*) AS n FROM gpu_samples WHERE host = 'node01'");
    assert_eq!(rows, [json!({"n": 5})]);
    let rows = fleet
        .json("SELECT count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples WHERE date = '2026-11-29'");
    assert_eq!(rows, [json!({"n": 5, "util": 180})]);
    let rows =
        fleet.json("SELECT count(*) AS n FROM gpu_samples WHERE host = 'node02' AND date = '2026-11-29'");
    assert_eq!(rows, [json!({"n": 2})]);
    let line = fail(fleet.apron(&["sql", "SELECT count(*) FROM gpu_samples WHERE host = 'node02'"]));
    assert!(line.contains(&bad.display().to_string()), "{line}");
}

#[test]
fn timestamps_are_exact_utc_instants() {
    let fleet = Fleet::new();
    let sql =
        "SELECT ts, CAST(ts AS BIGINT) AS ms FROM gpu_samples WHERE host = 'node02' AND date = '2026-11-30'";
    let rows = fleet.json(sql);
    assert_eq!(rows, [json!({"ts": "2026-11-30T23:59:59.500Z", "ms": ms("2026-11-30T23:59:59.500Z")})]);
    assert_eq!(ms("2026-11-30T23:59:59.500Z"), 1_796_083_199_500);

    let csv = succeed(fleet.apron(&["--format", "csv", "sql", sql]));
    assert_eq!(csv, "ts,ms\n2026-11-30T23:59:59.500Z,1796083199500\n");

    let table = succeed(fleet.apron(&["sql", sql]));
    assert!(table.contains("| 2026-11-30T23:59:59.500Z | 1796083199500 |"), "{table}");

    // A filter on an instant finds exactly that row.
    let rows = fleet.json(
        "SELECT gpu_uuid FROM gpu_samples WHERE ts = TIMESTAMP '2026-11-29T12:00:00Z' ORDER BY gpu_uuid",
    );
    assert_eq!(rows, [json!({"gpu_uuid": "GPU-n2-0"}), json!({"gpu_uuid": "GPU-n2-1"})]);
}

#[test]
fn the_three_formats_agree() {
    let fleet = Fleet::new();
    let sql = "SELECT host, gpu_uuid, count(*) AS n, sum(power_mw) AS power_mw FROM gpu_samples \
               GROUP BY host, gpu_uuid ORDER BY host, gpu_uuid";
    let expected = [
        ("node01", "GPU-n1-0", 5, 420_000),
        ("node02", "GPU-n2-0", 2, 500_000),
        ("node02", "GPU-n2-1", 1, 210_000),
    ];

    let rows = fleet.json(sql);
    let from_json: Vec<(String, String, i64, i64)> = rows
        .iter()
        .map(|r| {
            let obj = r.as_object().expect("a row is an object");
            assert_eq!(obj.keys().collect::<Vec<_>>(), ["gpu_uuid", "host", "n", "power_mw"]);
            (
                r["host"].as_str().expect("host").to_owned(),
                r["gpu_uuid"].as_str().expect("gpu_uuid").to_owned(),
                r["n"].as_i64().expect("n"),
                r["power_mw"].as_i64().expect("power_mw"),
            )
        })
        .collect();

    let csv = succeed(fleet.apron(&["--format", "csv", "sql", sql]));
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("host,gpu_uuid,n,power_mw"));
    let from_csv: Vec<(String, String, i64, i64)> = lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 4, "{line}");
            (f[0].into(), f[1].into(), f[2].parse().expect("n"), f[3].parse().expect("power"))
        })
        .collect();

    let table = succeed(fleet.apron(&["sql", sql]));
    let from_table: Vec<(String, String, i64, i64)> = table
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(1)
        .map(|line| {
            let f: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            (f[0].into(), f[1].into(), f[2].parse().expect("n"), f[3].parse().expect("power"))
        })
        .collect();
    assert!(table.lines().any(|l| l.contains("| host   | gpu_uuid | n | power_mw |")), "{table}");

    let expected: Vec<(String, String, i64, i64)> =
        expected.iter().map(|&(h, g, n, p)| (h.into(), g.into(), n, p)).collect();
    assert_eq!(from_json, expected);
    assert_eq!(from_csv, expected);
    assert_eq!(from_table, expected);
}

#[test]
fn null_and_zero_stay_apart() {
    let fleet = Fleet::new();
    let sql = "SELECT gpu_util_pct, power_mw FROM gpu_samples \
               WHERE host = 'node01' AND date = '2026-11-30' ORDER BY ts";
    assert_eq!(
        fleet.json(sql),
        [json!({"gpu_util_pct": 0, "power_mw": 90_000}), json!({"gpu_util_pct": null, "power_mw": null})]
    );
    let csv = succeed(fleet.apron(&["--format", "csv", "sql", sql]));
    assert_eq!(csv, "gpu_util_pct,power_mw\n0,90000\n,\n");
    let table = succeed(fleet.apron(&["--format", "table", "sql", sql]));
    // Numbers right-aligned, a null apart from 0.
    assert!(table.contains("| gpu_util_pct | power_mw |"), "{table}");
    assert!(table.contains("|            0 |    90000 |"), "{table}");
    assert!(table.contains("|         NULL |     NULL |"), "{table}");

    let rows = fleet.json("SELECT sm_util_pct, mem_util_pct FROM proc_samples ORDER BY ts");
    assert_eq!(
        rows,
        [json!({"sm_util_pct": 0, "mem_util_pct": 5}), json!({"sm_util_pct": null, "mem_util_pct": null})]
    );
}

#[test]
fn empty_results_keep_their_shape() {
    let fleet = Fleet::new();
    let sql = "SELECT host, gpu_util_pct FROM gpu_samples WHERE host = 'node99'";
    assert_eq!(succeed(fleet.apron(&["--format", "json", "sql", sql])).trim(), "[]");
    assert_eq!(succeed(fleet.apron(&["--format", "csv", "sql", sql])), "host,gpu_util_pct\n");
    let table = succeed(fleet.apron(&["sql", sql]));
    assert!(table.contains("| host | gpu_util_pct |"), "{table}");
}

#[test]
fn files_written_by_other_tools_are_read_with_the_canonical_types() {
    let fleet = Fleet::new();
    // Another tool's file: utilization as UInt16, power as UInt32, the
    // framebuffer as a signed 64-bit value it calls the same, timestamps in
    // microseconds without a zone, a column apron does not know, and most
    // optional columns missing.
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int64, false),
        Field::new("interval_ms", DataType::Int64, false),
        Field::new("gpu_util_pct", DataType::UInt16, true),
        Field::new("power_mw", DataType::UInt32, true),
        Field::new("fb_used_bytes", DataType::Int64, true),
        Field::new("vendor_score", DataType::Float64, true),
    ]));
    let t0 = ms("2026-11-28T06:00:00Z");
    let columns: Vec<ArrayRef> = vec![
        Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![t0 * 1_000, (t0 + 1_000) * 1_000])),
        Arc::new(StringArray::from(vec!["GPU-x-0", "GPU-x-0"])),
        Arc::new(Int64Array::from(vec![0, 0])),
        Arc::new(Int64Array::from(vec![1_000, 1_000])),
        Arc::new(UInt16Array::from(vec![Some(65), None])),
        Arc::new(UInt32Array::from(vec![Some(250_000), Some(0)])),
        Arc::new(Int64Array::from(vec![Some(3 << 30), Some(0)])),
        Arc::new(Float64Array::from(vec![0.5, 0.25])),
    ];
    let batch = RecordBatch::try_new(schema, columns).expect("columns match the schema");
    let path = fleet.partition(Table::GpuSamples, "2026-11-28", "imported").join("export.parquet");
    write_parquet(&path, &batch, None);

    let rows = fleet.json(
        "SELECT ts, gpu_util_pct, power_mw, fb_used_bytes, temp_c, sm_active_pct, gpu_model, \
         arrow_typeof(gpu_util_pct) AS util_type, arrow_typeof(power_mw) AS power_type \
         FROM gpu_samples WHERE host = 'imported' AND (gpu_util_pct > 50 OR gpu_util_pct IS NULL) ORDER BY ts",
    );
    assert_eq!(
        rows,
        [
            json!({"ts": "2026-11-28T06:00:00Z", "gpu_util_pct": 65, "power_mw": 250_000,
                   "fb_used_bytes": 3_i64 << 30, "temp_c": null, "sm_active_pct": null, "gpu_model": null,
                   "util_type": "Int32", "power_type": "Int32"}),
            json!({"ts": "2026-11-28T06:00:01Z", "gpu_util_pct": null, "power_mw": 0,
                   "fb_used_bytes": 0, "temp_c": null, "sm_active_pct": null, "gpu_model": null,
                   "util_type": "Int32", "power_type": "Int32"}),
        ]
    );
    // The imported rows join the fleet's totals.
    assert_eq!(fleet.json("SELECT count(*) AS n FROM gpu_samples"), [json!({"n": 10})]);
    // Its unknown column is not part of the table.
    let line = fail(fleet.apron(&["sql", "SELECT vendor_score FROM gpu_samples"]));
    assert!(line.contains("vendor_score"), "{line}");
}

#[test]
fn hidden_and_temporary_files_are_never_read() {
    let fleet = Fleet::new();
    let dir = fleet.partition(Table::GpuSamples, "2026-11-29", "node01");
    // A good file under a hidden name would double the rows; garbage under a
    // temporary name would fail the query.
    let good = std::fs::read(fleet.gpu_file("2026-11-29", "node01")).expect("read a data file");
    std::fs::write(dir.join(".20261129T100000000Z-000002.parquet"), &good).expect("write");
    std::fs::write(dir.join(".20261129T100000000Z-000003.parquet.tmp"), b"half a file").expect("write");
    std::fs::write(dir.join("._20261129T100000000Z-000001.parquet"), b"macOS resource fork").expect("write");
    assert_eq!(fleet.json("SELECT count(*) AS n FROM gpu_samples"), [json!({"n": 8})]);
}

#[test]
fn queries_come_from_a_file_or_stdin() {
    let fleet = Fleet::new();
    let path = fleet.data().join("q.sql");
    std::fs::write(&path, "-- util per host\nSELECT host, sum(gpu_util_pct) AS util\nFROM gpu_samples\nGROUP BY host ORDER BY host;\n")
        .expect("write the query");
    let csv = succeed(fleet.apron(&["--format", "csv", "sql", "-f", path.to_str().expect("UTF-8 path")]));
    assert_eq!(csv, "host,util\nnode01,60\nnode02,220\n");

    let mut child = Command::new(apron_tests::bin("apron"))
        .args(["sql", "--format", "csv", "-f", "-", "--data"])
        .arg(fleet.data())
        .env_remove("APRON_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(b"SELECT count(*) AS n FROM proc_samples")
        .expect("write the query");
    let csv = succeed(child.wait_with_output().expect("apron ends"));
    assert_eq!(csv, "n\n2\n");
}

#[test]
fn the_data_folder_comes_from_apron_data() {
    let fleet = Fleet::new();
    let out = Command::new(apron_tests::bin("apron"))
        .args(["--format", "csv", "sql", "SELECT count(*) AS n FROM gpu_samples"])
        .env("APRON_DATA", fleet.data())
        .output()
        .expect("apron runs");
    assert_eq!(succeed(out), "n\n8\n");
}

#[test]
fn bad_sql_is_one_line() {
    let fleet = Fleet::new();
    let line = fail(fleet.apron(&["sql", "SELEC count(*) FROM gpu_samples"]));
    assert!(line.starts_with("error: invalid query: SQL error:"), "{line}");
    assert!(line.contains("SELEC"), "{line}");

    let line = fail(fleet.apron(&["sql", "SELECT no_such_column FROM gpu_samples"]));
    assert!(line.contains("no_such_column"), "{line}");
}

#[test]
fn an_unknown_table_is_named_with_the_tables_present() {
    let fleet = Fleet::new();
    // The minute tables are there too, computed from the raw files (this
    // fleet's files were written without rollups).
    let line = fail(fleet.apron(&["sql", "SELECT * FROM gpu_hours"]));
    assert!(line.contains("table gpu_hours not found"), "{line}");
    assert!(line.ends_with("tables present: gpu_samples, proc_samples, gpu_minutes, proc_minutes"), "{line}");

    // A table whose folder is absent is not registered.
    std::fs::remove_dir_all(fleet.layout().table_dir(Table::ProcSamples)).expect("remove proc_samples");
    let line = fail(fleet.apron(&["sql", "SELECT count(*) FROM proc_samples"]));
    assert!(line.contains("table proc_samples not found"), "{line}");
    assert!(line.ends_with("tables present: gpu_samples, gpu_minutes, proc_minutes"), "{line}");
}

#[test]
fn a_missing_data_folder_is_named() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("no-such-data");
    let line = fail(apron_in(&missing, &["sql", "SELECT 1"]));
    assert!(line.contains(&missing.display().to_string()), "{line}");
    assert!(line.contains("No such file or directory"), "{line}");
}

#[test]
fn an_empty_data_folder_says_how_to_get_data() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let line = fail(apron_in(dir.path(), &["sql", "SELECT count(*) FROM gpu_samples"]));
    assert!(line.starts_with(&format!("error: no apron data in {}", dir.path().display())), "{line}");
    assert!(line.contains("apron-recorder simulate"), "{line}");
}

#[test]
fn a_truncated_or_corrupt_file_is_named() {
    let fleet = Fleet::new();
    let file = fleet.gpu_file("2026-11-29", "node02");
    let bytes = std::fs::read(&file).expect("read a data file");
    std::fs::write(&file, &bytes[..bytes.len() / 2]).expect("truncate it");
    for (format, sql) in [
        ("table", "SELECT count(*) FROM gpu_samples"),
        ("csv", "SELECT sum(gpu_util_pct) FROM gpu_samples"),
        ("json", "SELECT * FROM gpu_samples WHERE host = 'node02'"),
    ] {
        let line = fail(fleet.apron(&["--format", format, "sql", sql]));
        assert!(line.contains(&file.display().to_string()), "{line}");
        assert!(line.contains("corrupt or truncated"), "{line}");
    }

    // A file whose footer was overwritten with junk.
    let fleet = Fleet::new();
    let file = fleet.gpu_file("2026-11-30", "node01");
    let mut bytes = std::fs::read(&file).expect("read a data file");
    let n = bytes.len();
    bytes[n - 40..n - 4].fill(0xAB);
    std::fs::write(&file, &bytes).expect("corrupt it");
    let line = fail(fleet.apron(&["--format", "json", "sql", "SELECT * FROM gpu_samples"]));
    assert!(line.contains(&file.display().to_string()), "{line}");

    // A sound footer over damaged pages: found by decoding the files the
    // query read; a query that does not read the file still answers.
    let fleet = Fleet::new();
    let file = fleet.gpu_file("2026-11-29", "node01");
    let mut bytes = std::fs::read(&file).expect("read a data file");
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    bytes[4..n - 8 - footer_len].fill(0xFF);
    std::fs::write(&file, &bytes).expect("damage its pages");
    let line = fail(fleet.apron(&["sql", "SELECT sum(gpu_util_pct) FROM gpu_samples"]));
    assert!(line.contains(&file.display().to_string()), "{line}");
    assert_eq!(fleet.json("SELECT count(*) AS n FROM gpu_samples WHERE host = 'node02'"), [json!({"n": 3})]);
}

#[test]
fn a_partition_folder_that_is_not_a_date_is_named() {
    let fleet = Fleet::new();
    let odd = fleet.layout().table_dir(Table::GpuSamples).join("date=yesterday");
    std::fs::create_dir_all(odd.join("host=node01")).expect("create the folder");
    std::fs::copy(fleet.gpu_file("2026-11-30", "node01"), odd.join("host=node01").join("x.parquet"))
        .expect("copy a data file");
    let line = fail(fleet.apron(&["sql", "SELECT count(*) FROM gpu_samples"]));
    assert_eq!(
        line,
        format!(
            "error: cannot read partition folder {}: date=yesterday is not a date (YYYY-MM-DD)",
            odd.display()
        )
    );
}

#[test]
fn a_file_without_a_required_column_is_named() {
    let fleet = Fleet::new();
    let schema = Arc::new(Schema::new(vec![Field::new("gpu_uuid", DataType::Utf8, false)]));
    let columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["GPU-y-0"]))];
    let batch = RecordBatch::try_new(schema, columns).expect("columns match the schema");
    let path = fleet.partition(Table::GpuSamples, "2026-11-30", "node03").join("partial.parquet");
    write_parquet(&path, &batch, None);
    let line = fail(fleet.apron(&["sql", "SELECT ts, gpu_uuid FROM gpu_samples"]));
    assert!(line.contains(&path.display().to_string()), "{line}");
    assert!(line.contains("required column ts is missing"), "{line}");
}

#[test]
fn statements_that_write_are_refused() {
    let fleet = Fleet::new();
    for (sql, what) in [
        ("INSERT INTO gpu_samples (gpu_uuid) VALUES ('x')", "INSERT"),
        ("CREATE TABLE t AS SELECT * FROM gpu_samples", "CREATE TABLE"),
        ("CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '/tmp'", "CREATE EXTERNAL TABLE"),
        ("DROP TABLE gpu_samples", "DROP TABLE"),
        ("DELETE FROM gpu_samples", "DELETE"),
        ("COPY (SELECT 1) TO '/tmp/apron-copy.csv'", "COPY"),
        ("SET datafusion.execution.batch_size = 1", "SET"),
    ] {
        let line = fail(fleet.apron(&["sql", sql]));
        assert_eq!(line, format!("error: apron sql is read-only: {what} is not allowed"), "{sql}");
    }
    // Nothing was changed: the data is all there.
    assert_eq!(fleet.json("SELECT count(*) AS n FROM gpu_samples"), [json!({"n": 8})]);
}

#[test]
fn bad_flags_are_one_line_with_a_pointer_to_help() {
    let fleet = Fleet::new();
    for (args, names, help) in [
        (&["--frobnicate", "sql", "SELECT 1"][..], "--frobnicate", "apron sql"),
        (&["--format", "xml", "sql", "SELECT 1"][..], "xml", "apron sql"),
        (&["sql", "--out", "r.csv"][..], "<QUERY|--file <FILE>>", "apron sql"),
        (&["sql", "SELECT 1", "-f", "q.sql"][..], "--file", "apron sql"),
        (&["frobnicate"][..], "frobnicate", "apron"),
        (&[][..], "subcommand", "apron"),
    ] {
        let line = fail(fleet.apron(args));
        assert!(line.contains(names), "{args:?}: {line}");
        assert!(line.ends_with(&format!("(see '{help} --help')")), "{args:?}: {line}");
    }
}

#[test]
fn a_missing_query_file_is_named() {
    let fleet = Fleet::new();
    let missing = fleet.data().join("nope.sql");
    let line = fail(fleet.apron(&["sql", "-f", missing.to_str().expect("UTF-8 path")]));
    assert_eq!(
        line,
        format!(
            "error: cannot read query file {}: No such file or directory (os error 2)",
            missing.display()
        )
    );
}

#[test]
fn help_and_version_print_and_succeed() {
    let fleet = Fleet::new();
    let help = succeed(fleet.apron(&["--help"]));
    assert!(help.contains("Usage: apron"), "{help}");
    assert!(help.contains("APRON_DATA"), "{help}");
    assert!(help.contains("./data"), "{help}");
    let help = succeed(fleet.apron(&["sql", "--help"]));
    assert!(help.contains("--file <FILE>"), "{help}");
    let version = succeed(fleet.apron(&["--version"]));
    assert!(version.starts_with("apron "), "{version}");
}

#[test]
fn rows_of_the_write_ahead_log_at_impossible_times_are_left_out() {
    // A crafted segment: one row at a real time, one a hair short of
    // i64::MAX, which no date arithmetic survives.
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    let mut wal = apron_store::wal::Wal::new(layout.clone(), "node09", std::time::Duration::from_secs(1))
        .expect("a WAL");
    let real = ms("2026-11-29T10:00:00Z");
    wal.begin(real, 0);
    use apron_store::wal::format::TickRows;
    let first = [gpu("2026-11-29T10:00:00Z", "GPU-w-0", Some(40), Some(1))];
    wal.append(real, TickRows { gpus: &first, ..TickRows::default() });
    let absurd = i64::MAX - 1_000;
    let crafted = [GpuSample { ts: absurd, ..gpu("2026-11-29T10:00:00Z", "GPU-w-0", Some(1), None) }];
    wal.append(absurd, TickRows { gpus: &crafted, ..TickRows::default() });
    drop(wal); // a crash: the segment stays

    let out = apron_in(
        tmp.path(),
        &[
            "--format",
            "csv",
            "sql",
            "SELECT count(*) AS n, CAST(max(ts) AS BIGINT) AS newest FROM gpu_samples",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("n,newest\n1,{real}\n"));
}
