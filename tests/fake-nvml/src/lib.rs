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
//! | `FAKE_NVML_RELOAD_AT` | optional tick N: when GPU 0 reaches its tick N, the driver is reloaded under the library (once per process): every call answers `NVML_ERROR_UNKNOWN` until `nvmlInit_v2` is called again, which starts the scenario afresh |
//! | `FAKE_NVML_MIG` | optional MIG instances, separated by `;`; each a `,`-separated list of `key=value`: the GPU keys (those that make sense for an instance: `uuid`, `name`, `fb_total`, `fb_used`, `compute`, `graphics`, `mps`, `gpm_*`, `unsupported`, `deny`, `missing`) and the MIG keys below |
//! | `FAKE_NVML_DRIVER` | driver version string (default `550.54.15`); it also picks the process-list layout, as the real drivers do: 535.43–535.86 fill 32-byte entries (an extra `usedGpuCcProtectedMemory`) from the `_v3` process calls, 535.98 has no `_v3` process calls (they answer `NVML_ERROR_FUNCTION_NOT_FOUND`, the nearest one library can come to not exporting them; `_v2` works), any other version fills 24-byte entries |
//!
//! GPU keys (all optional; numbers are NVML's native units):
//! `uuid` (default `GPU-fake-<index>`), `name` (default `Fake GPU`),
//! `pci` (the PCI bus id, default `00000000:<index + 1, two hex digits>:00.0`),
//! `minor` (the device file's minor number, `/dev/nvidiaN`; default the index),
//! `util`, `mem_util` (%), `fb_total`, `fb_used` (bytes), `power`,
//! `power_limit` (mW), `energy` (mJ at tick 1), `energy_step` (mJ added per
//! tick), `sm_clock` (MHz), `temp` (°C), `enc`, `dec` (%), `pcie_tx`,
//! `pcie_rx` (KB/s), `clock_reasons` (bitmask, any 64 bits);
//! `gpm=1` with `gpm_sm`, `gpm_occ`, `gpm_tensor`, `gpm_dram`, `gpm_gr`
//! (percent, a float; a GPM metric not given answers `NOT_SUPPORTED`);
//! `unsupported=a|b|…` makes those queries answer `NVML_ERROR_NOT_SUPPORTED`,
//! `deny=a|b|…` makes them answer `NVML_ERROR_NO_PERMISSION` and
//! `missing=a|b|…` `NVML_ERROR_FUNCTION_NOT_FOUND` (names: `util memory
//! power power_limit energy sm_clock temp enc dec pcie pcie_counters pci
//! clock_reasons compute graphics mps putil gpm`; `events`
//! (`nvmlDeviceGetSupportedEventTypes`, `nvmlDeviceRegisterEvents`), `ecc`
//! (`nvmlDeviceGetTotalEccErrors`), `remap` (`nvmlDeviceGetRemappedRows`),
//! `retired` (`nvmlDeviceGetRetiredPages`, `_v2` and
//! `nvmlDeviceGetRetiredPagesPendingStatus`), `replay`
//! (`nvmlDeviceGetPcieReplayCounter`), `nvlink` (`nvmlDeviceGetNvLinkState`,
//! `nvmlDeviceGetNvLinkErrorCounter`); and for `deny` also `handle`: the GPU
//! a cgroup hides, whose `nvmlDeviceGetHandleByIndex_v2` answers
//! `NO_PERMISSION`);
//! `fail_after=N`: from tick N+1 on, every query of this GPU (its handle
//! too) answers `fail_code` (default 15, `NVML_ERROR_GPU_IS_LOST`);
//! `lost_at=N` with `reset_after=K` (default 2): at tick N the GPU falls off
//! the bus after its utilization was read (in the middle of the tick); every
//! call answers `NVML_ERROR_GPU_IS_LOST` until tick N+K, when it is reset
//! and answers again, but only through a handle fetched after the reset
//! (handles from before stay lost); while it is lost, each
//! `nvmlDeviceGetHandleByIndex_v2` of it counts as a tick too;
//! `hang_after=N`: from tick N+1 on, every call on this GPU blocks until the
//! process ends (an NVML call stuck in the kernel after an Xid);
//! `pcie_latency_ms=N`: each `nvmlDeviceGetPcieThroughput` sleeps N ms (the
//! real call measures over a 20 ms window);
//! `compute=PID:MEM|PID:MEM`, `graphics=…`, `mps=…` (MPS clients): running
//! processes and their used memory in bytes (`na` for
//! `NVML_VALUE_NOT_AVAILABLE`);
//! `putil=PID:SM:MEM|…`: per-process utilization (samples of the last 20
//! ticks are kept, as a driver keeps a bounded history); `putil=notfound` makes
//! `nvmlDeviceGetProcessUtilization` always answer `NVML_ERROR_NOT_FOUND`;
//! `putil_until=N`: the processes compute only until tick N (no samples
//! after it); `putil_stale=1`: it also returns samples not newer than
//! `lastSeenTimeStamp` (as a driver that ignores it would);
//! `putil_burst=N`: between the count query and the query that fills the
//! buffer, N more samples (of pid 4194999, no process) arrive, so a buffer
//! sized from the count is too small (`NVML_ERROR_INSUFFICIENT_SIZE`);
//! `putil_back_at=N` with `putil_back_s=S`: from tick N on, the sample
//! clock is S seconds behind (the system clock stepped back).
//! A PID may be `self`, the process that loaded the fake, so that a test's
//! GPU processes are real processes with a real `/proc` entry.
//! `events=a|b|…`: the event types the GPU supports (names: `sbe dbe pstate
//! xid clock power_source mig_config`, NVML's `nvmlEventType*` 0x1, 0x2,
//! 0x4, 0x8, 0x10, 0x80, 0x100; default `sbe|dbe|pstate|xid|clock`;
//! `events=none`: none).
//! Scripted events (see Events below), each key a `|`-separated list:
//! `xid_at=TICK:CODE` (an Xid CODE), `sbe_at=TICK:N` (a single-bit ECC
//! error event; the corrected ECC counters grow by N), `dbe_at=TICK:N`
//! (a double-bit one; the uncorrected counters grow by N), `pstate_at=TICK`
//! (a P-state change), `xid_after_ms=MS:CODE` (an Xid CODE raised MS ms
//! after the GPU's first successful `nvmlDeviceRegisterEvents` since
//! `nvmlInit_v2`, by a thread of the fake, so that it arrives while the
//! GPU's calls hang; like the others it reaches only the sets that have
//! Xids registered for the GPU then, and none if the GPU is lost).
//! Error counters (their calls do not advance the tick; a value "at tick t"
//! is what a call sees while the GPU's tick is t; a lost GPU answers
//! `GPU_IS_LOST` and a hung one blocks, as for any query):
//! `ecc_corr=N`, `ecc_unc=N`: the corrected and uncorrected ECC error counts
//! at tick 0, volatile and aggregate (`nvmlDeviceGetTotalEccErrors`, error
//! type 0/1, counter type 0/1; default 0), and `ecc_corr_agg=N`,
//! `ecc_unc_agg=N` more in the aggregate counters only; `sbe_at`/`dbe_at`
//! add to both; `remap=CORR:UNC:PENDING:FAILURE` (`nvmlDeviceGetRemappedRows`;
//! default `0:0:0:0`; PENDING and FAILURE are answered as 0 or 1) and
//! `remap_at=TICK:CORR:UNC:PENDING:FAILURE|…`: from TICK on, those are the
//! values; `retired=SBE:DBE:PENDING`: how many pages are retired for
//! multiple single-bit errors (cause 0) and for double-bit errors (cause 1)
//! (`nvmlDeviceGetRetiredPages`, with NVML's count-then-fill protocol; page
//! i of cause c is at the made-up address `0x1_0000_0000 × (c + 1) +
//! 0x1000 × i`) and whether retirements are pending
//! (`nvmlDeviceGetRetiredPagesPendingStatus`, 0 or 1), default `0:0:0`, and
//! `retired_at=TICK:SBE:DBE:PENDING|…` likewise from TICK on (the timestamp
//! `nvmlDeviceGetRetiredPages_v2` gives a page is the sample clock's second
//! at the tick it was first counted, tick 0 for the initial ones);
//! `replay=N`: PCIe replays at tick 0 (`nvmlDeviceGetPcieReplayCounter`),
//! `replay_at=TICK:N|…` adds N at TICK; `nvlinks=N`: links 0…N−1 are
//! active (`nvmlDeviceGetNvLinkState`) and a higher link answers
//! `INVALID_ARGUMENT`; without it (or with 0) every link answers
//! `NOT_SUPPORTED`, state and counters, as on a GPU without NVLink;
//! `nvlink_err_at=TICK:LINK:COUNTER:N|…` adds N at TICK to error counter
//! COUNTER of LINK (`nvmlDeviceGetNvLinkErrorCounter`, counters 0–4:
//! replay, recovery, CRC flit, CRC data, ECC data; a higher one answers
//! `INVALID_ARGUMENT`; every counter starts at 0).
//!
//! MIG: a GPU key `mig=1` puts it in MIG mode (`mig=0`: MIG-capable, off;
//! without the key `nvmlDeviceGetMigMode` answers `NOT_SUPPORTED`, as a GPU
//! without MIG does), with `mig_slices=N` compute slices (default 7: its
//! GPU-instance profiles 0–4 have 1, 2, 3, 4 and 7 slices, those above N
//! answer `NOT_SUPPORTED`). In MIG mode the GPU answers
//! `nvmlDeviceGetUtilizationRates` and `nvmlDeviceGetProcessUtilization`
//! with `NOT_SUPPORTED`, as real NVML does. Each `FAKE_NVML_MIG` instance
//! names its GPU with `parent=N` (its index), its GPU and compute instance
//! ids `gi=`, `ci=` (default 0), its compute slices `slices=` (default 1;
//! `nvmlDeviceGetAttributes_v2` gives them, with `gi_slices=`, default the
//! same) and lives from its parent's tick `from=` (default 0) to `until=`
//! (default for ever): `nvmlDeviceGetMigDeviceHandleByIndex(parent, i)`
//! gives the i-th instance listed for that parent while it lives and
//! `NOT_FOUND` otherwise, and its handle answers `INVALID_ARGUMENT` once it
//! is destroyed. An instance handle answers its UUID, name, memory, process
//! lists (entries carrying its `gi` and `ci`), attributes and GPU instance
//! id; every other query on it answers `NOT_SUPPORTED`. Its GPM metrics
//! come from `nvmlGpmMigSampleGet(parent, gi)`; a parent's failures, loss
//! and hangs are its instances'.
//!
//! Field values (`nvmlDeviceGetFieldValues`): `NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION`
//! (83, the energy counter) and `NVML_FI_DEV_PCIE_COUNT_TX_BYTES`/`_RX_BYTES`
//! (197/198: `pcie_tx`/`pcie_rx` × 1024 bytes per tick, cumulative, from 0
//! at tick 0), stamped with the sample clock; any other field answers
//! `NOT_SUPPORTED` in its entry.
//!
//! Struct versions are checked as real NVML checks them:
//! `nvmlDeviceGetMemoryInfo_v2`, `nvmlGpmQueryDeviceSupport` and
//! `nvmlGpmMetricsGet` answer `NVML_ERROR_ARGUMENT_VERSION_MISMATCH` unless
//! the caller set the struct's version.
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
//! Events: `nvmlEventSetCreate` makes a set (several may live at once), with
//! its own queue of pending events and its registrations.
//! `nvmlDeviceRegisterEvents(gpu, types, set)` adds `types` to what the set
//! has registered for that GPU, or, if the GPU does not support one of
//! them, registers nothing and answers `NOT_SUPPORTED`. A scripted event is
//! raised inside the `nvmlDeviceGetUtilizationRates` call that advances
//! its GPU to TICK, before anything else that call does: with `hang_after=N`
//! an event at tick N (or N+1, the call that hangs) is still raised, and at
//! `lost_at=N` tick N's events are; a lost GPU raises none (its events
//! while lost are dropped). Events of one tick are raised in the order sbe,
//! dbe, pstate, xid (several of one key in the order listed). A raised event is queued in
//! every set that has its type registered for its GPU at that moment, and
//! in no other: one raised before any registration is queued nowhere. A
//! registration through a handle from before a reset (`lost_at` …
//! `reset_after`) gets no events and counts as a lost GPU.
//! `nvmlEventSetWait_v2(set, data, timeoutms)` returns the set's oldest
//! pending event at once (`device`: the GPU's handle, as
//! `nvmlDeviceGetHandleByIndex_v2` gives it; `eventType`: one type bit;
//! `eventData`: the code of an Xid, else 0; `gpuInstanceId` and
//! `computeInstanceId`: `0xFFFFFFFF`); with none pending it waits, woken as
//! soon as another thread's call queues one, and answers
//! `NVML_ERROR_TIMEOUT` after `timeoutms` (0: at once). If a GPU registered
//! in the set is lost, it answers `NVML_ERROR_GPU_IS_LOST` instead, after
//! waiting min(`timeoutms`, 100 ms) for an event (so a caller's loop does
//! not spin). A hung GPU never blocks a wait: other GPUs' events and its
//! `xid_after_ms` Xids still arrive. `fail_after` does not touch events. A
//! set freed by `nvmlEventSetFree`, or made before the last `nvmlInit_v2`,
//! answers `INVALID_ARGUMENT`. Log lines: `nvmlEventSetCreate set=<id>`,
//! `nvmlEventSetFree set=<id>`, `nvmlEventSetWait_v2 set=<id>
//! timeout_ms=<ms>` (when the wait starts) and `nvmlDeviceRegisterEvents
//! gpu=<index> tick=<tick> types=<hex> set=<id>`.
//!
//! GPM: `nvmlGpmMetricsGet` answers `NVML_ERROR_INVALID_ARGUMENT` unless its
//! two samples come from the same GPU at consecutive ticks, the only use the
//! recorder should make of them.

// These functions are NVML's C ABI; their safety contract is NVML's header
// (valid pointers of the documented types), not a per-function doc section.
#![allow(clippy::missing_safety_doc)]

use std::collections::VecDeque;
use std::ffi::{c_char, c_uint, c_ulonglong, c_void};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `nvmlReturn_t`.
type Ret = c_uint;
const SUCCESS: Ret = 0;
const ERROR_UNINITIALIZED: Ret = 1;
const ERROR_INVALID_ARGUMENT: Ret = 2;
const ERROR_NOT_SUPPORTED: Ret = 3;
const ERROR_NO_PERMISSION: Ret = 4;
const ERROR_NOT_FOUND: Ret = 6;
const ERROR_INSUFFICIENT_SIZE: Ret = 7;
const ERROR_TIMEOUT: Ret = 10;
const ERROR_FUNCTION_NOT_FOUND: Ret = 13;
const ERROR_GPU_IS_LOST: Ret = 15;
const ERROR_ARGUMENT_VERSION_MISMATCH: Ret = 25;
const ERROR_UNKNOWN: Ret = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as an unsigned long long.
const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// `nvmlProcessInfo_t` instance ids when MIG is off.
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;
/// Process utilization timestamp of tick 0, µs since the epoch.
const PUTIL_BASE_US: u64 = 1_700_000_000_000_000;

/// Ticks of per-process utilization samples the fake keeps, newest last.
const PUTIL_HISTORY_TICKS: u64 = 20;
/// Device handles are these small integers disguised as pointers; nothing
/// on the caller's side dereferences them. A handle is
/// `HANDLE_BASE + index + generation × HANDLE_GENERATION`: a GPU reset
/// starts a new generation, and handles of an older one stay lost.
const HANDLE_BASE: usize = 0x1000;
const HANDLE_GENERATION: usize = 0x100;
/// MIG device handles are `MIG_HANDLE_BASE` plus the instance's place in
/// `FAKE_NVML_MIG`.
const MIG_HANDLE_BASE: usize = 0x10_0000;
/// The queries a MIG device handle answers.
const MIG_QUERIES: [&str; 8] =
    ["uuid", "name", "memory", "compute", "graphics", "mps", "attributes", "gi_id"];
/// The compute slices of GPU-instance profiles 0–4
/// (`NVML_GPU_INSTANCE_PROFILE_1_SLICE` … `_7_SLICE`).
const PROFILE_SLICES: [u32; 5] = [1, 2, 3, 4, 7];
/// A pid no process has (above the kernel's `PID_MAX_LIMIT`, 2^22).
const NO_SUCH_PID: u32 = 4_194_999;

/// Event set handles are `EVENT_SET_BASE` plus the set's id (ids count up
/// from 1 over the process's life, so a set of an earlier initialisation is
/// never mistaken for a new one).
const EVENT_SET_BASE: usize = 0x20_0000;

// Event types (`nvmlEventType*`) and the names of the `events` key.
const EVENT_SBE: u64 = 0x1;
const EVENT_DBE: u64 = 0x2;
const EVENT_PSTATE: u64 = 0x4;
const EVENT_XID: u64 = 0x8;
const EVENT_CLOCK: u64 = 0x10;
const EVENT_POWER_SOURCE: u64 = 0x80;
const EVENT_MIG_CONFIG: u64 = 0x100;
const EVENT_NAMES: [(&str, u64); 7] = [
    ("sbe", EVENT_SBE),
    ("dbe", EVENT_DBE),
    ("pstate", EVENT_PSTATE),
    ("xid", EVENT_XID),
    ("clock", EVENT_CLOCK),
    ("power_source", EVENT_POWER_SOURCE),
    ("mig_config", EVENT_MIG_CONFIG),
];
/// The event types a GPU without an `events` key supports.
const DEFAULT_EVENTS: u64 = EVENT_SBE | EVENT_DBE | EVENT_PSTATE | EVENT_XID | EVENT_CLOCK;
/// The longest an `nvmlEventSetWait_v2` with a lost GPU in its set waits
/// before it answers `NVML_ERROR_GPU_IS_LOST`.
const LOST_WAIT: Duration = Duration::from_millis(100);

// `nvmlMemoryErrorType_t`, `nvmlEccCounterType_t`,
// `nvmlPageRetirementCause_t` and the number of `nvmlNvLinkErrorCounter_t`s.
const MEMORY_ERROR_CORRECTED: c_uint = 0;
const MEMORY_ERROR_UNCORRECTED: c_uint = 1;
const ECC_VOLATILE: c_uint = 0;
const ECC_AGGREGATE: c_uint = 1;
const RETIRED_MULTIPLE_SBE: c_uint = 0;
const RETIRED_DBE: c_uint = 1;
const NVLINK_ERROR_COUNTERS: c_uint = 5;

/// `NVML_STRUCT_VERSION(Memory, 2)`: the struct's size and its version.
const MEMORY_V2_VERSION: c_uint = 40 | (2 << 24);
/// `NVML_GPM_SUPPORT_VERSION` and `NVML_GPM_METRICS_GET_VERSION`.
const GPM_STRUCT_VERSION: c_uint = 1;

// Field ids (`NVML_FI_*`) and value types (`nvmlValueType_t`).
const FI_TOTAL_ENERGY: c_uint = 83;
const FI_PCIE_TX_BYTES: c_uint = 197;
const FI_PCIE_RX_BYTES: c_uint = 198;
const VALUE_TYPE_ULL: c_uint = 3;

// GPM metric ids (`nvmlGpmMetricId_t`).
const GPM_GRAPHICS_UTIL: c_uint = 1;
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

/// `nvmlEventData_t`.
#[repr(C)]
#[derive(Debug)]
pub struct EventData {
    device: *mut c_void,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlPciInfo_t` (`nvmlDeviceGetPciInfo_v3` fills it).
#[repr(C)]
#[derive(Debug)]
pub struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
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

/// `nvmlProcessInfo_t` (the v2 struct the `_v2` and `_v3` functions fill).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// The `nvmlProcessInfo_t` of nvml.h at 535.43–535.86: 32 bytes, with
/// `usedGpuCcProtectedMemory` at the end, under the same function names.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcessInfoR535 {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
    used_gpu_cc_protected_memory: c_ulonglong,
}

/// `nvmlFieldValue_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FieldValue {
    field_id: c_uint,
    scope_id: c_uint,
    timestamp: i64,
    latency_usec: i64,
    value_type: c_uint,
    nvml_return: Ret,
    value: c_ulonglong,
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
    assert!(size_of::<EventData>() == 32);
    assert!(size_of::<MemoryV2>() == 40);
    assert!(size_of::<ProcessInfo>() == 24);
    assert!(size_of::<ProcessInfoR535>() == 32);
    assert!(size_of::<FieldValue>() == 40);
    assert!(size_of::<ProcessUtilizationSample>() == 32);
    assert!(size_of::<GpmSupport>() == 8);
    assert!(size_of::<GpmMetric>() == 40);
    assert!(size_of::<GpmMetricsGet>() == 24 + 40 * GPM_METRIC_MAX);
};

/// `nvmlDeviceAttributes_t`.
#[repr(C)]
#[derive(Debug)]
pub struct DeviceAttributes {
    multiprocessor_count: c_uint,
    shared_copy_engine_count: c_uint,
    shared_decoder_count: c_uint,
    shared_encoder_count: c_uint,
    shared_jpeg_count: c_uint,
    shared_ofa_count: c_uint,
    gpu_instance_slice_count: c_uint,
    compute_instance_slice_count: c_uint,
    memory_size_mb: c_ulonglong,
}

/// `nvmlGpuInstanceProfileInfo_t`.
#[repr(C)]
#[derive(Debug)]
pub struct GpuInstanceProfileInfo {
    id: c_uint,
    is_p2p_supported: c_uint,
    slice_count: c_uint,
    instance_count: c_uint,
    multiprocessor_count: c_uint,
    copy_engine_count: c_uint,
    decoder_count: c_uint,
    encoder_count: c_uint,
    jpeg_count: c_uint,
    ofa_count: c_uint,
    memory_size_mb: c_ulonglong,
}

const _: () = {
    assert!(size_of::<DeviceAttributes>() == 40);
    assert!(size_of::<GpuInstanceProfileInfo>() == 48);
};

/// What `nvmlGpmSampleAlloc` hands out: which GPU (and GPU instance, for
/// `nvmlGpmMigSampleGet`) and tick it was filled at.
#[derive(Debug)]
pub struct GpmSample {
    gpu: Option<usize>,
    mig: Option<c_uint>,
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
    pci: String,
    minor: u32,
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
    deny: Vec<String>,
    missing: Vec<String>,
    fail_after: Option<u64>,
    fail_code: Ret,
    lost_at: Option<u64>,
    reset_after: u64,
    hang_after: Option<u64>,
    pcie_latency_ms: u64,
    compute: Vec<(u32, u64)>,
    graphics: Vec<(u32, u64)>,
    mps: Vec<(u32, u64)>,
    putil: ProcUtil,
    putil_until: Option<u64>,
    putil_stale: bool,
    putil_burst: u32,
    putil_back_at: Option<u64>,
    putil_back_s: u64,
    /// Number of `nvmlDeviceGetUtilizationRates` calls so far (and of
    /// handle requests while lost).
    tick: u64,
    /// Bumped by a reset; handles of older generations stay lost.
    generation: usize,
    /// Samples owed by `putil_burst` to the next query that fills a buffer.
    burst_pending: u32,
    /// `mig`: `None` without MIG, else whether MIG mode is on.
    mig: Option<bool>,
    mig_slices: u32,
    /// A MIG instance's: its GPU's index, ids, slices and life.
    parent: Option<usize>,
    gi: c_uint,
    ci: c_uint,
    slices: u32,
    gi_slices: Option<u32>,
    from: u64,
    until: Option<u64>,
    /// The event types the GPU supports (`events`).
    events: u64,
    /// Scripted events: (tick, XID code) and (tick, error count) pairs,
    /// and the ticks of P-state changes.
    xid_at: Vec<(u64, u64)>,
    sbe_at: Vec<(u64, u64)>,
    dbe_at: Vec<(u64, u64)>,
    pstate_at: Vec<u64>,
    /// (ms after the first registration for events, XID code).
    xid_after_ms: Vec<(u64, u64)>,
    /// Whether the `xid_after_ms` thread has been started.
    xid_timer: bool,
    /// Starting ECC error counts, and what the aggregate counters hold on
    /// top of the volatile ones.
    ecc_corr: u64,
    ecc_unc: u64,
    ecc_corr_agg: u64,
    ecc_unc_agg: u64,
    /// Remapped rows (corrected, uncorrected, pending, failure), from tick
    /// 0 and from the scripted ticks on.
    remap: [u64; 4],
    remap_at: Vec<(u64, [u64; 4])>,
    /// Retired pages (multiple single-bit, double-bit, pending), likewise.
    retired: [u64; 3],
    retired_at: Vec<(u64, [u64; 3])>,
    /// PCIe replays at tick 0, and (tick, replays added).
    replay: u64,
    replay_at: Vec<(u64, u64)>,
    /// Active NVLinks (0: no NVLink), and [tick, link, counter, errors added].
    nvlinks: u32,
    nvlink_err_at: Vec<[u64; 4]>,
}

impl Gpu {
    fn parse(index: usize, spec: &str) -> Result<Gpu, String> {
        let mut gpu = Gpu {
            uuid: format!("GPU-fake-{index}"),
            name: "Fake GPU".to_owned(),
            pci: format!("00000000:{:02X}:00.0", index + 1),
            minor: index as u32,
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
            deny: Vec::new(),
            missing: Vec::new(),
            fail_after: None,
            fail_code: ERROR_GPU_IS_LOST,
            lost_at: None,
            reset_after: 2,
            hang_after: None,
            pcie_latency_ms: 0,
            compute: Vec::new(),
            graphics: Vec::new(),
            mps: Vec::new(),
            putil: ProcUtil::Samples(Vec::new()),
            putil_until: None,
            putil_stale: false,
            putil_burst: 0,
            putil_back_at: None,
            putil_back_s: 0,
            tick: 0,
            generation: 0,
            burst_pending: 0,
            mig: None,
            mig_slices: 7,
            parent: None,
            gi: 0,
            ci: 0,
            slices: 1,
            gi_slices: None,
            from: 0,
            until: None,
            events: DEFAULT_EVENTS,
            xid_at: Vec::new(),
            sbe_at: Vec::new(),
            dbe_at: Vec::new(),
            pstate_at: Vec::new(),
            xid_after_ms: Vec::new(),
            xid_timer: false,
            ecc_corr: 0,
            ecc_unc: 0,
            ecc_corr_agg: 0,
            ecc_unc_agg: 0,
            remap: [0; 4],
            remap_at: Vec::new(),
            retired: [0; 3],
            retired_at: Vec::new(),
            replay: 0,
            replay_at: Vec::new(),
            nvlinks: 0,
            nvlink_err_at: Vec::new(),
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("`{item}` is not key=value"))?;
            let value = value.trim();
            match key.trim() {
                "uuid" => gpu.uuid = value.to_owned(),
                "name" => gpu.name = value.to_owned(),
                "pci" => gpu.pci = value.to_owned(),
                "minor" => gpu.minor = num(key, value)?,
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
                "gpm_gr" => gpu.gpm_values.push((GPM_GRAPHICS_UTIL, num(key, value)?)),
                "unsupported" => gpu.unsupported = value.split('|').map(str::to_owned).collect(),
                "deny" => gpu.deny = value.split('|').map(str::to_owned).collect(),
                "missing" => gpu.missing = value.split('|').map(str::to_owned).collect(),
                "fail_after" => gpu.fail_after = Some(num(key, value)?),
                "fail_code" => gpu.fail_code = num(key, value)?,
                "lost_at" => gpu.lost_at = Some(num(key, value)?),
                "reset_after" => gpu.reset_after = num(key, value)?,
                "hang_after" => gpu.hang_after = Some(num(key, value)?),
                "pcie_latency_ms" => gpu.pcie_latency_ms = num(key, value)?,
                "compute" => gpu.compute = processes(value)?,
                "graphics" => gpu.graphics = processes(value)?,
                "mps" => gpu.mps = processes(value)?,
                "putil_until" => gpu.putil_until = Some(num(key, value)?),
                "putil_stale" => gpu.putil_stale = value == "1",
                "putil_burst" => gpu.putil_burst = num(key, value)?,
                "putil_back_at" => gpu.putil_back_at = Some(num(key, value)?),
                "putil_back_s" => gpu.putil_back_s = num(key, value)?,
                "mig" => gpu.mig = Some(value == "1"),
                "mig_slices" => gpu.mig_slices = num(key, value)?,
                "parent" => gpu.parent = Some(num(key, value)?),
                "gi" => gpu.gi = num(key, value)?,
                "ci" => gpu.ci = num(key, value)?,
                "slices" => gpu.slices = num(key, value)?,
                "gi_slices" => gpu.gi_slices = Some(num(key, value)?),
                "from" => gpu.from = num(key, value)?,
                "until" => gpu.until = Some(num(key, value)?),
                "events" => gpu.events = event_mask(value)?,
                "xid_at" => gpu.xid_at = pairs(key, value)?,
                "sbe_at" => gpu.sbe_at = pairs(key, value)?,
                "dbe_at" => gpu.dbe_at = pairs(key, value)?,
                "pstate_at" => gpu.pstate_at = entries(key, value)?.into_iter().map(|[t]| t).collect(),
                "xid_after_ms" => gpu.xid_after_ms = pairs(key, value)?,
                "ecc_corr" => gpu.ecc_corr = num(key, value)?,
                "ecc_unc" => gpu.ecc_unc = num(key, value)?,
                "ecc_corr_agg" => gpu.ecc_corr_agg = num(key, value)?,
                "ecc_unc_agg" => gpu.ecc_unc_agg = num(key, value)?,
                "remap" => gpu.remap = single(key, value)?,
                "remap_at" => {
                    gpu.remap_at =
                        entries(key, value)?.into_iter().map(|[t, c, u, p, f]| (t, [c, u, p, f])).collect();
                }
                "retired" => gpu.retired = single(key, value)?,
                "retired_at" => {
                    gpu.retired_at =
                        entries(key, value)?.into_iter().map(|[t, s, d, p]| (t, [s, d, p])).collect();
                }
                "replay" => gpu.replay = num(key, value)?,
                "replay_at" => gpu.replay_at = pairs(key, value)?,
                "nvlinks" => gpu.nvlinks = num(key, value)?,
                "nvlink_err_at" => gpu.nvlink_err_at = entries(key, value)?,
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

    /// What `query` answers on this GPU when it is not simply served: not
    /// supported, not permitted, or not in this driver.
    fn refusal(&self, query: &str) -> Option<Ret> {
        let has = |list: &[String]| list.iter().any(|u| u == query);
        if has(&self.unsupported) {
            Some(ERROR_NOT_SUPPORTED)
        } else if has(&self.deny) {
            Some(ERROR_NO_PERMISSION)
        } else if has(&self.missing) {
            Some(ERROR_FUNCTION_NOT_FOUND)
        } else {
            None
        }
    }

    fn failing(&self) -> bool {
        self.fail_after.is_some_and(|n| self.tick > n)
    }

    /// Whether the GPU is off the bus at its current tick; `symbol` is the
    /// call being made (at tick `lost_at` the utilization read still works).
    fn lost(&self, symbol: &str) -> bool {
        let Some(n) = self.lost_at else { return false };
        let lost_from_here = self.tick > n || (self.tick == n && symbol != "nvmlDeviceGetUtilizationRates");
        lost_from_here && self.generation == 0
    }

    /// Resets a lost GPU once its time off the bus is over.
    fn maybe_reset(&mut self) {
        if self.lost_at.is_some_and(|n| self.generation == 0 && self.tick >= n + self.reset_after) {
            self.generation = 1;
        }
    }

    fn hanging(&self) -> bool {
        self.hang_after.is_some_and(|n| self.tick > n)
    }

    /// Whether this MIG instance exists at its parent's tick `tick`.
    fn lives_at(&self, tick: u64) -> bool {
        tick >= self.from && self.until.is_none_or(|u| tick <= u)
    }

    /// The GPU and compute instance ids process entries carry.
    fn instance_ids(&self) -> (c_uint, c_uint) {
        if self.parent.is_some() { (self.gi, self.ci) } else { (NO_INSTANCE, NO_INSTANCE) }
    }

    /// The sample clock at `tick`, µs since the epoch.
    fn clock_us(&self, tick: u64) -> u64 {
        let back =
            if self.putil_back_at.is_some_and(|n| tick >= n) { self.putil_back_s * 1_000_000 } else { 0 };
        PUTIL_BASE_US + tick * 1_000_000 - back
    }

    /// The values a `key_at` script gives at this GPU's tick: those of its
    /// latest entry not after the tick, else `initial`.
    fn at_tick<T: Copy>(&self, initial: T, script: &[(u64, T)]) -> T {
        script.iter().filter(|(t, _)| *t <= self.tick).max_by_key(|(t, _)| *t).map_or(initial, |(_, v)| *v)
    }

    /// What a script of (tick, count) has added up to by this GPU's tick.
    fn grown(&self, script: &[(u64, u64)]) -> u64 {
        script.iter().filter(|(t, _)| *t <= self.tick).map(|(_, n)| n).sum()
    }

    /// The scripted events of this GPU's present tick, as (type, data), in
    /// the order they are queued.
    fn events_at_tick(&self) -> Vec<(u64, u64)> {
        let now = |t: &u64| *t == self.tick;
        let counts = |script: &[(u64, u64)], event_type| {
            script.iter().filter(|(t, _)| now(t)).map(move |_| (event_type, 0)).collect::<Vec<_>>()
        };
        let mut events = counts(&self.sbe_at, EVENT_SBE);
        events.extend(counts(&self.dbe_at, EVENT_DBE));
        events.extend(self.pstate_at.iter().filter(|t| now(t)).map(|_| (EVENT_PSTATE, 0)));
        events.extend(self.xid_at.iter().filter(|(t, _)| now(t)).map(|(_, code)| (EVENT_XID, *code)));
        events
    }

    /// Whether `link` is one of this GPU's NVLinks: `NOT_SUPPORTED` without
    /// NVLink, `INVALID_ARGUMENT` past its last link.
    fn nvlink(&self, link: c_uint) -> Result<(), Ret> {
        if self.nvlinks == 0 {
            Err(ERROR_NOT_SUPPORTED)
        } else if link >= self.nvlinks {
            Err(ERROR_INVALID_ARGUMENT)
        } else {
            Ok(())
        }
    }

    /// The pages this GPU has retired for `cause` by its tick, as
    /// (address, retirement time in seconds since the epoch), oldest first;
    /// `None` for a cause NVML does not have.
    fn retired_pages(&self, cause: c_uint) -> Option<Vec<(u64, u64)>> {
        let which = match cause {
            RETIRED_MULTIPLE_SBE => 0,
            RETIRED_DBE => 1,
            _ => return None,
        };
        let mut script = vec![(0, self.retired)];
        script.extend(self.retired_at.iter().filter(|(t, _)| *t <= self.tick));
        // Stable: a script entry at tick 0 comes after (and overrides) the initial values.
        script.sort_by_key(|(t, _)| *t);
        let count = script.last().map_or(0, |(_, v)| v[which]);
        let pages = (0..count)
            .map(|i| {
                let retired_at = script.iter().find(|(_, v)| v[which] > i).map_or(0, |(t, _)| *t);
                let address = 0x1_0000_0000 * (u64::from(cause) + 1) + i * 0x1000;
                (address, self.clock_us(retired_at) / 1_000_000)
            })
            .collect();
        Some(pages)
    }
}

/// Blocks the calling thread for good: an NVML call that never returns.
fn hang_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String> {
    value.trim().parse().map_err(|_| format!("`{key}={value}` is not a number"))
}

/// A pid, or `self` for the pid of the process that loaded the fake.
fn pid_of(value: &str) -> Result<u32, String> {
    if value == "self" { Ok(std::process::id()) } else { num("pid", value) }
}

/// A `|`-separated list of entries of `K` `:`-separated numbers.
fn entries<const K: usize>(key: &str, value: &str) -> Result<Vec<[u64; K]>, String> {
    let mut out = Vec::new();
    for entry in value.split('|').map(str::trim).filter(|s| !s.is_empty()) {
        let parts = entry.split(':').map(|part| num(key, part)).collect::<Result<Vec<u64>, _>>()?;
        let fields = <[u64; K]>::try_from(parts)
            .map_err(|_| format!("`{key}` entry `{entry}` is not {K} numbers separated by `:`"))?;
        out.push(fields);
    }
    Ok(out)
}

/// A `|`-separated list of `A:B` pairs of numbers.
fn pairs(key: &str, value: &str) -> Result<Vec<(u64, u64)>, String> {
    Ok(entries(key, value)?.into_iter().map(|[a, b]| (a, b)).collect())
}

/// One entry of `K` `:`-separated numbers.
fn single<const K: usize>(key: &str, value: &str) -> Result<[u64; K], String> {
    match entries(key, value)?.as_slice() {
        [one] => Ok(*one),
        _ => Err(format!("`{key}={value}` is not {K} numbers separated by `:`")),
    }
}

/// The `events` key: event type names separated by `|`, or `none`.
fn event_mask(value: &str) -> Result<u64, String> {
    if value == "none" {
        return Ok(0);
    }
    let mut mask = 0;
    for name in value.split('|').map(str::trim).filter(|s| !s.is_empty()) {
        match EVENT_NAMES.iter().find(|(n, _)| *n == name) {
            Some((_, bit)) => mask |= bit,
            None => return Err(format!("unknown event type `{name}`")),
        }
    }
    Ok(mask)
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

/// Which process-list entries the driver's `_v3` calls fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcessLayout {
    /// 24 bytes (`nvmlProcessInfo_v2_t`).
    Standard,
    /// 32 bytes, 535.43–535.86.
    R535Wide,
    /// No `_v3` calls at all, 535.98.
    NoV3,
}

impl ProcessLayout {
    fn of_driver(version: &str) -> ProcessLayout {
        let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(535), Some(minor)) if (43..=86).contains(&minor) => ProcessLayout::R535Wide,
            (Some(535), Some(98)) => ProcessLayout::NoV3,
            _ => ProcessLayout::Standard,
        }
    }
}

struct State {
    gpus: Vec<Gpu>,
    /// `FAKE_NVML_MIG`.
    migs: Vec<Gpu>,
    driver: String,
    layout: ProcessLayout,
    log: Option<File>,
    /// `FAKE_NVML_RELOAD_AT`.
    reload_at: Option<u64>,
    /// The driver was reloaded under this initialisation.
    reloaded: bool,
    /// The event sets of `nvmlEventSetCreate` not yet freed.
    sets: Vec<EventSet>,
    /// Which initialisation of the process this is (`SERIAL`).
    serial: u64,
}

/// An event set: what was registered in it and its pending events, oldest
/// first.
struct EventSet {
    id: usize,
    registrations: Vec<Registration>,
    pending: VecDeque<Event>,
}

/// The event types registered in a set for a GPU, through a handle of
/// `generation`.
struct Registration {
    gpu: usize,
    generation: usize,
    types: u64,
}

/// A pending event of a set.
struct Event {
    gpu: usize,
    generation: usize,
    event_type: u64,
    data: u64,
}

/// Counts `nvmlInit_v2`s, so that a `xid_after_ms` thread of an earlier
/// scenario queues nothing into a later one.
static SERIAL: AtomicU64 = AtomicU64::new(0);
/// The id of the next event set.
static NEXT_SET: AtomicUsize = AtomicUsize::new(1);
/// Signalled (with `STATE`) whenever an event is queued, a set is freed or
/// a GPU's tick advances, to wake `nvmlEventSetWait_v2`.
static EVENTS: Condvar = Condvar::new();

/// Whether the driver reload of `FAKE_NVML_RELOAD_AT` has happened in this
/// process (it happens once; a re-initialised library works).
static RELOAD_DONE: AtomicBool = AtomicBool::new(false);

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
        let migs = match std::env::var("FAKE_NVML_MIG") {
            Ok(spec) => spec
                .split(';')
                .filter(|s| !s.trim().is_empty())
                .enumerate()
                .map(|(i, s)| {
                    let mig = Gpu::parse(i, s).map_err(|e| format!("MIG instance {i}: {e}"))?;
                    match mig.parent {
                        Some(p) if p < gpus.len() => Ok(mig),
                        _ => Err(format!("MIG instance {i}: `parent=` must name one of the GPUs")),
                    }
                })
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
        let layout = ProcessLayout::of_driver(&driver);
        let reload_at = match std::env::var("FAKE_NVML_RELOAD_AT") {
            Ok(v) => Some(num("FAKE_NVML_RELOAD_AT", &v)?),
            Err(_) => None,
        };
        let serial = SERIAL.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(State { gpus, migs, driver, layout, log, reload_at, reloaded: false, sets: Vec::new(), serial })
    }

    /// Queues an event of GPU `gpu` in every set that registered its type
    /// for the GPU through a handle of its present generation; a GPU that
    /// is lost (for `symbol`, the call that raises the event) raises none.
    fn queue_event(&mut self, gpu: usize, symbol: &str, event_type: u64, data: u64) {
        let Some(g) = self.gpus.get(gpu) else { return };
        if g.lost(symbol) {
            return;
        }
        let generation = g.generation;
        for set in &mut self.sets {
            let registered = set
                .registrations
                .iter()
                .any(|r| r.gpu == gpu && r.generation == generation && r.types & event_type != 0);
            if registered {
                set.pending.push_back(Event { gpu, generation, event_type, data });
            }
        }
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

/// The GPU index and generation a GPU handle stands for.
fn handle_index(device: *mut c_void) -> Option<(usize, usize)> {
    if device as usize >= MIG_HANDLE_BASE {
        return None;
    }
    let raw = (device as usize).checked_sub(HANDLE_BASE)?;
    Some((raw % HANDLE_GENERATION, raw / HANDLE_GENERATION))
}

/// The handle of GPU `index` in its `generation`.
fn gpu_handle(index: usize, generation: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(HANDLE_BASE + index + generation * HANDLE_GENERATION)
}

/// The id of the event set behind a handle (0, no set's, for a handle that
/// is none).
fn set_id(set: *mut c_void) -> usize {
    (set as usize).saturating_sub(EVENT_SET_BASE)
}

/// The `FAKE_NVML_MIG` instance a MIG device handle stands for.
fn mig_index(device: *mut c_void) -> Option<usize> {
    (device as usize).checked_sub(MIG_HANDLE_BASE)
}

/// The handle of `FAKE_NVML_MIG` instance `k`.
fn mig_handle(k: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(MIG_HANDLE_BASE + k)
}

/// Runs `f` on the GPU behind `device`, after logging the call and
/// answering for an uninitialised library, an unknown handle, a refused
/// query (`query`), a GPU that has started failing, is lost or hangs.
fn with_gpu(
    device: *mut c_void,
    symbol: &str,
    query: &str,
    extra: std::fmt::Arguments<'_>,
    f: impl FnOnce(&mut Gpu, ProcessLayout) -> Ret,
) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    if let Some(k) = mig_index(device) {
        let Some(parent) = state.migs.get(k).and_then(|m| m.parent) else {
            return ERROR_INVALID_ARGUMENT;
        };
        let tick = state.gpus[parent].tick;
        state.log(format_args!("{symbol} gpu={parent} mig={k} tick={tick}{extra}"));
        if state.reloaded {
            return ERROR_UNKNOWN;
        }
        let layout = state.layout;
        let gpu = &state.gpus[parent];
        if gpu.hanging() {
            drop(guard);
            hang_forever();
        }
        if gpu.failing() {
            return gpu.fail_code;
        }
        if gpu.lost(symbol) {
            return ERROR_GPU_IS_LOST;
        }
        let mig = &mut state.migs[k];
        if !mig.lives_at(tick) {
            return ERROR_INVALID_ARGUMENT;
        }
        if !MIG_QUERIES.contains(&query) {
            return ERROR_NOT_SUPPORTED;
        }
        if let Some(code) = mig.refusal(query) {
            return code;
        }
        return f(mig, layout);
    }
    let Some((index, generation)) = handle_index(device).filter(|(i, _)| *i < state.gpus.len()) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if symbol == "nvmlDeviceGetUtilizationRates" {
        state.gpus[index].tick += 1;
    }
    let tick = state.gpus[index].tick;
    state.log(format_args!("{symbol} gpu={index} tick={tick}{extra}"));
    if index == 0 && state.reload_at == Some(tick) && !RELOAD_DONE.swap(true, Ordering::SeqCst) {
        state.reloaded = true;
    }
    if state.reloaded {
        return ERROR_UNKNOWN;
    }
    if symbol == "nvmlDeviceGetUtilizationRates" {
        // The tick's events, before the call can hang, fail or be lost.
        state.gpus[index].maybe_reset();
        for (event_type, data) in state.gpus[index].events_at_tick() {
            state.queue_event(index, symbol, event_type, data);
        }
        // Also wakes waits whose GPU this tick may have lost.
        EVENTS.notify_all();
    }
    let layout = state.layout;
    let gpu = &mut state.gpus[index];
    if gpu.hanging() {
        // Other GPUs' calls go on: the lock is not held while blocked.
        drop(guard);
        hang_forever();
    }
    gpu.maybe_reset();
    if gpu.failing() {
        return gpu.fail_code;
    }
    if gpu.lost(symbol) || generation != gpu.generation {
        return ERROR_GPU_IS_LOST;
    }
    if let Some(code) = gpu.refusal(query) {
        return code;
    }
    // MIG mode: no utilization, of the GPU or of its processes.
    if gpu.mig == Some(true) && matches!(query, "util" | "putil") {
        return ERROR_NOT_SUPPORTED;
    }
    f(gpu, layout)
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

/// The list protocol of `nvmlDeviceGet*RunningProcesses_v*`, filling
/// entries of type `T` built by `entry` from (pid, used memory).
unsafe fn put_processes<T>(
    list: &[(u32, u64)],
    count: *mut c_uint,
    infos: *mut T,
    entry: impl Fn(u32, u64) -> T,
) -> Ret {
    if count.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: `count` is a non-null in/out parameter; `infos`, when not
    // null, holds `*count` entries of the layout the caller and this
    // driver version agree on.
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
            infos.add(i).write(entry(*pid, *mem));
        }
    }
    SUCCESS
}

/// A `_v2` entry of a process of `g` (its instance ids for a MIG instance).
fn entry_v2(g: &Gpu) -> impl Fn(u32, u64) -> ProcessInfo {
    let (gpu_instance_id, compute_instance_id) = g.instance_ids();
    move |pid, used_gpu_memory| ProcessInfo { pid, used_gpu_memory, gpu_instance_id, compute_instance_id }
}

/// A `_v3` process call on `g`: the entries this driver version fills.
unsafe fn put_processes_v3(
    g: &Gpu,
    list: &[(u32, u64)],
    layout: ProcessLayout,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    let (gpu_instance_id, compute_instance_id) = g.instance_ids();
    // SAFETY (all three): the caller's buffer, of the layout of this
    // driver version, checked in `put_processes`.
    match layout {
        ProcessLayout::Standard => unsafe { put_processes(list, count, infos, entry_v2(g)) },
        ProcessLayout::R535Wide => unsafe {
            put_processes(list, count, infos.cast::<ProcessInfoR535>(), |pid, used| ProcessInfoR535 {
                pid,
                used_gpu_memory: used,
                gpu_instance_id,
                compute_instance_id,
                used_gpu_cc_protected_memory: 0,
            })
        },
        ProcessLayout::NoV3 => ERROR_FUNCTION_NOT_FOUND,
    }
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

/// pynvml's initialisation (the recorder calls `nvmlInit_v2`), so that
/// `tests/device-crosscheck.py` can be tried against this library.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> Ret {
    nvmlInit_v2()
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
    if state.reloaded {
        return ERROR_UNKNOWN;
    }
    let Some(gpu) = state.gpus.get_mut(index as usize) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if gpu.hanging() {
        drop(guard);
        hang_forever();
    }
    if gpu.failing() {
        return gpu.fail_code;
    }
    if gpu.deny.iter().any(|d| d == "handle") {
        return ERROR_NO_PERMISSION;
    }
    // A recorder without a handle asks for one once per tick: the lost
    // GPU's time passes with it.
    if gpu.lost("nvmlDeviceGetHandleByIndex_v2") {
        gpu.tick += 1;
        gpu.maybe_reset();
        if gpu.lost("nvmlDeviceGetHandleByIndex_v2") {
            return ERROR_GPU_IS_LOST;
        }
    }
    // SAFETY: NVML's contract: a valid out-parameter.
    unsafe { put(device, gpu_handle(index as usize, gpu.generation)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(device: *mut c_void, uuid: *mut c_char, length: c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a buffer of `length` bytes.
    with_gpu(device, "nvmlDeviceGetUUID", "uuid", format_args!(""), |g, _| unsafe {
        copy_str(&g.uuid, uuid, length)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(device: *mut c_void, name: *mut c_char, length: c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a buffer of `length` bytes.
    with_gpu(device, "nvmlDeviceGetName", "name", format_args!(""), |g, _| unsafe {
        copy_str(&g.name, name, length)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: *mut c_void, out: *mut PciInfo) -> Ret {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlDeviceGetPciInfo_v3", "pci", format_args!(""), |g, _| {
        let Some(bus) = g.pci.split(':').nth(1).and_then(|b| u32::from_str_radix(b, 16).ok()) else {
            return ERROR_UNKNOWN;
        };
        // SAFETY: NVML's contract: a valid out-parameter; the bus id arrays
        // are sized as NVML's and the texts are checked to fit.
        unsafe {
            (*out).domain = 0;
            (*out).bus = bus;
            (*out).device = 0;
            (*out).pci_device_id = 0x2330_10de;
            (*out).pci_sub_system_id = 0;
            let legacy = copy_str(g.pci.get(4..).unwrap_or(""), (*out).bus_id_legacy.as_mut_ptr(), 16);
            if legacy != SUCCESS {
                return legacy;
            }
            copy_str(&g.pci, (*out).bus_id.as_mut_ptr(), 32)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(device: *mut c_void, minor: *mut c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetMinorNumber", "minor", format_args!(""), |g, _| unsafe {
        put(minor, g.minor)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(device: *mut c_void, out: *mut Utilization) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetUtilizationRates", "util", format_args!(""), |g, _| unsafe {
        put(out, Utilization { gpu: g.util, memory: g.mem_util })
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(device: *mut c_void, out: *mut MemoryV2) -> Ret {
    if out.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlDeviceGetMemoryInfo_v2", "memory", format_args!(""), |g, _| {
        // SAFETY: NVML's contract: a valid, versioned struct to fill; the
        // version the caller set is kept.
        unsafe {
            if (*out).version != MEMORY_V2_VERSION {
                return ERROR_ARGUMENT_VERSION_MISMATCH;
            }
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
    with_gpu(device, "nvmlDeviceGetPowerUsage", "power", format_args!(""), |g, _| unsafe {
        put(power, g.power)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(device: *mut c_void, limit: *mut c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetEnforcedPowerLimit", "power_limit", format_args!(""), |g, _| unsafe {
        put(limit, g.power_limit)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    device: *mut c_void,
    energy: *mut c_ulonglong,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetTotalEnergyConsumption", "energy", format_args!(""), |g, _| unsafe {
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
    with_gpu(
        device,
        "nvmlDeviceGetClockInfo",
        "sm_clock",
        format_args!(" type={clock_type}"),
        |g, _| unsafe {
            if clock_type == NVML_CLOCK_SM { put(clock, g.sm_clock) } else { ERROR_NOT_SUPPORTED }
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    device: *mut c_void,
    sensor: c_uint,
    temp: *mut c_uint,
) -> Ret {
    const NVML_TEMPERATURE_GPU: c_uint = 0;
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetTemperature", "temp", format_args!(""), |g, _| unsafe {
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
    with_gpu(device, "nvmlDeviceGetEncoderUtilization", "enc", format_args!(""), |g, _| unsafe {
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
    with_gpu(device, "nvmlDeviceGetDecoderUtilization", "dec", format_args!(""), |g, _| unsafe {
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
    let mut latency_ms = 0;
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    let ret = with_gpu(
        device,
        "nvmlDeviceGetPcieThroughput",
        "pcie",
        format_args!(" counter={counter}"),
        |g, _| unsafe {
            latency_ms = g.pcie_latency_ms;
            match counter {
                TX_BYTES => put(value, g.pcie_tx),
                RX_BYTES => put(value, g.pcie_rx),
                _ => ERROR_INVALID_ARGUMENT,
            }
        },
    );
    // The measuring window, outside the lock as the driver's is per GPU.
    std::thread::sleep(std::time::Duration::from_millis(latency_ms));
    ret
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
        |g, _| unsafe { put(reasons, g.clock_reasons) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(
        device,
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "compute",
        format_args!(""),
        |g, layout| unsafe { put_processes_v3(g, &g.compute, layout, count, infos) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(device, "nvmlDeviceGetComputeRunningProcesses_v2", "compute", format_args!(""), |g, _| unsafe {
        put_processes(&g.compute, count, infos, entry_v2(g))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(
        device,
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "graphics",
        format_args!(""),
        |g, layout| unsafe { put_processes_v3(g, &g.graphics, layout, count, infos) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v2(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(
        device,
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        "graphics",
        format_args!(""),
        |g, _| unsafe { put_processes(&g.graphics, count, infos, entry_v2(g)) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(
        device,
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        "mps",
        format_args!(""),
        |g, layout| unsafe { put_processes_v3(g, &g.mps, layout, count, infos) },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v2(
    device: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_processes`.
    with_gpu(device, "nvmlDeviceGetMPSComputeRunningProcesses_v2", "mps", format_args!(""), |g, _| unsafe {
        put_processes(&g.mps, count, infos, entry_v2(g))
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
    with_gpu(device, "nvmlDeviceGetProcessUtilization", "putil", extra, |g, _| {
        let ProcUtil::Samples(procs) = &g.putil else {
            return ERROR_NOT_FOUND;
        };
        let sample = |pid, time_stamp, sm_util, mem_util| ProcessUtilizationSample {
            pid,
            time_stamp,
            sm_util,
            mem_util,
            enc_util: 0,
            dec_util: 0,
        };
        let mut buffered = Vec::new();
        // The driver keeps a bounded history of samples, not every one since
        // it loaded: without a bound, each call would cost more as a run
        // goes on, and a long benchmark would measure this fake.
        let newest = g.tick.min(g.putil_until.unwrap_or(u64::MAX));
        for t in newest.saturating_sub(PUTIL_HISTORY_TICKS - 1).max(1)..=newest {
            let newest = g.clock_us(t);
            for &(pid, sm, mem) in procs {
                buffered.push(sample(pid, newest, sm, mem));
                buffered.push(sample(pid, newest - 500_000, sm + 1, mem + 1));
            }
        }
        // Samples that arrived after a count query of this tick.
        if samples.is_null() && g.putil_burst > 0 {
            g.burst_pending = g.putil_burst;
        } else if g.burst_pending > 0 {
            let at = g.clock_us(g.tick) - 250_000;
            buffered.extend((0..g.burst_pending).map(|_| sample(NO_SUCH_PID, at, 50, 50)));
        }
        if !g.putil_stale {
            buffered.retain(|s| s.time_stamp > last_seen);
        }
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
        g.burst_pending = 0;
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(device: *mut c_void, support: *mut GpmSupport) -> Ret {
    if support.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlGpmQueryDeviceSupport", "gpm", format_args!(""), |g, _| {
        // SAFETY: NVML's contract: a valid, versioned struct to fill.
        unsafe {
            if (*support).version != GPM_STRUCT_VERSION {
                return ERROR_ARGUMENT_VERSION_MISMATCH;
            }
            (*support).is_supported_device = c_uint::from(g.gpm);
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut *mut GpmSample) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let raw = Box::into_raw(Box::new(GpmSample { gpu: None, mig: None, tick: 0 }));
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
    let gpu = handle_index(device).map(|(index, _)| index);
    with_gpu(device, "nvmlGpmSampleGet", "gpm", format_args!(""), |g, _| {
        if !g.gpm {
            return ERROR_NOT_SUPPORTED;
        }
        // SAFETY: NVML's contract: a live sample from `nvmlGpmSampleAlloc`.
        unsafe {
            (*sample).gpu = gpu;
            (*sample).mig = None;
            (*sample).tick = g.tick;
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMigSampleGet(device: *mut c_void, gi: c_uint, sample: *mut GpmSample) -> Ret {
    if sample.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    let Some(gpu) = handle_index(device).map(|(index, _)| index) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let mut tick = 0;
    let ret = with_gpu(device, "nvmlGpmMigSampleGet", "gpm", format_args!(" gi={gi}"), |g, _| {
        tick = g.tick;
        if !g.gpm {
            ERROR_NOT_SUPPORTED
        } else if g.mig != Some(true) {
            ERROR_INVALID_ARGUMENT
        } else {
            SUCCESS
        }
    });
    if ret != SUCCESS {
        return ret;
    }
    let guard = state();
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    if !state.migs.iter().any(|m| m.parent == Some(gpu) && m.gi == gi && m.lives_at(tick)) {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: NVML's contract: a live sample from `nvmlGpmSampleAlloc`.
    unsafe {
        (*sample).gpu = Some(gpu);
        (*sample).mig = Some(gi);
        (*sample).tick = tick;
    }
    SUCCESS
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
        Some(&GpmSample { gpu: Some(gpu1), mig: mig1, tick: tick1 }),
        Some(&GpmSample { gpu: Some(gpu2), mig: mig2, tick: tick2 }),
    ) = (first, second)
    else {
        return ERROR_INVALID_ARGUMENT;
    };
    let gi = mig2.map(|gi| format!(" gi={gi}")).unwrap_or_default();
    state.log(format_args!("nvmlGpmMetricsGet gpu={gpu2}{gi} tick={tick2} first_tick={tick1}"));
    if request.version != GPM_STRUCT_VERSION {
        return ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    if gpu1 != gpu2 || mig1 != mig2 || tick2 != tick1 + 1 || request.num_metrics as usize > GPM_METRIC_MAX {
        return ERROR_INVALID_ARGUMENT;
    }
    let Some(parent) = state.gpus.get(gpu2) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if parent.failing() || parent.lost("nvmlGpmMetricsGet") {
        return parent.fail_code;
    }
    // A GPU instance's metrics are its instance's.
    let gpu = match mig2 {
        None => parent,
        Some(gi) => match state.migs.iter().find(|m| m.parent == Some(gpu2) && m.gi == gi) {
            Some(mig) => mig,
            None => return ERROR_INVALID_ARGUMENT,
        },
    };
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

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: *mut c_void,
    values_count: std::ffi::c_int,
    values: *mut FieldValue,
) -> Ret {
    let Ok(n) = usize::try_from(values_count) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if values.is_null() || n == 0 {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: NVML's contract: `values` holds `values_count` entries whose
    // field ids the caller set.
    let values = unsafe { std::slice::from_raw_parts_mut(values, n) };
    let ids = values.iter().map(|v| v.field_id.to_string()).collect::<Vec<_>>().join(",");
    with_gpu(device, "nvmlDeviceGetFieldValues", "fields", format_args!(" fields={ids}"), |g, _| {
        let timestamp = i64::try_from(g.clock_us(g.tick)).unwrap_or(i64::MAX);
        for v in values.iter_mut() {
            let (query, value) = match v.field_id {
                FI_TOTAL_ENERGY => ("energy", g.energy + g.tick.saturating_sub(1) * g.energy_step),
                FI_PCIE_TX_BYTES => ("pcie_counters", u64::from(g.pcie_tx) * 1024 * g.tick),
                FI_PCIE_RX_BYTES => ("pcie_counters", u64::from(g.pcie_rx) * 1024 * g.tick),
                _ => ("unknown field", 0),
            };
            v.timestamp = timestamp;
            v.latency_usec = 0;
            v.value_type = VALUE_TYPE_ULL;
            v.value = value;
            let refused = if query == "pcie_counters" {
                g.refusal("pcie").or(g.refusal(query))
            } else {
                g.refusal(query)
            };
            v.nvml_return = match refused {
                _ if query == "unknown field" => ERROR_NOT_SUPPORTED,
                Some(code) => code,
                None => SUCCESS,
            };
        }
        SUCCESS
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: *mut c_void,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> Ret {
    with_gpu(device, "nvmlDeviceGetMigMode", "mig", format_args!(""), |g, _| match g.mig {
        None => ERROR_NOT_SUPPORTED,
        // SAFETY: NVML's contract: valid out-parameters.
        Some(on) => unsafe {
            match put(current, c_uint::from(on)) {
                SUCCESS => put(pending, c_uint::from(on)),
                err => err,
            }
        },
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(device: *mut c_void, count: *mut c_uint) -> Ret {
    with_gpu(device, "nvmlDeviceGetMaxMigDeviceCount", "mig", format_args!(""), |g, _| match g.mig {
        None => ERROR_NOT_SUPPORTED,
        // SAFETY: NVML's contract: a valid out-parameter.
        Some(_) => unsafe { put(count, g.mig_slices) },
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: *mut c_void,
    index: c_uint,
    mig_device: *mut *mut c_void,
) -> Ret {
    let Some(gpu) = handle_index(device).map(|(i, _)| i) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let mut tick = 0;
    let extra = format_args!(" index={index}");
    let ret = with_gpu(device, "nvmlDeviceGetMigDeviceHandleByIndex", "mig", extra, |g, _| {
        tick = g.tick;
        if g.mig == Some(true) { SUCCESS } else { ERROR_NOT_SUPPORTED }
    });
    if ret != SUCCESS {
        return ret;
    }
    let guard = state();
    let Some(state) = guard.as_ref() else {
        return ERROR_UNINITIALIZED;
    };
    let found = state.migs.iter().enumerate().filter(|(_, m)| m.parent == Some(gpu)).nth(index as usize);
    match found {
        // SAFETY: NVML's contract: a valid out-parameter.
        Some((k, mig)) if mig.lives_at(tick) => unsafe { put(mig_device, mig_handle(k)) },
        _ => ERROR_NOT_FOUND,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: *mut c_void, id: *mut c_uint) -> Ret {
    with_gpu(device, "nvmlDeviceGetGpuInstanceId", "gi_id", format_args!(""), |g, _| {
        if g.parent.is_none() {
            return ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: NVML's contract: a valid out-parameter.
        unsafe { put(id, g.gi) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAttributes_v2(device: *mut c_void, out: *mut DeviceAttributes) -> Ret {
    with_gpu(device, "nvmlDeviceGetAttributes_v2", "attributes", format_args!(""), |g, _| {
        // Real NVML answers only for MIG device handles.
        if g.parent.is_none() {
            return ERROR_NOT_SUPPORTED;
        }
        let attributes = DeviceAttributes {
            multiprocessor_count: 16 * g.slices,
            shared_copy_engine_count: g.slices,
            shared_decoder_count: 1,
            shared_encoder_count: 0,
            shared_jpeg_count: 1,
            shared_ofa_count: 0,
            gpu_instance_slice_count: g.gi_slices.unwrap_or(g.slices),
            compute_instance_slice_count: g.slices,
            memory_size_mb: g.fb_total >> 20,
        };
        // SAFETY: NVML's contract: a valid out-parameter.
        unsafe { put(out, attributes) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: *mut c_void,
    profile: c_uint,
    info: *mut GpuInstanceProfileInfo,
) -> Ret {
    let extra = format_args!(" profile={profile}");
    with_gpu(device, "nvmlDeviceGetGpuInstanceProfileInfo", "mig", extra, |g, _| {
        if g.mig.is_none() {
            return ERROR_NOT_SUPPORTED;
        }
        let Some(&slices) = PROFILE_SLICES.get(profile as usize).filter(|s| **s <= g.mig_slices) else {
            return ERROR_NOT_SUPPORTED;
        };
        let info_of = GpuInstanceProfileInfo {
            id: profile,
            is_p2p_supported: 0,
            slice_count: slices,
            instance_count: g.mig_slices / slices,
            multiprocessor_count: 16 * slices,
            copy_engine_count: slices,
            decoder_count: 1,
            encoder_count: 0,
            jpeg_count: 1,
            ofa_count: 0,
            memory_size_mb: (g.fb_total >> 20) * u64::from(slices) / u64::from(g.mig_slices.max(1)),
        };
        // SAFETY: NVML's contract: a valid out-parameter.
        unsafe { put(info, info_of) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut *mut c_void) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let id = NEXT_SET.fetch_add(1, Ordering::SeqCst);
    state.log(format_args!("nvmlEventSetCreate set={id}"));
    if state.reloaded {
        return ERROR_UNKNOWN;
    }
    // SAFETY: NVML's contract: a valid out-parameter.
    let ret = unsafe { put(set, std::ptr::without_provenance_mut(EVENT_SET_BASE + id)) };
    if ret == SUCCESS {
        state.sets.push(EventSet { id, registrations: Vec::new(), pending: VecDeque::new() });
    }
    ret
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: *mut c_void) -> Ret {
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let id = set_id(set);
    state.log(format_args!("nvmlEventSetFree set={id}"));
    if state.reloaded {
        return ERROR_UNKNOWN;
    }
    let Some(at) = state.sets.iter().position(|s| s.id == id) else {
        return ERROR_INVALID_ARGUMENT;
    };
    state.sets.remove(at);
    EVENTS.notify_all();
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: *mut c_void,
    types: *mut c_ulonglong,
) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetSupportedEventTypes", "events", format_args!(""), |g, _| unsafe {
        put(types, g.events)
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(device: *mut c_void, types: c_ulonglong, set: *mut c_void) -> Ret {
    let id = set_id(set);
    let extra = format_args!(" types={types:#x} set={id}");
    let ret = with_gpu(device, "nvmlDeviceRegisterEvents", "events", extra, |g, _| {
        // As real NVML: all the types asked for, or none.
        if types & !g.events != 0 { ERROR_NOT_SUPPORTED } else { SUCCESS }
    });
    if ret != SUCCESS {
        return ret;
    }
    let Some((gpu, generation)) = handle_index(device) else {
        return ERROR_INVALID_ARGUMENT;
    };
    let mut guard = state();
    let Some(state) = guard.as_mut() else {
        return ERROR_UNINITIALIZED;
    };
    let Some(set) = state.sets.iter_mut().find(|s| s.id == id) else {
        return ERROR_INVALID_ARGUMENT;
    };
    match set.registrations.iter_mut().find(|r| r.gpu == gpu && r.generation == generation) {
        Some(registration) => registration.types |= types,
        None => set.registrations.push(Registration { gpu, generation, types }),
    }
    let g = &mut state.gpus[gpu];
    if !g.xid_after_ms.is_empty() && !g.xid_timer {
        g.xid_timer = true;
        start_xid_timer(state.serial, gpu, g.xid_after_ms.clone());
    }
    SUCCESS
}

/// `xid_after_ms`: queues GPU `gpu`'s XIDs at their times from now, on a
/// thread of its own (the GPU's own calls may be hung meanwhile), unless
/// the library was initialised afresh or the driver reloaded in between.
fn start_xid_timer(serial: u64, gpu: usize, mut script: Vec<(u64, u64)>) {
    let start = Instant::now();
    script.sort_by_key(|(ms, _)| *ms);
    let spawned = std::thread::Builder::new().name("fake-nvml-xid".to_owned()).spawn(move || {
        for (ms, code) in script {
            std::thread::sleep((start + Duration::from_millis(ms)).saturating_duration_since(Instant::now()));
            let mut guard = state();
            let Some(state) = guard.as_mut().filter(|s| s.serial == serial && !s.reloaded) else {
                return;
            };
            state.queue_event(gpu, "xid_after_ms", EVENT_XID, code);
            EVENTS.notify_all();
        }
    });
    if let Err(e) = spawned {
        eprintln!("fake NVML: cannot start the xid_after_ms thread: {e}");
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: *mut c_void,
    data: *mut EventData,
    timeout_ms: c_uint,
) -> Ret {
    let start = Instant::now();
    let timeout = Duration::from_millis(u64::from(timeout_ms));
    let id = set_id(set);
    let mut guard = state();
    match guard.as_mut() {
        Some(state) => state.log(format_args!("nvmlEventSetWait_v2 set={id} timeout_ms={timeout_ms}")),
        None => return ERROR_UNINITIALIZED,
    }
    if data.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    loop {
        let Some(state) = guard.as_mut() else {
            return ERROR_UNINITIALIZED;
        };
        if state.reloaded {
            return ERROR_UNKNOWN;
        }
        let Some(set) = state.sets.iter_mut().find(|s| s.id == id) else {
            return ERROR_INVALID_ARGUMENT;
        };
        if let Some(event) = set.pending.pop_front() {
            let out = EventData {
                device: gpu_handle(event.gpu, event.generation),
                event_type: event.event_type,
                event_data: event.data,
                gpu_instance_id: NO_INSTANCE,
                compute_instance_id: NO_INSTANCE,
            };
            // SAFETY: NVML's contract: a valid out-parameter, checked non-null above.
            return unsafe { put(data, out) };
        }
        // A registered GPU off the bus (or reset since, its registration
        // with it) makes the wait fail, but not at once: a caller that
        // loops on it must not spin. A hung GPU is never waited on.
        let gpus = &state.gpus;
        let lost = set.registrations.iter().any(|r| {
            gpus.get(r.gpu).is_some_and(|g| g.lost("nvmlEventSetWait_v2") || g.generation != r.generation)
        });
        let deadline = start + if lost { timeout.min(LOST_WAIT) } else { timeout };
        let now = Instant::now();
        if now >= deadline {
            return if lost { ERROR_GPU_IS_LOST } else { ERROR_TIMEOUT };
        }
        guard = EVENTS
            .wait_timeout(guard, deadline - now)
            .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    device: *mut c_void,
    error_type: c_uint,
    counter_type: c_uint,
    count: *mut c_ulonglong,
) -> Ret {
    let extra = format_args!(" error_type={error_type} counter_type={counter_type}");
    with_gpu(device, "nvmlDeviceGetTotalEccErrors", "ecc", extra, |g, _| {
        let (volatile, aggregate_extra) = match error_type {
            MEMORY_ERROR_CORRECTED => (g.ecc_corr + g.grown(&g.sbe_at), g.ecc_corr_agg),
            MEMORY_ERROR_UNCORRECTED => (g.ecc_unc + g.grown(&g.dbe_at), g.ecc_unc_agg),
            _ => return ERROR_INVALID_ARGUMENT,
        };
        let value = match counter_type {
            ECC_VOLATILE => volatile,
            ECC_AGGREGATE => volatile + aggregate_extra,
            _ => return ERROR_INVALID_ARGUMENT,
        };
        // SAFETY: NVML's contract: a valid out-parameter.
        unsafe { put(count, value) }
    })
}

/// A count as NVML's `unsigned int`.
fn uint(value: u64) -> c_uint {
    c_uint::try_from(value).unwrap_or(c_uint::MAX)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    device: *mut c_void,
    corr_rows: *mut c_uint,
    unc_rows: *mut c_uint,
    is_pending: *mut c_uint,
    failure_occurred: *mut c_uint,
) -> Ret {
    if corr_rows.is_null() || unc_rows.is_null() || is_pending.is_null() || failure_occurred.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    with_gpu(device, "nvmlDeviceGetRemappedRows", "remap", format_args!(""), |g, _| {
        let [corr, unc, pending, failure] = g.at_tick(g.remap, &g.remap_at);
        // SAFETY: NVML's contract: valid out-parameters, checked non-null above.
        unsafe {
            corr_rows.write(uint(corr));
            unc_rows.write(uint(unc));
            is_pending.write(c_uint::from(pending != 0));
            failure_occurred.write(c_uint::from(failure != 0));
        }
        SUCCESS
    })
}

/// The list protocol of `nvmlDeviceGetRetiredPages(_v2)`; `timestamps` may
/// be null.
unsafe fn put_retired_pages(
    g: &Gpu,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> Ret {
    let Some(pages) = g.retired_pages(cause) else {
        return ERROR_INVALID_ARGUMENT;
    };
    if count.is_null() {
        return ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: `count` is a non-null in/out parameter; `addresses` and
    // `timestamps`, when not null, hold `*count` entries.
    unsafe {
        let room = *count as usize;
        *count = uint(pages.len() as u64);
        if pages.is_empty() {
            return SUCCESS;
        }
        if room < pages.len() {
            return ERROR_INSUFFICIENT_SIZE;
        }
        if addresses.is_null() {
            return ERROR_INVALID_ARGUMENT;
        }
        for (i, (address, time)) in pages.into_iter().enumerate() {
            addresses.add(i).write(address);
            if !timestamps.is_null() {
                timestamps.add(i).write(time);
            }
        }
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: *mut c_void,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
) -> Ret {
    // SAFETY (in the closure): NVML's list contract, checked in `put_retired_pages`.
    with_gpu(device, "nvmlDeviceGetRetiredPages", "retired", format_args!(" cause={cause}"), |g, _| unsafe {
        put_retired_pages(g, cause, count, addresses, std::ptr::null_mut())
    })
}

/// `nvml-wrapper`'s `Device::retired_pages` fetches the pages with this one
/// once `nvmlDeviceGetRetiredPages` has counted them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: *mut c_void,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    timestamps: *mut c_ulonglong,
) -> Ret {
    let extra = format_args!(" cause={cause}");
    // SAFETY (in the closure): NVML's list contract, checked in `put_retired_pages`.
    with_gpu(device, "nvmlDeviceGetRetiredPages_v2", "retired", extra, |g, _| unsafe {
        put_retired_pages(g, cause, count, addresses, timestamps)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    device: *mut c_void,
    is_pending: *mut c_uint,
) -> Ret {
    with_gpu(device, "nvmlDeviceGetRetiredPagesPendingStatus", "retired", format_args!(""), |g, _| {
        let [_, _, pending] = g.at_tick(g.retired, &g.retired_at);
        // SAFETY: NVML's contract: a valid out-parameter (`nvmlEnableState_t`).
        unsafe { put(is_pending, c_uint::from(pending != 0)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(device: *mut c_void, value: *mut c_uint) -> Ret {
    // SAFETY (in the closure): NVML's contract: a valid out-parameter.
    with_gpu(device, "nvmlDeviceGetPcieReplayCounter", "replay", format_args!(""), |g, _| unsafe {
        put(value, uint(g.replay + g.grown(&g.replay_at)))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    device: *mut c_void,
    link: c_uint,
    is_active: *mut c_uint,
) -> Ret {
    with_gpu(device, "nvmlDeviceGetNvLinkState", "nvlink", format_args!(" link={link}"), |g, _| {
        match g.nvlink(link) {
            // SAFETY: NVML's contract: a valid out-parameter (`nvmlEnableState_t`).
            Ok(()) => unsafe { put(is_active, 1) },
            Err(code) => code,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    device: *mut c_void,
    link: c_uint,
    counter: c_uint,
    value: *mut c_ulonglong,
) -> Ret {
    let extra = format_args!(" link={link} counter={counter}");
    with_gpu(device, "nvmlDeviceGetNvLinkErrorCounter", "nvlink", extra, |g, _| {
        if let Err(code) = g.nvlink(link) {
            return code;
        }
        if counter >= NVLINK_ERROR_COUNTERS {
            return ERROR_INVALID_ARGUMENT;
        }
        let errors = g
            .nvlink_err_at
            .iter()
            .filter(|[t, l, c, _]| *t <= g.tick && *l == u64::from(link) && *c == u64::from(counter))
            .map(|[.., n]| n)
            .sum();
        // SAFETY: NVML's contract: a valid out-parameter.
        unsafe { put(value, errors) }
    })
}
