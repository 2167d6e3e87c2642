//! [`Outcome`]: how a command that succeeded wants the process to end. The
//! commands return it and `main` turns it into an exit code; it imports
//! none of them.

/// How a command that succeeded wants the process to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0.
    Done,
    /// `apron alerts` found rules firing: exit code 1.
    AlertsFired,
}
