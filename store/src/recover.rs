//! Recovery: on start, before recording, turns every WAL segment a crash
//! left behind into the Parquet files its open file would have become, then
//! deletes the segment.
//!
//! A segment's file name is its file's (start, seq), so the files are
//! written under the names the writer would have used, and a file that
//! exists already (the crash came after its rename, before the segment was
//! deleted) is not written again: recovering twice gives the same files. A
//! torn tail (the frame being written when the recorder died) is dropped
//! with a warning. A segment damaged in the middle gives every frame that
//! checks out; it is then moved to the quarantine folder
//! ([`DataLayout::wal_quarantine_dir`]) rather than deleted, and so is one
//! holding rows at implausible times (refused, not written). Nothing here
//! stops the recorder from starting. Reading
//! and the format are [`crate::wal::format`]'s; writing is
//! [`RollingWriter::replay`]'s.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use crate::wal::format::{SegmentFile, WalError, host_segments, read_segment};
use apron_schemas::paths::temp_path;
use apron_schemas::time::DAY_SECS;
use apron_schemas::{DataLayout, Table};
use tracing::{info, warn};

use crate::error_chain::format_chain;
use crate::write_error::WriteError;
use crate::writer::RollingWriter;

/// What recovery did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Segments found.
    pub segments: u64,
    /// Segments whose rows are now in Parquet, and deleted or quarantined.
    pub recovered: u64,
    /// Segments with no readable row, deleted (or quarantined when damaged).
    pub empty: u64,
    /// Segments left in place: written by another build, or their Parquet
    /// files could not be written (warned; tried again at the next start).
    pub kept: u64,
    /// Segments moved to the quarantine folder
    /// ([`DataLayout::wal_quarantine_dir`]) because part of them could not
    /// be read: their good rows are in Parquet all the same.
    pub quarantined: u64,
    /// Parquet files written (files that existed already are not counted).
    pub files: u64,
    /// `gpu_samples` rows read from segments.
    pub gpu_rows: u64,
    /// `proc_samples` rows read from segments.
    pub proc_rows: u64,
    /// Bytes of torn tails dropped.
    pub torn_bytes: u64,
    /// Damaged frames skipped (before the tails).
    pub bad_frames: u64,
    /// Rows refused for a time outside
    /// [`crate::wal::format::PLAUSIBLE_TS_MS`].
    pub refused_rows: u64,
}

/// What became of one segment.
#[derive(Debug, Default)]
struct Outcome {
    files: u64,
    gpu_rows: u64,
    proc_rows: u64,
    torn_bytes: u64,
    bad_frames: u64,
    refused_rows: u64,
    /// Where it was moved, when it was damaged.
    quarantined: Option<PathBuf>,
}

/// Turns every WAL segment of `host` under `layout` into Parquet and deletes
/// it, or moves it to the quarantine folder when part of it could not be
/// read (one warning per such segment: where it went, the frames recovered
/// and lost). Per-segment problems are warnings (the segment is kept,
/// quarantined or, holding nothing readable, removed); only a WAL folder
/// that cannot be listed is an error. When this returns, every recovered
/// row is durable in Parquet.
pub fn recover(layout: &DataLayout, host: &str) -> Result<RecoveryStats, WriteError> {
    let mut stats = RecoveryStats::default();
    let dir = layout.wal_dir(host);
    let segments =
        host_segments(layout, host).map_err(|source| WriteError::Io { op: "list", path: dir, source })?;
    for seg in segments {
        stats.segments += 1;
        match recover_segment(layout, host, &seg) {
            Ok(o) => {
                stats.torn_bytes += o.torn_bytes;
                stats.bad_frames += o.bad_frames;
                stats.refused_rows += o.refused_rows;
                stats.quarantined += u64::from(o.quarantined.is_some());
                if o.gpu_rows + o.proc_rows == 0 {
                    stats.empty += 1;
                    continue;
                }
                stats.recovered += 1;
                stats.files += o.files;
                stats.gpu_rows += o.gpu_rows;
                stats.proc_rows += o.proc_rows;
                info!(file = %seg.path.display(), gpu_rows = o.gpu_rows, proc_rows = o.proc_rows, files = o.files,
                    "recovered WAL segment into Parquet");
            }
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
) -> Result<Outcome, Box<dyn std::error::Error + Send + Sync>> {
    let mut rows = match read_segment(&seg.path) {
        Ok(rows) => rows,
        // An intact header of this format that does not decode: no build
        // reads it, so keeping the segment in place would only fail again.
        // (Another format, or no apron header at all, is kept in place for
        // the build that wrote it.)
        Err(e @ WalError::Decode { .. }) => {
            let to = quarantine(layout, host, seg)?;
            warn!(file = %to.display(), segment = %seg.path.display(), error = %format_chain(&e),
                frames_recovered = 0, "quarantined a WAL segment whose header cannot be read; none of its rows were recovered");
            return Ok(Outcome { quarantined: Some(to), ..Outcome::default() });
        }
        Err(e) => return Err(e.into()),
    };
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
        warn!(file = %seg.path.display(), torn_bytes = rows.torn_bytes, ticks = rows.ticks,
            "dropped the torn tail of a WAL segment (the recorder died while writing it)");
    }
    if let Some(h) = &rows.header
        && (h.host != host || h.start_ms != seg.start_ms || h.seq != seg.seq)
    {
        warn!(file = %seg.path.display(), header_host = %h.host, header_start_ms = h.start_ms, header_seq = h.seq,
            "WAL segment header disagrees with its path; its path names the files");
    }
    let refused_rows = rows.refuse_implausible();
    let mut out = Outcome {
        torn_bytes: rows.torn_bytes,
        bad_frames: rows.bad_frames,
        refused_rows,
        gpu_rows: rows.gpus.len() as u64,
        proc_rows: rows.procs.len() as u64,
        ..Outcome::default()
    };
    let damaged = rows.damaged() || refused_rows > 0;
    if rows.gpus.is_empty() && rows.procs.is_empty() && rows.allocs.is_empty() && rows.events.is_empty() {
        if !damaged {
            warn!(file = %seg.path.display(), bytes = rows.torn_bytes, "WAL segment holds no readable rows; removing it");
            remove(seg)?;
            return Ok(out);
        }
    } else {
        // A writer of its own: one that failed holds its rows for a retry,
        // which must not stand in the way of the next segment. Its rotation
        // never applies; `replay` names the files.
        let mut writer = RollingWriter::new(layout.clone(), host, Duration::from_secs(DAY_SECS))?;
        writer.replay(seg.start_ms, seg.seq, rows.gpus, rows.procs, rows.allocs, rows.events)?;
        out.files = writer.stats().files;
        if !damaged {
            remove(seg)?;
            return Ok(out);
        }
    }
    let to = quarantine(layout, host, seg)?;
    warn!(file = %to.display(), segment = %seg.path.display(), frames_recovered = rows.ticks,
        frames_lost = rows.bad_frames, bad_bytes = rows.bad_bytes, refused_rows,
        gpu_rows = out.gpu_rows, proc_rows = out.proc_rows,
        "quarantined a damaged WAL segment; the rows of its good frames are in Parquet");
    out.quarantined = Some(to);
    Ok(out)
}

/// Moves the segment to the first free name of the host's quarantine
/// folder and returns that name.
fn quarantine(layout: &DataLayout, host: &str, seg: &SegmentFile) -> Result<PathBuf, WriteError> {
    let dir = layout.wal_quarantine_dir(host);
    crate::create::create_dir_all(&dir).map_err(|source| WriteError::Io {
        op: "create folder",
        path: dir.clone(),
        source,
    })?;
    let name = seg.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let to = (0..)
        .map(|n| layout.wal_quarantine_path(host, &name, n))
        .find(|p| fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| layout.wal_quarantine_path(host, &name, u32::MAX));
    fs::rename(&seg.path, &to).map_err(|source| WriteError::Io {
        op: "quarantine",
        path: to.clone(),
        source,
    })?;
    Ok(to)
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
