//! `apron-recorder ship` against a real S3-protocol server (SeaweedFS,
//! started by the test on 127.0.0.1, checking request signatures): the
//! bucket ends up holding the closed days byte for byte under the same
//! keys, so it is an apron data folder (the same `apron spend` from a copy
//! of it); shipping again uploads nothing; an object a partition no longer
//! has is removed; a store that refuses or cannot be reached is one line
//! naming the URL, exit 2, within seconds.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use std::sync::Arc;

use apron_tests::s3::S3Server;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

fn simulate(data: &Path) {
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args([
            "simulate",
            "--gpus",
            "16",
            "--days",
            "2",
            "--start",
            "2026-10-01",
            "--interval",
            "10s",
            "--data",
        ])
        .arg(data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn ship(data: &Path, url: &str, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(apron_tests::bin("apron-recorder"));
    cmd.arg("--data").arg(data).args(["ship", "--to", url]);
    // Only what the test gives: no credential chain probing the network.
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        cmd.env_remove(key);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("ship runs")
}

/// The data files under `dir`, by path relative to it.
fn data_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<_> = apron_tests::files_under(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p| (p.strip_prefix(dir).expect("under dir").to_string_lossy().into_owned(), p))
        .collect();
    out.sort();
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime")
}

/// A client of the server's bucket of its own (not apron's), with the
/// server's keys.
fn client(server: &S3Server) -> Arc<dyn ObjectStore> {
    let store = AmazonS3Builder::new()
        .with_bucket_name(apron_tests::s3::BUCKET)
        .with_region("us-east-1")
        .with_endpoint(server.endpoint())
        .with_allow_http(true)
        .with_access_key_id(apron_tests::s3::ACCESS_KEY)
        .with_secret_access_key(apron_tests::s3::SECRET_KEY)
        .build()
        .expect("a client");
    Arc::new(store)
}

/// Every object under `prefix`, by key relative to it, with its bytes.
fn objects(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<(String, Vec<u8>)> {
    runtime().block_on(async {
        let prefix = Key::from(prefix);
        let listed: Vec<_> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        let mut out = Vec::new();
        for meta in listed {
            let key = meta.location;
            let bytes = store.get(&key).await.expect("gets").bytes().await.expect("reads").to_vec();
            let relative = key.as_ref().strip_prefix(prefix.as_ref()).unwrap_or(key.as_ref());
            out.push((relative.trim_start_matches('/').to_owned(), bytes));
        }
        out.sort();
        out
    })
}

fn lines(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn shipped_days_are_a_data_folder_and_shipping_again_uploads_nothing() {
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let url = "s3://apron/fleet/one";
    let env = server.env();

    let out = ship(&data, url, &env);
    let (stdout, stderr) = lines(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let local = data_files(&data);
    // Two closed days × four tables × two hosts, one file each.
    assert_eq!(local.len(), 16, "{local:?}");
    assert!(stdout.contains("16 files shipped"), "{stdout}");
    assert!(stdout.contains("0 already there"), "{stdout}");

    // The bucket holds the same files under the same keys, byte for byte.
    let store = client(&server);
    let held = objects(&store, "fleet/one");
    assert_eq!(
        held.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        local.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>()
    );
    for ((key, bytes), (_, path)) in held.iter().zip(&local) {
        assert!(*bytes == std::fs::read(path).expect("reads"), "{key} differs");
    }

    // A copy of the bucket is an apron data folder with the same spend.
    let copy = tmp.path().join("copy");
    for (key, bytes) in &held {
        let path = copy.join(key);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("writes");
    }
    let spend = |dir: &Path| {
        let out = Command::new(apron_tests::bin("apron"))
            .arg("--data")
            .arg(dir)
            .args(["spend", "--month", "2026-10"])
            .output()
            .expect("apron runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with("Data:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(spend(&copy), spend(&data));

    // Again: every file is there, equal; nothing is uploaded.
    let out = ship(&data, url, &env);
    let (stdout, stderr) = lines(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("0 files shipped (0 bytes), 16 already there, 0 removed"), "{stdout}");

    // An object its partition no longer has (an earlier merge of a day
    // that got a late file) is removed; one changed under a key is
    // uploaded again.
    let (stale_key, changed_key) = (local[0].0.replace(".parquet", "-old.parquet"), local[1].0.clone());
    runtime().block_on(async {
        for (key, bytes) in [(&stale_key, &b"old"[..]), (&changed_key, &b"changed"[..])] {
            let key = Key::from(format!("fleet/one/{key}"));
            store.put(&key, PutPayload::from(bytes.to_vec())).await.expect("puts");
        }
    });
    let out = ship(&data, url, &env);
    let (stdout, stderr) = lines(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("1 files shipped"), "{stdout}");
    assert!(stdout.contains("15 already there, 1 removed"), "{stdout}");
    assert!(stdout.contains(&format!("removed {url}/{stale_key}")), "{stdout}");
    let held = objects(&store, "fleet/one");
    assert_eq!(held.len(), 16);
    for ((key, bytes), (_, path)) in held.iter().zip(&local) {
        assert!(*bytes == std::fs::read(path).expect("reads"), "{key} differs");
    }
}

#[test]
fn a_store_that_refuses_or_is_not_there_is_one_line_within_seconds() {
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let url = "s3://apron/fleet/two";
    let one_line_error = |out: &Output, wanted: &[&str]| {
        let (stdout, stderr) = lines(out);
        assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].starts_with("error: "), "{stderr}");
        for w in wanted {
            assert!(errors[0].contains(w), "{w} in {stderr}");
        }
    };

    // Wrong secret: the server refuses the signature.
    let mut env = server.env();
    env[1].1 = "not-the-secret".into();
    let t0 = Instant::now();
    let out = ship(&data, url, &env);
    one_line_error(&out, &[url, "403"]);
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());

    // Nobody listening: refused at once, retried a few times, then one line.
    let closed =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let mut env = server.env();
    env[3].1 = format!("http://127.0.0.1:{closed}");
    let t0 = Instant::now();
    let out = ship(&data, url, &env);
    one_line_error(&out, &[url, &format!("127.0.0.1:{closed}")]);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());

    // Not an object storage URL.
    let out = ship(&data, "https://example.invalid/bucket", &server.env());
    one_line_error(
        &out,
        &["https://example.invalid/bucket is not an object storage URL", "s3://BUCKET/PREFIX"],
    );
}
