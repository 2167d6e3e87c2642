//! End to end: credentials written into a URL are used and never shown.
//!
//! - `apron import prometheus --url http://user:password@…`: the server
//!   gets them (basic authentication), and neither the success line nor
//!   any error (server down, password refused) prints them.
//! - `apron --data s3://KEY:SECRET@BUCKET/…` (the S3 client takes its keys
//!   from the AWS environment, not from the URL) and an `AWS_ENDPOINT_URL`
//!   with credentials: a report's header, its `index.html` and
//!   `summary.md`, `apron config`'s JSON, `apron-recorder ship`'s lines and
//!   every error show the URL as `s3://***@BUCKET/…`.
//!
//! The Prometheus server is a small one of the test's own (127.0.0.1),
//! answering `query_range` with one GPU's series; the S3 server is
//! SeaweedFS, as in `tests/it/ship.rs`.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use apron_tests::s3::S3Server;

/// The password in every URL of these tests, which no output may hold.
const PASSWORD: &str = "s3cr3t-pa55";

/// `Authorization` of `scraper:s3cr3t-pa55` (base64, worked out apart).
const BASIC: &str = "Basic c2NyYXBlcjpzM2NyM3QtcGE1NQ==";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// What a run printed, both streams, for the checks that nothing shows a
/// secret.
fn printed(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// A Prometheus HTTP API that answers `query_range` for
/// `DCGM_FI_DEV_GPU_UTIL` with one GPU at 50% at `at` (seconds), every
/// other series with nothing, and 401 to a request without [`BASIC`]. It
/// keeps the `Authorization` header of each request.
struct FakePrometheus {
    port: u16,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl FakePrometheus {
    fn start(at: i64) -> FakePrometheus {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&authorizations);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                answer(stream, at, &seen);
            }
        });
        FakePrometheus { port, authorizations }
    }

    /// The server's URL with the user `scraper` and [`PASSWORD`] in it.
    fn url(&self, password: &str) -> String {
        format!("http://scraper:{password}@127.0.0.1:{}", self.port)
    }
}

fn answer(stream: TcpStream, at: i64, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone the stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut authorization = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = value.trim().to_owned();
        }
    }
    seen.lock().expect("the list").push(authorization.clone());
    let (status, body) = if authorization != BASIC {
        ("401 Unauthorized", "Unauthorized\n".to_owned())
    } else if request_line.contains("DCGM_FI_DEV_GPU_UTIL") {
        let series = format!(
            r#"{{"metric":{{"Hostname":"node-s","gpu":"0","UUID":"GPU-S0","modelName":"NVIDIA H100 80GB HBM3"}},"values":[[{at},"50"]]}}"#
        );
        ("200 OK", format!(r#"{{"status":"success","data":{{"resultType":"matrix","result":[{series}]}}}}"#))
    } else {
        ("200 OK", r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.to_owned())
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// `apron --data DATA import prometheus --url URL` over one minute.
fn import(data: &Path, url: &str) -> Output {
    Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(data)
        .args(["import", "prometheus", "--url", url])
        .args(["--from", "2026-11-02T07:00:00Z", "--to", "2026-11-02T07:01:00Z", "--step", "1m"])
        .env_remove("APRON_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs")
}

#[test]
fn a_prometheus_password_is_sent_and_never_printed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // 2026-11-02T07:01:00Z, the end of the one step.
    let server = FakePrometheus::start(1_793_602_860);

    let out = import(&data, &server.url(PASSWORD));
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    let shown = format!("http://***@127.0.0.1:{}", server.port);
    assert!(
        text(&out.stdout).starts_with(&format!("imported {shown}: host node-s: 1 gpu_samples rows")),
        "{said}"
    );
    assert!(!said.contains(PASSWORD) && !said.contains("scraper"), "{said}");
    let sent = server.authorizations.lock().expect("the list").clone();
    assert!(
        !sent.is_empty() && sent.iter().all(|a| a == BASIC),
        "the credentials reach the server: {sent:?}"
    );

    // Refused by the server, and no server at all: one line each, no password.
    let closed = TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    for (url, shown) in [
        (server.url("wrong-pa55"), format!("http://***@127.0.0.1:{}/api/v1/query_range", server.port)),
        (
            format!("http://scraper:{PASSWORD}@127.0.0.1:{closed}"),
            format!("http://***@127.0.0.1:{closed}/api/v1/query_range"),
        ),
    ] {
        let out = import(&data, &url);
        let said = printed(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(&format!("error: cannot query {shown}: ")), "{stderr}");
        assert!(!said.contains(PASSWORD) && !said.contains("wrong-pa55"), "{said}");
    }
}

/// The environment `apron` and `apron-recorder` reach `server` with, and
/// nothing else of AWS's.
fn aws(command: &mut Command, env: &[(&str, String)]) {
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        command.env_remove(key);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    command.env_remove("APRON_LOG").stdin(Stdio::null());
}

#[test]
fn bucket_credentials_in_a_url_never_reach_a_header_a_page_or_an_error() {
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args([
            "simulate",
            "--gpus",
            "2",
            "--days",
            "1",
            "--start",
            "2026-10-01",
            "--interval",
            "60s",
            "--data",
        ])
        .arg(&data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", printed(&out));
    // What a person might type: the keys in the URL (which the S3 client
    // does not use), the keys it uses in the environment.
    let url = format!("s3://AKIAEXAMPLEKEY:{PASSWORD}@apron/fleet/secret");
    let shown = "s3://***@apron/fleet/secret";
    let env = server.env();

    let mut ship = Command::new(apron_tests::bin("apron-recorder"));
    ship.arg("--data").arg(&data).args(["ship", "--to", &url]);
    aws(&mut ship, &env);
    let out = ship.output().expect("ship runs");
    let said = printed(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("files shipped") && said.contains("to s3://apron/fleet/secret"), "{said}");
    assert!(!said.contains(PASSWORD) && !said.contains("AKIAEXAMPLEKEY"), "{said}");

    let apron = |args: &[&str], env: &[(&str, String)]| {
        let mut command = Command::new(apron_tests::bin("apron"));
        command.args(["--data", &url]).args(args);
        aws(&mut command, env);
        let out = command.output().expect("apron runs");
        let said = printed(&out);
        assert!(!said.contains(PASSWORD) && !said.contains("AKIAEXAMPLEKEY"), "{args:?}: {said}");
        out
    };
    // The header of a report.
    let out = apron(&["spend", "--month", "2026-10"], &env);
    assert!(out.status.success(), "{}", printed(&out));
    let header = text(&out.stdout);
    assert!(header.contains(&format!("Data:     {shown}: 2 GPUs")), "{header}");
    // The report's page and summary.
    let report = tmp.path().join("report");
    let out = apron(&["report", "--month", "2026-10", "--out", report.to_str().expect("UTF-8")], &env);
    assert!(out.status.success(), "{}", printed(&out));
    // Markdown escapes the stars (it shows `***`).
    for (name, shown) in [("index.html", shown), ("summary.md", r"s3://\*\*\*@apron/fleet/secret")] {
        let page = std::fs::read_to_string(report.join(name)).expect("read");
        assert!(page.contains(shown), "{name} names the data as {shown}");
        assert!(!page.contains(PASSWORD) && !page.contains("AKIAEXAMPLEKEY"), "{name}");
    }
    for file in apron_tests::files_under(&report) {
        let bytes = std::fs::read(&file).expect("read");
        assert!(!bytes.windows(PASSWORD.len()).any(|w| w == PASSWORD.as_bytes()), "{}", file.display());
    }
    // `apron config`'s JSON.
    let out = apron(&["--format", "json", "config", "--month", "2026-10"], &env);
    assert!(out.status.success(), "{}", printed(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["unpriced"]["data"].as_str(), Some(shown), "{json}");

    // Errors: a bucket that is not there; an endpoint with credentials of
    // its own, not answering.
    let closed = TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let mut endpoint = env.clone();
    for (key, value) in &mut endpoint {
        if *key == "AWS_ENDPOINT_URL" {
            *value = format!("http://endpoint-user:{PASSWORD}@127.0.0.1:{closed}");
        }
    }
    for env in [env.clone(), endpoint] {
        let mut command = Command::new(apron_tests::bin("apron"));
        let missing = format!("s3://AKIAEXAMPLEKEY:{PASSWORD}@no-such-bucket/x");
        let data = if env.iter().any(|(_, v)| v.contains(PASSWORD)) { url.clone() } else { missing };
        command.args(["--data", &data, "spend", "--month", "2026-10"]);
        aws(&mut command, &env);
        let out = command.output().expect("apron runs");
        let said = printed(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert_eq!(text(&out.stderr).lines().count(), 1, "{said}");
        assert!(!said.contains(PASSWORD) && !said.contains("AKIAEXAMPLEKEY"), "{said}");
        assert!(!said.contains("endpoint-user"), "{said}");
    }
}
