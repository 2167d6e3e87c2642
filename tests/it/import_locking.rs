//! End to end: `apron import` against other writers of the same data
//! folder, with real processes and real signals. Sixteen imports into one
//! host at once; an import killed with SIGKILL half-way (its files staged,
//! then half moved into place) and run again; an import into a host a live
//! `apron-recorder` holds. Afterwards the figures are those the input gives
//! by hand: one import's, never two, never half.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::{bin, files_under, signal, wait_stopped};
use serde_json::Value;

const CONFIG: &str = r#"currency = "USD"

[[gpu_cost]]
model = "*"
purchase_price = 0
lifetime_years = 1
ops_per_gpu_hour = 3.6
"#;

/// The day every log of these tests is of (UTC).
const DAY: [&str; 4] = ["--from", "2026-11-02", "--to", "2026-11-03"];

/// A data folder, a config and the logs, in a temporary folder.
struct Case {
    dir: tempfile::TempDir,
    data: PathBuf,
    config: PathBuf,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        let config = dir.path().join("apron.toml");
        std::fs::write(&config, CONFIG).expect("write apron.toml");
        Case { dir, data, config }
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write a log");
        path
    }

    /// `apron --data DATA import nvidia-smi FILES… --host HOST`, not run.
    fn import(&self, files: &[&Path], host: &str) -> Command {
        let mut cmd = Command::new(bin("apron"));
        cmd.arg("--data").arg(&self.data).args(["import", "nvidia-smi"]);
        cmd.args(files).args(["--host", host]).stdin(Stdio::null());
        cmd
    }

    /// `apron --data DATA --config CONFIG --format json ARGS…`: its rows.
    fn json(&self, args: &[&str]) -> Vec<Value> {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&self.data)
            .arg("--config")
            .arg(&self.config)
            .args(["--format", "json"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        assert!(out.status.success(), "apron {args:?}: {}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("a JSON array")
    }

    /// The one number `SELECT …` answers.
    fn number(&self, sql: &str) -> f64 {
        let rows = self.json(&["sql", sql]);
        let row = rows.first().and_then(Value::as_object).expect("one row");
        row.values().next().and_then(Value::as_f64).unwrap_or(0.0)
    }

    /// The Parquet files a reader sees (the imports' staging folders are
    /// hidden, and left out).
    fn visible_files(&self) -> Vec<PathBuf> {
        files_under(&self.data)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .filter(|p| {
                let relative = p.strip_prefix(&self.data).expect("under the data folder");
                !relative.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
            })
            .collect()
    }

    /// The Parquet files in imports' staging folders.
    fn staged_files(&self) -> Vec<PathBuf> {
        files_under(&self.data.join(".import"))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect()
    }
}

/// The rows of GPU `uuid` in the `gpu_samples` file `path`.
fn rows_of_gpu(path: &Path, uuid: &str) -> usize {
    use arrow::array::AsArray;
    let file = std::fs::File::open(path).expect("open");
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("a complete Parquet file")
        .build()
        .expect("a reader");
    reader
        .map(|b| {
            let b = b.expect("a batch");
            let uuids = b.column_by_name("gpu_uuid").expect("gpu_uuid").as_string::<i32>();
            uuids.iter().filter(|u| *u == Some(uuid)).count()
        })
        .sum()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const GPU_HEADER: &str = "timestamp, index, name, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n";

/// An nvidia-smi GPU log: `rows` samples every 10 s of the GPUs `indexes`
/// from `start` (`HH:MM` UTC on 2026-11-02), each at 40 % and 200 W.
fn gpu_log(indexes: std::ops::Range<u32>, start: &str, rows: u32) -> String {
    let (h, m): (u32, u32) = {
        let (h, m) = start.split_once(':').expect("HH:MM");
        (h.parse().expect("hour"), m.parse().expect("minute"))
    };
    let mut csv = String::from(GPU_HEADER);
    for k in 0..rows {
        let secs = h * 3_600 + m * 60 + k * 10;
        let ts = format!("2026/11/02 {:02}:{:02}:{:02}.000", secs / 3_600, secs / 60 % 60, secs % 60);
        for i in indexes.clone() {
            csv.push_str(&format!(
                "{ts}, {i}, NVIDIA H100 80GB HBM3, GPU-{i:08}-0000-0000-0000-000000000000, 40 %, 1024 MiB, 81559 MiB, 200.00 W\n"
            ));
        }
    }
    csv
}

/// The compute-apps log of one process (pid 4242) on GPU 0 over the
/// same samples as [`gpu_log`] from 09:00, 360 rows.
fn apps_log() -> String {
    let mut csv = String::from("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n");
    for k in 0..360 {
        let ts = format!("2026/11/02 09:{:02}:{:02}.000", k / 6, (k % 6) * 10);
        csv.push_str(&format!(
            "{ts}, GPU-00000000-0000-0000-0000-000000000000, 4242, /usr/bin/python3, 512 MiB\n"
        ));
    }
    csv
}

/// The figures of the data folder that must equal the input's: rows of
/// each raw table, GPU-hours of the raw rows, of the minute tables and of
/// `apron spend` (every team).
#[derive(Debug, PartialEq)]
struct Figures {
    gpu_rows: f64,
    proc_rows: f64,
    raw_gpu_hours: f64,
    minute_gpu_hours: f64,
    spend_gpu_hours: f64,
}

fn figures(case: &Case) -> Figures {
    let mut spend = vec!["spend"];
    spend.extend_from_slice(&DAY);
    let spend_gpu_hours: f64 = case.json(&spend).iter().filter_map(|r| r["gpu_hours"].as_f64()).sum();
    Figures {
        gpu_rows: case.number("SELECT count(*) FROM gpu_samples"),
        proc_rows: case.number("SELECT count(*) FROM proc_samples"),
        raw_gpu_hours: case.number("SELECT sum(interval_ms) / 3600000.0 FROM gpu_samples"),
        minute_gpu_hours: case.number("SELECT sum(seconds) / 3600.0 FROM gpu_minutes"),
        spend_gpu_hours: (spend_gpu_hours * 100.0).round() / 100.0,
    }
}

/// What one error run may print: one line, no panic.
fn assert_clean_failure(what: &str, out: &Output) {
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.starts_with("apron import: ")).collect();
    assert_eq!(lines.len(), 1, "{what}: one error line: {err}");
    assert!(lines[0].starts_with("error: ") && !err.contains("panicked"), "{what}: {err}");
}

/// Sixteen imports at once into one host, each of the same shared logs
/// (4 GPUs and a process over an hour) and a log of its own (one GPU of its
/// own over half an hour). By hand: 4 × 360 + 16 × 180 = 4,320 GPU rows of
/// 10 s, 12 GPU-hours; 360 process rows. Every run succeeds or fails with
/// one line, and the data folder holds each row once, its minutes too.
#[test]
fn sixteen_imports_at_once_write_each_row_once() {
    let case = Case::new();
    let shared = case.file("gpus.csv", &gpu_log(0..4, "09:00", 360));
    let apps = case.file("apps.csv", &apps_log());
    let own: Vec<PathBuf> = (0..16)
        .map(|k| case.file(&format!("own{k}.csv"), &gpu_log(100 + k..101 + k, "10:00", 180)))
        .collect();
    let t0 = Instant::now();
    let runs: Vec<Child> = own
        .iter()
        .map(|own| {
            case.import(&[&shared, &apps, own], "node")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("apron starts")
        })
        .collect();
    let outs: Vec<Output> = runs.into_iter().map(|c| c.wait_with_output().expect("apron ends")).collect();
    let failed: Vec<&Output> = outs.iter().filter(|o| !o.status.success()).collect();
    for (k, out) in outs.iter().enumerate() {
        if !out.status.success() {
            assert_clean_failure(&format!("run {k}"), out);
        }
    }
    println!(
        "16 concurrent imports: {} succeeded, {} failed cleanly, {:.1} s",
        outs.len() - failed.len(),
        failed.len(),
        t0.elapsed().as_secs_f64()
    );
    let written: u64 = outs
        .iter()
        .filter(|o| o.status.success())
        .map(|o| {
            let line = text(&o.stdout);
            apron_tests::number_after(&line, "host node:").expect("rows written") as u64
        })
        .sum();
    // A run that failed wrote nothing: import it again.
    for (k, out) in outs.iter().enumerate() {
        if !out.status.success() {
            let again = case.import(&[&shared, &apps, &own[k]], "node").output().expect("apron runs");
            assert!(again.status.success(), "run {k} again: {}", text(&again.stderr));
        }
    }
    let want = Figures {
        gpu_rows: 4_320.0,
        proc_rows: 360.0,
        raw_gpu_hours: 12.0,
        minute_gpu_hours: 12.0,
        spend_gpu_hours: 12.0,
    };
    assert_eq!(figures(&case), want);
    if failed.is_empty() {
        assert_eq!(written, 1_440 + 16 * 180, "the GPU rows written, each once");
    }
    assert!(case.staged_files().is_empty(), "no staging folder left: {:?}", case.staged_files());
    let leftovers: Vec<PathBuf> = files_under(&case.data)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().ends_with(".tmp")))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file left: {leftovers:?}");
}

/// Runs the import of `files` stopping at the pause point `point`, kills it
/// there with SIGKILL, and returns its stderr.
fn kill_at(case: &Case, files: &[&Path], point: &str) -> String {
    let child = case
        .import(files, "node")
        .env(apron_schemas::test_pause::PAUSE_ENV, point)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    wait_stopped(child.id(), Duration::from_secs(120));
    signal(&child, libc::SIGKILL);
    let out = child.wait_with_output().expect("reaped");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(libc::SIGKILL),
        "killed by the signal"
    );
    text(&out.stderr)
}

/// An import killed with SIGKILL once its files are staged leaves none in
/// the data folder; one killed after its first file moved into place is
/// finished by the next import; and that next import gives the input's
/// figures: 4 GPUs × 360 rows of 10 s (4 GPU-hours) and 360 process rows.
#[test]
fn an_import_killed_half_way_leaves_nothing_half_written() {
    let case = Case::new();
    let gpus = case.file("gpus.csv", &gpu_log(0..4, "09:00", 360));
    let apps = case.file("apps.csv", &apps_log());
    let files = [gpus.as_path(), apps.as_path()];

    kill_at(&case, &files, apron_schemas::test_pause::points::IMPORT_STAGED);
    assert!(!case.staged_files().is_empty(), "the import had written its files when it was killed");
    assert_eq!(case.visible_files(), Vec::<PathBuf>::new(), "none of them is in the data folder");

    let stderr = kill_at(&case, &files, apron_schemas::test_pause::points::IMPORT_COMMITTING);
    assert!(stderr.contains("removed the files of an import that did not finish"), "{stderr}");
    let visible = case.visible_files();
    assert_eq!(visible.len(), 1, "killed after moving one file of four: {visible:?}");
    println!(
        "killed mid-commit: {} of 4 files in place, {} staged",
        visible.len(),
        case.staged_files().len()
    );

    let out = case.import(&files, "node").output().expect("apron runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("finished an import that stopped while moving its 4 files into place"),
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("0 gpu_samples rows, 0 proc_samples rows written, 1800 rows skipped"),
        "{stdout}"
    );
    let want = Figures {
        gpu_rows: 1_440.0,
        proc_rows: 360.0,
        raw_gpu_hours: 4.0,
        minute_gpu_hours: 4.0,
        spend_gpu_hours: 4.0,
    };
    assert_eq!(figures(&case), want);
    assert_eq!(case.visible_files().len(), 4, "one file per table");
    assert!(case.staged_files().is_empty());
}

/// An import into the host a live recorder writes is refused in one line
/// naming the host and the recorder's pid, and writes nothing; another host
/// of the same data folder imports meanwhile; once the recorder has
/// stopped, the host imports.
#[test]
fn an_import_into_a_host_a_live_recorder_holds_is_refused() {
    let case = Case::new();
    let gpus = case.file("gpus.csv", &gpu_log(0..1, "09:00", 60));
    let recorder = Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(&case.data)
        .args(["--source", "sim", "--host", "live", "--sim-gpus", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the recorder starts");
    let lock = case.data.join("wal/host=live/LOCK");
    let t0 = Instant::now();
    while std::fs::read_to_string(&lock).map(|s| s.trim().to_owned()).ok() != Some(recorder.id().to_string())
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "the recorder took its lock");
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = case.import(&[&gpus], "live").output().expect("apron runs");
    assert_eq!(out.status.code(), Some(2), "refused: {}", text(&out.stderr));
    assert_clean_failure("import into a recorded host", &out);
    let err = text(&out.stderr);
    assert!(err.contains("host live") && err.contains(&format!("pid {}", recorder.id())), "{err}");
    let imported = |case: &Case| {
        case.visible_files()
            .iter()
            .filter(|p| p.starts_with(case.data.join("gpu_samples")))
            .map(|p| rows_of_gpu(p, "GPU-00000000-0000-0000-0000-000000000000"))
            .sum::<usize>()
    };
    assert_eq!(imported(&case), 0, "nothing of the log was written");

    let other = case.import(&[&gpus], "other").output().expect("apron runs");
    assert!(other.status.success(), "another host imports meanwhile: {}", text(&other.stderr));

    signal(&recorder, libc::SIGTERM);
    let stopped = apron_tests::wait_with_timeout(recorder, Duration::from_secs(60));
    assert!(stopped.status.success(), "the recorder stopped cleanly");
    let after = case.import(&[&gpus], "live").output().expect("apron runs");
    assert!(after.status.success(), "once the recorder stopped: {}", text(&after.stderr));
    assert_eq!(imported(&case), 120, "60 rows into each of two hosts");
}
