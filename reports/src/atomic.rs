//! Atomic file replacement: every file this crate writes goes through here.
//!
//! The bytes go to a hidden temp file in the destination's folder, are
//! fsynced, and the temp file is renamed over the destination. A reader (a
//! browser refreshing the report, a mailer zipping the folder) sees the old
//! file or the new one, never a half-written one, and re-running a report
//! overwrites cleanly. Callers own the error messages; this returns
//! `io::Error`.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Replaces `path` with `bytes`. When this returns `Ok`, the new contents
/// are durable and visible under `path` (mode 0644 on Unix).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{}.", name.to_string_lossy()))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(without_temp_path)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // tempfile creates 0600; a report folder is meant to be shared.
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    // Make the rename itself durable. Some filesystems refuse to open or
    // sync a directory; the file is already complete, so that is not fatal.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// `err` of creating the temp file, without the temp file's random name
/// (callers name the destination): `tempfile` appends ` at path "…"` to
/// the operating system's message.
fn without_temp_path(err: io::Error) -> io::Error {
    let message = err.to_string();
    match message.find(" at path \"") {
        Some(end) => io::Error::new(err.kind(), message[..end].to_owned()),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.txt")]);
    }

    #[test]
    fn a_missing_folder_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(&dir.path().join("no/such/a.txt"), b"x").expect_err("no folder");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!err.to_string().contains(".tmp"), "{err}");
    }
}
