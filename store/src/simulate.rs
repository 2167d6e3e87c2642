//! `apron-recorder simulate`: writes D days of a simulated fleet, the
//! files live recording would write for it, as fast as the machine allows.
//!
//! Hosts are independent, so workers take them one at a time (each builds
//! the host it takes): as many hosts are in flight as there are workers,
//! whatever the fleet. Each host's files are written one after the other,
//! and each file as a stream ([`crate::file_stream`]): the host is sampled
//! GPU by GPU over the file's span ([`SimHost::sample_by_gpu`]; a MIG
//! instance counts as a GPU there, its `MIG-…` rows after every `GPU-…`
//! row), which gives its rows in the file's order, so nothing waits to be
//! sorted and
//! memory holds a chunk of rows per worker, however many GPUs and days.
//! Files open and close where the live writer's rotation rule says
//! ([`should_rotate`]), under the names it would choose
//! ([`crate::writer::free_seq`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use apron_schemas::DataLayout;
use apron_schemas::paths::validate_host;
use chrono::NaiveDate;

use crate::file_stream::FileStream;
use crate::rollup::EnergyCarry;
use crate::rotate::should_rotate;
use crate::source::Source;
use crate::source::sim::{SimFleet, SimHost};
use crate::write_error::WriteError;
use crate::writer::{WriterStats, free_seq};
use apron_schemas::time::DAY_MS;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Where to write.
    pub layout: DataLayout,
    /// GPUs in the fleet (8 per host).
    pub gpus: usize,
    /// Days to simulate, from `start` 00:00 UTC.
    pub days: u32,
    /// First simulated day (UTC).
    pub start: NaiveDate,
    /// Seed of the fleet: the same seed gives the same files.
    pub seed: u64,
    /// Time between samples.
    pub interval: Duration,
    /// How long each file spans (files also close at UTC midnight).
    pub rotate: Duration,
    /// Worker threads (hosts are simulated in parallel).
    pub threads: usize,
}

/// What a simulation wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimulateStats {
    /// Hosts simulated.
    pub hosts: usize,
    /// Files, rows written over all hosts.
    pub written: WriterStats,
}

/// Simulates and writes. `progress(done, total)` is called now and then
/// with simulated GPU-ticks done and in all (GPUs, not MIG instances:
/// `done` ends at `total`), from any worker thread.
/// When this returns `Ok`, every file is durable on disk; on the first
/// error no worker starts another host, and the error is returned.
pub fn simulate(
    opts: &SimulateOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<SimulateStats, WriteError> {
    let start_ms = opts.start.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc().timestamp_millis();
    let end_ms = start_ms + i64::from(opts.days) * DAY_MS;
    let interval_ms = i64::try_from(opts.interval.as_millis()).unwrap_or(i64::MAX).max(1);
    let n_hosts = SimFleet::host_count(opts.gpus);
    let ticks = u64::try_from((end_ms - start_ms) / interval_ms).unwrap_or(0);
    let total = ticks * opts.gpus as u64;
    let done = AtomicU64::new(0);
    let next_host = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);

    let threads = opts.threads.clamp(1, n_hosts.max(1));
    let results: Vec<Result<WriterStats, WriteError>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (done, next_host, failed) = (&done, &next_host, &failed);
                scope.spawn(move || {
                    let mut sum = WriterStats::default();
                    while !failed.load(Ordering::Relaxed) {
                        let n = next_host.fetch_add(1, Ordering::Relaxed);
                        if n >= n_hosts {
                            break;
                        }
                        let mut host = SimFleet::host(opts.gpus, opts.seed, start_ms, n);
                        let span = Span { start_ms, end_ms, interval_ms };
                        let result = run_host(&mut host, opts, span, &|gpu_ticks| {
                            let d = done.fetch_add(gpu_ticks, Ordering::Relaxed) + gpu_ticks;
                            progress(d, total);
                        });
                        match result {
                            Ok(s) => add(&mut sum, s),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    Ok(sum)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a simulation worker does not panic")).collect()
    });
    let mut stats = SimulateStats { hosts: n_hosts, written: WriterStats::default() };
    for r in results {
        add(&mut stats.written, r?);
    }
    Ok(stats)
}

fn add(sum: &mut WriterStats, s: WriterStats) {
    sum.files += s.files;
    sum.gpu_rows += s.gpu_rows;
    sum.proc_rows += s.proc_rows;
}

/// The ticks to simulate: `start_ms`, then every `interval_ms`, before
/// `end_ms`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start_ms: i64,
    end_ms: i64,
    interval_ms: i64,
}

/// Writes `host`'s files over `span`, one after the other, each streamed.
fn run_host(
    host: &mut SimHost,
    opts: &SimulateOptions,
    span: Span,
    progress: &dyn Fn(u64),
) -> Result<WriterStats, WriteError> {
    let name = host.host().to_owned();
    validate_host(&name)?;
    let rotate_ms = i64::try_from(opts.rotate.as_millis()).unwrap_or(i64::MAX).max(1);
    let row_interval = i32::try_from(span.interval_ms).unwrap_or(i32::MAX);
    let mut stats = WriterStats::default();
    let mut carry = EnergyCarry::new();
    let mut seq = 0;
    let mut pending_gpu_ticks = 0u64;
    let mut first = span.start_ms;
    while first < span.end_ms {
        let n = ticks_in_file(first, span.end_ms, span.interval_ms, rotate_ms);
        let interval_ms = span.interval_ms;
        let ticks = (0..n).map(move |k| first + k * interval_ms);
        seq = free_seq(&opts.layout, &name, first, seq);
        let mut file = FileStream::new(opts.layout.clone(), &name, first, seq, carry);
        host.sample_by_gpu(ticks, row_interval, |tick| {
            // A MIG instance's row is part of its GPU's tick.
            pending_gpu_ticks += tick.gpus.iter().filter(|g| g.parent_gpu_uuid.is_none()).count() as u64;
            if pending_gpu_ticks >= 100_000 {
                progress(pending_gpu_ticks);
                pending_gpu_ticks = 0;
            }
            file.push(tick)
        })?;
        let (written, next_carry) = file.finish()?;
        add(&mut stats, written);
        carry = next_carry;
        seq += 1;
        first += n * span.interval_ms;
    }
    progress(pending_gpu_ticks);
    Ok(stats)
}

/// How many ticks, from `first` every `interval_ms` and before `end_ms`,
/// go in the file whose first tick is `first`: those until the rotation
/// rule closes it (at least one).
fn ticks_in_file(first: i64, end_ms: i64, interval_ms: i64, rotate_ms: i64) -> i64 {
    let mut n = 1;
    let mut last = first;
    loop {
        let ts = last.saturating_add(interval_ms);
        if ts >= end_ms || should_rotate(first, last, ts, rotate_ms) {
            return n;
        }
        n += 1;
        last = ts;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs::{self, File};
    use std::path::{Path, PathBuf};

    use arrow::compute::concat_batches;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use crate::source::Tick;
    use crate::writer::RollingWriter;

    /// Every file under `dir`, relative to it, sorted.
    fn files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).expect("readable") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p.strip_prefix(dir).expect("under dir").to_path_buf());
                }
            }
        }
        out.sort();
        out
    }

    /// What a Parquet file holds: its schema and metadata, the rows of each
    /// row group, its declared sort order, and all its rows.
    fn contents(path: &Path) -> (Vec<i64>, String, arrow::array::RecordBatch) {
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("open")).expect("parquet");
        let meta = builder.metadata().clone();
        let groups = meta.row_groups().iter().map(|g| g.num_rows()).collect();
        let declared = format!(
            "{:?} {:?}",
            meta.file_metadata().key_value_metadata(),
            meta.row_groups().iter().map(|g| g.sorting_columns().cloned()).collect::<Vec<_>>()
        );
        let schema = builder.schema().clone();
        let batches: Vec<_> = builder.build().expect("reader").map(|b| b.expect("decodes")).collect();
        (groups, declared, concat_batches(&schema, &batches).expect("one schema"))
    }

    /// The fleet written the way live recording writes: every host sampled
    /// tick by tick into a rolling writer, which holds each file's rows
    /// until it closes.
    fn write_tick_by_tick(opts: &SimulateOptions) -> WriterStats {
        let start_ms = opts.start.and_hms_opt(0, 0, 0).expect("midnight").and_utc().timestamp_millis();
        let end_ms = start_ms + i64::from(opts.days) * DAY_MS;
        let interval_ms = opts.interval.as_millis() as i64;
        let mut sum = WriterStats::default();
        for mut host in SimFleet::new(opts.gpus, opts.seed, start_ms).into_hosts() {
            let mut w = RollingWriter::new(opts.layout.clone(), host.host(), opts.rotate).expect("host");
            let mut tick = Tick::default();
            for ts in (start_ms..end_ms).step_by(interval_ms as usize) {
                tick.clear();
                host.sample(ts, interval_ms as i32, &mut tick);
                w.push(ts, &tick).expect("push");
            }
            w.close().expect("close");
            add(&mut sum, w.stats());
        }
        sum
    }

    /// The streamed files are the rolling writer's files: the same names,
    /// row groups, metadata and rows in the same order, rollups included,
    /// over files that close at midnight and at a rotation that does not
    /// divide the day, with rows in several chunks per file and chunks
    /// that end in the middle of a GPU. Any change in what a file holds
    /// fails it.
    #[test]
    fn streamed_files_hold_what_the_rolling_writer_writes() {
        // (rotate, interval, days, GPUs, MIG instances): a day file of 8
        // GPUs at 20 s is 34,560 rows, four chunks; 7 h at 25 s is 8,064
        // rows, one chunk or two; 20 GPUs are three hosts, the third's four
        // GPUs in MIG mode with 15 instances, whose rows sort after theirs.
        for (rotate_h, interval_s, days, gpus, instances) in
            [(24, 20, 2, 12, 0), (7, 25, 1, 12, 0), (24, 60, 1, 20, 15)]
        {
            let tmp = tempfile::tempdir().expect("tempdir");
            let opts = |dir: &str| SimulateOptions {
                layout: DataLayout::new(tmp.path().join(dir)),
                gpus,
                days,
                start: NaiveDate::from_ymd_opt(2026, 10, 2).expect("a date"),
                seed: 4,
                interval: Duration::from_secs(interval_s),
                rotate: Duration::from_secs(rotate_h * 3_600),
                threads: 2,
            };
            let done = AtomicU64::new(0);
            let streamed = simulate(&opts("streamed"), &|d, total| {
                assert!(d <= total, "progress {d} of {total}");
                done.fetch_max(d, Ordering::Relaxed);
            })
            .expect("simulate");
            let rolled = write_tick_by_tick(&opts("rolled"));
            let ticks = days as u64 * 86_400 / interval_s;
            assert_eq!(done.into_inner(), gpus as u64 * ticks, "progress ends at its total");
            let hosts = gpus.div_ceil(8) as u64;
            assert_eq!(streamed.hosts as u64, hosts);
            assert_eq!(streamed.written, rolled);
            assert_eq!(streamed.written.gpu_rows, (gpus + instances) as u64 * ticks);

            let (a, b) = (tmp.path().join("streamed"), tmp.path().join("rolled"));
            let names = files(&a);
            assert_eq!(names, files(&b), "the same files");
            let per_host_day = if rotate_h == 24 { 1 } else { 4 };
            // Five tables a file: raw GPU and process rows and their three
            // rollups (the simulated hosts always run pods or Slurm jobs).
            assert_eq!(names.len() as u64, 5 * hosts * per_host_day * u64::from(days), "{names:?}");
            let mut same_bytes = 0;
            for name in &names {
                let (ga, ma, ra) = contents(&a.join(name));
                let (gb, mb, rb) = contents(&b.join(name));
                assert_eq!((ga, ma), (gb, mb), "{}: row groups and metadata", name.display());
                assert!(ra.num_rows() > 0);
                assert!(ra == rb, "{}: the same rows in the same order", name.display());
                same_bytes += usize::from(fs::read(a.join(name)).ok() == fs::read(b.join(name)).ok());
            }
            eprintln!("{same_bytes} of {} files byte for byte the same", names.len());
        }
    }
}
