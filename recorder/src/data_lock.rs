//! The data folder's maintenance lock: one compaction or retention run at
//! a time per data folder, whether the recorder's daily run or
//! `apron-recorder compact`.

use std::fs::File;

use apron_schemas::DataLayout;
use nix::fcntl::{Flock, FlockArg};

use crate::maintenance_error::MaintenanceError;

/// The data folder's maintenance lock, held until dropped. Compaction and
/// retention take it as proof that nobody else changes the partitions
/// they work on.
#[derive(Debug)]
pub struct DataLock {
    _lock: Flock<File>,
}

impl DataLock {
    /// Takes the lock of `layout`'s data folder without waiting: fails with
    /// [`MaintenanceError::Locked`] when another process holds it.
    pub fn acquire(layout: &DataLayout) -> Result<Self, MaintenanceError> {
        let path = layout.compact_lock_path();
        let file = apron_store::create::open_or_create_no_follow(&path)
            .map_err(MaintenanceError::io("open the lock file", &path))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => Ok(Self { _lock: lock }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                Err(MaintenanceError::Locked { data: layout.root().to_path_buf(), lock: path })
            }
            Err((_, errno)) => Err(MaintenanceError::Io { op: "lock", path, source: errno.into() }),
        }
    }
}
