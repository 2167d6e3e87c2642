//! End-to-end tests of the NVML source: `NvmlSource` from the recorder's
//! library, through the real `nvml-wrapper` calls, against the fake
//! `libnvidia-ml.so` of `tests/fake-nvml`, asserting the exact values the
//! fake was told to report, in schema units.
//!
//! NVML is initialised once per process and the fake reads its scenario from
//! the environment at initialisation, so each scenario runs in a process of
//! its own: the test re-runs this test executable, filtered to itself, with
//! the scenario in the environment (`APRON_NVML_SCENARIO` names the test
//! that should play the child's part). Nothing here needs the
//! `apron-recorder` binary: the library is enough.
//!
//! The processes the fake reports are real (this test process, a `sleep`
//! it spawns), so their identity comes from the real `/proc`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use apron_recorder::source::nvml::{NvmlOpenError, NvmlSource};
use apron_recorder::source::{Source, Tick};
use apron_schemas::{GpuSample, ProcSample};

/// Names the test whose body a child process runs.
const SCENARIO_ENV: &str = "APRON_NVML_SCENARIO";
/// The fake library's path, handed from parent to child.
const FAKE_ENV: &str = "APRON_TEST_FAKE_NVML";
/// The pid of the `sleep` the parent spawned.
const SLEEP_PID_ENV: &str = "APRON_TEST_SLEEP_PID";
/// When the parent spawned it, ms since the epoch: `before,after`.
const SLEEP_START_ENV: &str = "APRON_TEST_SLEEP_START";

/// Tick `t` (from 1) is at this time plus `t - 1` intervals.
const T0_MS: i64 = 1_767_225_600_000;
const INTERVAL_MS: i32 = 1_000;
/// The fake's timestamp of the newest process-utilization sample at tick 0.
const PUTIL_BASE_US: u64 = 1_700_000_000_000_000;
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

// ---------------------------------------------------------------- plumbing

/// The fake NVML, built once per test process (only the `fake-nvml`
/// package, not the DataFusion-linked CLI).
fn fake_nvml() -> PathBuf {
    apron_tests::fake_nvml()
}

/// Whether this process is the child that plays `test`'s scenario.
fn in_child(test: &str) -> bool {
    std::env::var(SCENARIO_ENV).is_ok_and(|s| s == test)
}

/// Runs `test` again in a child process of this test executable, with `env`
/// (and the fake's path and a fresh `FAKE_NVML_LOG`) in its environment,
/// and fails unless that one test ran and passed there.
fn run_in_child(test: &str, env: &[(&str, String)]) {
    let logs = tempfile::tempdir().expect("a temporary folder");
    let exe = std::env::current_exe().expect("a test knows its own path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(SCENARIO_ENV, test)
        .env(FAKE_ENV, fake_nvml())
        .env("FAKE_NVML_LOG", logs.path().join("calls.log"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .expect("the test executable runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "scenario {test} failed in its own process:\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
}

/// A `sleep` process, killed and reaped when dropped.
struct Sleeper {
    child: Child,
    /// Wall-clock bounds of its start, ms since the epoch.
    started: (i64, i64),
}

impl Sleeper {
    fn spawn(env: &[(&str, &str)]) -> Sleeper {
        let before = now_ms();
        let child = Command::new("sleep")
            .arg("120")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .spawn()
            .expect("`sleep` runs");
        let after = now_ms();
        // spawn() returns once exec has closed the parent's pipe, a moment
        // before the kernel has laid out the new environment: until then
        // /proc/PID/environ reads empty. Wait for it, as a GPU process is
        // long past exec when NVML first lists it.
        let environ = format!("/proc/{}/environ", child.id());
        let t0 = std::time::Instant::now();
        while std::fs::read(&environ).map_or(true, |e| e.is_empty()) {
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "{environ} stays empty");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Sleeper { child, started: (before, after) }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The environment that tells a child which `sleep` this is.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (SLEEP_PID_ENV, self.pid().to_string()),
            (SLEEP_START_ENV, format!("{},{}", self.started.0, self.started.1)),
        ]
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        // Our own child, by its pid; it may have exited already.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970");
    i64::try_from(since.as_millis()).expect("ms since 1970 fit i64")
}

fn env_var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("the parent sets {name}"))
}

fn sleep_pid() -> u32 {
    env_var(SLEEP_PID_ENV).parse().expect("a pid")
}

fn own_pid() -> i32 {
    i32::try_from(std::process::id()).expect("pids fit i32")
}

/// Opens the NVML source on the fake, in a child.
fn open_fake() -> NvmlSource {
    let lib = PathBuf::from(env_var(FAKE_ENV));
    NvmlSource::open("node07".into(), Some(&lib)).expect("the fake NVML opens")
}

fn ts(tick: u64) -> i64 {
    T0_MS + i64::try_from(tick - 1).expect("few ticks") * i64::from(INTERVAL_MS)
}

/// Samples `n` ticks, one `Tick` each.
fn run_ticks(source: &mut NvmlSource, n: u64) -> Vec<Tick> {
    (1..=n)
        .map(|t| {
            let mut tick = Tick::default();
            source.sample(ts(t), INTERVAL_MS, &mut tick);
            tick
        })
        .collect()
}

/// One call the fake logged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Call {
    line: String,
    symbol: String,
    fields: Vec<(String, String)>,
}

impl Call {
    fn get(&self, key: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn calls() -> Vec<Call> {
    let log = std::fs::read_to_string(env_var("FAKE_NVML_LOG")).expect("the fake wrote its log");
    log.lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            let symbol = words.next().expect("a symbol").to_owned();
            let fields =
                words.filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            Call { line: line.to_owned(), symbol, fields }
        })
        .collect()
}

/// Each NVML query is made at most once per GPU per tick; the list queries
/// show up twice because `nvml-wrapper` asks for the count first.
fn assert_each_call_once_per_tick(calls: &[Call]) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for call in calls.iter().filter(|c| c.get("gpu").is_some() && c.get("tick").is_some()) {
        *seen.entry(&call.line).or_default() += 1;
    }
    for (line, count) in seen {
        let two_step =
            ["RunningProcesses_v3", "nvmlDeviceGetProcessUtilization"].iter().any(|s| line.contains(s));
        let allowed = if two_step { 2 } else { 1 };
        assert!(count <= allowed, "`{line}` made {count} times in one tick");
    }
}

/// The identity-free part of a process row, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ProcMetrics {
    gpu_uuid: String,
    pid: i32,
    used_mem_bytes: Option<i64>,
    sm_util_pct: Option<i32>,
    mem_util_pct: Option<i32>,
}

/// The rows' metrics, sorted.
fn proc_metrics(rows: &[ProcSample]) -> Vec<ProcMetrics> {
    let mut out: Vec<_> = rows
        .iter()
        .map(|r| ProcMetrics {
            gpu_uuid: r.gpu_uuid.to_string(),
            pid: r.pid,
            used_mem_bytes: r.used_mem_bytes,
            sm_util_pct: r.sm_util_pct,
            mem_util_pct: r.mem_util_pct,
        })
        .collect();
    out.sort();
    out
}

fn proc_row(gpu: &str, pid: u32, used: Option<u64>, sm: Option<i32>, mem: Option<i32>) -> ProcMetrics {
    ProcMetrics {
        gpu_uuid: gpu.to_owned(),
        pid: i32::try_from(pid).expect("pids fit i32"),
        used_mem_bytes: used.map(|u| i64::try_from(u).expect("fits")),
        sm_util_pct: sm,
        mem_util_pct: mem,
    }
}

/// The real uid of process `pid`, from `/proc/PID/status`.
fn real_uid(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status is readable");
    let line = status.lines().find(|l| l.starts_with("Uid:")).expect("status has a Uid line");
    line.split_whitespace().nth(1).expect("real uid").parse().expect("a number")
}

/// The name of `uid` in `/etc/passwd`, if it has one there.
fn passwd_name(uid: i64) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(':').collect();
        (fields.len() > 2 && fields[2].parse::<i64>().ok() == Some(uid)).then(|| fields[0].to_owned())
    })
}

// ------------------------------------------------------- fake GPU specs

/// What one fake GPU is told to report, in NVML's units.
#[derive(Debug, Clone)]
struct FakeGpu {
    uuid: &'static str,
    name: &'static str,
    util: u32,
    mem_util: u32,
    fb_total: u64,
    fb_used: u64,
    power: u32,
    power_limit: u32,
    energy: u64,
    energy_step: u64,
    sm_clock: u32,
    temp: u32,
    enc: u32,
    dec: u32,
    pcie_tx: u32,
    pcie_rx: u32,
    clock_reasons: u64,
    /// GPM metric values (sm, occupancy, tensor, dram); `None` for a metric
    /// the fake does not give; `None` overall: no GPM.
    gpm: Option<[Option<f64>; 4]>,
    unsupported: &'static str,
    fail_after: Option<u64>,
    compute: String,
    graphics: String,
    putil: String,
}

impl FakeGpu {
    fn new(uuid: &'static str, name: &'static str) -> FakeGpu {
        FakeGpu {
            uuid,
            name,
            util: 63,
            mem_util: 27,
            fb_total: 80 * GIB,
            fb_used: 31 * GIB + 5,
            power: 412_345,
            power_limit: 700_000,
            energy: 9_876_543_210,
            energy_step: 412_345,
            sm_clock: 1_980,
            temp: 61,
            enc: 3,
            dec: 4,
            pcie_tx: 1_500_000,
            pcie_rx: 2_250_001,
            clock_reasons: 0x1 | 0x4,
            gpm: None,
            unsupported: "",
            fail_after: None,
            compute: String::new(),
            graphics: String::new(),
            putil: String::new(),
        }
    }

    /// The `FAKE_NVML_GPUS` entry of this GPU.
    fn spec(&self) -> String {
        let mut spec = format!(
            "uuid={},name={},util={},mem_util={},fb_total={},fb_used={},power={},power_limit={},energy={},\
             energy_step={},sm_clock={},temp={},enc={},dec={},pcie_tx={},pcie_rx={},clock_reasons={}",
            self.uuid,
            self.name,
            self.util,
            self.mem_util,
            self.fb_total,
            self.fb_used,
            self.power,
            self.power_limit,
            self.energy,
            self.energy_step,
            self.sm_clock,
            self.temp,
            self.enc,
            self.dec,
            self.pcie_tx,
            self.pcie_rx,
            self.clock_reasons
        );
        if let Some(values) = self.gpm {
            spec.push_str(",gpm=1");
            for (key, value) in ["gpm_sm", "gpm_occ", "gpm_tensor", "gpm_dram"].iter().zip(values) {
                if let Some(value) = value {
                    spec.push_str(&format!(",{key}={value}"));
                }
            }
        }
        for (key, value) in [
            ("unsupported", self.unsupported),
            ("compute", &self.compute),
            ("graphics", &self.graphics),
            ("putil", &self.putil),
        ] {
            if !value.is_empty() {
                spec.push_str(&format!(",{key}={value}"));
            }
        }
        if let Some(n) = self.fail_after {
            spec.push_str(&format!(",fail_after={n}"));
        }
        spec
    }

    /// The row the recorder should write for this GPU at `tick`: NVML's
    /// values in schema units (PCIe KB/s × 1024), GPM from the second tick.
    fn expected(&self, index: i32, tick: u64) -> GpuSample {
        let i32_of = |v: u32| i32::try_from(v).expect("fits");
        let i64_of = |v: u64| i64::try_from(v).expect("fits");
        let gpm = |i: usize| if tick > 1 { self.gpm.and_then(|g| g[i]).map(|v| v as f32) } else { None };
        GpuSample {
            ts: ts(tick),
            gpu_uuid: self.uuid.into(),
            gpu_index: index,
            gpu_model: Some(self.name.into()),
            interval_ms: INTERVAL_MS,
            gpu_util_pct: Some(i32_of(self.util)),
            mem_util_pct: Some(i32_of(self.mem_util)),
            fb_used_bytes: Some(i64_of(self.fb_used)),
            fb_total_bytes: Some(i64_of(self.fb_total)),
            power_mw: Some(i32_of(self.power)),
            power_limit_mw: Some(i32_of(self.power_limit)),
            energy_mj: Some(i64_of(self.energy + (tick - 1) * self.energy_step)),
            sm_clock_mhz: Some(i32_of(self.sm_clock)),
            temp_c: Some(i32_of(self.temp)),
            enc_util_pct: Some(i32_of(self.enc)),
            dec_util_pct: Some(i32_of(self.dec)),
            pcie_tx_bytes_per_s: Some(i64::from(self.pcie_tx) * 1024),
            pcie_rx_bytes_per_s: Some(i64::from(self.pcie_rx) * 1024),
            clock_event_reasons: Some(i64_of(self.clock_reasons)),
            sm_active_pct: gpm(0),
            sm_occupancy_pct: gpm(1),
            tensor_active_pct: gpm(2),
            dram_active_pct: gpm(3),
        }
    }
}

fn gpus_env(gpus: &[FakeGpu]) -> (&'static str, String) {
    ("FAKE_NVML_GPUS", gpus.iter().map(FakeGpu::spec).collect::<Vec<_>>().join(";"))
}

// ------------------------------------------------------------ scenarios

/// Two GPUs, the first with GPM; this test process and a `sleep` hold
/// memory on both, as compute and graphics processes.
fn two_gpus(sleep: u32) -> Vec<FakeGpu> {
    let mut h100 = FakeGpu::new("GPU-0aa1b2c3-d4e5-f607-1829-3a4b5c6d7e8f", "NVIDIA H100 80GB HBM3");
    h100.gpm = Some([Some(71.25), Some(33.5), Some(12.75), Some(48.0)]);
    h100.compute = format!("self:{}|{sleep}:{}", 3 * GIB, 512 * MIB);
    // The sleep also has a graphics context: one process, one amount.
    h100.graphics = format!("{sleep}:{}", 512 * MIB);
    h100.putil = format!("self:55:21|{sleep}:7:3");
    let mut a100 = FakeGpu::new("GPU-1bb2c3d4-e5f6-0718-293a-4b5c6d7e8f90", "NVIDIA A100-SXM4-40GB");
    a100.util = 0;
    a100.fb_total = 40 * GIB;
    a100.fb_used = 2 * GIB;
    a100.power = 61_000;
    a100.power_limit = 400_000;
    a100.energy = 123;
    a100.energy_step = 61_000;
    a100.clock_reasons = 0x1;
    a100.compute = format!("{sleep}:na");
    a100.graphics = format!("self:{}", 2 * GIB);
    a100.putil = format!("{sleep}:0:0");
    vec![h100, a100]
}

#[test]
fn two_gpus_with_processes() {
    const TEST: &str = "two_gpus_with_processes";
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[]);
        let mut env = sleeper.env();
        env.push(gpus_env(&two_gpus(sleeper.pid())));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let me = std::process::id();
    let gpus = two_gpus(sleep);
    let mut source = open_fake();
    assert_eq!(source.host(), "node07");
    let ticks = run_ticks(&mut source, 3);

    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        assert_eq!(tick.gpus, [gpus[0].expected(0, t), gpus[1].expected(1, t)], "tick {t}");
        let (h100, a100) = (gpus[0].uuid, gpus[1].uuid);
        let mut want = vec![
            proc_row(h100, me, Some(3 * GIB), Some(55), Some(21)),
            proc_row(h100, sleep, Some(512 * MIB), Some(7), Some(3)),
            // NVML hides the sleep's memory on this GPU; its utilization
            // sample says a measured 0.
            proc_row(a100, sleep, None, Some(0), Some(0)),
            // No utilization sample for this process on this GPU.
            proc_row(a100, me, Some(2 * GIB), None, None),
        ];
        want.sort();
        assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
        for row in &tick.procs {
            assert_eq!((row.ts, row.interval_ms), (ts(t), INTERVAL_MS));
        }
    }

    // Identity from the real /proc.
    let own_comm = std::fs::read_to_string("/proc/self/comm").expect("own comm");
    for row in &ticks[2].procs {
        let (comm, uid) = if row.pid == own_pid() {
            (own_comm.trim_end(), real_uid(me))
        } else {
            ("sleep", real_uid(sleep))
        };
        assert_eq!(row.identity.comm.as_deref(), Some(comm), "{row:?}");
        assert_eq!(row.identity.uid, Some(uid), "{row:?}");
        assert!(row.identity.proc_start.is_some(), "{row:?}");
    }

    let calls = calls();
    assert_each_call_once_per_tick(&calls);
    // The newest utilization timestamp seen is fed back at the next tick.
    for gpu in ["0", "1"] {
        let last_seen: Vec<u64> = calls
            .iter()
            .filter(|c| c.symbol == "nvmlDeviceGetProcessUtilization" && c.get("gpu") == Some(gpu))
            .map(|c| c.get("last_seen").expect("logged").parse().expect("a number"))
            .collect();
        let mut want = Vec::new();
        for t in 0..3u64 {
            let seen = if t == 0 { 0 } else { PUTIL_BASE_US + t * 1_000_000 };
            // The count query, then the query that fills the samples.
            want.extend([seen, seen]);
        }
        assert_eq!(last_seen, want, "GPU {gpu}");
    }
    // GPM samples are freed once the next tick has used them.
    let allocs = calls.iter().filter(|c| c.symbol == "nvmlGpmSampleAlloc").count();
    let frees = calls.iter().filter(|c| c.symbol == "nvmlGpmSampleFree").count();
    assert_eq!((allocs, frees), (3, 2));
    // GPM is only asked of the GPU that has it.
    assert!(calls.iter().filter(|c| c.symbol == "nvmlGpmSampleGet").all(|c| c.get("gpu") == Some("0")));
}

#[test]
fn not_supported_metrics_are_null_not_zero() {
    const TEST: &str = "not_supported_metrics_are_null_not_zero";
    let gpus = || {
        let mut old = FakeGpu::new("GPU-20000000-0000-0000-0000-000000000002", "Tesla T4");
        old.unsupported = "power|energy|pcie|clock_reasons|enc|graphics|gpm";
        // A GPM GPU asked to say no (unsupported=gpm).
        old.gpm = Some([Some(1.0); 4]);
        // Measured zeros stay zeros.
        old.util = 0;
        old.fb_used = 0;
        old.dec = 0;
        old.compute = "self:4096".into();
        let mut partial = FakeGpu::new("GPU-30000000-0000-0000-0000-000000000003", "NVIDIA H200");
        partial.gpm = Some([Some(5.5), None, None, Some(0.0)]);
        vec![old, partial]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "not supported is not a failure: {:?}", tick.failures);
        let mut old = gpus[0].expected(0, t);
        old.power_mw = None;
        old.energy_mj = None;
        old.pcie_tx_bytes_per_s = None;
        old.pcie_rx_bytes_per_s = None;
        old.clock_event_reasons = None;
        old.enc_util_pct = None;
        old.sm_active_pct = None;
        old.sm_occupancy_pct = None;
        old.tensor_active_pct = None;
        old.dram_active_pct = None;
        assert_eq!(old.gpu_util_pct, Some(0));
        assert_eq!(old.fb_used_bytes, Some(0));
        assert_eq!(tick.gpus, [old, gpus[1].expected(1, t)], "tick {t}");
        // The graphics list is not supported; the compute list still counts.
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(gpus[0].uuid, std::process::id(), Some(4096), None, None)]
        );
    }
    assert_eq!(ticks[1].gpus[1].sm_active_pct, Some(5.5));
    assert_eq!(ticks[1].gpus[1].sm_occupancy_pct, None);
    assert_eq!(ticks[1].gpus[1].dram_active_pct, Some(0.0));
    assert!(!calls().iter().any(|c| c.symbol == "nvmlGpmSampleGet" && c.get("gpu") == Some("0")));
}

#[test]
fn process_utilization_not_found_means_no_samples() {
    const TEST: &str = "process_utilization_not_found_means_no_samples";
    let gpus = || {
        let mut gpu = FakeGpu::new("GPU-40000000-0000-0000-0000-000000000004", "NVIDIA L40S");
        gpu.compute = format!("self:{}", 7 * GIB + 3);
        gpu.putil = "notfound".into();
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "NotFound is not a failure: {:?}", tick.failures);
        assert_eq!(tick.gpus, [gpus[0].expected(0, t)]);
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(gpus[0].uuid, std::process::id(), Some(7 * GIB + 3), None, None)]
        );
    }
    // Nothing was seen, so nothing newer is asked for.
    let putil: Vec<_> =
        calls().into_iter().filter(|c| c.symbol == "nvmlDeviceGetProcessUtilization").collect();
    assert_eq!(putil.len(), 2, "{putil:?}");
    assert!(putil.iter().all(|c| c.get("last_seen") == Some("0")), "{putil:?}");
}

#[test]
fn a_lost_gpu_fails_while_the_other_keeps_recording() {
    const TEST: &str = "a_lost_gpu_fails_while_the_other_keeps_recording";
    let gpus = || {
        let mut lost = FakeGpu::new("GPU-50000000-0000-0000-0000-000000000005", "NVIDIA H100 80GB HBM3");
        lost.fail_after = Some(2);
        lost.gpm = Some([Some(10.0); 4]);
        lost.compute = format!("self:{GIB}");
        let mut fine = FakeGpu::new("GPU-60000000-0000-0000-0000-000000000006", "NVIDIA H100 80GB HBM3");
        fine.compute = format!("self:{}", 2 * GIB);
        fine.putil = "self:90:40".into();
        vec![lost, fine]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let me = std::process::id();
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 4);
    for (t, tick) in (1..).zip(&ticks) {
        let fine_proc = proc_row(gpus[1].uuid, me, Some(2 * GIB), Some(90), Some(40));
        if t <= 2 {
            assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
            assert_eq!(tick.gpus, [gpus[0].expected(0, t), gpus[1].expected(1, t)], "tick {t}");
            let mut want = vec![proc_row(gpus[0].uuid, me, Some(GIB), None, None), fine_proc];
            want.sort();
            assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
        } else {
            assert_eq!(tick.gpus, [gpus[1].expected(1, t)], "tick {t}");
            assert_eq!(proc_metrics(&tick.procs), [fine_proc], "tick {t}");
            let [failure] = tick.failures.as_slice() else {
                panic!("tick {t}: one failure: {:?}", tick.failures)
            };
            assert_eq!(failure.gpu_index, 0);
            assert_eq!(failure.gpu_uuid.as_deref(), Some(gpus[0].uuid));
            assert!(failure.error.contains("utilization"), "{}", failure.error);
            assert!(failure.error.contains("fell off the bus"), "{}", failure.error);
        }
    }
    // A lost GPU is asked once per tick, not queried metric by metric.
    let calls = calls();
    let lost_after: Vec<_> = calls
        .iter()
        .filter(|c| {
            c.get("gpu") == Some("0")
                && c.get("tick").and_then(|t| t.parse::<u64>().ok()).is_some_and(|t| t > 2)
        })
        .map(|c| c.symbol.as_str())
        .collect();
    assert_eq!(lost_after, ["nvmlDeviceGetUtilizationRates", "nvmlDeviceGetUtilizationRates"]);
    assert_each_call_once_per_tick(&calls);
}

#[test]
fn identity_of_a_real_process() {
    const TEST: &str = "identity_of_a_real_process";
    let gpus = |sleep: u32| {
        let mut gpu = FakeGpu::new("GPU-70000000-0000-0000-0000-000000000007", "NVIDIA H100 80GB HBM3");
        gpu.compute = format!("{sleep}:{GIB}");
        vec![gpu]
    };
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[
            ("SLURM_JOB_ACCOUNT", "vision"),
            ("SLURM_JOB_ID", "4242"),
            ("POD_NAMESPACE", "team-a"),
            ("APRON_TEST_SECRET", "hunter2"),
        ]);
        let mut env = sleeper.env();
        env.push(gpus_env(&gpus(sleeper.pid())));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let (before, after) = env_var(SLEEP_START_ENV)
        .split_once(',')
        .map(|(b, a)| (b.parse::<i64>().expect("ms"), a.parse::<i64>().expect("ms")))
        .expect("before,after");
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    let identity = &ticks[0].procs[0].identity;
    assert_eq!(ticks[0].procs[0].pid, i32::try_from(sleep).expect("fits"));
    assert_eq!(identity.comm.as_deref(), Some("sleep"));
    let uid = real_uid(sleep);
    assert_eq!(identity.uid, Some(uid));
    assert_eq!(identity.user.as_deref(), passwd_name(uid).as_deref());
    // The kernel counts start times in clock ticks since boot, and boot
    // time in whole seconds: a second of slack either side.
    let start = identity.proc_start.expect("the start time is readable");
    assert!(
        start >= before - 1_000 && start <= after + 1_000,
        "start {start} not in [{before}, {after}] ± 1 s"
    );
    // From the environment it was started with, and only the identity
    // variables; the cgroup path, when it names a Slurm job, wins.
    let cgroup = std::fs::read_to_string(format!("/proc/{sleep}/cgroup")).unwrap_or_default();
    let from_cgroup = apron_recorder::identity::parse_cgroup_file(&cgroup);
    assert_eq!(identity.slurm_account.as_deref(), Some("vision"));
    assert_eq!(identity.k8s_namespace.as_deref(), Some("team-a"));
    assert_eq!(identity.slurm_job_id.as_deref(), from_cgroup.slurm_job_id.as_deref().or(Some("4242")));
    assert_eq!(identity.container_id.as_deref(), from_cgroup.container_id.as_deref());
    assert_eq!(identity.k8s_pod_uid.as_deref(), from_cgroup.k8s_pod_uid.as_deref());
    assert!(!format!("{identity:?}").contains("hunter2"));
    // The same process at the next tick: the same identity.
    assert_eq!(&ticks[1].procs[0].identity, identity);
}

#[test]
fn driver_not_loaded_names_the_driver_and_suggests_sim() {
    const TEST: &str = "driver_not_loaded_names_the_driver_and_suggests_sim";
    if !in_child(TEST) {
        // NVML_ERROR_DRIVER_NOT_LOADED from nvmlInit_v2.
        run_in_child(TEST, &[("FAKE_NVML_INIT_RETURN", "9".into())]);
        return;
    }
    let lib = PathBuf::from(env_var(FAKE_ENV));
    let error = NvmlSource::open("node07".into(), Some(&lib)).expect_err("the driver is not loaded");
    assert!(matches!(error, NvmlOpenError::DriverNotLoaded { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&lib.display().to_string()), "{message}");
    assert!(message.contains("driver is not loaded"), "{message}");
    assert!(message.contains("--source sim"), "{message}");
    assert!(std::error::Error::source(&error).is_some());
}

/// The library alone reports a missing NVML: no binary, no fake, no child
/// process (NVML is never initialised in this process).
#[test]
fn missing_library_names_libnvidia_ml_and_suggests_sim() {
    let lib = Path::new("/nonexistent/apron/libnvidia-ml.so.1");
    let error = NvmlSource::open("node07".into(), Some(lib)).expect_err("nothing to load there");
    assert!(matches!(error, NvmlOpenError::LibraryMissing { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("libnvidia-ml"), "{message}");
    assert!(message.contains("--source sim"), "{message}");
    let cause = std::error::Error::source(&error).expect("the loader's error is kept").to_string();
    assert!(cause.contains("/nonexistent/apron/libnvidia-ml.so.1"), "{cause}");
}

/// The real NVML of a GPU machine: run with `cargo test -p apron-tests
/// --test nvml -- --ignored real_gpus`. Checks plausibility, not values.
#[test]
#[ignore = "needs an NVIDIA GPU and its driver"]
fn real_gpus_sample_plausibly() {
    let mut source = NvmlSource::open("gpu-host".into(), None).expect("NVML opens on a GPU machine");
    let mut ticks = Vec::new();
    for t in 1..=3 {
        let mut tick = Tick::default();
        source.sample(ts(t), INTERVAL_MS, &mut tick);
        ticks.push(tick);
        // GPM and process utilization need time to pass between ticks.
        std::thread::sleep(std::time::Duration::from_millis(u64::try_from(INTERVAL_MS).expect("positive")));
    }
    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        assert!(!tick.gpus.is_empty(), "a GPU machine has GPUs");
        for gpu in &tick.gpus {
            assert!(gpu.gpu_uuid.starts_with("GPU-") || gpu.gpu_uuid.starts_with("MIG-"), "{gpu:?}");
            assert!(gpu.gpu_util_pct.is_some_and(|u| (0..=100).contains(&u)), "{gpu:?}");
            assert!(gpu.fb_total_bytes.is_some_and(|b| b > 0), "{gpu:?}");
            assert!(gpu.fb_used_bytes.is_some_and(|b| b >= 0), "{gpu:?}");
            assert!(gpu.power_mw.is_some_and(|p| p > 0), "{gpu:?}");
            assert!(gpu.temp_c.is_some(), "{gpu:?}");
            let hopper = gpu.gpu_model.as_deref().is_some_and(|m| m.contains("H100") || m.contains("H200"));
            if hopper && t > 1 {
                assert!(gpu.sm_active_pct.is_some_and(|v| (0.0..=100.0).contains(&v)), "GPM on {gpu:?}");
            }
        }
        for proc in &tick.procs {
            assert!(proc.identity.comm.is_some(), "{proc:?}");
        }
    }
    println!("{:#?}", ticks[2]);
}
