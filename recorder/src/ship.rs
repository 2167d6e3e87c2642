//! Shipping closed days to object storage, so that one bucket holds the
//! fleet: every closed, compacted day partition of the data folder
//! (`<table>/date=D/host=H/<file>.parquet`, the raw and the rollup tables)
//! is uploaded under the same relative key below the bucket's prefix, so
//! the bucket is itself an apron data folder.
//!
//! - **Closed days only.** Today's partition is still being written (and
//!   its rows are partly in the write-ahead log), so it is not shipped: the
//!   bucket holds every day up to yesterday, each exactly once. A day is
//!   shipped after compaction has merged it into one file per table and
//!   host; a partition still holding several files is left for later.
//! - **Complete objects only.** A file is one PUT (or, above
//!   [`MULTIPART_ABOVE`] bytes, one multipart upload, visible only once
//!   completed), carrying the MD5 of its bytes as metadata
//!   (`x-amz-meta-apron-md5`).
//! - **Again is harmless.** A file whose key already holds an object of
//!   the same size and MD5 is skipped; another object under the key is
//!   replaced. Objects of a shipped partition that the local partition no
//!   longer has (a late write merged into a new file) are removed after the
//!   new file is in place.
//! - **Only apron's objects.** What is removed or replaced is only what
//!   apron wrote: objects named as apron names its files
//!   ([`is_own_data_file_name`]), or carrying its MD5 metadata. Anything
//!   else under a partition (Spark's `_SUCCESS`, a readme, another tool's
//!   `part-00000.parquet`) is left as it is; a local file whose key holds
//!   such an object is not shipped, and the run says why.
//! - **Nothing local is touched.** Shipping reads the data folder only.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use apron_schemas::folders::{PartitionDir, Unlistable, partition_dirs};
use apron_schemas::paths::{is_data_file_name, is_own_data_file_name};
use apron_schemas::{DataLayout, Table};
use apron_store::error_chain::format_chain;
use apron_store::remote::{Remote, describe};
use chrono::NaiveDate;
use md5::{Digest, Md5};
use object_store::path::Path as Key;
use object_store::{
    Attribute, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions,
    PutPayload, WriteMultipart,
};

use crate::compact::is_closed;

pub mod live;
pub mod markers;

/// Files larger than this go up as a multipart upload.
pub const MULTIPART_ABOVE: u64 = 32 << 20;

/// The size of each part of a multipart upload.
const PART_BYTES: usize = 16 << 20;

/// The metadata key holding a file's MD5 (hex).
const MD5_KEY: &str = "apron-md5";

/// What one shipping run did.
#[derive(Debug, Default)]
pub struct ShipReport {
    /// Files uploaded, with their keys' URLs and sizes.
    pub shipped: Vec<(String, u64)>,
    /// Files already in the bucket, equal.
    pub skipped: usize,
    /// Objects removed: the partition no longer has their files.
    pub removed: Vec<String>,
    /// Partitions not shipped because they are not compacted yet.
    pub not_compacted: Vec<PathBuf>,
    /// What could not be shipped, and why (one line each).
    pub failed: Vec<String>,
    /// Partitions shipped (or already there) in full.
    pub partitions: usize,
    /// Partitions not tried after a failure.
    pub unshipped: usize,
}

/// A day partition of one table and host.
#[derive(Debug)]
struct Partition {
    table: Table,
    date: NaiveDate,
    host: String,
    /// `<table>/date=D/host=H`.
    relative: String,
    dir: PathBuf,
    files: Vec<(String, PathBuf)>,
}

/// The closed day partitions of the data folder from `from` on (every one
/// when `None`), before `today`, of `host` (every host when `None`).
fn closed_partitions(
    layout: &DataLayout,
    from: Option<NaiveDate>,
    today: NaiveDate,
    host: Option<&str>,
) -> Result<Vec<Partition>, String> {
    let mut out = Vec::new();
    for table in Table::ALL {
        let walked = partition_dirs(layout, table, Unlistable::Fail).map_err(|e| format_chain(&e))?;
        for PartitionDir { date, host: h, path: dir } in walked {
            if !is_closed(date, today) || from.is_some_and(|f| date < f) || host.is_some_and(|want| want != h)
            {
                continue;
            }
            // Listed strictly: a partition read as empty would have its
            // objects removed from the bucket.
            let mut files = Vec::new();
            let entries =
                std::fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            for entry in entries {
                let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if is_data_file_name(&name) && entry.file_type().is_ok_and(|t| t.is_file()) {
                    files.push((name, entry.path()));
                }
            }
            files.sort();
            // `<table>/date=D/host=H`, as the layout names it.
            let Ok(relative) = dir.strip_prefix(layout.root()).map(|r| r.to_string_lossy().into_owned())
            else {
                continue;
            };
            out.push(Partition { table, date, host: h, relative, dir, files });
        }
    }
    Ok(out)
}

/// The MD5 of the file at `path`, in hex, and its size.
fn md5_of(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hasher.update(&buf[..n]);
    }
    let hex = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, size))
}

/// What a key holds, against a file of some size and MD5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Nothing.
    Nothing,
    /// An object of the same size and MD5.
    Same,
    /// Another object; `ours` when it carries apron's MD5 metadata (apron
    /// put it there).
    Other { ours: bool },
}

/// What `key` holds, against a file of `size` bytes whose MD5 is `md5`.
async fn holds(store: &dyn ObjectStore, key: &Key, md5: &str, size: u64) -> object_store::Result<Held> {
    let options = GetOptions { head: true, ..GetOptions::default() };
    match store.get_opts(key, options).await {
        Ok(got) => {
            let theirs = got.attributes.get(&Attribute::Metadata(MD5_KEY.into()));
            Ok(if got.meta.size == size && theirs.is_some_and(|v| v.as_ref() == md5) {
                Held::Same
            } else {
                Held::Other { ours: theirs.is_some() }
            })
        }
        Err(object_store::Error::NotFound { .. }) => Ok(Held::Nothing),
        Err(e) => Err(e),
    }
}

/// Uploads the file at `path` to `key`, with its MD5 as metadata.
async fn upload(store: &dyn ObjectStore, key: &Key, path: &Path, md5: &str, size: u64) -> Result<(), String> {
    let mut attributes = Attributes::new();
    attributes.insert(Attribute::Metadata(MD5_KEY.into()), md5.to_owned().into());
    let read_err = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    if size <= MULTIPART_ABOVE {
        let bytes = std::fs::read(path).map_err(read_err)?;
        let options = PutOptions { attributes, ..PutOptions::default() };
        store.put_opts(key, PutPayload::from(bytes), options).await.map_err(|e| describe(&e))?;
        return Ok(());
    }
    let options = PutMultipartOptions { attributes, ..PutMultipartOptions::default() };
    let upload = store.put_multipart_opts(key, options).await.map_err(|e| describe(&e))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let mut file = File::open(path).map_err(read_err)?;
    let mut buf = vec![0u8; PART_BYTES];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        writer.wait_for_capacity(2).await.map_err(|e| describe(&e))?;
        writer.write(&buf[..n]);
    }
    // An upload not completed is never visible; abort it on failure.
    writer.finish().await.map(|_| ()).map_err(|e| describe(&e))
}

/// Ships one partition: its files, then removes objects it no longer has.
async fn ship_partition(remote: &Remote, partition: &Partition, report: &mut ShipReport) {
    let store = remote.store().as_ref();
    let failed_before = report.failed.len();
    for (name, path) in &partition.files {
        let key = remote.key(&format!("{}/{name}", partition.relative));
        let url = remote.url_of(&key);
        let (md5, size) = match md5_of(path) {
            Ok(v) => v,
            Err(e) => {
                report.failed.push(format!("cannot read {}: {e}", path.display()));
                continue;
            }
        };
        match holds(store, &key, &md5, size).await {
            Ok(Held::Same) => {
                report.skipped += 1;
                continue;
            }
            Ok(Held::Other { ours: false }) if !is_own_data_file_name(name) => {
                report.failed.push(format!(
                    "{url} holds an object apron did not write; not replaced by {} (rename one of them)",
                    path.display()
                ));
                continue;
            }
            Ok(Held::Nothing | Held::Other { .. }) => {}
            Err(e) => {
                report.failed.push(format!("cannot look up {url}: {}", describe(&e)));
                continue;
            }
        }
        if let Err(e) = upload(store, &key, path, &md5, size).await {
            report.failed.push(format!("cannot upload {} to {url}: {e}", path.display()));
            continue;
        }
        // Confirmed only when the store says it holds it.
        match holds(store, &key, &md5, size).await {
            Ok(Held::Same) => report.shipped.push((url, size)),
            Ok(_) => report.failed.push(format!("{url} does not hold what was uploaded")),
            Err(e) => report.failed.push(format!("cannot confirm {url}: {}", describe(&e))),
        }
    }
    // Objects of apron's naming the partition no longer has, once its files
    // are all there; others are not apron's to remove.
    if report.failed.len() == failed_before {
        let prefix = remote.key(&partition.relative);
        let listed: Vec<_> = match keys_under(store, &prefix).await {
            Ok(l) => l,
            Err(e) => {
                report.failed.push(format!("cannot list {}: {}", remote.url_of(&prefix), describe(&e)));
                return;
            }
        };
        for key in listed {
            let name = key.filename().unwrap_or_default();
            if partition.files.iter().any(|(n, _)| n == name) || !is_own_data_file_name(name) {
                continue;
            }
            match store.delete(&key).await {
                Ok(()) => report.removed.push(remote.url_of(&key)),
                Err(e) => {
                    report.failed.push(format!("cannot remove {}: {}", remote.url_of(&key), describe(&e)))
                }
            }
        }
    }
}

/// The keys right under `prefix`.
async fn keys_under(store: &dyn ObjectStore, prefix: &Key) -> object_store::Result<Vec<Key>> {
    let listed = store.list_with_delimiter(Some(prefix)).await?;
    Ok(listed.objects.into_iter().map(|m| m.location).collect())
}

/// Ships every closed day partition of `layout` from `from` on (every one
/// when `None`) to `remote`; `today` (UTC) is the first day not shipped.
pub fn ship_closed_days(
    layout: &DataLayout,
    remote: &Remote,
    from: Option<NaiveDate>,
    today: NaiveDate,
) -> ShipReport {
    let mut report = ShipReport::default();
    let partitions = match closed_partitions(layout, from, today, None) {
        Ok(p) => p,
        Err(e) => {
            report.failed.push(e);
            return report;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            report.failed.push(format!("cannot start the upload runtime: {e}"));
            return report;
        }
    };
    runtime.block_on(async {
        for (tried, partition) in partitions.iter().enumerate() {
            if partition.files.is_empty() {
                // Nothing to ship; shipping it would remove its objects.
                continue;
            }
            if partition.files.len() > 1 {
                report.not_compacted.push(partition.dir.clone());
                continue;
            }
            ship_partition(remote, partition, &mut report).await;
            if report.failed.is_empty() && markers::ships(layout) {
                // A folder that also ships live: its shipper need not
                // look at this partition again.
                mark(layout, remote, partition).unwrap_or_else(|e| report.failed.push(e));
            }
            // A store that refuses one partition refuses the next: stop
            // rather than wait out every file's retries.
            if !report.failed.is_empty() {
                report.unshipped = partitions.len() - (tried + 1);
                break;
            }
            report.partitions += 1;
        }
    });
    report
}

/// Marks `partition` (one file) shipped to `remote`.
fn mark(layout: &DataLayout, remote: &Remote, partition: &Partition) -> Result<(), String> {
    let [(name, path)] = partition.files.as_slice() else {
        return Err(format!("{} is not one file", partition.dir.display()));
    };
    let size = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?.len();
    let marker = markers::Marker { name: name.clone(), size, url: remote.url().to_owned() };
    markers::write(layout, partition.table, partition.date, &partition.host, &marker)
        .map_err(|e| format!("cannot mark {} shipped: {}", partition.dir.display(), format_chain(&e)))
}
