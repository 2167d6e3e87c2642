//! A real child process for the identity tests: `PROGRAM 600` with exactly
//! the environment given (the tests read it back from `/proc/PID/environ`),
//! killed when dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process, killed when dropped if still running.
#[derive(Debug)]
pub struct Kid(Child);

impl Kid {
    /// Starts `program 600` with only `env`, and waits until the kernel has
    /// laid that environment out.
    pub fn spawn(program: &Path, env: &[(&str, &str)]) -> Kid {
        let child = Command::new(program)
            .arg("600")
            .env_clear()
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a child");
        // The kernel lays out the environment a moment after exec.
        let environ = format!("/proc/{}/environ", child.id());
        let t0 = Instant::now();
        while !env.is_empty() && std::fs::read(&environ).map_or(true, |e| e.is_empty()) {
            assert!(t0.elapsed() < Duration::from_secs(5), "{environ} stays empty");
            std::thread::sleep(Duration::from_millis(1));
        }
        Kid(child)
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Its exit status, once it has ended.
    pub fn ended(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().expect("try_wait")
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
