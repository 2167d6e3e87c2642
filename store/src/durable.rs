//! Durable atomic writes into the data folder: a file appears complete
//! under its final name, and stays there across a power loss, or not at
//! all. Every file the writers publish goes through [`Staged`] (filled a
//! piece at a time, as a stream of row groups) or [`write_file`] (filled in
//! one go), and every rename or removal that must survive a power loss is
//! made durable with [`sync_dir`]. What goes in a file is the caller's
//! business.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use apron_schemas::paths::temp_path;

use crate::write_error::WriteError;

/// Writes the file `path` through `fill`: creates its folder (and missing
/// parents, [`crate::create::create_dir_all`]), creates the hidden
/// temporary name [`temp_path`] beside it (replacing what a crash left
/// there, never through a symbolic link), lets `fill` write into it and
/// hand the file back, fsyncs it, renames it to `path` and fsyncs the
/// folder. When this returns `Ok`, the file is durable and complete under
/// `path`; on error nothing is left at `path` (unless it was there before)
/// or at the temporary name.
pub fn write_file(
    path: &Path,
    fill: impl FnOnce(File, &Path) -> Result<File, WriteError>,
) -> Result<(), WriteError> {
    let (staged, file) = Staged::create(path)?;
    let file = fill(file, staged.tmp())?;
    staged.publish(file)
}

/// A file being written under its hidden temporary name, for a writer that
/// fills it a piece at a time ([`write_file`] when one closure can fill
/// it). [`Staged::publish`] makes it durable under its final name; dropped
/// unpublished (an error on the way), its temporary file is removed.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    tmp: PathBuf,
    /// Whether the temporary file was renamed into place.
    published: bool,
}

impl Staged {
    /// Creates the folder of `path` (and missing parents) and the new file
    /// at its temporary name, replacing what a crash left there, never
    /// through a symbolic link; returns it open for writing.
    pub fn create(path: &Path) -> Result<(Staged, File), WriteError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        crate::create::create_dir_all(dir).map_err(io_err("create folder", dir))?;
        let tmp = temp_path(path);
        let file = crate::create::replace_temp(&tmp).map_err(io_err("create", &tmp))?;
        Ok((Staged { path: path.to_path_buf(), tmp, published: false }, file))
    }

    /// The temporary name being written, for error messages.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Fsyncs `file` (the one [`Staged::create`] returned, filled), renames
    /// it to its final name and fsyncs the folder. When this returns `Ok`,
    /// the file is durable and complete under its final name; on error
    /// nothing is left at the temporary name, nor at the final name unless
    /// the rename was done.
    pub fn publish(mut self, file: File) -> Result<(), WriteError> {
        file.sync_all().map_err(io_err("sync", &self.tmp))?;
        drop(file);
        fs::rename(&self.tmp, &self.path).map_err(io_err("rename into place", &self.path))?;
        self.published = true;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        sync_dir(dir).map_err(io_err("sync folder", dir))
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.published {
            // Best effort: the error that got here is the one to report.
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Makes the creations, renames and removals of entries in `dir` durable
/// (fsync of the folder).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

fn io_err(op: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteError {
    let path = path.to_path_buf();
    move |source| WriteError::Io { op, path, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Write;

    #[test]
    fn the_file_appears_complete_and_no_temporary_file_stays() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("date=2026-11-02/host=a/x.parquet");
        write_file(&path, |mut f, _| {
            f.write_all(b"first").map_err(io_err("write", &path))?;
            Ok(f)
        })
        .expect("written");
        write_file(&path, |mut f, _| {
            f.write_all(b"second").map_err(io_err("write", &path))?;
            Ok(f)
        })
        .expect("replaced");
        assert_eq!(fs::read(&path).expect("read"), b"second");
        let names: Vec<_> = fs::read_dir(path.parent().expect("parent"))
            .expect("list")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("x.parquet")]);
    }

    #[test]
    fn a_failed_fill_leaves_nothing_behind() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("x.parquet");
        let err = write_file(&path, |_, t| {
            assert!(t.exists(), "the temporary file is there while it is filled");
            Err(WriteError::Io { op: "encode", path: t.to_path_buf(), source: io::Error::other("full") })
        })
        .expect_err("the fill failed");
        assert!(err.to_string().starts_with("cannot encode "), "{err}");
        assert_eq!(fs::read_dir(tmp.path()).expect("list").count(), 0);
    }

    #[test]
    fn a_staged_file_appears_only_when_published() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let path = tmp.path().join("date=2026-11-02/x.parquet");
        let (staged, mut f) = Staged::create(&path).expect("created");
        f.write_all(b"rows").expect("write");
        assert!(staged.tmp().exists() && !path.exists(), "only the temporary name while it is filled");
        staged.publish(f).expect("published");
        assert_eq!(fs::read(&path).expect("read"), b"rows");
        assert!(!temp_path(&path).exists());

        let other = tmp.path().join("date=2026-11-02/y.parquet");
        let (staged, mut f) = Staged::create(&other).expect("created");
        f.write_all(b"half").expect("write");
        drop(staged);
        assert!(!other.exists() && !temp_path(&other).exists(), "an abandoned file leaves nothing");
    }
}
