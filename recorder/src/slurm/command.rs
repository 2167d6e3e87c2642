//! Running one Slurm command (`scontrol`, `squeue`) with a time limit: the
//! command runs in a process group of its own, and on timeout that group
//! (the command and anything it started) is killed, so a hung controller
//! never holds the lookup thread for longer than the limit.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How a command ended.
#[derive(Debug)]
pub enum Ran {
    /// It exited (with any status) within the limit.
    Exited {
        /// Whether it exited with status 0.
        success: bool,
        /// Its standard output, decoded lossily.
        stdout: String,
        /// Its standard error, decoded lossily.
        stderr: String,
    },
    /// It ran past the limit and was killed.
    TimedOut,
    /// It could not be started.
    NotStarted(std::io::Error),
}

/// Runs `program args…` with a closed standard input, waiting at most
/// `limit`; on timeout kills its process group and reaps it.
pub fn run(program: &Path, args: &[&str], limit: Duration) -> Ran {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(e) => return Ran::NotStarted(e),
    };
    let group = child.id();
    let (tx, rx) = mpsc::channel();
    // The waiting (and reading both pipes to their end) happens on a thread
    // of its own, so this one can give up on time.
    let waiter = std::thread::Builder::new().name("slurm-cmd".into()).spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    if let Err(e) = waiter {
        // Without the waiter the child cannot be waited for: end it here.
        kill_group(group);
        return Ran::NotStarted(e);
    }
    let output = match rx.recv_timeout(limit) {
        Ok(output) => output,
        Err(_) => {
            // The waiter has not reaped the child (it has not answered),
            // so the group id is still this child's.
            kill_group(group);
            // With the group gone its pipes close: the waiter reaps the
            // child and answers.
            let _ = rx.recv();
            return Ran::TimedOut;
        }
    };
    match output {
        Ok(out) => Ran::Exited {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Err(e) => Ran::NotStarted(e),
    }
}

/// Kills the process group `group` (made for one child by [`run`]).
fn kill_group(group: u32) {
    if let Ok(pid) = i32::try_from(group) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn output_and_status() {
        match run(Path::new("/bin/sh"), &["-c", "echo out; echo err >&2; exit 3"], Duration::from_secs(10)) {
            Ran::Exited { success, stdout, stderr } => {
                assert!(!success);
                assert_eq!((stdout.as_str(), stderr.as_str()), ("out\n", "err\n"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_slow_command_and_its_children_are_killed_on_time() {
        let t0 = Instant::now();
        // The shell's child `sleep` holds the pipes too: the whole group goes.
        let ran = run(Path::new("/bin/sh"), &["-c", "sleep 30; echo late"], Duration::from_millis(300));
        assert!(matches!(ran, Ran::TimedOut), "{ran:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let ran = run(Path::new("/nonexistent/scontrol"), &[], Duration::from_secs(1));
        assert!(matches!(ran, Ran::NotStarted(_)), "{ran:?}");
    }
}
