//! Crash safety end to end: a real recorder process (simulated source, real
//! time) killed with SIGKILL at random moments and restarted on the same
//! data folder loses no sample taken more than a second before each kill,
//! writes none twice, and leaves nothing partial behind; killed just before
//! a closed file's Parquet is written, it keeps the tick that closed the
//! file; a torn WAL segment is recovered up to its last whole tick, and
//! recovering it again writes nothing new; a segment damaged in the middle
//! loses only the damaged frame and is quarantined.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apron_schemas::{DataLayout, Table};
use apron_store::wal::format::{SegmentFile, host_segments, read_segment};
use apron_tests::bin;
use apron_tests::files_under;
use apron_tests::{signal, wait_stopped, wait_with_timeout};
use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::TimestampMillisecondType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const HOST: &str = "crashnode";
const GPUS: usize = 3;
const INTERVAL_MS: i64 = 200;

fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let file = File::open(path).expect("open parquet file");
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap_or_else(|e| panic!("{} is not a complete parquet file: {e}", path.display()))
        .build()
        .expect("reader")
        .map(|b| b.expect("batch"))
        .collect()
}

/// (gpu_uuid → every tick time, sorted, duplicates kept) over every
/// `gpu_samples` file.
fn gpu_ticks(data: &Path) -> BTreeMap<String, Vec<i64>> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for f in files_under(&data.join("gpu_samples")) {
        if f.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
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

/// The test's own clock, ms since the epoch: the same system clock the
/// recorder snaps its ticks to.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as i64
}

fn start_recorder(data: &Path, log: &Path, extra: &[&str]) -> Child {
    start_recorder_with(data, log, extra, &[])
}

/// [`start_recorder`] with environment variables (a pause point).
fn start_recorder_with(data: &Path, log: &Path, extra: &[&str], env: &[(&str, &str)]) -> Child {
    let log = File::create(log).expect("log file");
    Command::new(bin("apron-recorder"))
        .args([
            "--source",
            "sim",
            "--host",
            HOST,
            "--sim-gpus",
            &GPUS.to_string(),
            "--interval",
            "200ms",
            "--data",
        ])
        .arg(data)
        .args(extra)
        .env("APRON_LOG", "info")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the recorder starts")
}

/// Waits until the recorder started at `spawned_ms` is recording: a WAL
/// segment of a file that started after `spawned_ms` exists and holds a
/// whole tick. Returns the test's clock then; every tick from then on was
/// taken by this run.
fn wait_until_recording(data: &Path, spawned_ms: i64, child: &mut Child) -> i64 {
    let layout = DataLayout::new(data);
    let t0 = Instant::now();
    loop {
        let segs = host_segments(&layout, HOST).expect("list the WAL");
        let live = segs
            .iter()
            .filter(|s| s.start_ms >= spawned_ms)
            .any(|s| read_segment(&s.path).is_ok_and(|r| r.ticks >= 1));
        if live {
            return now_ms();
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the recorder exited before recording: {status}");
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no WAL segment after 30 s");
        sleep(Duration::from_millis(10));
    }
}

/// A small deterministic generator (no dependency): the kill moments.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// One recorder run as the test saw it, on its own clock.
#[derive(Debug)]
struct Run {
    /// Just before the process was spawned.
    spawned_ms: i64,
    /// When its WAL showed it recording (see [`wait_until_recording`]).
    recording_ms: i64,
    /// Just before the signal was sent.
    stopped_ms: i64,
    killed: bool,
}

#[test]
fn sigkill_at_random_moments_loses_at_most_the_last_second_and_duplicates_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let seed = std::env::var("APRON_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_nanos() as u64
    });
    eprintln!("kill moments from seed {seed} (APRON_TEST_SEED={seed} repeats them)");
    let mut rng = Lcg(seed);
    let mut runs = Vec::new();
    let mut logs = Vec::new();

    // Four runs killed 1.5–3.5 s after they start recording (files rotate
    // every 2 s, so kills also land around closes: mid-write, between a
    // rename and the segment's deletion), then one stopped with SIGTERM.
    for i in 0..5 {
        let killed = i < 4;
        let log = tmp.path().join(format!("run{i}.log"));
        let spawned_ms = now_ms();
        let mut child = start_recorder(&data, &log, &["--rotate", "2s"]);
        let recording_ms = wait_until_recording(&data, spawned_ms, &mut child);
        sleep(Duration::from_millis(1_500 + rng.below(2_000)));
        let stopped_ms = now_ms();
        signal(&child, if killed { libc::SIGKILL } else { libc::SIGTERM });
        let out = wait_with_timeout(child, Duration::from_secs(20));
        if killed {
            assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(libc::SIGKILL));
            // What the kill left: the open file's segment, at least.
            let left = host_segments(&DataLayout::new(&data), HOST).expect("list the WAL");
            assert!(!left.is_empty(), "run {i}: a killed recorder leaves its open file's segment");
        } else {
            let log = fs::read_to_string(&log).expect("log");
            assert!(out.status.success(), "exit {:?}: {log}", out.status);
        }
        runs.push(Run { spawned_ms, recording_ms, stopped_ms, killed });
        logs.push(log);
    }
    let logs_text =
        || logs.iter().map(|l| fs::read_to_string(l).unwrap_or_default()).collect::<Vec<_>>().join("\n---\n");
    eprintln!("runs: {runs:#?}");

    // Expected, from the test's clock alone:
    // - every grid tick from the moment a run was seen recording up to 1 s
    //   before its SIGKILL (the durability promise), or up to 2 intervals
    //   before its SIGTERM (a clean stop writes all it sampled; one interval
    //   for the tick being taken, one for scheduling), must be there;
    // - no tick may lie outside a run (before its spawn, after its stop: a
    //   tick at t is taken at or after t on the same clock), with 50 ms for
    //   the time between reading the clock and sending the signal.
    let mut required = BTreeSet::new();
    for r in &runs {
        let last = if r.killed { r.stopped_ms - 1_000 } else { r.stopped_ms - 2 * INTERVAL_MS };
        let mut t = r.recording_ms.div_euclid(INTERVAL_MS) * INTERVAL_MS + INTERVAL_MS;
        while t <= last {
            required.insert(t);
            t += INTERVAL_MS;
        }
    }
    assert!(
        required.len() >= 8,
        "{} required ticks: the runs were too short to test anything",
        required.len()
    );
    let possible = |t: i64| runs.iter().any(|r| t >= r.spawned_ms && t <= r.stopped_ms + 50);

    let ticks = gpu_ticks(&data);
    assert_eq!(ticks.len(), GPUS, "every simulated GPU: {:?}", ticks.keys());
    for (gpu, ts) in &ticks {
        let dups: Vec<_> = ts.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        assert!(dups.is_empty(), "{gpu}: ticks recorded twice: {dups:?}\n{}", logs_text());
        assert!(ts.iter().all(|t| t % INTERVAL_MS == 0), "{gpu}: a tick off the 200 ms grid");
        let strays: Vec<_> = ts.iter().filter(|&&t| !possible(t)).collect();
        assert!(strays.is_empty(), "{gpu}: ticks outside every run: {strays:?}");
        let have: BTreeSet<i64> = ts.iter().copied().collect();
        let missing: Vec<_> = required.difference(&have).collect();
        assert!(
            missing.is_empty(),
            "{gpu}: {} of {} ticks lost: {missing:?}\n{}",
            missing.len(),
            required.len(),
            logs_text()
        );
    }

    // Nothing partial or left over after the clean stop: every file of a
    // table is a complete Parquet file under its final name, and the WAL is
    // empty. (Other files of the data folder, such as locks, are not rows.)
    let mut files: Vec<PathBuf> = Table::ALL.iter().flat_map(|t| files_under(&data.join(t.name()))).collect();
    // The WAL folder holds the recorder's lock file besides segments.
    files.extend(files_under(&data.join("wal")).into_iter().filter(|f| !f.ends_with("LOCK")));
    let mut parquet = 0;
    for f in &files {
        let name = f.file_name().and_then(|n| n.to_str()).expect("utf-8 name");
        assert!(!name.starts_with('.'), "temporary file left: {}", f.display());
        assert!(!name.ends_with(".wal"), "WAL segment left after a clean stop: {}", f.display());
        assert!(name.ends_with(".parquet"), "unexpected file {}", f.display());
        read_batches(f);
        parquet += 1;
    }
    assert!(parquet >= 10, "{parquet} files");
    // Each restart after a kill turned the segments it found into Parquet.
    for (i, log) in logs.iter().enumerate().skip(1) {
        let text = fs::read_to_string(log).expect("log");
        assert!(text.contains("recovered the write-ahead log"), "run {i} recovered nothing:\n{text}");
    }
}

/// Records into one file (no rotation) until its segment holds `ticks`
/// ticks, then kills the recorder with SIGKILL; returns the segment.
fn kill_with_one_segment_of(data: &Path, log: &Path, ticks: u64) -> SegmentFile {
    let layout = DataLayout::new(data);
    let spawned_ms = now_ms();
    let mut child = start_recorder(data, log, &["--rotate", "1h"]);
    wait_until_recording(data, spawned_ms, &mut child);
    let t0 = Instant::now();
    let seg = loop {
        let segs = host_segments(&layout, HOST).expect("list");
        if let [seg] = &segs[..]
            && read_segment(&seg.path).is_ok_and(|r| r.ticks >= ticks)
        {
            break seg.clone();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "no {ticks} ticks after 30 s");
        sleep(Duration::from_millis(20));
    };
    signal(&child, libc::SIGKILL);
    wait_with_timeout(child, Duration::from_secs(20));
    seg
}

#[test]
fn a_torn_segment_is_recovered_to_its_last_whole_tick_and_only_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let layout = DataLayout::new(&data);

    // Record into one file (no rotation) until its segment holds 5 ticks,
    // then kill the recorder.
    let seg = kill_with_one_segment_of(&data, &tmp.path().join("run0.log"), 5);

    // Tear the last frame: cut 5 bytes off its end, as a crash mid-write.
    let whole = read_segment(&seg.path).expect("readable");
    assert_eq!(whole.torn_bytes, 0);
    let len = fs::metadata(&seg.path).expect("stat").len();
    File::options().write(true).open(&seg.path).expect("open").set_len(len - 5).expect("truncate");
    let torn = read_segment(&seg.path).expect("readable");
    assert_eq!(torn.ticks, whole.ticks - 1);
    assert_eq!(torn.gpus.len() as u64, (whole.ticks - 1) * GPUS as u64);
    let torn_tick = whole.gpus.last().expect("rows").ts;
    let kept: BTreeSet<i64> = torn.gpus.iter().map(|r| r.ts).collect();
    assert!(!kept.contains(&torn_tick));
    let saved = fs::read(&seg.path).expect("read");
    let torn_len = saved.len() as u64 - whole_frames_len(&saved);

    // Restart: recovery runs first, then it records; stop it cleanly.
    let run = |name: &str| {
        let log = tmp.path().join(name);
        let spawned_ms = now_ms();
        let mut child = start_recorder(&data, &log, &["--rotate", "1h"]);
        wait_until_recording(&data, spawned_ms, &mut child);
        signal(&child, libc::SIGTERM);
        let out = wait_with_timeout(child, Duration::from_secs(20));
        let log = fs::read_to_string(&log).expect("log");
        assert!(out.status.success(), "{log}");
        log
    };
    let log = run("run1.log");
    let seg_name = seg.path.file_name().and_then(|n| n.to_str()).expect("utf-8");
    assert!(
        log.lines().any(|l| l.contains("WARN")
            && l.contains(seg_name)
            && l.contains(&format!("torn_bytes={torn_len}"))),
        "a warning names the file and the bytes dropped:\n{log}"
    );
    assert!(host_segments(&layout, HOST).expect("list").is_empty(), "no segment after a clean stop");

    let in_segment = |ticks: &BTreeMap<String, Vec<i64>>| -> BTreeMap<String, Vec<i64>> {
        ticks
            .iter()
            .map(|(g, ts)| (g.clone(), ts.iter().copied().filter(|t| *t <= torn_tick).collect()))
            .collect()
    };
    let mut expected: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for r in &torn.gpus {
        expected.entry(r.gpu_uuid.to_string()).or_default().push(r.ts);
    }
    for v in expected.values_mut() {
        v.sort_unstable();
    }
    let after_first = in_segment(&gpu_ticks(&data));
    assert_eq!(after_first, expected, "every whole tick of the segment once, the torn one not at all");

    // The crash came after the renames, before the segment was deleted:
    // put it back and start again. Nothing of it is written twice.
    fs::write(&seg.path, &saved).expect("put the segment back");
    let log = run("run2.log");
    assert!(log.contains("recovered WAL segment into Parquet"), "{log}");
    let all = gpu_ticks(&data);
    assert_eq!(in_segment(&all), expected, "replayed twice, recorded once");
    for (gpu, ts) in &all {
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "{gpu}: a duplicate tick");
    }
}

/// Bytes of the whole frames at the start of a segment (8-byte head:
/// payload length, checksum; then the payload), checked the way the reader
/// does, written out here as a second path to the torn byte count.
fn whole_frames_len(bytes: &[u8]) -> u64 {
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 8) {
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        if len == 0 || at + 8 + len > bytes.len() {
            break;
        }
        at += 8 + len;
    }
    at as u64
}

#[test]
fn a_kill_while_a_closed_file_is_written_keeps_the_tick_that_closed_it() {
    use apron_schemas::test_pause::{PAUSE_ENV, points};
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let layout = DataLayout::new(&data);
    let mut sampled: BTreeSet<i64> = BTreeSet::new();
    let mut closing_ticks = Vec::new();
    let mut at_pause = Vec::new();
    // Three runs, each stopped at its first rotation just before the closed
    // file's Parquet is written, and killed there; each restart recovers
    // what the one before left.
    for i in 0..3 {
        let log = tmp.path().join(format!("run{i}.log"));
        let child = start_recorder_with(
            &data,
            &log,
            &["--rotate", "2s"],
            &[(PAUSE_ENV, points::BEFORE_CLOSED_FILE_WRITE)],
        );
        wait_stopped(child.id(), Duration::from_secs(60));
        // What the WAL holds at the pause: the closed file's segment, and
        // the new file's, whose one tick is the one that closed the other.
        let segs = host_segments(&layout, HOST).expect("list the WAL");
        assert!(!segs.is_empty(), "run {i}: {}", fs::read_to_string(&log).unwrap_or_default());
        let closed = read_segment(&segs[0].path).expect("readable");
        let boundary = (segs[0].start_ms.div_euclid(2_000) + 1) * 2_000;
        assert!(closed.last_tick_ms.is_some_and(|t| t < boundary), "run {i}");
        let new = segs.get(1).map(|s| read_segment(&s.path).expect("readable"));
        // The closing tick is the first on or after the boundary: the
        // boundary itself unless the loop woke late.
        let closing = new.as_ref().and_then(|n| n.gpus.first()).map_or(boundary, |r| r.ts);
        assert!(closing >= boundary, "run {i}: tick {closing} closed the file of {}", segs[0].start_ms);
        for r in closed.gpus.iter().chain(new.iter().flat_map(|n| n.gpus.iter())) {
            sampled.insert(r.ts);
        }
        sampled.insert(closing);
        at_pause.push((segs.len(), new.map_or(0, |n| n.ticks)));
        closing_ticks.push(closing);
        signal(&child, libc::SIGKILL);
        let out = wait_with_timeout(child, Duration::from_secs(20));
        assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(libc::SIGKILL));
    }
    // A last run recovers the third kill's segments and stops cleanly.
    let log = tmp.path().join("last.log");
    let spawned_ms = now_ms();
    let mut child = start_recorder(&data, &log, &["--rotate", "2s"]);
    wait_until_recording(&data, spawned_ms, &mut child);
    signal(&child, libc::SIGTERM);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    assert!(out.status.success(), "{}", fs::read_to_string(&log).unwrap_or_default());

    let ticks = gpu_ticks(&data);
    assert_eq!(ticks.len(), GPUS);
    for (gpu, ts) in &ticks {
        let dups: Vec<_> = ts.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        assert!(dups.is_empty(), "{gpu}: ticks recorded twice: {dups:?}");
        let have: BTreeSet<i64> = ts.iter().copied().collect();
        let lost: Vec<_> = closing_ticks.iter().filter(|t| !have.contains(t)).collect();
        assert!(lost.is_empty(), "{gpu}: the ticks that closed a file are lost: {lost:?}");
        let missing: Vec<_> = sampled.difference(&have).collect();
        assert!(
            missing.is_empty(),
            "{gpu}: {} of {} sampled ticks lost: {missing:?}",
            missing.len(),
            sampled.len()
        );
    }
    // At each pause the new segment held the closing tick, alone.
    assert_eq!(at_pause, [(2, 1); 3], "(segments, ticks of the new one) at each pause");
}

#[test]
fn a_segment_damaged_in_the_middle_loses_only_the_damaged_frame() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let layout = DataLayout::new(&data);
    let seg = kill_with_one_segment_of(&data, &tmp.path().join("run0.log"), 7);

    // One flipped byte in the payload of the third tick frame.
    let whole = read_segment(&seg.path).expect("readable");
    let mut bytes = fs::read(&seg.path).expect("read");
    let ends = frame_ends(&bytes);
    assert!(ends.len() as u64 > whole.ticks, "a header and {} ticks", whole.ticks);
    bytes[ends[2] + 20] ^= 0x10;
    fs::write(&seg.path, &bytes).expect("write");
    let mut ticks: Vec<i64> = whole.gpus.iter().map(|r| r.ts).collect();
    ticks.dedup();
    let damaged_tick = ticks[2];

    let log_path = tmp.path().join("run1.log");
    let spawned_ms = now_ms();
    let mut child = start_recorder(&data, &log_path, &["--rotate", "1h"]);
    wait_until_recording(&data, spawned_ms, &mut child);
    signal(&child, libc::SIGTERM);
    let out = wait_with_timeout(child, Duration::from_secs(20));
    let log = fs::read_to_string(&log_path).expect("log");
    assert!(out.status.success(), "{log}");

    let name = seg.path.file_name().and_then(|n| n.to_str()).expect("utf-8");
    let kept = layout.wal_quarantine_path(HOST, name, 0);
    assert_eq!(fs::read(&kept).expect("the damaged segment is kept aside"), bytes);
    let warnings: Vec<&str> =
        log.lines().filter(|l| l.contains("WARN") && l.contains("quarantined")).collect();
    assert_eq!(warnings.len(), 1, "one warning per segment:\n{log}");
    let w = warnings[0];
    assert!(w.contains("WARN") && w.contains(&kept.display().to_string()), "{w}");
    assert!(
        w.contains(&format!("frames_recovered={}", whole.ticks - 1)) && w.contains("frames_lost=1"),
        "{w}"
    );

    for (gpu, ts) in gpu_ticks(&data) {
        let in_segment: Vec<i64> = ts.iter().copied().filter(|t| *t <= ticks[ticks.len() - 1]).collect();
        let expected: Vec<i64> = ticks.iter().copied().filter(|t| *t != damaged_tick).collect();
        assert_eq!(in_segment, expected, "{gpu}: every tick of the segment once, but the damaged one");
    }
}

/// End offsets of the frames of a segment (header first), read from their
/// length fields alone.
fn frame_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 8) {
        at += 8 + u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        ends.push(at);
    }
    ends
}
