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

/// The bytes of `key`. A server just started again answers its filer
/// before its volumes are back (a GET is a 500 for a moment): read again
/// for up to a minute before failing.
async fn read_object(store: &Arc<dyn ObjectStore>, key: &Key) -> Vec<u8> {
    let t0 = Instant::now();
    loop {
        let read = match store.get(key).await {
            Ok(got) => got.bytes().await,
            Err(e) => Err(e),
        };
        match read {
            Ok(bytes) => return bytes.to_vec(),
            Err(e) if t0.elapsed() < Duration::from_secs(60) => {
                eprintln!("reading {key} again: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("cannot read {key}: {e}"),
        }
    }
}

/// Every object under `prefix`, by key relative to it, with its bytes.
fn objects(store: &Arc<dyn ObjectStore>, prefix: &str) -> Vec<(String, Vec<u8>)> {
    runtime().block_on(async {
        let prefix = Key::from(prefix);
        let listed: Vec<_> = store.list(Some(&prefix)).try_collect().await.expect("lists");
        let mut out = Vec::new();
        for meta in listed {
            let key = meta.location;
            let bytes = read_object(store, &key).await;
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
    // Two closed days × five tables × two hosts, one file each.
    assert_eq!(local.len(), 20, "{local:?}");
    assert!(stdout.contains("20 files shipped"), "{stdout}");
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
    assert!(stdout.contains("0 files shipped (0 bytes), 20 already there, 0 removed"), "{stdout}");

    // An object its partition no longer has (an earlier merge of a day
    // that got a late file) is removed; one changed under a key is
    // uploaded again.
    // (A name of the writer's form, `<start>-<seq>.parquet`: shipping removes
    // only objects named as apron names its files.)
    let stale_key = local[0].0.replace("-000000.parquet", "-000001.parquet");
    assert_ne!(stale_key, local[0].0, "a file of the writer's naming: {}", local[0].0);
    let changed_key = local[1].0.clone();
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
    assert!(stdout.contains("19 already there, 1 removed"), "{stdout}");
    assert!(stdout.contains(&format!("removed {url}/{stale_key}")), "{stdout}");
    let held = objects(&store, "fleet/one");
    assert_eq!(held.len(), 20);
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

/// The value of `field=N` in a log line.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Waits until `log` holds a line that `wanted` accepts; returns it.
fn wait_for_line(log: &Path, limit: Duration, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| wanted(l)) {
            return line.to_owned();
        }
        assert!(t0.elapsed() < limit, "no {what} within {limit:?}:\n{text}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `apron-recorder --ship` while it records: the server is killed in the
/// middle of the uploads and started again; in the end every closed day
/// is in the bucket exactly once (the same bytes under the same keys,
/// nothing else), each marked shipped on disk, and the recorder lost no
/// tick meanwhile.
#[test]
fn live_shipping_outlives_a_store_killed_mid_upload_and_loses_no_tick() {
    let mut server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // Four closed days of one host (gpu-node01), up to yesterday, at 1 s:
    // files of megabytes, so the uploads take a while.
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args(["simulate", "--gpus", "8", "--days", "4", "--interval", "1s", "--data"])
        .arg(&data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let closed = data_files(&data);
    assert_eq!(closed.len(), 20, "{closed:?}");

    let log_path = tmp.path().join("recorder.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let url = "s3://apron/live";
    let mut cmd = Command::new(apron_tests::bin("apron-recorder"));
    cmd.args(["--source", "sim", "--host", "gpu-node01", "--sim-gpus", "2", "--interval", "200ms"])
        .args(["--health-every", "1s", "--ship", url, "--ship-every", "200ms", "--data"])
        .arg(&data)
        .env("APRON_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        cmd.env_remove(key);
    }
    for (k, v) in server.env() {
        cmd.env(k, v);
    }
    let recorder = cmd.spawn().expect("the recorder starts");
    let started = chrono::Utc::now();

    // Killed after the first file is in: the others are mid-way or waiting.
    let shipped = |l: &str| l.contains("shipped a closed day's file");
    wait_for_line(&log_path, Duration::from_secs(60), "first upload", shipped);
    server.kill();
    wait_for_line(&log_path, Duration::from_secs(60), "failing pass", |l| {
        l.contains("cannot ship closed days")
    });
    std::thread::sleep(Duration::from_secs(2));
    server.start_again();

    // Every closed day arrives once the server is back.
    let store = client(&server);
    let t0 = Instant::now();
    while objects(&store, "live").len() < closed.len() {
        assert!(t0.elapsed() < Duration::from_secs(120), "the backlog did not drain:\n{}", read(&log_path));
        std::thread::sleep(Duration::from_millis(200));
    }
    let health = wait_for_line(&log_path, Duration::from_secs(30), "health line with nothing pending", |l| {
        l.contains(" health")
            && field(l, "ship_pending") == Some(0)
            && field(l, "ship_failed").is_some_and(|f| f > 0)
    });
    apron_tests::signal(&recorder, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(recorder, Duration::from_secs(30));
    let text = read(&log_path);
    assert!(out.status.success(), "{text}");

    // Exactly the closed days' files, byte for byte, each marked shipped.
    let held = objects(&store, "live");
    assert_eq!(
        held.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        closed.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        "{text}"
    );
    for ((key, bytes), (_, path)) in held.iter().zip(&closed) {
        assert!(*bytes == std::fs::read(path).expect("reads"), "{key} differs");
    }
    let markers = apron_tests::files_under(&data.join(".ship"));
    assert_eq!(markers.len(), closed.len(), "{markers:?}");
    // Uploads counted once each: one cut short and done again counts once
    // (or not at all, when the server stored it before it died).
    let uploaded = field(&health, "ship_shipped").expect("ship_shipped");
    assert!((1..=20).contains(&uploaded), "{health}");

    // No tick lost: today's rows of both GPUs sit 200 ms apart without a gap.
    let stop = text.lines().find(|l| l.contains("recorder stopped")).expect("a stop line");
    assert_eq!(field(stop, "missed"), Some(0), "{stop}");
    let today = data.join("gpu_samples").join(format!("date={}", started.format("%Y-%m-%d")));
    let mut ticks: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    for file in apron_tests::files_under(&today) {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&file).expect("opens"),
        )
        .expect("a parquet file")
        .build()
        .expect("a reader");
        for batch in reader {
            let batch = batch.expect("a batch");
            let ts = batch.column_by_name("ts").expect("ts");
            let ts = arrow::array::AsArray::as_primitive::<arrow::datatypes::TimestampMillisecondType>(ts);
            let uuid =
                arrow::array::AsArray::as_string::<i32>(batch.column_by_name("gpu_uuid").expect("uuid"));
            for i in 0..batch.num_rows() {
                ticks.entry(uuid.value(i).to_owned()).or_default().push(ts.value(i));
            }
        }
    }
    assert_eq!(ticks.len(), 2, "{:?}", ticks.keys());
    let recorded = field(stop, "ticks").expect("ticks");
    for (gpu, ts) in &mut ticks {
        ts.sort_unstable();
        assert_eq!(ts.len() as u64, recorded, "{gpu}: every tick has its row");
        assert!(ts.windows(2).all(|w| w[1] - w[0] == 200), "{gpu}: a gap or a duplicate in {ts:?}");
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// `apron --data s3://…`: every command on the bucket prints what it
/// prints on the data folder that was shipped there (the same figures to
/// the cent, the same rows, the same report tables), the data's name
/// aside; a bucket that is not there or refuses the keys is one line,
/// exit 2, within seconds.
#[test]
fn every_command_on_the_bucket_prints_the_local_figures() {
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let url = "s3://apron/fleet/three";
    let out = ship(&data, url, &server.env());
    assert!(out.status.success(), "{:?}", lines(&out));

    let apron = |data: &str, args: &[&str], env: &[(&str, String)]| {
        let mut cmd = Command::new(apron_tests::bin("apron"));
        cmd.args(["--data", data]).args(args);
        for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
            cmd.env_remove(key);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("apron runs")
    };
    let local = data.to_str().expect("a UTF-8 path").to_owned();
    let env = server.env();
    let month = ["--month", "2026-10"];
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "sql",
            "SELECT host, date, count(*) AS n, sum(gpu_util_pct) AS util FROM gpu_samples GROUP BY host, date ORDER BY host, date",
        ],
        vec![
            "sql",
            "SELECT team, round(sum(cost), 6) AS cost FROM minute_costs GROUP BY team ORDER BY team",
            "--month",
            "2026-10",
        ],
        [&["spend", "--format", "csv"][..], &month].concat(),
        [&["spend"][..], &month].concat(),
        [&["idle-cost", "--by", "user", "--format", "csv"][..], &month].concat(),
        [&["zombies"][..], &month].concat(),
        [&["reclaim"][..], &month].concat(),
        // The windows, not the hour-by-hour profile: its percentages are
        // sums in the engine's order, which may differ in the last digit
        // from one run to the next, wherever the files are.
        [&["windows", "--show", "windows"][..], &month].concat(),
        vec!["alerts"],
    ];
    for args in &commands {
        let here = apron(&local, args, &[]);
        let there = apron(url, args, &env);
        let (out_here, err_here) = lines(&here);
        let (out_there, err_there) = lines(&there);
        // `alerts` on a month-old fleet has nothing to say (no rule fires).
        assert!(args[0] == "alerts" || !out_here.trim().is_empty(), "{args:?} printed nothing: {err_here}");
        assert_eq!(there.status.code(), here.status.code(), "{args:?}: {err_there}");
        assert_eq!(out_there.replace(url, "DATA"), out_here.replace(&local, "DATA"), "{args:?}");
    }

    // The report: every table the same, the summary the same but for its data line.
    let report = |data: &str, out: &Path, env: &[(&str, String)]| {
        let out_arg = out.to_str().expect("UTF-8");
        let done = apron(data, &["report", "--month", "2026-10", "--out", out_arg], env);
        assert!(done.status.success(), "{:?}", lines(&done));
    };
    let (here, there) = (tmp.path().join("report-local"), tmp.path().join("report-bucket"));
    report(&local, &here, &[]);
    report(url, &there, &env);
    let files = |dir: &Path| -> Vec<String> {
        apron_tests::files_under(dir)
            .iter()
            .map(|p| p.strip_prefix(dir).expect("under").to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(files(&there), files(&here));
    for name in files(&here) {
        if name.ends_with(".csv") || name.ends_with(".md") {
            let text = |dir: &Path, data: &str| {
                std::fs::read_to_string(dir.join(&name)).expect("reads").replace(data, "DATA")
            };
            assert_eq!(text(&there, url), text(&here, &local), "{name}");
        }
    }
    let chart = tmp.path().join("spend.png");
    let done = apron(
        url,
        &["chart", "team-spend", "--month", "2026-10", "--out", chart.to_str().expect("UTF-8")],
        &env,
    );
    assert!(done.status.success(), "{:?}", lines(&done));
    assert!(std::fs::read(&chart).expect("a PNG").starts_with(b"\x89PNG"));

    // A bucket that is not there, keys refused: one line naming the URL, exit 2, in seconds.
    let closed =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let with = |i: usize, value: String| {
        let mut e = server.env();
        e[i].1 = value;
        e
    };
    for (url, env, wanted) in [
        ("s3://no-such-bucket/x", server.env(), "no-such-bucket".to_owned()),
        (url, with(1, "wrong".into()), "403".to_owned()),
        (url, with(3, format!("http://127.0.0.1:{closed}")), format!("127.0.0.1:{closed}")),
        (url, with(3, server.not_s3_endpoint()), url.to_owned()),
    ] {
        let t0 = Instant::now();
        let out = apron(url, &["spend", "--month", "2026-10", "--format", "csv"], &env);
        let (_, stderr) = lines(&out);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(url) && errors[0].contains(&wanted), "{stderr}");
        assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    }
}

/// `apron-recorder --ship` to a store nobody answers, with a raw
/// retention of one day over three older days: retention keeps the expired
/// days that are not shipped, and says so where an operator looks: the
/// `/metrics` gauge of expired partitions kept for shipping (equal to the
/// raw partitions past retention, counted from the folder), its figure on
/// the health line, and a warning.
#[test]
fn expired_days_kept_for_a_failing_store_are_counted_and_said() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let today = chrono::Utc::now().date_naive();
    let start = today - chrono::Days::new(10);
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args(["simulate", "--gpus", "2", "--days", "3", "--interval", "60s", "--start"])
        .arg(start.to_string())
        .arg("--data")
        .arg(&data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Raw partitions past a one-day retention, from the folder.
    let cutoff = today - chrono::Days::new(1);
    let expired_raw = || {
        ["gpu_samples", "proc_samples"]
            .iter()
            .flat_map(|t| {
                std::fs::read_dir(data.join(t)).expect("a table folder").map(|e| e.expect("entry").path())
            })
            .filter(|dir| {
                let name = dir.file_name().and_then(|n| n.to_str()).expect("a name");
                chrono::NaiveDate::parse_from_str(name.trim_start_matches("date="), "%Y-%m-%d")
                    .is_ok_and(|d| d < cutoff)
            })
            .count()
    };
    assert_eq!(expired_raw(), 6, "three days of two raw tables");

    let closed =
        std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("addr").port();
    let addr = format!("127.0.0.1:{}", apron_tests::prometheus::free_port());
    let log_path = tmp.path().join("recorder.log");
    let mut cmd = Command::new(apron_tests::bin("apron-recorder"));
    cmd.args(["--source", "sim", "--host", "gpu-node01", "--sim-gpus", "2", "--interval", "200ms"])
        .args(["--health-every", "1s", "--retain-raw", "1d", "--metrics", &addr])
        .args(["--ship", "s3://apron/held", "--ship-every", "200ms", "--data"])
        .arg(&data)
        .env("APRON_LOG", "info")
        .env("AWS_ACCESS_KEY_ID", "k")
        .env("AWS_SECRET_ACCESS_KEY", "s")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{closed}"))
        .env("AWS_ALLOW_HTTP", "true")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log file"));
    for key in ["AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"] {
        cmd.env_remove(key);
    }
    let recorder = cmd.spawn().expect("the recorder starts");
    let gauge = "apron_recorder_ship_expired_pending_partitions";
    let t0 = Instant::now();
    let served = loop {
        let body = apron_tests::prometheus::http_get(&addr, "/metrics").map(|(_, b)| b).unwrap_or_default();
        let value = body
            .lines()
            .find(|l| l.starts_with(&format!("{gauge}{{")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok());
        if value.is_some_and(|v| v > 0) {
            break value;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no {gauge} above 0 within 60 s:\n{body}\n{}",
            read(&log_path)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let warned = wait_for_line(&log_path, Duration::from_secs(30), "warning of kept days", |l| {
        l.contains("kept expired days") && l.contains("not shipped")
    });
    let health = wait_for_line(&log_path, Duration::from_secs(30), "health line", |l| {
        l.contains(" health") && field(l, "ship_expired_pending").is_some_and(|n| n > 0)
    });
    apron_tests::signal(&recorder, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(recorder, Duration::from_secs(30));
    assert!(out.status.success(), "{}", read(&log_path));
    println!("{warned}\n{health}");
    assert_eq!(served, Some(6), "{}", read(&log_path));
    assert_eq!(field(&health, "ship_expired_pending"), Some(6), "{health}");
    // Nothing expired was removed: it is not in the bucket.
    assert_eq!(expired_raw(), 6, "kept");
}

/// Objects under a shipped partition that apron did not write (Spark's
/// `_SUCCESS`, a `readme.txt`, another tool's `part-00000.parquet`) are
/// neither removed nor replaced by shipping; an object of apron's own
/// naming that the partition no longer has is still removed.
#[test]
fn shipping_leaves_objects_apron_did_not_write_alone() {
    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(&data);
    let url = "s3://apron/fleet/foreign";
    let env = server.env();
    let out = ship(&data, url, &env);
    assert!(out.status.success(), "{:?}", lines(&out));
    let local = data_files(&data);
    let (dir, name) = local[0].0.rsplit_once('/').expect("a partition and a name");
    // The writer's own naming, `<start>-<seq>.parquet`: a file merged away.
    let (start, _) = name.rsplit_once('-').expect("<start>-<seq>.parquet");
    let stale = format!("{dir}/{start}-999999.parquet");
    let foreign = [
        (format!("{dir}/_SUCCESS"), &b""[..]),
        (format!("{dir}/readme.txt"), &b"ours, not apron's"[..]),
        (format!("{dir}/part-00000.parquet"), &b"another tool's file"[..]),
    ];
    let store = client(&server);
    runtime().block_on(async {
        for (key, bytes) in foreign.iter().map(|(k, b)| (k, *b)).chain([(&stale, &b"old"[..])]) {
            let key = Key::from(format!("fleet/foreign/{key}"));
            store.put(&key, PutPayload::from(bytes.to_vec())).await.expect("puts");
        }
    });
    let out = ship(&data, url, &env);
    let (stdout, stderr) = lines(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains(&format!("removed {url}/{stale}")), "{stdout}");
    assert!(stdout.contains(", 1 removed"), "only the stale file of apron's naming: {stdout}");
    let held: std::collections::BTreeMap<String, Vec<u8>> =
        objects(&store, "fleet/foreign").into_iter().collect();
    for (key, bytes) in &foreign {
        assert_eq!(held.get(key).map(Vec::as_slice), Some(*bytes), "{key} was touched: {stdout}");
    }
    assert!(!held.contains_key(&stale), "{stdout}");

    // A local file named as apron does not name its files, whose key holds
    // an object apron did not put there: that object is not replaced.
    let (second, path) = &local[1];
    let (dir, _) = second.rsplit_once('/').expect("a partition and a name");
    let renamed = format!("{dir}/part-00000.parquet");
    std::fs::rename(path, data.join(&renamed)).expect("renames");
    runtime().block_on(async {
        let key = Key::from(format!("fleet/foreign/{renamed}"));
        store.put(&key, PutPayload::from(&b"someone else's"[..])).await.expect("puts");
    });
    let out = ship(&data, url, &env);
    let (stdout, stderr) = lines(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("{url}/{renamed}")) && stderr.contains("apron did not write"),
        "{stderr}"
    );
    let held: std::collections::BTreeMap<String, Vec<u8>> =
        objects(&store, "fleet/foreign").into_iter().collect();
    assert_eq!(held.get(&renamed).map(Vec::as_slice), Some(&b"someone else's"[..]), "{stdout}");
}
