//! The fence between the write-ahead log and the Parquet listing, so a query
//! sees every row exactly once whatever moment it starts: a snapshot of the
//! data folder as of the moment the session read the log.
//!
//! A session reads the open WAL segments when it opens ([`crate::session::recent`]);
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
//! The store the listing reads through applies it (`crate::session::local_files`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use apron_schemas::paths::{parse_data_file_name, parse_host_dir_name};
use datafusion::object_store;
use datafusion::object_store::path::Path as ObjectPath;

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
        // The last two parts, `host=H/<start>-<seq>.parquet`; the names the
        // recorder writes need no percent-encoding.
        let mut parts = path.as_ref().rsplit(object_store::path::DELIMITER);
        let (Some(name), Some(host_dir)) = (parts.next(), parts.next()) else { return false };
        let (Some(host), Some(name)) = (parse_host_dir_name(host_dir), parse_data_file_name(name)) else {
            return false;
        };
        self.newest.get(host).is_some_and(|&newest| name > newest)
    }
}
