//! One file of one host written as its rows arrive in the file's order
//! ((`gpu_uuid`, `ts`), each tick's processes by `pid`): how `simulate`
//! ([`crate::simulate`]) writes, so that memory holds a chunk of rows and
//! the compressed row group being built, never a file's rows.
//!
//! The raw tables are encoded chunk by chunk as the rows come (the Parquet
//! writer closes a row group at [`apron_schemas::parquet_props::MAX_ROW_GROUP_ROWS`]
//! rows, whatever the chunks); the minute rollups ([`crate::rollup`]) are
//! summed chunk by chunk, each chunk ending on a GPU-minute boundary so no
//! minute is split, and written when the file closes (a sixtieth of the
//! rows). Every table goes through [`durable::Staged`]: nothing appears
//! under a final name before the file is complete.
//!
//! The files are those the rolling writer ([`crate::writer`]) writes for
//! the same rows: the same names, tables, settings, row groups, sort order
//! and rollups; only where a row group's pages are cut may differ (the
//! encoder cuts pages within the batches it is given). The live recorder
//! keeps the rolling writer: its rows come tick by tick, every GPU at once,
//! and wait in memory (and in its WAL) until the file closes.

use std::fs::File;
use std::path::Path;

use apron_schemas::{
    DataLayout, GpuMinute, GpuSample, ProcMinute, ProcSample, Table, alloc_minutes, gpu_minutes, gpu_samples,
    proc_minutes, proc_samples,
};
use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;

use crate::durable::Staged;
use crate::rollup::{self, AllocMinutes, EnergyCarry, minute_of};
use crate::source::Tick;
use crate::write_error::WriteError;
use crate::writer::{WriterStats, table_writer, write_file_atomic};

/// GPU rows encoded at a time: enough that a batch costs little per row,
/// few enough that a chunk (with its process rows) is a few MB.
pub const CHUNK_ROWS: usize = 8_192;

/// The open file (start, seq) of one host, fed in the file's order.
#[derive(Debug)]
pub struct FileStream {
    layout: DataLayout,
    host: String,
    start_ms: i64,
    seq: u64,
    /// The raw tables being written, opened with their first rows.
    gpus: Option<TableStream>,
    procs: Option<TableStream>,
    /// Rows not yet encoded: whole GPU-minutes.
    pending_gpus: Vec<GpuSample>,
    pending_procs: Vec<ProcSample>,
    /// The rollups of the rows encoded so far, in file order.
    gpu_minutes: Vec<GpuMinute>,
    proc_minutes: Vec<ProcMinute>,
    /// The `alloc_minutes` of the allocations pushed so far.
    alloc_minutes: AllocMinutes,
    /// Each GPU's last sample before the pending rows.
    carry: EnergyCarry,
    stats: WriterStats,
}

impl FileStream {
    /// The file of `host` under `layout` named (`start_ms`, `seq`), a name
    /// no file or WAL segment has ([`crate::writer::free_seq`]); `carry`
    /// holds each GPU's last sample in the host's files before this one
    /// (for the energy of its first samples). Nothing is created on disk
    /// until rows come.
    pub fn new(layout: DataLayout, host: &str, start_ms: i64, seq: u64, carry: EnergyCarry) -> FileStream {
        FileStream {
            layout,
            host: host.to_owned(),
            start_ms,
            seq,
            gpus: None,
            procs: None,
            pending_gpus: Vec::with_capacity(CHUNK_ROWS + 64),
            pending_procs: Vec::new(),
            gpu_minutes: Vec::new(),
            proc_minutes: Vec::new(),
            alloc_minutes: AllocMinutes::new(),
            carry,
            stats: WriterStats::default(),
        }
    }

    /// Takes the rows of `tick`, which holds one GPU at one time, later in
    /// the file's order than every tick before it (a later time of the same
    /// GPU, or a GPU whose UUID sorts after); leaves `tick` empty. Rows in
    /// any other order make a file whose declared sort order is false.
    pub fn push(&mut self, tick: &mut Tick) -> Result<(), WriteError> {
        if self.pending_gpus.len() >= CHUNK_ROWS
            && let (Some(last), Some(next)) = (self.pending_gpus.last(), tick.gpus.first())
            && (last.gpu_uuid != next.gpu_uuid || minute_of(last.ts) != minute_of(next.ts))
        {
            self.flush()?;
        }
        debug_assert!(tick.gpus.windows(2).all(|w| w[0].gpu_uuid == w[1].gpu_uuid), "a tick of one GPU");
        // Within a tick a GPU's processes go by pid, as in every file.
        tick.procs.sort_by_key(|p| p.pid);
        self.pending_gpus.append(&mut tick.gpus);
        self.pending_procs.append(&mut tick.procs);
        for a in tick.allocations.drain(..) {
            self.alloc_minutes.add(&a);
        }
        Ok(())
    }

    /// Encodes the pending rows and adds their rollups.
    fn flush(&mut self) -> Result<(), WriteError> {
        if !self.pending_gpus.is_empty() {
            let batch = gpu_samples::to_batch(&self.pending_gpus)
                .map_err(|source| WriteError::Batch { table: Table::GpuSamples, source })?;
            self.table(Table::GpuSamples)?.write(&batch)?;
        }
        if !self.pending_procs.is_empty() {
            let batch = proc_samples::to_batch(&self.pending_procs)
                .map_err(|source| WriteError::Batch { table: Table::ProcSamples, source })?;
            self.table(Table::ProcSamples)?.write(&batch)?;
        }
        let rollup = rollup::rollup(&self.pending_gpus, &self.pending_procs, &self.carry);
        self.gpu_minutes.extend(rollup.gpu_minutes);
        self.proc_minutes.extend(rollup.proc_minutes);
        self.carry = rollup.carry;
        self.stats.gpu_rows += self.pending_gpus.len() as u64;
        self.stats.proc_rows += self.pending_procs.len() as u64;
        self.pending_gpus.clear();
        self.pending_procs.clear();
        Ok(())
    }

    /// The stream of raw `table`, opened (its temporary file created) on
    /// first use.
    fn table(&mut self, table: Table) -> Result<&mut TableStream, WriteError> {
        let slot = if table == Table::GpuSamples { &mut self.gpus } else { &mut self.procs };
        if slot.is_none() {
            let path = self.layout.file_path(table, &self.host, self.start_ms, self.seq);
            *slot = Some(TableStream::open(&path, table, &self.host)?);
        }
        Ok(slot.as_mut().expect("opened just above"))
    }

    /// Writes what is pending and publishes the file's tables, raw first,
    /// then their rollups, each complete and durable before the next; hands
    /// back what was written and the carry for the host's next file. When
    /// this returns `Ok`, every row pushed is durable on disk; on error no
    /// table of it that was not yet published is left, not even under a
    /// temporary name.
    pub fn finish(mut self) -> Result<(WriterStats, EnergyCarry), WriteError> {
        self.flush()?;
        for stream in [self.gpus.take(), self.procs.take()].into_iter().flatten() {
            stream.publish()?;
            self.stats.files += 1;
        }
        if !self.gpu_minutes.is_empty() {
            let batch = gpu_minutes::to_batch(&self.gpu_minutes)
                .map_err(|source| WriteError::Batch { table: Table::GpuMinutes, source })?;
            self.write_whole(Table::GpuMinutes, &batch)?;
        }
        if !self.proc_minutes.is_empty() {
            let batch = proc_minutes::to_batch(&self.proc_minutes)
                .map_err(|source| WriteError::Batch { table: Table::ProcMinutes, source })?;
            self.write_whole(Table::ProcMinutes, &batch)?;
        }
        let allocs = std::mem::take(&mut self.alloc_minutes).finish();
        if !allocs.is_empty() {
            let batch = alloc_minutes::to_batch(&allocs)
                .map_err(|source| WriteError::Batch { table: Table::AllocMinutes, source })?;
            self.write_whole(Table::AllocMinutes, &batch)?;
        }
        Ok((self.stats, self.carry))
    }

    fn write_whole(&mut self, table: Table, batch: &RecordBatch) -> Result<(), WriteError> {
        let path = self.layout.file_path(table, &self.host, self.start_ms, self.seq);
        write_file_atomic(&path, table, &self.host, batch)?;
        self.stats.files += 1;
        Ok(())
    }
}

/// One table's Parquet file being written under its temporary name.
#[derive(Debug)]
struct TableStream {
    staged: Staged,
    writer: ArrowWriter<File>,
}

impl TableStream {
    fn open(path: &Path, table: Table, host: &str) -> Result<TableStream, WriteError> {
        let (staged, file) = Staged::create(path)?;
        let writer = table_writer(file, staged.tmp(), table, host)?;
        Ok(TableStream { staged, writer })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), WriteError> {
        self.writer
            .write(batch)
            .map_err(|source| WriteError::Parquet { path: self.staged.tmp().to_path_buf(), source })
    }

    /// Closes the Parquet file (its last row group and footer) and makes it
    /// durable under its final name.
    fn publish(self) -> Result<(), WriteError> {
        let TableStream { staged, writer } = self;
        let file = writer
            .into_inner()
            .map_err(|source| WriteError::Parquet { path: staged.tmp().to_path_buf(), source })?;
        staged.publish(file)
    }
}
