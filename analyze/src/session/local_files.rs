//! The object store the table listings read through: the local file
//! system, read-only, listing what the session's snapshot holds
//! ([`Fence`]), naming a zero-byte data file instead of skipping it, and
//! skipping, with a warning naming it, a file or folder whose name the
//! engine cannot take (`host=a\nb`: the local listing would fail every
//! query of the table at it).
//!
//! DataFusion's listing drops every file of zero bytes before anything
//! reads it, so an empty `x.parquet` in a partition would make its rows
//! vanish without a word (`count(*)` of 0, exit 0). A file of zero bytes is
//! not Parquet. [`DataFileStore`] lists as the local file system does, but
//! a listing that meets a zero-byte data file fails with [`EmptyDataFile`]
//! naming it, which the session reports as [`crate::error::SessionError::EmptyFile`]. So
//! every query that lists the table's folder fails (`apron sql`, the minute
//! tables computed from raw files, every report) until the file is removed
//! or restored. Files the fence hides (their rows come from the
//! write-ahead log, or they began after the snapshot) are never listed.
//! A listing during which compaction swapped a partition folder is taken
//! again ([`crate::session::steady`]): read once, it could miss the day.
//! Reading is the local file system's; writing is refused.
//!
//! A data file is one the table listing reads: below the folder listed, in
//! `key=value` partition folders only, none of them hidden, under a name
//! [`is_data_file_name`] accepts. So a compaction's or a writer's file
//! that is still empty in its hidden working folder
//! (`date=…/.compact-…/x.parquet`) is none of the listing's business.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use apron_schemas::paths::is_data_file_name;
use async_trait::async_trait;
use datafusion::object_store::local::LocalFileSystem;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    Error as StoreError, ListResult, ObjectMeta, ObjectStore, ObjectStoreExt, Result,
};
use futures::stream::{BoxStream, StreamExt};

use crate::session::fence::Fence;
use crate::session::read_only::{Listing, ReadOnly};
use crate::session::steady::steady;

/// A data file of zero bytes met while listing a table's folder.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: the file is empty (0 bytes), not Parquet", path.display())]
pub(crate) struct EmptyDataFile {
    /// The file, absolute, as the store names it.
    pub(crate) path: PathBuf,
}

/// The local file system as one session's queries see it: fenced, refusing
/// to list a zero-byte data file, skipping names it cannot read, read-only
/// ([`ReadOnly`]).
pub(crate) type DataFileStore = ReadOnly<DataFiles>;

impl DataFileStore {
    /// The local file system, its listings fenced by `fence`.
    pub(crate) fn new(fence: Fence) -> Self {
        ReadOnly(DataFiles {
            inner: Arc::new(LocalFileSystem::new()),
            fence: Arc::new(fence),
            skipped: Arc::default(),
        })
    }
}

/// How the local file system is listed: behind the fence, failing at a
/// zero-byte data file, around the names the engine cannot take.
#[derive(Debug, Default)]
pub(crate) struct DataFiles {
    inner: Arc<LocalFileSystem>,
    fence: Arc<Fence>,
    /// The entries skipped for their names, each warned about once.
    skipped: Arc<Mutex<BTreeSet<PathBuf>>>,
}

impl std::fmt::Display for DataFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataFileStore({})", self.inner)
    }
}

impl DataFiles {
    /// A listing of `inner` as this store gives it: without what the fence
    /// hides, and failing at a zero-byte data file.
    fn screened(
        &self,
        listed: BoxStream<'static, Result<ObjectMeta>>,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let fence = Arc::clone(&self.fence);
        let under = prefix.cloned();
        listed.filter_map(move |meta| std::future::ready(screen(&fence, meta, under.as_ref()))).boxed()
    }
}

/// `meta`, listed under `prefix`: `None` when the fence hides it, the
/// error naming it when it is a zero-byte data file, else itself.
fn screen(fence: &Fence, meta: Result<ObjectMeta>, prefix: Option<&Path>) -> Option<Result<ObjectMeta>> {
    let meta = match meta {
        Ok(meta) => meta,
        Err(e) => return Some(Err(e)),
    };
    if fence.hides(&meta.location) {
        return None;
    }
    if meta.size > 0 || !is_data_file(&meta.location, prefix) {
        return Some(Ok(meta));
    }
    Some(LocalFileSystem::new().path_to_filesystem(&meta.location).and_then(|path| {
        Err(StoreError::Generic { store: "DataFileStore", source: Box::new(EmptyDataFile { path }) })
    }))
}

#[async_trait]
impl Listing for DataFiles {
    const READS: &'static str = "the data folder";

    fn reader(&self) -> &dyn ObjectStore {
        self.inner.as_ref()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        // The local listing ends at the first name it cannot take, so it is
        // read whole (the engine gathers it whole anyway) and, when it met
        // one, listed again around it; and taken again whole when a
        // partition folder was swapped while it ran (`steady`).
        let inner = Arc::clone(&self.inner);
        let skipped = Arc::clone(&self.skipped);
        let at = prefix.cloned();
        let listed = async move {
            let once = || async {
                let first: Vec<Result<ObjectMeta>> = inner.list(at.as_ref()).collect().await;
                if first.iter().any(|r| matches!(r, Err(StoreError::InvalidPath { .. }))) {
                    list_around(&inner, at.as_ref(), &skipped).await
                } else {
                    first
                }
            };
            steady(local_dir(&inner, at.as_ref()), once).await.unwrap_or_else(|e| vec![Err(e)])
        };
        self.screened(futures::stream::once(listed).flat_map(futures::stream::iter).boxed(), prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        // Read whole, like `list`, so that it can be taken again.
        let inner = Arc::clone(&self.inner);
        let (at, after) = (prefix.cloned(), offset.clone());
        let listed = async move {
            let once = || inner.list_with_offset(at.as_ref(), &after).collect::<Vec<_>>();
            steady(local_dir(&inner, at.as_ref()), once).await.unwrap_or_else(|e| vec![Err(e)])
        };
        self.screened(futures::stream::once(listed).flat_map(futures::stream::iter).boxed(), prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let once = || async {
            match self.inner.list_with_delimiter(prefix).await {
                Err(StoreError::InvalidPath { .. }) => {
                    list_level_around(&self.inner, prefix, &self.skipped).await
                }
                other => other,
            }
        };
        let mut listed = steady(local_dir(&self.inner, prefix), once).await??;
        listed.objects = listed
            .objects
            .into_iter()
            .filter_map(|m| screen(&self.fence, Ok(m), prefix))
            .collect::<Result<_>>()?;
        Ok(listed)
    }
}

/// The local folder `prefix` names, if any (`None`: the root, or a name
/// the local store refuses; such a listing is taken once).
fn local_dir(inner: &LocalFileSystem, prefix: Option<&Path>) -> Option<PathBuf> {
    inner.path_to_filesystem(prefix?).ok()
}

/// Whether the query engine can name a file or folder called `name`: UTF-8
/// without an ASCII control character (object_store's rule). A partition
/// folder `host=a\nb` is none: listed as is, it would fail every query of
/// its table.
fn nameable(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_some_and(|n| !n.chars().any(|c| c.is_ascii_control()))
}

/// Warns, once per session, that `path` is skipped for its name.
fn warn_skipped(skipped: &Mutex<BTreeSet<PathBuf>>, path: PathBuf) {
    let first = skipped.lock().map_or(true, |mut s| s.insert(path.clone()));
    if first {
        tracing::warn!(
            path = ?path,
            "skipped a file or folder whose name the query engine cannot read (a control character, or not UTF-8); rename it to read its data"
        );
    }
}

/// A local listing of `dir` split around the names the engine cannot take.
#[derive(Debug, Default)]
struct Around {
    /// Folders whose every entry, at every depth, can be named: listed whole.
    whole: Vec<std::path::PathBuf>,
    /// Files beside an entry that cannot be named: looked up one by one.
    files: Vec<std::path::PathBuf>,
    /// Entries that cannot be named.
    bad: Vec<std::path::PathBuf>,
}

/// Walks `dir` (following links, as the local listing does) into
/// [`Around`]; returns whether every entry under it can be named (then
/// nothing is added: the caller lists `dir` whole).
fn walk_around(dir: &std::path::Path, out: &mut Around) -> bool {
    // A folder that cannot be read is the local listing's to report.
    let Ok(entries) = std::fs::read_dir(dir) else { return true };
    let (mut subdirs, mut files, mut bad) = (Vec::new(), Vec::new(), Vec::new());
    for entry in entries.flatten() {
        let path = entry.path();
        if !nameable(&entry.file_name()) {
            bad.push(path);
        } else if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            subdirs.push(path);
        } else {
            files.push(path);
        }
    }
    let mut below = Around::default();
    let clean: Vec<(std::path::PathBuf, bool)> = subdirs
        .into_iter()
        .map(|d| {
            let c = walk_around(&d, &mut below);
            (d, c)
        })
        .collect();
    if bad.is_empty() && below.bad.is_empty() {
        return true;
    }
    out.whole.extend(clean.into_iter().filter(|(_, c)| *c).map(|(d, _)| d));
    out.whole.append(&mut below.whole);
    out.files.append(&mut below.files);
    out.files.extend(files);
    out.bad.append(&mut below.bad);
    out.bad.extend(bad);
    false
}

/// The listing of `prefix` without the files and folders whose names the
/// engine cannot take (each warned about once): the folders around them
/// listed whole, the files beside them one by one.
async fn list_around(
    inner: &LocalFileSystem,
    prefix: Option<&Path>,
    skipped: &Mutex<BTreeSet<PathBuf>>,
) -> Vec<Result<ObjectMeta>> {
    let dir = match prefix.map(|p| inner.path_to_filesystem(p)) {
        Some(Ok(dir)) => dir,
        Some(Err(e)) => return vec![Err(e)],
        None => std::path::PathBuf::from("/"),
    };
    let walked = tokio::task::spawn_blocking(move || {
        let mut around = Around::default();
        if walk_around(&dir, &mut around) {
            around.whole.push(dir);
        }
        around
    })
    .await;
    let around = match walked {
        Ok(around) => around,
        Err(e) => return vec![Err(StoreError::Generic { store: "DataFileStore", source: Box::new(e) })],
    };
    for bad in around.bad {
        warn_skipped(skipped, bad);
    }
    let mut out = Vec::new();
    for folder in around.whole {
        match Path::from_absolute_path(&folder) {
            Ok(at) => out.extend(inner.list(Some(&at)).collect::<Vec<_>>().await),
            Err(e) => out.push(Err(e.into())),
        }
    }
    for file in around.files {
        match Path::from_absolute_path(&file) {
            Ok(at) => out.push(inner.head(&at).await),
            Err(e) => out.push(Err(e.into())),
        }
    }
    out
}

/// One level of `prefix` (its files and sub-folders) without the entries
/// whose names the engine cannot take (each warned about once).
async fn list_level_around(
    inner: &LocalFileSystem,
    prefix: Option<&Path>,
    skipped: &Mutex<BTreeSet<PathBuf>>,
) -> Result<ListResult> {
    let dir = match prefix {
        Some(p) => inner.path_to_filesystem(p)?,
        None => std::path::PathBuf::from("/"),
    };
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| StoreError::Generic { store: "DataFileStore", source: Box::new(e) })?;
    let mut result = ListResult { common_prefixes: Vec::new(), objects: Vec::new() };
    for entry in entries.flatten() {
        let path = entry.path();
        if !nameable(&entry.file_name()) {
            warn_skipped(skipped, path);
            continue;
        }
        let at = Path::from_absolute_path(&path)?;
        if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            result.common_prefixes.push(at);
        } else {
            result.objects.push(inner.head(&at).await?);
        }
    }
    result.common_prefixes.sort();
    result.objects.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(result)
}

/// True when `location`, listed under `prefix`, is a file the table
/// listing reads: a data file name in `key=value` folders below `prefix`,
/// none of them hidden (`.…`) or bookkeeping (`_…`).
fn is_data_file(location: &Path, prefix: Option<&Path>) -> bool {
    let relative: Vec<String> = match prefix {
        Some(prefix) => match location.prefix_match(prefix) {
            Some(parts) => parts.map(|p| p.as_ref().to_owned()).collect(),
            None => return false,
        },
        None => location.parts().map(|p| p.as_ref().to_owned()).collect(),
    };
    let Some((name, folders)) = relative.split_last() else { return false };
    is_data_file_name(name) && folders.iter().all(|f| f.contains('=') && !f.starts_with(['.', '_']))
}

/// The path of the zero-byte data file `err` (or one of its causes) is
/// about, if any.
pub(crate) fn empty_file_in(err: &(dyn std::error::Error + 'static)) -> Option<PathBuf> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(empty) = e.downcast_ref::<EmptyDataFile>() {
            return Some(empty.path.clone());
        }
        cause = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use datafusion::object_store::{PutOptions, PutPayload};
    use futures::TryStreamExt;

    use super::*;

    #[tokio::test]
    async fn an_empty_data_file_fails_the_listing_and_other_files_do_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        std::fs::write(root.join("a.parquet"), b"PAR1").expect("write");
        std::fs::write(root.join(".b.parquet"), b"").expect("write hidden");
        std::fs::write(root.join("c.txt"), b"").expect("write other");
        let store = DataFileStore::default();
        let prefix = Path::from_absolute_path(&root).expect("absolute");
        let listed: Vec<ObjectMeta> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        assert_eq!(listed.len(), 3);
        assert_eq!(store.list_with_delimiter(Some(&prefix)).await.expect("lists").objects.len(), 3);

        // A writer's empty file in a hidden working folder is not read.
        let work = root.join("date=2026-11-02").join(".compact-node01-1");
        std::fs::create_dir_all(&work).expect("mkdir");
        std::fs::write(work.join("x.parquet"), b"").expect("write empty");
        let listed: Vec<ObjectMeta> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        assert_eq!(listed.len(), 4);
        std::fs::write(root.join("d.parquet"), b"").expect("write empty");
        for err in [
            store.list(Some(&prefix)).try_collect::<Vec<_>>().await.expect_err("an empty data file"),
            store.list_with_delimiter(Some(&prefix)).await.expect_err("an empty data file"),
        ] {
            assert_eq!(empty_file_in(&err), Some(root.join("d.parquet")));
        }
    }

    #[tokio::test]
    async fn fenced_files_are_never_listed_and_writes_are_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = apron_schemas::DataLayout::new(tmp.path());
        let table = apron_schemas::Table::GpuSamples;
        let base = 1_796_083_200_000; // 2026-12-01T00:00:00Z
        let file = |host: &str, start: i64, seq: u64| layout.file_path(table, host, start, seq);
        let written = [
            file("n1", base, 0),          // closed before the snapshot: listed
            file("n1", base + 10_000, 1), // its segment was read: hidden
            file("n1", base + 20_000, 2), // began after the snapshot: hidden
            file("n2", base + 20_000, 0), // n2 had no segment: listed
        ];
        for path in &written {
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("mkdir");
            std::fs::write(path, b"x").expect("write");
        }
        let other =
            layout.partition_dir(table, chrono::NaiveDate::from_ymd_opt(2026, 12, 1).expect("day"), "n1");
        std::fs::write(other.join("part-0.parquet"), b"x").expect("write");

        let mut fence = Fence::default();
        fence.saw_segment("n1", base + 10_000, 1);
        fence.hide([written[1].clone()]);
        let store = DataFileStore::new(fence);
        let prefix = Path::from_absolute_path(tmp.path()).expect("absolute");
        let mut listed: Vec<String> =
            store.list(Some(&prefix)).map_ok(|m| m.location.to_string()).try_collect().await.expect("lists");
        listed.sort();
        let want = |p: &std::path::Path| Path::from_absolute_path(p).expect("absolute").to_string();
        let mut expected = vec![want(&written[0]), want(&written[3]), want(&other.join("part-0.parquet"))];
        expected.sort();
        assert_eq!(listed, expected);

        let folder = Path::from_absolute_path(&other).expect("absolute");
        let result = store.list_with_delimiter(Some(&folder)).await.expect("lists");
        let mut names: Vec<_> = result.objects.iter().map(|m| m.location.to_string()).collect();
        names.sort();
        let mut expected = vec![want(&written[0]), want(&other.join("part-0.parquet"))];
        expected.sort();
        assert_eq!(names, expected);

        let new = Path::from_absolute_path(other.join("new.parquet")).expect("absolute");
        let put = store.put_opts(&new, PutPayload::from_static(b"y"), PutOptions::default());
        assert!(matches!(put.await, Err(StoreError::NotSupported { .. })));
        assert!(!other.join("new.parquet").exists());
    }

    /// The store's own listings go through `steady`: a swap between two
    /// listings is no change during either, and every file listed is there.
    #[tokio::test]
    async fn the_store_lists_the_folder_in_place() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let table = table(tmp.path());
        use crate::session::steady::tests::{names, swap, table};

        let store = DataFileStore::default();
        let prefix = Path::from_absolute_path(&table).expect("absolute");
        let before: Vec<_> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        assert_eq!(names(&before), ["host=n1/a.parquet", "host=n1/b.parquet", "host=n2/c.parquet"]);
        swap(&table);
        let after: Vec<_> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        assert_eq!(names(&after), ["host=n1/merged.parquet", "host=n2/c.parquet"]);
        let leaf = Path::from_absolute_path(table.join("date=2026-11-02/host=n1")).expect("absolute");
        let level = store.list_with_delimiter(Some(&leaf)).await.expect("lists");
        assert_eq!(names(&level.objects), ["host=n1/merged.parquet"]);
    }
}
