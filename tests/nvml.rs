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
use apron_schemas::{GpuSample, ProcSample};
use apron_store::source::{Source, Tick};

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
    run_in_child_via(&[], test, env);
}

/// [`run_in_child`], the child started through `wrapper` (a command and
/// its arguments, e.g. `unshare …`) when not empty. A child that has not
/// finished within two minutes is killed and the test fails.
fn run_in_child_via(wrapper: &[&str], test: &str, env: &[(&str, String)]) {
    let logs = tempfile::tempdir().expect("a temporary folder");
    let exe = std::env::current_exe().expect("a test knows its own path");
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(exe);
            cmd
        }
        None => Command::new(exe),
    };
    let child = cmd
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(SCENARIO_ENV, test)
        .env(FAKE_ENV, fake_nvml())
        .env("FAKE_NVML_LOG", logs.path().join("calls.log"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the test executable runs");
    let output = apron_tests::wait_with_timeout(child, std::time::Duration::from_secs(120));
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
    run_ticks_at(source, (1..=n).map(ts))
}

/// Samples one tick at each time of `times` (ms since the epoch).
fn run_ticks_at(source: &mut NvmlSource, times: impl IntoIterator<Item = i64>) -> Vec<Tick> {
    times
        .into_iter()
        .map(|at| {
            let mut tick = Tick::default();
            source.sample(at, INTERVAL_MS, &mut tick);
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

/// The error counters' queries: made once a minute, several times each
/// (one per counter), checked by `xid_ecc_counters_and_lost_gpus_are_events`.
const COUNTER_CALLS: [&str; 7] = [
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkErrorCounter",
];

/// Each NVML query is made at most once per GPU per tick; the list queries
/// show up twice because `nvml-wrapper` asks for the count first.
fn assert_each_call_once_per_tick(calls: &[Call]) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let sampled = |c: &&Call| !COUNTER_CALLS.iter().any(|s| c.symbol.starts_with(s));
    // Tick 0 is the opening, where the event thread reads each GPU's UUID too.
    let ticked = |c: &&Call| c.get("gpu").is_some() && c.get("tick").is_some_and(|t| t != "0");
    for call in calls.iter().filter(ticked).filter(sampled) {
        *seen.entry(&call.line).or_default() += 1;
    }
    for (line, count) in seen {
        let two_step =
            ["RunningProcesses_v", "nvmlDeviceGetProcessUtilization"].iter().any(|s| line.contains(s));
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
    gpm: Option<[Option<f64>; 5]>,
    unsupported: &'static str,
    fail_after: Option<u64>,
    compute: String,
    graphics: String,
    mps: String,
    putil: String,
    /// More `key=value` items, appended as they are.
    extra: String,
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
            mps: String::new(),
            putil: String::new(),
            extra: String::new(),
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
            for (key, value) in ["gpm_sm", "gpm_occ", "gpm_tensor", "gpm_dram", "gpm_gr"].iter().zip(values) {
                if let Some(value) = value {
                    spec.push_str(&format!(",{key}={value}"));
                }
            }
        }
        for (key, value) in [
            ("unsupported", self.unsupported),
            ("compute", &self.compute),
            ("graphics", &self.graphics),
            ("mps", &self.mps),
            ("putil", &self.putil),
        ] {
            if !value.is_empty() {
                spec.push_str(&format!(",{key}={value}"));
            }
        }
        if let Some(n) = self.fail_after {
            spec.push_str(&format!(",fail_after={n}"));
        }
        if !self.extra.is_empty() {
            spec.push_str(&format!(",{}", self.extra));
        }
        spec
    }

    /// The row the recorder should write for this GPU at `tick`: NVML's
    /// values in schema units, GPM and PCIe from the second tick (both are
    /// differences of two readings: PCIe of the byte counters, which grow
    /// by the fake's KB/s × 1024 bytes a tick).
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
            pcie_tx_bytes_per_s: (tick > 1).then(|| i64::from(self.pcie_tx) * 1024),
            pcie_rx_bytes_per_s: (tick > 1).then(|| i64::from(self.pcie_rx) * 1024),
            clock_event_reasons: Some(i64_of(self.clock_reasons)),
            sm_active_pct: gpm(0),
            sm_occupancy_pct: gpm(1),
            tensor_active_pct: gpm(2),
            dram_active_pct: gpm(3),
            gr_engine_active_pct: gpm(4),
            parent_gpu_uuid: None,
            mig_profile: None,
            mig_slices: None,
            mig_total_slices: None,
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
    h100.gpm = Some([Some(71.25), Some(33.5), Some(12.75), Some(48.0), Some(88.5)]);
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
            // No utilization sample for this process on this GPU: it
            // computed nothing, a measured 0.
            proc_row(a100, me, Some(2 * GIB), Some(0), Some(0)),
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
        old.gpm = Some([Some(1.0); 5]);
        // Measured zeros stay zeros.
        old.util = 0;
        old.fb_used = 0;
        old.dec = 0;
        old.compute = "self:4096".into();
        let mut partial = FakeGpu::new("GPU-30000000-0000-0000-0000-000000000003", "NVIDIA H200");
        partial.gpm = Some([Some(5.5), None, None, Some(0.0), None]);
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
        old.gr_engine_active_pct = None;
        assert_eq!(old.gpu_util_pct, Some(0));
        assert_eq!(old.fb_used_bytes, Some(0));
        assert_eq!(tick.gpus, [old, gpus[1].expected(1, t)], "tick {t}");
        // The graphics list is not supported; the compute list still counts,
        // and its process, without a utilization sample, is idle.
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(gpus[0].uuid, std::process::id(), Some(4096), Some(0), Some(0))]
        );
        // Counted at every tick.
        assert_eq!(tick.refusals, 1, "tick {t}");
    }
    assert_eq!(ticks[1].gpus[1].sm_active_pct, Some(5.5));
    assert_eq!(ticks[1].gpus[1].sm_occupancy_pct, None);
    assert_eq!(ticks[1].gpus[1].dram_active_pct, Some(0.0));
    assert_eq!(ticks[1].gpus[1].gr_engine_active_pct, None, "not given: NOT_SUPPORTED");
    assert!(!calls().iter().any(|c| c.symbol == "nvmlGpmSampleGet" && c.get("gpu") == Some("0")));
}

#[test]
fn process_utilization_not_found_means_idle() {
    const TEST: &str = "process_utilization_not_found_means_idle";
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
        // No sample newer than the last: the process computed nothing.
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(gpus[0].uuid, std::process::id(), Some(7 * GIB + 3), Some(0), Some(0))]
        );
        assert_eq!(tick.refusals, 0);
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
        lost.gpm = Some([Some(10.0); 5]);
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
            // Without a utilization sample: idle.
            let mut want = vec![proc_row(gpus[0].uuid, me, Some(GIB), Some(0), Some(0)), fine_proc];
            want.sort();
            assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
        } else {
            assert_eq!(tick.gpus, [gpus[1].expected(1, t)], "tick {t}");
            assert_eq!(proc_metrics(&tick.procs), [fine_proc], "tick {t}");
            let [failure] = tick.failures.as_slice() else {
                panic!("tick {t}: one failure: {:?}", tick.failures)
            };
            assert_eq!(failure.gpu_index, 0);
            assert!(!failure.stalled);
            assert!(failure.error.contains("fell off the bus"), "{}", failure.error);
            if t == 3 {
                assert_eq!(failure.gpu_uuid.as_deref(), Some(gpus[0].uuid));
                assert!(failure.error.contains("utilization"), "{}", failure.error);
            } else {
                // Then it asks for a fresh handle, which would work after a
                // reset.
                assert!(failure.error.contains("handle"), "{}", failure.error);
            }
        }
    }
    // A lost GPU is asked once per tick, not queried metric by metric.
    let calls = calls();
    let gpu0: Vec<_> =
        calls.iter().filter(|c| c.get("gpu") == Some("0")).map(|c| c.symbol.as_str()).collect();
    let from_tick_3 = gpu0.iter().rposition(|s| *s == "nvmlDeviceGetUtilizationRates").expect("sampled");
    assert_eq!(gpu0[from_tick_3..], ["nvmlDeviceGetUtilizationRates", "nvmlDeviceGetHandleByIndex_v2"]);
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
    // The environment it was started with, only the identity variables,
    // as claims; its job, pod and container only from its cgroup path.
    let cgroup = std::fs::read_to_string(format!("/proc/{sleep}/cgroup")).unwrap_or_default();
    let from_cgroup = apron_recorder::identity::parse_cgroup_file(&cgroup);
    assert_eq!(identity.claimed_slurm_account.as_deref(), Some("vision"));
    assert_eq!(identity.claimed_k8s_namespace.as_deref(), Some("team-a"));
    assert_eq!(identity.claimed_slurm_job_id.as_deref(), Some("4242"));
    assert_eq!((identity.slurm_account.as_deref(), identity.k8s_namespace.as_deref()), (None, None));
    assert_eq!(identity.slurm_job_id.as_deref(), from_cgroup.slurm_job_id.as_deref());
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

// ------------------------------------------------- what real drivers do

/// The fake's sample clock at tick `t`, as a tick time (ms): tests of the
/// utilization clock tick on the same clock as the samples.
fn fake_clock_ms(t: u64) -> i64 {
    i64::try_from(PUTIL_BASE_US / 1000 + t * 1000).expect("fits")
}

/// A GPU whose compute processes are this test process and the sleep.
fn gpu_with_two_processes(uuid: &'static str, sleep: u32) -> FakeGpu {
    let mut gpu = FakeGpu::new(uuid, "NVIDIA A100-SXM4-80GB");
    gpu.compute = format!("self:{}|{sleep}:{}", 3 * GIB + 7, 512 * MIB + 9);
    gpu.putil = format!("self:55:21|{sleep}:7:3");
    gpu
}

/// The process rows of `gpu_with_two_processes`, as read correctly.
fn two_process_rows(uuid: &str, sleep: u32) -> Vec<ProcMetrics> {
    let mut want = vec![
        proc_row(uuid, std::process::id(), Some(3 * GIB + 7), Some(55), Some(21)),
        proc_row(uuid, sleep, Some(512 * MIB + 9), Some(7), Some(3)),
    ];
    want.sort();
    want
}

fn process_list_calls() -> Vec<String> {
    let mut symbols: Vec<String> =
        calls().into_iter().filter(|c| c.symbol.contains("RunningProcesses")).map(|c| c.symbol).collect();
    symbols.sort();
    symbols.dedup();
    symbols
}

#[test]
fn r535_early_drivers_fill_32_byte_process_entries() {
    const TEST: &str = "r535_early_drivers_fill_32_byte_process_entries";
    const UUID: &str = "GPU-a5350000-0000-0000-0000-000000000001";
    /// Many processes: 32-byte entries in a buffer sized for 24-byte ones
    /// would overrun it.
    const MANY: u32 = 40;
    // The pid and used memory of the many processes (host pids this /proc
    // does not have: only the metrics matter here).
    let many = |i: u32| (4_194_400 + i, u64::from(i) * MIB + 11);
    let gpus = |sleep: u32| {
        let mut gpu = gpu_with_two_processes(UUID, sleep);
        for (pid, used) in (0..MANY).map(many) {
            gpu.compute.push_str(&format!("|{pid}:{used}"));
        }
        vec![gpu]
    };
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[]);
        let mut env = sleeper.env();
        env.push(gpus_env(&gpus(sleeper.pid())));
        env.push(("FAKE_NVML_DRIVER", "535.54.03".into()));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let mut source = open_fake();
    assert_eq!(source.driver_version(), Some("535.54.03"));
    let mut want = two_process_rows(UUID, sleep);
    want.extend((0..MANY).map(many).map(|(pid, used)| proc_row(UUID, pid, Some(used), Some(0), Some(0))));
    want.sort();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 2)) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
    }
    assert!(process_list_calls().iter().all(|s| s.ends_with("_v3")), "{:?}", process_list_calls());
}

#[test]
fn r535_98_has_no_v3_process_calls() {
    const TEST: &str = "r535_98_has_no_v3_process_calls";
    const UUID: &str = "GPU-a5359800-0000-0000-0000-000000000001";
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[]);
        let mut env = sleeper.env();
        env.push(gpus_env(&[gpu_with_two_processes(UUID, sleeper.pid())]));
        env.push(("FAKE_NVML_DRIVER", "535.98.02".into()));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let mut source = open_fake();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 2)) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        assert_eq!(proc_metrics(&tick.procs), two_process_rows(UUID, sleep), "tick {t}");
        assert_eq!(tick.refusals, 0, "tick {t}");
    }
    // The lists come from the `_v2` calls, the only ones this driver has.
    let symbols = process_list_calls();
    assert!(symbols.iter().all(|s| s.ends_with("_v2")), "{symbols:?}");
    assert!(symbols.iter().any(|s| s == "nvmlDeviceGetComputeRunningProcesses_v2"), "{symbols:?}");
    assert_each_call_once_per_tick(&calls());
}

#[test]
fn mps_clients_are_attributed() {
    const TEST: &str = "mps_clients_are_attributed";
    const UUID: &str = "GPU-3b500000-0000-0000-0000-000000000001";
    let gpus = |sleep: u32| {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA H100 80GB HBM3");
        // This process plays the MPS server; the sleep is its client.
        gpu.compute = format!("self:{}", 300 * MIB);
        gpu.mps = format!("{sleep}:{}", 6 * GIB);
        gpu.putil = format!("{sleep}:81:30");
        vec![gpu]
    };
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[]);
        let mut env = sleeper.env();
        env.push(gpus_env(&gpus(sleeper.pid())));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    let mut want = vec![
        proc_row(UUID, std::process::id(), Some(300 * MIB), Some(0), Some(0)),
        proc_row(UUID, sleep, Some(6 * GIB), Some(81), Some(30)),
    ];
    want.sort();
    for tick in &ticks {
        assert_eq!(proc_metrics(&tick.procs), want);
    }
    let client =
        ticks[1].procs.iter().find(|p| p.pid == i32::try_from(sleep).expect("fits")).expect("listed");
    assert_eq!(client.identity.comm.as_deref(), Some("sleep"));
}

#[test]
fn utilization_samples_are_filtered_and_idle_processes_are_zero() {
    const TEST: &str = "utilization_samples_are_filtered_and_idle_processes_are_zero";
    const UUID: &str = "GPU-f1170000-0000-0000-0000-000000000001";
    let gpus = |sleep: u32, idle: u32| {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA L4");
        gpu.compute = format!("self:{GIB}|{sleep}:{}|{idle}:{}", 2 * GIB, 3 * GIB);
        // The sleep's samples are impossible (smUtil 250); a pid not on
        // the list has samples; the idle process has none.
        gpu.putil = format!("self:55:21|{sleep}:250:3|4194500:90:90");
        // Between the count query and the fill, 64 more samples arrive.
        gpu.extra = "putil_burst=64".into();
        vec![gpu]
    };
    if !in_child(TEST) {
        let (sleeper, idle) = (Sleeper::spawn(&[]), Sleeper::spawn(&[]));
        let mut env = sleeper.env();
        env.push(("APRON_TEST_IDLE_PID", idle.pid().to_string()));
        env.push(gpus_env(&gpus(sleeper.pid(), idle.pid())));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let idle: u32 = env_var("APRON_TEST_IDLE_PID").parse().expect("a pid");
    let mut source = open_fake();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 3)) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        let mut want = vec![
            proc_row(UUID, std::process::id(), Some(GIB), Some(55), Some(21)),
            // Only impossible samples: unknown, not 250 and not 0.
            proc_row(UUID, sleep, Some(2 * GIB), None, None),
            // No sample: it computed nothing.
            proc_row(UUID, idle, Some(3 * GIB), Some(0), Some(0)),
        ];
        want.sort();
        assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
    }
    // The query that found its buffer too small was made again.
    let fills = calls().iter().filter(|c| c.symbol == "nvmlDeviceGetProcessUtilization").count();
    assert_eq!(fills, 3 * 3, "count, a fill too small, a fill that fits, at each tick");
}

#[test]
fn stale_samples_do_not_keep_a_process_busy() {
    const TEST: &str = "stale_samples_do_not_keep_a_process_busy";
    const UUID: &str = "GPU-57a1e000-0000-0000-0000-000000000001";
    let gpus = || {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA L4");
        gpu.compute = format!("self:{GIB}");
        gpu.putil = "self:55:21".into();
        // It computes at tick 1 only, and the driver hands back old
        // samples whatever last seen it is given.
        gpu.extra = "putil_until=1,putil_stale=1".into();
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 3);
    let me = std::process::id();
    assert_eq!(proc_metrics(&ticks[0].procs), [proc_row(UUID, me, Some(GIB), Some(55), Some(21))]);
    for (t, tick) in (2..).zip(&ticks[1..]) {
        assert_eq!(proc_metrics(&tick.procs), [proc_row(UUID, me, Some(GIB), Some(0), Some(0))], "tick {t}");
    }
}

#[test]
fn a_clock_step_back_does_not_hide_new_samples() {
    const TEST: &str = "a_clock_step_back_does_not_hide_new_samples";
    const UUID: &str = "GPU-c10c0000-0000-0000-0000-000000000001";
    const BACK_S: u64 = 3_600;
    let gpus = || {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA L4");
        gpu.compute = format!("self:{GIB}");
        gpu.putil = "self:55:21".into();
        gpu.extra = format!("putil_back_at=4,putil_back_s={BACK_S}");
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let mut source = open_fake();
    // The tick loop's clock and the samples' clock are the same clock: both
    // step back an hour before tick 4.
    let back_ms = i64::try_from(BACK_S * 1000).expect("fits");
    let times = (1..=6).map(|t| if t >= 4 { fake_clock_ms(t) - back_ms } else { fake_clock_ms(t) });
    let me = std::process::id();
    for (t, tick) in (1..).zip(run_ticks_at(&mut source, times)) {
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(UUID, me, Some(GIB), Some(55), Some(21))],
            "tick {t}"
        );
    }
}

#[test]
fn refused_queries_are_unknown_and_counted() {
    const TEST: &str = "refused_queries_are_unknown_and_counted";
    let gpus = || {
        let mut denied = FakeGpu::new("GPU-de000000-0000-0000-0000-000000000001", "NVIDIA A10");
        denied.compute = format!("self:{GIB}");
        denied.putil = "self:55:21".into();
        denied.extra = "deny=putil".into();
        let mut old = FakeGpu::new("GPU-de000000-0000-0000-0000-000000000002", "Tesla V100");
        old.graphics = format!("self:{GIB}");
        old.putil = "self:12:5".into();
        old.extra = "missing=compute|mps,unsupported=clock_reasons".into();
        vec![denied, old]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let me = std::process::id();
    let mut source = open_fake();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 2)) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        let mut want = vec![
            // Not permitted: unknown, never 0.
            proc_row(gpus[0].uuid, me, Some(GIB), None, None),
            // The graphics list still names it.
            proc_row(gpus[1].uuid, me, Some(GIB), Some(12), Some(5)),
        ];
        want.sort();
        assert_eq!(proc_metrics(&tick.procs), want, "tick {t}");
        // Utilization on the first; compute and MPS lists on the second
        // (the clock reasons are a GPU metric, null in the row).
        assert_eq!(tick.refusals, 3, "tick {t}");
        assert_eq!(tick.gpus[1].clock_event_reasons, None);
    }
}

#[test]
fn unknown_clock_event_bits_are_kept() {
    const TEST: &str = "unknown_clock_event_bits_are_kept";
    // HW slowdown (0x8), and bits no NVML defines yet.
    const REASONS: u64 = 0x8 | 0x1000 | (1 << 40);
    let gpus = || {
        let mut gpu = FakeGpu::new("GPU-c1000000-0000-0000-0000-000000000001", "NVIDIA B200");
        gpu.clock_reasons = REASONS;
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    for (t, tick) in (1..).zip(&ticks) {
        assert_eq!(tick.gpus, [gpus()[0].expected(0, t)]);
        assert_eq!(tick.gpus[0].clock_event_reasons, Some(i64::try_from(REASONS).expect("fits")));
    }
}

#[test]
fn pcie_comes_from_byte_counters_without_the_20ms_call() {
    const TEST: &str = "pcie_comes_from_byte_counters_without_the_20ms_call";
    let gpus = || {
        let counters = FakeGpu::new("GPU-9c1e0000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3");
        let mut old = FakeGpu::new("GPU-9c1e0000-0000-0000-0000-000000000002", "Tesla T4");
        old.unsupported = "pcie_counters";
        vec![counters, old]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 7);
    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        // Rates from the counters, from the second tick.
        assert_eq!(tick.gpus[0], gpus[0].expected(0, t), "tick {t}");
        // Without counters: the throughput call every fifth tick only.
        let sampled = (t - 1).is_multiple_of(apron_recorder::source::nvml::PCIE_THROUGHPUT_EVERY);
        let want = sampled.then(|| i64::from(gpus[1].pcie_tx) * 1024);
        assert_eq!(tick.gpus[1].pcie_tx_bytes_per_s, want, "tick {t}");
        assert_eq!(tick.gpus[1].pcie_rx_bytes_per_s, sampled.then(|| i64::from(gpus[1].pcie_rx) * 1024));
    }
    let pcie_calls: Vec<(String, String)> = calls()
        .into_iter()
        .filter(|c| c.symbol == "nvmlDeviceGetPcieThroughput")
        .map(|c| (c.get("gpu").unwrap_or("?").to_owned(), c.get("tick").unwrap_or("?").to_owned()))
        .collect();
    let want: Vec<(String, String)> =
        ["1", "1", "6", "6"].iter().map(|t| ("1".to_owned(), (*t).to_owned())).collect();
    assert_eq!(pcie_calls, want);
    // The energy counter and the PCIe counters in one call per GPU and tick.
    let fields = calls().into_iter().filter(|c| c.symbol == "nvmlDeviceGetFieldValues").count();
    assert_eq!(fields, 2 * 7);
    assert!(!calls().iter().any(|c| c.symbol == "nvmlDeviceGetTotalEnergyConsumption"));
}

#[test]
fn a_gpu_lost_mid_tick_is_reopened_after_its_reset() {
    const TEST: &str = "a_gpu_lost_mid_tick_is_reopened_after_its_reset";
    let gpus = || {
        let mut gpu = FakeGpu::new("GPU-4e5e0000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3");
        gpu.compute = format!("self:{GIB}");
        gpu.putil = "self:30:10".into();
        // Lost after its utilization was read at tick 2, reset two ticks
        // later; its old handle stays lost.
        gpu.extra = "lost_at=2,reset_after=2".into();
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let uuid = gpus()[0].uuid;
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 6);
    assert_eq!(ticks[0].gpus.len(), 1);
    for (t, tick) in (2..).zip(&ticks[1..3]) {
        assert!(tick.gpus.is_empty(), "tick {t}: {:?}", tick.gpus);
        let [failure] = tick.failures.as_slice() else { panic!("tick {t}: {:?}", tick.failures) };
        assert!(failure.error.contains("fell off the bus"), "{}", failure.error);
    }
    // Back, through a fresh handle, with its processes.
    for (t, tick) in (4..).zip(&ticks[3..]) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        assert_eq!(tick.gpus.len(), 1, "tick {t}");
        assert_eq!(tick.gpus[0].gpu_uuid.as_ref(), uuid);
        assert_eq!(tick.gpus[0].ts, ts(t));
        assert_eq!(
            proc_metrics(&tick.procs),
            [proc_row(uuid, std::process::id(), Some(GIB), Some(30), Some(10))]
        );
    }
}

#[test]
fn nvml_is_reopened_after_a_driver_reload() {
    const TEST: &str = "nvml_is_reopened_after_a_driver_reload";
    let gpus = || {
        let mut a = FakeGpu::new("GPU-7e100000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3");
        // An application's XID at its fifth tick: after the reload (at its
        // third), with the new driver (the scenario starts afresh).
        a.extra = "xid_at=5:13".into();
        let b = FakeGpu::new("GPU-7e100000-0000-0000-0000-000000000002", "NVIDIA H100 80GB HBM3");
        vec![a, b]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus()), ("FAKE_NVML_RELOAD_AT", "3".into())]);
        return;
    }
    let uuids: Vec<&str> = gpus().iter().map(|g| g.uuid).collect();
    let mut source = open_fake();
    let reopen = u64::from(apron_recorder::source::nvml::REOPEN_NVML_AFTER_TICKS);
    let mut ticks = run_ticks(&mut source, 4 + reopen + 1);
    // The event thread registers the GPUs again once it is out of its wait
    // (within a second): then the new driver's ticks go on.
    let registered = || calls().iter().filter(|c| c.symbol == "nvmlDeviceRegisterEvents").count();
    let waited = std::time::Instant::now();
    while registered() < 4 && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(registered(), 4, "both GPUs registered twice");
    ticks.extend(run_ticks_at(&mut source, (4 + reopen + 2..=4 + reopen + 6).map(ts)));
    let recorded = |tick: &Tick| tick.gpus.iter().map(|g| g.gpu_uuid.to_string()).collect::<Vec<_>>();
    for (t, tick) in (1..).zip(&ticks) {
        if t <= 2 {
            assert_eq!(recorded(tick), uuids, "tick {t}");
        } else if (4..3 + reopen).contains(&t) {
            // The driver went away under NVML: every GPU fails (tick 3 is
            // GPU 0's third call, which the other GPU may have beaten).
            assert!(tick.gpus.is_empty(), "tick {t}: {:?}", recorded(tick));
            assert_eq!(tick.failures.len(), 2, "tick {t}");
        } else if t > 4 + reopen {
            // NVML was re-initialised after `reopen` such ticks (from tick
            // 3 or 4 on).
            assert_eq!(recorded(tick), uuids, "tick {t}: {:?}", tick.failures);
        }
    }
    // The event set was registered again with the new driver: its XID is
    // recorded.
    let mut events: Vec<_> = ticks.iter().flat_map(|t| t.events.iter().cloned()).collect();
    let xids = |events: &[apron_schemas::GpuEvent]| events.iter().filter(|e| &*e.kind == "xid").count();
    let waited = std::time::Instant::now();
    while xids(&events) < 1 && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        source.take_events(&mut events);
    }
    let xid_events: Vec<_> = events.iter().filter(|e| &*e.kind == "xid").collect();
    assert_eq!(xid_events.len(), 1, "{events:?}");
    assert!(xid_events.iter().all(|e| e.xid == Some(13) && e.gpu_index == 0), "{xid_events:?}");
    let calls = calls();
    assert_eq!(calls.iter().filter(|c| c.symbol == "nvmlInit_v2").count(), 2);
    assert_eq!(calls.iter().filter(|c| c.symbol == "nvmlShutdown").count(), 1);
    assert_eq!(calls.iter().filter(|c| c.symbol == "nvmlEventSetCreate").count(), 2);
}

#[test]
fn a_gpu_the_cgroup_hides_is_reported_once() {
    const TEST: &str = "a_gpu_the_cgroup_hides_is_reported_once";
    let gpus = || {
        let visible = FakeGpu::new("GPU-0c000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3");
        let mut hidden = FakeGpu::new("GPU-0c000000-0000-0000-0000-000000000002", "NVIDIA H100 80GB HBM3");
        hidden.extra = "deny=handle".into();
        vec![visible, hidden]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let mut source = open_fake();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 3)) {
        assert!(tick.failures.is_empty(), "not a failure at each tick: {:?}", tick.failures);
        assert_eq!(tick.gpus, [gpus[0].expected(0, t)]);
    }
    // Asked twice over three ticks, not at every tick: once at open for
    // its PCI bus id (read once for /metrics) and minor number (Slurm's
    // order of GPUs), once by its sampling lane,
    // which then takes it as hidden.
    let asked = calls()
        .iter()
        .filter(|c| c.symbol == "nvmlDeviceGetHandleByIndex_v2" && c.get("gpu") == Some("1"))
        .count();
    assert_eq!(asked, 2);
}

#[test]
fn a_hung_gpu_stalls_alone() {
    const TEST: &str = "a_hung_gpu_stalls_alone";
    // The hung GPU between two others: the one sampled after it on the same
    // thread loses no row, not even at the tick at which it hangs.
    let gpus = || {
        let mut fine = FakeGpu::new("GPU-a0000000-0000-0000-0000-000000000001", "NVIDIA H100 80GB HBM3");
        fine.compute = format!("self:{GIB}");
        let mut hung = FakeGpu::new("GPU-a0000000-0000-0000-0000-000000000002", "NVIDIA H100 80GB HBM3");
        hung.extra = "hang_after=2".into();
        let after = FakeGpu::new("GPU-a0000000-0000-0000-0000-000000000003", "NVIDIA H100 80GB HBM3");
        vec![fine, hung, after]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let gpus = gpus();
    let mut source = open_fake();
    for t in 1..=5 {
        let mut tick = Tick::default();
        // Back although one GPU never answers: the tick does not wait for
        // it past its deadline (a tick that did would never return, and the
        // child be killed at run_in_child's limit). How long a tick takes
        // is measured by `cargo bench -p apron-recorder --bench recorder`.
        source.sample(ts(t), INTERVAL_MS, &mut tick);
        assert_eq!(tick.gpus[0], gpus[0].expected(0, t), "tick {t}");
        assert_eq!(tick.gpus.last(), Some(&gpus[2].expected(2, t)), "tick {t}");
        if t <= 2 {
            assert_eq!(tick.gpus.len(), 3, "tick {t}");
            assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        } else {
            assert_eq!(tick.gpus.len(), 2, "tick {t}");
            let [failure] = tick.failures.as_slice() else { panic!("tick {t}: {:?}", tick.failures) };
            assert_eq!(failure.gpu_index, 1);
            assert!(failure.stalled, "{failure:?}");
            assert_eq!(failure.gpu_uuid.as_deref(), Some(gpus[1].uuid));
            let want = if t == 3 { "no answer from NVML" } else { "still blocked" };
            assert!(failure.error.contains(want), "tick {t}: {}", failure.error);
        }
    }
}

#[test]
fn identities_are_unknown_when_most_pids_are_not_in_proc() {
    const TEST: &str = "identities_are_unknown_when_most_pids_are_not_in_proc";
    const UUID: &str = "GPU-b1d00000-0000-0000-0000-000000000001";
    let gpus = || {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA H100 80GB HBM3");
        // Host pids this /proc does not have (above the kernel's pid
        // limit), and this process, which /proc has.
        gpu.compute = format!("4194401:{GIB}|4194402:{GIB}|4194403:{GIB}|4194404:{GIB}|self:{GIB}");
        vec![gpu]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let mut source = open_fake();
    for (t, tick) in (1..).zip(run_ticks(&mut source, 2)) {
        assert_eq!(tick.procs.len(), 5, "tick {t}");
        for p in &tick.procs {
            // Unknown rather than possibly another process's.
            assert_eq!(p.identity, apron_schemas::ProcIdentity::default(), "tick {t}: {p:?}");
            assert_eq!(p.used_mem_bytes, Some(i64::try_from(GIB).expect("fits")));
        }
    }
}

/// A recorder in a container without the host's PID namespace: the child
/// runs in a new PID namespace (`unshare`, as an unprivileged user), where
/// pid 1 is itself, while NVML lists host pids: the host's pid 1 and the
/// parent's `sleep`.
#[test]
fn identities_are_unknown_outside_the_host_pid_namespace() {
    const TEST: &str = "identities_are_unknown_outside_the_host_pid_namespace";
    const UUID: &str = "GPU-b1d00000-0000-0000-0000-000000000002";
    let gpus = |sleep: u32| {
        let mut gpu = FakeGpu::new(UUID, "NVIDIA H100 80GB HBM3");
        gpu.compute = format!("1:{GIB}|{sleep}:{GIB}");
        vec![gpu]
    };
    const UNSHARE: [&str; 5] = ["unshare", "--user", "--map-root-user", "--pid", "--fork"];
    if !in_child(TEST) {
        let probe = Command::new(UNSHARE[0]).args(&UNSHARE[1..]).args(["--mount-proc", "true"]).status();
        if !probe.is_ok_and(|s| s.success()) {
            eprintln!("skipped: this machine cannot create a user and PID namespace (unshare)");
            return;
        }
        let sleeper = Sleeper::spawn(&[]);
        let mut env = sleeper.env();
        env.push(gpus_env(&gpus(sleeper.pid())));
        let mut wrapper = UNSHARE.to_vec();
        wrapper.push("--mount-proc");
        run_in_child_via(&wrapper, TEST, &env);
        return;
    }
    // Pid 1 here is this test process: its identity would be a lie.
    assert_eq!(std::process::id(), 1);
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 2);
    for (t, tick) in (1..).zip(&ticks) {
        assert_eq!(tick.procs.len(), 2, "tick {t}");
        for p in &tick.procs {
            assert_eq!(p.identity, apron_schemas::ProcIdentity::default(), "tick {t}: {p:?}");
        }
    }
}

#[test]
fn a_driver_updated_without_reboot_says_reboot() {
    const TEST: &str = "a_driver_updated_without_reboot_says_reboot";
    if !in_child(TEST) {
        // NVML_ERROR_LIB_RM_VERSION_MISMATCH from nvmlInit_v2.
        run_in_child(TEST, &[("FAKE_NVML_INIT_RETURN", "18".into())]);
        return;
    }
    let lib = PathBuf::from(env_var(FAKE_ENV));
    let error = NvmlSource::open("node07".into(), Some(&lib)).expect_err("versions differ");
    assert!(matches!(error, NvmlOpenError::VersionMismatch { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("reboot"), "{message}");
    assert!(message.contains("reload the driver"), "{message}");
}

/// The fake checks struct versions as NVML does, so a caller that forgets
/// one fails here as it would on a real driver.
#[test]
fn the_fake_checks_struct_versions() {
    const TEST: &str = "the_fake_checks_struct_versions";
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&[FakeGpu::new("GPU-5e000000-0000-0000-0000-000000000001", "X")])]);
        return;
    }
    #[repr(C)]
    struct MemoryV2 {
        version: u32,
        total: u64,
        reserved: u64,
        free: u64,
        used: u64,
    }
    type Init = unsafe extern "C" fn() -> u32;
    type Handle = unsafe extern "C" fn(u32, *mut *mut libc::c_void) -> u32;
    type Memory = unsafe extern "C" fn(*mut libc::c_void, *mut MemoryV2) -> u32;
    let path = std::ffi::CString::new(env_var(FAKE_ENV)).expect("no NUL in the path");
    // SAFETY: dlopen/dlsym of the fake with the C signatures it exports;
    // the struct is the fake's `MemoryV2` layout.
    unsafe {
        let lib = libc::dlopen(path.as_ptr(), libc::RTLD_NOW);
        assert!(!lib.is_null());
        let sym = |name: &str| {
            let name = std::ffi::CString::new(name).expect("no NUL");
            let f = libc::dlsym(lib, name.as_ptr());
            assert!(!f.is_null(), "{name:?}");
            f
        };
        let init = std::mem::transmute::<*mut libc::c_void, Init>(sym("nvmlInit_v2"));
        let handle = std::mem::transmute::<*mut libc::c_void, Handle>(sym("nvmlDeviceGetHandleByIndex_v2"));
        let memory = std::mem::transmute::<*mut libc::c_void, Memory>(sym("nvmlDeviceGetMemoryInfo_v2"));
        assert_eq!(init(), 0);
        let mut device = std::ptr::null_mut();
        assert_eq!(handle(0, &mut device), 0);
        let mut info = MemoryV2 { version: 0, total: 0, reserved: 0, free: 0, used: 0 };
        // NVML_ERROR_ARGUMENT_VERSION_MISMATCH without the version.
        assert_eq!(memory(device, &mut info), 25);
        info.version = 40 | (2 << 24);
        assert_eq!(memory(device, &mut info), 0);
        assert_eq!(info.total, 80 * GIB);
    }
}

// ------------------------------------------------ the recorder, end to end

/// (gpu_uuid → rows) over every `gpu_samples` file under `data`.
fn gpu_rows_per_uuid(data: &Path) -> HashMap<String, usize> {
    use arrow::array::AsArray;
    let mut out = HashMap::new();
    for f in apron_tests::files_under(&data.join("gpu_samples")) {
        let file = std::fs::File::open(&f).expect("open");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("a complete file")
            .build()
            .expect("reader");
        for batch in reader {
            let batch = batch.expect("batch");
            let uuid = batch.column_by_name("gpu_uuid").expect("gpu_uuid").as_string::<i32>();
            for i in 0..batch.num_rows() {
                *out.entry(uuid.value(i).to_owned()).or_default() += 1;
            }
        }
    }
    out
}

/// The recorder with a GPU that hangs, one that refuses utilization and
/// one its cgroup hides: it keeps recording the others, says each thing
/// once, counts them in its health line, and stops on SIGTERM on time.
#[test]
fn the_recorder_reports_stalls_refusals_and_hidden_gpus_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let child = Command::new(apron_tests::bin("apron-recorder"))
        .args([
            "--source",
            "nvml",
            "--host",
            "quirks",
            "--interval",
            "400ms",
            "--health-every",
            "1s",
            "--data",
        ])
        .arg(&data)
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .env("APRON_LOG", "info")
        .env(
            "FAKE_NVML_GPUS",
            "uuid=GPU-denied,compute=self:1024,putil=self:5:5,deny=putil;\
             uuid=GPU-hung,hang_after=3;uuid=GPU-hidden,deny=handle",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    std::thread::sleep(std::time::Duration::from_millis(4_500));
    apron_tests::signal(&child, libc::SIGTERM);
    // A thread blocked in NVML does not hold the exit up: a recorder that
    // waited for it would be killed at the limit. The time it takes to stop
    // is measured by `cargo bench -p apron-recorder --bench recorder`.
    let out = apron_tests::wait_with_timeout(child, std::time::Duration::from_secs(20));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert_eq!(log.matches("NVML refuses process utilization").count(), 1, "{log}");
    assert_eq!(log.matches("GPU not accessible to the recorder").count(), 1, "{log}");
    assert!(log.contains("no answer from NVML"), "{log}");
    let health: Vec<&str> = log.lines().filter(|l| l.contains(" health")).collect();
    let last = health.last().unwrap_or_else(|| panic!("a health line: {log}"));
    let field = |name: &str| -> f64 {
        let at = last.find(&format!(" {name}=")).unwrap_or_else(|| panic!("{name} in {last}"));
        last[at + name.len() + 2..].split_whitespace().next().and_then(|v| v.parse().ok()).expect("a number")
    };
    assert!(field("gpu_stalls") >= 3.0, "{last}");
    assert!(field("refused_queries") >= 5.0, "{last}");
    // The tick waits for a stuck GPU only until its deadline (300 ms of
    // the 400 ms interval), not for the stuck call: the health line counts
    // the stalls above. Its longest tick (sample_ms_max) is a wall time,
    // measured by the recorder bench's hung-GPU run, not asserted here.
    let rows = gpu_rows_per_uuid(&data);
    // Recorded until it hung at its fourth tick (fewer only if an early
    // tick of a loaded machine missed its deadline).
    assert!(rows.get("GPU-hung").is_some_and(|n| (1..=3).contains(n)), "{rows:?}");
    assert!(rows.get("GPU-denied").is_some_and(|n| *n >= 8), "{rows:?}");
    assert!(!rows.contains_key("GPU-hidden"), "{rows:?}");
}

/// The real NVML of a GPU machine: run with `cargo test -p apron-tests
/// --test nvml -- --ignored real_gpus`. Checks plausibility, not values.
#[test]
#[ignore = "needs an NVIDIA GPU and its driver"]
fn real_gpus_sample_plausibly() {
    let mut source = NvmlSource::open("gpu-host".into(), None).expect("NVML opens on a GPU machine");
    let mut ticks = Vec::new();
    let mut took = Vec::new();
    for _ in 1..=5 {
        let mut tick = Tick::default();
        // Real tick times: NVML's utilization samples carry the wall clock.
        let at = now_ms() / i64::from(INTERVAL_MS) * i64::from(INTERVAL_MS);
        let started = std::time::Instant::now();
        source.sample(at, INTERVAL_MS, &mut tick);
        took.push(started.elapsed());
        ticks.push(tick);
        // GPM and process utilization need time to pass between ticks.
        std::thread::sleep(std::time::Duration::from_millis(u64::try_from(INTERVAL_MS).expect("positive")));
    }
    let gpus = ticks[0].gpus.len().max(1);
    // For the device check's summary: one `key: value` a line.
    println!("driver_version: {}", source.driver_version().unwrap_or("?"));
    println!("gpus: {}", ticks[0].gpus.len());
    for (t, d) in (1..).zip(&took) {
        println!(
            "tick {t} wall_ms: {:.2} per_gpu_ms: {:.2}",
            d.as_secs_f64() * 1e3,
            d.as_secs_f64() * 1e3 / gpus as f64
        );
    }
    let procs: Vec<_> = ticks.iter().flat_map(|t| &t.procs).collect();
    let with_identity = procs.iter().filter(|p| p.identity.comm.is_some()).count();
    println!("process_rows: {} with_identity: {with_identity}", procs.len());
    println!("refusals_per_tick: {:?}", ticks.iter().map(|t| t.refusals).collect::<Vec<_>>());
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
                assert!(gpu.pcie_tx_bytes_per_s.is_some(), "PCIe counters on {gpu:?}");
            }
        }
        for proc in &tick.procs {
            assert!(proc.identity.comm.is_some(), "{proc:?}");
            assert!(proc.sm_util_pct.is_some_and(|u| (0..=100).contains(&u)), "{proc:?}");
        }
    }
    println!("{:#?}", ticks[4]);
}

/// One MIG instance of the fake, in `FAKE_NVML_MIG`'s words, and the row
/// the recorder should write for it.
struct FakeMig {
    parent: usize,
    uuid: &'static str,
    profile: &'static str,
    gi: u32,
    slices: i32,
    fb_total: u64,
    fb_used: u64,
    /// GPM's SM activity the fake gives the GPU instance; the other GPM
    /// metrics are this plus 1, 2, 3 and 4.
    gpm_sm: f64,
    /// More `key=value` items.
    extra: String,
}

impl FakeMig {
    fn spec(&self, parent_name: &str) -> String {
        let g = self.gpm_sm;
        format!(
            "parent={},uuid={},name={parent_name} MIG {},gi={},ci=0,slices={},fb_total={},fb_used={},\
             gpm_sm={g},gpm_occ={},gpm_tensor={},gpm_dram={},gpm_gr={}{}",
            self.parent,
            self.uuid,
            self.profile,
            self.gi,
            self.slices,
            self.fb_total,
            self.fb_used,
            g + 1.0,
            g + 2.0,
            g + 3.0,
            g + 4.0,
            self.extra
        )
    }

    /// Its row at `tick`: memory, and GPM (where its parent has it) from
    /// the second tick it was sampled at, `first`.
    fn expected(&self, parent: &FakeGpu, index: i32, total: i32, tick: u64, first: u64) -> GpuSample {
        let gpm = |plus: f64| (parent.gpm.is_some() && tick > first).then_some((self.gpm_sm + plus) as f32);
        GpuSample {
            ts: ts(tick),
            gpu_uuid: self.uuid.into(),
            gpu_index: index,
            gpu_model: Some(parent.name.into()),
            interval_ms: INTERVAL_MS,
            fb_used_bytes: Some(i64::try_from(self.fb_used).expect("fits")),
            fb_total_bytes: Some(i64::try_from(self.fb_total).expect("fits")),
            sm_active_pct: gpm(0.0),
            sm_occupancy_pct: gpm(1.0),
            tensor_active_pct: gpm(2.0),
            dram_active_pct: gpm(3.0),
            gr_engine_active_pct: gpm(4.0),
            parent_gpu_uuid: Some(parent.uuid.into()),
            mig_profile: Some(self.profile.into()),
            mig_slices: Some(self.slices),
            mig_total_slices: Some(total),
            ..GpuSample::default()
        }
    }
}

/// GPU 0, an H100 in MIG mode (7 slices, GPM): a 3g.40gb instance for the
/// whole run, a 1g.10gb destroyed after tick 40 and a 2g.20gb made at tick
/// 5; GPU 1 without MIG; GPU 2 an A30 in MIG mode (4 slices, no GPM: an
/// Ampere instance has no activity from NVML) with one 2g.12gb.
fn mig_host(sleep: u32) -> (Vec<FakeGpu>, Vec<FakeMig>) {
    let mut h100 = FakeGpu::new("GPU-5a000000-0000-0000-0000-00000000000a", "NVIDIA H100 80GB HBM3");
    h100.gpm = Some([Some(99.0); 5]);
    // In MIG mode the GPU's own lists would repeat its instances'
    // processes (real NVML lists them all there for a privileged caller):
    // they must not be read.
    h100.compute = format!("self:{}", 7 * GIB);
    h100.extra = "mig=1".into();
    let mut whole = FakeGpu::new("GPU-5b000000-0000-0000-0000-00000000000b", "NVIDIA L40S");
    whole.compute = format!("{sleep}:{}", GIB);
    whole.putil = format!("{sleep}:40:10");
    let mut a30 = FakeGpu::new("GPU-5c000000-0000-0000-0000-00000000000c", "NVIDIA A30");
    a30.extra = "mig=1,mig_slices=4".into();
    let migs = vec![
        FakeMig {
            parent: 0,
            uuid: "MIG-a0000000-0000-0000-0000-000000000001",
            profile: "3g.40gb",
            gi: 1,
            slices: 3,
            fb_total: 40 * GIB,
            fb_used: 3 * GIB + 17,
            gpm_sm: 62.5,
            extra: format!(",compute=self:{}", 3 * GIB),
        },
        FakeMig {
            parent: 0,
            uuid: "MIG-a0000000-0000-0000-0000-000000000002",
            profile: "1g.10gb",
            gi: 9,
            slices: 1,
            fb_total: 10 * GIB,
            fb_used: 512 * MIB,
            gpm_sm: 5.0,
            // Slices from the profile in its name where NVML will not give
            // its attributes.
            extra: format!(",until=40,unsupported=attributes,graphics={sleep}:{}", 512 * MIB),
        },
        FakeMig {
            parent: 0,
            uuid: "MIG-a0000000-0000-0000-0000-000000000003",
            profile: "2g.20gb",
            gi: 5,
            slices: 2,
            fb_total: 20 * GIB,
            fb_used: 0,
            gpm_sm: 0.0,
            extra: ",from=5".into(),
        },
        FakeMig {
            parent: 2,
            uuid: "MIG-c0000000-0000-0000-0000-000000000004",
            profile: "2g.12gb",
            gi: 3,
            slices: 2,
            fb_total: 12 * GIB,
            fb_used: GIB,
            gpm_sm: 50.0,
            extra: format!(",compute={sleep}:{}", GIB),
        },
    ];
    (vec![h100, whole, a30], migs)
}

#[test]
fn mig_instances_are_rows_of_their_own() {
    const TEST: &str = "mig_instances_are_rows_of_their_own";
    if !in_child(TEST) {
        let sleeper = Sleeper::spawn(&[]);
        let (gpus, migs) = mig_host(sleeper.pid());
        let mut env = sleeper.env();
        env.push(gpus_env(&gpus));
        let specs: Vec<String> = migs.iter().map(|m| m.spec(gpus[m.parent].name)).collect();
        env.push(("FAKE_NVML_MIG", specs.join(";")));
        run_in_child(TEST, &env);
        return;
    }
    let sleep = sleep_pid();
    let me = std::process::id();
    let (gpus, migs) = mig_host(sleep);
    let mut source = open_fake();
    let ticks = run_ticks(&mut source, 45);
    // The 2g.20gb, made at tick 5, is found when the instances are read
    // again (every 30 ticks: at tick 31); the 1g.10gb, gone after tick 40,
    // has no row from tick 41, and the instances are read again at 42.
    let parent_row = |gpu: &FakeGpu, index: i32, total: i32, t: u64| GpuSample {
        gpu_util_pct: None,
        mem_util_pct: None,
        sm_active_pct: None,
        sm_occupancy_pct: None,
        tensor_active_pct: None,
        dram_active_pct: None,
        gr_engine_active_pct: None,
        mig_total_slices: Some(total),
        ..gpu.expected(index, t)
    };
    for (t, tick) in (1..).zip(&ticks) {
        assert!(tick.failures.is_empty(), "tick {t}: {:?}", tick.failures);
        let mut want = vec![parent_row(&gpus[0], 0, 7, t), migs[0].expected(&gpus[0], 0, 7, t, 1)];
        if t <= 40 {
            want.push(migs[1].expected(&gpus[0], 0, 7, t, 1));
        }
        if t >= 31 {
            want.push(migs[2].expected(&gpus[0], 0, 7, t, 31));
        }
        want.push(gpus[1].expected(1, t));
        want.push(parent_row(&gpus[2], 2, 4, t));
        want.push(migs[3].expected(&gpus[2], 2, 4, t, 1));
        assert_eq!(tick.gpus, want, "tick {t}");

        // Each process on the instance it runs on; the H100's own list is
        // not read; no per-process utilization on MIG.
        let mut procs = vec![
            proc_row(migs[0].uuid, me, Some(3 * GIB), None, None),
            proc_row(gpus[1].uuid, sleep, Some(GIB), Some(40), Some(10)),
            proc_row(migs[3].uuid, sleep, Some(GIB), None, None),
        ];
        if t <= 40 {
            procs.push(proc_row(migs[1].uuid, sleep, Some(512 * MIB), None, None));
        }
        procs.sort();
        assert_eq!(proc_metrics(&tick.procs), procs, "tick {t}");
    }
    // The share each instance stands for: its slices of its GPU's.
    let shares: HashMap<String, (i32, i32)> = ticks[35]
        .gpus
        .iter()
        .filter_map(|g| Some((g.gpu_uuid.to_string(), (g.mig_slices?, g.mig_total_slices?))))
        .collect();
    assert_eq!(shares.len(), 4, "{shares:?}");
    assert_eq!(shares[migs[2].uuid], (2, 7));
    assert_eq!(shares[migs[3].uuid], (2, 4));

    let calls = calls();
    assert_each_call_once_per_tick(&calls);
    let on = |symbol: &str, gpu: &str| {
        calls.iter().filter(|c| c.symbol == symbol && c.get("gpu") == Some(gpu)).cloned().collect::<Vec<_>>()
    };
    // The MIG mode: read at the first tick, then every 30 ticks, and again
    // after an instance stopped answering; a GPU without MIG is asked once.
    let mode_ticks = |gpu| {
        on("nvmlDeviceGetMigMode", gpu).iter().map(|c| c.get("tick").map(str::to_owned)).collect::<Vec<_>>()
    };
    assert_eq!(mode_ticks("0"), [Some("1".into()), Some("31".into()), Some("42".into())]);
    assert_eq!(mode_ticks("1"), [Some("1".into())]);
    // Nothing on a MIG GPU's own handle that would count its instances'
    // work twice or that NVML refuses in MIG mode.
    for gpu in ["0", "2"] {
        let parent_lists = on("nvmlDeviceGetComputeRunningProcesses_v3", gpu)
            .into_iter()
            .chain(on("nvmlDeviceGetGraphicsRunningProcesses_v3", gpu))
            .filter(|c| c.get("mig").is_none())
            .count();
        assert_eq!(parent_lists, 0, "GPU {gpu}'s own process lists were read");
        assert!(on("nvmlDeviceGetProcessUtilization", gpu).is_empty(), "GPU {gpu}");
        assert!(on("nvmlGpmSampleGet", gpu).is_empty(), "GPU {gpu}");
    }
    // GPM per GPU instance, on the GPU that has it only.
    let gis: std::collections::BTreeSet<&str> =
        calls.iter().filter(|c| c.symbol == "nvmlGpmMigSampleGet").filter_map(|c| c.get("gi")).collect();
    assert_eq!(gis.into_iter().collect::<Vec<_>>(), ["1", "5", "9"]);
}

// ------------------------------------------------------------- GPU events

/// The events of `ticks` and those taken after them, as (GPU index, kind,
/// xid, value, delta, detail), sorted; and whether each driver event's
/// time lies within `[from, to]` (they are stamped when received).
type EventKey = (i32, String, Option<i32>, Option<i64>, Option<i64>, Option<String>);

fn event_keys(events: &[apron_schemas::GpuEvent]) -> Vec<EventKey> {
    let mut keys: Vec<EventKey> = events
        .iter()
        .map(|e| {
            (e.gpu_index, e.kind.to_string(), e.xid, e.value, e.delta, e.detail.as_deref().map(str::to_owned))
        })
        .collect();
    keys.sort();
    keys
}

/// The driver's events (XID, ECC), error counters that moved (each with
/// its delta; a counter not 0 at the first reading with none) and a GPU
/// lost and back, all through the real nvml-wrapper calls: each event
/// exactly once, with the values the fake was scripted with.
#[test]
fn xid_ecc_counters_and_lost_gpus_are_events() {
    const TEST: &str = "xid_ecc_counters_and_lost_gpus_are_events";
    let gpus = || {
        let mut a = FakeGpu::new("GPU-e7e00000-0000-0000-0000-00000000000a", "NVIDIA H100 80GB HBM3");
        a.extra = "xid_at=3:79,sbe_at=4:2,ecc_corr=1,remap_at=4:1:0:1:0,replay_at=2:7,nvlinks=2,\
                   nvlink_err_at=3:1:2:5"
            .into();
        let mut b = FakeGpu::new("GPU-e7e00000-0000-0000-0000-00000000000b", "NVIDIA A100-SXM4-40GB");
        b.extra = "ecc_unc=3,dbe_at=2:1,lost_at=3,reset_after=2,unsupported=remap|nvlink".into();
        vec![a, b]
    };
    if !in_child(TEST) {
        run_in_child(TEST, &[gpus_env(&gpus())]);
        return;
    }
    let from = now_ms();
    let mut source = open_fake();
    let kinds = |i: usize| source.event_registrations()[i].kinds.clone();
    assert_eq!((kinds(0), kinds(1)), (vec!["xid", "ecc_sbe", "ecc_dbe"], vec!["xid", "ecc_sbe", "ecc_dbe"]));
    // A minute apart: the counters are read at every tick.
    let minute = |t: u64| T0_MS + i64::try_from(t - 1).expect("few") * 60_000;
    let ticks = run_ticks_at(&mut source, (1..=6).map(minute));
    // The event thread hands over what it received after the last tick:
    // the driver's three events, however busy the machine.
    let mut events: Vec<_> = ticks.iter().flat_map(|t| t.events.iter().cloned()).collect();
    let driver = |events: &[apron_schemas::GpuEvent]| {
        events.iter().filter(|e| ["xid", "ecc_sbe", "ecc_dbe"].contains(&&*e.kind)).count()
    };
    let waited = std::time::Instant::now();
    while driver(&events) < 3 && waited.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        source.take_events(&mut events);
    }
    // Nothing more comes.
    std::thread::sleep(std::time::Duration::from_millis(100));
    source.take_events(&mut events);
    let to = now_ms();
    for e in events.iter().filter(|e| ["xid", "ecc_sbe", "ecc_dbe"].contains(&&*e.kind)) {
        assert!((from..=to).contains(&e.ts), "{e:?}");
    }
    let at = |kind: &str, gpu: i32| events.iter().find(|e| e.kind.as_ref() == kind && e.gpu_index == gpu);
    assert_eq!(at("gpu_lost", 1).map(|e| e.ts), Some(minute(3)), "{events:?}");
    assert_eq!(at("gpu_back", 1).map(|e| e.ts), Some(minute(5)), "{events:?}");
    assert_eq!(at("remap_pending", 0).map(|e| e.ts), Some(minute(4)), "{events:?}");
    assert_eq!(at("pcie_replay", 0).map(|e| e.ts), Some(minute(2)), "{events:?}");
    let lost_error = at("gpu_lost", 1).and_then(|e| e.detail.clone()).expect("the error");
    assert!(lost_error.contains("fell off the bus"), "{lost_error}");
    let s = |v: &str| Some(v.to_owned());
    let k = |gpu: i32, kind: &str, xid, value, delta, detail: Option<String>| -> EventKey {
        (gpu, kind.to_owned(), xid, value, delta, detail)
    };
    let mut want = vec![
        // GPU 0: one corrected error before the recorder started (first
        // reading, no delta); a replay at tick 2; XID 79 and 5 CRC flit
        // errors on link 1 at tick 3; 2 single-bit errors and a remapped
        // row waiting for a reset at tick 4.
        k(0, "ecc_corrected", None, Some(1), None, None),
        k(0, "ecc_corrected_aggregate", None, Some(1), None, None),
        k(0, "pcie_replay", None, Some(7), Some(7), None),
        k(0, "xid", Some(79), None, None, None),
        k(0, "nvlink_errors", None, Some(5), Some(5), s("link 1 crc_flit")),
        k(0, "ecc_sbe", None, None, None, None),
        k(0, "ecc_corrected", None, Some(3), Some(2), None),
        k(0, "ecc_corrected_aggregate", None, Some(3), Some(2), None),
        k(0, "remapped_correctable", None, Some(1), Some(1), None),
        k(0, "remap_pending", None, Some(1), Some(1), None),
        // GPU 1: 3 uncorrected errors before, a double-bit one at tick 2,
        // lost at tick 3, back (a fresh handle after its reset) at tick 5,
        // two minutes later; its counters kept across the new handle.
        k(1, "ecc_uncorrected", None, Some(3), None, None),
        k(1, "ecc_uncorrected_aggregate", None, Some(3), None, None),
        k(1, "ecc_dbe", None, None, None, None),
        k(1, "ecc_uncorrected", None, Some(4), Some(1), None),
        k(1, "ecc_uncorrected_aggregate", None, Some(4), Some(1), None),
        k(1, "gpu_lost", None, None, None, Some(lost_error.to_string())),
        k(1, "gpu_back", None, Some(120), None, s("seconds down in value")),
    ];
    want.sort();
    assert_eq!(event_keys(&events), want);
    // Every GPU's counters at its first reading, then once a minute: the
    // ECC counters four times a reading (GPU 1 not while lost).
    let ecc = calls().iter().filter(|c| c.symbol == "nvmlDeviceGetTotalEccErrors").count();
    assert_eq!(ecc, 4 * (6 + 4), "{ecc}");
    // A refused group is not asked again.
    let remaps: Vec<_> = calls().into_iter().filter(|c| c.symbol == "nvmlDeviceGetRemappedRows").collect();
    assert_eq!(remaps.iter().filter(|c| c.get("gpu") == Some("1")).count(), 1, "{remaps:?}");
}

/// The recorder killed with SIGKILL a moment after an XID keeps it: the
/// event is in the WAL before the next tick (ten seconds away), and an XID
/// of a GPU whose sampling calls hang is recorded all the same.
#[test]
fn an_xid_survives_a_kill_right_after_it_even_from_a_hung_gpu() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let child = Command::new(apron_tests::bin("apron-recorder"))
        .args(["--source", "nvml", "--host", "xid", "--interval", "10s", "--data"])
        .arg(&data)
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .env("APRON_LOG", "info")
        .env(
            "FAKE_NVML_GPUS",
            "uuid=GPU-hung,hang_after=1,xid_after_ms=10500:79;uuid=GPU-ok,xid_after_ms=10500:48",
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    let events = || {
        let listed = Command::new(apron_tests::bin("apron"))
            .arg("--data")
            .arg(&data)
            .args(["--format", "csv", "sql", "SELECT gpu_uuid, kind, xid FROM gpu_events ORDER BY gpu_uuid"])
            .output()
            .expect("apron runs");
        // Before the first tick there is no data folder yet.
        let csv = String::from_utf8_lossy(&listed.stdout).into_owned();
        csv + &String::from_utf8_lossy(&listed.stderr)
    };
    let want = "gpu_uuid,kind,xid\nGPU-hung,xid,79\nGPU-ok,xid,48\n";
    // The XIDs come 10.5 s after NVML opened: in the WAL as soon as they
    // arrive (read as the recorder's recent rows), then killed at once.
    let t0 = std::time::Instant::now();
    while events() != want {
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "no XID in the WAL: {}", events());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    apron_tests::signal(&child, libc::SIGKILL);
    let out = apron_tests::wait_with_timeout(child, std::time::Duration::from_secs(20));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("NVML events registered"), "{log}");
    assert!(log.contains("GPU error counters read"), "{log}");
    assert_eq!(events(), want, "{log}");
}
