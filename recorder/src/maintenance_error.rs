//! The error of the data folder's maintenance: what compaction
//! ([`crate::compact`]), retention ([`crate::retention`]), their lock
//! ([`crate::data_lock`]) and their run ([`crate::maintenance`]) return,
//! naming the file or folder at fault.

use std::io;
use std::path::PathBuf;

use apron_schemas::folders::ListError;
use parquet::errors::ParquetError;

/// Compacting or applying retention failed.
#[derive(Debug, thiserror::Error)]
pub enum MaintenanceError {
    /// Someone else holds the data folder's maintenance lock.
    #[error("another compaction is running on {} (it holds {})", data.display(), lock.display())]
    Locked {
        /// The data folder.
        data: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// A file or folder operation failed.
    #[error("cannot {op} {}", path.display())]
    Io {
        /// What was being done ("list", "swap in the compacted folder", …).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Reading or writing a Parquet file failed.
    #[error("cannot {op} {}", path.display())]
    Parquet {
        /// "read", "write" or "merge".
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: ParquetError,
    },
}

impl MaintenanceError {
    /// An [`MaintenanceError::Io`] for `op` on `path`, for `map_err`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| MaintenanceError::Io { op, path, source }
    }
}

impl From<ListError> for MaintenanceError {
    fn from(e: ListError) -> Self {
        MaintenanceError::Io { op: "list", path: e.path, source: e.source }
    }
}
