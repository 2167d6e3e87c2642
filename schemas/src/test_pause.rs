//! Named points where an apron process stops itself (SIGSTOP) when a test
//! asks for it, so the test can act at that exact step (a `kill -9`, a file
//! rotation under a running query) instead of hoping to hit it by timing.
//!
//! A test sets [`PAUSE_ENV`] to a point's name; every time the process
//! reaches that point it stops, and the test sees the process in state `T`
//! in `/proc/PID/stat`, does what it must, then sends SIGCONT or SIGKILL.
//! Without the variable (every real run) a point costs one comparison with a
//! cached value. The points are listed in [`points`] and documented where
//! they are called.

use std::sync::OnceLock;

/// The environment variable naming the point to stop at.
pub const PAUSE_ENV: &str = "APRON_TEST_PAUSE_AT";

/// Every pause point, by name; a name not listed here never matches.
pub mod points {
    /// The recorder has sealed a closed file and is about to write its
    /// Parquet files (the tick that closed it is already in the new WAL
    /// segment).
    pub const BEFORE_CLOSED_FILE_WRITE: &str = "before-closed-file-write";
    /// `apron` has listed the write-ahead log's segments and has not read
    /// them yet.
    pub const AFTER_WAL_LIST: &str = "after-wal-list";
    /// `apron` has read the write-ahead log and has not listed the Parquet
    /// files of its query yet.
    pub const AFTER_WAL_READ: &str = "after-wal-read";
    /// `apron import` has written every file of a host in its staging
    /// folder and has not written the commit record yet: nothing of it is
    /// in the data folder.
    pub const IMPORT_STAGED: &str = "import-staged";
    /// `apron import` has made its commit record durable and moved one
    /// file into place, the others not yet.
    pub const IMPORT_COMMITTING: &str = "import-committing";
}

/// Stops this process with SIGSTOP when [`PAUSE_ENV`] names `point`, and
/// returns once it is continued.
pub fn pause_at(point: &str) {
    static WANTED: OnceLock<Option<String>> = OnceLock::new();
    if WANTED.get_or_init(|| std::env::var(PAUSE_ENV).ok()).as_deref() == Some(point) {
        // SAFETY: raise(3) with a valid signal number has no preconditions;
        // SIGSTOP cannot be caught, so no handler of ours runs.
        unsafe {
            libc::raise(libc::SIGSTOP);
        }
    }
}
