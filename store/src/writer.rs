//! The rolling Parquet writer: holds the open file's rows of one host and
//! writes them, per table, as one complete Parquet file when the file
//! closes.
//!
//! Parquet cannot be appended to, so the open file's rows live in memory
//! until it closes, and in the file's WAL segment when the writer has one
//! ([`RollingWriter::with_wal`]; the segment format and syncing are
//! [`crate::wal`]'s job). A file appears only complete: it is written under a
//! hidden temporary name, synced, renamed to its final name, and the folder
//! is synced, so a reader never lists a partial file.
//!
//! A file's name (start, seq) is chosen when it opens, free among the
//! Parquet files and WAL segments already there, and is the name of its
//! segment too; so a file that exists already holds its segment's rows, and
//! writing it again (replaying a segment after a crash) is skipped.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apron_schemas::paths::validate_host;
use apron_schemas::test_pause::{pause_at, points};
use apron_schemas::{
    AllocSample, DataLayout, GpuEvent, GpuSample, ProcSample, Table, Text, alloc_minutes, gpu_events,
    gpu_minutes, gpu_samples, parquet_props, proc_minutes, proc_samples,
};
use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::durable;
use crate::rollup::{self, EnergyCarry};
use crate::rotate::should_rotate;
use crate::source::Tick;
use crate::wal::format::TickRows;
use crate::wal::{SealedSegment, Wal, WalStats};
use crate::write_error::WriteError;

/// What the writer has written so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Parquet files renamed into place.
    pub files: u64,
    /// `gpu_samples` rows in those files.
    pub gpu_rows: u64,
    /// `proc_samples` rows in those files.
    pub proc_rows: u64,
    /// Rows dropped from memory because the disk refused writes for longer
    /// than the buffer holds (oldest first). Those a WAL segment holds wait
    /// there and reach Parquet at the next start; the rest are
    /// [`WriterStats::lost_rows`].
    pub dropped_rows: u64,
    /// Of the dropped rows, those no WAL segment holds (their segment could
    /// not be created or their frames not written): lost for good.
    pub lost_rows: u64,
    /// The ticks of the lost rows (a tick is lost when its frame is not in
    /// a segment).
    pub lost_ticks: u64,
    /// Writes the disk refused (each retried later).
    pub write_errors: u64,
}

/// The open file's rows of one GPU, in tick order. Keeping them apart per
/// GPU as they arrive means a closing file is already in (gpu_uuid, ts)
/// order: runs are ordered by UUID, and no row is ever sorted or moved.
#[derive(Debug)]
struct GpuRun {
    uuid: Text,
    gpus: Vec<GpuSample>,
    /// Ordered by (ts, pid).
    procs: Vec<ProcSample>,
    /// Where the process rows of the tick being added start in `procs`.
    tick_procs_from: usize,
}

/// Default bound of the rows held in memory while the disk refuses writes:
/// about 2 hours of 8 GPUs and 16 processes at 1 Hz, some 50 MB.
pub const DEFAULT_MAX_ROWS: usize = 200_000;

/// How often a refused write is retried between rotations.
pub const RETRY_EVERY_MS: i64 = 10_000;

/// A file whose rows are complete but not yet written as Parquet.
#[derive(Debug)]
struct ClosedFile {
    start_ms: i64,
    seq: u64,
    runs: Vec<GpuRun>,
    /// The cluster's allocations in its ticks, in tick order (rolled up
    /// into `alloc_minutes`; not counted as rows: a tick has a handful).
    allocs: Vec<AllocSample>,
    /// The GPUs' events received while it was open (written to
    /// `gpu_events`; not counted as rows: a file has a handful).
    events: Vec<GpuEvent>,
    /// Ticks pushed to it.
    ticks: u64,
    /// Its WAL segment, deleted once the Parquet files are durable.
    segment: Option<SealedSegment>,
}

impl ClosedFile {
    fn rows(&self) -> usize {
        self.runs.iter().map(|r| r.gpus.len() + r.procs.len()).sum()
    }
}

/// Rows held in memory and not yet in Parquet (open and unwritten files),
/// and how many of them a WAL segment holds too: those survive the
/// recorder's end and reach Parquet at the next start, the rest do not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Rows held.
    pub rows: u64,
    /// Ticks held.
    pub ticks: u64,
    /// Of them, rows in a WAL segment.
    pub wal_rows: u64,
    /// Of them, ticks in a WAL segment.
    pub wal_ticks: u64,
}

/// The open file of one host: its rows in memory until it closes.
#[derive(Debug)]
pub struct RollingWriter {
    layout: DataLayout,
    host: String,
    rotate_ms: i64,
    /// The open file's counter (chosen when it opens), else the next one's.
    seq: u64,
    /// The write-ahead log, when the rows must survive a crash.
    wal: Option<Wal>,
    /// Each GPU's last sample in the files closed so far, for the energy of
    /// the next file's first sample (see [`crate::rollup`]).
    energy_carry: EnergyCarry,
    /// First and last tick of the open file.
    open: Option<(i64, i64)>,
    /// Ticks pushed to the open file.
    open_ticks: u64,
    runs: Vec<GpuRun>,
    /// The open file's allocations, in tick order.
    allocs: Vec<AllocSample>,
    /// The open file's events, as they arrived.
    events: Vec<GpuEvent>,
    /// Events that arrived while no file was open, or after the open
    /// file's day ended: they go with the next tick.
    waiting_events: Vec<GpuEvent>,
    /// Files closed but not yet on disk (the disk refused them), oldest
    /// first; written in order as soon as the disk takes them again.
    unwritten: VecDeque<ClosedFile>,
    /// Most rows held in memory, open and unwritten files together; past
    /// it the oldest unwritten file is dropped (and counted).
    max_rows: usize,
    /// Tick of the last failed write, to retry at most every
    /// [`RETRY_EVERY_MS`] between rotations.
    last_failure_ms: Option<i64>,
    /// The most GPU rows and process rows one GPU had in the file closed
    /// last: a new file's runs start with that room, so that in steady
    /// state a tick adds rows without reallocating.
    run_room: (usize, usize),
    stats: WriterStats,
}

impl RollingWriter {
    /// A writer of `host`'s rows under `layout`, closing files every
    /// `rotate` (aligned to the clock) and at UTC midnight.
    pub fn new(layout: DataLayout, host: &str, rotate: Duration) -> Result<Self, WriteError> {
        validate_host(host)?;
        Ok(Self {
            layout,
            host: host.to_owned(),
            rotate_ms: i64::try_from(rotate.as_millis()).unwrap_or(i64::MAX).max(1),
            seq: 0,
            wal: None,
            energy_carry: EnergyCarry::new(),
            open: None,
            open_ticks: 0,
            runs: Vec::new(),
            allocs: Vec::new(),
            events: Vec::new(),
            waiting_events: Vec::new(),
            unwritten: VecDeque::new(),
            max_rows: DEFAULT_MAX_ROWS,
            last_failure_ms: None,
            run_room: (0, 0),
            stats: WriterStats::default(),
        })
    }

    /// Keeps each open file's rows in a WAL segment as well as in memory,
    /// synced every `sync` of tick time (see [`crate::wal`]), and deletes the
    /// segment once the file is durable.
    pub fn with_wal(mut self, sync: Duration) -> Result<Self, WriteError> {
        self.wal = Some(Wal::new(self.layout.clone(), &self.host, sync)?);
        Ok(self)
    }

    /// What the write-ahead log has done (`None` without one).
    pub fn wal_stats(&self) -> Option<WalStats> {
        self.wal.as_ref().map(Wal::stats)
    }

    /// Bytes of this host's WAL segments on disk now (0 without a WAL).
    pub fn wal_bytes_on_disk(&self) -> u64 {
        if self.wal.is_none() {
            return 0;
        }
        wal_bytes_in(&self.layout.wal_dir(&self.host))
    }

    /// The host this writer writes for.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Whether the disk refuses writes: the last write of a closed file
    /// failed, and none has succeeded since.
    pub fn refusing(&self) -> bool {
        self.last_failure_ms.is_some()
    }

    /// The rows held in memory and not yet in Parquet, and how many of them
    /// a WAL segment holds: what the recorder's end would cost if the disk
    /// refuses its last write.
    pub fn held(&self) -> Held {
        let mut h = Held::default();
        for f in &self.unwritten {
            let (frames, rows) = f.segment.as_ref().map_or((0, 0), |s| (s.frames, s.rows));
            h.rows += f.rows() as u64;
            h.ticks += f.ticks;
            h.wal_rows += rows;
            h.wal_ticks += frames;
        }
        let open: usize = self.runs.iter().map(|r| r.gpus.len() + r.procs.len()).sum();
        let (frames, rows) = self.wal.as_ref().map_or((0, 0), Wal::open_frames);
        h.rows += open as u64;
        h.ticks += self.open_ticks;
        h.wal_rows += rows;
        h.wal_ticks += frames;
        h
    }

    /// Rows held in memory, not yet in a closed file.
    pub fn pending_rows(&self) -> usize {
        let open: usize = self.runs.iter().map(|r| r.gpus.len() + r.procs.len()).sum();
        open + self.unwritten.iter().map(ClosedFile::rows).sum::<usize>()
    }

    /// Bounds the rows held in memory while the disk refuses writes
    /// (default [`DEFAULT_MAX_ROWS`]).
    pub fn with_max_rows(mut self, max_rows: usize) -> Self {
        self.max_rows = max_rows.max(1);
        self
    }

    /// Adds the rows of the tick at `ts_ms`. When the tick belongs in a new
    /// file, the open one is closed and the tick starts the new one (its
    /// segment and memory); then the closed file's Parquet is written. On
    /// error the rows stay held and a later call tries again.
    pub fn push(&mut self, ts_ms: i64, tick: &Tick) -> Result<(), WriteError> {
        let rotated = if let Some((start, last)) = self.open
            && should_rotate(start, last, ts_ms, self.rotate_ms)
        {
            self.seal_open();
            true
        } else {
            false
        };
        // The tick goes to its new segment and to memory before any Parquet
        // of the closed file is written: that write takes a while, and a
        // crash during it must not cost the tick that closed the file.
        self.hold(ts_ms, tick);
        let retry_due = !self.unwritten.is_empty()
            && self.last_failure_ms.is_none_or(|t| ts_ms - t >= RETRY_EVERY_MS || ts_ms < t);
        let result = if rotated || retry_due {
            pause_at(points::BEFORE_CLOSED_FILE_WRITE);
            self.write_unwritten(ts_ms)
        } else {
            Ok(())
        };
        self.enforce_bound();
        result
    }

    /// Adds events that arrived between ticks, at `now_ms`: to the open
    /// file's segment at once, in a frame of their own (so an event
    /// survives a crash within milliseconds, not at the next tick), and to
    /// memory. Without an open file, or when the open file would close
    /// before `now_ms` (a new day began), they wait for the next tick and
    /// go into its frame and file.
    pub fn push_events(&mut self, now_ms: i64, events: &[GpuEvent]) {
        if events.is_empty() {
            return;
        }
        let open = self.open.is_some_and(|(start, last)| !should_rotate(start, last, now_ms, self.rotate_ms));
        if !open {
            self.waiting_events.extend_from_slice(events);
            return;
        }
        if let Some(wal) = &mut self.wal {
            wal.append(now_ms, TickRows { events, ..TickRows::default() });
        }
        self.events.extend_from_slice(events);
    }

    /// Appends the tick at `ts_ms` to the open file (opening one, with its
    /// segment, when none is open): to the WAL first, then to memory.
    fn hold(&mut self, ts_ms: i64, tick: &Tick) {
        let start = match self.open {
            Some((start, _)) => start,
            None => {
                self.seq = self.free_seq(ts_ms, self.seq);
                if let Some(wal) = &mut self.wal {
                    wal.begin(ts_ms, self.seq);
                }
                ts_ms
            }
        };
        self.open = Some((start, ts_ms));
        self.open_ticks += 1;
        let mut waiting = std::mem::take(&mut self.waiting_events);
        let events: &[GpuEvent] = if waiting.is_empty() {
            &tick.events
        } else {
            waiting.extend_from_slice(&tick.events);
            &waiting
        };
        if let Some(wal) = &mut self.wal {
            let rows = TickRows { gpus: &tick.gpus, procs: &tick.procs, allocs: &tick.allocations, events };
            wal.append(ts_ms, rows);
        }
        self.events.extend_from_slice(events);
        self.allocs.extend_from_slice(&tick.allocations);
        for row in &tick.gpus {
            self.run(&row.gpu_uuid).gpus.push(row.clone());
        }
        if tick.procs.is_empty() {
            return;
        }
        for run in &mut self.runs {
            run.tick_procs_from = run.procs.len();
        }
        for row in &tick.procs {
            self.run(&row.gpu_uuid).procs.push(row.clone());
        }
        for run in &mut self.runs {
            // A GPU lists each pid once per tick, so an unstable sort gives
            // the same order, and sorts in place (a stable sort of more than
            // a few rows allocates).
            run.procs[run.tick_procs_from..].sort_unstable_by_key(|p| p.pid);
        }
    }

    /// Moves the open file's rows to the unwritten files (its WAL segment
    /// sealed, not deleted) and starts no new one.
    fn seal_open(&mut self) {
        let Some((start_ms, _)) = self.open.take() else { return };
        let segment = self.wal.as_mut().and_then(Wal::seal);
        let mut runs = std::mem::take(&mut self.runs);
        self.run_room = runs.iter().fold((0, 0), |(g, p), r| (g.max(r.gpus.len()), p.max(r.procs.len())));
        runs.sort_by(|a, b| a.uuid.cmp(&b.uuid));
        let ticks = std::mem::take(&mut self.open_ticks);
        // The next file's allocations start with room for as many as this
        // one had, and some: in steady state a tick adds them without
        // reallocating.
        let room = self.allocs.len() + self.allocs.len() / 4 + 64;
        let allocs = std::mem::replace(&mut self.allocs, Vec::with_capacity(room));
        let events = std::mem::take(&mut self.events);
        self.unwritten.push_back(ClosedFile {
            start_ms,
            seq: self.seq,
            runs,
            allocs,
            events,
            ticks,
            segment,
        });
        self.seq += 1;
    }

    /// Writes the unwritten files, oldest first, stopping at the first the
    /// disk refuses (kept for the next try).
    fn write_unwritten(&mut self, now_ms: i64) -> Result<(), WriteError> {
        while let Some(file) = self.unwritten.pop_front() {
            if let Err(e) = self.write_closed(&file) {
                self.unwritten.push_front(file);
                self.stats.write_errors += 1;
                self.last_failure_ms = Some(now_ms);
                return Err(e);
            }
            if let (Some(wal), Some(seg)) = (self.wal.as_mut(), file.segment.as_ref()) {
                wal.remove(&seg.path);
            }
        }
        self.last_failure_ms = None;
        Ok(())
    }

    /// Drops the oldest unwritten files while more rows are held than the
    /// bound allows: a disk that stays full must not exhaust memory.
    fn enforce_bound(&mut self) {
        while self.pending_rows() > self.max_rows {
            let Some(oldest) = self.unwritten.pop_front() else { break };
            let rows = oldest.rows() as u64;
            let (wal_ticks, wal_rows) = oldest.segment.as_ref().map_or((0, 0), |s| (s.frames, s.rows));
            let (lost_rows, lost_ticks) =
                (rows - wal_rows.min(rows), oldest.ticks - wal_ticks.min(oldest.ticks));
            self.stats.dropped_rows += rows;
            self.stats.lost_rows += lost_rows;
            self.stats.lost_ticks += lost_ticks;
            tracing::warn!(
                start_ms = oldest.start_ms,
                rows,
                in_wal_rows = rows - lost_rows,
                lost_rows,
                lost_ticks,
                dropped_rows = self.stats.dropped_rows,
                total_lost_rows = self.stats.lost_rows,
                segment = oldest.segment.as_ref().map(|s| s.path.display().to_string()).unwrap_or_default(),
                "buffer full while the disk refuses writes: dropped the oldest rows from memory; those in the WAL segment reach Parquet at the next start, the others are lost"
            );
        }
    }

    /// [`free_seq`] of this writer's host.
    fn free_seq(&self, start_ms: i64, from: u64) -> u64 {
        free_seq(&self.layout, &self.host, start_ms, from)
    }

    fn run_index(&mut self, uuid: &Text) -> usize {
        // A host has a handful of GPUs and sources hand out the same Arc
        // each tick, so a pointer comparison usually settles it.
        if let Some(i) = self.runs.iter().position(|r| Arc::ptr_eq(&r.uuid, uuid) || r.uuid == *uuid) {
            return i;
        }
        let (gpus, procs) = self.run_room;
        self.runs.push(GpuRun {
            uuid: uuid.clone(),
            gpus: Vec::with_capacity(gpus),
            procs: Vec::with_capacity(procs),
            tick_procs_from: 0,
        });
        self.runs.len() - 1
    }

    fn run(&mut self, uuid: &Text) -> &mut GpuRun {
        let i = self.run_index(uuid);
        &mut self.runs[i]
    }

    /// Closes the open file and writes every file held, oldest first: the
    /// raw tables, then their minute rollups ([`crate::rollup`]). When this
    /// returns `Ok`, every row pushed is durable on disk; on error the rows
    /// not written stay held (and in their WAL segments) for another try.
    pub fn close(&mut self) -> Result<(), WriteError> {
        let waiting = std::mem::take(&mut self.waiting_events);
        if !waiting.is_empty() {
            if self.open.is_some() {
                // No tick came after them: they go with the last file.
                if let Some(wal) = &mut self.wal {
                    let at = waiting.iter().map(|e| e.ts).max().unwrap_or_default();
                    wal.append(at, TickRows { events: &waiting, ..TickRows::default() });
                }
                self.events.extend(waiting);
            } else {
                tracing::warn!(
                    events = waiting.len(),
                    "GPU events arrived before the first tick and are not recorded"
                );
            }
        }
        self.seal_open();
        let now = self.unwritten.back().map_or(0, |f| f.start_ms);
        self.write_unwritten(now)
    }

    /// Writes one closed file: one Parquet file per table that has rows,
    /// under the names chosen when it opened. Files of it already there
    /// (an earlier, partly failed try) are kept.
    fn write_closed(&mut self, file: &ClosedFile) -> Result<(), WriteError> {
        let (start, seq) = (file.start_ms, file.seq);
        let gpu_rows: usize = file.runs.iter().map(|r| r.gpus.len()).sum();
        let proc_rows: usize = file.runs.iter().map(|r| r.procs.len()).sum();
        if gpu_rows > 0 {
            let rows = file.runs.iter().flat_map(|r| r.gpus.iter());
            let batch = gpu_samples::to_batch_from(rows, gpu_rows)
                .map_err(|source| WriteError::Batch { table: Table::GpuSamples, source })?;
            self.write(Table::GpuSamples, start, seq, &batch)?;
        }
        if proc_rows > 0 {
            let rows = file.runs.iter().flat_map(|r| r.procs.iter());
            let batch = proc_samples::to_batch_from(rows, proc_rows)
                .map_err(|source| WriteError::Batch { table: Table::ProcSamples, source })?;
            self.write(Table::ProcSamples, start, seq, &batch)?;
        }
        // The file's minute rollups, under the same (start, seq) name, so a
        // closed raw file and its rollups go together.
        let rollup = rollup::rollup(
            file.runs.iter().flat_map(|r| r.gpus.iter()),
            file.runs.iter().flat_map(|r| r.procs.iter()),
            &self.energy_carry,
        );
        if !rollup.gpu_minutes.is_empty() {
            let batch = gpu_minutes::to_batch(&rollup.gpu_minutes)
                .map_err(|source| WriteError::Batch { table: Table::GpuMinutes, source })?;
            self.write(Table::GpuMinutes, start, seq, &batch)?;
        }
        if !rollup.proc_minutes.is_empty() {
            let batch = proc_minutes::to_batch(&rollup.proc_minutes)
                .map_err(|source| WriteError::Batch { table: Table::ProcMinutes, source })?;
            self.write(Table::ProcMinutes, start, seq, &batch)?;
        }
        let alloc_minutes = rollup::alloc_minutes(&file.allocs);
        if !alloc_minutes.is_empty() {
            let batch = alloc_minutes::to_batch(&alloc_minutes)
                .map_err(|source| WriteError::Batch { table: Table::AllocMinutes, source })?;
            self.write(Table::AllocMinutes, start, seq, &batch)?;
        }
        if !file.events.is_empty() {
            let mut events = file.events.clone();
            gpu_events::sort(&mut events);
            let batch = gpu_events::to_batch(&events)
                .map_err(|source| WriteError::Batch { table: Table::GpuEvents, source })?;
            self.write(Table::GpuEvents, start, seq, &batch)?;
        }
        self.energy_carry = rollup.carry;
        self.stats.gpu_rows += gpu_rows as u64;
        self.stats.proc_rows += proc_rows as u64;
        Ok(())
    }

    /// Writes the rows of the file (`start_ms`, `seq`) that a crash left in
    /// its WAL segment: the files [`RollingWriter::close`] would have
    /// written for it, with the same names, in (gpu_uuid, ts[, pid]) order,
    /// the `alloc_minutes` of its allocations `allocs` and the `gpu_events`
    /// of its `events`.
    /// Files of it that exist already are kept as they are (they were
    /// written before the crash), so replaying the same rows again writes
    /// nothing. An open file is closed first. When this returns `Ok`, the
    /// rows are durable on disk.
    pub fn replay(
        &mut self,
        start_ms: i64,
        seq: u64,
        gpus: Vec<GpuSample>,
        procs: Vec<ProcSample>,
        allocs: Vec<AllocSample>,
        events: Vec<GpuEvent>,
    ) -> Result<(), WriteError> {
        self.close()?;
        if gpus.is_empty() && procs.is_empty() && allocs.is_empty() && events.is_empty() {
            return Ok(());
        }
        let mut gpus = gpus;
        let mut procs = procs;
        gpu_samples::sort(&mut gpus);
        proc_samples::sort(&mut procs);
        // A segment holds each tick once; a row twice would be a bug, and
        // must not become a duplicate in Parquet.
        gpus.dedup_by(|b, a| a.gpu_uuid == b.gpu_uuid && a.ts == b.ts);
        procs.dedup_by(|b, a| a.gpu_uuid == b.gpu_uuid && a.ts == b.ts && a.pid == b.pid);
        for row in gpus {
            let uuid = row.gpu_uuid.clone();
            self.run(&uuid).gpus.push(row);
        }
        for row in procs {
            let uuid = row.gpu_uuid.clone();
            self.run(&uuid).procs.push(row);
        }
        let mut runs = std::mem::take(&mut self.runs);
        runs.sort_by(|a, b| a.uuid.cmp(&b.uuid));
        let mut events = events;
        events.dedup();
        self.unwritten.push_back(ClosedFile { start_ms, seq, runs, allocs, events, ticks: 0, segment: None });
        self.write_unwritten(start_ms)
    }

    fn write(
        &mut self,
        table: Table,
        start_ms: i64,
        seq: u64,
        batch: &RecordBatch,
    ) -> Result<(), WriteError> {
        // The name was free when the file opened (see `free_seq`), so a file
        // there now holds these very rows: written before a crash that left
        // the WAL segment behind, or by an earlier try of this close. Never
        // write it twice.
        let path = self.layout.file_path(table, &self.host, start_ms, seq);
        if path.exists() {
            return Ok(());
        }
        write_file_atomic(&path, table, &self.host, batch)?;
        self.stats.files += 1;
        Ok(())
    }
}

/// Bytes of the WAL segments (`.wal` files) in the host's WAL folder
/// `dir`; 0 when it cannot be read.
pub fn wal_bytes_in(dir: &std::path::Path) -> u64 {
    fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == apron_schemas::paths::WAL_EXTENSION))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Writes `batch` as a complete Parquet file of `table` at `path`, through
/// [`durable::write_file`] (temporary name, fsync, rename, fsync of the
/// folder). When this returns `Ok`, the file is durable and complete; on
/// error no file is left at `path` or at the temporary name.
pub fn write_file_atomic(
    path: &Path,
    table: Table,
    host: &str,
    batch: &RecordBatch,
) -> Result<(), WriteError> {
    durable::write_file(path, |file, tmp| {
        let parquet_err = |source| WriteError::Parquet { path: tmp.to_path_buf(), source };
        let mut writer = table_writer(file, tmp, table, host)?;
        writer.write(batch).map_err(parquet_err)?;
        writer.into_inner().map_err(parquet_err)
    })
}

/// A Parquet writer of `table`'s rows recorded on `host` into `file` (at
/// the temporary name `tmp`), with the settings every apron file has
/// ([`parquet_props::writer_properties`]).
pub(crate) fn table_writer(
    file: File,
    tmp: &Path,
    table: Table,
    host: &str,
) -> Result<ArrowWriter<File>, WriteError> {
    let props = parquet_props::writer_properties(table, host);
    ArrowWriter::try_new(file, table.schema(), Some(props))
        .map_err(|source| WriteError::Parquet { path: tmp.to_path_buf(), source })
}

/// The first counter from `from` on that names no file of any table and no
/// WAL segment of `host` for a file starting at `start_ms`: a restart
/// within the same millisecond, or a clock that jumped back, never reuses a
/// name (and an import moving its files into place picks names with it).
pub fn free_seq(layout: &DataLayout, host: &str, start_ms: i64, from: u64) -> u64 {
    let taken = |seq| {
        layout.wal_segment_path(host, start_ms, seq).exists()
            || Table::ALL.into_iter().any(|t| layout.file_path(t, host, start_ms, seq).exists())
    };
    (from..).find(|&seq| !taken(seq)).unwrap_or(from)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::fs::File;
    use std::path::PathBuf;

    use apron_schemas::paths::temp_path;

    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::serialized_reader::ReadOptionsBuilder;

    fn gpu(ts: i64, uuid: &str, util: Option<i32>) -> GpuSample {
        GpuSample { ts, gpu_uuid: uuid.into(), interval_ms: 1_000, gpu_util_pct: util, ..Default::default() }
    }

    fn tick(ts: i64) -> Tick {
        Tick { gpus: vec![gpu(ts, "GPU-b", Some(7)), gpu(ts, "GPU-a", None)], ..Default::default() }
    }

    fn parquet_files(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).expect("readable") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn rotates_into_complete_sorted_files_with_declared_order() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let mut w = RollingWriter::new(layout, "node01", Duration::from_secs(600)).expect("valid host");
        // 2026-11-30T00:09:58Z .. 00:10:01Z: crosses one 10-minute boundary.
        let base = 1_796_083_200_000 - 86_400_000 + 598_000;
        for s in 0..4 {
            w.push(base + s * 1_000, &tick(base + s * 1_000)).expect("push");
        }
        w.close().expect("close");
        let files = parquet_files(&tmp.path().join("gpu_samples"));
        assert_eq!(files.len(), 2, "{files:?}");
        assert!(files.iter().all(|f| f.extension().is_some_and(|e| e == "parquet")));
        // Each closed file comes with its gpu_minutes rollup.
        assert_eq!(w.stats(), WriterStats { files: 4, gpu_rows: 8, proc_rows: 0, ..Default::default() });

        let reader = SerializedFileReader::new_with_options(
            File::open(&files[0]).expect("open"),
            ReadOptionsBuilder::new().with_page_index().build(),
        )
        .expect("parquet");
        let meta = reader.metadata();
        assert_eq!(meta.file_metadata().num_rows(), 4);
        let rg = meta.row_group(0);
        let sorting = rg.sorting_columns().expect("sorting columns declared");
        assert_eq!(sorting[0].column_idx, 1); // gpu_uuid
        assert_eq!(sorting[1].column_idx, 0); // ts
        assert!(meta.column_index().is_some(), "page index written");
        let kv = meta.file_metadata().key_value_metadata().expect("kv metadata");
        assert!(kv.iter().any(|k| k.key == apron_schemas::SCHEMA_VERSION_KEY));
    }

    #[test]
    fn a_failed_write_keeps_the_rows_and_leaves_no_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let blocker = tmp.path().join("gpu_samples");
        fs::write(&blocker, b"a file where a folder should be").expect("write");
        let mut w =
            RollingWriter::new(DataLayout::new(tmp.path()), "n", Duration::from_secs(600)).expect("host");
        w.push(0, &tick(0)).expect("push");
        let err = w.close().expect_err("cannot create the partition folder");
        assert!(err.to_string().starts_with("cannot create folder"), "{err}");
        assert_eq!(w.pending_rows(), 2);
        fs::remove_file(&blocker).expect("unblock");
        w.close().expect("close after the cause is gone");
        assert_eq!(w.pending_rows(), 0);
        assert_eq!(parquet_files(&tmp.path().join("gpu_samples")).len(), 1);
    }

    #[test]
    fn each_closed_file_has_its_rollups_under_the_same_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let mut w = RollingWriter::new(layout.clone(), "n", Duration::from_secs(60)).expect("host");
        // 00:00:58 .. 00:01:01 with the energy counter: two files, and the
        // second file's first sample takes its energy from the first file's
        // last counter value.
        let base = 1_796_083_200_000 + 58_000;
        for s in 0..4 {
            let ts = base + s * 1_000;
            let g = GpuSample {
                energy_mj: Some(10_000 + s * 250),
                power_mw: Some(1),
                ..gpu(ts, "GPU-a", Some(50))
            };
            let p = ProcSample {
                ts,
                gpu_uuid: "GPU-a".into(),
                pid: 7,
                interval_ms: 1_000,
                used_mem_bytes: Some(1 << 30),
                ..Default::default()
            };
            w.push(ts, &Tick { gpus: vec![g], procs: vec![p], ..Default::default() }).expect("push");
        }
        w.close().expect("close");
        let name = |t: Table| -> Vec<String> {
            parquet_files(&layout.table_dir(t))
                .iter()
                .map(|f| f.file_name().expect("name").to_string_lossy().into_owned())
                .collect()
        };
        let raw = name(Table::GpuSamples);
        assert_eq!(raw.len(), 2);
        assert_eq!(name(Table::ProcSamples), raw);
        assert_eq!(name(Table::GpuMinutes), raw);
        assert_eq!(name(Table::ProcMinutes), raw);

        use arrow::array::AsArray;
        use arrow::datatypes::Float64Type;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let second = parquet_files(&layout.table_dir(Table::GpuMinutes)).pop().expect("a file");
        let batch = ParquetRecordBatchReaderBuilder::try_new(File::open(second).expect("open"))
            .expect("parquet")
            .build()
            .expect("reader")
            .next()
            .expect("a batch")
            .expect("decodes");
        let energy = batch.column_by_name("energy_j").expect("energy_j").as_primitive::<Float64Type>();
        let held = batch.column_by_name("proc_held").expect("proc_held").as_boolean();
        // Two samples, each 250 mJ after the one before.
        assert_eq!((batch.num_rows(), energy.value(0), held.value(0)), (1, 0.5, true));
    }

    /// A data folder whose table folder is blocked by a plain file: every
    /// write fails until the file is removed (root ignores permissions, so a
    /// read-only folder would not do in a test run as root).
    fn blocked_layout() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let blocker = tmp.path().join("gpu_samples");
        fs::write(&blocker, b"in the way").expect("write");
        (tmp, blocker)
    }

    #[test]
    fn while_the_disk_refuses_rows_are_held_then_written_in_order() {
        let (tmp, blocker) = blocked_layout();
        let mut w =
            RollingWriter::new(DataLayout::new(tmp.path()), "n", Duration::from_secs(10)).expect("host");
        // 30 ticks at 1 s over three 10-second files; the first two closes fail.
        let mut errors = 0;
        for s in 0..30 {
            if w.push(s * 1_000, &tick(s * 1_000)).is_err() {
                errors += 1;
            }
        }
        assert_eq!(errors, 2, "each rotation tried once (the retry interval is 10 s)");
        assert_eq!(w.pending_rows(), 60, "no tick lost while the disk refused");
        assert_eq!(w.stats().files, 0);
        fs::remove_file(&blocker).expect("unblock");
        // The next push past the retry interval catches up, oldest first.
        w.push(30_000, &tick(30_000)).expect("the disk takes writes again");
        assert_eq!(w.pending_rows(), 2, "only the new open file is held");
        w.close().expect("close");
        let raw: Vec<_> = parquet_files(tmp.path())
            .into_iter()
            .filter(|p| p.starts_with(tmp.path().join("gpu_samples")))
            .collect();
        assert_eq!(raw.len(), 4);
        assert_eq!(w.stats().gpu_rows, 62);
        assert_eq!(w.stats().dropped_rows, 0);
    }

    #[test]
    fn a_disk_that_stays_full_drops_the_oldest_rows_and_counts_them() {
        let (tmp, _blocker) = blocked_layout();
        let mut w = RollingWriter::new(DataLayout::new(tmp.path()), "n", Duration::from_secs(10))
            .expect("host")
            .with_max_rows(45);
        for s in 0..40 {
            let _ = w.push(s * 1_000, &tick(s * 1_000));
        }
        // Files of 20 rows each: [0,10) [10,20) [20,30) closed, [30,40) open.
        // 80 rows exceed 45: the two oldest files (40 rows) are dropped.
        assert_eq!(w.stats().dropped_rows, 40);
        assert_eq!(w.pending_rows(), 40);
        assert!(w.pending_rows() <= 45);
    }

    /// [`a_disk_that_stays_full_drops_the_oldest_rows_and_counts_them`]
    /// with a WAL that works, or that cannot even create its segments.
    fn full_disk_with_wal(wal_works: bool) -> (RollingWriter, tempfile::TempDir) {
        let (tmp, _blocker) = blocked_layout();
        if !wal_works {
            fs::write(tmp.path().join("wal"), b"in the way").expect("write");
        }
        let mut w = RollingWriter::new(DataLayout::new(tmp.path()), "n", Duration::from_secs(10))
            .expect("host")
            .with_wal(Duration::from_secs(1))
            .expect("wal")
            .with_max_rows(45);
        for s in 0..40 {
            let _ = w.push(s * 1_000, &tick(s * 1_000));
        }
        (w, tmp)
    }

    #[test]
    fn dropped_rows_a_segment_holds_are_not_lost() {
        let (w, tmp) = full_disk_with_wal(true);
        let s = w.stats();
        assert_eq!((s.dropped_rows, s.lost_rows, s.lost_ticks), (40, 0, 0));
        assert_eq!(w.held(), Held { rows: 40, ticks: 20, wal_rows: 40, wal_ticks: 20 });
        // The dropped files' segments stay for the next start.
        let segs = crate::wal::format::host_segments(&DataLayout::new(tmp.path()), "n").expect("list");
        assert_eq!(segs.len(), 4);
    }

    #[test]
    fn dropped_rows_no_segment_holds_are_counted_lost() {
        let (w, _tmp) = full_disk_with_wal(false);
        let s = w.stats();
        assert_eq!((s.dropped_rows, s.lost_rows, s.lost_ticks), (40, 40, 20));
        assert_eq!(w.held(), Held { rows: 40, ticks: 20, wal_rows: 0, wal_ticks: 0 });
    }

    #[test]
    fn a_symlink_at_a_temporary_name_is_not_written_through() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path().join("data"));
        let outside = tmp.path().join("outside");
        fs::write(&outside, b"mine").expect("write");
        let path = layout.file_path(Table::GpuSamples, "n", 0, 0);
        fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::os::unix::fs::symlink(&outside, temp_path(&path)).expect("symlink");
        let mut w = RollingWriter::new(layout, "n", Duration::from_secs(10)).expect("host");
        w.push(0, &tick(0)).expect("push");
        w.close().expect("close");
        assert_eq!(fs::read(&outside).expect("read"), b"mine");
        assert!(fs::symlink_metadata(&path).expect("written").file_type().is_file());
    }

    #[test]
    fn refusing_lasts_until_a_write_succeeds() {
        let (tmp, blocker) = blocked_layout();
        let mut w =
            RollingWriter::new(DataLayout::new(tmp.path()), "n", Duration::from_secs(10)).expect("host");
        for s in 0..15 {
            let _ = w.push(s * 1_000, &tick(s * 1_000));
        }
        // The close at 10 s failed; the pushes after it returned Ok without
        // writing anything.
        assert!(w.push(15_000, &tick(15_000)).is_ok());
        assert!(w.refusing(), "an Ok push that retried nothing is no success");
        fs::remove_file(&blocker).expect("unblock");
        w.push(20_000, &tick(20_000)).expect("the retry at the next close succeeds");
        assert!(!w.refusing());
    }
}
