//! The locks an import holds while it writes a host's rows, the very
//! `flock`s the recorder takes (std's `File::lock` is `flock(2)` on Linux;
//! `apron` links no nix):
//!
//! - the data folder's maintenance lock (`DATA/.compact.lock`, held by
//!   compaction and retention), **waited for**: imports into one data
//!   folder, compaction and retention take turns, so two imports never
//!   choose the same file names or skip rows by what the other has not
//!   written yet;
//! - the host's recorder lock (`DATA/wal/host=H/LOCK`, held by a live
//!   `apron-recorder` of that host for its whole life), **never waited
//!   for**: an import into a host a recorder is writing is refused (it
//!   would not see the rows in the recorder's write-ahead log), and a
//!   recorder of that host cannot start while the import writes.
//!
//! Always in that order, and the recorder never waits for the first while
//! it holds the second, so no two processes wait for each other. The
//! kernel drops both when the process dies, however it dies.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use apron_schemas::DataLayout;
use apron_store::create;

use super::ImportError;

/// The data folder's maintenance lock, held until dropped.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

impl DataLock {
    /// Takes the lock of `layout`'s data folder (creating the folder when it
    /// is missing), waiting while another import, a compaction or a
    /// retention run holds it; `waiting(lock)` is called once before it
    /// waits.
    pub fn acquire(layout: &DataLayout, waiting: &dyn Fn(&Path)) -> Result<DataLock, ImportError> {
        let path = layout.compact_lock_path();
        let err = |source| ImportError::Lock { path: path.clone(), source };
        create::create_dir_all(layout.root()).map_err(err)?;
        let file = create::open_or_create_no_follow(&path).map_err(err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                waiting(&path);
                file.lock().map_err(err)?;
            }
            Err(TryLockError::Error(e)) => return Err(err(e)),
        }
        Ok(DataLock { _file: file })
    }
}

/// A host's recorder lock, held by an import until dropped.
#[derive(Debug)]
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Takes `host`'s recorder lock in `layout` without waiting: fails with
    /// [`ImportError::Recording`] when a recorder (or anything else) holds
    /// it. Writes this process's pid into it, for the message a recorder
    /// that starts meanwhile prints.
    pub fn acquire(layout: &DataLayout, host: &str) -> Result<HostLock, ImportError> {
        let path = layout.recorder_lock_path(host);
        let err = |source| ImportError::Lock { path: path.clone(), source };
        create::create_dir_all(&layout.wal_dir(host)).map_err(err)?;
        let mut file = create::open_or_create_no_follow(&path).map_err(err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(ImportError::Recording {
                    host: host.to_owned(),
                    holder: if holder.is_empty() { "unknown".into() } else { holder.to_owned() },
                    lock: path,
                });
            }
            Err(TryLockError::Error(e)) => return Err(err(e)),
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| write!(file, "{}", std::process::id()))
            .map_err(err)?;
        Ok(HostLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_held_host_is_refused_with_its_holder_and_the_data_lock_is_waited_for() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path().join("data"));
        let first = HostLock::acquire(&layout, "n1").expect("free");
        let err = HostLock::acquire(&layout, "n1").expect_err("held");
        let msg = err.to_string();
        assert!(msg.contains(&format!("pid {}", std::process::id())) && msg.contains("host n1"), "{msg}");
        HostLock::acquire(&layout, "n2").expect("another host is free");
        drop(first);
        HostLock::acquire(&layout, "n1").expect("free once dropped");

        let held = DataLock::acquire(&layout, &|_| panic!("nobody holds it")).expect("free");
        let waited = AtomicBool::new(false);
        std::thread::scope(|s| {
            let second = s.spawn(|| {
                DataLock::acquire(&layout, &|_| waited.store(true, Ordering::SeqCst)).expect("in turn")
            });
            while !waited.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            drop(held);
            second.join().expect("the second takes it once the first is dropped");
        });
    }
}
