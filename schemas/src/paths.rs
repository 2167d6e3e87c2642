//! The one place that builds paths under the data folder.
//!
//! ```text
//! DATA/
//!   gpu_samples/date=2026-11-30/host=node07/20261130T014500Z-000001.parquet
//!   proc_samples/date=…/host=…/…
//!   gpu_minutes/date=…/host=…/…   (rollups: same name as the raw file they summarise)
//!   proc_minutes/date=…/host=…/…
//!   wal/host=node07/1796003100000-000001.wal      (the open file's rows)
//!   wal/quarantine/host=node07/1796003100000-000001.wal
//!                       (a damaged segment, kept aside once its good rows are in Parquet)
//!   .ship/gpu_samples/date=2026-11-29/host=node07
//!                       (the partition's file as shipped to object storage)
//! ```
//!
//! Partitions are Hive-style (`key=value`), so DataFusion, DuckDB, Spark,
//! Trino and pyarrow all read `date` and `host` from the path. A file is
//! written under [`DataLayout::temp_path`] (a hidden name no reader lists),
//! synced, then renamed to its final name, so readers see it complete or not
//! at all.

use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, Utc};

use crate::Table;

/// A host name or date that cannot be a partition value.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The host name would not make a safe, portable folder name.
    #[error("invalid host name {0:?}: use letters, digits, '.', '-' and '_' only (at most 253 characters)")]
    Host(String),
}

/// The layout of one data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataLayout {
    root: PathBuf,
}

impl DataLayout {
    /// The layout rooted at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The data folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DATA/<table>`: the folder a table is registered from.
    pub fn table_dir(&self, table: Table) -> PathBuf {
        self.root.join(table.name())
    }

    /// `DATA/<table>/date=YYYY-MM-DD/host=HOST`.
    pub fn partition_dir(&self, table: Table, date: NaiveDate, host: &str) -> PathBuf {
        self.table_dir(table).join(format!("date={}", date.format("%Y-%m-%d"))).join(format!("host={host}"))
    }

    /// `DATA/<table>/date=YYYY-MM-DD`: one day of a table, every host.
    pub fn date_dir(&self, table: Table, date: NaiveDate) -> PathBuf {
        self.table_dir(table).join(format!("date={}", date.format("%Y-%m-%d")))
    }

    /// The hidden folder, beside the partition folder of (`table`, `date`,
    /// `host`), in which compaction by process `pid` builds the merged file
    /// before swapping it with the partition folder. It starts with a dot
    /// and holds no `=`, so no reader takes it for a partition.
    pub fn compact_staging_dir(&self, table: Table, date: NaiveDate, host: &str, pid: u32) -> PathBuf {
        self.date_dir(table, date).join(format!("{COMPACT_STAGING_PREFIX}{host}-{pid}"))
    }

    /// The name of the one file a compacted partition of `date` holds:
    /// `<date>T000000000Z-compacted-<when>.parquet`, `compacted_at_ms` being
    /// when compaction ran. The name sorts with the day's other files and is
    /// new each time, so a reader never mistakes it for a file it listed
    /// before.
    pub fn compacted_file_name(date: NaiveDate, compacted_at_ms: i64) -> String {
        let at = DateTime::<Utc>::from_timestamp_millis(compacted_at_ms).unwrap_or_default();
        format!("{}T000000000Z-compacted-{}.parquet", date.format("%Y%m%d"), at.format(FILE_START_FORMAT))
    }

    /// `DATA/.compact.lock`: held (flock) by whoever compacts or applies
    /// retention in this data folder, so two never work on it at once.
    pub fn compact_lock_path(&self) -> PathBuf {
        self.root.join(".compact.lock")
    }

    /// The final path of a file of `table` on `host` whose first tick is
    /// `start_ms` (ms since the epoch), `seq` being the writer's file counter.
    /// The name sorts by time and is the same each time for the same
    /// (start, seq), so rewriting the same rows gives the same file.
    pub fn file_path(&self, table: Table, host: &str, start_ms: i64, seq: u64) -> PathBuf {
        let start = DateTime::<Utc>::from_timestamp_millis(start_ms).unwrap_or_default();
        self.partition_dir(table, start.date_naive(), host)
            .join(format!("{}-{seq:06}.parquet", start.format(FILE_START_FORMAT)))
    }

    /// `DATA/.ship`: the shipping markers of a data folder that ships its
    /// closed days to object storage (hidden: no reader lists it).
    pub fn ship_root(&self) -> PathBuf {
        self.root.join(".ship")
    }

    /// `DATA/.ship/<table>/date=D/host=H`: the marker saying which file of
    /// that partition is in the bucket.
    pub fn ship_marker_path(&self, table: Table, date: NaiveDate, host: &str) -> PathBuf {
        self.ship_root()
            .join(table.name())
            .join(format!("date={}", date.format("%Y-%m-%d")))
            .join(format!("host={host}"))
    }

    /// `DATA/.import`: the hidden folder holding the staging folders of
    /// imports (no reader lists it).
    pub fn import_staging_root(&self) -> PathBuf {
        self.root.join(IMPORT_STAGING_DIR)
    }

    /// `DATA/.import/<host>-<pid>-<nonce>`: the folder in which the import
    /// by process `pid` builds `host`'s files (a data folder of its own)
    /// before it moves them into place together; `nonce` makes the name
    /// new each time (the import creates it exclusively).
    pub fn import_staging_dir(&self, host: &str, pid: u32, nonce: u128) -> PathBuf {
        self.import_staging_root().join(format!("{host}-{pid}-{nonce}"))
    }

    /// The write-ahead log folder of `host`.
    pub fn wal_dir(&self, host: &str) -> PathBuf {
        self.wal_root().join(format!("host={host}"))
    }

    /// The lock file that keeps a second recorder of `host` off this data
    /// folder (in the host's WAL folder, which that recorder alone writes).
    pub fn recorder_lock_path(&self, host: &str) -> PathBuf {
        self.wal_dir(host).join("LOCK")
    }

    /// `DATA/wal/quarantine/host=HOST`: where recovery keeps the segments of
    /// `host` it could not read whole (damaged frames, refused rows), after
    /// their good rows went to Parquet. No reader lists it (its name is no
    /// `host=` folder of `DATA/wal`).
    pub fn wal_quarantine_dir(&self, host: &str) -> PathBuf {
        self.wal_root().join(WAL_QUARANTINE_DIR).join(format!("host={host}"))
    }

    /// The `n`-th free name in [`DataLayout::wal_quarantine_dir`] for the
    /// segment `name` (`<start_ms>-<seq>.wal`): the name itself for `n` 0,
    /// else `<name>.<n>`, for a segment of the same name quarantined before.
    pub fn wal_quarantine_path(&self, host: &str, name: &str, n: u32) -> PathBuf {
        let dir = self.wal_quarantine_dir(host);
        if n == 0 { dir.join(name) } else { dir.join(format!("{name}.{n}")) }
    }

    /// `DATA/wal`: the folder holding every host's write-ahead log folder.
    pub fn wal_root(&self) -> PathBuf {
        self.root.join("wal")
    }

    /// The write-ahead log segment of the open file of `host` whose first
    /// tick is `start_ms` and whose counter is `seq`: the same (start, seq)
    /// as the Parquet files it turns into ([`DataLayout::file_path`]), so
    /// the segment of a file that already exists is known without reading
    /// it. The name is `<start_ms>-<seq>.wal` (see [`parse_wal_segment_name`]).
    pub fn wal_segment_path(&self, host: &str, start_ms: i64, seq: u64) -> PathBuf {
        self.wal_dir(host).join(format!("{start_ms}-{seq:06}.{WAL_EXTENSION}"))
    }
}

/// The file extension of every data file; hidden temporary files
/// (`.name.parquet.tmp`) do not end with it and are never read.
pub const DATA_FILE_EXTENSION: &str = ".parquet";

/// True for a file name readers read (`*.parquet`, not hidden, not
/// `_`-prefixed): the rule of the analysis CLI, pyarrow and Spark, which
/// skip hidden names (`.x.parquet`, macOS `._x.parquet` copies) and
/// `_`-names (Spark's and Hive's bookkeeping).
pub fn is_data_file_name(name: &str) -> bool {
    !name.starts_with(['.', '_']) && name.ends_with(DATA_FILE_EXTENSION)
}

/// [`is_data_file_name`] as a glob over a file name, for listings that
/// filter by pattern (the analysis CLI's DataFusion listing).
pub const DATA_FILE_GLOB: &str = "[!._]*.parquet";

/// How a data file's name writes its first tick (UTC, to the millisecond).
const FILE_START_FORMAT: &str = "%Y%m%dT%H%M%S%3fZ";

/// The (start_ms, seq) of a data file name written by
/// [`DataLayout::file_path`]; `None` for any other name (compacted files,
/// other tools' files).
pub fn parse_data_file_name(name: &str) -> Option<(i64, u64)> {
    let stem = name.strip_suffix(DATA_FILE_EXTENSION)?;
    let (start, seq) = stem.rsplit_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let start = chrono::NaiveDateTime::parse_from_str(start, FILE_START_FORMAT).ok()?;
    Some((start.and_utc().timestamp_millis(), seq.parse().ok()?))
}

/// Whether `name` is named as apron names the data files it writes: the
/// writer's `<start>-<seq>.parquet` ([`DataLayout::file_path`]) or
/// compaction's `<date>T000000000Z-compacted-<when>.parquet`
/// ([`DataLayout::compacted_file_name`]). Shipping replaces or removes
/// only objects so named; another tool's files, `_SUCCESS` markers and the
/// like are never apron's to touch.
pub fn is_own_data_file_name(name: &str) -> bool {
    if parse_data_file_name(name).is_some() {
        return true;
    }
    let Some((day, when)) = name.strip_suffix(DATA_FILE_EXTENSION).and_then(|s| s.split_once("-compacted-"))
    else {
        return false;
    };
    let time = |s: &str| chrono::NaiveDateTime::parse_from_str(s, FILE_START_FORMAT).is_ok();
    day.ends_with("T000000000Z") && time(day) && time(when)
}

/// The folder of `DATA/wal` holding quarantined segments
/// ([`DataLayout::wal_quarantine_dir`]).
pub const WAL_QUARANTINE_DIR: &str = "quarantine";

/// The extension of write-ahead log segments.
pub const WAL_EXTENSION: &str = "wal";

/// The (start_ms, seq) of a segment file name written by
/// [`DataLayout::wal_segment_path`]; `None` for any other name (temporary
/// files, other tools' files).
pub fn parse_wal_segment_name(name: &str) -> Option<(i64, u64)> {
    let stem = name.strip_suffix(WAL_EXTENSION)?.strip_suffix('.')?;
    let (start, seq) = stem.rsplit_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((start.parse().ok()?, seq.parse().ok()?))
}

/// The folder of the data folder holding imports' staging folders
/// ([`DataLayout::import_staging_root`]); hidden, so no reader lists it.
pub const IMPORT_STAGING_DIR: &str = ".import";

/// The prefix of compaction's hidden staging folders
/// ([`DataLayout::compact_staging_dir`]).
pub const COMPACT_STAGING_PREFIX: &str = ".compact-";

/// The prefix of the hidden names expired partitions are renamed to
/// before they are removed ([`expired_path`]).
pub const EXPIRED_PREFIX: &str = ".expired-";

/// The hidden name, beside `dir`, that retention renames the partition
/// folder `dir` to (by process `pid`) before removing it, so readers see the
/// partition vanish at once rather than file by file. It starts with a dot
/// and holds no `=`, so no reader takes it for a partition.
pub fn expired_path(dir: &Path, pid: u32) -> PathBuf {
    let name = dir.file_name().map(|n| n.to_string_lossy().replace('=', "_")).unwrap_or_default();
    dir.with_file_name(format!("{EXPIRED_PREFIX}{name}-{pid}"))
}

/// The date of a `date=YYYY-MM-DD` folder name; `None` for any other name.
pub fn parse_date_dir_name(name: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(name.strip_prefix("date=")?, "%Y-%m-%d").ok()
}

/// The host of a `host=NAME` folder name; `None` for any other name.
pub fn parse_host_dir_name(name: &str) -> Option<&str> {
    name.strip_prefix("host=").filter(|h| !h.is_empty())
}

/// The hidden temporary name a file is written under before its rename.
/// It does not end in `.parquet` and starts with a dot, so no reader lists it.
pub fn temp_path(final_path: &Path) -> PathBuf {
    let name = final_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    final_path.with_file_name(format!(".{name}.tmp"))
}

/// Checks that `host` is safe as a partition value and a folder name.
pub fn validate_host(host: &str) -> Result<(), PathError> {
    let ok = !host.is_empty()
        && host.len() <= 253
        && !host.starts_with('.')
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if ok { Ok(()) } else { Err(PathError::Host(host.to_owned())) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_file_names_parse_back_to_their_start_and_seq() {
        let layout = DataLayout::new("/d");
        let path = layout.file_path(Table::GpuSamples, "n1", 1_796_083_212_345, 7);
        let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
        assert_eq!(name, "20261201T000012345Z-000007.parquet");
        assert_eq!(parse_data_file_name(name), Some((1_796_083_212_345, 7)));
        let compacted =
            DataLayout::compacted_file_name(NaiveDate::from_ymd_opt(2026, 11, 29).expect("date"), 0);
        assert_eq!(parse_data_file_name(&compacted), None);
        assert_eq!(parse_data_file_name("part-0001.parquet"), None);
        assert_eq!(parse_data_file_name("20261130T000012345Z-000007.wal"), None);
    }

    #[test]
    fn own_names_are_the_writers_and_compactions() {
        let layout = DataLayout::new("/d");
        let written = layout.file_path(Table::GpuSamples, "n1", 1_796_083_212_345, 7);
        let written = written.file_name().and_then(|n| n.to_str()).expect("a name");
        let day = NaiveDate::from_ymd_opt(2026, 11, 29).expect("date");
        let compacted = DataLayout::compacted_file_name(day, 1_796_083_212_345);
        assert!(is_own_data_file_name(written), "{written}");
        assert!(is_own_data_file_name(&compacted), "{compacted}");
        for other in [
            "_SUCCESS",
            "readme.txt",
            "part-00000.parquet",
            "part-00000-3f2a.snappy.parquet",
            ".20261201T000012345Z-000007.parquet.tmp",
            "20261201T000012345Z-000007-old.parquet",
            "20261129T000000000Z-compacted-yesterday.parquet",
            "20261129T120000000Z-compacted-20261201T000012345Z.parquet",
        ] {
            assert!(!is_own_data_file_name(other), "{other}");
        }
    }

    #[test]
    fn file_path_is_hive_partitioned_by_utc_date_and_host() {
        let layout = DataLayout::new("/data");
        // 2026-11-30T23:59:59.000Z
        let p = layout.file_path(Table::GpuSamples, "node07", 1_796_083_199_000, 3);
        assert_eq!(
            p,
            Path::new("/data/gpu_samples/date=2026-11-30/host=node07/20261130T235959000Z-000003.parquet")
        );
        assert_eq!(
            temp_path(&p).file_name().and_then(|n| n.to_str()),
            Some(".20261130T235959000Z-000003.parquet.tmp")
        );
    }

    #[test]
    fn wal_segment_names_round_trip() {
        let layout = DataLayout::new("/data");
        let p = layout.wal_segment_path("node07", 1_796_083_199_000, 3);
        assert_eq!(p, Path::new("/data/wal/host=node07/1796083199000-000003.wal"));
        let name = p.file_name().and_then(|n| n.to_str()).expect("utf-8");
        assert_eq!(parse_wal_segment_name(name), Some((1_796_083_199_000, 3)));
        assert_eq!(
            layout.wal_quarantine_path("node07", name, 0),
            Path::new("/data/wal/quarantine/host=node07/1796083199000-000003.wal")
        );
        assert_eq!(
            layout.wal_quarantine_path("node07", name, 2),
            Path::new("/data/wal/quarantine/host=node07/1796083199000-000003.wal.2")
        );
        assert_eq!(parse_wal_segment_name("-5-000001.wal"), Some((-5, 1)));
        for other in ["1-2.wal.tmp", "x-1.wal", "1-.wal", "1-x.wal", "12.wal", "1-2.parquet"] {
            assert_eq!(parse_wal_segment_name(other), None, "{other}");
        }
    }

    #[test]
    fn compaction_paths_are_hidden_and_partition_names_parse() {
        let layout = DataLayout::new("/data");
        let day = NaiveDate::from_ymd_opt(2026, 11, 30).expect("valid date");
        let staging = layout.compact_staging_dir(Table::GpuMinutes, day, "node07", 42);
        assert_eq!(staging, Path::new("/data/gpu_minutes/date=2026-11-30/.compact-node07-42"));
        assert_eq!(
            DataLayout::compacted_file_name(day, 1_796_083_199_000),
            "20261130T000000000Z-compacted-20261130T235959000Z.parquet"
        );
        assert_eq!(parse_date_dir_name("date=2026-11-30"), Some(day));
        assert_eq!(parse_date_dir_name("date=yesterday"), None);
        assert_eq!(parse_date_dir_name("2026-11-30"), None);
        assert_eq!(parse_host_dir_name("host=node07"), Some("node07"));
        assert_eq!(parse_host_dir_name("host="), None);
        assert_eq!(parse_host_dir_name(".compact-node07-42"), None);
        assert_eq!(layout.import_staging_dir("node07", 42, 7), Path::new("/data/.import/node07-42-7"));
        assert_eq!(
            expired_path(&layout.date_dir(Table::GpuSamples, day), 7),
            Path::new("/data/gpu_samples/.expired-date_2026-11-30-7")
        );
    }

    #[test]
    fn host_names_that_break_paths_are_refused() {
        for bad in ["", "a/b", "..", ".hidden", "a=b", "node 1"] {
            assert!(validate_host(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["node07", "gpu-a.example.com", "n_1"] {
            assert!(validate_host(good).is_ok(), "{good:?} refused");
        }
    }
}
