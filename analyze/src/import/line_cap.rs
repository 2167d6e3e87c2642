//! A log file read with a cap on its lines: a line longer than
//! [`super::ranges::MAX_LINE_BYTES`] is an error as soon as that many bytes
//! of it are read, so a log with a 200 MB field never has the field in
//! memory (the CSV reader would gather a record whole before handing it
//! over).

use std::io::{self, Read, Seek, SeekFrom};

/// A line longer than the cap, as the error [`LineCap`] fails with (inside
/// an [`io::Error`]; [`too_long_in`] finds it in a CSV reader's error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line {line} is longer than {max} bytes")]
pub struct LineTooLong {
    /// The line, 1-based.
    pub line: u64,
    /// The cap, bytes.
    pub max: usize,
}

/// `inner`, read as is, failing at the first line longer than `max` bytes
/// (its end of line not counted).
#[derive(Debug)]
pub struct LineCap<R> {
    inner: R,
    max: usize,
    /// The 1-based line being read.
    line: u64,
    /// Bytes of it read so far.
    in_line: usize,
}

impl<R: Read> LineCap<R> {
    /// `inner` with lines of at most `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        Self { inner, max, line: 1, in_line: 0 }
    }
}

impl<R: Read> Read for LineCap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut rest = &buf[..n];
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            self.check(self.in_line + i)?;
            self.line += 1;
            self.in_line = 0;
            rest = &rest[i + 1..];
        }
        self.in_line += rest.len();
        self.check(self.in_line)?;
        Ok(n)
    }
}

impl<R: Seek> Seek for LineCap<R> {
    /// Seeks `inner`; the position is taken to be a line's start (whose
    /// number [`LineCap::set_line`] sets).
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.in_line = 0;
        self.inner.seek(pos)
    }
}

impl<R> LineCap<R> {
    /// The number of the line about to be read (after a seek).
    pub fn set_line(&mut self, line: u64) {
        self.line = line;
        self.in_line = 0;
    }

    fn check(&self, len: usize) -> io::Result<()> {
        // A `\r\n` line end is one byte more than the line.
        if len > self.max + 1 {
            Err(io::Error::new(io::ErrorKind::InvalidData, LineTooLong { line: self.line, max: self.max }))
        } else {
            Ok(())
        }
    }
}

/// The [`LineTooLong`] a CSV reader's error comes from, if it does.
pub fn too_long_in(err: &csv::Error) -> Option<LineTooLong> {
    match err.kind() {
        csv::ErrorKind::Io(e) => e.get_ref().and_then(|e| e.downcast_ref::<LineTooLong>()).copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_lines_pass_and_a_long_one_fails_before_it_is_read_whole() {
        let text = b"ab\r\ncd\nefgh\n";
        let mut out = Vec::new();
        LineCap::new(&text[..], 4).read_to_end(&mut out).expect("every line fits");
        assert_eq!(out, text);

        // A reader that never ends: the cap stops it.
        let endless = io::repeat(b'x');
        let mut capped = LineCap::new(b"ok\n".chain(endless), 1_000);
        let mut sink = Vec::new();
        let err = capped.read_to_end(&mut sink).expect_err("too long");
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<LineTooLong>()).expect("ours");
        assert_eq!(*inner, LineTooLong { line: 2, max: 1_000 });
        assert!(sink.len() < 100_000, "stopped early: {} bytes", sink.len());
    }
}
