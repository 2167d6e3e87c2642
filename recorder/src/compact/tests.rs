//! Compaction of hand-made partitions: merged in order, other tools'
//! files carried over, open days and single files left alone.

use super::*;

use std::sync::Arc;

use apron_schemas::{GpuSample, ProcMinute, gpu_samples, proc_minutes};
use arrow::array::{Array, AsArray, Int32Array};
use arrow::datatypes::{Int32Type, TimestampMillisecondType};

use apron_store::writer::write_file_atomic;

const DAY1: i64 = 1_796_083_200_000 - 2 * 86_400_000; // 2026-11-29T00:00:00Z

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("valid date")
}

fn gpu(ts: i64, uuid: &str, util: Option<i32>) -> GpuSample {
    GpuSample { ts, gpu_uuid: uuid.into(), interval_ms: 1_000, gpu_util_pct: util, ..Default::default() }
}

/// Writes a `gpu_samples` file of rows (sorted as the writer sorts them)
/// starting at `start`.
fn write_gpu_file(layout: &DataLayout, host: &str, seq: u64, mut rows: Vec<GpuSample>) {
    gpu_samples::sort(&mut rows);
    let batch = gpu_samples::to_batch(&rows).expect("batch");
    let path = layout.file_path(Table::GpuSamples, host, rows[0].ts, seq);
    write_file_atomic(&path, Table::GpuSamples, host, &batch).expect("write");
}

fn parquet_names(dir: &Path) -> Vec<String> {
    files_of(dir).expect("list").into_iter().map(|e| e.name).collect()
}

/// (gpu_uuid, ts, util) of every row of `path`, in file order.
fn gpu_rows(path: &Path) -> Vec<(String, i64, Option<i32>)> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("open"))
        .expect("parquet")
        .build()
        .expect("reader");
    let mut out = Vec::new();
    for b in reader {
        let b = b.expect("batch");
        let uuid = b.column_by_name("gpu_uuid").expect("uuid").as_string::<i32>();
        let ts = b.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
        let util = b.column_by_name("gpu_util_pct").expect("util").as_primitive::<Int32Type>();
        for i in 0..b.num_rows() {
            out.push((uuid.value(i).to_owned(), ts.value(i), util.is_valid(i).then(|| util.value(i))));
        }
    }
    out
}

#[test]
fn closed_days_are_strictly_before_today() {
    assert!(is_closed(day("2026-11-29"), day("2026-11-30")));
    assert!(!is_closed(day("2026-11-30"), day("2026-11-30")));
    assert!(!is_closed(day("2026-12-01"), day("2026-11-30")));
}

#[test]
fn a_closed_partition_becomes_one_sorted_file_with_every_row() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    // Three files of two GPUs (more rows than one read batch), as three
    // rotations would write them.
    let mut expected = Vec::new();
    for (seq, hour) in [(0u64, 0i64), (1, 1), (2, 2)] {
        let rows: Vec<GpuSample> = (0..1_500)
            .flat_map(|s| {
                let ts = DAY1 + hour * 3_600_000 + s * 1_000;
                let util = (s % 7 != 0).then_some((s % 100) as i32);
                [gpu(ts, "GPU-b", util), gpu(ts, "GPU-a", Some(1))]
            })
            .collect();
        expected.extend(rows.iter().map(|r| (r.gpu_uuid.to_string(), r.ts, r.gpu_util_pct)));
        write_gpu_file(&layout, "n1", seq, rows);
    }
    expected.sort();
    // Another tool's file and a leftover temporary file in the partition.
    let dir = layout.partition_dir(Table::GpuSamples, day("2026-11-29"), "n1");
    let foreign =
        RecordBatch::try_from_iter([("x", Arc::new(Int32Array::from(vec![1, 2])) as _)]).expect("batch");
    let mut w = ArrowWriter::try_new(
        File::create(dir.join("import.parquet")).expect("create"),
        foreign.schema(),
        None,
    )
    .expect("writer");
    w.write(&foreign).expect("write");
    w.close().expect("close");
    fs::write(dir.join("_SUCCESS"), b"").expect("write");
    fs::write(dir.join(".20261129T030000000Z-000003.parquet.tmp"), b"partial").expect("write");
    // Today's partition is open: left alone.
    write_gpu_file(&layout, "n1", 3, vec![gpu(DAY1 + 86_400_000, "GPU-a", Some(1))]);
    write_gpu_file(&layout, "n1", 4, vec![gpu(DAY1 + 86_400_000 + 1_000, "GPU-a", Some(2))]);
    // A staging folder an interrupted run left behind.
    let leftover = layout.compact_staging_dir(Table::GpuSamples, day("2026-11-29"), "n1", 1);
    fs::create_dir_all(&leftover).expect("mkdir");

    let lock = DataLock::acquire(&layout).expect("lock");
    let done = compact(&layout, None, day("2026-11-30"), DAY1 + 90_000_000, &lock).expect("compact");
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!((done[0].table, done[0].files, done[0].rows), (Table::GpuSamples, 3, 9_000));
    assert!(!leftover.exists());

    let names = parquet_names(&dir);
    assert_eq!(
        names,
        ["20261129T000000000Z-compacted-20261130T010000000Z.parquet", "_SUCCESS", "import.parquet"],
        "one merged file; other tools' files kept; the temporary file gone"
    );
    let rows = gpu_rows(&dir.join(&names[0]));
    let mut sorted = rows.clone();
    sorted.sort();
    assert_eq!(rows, sorted, "in (gpu_uuid, ts) order");
    assert_eq!(rows, expected, "every row once");
    let today = layout.partition_dir(Table::GpuSamples, day("2026-11-30"), "n1");
    assert_eq!(parquet_names(&today).len(), 2, "the open day is not touched");
    let day_dir = layout.date_dir(Table::GpuSamples, day("2026-11-29"));
    let siblings: Vec<_> = subfolders(&day_dir).expect("list").unwrap_or_default();
    assert_eq!(siblings.len(), 1, "no staging folder left: {siblings:?}");

    // Once merged, a partition of one file is left alone.
    let again = compact(&layout, None, day("2026-12-30"), DAY1 + 99_000_000, &lock).expect("compact");
    assert_eq!(again.iter().map(|c| c.date).collect::<Vec<_>>(), [day("2026-11-30")]);
    assert_eq!(parquet_names(&dir)[0], names[0]);
}

#[test]
fn only_the_given_host_is_compacted_and_rollups_keep_their_order() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    for host in ["n1", "n2"] {
        for seq in 0..2u64 {
            write_gpu_file(&layout, host, seq, vec![gpu(DAY1 + seq as i64 * 1_000, "GPU-a", None)]);
        }
    }
    // proc_minutes sort by (gpu_uuid, minute, pid, proc_start), nulls last.
    let pm = |minute: i64, pid: i32, start: Option<i64>| ProcMinute {
        minute,
        gpu_uuid: "GPU-a".into(),
        pid,
        identity: apron_schemas::ProcIdentity { proc_start: start, ..Default::default() },
        seconds: 1.0,
        samples: 1,
        ..Default::default()
    };
    for (seq, rows) in [
        (0u64, vec![pm(DAY1, 1, Some(5)), pm(DAY1, 1, None), pm(DAY1 + 60_000, 2, Some(1))]),
        (1, vec![pm(DAY1, 1, Some(7)), pm(DAY1, 3, None)]),
    ] {
        let batch = proc_minutes::to_batch(&rows).expect("batch");
        let path = layout.file_path(Table::ProcMinutes, "n1", DAY1 + seq as i64, seq);
        write_file_atomic(&path, Table::ProcMinutes, "n1", &batch).expect("write");
    }
    let lock = DataLock::acquire(&layout).expect("lock");
    let done = compact(&layout, Some("n1"), day("2026-11-30"), DAY1 + 90_000_000, &lock).expect("compact");
    let tables: Vec<_> = done.iter().map(|c| (c.table, c.host.as_str())).collect();
    assert_eq!(tables, [(Table::GpuSamples, "n1"), (Table::ProcMinutes, "n1")]);
    assert_eq!(parquet_names(&layout.partition_dir(Table::GpuSamples, day("2026-11-29"), "n2")).len(), 2);

    let merged = &done[1].path;
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(merged).expect("open"))
        .expect("parquet")
        .build()
        .expect("reader");
    let mut keys = Vec::new();
    for b in reader {
        let b = b.expect("batch");
        let minute = b.column_by_name("minute").expect("minute").as_primitive::<TimestampMillisecondType>();
        let pid = b.column_by_name("pid").expect("pid").as_primitive::<Int32Type>();
        let start = b.column_by_name("proc_start").expect("start").as_primitive::<TimestampMillisecondType>();
        for i in 0..b.num_rows() {
            keys.push((minute.value(i) - DAY1, pid.value(i), start.is_valid(i).then(|| start.value(i))));
        }
    }
    assert_eq!(keys, [(0, 1, Some(5)), (0, 1, Some(7)), (0, 1, None), (0, 3, None), (60_000, 2, Some(1))]);
}

#[test]
fn a_second_compaction_at_once_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    let _held = DataLock::acquire(&layout).expect("lock");
    // flock locks belong to the open file, so a second open conflicts even
    // within one process.
    let err = DataLock::acquire(&layout).expect_err("already held");
    assert!(err.to_string().starts_with("another compaction is running"), "{err}");
}

#[test]
fn a_day_with_rows_still_in_the_wal_waits_for_recovery() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path());
    for seq in 0..2u64 {
        write_gpu_file(&layout, "n1", seq, vec![gpu(DAY1 + seq as i64 * 1_000, "GPU-a", None)]);
    }
    // A crash left the segment of a file of that day: recovery will write
    // it under its own name, next to the files already there.
    let segment = layout.wal_segment_path("n1", DAY1 + 3_600_000, 2);
    fs::create_dir_all(segment.parent().expect("wal folder")).expect("mkdir");
    fs::write(&segment, b"rows").expect("write");
    let lock = DataLock::acquire(&layout).expect("lock");
    let done = compact(&layout, None, day("2026-11-30"), DAY1 + 90_000_000, &lock).expect("compact");
    assert!(done.is_empty(), "{done:?}");
    fs::remove_file(&segment).expect("recovered");
    let done = compact(&layout, None, day("2026-11-30"), DAY1 + 90_000_000, &lock).expect("compact");
    assert_eq!(done.len(), 1);
}

#[test]
fn a_symlink_at_the_staging_name_is_removed_not_written_through() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(tmp.path().join("data"));
    for (seq, s) in [(0, 0), (1, 3_600)] {
        write_gpu_file(&layout, "n1", seq, vec![gpu(DAY1 + s * 1_000, "GPU-a", Some(1))]);
    }
    // Someone plants a symlink to an outside folder under the staging name
    // this process will use.
    let outside = tmp.path().join("outside");
    fs::create_dir_all(&outside).expect("mkdir");
    fs::write(outside.join("keep.txt"), b"mine").expect("write");
    let staging = layout.compact_staging_dir(Table::GpuSamples, day("2026-11-29"), "n1", std::process::id());
    std::os::unix::fs::symlink(&outside, &staging).expect("symlink");

    let lock = DataLock::acquire(&layout).expect("lock");
    let done = compact(&layout, None, day("2026-11-30"), DAY1 + 90_000_000, &lock).expect("compact");
    assert_eq!(done.len(), 1, "{done:?}");
    let left: Vec<_> = fs::read_dir(&outside).expect("list").map(|e| e.expect("entry").file_name()).collect();
    assert_eq!(left, ["keep.txt"], "nothing written into the folder the link pointed to");
    assert_eq!(fs::read(outside.join("keep.txt")).expect("read"), b"mine");
    assert!(fs::symlink_metadata(&staging).is_err(), "the link is gone");
}
