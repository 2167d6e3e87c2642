//! Running a query again when a data file it listed vanished before it
//! was read (compaction swapping a day's files, a recovered file): the
//! data folder is listed again and the query rerun, a few times, if
//! nothing of its result has been printed yet.

use std::io::Write;

use crate::error::Error;

/// Runs of a query whose files vanished under it (compaction swapping a
/// partition in) before it gives up.
pub(crate) const MAX_TRIES: u32 = 3;

/// A writer that counts the bytes written through it.
pub(crate) struct Counting<W> {
    inner: W,
    /// Bytes written so far.
    pub(crate) written: u64,
}

impl<W> Counting<W> {
    /// `inner`, nothing written yet.
    pub(crate) fn new(inner: W) -> Self {
        Self { inner, written: 0 }
    }
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Whether `err` comes from a data file that disappeared between the
/// listing and the read.
pub(crate) fn vanished(err: &Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::NotFound
        {
            return true;
        }
        if let Some(datafusion::object_store::Error::NotFound { .. }) = e.downcast_ref() {
            return true;
        }
        cur = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::InputError;

    #[test]
    fn a_file_gone_between_listing_and_reading_is_told_apart() {
        let gone = Error::from(InputError::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
        });
        assert!(vanished(&gone));
        let denied = Error::from(InputError::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        });
        assert!(!vanished(&denied));
    }
}
