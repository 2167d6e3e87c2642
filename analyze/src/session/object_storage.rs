//! A bucket as the data folder (`apron --data s3://BUCKET/PREFIX`): the
//! tables are read where the recorders shipped them
//! (`PREFIX/<table>/date=…/host=…/….parquet`, see `apron-recorder ship`).
//!
//! - **Reached as the AWS environment says** (`AWS_ACCESS_KEY_ID`,
//!   `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//!   `AWS_ALLOW_HTTP`), never through flags, with the bounded waits of
//!   [`apron_store::remote`]: a bucket that is missing, refuses the
//!   credentials, cannot be reached or is no S3 server is one line naming
//!   the URL and the cause within seconds.
//! - **The canonical schema**, as for a local folder: no footer is read to
//!   infer one. A table is present when its folder holds anything (one
//!   LIST request per table when the session opens).
//! - **A bucket holds closed days only**: there is no write-ahead log to
//!   read, no fence to keep, and every shipped day has its rollups, so the
//!   local-only parts of a session (the newest rows, minutes derived from
//!   raw files, the footer check that names a broken file) step aside.
//! - **A period lists only its own days.** `BucketStore` answers the
//!   listing of a table's whole folder with the listings of the period's
//!   `date=` folders, so a month's report on a bucket of three years lists
//!   some 30 folders per table, not 1,095. Without a period (ad-hoc SQL)
//!   the whole table is listed.

use std::fmt;
use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::Arc;

use apron_schemas::Table;
use apron_schemas::paths::is_data_file_name;
use apron_store::remote::Remote;
use bytes::Bytes;
use chrono::NaiveDate;
use datafusion::object_store::path::Path;
use datafusion::object_store::{
    Attributes, Error as StoreError, GetOptions, GetRange, GetResult, GetResultPayload, ObjectMeta,
    ObjectStore, ObjectStoreExt, Result,
};
use datafusion::parquet::arrow::async_reader::MetadataFetch;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{BoxStream, StreamExt};

use crate::error::SessionError;
use crate::session::read_only::{Listing, ReadOnly};

/// Day folders listed at once.
const LIST_CONCURRENCY: usize = 8;

/// The days a session reads, first and last included (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days {
    /// The first day.
    pub first: NaiveDate,
    /// The last day.
    pub last: NaiveDate,
}

impl Days {
    /// The days of `[start_ms, end_ms)`, ms since the epoch; `None` when
    /// empty or out of the calendar's range.
    pub fn of_range(start_ms: i64, end_ms: i64) -> Option<Days> {
        if end_ms <= start_ms {
            return None;
        }
        let first = chrono::DateTime::from_timestamp_millis(start_ms)?.date_naive();
        let last = chrono::DateTime::from_timestamp_millis(end_ms.checked_sub(1)?)?.date_naive();
        (first <= last).then_some(Days { first, last })
    }

    /// Each day, in order.
    fn each(self) -> impl Iterator<Item = NaiveDate> {
        self.first.iter_days().take_while(move |d| *d <= self.last)
    }
}

/// The URL `data` names when it is a bucket (`s3://…`, `s3a://…`).
pub fn bucket_url(data: &FsPath) -> Option<&str> {
    data.to_str().filter(|s| s.starts_with("s3://") || s.starts_with("s3a://"))
}

/// The object store's error as the one-line cause of a message.
fn cause(e: &StoreError) -> String {
    apron_store::remote::describe(e)
}

/// An open bucket: its tables' folders and the store that reads them.
#[derive(Debug)]
pub(crate) struct Bucket {
    remote: Remote,
    store: Arc<BucketStore>,
}

impl Bucket {
    /// Opens the bucket of `url`, reading only `days` when given; returns
    /// it with the tables whose folders hold anything.
    pub(crate) async fn open(url: &str, days: Option<Days>) -> Result<(Bucket, Vec<Table>), SessionError> {
        let remote = Remote::from_url(url).map_err(|e| SessionError::Bucket {
            url: apron_store::redact::userinfo(url).into_owned(),
            cause: format_remote(&e),
        })?;
        let tables = Table::ALL.iter().map(|t| remote.key(t.name())).collect();
        let inner = Arc::clone(remote.store());
        let store = Arc::new(ReadOnly(BucketFolders { inner, tables, days, whole: WholeObjects::default() }));
        let mut present = Vec::new();
        for table in Table::ALL {
            let key = remote.key(table.name());
            let listed = store
                .inner
                .list_with_delimiter(Some(&key))
                .await
                .map_err(|e| SessionError::Bucket { url: remote.url_of(&key), cause: cause(&e) })?;
            if !listed.common_prefixes.is_empty() || !listed.objects.is_empty() {
                present.push(table);
            }
        }
        Ok((Bucket { remote, store }, present))
    }

    /// `s3://BUCKET`, which the engine reads through [`Bucket::store`].
    pub(crate) fn bucket_url(&self) -> String {
        self.remote.bucket_url()
    }

    /// The store the engine reads the bucket through.
    pub(crate) fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store) as Arc<dyn ObjectStore>
    }

    /// The URL of `table`'s folder, ending in `/`.
    pub(crate) fn table_url(&self, table: Table) -> String {
        format!("{}/", self.remote.url_of(&self.remote.key(table.name())))
    }

    /// The hosts of `table`'s day `date` (one LIST request); none when it
    /// cannot be listed.
    pub(crate) async fn hosts_on(&self, table: Table, date: NaiveDate) -> Vec<String> {
        let key = self.remote.key(&format!("{}/date={date}", table.name()));
        match self.store.inner.list_with_delimiter(Some(&key)).await {
            Ok(listed) => listed
                .common_prefixes
                .iter()
                .filter_map(|p| p.filename().and_then(|n| n.strip_prefix("host=")).map(str::to_owned))
                .collect(),
            Err(e) => {
                tracing::debug!(error = %cause(&e), "cannot list the hosts of a day; reading them at once");
                Vec::new()
            }
        }
    }
}

impl Bucket {
    /// Every data object of `tables` the engine would list (within the
    /// session's days): named as [`is_data_file_name`] says, in `key=value`
    /// folders. None of a table whose folder cannot be listed.
    pub(crate) async fn data_objects(&self, tables: &[Table]) -> Vec<(Table, ObjectMeta)> {
        let mut out = Vec::new();
        for &table in tables {
            let prefix = self.remote.key(table.name());
            let listed: Vec<Result<ObjectMeta>> = self.store.list(Some(&prefix)).collect().await;
            for meta in listed.into_iter().flatten() {
                let Some(parts) = meta.location.prefix_match(&prefix) else { continue };
                let parts: Vec<String> = parts.map(|p| p.as_ref().to_owned()).collect();
                let Some((name, folders)) = parts.split_last() else { continue };
                if is_data_file_name(name)
                    && folders.iter().all(|f| f.contains('=') && !f.starts_with(['.', '_']))
                {
                    out.push((table, meta));
                }
            }
        }
        out
    }

    /// The table whose folder holds the object `location`.
    pub(crate) fn table_of(&self, location: &Path) -> Option<Table> {
        Table::ALL.into_iter().find(|t| location.prefix_match(&self.remote.key(t.name())).is_some())
    }

    /// The first of `objects` (of their tables) whose footer cannot be read
    /// or whose schema lacks a column its table requires, as the error
    /// naming its URL; `None` when every one is sound. Reads each footer
    /// (a GET or two per object), so it runs only once a query has failed.
    pub(crate) async fn find_bad_object(&self, objects: &[(Table, ObjectMeta)]) -> Option<SessionError> {
        for (table, meta) in objects {
            if let Some(bad) = self.check_object(*table, meta).await {
                return Some(bad);
            }
        }
        None
    }

    /// What is wrong with the object `meta` of `table`, if anything.
    async fn check_object(&self, table: Table, meta: &ObjectMeta) -> Option<SessionError> {
        let path = std::path::PathBuf::from(self.remote.url_of(&meta.location));
        if meta.size == 0 {
            return Some(SessionError::EmptyFile { path });
        }
        let footer = Footer { store: self.remote.store().as_ref(), location: &meta.location };
        let reading = ParquetMetaDataReader::new()
            .with_page_index_policy(PageIndexPolicy::Optional)
            .load_and_finish(footer, meta.size);
        // A reader that panics on a damaged footer is a damaged footer.
        let read = crate::session::panic_guard::contain(reading).await;
        let corrupt = |source| Some(SessionError::CorruptFile { path: path.clone(), source });
        let metadata = match read {
            Ok(Ok(metadata)) => metadata,
            Ok(Err(e)) => return corrupt(e),
            Err(panic) => return corrupt(ParquetError::General(panic)),
        };
        let file = metadata.file_metadata();
        match parquet_to_arrow_schema(file.schema_descr(), file.key_value_metadata()) {
            Ok(schema) => crate::session::integrity::schema_problem(&path, &schema, table),
            Err(e) => corrupt(e),
        }
    }
}

/// The byte ranges of one object, as the footer reader asks for them.
struct Footer<'a> {
    store: &'a dyn ObjectStore,
    location: &'a Path,
}

impl MetadataFetch for Footer<'_> {
    fn fetch(&mut self, range: Range<u64>) -> BoxFuture<'_, std::result::Result<Bytes, ParquetError>> {
        async move {
            self.store.get_range(self.location, range).await.map_err(|e| ParquetError::External(Box::new(e)))
        }
        .boxed()
    }
}

/// A [`apron_store::remote::RemoteError`] on one line, without the URL
/// it already names at the front.
fn format_remote(e: &apron_store::remote::RemoteError) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The bucket as the engine reads it: read-only ([`ReadOnly`]), listing a
/// table's whole folder as the listings of the session's days only.
pub(crate) type BucketStore = ReadOnly<BucketFolders>;

/// How the bucket is listed: a table's whole folder as the listings of the
/// session's days, anything else as the bucket lists it.
#[derive(Debug)]
pub(crate) struct BucketFolders {
    inner: Arc<dyn ObjectStore>,
    /// The keys of the tables' folders.
    tables: Vec<Path>,
    days: Option<Days>,
    /// Objects a ranged read returned whole, for the reads that follow.
    whole: WholeObjects,
}

impl fmt::Display for BucketFolders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BucketStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl Listing for BucketFolders {
    const READS: &'static str = "the bucket";

    fn reader(&self) -> &dyn ObjectStore {
        self.inner.as_ref()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        match (self.days, prefix) {
            (Some(days), Some(table)) if self.tables.contains(table) => {
                let inner = Arc::clone(&self.inner);
                let folders: Vec<Path> =
                    days.each().map(|d| table.clone().join(format!("date={d}"))).collect();
                futures::stream::iter(folders)
                    .map(move |folder| inner.list(Some(&folder)))
                    .flatten_unordered(LIST_CONCURRENCY)
                    .boxed()
            }
            _ => self.inner.list(prefix),
        }
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let plain = plain_read(&options);
        if plain && let Some(result) = self.whole.serve(location, options.range.as_ref()) {
            return Ok(result);
        }
        let result = self.inner.get_opts(location, options).await?;
        if !plain || result.range != (0..result.meta.size) || result.meta.size > WHOLE_OBJECT_MAX_BYTES {
            return Ok(result);
        }
        let (meta, attributes) = (result.meta.clone(), result.attributes.clone());
        let bytes = result.bytes().await?;
        self.whole.keep(location, &meta, &bytes);
        Ok(whole_result(meta, attributes, bytes, None).expect("the whole object's own range"))
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if let Some(slices) = self.whole.slices(location, ranges) {
            return Ok(slices);
        }
        // One range (the engine's footer read is one): read as a ranged
        // GET, whose answer tells whether it was the whole object, to keep.
        if let [range] = ranges {
            let options = GetOptions::new().with_range(Some(range.clone()));
            return Ok(vec![Listing::get_opts(self, location, options).await?.bytes().await?]);
        }
        self.inner.get_ranges(location, ranges).await
    }
}

/// The largest object kept whole ([`WholeObjects`]): the engine reads a
/// Parquet file's footer with a 512 KiB hint, which on a minute file (12 to
/// 290 KB a host-day at 8 GPUs) is the whole file.
const WHOLE_OBJECT_MAX_BYTES: u64 = 1 << 20;

/// What [`WholeObjects`] holds in all; the oldest go first past it.
const WHOLE_OBJECTS_BYTES: usize = 16 << 20;

/// Objects a ranged read returned whole (a footer read of a file smaller
/// than the engine's hint), kept for the reads of their column chunks that
/// follow: without it each minute file took three GETs, the whole file
/// fetched twice (64 GPUs' month: 2,194 GETs for 720 files, now 784).
/// Kept up to [`WHOLE_OBJECTS_BYTES`], oldest out first, for the session
/// only: a bucket holds closed days, and a file replaced while a command
/// runs is read wrong with or without it (its footer read before, its
/// chunks after).
#[derive(Debug, Default)]
struct WholeObjects {
    kept: std::sync::Mutex<std::collections::VecDeque<(Path, ObjectMeta, Bytes)>>,
}

impl WholeObjects {
    fn keep(&self, location: &Path, meta: &ObjectMeta, bytes: &Bytes) {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|(p, _, _)| p != location);
        kept.push_back((location.clone(), meta.clone(), bytes.clone()));
        let mut total: usize = kept.iter().map(|(_, _, b)| b.len()).sum();
        while total > WHOLE_OBJECTS_BYTES {
            match kept.pop_front() {
                Some((_, _, b)) => total -= b.len(),
                None => break,
            }
        }
    }

    fn find(&self, location: &Path) -> Option<(ObjectMeta, Bytes)> {
        let kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.iter().find(|(p, _, _)| p == location).map(|(_, m, b)| (m.clone(), b.clone()))
    }

    /// A plain read of `location` (of `range`, else whole) from what is kept.
    fn serve(&self, location: &Path, range: Option<&GetRange>) -> Option<GetResult> {
        let (meta, bytes) = self.find(location)?;
        whole_result(meta, Default::default(), bytes, range)
    }

    /// `ranges` of `location` from what is kept; `None` when it is not
    /// kept or a range lies past its end.
    fn slices(&self, location: &Path, ranges: &[Range<u64>]) -> Option<Vec<Bytes>> {
        let (_, bytes) = self.find(location)?;
        let len = bytes.len() as u64;
        ranges
            .iter()
            .map(|r| {
                if r.start > r.end || r.end > len {
                    return None;
                }
                Some(bytes.slice(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?))
            })
            .collect()
    }
}

/// Whether `options` ask for bytes and nothing else: no condition, version
/// or head-only read, which go to the bucket.
fn plain_read(options: &GetOptions) -> bool {
    options.if_match.is_none()
        && options.if_none_match.is_none()
        && options.if_modified_since.is_none()
        && options.if_unmodified_since.is_none()
        && options.version.is_none()
        && !options.head
}

/// `range` (else all) of a whole object's `bytes`, as a read's result;
/// `None` when the range does not lie within it (the bucket then answers,
/// with its own error).
fn whole_result(
    meta: ObjectMeta,
    attributes: Attributes,
    bytes: Bytes,
    range: Option<&GetRange>,
) -> Option<GetResult> {
    let len = bytes.len() as u64;
    let range = match range {
        None => 0..len,
        Some(GetRange::Bounded(r)) if r.start < r.end && r.start < len => r.start..r.end.min(len),
        Some(GetRange::Offset(o)) if *o < len => *o..len,
        Some(GetRange::Suffix(n)) if *n > 0 => len.saturating_sub(*n)..len,
        Some(_) => return None,
    };
    let part = bytes.slice(usize::try_from(range.start).ok()?..usize::try_from(range.end).ok()?);
    let payload = GetResultPayload::Stream(futures::stream::once(async move { Ok(part) }).boxed());
    Some(GetResult { payload, meta, range, attributes })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use datafusion::object_store::memory::InMemory;
    use datafusion::object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, PutMultipartOptions, PutOptions,
        PutPayload, PutResult,
    };
    use futures::TryStreamExt;

    use super::*;

    /// An in-memory bucket counting the listings and reads it answers.
    #[derive(Debug, Default)]
    struct Counted {
        inner: InMemory,
        lists: AtomicUsize,
        gets: AtomicUsize,
    }

    impl fmt::Display for Counted {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "Counted")
        }
    }

    #[async_trait]
    impl ObjectStore for Counted {
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> Result<PutResult> {
            self.inner.put_opts(l, p, o).await
        }
        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(l, o).await
        }
        async fn get_opts(&self, l: &Path, o: GetOptions) -> Result<GetResult> {
            self.gets.fetch_add(1, Ordering::Relaxed);
            self.inner.get_opts(l, o).await
        }
        fn delete_stream(&self, l: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
            self.inner.delete_stream(l)
        }
        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.lists.fetch_add(1, Ordering::Relaxed);
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.lists.fetch_add(1, Ordering::Relaxed);
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(&self, f: &Path, t: &Path, o: CopyOptions) -> Result<()> {
            self.inner.copy_opts(f, t, o).await
        }
    }

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("a date")
    }

    #[tokio::test]
    async fn a_period_lists_only_its_own_day_folders() {
        let counted = Arc::new(Counted::default());
        // Three years of one host, a file a day.
        let mut d = day("2024-01-01");
        while d <= day("2026-12-31") {
            let key = Path::from(format!("fleet/gpu_minutes/date={d}/host=n1/x.parquet"));
            counted.inner.put(&key, PutPayload::from_static(b"PAR1")).await.expect("puts");
            d = d.succ_opt().expect("a next day");
        }
        let table = Path::from("fleet/gpu_minutes");
        let store = |days| {
            ReadOnly(BucketFolders {
                inner: Arc::clone(&counted) as Arc<dyn ObjectStore>,
                tables: vec![table.clone()],
                days,
                whole: WholeObjects::default(),
            })
        };
        let october = Days { first: day("2026-10-01"), last: day("2026-10-31") };
        let listed: Vec<ObjectMeta> =
            store(Some(october)).list(Some(&table)).try_collect().await.expect("lists");
        let mut dates: Vec<String> = listed
            .iter()
            .map(|m| m.location.as_ref().split('/').nth(2).expect("a date folder").to_owned())
            .collect();
        dates.sort();
        assert_eq!(dates.len(), 31);
        assert_eq!((dates[0].as_str(), dates[30].as_str()), ("date=2026-10-01", "date=2026-10-31"));
        assert_eq!(counted.lists.swap(0, Ordering::Relaxed), 31, "one request per day of the period");
        // Without a period, and below a table's folder, listings are the bucket's own.
        let all: Vec<ObjectMeta> = store(None).list(Some(&table)).try_collect().await.expect("lists");
        assert_eq!(all.len(), 1096);
        let one: Vec<ObjectMeta> = store(Some(october))
            .list(Some(&Path::from("fleet/gpu_minutes/date=2025-01-01")))
            .try_collect()
            .await
            .expect("lists");
        assert_eq!(one.len(), 1);
        // Read-only.
        let put = store(None).put_opts(&table, PutPayload::from_static(b"x"), PutOptions::default()).await;
        assert!(matches!(put, Err(StoreError::NotSupported { .. })));
    }

    /// A file a ranged read returned whole (the engine's footer read of a
    /// file smaller than its hint) is not fetched again for its column
    /// chunks; a bigger file, a head request and a range past the end go to
    /// the bucket.
    #[tokio::test]
    async fn a_file_read_whole_is_not_fetched_again() {
        let counted = Arc::new(Counted::default());
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let (small, big) = (Path::from("f/gpu_minutes/a.parquet"), Path::from("f/gpu_minutes/b.parquet"));
        counted.inner.put(&small, PutPayload::from(bytes.clone())).await.expect("puts");
        let big_len = WHOLE_OBJECT_MAX_BYTES + 1;
        counted.inner.put(&big, PutPayload::from(vec![7u8; big_len as usize])).await.expect("puts");
        let store = ReadOnly(BucketFolders {
            inner: Arc::clone(&counted) as Arc<dyn ObjectStore>,
            tables: Vec::new(),
            days: None,
            whole: WholeObjects::default(),
        });
        let gets = || counted.gets.load(Ordering::Relaxed);

        // The engine reads a footer as one range of `get_ranges`.
        let whole = 0..100_000;
        let footer = store.get_ranges(&small, std::slice::from_ref(&whole)).await.expect("reads");
        assert_eq!(footer[0].as_ref(), &bytes[..]);
        assert_eq!(gets(), 1);
        let chunks = store.get_ranges(&small, &[10..20, 500..90_000]).await.expect("reads");
        assert_eq!((chunks[0].as_ref(), chunks[1].as_ref()), (&bytes[10..20], &bytes[500..90_000]));
        let tail = store.get_range(&small, 99_000..100_000).await.expect("reads");
        assert_eq!(tail.as_ref(), &bytes[99_000..]);
        assert_eq!(gets(), 1, "the chunks come from the whole file read first");

        assert!(store.get_range(&small, 100_000..100_010).await.is_err(), "past the end: the bucket's error");
        assert_eq!(gets(), 2);
        let meta = store.head(&small).await.expect("heads");
        assert_eq!(meta.size, 100_000);
        assert_eq!(gets(), 3, "a head request goes to the bucket");

        store.get_range(&big, 0..big_len).await.expect("reads");
        store.get_range(&big, 0..10).await.expect("reads");
        assert_eq!(gets(), 5, "a file over the limit is not kept");
    }

    #[test]
    fn days_of_a_range_end_before_its_end() {
        let ms = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("a time").timestamp_millis();
        let days = Days::of_range(ms("2026-10-01T00:00:00Z"), ms("2026-11-01T00:00:00Z")).expect("days");
        assert_eq!(days, Days { first: day("2026-10-01"), last: day("2026-10-31") });
        assert_eq!(Days::of_range(5, 5), None);
        assert_eq!(bucket_url(FsPath::new("s3://b/p")), Some("s3://b/p"));
        assert_eq!(bucket_url(FsPath::new("./data")), None);
    }
}
