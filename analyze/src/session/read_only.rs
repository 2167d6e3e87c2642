//! The one read-only object store the session's tables are read through:
//! [`ReadOnly`] forwards every read to the store beneath and refuses every
//! put, delete and copy with the same [`StoreError::NotSupported`] naming
//! the operation and what apron reads.
//!
//! What differs between the stores is how they list, and that is each
//! store's own: [`crate::session::object_storage`] lists a bucket's table
//! folders by the session's days (and cuts the reads of a small file from
//! the one GET that returned it whole), [`crate::session::local_files`]
//! lists the local file system behind the write-ahead log's fence and names
//! a zero-byte data file. Each implements [`Listing`] for that and nothing
//! else.

use std::fmt;
use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    CopyOptions, Error as StoreError, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use futures::stream::{BoxStream, StreamExt};

/// The part of a read-only store that is its own: the store it reads from,
/// what a refused write names, and how it lists and reads (by default, as
/// the store beneath does).
#[async_trait]
pub(crate) trait Listing: fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// What apron reads through the store, as a refused write names it
    /// ("the bucket", "the data folder").
    const READS: &'static str;

    /// The store every read (and, unless overridden, every listing) goes to.
    fn reader(&self) -> &dyn ObjectStore;

    /// The objects under `prefix`, as [`ObjectStore::list`].
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.reader().list(prefix)
    }

    /// The objects under `prefix` after `offset`, as
    /// [`ObjectStore::list_with_offset`].
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.reader().list_with_offset(prefix, offset)
    }

    /// One level of `prefix`, as [`ObjectStore::list_with_delimiter`].
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.reader().list_with_delimiter(prefix).await
    }

    /// A read, as [`ObjectStore::get_opts`] (by default, the reader's).
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.reader().get_opts(location, options).await
    }

    /// Reads of ranges, as [`ObjectStore::get_ranges`] (by default, the reader's).
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.reader().get_ranges(location, ranges).await
    }
}

/// A store that reads and lists as its [`Listing`] says and writes nothing.
#[derive(Debug, Default)]
pub(crate) struct ReadOnly<L>(pub(crate) L);

impl<L: Listing> fmt::Display for ReadOnly<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl<L> std::ops::Deref for ReadOnly<L> {
    type Target = L;

    fn deref(&self) -> &L {
        &self.0
    }
}

/// Why a write through a store that reads `reads` is refused.
fn refused(operation: &str, reads: &str) -> StoreError {
    StoreError::NotSupported {
        source: format!("{operation}: apron reads {reads} and never writes to it").into(),
    }
}

#[async_trait]
impl<L: Listing> ObjectStore for ReadOnly<L> {
    async fn put_opts(&self, _location: &Path, _payload: PutPayload, _opts: PutOptions) -> Result<PutResult> {
        Err(refused("put", L::READS))
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(refused("put", L::READS))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        Listing::get_opts(&self.0, location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        Listing::get_ranges(&self.0, location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        locations.map(|_| Err(refused("delete", L::READS))).boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, _from: &Path, _to: &Path, _options: CopyOptions) -> Result<()> {
        Err(refused("copy", L::READS))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::object_store::ObjectStoreExt;
    use datafusion::object_store::memory::InMemory;
    use futures::TryStreamExt;

    use super::*;

    /// A listing of an in-memory store, as is.
    #[derive(Debug, Default)]
    struct Memory(InMemory);

    impl fmt::Display for Memory {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Memory")
        }
    }

    impl Listing for Memory {
        const READS: &'static str = "the memory";

        fn reader(&self) -> &dyn ObjectStore {
            &self.0
        }
    }

    #[tokio::test]
    async fn reads_pass_through_and_every_write_is_refused_naming_what_is_read() {
        let memory = Memory::default();
        let key = Path::from("t/date=2026-12-01/x.parquet");
        memory.0.put(&key, PutPayload::from_static(b"PAR1")).await.expect("puts");
        let store = ReadOnly(memory);
        assert_eq!(store.get(&key).await.expect("reads").bytes().await.expect("bytes").as_ref(), b"PAR1");
        let listed: Vec<ObjectMeta> = store.list(Some(&Path::from("t"))).try_collect().await.expect("lists");
        assert_eq!(listed.len(), 1);

        let other = Path::from("t/y.parquet");
        let refusals = [
            store.put_opts(&other, PutPayload::from_static(b"y"), PutOptions::default()).await.map(|_| ()),
            store.put_multipart_opts(&other, PutMultipartOptions::default()).await.map(|_| ()),
            store.delete(&key).await,
            store.copy_opts(&key, &other, CopyOptions::default()).await,
        ];
        for (refusal, operation) in refusals.into_iter().zip(["put", "put", "delete", "copy"]) {
            let err = refusal.expect_err("refused");
            assert!(matches!(err, StoreError::NotSupported { .. }), "{err}");
            assert!(err.to_string().contains(&format!("{operation}: apron reads the memory")), "{err}");
        }
        assert!(store.0.0.head(&key).await.is_ok(), "the object is still there");
        assert!(store.0.0.head(&other).await.is_err(), "nothing was written");
    }
}
