use std::fs::File;
use std::path::{Path, PathBuf};

use apron_schemas::{GpuSample, ProcIdentity, ProcSample, Table};
use arrow::array::AsArray;
use arrow::datatypes::{Int32Type, TimestampMillisecondType};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;
use crate::source::Tick;

const HOST: &str = "n1";
/// 2026-11-30T00:09:58Z: four ticks cross the 00:10 boundary of `--rotate 10m`.
const BASE: i64 = 1_796_083_200_000 - 86_400_000 + 598_000;
const ROTATE: Duration = Duration::from_secs(600);

fn tick(ts: i64) -> Tick {
    let gpu = |uuid: &str, util| GpuSample {
        ts,
        gpu_uuid: uuid.into(),
        gpu_index: 0,
        interval_ms: 1_000,
        gpu_util_pct: Some(util),
        ..Default::default()
    };
    let proc_row = |uuid: &str, pid| ProcSample {
        ts,
        gpu_uuid: uuid.into(),
        pid,
        interval_ms: 1_000,
        identity: ProcIdentity { comm: Some("python3".into()), ..Default::default() },
        used_mem_bytes: Some(1 << 30),
        ..Default::default()
    };
    Tick {
        gpus: vec![gpu("GPU-b", 7), gpu("GPU-a", 0)],
        procs: vec![proc_row("GPU-b", 30), proc_row("GPU-b", 4), proc_row("GPU-a", 9)],
        // GPU-a is allocated to a pod (its `alloc_minutes` go through the
        // segment too).
        allocations: vec![apron_schemas::AllocSample {
            ts,
            interval_ms: 1_000,
            gpu_uuid: "GPU-a".into(),
            gpu_index: 0,
            holder: apron_schemas::Holder::kubernetes(Some("nlp".into()), Some("nb-0".into()), None),
        }],
        ..Default::default()
    }
}

/// Every file under `root` (relative path, bytes), sorted.
fn contents(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).expect("under root").to_path_buf();
                out.push((rel, fs::read(&p).expect("read")));
            }
        }
    }
    out.sort();
    out
}

fn parquet_only(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    contents(root).into_iter().filter(|(p, _)| p.extension().is_some_and(|e| e == "parquet")).collect()
}

/// (gpu_uuid, ts, gpu_util_pct) of every `gpu_samples` row, in file order.
fn gpu_rows(root: &Path) -> Vec<(String, i64, i32)> {
    let mut out = Vec::new();
    for (rel, _) in parquet_only(root) {
        if !rel.starts_with(Table::GpuSamples.name()) {
            continue;
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(root.join(rel)).expect("open"))
            .expect("a complete parquet file")
            .build()
            .expect("reader");
        for b in reader {
            let b = b.expect("batch");
            let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
            let uuid = b.column_by_name("gpu_uuid").expect("uuid").as_string::<i32>();
            let util = b.column_by_name("gpu_util_pct").expect("util").as_primitive::<Int32Type>();
            for i in 0..b.num_rows() {
                out.push((uuid.value(i).to_owned(), ts.value(i), util.value(i)));
            }
        }
    }
    out
}

/// Records `n` ticks from `BASE` with a WAL into `root`, then either closes
/// (a clean stop) or drops the writer as a `kill -9` would leave it.
fn record(root: &Path, n: i64, clean: bool) {
    let layout = DataLayout::new(root);
    let mut w = RollingWriter::new(layout, HOST, ROTATE)
        .expect("host")
        .with_wal(Duration::from_secs(1))
        .expect("wal");
    for i in 0..n {
        w.push(BASE + i * 1_000, &tick(BASE + i * 1_000)).expect("push");
    }
    if clean {
        w.close().expect("close");
    }
}

fn segments(root: &Path) -> Vec<PathBuf> {
    host_segments(&DataLayout::new(root), HOST).expect("list").into_iter().map(|s| s.path).collect()
}

#[test]
fn a_killed_writer_is_recovered_into_the_files_a_clean_stop_writes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (killed, clean) = (tmp.path().join("killed"), tmp.path().join("clean"));
    record(&killed, 5, false);
    record(&clean, 5, true);
    // The first file (00:09:58, :59) closed at the rotation; the second
    // (00:10:00 … :02) lives only in its segment.
    let segs = segments(&killed);
    assert_eq!(segs.len(), 1, "{segs:?}");
    assert_eq!(parquet_only(&killed).len(), 5, "gpu and proc files of the first file, and their rollups");
    assert!(segments(&clean).is_empty(), "a clean stop leaves no segment");

    let stats = recover(&DataLayout::new(&killed), HOST).expect("recover");
    assert_eq!(
        stats,
        RecoveryStats {
            segments: 1,
            recovered: 1,
            files: 5,
            gpu_rows: 6,
            proc_rows: 9,
            ..Default::default()
        }
    );
    assert!(segments(&killed).is_empty());
    // Same names, same rows in the same order, byte for byte.
    assert_eq!(parquet_only(&killed), parquet_only(&clean));
    let rows = gpu_rows(&killed);
    assert_eq!(rows.len(), 10);
    assert_eq!(
        rows[4..7],
        [
            ("GPU-a".to_owned(), BASE + 2_000, 0),
            ("GPU-a".to_owned(), BASE + 3_000, 0),
            ("GPU-a".to_owned(), BASE + 4_000, 0),
        ]
    );
}

#[test]
fn replaying_a_segment_again_writes_nothing_new() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("data");
    record(&root, 2, false);
    let seg = segments(&root).pop().expect("one segment");
    let saved = fs::read(&seg).expect("read");
    let layout = DataLayout::new(&root);
    assert_eq!(recover(&layout, HOST).expect("first").files, 5, "gpu, proc and their three rollups");
    let after_first = contents(&root);

    // The crash came after the renames, before the segment was deleted.
    fs::write(&seg, &saved).expect("put the segment back");
    let again = recover(&layout, HOST).expect("second");
    assert_eq!((again.recovered, again.files, again.gpu_rows), (1, 0, 4));
    assert_eq!(contents(&root), after_first, "same files, no duplicate rows");
    assert_eq!(gpu_rows(&root).len(), 4);

    // The crash came while the second table's file was being written.
    let proc_file = layout.file_path(Table::ProcSamples, HOST, BASE, 0);
    fs::remove_file(&proc_file).expect("remove the proc file");
    fs::write(apron_schemas::paths::temp_path(&proc_file), b"PAR1 half").expect("a partial temporary file");
    fs::write(&seg, &saved).expect("put the segment back");
    let third = recover(&layout, HOST).expect("third");
    assert_eq!(third.files, 1, "only the missing file is written");
    assert_eq!(contents(&root), after_first, "the temporary file is gone too");
}

#[test]
fn a_torn_segment_keeps_every_whole_tick() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("data");
    record(&root, 2, false);
    let seg = segments(&root).pop().expect("one segment");
    let len = fs::metadata(&seg).expect("stat").len();
    // Cut 10 bytes into the last frame: the recorder died writing it.
    let frame = {
        let mut one = Vec::new();
        let t = tick(BASE + 1_000);
        crate::wal::format::encode_tick(BASE + 1_000, rows(&t), &mut one).expect("encodes");
        one.len() as u64
    };
    File::options().write(true).open(&seg).expect("open").set_len(len - frame + 10).expect("truncate");

    let stats = recover(&DataLayout::new(&root), HOST).expect("a torn tail is not fatal");
    assert_eq!((stats.recovered, stats.gpu_rows, stats.proc_rows, stats.torn_bytes), (1, 2, 3, 10));
    assert_eq!(gpu_rows(&root), [("GPU-a".to_owned(), BASE, 0), ("GPU-b".to_owned(), BASE, 7)]);
    assert!(segments(&root).is_empty());
}

#[test]
fn segments_without_rows_are_removed_and_unreadable_ones_kept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    let foreign = layout.wal_segment_path(HOST, BASE, 0);
    let empty = layout.wal_segment_path(HOST, BASE, 1);
    fs::create_dir_all(layout.wal_dir(HOST)).expect("mkdir");
    fs::write(&empty, b"").expect("write");
    let mut other = 4u32.to_le_bytes().to_vec();
    other.extend_from_slice(&crc32fast_hash(b"nope").to_le_bytes());
    other.extend_from_slice(b"nope");
    fs::write(&foreign, &other).expect("write");

    let stats = recover(&layout, HOST).expect("never fatal");
    assert_eq!((stats.segments, stats.empty, stats.kept, stats.files), (2, 1, 1, 0));
    assert!(!empty.exists());
    assert!(foreign.exists(), "another build may read it");

    // The live writer never takes the name of a segment still there.
    let mut w = RollingWriter::new(layout.clone(), HOST, ROTATE)
        .expect("host")
        .with_wal(Duration::from_secs(1))
        .expect("wal");
    w.push(BASE, &tick(BASE)).expect("push");
    assert_eq!(w.wal_stats().map(|s| (s.segments, s.errors)), Some((1, 0)));
    assert_eq!(w.wal_stats().map(|s| s.frames), Some(1));
    w.close().expect("close");
    assert!(layout.file_path(Table::GpuSamples, HOST, BASE, 1).exists(), "seq 1 is free again");
    assert!(!layout.file_path(Table::GpuSamples, HOST, BASE, 0).exists(), "seq 0 names the kept segment");
    assert_eq!(fs::read(&foreign).expect("kept"), other);
}

/// The checksum the WAL uses, without depending on its crate here.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    // CRC-32 (IEEE), bitwise.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Frame end offsets of the segment at `path`: the header's first.
fn frame_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 8) {
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        at += 8 + len;
        ends.push(at);
    }
    ends
}

#[test]
fn a_segment_damaged_in_the_middle_gives_its_good_frames_and_is_quarantined() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("data");
    // Seven ticks in one file (00:09:58 … 00:10:04 crosses 00:10: use the
    // ticks after the boundary only).
    let layout = DataLayout::new(&root);
    let start = BASE + 2_000;
    let mut w = RollingWriter::new(layout.clone(), HOST, ROTATE)
        .expect("host")
        .with_wal(Duration::from_secs(1))
        .expect("wal");
    for i in 0..7 {
        w.push(start + i * 1_000, &tick(start + i * 1_000)).expect("push");
    }
    drop(w); // as a kill -9 leaves it
    let seg = segments(&root).pop().expect("one segment");
    let mut bytes = fs::read(&seg).expect("read");
    let ends = frame_ends(&bytes);
    assert_eq!(ends.len(), 8, "a header and seven ticks");
    // One flipped byte in the payload of tick frame 3 of 7.
    bytes[ends[2] + 20] ^= 0x10;
    fs::write(&seg, &bytes).expect("write");

    let stats = recover(&layout, HOST).expect("recover");
    assert_eq!(
        (stats.recovered, stats.quarantined, stats.bad_frames, stats.gpu_rows, stats.proc_rows),
        (1, 1, 1, 12, 18)
    );
    let ticks: Vec<i64> = gpu_rows(&root).iter().filter(|r| r.0 == "GPU-a").map(|r| r.1).collect();
    let expected: Vec<i64> = [0, 1, 3, 4, 5, 6].iter().map(|i| start + i * 1_000).collect();
    assert_eq!(ticks, expected, "every frame but the damaged one");
    assert!(segments(&root).is_empty(), "not left to fail again at every start");
    let kept = layout.wal_quarantine_path(HOST, &seg.file_name().expect("name").to_string_lossy(), 0);
    assert_eq!(fs::read(&kept).expect("quarantined"), bytes, "the damaged segment, as it was");
}

#[test]
fn rows_at_implausible_times_are_refused_and_the_segment_quarantined() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    let path = layout.wal_segment_path(HOST, BASE, 0);
    fs::create_dir_all(layout.wal_dir(HOST)).expect("mkdir");
    let mut bytes = Vec::new();
    let header = crate::wal::format::SegmentHeader { host: HOST.into(), start_ms: BASE, seq: 0 };
    crate::wal::format::encode_header(&header, &mut bytes).expect("encodes");
    let good = tick(BASE);
    crate::wal::format::encode_tick(BASE, rows(&good), &mut bytes).expect("encodes");
    let crafted = tick(i64::MAX - 1);
    crate::wal::format::encode_tick(i64::MAX - 1, rows(&crafted), &mut bytes).expect("encodes");
    fs::write(&path, &bytes).expect("write");

    let stats = recover(&layout, HOST).expect("recover");
    assert_eq!((stats.refused_rows, stats.gpu_rows, stats.proc_rows, stats.quarantined), (6, 2, 3, 1));
    // 6 refused: the crafted tick's 2 GPU rows, 3 process rows and 1 allocation.
    assert!(gpu_rows(tmp.path()).iter().all(|r| r.1 == BASE));
    assert!(!path.exists());
}

/// A tick's rows as a segment frame takes them.
fn rows(t: &Tick) -> crate::wal::format::TickRows<'_> {
    crate::wal::format::TickRows { gpus: &t.gpus, procs: &t.procs, allocs: &t.allocations, events: &t.events }
}
