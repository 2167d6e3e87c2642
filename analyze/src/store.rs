//! The object store the table listings read through: the local file
//! system, except that a zero-byte data file is an error, not nothing.
//!
//! DataFusion's listing drops every file of zero bytes before anything
//! reads it, so an empty `x.parquet` in a partition would make its rows
//! vanish without a word (`count(*)` of 0, exit 0). A file of zero bytes is
//! not Parquet. [`DataFileStore`] lists as the local file system does, but
//! a listing that meets a zero-byte data file fails with [`EmptyDataFile`]
//! naming it, which the
//! session reports as [`crate::Error::EmptyFile`]. So every query that
//! lists the table's folder fails (`apron sql`, the minute tables computed
//! from raw files, every report) until the file is removed or restored.
//! Reading, and everything else, is the local file system's.
//!
//! A data file is one the table listing reads: below the folder listed, in
//! `key=value` partition folders only, none of them hidden, under a name
//! [`is_data_file_name`] accepts. So a compaction's or a writer's file
//! that is still empty in its hidden working folder
//! (`date=…/.compact-…/x.parquet`) is none of the listing's business.

use std::ops::Range;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::object_store::local::LocalFileSystem;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result,
};
use futures::stream::{BoxStream, StreamExt};

use crate::session::is_data_file_name;

/// A data file of zero bytes met while listing a table's folder.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: the file is empty (0 bytes), not Parquet", path.display())]
pub(crate) struct EmptyDataFile {
    /// The file, absolute, as the store names it.
    pub(crate) path: PathBuf,
}

/// The local file system, refusing to list a zero-byte data file.
#[derive(Debug, Default)]
pub(crate) struct DataFileStore {
    inner: LocalFileSystem,
}

impl std::fmt::Display for DataFileStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataFileStore({})", self.inner)
    }
}

impl DataFileStore {
    /// `meta`, listed under `prefix`, when it is not a zero-byte data file;
    /// else the error naming it.
    fn check(&self, meta: ObjectMeta, prefix: Option<&Path>) -> Result<ObjectMeta> {
        if meta.size > 0 || !is_data_file(&meta.location, prefix) {
            return Ok(meta);
        }
        let path = self.inner.path_to_filesystem(&meta.location)?;
        Err(datafusion::object_store::Error::Generic {
            store: "DataFileStore",
            source: Box::new(EmptyDataFile { path }),
        })
    }
}

#[async_trait]
impl ObjectStore for DataFileStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let store = DataFileStore::default();
        let under = prefix.cloned();
        self.inner.list(prefix).map(move |meta| meta.and_then(|m| store.check(m, under.as_ref()))).boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let store = DataFileStore::default();
        let under = prefix.cloned();
        self.inner
            .list_with_offset(prefix, offset)
            .map(move |meta| meta.and_then(|m| store.check(m, under.as_ref())))
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let mut listed = self.inner.list_with_delimiter(prefix).await?;
        listed.objects = listed.objects.into_iter().map(|m| self.check(m, prefix)).collect::<Result<_>>()?;
        Ok(listed)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
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
}
