//! Recovery: on start, before recording, turns every WAL segment a crash
//! left behind into the Parquet files its open file would have become, then
//! deletes the segment.
//!
//! A segment's file name is its file's (start, seq), so the files are
//! written under the names the writer would have used, and a file that
//! exists already (the crash came after its rename, before the segment was
//! deleted) is not written again: recovering twice gives the same files. A
//! torn tail (the frame being written when the recorder died) is dropped
//! with a warning; nothing here stops the recorder from starting. Reading
//! and the format are [`apron_schemas::wal`]'s; writing is
//! [`RollingWriter::replay`]'s.

use std::fs;
use std::time::Duration;

use apron_schemas::paths::temp_path;
use apron_schemas::wal::{SegmentFile, host_segments, read_segment};
use apron_schemas::{DataLayout, Table};
use tracing::{info, warn};

use crate::tick::format_chain;
use crate::writer::{RollingWriter, WriteError};

/// What recovery did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Segments found.
    pub segments: u64,
    /// Segments whose rows are now in Parquet, and deleted.
    pub recovered: u64,
    /// Segments with no readable row, deleted.
    pub empty: u64,
    /// Segments left in place: unreadable by this build, or their Parquet
    /// files could not be written (warned; tried again at the next start).
    pub kept: u64,
    /// Parquet files written (files that existed already are not counted).
    pub files: u64,
    /// `gpu_samples` rows read from segments.
    pub gpu_rows: u64,
    /// `proc_samples` rows read from segments.
    pub proc_rows: u64,
    /// Bytes of torn tails dropped.
    pub torn_bytes: u64,
}

/// What became of one segment.
enum Outcome {
    Recovered { files: u64, gpu_rows: u64, proc_rows: u64 },
    Empty,
}

/// Turns every WAL segment of `host` under `layout` into Parquet and deletes
/// it. Per-segment problems are warnings (the segment is kept or, holding
/// nothing readable, removed); only a WAL folder that cannot be listed is an
/// error. When this returns, every recovered row is durable in Parquet.
pub fn recover(layout: &DataLayout, host: &str) -> Result<RecoveryStats, WriteError> {
    let mut stats = RecoveryStats::default();
    let dir = layout.wal_dir(host);
    let segments =
        host_segments(layout, host).map_err(|source| WriteError::Io { op: "list", path: dir, source })?;
    for seg in segments {
        stats.segments += 1;
        match recover_segment(layout, host, &seg, &mut stats.torn_bytes) {
            Ok(Outcome::Recovered { files, gpu_rows, proc_rows }) => {
                stats.recovered += 1;
                stats.files += files;
                stats.gpu_rows += gpu_rows;
                stats.proc_rows += proc_rows;
                info!(file = %seg.path.display(), gpu_rows, proc_rows, files, "recovered WAL segment into Parquet");
            }
            Ok(Outcome::Empty) => stats.empty += 1,
            Err(e) => {
                stats.kept += 1;
                warn!(file = %seg.path.display(), error = %format_chain(e.as_ref()),
                    "cannot recover WAL segment; it is kept and tried again at the next start");
            }
        }
    }
    Ok(stats)
}

fn recover_segment(
    layout: &DataLayout,
    host: &str,
    seg: &SegmentFile,
    torn_bytes: &mut u64,
) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let rows = read_segment(&seg.path)?;
    // A temporary file of this segment's file is what a crash in the middle
    // of its write left; the rows are here, so it goes.
    for table in Table::ALL {
        let tmp = temp_path(&layout.file_path(table, host, seg.start_ms, seg.seq));
        match fs::remove_file(&tmp) {
            Ok(()) => info!(file = %tmp.display(), "removed a temporary file a crash left"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => warn!(file = %tmp.display(), error = %e, "cannot remove a temporary file a crash left"),
        }
    }
    if rows.torn_bytes > 0 {
        *torn_bytes += rows.torn_bytes;
        warn!(file = %seg.path.display(), torn_bytes = rows.torn_bytes, ticks = rows.ticks,
            "dropped the torn tail of a WAL segment (the recorder died while writing it)");
    }
    if let Some(h) = &rows.header
        && (h.host != host || h.start_ms != seg.start_ms || h.seq != seg.seq)
    {
        warn!(file = %seg.path.display(), header_host = %h.host, header_start_ms = h.start_ms, header_seq = h.seq,
            "WAL segment header disagrees with its path; its path names the files");
    }
    if rows.gpus.is_empty() && rows.procs.is_empty() {
        warn!(file = %seg.path.display(), bytes = rows.torn_bytes, "WAL segment holds no readable rows; removing it");
        remove(seg)?;
        return Ok(Outcome::Empty);
    }
    let (gpu_rows, proc_rows) = (rows.gpus.len() as u64, rows.procs.len() as u64);
    // A writer of its own: one that failed holds its rows for a retry, which
    // must not stand in the way of the next segment. Its rotation never
    // applies; `replay` names the files.
    let mut writer = RollingWriter::new(layout.clone(), host, Duration::from_secs(86_400))?;
    writer.replay(seg.start_ms, seg.seq, rows.gpus, rows.procs)?;
    let files = writer.stats().files;
    remove(seg)?;
    Ok(Outcome::Recovered { files, gpu_rows, proc_rows })
}

fn remove(seg: &SegmentFile) -> Result<(), WriteError> {
    fs::remove_file(&seg.path).map_err(|source| WriteError::Io {
        op: "delete",
        path: seg.path.clone(),
        source,
    })
}

#[cfg(test)]
mod tests;
