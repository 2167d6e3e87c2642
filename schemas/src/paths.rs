//! The one place that builds paths under the data folder.
//!
//! ```text
//! DATA/
//!   gpu_samples/date=2026-11-30/host=node07/20261130T014500Z-000001.parquet
//!   proc_samples/date=…/host=…/…
//!   wal/host=node07/…
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
    #[error(
        "invalid host name {0:?}: use letters, digits, '.', '-' and '_' only (at most 253 characters)"
    )]
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
        self.table_dir(table)
            .join(format!("date={}", date.format("%Y-%m-%d")))
            .join(format!("host={host}"))
    }

    /// The final path of a file of `table` on `host` whose first tick is
    /// `start_ms` (ms since the epoch), `seq` being the writer's file counter.
    /// The name sorts by time and is the same each time for the same
    /// (start, seq), so rewriting the same rows gives the same file.
    pub fn file_path(&self, table: Table, host: &str, start_ms: i64, seq: u64) -> PathBuf {
        let start = DateTime::<Utc>::from_timestamp_millis(start_ms).unwrap_or_default();
        self.partition_dir(table, start.date_naive(), host)
            .join(format!("{}-{seq:06}.parquet", start.format("%Y%m%dT%H%M%S%3fZ")))
    }

    /// The write-ahead log folder of `host`.
    pub fn wal_dir(&self, host: &str) -> PathBuf {
        self.root.join("wal").join(format!("host={host}"))
    }
}

/// The hidden temporary name a file is written under before its rename.
/// It does not end in `.parquet` and starts with a dot, so no reader lists it.
pub fn temp_path(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
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
    fn file_path_is_hive_partitioned_by_utc_date_and_host() {
        let layout = DataLayout::new("/data");
        // 2026-11-30T23:59:59.000Z
        let p = layout.file_path(Table::GpuSamples, "node07", 1_796_083_199_000, 3);
        assert_eq!(
            p,
            Path::new(
                "/data/gpu_samples/date=2026-11-30/host=node07/20261130T235959000Z-000003.parquet"
            )
        );
        assert_eq!(
            temp_path(&p).file_name().and_then(|n| n.to_str()),
            Some(".20261130T235959000Z-000003.parquet.tmp")
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
