//! A real Prometheus for the tests: `promtool` to check what `/metrics`
//! serves and to build a storage from known series, and a `prometheus`
//! server on 127.0.0.1 queried through its HTTP API.
//!
//! Both programs come from `$APRON_TEST_PROMETHEUS_DIR` (a folder holding
//! `prometheus` and `promtool`), else from `PATH`, else from
//! `<target>/tools/prometheus/usr/bin`, where Debian's `prometheus` package is
//! unpacked on first use (`apt-get download prometheus`, `dpkg-deb -x`;
//! `.ci/run` does it beforehand).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The two programs of the `prometheus` package.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The server.
    pub prometheus: PathBuf,
    /// Its command-line tool (`check metrics`, `tsdb create-blocks-from`).
    pub promtool: PathBuf,
}

/// `prometheus` and `promtool`, unpacked on first use when the machine has none.
pub fn programs() -> &'static Programs {
    static PROGRAMS: OnceLock<Programs> = OnceLock::new();
    PROGRAMS.get_or_init(|| {
        let in_dir = |dir: &Path| Programs { prometheus: dir.join("prometheus"), promtool: dir.join("promtool") };
        let runs = |p: &Programs| {
            [&p.prometheus, &p.promtool].iter().all(|bin| {
                Command::new(bin)
                    .arg("--version")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success())
            })
        };
        if let Some(dir) = std::env::var_os("APRON_TEST_PROMETHEUS_DIR") {
            let p = in_dir(Path::new(&dir));
            assert!(runs(&p), "APRON_TEST_PROMETHEUS_DIR={} holds no runnable prometheus and promtool", p.prometheus.display());
            return p;
        }
        let on_path = Programs { prometheus: "prometheus".into(), promtool: "promtool".into() };
        if runs(&on_path) {
            return on_path;
        }
        let root = super::tools_dir().join("prometheus");
        let unpacked = in_dir(&root.join("usr").join("bin"));
        if !runs(&unpacked) {
            unpack(&root);
            assert!(
                runs(&unpacked),
                "the Prometheus tests need prometheus and promtool: `apt-get download prometheus` and `dpkg-deb -x` it into {}, or set APRON_TEST_PROMETHEUS_DIR",
                root.display()
            );
        }
        unpacked
    })
}

/// Downloads Debian's `prometheus` package and unpacks it under `root`
/// (nothing is installed system-wide).
fn unpack(root: &Path) {
    let download = tempfile::tempdir().expect("a temporary folder");
    let get = || {
        Command::new("apt-get")
            .args(["download", "-qq", "prometheus"])
            .current_dir(download.path())
            .status()
            .is_ok_and(|s| s.success())
    };
    // A fresh machine may not have the package lists yet.
    if !get() {
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        assert!(get(), "apt-get download prometheus failed");
    }
    let deb = std::fs::read_dir(download.path())
        .expect("the download folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .expect("apt-get download left a .deb");
    std::fs::create_dir_all(root).expect("the tools folder");
    let status = Command::new("dpkg-deb").arg("-x").arg(&deb).arg(root).status();
    assert!(status.is_ok_and(|s| s.success()), "dpkg-deb -x {} failed", deb.display());
}

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address").port()
}

/// A `prometheus` server on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct Server {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Server {
    /// Starts a server with `config` (prometheus.yml's text) over the
    /// storage in `storage` (a fresh folder when `None`), and waits until it
    /// is ready.
    pub fn start(config: &str, storage: Option<&Path>) -> Server {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("write prometheus.yml");
        let storage = storage.map_or_else(|| dir.path().join("data"), Path::to_path_buf);
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("the log file");
        let child = Command::new(&programs().prometheus)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", storage.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // Blocks built by promtool lie in the past: keep them.
            .arg("--storage.tsdb.retention.time=100y")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let server = Server { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if server.get("/-/ready").is_ok_and(|(status, _)| status == 200) {
                return server;
            }
            assert!(Instant::now() < deadline, "prometheus was not ready within 60 s: {}", server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` (already encoded): the status code and the body.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        http_get(&self.addr(), path)
    }

    /// `GET /api/v1/<endpoint>?<params>` (values encoded here), answered
    /// with status `success`: the `data` object.
    pub fn api(&self, endpoint: &str, params: &[(&str, &str)]) -> serde_json::Value {
        let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        let path = format!("/api/v1/{endpoint}?{}", query.join("&"));
        let (status, body) = self.get(&path).unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let json: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"));
        assert!(status == 200 && json["status"] == "success", "GET {path}: {status} {body}");
        json["data"].clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` from `addr` over HTTP/1.0 (the answer is the whole body, up
/// to the connection's close): the status code and the body.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, body.to_owned()))
}

/// Percent-encodes a query parameter's value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
