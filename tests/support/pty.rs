//! A pseudo-terminal for driving an interactive program as a person at a
//! terminal would: the program's standard input, output and error are the
//! terminal, it is the terminal's session leader (so `\x03` typed is a
//! SIGINT to it, as Ctrl-C is), and every wait for its output is bounded,
//! so a program that hangs fails the test instead of blocking it. It
//! answers the program's questions for the cursor's place (`ESC [ 6 n`),
//! as a terminal does, which a line editor asks before it draws its prompt;
//! or, started with [`Terminal::spawn_silent`], leaves them unanswered, as
//! a serial console or a dumb terminal does.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A program running on a pseudo-terminal, and what it printed so far.
#[derive(Debug)]
pub struct Terminal {
    master: File,
    child: Child,
    /// Everything read from the terminal.
    output: String,
    /// Where the next [`Terminal::expect`] starts looking in `output`.
    seen: usize,
    /// Where `output` has questions for the cursor's place not answered yet.
    asked: usize,
    /// Whether those questions are answered.
    answers_cursor: bool,
}

/// The question for the cursor's place (Device Status Report 6).
const CURSOR_QUERY: &str = "\x1b[6n";
/// The rows of the terminal.
const ROWS: u16 = 50;

impl Terminal {
    /// Starts `command` on a new terminal of 50 rows and 200 columns.
    pub fn spawn(command: &mut Command) -> Terminal {
        Self::start(command, true)
    }

    /// [`Terminal::spawn`], on a terminal that never answers a question for
    /// the cursor's place.
    pub fn spawn_silent(command: &mut Command) -> Terminal {
        Self::start(command, false)
    }

    fn start(command: &mut Command, answers_cursor: bool) -> Terminal {
        // SAFETY: posix_openpt returns a new descriptor or -1; the ones
        // after take that descriptor, which this function owns. Closed on
        // exec: the programs other tests of this process start meanwhile
        // must not hold the terminal open.
        let master = unsafe {
            let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            assert_eq!(libc::grantpt(fd), 0, "grantpt");
            assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
            let size = libc::winsize { ws_row: ROWS, ws_col: 200, ws_xpixel: 0, ws_ypixel: 0 };
            assert_eq!(libc::ioctl(fd, libc::TIOCSWINSZ, &size), 0, "TIOCSWINSZ");
            File::from_raw_fd(fd)
        };
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: `name` is a buffer of the length given.
        let rc = unsafe { libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) };
        assert_eq!(rc, 0, "ptsname_r");
        // SAFETY: ptsname_r wrote a NUL-terminated path into `name`.
        let path =
            unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_str().expect("a UTF-8 path").to_owned();
        let slave =
            File::options().read(true).write(true).open(&path).expect("open the terminal's other end");
        let stdio = || Stdio::from(slave.try_clone().expect("dup the terminal"));
        command.stdin(stdio()).stdout(stdio()).stderr(stdio());
        // SAFETY: setsid and ioctl are async-signal-safe, as a pre_exec hook
        // requires; they make the terminal (the child's stdin) its
        // controlling terminal, so that Ctrl-C typed becomes SIGINT.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("the program starts");
        drop(slave);
        Terminal { master, child, output: String::new(), seen: 0, asked: 0, answers_cursor }
    }

    /// Types `text` (`\r` is Enter, `\t` Tab, `\x03` Ctrl-C, `\x04` Ctrl-D).
    pub fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).expect("write to the terminal");
        self.master.flush().expect("flush the terminal");
    }

    /// Waits until `needle` appears in what the program printed since the
    /// last match, at most `limit`; returns that output up to and including
    /// `needle`, or `None` past the limit (or when the program closed the
    /// terminal).
    pub fn try_expect(&mut self, needle: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(at) = self.output[self.seen..].find(needle) {
                let end = self.seen + at + needle.len();
                let text = self.output[self.seen..end].to_owned();
                self.seen = end;
                return Some(text);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !self.read_some(left) {
                return None;
            }
        }
    }

    /// [`Terminal::try_expect`], failing the test past `limit`.
    pub fn expect(&mut self, needle: &str, limit: Duration) -> String {
        match self.try_expect(needle, limit) {
            Some(text) => text,
            None => panic!(
                "{needle:?} did not appear within {limit:?}; the terminal shows since the last match:\n{}",
                &self.output[self.seen..]
            ),
        }
    }

    /// Reads what is there within `limit`; false when the terminal closed.
    fn read_some(&mut self, limit: Duration) -> bool {
        let mut poll = libc::pollfd { fd: self.master.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX).max(1);
        // SAFETY: one valid pollfd, its count given.
        let ready = unsafe { libc::poll(&mut poll, 1, ms) };
        if ready <= 0 {
            return ready == 0;
        }
        let mut buf = [0u8; 4096];
        match self.master.read(&mut buf) {
            // EIO: the program's side is closed.
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.output.push_str(&String::from_utf8_lossy(&buf[..n]));
                if self.answers_cursor {
                    self.answer_cursor_queries();
                }
                true
            }
        }
    }

    /// Answers each question for the cursor's place printed since the last
    /// answer: the row is the lines printed before it (the last row once
    /// they fill the screen), the column what follows the last line break.
    fn answer_cursor_queries(&mut self) {
        while let Some(at) = self.output[self.asked..].find(CURSOR_QUERY) {
            let at = self.asked + at;
            let before = &self.output[..at];
            let lines = before.matches('\n').count();
            let row = u16::try_from(lines).unwrap_or(u16::MAX).min(ROWS - 1) + 1;
            let line = &before[before.rfind(['\n', '\r']).map_or(0, |i| i + 1)..];
            let column = line.chars().count() + 1;
            self.asked = at + CURSOR_QUERY.len();
            self.send(&format!("\x1b[{row};{column}R"));
        }
    }

    /// Everything the program printed so far.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// Waits for the program to exit, at most `limit`, reading what it
    /// prints meanwhile; past the limit it is killed and the test fails.
    pub fn wait(mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the program did not exit within {limit:?}; it printed:\n{}", self.output);
            }
            self.read_some(Duration::from_millis(50));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // A test that failed midway leaves no program behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
