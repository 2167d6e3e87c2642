//! The real GPUs of this host, through NVML (`libnvidia-ml`, the NVIDIA
//! driver's management library). The only module that imports
//! `nvml_wrapper`.
//!
//! This module owns loading and initialising NVML (once per process), the
//! device handles (fetched once at open), and each tick's NVML calls: device
//! metrics, GPM metrics on GPUs that have GPM, the GPU processes and their
//! utilization. It turns NVML's answers into schema units, an unavailable
//! metric into `None` (never 0), and a GPU that stopped answering into a
//! [`GpuFailure`]. Who a process is comes from [`crate::identity`]; the
//! clock and the tick from the tick loop.
//!
//! NVML's calls are slow (the process queries take milliseconds and the
//! driver's lock), so each is made at most once per GPU per tick.

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use apron_schemas::{GpuSample, ProcSample};
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::{ProcessInfo, ProcessUtilizationSample};
use nvml_wrapper::{Device, GpmSample, Nvml};

use super::{GpuFailure, Source, Tick};
use crate::identity::IdentityCache;

/// The library names tried, in order, when no path is given. Machines
/// without the driver's development package have only the versioned name.
const DEFAULT_LIBS: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// The GPM metrics recorded, in the order of `GpuSample`'s GPM fields:
/// `sm_active_pct`, `sm_occupancy_pct`, `tensor_active_pct`,
/// `dram_active_pct`.
const GPM_METRICS: [GpmMetricId; 4] =
    [GpmMetricId::SmUtil, GpmMetricId::SmOccupancy, GpmMetricId::AnyTensorUtil, GpmMetricId::DramBwUtil];

/// The process's one NVML instance, leaked once initialised.
///
/// Why leaked: every `Device<'nvml>` borrows the `Nvml` it came from, and
/// the source must hold both, which safe Rust cannot do in one struct. NVML
/// is process-wide state anyway (the design initialises it once per
/// process), and the recorder samples until it exits, so a `&'static Nvml`
/// costs one allocation and only skips `nvmlShutdown` at exit, whose
/// resources the driver releases with the process.
static NVML: Mutex<Option<&'static Nvml>> = Mutex::new(None);

/// NVML could not be opened. Each message names what was being opened;
/// NVML's own error is the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum NvmlOpenError {
    /// No NVML library could be loaded (not installed, or not NVML).
    #[error(
        "cannot load {tried}, the NVIDIA driver's NVML library (libnvidia-ml): is the NVIDIA driver \
         installed? On a machine without NVIDIA GPUs, record a simulated host with `--source sim`"
    )]
    LibraryMissing {
        /// The names or the path tried, in order.
        tried: String,
        /// Why the last one failed to load.
        #[source]
        source: NvmlError,
    },
    /// NVML loaded but the NVIDIA kernel driver is not running.
    #[error(
        "cannot initialise NVML from {lib}: the NVIDIA kernel driver is not loaded (does `nvidia-smi` \
         work?). On a machine without NVIDIA GPUs, record a simulated host with `--source sim`"
    )]
    DriverNotLoaded {
        /// The library that loaded.
        lib: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// NVML loaded but its initialisation failed otherwise.
    #[error("cannot initialise NVML from {lib}")]
    Init {
        /// The library that loaded.
        lib: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// NVML would not say how many GPUs there are.
    #[error("cannot count the GPUs through NVML")]
    DeviceCount {
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
}

/// The real GPUs of this host, through NVML.
#[derive(Debug)]
pub struct NvmlSource {
    host: String,
    nvml: &'static Nvml,
    /// One per NVML index, in index order.
    gpus: Vec<Gpu>,
    identities: IdentityCache,
}

/// One GPU slot, by NVML index.
#[derive(Debug)]
struct Gpu {
    index: u32,
    /// `None` while the GPU's handle or UUID could not be had; retried at
    /// each tick.
    open: Option<OpenGpu>,
}

/// A GPU whose handle and UUID are known, and what is kept between ticks.
#[derive(Debug)]
struct OpenGpu {
    device: Device<'static>,
    uuid: apron_schemas::Text,
    model: Option<apron_schemas::Text>,
    /// Whether the GPU supports GPM (Hopper and newer).
    gpm: bool,
    /// The previous tick's GPM sample: GPM metrics are computed between two
    /// samples.
    gpm_last: Option<GpmSample<'static>>,
    /// The newest per-process utilization timestamp seen (µs, NVML's
    /// clock), passed back to NVML so each tick gets only newer samples.
    last_seen_us: Option<u64>,
}

impl NvmlSource {
    /// Initialises NVML (once per process) and fetches the GPUs' handles.
    ///
    /// `lib_path` is the NVML library to load; `None` tries
    /// `libnvidia-ml.so.1`, then `libnvidia-ml.so`, through the dynamic
    /// loader's search path. NVML is initialised by the first successful
    /// call in a process; later calls reuse it and ignore `lib_path`.
    ///
    /// A GPU whose handle cannot be had is not an error: it is reported as
    /// a [`GpuFailure`] at each tick until it answers.
    pub fn open(host: String, lib_path: Option<&Path>) -> Result<NvmlSource, NvmlOpenError> {
        let nvml = init(lib_path)?;
        let count = nvml.device_count().map_err(|source| NvmlOpenError::DeviceCount { source })?;
        if count == 0 {
            tracing::warn!("NVML reports no GPUs on this host");
        }
        let gpus = (0..count)
            .map(|index| {
                let open = OpenGpu::open(nvml, index)
                    .inspect_err(|error| {
                        tracing::warn!(gpu_index = index, %error, "GPU cannot be opened; retrying at each tick");
                    })
                    .ok();
                Gpu { index, open }
            })
            .collect();
        Ok(NvmlSource { host, nvml, gpus, identities: IdentityCache::new() })
    }
}

/// Returns the process's NVML, initialising it on first use.
fn init(lib_path: Option<&Path>) -> Result<&'static Nvml, NvmlOpenError> {
    // A panic while holding the lock cannot leave a half-set `Option`.
    let mut held = NVML.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(nvml) = *held {
        return Ok(nvml);
    }
    let candidates: Vec<&OsStr> = match lib_path {
        Some(path) => vec![path.as_os_str()],
        None => DEFAULT_LIBS.iter().map(OsStr::new).collect(),
    };
    let mut missing = None;
    for lib in &candidates {
        match Nvml::builder().lib_path(lib).init() {
            Ok(nvml) => {
                let nvml: &'static Nvml = Box::leak(Box::new(nvml));
                *held = Some(nvml);
                return Ok(nvml);
            }
            // Not there, or not NVML (no `nvmlInit_v2`): try the next name.
            Err(error @ (NvmlError::LibloadingError(_) | NvmlError::FailedToLoadSymbol(_))) => {
                missing = Some(error);
            }
            Err(source @ NvmlError::DriverNotLoaded) => {
                return Err(NvmlOpenError::DriverNotLoaded {
                    lib: lib.to_string_lossy().into_owned(),
                    source,
                });
            }
            Err(source) => {
                return Err(NvmlOpenError::Init { lib: lib.to_string_lossy().into_owned(), source });
            }
        }
    }
    let tried = candidates.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>().join(" or ");
    let source = missing.expect("every candidate failed to load, and there is at least one");
    Err(NvmlOpenError::LibraryMissing { tried, source })
}

impl OpenGpu {
    /// Fetches the handle, UUID, name and GPM support of GPU `index`.
    fn open(nvml: &'static Nvml, index: u32) -> Result<OpenGpu, String> {
        let device = nvml.device_by_index(index).map_err(|e| format!("cannot get a handle: {e}"))?;
        let uuid = device.uuid().map_err(|e| format!("cannot read the UUID: {e}"))?;
        let model = device.name().ok();
        // Older drivers lack the GPM symbols; any error means no GPM.
        let gpm = device.gpm_support().unwrap_or(false);
        Ok(OpenGpu {
            device,
            uuid: uuid.into(),
            model: model.map(Into::into),
            gpm,
            gpm_last: None,
            last_seen_us: None,
        })
    }
}

impl Source for NvmlSource {
    fn host(&self) -> &str {
        &self.host
    }

    fn sample(&mut self, ts_ms: i64, interval_ms: i32, out: &mut Tick) {
        self.identities.next_tick();
        for gpu in &mut self.gpus {
            if gpu.open.is_none() {
                match OpenGpu::open(self.nvml, gpu.index) {
                    Ok(open) => gpu.open = Some(open),
                    Err(error) => {
                        out.failures.push(GpuFailure { gpu_index: gpu.index, gpu_uuid: None, error });
                        continue;
                    }
                }
            }
            let Some(open) = gpu.open.as_mut() else { continue };
            let at = At { ts_ms, interval_ms, index: gpu.index };
            if let Err(error) = open.sample(self.nvml, at, &mut self.identities, out) {
                // A GPM delta across a gap would not be this tick's.
                open.gpm_last = None;
                out.failures.push(GpuFailure {
                    gpu_index: gpu.index,
                    gpu_uuid: Some(open.uuid.to_string()),
                    error,
                });
            }
        }
    }
}

/// Where a GPU's rows go: the tick and the GPU's index.
#[derive(Debug, Clone, Copy)]
struct At {
    ts_ms: i64,
    interval_ms: i32,
    index: u32,
}

impl OpenGpu {
    /// Samples this GPU once, appending its row and its processes' rows to
    /// `out`. Fails, with the text for [`GpuFailure::error`], only when a
    /// basic query (utilization, memory) says the GPU cannot be sampled;
    /// then nothing is appended.
    fn sample(
        &mut self,
        nvml: &'static Nvml,
        at: At,
        identities: &mut IdentityCache,
        out: &mut Tick,
    ) -> Result<(), String> {
        let device = &self.device;
        let util = device.utilization_rates();
        if let Err(e) = &util
            && is_device_failure(e)
        {
            return Err(format!("cannot read utilization: {e}"));
        }
        let memory = device.memory_info();
        if let Err(e) = &memory
            && is_device_failure(e)
        {
            return Err(format!("cannot read memory use: {e}"));
        }
        let (util, memory) = (util.ok(), memory.ok());
        let [sm_active_pct, sm_occupancy_pct, tensor_active_pct, dram_active_pct] =
            if self.gpm { gpm_metrics(nvml, device, &mut self.gpm_last) } else { [None; 4] };
        out.gpus.push(GpuSample {
            ts: at.ts_ms,
            gpu_uuid: self.uuid.clone(),
            gpu_index: i32::try_from(at.index).unwrap_or(i32::MAX),
            gpu_model: self.model.clone(),
            interval_ms: at.interval_ms,
            gpu_util_pct: util.as_ref().and_then(|u| to_i32(u.gpu)),
            mem_util_pct: util.as_ref().and_then(|u| to_i32(u.memory)),
            fb_used_bytes: memory.as_ref().and_then(|m| to_i64(m.used)),
            fb_total_bytes: memory.as_ref().and_then(|m| to_i64(m.total)),
            power_mw: device.power_usage().ok().and_then(to_i32),
            power_limit_mw: device.enforced_power_limit().ok().and_then(to_i32),
            energy_mj: device.total_energy_consumption().ok().and_then(to_i64),
            sm_clock_mhz: device.clock_info(Clock::SM).ok().and_then(to_i32),
            temp_c: device.temperature(TemperatureSensor::Gpu).ok().and_then(to_i32),
            enc_util_pct: device.encoder_utilization().ok().and_then(|u| to_i32(u.utilization)),
            dec_util_pct: device.decoder_utilization().ok().and_then(|u| to_i32(u.utilization)),
            pcie_tx_bytes_per_s: device.pcie_throughput(PcieUtilCounter::Send).ok().map(kb_to_bytes),
            pcie_rx_bytes_per_s: device.pcie_throughput(PcieUtilCounter::Receive).ok().map(kb_to_bytes),
            // The bitmask's bits, reinterpreted, not its value converted.
            // nvml-wrapper keeps the reasons it knows (every one NVML
            // defines today, 0x1 to 0x100) and drops any newer bit.
            clock_event_reasons: device.current_throttle_reasons().ok().map(|r| r.bits() as i64),
            sm_active_pct,
            sm_occupancy_pct,
            tensor_active_pct,
            dram_active_pct,
        });

        let processes = merge_processes(&[
            list_or_empty(at.index, "compute processes", device.running_compute_processes()),
            list_or_empty(at.index, "graphics processes", device.running_graphics_processes()),
        ]);
        if processes.is_empty() {
            return Ok(());
        }
        let samples = match device.process_utilization_stats(self.last_seen_us) {
            Ok(samples) => samples,
            // NVML's way of saying there is no sample newer than last_seen.
            Err(NvmlError::NotFound) => Vec::new(),
            Err(error) => {
                tracing::debug!(gpu_index = at.index, %error, "cannot read per-process utilization");
                Vec::new()
            }
        };
        if let Some(newest) = samples.iter().map(|s| s.timestamp).max() {
            self.last_seen_us = self.last_seen_us.max(Some(newest));
        }
        for (nvml_pid, used) in processes {
            // Host pids are below the kernel's pid_max (at most 2^22).
            let Ok(pid) = i32::try_from(nvml_pid) else { continue };
            let sample = newest_sample(&samples, nvml_pid);
            out.procs.push(ProcSample {
                ts: at.ts_ms,
                gpu_uuid: self.uuid.clone(),
                pid,
                interval_ms: at.interval_ms,
                identity: identities.identity(pid).clone(),
                used_mem_bytes: used.and_then(to_i64),
                sm_util_pct: sample.and_then(|s| to_i32(s.sm_util)),
                mem_util_pct: sample.and_then(|s| to_i32(s.mem_util)),
            });
        }
        Ok(())
    }
}

/// The four GPM metrics between the previous tick's sample and one taken
/// now, which then replaces it. `None` for each on the first tick, after a
/// failed sample, and where NVML does not give the metric.
fn gpm_metrics(
    nvml: &'static Nvml,
    device: &Device<'static>,
    last: &mut Option<GpmSample<'static>>,
) -> [Option<f32>; 4] {
    let sample = match device.gpm_sample() {
        Ok(sample) => sample,
        Err(error) => {
            tracing::debug!(%error, "cannot take a GPM sample");
            *last = None;
            return [None; 4];
        }
    };
    let mut values = [None; 4];
    if let Some(previous) = last.as_ref() {
        match nvml_wrapper::gpm::gpm_metrics_get(nvml, previous, &sample, &GPM_METRICS) {
            Ok(results) => {
                for (value, result) in values.iter_mut().zip(results) {
                    // Percentages: f32 holds them to well below a tenth of a percent.
                    *value = result.ok().map(|m| m.value).filter(|v| v.is_finite()).map(|v| v as f32);
                }
            }
            Err(error) => tracing::debug!(%error, "cannot compute GPM metrics"),
        }
    }
    *last = Some(sample);
    values
}

/// A process list, or no processes when NVML would not list them (the GPU
/// row is still recorded).
fn list_or_empty(index: u32, what: &str, list: Result<Vec<ProcessInfo>, NvmlError>) -> Vec<ProcessInfo> {
    list.unwrap_or_else(|error| {
        tracing::debug!(gpu_index = index, %error, "cannot list {what}");
        Vec::new()
    })
}

/// Whether an error from a basic query (utilization, memory) means the GPU
/// as a whole cannot be sampled, rather than that this one metric is not
/// available (not supported, not permitted, not in this driver).
pub fn is_device_failure(error: &NvmlError) -> bool {
    !matches!(
        error,
        NvmlError::NotSupported
            | NvmlError::NoPermission
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::FunctionNotFound
            | NvmlError::NotFound
            | NvmlError::NoData
    )
}

/// Merges the compute and graphics process lists into one entry per pid,
/// in first-seen order, with the used GPU memory in bytes (`None` where
/// NVML does not give it). A process in both lists is one process holding
/// one amount of memory, which each list reports whole, so the larger
/// value is kept rather than the sum.
pub fn merge_processes(lists: &[Vec<ProcessInfo>]) -> Vec<(u32, Option<u64>)> {
    let mut merged: Vec<(u32, Option<u64>)> = Vec::new();
    for info in lists.iter().flatten() {
        let used = match info.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        };
        match merged.iter_mut().find(|(pid, _)| *pid == info.pid) {
            Some((_, known)) => *known = (*known).max(used),
            None => merged.push((info.pid, used)),
        }
    }
    merged
}

/// The newest of `samples` for `pid` (NVML may return several per process
/// since the last query).
pub fn newest_sample(samples: &[ProcessUtilizationSample], pid: u32) -> Option<&ProcessUtilizationSample> {
    samples.iter().filter(|s| s.pid == pid).max_by_key(|s| s.timestamp)
}

/// NVML's PCIe throughput unit, KB/s (1024 bytes), as bytes per second.
pub fn kb_to_bytes(kb_per_s: u32) -> i64 {
    i64::from(kb_per_s) * 1024
}

fn to_i32(value: u32) -> Option<i32> {
    i32::try_from(value).ok()
}

fn to_i64(value: u64) -> Option<i64> {
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    fn info(pid: u32, used: UsedGpuMemory) -> ProcessInfo {
        ProcessInfo { pid, used_gpu_memory: used, gpu_instance_id: None, compute_instance_id: None }
    }

    fn util(pid: u32, timestamp: u64, sm_util: u32) -> ProcessUtilizationSample {
        ProcessUtilizationSample { pid, timestamp, sm_util, mem_util: 0, enc_util: 0, dec_util: 0 }
    }

    #[test]
    fn processes_merge_per_pid() {
        let compute = vec![info(10, UsedGpuMemory::Used(100)), info(11, UsedGpuMemory::Unavailable)];
        let graphics = vec![
            info(12, UsedGpuMemory::Used(5)),
            info(10, UsedGpuMemory::Used(100)),
            info(11, UsedGpuMemory::Used(7)),
        ];
        assert_eq!(merge_processes(&[compute, graphics]), [(10, Some(100)), (11, Some(7)), (12, Some(5))]);
        assert_eq!(merge_processes(&[vec![info(3, UsedGpuMemory::Unavailable)], vec![]]), [(3, None)]);
        assert!(merge_processes(&[vec![], vec![]]).is_empty());
    }

    #[test]
    fn newest_sample_wins_regardless_of_order() {
        let samples = [util(1, 200, 40), util(2, 900, 10), util(1, 150, 99), util(1, 100, 5)];
        assert_eq!(newest_sample(&samples, 1).map(|s| s.sm_util), Some(40));
        assert_eq!(newest_sample(&samples, 2).map(|s| s.sm_util), Some(10));
        assert!(newest_sample(&samples, 3).is_none());
    }

    #[test]
    fn pcie_kilobytes_are_1024_bytes() {
        assert_eq!(kb_to_bytes(0), 0);
        assert_eq!(kb_to_bytes(3), 3072);
        assert_eq!(kb_to_bytes(u32::MAX), i64::from(u32::MAX) * 1024);
    }

    #[test]
    fn unavailable_metrics_are_not_gpu_failures() {
        for error in [
            NvmlError::NotSupported,
            NvmlError::NoPermission,
            NvmlError::NotFound,
            NvmlError::FailedToLoadSymbol("x".into()),
        ] {
            assert!(!is_device_failure(&error), "{error}");
        }
        for error in
            [NvmlError::GpuLost, NvmlError::Unknown, NvmlError::ResetRequired, NvmlError::Uninitialized]
        {
            assert!(is_device_failure(&error), "{error}");
        }
    }

    #[test]
    fn missing_library_names_nvml_and_suggests_sim() {
        let path = Path::new("/nonexistent/apron-test/libnvidia-ml.so.1");
        let error = NvmlSource::open("node".into(), Some(path)).expect_err("no library at that path");
        let message = error.to_string();
        assert!(matches!(error, NvmlOpenError::LibraryMissing { .. }), "{error:?}");
        assert!(message.contains("/nonexistent/apron-test/libnvidia-ml.so.1"), "{message}");
        assert!(message.contains("libnvidia-ml"), "{message}");
        assert!(message.contains("--source sim"), "{message}");
        let cause = error.source().expect("the loader's error is kept").to_string();
        assert!(cause.contains("libnvidia-ml.so.1"), "{cause}");
    }
}
