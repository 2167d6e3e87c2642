//! Compaction: merges the many small files of a closed day into one file
//! per (table, date, host), sorted like every apron file, so that a month
//! of data is a few dozen files rather than thousands.
//!
//! A day is **closed** when it is before the current UTC date
//! ([`is_closed`]): the recorder writes only today's partition, so a day
//! before today gets no new file (unless a write that failed at midnight
//! is retried; see below). Data simulated into the past is closed at once.
//!
//! How a partition `DATA/<table>/date=D/host=H/` is replaced, so that a
//! reader listing it sees every row exactly once, either in the old files
//! or in the merged one, never both and never neither:
//!
//! 1. the merged file is built in a hidden sibling folder
//!    (`date=D/.compact-H-<pid>/`, see
//!    [`apron_schemas::DataLayout::compact_staging_dir`]), by a streaming
//!    k-way merge of the sorted input files (one record batch per input in
//!    memory, never the whole day), then synced; files apron did not write
//!    (another tool's, with another schema) are not merged but hard-linked
//!    into the new folder as they are;
//! 2. the two folders are swapped in one step with Linux
//!    `renameat2(RENAME_EXCHANGE)`, and the day folder is synced;
//! 3. files that appeared in the old folder after it was listed (a late
//!    write of that day) are moved into the new one, then the old folder,
//!    now under the hidden name, is deleted.
//!
//! The old folder is removed at once. A reader must therefore list a
//! partition as the analysis CLI does (`apron_analyze`'s
//! `session::steady`): note which folder (device, inode, birth time) is at
//! the path before and after listing it, and list again when they differ
//! (the birth time tells a new folder from a removed one whose inode
//! number it took). A listing
//! that opened the old folder before the swap and read it after can
//! otherwise come back short without an error: the old folder emptied, or
//! the names read from it looked up by path in the new folder, where the
//! local object store skips them as not found. A reader whose listing was
//! steady may still find a file gone when it opens it (`NotFound`): it must
//! list again too (`apron sql` runs the query again). Keeping the old
//! folder for a while instead would cure only the first of those two
//! failures, and only for readers that look again on `NotFound`, at the
//! cost of a second copy of every compacted day on disk; the check above
//! cures both. A partition with fewer than two apron files is left
//! alone. Merging only concatenates rows in order: rollup rows of one
//! GPU-minute split across files stay two rows (see [`apron_store::rollup`]).
//! On a file system without `RENAME_EXCHANGE` compaction fails and leaves
//! every partition as it was.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use apron_schemas::folders::subfolders;
use apron_schemas::paths::{
    COMPACT_STAGING_PREFIX, is_data_file_name, parse_date_dir_name, parse_host_dir_name,
    parse_wal_segment_name,
};
use apron_schemas::{DataLayout, TABLE_KEY, Table, parquet_props};
use apron_store::durable;
use arrow::array::RecordBatch;
use arrow::compute::SortOptions;
use arrow::compute::interleave_record_batch;
use arrow::error::ArrowError;
use arrow::row::{OwnedRow, RowConverter, Rows, SortField};
use chrono::NaiveDate;
use nix::fcntl::{RenameFlags, renameat2};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::errors::ParquetError;

use crate::data_lock::DataLock;
use crate::maintenance_error::MaintenanceError;

/// Rows decoded at a time from each input file.
const READ_BATCH_ROWS: usize = 1_024;

/// Rows gathered before they are handed to the Parquet writer.
const WRITE_BATCH_ROWS: usize = 8_192;

/// Whether the day `date` is closed on `today` (UTC): strictly before it.
pub fn is_closed(date: NaiveDate, today: NaiveDate) -> bool {
    date < today
}

/// A partition that was merged into one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// Its table.
    pub table: Table,
    /// Its day.
    pub date: NaiveDate,
    /// Its host.
    pub host: String,
    /// Files merged (the merged file replaces them all).
    pub files: usize,
    /// Rows in the merged file.
    pub rows: u64,
    /// The merged file.
    pub path: PathBuf,
}

/// Compacts every closed day (before `today`) of every table, for `host`
/// only or for every host when `None`. `now_ms` names the merged files.
/// Also clears staging folders an interrupted run left behind (the lock
/// says nobody else is compacting). When this returns `Ok`, every partition
/// listed is merged, durably.
pub fn compact(
    layout: &DataLayout,
    host: Option<&str>,
    today: NaiveDate,
    now_ms: i64,
    _lock: &DataLock,
) -> Result<Vec<Compacted>, MaintenanceError> {
    let mut out = Vec::new();
    for table in Table::ALL {
        let Some(days) = subfolders(&layout.table_dir(table))? else { continue };
        for (name, date_dir) in days {
            let Some(date) = parse_date_dir_name(&name) else { continue };
            if !is_closed(date, today) {
                continue;
            }
            for (host_name, path) in subfolders(&date_dir)?.unwrap_or_default() {
                if host_name.starts_with(COMPACT_STAGING_PREFIX) {
                    fs::remove_dir_all(&path).map_err(MaintenanceError::io("remove the leftover", &path))?;
                    continue;
                }
                let Some(h) = parse_host_dir_name(&host_name) else { continue };
                if host.is_some_and(|want| want != h) {
                    continue;
                }
                if let Some(done) = compact_partition(layout, table, date, h, now_ms)? {
                    out.push(done);
                }
            }
        }
    }
    Ok(out)
}

/// A file of the partition, by name.
#[derive(Debug)]
struct Entry {
    name: String,
    path: PathBuf,
}

/// The regular files of `dir`, sorted by name.
fn files_of(dir: &Path) -> Result<Vec<Entry>, MaintenanceError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(MaintenanceError::io("list", dir))? {
        let entry = entry.map_err(MaintenanceError::io("list", dir))?;
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            out.push(Entry { name: entry.file_name().to_string_lossy().into_owned(), path: entry.path() });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Whether `host`'s write-ahead log holds a segment of a file that starts
/// on `date` (rows the next start of the recorder turns into files).
fn awaits_recovery(layout: &DataLayout, host: &str, date: NaiveDate) -> Result<bool, MaintenanceError> {
    let dir = layout.wal_dir(host);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(MaintenanceError::Io { op: "list", path: dir, source: e }),
    };
    for entry in entries {
        let entry = entry.map_err(MaintenanceError::io("list", &dir))?;
        let name = entry.file_name();
        let Some((start_ms, _)) = parse_wal_segment_name(&name.to_string_lossy()) else { continue };
        if chrono::DateTime::from_timestamp_millis(start_ms).is_some_and(|t| t.date_naive() == date) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether `path` is a file apron wrote for `table`: it says so in its
/// metadata and has the table's columns. Other files (another tool's, or
/// damaged) are carried over untouched rather than merged.
fn is_apron_file(path: &Path, table: Table) -> bool {
    let Ok(file) = File::open(path) else { return false };
    let Ok(builder) = ParquetRecordBatchReaderBuilder::try_new(file) else { return false };
    let meta = builder.metadata().file_metadata();
    let tagged = meta
        .key_value_metadata()
        .is_some_and(|kv| kv.iter().any(|e| e.key == TABLE_KEY && e.value.as_deref() == Some(table.name())));
    let canonical = table.schema();
    let fields = builder.schema().fields();
    tagged
        && fields.len() == canonical.fields().len()
        && fields.iter().zip(canonical.fields()).all(|(a, b)| {
            a.name() == b.name() && a.data_type() == b.data_type() && a.is_nullable() == b.is_nullable()
        })
}

fn compact_partition(
    layout: &DataLayout,
    table: Table,
    date: NaiveDate,
    host: &str,
    now_ms: i64,
) -> Result<Option<Compacted>, MaintenanceError> {
    if awaits_recovery(layout, host, date)? {
        // A crash left rows of that day in the WAL; recovery will write them
        // under their own names, which must not be merged away first.
        return Ok(None);
    }
    let dir = layout.partition_dir(table, date, host);
    let listed = files_of(&dir)?;
    if listed.iter().filter(|e| is_data_file_name(&e.name)).count() < 2 {
        // Compacted already (or a single file): not even a footer to read.
        return Ok(None);
    }
    let (mut inputs, mut carried) = (Vec::new(), Vec::new());
    for e in listed {
        if e.name.starts_with('.') {
            // A temporary file of a write that crashed (or that is being
            // retried right now: its rename will fail and it will write
            // again, into the new folder).
            continue;
        }
        if is_data_file_name(&e.name) && is_apron_file(&e.path, table) {
            inputs.push(e);
        } else {
            carried.push(e);
        }
    }
    if inputs.len() < 2 {
        return Ok(None);
    }
    let staging = layout.compact_staging_dir(table, date, host, std::process::id());
    // `symlink_metadata`: a leftover is removed whatever it is, and a
    // symlink only as a link (never the folder it points to); the folder is
    // then created new, so nothing planted there is written into.
    if fs::symlink_metadata(&staging).is_ok() {
        let removed = if fs::symlink_metadata(&staging).is_ok_and(|m| m.is_dir()) {
            fs::remove_dir_all(&staging)
        } else {
            fs::remove_file(&staging)
        };
        removed.map_err(MaintenanceError::io("remove the leftover", &staging))?;
    }
    apron_store::create::create_dir_new(&staging).map_err(MaintenanceError::io("create folder", &staging))?;
    let result = build_and_swap(&dir, &staging, table, date, host, now_ms, &inputs, &carried);
    if result.is_err() {
        // Before the swap the staging folder holds only the unfinished
        // merge; after it, the old files whose rows are all in the new
        // one. Either way it can go; an error here would hide the real one.
        let _ = fs::remove_dir_all(&staging);
    }
    let (path, rows) = result?;
    Ok(Some(Compacted { table, date, host: host.to_owned(), files: inputs.len(), rows, path }))
}

#[allow(clippy::too_many_arguments)]
fn build_and_swap(
    dir: &Path,
    staging: &Path,
    table: Table,
    date: NaiveDate,
    host: &str,
    now_ms: i64,
    inputs: &[Entry],
    carried: &[Entry],
) -> Result<(PathBuf, u64), MaintenanceError> {
    // A name none of the old files has, so no reader takes the merged file
    // for one it listed before.
    let mut at = now_ms;
    let mut name = DataLayout::compacted_file_name(date, at);
    while inputs.iter().chain(carried).any(|e| e.name == name) {
        at += 1;
        name = DataLayout::compacted_file_name(date, at);
    }
    let rows = merge(inputs, &staging.join(&name), table, host)?;
    for e in carried {
        let to = staging.join(&e.name);
        fs::hard_link(&e.path, &to)
            .map_err(MaintenanceError::io("link into the compacted folder", &e.path))?;
    }
    sync_dir(staging)?;

    let date_dir = dir.parent().expect("a partition folder is inside its day folder");
    let day = File::open(date_dir).map_err(MaintenanceError::io("open", date_dir))?;
    let staging_name = staging.file_name().expect("the staging folder has a name");
    let host_name = dir.file_name().expect("the partition folder has a name");
    renameat2(&day, staging_name, &day, host_name, RenameFlags::RENAME_EXCHANGE).map_err(|e| {
        MaintenanceError::Io { op: "swap in the compacted folder", path: dir.to_path_buf(), source: e.into() }
    })?;
    sync_dir(date_dir)?;

    // Files written into the partition after it was listed are in the old
    // folder now: move them into the new one rather than lose them.
    let mut moved = false;
    for e in files_of(staging)? {
        let known = inputs.iter().chain(carried).any(|k| k.name == e.name);
        if !known && !e.name.starts_with('.') {
            fs::rename(&e.path, dir.join(&e.name))
                .map_err(MaintenanceError::io("move the late file", &e.path))?;
            moved = true;
        }
    }
    if moved {
        sync_dir(dir)?;
    }
    fs::remove_dir_all(staging).map_err(MaintenanceError::io("remove the replaced folder", staging))?;
    sync_dir(date_dir)?;
    Ok((dir.join(&name), rows))
}

/// One input file being merged: its current batch, the batch's sort keys,
/// and the next row to take.
struct Cursor {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
    batch: RecordBatch,
    keys: Rows,
    pos: usize,
    /// Index of `batch` among the batches the pending output rows refer to.
    slot: usize,
}

/// Sort keys of a batch, checking they are in order (the merge relies on
/// each input being sorted).
struct Keys<'a> {
    converter: &'a RowConverter,
    columns: Vec<usize>,
}

impl Keys<'_> {
    fn of(
        &self,
        batch: &RecordBatch,
        path: &Path,
        after: Option<&OwnedRow>,
    ) -> Result<Rows, MaintenanceError> {
        let cols: Vec<_> = self.columns.iter().map(|&i| batch.column(i).clone()).collect();
        let keys = self.converter.convert_columns(&cols).map_err(arrow_err("read", path))?;
        let first_in_order = match (after, keys.num_rows()) {
            (Some(prev), n) if n > 0 => prev.row() <= keys.row(0),
            _ => true,
        };
        let in_order = first_in_order && (1..keys.num_rows()).all(|i| keys.row(i - 1) <= keys.row(i));
        if !in_order {
            return Err(MaintenanceError::Parquet {
                op: "merge",
                path: path.to_path_buf(),
                source: ParquetError::General(
                    "rows are not in the order its metadata declares; left as is".into(),
                ),
            });
        }
        Ok(keys)
    }
}

fn arrow_err(op: &'static str, path: &Path) -> impl FnOnce(ArrowError) -> MaintenanceError {
    let path = path.to_path_buf();
    move |e| MaintenanceError::Parquet { op, path, source: ParquetError::ArrowError(e.to_string()) }
}

fn parquet_err(op: &'static str, path: &Path) -> impl FnOnce(ParquetError) -> MaintenanceError {
    let path = path.to_path_buf();
    move |source| MaintenanceError::Parquet { op, path, source }
}

/// The next non-empty batch of `reader`.
fn next_batch(
    reader: &mut ParquetRecordBatchReader,
    path: &Path,
) -> Result<Option<RecordBatch>, MaintenanceError> {
    for batch in reader.by_ref() {
        let batch = batch.map_err(arrow_err("read", path))?;
        if batch.num_rows() > 0 {
            return Ok(Some(batch));
        }
    }
    Ok(None)
}

/// Merges the sorted `inputs` into one sorted, synced file at `out`;
/// returns its rows.
fn merge(inputs: &[Entry], out: &Path, table: Table, host: &str) -> Result<u64, MaintenanceError> {
    let schema = table.schema();
    let columns: Vec<usize> = table
        .sort_columns()
        .iter()
        .map(|c| schema.index_of(c).expect("sort columns are in the table's schema"))
        .collect();
    let options = SortOptions { descending: false, nulls_first: false };
    let fields = columns
        .iter()
        .map(|&i| SortField::new_with_options(schema.field(i).data_type().clone(), options))
        .collect();
    let converter = RowConverter::new(fields).map_err(arrow_err("merge", out))?;
    let keys = Keys { converter: &converter, columns };

    let mut arena: Vec<RecordBatch> = Vec::new();
    let mut cursors: Vec<Cursor> = Vec::new();
    for e in inputs {
        let file = File::open(&e.path).map_err(MaintenanceError::io("open", &e.path))?;
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.with_batch_size(READ_BATCH_ROWS).build())
            .map_err(parquet_err("read", &e.path))?;
        if let Some(batch) = next_batch(&mut reader, &e.path)? {
            let k = keys.of(&batch, &e.path, None)?;
            arena.push(batch.clone());
            cursors.push(Cursor {
                path: e.path.clone(),
                reader,
                batch,
                keys: k,
                pos: 0,
                slot: arena.len() - 1,
            });
        }
    }

    let file = apron_store::create::create_new(out).map_err(MaintenanceError::io("create", out))?;
    let props = parquet_props::writer_properties(table, host);
    let mut writer =
        ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_err("write", out))?;
    let mut pending: Vec<(usize, usize)> = Vec::with_capacity(WRITE_BATCH_ROWS);
    let mut rows = 0u64;
    let flush = |pending: &mut Vec<(usize, usize)>,
                 arena: &mut Vec<RecordBatch>,
                 cursors: &mut [Cursor],
                 writer: &mut ArrowWriter<File>|
     -> Result<(), MaintenanceError> {
        if !pending.is_empty() {
            let refs: Vec<&RecordBatch> = arena.iter().collect();
            let merged = interleave_record_batch(&refs, pending).map_err(arrow_err("merge", out))?;
            let merged = RecordBatch::try_new(schema.clone(), merged.columns().to_vec())
                .map_err(arrow_err("merge", out))?;
            writer.write(&merged).map_err(parquet_err("write", out))?;
            pending.clear();
        }
        // Keep only the batches the cursors still read from.
        arena.clear();
        for c in cursors.iter_mut() {
            arena.push(c.batch.clone());
            c.slot = arena.len() - 1;
        }
        Ok(())
    };

    loop {
        // The cursor with the smallest key, and the runner-up: rows of the
        // smallest are taken in a run until they pass the runner-up (inputs
        // are long runs of one GPU, so this is rarely more than a compare
        // per row).
        let (mut best, mut second): (Option<usize>, Option<usize>) = (None, None);
        for i in 0..cursors.len() {
            let key = cursors[i].keys.row(cursors[i].pos);
            match best {
                None => best = Some(i),
                Some(b) if key < cursors[b].keys.row(cursors[b].pos) => {
                    second = best;
                    best = Some(i);
                }
                Some(_) => {
                    if second.is_none_or(|s| key < cursors[s].keys.row(cursors[s].pos)) {
                        second = Some(i);
                    }
                }
            }
        }
        let Some(m) = best else { break };
        loop {
            if let Some(s) = second
                && cursors[m].keys.row(cursors[m].pos) > cursors[s].keys.row(cursors[s].pos)
            {
                break;
            }
            let c = &mut cursors[m];
            pending.push((c.slot, c.pos));
            c.pos += 1;
            rows += 1;
            let exhausted = c.pos == c.batch.num_rows();
            if exhausted {
                let last = c.keys.row(c.pos - 1).owned();
                let path = c.path.clone();
                match next_batch(&mut c.reader, &path)? {
                    Some(batch) => {
                        c.keys = keys.of(&batch, &path, Some(&last))?;
                        c.batch = batch;
                        c.pos = 0;
                        arena.push(c.batch.clone());
                        c.slot = arena.len() - 1;
                    }
                    None => {
                        // `pending` still refers to its batch through the
                        // arena; only the cursor goes.
                        cursors.swap_remove(m);
                        if pending.len() >= WRITE_BATCH_ROWS {
                            flush(&mut pending, &mut arena, &mut cursors, &mut writer)?;
                        }
                        break;
                    }
                }
            }
            if pending.len() >= WRITE_BATCH_ROWS {
                flush(&mut pending, &mut arena, &mut cursors, &mut writer)?;
            }
        }
    }
    flush(&mut pending, &mut arena, &mut cursors, &mut writer)?;
    let file = writer.into_inner().map_err(parquet_err("write", out))?;
    file.sync_all().map_err(MaintenanceError::io("sync", out))?;
    Ok(rows)
}

/// Makes renames and removals in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), MaintenanceError> {
    durable::sync_dir(dir).map_err(MaintenanceError::io("sync folder", dir))
}

#[cfg(test)]
mod tests;
