//! `apron import`: history people already have, brought into the data
//! folder through the recorder's own writer.
//!
//! Each format has its parser, which reads the whole input into plain rows
//! ([`HostRows`]) and fails on the first bad row with its file, line and
//! field ([`ImportError::Row`]) before anything is written:
//! [`nvidia_smi`] (the CSV of `nvidia-smi --query-gpu` and
//! `--query-compute-apps`), [`pynvml`] (the CSV of the first seed guide's
//! logger) and [`prometheus`] (dcgm-exporter series from a Prometheus
//! server's HTTP API). Then [`write_host`] writes a host's rows through
//! [`RollingWriter`]: the recorder's layout, names, sort order and minute
//! rollups, one file per table and host per UTC day.
//!
//! Importing is idempotent: rows whose key ((gpu_uuid, ts) for
//! `gpu_samples`, (gpu_uuid, pid, ts) for `proc_samples`) is already in the
//! target partition ([`existing`]) or earlier in the same input are
//! skipped, so importing the same file twice writes nothing the second
//! time, and a log that grew since the last import adds only its new rows.
//!
//! What the writer, the layout and the rollups are is `apron_store`'s
//! business; this module only turns foreign rows into `GpuSample` and
//! `ProcSample` values.

pub mod error;
pub mod existing;
pub mod interval;
pub mod line_cap;
pub mod nvidia_smi;
pub mod prometheus;
pub mod pynvml;
pub mod ranges;
pub mod units;

pub use error::ImportError;

use std::time::Duration;

use apron_schemas::time::DAY_SECS;
use apron_schemas::{DataLayout, GpuSample, ProcSample, Text};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;

/// The rows of one host read from an input, in any order.
#[derive(Debug, Default)]
pub struct HostRows {
    /// `gpu_samples` rows.
    pub gpus: Vec<GpuSample>,
    /// `proc_samples` rows.
    pub procs: Vec<ProcSample>,
}

/// What [`write_host`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// `gpu_samples` rows written.
    pub gpu_rows: u64,
    /// `proc_samples` rows written.
    pub proc_rows: u64,
    /// Rows skipped: already in the data folder, or twice in the input.
    pub skipped: u64,
    /// Parquet files written (raw tables and rollups).
    pub files: u64,
}

impl std::ops::AddAssign for Written {
    /// What two writes did together (a Prometheus import's days).
    fn add_assign(&mut self, other: Written) {
        self.gpu_rows += other.gpu_rows;
        self.proc_rows += other.proc_rows;
        self.skipped += other.skipped;
        self.files += other.files;
    }
}

/// How long an import's files span: a UTC day, so each day of an import is
/// one file per table and host, as compaction leaves closed days.
pub const IMPORT_ROTATE: Duration = Duration::from_secs(DAY_SECS);

/// Writes `rows` of `host` under `layout` through the recorder's writer,
/// skipping rows whose key is already in the target partitions or earlier
/// in `rows`. `progress(n)` is called with each batch of rows pushed. When
/// this returns `Ok`, every row written is durable on disk. On error, the
/// files already renamed into place are complete (a second import adds
/// what is missing).
pub fn write_host(
    layout: &DataLayout,
    host: &str,
    rows: HostRows,
    progress: &dyn Fn(u64),
) -> Result<Written, ImportError> {
    let write_err = |source| ImportError::Write { host: host.to_owned(), source };
    let HostRows { mut gpus, mut procs } = rows;
    let before = (gpus.len() + procs.len()) as u64;
    gpus.sort_by(|a, b| (a.ts, &a.gpu_uuid).cmp(&(b.ts, &b.gpu_uuid)));
    gpus.dedup_by(|b, a| a.ts == b.ts && a.gpu_uuid == b.gpu_uuid);
    procs.sort_by(|a, b| (a.ts, &a.gpu_uuid, a.pid).cmp(&(b.ts, &b.gpu_uuid, b.pid)));
    procs.dedup_by(|b, a| a.ts == b.ts && a.gpu_uuid == b.gpu_uuid && a.pid == b.pid);
    let known =
        existing::Keys::read(layout, host, gpus.iter().map(|g| g.ts).chain(procs.iter().map(|p| p.ts)))?;
    gpus.retain(|g| !known.has_gpu(&g.gpu_uuid, g.ts));
    procs.retain(|p| !known.has_proc(&p.gpu_uuid, p.pid, p.ts));
    let mut written = Written {
        gpu_rows: gpus.len() as u64,
        proc_rows: procs.len() as u64,
        skipped: before - (gpus.len() + procs.len()) as u64,
        files: 0,
    };
    if gpus.is_empty() && procs.is_empty() {
        return Ok(written);
    }
    let mut writer = RollingWriter::new(layout.clone(), host, IMPORT_ROTATE).map_err(write_err)?;
    let mut tick = Tick::default();
    let (mut g, mut p) = (gpus.into_iter().peekable(), procs.into_iter().peekable());
    let mut pending = 0u64;
    loop {
        let next = match (g.peek(), p.peek()) {
            (Some(a), Some(b)) => a.ts.min(b.ts),
            (Some(a), None) => a.ts,
            (None, Some(b)) => b.ts,
            (None, None) => break,
        };
        tick.clear();
        while let Some(row) = g.next_if(|r| r.ts == next) {
            tick.gpus.push(row);
        }
        while let Some(row) = p.next_if(|r| r.ts == next) {
            tick.procs.push(row);
        }
        pending += (tick.gpus.len() + tick.procs.len()) as u64;
        writer.push(next, &tick).map_err(write_err)?;
        if pending >= 50_000 {
            progress(pending);
            pending = 0;
        }
    }
    writer.close().map_err(write_err)?;
    progress(pending);
    written.files = writer.stats().files;
    Ok(written)
}

/// A CSV log as both formats read it: no header taken for granted (a
/// header row is told by the parser), rows of any length (a short row is a
/// bad row with its line, not a reader error), fields trimmed, one line a
/// row (neither logger quotes a field, and a stray `"` must not make the
/// rest of the file one field), lines of at most
/// [`ranges::MAX_LINE_BYTES`] ([`line_cap`]). Its errors become
/// [`ImportError`]s through [`csv_error`].
pub(crate) fn open_csv(path: &std::path::Path) -> Result<CsvReader, ImportError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ImportError::Read { path: path.to_path_buf(), source: Box::new(e) })?;
    let capped = line_cap::LineCap::new(file, ranges::MAX_LINE_BYTES);
    Ok(csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .quoting(false)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::with_capacity(1 << 20, capped)))
}

/// The reader [`open_csv`] gives.
pub(crate) type CsvReader = csv::Reader<std::io::BufReader<line_cap::LineCap<std::fs::File>>>;

/// A CSV reader's error on the file at `path`: a line over the cap is a bad
/// row with its line number; anything else a file that cannot be read.
pub(crate) fn csv_error(path: &std::path::Path, err: csv::Error) -> ImportError {
    match line_cap::too_long_in(&err) {
        Some(long) => ImportError::Row {
            path: path.to_path_buf(),
            line: long.line,
            field: "line".into(),
            message: format!("longer than {} bytes, the most apron reads of one line of a log", long.max),
        },
        None => ImportError::Read { path: path.to_path_buf(), source: Box::new(err) },
    }
}

/// The stable UUID apron gives a GPU whose input names none (the pynvml
/// logger's, an nvidia-smi CSV without a `uuid` column, a series without a
/// `UUID` label): `GPU-` and the 128-bit FNV-1a hash of
/// `apron-import/<host>/<index>` in the 8-4-4-4-12 form NVML uses. The
/// same host and index give the same UUID in every import, so a log
/// imported in parts joins up; the hash keeps it from looking like, or
/// meeting, a real one.
pub fn synthetic_uuid(host: &str, index: i32) -> Text {
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in format!("apron-import/{host}/{index}").bytes() {
        hash ^= u128::from(b);
        hash = hash.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let h = format!("{hash:032x}");
    format!("GPU-{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_uuids_are_stable_and_distinct() {
        let a = synthetic_uuid("node01", 0);
        assert_eq!(a, synthetic_uuid("node01", 0));
        assert_ne!(a, synthetic_uuid("node01", 1));
        assert_ne!(a, synthetic_uuid("node02", 0));
        assert_eq!(a.len(), "GPU-".len() + 36);
        assert!(a.starts_with("GPU-"));
    }

    fn gpu(ts: i64, uuid: &str) -> GpuSample {
        GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            interval_ms: 1_000,
            gpu_util_pct: Some(50),
            ..Default::default()
        }
    }

    #[test]
    fn a_second_write_of_the_same_rows_writes_nothing() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let day = 1_796_083_200_000;
        let rows = || HostRows {
            gpus: vec![gpu(day + 1_000, "GPU-b"), gpu(day, "GPU-a"), gpu(day, "GPU-a")],
            procs: vec![],
        };
        let first = write_host(&layout, "n", rows(), &|_| {}).expect("write");
        assert_eq!((first.gpu_rows, first.skipped), (2, 1));
        assert_eq!(first.files, 2, "gpu_samples and gpu_minutes");
        let again = write_host(&layout, "n", rows(), &|_| {}).expect("write");
        assert_eq!(again, Written { gpu_rows: 0, proc_rows: 0, skipped: 3, files: 0 });
        let more = HostRows { gpus: vec![gpu(day + 2_000, "GPU-a"), gpu(day, "GPU-a")], procs: vec![] };
        let grown = write_host(&layout, "n", more, &|_| {}).expect("write");
        assert_eq!((grown.gpu_rows, grown.skipped), (1, 1));
    }
}
