//! One recorder per host and data folder: an exclusive `flock` on a lock
//! file in the host's WAL folder, held for the recorder's life.
//!
//! The kernel drops the lock when the process dies, however it dies, so a
//! crashed recorder never leaves a stale lock behind.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another recorder holds it (or `apron import`, while it writes the
    /// host).
    #[error(
        "another apron-recorder (or an apron import: pid {holder}) is already recording host {host} into this data folder (lock {})",
        path.display()
    )]
    Held {
        /// The host.
        host: String,
        /// The pid written by the holder, or "unknown".
        holder: String,
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot lock {}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// An exclusive lock on recording one host into one data folder; released
/// when dropped or when the process ends.
#[derive(Debug)]
pub struct RecorderLock {
    _lock: Flock<File>,
}

impl RecorderLock {
    /// Takes the lock at `path` for `host`, without waiting.
    pub fn acquire(path: &Path, host: &str) -> Result<RecorderLock, LockError> {
        let io_err = |source| LockError::Io { path: path.to_path_buf(), source };
        if let Some(dir) = path.parent() {
            apron_store::create::create_dir_all(dir).map_err(io_err)?;
        }
        // Never through a symlink: the pid written below would overwrite
        // whatever file it points to.
        let file = apron_store::create::open_or_create_no_follow(path).map_err(io_err)?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                return Err(LockError::Held {
                    host: host.to_owned(),
                    holder: if holder.is_empty() { "unknown".into() } else { holder.to_owned() },
                    path: path.to_path_buf(),
                });
            }
            Err((_, errno)) => return Err(io_err(io::Error::from(errno))),
        };
        // The pid is only for the message a second recorder prints.
        lock.set_len(0).and_then(|()| lock.rewind()).map_err(io_err)?;
        write!(lock, "{}", std::process::id()).and_then(|()| lock.flush()).map_err(io_err)?;
        Ok(RecorderLock { _lock: lock })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("wal/host=n1/LOCK");
        let first = RecorderLock::acquire(&path, "n1").expect("first lock");
        let err = RecorderLock::acquire(&path, "n1").expect_err("held");
        let msg = err.to_string();
        assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
        assert!(msg.contains("host n1"), "{msg}");
        drop(first);
        RecorderLock::acquire(&path, "n1").expect("free again once dropped");
    }
}
