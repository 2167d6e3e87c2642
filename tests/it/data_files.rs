//! End to end: data files and partition folders apron cannot read, in a
//! local data folder and in a bucket (a real S3-protocol server, SeaweedFS,
//! on 127.0.0.1). Every unreadable file or object is one error line naming
//! it, never a panic; a partition folder whose name the query engine cannot
//! take (a newline in `host=`) is skipped with a warning naming it, and the
//! other hosts' figures stay what they are.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use apron_tests::s3::S3Server;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

/// The partition every case damages.
const PARTITION: &str = "gpu_samples/date=2026-11-02/host=gpu-node01";

/// One day of two simulated GPUs on host gpu-node01, 2026-11-02.
fn simulate(data: &Path) {
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args([
            "simulate",
            "--gpus",
            "2",
            "--days",
            "1",
            "--start",
            "2026-11-02",
            "--interval",
            "10s",
            "--data",
        ])
        .arg(data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `apron --data DATA ARGS…` with only `env` of the AWS environment.
fn apron(data: &str, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(apron_tests::bin("apron"));
    cmd.args(["--data", data]).args(args);
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        cmd.env_remove(key);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::null()).output().expect("apron runs")
}

/// Files that are no Parquet: a crafted 28-byte one (magic, 16 bytes, a
/// footer length, magic) for several footer lengths, and garbage.
fn unreadable() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for len in [0i32, 20, 21, 1_000, -1, i32::MAX] {
        let mut bytes = b"PAR1".to_vec();
        bytes.extend_from_slice(&[1u8; 16]);
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(b"PAR1");
        assert_eq!(bytes.len(), 28);
        out.push((format!("28 bytes, footer length {len}"), bytes));
    }
    out.push(("garbage".into(), b"garbage!".repeat(100)));
    out.push(("half a magic".into(), b"PAR".to_vec()));
    out
}

/// The commands each case runs: a query, a report.
const COMMANDS: [&[&str]; 2] =
    [&["sql", "SELECT count(*) FROM gpu_samples"], &["spend", "--month", "2026-11"]];

/// `out` failed with one line naming `name`, no panic.
fn assert_names(what: &str, out: &Output, name: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
    assert!(err.starts_with("error: ") && err.contains(name), "{what}: should name {name}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

#[test]
fn every_unreadable_file_is_one_line_naming_it_in_a_folder_and_in_a_bucket() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let local = data.to_str().expect("UTF-8").to_owned();
    let bad = data.join(PARTITION).join("x.parquet");
    for (what, bytes) in unreadable() {
        std::fs::write(&bad, &bytes).expect("write");
        for args in COMMANDS {
            let out = apron(&local, args, &[]);
            assert_names(&format!("{what}, local, {args:?}"), &out, &bad.display().to_string());
        }
    }
    std::fs::remove_file(&bad).expect("remove");

    let server = S3Server::start();
    let url = "s3://apron/fleet";
    let mut ship = Command::new(apron_tests::bin("apron-recorder"));
    ship.arg("--data").arg(&data).args(["ship", "--to", url]).envs(server.env());
    let shipped = ship.output().expect("ship runs");
    assert!(shipped.status.success(), "{}", text(&shipped.stderr));
    let env = server.env();
    let store: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::new()
            .with_bucket_name(apron_tests::s3::BUCKET)
            .with_region("us-east-1")
            .with_endpoint(server.endpoint())
            .with_allow_http(true)
            .with_access_key_id(apron_tests::s3::ACCESS_KEY)
            .with_secret_access_key(apron_tests::s3::SECRET_KEY)
            .build()
            .expect("a client"),
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let good = apron(url, COMMANDS[0], &env);
    assert!(good.status.success(), "the bucket reads before it is damaged: {}", text(&good.stderr));
    let key = Key::from(format!("fleet/{PARTITION}/x.parquet"));
    let object = format!("{url}/{PARTITION}/x.parquet");
    for (what, bytes) in unreadable() {
        runtime.block_on(store.put(&key, PutPayload::from(bytes))).expect("put");
        for args in COMMANDS {
            let out = apron(url, args, &env);
            assert_names(&format!("{what}, bucket, {args:?}"), &out, &object);
        }
    }
}

/// Copies every table's files of host gpu-node01 into a partition folder
/// `host=NAME` beside it.
fn copy_host(data: &Path, name: &str) -> Vec<PathBuf> {
    let mut made = Vec::new();
    for table in ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"] {
        let from = data.join(table).join("date=2026-11-02/host=gpu-node01");
        let to = data.join(table).join("date=2026-11-02").join(format!("host={name}"));
        std::fs::create_dir_all(&to).expect("mkdir");
        for file in apron_tests::files_under(&from) {
            std::fs::copy(&file, to.join(file.file_name().expect("a name"))).expect("copy");
        }
        made.push(to);
    }
    made
}

#[test]
fn a_partition_folder_named_with_a_newline_is_skipped_and_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let local = data.to_str().expect("UTF-8").to_owned();
    let by_host = ["sql", "SELECT host, count(*) AS n FROM gpu_samples GROUP BY host ORDER BY host"];
    let spend = ["spend", "--month", "2026-11", "--format", "csv"];
    let before: Vec<String> = [&by_host[..], &spend[..]]
        .iter()
        .map(|args| {
            let out = apron(&local, args, &[]);
            assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
            text(&out.stdout)
        })
        .collect();

    copy_host(&data, "a\nb");
    for (args, want) in [&by_host[..], &spend[..]].iter().zip(&before) {
        let out = apron(&local, args, &[]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: the other hosts still answer: {err}");
        assert_eq!(&text(&out.stdout), want, "{args:?}: the same figures");
        assert!(err.contains("host=a\\nb"), "{args:?}: the folder is named, escaped: {err}");
        assert!(!err.contains("host=a\nb"), "{args:?}: no raw newline: {err}");
    }
}
