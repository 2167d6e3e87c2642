//! A stand-in `libnvidia-ml.so` for testing apron's NVML source without a
//! GPU. It exports, with NVML's C ABI and struct layouts, exactly the
//! symbols that `apron-recorder`'s calls through `nvml-wrapper` reach; any
//! other symbol is absent, so a recorder that starts calling something new
//! fails its tests with `FailedToLoadSymbol` instead of silently reading
//! zeros.
//!
//! One build serves every scenario: `nvmlInit_v2` reads the scenario from
//! the environment (each init re-reads it and resets the state).
//!
//! | variable | meaning |
//! | --- | --- |
//! | `FAKE_NVML_GPUS` | the GPUs, separated by `;`; each a `,`-separated list of `key=value` (below) |
//! | `FAKE_NVML_LOG` | optional file; one line per NVML call is appended: `<symbol> gpu=<index> tick=<tick>[ last_seen=<µs>]` |
//! | `FAKE_NVML_INIT_RETURN` | optional `nvmlReturn_t` code `nvmlInit_v2` returns instead of success (e.g. `9`, driver not loaded) |
//! | `FAKE_NVML_DRIVER` | driver version string (default `550.54.15`) |
//!
//! GPU keys (all optional; numbers are NVML's native units):
//! `uuid` (default `GPU-fake-<index>`), `name` (default `Fake GPU`),
//! `util`, `mem_util` (%), `fb_total`, `fb_used` (bytes), `power`,
//! `power_limit` (mW), `energy` (mJ at tick 1), `energy_step` (mJ added per
//! tick), `sm_clock` (MHz), `temp` (°C), `enc`, `dec` (%), `pcie_tx`,
//! `pcie_rx` (KB/s), `clock_reasons` (bitmask);
//! `gpm=1` with `gpm_sm`, `gpm_occ`, `gpm_tensor`, `gpm_dram` (percent, a
//! float; a GPM metric not given answers `NOT_SUPPORTED`);
//! `unsupported=a|b|…` makes those queries answer `NVML_ERROR_NOT_SUPPORTED`
//! (names: `util memory power power_limit energy sm_clock temp enc dec pcie
//! clock_reasons compute graphics putil gpm`);
//! `fail_after=N`: from tick N+1 on, every query of this GPU answers
//! `fail_code` (default 15, `NVML_ERROR_GPU_IS_LOST`);
//! `compute=PID:MEM|PID:MEM`, `graphics=…`: running processes and their used
//! memory in bytes (`na` for `NVML_VALUE_NOT_AVAILABLE`);
//! `putil=PID:SM:MEM|…`: per-process utilization; `putil=notfound` makes
//! `nvmlDeviceGetProcessUtilization` always answer `NVML_ERROR_NOT_FOUND`.
//! A PID may be `self`, the process that loaded the fake, so that a test's
//! GPU processes are real processes with a real `/proc` entry.
//!
//! Time: a GPU's tick advances at each `nvmlDeviceGetUtilizationRates` call
//! on it (the recorder makes exactly one per GPU per tick). At tick `t` each
//! `putil` process has gained two buffered samples: the newest at
//! `1_700_000_000_000_000 + t × 1_000_000` µs with the given SM and memory
//! utilization, and a stale one 0.5 s earlier with both values plus one,
//! listed after the newest, so a reader that keeps the last sample rather
//! than the newest reads the wrong values. Queries return the samples newer
//! than `lastSeenTimeStamp`, or `NVML_ERROR_NOT_FOUND` when there are none,
//! like the real library.
//!
//! GPM: `nvmlGpmMetricsGet` answers `NVML_ERROR_INVALID_ARGUMENT` unless its
//! two samples come from the same GPU at consecutive ticks, the only use the
//! recorder should make of them.

// These functions are NVML's C ABI; their safety contract is NVML's header
// (valid pointers of the documented types), not a per-function doc section.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_uint, c_ulonglong, c_void};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::sync::{Mutex, MutexGuard};

/// `nvmlReturn_t`.
type Ret = c_uint;
const SUCCESS: Ret = 0;
const ERROR_UNINITIALIZED: Ret = 1;
const ERROR_INVALID_ARGUMENT: Ret = 2;
const ERROR_NOT_SUPPORTED: Ret = 3;
const ERROR_NOT_FOUND: Ret = 6;
const ERROR_INSUFFICIENT_SIZE: Ret = 7;
const ERROR_GPU_IS_LOST: Ret = 15;
const ERROR_UNKNOWN: Ret = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as an unsigned long long.
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// `nvmlProcessInfo_t` instance ids when MIG is off.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;
/// Process utilization timestamp of tick 0, µs since the epoch.
const PUTIL_BASE_US: u64 = 1_700_000_000_000_000;
/// Device handles are these small integers disguised as pointers; nothing
/// on the caller's side dereferences them.
const HANDLE_BASE: usize = 0x1000;

// GPM metric ids (`nvmlGpmMetricId_t`).
const GPM_SM_UTIL: c_uint = 2;
const GPM_SM_OCCUPANCY: c_uint = 3;
const GPM_ANY_TENSOR_UTIL: c_uint = 5;
const GPM_DRAM_BW_UTIL: c_uint = 10;
const GPM_METRIC_MAX: usize = 210;

/// `nvmlUtilization_t`.
#[repr(C)]
#[derive(Debug)]
pub struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

/// `nvmlMemory_v2_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlProcessInfo_t` (the v2 struct the `_v3` functions fill).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessUtilizationSample {
    pid: c_uint,
    time_stamp: c_ulonglong,
    sm_util: c_uint,
    mem_util: c_uint,
    enc_util: c_uint,
    dec_util: c_uint,
}

/// `nvmlGpmSupport_t`.
#[repr(C)]
#[derive(Debug)]
pub struct GpmSupport {
    version: c_uint,
    is_supported_device: c_uint,
}

#[repr(C)]
#[derive(Debug)]
struct GpmMetricInfo {
    short_name: *mut c_char,
    long_name: *mut c_char,
    unit: *mut c_char,
}

#[repr(C)]
#[derive(Debug)]
struct GpmMetric {
    metric_id: c_uint,
    nvml_return: Ret,
    value: f64,
    metric_info: GpmMetricInfo,
}

/// `nvmlGpmMetricsGet_t`.
#[repr(C)]
#[derive(Debug)]
pub struct GpmMetricsGet {
    version: c_uint,
    num_metrics: c_uint,
    sample1: *mut GpmSample,
    sample2: *mut GpmSample,
    metrics: [GpmMetric; GPM_METRIC_MAX],
}

// The sizes of NVML's structs on x86_64 and aarch64 Linux: a layout mistake
// here would corrupt the caller's memory, so it must not compile.
const _: () = {
    assert!(size_of::<Utilization>() == 8);
    assert!(size_of::<MemoryV2>() == 40);
    assert!(size_of::<ProcessInfo>() == 24);
    assert!(size_of::<ProcessUtilizationSample>() == 32);
    assert!(size_of::<GpmSupport>() == 8);
    assert!(size_of::<GpmMetric>() == 40);
    assert!(size_of::<GpmMetricsGet>() == 24 + 40 * GPM_METRIC_MAX);
};

/// What `nvmlGpmSampleAlloc` hands out: which GPU and tick it was filled at.
#[derive(Debug)]
pub struct GpmSample {
    gpu: Option<usize>,
    tick: u64,
}

/// Per-process utilization behaviour of one GPU.
enum ProcUtil {
    Samples(Vec<(u32, u32, u32)>),
    NotFound,
}

/// One fake GPU: what it reports, and how far it has got.
struct Gpu {
    uuid: String,
    name: String,
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
    gpm: bool,
    gpm_values: Vec<(c_uint, f64)>,
    unsupported: Vec<String>,
    fail_after: Option<u64>,
    fail_code: Ret,
    compute: Vec<(u32, u64)>,
    graphics: Vec<(u32, u64)>,
    putil: ProcUtil,
    /// Number of `nvmlDeviceGetUtilizationRates` calls so far.
    tick: u64,
}

impl Gpu {
    fn parse(index: usize, spec: &str) -> Result<Gpu, String> {
        let mut gpu = Gpu {
            uuid: format!("GPU-fake-{index}"),
            name: "Fake GPU".to_owned(),
            util: 0,
            mem_util: 0,
            fb_total: 0,
            fb_used: 0,
            power: 0,
            power_limit: 0,
            energy: 0,
            energy_step: 0,
            sm_clock: 0,
            temp: 0,
            enc: 0,
            dec: 0,
            pcie_tx: 0,
            pcie_rx: 0,
            clock_reasons: 0,
            gpm: false,
            gpm_values: Vec::new(),
            unsupported: Vec::new(),
            fail_after: None,
            fail_code: ERROR_GPU_IS_LOST,
            compute: Vec::new(),
            graphics: Vec::new(),
            putil: ProcUtil::Samples(Vec::new()),
            tick: 0,
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("`{item}` is not key=value"))?;
            let value = value.trim();
            match key.trim() {
                "uuid" => gpu.uuid = value.to_owned(),
                "name" => gpu.name = value.to_owned(),
                "util" => gpu.util = num(key, value)?,
                "mem_util" => gpu.mem_util = num(key, value)?,
                "fb_total" => gpu.fb_total = num(key, value)?,
                "fb_used" => gpu.fb_used = num(key, value)?,
                "power" => gpu.power = num(key, value)?,
                "power_limit" => gpu.power_limit = num(key, value)?,
                "energy" => gpu.energy = num(key, value)?,
                "energy_step" => gpu.energy_step = num(key, value)?,
                "sm_clock" => gpu.sm_clock = num(key, value)?,
                "temp" => gpu.temp = num(key, value)?,
                "enc" => gpu.enc = num(key, value)?,
                "dec" => gpu.dec = num(key, value)?,
                "pcie_tx" => gpu.pcie_tx = num(key, value)?,
                "pcie_rx" => gpu.pcie_rx = num(key, value)?,
                "clock_reasons" => gpu.clock_reasons = num(key, value)?,
                "gpm" => gpu.gpm = value == "1",
                "gpm_sm" => gpu.gpm_values.push((GPM_SM_UTIL, num(key, value)?)),
                "gpm_occ" => gpu.gpm_values.push((GPM_SM_OCCUPANCY, num(key, value)?)),
                "gpm_tensor" => gpu.gpm_values.push((GPM_ANY_TENSOR_UTIL, num(key, value)?)),
                "gpm_dram" => gpu.gpm_values.push((GPM_DRAM_BW_UTIL, num(key, value)?)),
                "unsupported" => gpu.unsupported = value.split('|').map(str::to_owned).collect(),
                "fail_after" => gpu.fail_after = Some(num(key, value)?),
                "fail_code" => gpu.fail_code = num(key, value)?,
                "compute" => gpu.compute = processes(value)?,
                "graphics" => gpu.graphics = processes(value)?,
                "putil" if value == "notfound" => gpu.putil = ProcUtil::NotFound,
                "putil" => {
                    let mut samples = Vec::new();
                    for entry in value.split('|').filter(|s| !s.is_empty()) {
                        let mut parts = entry.split(':');
                        let (Some(pid), Some(sm), Some(mem), None) =
                            (parts.next(), parts.next(), parts.next(), parts.next())
                        else {
                            return Err(format!("putil entry `{entry}` is not PID:SM:MEM"));
                        };
                        samples.push((pid_of(pid)?, num("putil sm", sm)?, num("putil mem", mem)?));
                    }
                    gpu.putil = ProcUtil::Samples(samples);
                }
                other => return Err(format!("unknown key `{other}`")),
            }
        }
        Ok(gpu)
    }

    fn supports(&self, query: &str) -> bool {
        !self.unsupported.iter().any(|u| u == query)
    }

    fn failing(&self) -> bool {
        self.fail_after.is_some_and(|n| self.tick > n)
    }
}

fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value.trim().parse().map_err(|_| format!("`{key}={value}` is not a number"))
}

/// A pid, or `self` for the pid of the process that loaded the fake.
fn pid_of(value: &str) -> Result<u32, String> {
    if value == "self" { Ok(std::process::id()) } else { num("pid", value) }
}

fn processes(value: &str) -> Result<Vec<(u32, u64)>, String> {
    let mut out = Vec::new();
    for entry in value.split('|').filter(|s| !s.is_empty()) {
        let (pid, mem) = entry.split_once(':').ok_or_else(|| format!("process `{entry}` is not PID:MEM"))?;
        let mem = if mem == "na" { VALUE_NOT_AVAILABLE } else { num("process memory", mem)? };
        out.push((pid_of(pid)?, mem));
    }
    Ok(out)
}

struct State {
    gpus: Vec<Gpu>,
    driver: String,
    log: Option<File>,
}

impl State {
    fn from_env() -> Result<State, String> {
        let gpus = match std::env::var("FAKE_NVML_GPUS") {
            Ok(spec) => spec
                .split(';')
                .filter(|s| !s.trim().is_empty())
                .enumerate()
                .map(|(i, s)| Gpu::parse(i, s).map_err(|e| format!("GPU {i}: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
            Err(_) => Vec::new(),
        };
        let log = match std::env::var_os("FAKE_NVML_LOG") {
            Some(path) => Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| format!("cannot open {}: {e}", path.to_string_lossy()))?,
            ),
            None => None,
        };
        let driver = std::env::var("FAKE_NVML_DRIVER").unwrap_or_else(|_| "550.54.15".to_owned());
        Ok(State { gpus, driver, log })
    }

    fn log(&mut self, line: std::fmt::Arguments<'_>) {
        if let Some(file) = &mut self.log {
            // A test reading the log sees what was written; a failed write
            // only makes that test fail, so it needs no handling here.
            let _ = file.write_all(format!("{line}\n").as_bytes());
        }
    }
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn state() -> MutexGuard<'static, Option<State>> {
    // A panic cannot cross the C ABI (it aborts), so a poisoned lock only
    // means an earlier call was interrupted; its data is still usable.
    STATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn handle_index(device: *mut c_void) -> Option<usize> {
    (device as usize).checked_sub(HANDLE_BASE)
}

/// Runs `f` on the GPU behind `device`, after logging the call and
/// answering for an uninitialised library, an unknown handle, an
/// unsupported query (`query`) or a GPU that has started failing.
fn with_gpu(
    device: *mut c_void,
    symbol: &str,
    query: &str,
    extra: std::fmt::Arguments<'_>,
    f: impl FnOnce(&mut Gpu) -> Ret,
) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let Some(index) = handle_index(device).filter(|i| *i < state.gpus.len()) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if symbol == "nvmlDeviceGetUtilizationRates" {
        state.gpus[index].tick += 1;
    }
    let tick = state.gpus[index].tick;
    state.log(format_args!("{symbol} gpu={index} tick={tick}{extra}"));
    let gpu = &mut state.gpus[index];
    if gpu.failing() {
        return gpu.fail_code;
    }
    if !gpu.supports(query) {
        return ERROR_NOT_SUPPORTED;
    }
    f(gpu)
}

/// Copies `text` and its terminating NUL into the caller's buffer.
unsafe fn copy_str(text: &str, out: *mut c_char, len: c_uint) -> Ret {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    if text.len() + 1 > len as usize {
        return ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller gave a buffer of `len` bytes, checked above to hold
    // the text and its NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), out, text.len());
        *out.add(text.len()) = 0;
    }
    SUCCESS
}

/// Writes `value` through `out`, NVML's out-parameter convention.
unsafe fn put<T>(out: *mut T, value: T) -> Ret {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: a non-null out-parameter of the documented type.
    unsafe { out.write(value) };
    SUCCESS
}

/// The list protocol of `nvmlDeviceGet*RunningProcesses_v3`.
unsafe fn put_processes(list: &[(u32, u64)], count: *mut c_uint, infos: *mut ProcessInfo) -> Ret {
    if count.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: `count` is a non-null in/out parameter; `infos`, when not
    // null, holds `*count` entries.
    unsafe {
        let room = *count as usize;
        *count = list.len() as c_uint;
        if list.is_empty() {
            return SUCCESS;
        }
        if infos.is_null() || room < list.len() {
            return ERROR_INSUFFICIENT_SIZE;
        }
        for (i, (pid, mem)) in list.iter().enumerate() {
            infos.add(i).write(ProcessInfo {
                pid: *pid,
                used_gpu_memory: *mem,
                gpu_instance_id: NO_INSTANCE,
                compute_instance_id: NO_INSTANCE,
            });
        }
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> Ret {
    if let Some(code) = std::env::var("FAKE_NVML_INIT_RETURN").ok().and_then(|c| c.parse::<Ret>().ok()) {
        return code;
    }
    match State::from_env() {
        Ok(mut fresh) => {
            fresh.log(format_args!("nvmlInit_v2"));
            *state() = Some(fresh);
            SUCCESS
        }
        Err(e) => {
            eprintln!("fake NVML: bad scenario: {e}");
            ERROR_UNKNOWN
        }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> Ret {
    match state().as_mut() {
        Some(state) => {
            state.log(format_args!("nvmlShutdown"));
            SUCCESS
        }
        None => ERROR_UNINITIALIZED,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> Ret {
    let guard = state();
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    // SAFETY: NVML's contract: a buffer of `length` bytes.
    unsafe { copy_str(&state.driver, version, length) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    state.log(format_args!("nvmlDeviceGetCount_v2"));
    // SAFETY: NVML's contract: a valid out-parameter.
    unsafe { put(count, state.gpus.len() as c_uint) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut *mut c_void) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    state.log(format_args!("nvmlDeviceGetHandleByIndex_v2 gpu={index}"));
    if index as usize >= state.gpus.len() {
        return ERROR_INVALID_ARGUMENT;
    }
    let handle = std::ptr::without_provenance_mut(HANDLE_BASE + index as usize);
    // SAFETY: NVML's contract: a valid out-parameter.
    unsafe { put(device, handle) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(device: *mut c_void, uuid: *mut c_char, length: c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a buffer of `length` bytes.
    with_gpu(device, "nvmlDeviceGetUUID", "uuid", format_args!(""), |g| unsafe {
        copy_str(&g.uuid, uuid, length)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(device: *mut c_void, name: *mut c_char, length: c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a buffer of `length` bytes.
    with_gpu(device, "nvmlDeviceGetName", "name", format_args!(""), |g| unsafe {
        copy_str(&g.name, name, length)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(device: *mut c_void, out: *mut Utilization) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetUtilizationRates", "util", format_args!(""), |g| unsafe {
        put(out, Utilization { gpu: g.util, memory: g.mem_util })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(device: *mut c_void, out: *mut MemoryV2) -> Ret {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlDeviceGetMemoryInfo_v2", "memory", format_args!(""), |g| {
        // SAFETY: NVML's contract: a valid, versioned struct to fill; the
        // version the caller set is kept.
        unsafe {
            (*out).total = g.fb_total;
            (*out).reserved = 0;
            (*out).used = g.fb_used;
            (*out).free = g.fb_total.saturating_sub(g.fb_used);
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(device: *mut c_void, power: *mut c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetPowerUsage", "power", format_args!(""), |g| unsafe { put(power, g.power) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(device: *mut c_void, limit: *mut c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetEnforcedPowerLimit", "power_limit", format_args!(""), |g| unsafe {
        put(limit, g.power_limit)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: *mut c_void,
    energy: *mut c_ulonglong,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetTotalEnergyConsumption", "energy", format_args!(""), |g| unsafe {
        put(energy, g.energy + g.tick.saturating_sub(1) * g.energy_step)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    device: *mut c_void,
    clock_type: c_uint,
    clock: *mut c_uint,
) -> Ret {
    const NVML_CLOCK_SM: c_uint = 1;
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetClockInfo", "sm_clock", format_args!(" type={clock_type}"), |g| unsafe {
        if clock_type == NVML_CLOCK_SM { put(clock, g.sm_clock) } else { ERROR_NOT_SUPPORTED }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: *mut c_void,
    sensor: c_uint,
    temp: *mut c_uint,
) -> Ret {
    const NVML_TEMPERATURE_GPU: c_uint = 0;
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetTemperature", "temp", format_args!(""), |g| unsafe {
        if sensor == NVML_TEMPERATURE_GPU { put(temp, g.temp) } else { ERROR_INVALID_ARGUMENT }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    device: *mut c_void,
    utilization: *mut c_uint,
    period_us: *mut c_uint,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: valid out-parameters.
    with_gpu(device, "nvmlDeviceGetEncoderUtilization", "enc", format_args!(""), |g| unsafe {
        match put(utilization, g.enc) {
            SUCCESS => put(period_us, 1_000_000),
            err => err,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    device: *mut c_void,
    utilization: *mut c_uint,
    period_us: *mut c_uint,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: valid out-parameters.
    with_gpu(device, "nvmlDeviceGetDecoderUtilization", "dec", format_args!(""), |g| unsafe {
        match put(utilization, g.dec) {
            SUCCESS => put(period_us, 1_000_000),
            err => err,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    device: *mut c_void,
    counter: c_uint,
    value: *mut c_uint,
) -> Ret {
    const TX_BYTES: c_uint = 0;
    const RX_BYTES: c_uint = 1;
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetPcieThroughput", "pcie", format_args!(" counter={counter}"), |g| unsafe {
        match counter {
            TX_BYTES => put(value, g.pcie_tx),
            RX_BYTES => put(value, g.pcie_rx),
            _ => ERROR_INVALID_ARGUMENT,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    device: *mut c_void,
    reasons: *mut c_ulonglong,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(
        device,
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "clock_reasons",
        format_args!(""),
        |g| unsafe { put(reasons, g.clock_reasons) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(device, "nvmlDeviceGetComputeRunningProcesses_v3", "compute", format_args!(""), |g| unsafe {
        put_processes(&g.compute, count, infos)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(device, "nvmlDeviceGetGraphicsRunningProcesses_v3", "graphics", format_args!(""), |g| unsafe {
        put_processes(&g.graphics, count, infos)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: *mut c_void,
    samples: *mut ProcessUtilizationSample,
    count: *mut c_uint,
    last_seen: c_ulonglong,
) -> Ret {
    if count.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let extra = format_args!(" last_seen={last_seen}");
    with_gpu(device, "nvmlDeviceGetProcessUtilization", "putil", extra, |g| {
        let ProcUtil::Samples(procs) = &g.putil else {
            return ERROR_NOT_FOUND;
        };
        let mut buffered = Vec::new();
        for t in 1..=g.tick {
            let newest = PUTIL_BASE_US + t * 1_000_000;
            for &(pid, sm, mem) in procs {
                let sample = |time_stamp, sm_util, mem_util| ProcessUtilizationSample {
                    pid,
                    time_stamp,
                    sm_util,
                    mem_util,
                    enc_util: 0,
                    dec_util: 0,
                };
                buffered.push(sample(newest, sm, mem));
                buffered.push(sample(newest - 500_000, sm + 1, mem + 1));
            }
        }
        buffered.retain(|s| s.time_stamp > last_seen);
        if buffered.is_empty() {
            return ERROR_NOT_FOUND;
        }
        // SAFETY: `count` is a non-null in/out parameter; `samples`, when not
        // null, holds `*count` entries.
        unsafe {
            let room = *count as usize;
            *count = buffered.len() as c_uint;
            if samples.is_null() || room < buffered.len() {
                return ERROR_INSUFFICIENT_SIZE;
            }
            std::ptr::copy_nonoverlapping(buffered.as_ptr(), samples, buffered.len());
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(device: *mut c_void, support: *mut GpmSupport) -> Ret {
    if support.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlGpmQueryDeviceSupport", "gpm", format_args!(""), |g| {
        // SAFETY: NVML's contract: a valid, versioned struct to fill.
        unsafe { (*support).is_supported_device = c_uint::from(g.gpm) };
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut *mut GpmSample) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let raw = Box::into_raw(Box::new(GpmSample { gpu: None, tick: 0 }));
    state.log(format_args!("nvmlGpmSampleAlloc sample={raw:p}"));
    // SAFETY: NVML's contract: a valid out-parameter.
    let ret = unsafe { put(sample, raw) };
    if ret != SUCCESS {
        // SAFETY: `raw` came from `Box::into_raw` just above and was not handed out.
        drop(unsafe { Box::from_raw(raw) });
    }
    ret
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleFree(sample: *mut GpmSample) -> Ret {
    if sample.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    if let Some(state) = state().as_mut() {
        state.log(format_args!("nvmlGpmSampleFree sample={sample:p}"));
    }
    // SAFETY: NVML's contract: a sample from `nvmlGpmSampleAlloc`, freed once.
    drop(unsafe { Box::from_raw(sample) });
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleGet(device: *mut c_void, sample: *mut GpmSample) -> Ret {
    if sample.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let gpu = handle_index(device);
    with_gpu(device, "nvmlGpmSampleGet", "gpm", format_args!(""), |g| {
        if !g.gpm {
            return ERROR_NOT_SUPPORTED;
        }
        // SAFETY: NVML's contract: a live sample from `nvmlGpmSampleAlloc`.
        unsafe {
            (*sample).gpu = gpu;
            (*sample).tick = g.tick;
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(request: *mut GpmMetricsGet) -> Ret {
    if request.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    // SAFETY: NVML's contract: a valid request whose samples came from
    // `nvmlGpmSampleAlloc` and are still live.
    let (first, second, request) =
        unsafe { ((*request).sample1.as_ref(), (*request).sample2.as_ref(), &mut *request) };
    let (
        Some(&GpmSample { gpu: Some(gpu1), tick: tick1 }),
        Some(&GpmSample { gpu: Some(gpu2), tick: tick2 }),
    ) = (first, second)
    else {
        return ERROR_INVALID_ARGUMENT;
    };
    state.log(format_args!("nvmlGpmMetricsGet gpu={gpu2} tick={tick2} first_tick={tick1}"));
    if gpu1 != gpu2 || tick2 != tick1 + 1 || request.num_metrics as usize > GPM_METRIC_MAX {
        return ERROR_INVALID_ARGUMENT;
    }
    let Some(gpu) = state.gpus.get(gpu2) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if gpu.failing() {
        return gpu.fail_code;
    }
    for metric in &mut request.metrics[..request.num_metrics as usize] {
        metric.metric_info = GpmMetricInfo {
            short_name: std::ptr::null_mut(),
            long_name: std::ptr::null_mut(),
            unit: std::ptr::null_mut(),
        };
        match gpu.gpm_values.iter().find(|(id, _)| *id == metric.metric_id) {
            Some((_, value)) => {
                metric.value = *value;
                metric.nvml_return = SUCCESS;
            }
            None => {
                metric.value = 0.0;
                metric.nvml_return = ERROR_NOT_SUPPORTED;
            }
        }
    }
    SUCCESS
}
