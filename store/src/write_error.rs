//! The error of writing the data folder's files: what the rolling writer,
//! its write-ahead log, recovery and durable writes ([`crate::durable`])
//! return, each naming the file or folder at fault.

use std::io;
use std::path::PathBuf;

use apron_schemas::{PathError, Table};
use arrow::error::ArrowError;
use parquet::errors::ParquetError;

/// Writing a Parquet file failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The host name cannot be a partition folder.
    #[error(transparent)]
    Host(#[from] PathError),
    /// A file or folder operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done ("create folder", "rename into place", …).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Encoding the rows as Parquet failed.
    #[error("cannot write {}", path.display())]
    Parquet {
        /// The temporary file being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: ParquetError,
    },
    /// The rows did not fit the table's schema (a bug, not a user error).
    #[error("cannot build {table} rows")]
    Batch {
        /// The table.
        table: Table,
        /// The cause.
        #[source]
        source: ArrowError,
    },
}
