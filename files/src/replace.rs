//! Replacing a file: what every file of [the crate's list](crate) goes
//! through.
//!
//! The bytes go to a new hidden file beside the destination
//! (`.NAME.XXXXXX.tmp`, a random name created with `O_EXCL`, so nothing
//! planted there in advance, a symbolic link included, is ever opened),
//! are synced, and the file is renamed over the destination; the folder is
//! synced after. A reader sees the old file or the new one, never half of
//! one, and a symbolic link at the destination is replaced by the file,
//! never written through: the file it points to stays as it was.
//!
//! Modes: a file that replaces one keeps that file's permission bits (a
//! `0600` file stays `0600`; set-id bits are dropped); a new file gets
//! `0666` less the process's umask, as a file made by `File::create` or a
//! shell's `>` does. The owner is whoever writes: a file replaced in a
//! folder shared with others becomes the writer's.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

/// A file being written to replace `path`: write into it (it is
/// [`Write`]; [`Replacement::file`] for more), then [`Replacement::commit`].
/// Dropped without a commit (an error on the way, Ctrl-C), its temporary
/// file is removed and `path` is as it was.
#[derive(Debug)]
pub struct Replacement {
    temp: NamedTempFile,
    path: PathBuf,
    /// The permission bits of the file `path` held when this began, which
    /// the new file takes; `None` when there was none (the new file keeps
    /// the mode it was created with, `0666` less the umask).
    kept_mode: Option<u32>,
}

impl Replacement {
    /// Starts replacing `path`: creates the new, hidden temporary file in
    /// its folder, which must exist. The error is the operating system's,
    /// without the temporary name (callers name `path`).
    pub fn begin(path: &Path) -> io::Result<Replacement> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
        let kept_mode = match fs::symlink_metadata(path) {
            Ok(meta) if meta.is_file() => Some(meta.permissions().mode() & 0o777),
            // Nothing there, a symbolic link (replaced, not followed) or
            // something the rename will refuse: a new file's mode.
            _ => None,
        };
        let mut prefix = OsString::from(".");
        prefix.push(name);
        prefix.push(".");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // A file replacing another is private until it gets that file's
        // mode; a new one is created as `File::create` would (the kernel
        // takes the umask away).
        builder.permissions(fs::Permissions::from_mode(if kept_mode.is_some() { 0o600 } else { 0o666 }));
        let temp = builder.tempfile_in(folder_of(path)).map_err(without_temp_path)?;
        Ok(Replacement { temp, path: path.to_path_buf(), kept_mode })
    }

    /// The temporary file, open for writing.
    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// The file this replaces.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file's name (hidden, beside [`Replacement::path`]).
    pub fn temp_path(&self) -> &Path {
        self.temp.path()
    }

    /// Syncs what was written, gives it the mode it keeps, renames it over
    /// the destination and syncs the folder. When this returns `Ok`, the
    /// destination holds exactly what was written, durably; on an error it
    /// is as it was and the temporary file is gone.
    pub fn commit(self) -> io::Result<()> {
        let Replacement { temp, path, kept_mode } = self;
        if let Some(mode) = kept_mode {
            temp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
        }
        temp.as_file().sync_all()?;
        temp.persist(&path).map_err(|e| e.error)?;
        // Some file systems refuse to open or sync a folder; the file is
        // complete and in place by now, so that is not an error.
        if let Ok(dir) = File::open(folder_of(&path)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Write for Replacement {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush()
    }
}

/// Replaces `path` with `bytes` ([`Replacement`]). When this returns `Ok`,
/// `path` holds `bytes`, durably.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut replacement = Replacement::begin(path)?;
    replacement.write_all(bytes)?;
    replacement.commit()
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// `err` of creating the temporary file without its random name: the
/// `tempfile` crate appends ` at path "…"` to the operating system's words.
fn without_temp_path(err: io::Error) -> io::Error {
    let message = err.to_string();
    match message.find(" at path \"") {
        Some(end) => io::Error::new(err.kind(), message[..end].to_owned()),
        None => err,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.txt");
        write(&path, b"first").expect("writes");
        write(&path, b"second").expect("replaces");
        assert_eq!(fs::read(&path).expect("read"), b"second");
        assert_eq!(names(dir.path()), ["a.txt"]);
    }

    #[test]
    fn a_symlink_at_the_destination_is_replaced_not_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").expect("write");
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).expect("chmod");
        let path = dir.path().join("out.txt");
        symlink(&victim, &path).expect("symlink");
        write(&path, b"report").expect("writes");
        assert_eq!(fs::read(&victim).expect("read"), b"precious");
        assert_eq!(mode(&victim), 0o644, "the victim's mode is not touched either");
        assert!(fs::symlink_metadata(&path).expect("stat").is_file(), "a file now, not a link");
        assert_eq!(fs::read(&path).expect("read"), b"report");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_set_id_bits_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("secret.csv");
        for (before, after) in [(0o600, 0o600), (0o640, 0o640), (0o604, 0o604), (0o4755, 0o755)] {
            fs::write(&path, b"old").expect("write");
            fs::set_permissions(&path, fs::Permissions::from_mode(before)).expect("chmod");
            write(&path, b"new").expect("replaces");
            assert_eq!(mode(&path), after, "{before:o}");
        }
    }

    #[test]
    fn an_error_leaves_the_destination_and_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.txt");
        fs::write(&path, b"kept").expect("write");
        let mut replacement = Replacement::begin(&path).expect("begins");
        replacement.write_all(b"half").expect("writes");
        drop(replacement);
        assert_eq!(fs::read(&path).expect("read"), b"kept");
        assert_eq!(names(dir.path()), ["a.txt"]);
        let err = write(&dir.path().join("no/such/a.txt"), b"x").expect_err("no folder");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(!err.to_string().contains(".tmp"), "{err}");
    }
}
