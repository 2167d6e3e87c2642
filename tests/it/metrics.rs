//! `apron-recorder --metrics`: what it serves, checked by the real
//! Prometheus tools. `promtool check metrics` parses it; a real
//! `prometheus` server scrapes a recording recorder, and the values it
//! stored equal what the recorder wrote to Parquet for the same ticks, and
//! the GPU state it served for a minute equals `gpu_minute_states`'.
//!
//! Prometheus and promtool: see `apron_tests::prometheus` (Debian's
//! package, unpacked under `target/tools` when the machine has none).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::prometheus::{self, Server, http_get};

/// Starts the recorder on `data` serving `/metrics` on a free port, with
/// `args` and `env`; returns it and the address.
fn recorder(data: &Path, args: &[&str], env: &[(&str, String)]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", prometheus::free_port());
    let child = Command::new(apron_tests::bin("apron-recorder"))
        .arg("--data")
        .arg(data)
        .args(["--metrics", &addr])
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    (child, addr)
}

/// Stops the recorder with SIGTERM; it must exit 0 having written every row.
fn stop(child: Child) -> Output {
    apron_tests::signal(&child, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "the recorder failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// `GET /metrics` once it serves a tick with `wanted` in it (at most 30 s).
fn scrape_when(addr: &str, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((200, body)) = http_get(addr, "/metrics")
            && body.contains(wanted)
        {
            return body;
        }
        assert!(Instant::now() < deadline, "no `{wanted}` at http://{addr}/metrics within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value of the line of metric `name` whose labels contain `labels`.
fn value_of(text: &str, name: &str, labels: &str) -> Option<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(labels))
        .map(|l| l.rsplit(' ').next().expect("a value").to_owned())
        .next()
}

/// Through NVML (the fake library): dcgm-exporter's names and labels,
/// `pci_bus_id` from NVML, what a GPU refuses absent rather than 0, a
/// process's memory with its pid and user; and `promtool check metrics`
/// finds no error, only its lint about dcgm-exporter's own naming.
#[test]
fn promtool_accepts_the_endpoint_and_a_refused_value_is_absent_not_zero() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let gpus = "uuid=GPU-m0,name=NVIDIA H100 80GB HBM3,pci=00000000:07:00.0,util=55,mem_util=30,\
                fb_total=85899345920,fb_used=20000000000,power=350125,power_limit=700000,energy=1000000000,\
                energy_step=35000,sm_clock=1755,temp=60,pcie_tx=1000,pcie_rx=20000,gpm=1,gpm_sm=50,\
                gpm_tensor=20,gpm_gr=75,compute=self:8589934592,putil=self:40:20;\
                uuid=GPU-m1,name=NVIDIA H100 80GB HBM3,util=0,fb_total=85899345920,fb_used=0,\
                unsupported=power|energy|pci";
    let (child, addr) = recorder(
        &tmp.path().join("data"),
        &[
            "--source",
            "nvml",
            "--host",
            "metrics1",
            "--nvml-lib",
            &apron_tests::fake_nvml().to_string_lossy(),
        ],
        &[("FAKE_NVML_GPUS", gpus.into())],
    );
    // GPM ratios need two samples: from the second tick on.
    let text = scrape_when(&addr, "DCGM_FI_PROF_SM_ACTIVE");
    // `self` in the fake's process list is the process that loaded it.
    let recorder_pid = child.id();
    stop(child);

    let g0 = r#"gpu="0",UUID="GPU-m0",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="metrics1""#;
    let g1 =
        r#"gpu="1",UUID="GPU-m1",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="metrics1""#;
    let at = |name: &str, labels: &str| value_of(&text, name, labels);
    assert_eq!(at("DCGM_FI_DEV_GPU_UTIL", g0).as_deref(), Some("55"), "{text}");
    assert_eq!(at("DCGM_FI_DEV_GPU_UTIL", g1).as_deref(), Some("0"), "a real 0 is served as 0:\n{text}");
    assert_eq!(at("DCGM_FI_DEV_POWER_USAGE", g0).as_deref(), Some("350.125"));
    assert_eq!(at("DCGM_FI_DEV_POWER_USAGE", r#"UUID="GPU-m1""#), None, "refused power is absent:\n{text}");
    assert_eq!(at("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", r#"UUID="GPU-m1""#), None);
    // 20 000 000 000 B = 19073.5 MiB, whole MiB as dcgm-exporter.
    assert_eq!(at("DCGM_FI_DEV_FB_USED", g0).as_deref(), Some("19073"));
    assert_eq!(at("DCGM_FI_PROF_SM_ACTIVE", g0).as_deref(), Some("0.5"));
    assert_eq!(at("DCGM_FI_PROF_GR_ENGINE_ACTIVE", g0).as_deref(), Some("0.75"));
    assert_eq!(at("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", g0).as_deref(), Some("0.2"));
    assert_eq!(at("DCGM_FI_PROF_SM_OCCUPANCY", g0), None, "a GPM metric the GPU does not give is absent");
    // The fake reports PCIe as KB/s: 1000 KB/s.
    assert_eq!(at("DCGM_FI_PROF_PCIE_TX_BYTES", g0).as_deref(), Some("1024000"));
    let me = format!(r#"UUID="GPU-m0",Hostname="metrics1",pid="{recorder_pid}""#);
    assert_eq!(at("apron_gpu_process_memory_bytes", &me).as_deref(), Some("8589934592"), "{text}");
    let line =
        text.lines().find(|l| l.starts_with("apron_gpu_process_memory_bytes{")).expect("a process line");
    assert!(line.contains(",user=\"") && line.contains(",uid=\""), "who runs it: {line}");
    assert!(value_of(&text, "apron_recorder_ticks_total", r#"Hostname="metrics1""#).is_some());

    let mut check = Command::new(&prometheus::programs().promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    std::io::Write::write_all(&mut check.stdin.take().expect("stdin"), text.as_bytes())
        .expect("promtool reads");
    let out = check.wait_with_output().expect("promtool ends");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // 0: clean; 3: lint problems only; 1: it could not parse.
    assert!(matches!(out.status.code(), Some(0 | 3)), "promtool check metrics: {:?}\n{said}", out.status);
    for problem in said.lines().filter(|l| !l.trim().is_empty()) {
        let dcgm_naming = problem.starts_with("DCGM_FI_");
        let shared_labels =
            problem.ends_with("label names should be written in 'snake_case' not 'camelCase'");
        assert!(dcgm_naming || shared_labels, "promtool: {problem}\n{said}");
    }
}

/// A real Prometheus scrapes a recorder on the simulated source every
/// second. Each scrape's values, found by their scrape's
/// `apron_recorder_last_tick_timestamp_seconds`, equal the Parquet row of
/// that tick (utilization, power in W, memory in MiB, the energy counter);
/// and once a full minute is over, the state it serves for each GPU is the
/// one `gpu_minute_states` gives for that minute from the files.
#[test]
fn prometheus_stores_the_values_the_recorder_writes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let (child, addr) = recorder(&data, &["--source", "sim", "--sim-gpus", "4", "--host", "metrics2"], &[]);
    scrape_when(&addr, "apron_recorder_last_tick_timestamp_seconds");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: apron\n    static_configs:\n      - targets: ['{addr}']\n"
    );
    let server = Server::start(&config, None);
    // Until a minute is over for every GPU (at most 61 s of recording) and
    // a few scrapes are in.
    let deadline = Instant::now() + Duration::from_secs(100);
    loop {
        let states = server.api("query", &[("query", "count(apron_gpu_minute_state == 1)")]);
        let scrapes = server
            .api("query", &[("query", "count_over_time(apron_recorder_last_tick_timestamp_seconds[10m])")]);
        let n = |v: &serde_json::Value| -> f64 {
            v["result"][0]["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(0.0)
        };
        if n(&states) >= 4.0 && n(&scrapes) >= 5.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not get a minute's state within 100 s: {}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // To the millisecond: whole seconds could fall before the scrape
    // that brought the first minute's state, and the query miss it.
    let now = format!("{:.3}", chrono::Utc::now().timestamp_millis() as f64 / 1000.0);
    let raw = server.api(
        "query",
        &[
            (
                "query",
                r#"{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_POWER_USAGE|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION|DCGM_FI_PROF_GR_ENGINE_ACTIVE|apron_recorder_last_tick_timestamp_seconds"}[10m]"#,
            ),
            ("time", &now),
        ],
    );
    let served_states = server.api("query", &[("query", "apron_gpu_minute_state == 1"), ("time", &now)]);
    let served_minutes =
        server.api("query", &[("query", "apron_gpu_minute_start_timestamp_seconds"), ("time", &now)]);
    drop(server);
    stop(child);

    // Scrape time → the tick it served.
    let series = raw["result"].as_array().expect("a matrix");
    let mut tick_of: HashMap<String, i64> = HashMap::new();
    for s in series.iter().filter(|s| s["metric"]["__name__"] == "apron_recorder_last_tick_timestamp_seconds")
    {
        for v in s["values"].as_array().expect("values") {
            let secs: f64 = v[1].as_str().and_then(|x| x.parse().ok()).expect("a number");
            tick_of.insert(v[0].to_string(), (secs * 1000.0).round() as i64);
        }
    }
    assert!(tick_of.len() >= 5, "scrapes: {tick_of:?}");

    // What the recorder wrote, from the files, through apron.
    let rows = apron_json(
        &data,
        &[
            "sql",
            "SELECT gpu_uuid, CAST(ts AS BIGINT) AS ts_ms, gpu_util_pct, power_mw, fb_used_bytes, energy_mj, \
             gr_engine_active_pct FROM gpu_samples",
        ],
    );
    let written: HashMap<(String, i64), &serde_json::Value> = rows
        .iter()
        .map(|r| ((r["gpu_uuid"].as_str().expect("uuid").to_owned(), r["ts_ms"].as_i64().expect("ts")), r))
        .collect();
    let mut compared = 0;
    let mut gr_compared = 0;
    for s in series.iter().filter(|s| s["metric"]["__name__"] != "apron_recorder_last_tick_timestamp_seconds")
    {
        let name = s["metric"]["__name__"].as_str().expect("a name");
        let uuid = s["metric"]["UUID"].as_str().expect("a UUID label");
        assert_eq!(s["metric"]["Hostname"], "metrics2");
        for v in s["values"].as_array().expect("values") {
            let tick = tick_of[&v[0].to_string()];
            let served: f64 = v[1].as_str().and_then(|x| x.parse().ok()).expect("a number");
            let row = written
                .get(&(uuid.to_owned(), tick))
                .unwrap_or_else(|| panic!("no Parquet row of {uuid} at {tick}"));
            let expected = match name {
                "DCGM_FI_DEV_GPU_UTIL" => row["gpu_util_pct"].as_f64(),
                "DCGM_FI_DEV_POWER_USAGE" => row["power_mw"].as_f64().map(|mw| mw / 1000.0),
                "DCGM_FI_DEV_FB_USED" => row["fb_used_bytes"].as_i64().map(|b| (b / (1 << 20)) as f64),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => row["energy_mj"].as_f64(),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => {
                    // A percent in a Float32 column, served as a ratio.
                    let pct = row["gr_engine_active_pct"].as_f64().expect("GPM value written");
                    assert!(
                        (served - pct / 100.0).abs() < 1e-6,
                        "{name} of {uuid} at tick {tick}: {served} vs {pct} %"
                    );
                    gr_compared += 1;
                    compared += 1;
                    continue;
                }
                other => panic!("unexpected {other}"),
            };
            assert_eq!(Some(served), expected, "{name} of {uuid} at tick {tick}");
            compared += 1;
        }
    }
    assert!(compared >= 4 * 4 * 5, "only {compared} values compared");
    assert!(gr_compared >= 5, "only {gr_compared} graphics-engine values compared");

    // The minute state served equals the reports' for the same GPU-minute.
    let minute_of: HashMap<String, i64> = served_minutes["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|s| {
            let secs: i64 = s["value"][1].as_str().and_then(|x| x.parse().ok()).expect("seconds");
            (s["metric"]["UUID"].as_str().expect("UUID").to_owned(), secs)
        })
        .collect();
    let first = minute_of.values().min().expect("a minute");
    let day = chrono::DateTime::from_timestamp(*first, 0).expect("a time").date_naive();
    let states = apron_json(
        &data,
        &[
            "sql",
            "--from",
            &day.to_string(),
            "--to",
            &(day + chrono::Days::new(2)).to_string(),
            "SELECT gpu_uuid, CAST(to_unixtime(minute) AS BIGINT) AS minute_s, state FROM gpu_minute_states",
        ],
    );
    let served = served_states["result"].as_array().expect("a vector");
    assert_eq!(served.len(), 4, "{served:?}");
    for s in served {
        let uuid = s["metric"]["UUID"].as_str().expect("UUID");
        let minute = minute_of[uuid];
        let row = states
            .iter()
            .find(|r| r["gpu_uuid"] == uuid && r["minute_s"].as_i64() == Some(minute))
            .unwrap_or_else(|| panic!("no gpu_minute_states row for {uuid} at {minute}: {states:?}"));
        assert_eq!(s["metric"]["state"], row["state"], "{uuid} at {minute}");
    }
}

/// `apron --data DATA --format json ARGS…`, parsed.
fn apron_json(data: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(data)
        .args(["--format", "json"])
        .args(args)
        .output()
        .expect("apron runs");
    assert!(out.status.success(), "apron {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}
