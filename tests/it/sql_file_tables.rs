//! End to end: `apron sql` reads a Parquet or CSV file the user names as a
//! table (`FROM 'x.parquet'`, `read_parquet('x.parquet')`,
//! `read_csv('x.csv')`), such as one `sql --out` wrote, and stays
//! read-only: no statement writes through a file table, and the file is
//! left as it was.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use apron_tests::bin;

/// A data folder the recorder simulated: 2 GPUs, one day, a sample a minute.
fn simulated(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    apron_tests::simulate_two_gpus_a_day(&data, "2026-11-01");
    data
}

/// `apron --data DATA ARGS…`, run in `cwd`.
fn apron(data: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .args(args)
        .current_dir(cwd)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs")
}

fn succeed(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "apron failed: {stderr}");
    assert_eq!(stderr, "", "apron succeeded but wrote to stderr");
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// One line on stderr, exit code 2, nothing on stdout; the line.
fn fail(out: Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr.trim_end().to_owned()
}

const PER_GPU: &str =
    "SELECT gpu_uuid, count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples GROUP BY gpu_uuid";

#[test]
fn a_file_sql_out_wrote_is_read_back_as_a_table() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = simulated(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let total = succeed(apron(
        &data,
        &work,
        &["--format", "csv", "sql", "SELECT count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples"],
    ));
    println!("the data: {total}");
    for file in ["per_gpu.parquet", "per_gpu.csv"] {
        let wrote = succeed(apron(&data, &work, &["sql", PER_GPU, "--out", file]));
        assert_eq!(wrote, format!("wrote 2 rows to {file}\n"));
    }
    let sums = "SELECT sum(n) AS n, sum(util) AS util FROM";
    let absolute = work.join("per_gpu.parquet");
    for from in [
        "'per_gpu.parquet'".to_owned(),
        format!("'{}'", absolute.display()),
        "'per_gpu.csv'".to_owned(),
        "read_parquet('per_gpu.parquet')".to_owned(),
        "read_csv('per_gpu.csv')".to_owned(),
    ] {
        let got = succeed(apron(&data, &work, &["--format", "csv", "sql", &format!("{sums} {from}")]));
        assert_eq!(got, total, "{from}");
    }
    // A file table joins the recorded ones.
    let joined = succeed(apron(
        &data,
        &work,
        &[
            "--format",
            "csv",
            "sql",
            "SELECT count(*) AS n FROM gpu_samples s JOIN 'per_gpu.parquet' f ON s.gpu_uuid = f.gpu_uuid",
        ],
    ));
    assert_eq!(joined.lines().nth(1), total.lines().nth(1).and_then(|l| l.split(',').next()), "{joined}");
    // A file that is not there is named, with where it was looked for.
    let line = fail(apron(&data, &work, &["sql", "SELECT * FROM 'nowhere.parquet'"]));
    let cwd = work.canonicalize().expect("the folder");
    assert_eq!(
        line,
        format!(
            "error: cannot read nowhere.parquet as a table: no such file (a path is read from {})",
            cwd.display()
        )
    );
    // One whose extension says no format: the functions that name one.
    std::fs::copy(work.join("per_gpu.csv"), work.join("per_gpu.txt")).expect("copy");
    let line = fail(apron(&data, &work, &["sql", "SELECT * FROM 'per_gpu.txt'"]));
    assert!(line.contains("read_csv('per_gpu.txt')"), "{line}");
    let got =
        succeed(apron(&data, &work, &["--format", "csv", "sql", &format!("{sums} read_csv('per_gpu.txt')")]));
    assert_eq!(got, total);
    let line = fail(apron(&data, &work, &["sql", "SELECT * FROM read_parquet('nowhere.parquet')"]));
    assert!(line.contains("nowhere.parquet"), "{line}");
}

#[test]
fn no_statement_writes_through_a_file_table() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = simulated(tmp.path());
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    succeed(apron(&data, &work, &["sql", PER_GPU, "--out", "per_gpu.parquet"]));
    succeed(apron(&data, &work, &["sql", PER_GPU, "--out", "per_gpu.csv"]));
    let before: Vec<(Vec<u8>, std::time::SystemTime)> = ["per_gpu.parquet", "per_gpu.csv"]
        .iter()
        .map(|f| {
            let path = work.join(f);
            (
                std::fs::read(&path).expect("read"),
                std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime"),
            )
        })
        .collect();
    for (sql, what) in [
        ("INSERT INTO 'per_gpu.parquet' SELECT * FROM 'per_gpu.parquet'", "INSERT"),
        ("INSERT INTO 'per_gpu.csv' VALUES ('x', 1, 2)", "INSERT"),
        ("COPY (SELECT * FROM 'per_gpu.csv') TO 'per_gpu.parquet'", "COPY"),
        ("COPY 'per_gpu.parquet' TO 'copy.csv'", "COPY"),
        ("CREATE EXTERNAL TABLE t STORED AS CSV LOCATION 'per_gpu.csv'", "CREATE EXTERNAL TABLE"),
        ("CREATE TABLE t AS SELECT * FROM 'per_gpu.parquet'", "CREATE TABLE"),
        ("DELETE FROM 'per_gpu.parquet'", "DELETE"),
        ("EXPLAIN INSERT INTO 'per_gpu.parquet' SELECT * FROM 'per_gpu.parquet'", "INSERT"),
    ] {
        let line = fail(apron(&data, &work, &["sql", sql]));
        assert_eq!(line, format!("error: apron sql is read-only: {what} is not allowed"), "{sql}");
    }
    let after: Vec<(Vec<u8>, std::time::SystemTime)> = ["per_gpu.parquet", "per_gpu.csv"]
        .iter()
        .map(|f| {
            let path = work.join(f);
            (
                std::fs::read(&path).expect("read"),
                std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime"),
            )
        })
        .collect();
    assert!(before == after, "a file table was written");
    let mut left: Vec<String> = std::fs::read_dir(&work)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["per_gpu.csv", "per_gpu.parquet"], "no file was made");
}
