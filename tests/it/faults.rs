//! End to end: the recorder under faults. A data folder that refuses writes
//! and then takes them again, a second recorder on the same folder, a GPU
//! that disappears mid-run (through the real NVML calls against the fake
//! libnvidia-ml), and wall-clock jumps.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use apron_schemas::{DataLayout, GpuSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::files_under;
use apron_tests::{bin, fake_nvml};
use arrow::array::AsArray;
use arrow::datatypes::TimestampMillisecondType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Every (gpu_uuid, ts) of `gpu_samples`, with how often it occurs.
fn gpu_keys(data: &Path) -> BTreeMap<(String, i64), usize> {
    let mut out = BTreeMap::new();
    for f in files_under(&data.join("gpu_samples")) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&f).expect("open"))
            .expect("a complete parquet file")
            .build()
            .expect("reader");
        for b in reader {
            let b = b.expect("batch");
            let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
            let uuid = b.column_by_name("gpu_uuid").expect("uuid").as_string::<i32>();
            for i in 0..b.num_rows() {
                *out.entry((uuid.value(i).to_owned(), ts.value(i))).or_insert(0) += 1;
            }
        }
    }
    out
}

fn recorder(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin("apron-recorder"));
    cmd.arg("--data").arg(data).args(args).env("APRON_LOG", "info").stdin(Stdio::null());
    cmd
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("the recorder starts")
}

fn stop(child: Child) -> Output {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) on a child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let t0 = Instant::now();
    let mut child = child;
    while child.try_wait().expect("try_wait").is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the recorder did not stop");
        sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// Sets or clears the immutable attribute on everything under `dir`: even
/// root cannot create files in an immutable folder, which is what a
/// read-only or full disk looks like to the recorder.
fn set_immutable(dir: &Path, on: bool) {
    let status = Command::new("chattr")
        .arg("-R")
        .arg(if on { "+i" } else { "-i" })
        .arg(dir)
        .status()
        .expect("chattr (e2fsprogs) runs");
    assert!(
        status.success(),
        "chattr on {} failed: this test needs a filesystem with the immutable flag",
        dir.display()
    );
}

/// Clears the immutable flag even when the test fails, so the temporary
/// folder can be removed.
struct Unfreeze(PathBuf);

impl Drop for Unfreeze {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-R").arg("-i").arg(&self.0).status();
    }
}

#[test]
fn a_data_folder_that_refuses_writes_then_takes_them_loses_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let _guard = Unfreeze(data.clone());
    let child = spawn(recorder(
        &data,
        &[
            "--source",
            "sim",
            "--host",
            "faultnode",
            "--sim-gpus",
            "2",
            "--interval",
            "200ms",
            "--rotate",
            "1s",
        ],
    ));
    // Let it write its first files, so every folder it needs exists.
    sleep(Duration::from_millis(2_500));
    let started = Instant::now();
    set_immutable(&data, true);
    sleep(Duration::from_millis(3_000));
    let refused_for = started.elapsed();
    set_immutable(&data, false);
    // Rotations every second retry the held files.
    sleep(Duration::from_millis(2_500));
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the recorder kept running and stopped cleanly: {log}");
    assert!(log.contains("cannot write"), "the problem is logged: {log}");
    assert!(log.contains("writing works again"), "the recovery is logged: {log}");
    assert!(!log.contains("panicked"), "{log}");

    let keys = gpu_keys(&data);
    assert!(keys.values().all(|&n| n == 1), "no row twice");
    let per_gpu: BTreeMap<&str, Vec<i64>> = keys.keys().fold(BTreeMap::new(), |mut m, (g, ts)| {
        m.entry(g.as_str()).or_insert_with(Vec::new).push(*ts);
        m
    });
    assert_eq!(per_gpu.len(), 2);
    // Ticks the recorder could not take in time (a starved CPU) it skips
    // and counts, and says so as it stops (`missed=N`): those are not rows
    // lost.
    let missed: i64 = log
        .lines()
        .find(|l| l.contains("recorder stopped"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("missed=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the recorder says how many ticks it missed: {log}"));
    for (gpu, ts) in per_gpu {
        // One run of 200 ms ticks across the refused stretch, broken only
        // where the recorder missed a tick: nothing sampled while the disk
        // refused was lost.
        assert!(
            ts.windows(2).all(|w| w[1] - w[0] > 0 && (w[1] - w[0]) % 200 == 0),
            "{gpu}: off the grid: {ts:?}"
        );
        let skipped: i64 = ts.windows(2).map(|w| (w[1] - w[0]) / 200 - 1).sum();
        assert!(skipped <= missed, "{gpu}: {skipped} ticks missing, the recorder missed {missed}: {ts:?}");
        let span_ms = ts[ts.len() - 1] - ts[0];
        assert!(span_ms as u128 > refused_for.as_millis() + 3_000, "{gpu}: {span_ms} ms recorded");
    }
    assert!(
        !files_under(&data.join("wal")).iter().any(|f| f.extension().is_some_and(|e| e == "wal")),
        "every segment was written to Parquet and removed"
    );
}

#[test]
fn a_second_recorder_on_the_same_folder_and_host_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let args = ["--source", "sim", "--host", "locknode", "--sim-gpus", "1", "--interval", "200ms"];
    let first = spawn(recorder(&data, &args));
    sleep(Duration::from_millis(1_500));
    // Refused, not left waiting for the lock: a second recorder that
    // waited would be killed at the limit and fail the test.
    let second = apron_tests::wait_with_timeout(spawn(recorder(&data, &args)), Duration::from_secs(60));
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(err.contains("already recording host locknode"), "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "names the holder: {err}");
    let out = stop(first);
    assert!(out.status.success());
    // Another host may record into the same folder.
    let other = spawn(recorder(&data, &["--source", "sim", "--host", "othernode", "--sim-gpus", "1"]));
    sleep(Duration::from_millis(1_500));
    assert!(stop(other).status.success());
}

#[test]
fn a_gpu_that_disappears_leaves_the_others_recording() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut cmd = recorder(&data, &["--source", "nvml", "--host", "nvmlnode", "--interval", "200ms"]);
    cmd.arg("--nvml-lib").arg(fake_nvml()).env(
        "FAKE_NVML_GPUS",
        "uuid=GPU-keeps-going,name=NVIDIA H100 80GB HBM3,util=40;\
         uuid=GPU-falls-off,name=NVIDIA H100 80GB HBM3,util=60,fail_after=5",
    );
    let child = spawn(cmd);
    sleep(Duration::from_millis(3_000));
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("cannot sample GPU"), "{log}");
    assert!(log.contains("GPU-falls-off"), "the lost GPU is named: {log}");
    let keys = gpu_keys(&data);
    let count = |g: &str| keys.keys().filter(|(u, _)| u == g).count();
    assert_eq!(count("GPU-falls-off"), 5, "recorded until it fell off");
    assert!(count("GPU-keeps-going") >= 12, "the other GPU kept recording: {}", count("GPU-keeps-going"));
}

fn tick(ts: i64) -> Tick {
    let gpu = |uuid: &str| GpuSample {
        ts,
        gpu_uuid: uuid.into(),
        interval_ms: 1_000,
        gpu_util_pct: Some(50),
        ..Default::default()
    };
    Tick { gpus: vec![gpu("GPU-a"), gpu("GPU-b")], ..Default::default() }
}

#[test]
fn wall_clock_jumps_neither_overwrite_files_nor_lose_rows() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    let mut w = RollingWriter::new(layout, "clocknode", Duration::from_secs(600))
        .expect("host")
        .with_wal(Duration::from_secs(1))
        .expect("wal");
    let t0 = 1_796_040_000_000; // 2026-11-30T12:00:00Z
    // Ten ticks, then the clock steps back an hour (NTP fixing a bad clock),
    // ten ticks, back again onto the very same seconds as the first run,
    // then forward a day and a half.
    let mut pushed = Vec::new();
    for base in [t0, t0 - 3_600_000, t0, t0 + 36 * 3_600_000] {
        for s in 0..10 {
            let ts = base + s * 1_000;
            w.push(ts, &tick(ts)).expect("push");
            pushed.push(ts);
        }
    }
    w.close().expect("close");
    let keys = gpu_keys(tmp.path());
    // Every row pushed is there: the rows of the repeated seconds live in
    // their own files, none replaced another.
    let total: usize = keys.values().sum();
    assert_eq!(total, pushed.len() * 2);
    let repeated: BTreeSet<_> = keys.iter().filter(|(_, n)| **n == 2).map(|((_, ts), _)| *ts).collect();
    assert_eq!(repeated.len(), 10, "the ten seconds the clock passed twice are recorded twice");
    let raw_files = files_under(&tmp.path().join("gpu_samples"));
    assert_eq!(raw_files.len(), 4, "{raw_files:?}");
    let dates: BTreeSet<_> = raw_files
        .iter()
        .filter_map(|f| f.parent()?.parent()?.file_name()?.to_str().map(str::to_owned))
        .collect();
    assert_eq!(dates, BTreeSet::from(["date=2026-11-30".to_owned(), "date=2026-12-02".to_owned()]));
}

#[test]
fn queries_running_during_compaction_see_every_row_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // Hour-long files: 24 per day, table and host, for compaction to merge.
    let sim = Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(&data)
        .args([
            "simulate",
            "--gpus",
            "8",
            "--days",
            "3",
            "--start",
            "2026-10-01",
            "--interval",
            "10s",
            "--rotate",
            "1h",
        ])
        .output()
        .expect("simulate runs");
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    // A query that reads every row (a sum), not one that footers answer.
    let count = || {
        Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .args(["--format", "csv", "sql", "SELECT count(*) AS n, sum(gpu_util_pct) AS s FROM gpu_samples"])
            .output()
            .expect("apron runs")
    };
    let before = count();
    assert!(before.status.success());
    let expected = String::from_utf8_lossy(&before.stdout).trim().to_owned();
    assert!(expected.starts_with(&format!("n,s\n{},", 8 * 3 * 8_640)), "{expected}");
    let compact = Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(&data)
        .args(["compact", "--no-retention"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("compact starts");
    let mut during = 0;
    let mut compact = compact;
    while compact.try_wait().expect("try_wait").is_none() {
        let out = count();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "a query during compaction failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(text.trim(), expected, "a query during compaction saw a row twice or missed one");
        during += 1;
    }
    assert!(compact.wait().expect("wait").success());
    let files = files_under(&data.join("gpu_samples"));
    assert_eq!(files.len(), 3, "one file per day after compaction: {files:?}");
    let out = count();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);
    println!("{during} queries ran during compaction");
}

/// The number after `key=` in `line` (a structured log field).
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[test]
fn a_disk_that_stays_full_is_reported_exactly() {
    const GPUS: u64 = 2;
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let _guard = Unfreeze(data.clone());
    let args = [
        "--source",
        "sim",
        "--host",
        "fullnode",
        "--sim-gpus",
        "2",
        "--interval",
        "200ms",
        "--rotate",
        "1s",
        "--buffer-rows",
        "30",
    ];
    let child = spawn(recorder(&data, &args));
    sleep(Duration::from_millis(2_500));
    set_immutable(&data, true);
    // Long enough for rotations to fail, retries to be skipped (a tick
    // that retries nothing must not say the disk works again), and the
    // buffer to overflow; then stop while the disk still refuses.
    sleep(Duration::from_millis(5_000));
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "the last rows could not be written: {log}");
    assert!(log.contains("cannot write"), "{log}");
    assert!(!log.contains("writing works again"), "the disk never worked again: {log}");
    assert!(!log.contains("panicked"), "{log}");
    let last = log
        .lines()
        .find(|l| l.contains("cannot write the last rows;"))
        .unwrap_or_else(|| panic!("the end says what waits and what is lost: {log}"));
    let ticks = field(last, "ticks").expect("ticks");
    let final_lost = field(last, "lost_ticks").expect("lost_ticks");
    let in_wal = field(last, "in_wal_ticks").expect("in_wal_ticks");
    let dropped: Vec<&str> =
        log.lines().filter(|l| l.contains("dropped the oldest rows from memory")).collect();
    assert!(!dropped.is_empty(), "30 rows of buffer overflowed: {log}");
    let dropped_lost: u64 = dropped.iter().map(|l| field(l, "lost_ticks").expect("lost_ticks")).sum();
    let dropped_lost_rows: u64 = dropped.iter().map(|l| field(l, "lost_rows").expect("lost_rows")).sum();
    assert_eq!(field(last, "dropped_lost_rows"), Some(dropped_lost_rows), "{last}");
    assert!(final_lost + dropped_lost > 0, "an immutable WAL keeps nothing new: {log}");
    assert!(in_wal + final_lost <= ticks);

    // The disk works again: a new start recovers what the WAL held.
    set_immutable(&data, false);
    let restarted_ms = chrono::Utc::now().timestamp_millis();
    let child = spawn(recorder(&data, &args));
    sleep(Duration::from_millis(1_500));
    let out = stop(child);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Every tick of the first run is in Parquet but the lost ones, once.
    let keys = gpu_keys(&data);
    assert!(keys.values().all(|&n| n == 1), "no row twice");
    let first_run = keys.keys().filter(|(_, ts)| *ts < restarted_ms).count() as u64;
    assert_eq!(
        first_run,
        (ticks - final_lost - dropped_lost) * GPUS,
        "ticks {ticks}, lost at the end {final_lost}, lost from the buffer {dropped_lost}:\n{log}"
    );
}

#[test]
fn a_symlinked_lock_file_is_refused_and_what_it_points_to_untouched() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let layout = DataLayout::new(&data);
    let lock = layout.recorder_lock_path("symnode");
    std::fs::create_dir_all(lock.parent().expect("wal folder")).expect("mkdir");
    let outside = tmp.path().join("precious.conf");
    std::fs::write(&outside, b"keep me\n").expect("write");
    std::os::unix::fs::symlink(&outside, &lock).expect("symlink");
    let out =
        recorder(&data, &["--source", "sim", "--host", "symnode", "--sim-gpus", "1"]).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(&lock.display().to_string()) && lines[0].contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&outside).expect("read"), b"keep me\n", "the file it points to is untouched");
    assert!(std::fs::symlink_metadata(&lock).expect("stat").file_type().is_symlink());
}

#[test]
fn files_are_0640_and_folders_0750() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let mut cmd = recorder(
        &data,
        &[
            "--source",
            "sim",
            "--host",
            "modenode",
            "--sim-gpus",
            "2",
            "--interval",
            "200ms",
            "--rotate",
            "1s",
        ],
    );
    // The default umask of a login shell and of systemd services.
    // SAFETY: umask(2) is async-signal-safe and only sets the child's mask.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        });
    }
    let child = spawn(cmd);
    // Until the GPU tables have files (on a busy machine the first ticks
    // come late). The process tables need not appear at all: the simulated
    // host is quiet at night and on weekends, so their folders are checked
    // when they are there.
    let gpu_files =
        |data: &Path| ["gpu_samples", "gpu_minutes"].iter().all(|t| !files_under(&data.join(t)).is_empty());
    let count = |data: &Path| {
        let (mut files, mut dirs, mut stack) = (0, 0, vec![data.to_path_buf()]);
        while let Some(d) = stack.pop() {
            dirs += 1;
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(e.path()),
                    _ => files += 1,
                }
            }
        }
        (files, dirs)
    };
    let t0 = std::time::Instant::now();
    while !gpu_files(&data) {
        assert!(t0.elapsed() < Duration::from_secs(60), "the recorder wrote too little: {:?}", count(&data));
        sleep(Duration::from_millis(200));
    }
    sleep(Duration::from_millis(1_200));
    let out = stop(child);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut stack = vec![data.clone()];
    let (mut files, mut dirs) = (0, 0);
    while let Some(d) = stack.pop() {
        let mode = std::fs::metadata(&d).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o750, "{}: {mode:o}", d.display());
        dirs += 1;
        for e in std::fs::read_dir(&d).expect("list") {
            let p = e.expect("entry").path();
            let meta = std::fs::symlink_metadata(&p).expect("stat");
            if meta.is_dir() {
                stack.push(p);
            } else {
                let mode = meta.permissions().mode() & 0o777;
                assert_eq!(mode, 0o640, "{}: {mode:o}", p.display());
                files += 1;
            }
        }
    }
    // At least the data folder, the WAL's two and the GPU tables' three each.
    assert!(files >= 3 && dirs >= 9, "{files} files, {dirs} folders checked");
}

#[test]
fn zero_simulated_gpus_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out =
        recorder(&tmp.path().join("data"), &["--source", "sim", "--sim-gpus", "0"]).output().expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--sim-gpus") && err.contains("at least 1"), "{err}");
    assert!(!tmp.path().join("data").exists(), "nothing recorded, nothing created");
}

#[test]
fn a_stop_while_only_parquet_is_refused_leaves_every_row_in_the_wal() {
    const GPUS: u64 = 2;
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let table = data.join("gpu_samples");
    let _guard = Unfreeze(table.clone());
    let args =
        ["--source", "sim", "--host", "walnode", "--sim-gpus", "2", "--interval", "200ms", "--rotate", "1s"];
    let child = spawn(recorder(&data, &args));
    sleep(Duration::from_millis(2_500));
    // Parquet of gpu_samples refused; the WAL still takes every tick.
    set_immutable(&table, true);
    sleep(Duration::from_millis(3_000));
    let out = stop(child);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{log}");
    let last =
        log.lines().find(|l| l.contains("cannot write the last rows;")).unwrap_or_else(|| panic!("{log}"));
    let ticks = field(last, "ticks").expect("ticks");
    assert_eq!((field(last, "lost_rows"), field(last, "lost_ticks")), (Some(0), Some(0)), "{last}");
    assert!(field(last, "in_wal_ticks").is_some_and(|n| n >= 10), "3 s of 200 ms ticks wait: {last}");

    set_immutable(&table, false);
    let restarted_ms = chrono::Utc::now().timestamp_millis();
    let child = spawn(recorder(&data, &args));
    sleep(Duration::from_millis(1_500));
    assert!(stop(child).status.success());
    let keys = gpu_keys(&data);
    assert!(keys.values().all(|&n| n == 1), "no row twice");
    let first_run = keys.keys().filter(|(_, ts)| *ts < restarted_ms).count() as u64;
    assert_eq!(first_run, ticks * GPUS, "every tick of the first run reached Parquet:\n{log}");
}
