//! Files read a few UTC days at a time, so that an import's memory does
//! not grow with its logs.
//!
//! A log is read twice or more. The first read ([`survey`]) checks every
//! row (a bad row stops the import before anything is written), counts
//! the rows of each UTC day, keeps a bounded sample of each GPU's (and
//! process's) gaps for the interval of a series a batch sees once, and
//! refuses a file evidently keyed wrong ([`MisKeyed`]). Then the days are
//! cut into batches of at most [`BATCH_ROWS`] rows (or `--batch-rows`; a
//! day is never cut),
//! and each batch is read from every file of the host ([`read_batch`]):
//! its rows, only, are in memory while it is written. A file whose days
//! come in order (a log, as loggers append) is read from the record where
//! the batch's first day starts up to the first row after its last day, so
//! the whole import reads it twice; any other file is read whole for each
//! batch.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use apron_schemas::time::DAY_SECS;
use apron_schemas::{GpuSample, ProcSample, Text};

use super::{HostRows, ImportError, interval};

/// The most rows one batch holds by default (unless one day has more):
/// some 200 MB of rows in memory. `--batch-rows` sets it.
pub const BATCH_ROWS: u64 = 1_000_000;

/// A row of a log.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// A `gpu_samples` row.
    Gpu(GpuSample),
    /// A `proc_samples` row.
    Proc(ProcSample),
}

impl Row {
    fn ts(&self) -> i64 {
        match self {
            Row::Gpu(g) => g.ts,
            Row::Proc(p) => p.ts,
        }
    }

    /// The key two rows of one file must not share: (GPU, pid, time).
    fn key(&self) -> (Text, Option<i32>, i64) {
        match self {
            Row::Gpu(g) => (g.gpu_uuid.clone(), None, g.ts),
            Row::Proc(p) => (p.gpu_uuid.clone(), Some(p.pid), p.ts),
        }
    }

    /// The series whose spacing is the row's interval.
    fn series(&self) -> (Text, Option<i32>) {
        match self {
            Row::Gpu(g) => (g.gpu_uuid.clone(), None),
            Row::Proc(p) => (p.gpu_uuid.clone(), Some(p.pid)),
        }
    }
}

/// Where a row's record starts in its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct At {
    /// The line, 1-based.
    pub line: u64,
    /// The byte offset.
    pub byte: u64,
}

/// The callback a [`Scan`] hands each row to, with where its record
/// starts; it answers whether to read on (`false`: stop, the rest of the
/// file is not wanted).
pub type Emit<'a> = dyn FnMut(At, Row) -> Result<bool, ImportError> + 'a;

/// A log that can be read from its start as often as needed, giving its
/// rows in file order.
pub trait Scan {
    /// The file.
    fn path(&self) -> &Path;
    /// Reads the file from its start (or, once it has been read whole and
    /// is [`Scan::seekable`], from the record at `from`), handing every row
    /// to `emit` until it says stop; `progress(bytes)` now and then.
    fn scan(
        &mut self,
        from: Option<At>,
        progress: &dyn Fn(u64),
        emit: &mut Emit<'_>,
    ) -> Result<(), ImportError>;
    /// Whether a read may start at a record: no row's time depends on the
    /// rows before it (a time of day counts midnights, a counter its first
    /// value, a scrape its number). Asked after the first read.
    fn seekable(&self) -> bool {
        false
    }
    /// After the first read: what only the whole file tells (GPUs told
    /// apart by their bus ids, numbered in bus order; a log of several
    /// GPUs that names none of them, refused).
    fn finish(&mut self) -> Result<(), ImportError> {
        Ok(())
    }
    /// What the first read met and did something about, for the user.
    fn notices(&self) -> Vec<String> {
        Vec::new()
    }
    /// The host the file's rows say they are of, once read (a scrape's
    /// labels); `None` where only the command line names it.
    fn host(&self) -> Option<&str> {
        None
    }
}

/// Where each UTC day starts in one file, and whether its days come in
/// order (each row's day at or after the day of the row before it).
#[derive(Debug, Default, Clone)]
pub struct FileDays {
    /// The record of each day's first row.
    pub starts: BTreeMap<i64, At>,
    /// Whether no row's day is before an earlier row's.
    pub in_order: bool,
}

/// What the first read found.
#[derive(Debug, Default)]
pub struct Survey {
    /// Rows per UTC day (days since the epoch).
    pub days: BTreeMap<i64, u64>,
    /// Each file's days, in the order of the files.
    pub files: Vec<FileDays>,
    /// The median gap between consecutive samples of one series over the
    /// sampled gaps of all, for a series a batch sees once.
    pub fallback_interval_ms: Option<i64>,
}

impl Survey {
    /// All rows.
    pub fn rows(&self) -> u64 {
        self.days.values().sum()
    }

    /// The batches: runs of whole days of at most `max_rows` rows (a day
    /// of more is a batch of its own).
    pub fn batches(&self, max_rows: u64) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = Vec::new();
        let mut in_batch = 0u64;
        for (&day, &n) in &self.days {
            match out.last_mut() {
                Some(last) if in_batch + n <= max_rows => {
                    last.1 = day;
                    in_batch += n;
                }
                _ => {
                    out.push((day, day));
                    in_batch = n;
                }
            }
        }
        out
    }
}

/// The UTC day of `ts` (ms), as days since the epoch.
fn day_of(ts: i64) -> i64 {
    ts.div_euclid(DAY_SECS as i64 * 1_000)
}

/// The most gaps of one series kept for the fallback interval.
const GAPS_PER_SERIES: usize = 4_096;

/// How many recent rows the key check remembers: more than the rows of
/// one cycle of any host's GPUs and processes.
const RECENT_ROWS: usize = 16_384;

/// A file whose rows share their GPU and time with another row of the
/// file while holding other values this often (in tenths of its rows) is
/// keyed wrong and refused: the GPUs it logged cannot be told apart.
const MIS_KEYED_TENTHS: u64 = 1;

/// The first read of every file ([`Survey`]).
pub fn survey(files: &mut [Box<dyn Scan + '_>], progress: &dyn Fn(u64)) -> Result<Survey, ImportError> {
    let mut survey = Survey::default();
    let mut gaps: Vec<i64> = Vec::new();
    for file in files.iter_mut() {
        let path = file.path().to_path_buf();
        let mut last: HashMap<(Text, Option<i32>), (i64, usize)> = HashMap::new();
        let mut check = MisKeyed::new(path.clone());
        let mut days = FileDays { starts: BTreeMap::new(), in_order: true };
        let mut last_day = i64::MIN;
        file.scan(None, progress, &mut |at, row| {
            let ts = row.ts();
            let day = day_of(ts);
            *survey.days.entry(day).or_default() += 1;
            days.starts.entry(day).or_insert(at);
            days.in_order &= day >= last_day;
            last_day = last_day.max(day);
            let (prev, n) = last.entry(row.series()).or_insert((ts, 0));
            if ts > *prev && *n < GAPS_PER_SERIES {
                gaps.push(ts - *prev);
                *n += 1;
            }
            *prev = (*prev).max(ts);
            check.row(at.line, row);
            Ok(true)
        })?;
        file.finish()?;
        check.verdict()?;
        survey.files.push(days);
    }
    if !gaps.is_empty() {
        let mid = gaps.len() / 2;
        survey.fallback_interval_ms = Some(*gaps.select_nth_unstable(mid).1);
    }
    Ok(survey)
}

/// Reads the rows of days `from..=to` from every file, with their
/// intervals: `given`, else the spacing of their series in the batch,
/// else the survey's fallback.
pub fn read_batch(
    files: &mut [Box<dyn Scan + '_>],
    (from, to): (i64, i64),
    given: Option<i64>,
    survey: &Survey,
) -> Result<HostRows, ImportError> {
    let mut rows = HostRows::default();
    let mut first: Option<PathBuf> = None;
    for (k, file) in files.iter_mut().enumerate() {
        first.get_or_insert_with(|| file.path().to_path_buf());
        // A file whose days come in order is read from the batch's first
        // day and no further than its last: each row is read once more in
        // all, not once per batch.
        let days = survey.files.get(k).filter(|d| d.in_order && file.seekable());
        let start = match days {
            Some(d) => match d.starts.range(from..=to).next() {
                Some((_, at)) => Some(*at),
                None => continue,
            },
            None => None,
        };
        let ordered = days.is_some();
        file.scan(start, &|_| {}, &mut |_, row| {
            let day = day_of(row.ts());
            if ordered && day > to {
                return Ok(false);
            }
            if (from..=to).contains(&day) {
                match row {
                    Row::Gpu(g) => rows.gpus.push(g),
                    Row::Proc(p) => rows.procs.push(p),
                }
            }
            Ok(true)
        })?;
    }
    let path = first.unwrap_or_default();
    interval::set_intervals(&path, &mut rows, given, survey.fallback_interval_ms)?;
    Ok(rows)
}

/// Rows of one file that share their key with an earlier, nearby row but
/// not its values: a log whose GPU key does not tell its GPUs apart (an
/// `index` column that is 0 on every GPU) loses most of its rows to
/// deduplication, and is refused instead. Whole-second timestamps with
/// faster sampling conflict now and then: counted and said, not refused.
struct MisKeyed {
    path: PathBuf,
    recent: HashMap<(Text, Option<i32>, i64), (u64, Row)>,
    order: VecDeque<(Text, Option<i32>, i64)>,
    rows: u64,
    conflicts: u64,
    first: Option<(u64, u64, Text, i64)>,
}

impl MisKeyed {
    fn new(path: PathBuf) -> MisKeyed {
        MisKeyed { path, recent: HashMap::new(), order: VecDeque::new(), rows: 0, conflicts: 0, first: None }
    }

    fn row(&mut self, line: u64, row: Row) {
        self.rows += 1;
        let key = row.key();
        if let Some((earlier, kept)) = self.recent.get(&key) {
            if kept != &row {
                self.conflicts += 1;
                if self.first.is_none() {
                    self.first = Some((*earlier, line, key.0.clone(), key.2));
                }
            }
            return;
        }
        if self.order.len() == RECENT_ROWS
            && let Some(old) = self.order.pop_front()
        {
            self.recent.remove(&old);
        }
        self.order.push_back(key.clone());
        self.recent.insert(key, (line, row));
    }

    fn verdict(&self) -> Result<(), ImportError> {
        let Some((earlier, line, _, ts)) = &self.first else { return Ok(()) };
        if self.conflicts * 10 < self.rows * MIS_KEYED_TENTHS {
            return Ok(());
        }
        let at = chrono::DateTime::from_timestamp_millis(*ts)
            .map_or_else(|| ts.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string());
        Err(ImportError::Row {
            path: self.path.clone(),
            line: *line,
            field: "GPU key".into(),
            message: format!(
                "the same GPU at the same time ({at}) as line {earlier}, with other values; {} of the \
                 file's {} rows are such: the file's GPU key (index or uuid) does not tell its GPUs \
                 apart. Log with nvidia-smi's own index, uuid or pci.bus_id column (e.g. \
                 --query-gpu=timestamp,index,uuid,…)",
                self.conflicts, self.rows
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_whole_days_of_at_most_the_batch_rows() {
        let survey = Survey {
            days: BTreeMap::from([(1, 400_000), (2, 500_000), (3, 300_000), (4, 1_500_000), (6, 10)]),
            files: Vec::new(),
            fallback_interval_ms: None,
        };
        assert_eq!(survey.batches(BATCH_ROWS), [(1, 2), (3, 3), (4, 4), (6, 6)]);
        assert_eq!(survey.batches(400_000), [(1, 1), (2, 2), (3, 3), (4, 4), (6, 6)]);
        assert_eq!(survey.rows(), 2_700_010);
        assert_eq!(day_of(-1), -1);
        assert_eq!(day_of(86_400_000), 1);
    }
}
