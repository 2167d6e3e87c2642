//! How the recorder creates files and folders in the data folder: never
//! through a symbolic link, and with modes for an analysts' group.
//!
//! The data folder names users, containers, pods and Slurm jobs
//! (`proc_samples`), so files are `0640` and folders `0750` (the umask may
//! take more away, never add). A file the recorder creates is opened with
//! `O_NOFOLLOW` and, where it must be new, `O_EXCL`: a symlink planted in
//! the data folder's bookkeeping (the lock file, a WAL segment, a temporary
//! Parquet file, a compaction staging folder) is refused, and the file it
//! points to is never written. What goes in the files, and when, is the
//! callers' business.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Mode of every file the recorder creates: owner read-write, group read.
pub const FILE_MODE: u32 = 0o640;

/// Mode of every folder the recorder creates: owner all, group list and enter.
pub const DIR_MODE: u32 = 0o750;

/// Creates `dir` and its missing parents with [`DIR_MODE`]; folders that
/// exist are left as they are.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates `dir`, which must not exist (nor be a symlink), with [`DIR_MODE`].
pub fn create_dir_new(dir: &Path) -> io::Result<()> {
    DirBuilder::new().mode(DIR_MODE).create(dir)
}

/// Creates the new file `path` for writing, with [`FILE_MODE`]: fails when
/// anything is there already, a symlink included (`O_EXCL`, `O_NOFOLLOW`).
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Creates the new file `path` for writing after removing a file a crash
/// may have left under that (temporary) name: removing a symlink removes
/// the link, not what it points to, and the new file is then created with
/// [`create_new`], so a symlink planted in between is refused too.
pub fn replace_temp(path: &Path) -> io::Result<File> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    create_new(path)
}

/// Opens `path` for reading and writing, creating it with [`FILE_MODE`] if
/// it is missing, without following a symlink: for a long-lived file such
/// as a lock. A symlink there fails with [`io::ErrorKind::InvalidInput`]
/// and a message that says so.
pub fn open_or_create_no_follow(path: &Path) -> io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    match opened {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            Err(io::Error::new(io::ErrorKind::InvalidInput, "it is a symbolic link; refusing to follow it"))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::{PermissionsExt, symlink};

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).expect("stat").permissions().mode() & 0o777
    }

    #[test]
    fn files_and_folders_get_group_readable_modes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("a/b");
        create_dir_all(&dir).expect("mkdir");
        // The test runs under some umask; the modes never exceed ours.
        let umask = {
            // SAFETY: umask(2) only swaps the process mask; it is set back at once.
            let m = unsafe { libc::umask(0o022) };
            // SAFETY: as above.
            unsafe { libc::umask(m) };
            m
        };
        assert_eq!(mode(&dir), DIR_MODE & !umask);
        assert_eq!(mode(&tmp.path().join("a")), DIR_MODE & !umask);
        let f = dir.join("x");
        create_new(&f).expect("create");
        assert_eq!(mode(&f), FILE_MODE & !umask);
        assert!(create_new(&f).is_err(), "never replaces a file");
    }

    #[test]
    fn symlinks_are_never_followed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tmp.path().join("outside");
        fs::write(&outside, b"precious").expect("write");
        let link = tmp.path().join("link");
        symlink(&outside, &link).expect("symlink");
        assert!(create_new(&link).is_err());
        let err = open_or_create_no_follow(&link).expect_err("a symlink");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        // A symlink under a temporary name is removed, not written through.
        replace_temp(&link).expect("replaced");
        assert!(!fs::symlink_metadata(&link).expect("stat").file_type().is_symlink());
        assert_eq!(fs::read(&outside).expect("read"), b"precious");
    }
}
