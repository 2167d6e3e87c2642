//! Running one Slurm command (`scontrol`, `squeue`) with a time limit: the
//! command runs in a process group of its own, and on timeout, or when the
//! recorder stops, that group (the command and anything it started) is
//! killed, so a hung controller never holds the lookup thread for longer
//! than the limit nor outlives the recorder.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a running command's caller looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

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
    /// The caller stopped while it ran; it was killed.
    Stopped,
    /// It could not be started.
    NotStarted(std::io::Error),
}

/// Runs `program args…` with a closed standard input, waiting at most
/// `limit`; on timeout, or once `stop` is set, kills its process group and
/// reaps it.
pub fn run(program: &Path, args: &[&str], limit: Duration, stop: &AtomicBool) -> Ran {
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
    let started = Instant::now();
    let output = loop {
        let left = limit.saturating_sub(started.elapsed());
        match rx.recv_timeout(left.min(STOP_POLL)) {
            Ok(output) => break output,
            Err(mpsc::RecvTimeoutError::Timeout) if left > STOP_POLL && !stop.load(Ordering::Relaxed) => {}
            Err(_) => {
                // The waiter has not reaped the child (it has not
                // answered), so the group id is still this child's.
                kill_group(group);
                // With the group gone its pipes close: the waiter reaps
                // the child and answers.
                let _ = rx.recv();
                return if stop.load(Ordering::Relaxed) { Ran::Stopped } else { Ran::TimedOut };
            }
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

    static GO: AtomicBool = AtomicBool::new(false);

    #[test]
    fn output_and_status() {
        match run(
            Path::new("/bin/sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(10),
            &GO,
        ) {
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
        let ran = run(Path::new("/bin/sh"), &["-c", "sleep 30; echo late"], Duration::from_millis(300), &GO);
        assert!(matches!(ran, Ran::TimedOut), "{ran:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_command_is_killed_when_its_caller_stops() {
        let stop = AtomicBool::new(false);
        let t0 = Instant::now();
        let ran = std::thread::scope(|s| {
            let running =
                s.spawn(|| run(Path::new("/bin/sh"), &["-c", "sleep 30"], Duration::from_secs(60), &stop));
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::Relaxed);
            running.join().expect("joins")
        });
        assert!(matches!(ran, Ran::Stopped), "{ran:?}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let ran = run(Path::new("/nonexistent/scontrol"), &[], Duration::from_secs(1), &GO);
        assert!(matches!(ran, Ran::NotStarted(_)), "{ran:?}");
    }
}
