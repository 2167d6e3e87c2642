//! The shipped systemd unit (`recorder/systemd/apron-recorder.service`):
//! `systemd-analyze verify` finds nothing to say about it, and the
//! recorder runs under its socket restriction with `--metrics` and `--ship`
//! to a real S3 server (SeaweedFS): scrapes answer, closed days arrive.
//!
//! Where systemd is absent (a container, CI), `RestrictAddressFamilies=` is
//! played by `tests/restrict_families.py`: a seccomp filter (Debian's
//! `python3-seccomp`) that refuses socket(2) for every other family, as
//! systemd's own filter does. The families are read from the unit file, so
//! the test follows the file. Under `AF_UNIX` alone (the unit before it
//! allowed IP) `--metrics` is refused at start with one line naming the
//! cause, and a failing upload logs its whole cause chain.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::prometheus::{free_port, http_get};
use apron_tests::s3::S3Server;

/// The unit, in the repository.
fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/systemd/apron-recorder.service")
}

/// The Debian Python that has `seccomp` (python3-seccomp), not whatever
/// `python3` is first on PATH.
const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// The address families the unit allows (`RestrictAddressFamilies=`,
/// every such line, an allow-list).
fn unit_families() -> Vec<String> {
    let text = std::fs::read_to_string(unit_path()).expect("the unit reads");
    let families: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("RestrictAddressFamilies="))
        .flat_map(|v| v.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    assert!(!families.is_empty(), "the unit restricts no address family");
    assert!(families.iter().all(|f| f.starts_with("AF_")), "an allow-list of AF_ names: {families:?}");
    families
}

/// `command` run under the socket restriction of `families`.
fn restricted(families: &[String], program: &Path) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("restrict_families.py");
    let mut cmd = Command::new(SYSTEM_PYTHON);
    cmd.arg(script).args(families).arg("--").arg(program);
    cmd
}

/// The recorder under `families`, recording the simulated `gpu-node01`
/// into `data` with `args`, its log in `log`; S3 keys from `env`.
fn recorder(families: &[String], data: &Path, args: &[&str], env: &[(&str, String)], log: &Path) -> Child {
    let mut cmd = restricted(families, &apron_tests::bin("apron-recorder"));
    cmd.arg("--data")
        .arg(data)
        .args(["--source", "sim", "--host", "gpu-node01", "--sim-gpus", "2", "--interval", "500ms"])
        .args(args)
        .env("APRON_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("the log file"));
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    cmd.spawn().expect("the recorder starts")
}

/// Two closed days of `gpu-node01` (2 GPUs, a sample a minute) in `data`:
/// their data files, by path.
fn closed_days(data: &Path) -> Vec<PathBuf> {
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args(["simulate", "--gpus", "2", "--days", "2", "--interval", "60s", "--data"])
        .arg(data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    apron_tests::files_under(data)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `log` holds a line `wanted` accepts; returns it.
fn wait_for_line(log: &Path, limit: Duration, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        if let Some(line) = read(log).lines().find(|l| wanted(l)) {
            return line.to_owned();
        }
        assert!(t0.elapsed() < limit, "no {what} within {limit:?}:\n{}", read(log));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stop(child: Child, log: &Path) -> Output {
    apron_tests::signal(&child, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "the recorder failed:\n{}", read(log));
    out
}

/// `systemd-analyze verify` on the unit, its `ExecStart=` pointed at the
/// binary just built: no warning about any line of it.
#[test]
fn systemd_analyze_verify_finds_nothing_in_the_unit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(unit_path()).expect("the unit reads");
    let binary = apron_tests::bin("apron-recorder");
    assert!(text.contains("ExecStart=/usr/local/bin/apron-recorder "), "{text}");
    let unit = tmp.path().join("apron-recorder.service");
    std::fs::write(&unit, text.replace("/usr/local/bin/apron-recorder", &binary.to_string_lossy()))
        .expect("writes");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze runs (Debian: apt-get install systemd)");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "systemd-analyze verify: {}\n{said}", out.status);
    let about_unit: Vec<&str> = said.lines().filter(|l| l.contains("apron-recorder")).collect();
    assert!(about_unit.is_empty(), "systemd-analyze verify on the unit:\n{said}");
}

/// The filter does what the unit says: a family the unit does not list
/// (netlink, packet) is refused, every listed one is not.
#[test]
fn the_filter_refuses_exactly_the_families_the_unit_does_not_list() {
    let families = unit_families();
    let probe = r#"
import socket, sys
for name in sys.argv[1:]:
    try:
        socket.socket(getattr(socket, name), socket.SOCK_DGRAM if name != "AF_PACKET" else socket.SOCK_RAW).close()
        print(name, "ok")
    except OSError as e:
        print(name, e.errno)
"#;
    let mut cmd = restricted(&families, Path::new(SYSTEM_PYTHON));
    cmd.args(["-c", probe]).args(&families).args(["AF_NETLINK", "AF_PACKET"]);
    let out = apron_tests::stdout_of(&mut cmd);
    for f in &families {
        assert!(out.contains(&format!("{f} ok")), "{f} is refused under the unit's own list:\n{out}");
    }
    if !families.iter().any(|f| f == "AF_NETLINK") {
        assert!(out.contains("AF_NETLINK 97"), "{out}");
    }
    assert!(out.contains("AF_PACKET 97"), "{out}");
}

/// Under the unit's address families, `--metrics` answers and `--ship`
/// ships every closed day to a real S3 server.
#[test]
fn metrics_and_shipping_work_under_the_units_address_families() {
    let families = unit_families();
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let closed = closed_days(&data);
    assert!(!closed.is_empty());
    let log = tmp.path().join("recorder.log");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = recorder(
        &families,
        &data,
        &["--metrics", &addr, "--ship", "s3://apron/unit", "--ship-every", "200ms"],
        &server.env(),
        &log,
    );
    // Every closed file shipped, once the first maintenance compacted them.
    let t0 = Instant::now();
    let shipped = loop {
        let n = read(&log).lines().filter(|l| l.contains("shipped a closed day's file")).count();
        if n >= closed.len() {
            break n;
        }
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("the recorder exited ({status}):\n{}", read(&log));
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "not every closed day shipped:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(200));
    };
    let (status, body) =
        http_get(&addr, "/metrics").unwrap_or_else(|e| panic!("GET /metrics: {e}\n{}", read(&log)));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("apron_recorder_ship_files_total{"), "{body}");
    stop(child, &log);
    assert_eq!(shipped, closed.len(), "{}", read(&log));
    let text = read(&log);
    assert!(!text.contains("cannot ship"), "{text}");
}

/// Under `AF_UNIX` alone: `--metrics` is refused at start with one line
/// that names the address and the cause, and `--ship` logs why each pass
/// fails down to the system's refusal, not only "error sending request".
#[test]
fn without_ip_sockets_each_failure_says_its_cause() {
    let unix_only = vec!["AF_UNIX".to_owned()];
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    closed_days(&data);
    let addr = format!("127.0.0.1:{}", free_port());
    let log = tmp.path().join("metrics.log");
    let child = recorder(&unix_only, &data, &["--metrics", &addr], &[], &log);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    let text = read(&log);
    assert!(!out.status.success(), "{text}");
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    assert!(errors[0].contains(&addr) && errors[0].contains("os error 97"), "{text}");

    // Shipping: the endpoint is a real one; the socket is what fails.
    let server = S3Server::start();
    let log = tmp.path().join("ship.log");
    let child = recorder(
        &unix_only,
        &data,
        &["--ship", "s3://apron/unix", "--ship-every", "200ms"],
        &server.env(),
        &log,
    );
    let line = wait_for_line(&log, Duration::from_secs(90), "failing pass", |l| {
        l.contains("cannot ship closed days")
    });
    stop(child, &log);
    println!("the failing pass says: {line}");
    assert!(line.contains("error sending request"), "{line}");
    assert!(line.contains("os error 97"), "the cause chain ends at the refused socket: {line}");
}
