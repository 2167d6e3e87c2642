//! `apron import`: history people already have, brought into the data
//! folder through the recorder's own writer.
//!
//! Each format has its parser, which reads the whole input into plain rows
//! ([`HostRows`]) and fails on the first bad row with its file, line and
//! field ([`ImportError::Row`]) before anything is written:
//! [`nvidia_smi`] (the CSV of `nvidia-smi --query-gpu` and
//! `--query-compute-apps`), [`pynvml`] (the CSV of the first seed guide's
//! logger) and [`prometheus`] (dcgm-exporter series from a Prometheus
//! server's HTTP API). A row is bad when a value is no number, has a unit
//! its column cannot have, or is out of the range a GPU can report
//! ([`ranges`], the one place those are set); a CSV line longer than
//! [`ranges::MAX_LINE_BYTES`] is refused before it is read whole
//! ([`line_cap`]). Then [`write_host`] writes a host's rows through
//! [`RollingWriter`]: the recorder's layout, names, sort order and minute
//! rollups, one file per table and host per UTC day.
//!
//! Writing holds the data folder's lock and refuses a host a live recorder
//! holds ([`lock`]), and lands all of a host's files or none
//! ([`staging`]): so imports into one data folder, at once or killed
//! half-way, never leave a row twice or a raw file without its rollups.
//!
//! Importing is idempotent: rows whose key ((gpu_uuid, ts) for
//! `gpu_samples`, (gpu_uuid, pid, ts) for `proc_samples`) is already in the
//! target partition ([`existing`]) are skipped, so importing the same file
//! twice writes nothing the second time, and a log that grew since the last
//! import adds only its new rows. Of rows of one key within the input, the
//! first (in the order of the files and lines given) is kept, and how many
//! were dropped, and how many of those had other values, is counted
//! ([`Written`]).
//!
//! What the writer, the layout and the rollups are is `apron_store`'s
//! business; this module only turns foreign rows into `GpuSample` and
//! `ProcSample` values.

pub mod error;
pub mod existing;
pub mod exposition;
pub mod interval;
pub mod line_cap;
pub mod lock;
pub mod nvidia_smi;
pub mod prometheus;
pub mod pynvml;
pub mod ranges;
pub mod scrape;
pub mod smi_monitor;
pub mod staging;
pub mod stream;
pub mod units;

pub use error::ImportError;

use std::time::Duration;

use apron_schemas::paths::validate_host;
use apron_schemas::test_pause::{pause_at, points};
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
    /// Rows skipped: their key is in the data folder already.
    pub skipped: u64,
    /// Rows dropped as repeats of an earlier row of the input with the same
    /// key (the earlier one, in the order of the files and lines given, is
    /// kept).
    pub repeated: u64,
    /// Of [`Written::repeated`], those whose values differ from the row
    /// kept.
    pub conflicting: u64,
    /// Parquet files written (raw tables and rollups).
    pub files: u64,
}

impl std::ops::AddAssign for Written {
    /// What two writes did together (a Prometheus import's days).
    fn add_assign(&mut self, other: Written) {
        self.gpu_rows += other.gpu_rows;
        self.proc_rows += other.proc_rows;
        self.skipped += other.skipped;
        self.repeated += other.repeated;
        self.conflicting += other.conflicting;
        self.files += other.files;
    }
}

/// How long an import's files span: a UTC day, so each day of an import is
/// one file per table and host, as compaction leaves closed days.
pub const IMPORT_ROTATE: Duration = Duration::from_secs(DAY_SECS);

/// What [`write_host`] tells its caller while it works.
pub trait Events {
    /// `n` more rows were handed to the writer.
    fn progress(&self, n: u64);
    /// A line for the user (waiting for a lock, what was done with what an
    /// earlier import left).
    fn notice(&self, line: &str);
}

/// Events nobody listens to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Events for Quiet {
    fn progress(&self, _: u64) {}
    fn notice(&self, _: &str) {}
}

/// Writes `rows` of `host` under `layout` through the recorder's writer,
/// skipping rows whose key is already in the target partitions or earlier
/// in `rows`.
///
/// It holds the data folder's lock throughout, waiting for it ([`lock`]),
/// and refuses a host a live recorder holds. It finishes or removes what
/// earlier imports left ([`staging::recover`]), then writes every file of
/// the host in a staging folder and moves them into place together
/// ([`staging`]). When this returns `Ok`, every row written is durable on
/// disk; on error, or when the process is killed, none of them is in the
/// data folder, or (killed while moving them) all of them are once the next
/// import has run.
pub fn write_host(
    layout: &DataLayout,
    host: &str,
    rows: HostRows,
    events: &dyn Events,
) -> Result<Written, ImportError> {
    let mut one = Some(rows);
    write_host_batches(layout, host, events, &mut || one.take().map(Ok))
}

/// [`write_host`] for rows that come in batches ([`stream`]: a file read
/// a few UTC days at a time), each batch's rows later than the last's:
/// every batch is written into the same staging folder, and all of them
/// land together or none does. A batch that fails (a bad row met in a
/// later read) stops the import with nothing written.
pub fn write_host_batches(
    layout: &DataLayout,
    host: &str,
    events: &dyn Events,
    next: &mut dyn FnMut() -> Option<Result<HostRows, ImportError>>,
) -> Result<Written, ImportError> {
    // The host names folders (and a lock file) before the writer checks it.
    validate_host(host).map_err(|e| ImportError::Input { what: "host".into(), message: e.to_string() })?;
    let _data = lock::DataLock::acquire(layout, &|path| {
        events.notice(&format!(
            "waiting for {}: another import, a compaction or a retention run is writing into this data folder",
            path.display()
        ));
    })?;
    for done in staging::recover(layout)? {
        events.notice(&match done {
            staging::Recovered::Finished { dir, files } => {
                format!(
                    "finished an import that stopped while moving its {files} files into place ({})",
                    dir.display()
                )
            }
            staging::Recovered::Removed { dir } => {
                format!("removed the files of an import that did not finish ({})", dir.display())
            }
            staging::Recovered::Waiting { dir, host } => format!(
                "left an unfinished import of host {host} for later: a live recorder holds that host ({})",
                dir.display()
            ),
        });
    }
    let _host = lock::HostLock::acquire(layout, host)?;

    let write_err = |source| ImportError::Write { host: host.to_owned(), source };
    let mut written = Written::default();
    let mut open: Option<(staging::Staging, RollingWriter)> = None;
    let mut tick = Tick::default();
    let mut pending = 0u64;
    while let Some(rows) = next() {
        let HostRows { mut gpus, mut procs } = rows?;
        // A stable sort: of rows with one key, the first of the input comes
        // first, and is the one kept.
        gpus.sort_by(|a, b| (a.ts, &a.gpu_uuid).cmp(&(b.ts, &b.gpu_uuid)));
        procs.sort_by(|a, b| (a.ts, &a.gpu_uuid, a.pid).cmp(&(b.ts, &b.gpu_uuid, b.pid)));
        let (repeated, conflicting) = dedup(&mut gpus, |a, b| a.ts == b.ts && a.gpu_uuid == b.gpu_uuid);
        let more = dedup(&mut procs, |a, b| a.ts == b.ts && a.gpu_uuid == b.gpu_uuid && a.pid == b.pid);
        written.repeated += repeated + more.0;
        written.conflicting += conflicting + more.1;
        let before = (gpus.len() + procs.len()) as u64;
        let known =
            existing::Keys::read(layout, host, gpus.iter().map(|g| g.ts).chain(procs.iter().map(|p| p.ts)))?;
        gpus.retain(|g| !known.has_gpu(&g.gpu_uuid, g.ts));
        procs.retain(|p| !known.has_proc(&p.gpu_uuid, p.pid, p.ts));
        written.gpu_rows += gpus.len() as u64;
        written.proc_rows += procs.len() as u64;
        written.skipped += before - (gpus.len() + procs.len()) as u64;
        if gpus.is_empty() && procs.is_empty() {
            continue;
        }
        if open.is_none() {
            let staged = staging::Staging::create(layout, host)?;
            let writer = RollingWriter::new(staged.layout(), host, IMPORT_ROTATE).map_err(write_err)?;
            open = Some((staged, writer));
        }
        let Some((_, writer)) = open.as_mut() else { continue };
        let (mut g, mut p) = (gpus.into_iter().peekable(), procs.into_iter().peekable());
        loop {
            let at = match (g.peek(), p.peek()) {
                (Some(a), Some(b)) => a.ts.min(b.ts),
                (Some(a), None) => a.ts,
                (None, Some(b)) => b.ts,
                (None, None) => break,
            };
            tick.clear();
            while let Some(row) = g.next_if(|r| r.ts == at) {
                tick.gpus.push(row);
            }
            while let Some(row) = p.next_if(|r| r.ts == at) {
                tick.procs.push(row);
            }
            pending += (tick.gpus.len() + tick.procs.len()) as u64;
            writer.push(at, &tick).map_err(write_err)?;
            if pending >= 50_000 {
                events.progress(pending);
                pending = 0;
            }
        }
    }
    let Some((staged, mut writer)) = open else { return Ok(written) };
    writer.close().map_err(write_err)?;
    events.progress(pending);
    pause_at(points::IMPORT_STAGED);
    written.files = staged.commit()?;
    Ok(written)
}

/// Drops from `rows` (sorted by key) every row whose key (`same_key`) is
/// that of the row before it, keeping the first; returns how many were
/// dropped, and how many of those differ from the row kept.
fn dedup<T: PartialEq>(rows: &mut Vec<T>, same_key: impl Fn(&T, &T) -> bool) -> (u64, u64) {
    let (mut dropped, mut differing) = (0, 0);
    rows.dedup_by(|later, kept| {
        let same = same_key(kept, later);
        if same {
            dropped += 1;
            if later != kept {
                differing += 1;
            }
        }
        same
    });
    (dropped, differing)
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

/// A text file read a line at a time through [`open_csv`]'s reader and
/// line cap: each line one field (no delimiter a log holds), trimmed.
pub(crate) fn open_lines(path: &std::path::Path) -> Result<CsvReader, ImportError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ImportError::Read { path: path.to_path_buf(), source: Box::new(e) })?;
    let capped = line_cap::LineCap::new(file, ranges::MAX_LINE_BYTES);
    Ok(csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .quoting(false)
        .delimiter(0x1f)
        .trim(csv::Trim::All)
        .from_reader(std::io::BufReader::with_capacity(1 << 20, capped)))
}

/// Moves `reader` (of [`open_csv`] or [`open_lines`]) to the start of the
/// record at byte `byte`, line `line` (a survey's `stream::At`), as if it
/// had read the file up to there.
pub(crate) fn seek_csv(
    reader: &mut CsvReader,
    path: &std::path::Path,
    (line, byte): (u64, u64),
) -> Result<(), ImportError> {
    let mut pos = csv::Position::new();
    pos.set_byte(byte).set_line(line);
    reader.seek_raw(std::io::SeekFrom::Start(byte), pos).map_err(|e| csv_error(path, e))?;
    reader.get_mut().get_mut().set_line(line);
    Ok(())
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
    synthetic_uuid_of(host, &index.to_string())
}

/// [`synthetic_uuid`] of a GPU named otherwise than by its index (`pci/`
/// and its PCI bus id): the hash of `apron-import/<host>/<name>`.
pub fn synthetic_uuid_of(host: &str, name: &str) -> Text {
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in format!("apron-import/{host}/{name}").bytes() {
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
        let first = write_host(&layout, "n", rows(), &Quiet).expect("write");
        assert_eq!((first.gpu_rows, first.skipped, first.repeated, first.conflicting), (2, 0, 1, 0));
        assert_eq!(first.files, 2, "gpu_samples and gpu_minutes");
        let again = write_host(&layout, "n", rows(), &Quiet).expect("write");
        assert_eq!(
            again,
            Written { gpu_rows: 0, proc_rows: 0, skipped: 2, repeated: 1, conflicting: 0, files: 0 }
        );
        let more = HostRows { gpus: vec![gpu(day + 2_000, "GPU-a"), gpu(day, "GPU-a")], procs: vec![] };
        let grown = write_host(&layout, "n", more, &Quiet).expect("write");
        assert_eq!((grown.gpu_rows, grown.skipped), (1, 1));
    }

    #[test]
    fn of_rows_with_one_key_the_first_is_kept_and_the_differing_ones_counted() {
        let mut rows = vec![(1, 'a'), (1, 'a'), (1, 'b'), (2, 'c'), (3, 'd'), (3, 'e')];
        assert_eq!(dedup(&mut rows, |x, y| x.0 == y.0), (3, 2));
        assert_eq!(rows, [(1, 'a'), (2, 'c'), (3, 'd')]);
    }
}
