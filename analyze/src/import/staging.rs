//! An import's files land in the data folder together or not at all.
//!
//! The writer writes a host's files (raw tables and their minute rollups,
//! every day of the import) into a staging folder of their own,
//! `DATA/.import/<host>-<pid>-<nonce>/` ([`Staging`]): a data folder of its
//! own, created exclusively (so its name, and the writer's temporary names
//! in it, are this import's alone), hidden from every reader. Then
//! [`Staging::commit`] chooses each file's final name (free in the data
//! folder, the same for a raw file and its rollups), writes the list as
//! the staging folder's commit record (`COMMIT`, durable before anything
//! moves), renames each file into its partition and removes the staging
//! folder.
//!
//! A failed or killed import leaves only its staging folder. The next
//! import into the data folder ([`recover`], under the data folder's lock,
//! so no import that left it is still running) finishes it when its commit
//! record is there (the rest of its files are moved into place) and
//! removes it when not (nothing of it was in the data folder). So the data
//! folder holds either every file of an import or none, for every reader
//! but one that lists it in the milliseconds a commit takes.
//!
//! What goes in the files is the writer's business; when an import may run
//! is [`super::lock`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use apron_schemas::folders::{Unlistable, data_files, partition_dirs, subfolders};
use apron_schemas::paths::{is_data_file_name, parse_data_file_name, validate_host};
use apron_schemas::test_pause::{pause_at, points};
use apron_schemas::{DataLayout, Table};
use apron_store::{create, durable};
use chrono::NaiveDate;

use super::ImportError;
use super::lock::HostLock;

/// The name of a staging folder's commit record.
const COMMIT: &str = "COMMIT";

/// The first line of a commit record.
const COMMIT_HEADER: &str = "apron import commit 1";

/// A host's files being staged; dropped uncommitted, the staging folder is
/// removed.
#[derive(Debug)]
pub struct Staging {
    /// The data folder.
    layout: DataLayout,
    host: String,
    dir: PathBuf,
    /// Whether the files were moved into place (or must stay for
    /// [`recover`]: the commit record is written).
    keep: bool,
}

impl Staging {
    /// A new, empty staging folder for `host`'s files under `layout`.
    pub fn create(layout: &DataLayout, host: &str) -> Result<Staging, ImportError> {
        let root = layout.import_staging_root();
        create::create_dir_all(&root).map_err(commit_err("create folder", &root))?;
        let pid = std::process::id();
        let mut nonce =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        loop {
            let dir = layout.import_staging_dir(host, pid, nonce);
            match create::create_dir_new(&dir) {
                Ok(()) => {
                    return Ok(Staging { layout: layout.clone(), host: host.to_owned(), dir, keep: false });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => nonce += 1,
                Err(e) => return Err(commit_err("create folder", &dir)(e)),
            }
        }
    }

    /// The data folder the writer writes into: the staging folder.
    pub fn layout(&self) -> DataLayout {
        DataLayout::new(&self.dir)
    }

    /// Moves every staged file into place (see the module's documentation)
    /// and removes the staging folder; returns how many files moved. When
    /// this returns `Ok`, every file is in its partition, durably. When it
    /// fails after the commit record was written, the staging folder stays
    /// and the next import finishes the commit.
    pub fn commit(mut self) -> Result<u64, ImportError> {
        let record = self.plan()?;
        if record.files.is_empty() {
            return Ok(0);
        }
        let path = self.dir.join(COMMIT);
        durable::write_file(&path, |mut file, tmp| {
            file.write_all(record.to_text().as_bytes()).map_err(|source| {
                apron_store::write_error::WriteError::Io { op: "write", path: tmp.to_path_buf(), source }
            })?;
            Ok(file)
        })
        .map_err(|e| ImportError::Commit {
            op: "write the commit record",
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        self.keep = true;
        apply(&self.layout, &self.dir, &record)?;
        remove_staging(&self.layout, &self.dir)?;
        Ok(record.files.len() as u64)
    }

    /// The commit record of the staged files: each (start, seq) name gets
    /// the first counter free in the data folder for every table, so a raw
    /// file and its rollups keep one name.
    fn plan(&self) -> Result<Record, ImportError> {
        let staged = self.layout();
        let mut names: BTreeMap<(NaiveDate, i64, u64), Vec<Table>> = BTreeMap::new();
        for table in Table::ALL {
            let dirs = partition_dirs(&staged, table, Unlistable::Fail)
                .map_err(|e| commit_err("list", &e.path)(e.source))?;
            for dir in dirs {
                for (name, path) in data_files(&dir.path) {
                    let Some((start, seq)) = parse_data_file_name(&name).filter(|_| dir.host == self.host)
                    else {
                        return Err(ImportError::Leftover {
                            dir: self.dir.clone(),
                            message: format!("{} is no file the writer names", path.display()),
                        });
                    };
                    names.entry((dir.date, start, seq)).or_default().push(table);
                }
            }
        }
        let mut taken: BTreeSet<(i64, u64)> = BTreeSet::new();
        let mut files = Vec::new();
        for ((date, start, seq), tables) in names {
            let mut final_seq = 0;
            loop {
                final_seq = apron_store::writer::free_seq(&self.layout, &self.host, start, final_seq);
                if taken.insert((start, final_seq)) {
                    break;
                }
                final_seq += 1;
            }
            for table in tables {
                let name = |seq| file_name(&self.layout.file_path(table, &self.host, start, seq));
                files.push(Entry { table, date, staged: name(seq), name: name(final_seq) });
            }
        }
        // Raw files before their rollups: a reader that lists the partition
        // mid-commit computes the minutes from the raw files.
        files.sort_by_key(|e| Table::ALL.iter().position(|t| *t == e.table));
        Ok(Record { host: self.host.clone(), files })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.keep {
            // Best effort: the error that got here is the one to report;
            // the next import removes what is left.
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// One file of a commit record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    table: Table,
    date: NaiveDate,
    /// Its name in the staging folder's partition.
    staged: String,
    /// Its name in the data folder's partition.
    name: String,
}

/// A staging folder's commit record: the host and every file to move.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    host: String,
    files: Vec<Entry>,
}

impl Record {
    /// The record as text: a header line, `host\tH`, then one line per
    /// file, `file\tTABLE\tDATE\tSTAGED\tFINAL`.
    fn to_text(&self) -> String {
        let mut text = format!("{COMMIT_HEADER}\nhost\t{}\n", self.host);
        for e in &self.files {
            text.push_str(&format!("file\t{}\t{}\t{}\t{}\n", e.table.name(), e.date, e.staged, e.name));
        }
        text
    }

    /// The record `text` holds, every name checked (a file name, not a
    /// path; a host that names a folder): `None` when it is not one.
    fn parse(text: &str) -> Option<Record> {
        let mut lines = text.lines();
        if lines.next()? != COMMIT_HEADER {
            return None;
        }
        let host = lines.next()?.strip_prefix("host\t")?.to_owned();
        validate_host(&host).ok()?;
        let mut files = Vec::new();
        for line in lines {
            let mut f = line.split('\t');
            let (Some("file"), Some(table), Some(date), Some(staged), Some(name), None) =
                (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
            else {
                return None;
            };
            let plain = |n: &str| is_data_file_name(n) && !n.contains('/');
            if !plain(staged) || !plain(name) {
                return None;
            }
            files.push(Entry {
                table: Table::from_name(table)?,
                date: NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?,
                staged: staged.to_owned(),
                name: name.to_owned(),
            });
        }
        Some(Record { host, files })
    }
}

/// Moves the files of `record` from the staging folder `dir` into their
/// partitions of `layout`, skipping those already moved, then makes the
/// partitions' new entries durable.
fn apply(layout: &DataLayout, dir: &Path, record: &Record) -> Result<(), ImportError> {
    let staged_layout = DataLayout::new(dir);
    let mut folders = BTreeSet::new();
    for (k, e) in record.files.iter().enumerate() {
        let from = staged_layout.partition_dir(e.table, e.date, &record.host).join(&e.staged);
        let partition = layout.partition_dir(e.table, e.date, &record.host);
        let to = partition.join(&e.name);
        let staged_there = fs::symlink_metadata(&from).is_ok();
        let final_there = fs::symlink_metadata(&to).is_ok();
        match (staged_there, final_there) {
            (true, false) => {
                create::create_dir_all(&partition).map_err(commit_err("create folder", &partition))?;
                fs::rename(&from, &to).map_err(commit_err("move into place", &to))?;
            }
            // Moved by the run that wrote the record, before it stopped.
            (false, true) => {}
            (true, true) => {
                return Err(ImportError::Leftover {
                    dir: dir.to_path_buf(),
                    message: format!(
                        "{} is there already; this import's copy is {}",
                        to.display(),
                        from.display()
                    ),
                });
            }
            (false, false) => {
                return Err(ImportError::Leftover {
                    dir: dir.to_path_buf(),
                    message: format!("{} is gone, and so is {}", from.display(), to.display()),
                });
            }
        }
        folders.insert(partition);
        if k == 0 {
            pause_at(points::IMPORT_COMMITTING);
        }
    }
    // The partitions, and the folders above them that may be new.
    let mut synced = BTreeSet::new();
    for partition in folders {
        for folder in partition.ancestors().take(4) {
            if synced.insert(folder.to_path_buf()) {
                durable::sync_dir(folder).map_err(commit_err("sync folder", folder))?;
            }
        }
    }
    Ok(())
}

/// Removes the staging folder `dir` and makes its removal durable.
fn remove_staging(layout: &DataLayout, dir: &Path) -> Result<(), ImportError> {
    fs::remove_dir_all(dir).map_err(commit_err("remove", dir))?;
    let root = layout.import_staging_root();
    durable::sync_dir(&root).map_err(commit_err("sync folder", &root))
}

/// What [`recover`] did with one staging folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// Its commit record was there: the rest of its files were moved into
    /// place (`files` in the record).
    Finished {
        /// The staging folder.
        dir: PathBuf,
        /// Files in the record.
        files: usize,
    },
    /// No commit record: nothing of it was in the data folder, and it was
    /// removed.
    Removed {
        /// The staging folder.
        dir: PathBuf,
    },
    /// Its commit record names a host a live recorder holds: left for an
    /// import after that recorder stops.
    Waiting {
        /// The staging folder.
        dir: PathBuf,
        /// The host.
        host: String,
    },
}

/// Finishes or removes every staging folder earlier imports into `layout`
/// left (see the module's documentation). Call it holding the data
/// folder's lock ([`super::lock::DataLock`]) and no host lock.
pub fn recover(layout: &DataLayout) -> Result<Vec<Recovered>, ImportError> {
    let root = layout.import_staging_root();
    let dirs = subfolders(&root).map_err(|e| commit_err("list", &e.path)(e.source))?.unwrap_or_default();
    let mut done = Vec::new();
    for (_, dir) in dirs {
        let record = match fs::read_to_string(dir.join(COMMIT)) {
            Ok(text) => Record::parse(&text).ok_or_else(|| ImportError::Leftover {
                dir: dir.clone(),
                message: format!("its {COMMIT} record is damaged"),
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                remove_staging(layout, &dir)?;
                done.push(Recovered::Removed { dir });
                continue;
            }
            Err(e) => return Err(commit_err("read", &dir.join(COMMIT))(e)),
        };
        let _host = match HostLock::acquire(layout, &record.host) {
            Ok(lock) => lock,
            Err(ImportError::Recording { host, .. }) => {
                done.push(Recovered::Waiting { dir, host });
                continue;
            }
            Err(e) => return Err(e),
        };
        apply(layout, &dir, &record)?;
        remove_staging(layout, &dir)?;
        done.push(Recovered::Finished { dir, files: record.files.len() });
    }
    Ok(done)
}

/// The file name of `path`.
fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn commit_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> ImportError {
    let path = path.to_path_buf();
    move |source| ImportError::Commit { op, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(layout: &DataLayout, host: &str, start: i64, seq: u64, tables: &[Table]) -> Staging {
        let staging = Staging::create(layout, host).expect("staging");
        for &t in tables {
            let path = staging.layout().file_path(t, host, start, seq);
            fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
            fs::write(&path, t.name()).expect("write");
        }
        staging
    }

    #[test]
    fn a_commit_moves_every_file_under_free_names_and_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let start = 1_793_606_400_000;
        // The data folder has a raw file of that name already.
        let there = layout.file_path(Table::GpuSamples, "n", start, 0);
        fs::create_dir_all(there.parent().expect("a folder")).expect("mkdir");
        fs::write(&there, b"mine").expect("write");

        let staging = stage(&layout, "n", start, 0, &[Table::GpuSamples, Table::GpuMinutes]);
        assert_eq!(staging.commit().expect("committed"), 2);
        assert_eq!(fs::read(&there).expect("read"), b"mine", "never replaced");
        let moved = layout.file_path(Table::GpuSamples, "n", start, 1);
        assert_eq!(fs::read(&moved).expect("read"), b"gpu_samples");
        let rollup = layout.file_path(Table::GpuMinutes, "n", start, 1);
        assert_eq!(fs::read(&rollup).expect("read"), b"gpu_minutes", "its rollup has its name");
        assert_eq!(fs::read_dir(layout.import_staging_root()).expect("list").count(), 0);
    }

    #[test]
    fn an_uncommitted_staging_folder_is_removed_and_a_committed_one_finished() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let start = 1_793_606_400_000;
        drop(stage(&layout, "n", start, 0, &[Table::GpuSamples]));
        assert_eq!(fs::read_dir(layout.import_staging_root()).expect("list").count(), 0, "dropped: removed");

        // A run killed before its commit record: its folder stays, and goes.
        let left = stage(&layout, "n", start, 0, &[Table::GpuSamples]);
        let dir = left.dir.clone();
        std::mem::forget(left);
        assert_eq!(recover(&layout).expect("recovered"), [Recovered::Removed { dir }]);
        assert!(!layout.file_path(Table::GpuSamples, "n", start, 0).exists());

        // A run killed after its record and one move: the rest is moved.
        let mut left = stage(&layout, "n", start, 0, &[Table::GpuSamples, Table::GpuMinutes]);
        let record = left.plan().expect("planned");
        fs::write(left.dir.join(COMMIT), record.to_text()).expect("write the record");
        let first = &record.files[0];
        fs::create_dir_all(layout.partition_dir(first.table, first.date, "n")).expect("mkdir");
        fs::rename(
            left.layout().partition_dir(first.table, first.date, "n").join(&first.staged),
            layout.partition_dir(first.table, first.date, "n").join(&first.name),
        )
        .expect("moved");
        left.keep = true;
        let dir = left.dir.clone();
        drop(left);
        assert_eq!(recover(&layout).expect("recovered"), [Recovered::Finished { dir, files: 2 }]);
        for t in [Table::GpuSamples, Table::GpuMinutes] {
            assert_eq!(fs::read(layout.file_path(t, "n", start, 0)).expect("moved"), t.name().as_bytes());
        }
        assert_eq!(Record::parse(&record.to_text()), Some(record));
        assert_eq!(Record::parse("apron import commit 1\nhost\t../x\n"), None);
    }
}
