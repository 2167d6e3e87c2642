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

    /// The writer could not write the rows of `host`; files already renamed
    /// into place are complete, and importing again adds only the rest.
    #[error("cannot write the rows of host {host}")]
    Write {
        /// The host whose files were being written.
        host: String,
        /// The writer's reason (it names the file).
        #[source]
        source: WriteError,
    },
}
