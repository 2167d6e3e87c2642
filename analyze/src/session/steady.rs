//! Listing the local data folder so that a compaction swapping a partition
//! folder during the listing is seen, and the listing taken again.
//!
//! Compaction replaces `TABLE/date=D/host=H/` whole: it swaps in a folder
//! holding the merged file (`renameat2(RENAME_EXCHANGE)`) and removes the
//! old one (`apron_recorder::compact`). A listing that opened the old folder
//! before the swap and read it after can come back short without a word:
//! the old folder is emptied (nothing to read), or the names read from it
//! are looked up by path in the new folder, where they are not, and the
//! local store skips what it cannot find (`object_store`'s local listing
//! drops an entry whose `stat` says `NotFound`). The day would read as 0
//! rows, or fewer than it has.
//!
//! [`steady`] takes the identity (device, inode, birth time) of every
//! partition folder under the listed folder before and after the listing; when one differs
//! (swapped, made or removed while the listing ran), it lists again. A
//! listing it returns read every partition folder that was at its path
//! from start to end, so it holds each day's files exactly once: the old
//! ones or the merged one. Files it names may still be swapped away before
//! they are read: that fails the query loudly (`NotFound`), and `apron sql`
//! runs it again (`crate::commands::sql`).
//!
//! Only the folders compaction swaps are watched (`date=…/host=…`, see
//! [`apron_schemas::folders`]): the data files inside them are not read,
//! so this costs one `stat` per partition folder and one listing of each
//! folder above them, twice per listing.

use std::collections::BTreeMap;
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use apron_schemas::paths::{parse_date_dir_name, parse_host_dir_name};
use datafusion::object_store::Error as StoreError;

/// Listings taken at most while partition folders keep changing under
/// them; a compaction swaps each partition once per run, so a second
/// listing is nearly always steady.
pub(crate) const MAX_LISTINGS: usize = 5;

/// Folders deep below the listed folder that are looked at, at most (a
/// link cycle ends here; apron's layout is two deep below a table).
const MAX_DEPTH: usize = 8;

/// The listed folder's partition folders changed under every listing.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot list {}: its partition folders changed during {MAX_LISTINGS} listings in a row (compacted or removed while listed)",
    path.display()
)]
pub(crate) struct Unsteady {
    /// The folder listed.
    pub(crate) path: PathBuf,
}

/// Which folder on disk each partition folder (`date=…/host=…`) below a
/// folder is, by path: its device, inode and, where the file system keeps
/// it, its birth time. The birth time tells a new folder from a removed
/// one whose inode number it took, so that two swaps of one partition
/// during a listing are not taken for none. A file added to the folder
/// changes none of them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Partitions(BTreeMap<PathBuf, (u64, u64, Option<SystemTime>)>);

impl Partitions {
    /// The partition folders at or below `dir`, following links as the
    /// local listing does; a folder that cannot be read is left out (its
    /// listing reports it).
    pub(crate) fn under(dir: &Path) -> Self {
        let mut out = Self::default();
        if is_partition(dir) {
            out.record(dir);
        } else {
            out.walk(dir, 0);
        }
        out
    }

    fn record(&mut self, dir: &Path) {
        if let Ok(meta) = std::fs::metadata(dir) {
            self.0.insert(dir.to_path_buf(), (meta.dev(), meta.ino(), meta.created().ok()));
        }
    }

    fn walk(&mut self, dir: &Path, depth: usize) {
        if depth >= MAX_DEPTH {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let hidden = entry.file_name().to_str().is_none_or(|n| n.starts_with(['.', '_']));
            let path = entry.path();
            if hidden || !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            if is_partition(&path) {
                self.record(&path);
            } else {
                self.walk(&path, depth + 1);
            }
        }
    }
}

/// Whether `dir` is a partition folder compaction may swap: `host=…` in a
/// `date=…` folder.
fn is_partition(dir: &Path) -> bool {
    let name = |p: Option<&Path>| p.and_then(Path::file_name).and_then(|n| n.to_str()).map(str::to_owned);
    let host = name(Some(dir)).is_some_and(|n| parse_host_dir_name(&n).is_some());
    host && name(dir.parent()).is_some_and(|n| parse_date_dir_name(&n).is_some())
}

/// The partition folders under `dir`, read off the async runtime's
/// threads.
async fn partitions(dir: PathBuf) -> Partitions {
    tokio::task::spawn_blocking(move || Partitions::under(&dir)).await.unwrap_or_default()
}

/// What `list` returns, taken again until no partition folder under `dir`
/// changed while it ran (at most [`MAX_LISTINGS`] times, then
/// [`Unsteady`]). `None`: not a local folder, listed once.
pub(crate) async fn steady<T, F, Fut>(dir: Option<PathBuf>, mut list: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let Some(dir) = dir else { return Ok(list().await) };
    let mut before = partitions(dir.clone()).await;
    for _ in 0..MAX_LISTINGS {
        let listed = list().await;
        let after = partitions(dir.clone()).await;
        if after == before {
            return Ok(listed);
        }
        tracing::debug!(folder = %dir.display(), "a partition folder changed while it was listed; listing again");
        before = after;
    }
    Err(StoreError::Generic { store: "DataFileStore", source: Box::new(Unsteady { path: dir }) })
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use datafusion::object_store::ObjectStore;
    use datafusion::object_store::local::LocalFileSystem;
    use datafusion::object_store::path::Path as StorePath;
    use futures::TryStreamExt;

    use super::*;

    /// `TABLE/date=2026-11-02/` with `host=n1` (two files) and `host=n2`
    /// (one); returns the table folder, canonical.
    pub(crate) fn table(root: &Path) -> PathBuf {
        let table = fs::canonicalize(root).expect("canonical").join("gpu_samples");
        for (host, names) in [("n1", &["a.parquet", "b.parquet"][..]), ("n2", &["c.parquet"][..])] {
            let dir = table.join("date=2026-11-02").join(format!("host={host}"));
            fs::create_dir_all(&dir).expect("mkdir");
            for name in names {
                fs::write(dir.join(name), b"PAR1").expect("write");
            }
        }
        table
    }

    /// Replaces `host=n1` whole as compaction does: a new folder holding
    /// `merged.parquet` takes its name, the old one is removed.
    pub(crate) fn swap(table: &Path) {
        let day = table.join("date=2026-11-02");
        let new = day.join(".compact-n1-new");
        fs::create_dir(&new).expect("mkdir");
        fs::write(new.join("merged.parquet"), b"PAR1").expect("write");
        fs::rename(day.join("host=n1"), day.join(".compact-n1-old")).expect("move the old folder away");
        fs::rename(&new, day.join("host=n1")).expect("move the new folder in");
        fs::remove_dir_all(day.join(".compact-n1-old")).expect("remove the old folder");
    }

    pub(crate) fn names(listed: &[datafusion::object_store::ObjectMeta]) -> Vec<String> {
        let mut out: Vec<String> = listed
            .iter()
            .map(|m| {
                let parts: Vec<_> = m.location.parts().map(|p| p.as_ref().to_owned()).collect();
                parts[parts.len() - 2..].join("/")
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn only_the_partition_folders_compaction_swaps_are_watched() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let table = table(tmp.path());
        fs::create_dir_all(table.join("date=2026-11-02/.compact-n1-9")).expect("mkdir");
        fs::create_dir_all(table.join("_tmp/date=2026-11-02/host=x")).expect("mkdir");
        fs::create_dir_all(table.join("other/host=y")).expect("mkdir");
        let found = Partitions::under(tmp.path());
        let paths: Vec<&PathBuf> = found.0.keys().collect();
        let day = table.join("date=2026-11-02");
        assert_eq!(paths, [&day.join("host=n1"), &day.join("host=n2")]);
        assert_eq!(Partitions::under(&day.join("host=n2")).0.len(), 1, "a partition listed itself");
        let before = Partitions::under(&table);
        swap(&table);
        assert_ne!(Partitions::under(&table), before, "a swapped folder is another folder");
    }

    /// The race a compaction and a reader ran into: the reader opened the
    /// partition folder, compaction swapped it and removed the old one,
    /// then the reader read the folder it had opened: nothing. Taken once,
    /// that listing would have the day with no rows; `steady` lists again.
    #[tokio::test]
    async fn a_listing_that_read_a_swapped_folder_is_taken_again() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let table = table(tmp.path());
        let store = LocalFileSystem::new();
        let prefix = StorePath::from_absolute_path(&table).expect("absolute");
        let tries = AtomicUsize::new(0);
        let first = std::sync::Mutex::new(Vec::new());
        let listed = steady(Some(table.clone()), || async {
            if tries.fetch_add(1, Ordering::SeqCst) > 0 {
                return store.list(Some(&prefix)).try_collect::<Vec<_>>().await.expect("lists");
            }
            // The first listing: host=n1 opened before the swap, read after.
            let opened = fs::read_dir(table.join("date=2026-11-02/host=n1")).expect("open");
            swap(&table);
            let seen: Vec<PathBuf> = opened.map(|e| e.expect("entry").path()).collect();
            first.lock().expect("lock").clone_from(&seen);
            let other =
                StorePath::from_absolute_path(table.join("date=2026-11-02/host=n2")).expect("absolute");
            store.list(Some(&other)).try_collect::<Vec<_>>().await.expect("lists")
        })
        .await
        .expect("steady after the swap");
        assert!(first.lock().expect("lock").is_empty(), "the folder opened before the swap read empty");
        assert_eq!(names(&listed), ["host=n1/merged.parquet", "host=n2/c.parquet"]);
        assert_eq!(tries.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_folder_that_changes_under_every_listing_is_an_error_naming_it() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("t/date=2026-11-02/host=n1");
        fs::create_dir_all(&dir).expect("mkdir");
        let calls = AtomicUsize::new(0);
        let result = steady(Some(dir.clone()), || async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let away = dir.with_file_name(format!(".old-{n}"));
            fs::rename(&dir, &away).expect("move away");
            fs::create_dir(&dir).expect("a new folder");
        })
        .await;
        let err = result.expect_err("never steady");
        assert_eq!(calls.load(Ordering::SeqCst), MAX_LISTINGS);
        let text = format!("{err}");
        assert!(text.contains(&dir.display().to_string()) && text.contains("changed during"), "{text}");
    }
}
