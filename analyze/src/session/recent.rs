//! The newest rows: what a running recorder holds in its write-ahead log and
//! has not yet closed into a Parquet file, so `pick` and `alerts` on a
//! recording host see the last seconds, not the last closed file.
//!
//! The WAL format and its reader belong to `apron_store::wal::format`; this module
//! turns the open segments into record batches with the partition columns
//! `date` and `host` added, shaped like the table's Parquet listing. It also
//! rolls each segment's rows up into `gpu_minutes` and `proc_minutes` rows
//! (with the writer's own [`apron_store::rollup`]), so reports over the
//! minute tables see the open file too. Those rollups start without the
//! previous file's last sample, so the first sample of each GPU takes its
//! energy from power × time (the recorder's rollup at close is exact).
//!
//! Each row is seen once: the rows of every segment read here come from the
//! log, and the Parquet files of the same name are hidden from the query's
//! listing, whenever they appear ([`crate::session::fence`]); a segment deleted
//! before it is read has become Parquet completely and is left to the
//! listing.

use std::io;
use std::sync::Arc;

use apron_schemas::test_pause;
use apron_schemas::{DataLayout, Table, gpu_minutes, gpu_samples, proc_minutes, proc_samples};
use apron_store::rollup::{EnergyCarry, alloc_minutes, rollup};
use apron_store::wal::format::{self as wal, SegmentRows, WalError};
use datafusion::arrow::array::{ArrayRef, Date32Array, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;

use crate::session::fence::Fence;

/// The rows of the open WAL segments, per raw table.
#[derive(Debug, Default)]
pub struct RecentRows {
    /// `gpu_samples` batches, one per segment with rows.
    pub gpu_samples: Vec<RecordBatch>,
    /// `proc_samples` batches, one per segment with rows.
    pub proc_samples: Vec<RecordBatch>,
    /// `gpu_minutes` rows of the segments, one batch per segment with rows.
    pub gpu_minutes: Vec<RecordBatch>,
    /// `proc_minutes` rows of the segments, one batch per segment with rows.
    pub proc_minutes: Vec<RecordBatch>,
    /// `alloc_minutes` rows of the segments, one batch per segment with rows.
    pub alloc_minutes: Vec<RecordBatch>,
    /// `gpu_events` rows of the segments, one batch per segment with events.
    pub gpu_events: Vec<RecordBatch>,
    /// What the query's listing must leave out so that no row is counted
    /// twice or missed ([`crate::session::fence`]).
    pub fence: Fence,
    /// The hosts with rows here, by UTC day (days since the epoch).
    pub hosts: std::collections::BTreeSet<(i32, String)>,
}

impl RecentRows {
    /// The batches of `table` (none for tables the WAL does not hold).
    pub fn batches(&self, table: Table) -> &[RecordBatch] {
        match table {
            Table::GpuSamples => &self.gpu_samples,
            Table::ProcSamples => &self.proc_samples,
            Table::GpuMinutes => &self.gpu_minutes,
            Table::ProcMinutes => &self.proc_minutes,
            Table::AllocMinutes => &self.alloc_minutes,
            Table::GpuEvents => &self.gpu_events,
        }
    }

    fn batches_mut(&mut self, table: Table) -> &mut Vec<RecordBatch> {
        match table {
            Table::GpuSamples => &mut self.gpu_samples,
            Table::ProcSamples => &mut self.proc_samples,
            Table::GpuMinutes => &mut self.gpu_minutes,
            Table::ProcMinutes => &mut self.proc_minutes,
            Table::AllocMinutes => &mut self.alloc_minutes,
            Table::GpuEvents => &mut self.gpu_events,
        }
    }
}

/// Reads every open segment under `layout`, shaping rows like the listing
/// of each table: `full_schema(table)` gives the listing's schema (file
/// columns then `date`, `host`). Unreadable segments are skipped with a
/// warning: a query is never refused because of the log.
pub fn read(layout: &DataLayout, full_schema: &dyn Fn(Table) -> SchemaRef) -> Result<RecentRows, ArrowError> {
    let mut out = RecentRows::default();
    let segments = match wal::all_segments(layout) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the write-ahead log; the newest rows are left out");
            return Ok(out);
        }
    };
    // Each host's newest segment, when a recorder is writing it, marks the
    // snapshot's end on that host: files named after it began later.
    let mut newest: std::collections::BTreeMap<&str, &wal::SegmentFile> = Default::default();
    for seg in &segments {
        newest.insert(&seg.host, seg); // listed in (host, start, seq) order
    }
    for seg in newest.values() {
        if is_live(&seg.path) {
            out.fence.saw_segment(&seg.host, seg.start_ms, seg.seq);
        }
    }
    test_pause::pause_at(test_pause::points::AFTER_WAL_LIST);
    for seg in segments {
        let mut rows = match wal::read_segment(&seg.path) {
            Ok(rows) => rows,
            Err(WalError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(file = %seg.path.display(), error = %e, "cannot read a WAL segment; its rows are left out");
                continue;
            }
        };
        let refused = rows.refuse_implausible();
        if refused > 0 {
            tracing::warn!(file = %seg.path.display(), refused,
                "a WAL segment holds rows at impossible times; they are left out");
        }
        if rows.damaged() && layout.file_path(Table::GpuSamples, &seg.host, seg.start_ms, seg.seq).exists() {
            // A damaged segment whose file was written before a crash: the
            // file holds every row, the segment only some.
            continue;
        }
        let SegmentRows { mut gpus, mut procs, allocs, mut events, .. } = rows;
        if gpus.is_empty() && procs.is_empty() && allocs.is_empty() && events.is_empty() {
            continue; // nothing to fence: its files, if any, hold its rows
        }
        out.fence.hide(Table::ALL.into_iter().map(|t| layout.file_path(t, &seg.host, seg.start_ms, seg.seq)));
        // Ticks come in time order; files (and the rollup) go by GPU first.
        gpu_samples::sort(&mut gpus);
        proc_samples::sort(&mut procs);
        let minutes = rollup(&gpus, &procs, &EnergyCarry::new());
        let mut add = |table: Table, batch: RecordBatch, ts_ms: Vec<i64>| -> Result<(), ArrowError> {
            if batch.num_rows() > 0 {
                let days: std::collections::BTreeSet<i32> = ts_ms
                    .iter()
                    .map(|ts| i32::try_from(ts.div_euclid(apron_schemas::time::DAY_MS)).unwrap_or(i32::MAX))
                    .collect();
                out.hosts.extend(days.into_iter().map(|day| (day, seg.host.clone())));
                let batch = with_partitions(batch, &ts_ms, &seg.host, full_schema(table))?;
                out.batches_mut(table).push(batch);
            }
            Ok(())
        };
        add(Table::GpuSamples, gpu_samples::to_batch(&gpus)?, gpus.iter().map(|r| r.ts).collect())?;
        add(Table::ProcSamples, proc_samples::to_batch(&procs)?, procs.iter().map(|r| r.ts).collect())?;
        let (gpu_rows, proc_rows) = (&minutes.gpu_minutes, &minutes.proc_minutes);
        add(
            Table::GpuMinutes,
            gpu_minutes::to_batch(gpu_rows)?,
            gpu_rows.iter().map(|r| r.minute).collect(),
        )?;
        add(
            Table::ProcMinutes,
            proc_minutes::to_batch(proc_rows)?,
            proc_rows.iter().map(|r| r.minute).collect(),
        )?;
        let alloc_rows = alloc_minutes(&allocs);
        add(
            Table::AllocMinutes,
            apron_schemas::alloc_minutes::to_batch(&alloc_rows)?,
            alloc_rows.iter().map(|r| r.minute).collect(),
        )?;
        apron_schemas::gpu_events::sort(&mut events);
        add(
            Table::GpuEvents,
            apron_schemas::gpu_events::to_batch(&events)?,
            events.iter().map(|r| r.ts).collect(),
        )?;
    }
    Ok(out)
}

/// A segment written to within [`LIVE_SEGMENT_WINDOW`] belongs to a
/// running recorder. A segment a crash left long ago (or one recovery keeps)
/// says nothing about which of the host's later files are new. A segment
/// already gone was live a moment ago: it has just closed.
fn is_live(path: &std::path::Path) -> bool {
    match std::fs::metadata(path).and_then(|m| m.modified()) {
        Ok(modified) => modified.elapsed().map_or(true, |age| age <= LIVE_SEGMENT_WINDOW),
        Err(_) => true,
    }
}

/// How recently a segment must have been written to count as a running
/// recorder's open segment: far longer than any tick interval.
const LIVE_SEGMENT_WINDOW: std::time::Duration = std::time::Duration::from_mins(15);

/// Appends `date` (the UTC day of each row's `ts_ms`) and `host` to `batch`,
/// and casts its columns to `schema`'s types (text is queried as
/// `Utf8View`, see [`crate::session::table_schema`]).
fn with_partitions(
    batch: RecordBatch,
    ts_ms: &[i64],
    host: &str,
    schema: SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    use apron_schemas::time::DAY_MS;
    let days: Date32Array = ts_ms.iter().map(|&ts| i32::try_from(ts.div_euclid(DAY_MS)).ok()).collect();
    let hosts = StringArray::from(vec![host; batch.num_rows()]);
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(days));
    columns.push(Arc::new(hosts));
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| cast(column, field.data_type()))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, columns)
}
