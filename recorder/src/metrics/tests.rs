use std::sync::Arc;

use apron_schemas::{GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;

use super::*;
use crate::ship::live::ShipHealth;

/// 2026-12-01T00:00:00Z.
const T0: i64 = 1_796_083_200_000;

fn gpu(uuid: &str, index: i32, ts: i64, util: Option<i32>, sm: Option<f32>) -> GpuSample {
    GpuSample {
        ts,
        gpu_uuid: Arc::from(uuid),
        gpu_index: index,
        gpu_model: Some(Arc::from("NVIDIA H100 80GB HBM3")),
        interval_ms: 1_000,
        gpu_util_pct: util,
        sm_active_pct: sm,
        ..GpuSample::default()
    }
}

fn proc_on(uuid: &str, pid: i32, ts: i64, mem: Option<i64>) -> ProcSample {
    ProcSample {
        ts,
        gpu_uuid: Arc::from(uuid),
        pid,
        interval_ms: 1_000,
        identity: ProcIdentity { proc_start: Some(1_000), ..ProcIdentity::default() },
        used_mem_bytes: mem,
        ..ProcSample::default()
    }
}

/// One minute of four GPUs, worked by hand:
/// - A: utilization 10 % for 30 s, then 0 % for 30 s: mean 5.0 %, at the
///   threshold, so busy.
/// - B: no utilization, SM activity 3 %: activity 3 %, idle; its process
///   shows 0 bytes, then unknown: highest known 0, so nothing held: idle_empty.
/// - C: utilization 2 %, a process holding 1 GiB for one second: idle_held.
/// - D: nothing known: unknown.
#[test]
fn a_minute_is_busy_idle_held_idle_empty_or_unknown_as_the_reports_define_it() {
    let mut states = MinuteStates::new(5.0);
    for s in 0..60 {
        let ts = T0 + s * 1_000;
        let gpus = [
            gpu("A", 0, ts, Some(if s < 30 { 10 } else { 0 }), None),
            gpu("B", 1, ts, None, Some(3.0)),
            gpu("C", 2, ts, Some(2), None),
            gpu("D", 3, ts, None, None),
        ];
        let procs = [
            proc_on("B", 10, ts, if s == 0 { Some(0) } else { None }),
            proc_on("C", 11, ts, if s == 59 { Some(1 << 30) } else { Some(0) }),
        ];
        states.add(&gpus, &procs, &[]);
        assert!(states.reports().is_empty(), "no minute is over before the next one starts");
    }
    let next = T0 + 60_000;
    states.add(&[gpu("A", 0, next, Some(0), None), gpu("B", 1, next, None, None)], &[], &[]);
    let got: Vec<(&str, State, Option<f64>, f64, usize)> = states
        .reports()
        .iter()
        .map(|r| (&*r.gpu_uuid, r.state, r.activity_pct, r.seconds, r.procs))
        .collect();
    assert_eq!(
        got,
        [("A", State::Busy, Some(5.0), 60.0, 0), ("B", State::IdleEmpty, Some(3.0), 60.0, 1),],
        "C and D have not started a new minute yet"
    );
    states.add(&[gpu("C", 2, next, None, None), gpu("D", 3, next, None, None)], &[], &[]);
    let c = states.reports().iter().find(|r| &*r.gpu_uuid == "C").expect("C reported");
    assert_eq!((c.state, c.activity_pct, c.procs), (State::IdleHeld, Some(2.0), 1));
    let d = states.reports().iter().find(|r| &*r.gpu_uuid == "D").expect("D reported");
    assert_eq!((d.state, d.activity_pct), (State::Unknown, None));
    assert!(states.reports().iter().all(|r| r.minute_ms == T0));
}

/// A GPU the cluster had allocated at some tick of the minute is held
/// without any process: idle-held; the next minute, not allocated, is
/// idle-empty.
#[test]
fn an_allocated_gpu_without_a_process_is_idle_held() {
    let mut states = MinuteStates::new(5.0);
    let alloc = |ts: i64| apron_schemas::AllocSample {
        ts,
        interval_ms: 1_000,
        gpu_uuid: "A".into(),
        gpu_index: 0,
        holder: apron_schemas::Holder::kubernetes(Some("nlp".into()), Some("nb-0".into()), None),
    };
    for s in 0..60 {
        let ts = T0 + s * 1_000;
        let allocations = if s == 30 { vec![alloc(ts)] } else { Vec::new() };
        states.add(&[gpu("A", 0, ts, Some(0), None)], &[], &allocations);
    }
    states.add(&[gpu("A", 0, T0 + 60_000, Some(0), None)], &[], &[]);
    assert_eq!((states.reports()[0].state, states.reports()[0].procs), (State::IdleHeld, 0));
    states.add(&[gpu("A", 0, T0 + 120_000, Some(0), None)], &[], &[]);
    assert_eq!(states.reports()[0].state, State::IdleEmpty);
}

/// A minute just under the threshold is idle; utilization where known
/// wins over SM activity.
#[test]
fn utilization_where_known_decides_over_sm_activity() {
    let mut states = MinuteStates::new(5.0);
    states.add(&[gpu("A", 0, T0, Some(4), Some(90.0))], &[], &[]);
    states.add(&[gpu("A", 0, T0 + 1_000, None, Some(90.0))], &[], &[]);
    states.add(&[gpu("A", 0, T0 + 60_000, None, None)], &[], &[]);
    let a = &states.reports()[0];
    assert_eq!((a.state, a.activity_pct, a.seconds), (State::IdleEmpty, Some(4.0), 2.0));
}

fn sample_snapshot() -> Snapshot {
    let mut g0 = gpu("GPU-0", 0, T0, Some(45), Some(50.0));
    g0.mem_util_pct = Some(30);
    g0.fb_used_bytes = Some(20_000_000_000);
    g0.fb_total_bytes = Some(85_899_345_920);
    g0.power_mw = Some(350_125);
    g0.energy_mj = Some(1_000_000_000);
    g0.temp_c = Some(61);
    g0.sm_clock_mhz = Some(1_755);
    g0.pcie_tx_bytes_per_s = Some(1_024_000);
    g0.tensor_active_pct = Some(20.0);
    g0.gr_engine_active_pct = Some(62.5);
    // GPU 1: a model with a quote in its name; no power, no utilization.
    let mut g1 = gpu("GPU-1", 1, T0, None, None);
    g1.gpu_model = Some(Arc::from("Fake \"GPU\"\\1"));
    let mut p = proc_on("GPU-0", 4242, T0, Some(8 << 30));
    p.identity.user = Some(Arc::from("alice"));
    p.identity.uid = Some(1000);
    p.identity.k8s_namespace = Some(Arc::from("vision-train"));
    p.sm_util_pct = Some(40);
    Snapshot {
        host: "node07".into(),
        ts_ms: Some(T0),
        gpus: vec![g0, g1],
        procs: vec![p],
        minutes: Vec::new(),
        health: Health { ticks: 12, gpu_rows: 96, ..Health::default() },
        pci_bus_ids: vec![Some("00000000:07:00.0".into())],
        wal_bytes: 4096,
        late_copies: 0,
        faults: Vec::new(),
        faults_version: 0,
    }
}

#[test]
fn faults_are_served_under_dcgm_names_for_the_gpus_read() {
    use crate::metrics::faults::{COUNTERS, FaultState};
    use apron_schemas::GpuEvent;
    let mut snapshot = sample_snapshot();
    let mut state = FaultState::default();
    let xid = GpuEvent { gpu_uuid: "GPU-0".into(), kind: "xid".into(), xid: Some(79), ..GpuEvent::default() };
    let read = |kind: &str, detail: Option<&str>, value: i64| GpuEvent {
        gpu_uuid: "GPU-0".into(),
        kind: kind.into(),
        detail: detail.map(Into::into),
        value: Some(value),
        ..GpuEvent::default()
    };
    let readings = [
        read("ecc_uncorrected", None, 2),
        read("remap_pending", None, 1),
        read("nvlink_errors", Some("link 0 replay"), 3),
        read("nvlink_errors", Some("link 1 replay"), 4),
    ];
    state.add(&[xid], &readings);
    snapshot.faults = state.gpus;
    let mut text = String::new();
    render(&snapshot, &mut text);
    let labels0 = r#"gpu="0",UUID="GPU-0",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node07""#;
    assert_eq!(
        lines_of(&text, "DCGM_FI_DEV_XID_ERRORS"),
        [format!(
            r#"DCGM_FI_DEV_XID_ERRORS{{{labels0},err_code="79",err_msg="GPU has fallen off the bus"}} 79"#
        )]
    );
    for (name, value) in [
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 2),
        ("DCGM_FI_DEV_ROW_REMAP_PENDING", 1),
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 7),
    ] {
        assert_eq!(lines_of(&text, name), [format!("{name}{{{labels0}}} {value}")], "{text}");
    }
    assert!(text.contains("# TYPE DCGM_FI_DEV_ROW_REMAP_PENDING gauge\n"));
    assert!(text.contains("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"));
    // Not read: absent, never 0 (GPU 1 has no faults read at all).
    assert!(!text.contains("DCGM_FI_DEV_PCIE_REPLAY_COUNTER"), "{text}");
    assert!(!text.lines().any(|l| l.contains("GPU-1") && l.contains("XID")), "{text}");
    assert_eq!(COUNTERS.len(), 16);
}

fn lines_of<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.split(['{', ' ']).next() == Some(name)).collect()
}

#[test]
fn dcgm_names_units_and_labels() {
    let mut text = String::new();
    render(&sample_snapshot(), &mut text);
    let labels0 = r#"gpu="0",UUID="GPU-0",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node07""#;
    for (name, value) in [
        ("DCGM_FI_DEV_GPU_UTIL", "45"),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "30"),
        // 20 000 000 000 B = 19073.48 MiB; dcgm-exporter's MiB are whole.
        ("DCGM_FI_DEV_FB_USED", "19073"),
        // (85 899 345 920 − 20 000 000 000) B = 62846.52 MiB.
        ("DCGM_FI_DEV_FB_FREE", "62846"),
        ("DCGM_FI_DEV_POWER_USAGE", "350.125"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "1000000000"),
        ("DCGM_FI_DEV_GPU_TEMP", "61"),
        ("DCGM_FI_DEV_SM_CLOCK", "1755"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.625"),
        ("DCGM_FI_PROF_SM_ACTIVE", "0.5"),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0.2"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "1024000"),
    ] {
        assert_eq!(lines_of(&text, name), [format!("{name}{{{labels0}}} {value}")], "{name} in\n{text}");
        assert_eq!(text.matches(&format!("# TYPE {name} ")).count(), 1, "{name}: one TYPE line");
    }
    assert!(text.contains("# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"));
    // GPU 1 answered no utilization and no power: absent, never 0.
    assert!(lines_of(&text, "DCGM_FI_DEV_GPU_UTIL").iter().all(|l| !l.contains("GPU-1")));
    assert!(lines_of(&text, "DCGM_FI_DEV_POWER_USAGE").iter().all(|l| !l.contains("GPU-1")));
    // Nothing at all for a counter no GPU gave.
    assert!(!text.contains("DCGM_FI_DEV_ENC_UTIL"), "{text}");
    // A label value with a quote and a backslash, escaped; no PCI id known.
    assert_eq!(lines_of(&text, "DCGM_FI_DEV_SM_CLOCK").len(), 1, "GPU 1 has no clock either");
    let g1_state_free = text.lines().any(|l| l.contains(r#"modelName="Fake \"GPU\"\\1""#));
    assert!(!g1_state_free, "GPU 1 has no value, so no line carries its labels yet");
}

#[test]
fn process_memory_carries_who_runs_it() {
    let mut text = String::new();
    render(&sample_snapshot(), &mut text);
    assert_eq!(
        lines_of(&text, "apron_gpu_process_memory_bytes"),
        [
            r#"apron_gpu_process_memory_bytes{gpu="0",UUID="GPU-0",Hostname="node07",pid="4242",uid="1000",user="alice",k8s_namespace="vision-train"} 8589934592"#
        ]
    );
    assert_eq!(lines_of(&text, "apron_gpu_process_sm_util_percent").len(), 1);
}

#[test]
fn a_name_with_control_characters_reaches_no_reader_raw() {
    let mut snapshot = sample_snapshot();
    snapshot.procs[0].identity.user = Some(Arc::from("a\u{1b}]0;owned\u{7}\r"));
    let mut text = String::new();
    render(&snapshot, &mut text);
    assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
    assert!(text.contains("user=\"a\u{fffd}]0;owned\u{fffd}\u{fffd}\""), "{text}");
}

#[test]
fn minute_states_are_one_hot_and_health_is_served() {
    let mut s = sample_snapshot();
    s.minutes = vec![MinuteReport {
        gpu_uuid: Arc::from("GPU-1"),
        gpu_index: 1,
        gpu_model: Some(Arc::from("Fake \"GPU\"\\1")),
        minute_ms: T0 - 60_000,
        seconds: 60.0,
        activity_pct: None,
        procs: 0,
        state: State::Unknown,
    }];
    s.health.ship = Some(ShipHealth { shipped: 3, pending: 2, failed: 1, expired_pending: 1 });
    s.health.k8s = Some(crate::kubernetes::KubeHealth {
        refreshes: 9,
        pods: 4,
        allocated_devices: 3,
        log_errors: 0,
        kubelet_errors: 2,
        labelled_pods: 6,
        label_errors: 7,
        unresolved: 5,
    });
    let mut text = String::new();
    render(&s, &mut text);
    let states = lines_of(&text, "apron_gpu_minute_state");
    assert_eq!(states.len(), 4, "{text}");
    let labels1 = r#"gpu="1",UUID="GPU-1",device="nvidia1",modelName="Fake \"GPU\"\\1",Hostname="node07""#;
    assert!(
        states.contains(&format!(r#"apron_gpu_minute_state{{{labels1},state="unknown"}} 1"#).as_str()),
        "{text}"
    );
    assert_eq!(states.iter().filter(|l| l.ends_with(" 1")).count(), 1);
    assert!(lines_of(&text, "apron_gpu_minute_activity_percent").is_empty(), "unknown activity is absent");
    assert_eq!(
        lines_of(&text, "apron_gpu_minute_start_timestamp_seconds"),
        [format!("apron_gpu_minute_start_timestamp_seconds{{{labels1}}} {}", (T0 - 60_000) / 1000)]
    );
    for (name, value) in [
        ("apron_recorder_ticks_total", "12"),
        ("apron_recorder_wal_bytes", "4096"),
        ("apron_recorder_ship_pending_partitions", "2"),
        ("apron_recorder_ship_failures_total", "1"),
        ("apron_recorder_ship_expired_pending_partitions", "1"),
        ("apron_recorder_k8s_pods", "4"),
        ("apron_recorder_k8s_allocated_devices", "3"),
        ("apron_recorder_k8s_unresolved_rows_total", "5"),
        ("apron_recorder_k8s_log_errors_total", "0"),
        ("apron_recorder_k8s_kubelet_errors_total", "2"),
        ("apron_recorder_k8s_labelled_pods", "6"),
        ("apron_recorder_k8s_label_errors_total", "7"),
        ("apron_recorder_last_tick_timestamp_seconds", "1796083200"),
    ] {
        assert_eq!(lines_of(&text, name), [format!(r#"{name}{{Hostname="node07"}} {value}"#)], "{text}");
    }
    assert_eq!(
        lines_of(&text, "apron_recorder_rows_written_total"),
        [
            r#"apron_recorder_rows_written_total{Hostname="node07",table="gpu_samples"} 96"#,
            r#"apron_recorder_rows_written_total{Hostname="node07",table="proc_samples"} 0"#
        ]
    );
}

#[test]
fn a_tick_never_waits_for_a_scrape() {
    let mut publisher = Publisher::detached("node07", 5.0);
    let mut tick = Tick::default();
    tick.gpus.push(gpu("GPU-0", 0, T0, Some(1), None));
    publisher.publish(T0, &tick, &Health::default());
    let shared = Arc::clone(&publisher.shared);
    let held = shared.lock().expect("not poisoned");
    // With the lock held (a scrape copying), the tick returns at once.
    publisher.publish(T0 + 1_000, &tick, &Health::default());
    drop(held);
    let s = publisher.snapshot();
    assert_eq!((s.ts_ms, s.late_copies), (Some(T0), 0), "the held tick was not copied");
    publisher.publish(T0 + 2_000, &tick, &Health::default());
    let s = publisher.snapshot();
    assert_eq!((s.ts_ms, s.late_copies), (Some(T0 + 2_000), 1));
}

#[test]
fn listen_addresses_are_loopback_unless_written_out() {
    assert_eq!(parse_listen_addr("9400"), Ok("127.0.0.1:9400".parse().expect("an address")));
    assert_eq!(parse_listen_addr(":9400"), Ok("127.0.0.1:9400".parse().expect("an address")));
    assert_eq!(parse_listen_addr("0.0.0.0:9400"), Ok("0.0.0.0:9400".parse().expect("an address")));
    assert_eq!(parse_listen_addr("[::1]:9400"), Ok("[::1]:9400".parse().expect("an address")));
    assert!(parse_listen_addr("70000").is_err());
    assert!(parse_listen_addr("no-such-host.invalid:9400").is_err());
}

/// The server answers over real HTTP on a port of its own.
#[test]
fn the_server_answers_get_metrics() {
    let dir = std::env::temp_dir();
    let addr = "127.0.0.1:0".parse().expect("an address");
    let (server, mut publisher) =
        MetricsServer::start(addr, "node07", vec![None], dir, 5.0).expect("the server starts");
    let mut tick = Tick::default();
    tick.gpus.push(gpu("GPU-0", 0, T0, Some(77), None));
    publisher.publish(T0, &tick, &Health::default());
    let get = |path: &str| {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(server.addr()).expect("connects");
        write!(stream, "GET {path} HTTP/1.0\r\n\r\n").expect("sends");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("reads");
        answer
    };
    let answer = get("/metrics");
    assert!(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
    assert!(
        answer.contains("\r\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"")
            || answer.contains("\nDCGM_FI_DEV_GPU_UTIL{gpu=\"0\"")
    );
    assert!(answer.contains("} 77\n"), "{answer}");
    assert!(get("/nothing").contains(" 404 "));
    drop(server);
}
