//! The label allowlist by hand, and the client end to end against
//! `tests/fake-apiserver/fake_apiserver.py` over real TLS, its certificates
//! made by the `openssl` CLI for each test.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apron_store::error_chain::format_chain;
use serde_json::{Value, json};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn keys(list: &[&str]) -> Vec<String> {
    list.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn render_labels_keeps_the_listed_keys_sorted_by_key() {
    let pod = labels(&[
        ("team", "nlp"),
        ("app", "trainer"),
        ("owner", "alice"),
        ("example.com/cost-center", "cc-42"),
        ("pod-template-hash", "7d9f8c6b5"),
    ]);
    let wanted = keys(&["team", "example.com/cost-center", "app", "not-there"]);
    // Sorted bytewise: "app" < "example.com/…" < "team"; owner and the
    // hash are not listed.
    assert_eq!(
        render_labels(&pod, &wanted).as_deref(),
        Some("app=trainer,example.com/cost-center=cc-42,team=nlp")
    );
    assert_eq!(render_labels(&pod, &keys(&["owner"])).as_deref(), Some("owner=alice"));
}

#[test]
fn render_labels_is_none_when_no_listed_key_is_there() {
    let pod = labels(&[("app", "trainer")]);
    assert_eq!(render_labels(&pod, &keys(&["team"])), None);
    assert_eq!(render_labels(&pod, &[]), None);
    assert_eq!(render_labels(&BTreeMap::new(), &keys(&["team"])), None);
}

#[test]
fn render_labels_leaves_out_what_kubernetes_would_refuse() {
    let max_value = "v".repeat(63);
    let long_value = "v".repeat(64);
    let pod = labels(&[
        ("a", "-starts-with-dash"),
        ("b", "has space"),
        ("c", &long_value),
        ("d", "x,e=y"),
        ("e", ""),
        ("f", &max_value),
        ("g", "Mixed.Case_and-dash9"),
        ("h", "ends."),
        ("Example.com/x", "upper-case-prefix"),
        ("example.com/", "no-name"),
        ("a/b/c", "two-slashes"),
    ]);
    let wanted = keys(&["a", "b", "c", "d", "e", "f", "g", "h", "Example.com/x", "example.com/", "a/b/c"]);
    // Kept: e (an empty value is valid), f (63 characters), g.
    let expected = format!("e=,f={max_value},g=Mixed.Case_and-dash9");
    assert_eq!(render_labels(&pod, &wanted), Some(expected));
    // Only refused pairs: none.
    assert_eq!(render_labels(&labels(&[("a", "bad value")]), &keys(&["a"])), None);
}

#[test]
fn parse_label_keys_takes_a_comma_list_trimmed_each_key_once() {
    assert_eq!(
        parse_label_keys(" team , app.kubernetes.io/name,team,Team_2").expect("valid"),
        keys(&["team", "app.kubernetes.io/name", "Team_2"])
    );
    assert_eq!(parse_label_keys("a").expect("valid"), keys(&["a"]));
    let name63 = "n".repeat(63);
    // A prefix of 253 characters: 63 + '.' + 63 + '.' + 63 + '.' + 61.
    let prefix253 = format!("{0}.{0}.{0}.{1}", "p".repeat(63), "p".repeat(61));
    assert_eq!(prefix253.len(), 253);
    let key = format!("{prefix253}/{name63}");
    assert_eq!(parse_label_keys(&key).expect("valid"), vec![key.clone()]);
}

#[test]
fn parse_label_keys_refuses_a_bad_key_naming_it() {
    let refused = |list: &str, named: &str| {
        let error = parse_label_keys(list).expect_err(list);
        assert!(error.contains(named), "{list:?}: {error}");
        assert!(!error.contains('\n'), "one line: {error}");
    };
    refused("team,Bad Key", "\"Bad Key\"");
    refused("team,-team", "\"-team\"");
    refused("a/b/c", "\"a/b/c\"");
    refused("/name", "\"/name\"");
    refused("example.com/", "\"example.com/\"");
    refused("Example.com/team", "\"Example.com/team\"");
    refused("exa_mple.com/team", "\"exa_mple.com/team\"");
    refused("-example.com/team", "\"-example.com/team\"");
    refused("example..com/team", "\"example..com/team\"");
    refused("team=x", "\"team=x\"");
    let name64 = "n".repeat(64);
    refused(&name64, &format!("\"{name64}\""));
    let prefix254 = format!("{0}.{0}.{0}.{1}", "p".repeat(63), "p".repeat(62));
    refused(&format!("{prefix254}/team"), &prefix254);
    refused("team,,app", "empty label key");
    refused("", "empty label key");
    refused("team,", "empty label key");
}

#[test]
fn the_in_cluster_url_follows_client_go() {
    assert_eq!(in_cluster_url(Some("10.96.0.1"), Some("443")).expect("set"), "https://10.96.0.1:443");
    assert_eq!(
        in_cluster_url(Some("fd00:10:96::1"), Some("6443")).expect("set"),
        "https://[fd00:10:96::1]:6443"
    );
    for (host, port, var) in [
        (None, Some("443"), "KUBERNETES_SERVICE_HOST"),
        (Some(""), Some("443"), "KUBERNETES_SERVICE_HOST"),
        (Some("10.96.0.1"), None, "KUBERNETES_SERVICE_PORT"),
        (Some("10.96.0.1"), Some(""), "KUBERNETES_SERVICE_PORT"),
    ] {
        let error = in_cluster_url(host, port).expect_err("missing");
        assert!(matches!(error, ApiServerError::MissingEnv { var: v } if v == var));
        assert!(error.to_string().starts_with(&format!("{var} is not set")), "{error}");
    }
    let base = in_cluster_url(Some("fd00:10:96::1"), Some("6443")).expect("set");
    let url = pod_url(&Url::parse(&base).expect("parses"), "nlp", "trainer-0").expect("valid");
    assert_eq!(
        url.as_str(),
        "https://[fd00:10:96::1]:6443/api/v1/namespaces/nlp/pods/trainer-0?resourceVersion=0"
    );
}

#[test]
fn pod_urls_percent_encode_each_segment() {
    let base = Url::parse("https://10.96.0.1:6443").expect("parses");
    assert_eq!(
        pod_url(&base, "nlp", "trainer-0").expect("valid").as_str(),
        "https://10.96.0.1:6443/api/v1/namespaces/nlp/pods/trainer-0?resourceVersion=0"
    );
    assert_eq!(
        pod_url(&base, "a b", "x?y#z").expect("valid").as_str(),
        "https://10.96.0.1:6443/api/v1/namespaces/a%20b/pods/x%3Fy%23z?resourceVersion=0"
    );
    // A base with a path keeps it (an API server behind a path prefix).
    let prefixed = Url::parse("https://proxy.example/k8s/?q=1").expect("parses");
    assert_eq!(
        pod_url(&prefixed, "nlp", "trainer-0").expect("valid").as_str(),
        "https://proxy.example/k8s/api/v1/namespaces/nlp/pods/trainer-0?resourceVersion=0"
    );
    for (namespace, name) in
        [("", "x"), ("nlp", ""), ("..", "x"), ("nlp", "."), ("nlp", "a/b"), ("n%2F", "x")]
    {
        let error = pod_url(&base, namespace, name).expect_err("refused");
        assert!(matches!(error, ApiServerError::BadName { .. }), "{namespace}/{name}: {error}");
    }
}

#[test]
fn status_details_quote_a_kubernetes_status_message_on_one_line() {
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "pods \"x\" is forbidden: no", "reason": "Forbidden", "code": 403});
    assert_eq!(status_detail(forbidden.to_string().as_bytes()), ": pods \"x\" is forbidden: no");
    let long = json!({"kind": "Status", "message": format!("{}\nsecond line", "é".repeat(195))});
    assert_eq!(status_detail(long.to_string().as_bytes()), format!(": {} seco…", "é".repeat(195)));
    let exact = json!({"kind": "Status", "message": "m".repeat(200)});
    assert_eq!(status_detail(exact.to_string().as_bytes()), format!(": {}", "m".repeat(200)));
    for body in [
        &b"<html>502 Bad Gateway</html>"[..],
        br#"{"kind":"Pod","message":"x"}"#,
        br#"{"kind":"Status"}"#,
        b"",
    ] {
        assert_eq!(status_detail(body), "", "{}", String::from_utf8_lossy(body));
    }
}

/// A service-account folder with `ca` as `ca.crt` and `token` as `token`.
fn service_account(dir: &Path, ca: &Path, token: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let sa = dir.join(format!("sa-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir(&sa).expect("sa folder");
    std::fs::copy(ca, sa.join("ca.crt")).expect("ca.crt");
    std::fs::write(sa.join("token"), token).expect("token");
    sa
}

#[test]
fn new_names_the_file_or_url_that_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let deadline = Duration::from_secs(1);
    let base = "https://127.0.0.1:6443";

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let error = ApiServer::new(base, &empty, deadline).expect_err("no ca.crt");
    assert!(matches!(error, ApiServerError::ReadCa { .. }));
    assert!(error.to_string().contains(&empty.join("ca.crt").display().to_string()), "{error}");

    let sa = service_account(dir.path(), &pki.ca, "t");
    std::fs::write(sa.join("ca.crt"), "not a certificate\n").expect("write");
    let error = ApiServer::new(base, &sa, deadline).expect_err("no PEM");
    assert!(matches!(error, ApiServerError::BadCa { .. }), "{error}");
    assert!(error.to_string().contains("ca.crt holds no PEM certificate"), "{error}");
    std::fs::write(sa.join("ca.crt"), "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n")
        .expect("write");
    let error = ApiServer::new(base, &sa, deadline).expect_err("bad PEM");
    assert!(matches!(error, ApiServerError::BadCa { .. }), "{error}");

    let sa = service_account(dir.path(), &pki.ca, "t");
    std::fs::remove_file(sa.join("token")).expect("rm");
    let error = ApiServer::new(base, &sa, deadline).expect_err("no token");
    assert!(matches!(error, ApiServerError::ReadToken { .. }));
    assert!(error.to_string().contains(&sa.join("token").display().to_string()), "{error}");
    std::fs::write(sa.join("token"), " \n").expect("write");
    let error = ApiServer::new(base, &sa, deadline).expect_err("empty token");
    assert!(error.to_string().ends_with("token is empty"), "{error}");

    let sa = service_account(dir.path(), &pki.ca, "t");
    for url in ["http://127.0.0.1:6443", "127.0.0.1:6443", "https://", "unix:/run/x.sock"] {
        let error = ApiServer::new(url, &sa, deadline).expect_err(url);
        assert!(matches!(error, ApiServerError::BadUrl { .. }), "{url}: {error}");
    }
    let api = ApiServer::new(base, &sa, deadline).expect("valid");
    std::fs::write(sa.join("token"), "s3cr3t-token").expect("write");
    let api = ApiServer { token_reread: Duration::ZERO, ..api };
    api.token(false).expect("reads it");
    assert!(!format!("{api:?}").contains("s3cr3t"), "the token is not printed");
}

/// A throwaway CA, a server certificate for `IP:127.0.0.1` it signs, and
/// another CA that signs nothing here.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    other_ca: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let path = |name: &str| dir.join(name);
        let openssl = |args: &[&OsStr]| {
            let out = Command::new("openssl").args(args).stdin(Stdio::null()).output().expect("openssl runs");
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"];
        let ec: Vec<&OsStr> = ec.iter().map(OsStr::new).collect();
        for (name, cn) in [("ca", "/CN=apron-test-ca"), ("other-ca", "/CN=apron-other-ca")] {
            let (crt, key) = (path(&format!("{name}.crt")), path(&format!("{name}.key")));
            let mut args: Vec<&OsStr> = vec![OsStr::new("req"), OsStr::new("-x509")];
            args.extend(&ec);
            args.extend([OsStr::new("-subj"), OsStr::new(cn), OsStr::new("-keyout"), key.as_os_str()]);
            args.extend([OsStr::new("-out"), crt.as_os_str()]);
            openssl(&args);
        }
        let (ca, ca_key) = (path("ca.crt"), path("ca.key"));
        let (cert, key) = (path("server.crt"), path("server.key"));
        let mut args: Vec<&OsStr> = vec![OsStr::new("req"), OsStr::new("-x509")];
        args.extend(&ec);
        args.extend(
            [
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-addext",
                "basicConstraints=critical,CA:FALSE",
                "-addext",
                "extendedKeyUsage=serverAuth",
            ]
            .map(OsStr::new),
        );
        args.extend([OsStr::new("-CA"), ca.as_os_str(), OsStr::new("-CAkey"), ca_key.as_os_str()]);
        args.extend([OsStr::new("-keyout"), key.as_os_str(), OsStr::new("-out"), cert.as_os_str()]);
        openssl(&args);
        Pki { ca, server_cert: cert, server_key: key, other_ca: path("other-ca.crt") }
    }
}

/// The token the stand-in expects.
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.test-token";

/// `tests/fake-apiserver/fake_apiserver.py`, killed when dropped.
struct FakeApiServer {
    child: Child,
    port: u16,
    pods: PathBuf,
    log: PathBuf,
}

impl FakeApiServer {
    fn start(dir: &Path, pki: &Pki, pods: &Value, forbid: &[&str]) -> FakeApiServer {
        let (pods_json, log, port_file) = (dir.join("pods.json"), dir.join("requests.log"), dir.join("port"));
        std::fs::write(&pods_json, pods.to_string()).expect("pods.json");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fake-apiserver/fake_apiserver.py");
        let mut command = Command::new("python3");
        command.arg(script).arg("--port-file").arg(&port_file).arg("--cert").arg(&pki.server_cert);
        command.arg("--key").arg(&pki.server_key).args(["--token", TOKEN]).arg("--pods").arg(&pods_json);
        command.arg("--log").arg(&log);
        for ns in forbid {
            command.args(["--forbid", ns]);
        }
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect("python3 starts");
        let mut server = FakeApiServer { child, port: 0, pods: pods_json, log };
        let started = Instant::now();
        server.port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().expect("a port");
            }
            if let Some(status) = server.child.try_wait().expect("wait") {
                panic!("the fake API server exited: {status}");
            }
            assert!(started.elapsed() < Duration::from_secs(20), "the fake API server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        server
    }

    fn base(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// `METHOD PATH STATUS` of each request it answered.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_owned).collect()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn pods() -> Value {
    json!([
        {"namespace": "nlp", "name": "trainer-0", "uid": "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
         "labels": {"team": "nlp", "app.kubernetes.io/name": "trainer", "owner": "alice"}},
        {"namespace": "nlp", "name": "bare", "uid": "7b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e"},
        {"namespace": "odd ns", "name": "x?y", "uid": "u-odd", "labels": {"team": "odd"}},
        {"namespace": "secret", "name": "db-0", "uid": "u-db", "labels": {"team": "db"}},
    ])
}

const PATH_TRAINER: &str = "/api/v1/namespaces/nlp/pods/trainer-0?resourceVersion=0";

#[test]
fn a_pods_uid_and_labels_come_back_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &[]);
    let api = ApiServer::new(&server.base(), &service_account(dir.path(), &pki.ca, TOKEN), LABELS_DEADLINE)
        .expect("client");
    let rt = runtime();
    let pod = rt.block_on(api.pod("nlp", "trainer-0")).expect("found");
    assert_eq!(
        pod,
        PodMeta {
            uid: "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d".into(),
            labels: labels(&[("team", "nlp"), ("app.kubernetes.io/name", "trainer"), ("owner", "alice")]),
        }
    );
    assert_eq!(
        render_labels(&pod.labels, &parse_label_keys("team,app.kubernetes.io/name").expect("valid"))
            .as_deref(),
        Some("app.kubernetes.io/name=trainer,team=nlp")
    );
    // No labels: the pod's JSON has no `labels` at all.
    let bare = rt.block_on(api.pod("nlp", "bare")).expect("found");
    assert_eq!(bare, PodMeta { uid: "7b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e".into(), labels: BTreeMap::new() });
    // Segments are percent-encoded, and decoded by the server.
    assert_eq!(rt.block_on(api.pod("odd ns", "x?y")).expect("found").uid, "u-odd");
    // The pods are read at every request: a label changed is seen.
    let mut changed = pods();
    changed[0]["labels"]["team"] = json!("vision");
    std::fs::write(&server.pods, changed.to_string()).expect("rewrite pods");
    let pod = rt.block_on(api.pod("nlp", "trainer-0")).expect("found");
    assert_eq!(pod.labels.get("team").map(String::as_str), Some("vision"));
    // A clone shares the client.
    assert_eq!(rt.block_on(api.clone().pod("nlp", "bare")).expect("found"), bare);
    assert_eq!(
        server.requests(),
        [
            format!("GET {PATH_TRAINER} 200"),
            "GET /api/v1/namespaces/nlp/pods/bare?resourceVersion=0 200".to_owned(),
            "GET /api/v1/namespaces/odd%20ns/pods/x%3Fy?resourceVersion=0 200".to_owned(),
            format!("GET {PATH_TRAINER} 200"),
            "GET /api/v1/namespaces/nlp/pods/bare?resourceVersion=0 200".to_owned(),
        ]
    );
}

#[test]
fn a_wrong_token_is_a_401_naming_the_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &[]);
    let api = ApiServer::new(&server.base(), &service_account(dir.path(), &pki.ca, "wrong"), LABELS_DEADLINE)
        .expect("client");
    let error = runtime().block_on(api.pod("nlp", "trainer-0")).expect_err("refused");
    assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED));
    assert_eq!(
        error.to_string(),
        "the API server answered 401 Unauthorized for pod nlp/trainer-0: Unauthorized"
    );
    // Re-read after the 401, still the same: not sent again.
    assert_eq!(server.requests(), [format!("GET {PATH_TRAINER} 401")]);
}

#[test]
fn a_401_reads_the_token_file_again_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &[]);
    let rt = runtime();

    // Refused; the right token written; the next lookup reads it, though
    // the last read was just now.
    let sa = service_account(dir.path(), &pki.ca, "wrong");
    let api = ApiServer::new(&server.base(), &sa, LABELS_DEADLINE).expect("client");
    let error = rt.block_on(api.pod("nlp", "trainer-0")).expect_err("refused");
    assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED));
    std::fs::write(sa.join("token"), format!("{TOKEN}\n")).expect("rotate");
    rt.block_on(api.pod("nlp", "trainer-0")).expect("the new token");

    // The token rotated since it was read: the lookup is refused once and
    // made again with the file's new token, all in one call.
    let sa = service_account(dir.path(), &pki.ca, "old");
    let api = ApiServer::new(&server.base(), &sa, LABELS_DEADLINE).expect("client");
    std::fs::write(sa.join("token"), TOKEN).expect("rotate");
    rt.block_on(api.pod("nlp", "trainer-0")).expect("made again");
    assert_eq!(server.requests(), [401, 200, 401, 200].map(|status| format!("GET {PATH_TRAINER} {status}")));
}

#[test]
fn the_token_file_is_read_again_only_after_the_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &[]);
    let rt = runtime();
    let sa = service_account(dir.path(), &pki.ca, TOKEN);
    let mut api = ApiServer::new(&server.base(), &sa, LABELS_DEADLINE).expect("client");
    assert_eq!(api.token_reread, Duration::from_secs(60));
    rt.block_on(api.pod("nlp", "trainer-0")).expect("found");
    std::fs::write(sa.join("token"), "revoked").expect("write");
    // Within the minute: the token read at the start still serves.
    rt.block_on(api.pod("nlp", "trainer-0")).expect("the token read before");
    // The minute past: the file's token is sent (and refused).
    api.token_reread = Duration::ZERO;
    let error = rt.block_on(api.pod("nlp", "trainer-0")).expect_err("the file's token");
    assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED));
    assert_eq!(server.requests(), [200, 200, 401].map(|status| format!("GET {PATH_TRAINER} {status}")));
}

#[test]
fn forbidden_and_unknown_pods_name_the_status_and_the_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &["secret"]);
    let api = ApiServer::new(&server.base(), &service_account(dir.path(), &pki.ca, TOKEN), LABELS_DEADLINE)
        .expect("client");
    let rt = runtime();

    let error = rt.block_on(api.pod("secret", "db-0")).expect_err("forbidden");
    assert_eq!(error.status(), Some(StatusCode::FORBIDDEN));
    assert_eq!(
        error.to_string(),
        "the API server answered 403 Forbidden for pod secret/db-0: pods \"db-0\" is forbidden: User \
         \"system:serviceaccount:apron:apron-recorder\" cannot get resource \"pods\" in API group \"\" in \
         the namespace \"secret\""
    );

    let error = rt.block_on(api.pod("nlp", "gone-0")).expect_err("unknown");
    assert_eq!(error.status(), Some(StatusCode::NOT_FOUND));
    assert_eq!(
        error.to_string(),
        "the API server answered 404 Not Found for pod nlp/gone-0: pods \"gone-0\" not found"
    );
    assert_eq!(
        server.requests(),
        [
            "GET /api/v1/namespaces/secret/pods/db-0?resourceVersion=0 403",
            "GET /api/v1/namespaces/nlp/pods/gone-0?resourceVersion=0 404"
        ]
    );
}

#[test]
fn a_server_the_ca_did_not_sign_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let server = FakeApiServer::start(dir.path(), &pki, &pods(), &[]);
    let api =
        ApiServer::new(&server.base(), &service_account(dir.path(), &pki.other_ca, TOKEN), LABELS_DEADLINE)
            .expect("client");
    let error = runtime().block_on(api.pod("nlp", "trainer-0")).expect_err("untrusted");
    assert!(matches!(error, ApiServerError::Request { .. }), "{error:?}");
    let text = format_chain(&error);
    assert!(
        text.starts_with(&format!("cannot get pod nlp/trainer-0 from the API server at {}", server.base()))
    );
    assert!(text.contains("invalid peer certificate: UnknownIssuer"), "{text}");
    // No request reached it, so no token either.
    assert_eq!(server.requests(), Vec::<String>::new());
}

#[test]
fn an_answer_over_a_mebibyte_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let huge = json!([{"namespace": "nlp", "name": "huge", "uid": "u-huge", "labels": {"blob": "x".repeat(MAX_BODY)}}]);
    let server = FakeApiServer::start(dir.path(), &pki, &huge, &[]);
    let api = ApiServer::new(&server.base(), &service_account(dir.path(), &pki.ca, TOKEN), LABELS_DEADLINE)
        .expect("client");
    let error = runtime().block_on(api.pod("nlp", "huge")).expect_err("too large");
    assert_eq!(error.to_string(), "the API server's answer for pod nlp/huge is over 1048576 bytes");
}

#[test]
fn a_silent_server_times_out_and_a_closed_port_is_a_connection_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = Pki::new(dir.path());
    let sa = service_account(dir.path(), &pki.ca, TOKEN);
    let rt = runtime();
    // Listening, never accepting: the TLS handshake never ends.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("port").port();
    let deadline = Duration::from_millis(300);
    let api = ApiServer::new(&format!("https://127.0.0.1:{port}"), &sa, deadline).expect("client");
    let started = Instant::now();
    let error = rt.block_on(api.pod("nlp", "trainer-0")).expect_err("no answer");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(error.to_string(), "the API server did not answer for pod nlp/trainer-0 within 300ms");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("port").port();
    drop(closed);
    let api = ApiServer::new(&format!("https://127.0.0.1:{port}"), &sa, deadline).expect("client");
    let error = rt.block_on(api.pod("nlp", "trainer-0")).expect_err("refused");
    assert!(matches!(error, ApiServerError::Request { .. }), "{error:?}");
    assert!(format_chain(&error).contains("onnection refused"), "{}", format_chain(&error));
}
