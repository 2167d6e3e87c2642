//! The write-ahead log format: how the rows of a recorder's open file are
//! kept on disk until that file closes, and how to read them back.
//!
//! This module owns the bytes (frames, checksums, the encoding of rows) so
//! that the analysis CLI can read what a recording host holds without
//! linking the recorder. Writing segments (buffering, syncing, deleting them
//! once their Parquet files are durable) is [`crate::wal`]'s job, and
//! turning them into Parquet after a crash is [`crate::recover`]'s.
//!
//! # Format
//!
//! A segment is the log of one open file of one host, at
//! [`DataLayout::wal_segment_path`] (`wal/host=H/<start_ms>-<seq>.wal`, the
//! same (start, seq) as the Parquet files it turns into). It is a sequence
//! of frames:
//!
//! ```text
//! [u32 LE payload length][u32 LE CRC-32 (IEEE) of the payload][payload]
//! ```
//!
//! The first frame is the header: the 8 bytes `APRONWAL`, the format
//! version (u32 LE), the row fingerprint (u32 LE, see
//! [`rows_fingerprint`]), then a [`SegmentHeader`] in postcard. Every
//! further frame is one tick: its time, its `gpu_samples` rows, its
//! `proc_samples` rows and its allocations (the pods and Slurm jobs the
//! cluster had allocated each GPU to, rolled up into `alloc_minutes` when
//! the file closes) and the GPUs' events received since the frame before,
//! in postcard (varint integers, length-prefixed strings, fields in
//! declaration order). An event is written as soon as it arrives, in a
//! frame of its own with no rows, which is not a tick.
//!
//! A crash can leave the last frame incomplete, or the file extended with
//! garbage or zeros: bytes after the last intact frame are a torn tail,
//! expected after a crash, not an error. Damage in the middle (a flipped
//! byte, a frame that passes its checksum but does not decode) costs only
//! the damaged frame: the reader skips it by its length when that lands on
//! an intact frame, else scans forward to the next offset where a frame's
//! length and checksum check out, and reads on from there. The damage is
//! counted, so a caller can keep the segment aside. Rows whose time is
//! outside [`PLAUSIBLE_TS_MS`] come from a crafted or corrupt segment; a
//! caller that writes them on refuses them
//! ([`SegmentRows::refuse_implausible`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use apron_schemas::paths::parse_wal_segment_name;
use apron_schemas::{AllocSample, DataLayout, GpuEvent, GpuSample, ProcSample, Table};

mod format1;
mod format2;
mod format3;
mod format4;
mod format5;
mod format6;

/// The version of the segment format. Bump it when the frame layout or a
/// row struct ([`GpuSample`], [`ProcSample`], [`apron_schemas::ProcIdentity`],
/// [`AllocSample`], [`apron_schemas::Holder`], [`GpuEvent`]) changes: postcard stores fields by position, not by name, so a segment is
/// only readable by a build that knows its version. This build also reads
/// format 1 (before `gpu_samples.gr_engine_active_pct` and the MIG columns),
/// format 2 (before the `claimed_*` identity columns), format 3 (before
/// `k8s_pod_name`, `k8s_container` and `slurm_partition`), format 4
/// (before the allocations), format 5 (before `k8s_labels`) and format 6
/// (before the GPUs' events), so
/// segments a crash left behind reach Parquet after an upgrade; keep the
/// older formats' readers when bumping it.
pub const FORMAT_VERSION: u32 = 7;

/// The bytes that open a segment's header frame.
pub const MAGIC: [u8; 8] = *b"APRONWAL";

/// Bytes before each frame's payload: its length and its checksum.
pub const FRAME_HEADER_BYTES: usize = 8;

/// The largest payload a reader accepts; a longer length is garbage (a torn
/// or overwritten tail), not a frame. A tick of 8 GPUs and 16 processes
/// takes about 2 KiB.
pub const MAX_PAYLOAD_BYTES: u32 = 64 << 20;

/// The times a recovered row may have, milliseconds since the Unix epoch
/// (UTC): 2000-01-01 up to 2200-01-01. No sampler writes a row outside, and
/// a time near `i64::MAX` breaks every reader's date arithmetic.
pub const PLAUSIBLE_TS_MS: std::ops::Range<i64> = 946_684_800_000..7_258_118_400_000;

/// What a segment says about itself in its first frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentHeader {
    /// The host whose rows these are (also in the folder name).
    pub host: String,
    /// First tick of the open file, milliseconds since the Unix epoch (UTC);
    /// also in the file name.
    pub start_ms: i64,
    /// The writer's file counter; also in the file name.
    pub seq: u64,
}

/// Everything readable in one segment, in the order it was written (tick
/// by tick; within a tick, in the order the source gave the rows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SegmentRows {
    /// The header, `None` when not even it was readable (an empty file, or
    /// a crash right after the segment was created).
    pub header: Option<SegmentHeader>,
    /// Complete tick frames read.
    pub ticks: u64,
    /// Time of the last of them, milliseconds since the Unix epoch (UTC):
    /// how fresh the segment is. `None` when there is none.
    pub last_tick_ms: Option<i64>,
    /// The `gpu_samples` rows of those ticks.
    pub gpus: Vec<GpuSample>,
    /// The `proc_samples` rows of those ticks.
    pub procs: Vec<ProcSample>,
    /// The allocations of those ticks (none in a segment of format 4 or
    /// older).
    pub allocs: Vec<AllocSample>,
    /// The GPUs' events of those frames (none in a segment of format 6 or
    /// older).
    pub events: Vec<GpuEvent>,
    /// Bytes after the last complete, checksum-valid frame, dropped (0 for a
    /// segment that ends cleanly).
    pub torn_bytes: u64,
    /// Frames before the torn tail that were skipped: failing their
    /// checksum, or passing it without decoding. A damaged stretch found by
    /// scanning forward counts as one frame, though it may have held more.
    pub bad_frames: u64,
    /// Bytes of those frames.
    pub bad_bytes: u64,
}

impl SegmentRows {
    /// Whether anything but a torn tail was lost: a damaged frame. Such a
    /// segment is worth keeping aside after recovery.
    pub fn damaged(&self) -> bool {
        self.bad_frames > 0
    }

    /// Drops the rows whose time is outside [`PLAUSIBLE_TS_MS`] (a crafted
    /// or corrupt segment) and returns how many were dropped.
    pub fn refuse_implausible(&mut self) -> u64 {
        let before = self.gpus.len() + self.procs.len() + self.allocs.len() + self.events.len();
        self.gpus.retain(|r| PLAUSIBLE_TS_MS.contains(&r.ts));
        self.procs.retain(|r| PLAUSIBLE_TS_MS.contains(&r.ts));
        self.allocs.retain(|r| PLAUSIBLE_TS_MS.contains(&r.ts));
        self.events.retain(|r| PLAUSIBLE_TS_MS.contains(&r.ts));
        (before - self.gpus.len() - self.procs.len() - self.allocs.len() - self.events.len()) as u64
    }
}

/// A segment file found in a data folder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SegmentFile {
    /// The host, from its folder name (`host=H`).
    pub host: String,
    /// First tick of the open file, from the file name.
    pub start_ms: i64,
    /// The writer's file counter, from the file name.
    pub seq: u64,
    /// Where it is.
    pub path: PathBuf,
}

/// Reading a segment failed (beyond a torn tail, which is not an error).
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// The file could not be read.
    #[error("cannot read WAL segment {}", path.display())]
    Read {
        /// The segment.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The first frame is intact but is not an apron segment header.
    #[error("{} is not an apron WAL segment", path.display())]
    NotASegment {
        /// The file.
        path: PathBuf,
    },
    /// The segment was written by a build with another format or other row
    /// columns; that build can read it.
    #[error(
        "WAL segment {} has format {found_version} (rows {found_fingerprint:08x}); this build reads format {FORMAT_VERSION} (rows {:08x}) and formats 1 to 6",
        path.display(),
        rows_fingerprint()
    )]
    Version {
        /// The segment.
        path: PathBuf,
        /// Its format version.
        found_version: u32,
        /// Its row fingerprint.
        found_fingerprint: u32,
    },
    /// The header frame passed its checksum but does not decode: written
    /// by a different build that failed to bump [`FORMAT_VERSION`], or a
    /// bug. (A tick frame that does not decode is skipped and counted in
    /// [`SegmentRows::bad_frames`] instead.)
    #[error("cannot decode the frame at byte {offset} of WAL segment {}", path.display())]
    Decode {
        /// The segment.
        path: PathBuf,
        /// Byte offset of the frame in the file.
        offset: u64,
        /// The cause.
        #[source]
        source: postcard::Error,
    },
}

/// A fingerprint of the columns of `gpu_samples`, `proc_samples` and `gpu_events` (names,
/// types, nullability), stored in each header: a build whose tables differ
/// refuses the segment instead of misreading it, even where
/// [`FORMAT_VERSION`] was not bumped.
pub fn rows_fingerprint() -> u32 {
    static FINGERPRINT: LazyLock<u32> = LazyLock::new(|| {
        let mut h = crc32fast::Hasher::new();
        for table in [Table::GpuSamples, Table::ProcSamples, Table::GpuEvents] {
            h.update(table.name().as_bytes());
            for f in table.schema().fields() {
                h.update(format!("|{}:{}:{}", f.name(), f.data_type(), f.is_nullable()).as_bytes());
            }
            h.update(b";");
        }
        h.finalize()
    });
    *FINGERPRINT
}

/// One tick as written: borrowed rows, no copy.
#[derive(Serialize)]
struct TickRef<'a> {
    ts: i64,
    gpus: &'a [GpuSample],
    procs: &'a [ProcSample],
    allocs: &'a [AllocSample],
    events: &'a [GpuEvent],
}

/// One tick as read; the same fields, in the same order, as [`TickRef`].
#[derive(Deserialize)]
struct TickOwned {
    ts: i64,
    gpus: Vec<GpuSample>,
    procs: Vec<ProcSample>,
    allocs: Vec<AllocSample>,
    events: Vec<GpuEvent>,
}

/// A postcard output that appends to a caller's buffer, so encoding a tick
/// allocates nothing once the buffer has grown.
struct AppendTo<'a>(&'a mut Vec<u8>);

impl postcard::ser_flavors::Flavor for AppendTo<'_> {
    type Output = ();

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.0.push(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<()> {
        Ok(())
    }
}

/// Appends one frame to `out`, its payload written by `payload`. On error
/// `out` is as it was.
fn append_frame(
    out: &mut Vec<u8>,
    payload: impl FnOnce(&mut Vec<u8>) -> postcard::Result<()>,
) -> postcard::Result<()> {
    let at = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    if let Err(e) = payload(out) {
        out.truncate(at);
        return Err(e);
    }
    let body = at + FRAME_HEADER_BYTES;
    let Ok(len) = u32::try_from(out.len() - body) else {
        out.truncate(at);
        return Err(postcard::Error::SerializeBufferFull);
    };
    let crc = crc32fast::hash(&out[body..]);
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    out[at + 4..body].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// Appends the header frame of a segment to `out`: the first bytes of every
/// segment.
pub fn encode_header(header: &SegmentHeader, out: &mut Vec<u8>) -> postcard::Result<()> {
    append_frame(out, |buf| {
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        buf.extend_from_slice(&rows_fingerprint().to_le_bytes());
        postcard::serialize_with_flavor(header, AppendTo(buf))
    })
}

/// The rows of one tick, borrowed: what [`encode_tick`] writes.
#[derive(Debug, Clone, Copy, Default)]
pub struct TickRows<'a> {
    /// Its `gpu_samples` rows.
    pub gpus: &'a [GpuSample],
    /// Its `proc_samples` rows.
    pub procs: &'a [ProcSample],
    /// Its allocations.
    pub allocs: &'a [AllocSample],
    /// The GPUs' events received since the frame before (a frame of events
    /// alone, written as soon as they arrive, has no rows).
    pub events: &'a [GpuEvent],
}

/// Appends the frame of the tick at `ts_ms` with its rows to `out`.
pub fn encode_tick(ts_ms: i64, rows: TickRows<'_>, out: &mut Vec<u8>) -> postcard::Result<()> {
    let TickRows { gpus, procs, allocs, events } = rows;
    append_frame(out, |buf| {
        postcard::serialize_with_flavor(&TickRef { ts: ts_ms, gpus, procs, allocs, events }, AppendTo(buf))
    })
}

/// The payload of the intact frame at `at`, or `None` when there is none
/// there (the end, an incomplete frame, a length out of range, a checksum
/// mismatch).
fn frame_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let head = bytes.get(at..at.checked_add(FRAME_HEADER_BYTES)?)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    // Every real payload has bytes; a zero length is a zero-filled tail
    // (a file extended by the filesystem but never written), whose checksum
    // of nothing would otherwise pass.
    if len == 0 || len > MAX_PAYLOAD_BYTES {
        return None;
    }
    let body = at + FRAME_HEADER_BYTES;
    let payload = bytes.get(body..body.checked_add(usize::try_from(len).ok()?)?)?;
    (crc32fast::hash(payload) == crc).then_some(payload)
}

/// Reads every intact frame of the segment at `path`: the rows of every
/// tick whose frame is complete and passes its checksum. Bytes after the
/// last intact frame are counted in [`SegmentRows::torn_bytes`] and
/// dropped; that is what a crash leaves, not an error. Damaged frames
/// before it are skipped and counted ([`SegmentRows::bad_frames`]), and
/// rows with an implausible time refused ([`SegmentRows::refused_rows`]).
/// An empty file gives no rows.
///
/// The segment may be growing (a recorder appending to it): the rows read
/// are those complete when the file was read, and a frame being written
/// counts as torn.
pub fn read_segment(path: &Path) -> Result<SegmentRows, WalError> {
    let bytes = fs::read(path).map_err(|source| WalError::Read { path: path.to_path_buf(), source })?;
    decode_segment(path, &bytes)
}

/// Where reading goes on after the damaged bytes at `at` (no intact frame
/// there): past the frame by its length, when that length is plausible and
/// an intact frame follows; else the next offset holding an intact frame.
/// `None`: no intact frame follows, so the rest is a torn tail.
fn resync(bytes: &[u8], at: usize) -> Option<usize> {
    if let Some(head) = bytes.get(at..at + FRAME_HEADER_BYTES) {
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if len > 0 && len <= MAX_PAYLOAD_BYTES {
            let next = at + FRAME_HEADER_BYTES + len as usize;
            if frame_at(bytes, next).is_some() {
                return Some(next);
            }
        }
    }
    (at + 1..bytes.len().saturating_sub(FRAME_HEADER_BYTES)).find(|&p| frame_at(bytes, p).is_some())
}

fn decode_segment(path: &Path, bytes: &[u8]) -> Result<SegmentRows, WalError> {
    let mut out = SegmentRows::default();
    let mut at = 0usize;
    let format = match frame_at(bytes, at) {
        Some(payload) => {
            let (header, format) = decode_header(path, payload)?;
            out.header = Some(header);
            at += FRAME_HEADER_BYTES + payload.len();
            format
        }
        None => {
            // Without a header nothing says which build wrote the frames, so
            // none is decoded; damage (an intact frame further on) is told
            // apart from a segment torn right after it was created.
            if resync(bytes, at).is_some() {
                out.bad_frames = 1;
                out.bad_bytes = bytes.len() as u64;
            } else {
                out.torn_bytes = bytes.len() as u64;
            }
            return Ok(out);
        }
    };
    loop {
        let Some(payload) = frame_at(bytes, at) else {
            match resync(bytes, at) {
                Some(next) => {
                    out.bad_frames += 1;
                    out.bad_bytes += (next - at) as u64;
                    at = next;
                    continue;
                }
                None => break,
            }
        };
        let frame_len = FRAME_HEADER_BYTES + payload.len();
        let old = |t: postcard::Result<(i64, Vec<GpuSample>, Vec<ProcSample>)>| {
            t.map(|(ts, gpus, procs)| (ts, gpus, procs, Vec::new(), Vec::new()))
        };
        let no_events = |t: postcard::Result<format5::Tick>| {
            t.map(|(ts, gpus, procs, allocs)| (ts, gpus, procs, allocs, Vec::new()))
        };
        let tick = match format {
            format1::VERSION => old(format1::decode_tick(payload)),
            format2::VERSION => old(format2::decode_tick(payload)),
            format3::VERSION => old(format3::decode_tick(payload)),
            format4::VERSION => old(format4::decode_tick(payload)),
            format5::VERSION => no_events(format5::decode_tick(payload)),
            format6::VERSION => no_events(format6::decode_tick(payload)),
            _ => postcard::from_bytes::<TickOwned>(payload)
                .map(|t| (t.ts, t.gpus, t.procs, t.allocs, t.events)),
        };
        match tick {
            Ok((ts, gpus, procs, allocs, events)) => {
                // A frame of events alone (no rows) is not a tick.
                if !(gpus.is_empty() && procs.is_empty() && allocs.is_empty() && !events.is_empty()) {
                    out.ticks += 1;
                    out.last_tick_ms = Some(ts);
                }
                out.gpus.extend(gpus);
                out.procs.extend(procs);
                out.allocs.extend(allocs);
                out.events.extend(events);
            }
            Err(_) => {
                // Intact bytes this build cannot decode (a bug, or a build
                // that failed to bump the format): the frame is lost, the
                // ones after it are not.
                out.bad_frames += 1;
                out.bad_bytes += frame_len as u64;
            }
        }
        at += frame_len;
    }
    out.torn_bytes = (bytes.len() - at) as u64;
    Ok(out)
}

/// The header and the format version of its segment, one this build reads.
fn decode_header(path: &Path, payload: &[u8]) -> Result<(SegmentHeader, u32), WalError> {
    let not_a_segment = || WalError::NotASegment { path: path.to_path_buf() };
    let rest = payload.strip_prefix(&MAGIC).ok_or_else(not_a_segment)?;
    let (version, rest) = rest.split_first_chunk::<4>().ok_or_else(not_a_segment)?;
    let (fingerprint, rest) = rest.split_first_chunk::<4>().ok_or_else(not_a_segment)?;
    let (version, fingerprint) = (u32::from_le_bytes(*version), u32::from_le_bytes(*fingerprint));
    let known = (version == FORMAT_VERSION && fingerprint == rows_fingerprint())
        || (version == format1::VERSION && fingerprint == format1::FINGERPRINT)
        || (version == format2::VERSION && fingerprint == format2::FINGERPRINT)
        || (version == format3::VERSION && fingerprint == format3::FINGERPRINT)
        || (version == format4::VERSION && fingerprint == format4::FINGERPRINT)
        || (version == format5::VERSION && fingerprint == format5::FINGERPRINT)
        || (version == format6::VERSION && fingerprint == format6::FINGERPRINT);
    if !known {
        return Err(WalError::Version {
            path: path.to_path_buf(),
            found_version: version,
            found_fingerprint: fingerprint,
        });
    }
    let header = postcard::from_bytes(rest).map_err(|source| WalError::Decode {
        path: path.to_path_buf(),
        offset: 0,
        source,
    })?;
    Ok((header, version))
}

/// The segments of `host` under `layout`, ordered by (start, seq). Files
/// whose names are not segment names are left out; a missing WAL folder has
/// none.
pub fn host_segments(layout: &DataLayout, host: &str) -> io::Result<Vec<SegmentFile>> {
    let mut out = Vec::new();
    collect_segments(&layout.wal_dir(host), host, &mut out)?;
    out.sort();
    Ok(out)
}

/// The segments of every host under `layout`, ordered by (host, start,
/// seq): what the analysis reads besides the closed Parquet files.
///
/// A segment may turn into Parquet and be deleted at any moment while a
/// recorder runs: its Parquet files ([`DataLayout::file_path`] of the same
/// host, start and seq) are written first, then it is deleted. A reader
/// that takes a segment's rows must therefore leave out the files of that
/// name whenever they appear; a segment gone before it was read
/// ([`WalError::Read`] with [`io::ErrorKind::NotFound`]) is complete in
/// Parquet by then.
pub fn all_segments(layout: &DataLayout) -> io::Result<Vec<SegmentFile>> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(layout.wal_root()) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        if let Some(host) = name.to_str().and_then(|n| n.strip_prefix("host="))
            && entry.file_type()?.is_dir()
        {
            collect_segments(&entry.path(), host, &mut out)?;
        }
    }
    out.sort();
    Ok(out)
}

fn collect_segments(dir: &Path, host: &str, out: &mut Vec<SegmentFile>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if let Some((start_ms, seq)) = entry.file_name().to_str().and_then(parse_wal_segment_name) {
            out.push(SegmentFile { host: host.to_owned(), start_ms, seq, path: entry.path() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apron_schemas::ProcIdentity;

    fn gpu(ts: i64, uuid: &str, util: Option<i32>) -> GpuSample {
        GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: 1,
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
            interval_ms: 1_000,
            gpu_util_pct: util,
            fb_used_bytes: Some(80 << 30),
            energy_mj: Some(-1),
            sm_active_pct: Some(12.5),
            ..Default::default()
        }
    }

    fn proc_row(ts: i64, uuid: &str, pid: i32) -> ProcSample {
        ProcSample {
            ts,
            gpu_uuid: uuid.into(),
            pid,
            interval_ms: 1_000,
            identity: ProcIdentity {
                proc_start: Some(1_700_000_000_000),
                comm: Some("python3".into()),
                user: Some("alice".into()),
                k8s_namespace: None,
                ..Default::default()
            },
            used_mem_bytes: Some(1 << 30),
            sm_util_pct: None,
            mem_util_pct: Some(0),
        }
    }

    fn alloc(ts: i64, uuid: &str) -> AllocSample {
        AllocSample {
            ts,
            interval_ms: 1_000,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            holder: apron_schemas::Holder::kubernetes(
                Some("nlp".into()),
                Some("nb-0".into()),
                Some("lab".into()),
            ),
        }
    }

    fn header() -> SegmentHeader {
        SegmentHeader { host: "node07".into(), start_ms: 1_000, seq: 4 }
    }

    /// A segment of three ticks of two GPUs, one process each; and the
    /// end offset of each frame.
    fn segment() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        encode_header(&header(), &mut bytes).expect("encodes");
        ends.push(bytes.len());
        for i in 0..3 {
            let ts = 1_000 + i * 1_000;
            let gpus = [gpu(ts, "GPU-b", Some(i as i32)), gpu(ts, "GPU-a", None)];
            let procs = [proc_row(ts, "GPU-b", 7)];
            let allocs = [alloc(ts, "GPU-a")];
            encode_tick(
                ts,
                TickRows { gpus: &gpus, procs: &procs, allocs: &allocs, events: &[] },
                &mut bytes,
            )
            .expect("encodes");
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    fn read(bytes: &[u8]) -> SegmentRows {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("1000-000004.wal");
        fs::write(&path, bytes).expect("write");
        read_segment(&path).expect("readable")
    }

    #[test]
    fn rows_round_trip() {
        let (bytes, _) = segment();
        let rows = read(&bytes);
        assert_eq!(rows.header, Some(header()));
        assert_eq!((rows.ticks, rows.last_tick_ms), (3, Some(3_000)));
        assert_eq!(rows.torn_bytes, 0);
        assert_eq!(rows.gpus.len(), 6);
        assert_eq!(rows.procs.len(), 3);
        assert_eq!(rows.gpus[2], gpu(2_000, "GPU-b", Some(1)));
        assert_eq!(rows.gpus[3], gpu(2_000, "GPU-a", None), "null stays null");
        assert_eq!(rows.procs[2], proc_row(3_000, "GPU-b", 7));
        assert_eq!(rows.allocs, [alloc(1_000, "GPU-a"), alloc(2_000, "GPU-a"), alloc(3_000, "GPU-a")]);
    }

    #[test]
    fn a_tick_stays_compact() {
        // 8 GPUs and 16 processes: the recorder's steady state.
        let gpus: Vec<_> =
            (0..8).map(|i| gpu(1_796_083_199_000, &format!("GPU-{i:036}"), Some(50))).collect();
        let procs: Vec<_> = (0..16)
            .map(|i| proc_row(1_796_083_199_000, "GPU-000000000000000000000000000000000000", i))
            .collect();
        let mut bytes = Vec::new();
        encode_tick(
            1_796_083_199_000,
            TickRows { gpus: &gpus, procs: &procs, ..TickRows::default() },
            &mut bytes,
        )
        .expect("encodes");
        assert!(bytes.len() < 2_500, "{} bytes", bytes.len());
    }

    #[test]
    fn a_torn_last_frame_is_dropped_and_counted() {
        let (bytes, ends) = segment();
        // Cut inside the last frame's payload, and inside its 8-byte head.
        for cut in [ends[3] - 5, ends[2] + 3] {
            let rows = read(&bytes[..cut]);
            assert_eq!(rows.ticks, 2, "cut at {cut}");
            assert_eq!(rows.gpus.len(), 4);
            assert_eq!(rows.procs.len(), 2);
            assert_eq!(rows.torn_bytes, (cut - ends[2]) as u64);
        }
    }

    /// A segment of seven ticks (ts 1000, 2000, …), two GPUs each; and the
    /// end offset of each frame, the header's first.
    fn seven() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        encode_header(&header(), &mut bytes).expect("encodes");
        ends.push(bytes.len());
        for i in 1..=7 {
            let ts = i * 1_000;
            let gpus = [gpu(ts, "GPU-b", Some(1)), gpu(ts, "GPU-a", None)];
            encode_tick(ts, TickRows { gpus: &gpus, ..TickRows::default() }, &mut bytes).expect("encodes");
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    fn tick_times(rows: &SegmentRows) -> Vec<i64> {
        let mut ts: Vec<i64> = rows.gpus.iter().map(|r| r.ts).collect();
        ts.dedup();
        ts
    }

    #[test]
    fn a_flipped_byte_in_the_middle_costs_only_its_frame() {
        // Frame 3 of 7 spans ends[2]..ends[3]; flip a byte of its payload,
        // then of its length (skipping by length fails: the reader scans).
        for at in [12, 1] {
            let (mut bytes, ends) = seven();
            bytes[ends[2] + at] ^= 0x40;
            let rows = read(&bytes);
            assert_eq!(tick_times(&rows), [1_000, 2_000, 4_000, 5_000, 6_000, 7_000], "byte {at}");
            assert_eq!((rows.ticks, rows.bad_frames, rows.torn_bytes), (6, 1, 0), "byte {at}");
            assert_eq!(rows.bad_bytes, (ends[3] - ends[2]) as u64, "byte {at}");
            assert!(rows.damaged());
        }
    }

    #[test]
    fn an_intact_frame_that_does_not_decode_is_skipped() {
        let (bytes, ends) = seven();
        // Replace frame 3 with a frame of valid checksum but bytes that are
        // no tick (a lone 0xff is not a varint's end).
        let mut bad = Vec::new();
        append_frame(&mut bad, |b| {
            b.push(0xff);
            Ok(())
        })
        .expect("frame");
        let spliced = [&bytes[..ends[2]], &bad, &bytes[ends[3]..]].concat();
        let rows = read(&spliced);
        assert_eq!(tick_times(&rows), [1_000, 2_000, 4_000, 5_000, 6_000, 7_000]);
        assert_eq!((rows.bad_frames, rows.bad_bytes, rows.torn_bytes), (1, bad.len() as u64, 0));
    }

    #[test]
    fn damage_in_the_last_frame_is_a_torn_tail() {
        let (mut bytes, ends) = seven();
        bytes[ends[6] + 12] ^= 0x40;
        let rows = read(&bytes);
        assert_eq!((rows.ticks, rows.bad_frames), (6, 0));
        assert_eq!(rows.torn_bytes, (ends[7] - ends[6]) as u64);
        assert!(!rows.damaged());
    }

    #[test]
    fn rows_at_implausible_times_are_refused() {
        let now = 1_796_083_200_000; // 2026-12-01
        let mut rows = SegmentRows {
            gpus: vec![gpu(now, "a", None), gpu(i64::MAX - 5, "a", None), gpu(-1, "b", None)],
            procs: vec![proc_row(now, "a", 1), proc_row(946_684_799_999, "a", 2)],
            allocs: vec![alloc(now, "a"), alloc(i64::MIN, "a")],
            ..Default::default()
        };
        assert_eq!(rows.refuse_implausible(), 4);
        assert_eq!((rows.gpus[..].len(), rows.procs[..].len(), rows.allocs[..].len()), (1, 1, 1));
        let y2200 = 7_258_118_400_000; // 2200-01-01T00:00:00Z, refused
        assert!(PLAUSIBLE_TS_MS.contains(&946_684_800_000) && !PLAUSIBLE_TS_MS.contains(&y2200));
    }

    #[test]
    fn a_zero_filled_tail_is_torn_not_a_frame() {
        let (mut bytes, ends) = segment();
        bytes.extend_from_slice(&[0; 4096]);
        let rows = read(&bytes);
        assert_eq!(rows.ticks, 3);
        assert_eq!(rows.torn_bytes, 4096);
        assert_eq!(bytes.len(), ends[3] + 4096);
    }

    #[test]
    fn an_empty_or_headless_file_has_no_rows() {
        let rows = read(&[]);
        assert_eq!(rows, SegmentRows::default());
        let (bytes, ends) = segment();
        let rows = read(&bytes[..ends[0] - 1]);
        assert_eq!((rows.header, rows.ticks, rows.torn_bytes), (None, 0, (ends[0] - 1) as u64));
    }

    #[test]
    fn another_format_is_refused_not_misread() {
        let (mut bytes, _) = segment();
        // Rewrite the header frame with another version and a valid checksum.
        bytes[FRAME_HEADER_BYTES + 8] = 99;
        let len = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let crc = crc32fast::hash(&bytes[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("1000-000004.wal");
        fs::write(&path, &bytes).expect("write");
        let err = read_segment(&path).expect_err("version 99");
        assert!(matches!(err, WalError::Version { found_version: 99, .. }), "{err}");

        let mut other = 4u32.to_le_bytes().to_vec();
        other.extend_from_slice(&crc32fast::hash(b"nope").to_le_bytes());
        other.extend_from_slice(b"nope");
        fs::write(&path, &other).expect("write");
        let err = read_segment(&path).expect_err("not a segment");
        assert!(matches!(err, WalError::NotASegment { .. }), "{err}");
    }

    #[test]
    fn the_encoding_of_rows_is_pinned() {
        // postcard stores fields by position: a change to a row struct
        // changes these bytes and makes older segments unreadable. When
        // this fails, bump FORMAT_VERSION and update the checksum.
        let mut bytes = Vec::new();
        let rows = TickRows {
            gpus: &[gpu(1_000, "GPU-a", Some(3))],
            procs: &[proc_row(1_000, "GPU-a", 7)],
            allocs: &[alloc(1_000, "GPU-a")],
            events: &[GpuEvent {
                ts: 1_000,
                gpu_uuid: "GPU-a".into(),
                gpu_index: 0,
                kind: "xid".into(),
                xid: Some(79),
                pid: None,
                value: Some(2),
                delta: None,
                detail: Some("d".into()),
            }],
        };
        encode_tick(1_000, rows, &mut bytes).expect("encodes");
        assert_eq!((FORMAT_VERSION, crc32fast::hash(&bytes)), (7, PINNED_TICK_CRC));
    }

    const PINNED_TICK_CRC: u32 = 2_304_843_501;

    /// Format 4's tick frame, as its builds wrote it: format 5's rows
    /// without the allocations.
    #[derive(Serialize)]
    struct TickV4<'a> {
        ts: i64,
        gpus: &'a [GpuSample],
        procs: &'a [format5::ProcSampleV5],
    }

    #[test]
    fn a_segment_of_format_4_is_read_after_an_upgrade_without_allocations() {
        // The bytes format 4 wrote: its header (version 4 and its
        // fingerprint) and its tick frames; the checksum of a tick is the
        // one format 4's builds pinned, so these are its very bytes.
        let mut bytes = Vec::new();
        append_frame(&mut bytes, |buf| {
            buf.extend_from_slice(&MAGIC);
            buf.extend_from_slice(&format4::VERSION.to_le_bytes());
            buf.extend_from_slice(&format4::FINGERPRINT.to_le_bytes());
            postcard::serialize_with_flavor(&header(), AppendTo(buf))
        })
        .expect("header");
        let at = bytes.len();
        let (gpus, procs) = ([gpu(1_000, "GPU-a", Some(3))], [proc_row(1_000, "GPU-a", 7)]);
        append_frame(&mut bytes, |buf| {
            let v5 = format5::tick_of(1_000, &gpus, &procs, &[]);
            postcard::serialize_with_flavor(
                &TickV4 { ts: 1_000, gpus: &gpus, procs: &v5.procs },
                AppendTo(buf),
            )
        })
        .expect("tick");
        assert_eq!(crc32fast::hash(&bytes[at..]), 3_142_353_071, "format 4's pinned tick");
        let rows = read(&bytes);
        assert_eq!(rows.header, Some(header()));
        assert_eq!((rows.ticks, rows.torn_bytes, rows.bad_frames), (1, 0, 0));
        assert_eq!((&rows.gpus[..], &rows.procs[..]), (&gpus[..], &procs[..]));
        assert!(rows.allocs.is_empty(), "format 4 recorded no allocations");
    }

    #[test]
    fn a_segment_of_format_5_is_read_after_an_upgrade_without_labels() {
        // The bytes format 5 wrote: its header and a tick frame whose
        // checksum is the one format 5's builds pinned.
        let mut bytes = Vec::new();
        append_frame(&mut bytes, |buf| {
            buf.extend_from_slice(&MAGIC);
            buf.extend_from_slice(&format5::VERSION.to_le_bytes());
            buf.extend_from_slice(&format5::FINGERPRINT.to_le_bytes());
            postcard::serialize_with_flavor(&header(), AppendTo(buf))
        })
        .expect("header");
        let at = bytes.len();
        let (gpus, procs, allocs) =
            ([gpu(1_000, "GPU-a", Some(3))], [proc_row(1_000, "GPU-a", 7)], [alloc(1_000, "GPU-a")]);
        let tick = format5::tick_of(1_000, &gpus, &procs, &allocs);
        append_frame(&mut bytes, |buf| postcard::serialize_with_flavor(&tick, AppendTo(buf))).expect("tick");
        assert_eq!(crc32fast::hash(&bytes[at..]), 2_640_344_817, "format 5's pinned tick");
        let rows = read(&bytes);
        assert_eq!((rows.ticks, rows.torn_bytes, rows.bad_frames), (1, 0, 0));
        assert_eq!((&rows.gpus[..], &rows.procs[..], &rows.allocs[..]), (&gpus[..], &procs[..], &allocs[..]));
        assert!(rows.procs.iter().all(|p| p.identity.k8s_labels.is_none()));
    }

    #[test]
    fn a_segment_of_format_1_is_read_after_an_upgrade() {
        // Written by the last build of format 1 (this module's `segment()`
        // then): three ticks of two GPUs, one process each.
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/wal-format1.wal"));
        let rows = read_segment(path).expect("format 1 is read");
        assert_eq!(rows.header, Some(header()));
        assert_eq!((rows.ticks, rows.last_tick_ms, rows.torn_bytes, rows.bad_frames), (3, Some(3_000), 0, 0));
        let (now, _) = segment();
        let now = read(&now);
        assert_eq!(rows.gpus, now.gpus, "the same rows, gr_engine_active_pct null");
        assert_eq!(rows.procs, now.procs);
        assert!(rows.gpus.iter().all(|g| g.gr_engine_active_pct.is_none()));

        // Format 1's header with another fingerprint is refused.
        let mut bytes = fs::read(path).expect("fixture");
        bytes[FRAME_HEADER_BYTES + 12] ^= 1;
        let len = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let crc = crc32fast::hash(&bytes[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len]);
        bytes[4..8].copy_from_slice(&crc.to_le_bytes());
        let tmp = tempfile::tempdir().expect("tempdir");
        let other = tmp.path().join("1000-000004.wal");
        fs::write(&other, &bytes).expect("write");
        let err = read_segment(&other).expect_err("unknown rows");
        assert!(matches!(err, WalError::Version { found_version: 1, .. }), "{err}");
    }

    #[test]
    fn a_segment_of_format_2_is_read_after_an_upgrade_its_environment_values_as_claims() {
        // Written by the last build of format 2 (this module's `segment()`
        // then): three ticks of two GPUs, one process each.
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/wal-format2.wal"));
        let rows = read_segment(path).expect("format 2 is read");
        assert_eq!((rows.ticks, rows.torn_bytes, rows.bad_frames), (3, 0, 0));
        let now = read(&segment().0);
        assert_eq!((rows.gpus, rows.procs), (now.gpus, now.procs));

        // A process with every identity field: format 2 took the
        // namespace and account from the environment, and the job from it
        // whenever the cgroup gave none, so those three are claims now.
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/wal-format2-identity.wal"));
        let rows = read_segment(path).expect("format 2 is read");
        let id = &rows.procs[0].identity;
        let expected = ProcIdentity {
            proc_start: Some(1_700_000_000_000),
            comm: Some("python3".into()),
            uid: Some(1000),
            user: Some("alice".into()),
            container_id: Some("c".into()),
            k8s_pod_uid: Some("pod".into()),
            claimed_k8s_namespace: Some("ns".into()),
            claimed_slurm_job_id: Some("42".into()),
            claimed_slurm_account: Some("acct".into()),
            ..Default::default()
        };
        assert_eq!(id, &expected);
    }

    #[test]
    fn a_segment_of_format_3_is_read_after_an_upgrade_the_new_columns_unknown() {
        // Written by the last build of format 3: two ticks of one GPU and
        // one process with every identity field of its time.
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/wal-format3-identity.wal"));
        let rows = read_segment(path).expect("format 3 is read");
        assert_eq!(rows.header, Some(header()));
        assert_eq!((rows.ticks, rows.last_tick_ms, rows.torn_bytes, rows.bad_frames), (2, Some(2_000), 0, 0));
        assert_eq!(rows.gpus.iter().map(|g| g.gpu_util_pct).collect::<Vec<_>>(), [Some(7), Some(7)]);
        let p = &rows.procs[1];
        assert_eq!(
            (p.ts, p.pid, p.used_mem_bytes, p.sm_util_pct, p.mem_util_pct),
            (2_000, 7, Some(1 << 30), Some(5), Some(1))
        );
        let expected = ProcIdentity {
            proc_start: Some(1_700_000_000_000),
            comm: Some("python3".into()),
            uid: Some(1000),
            user: Some("alice".into()),
            container_id: Some("c".into()),
            k8s_pod_uid: Some("pod".into()),
            k8s_namespace: Some("ns".into()),
            k8s_pod_name: None,
            k8s_container: None,
            k8s_labels: None,
            slurm_job_id: Some("42".into()),
            slurm_account: Some("acct".into()),
            slurm_partition: None,
            claimed_k8s_namespace: Some("claimed-ns".into()),
            claimed_slurm_job_id: Some("43".into()),
            claimed_slurm_account: Some("claimed-acct".into()),
        };
        assert_eq!(p.identity, expected);
    }

    #[test]
    fn segments_are_listed_per_host_in_order() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        for (host, start, seq) in [("b", 2_000, 0), ("a", 3_000, 1), ("a", 3_000, 0), ("a", 1_000, 9)] {
            let p = layout.wal_segment_path(host, start, seq);
            fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
            fs::write(&p, b"").expect("write");
        }
        fs::write(layout.wal_dir("a").join("notes.txt"), b"").expect("write");
        let a: Vec<_> =
            host_segments(&layout, "a").expect("list").into_iter().map(|s| (s.start_ms, s.seq)).collect();
        assert_eq!(a, [(1_000, 9), (3_000, 0), (3_000, 1)]);
        let all: Vec<_> = all_segments(&layout).expect("list").into_iter().map(|s| s.host).collect();
        assert_eq!(all, ["a", "a", "a", "b"]);
        assert!(host_segments(&layout, "none").expect("missing folder").is_empty());
        assert!(all_segments(&DataLayout::new(tmp.path().join("nope"))).expect("missing").is_empty());
    }
}
