//! What can stop an import ([`ImportError`]).

use std::path::PathBuf;

use apron_store::write_error::WriteError;

/// What can stop an import. A bad row stops it before anything is written.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A row (or the header) of an input file that cannot be imported.
    #[error("{}:{line}: {field}: {message}", path.display())]
    Row {
        /// The input file.
        path: PathBuf,
        /// Its 1-based line.
        line: u64,
        /// The column at fault, as the file names it (or the format's name
        /// for it when the file has no header).
        field: String,
        /// What is wrong with it.
        message: String,
    },

    /// An input file that cannot be read at all.
    #[error("cannot read {}", path.display())]
    Read {
        /// The input file.
        path: PathBuf,
        /// The operating system's or the CSV reader's reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The input as a whole cannot be imported (no timestamp column, no
    /// sample, an interval that cannot be told).
    #[error("{what}: {message}")]
    Input {
        /// The file or URL.
        what: String,
        /// What is missing.
        message: String,
    },

    /// A Prometheus server that cannot be queried or answers an error.
    #[error("cannot query {url}: {message}")]
    Prometheus {
        /// The query's URL (without the query string).
        url: String,
        /// Its answer, on one line.
        message: String,
    },

    /// Reading the keys already in a partition, to skip what is there.
    #[error("cannot read {} to skip the rows already imported", path.display())]
    Existing {
        /// The Parquet file.
        path: PathBuf,
        /// The Parquet or I/O reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The writer could not write the rows of `host` into the import's
    /// staging folder: nothing of this import is in the data folder.
    #[error("cannot write the rows of host {host}")]
    Write {
        /// The host whose files were being written.
        host: String,
        /// The writer's reason (it names the file).
        #[source]
        source: WriteError,
    },

    /// A lock file of the data folder cannot be opened or locked.
    #[error("cannot lock {}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },

    /// A live recorder writes the host the import would write.
    #[error(
        "host {host} is being recorded into this data folder by a live apron-recorder (pid {holder}, \
         holding {}): an import would not see the rows in its write-ahead log; stop it, or import \
         into another data folder",
        lock.display()
    )]
    Recording {
        /// The host.
        host: String,
        /// The pid the lock file holds, or "unknown".
        holder: String,
        /// The host's lock file.
        lock: PathBuf,
    },

    /// A step of staging or committing an import's files failed.
    #[error("cannot {op} {}", path.display())]
    Commit {
        /// What was being done ("move into place", "remove").
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },

    /// The folder an earlier import left can be neither finished nor
    /// undone.
    #[error("cannot finish or undo the import left in {}: {message}", dir.display())]
    Leftover {
        /// Its staging folder.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },
}
