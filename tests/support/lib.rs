//! Shared helpers of apron's end-to-end tests: the paths of the built
//! binaries and of the fake `libnvidia-ml.so`, built on first use, and the
//! hand-built fleet the cost reports are checked on ([`scenario`]), and
//! what a chart PNG looks like ([`png`]), checks that collect their
//! failures ([`checks`]), a headless browser for the report ([`browser`]),
//! a pseudo-terminal to drive the shell of `apron sql` ([`pty`]), and the
//! offline Kubernetes and Dockerfile tools of the deployment tests ([`k8s`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub mod browser;
pub mod cgroup;
pub mod checks;
pub mod grpc;
pub mod k8s;
pub mod kid;
pub mod png;
pub mod prometheus;
pub mod pty;
pub mod s3;
pub mod scenario;
pub mod spark;

/// The cargo target folder and profile folder this test binary was built in
/// (`target/debug/deps/<test>` → `target`, `debug`).
fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("a test knows its own path");
    exe.parent().and_then(Path::parent).expect("test binaries live in <target>/<profile>/deps").to_path_buf()
}

/// `<target>/tools`: where the tests install the programs they run
/// (SeaweedFS, pyspark) when the machine has none.
fn tools_dir() -> PathBuf {
    target_profile_dir().parent().expect("the profile folder has a parent").join("tools")
}

/// A Python virtual environment of the tests' tools: the Python in
/// `$env_var` when set, else `<target>/tools/NAME/bin/python`, created
/// there with `python3 -m venv` and `pip install PACKAGES` when `ready`
/// (asked of that Python) says it lacks them. `needs` names what for, in
/// the failure's message.
fn venv_python(
    name: &str,
    env_var: &str,
    packages: &[&str],
    ready: impl Fn(&Path) -> bool,
    needs: &str,
) -> PathBuf {
    if let Some(path) = std::env::var_os(env_var) {
        return PathBuf::from(path);
    }
    let venv = tools_dir().join(name);
    let python = venv.join("bin").join("python");
    if !ready(&python) {
        let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
        assert!(made.is_ok_and(|s| s.success()), "python3 -m venv {} failed", venv.display());
        let installed = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
            .args(packages)
            .status();
        assert!(
            installed.is_ok_and(|s| s.success()) && ready(&python),
            "{needs}: pip install {packages:?} into {}, or set {env_var}",
            venv.display()
        );
    }
    python
}

/// Whether `python -c CODE` exits 0.
fn python_runs(python: &Path, code: &str) -> bool {
    Command::new(python).args(["-c", code]).status().is_ok_and(|s| s.success())
}

/// Builds `packages` with the same cargo, target folder and profile as this
/// test binary (a no-op when `cargo test` already built them), and returns
/// the profile folder that holds them.
fn build(packages: &[&str]) -> PathBuf {
    {
        let dir = target_profile_dir();
        let target = dir.parent().expect("profile folder has a parent");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--quiet"]);
        for p in packages {
            cmd.args(["-p", p]);
        }
        cmd.arg("--target-dir").arg(target).current_dir(env!("CARGO_MANIFEST_DIR"));
        // What cargo sets for this test binary (its package's name, version,
        // manifest folder) is not the build's: build scripts that track
        // such variables (ring's) would see them change, and the build
        // would compile them and everything above (rustls, object_store,
        // DataFusion) again, as would the next `cargo test` after it.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy();
            let per_package = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_", "CARGO_BIN_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
                || ["CARGO_PRIMARY_PACKAGE", "CARGO_TARGET_TMPDIR", "CARGO_RUSTC_CURRENT_DIR", "OUT_DIR"]
                    .contains(&name.as_ref());
            if per_package {
                cmd.env_remove(name.as_ref());
            }
        }
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building {packages:?} for the tests failed");
        dir
    }
}

/// Path of a workspace binary (`apron`, `apron-recorder`), built once per
/// test process.
pub fn bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build(&["apron-recorder", "apron-analyze"])).join(name)
}

/// `apron --data DATA --config CONFIG`, with nothing on its standard
/// input: add the command and its arguments.
pub fn apron_over(data: &Path, config: &Path) -> Command {
    let mut command = Command::new(bin("apron"));
    command.arg("--data").arg(data).arg("--config").arg(config).stdin(std::process::Stdio::null());
    command
}

/// Runs `command` with nothing on its standard input and returns what it
/// printed on standard output, failing the test (with both outputs) unless
/// it succeeds.
pub fn stdout_of(command: &mut Command) -> String {
    let out = command.stdin(std::process::Stdio::null()).output().expect("the program runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{command:?}: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Fills `data` with what `apron-recorder simulate` writes for 2 GPUs over
/// one day from `start` (`YYYY-MM-DD`), a sample a minute.
pub fn simulate_two_gpus_a_day(data: &Path, start: &str) {
    stdout_of(
        Command::new(bin("apron-recorder"))
            .args(["simulate", "--gpus", "2", "--days", "1", "--start", start, "--interval", "60s", "--data"])
            .arg(data),
    );
}

/// Path of the fake `libnvidia-ml.so` built from `tests/fake-nvml`.
pub fn fake_nvml() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build(&["fake-nvml"])).join("libfake_nvml.so")
}

/// Every file under `dir`, recursively, sorted; none when `dir` is absent.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.expect("directory entry").path();
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out.sort();
    out
}

/// Waits for the next whole second of the clock. A period ending now
/// (`--last`) ends on a whole second, half-open: a sample taken in the
/// same second as the command runs (the last tick of a recorder stopped a
/// moment before) lies at or past its end and is rightly left out. After
/// this, every sample taken before the call lies inside such a period.
pub fn next_whole_second() {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    std::thread::sleep(
        Duration::from_nanos(u64::from(1_000_000_000 - now.subsec_nanos())) + Duration::from_millis(5),
    );
}

/// Sends `sig` to `child`, a process the test started and has not reaped.
pub fn signal(child: &Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with the pid of a child this test started and has not
    // reaped yet, so the pid cannot name another process.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

/// Waits until process `pid` is stopped (state `T` in `/proc/PID/stat`),
/// as it is after reaching the pause point the test named in
/// `APRON_TEST_PAUSE_AT`; fails the test after `limit`.
pub fn wait_stopped(pid: u32, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process is alive");
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        if state == Some('T') {
            return;
        }
        assert!(t0.elapsed() < limit, "process {pid} did not reach its pause point within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` to exit, at most `limit`; past it the child is killed
/// and the test fails.
pub fn wait_with_timeout(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the recorder did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// The number after `label` in `line` (a report's header line), thousands
/// separators and a leading `$` dropped: in `"Recorded: 1,234.5
/// GPU-hours"`, the number after `"Recorded:"` is 1234.5. `None` when
/// `label` is not there or no number follows it.
pub fn number_after(line: &str, label: &str) -> Option<f64> {
    let rest = &line[line.find(label)? + label.len()..];
    let text: String = rest
        .trim_start()
        .trim_start_matches('$')
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ',')
        .filter(|c| *c != ',')
        .collect();
    text.trim_end_matches('.').parse().ok()
}
