//! The fence between the write-ahead log and the Parquet listing, so a query
//! sees every row exactly once whatever moment it starts: a snapshot of the
//! data folder as of the moment the session read the log.
//!
//! A session reads the open WAL segments when it opens ([`crate::recent`]);
//! the query lists the Parquet files later, when it runs. Meanwhile the
//! recorder may close a file: it writes the file's Parquet files (under the
//! segment's own name, `<start>-<seq>`, in each table), then deletes the
//! segment, and starts the next file. So:
//!
//! - the rows of every segment the session read come from the log, and the
//!   files of that name are hidden from the listing in every table, whenever
//!   they appear;
//! - a segment listed but gone by the time it was read has become Parquet
//!   completely (the recorder deletes it last), so its files are listed;
//! - files of a host newer (by `(start, seq)`) than the segment a running
//!   recorder had open when the log was listed began after the snapshot and
//!   are hidden too, so a query never sees a later file while missing the
//!   rows before it.
//!
//! Each row is therefore counted once, from the log or from its file, never
//! both, never neither. Files whose names are not the recorder's (compacted
//! days, other tools' files) and hosts without segments are not fenced.
//! [`FencedStore`] applies the fence to the local file system the listing
//! reads through; it is read-only, as apron never writes to the data folder.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use apron_schemas::paths::{parse_data_file_name, parse_host_dir_name};
use async_trait::async_trait;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use futures::StreamExt;
use futures::stream::BoxStream;

/// Which data files a session's queries must not list.
#[derive(Debug, Default, Clone)]
pub struct Fence {
    /// Files whose rows the session took from the log.
    hidden: HashSet<ObjectPath>,
    /// Per host, the `(start_ms, seq)` of its newest segment listed: its
    /// files named after it began after the snapshot.
    newest: HashMap<String, (i64, u64)>,
}

impl Fence {
    /// Hides the files at `paths` (absolute local paths). A path that
    /// cannot be an object path (not absolute) cannot be listed either and
    /// is ignored.
    pub fn hide(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.hidden.extend(paths.into_iter().filter_map(|p| ObjectPath::from_absolute_path(p).ok()));
    }

    /// Records that `host` had a segment `(start_ms, seq)` when the log was
    /// listed.
    pub fn saw_segment(&mut self, host: &str, start_ms: i64, seq: u64) {
        let newest = self.newest.entry(host.to_owned()).or_insert((start_ms, seq));
        *newest = (*newest).max((start_ms, seq));
    }

    /// True when the listing must leave out the file at `path`.
    pub fn hides(&self, path: &ObjectPath) -> bool {
        if self.hidden.contains(path) {
            return true;
        }
        if self.newest.is_empty() {
            return false;
        }
        let mut parts = path.parts().collect::<Vec<_>>().into_iter().rev();
        let (Some(name), Some(host_dir)) = (parts.next(), parts.next()) else { return false };
        let (Some(host), Some(name)) =
            (parse_host_dir_name(host_dir.as_ref()), parse_data_file_name(name.as_ref()))
        else {
            return false;
        };
        self.newest.get(host).is_some_and(|&newest| name > newest)
    }
}

/// An object store that lists every object of `inner` the [`Fence`] does
/// not hide, and refuses writes.
#[derive(Debug)]
pub struct FencedStore {
    inner: Arc<dyn ObjectStore>,
    fence: Arc<Fence>,
}

impl FencedStore {
    /// `inner`, its listings fenced by `fence`.
    pub fn new(inner: Arc<dyn ObjectStore>, fence: Fence) -> Self {
        Self { inner, fence: Arc::new(fence) }
    }

    fn read_only(&self, operation: &str) -> object_store::Error {
        object_store::Error::NotSupported { source: refusal(operation).into() }
    }

    /// `stream` without the objects the fence hides.
    fn fenced(
        &self,
        stream: BoxStream<'static, object_store::Result<ObjectMeta>>,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let fence = Arc::clone(&self.fence);
        stream
            .filter(move |item| std::future::ready(!matches!(item, Ok(meta) if fence.hides(&meta.location))))
            .boxed()
    }
}

/// Why a write through the store is refused.
fn refusal(operation: &str) -> String {
    format!("{operation}: apron reads the data folder and never writes to it")
}

impl fmt::Display for FencedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FencedStore({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for FencedStore {
    async fn put_opts(
        &self,
        _location: &ObjectPath,
        _payload: PutPayload,
        _opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        Err(self.read_only("put"))
    }

    async fn put_multipart_opts(
        &self,
        _location: &ObjectPath,
        _opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        Err(self.read_only("put"))
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &ObjectPath,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        locations.map(|_| Err(object_store::Error::NotSupported { source: refusal("delete").into() })).boxed()
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.fenced(self.inner.list(prefix))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&ObjectPath>,
        offset: &ObjectPath,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.fenced(self.inner.list_with_offset(prefix, offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        let mut result = self.inner.list_with_delimiter(prefix).await?;
        result.objects.retain(|meta| !self.fence.hides(&meta.location));
        Ok(result)
    }

    async fn copy_opts(
        &self,
        _from: &ObjectPath,
        _to: &ObjectPath,
        _options: CopyOptions,
    ) -> object_store::Result<()> {
        Err(self.read_only("copy"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use datafusion::object_store::local::LocalFileSystem;
    use futures::TryStreamExt;

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
        let store = FencedStore::new(Arc::new(LocalFileSystem::new()), fence);
        let prefix = ObjectPath::from_absolute_path(tmp.path()).expect("absolute");
        let mut listed: Vec<String> =
            store.list(Some(&prefix)).map_ok(|m| m.location.to_string()).try_collect().await.expect("lists");
        listed.sort();
        let want = |p: &std::path::Path| ObjectPath::from_absolute_path(p).expect("absolute").to_string();
        let mut expected = vec![want(&written[0]), want(&written[3]), want(&other.join("part-0.parquet"))];
        expected.sort();
        assert_eq!(listed, expected);

        let folder = ObjectPath::from_absolute_path(&other).expect("absolute");
        let result = store.list_with_delimiter(Some(&folder)).await.expect("lists");
        let mut names: Vec<_> = result.objects.iter().map(|m| m.location.to_string()).collect();
        names.sort();
        let mut expected = vec![want(&written[0]), want(&other.join("part-0.parquet"))];
        expected.sort();
        assert_eq!(names, expected);

        let new = ObjectPath::from_absolute_path(other.join("new.parquet")).expect("absolute");
        let put = store.put_opts(&new, PutPayload::from_static(b"y"), PutOptions::default());
        assert!(matches!(put.await, Err(object_store::Error::NotSupported { .. })));
        assert!(!other.join("new.parquet").exists());
    }
}
