//! End to end: `apron sql QUERY --out FILE` writes the result as Parquet,
//! CSV, JSON or NDJSON by FILE's extension, the same rows `--format csv`
//! prints; refuses an unknown extension before reading anything; leaves no
//! file (and an existing one untouched) when the query fails midway; and
//! streams: a result several times larger than the process's peak memory
//! is written whole.
//!
//! Runs on the hand-built fleet of `apron_tests::scenario`: GPU-A and GPU-B
//! on h1 (60 samples each, GPU-A at 50% for 30 of them), GPU-C on h2 (48
//! samples at 100%).

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::scenario::Fixture;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Per GPU: samples, summed utilization, and the first sample's time.
const PER_GPU: &str = "SELECT host, gpu_uuid, count(*) AS n, sum(gpu_util_pct) AS util, \
                       CAST(min(ts) AS BIGINT) AS first_ms \
                       FROM gpu_samples GROUP BY host, gpu_uuid ORDER BY host, gpu_uuid";

/// What [`PER_GPU`] gives, worked out by hand: 10:00:00 UTC is
/// 1 793 613 600 000 ms.
const PER_GPU_CSV: &str = "host,gpu_uuid,n,util,first_ms\n\
                           h1,GPU-A,60,1500,1793613600000\n\
                           h1,GPU-B,60,0,1793613600000\n\
                           h2,GPU-C,48,4800,1793613600000\n";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn succeed(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    text(&out.stdout)
}

/// The files in `dir`, by name.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The rows of a Parquet file as CSV lines (header first), each value as
/// arrow displays it.
fn parquet_as_csv(path: &Path) -> String {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("open"))
        .expect("a Parquet file")
        .build()
        .expect("a reader");
    let mut csv = String::new();
    let options = FormatOptions::default();
    for (i, batch) in reader.enumerate() {
        let batch = batch.expect("a batch");
        if i == 0 {
            let names: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
            csv.push_str(&names.join(","));
            csv.push('\n');
        }
        let columns: Vec<ArrayFormatter<'_>> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("a formatter"))
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = columns.iter().map(|c| c.value(row).to_string()).collect();
            csv.push_str(&cells.join(","));
            csv.push('\n');
        }
    }
    csv
}

#[test]
fn each_extension_writes_the_rows_format_csv_prints() {
    let fx = Fixture::new();
    let printed = succeed(fx.apron(&["--format", "csv", "sql", PER_GPU]));
    assert_eq!(printed, PER_GPU_CSV);
    let json = succeed(fx.apron(&["--format", "json", "sql", PER_GPU]));
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).expect("a JSON array");

    let dir = fx.dir.path().join("out");
    std::fs::create_dir(&dir).expect("mkdir");
    for name in ["r.parquet", "r.csv", "r.json", "r.ndjson", "r.jsonl"] {
        let path = dir.join(name);
        let said = succeed(fx.apron(&["sql", PER_GPU, "--out", path.to_str().expect("UTF-8")]));
        assert_eq!(said, format!("wrote 3 rows to {}\n", path.display()));
        let written = match name.rsplit('.').next() {
            Some("parquet") => parquet_as_csv(&path),
            _ => std::fs::read_to_string(&path).expect("read"),
        };
        match name.rsplit('.').next() {
            Some("parquet" | "csv") => assert_eq!(written, PER_GPU_CSV, "{name}"),
            Some("json") => assert_eq!(written, json, "{name}: as --format json prints"),
            _ => {
                let lines: Vec<serde_json::Value> =
                    written.lines().map(|l| serde_json::from_str(l).expect("one object a line")).collect();
                assert_eq!(lines, rows, "{name}");
            }
        }
    }
    // Nothing else is left beside them.
    assert_eq!(names_in(&dir), ["r.csv", "r.json", "r.jsonl", "r.ndjson", "r.parquet"]);

    // A result without rows is a file of its columns.
    let empty = dir.join("empty.csv");
    let said = succeed(fx.apron(&[
        "sql",
        "SELECT host FROM gpu_samples WHERE false",
        "--out",
        empty.to_str().expect("UTF-8"),
    ]));
    assert_eq!(said, format!("wrote 0 rows to {}\n", empty.display()));
    assert_eq!(std::fs::read_to_string(&empty).expect("read"), "host\n");
}

#[test]
fn an_unknown_extension_is_refused_before_anything_is_read() {
    let fx = Fixture::new();
    // No data folder at all: the extension is what is refused.
    let absent = fx.dir.path().join("absent");
    let target = fx.dir.path().join("result.xlsx");
    let out = Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(&absent)
        .args(["sql", "SELECT 1", "--out"])
        .arg(&target)
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(out.stdout, b"");
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: --out {}: unknown extension .xlsx; it takes .parquet, .csv, .json, .ndjson or .jsonl\n",
            target.display()
        )
    );
    assert!(!target.exists());
}

#[test]
fn a_query_failing_midway_leaves_no_file_and_the_old_one_untouched() {
    let fx = Fixture::new();
    let dir = fx.dir.path().join("out");
    std::fs::create_dir(&dir).expect("mkdir");
    let kept = dir.join("kept.parquet");
    std::fs::write(&kept, "an earlier result").expect("write");
    // Batches of 8 192 rows: the first 36 are written before the one
    // holding value 300 000 divides by zero.
    let failing = "SELECT value, 10 / (value - 300000) AS q FROM generate_series(1, 1000000)";
    for name in ["kept.parquet", "new.parquet", "new.csv", "new.json"] {
        let path = dir.join(name);
        let out = fx.apron(&["sql", failing, "--out", path.to_str().expect("UTF-8")]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("error: query failed: ") && stderr.contains("Divide by zero"), "{stderr}");
        assert_eq!(out.stdout, b"", "{name}");
    }
    assert_eq!(std::fs::read_to_string(&kept).expect("read"), "an earlier result");
    assert_eq!(names_in(&dir), ["kept.parquet"], "no new file, no temporary file");
}

#[test]
fn ctrl_c_leaves_no_file() {
    let fx = Fixture::new();
    let dir = fx.dir.path().join("out");
    std::fs::create_dir(&dir).expect("mkdir");
    let path = dir.join("never.parquet");
    // Ten trillion rows: hours of work.
    let child = Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(&fx.data)
        .args(["sql", "SELECT value FROM generate_series(1, 10000000000000)", "--out"])
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    // The temporary file beside the target says the query is under way.
    let started = Instant::now();
    while names_in(&dir).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no temporary file appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    apron_tests::signal(&child, libc::SIGINT);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        format!("error: interrupted (Ctrl-C): {} was not written\n", path.display())
    );
    assert_eq!(names_in(&dir), Vec::<String>::new(), "no file, no temporary file");
}

/// Runs `apron ARGS…` and returns its output and its peak resident memory
/// in bytes (from wait4's rusage: this process alone, not cargo's build).
#[expect(clippy::zombie_processes, reason = "wait4 reaps the child, giving its rusage")]
fn peak_memory(args: &[&str]) -> (Output, u64) {
    let mut child = Command::new(apron_tests::bin("apron"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    let started = Instant::now();
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: zeroed rusage is a valid value for wait4 to fill.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on the pid of a child this test started and has not
        // reaped, with valid pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(rc >= 0, "wait4: {}", std::io::Error::last_os_error());
        if rc == pid {
            break (status, usage);
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            // SAFETY: as above; reaps the killed child.
            unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            panic!("apron did not finish within 300 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |pipe: Option<&mut dyn std::io::Read>| {
        let mut bytes = Vec::new();
        if let Some(pipe) = pipe {
            pipe.read_to_end(&mut bytes).expect("read a pipe");
        }
        bytes
    };
    let stdout = read(child.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let stderr = read(child.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    let status = std::os::unix::process::ExitStatusExt::from_raw(status);
    // ru_maxrss is in KiB on Linux.
    let peak = u64::try_from(usage.ru_maxrss).expect("not negative") * 1024;
    (Output { status, stdout, stderr }, peak)
}

#[test]
fn a_result_larger_than_the_memory_used_is_written_whole() {
    let fx = Fixture::new();
    let path = fx.dir.path().join("big.parquet");
    // Three million rows of an 8-byte number and 200 bytes of text: some
    // 600 MiB of batches if the result were collected before writing.
    let rows: u64 = 3_000_000;
    let result_bytes = rows * (8 + 200);
    let query = format!("SELECT value AS n, repeat('x', 200) AS pad FROM generate_series(1, {rows})");
    let data = fx.data.to_str().expect("UTF-8");
    let (out, peak) = peak_memory(&[
        "--data",
        data,
        "--memory-limit",
        "64M",
        "sql",
        &query,
        "--out",
        path.to_str().expect("UTF-8"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("wrote {rows} rows to {}\n", path.display()));
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("open")).expect("Parquet");
    assert_eq!(reader.metadata().file_metadata().num_rows(), i64::try_from(rows).expect("fits"));
    // Every row is there, in order: the sum of 1..=rows.
    let mut sum = 0_i64;
    let mut count = 0_u64;
    for batch in reader.build().expect("a reader") {
        let batch = batch.expect("a batch");
        let n = batch.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().expect("Int64");
        sum += n.iter().map(|v| v.expect("no null")).sum::<i64>();
        count += batch.num_rows() as u64;
    }
    assert_eq!(count, rows);
    let rows = i64::try_from(rows).expect("fits");
    assert_eq!(sum, rows * (rows + 1) / 2);
    // The process never held the result: its peak memory is well under
    // half of it (about 90 MiB measured; collecting would pass 600 MiB).
    assert!(peak < result_bytes / 2, "peak memory {peak} bytes for a result of {result_bytes} bytes");
}

/// Text a spreadsheet would run as a formula starts with `'` in every CSV
/// apron writes, as in the report's tables: `--format csv`, `sql --out
/// FILE.csv`, and the shell's `.format csv` (the same writer); numbers,
/// negative ones included, and other text are kept.
#[test]
fn formula_cells_are_text_in_every_csv() {
    let fx = Fixture::new();
    let sql = "SELECT * FROM (VALUES \
               (1, '=HYPERLINK(\"http://evil\",\"x\")', -3.5), \
               (2, '+1+2', 0.0), \
               (3, '-2+3+cmd|'' /C calc''!A0', -1.0), \
               (4, '@SUM(A1:A2)', 2.0), \
               (5, '-12.5', 3.0), \
               (6, 'python', 4.0), \
               (7, NULL, 5.0)) AS t(n, comm, x) ORDER BY n";
    let want = "n,comm,x\n\
                1,\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\",-3.5\n\
                2,'+1+2,0.0\n\
                3,'-2+3+cmd|' /C calc'!A0,-1.0\n\
                4,'@SUM(A1:A2),2.0\n\
                5,-12.5,3.0\n\
                6,python,4.0\n\
                7,,5.0\n";
    let printed = succeed(fx.apron(&["--format", "csv", "sql", sql]));
    assert_eq!(printed, want);
    let file = fx.dir.path().join("cells.csv");
    succeed(fx.apron(&["sql", sql, "--out", file.to_str().expect("UTF-8")]));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), want);
    // A column name is a cell too.
    let printed = succeed(fx.apron(&["--format", "csv", "sql", "SELECT 1 AS \"=cmd\", 'a' AS b"]));
    assert_eq!(printed, "'=cmd,b\n1,a\n");
    // JSON is no spreadsheet: the text as it is.
    let json = succeed(fx.apron(&["--format", "json", "sql", "SELECT '=1+1' AS f"]));
    assert_eq!(json, "[{\"f\":\"=1+1\"}]\n");
}
