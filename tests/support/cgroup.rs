//! Real cgroups for the tests of process identity: a test makes a cgroup at
//! a path a kubelet, Slurm or a user would make, moves one of its child
//! processes into it, and the recorder (and `apron zombies --commands`'
//! script) read `/proc/PID/cgroup` as they would on a cluster node.
//!
//! The tests run as root (as `.ci/run` does) on a host with a writable
//! cgroup hierarchy: a cgroup v1 hierarchy (the `pids` one) where mounted,
//! else cgroup v2's. Without one the test fails and says why: it cannot
//! check what it exists for.

use std::path::{Path, PathBuf};

/// The mounted hierarchy cgroups are made in.
fn hierarchy() -> PathBuf {
    for root in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
        let root = Path::new(root);
        if root.join("cgroup.procs").exists() {
            return root.to_path_buf();
        }
    }
    panic!("no cgroup hierarchy under /sys/fs/cgroup: this test needs one it can write (as root)")
}

/// A cgroup made for a test, removed when dropped (its processes moved
/// back to the hierarchy's root first).
#[derive(Debug)]
pub struct Cgroup {
    root: PathBuf,
    /// The path as `/proc/PID/cgroup` shows it, e.g. `/kubepods/besteffort/pod…`.
    path: String,
    /// Folders made, outermost first.
    made: Vec<PathBuf>,
}

impl Cgroup {
    /// Makes the cgroup `path` (and its parents) and moves `pid` into it;
    /// checks that `/proc/PID/cgroup` then shows it.
    pub fn enter(path: &str, pid: u32) -> Cgroup {
        let root = hierarchy();
        let mut made = Vec::new();
        let mut dir = root.clone();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            dir.push(part);
            // Another test may make the same parent at the same moment:
            // then it is that test's to remove.
            match std::fs::create_dir(&dir) {
                Ok(()) => made.push(dir.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => panic!(
                    "cannot make cgroup {} ({e}): this test needs root and a writable cgroup hierarchy",
                    dir.display()
                ),
            }
        }
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("cannot move pid {pid} into {}: {e}", dir.display()));
        let shown = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroup file");
        assert!(
            shown.lines().any(|l| l.ends_with(&format!(":{path}"))),
            "pid {pid} is not shown in {path}:\n{shown}"
        );
        Cgroup { root, path: path.to_owned(), made }
    }

    /// The path, as `/proc/PID/cgroup` shows it.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for dir in self.made.iter().rev() {
            if let Ok(pids) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                for pid in pids.lines() {
                    let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
                }
            }
            // A process that just exited may hold it a moment longer.
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}
