//! Walking the data folder: every listing of its sub-folders goes through
//! [`subfolders`], and every walk over a table's Hive partitions
//! (`TABLE/date=YYYY-MM-DD/host=NAME/`) through [`partition_dirs`]. What
//! the names mean (which are partitions, which are hidden leftovers) is
//! [`crate::paths`]'; what a walk does with each folder is its caller's.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::paths::{is_data_file_name, parse_date_dir_name, parse_host_dir_name};
use crate::{DataLayout, Table};

/// A folder of the data folder could not be listed.
#[derive(Debug, thiserror::Error)]
#[error("cannot list {}", path.display())]
pub struct ListError {
    /// The folder.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: io::Error,
}

/// The sub-folders of `dir` as (name, path), sorted by name; `None` when
/// `dir` does not exist. Other entries (files, symbolic links) are left out.
pub fn subfolders(dir: &Path) -> Result<Option<Vec<(String, PathBuf)>>, ListError> {
    let list_err = |source| ListError { path: dir.to_path_buf(), source };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(list_err(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(list_err)?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.push((entry.file_name().to_string_lossy().into_owned(), entry.path()));
        }
    }
    out.sort();
    Ok(Some(out))
}

/// The data files of one partition folder (files, or links to files, named
/// as [`crate::paths::is_data_file_name`] says: `*.parquet`, not hidden),
/// as (name, path) sorted by name; none when `dir` cannot be listed.
pub fn data_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str().filter(|n| is_data_file_name(n))?.to_owned();
            Some((name, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// One partition folder of a table: `TABLE/date=DATE/host=HOST`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PartitionDir {
    /// The UTC day of its `date=` folder.
    pub date: NaiveDate,
    /// The host of its `host=` folder.
    pub host: String,
    /// The folder.
    pub path: PathBuf,
}

/// What a walk does with a folder it cannot list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlistable {
    /// Fail with [`ListError`]: the writers, which must not miss a partition.
    Fail,
    /// Leave the folder out: readers, which report what they can read.
    Skip,
}

/// The partition folders of `table` under `layout`, sorted by date then
/// host: every `date=` folder whose name is a date, and in it every `host=`
/// folder whose name is a host (hidden staging and expired folders are
/// neither). A missing table folder has none.
pub fn partition_dirs(
    layout: &DataLayout,
    table: Table,
    unlistable: Unlistable,
) -> Result<Vec<PartitionDir>, ListError> {
    let list = |dir: &Path| match subfolders(dir) {
        Ok(found) => Ok(found.unwrap_or_default()),
        Err(_) if unlistable == Unlistable::Skip => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let mut out = Vec::new();
    for (date_name, date_dir) in list(&layout.table_dir(table))? {
        let Some(date) = parse_date_dir_name(&date_name) else { continue };
        for (host_name, path) in list(&date_dir)? {
            // A name that is not UTF-8 names no host (its lossy copy would),
            // nor one with a control character (`host=a\nb`): the query
            // engine cannot read such a folder, and apron writes none.
            let utf8 = path.file_name().is_some_and(|n| n.to_str().is_some());
            let printable = !host_name.chars().any(char::is_control);
            let Some(host) = parse_host_dir_name(&host_name).filter(|_| utf8 && printable) else { continue };
            out.push(PartitionDir { date, host: host.to_owned(), path });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_partitions_in_order_and_skips_other_names() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let day = |d: &str| NaiveDate::parse_from_str(d, "%Y-%m-%d").expect("date");
        for (d, h) in [("2026-11-02", "b"), ("2026-11-02", "a"), ("2026-11-01", "c")] {
            fs::create_dir_all(layout.partition_dir(Table::GpuSamples, day(d), h)).expect("mkdir");
        }
        let table = layout.table_dir(Table::GpuSamples);
        fs::create_dir_all(table.join("date=2026-11-02/.compact-a-1")).expect("mkdir");
        fs::create_dir_all(table.join("date=bogus/host=a")).expect("mkdir");
        fs::create_dir_all(table.join(".expired-date_2026-01-01-7")).expect("mkdir");
        fs::write(table.join("date=2026-11-01/host=file"), b"").expect("a file, not a folder");
        fs::create_dir_all(table.join("date=2026-11-01/host=a\nb")).expect("mkdir");

        let found = partition_dirs(&layout, Table::GpuSamples, Unlistable::Fail).expect("walk");
        let got: Vec<(String, &str)> = found.iter().map(|p| (p.date.to_string(), p.host.as_str())).collect();
        assert_eq!(got, [("2026-11-01".into(), "c"), ("2026-11-02".into(), "a"), ("2026-11-02".into(), "b")]);
        assert_eq!(found[0].path, layout.partition_dir(Table::GpuSamples, day("2026-11-01"), "c"));
        assert!(partition_dirs(&layout, Table::ProcSamples, Unlistable::Fail).expect("walk").is_empty());
        assert!(subfolders(&tmp.path().join("missing")).expect("no error").is_none());
    }

    #[test]
    fn data_files_are_the_visible_parquet_files() {
        let tmp = tempfile::tempdir().expect("tempdir");
        for name in ["b.parquet", "a.parquet", ".a.parquet.tmp", ".hidden.parquet", "notes.txt"] {
            fs::write(tmp.path().join(name), b"").expect("write");
        }
        fs::create_dir(tmp.path().join("c.parquet")).expect("a folder, not a file");
        let names: Vec<String> = data_files(tmp.path()).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a.parquet", "b.parquet"]);
        assert!(data_files(&tmp.path().join("missing")).is_empty());
    }

    #[test]
    fn a_file_where_a_folder_should_be_fails_or_is_skipped() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        // The table "folder" is a file: listing it fails (ENOTDIR), not NotFound.
        fs::write(layout.table_dir(Table::GpuSamples), b"").expect("write");
        let err = partition_dirs(&layout, Table::GpuSamples, Unlistable::Fail).expect_err("not a folder");
        assert_eq!(err.path, layout.table_dir(Table::GpuSamples));
        assert!(err.to_string().starts_with("cannot list "), "{err}");
        assert!(partition_dirs(&layout, Table::GpuSamples, Unlistable::Skip).expect("skipped").is_empty());
    }
}
