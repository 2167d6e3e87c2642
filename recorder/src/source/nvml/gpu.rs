//! One GPU's sampling, on the sampling thread it is given
//! ([`super::worker`]): its handle (fetched again after a reset or a lost
//! GPU), its tick's NVML calls, and what is kept
//! between ticks (the GPM sample, the last utilization timestamp, the PCIe
//! byte counters). It answers with the GPU's row and its processes' metrics;
//! who the processes are is resolved by the source on the tick loop's
//! thread.
//!
//! A GPU in MIG mode answers with a row per MIG instance besides its own
//! (see [`Mig`]): the instances hold the memory, the activity (GPM, per
//! GPU instance, on Hopper and newer) and the processes; the GPU's own row
//! keeps power, energy, temperature and clocks, and the number of slices
//! the instances' shares are counted in.

use apron_schemas::{GpuEvent, GpuSample};
use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::{Bits, NvmlError};
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES, NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
};
use nvml_wrapper::{Device, GpmSample, Nvml};

use super::counters::Counters;
use super::driver::ProcessCall;
use super::process_util::{Picked, ProcUtil, UtilSample, Window};
pub use super::raw::is_device_failure;
use super::raw::{self, Buffers, ProcessList};

/// The scalar metrics read in one `nvmlDeviceGetFieldValues` call, in this
/// order: the energy counter (mJ) and the cumulative PCIe byte counters.
const FIELDS: [u32; 3] =
    [NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML_FI_DEV_PCIE_COUNT_TX_BYTES, NVML_FI_DEV_PCIE_COUNT_RX_BYTES];

/// Where a driver has no PCIe byte counters, `nvmlDeviceGetPcieThroughput`
/// (which measures over a 20 ms window per call) is asked once every this
/// many ticks, not at each: its rows in between have PCIe unknown.
pub const PCIE_THROUGHPUT_EVERY: u64 = 5;

/// Every this many ticks a GPU's MIG mode and instances are read again (and
/// at the next tick after an instance stopped answering): instances are
/// made and destroyed while the recorder runs, and a new one is missed for
/// at most this long.
pub const MIG_READ_EVERY: u64 = 30;

/// `NVML_DEVICE_MIG_ENABLE`, MIG mode on.
const MIG_ENABLED: u32 = 1;

/// What a tick asks a GPU's worker.
#[derive(Debug)]
pub struct Request {
    /// The tick, ms since the epoch.
    pub ts_ms: i64,
    /// The time the row stands for, ms.
    pub interval_ms: i32,
    /// The buffers of this GPU's previous answer, to be filled again.
    pub spare: Spare,
}

/// The buffers of an [`Outcome::Sampled`], handed back to the worker with
/// the next request, so that a steady tick allocates no answer.
#[derive(Debug, Default)]
pub struct Spare {
    /// The rows.
    pub rows: Vec<GpuSample>,
    /// The process list.
    pub procs: Vec<GpuProc>,
    /// The refusals.
    pub refusals: Vec<Refusal>,
    /// The events.
    pub events: Vec<GpuEvent>,
    /// The counters' readings.
    pub readings: Vec<GpuEvent>,
}

/// A GPU's answer to one tick.
#[derive(Debug)]
pub enum Outcome {
    /// Its rows, its processes and what NVML refused.
    Sampled {
        /// The GPU's row first, then one per MIG instance.
        rows: Vec<GpuSample>,
        /// Its processes' metrics, each naming its row.
        procs: Vec<GpuProc>,
        /// Queries NVML refused (not supported, not permitted, not in this
        /// driver).
        refusals: Vec<Refusal>,
        /// Its error counters that moved ([`super::counters`]), when read.
        events: Vec<GpuEvent>,
        /// Every reading of its error counters, when read.
        readings: Vec<GpuEvent>,
    },
    /// It could not be sampled.
    Failed {
        /// Its UUID, when known.
        uuid: Option<String>,
        /// What failed, for the log.
        error: String,
        /// NVML said the GPU is lost (fallen off the bus).
        lost: bool,
    },
    /// NVML would not give its handle (`NO_PERMISSION`: a cgroup hides it).
    Hidden {
        /// NVML's error.
        error: String,
    },
}

/// One process on one GPU, before its identity is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProc {
    /// The row (of [`Outcome::Sampled`]'s) of the GPU or MIG instance it
    /// runs on.
    pub row: usize,
    /// Host pid.
    pub pid: u32,
    /// Used GPU memory, bytes; `None` where NVML does not give it.
    pub used_mem_bytes: Option<u64>,
    /// SM utilization, percent; `None` when unknown.
    pub sm_util_pct: Option<i32>,
    /// Memory controller utilization, percent; `None` when unknown.
    pub mem_util_pct: Option<i32>,
}

/// A query NVML refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which query ("compute processes", "process utilization").
    pub query: &'static str,
    /// Why, NVML's words.
    pub error: String,
}

/// A GPU slot, by NVML index; owned by its worker thread.
#[derive(Debug)]
pub struct GpuState {
    nvml: &'static Nvml,
    index: u32,
    process_call: ProcessCall,
    open: Option<OpenGpu>,
    /// Its error counters' last readings; kept across a new handle.
    counters: Counters,
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
    /// The previous reading of the PCIe byte counters.
    pcie_last: Option<PcieCount>,
    /// Its MIG mode and instances.
    mig: Mig,
    /// Ticks sampled since the handle was opened.
    ticks: u64,
    /// What a tick fills and empties again, kept so that a steady tick
    /// allocates nothing of its own.
    scratch: Scratch,
}

/// A GPU's MIG side. NVML gives no utilization for a GPU in MIG mode, nor
/// per-process utilization on it; its memory, its processes and its GPM
/// activity are read per instance, each through the instance's own handle
/// (`nvmlDeviceGetMigDeviceHandleByIndex`; the processes listed on it are
/// its own), and GPM through the parent's `nvmlGpmMigSampleGet` for the
/// instance's GPU instance id. The GPU's own row then has no activity, so
/// that its unassigned slices read as the idle capacity they are, and no
/// processes (each is on its instance's row).
#[derive(Debug, Default)]
struct Mig {
    /// NVML said this GPU has no MIG: not asked again.
    unsupported: bool,
    /// MIG mode is on.
    on: bool,
    /// The compute slices in all, when on.
    total_slices: Option<i32>,
    /// The instances, in NVML's order.
    instances: Vec<Instance>,
    /// The tick the mode and instances were last read; `None`: read them
    /// at the next tick.
    read_at: Option<u64>,
}

/// One MIG instance (a MIG device: a compute instance of a GPU instance).
#[derive(Debug)]
struct Instance {
    device: Device<'static>,
    /// Its `MIG-…` UUID.
    uuid: apron_schemas::Text,
    /// Its profile, `3g.40gb` (`1c.3g.40gb` for a compute instance that is
    /// a part of its GPU instance).
    profile: Option<apron_schemas::Text>,
    /// Its compute slices.
    slices: Option<i32>,
    /// Its GPU instance id, for GPM; `None` when NVML would not say.
    gpu_instance_id: Option<u32>,
    /// The previous tick's GPM sample of its GPU instance.
    gpm_last: Option<GpmSample<'static>>,
}

impl Mig {
    fn due(&self, tick: u64) -> bool {
        !self.unsupported && self.read_at.is_none_or(|at| tick >= at + MIG_READ_EVERY)
    }

    /// Reads the GPU's MIG mode and, when on, its instances; an instance
    /// already known keeps its GPM sample.
    fn read(&mut self, nvml: &'static Nvml, device: &Device<'static>, tick: u64) {
        self.read_at = Some(tick);
        match device.mig_mode() {
            Ok(mode) => self.on = mode.current == MIG_ENABLED,
            Err(error) if is_refusal(&error) => {
                self.unsupported = true;
                self.on = false;
            }
            Err(error) => {
                tracing::debug!(%error, "cannot read the MIG mode");
                return;
            }
        }
        if !self.on {
            self.instances.clear();
            self.total_slices = None;
            return;
        }
        self.total_slices = raw::mig_total_slices(nvml, device).and_then(to_i32);
        let count = device.mig_device_count().unwrap_or_else(|error| {
            tracing::debug!(%error, "cannot count the MIG instances");
            0
        });
        let mut found = Vec::with_capacity(count as usize);
        for i in 0..count {
            // An empty slot answers NOT_FOUND.
            let Ok(handle) = device.mig_device_by_index(i) else { continue };
            let Ok(uuid) = handle.uuid() else { continue };
            match self.instances.iter().position(|known| *known.uuid == *uuid) {
                Some(at) => {
                    let mut known = self.instances.swap_remove(at);
                    known.device = handle;
                    found.push(known);
                }
                None => found.push(Instance::open(nvml, handle, uuid)),
            }
        }
        let before = self.instances.len();
        self.instances = found;
        if before != self.instances.len() {
            tracing::info!(instances = self.instances.len(), "MIG instances read");
        }
    }
}

impl Instance {
    /// Reads what does not change while the instance lives.
    fn open(nvml: &'static Nvml, device: Device<'static>, uuid: String) -> Instance {
        let profile = device.name().ok().as_deref().and_then(mig_profile).map(apron_schemas::Text::from);
        let slices = device
            .attributes()
            .ok()
            .and_then(|a| to_i32(a.compute_instance_slice_count))
            .filter(|s| *s > 0)
            .or_else(|| profile.as_deref().and_then(profile_slices));
        let gpu_instance_id = raw::gpu_instance_id(nvml, &device).ok();
        Instance { device, uuid: uuid.into(), profile, slices, gpu_instance_id, gpm_last: None }
    }
}

/// The profile in a MIG device's name: `3g.40gb` in `NVIDIA H100 80GB HBM3
/// MIG 3g.40gb`.
pub fn mig_profile(name: &str) -> Option<&str> {
    let (_, profile) = name.rsplit_once("MIG ")?;
    let profile = profile.trim();
    (!profile.is_empty() && !profile.contains(char::is_whitespace)).then_some(profile)
}

/// The compute slices a profile names: 3 for `3g.40gb`, 1 for the compute
/// instance `1c.3g.40gb`.
pub fn profile_slices(profile: &str) -> Option<i32> {
    let first = profile.split('.').next()?;
    let n = first.strip_suffix('c').or_else(|| first.strip_suffix('g'))?;
    n.parse().ok().filter(|n| *n > 0)
}

/// A worker's buffers, reused from tick to tick.
#[derive(Debug, Default)]
struct Scratch {
    /// What NVML writes into.
    buffers: Buffers,
    /// The compute, graphics and MPS client lists.
    lists: [Vec<(u32, Option<u64>)>; 3],
    /// The three merged.
    processes: Vec<(u32, Option<u64>)>,
    /// Their pids.
    listed: Vec<u32>,
    /// The per-process utilization samples.
    samples: Vec<UtilSample>,
    picked: Picked,
}

/// The cumulative PCIe byte counters at one time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieCount {
    /// NVML's timestamp of the reading, µs.
    pub at_us: i64,
    /// Bytes sent since some start.
    pub tx_bytes: u64,
    /// Bytes received since some start.
    pub rx_bytes: u64,
}

/// Bytes per second sent and received between two readings of the
/// counters; `None` for a direction whose counter went back (wrapped or
/// reset) and for both when no time passed.
pub fn pcie_rates(before: PcieCount, now: PcieCount) -> (Option<i64>, Option<i64>) {
    let Some(us) = u64::try_from(now.at_us - before.at_us).ok().filter(|us| *us > 0) else {
        return (None, None);
    };
    let rate = |a: u64, b: u64| {
        let bytes = b.checked_sub(a)?;
        i64::try_from(u128::from(bytes) * 1_000_000 / u128::from(us)).ok()
    };
    (rate(before.tx_bytes, now.tx_bytes), rate(before.rx_bytes, now.rx_bytes))
}

impl GpuState {
    /// GPU `index`, not yet opened (its worker opens it at its first tick).
    pub fn new(nvml: &'static Nvml, index: u32, process_call: ProcessCall) -> GpuState {
        GpuState { nvml, index, process_call, open: None, counters: Counters::default() }
    }

    /// Samples this GPU once; the worker's job.
    pub fn sample(&mut self, req: Request) -> Outcome {
        if self.open.is_none() {
            match OpenGpu::open(self.nvml, self.index) {
                Ok(open) => self.open = Some(open),
                Err(NvmlError::NoPermission) => {
                    return Outcome::Hidden { error: NvmlError::NoPermission.to_string() };
                }
                Err(e) => {
                    let lost = matches!(e, NvmlError::GpuLost);
                    return Outcome::Failed { uuid: None, error: format!("cannot get a handle: {e}"), lost };
                }
            }
        }
        let Some(open) = self.open.as_mut() else {
            return Outcome::Failed { uuid: None, error: "no handle".into(), lost: false };
        };
        let ts_ms = req.ts_ms;
        match open.sample(self.nvml, self.index, self.process_call, req) {
            Ok(mut outcome) => {
                if let Outcome::Sampled { events, readings, .. } = &mut outcome {
                    events.clear();
                    readings.clear();
                    if self.counters.due(ts_ms) {
                        let index = i32::try_from(self.index).unwrap_or(i32::MAX);
                        let gpu = (&open.uuid, index);
                        self.counters.read(self.nvml, &open.device, gpu, ts_ms, (events, readings));
                    }
                }
                outcome
            }
            Err((error, lost)) => {
                let uuid = Some(open.uuid.to_string());
                // A lost, reset or reloaded GPU answers again only through
                // a fresh handle: fetch one at the next tick.
                self.open = None;
                Outcome::Failed { uuid, error, lost }
            }
        }
    }
}

impl OpenGpu {
    /// Fetches the handle, UUID, name and GPM support of GPU `index`.
    fn open(nvml: &'static Nvml, index: u32) -> Result<OpenGpu, NvmlError> {
        let device = nvml.device_by_index(index)?;
        let uuid = device.uuid()?;
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
            pcie_last: None,
            mig: Mig::default(),
            ticks: 0,
            scratch: Scratch::default(),
        })
    }

    /// Samples this GPU once. Fails, with the text for the log, only when a
    /// basic query (utilization, memory) says the GPU cannot be sampled.
    fn sample(
        &mut self,
        nvml: &'static Nvml,
        index: u32,
        process_call: ProcessCall,
        req: Request,
    ) -> Result<Outcome, (String, bool)> {
        self.ticks += 1;
        let device = &self.device;
        let util = device.utilization_rates();
        if let Err(e) = &util
            && is_device_failure(e)
        {
            return Err((format!("cannot read utilization: {e}"), matches!(e, NvmlError::GpuLost)));
        }
        let memory = device.memory_info();
        if let Err(e) = &memory
            && is_device_failure(e)
        {
            return Err((format!("cannot read memory use: {e}"), matches!(e, NvmlError::GpuLost)));
        }
        if self.mig.due(self.ticks) {
            self.mig.read(nvml, device, self.ticks);
        }
        let mig = self.mig.on;
        // In MIG mode the activity is the instances'.
        let util = util.ok().filter(|_| !mig);
        let memory = memory.ok();
        let [sm_active_pct, sm_occupancy_pct, tensor_active_pct, dram_active_pct, gr_engine_active_pct] =
            if self.gpm && !mig {
                gpm_metrics(nvml, || device.gpm_sample(), &mut self.gpm_last)
            } else {
                self.gpm_last = None;
                [None; GPM_METRICS.len()]
            };
        let fields = Fields::read(device);
        let energy_mj = fields.energy_mj.or_else(|| device.total_energy_consumption().ok().and_then(to_i64));
        let (pcie_tx, pcie_rx) = match fields.pcie {
            Some(now) => {
                let rates = self.pcie_last.map_or((None, None), |before| pcie_rates(before, now));
                self.pcie_last = Some(now);
                rates
            }
            None if (self.ticks - 1).is_multiple_of(PCIE_THROUGHPUT_EVERY) => (
                device.pcie_throughput(PcieUtilCounter::Send).ok().map(kb_to_bytes),
                device.pcie_throughput(PcieUtilCounter::Receive).ok().map(kb_to_bytes),
            ),
            None => (None, None),
        };
        let Spare { mut rows, mut procs, mut refusals, events, readings } = req.spare;
        rows.clear();
        procs.clear();
        refusals.clear();
        // The previous answer's rows are dropped, their allocation kept.
        rows.push(GpuSample {
            ts: req.ts_ms,
            gpu_uuid: self.uuid.clone(),
            gpu_index: i32::try_from(index).unwrap_or(i32::MAX),
            gpu_model: self.model.clone(),
            interval_ms: req.interval_ms,
            gpu_util_pct: util.as_ref().and_then(|u| to_i32(u.gpu)),
            mem_util_pct: util.as_ref().and_then(|u| to_i32(u.memory)),
            fb_used_bytes: memory.as_ref().and_then(|m| to_i64(m.used)),
            fb_total_bytes: memory.as_ref().and_then(|m| to_i64(m.total)),
            power_mw: device.power_usage().ok().and_then(to_i32),
            power_limit_mw: device.enforced_power_limit().ok().and_then(to_i32),
            energy_mj,
            sm_clock_mhz: device.clock_info(Clock::SM).ok().and_then(to_i32),
            temp_c: device.temperature(TemperatureSensor::Gpu).ok().and_then(to_i32),
            enc_util_pct: device.encoder_utilization().ok().and_then(|u| to_i32(u.utilization)),
            dec_util_pct: device.decoder_utilization().ok().and_then(|u| to_i32(u.utilization)),
            pcie_tx_bytes_per_s: pcie_tx,
            pcie_rx_bytes_per_s: pcie_rx,
            clock_event_reasons: clock_event_reasons(device),
            sm_active_pct,
            sm_occupancy_pct,
            tensor_active_pct,
            dram_active_pct,
            gr_engine_active_pct,
            parent_gpu_uuid: None,
            mig_profile: None,
            mig_slices: None,
            mig_total_slices: if mig { self.mig.total_slices } else { None },
        });

        let scratch = &mut self.scratch;
        if mig {
            let mut stale = false;
            for instance in &mut self.mig.instances {
                let row = rows.len();
                match instance.sample(nvml, device, self.gpm, (req.ts_ms, req.interval_ms), index) {
                    Ok(mut sample) => {
                        sample.gpu_model = self.model.clone();
                        sample.parent_gpu_uuid = Some(self.uuid.clone());
                        sample.mig_total_slices = self.mig.total_slices;
                        rows.push(sample);
                    }
                    Err(error) => {
                        // Destroyed, most likely: the instances are read again.
                        tracing::debug!(gpu_index = index, mig = %instance.uuid, %error, "MIG instance not sampled");
                        stale = true;
                        continue;
                    }
                }
                list_processes(nvml, &instance.device, process_call, scratch, &mut refusals, index);
                procs.extend(scratch.processes.iter().map(|&(pid, used)| GpuProc {
                    row,
                    pid,
                    used_mem_bytes: used,
                    // NVML has no per-process utilization on MIG.
                    sm_util_pct: None,
                    mem_util_pct: None,
                }));
            }
            if stale {
                self.mig.read_at = None;
            }
            return Ok(Outcome::Sampled { rows, procs, refusals, events, readings });
        }
        list_processes(nvml, device, process_call, scratch, &mut refusals, index);
        if !scratch.processes.is_empty() {
            let window = Window::for_tick(self.last_seen_us, req.ts_ms, req.interval_ms);
            scratch.listed.clear();
            scratch.listed.extend(scratch.processes.iter().map(|(pid, _)| *pid));
            // `false`: utilization unknown for every process this tick.
            let picked = match raw::process_utilization(
                nvml,
                device,
                window.since_us,
                &mut scratch.buffers,
                &mut scratch.samples,
            ) {
                // `Err(NotFound)`: no sample newer than the window's start,
                // all idle; the samples are left empty.
                Ok(()) | Err(NvmlError::NotFound) => {
                    scratch.picked.refill(&scratch.samples, &scratch.listed, window);
                    true
                }
                Err(e) => {
                    if is_refusal(&e) {
                        refusals.push(Refusal { query: "process utilization", error: e.to_string() });
                    } else {
                        tracing::debug!(gpu_index = index, error = %e, "cannot read per-process utilization");
                    }
                    false
                }
            };
            if picked {
                // Moved back with the window after a clock step.
                self.last_seen_us =
                    scratch.picked.newest_us.or((window.since_us > 0).then_some(window.since_us));
            }
            for &(pid, used) in &scratch.processes {
                let util = if picked { scratch.picked.get(pid) } else { ProcUtil::Invalid };
                let (sm, mem) = match util {
                    ProcUtil::Sampled { sm_util, mem_util } => (to_i32(sm_util), to_i32(mem_util)),
                    ProcUtil::Idle => (Some(0), Some(0)),
                    ProcUtil::Invalid => (None, None),
                };
                procs.push(GpuProc { row: 0, pid, used_mem_bytes: used, sm_util_pct: sm, mem_util_pct: mem });
            }
        }
        Ok(Outcome::Sampled { rows, procs, refusals, events, readings })
    }
}

impl Instance {
    /// The instance's row: its memory and GPM activity; its identity and
    /// parent are the caller's to fill. Fails when its memory cannot be
    /// read for another reason than a refusal (a destroyed instance).
    fn sample(
        &mut self,
        nvml: &'static Nvml,
        parent: &Device<'static>,
        gpm: bool,
        (ts, interval_ms): (i64, i32),
        index: u32,
    ) -> Result<GpuSample, NvmlError> {
        let memory = match self.device.memory_info() {
            Ok(memory) => Some(memory),
            Err(e) if is_device_failure(&e) => return Err(e),
            Err(_) => None,
        };
        let [sm_active_pct, sm_occupancy_pct, tensor_active_pct, dram_active_pct, gr_engine_active_pct] =
            match self.gpu_instance_id.filter(|_| gpm) {
                Some(id) => gpm_metrics(nvml, || parent.gpm_mig_sample(id), &mut self.gpm_last),
                None => [None; GPM_METRICS.len()],
            };
        Ok(GpuSample {
            ts,
            gpu_uuid: self.uuid.clone(),
            gpu_index: i32::try_from(index).unwrap_or(i32::MAX),
            interval_ms,
            fb_used_bytes: memory.as_ref().and_then(|m| to_i64(m.used)),
            fb_total_bytes: memory.as_ref().and_then(|m| to_i64(m.total)),
            sm_active_pct,
            sm_occupancy_pct,
            tensor_active_pct,
            dram_active_pct,
            gr_engine_active_pct,
            mig_profile: self.profile.clone(),
            mig_slices: self.slices,
            ..GpuSample::default()
        })
    }
}

/// The processes of `device` (a GPU, or a MIG instance) into
/// `scratch.processes`: its compute, graphics and MPS client lists merged;
/// a list NVML refuses is added to `refusals`.
fn list_processes(
    nvml: &'static Nvml,
    device: &Device<'static>,
    process_call: ProcessCall,
    scratch: &mut Scratch,
    refusals: &mut Vec<Refusal>,
    index: u32,
) {
    let kinds = [ProcessList::Compute, ProcessList::Graphics, ProcessList::Mps];
    for (list, found) in kinds.into_iter().zip(scratch.lists.iter_mut()) {
        // On error `found` is left empty.
        match raw::process_list(nvml, device, list, process_call, &mut scratch.buffers, found) {
            Ok(()) => {}
            Err(e) if is_refusal(&e) => refusals.push(Refusal { query: list.name(), error: e.to_string() }),
            Err(e) => tracing::debug!(gpu_index = index, error = %e, "cannot list {}", list.name()),
        }
    }
    merge_processes(&scratch.lists, &mut scratch.processes);
}

/// Whether an error says NVML will not answer this query here (not
/// supported, not permitted, not in this driver), as opposed to a failure.
pub fn is_refusal(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::NotSupported
            | NvmlError::NoPermission
            | NvmlError::FunctionNotFound
            | NvmlError::FailedToLoadSymbol(_)
    )
}

/// Every clock-event (throttle) bit, including those newer than
/// `nvml-wrapper`'s list: its strict call hands back the raw bits it does
/// not know in its error.
fn clock_event_reasons(device: &Device<'static>) -> Option<i64> {
    let bits = match device.current_throttle_reasons_strict() {
        Ok(reasons) => reasons.bits(),
        Err(NvmlError::IncorrectBits(Bits::U64(bits))) => bits,
        Err(_) => return None,
    };
    // The bitmask's bits, reinterpreted, not its value converted.
    Some(bits as i64)
}

/// What one `nvmlDeviceGetFieldValues` call gave.
#[derive(Debug, Default)]
struct Fields {
    energy_mj: Option<i64>,
    pcie: Option<PcieCount>,
}

impl Fields {
    /// Reads [`FIELDS`] in one call; a field the driver does not have is
    /// `None` (the caller falls back to its own call).
    fn read(device: &Device<'static>) -> Fields {
        let ids = FIELDS.map(FieldId);
        let Ok(values) = device.field_values_for(&ids) else { return Fields::default() };
        let value = |i: usize| -> Option<(i64, u64)> {
            let sample: &FieldValueSample = values.get(i)?.as_ref().ok()?;
            let v = match sample.value.as_ref().ok()? {
                SampleValue::U64(v) => *v,
                SampleValue::U32(v) => u64::from(*v),
                SampleValue::I64(v) => u64::try_from(*v).ok()?,
                SampleValue::F64(_) => return None,
            };
            Some((sample.timestamp, v))
        };
        let energy_mj = value(0).and_then(|(_, v)| to_i64(v));
        let pcie = match (value(1), value(2)) {
            (Some((at_us, tx_bytes)), Some((_, rx_bytes))) => Some(PcieCount { at_us, tx_bytes, rx_bytes }),
            _ => None,
        };
        Fields { energy_mj, pcie }
    }
}

/// The GPM metrics recorded, in the order of `GpuSample`'s GPM fields:
/// `sm_active_pct`, `sm_occupancy_pct`, `tensor_active_pct`,
/// `dram_active_pct`, `gr_engine_active_pct`. One `nvmlGpmMetricsGet`
/// computes them all from the same two samples.
const GPM_METRICS: [GpmMetricId; 5] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
    GpmMetricId::GraphicsUtil,
];

/// The GPM metrics between the previous tick's sample and one `take`s
/// now, which then replaces it. `None` for each on the first tick, after a
/// failed sample, and where NVML does not give the metric.
fn gpm_metrics(
    nvml: &'static Nvml,
    take: impl FnOnce() -> Result<GpmSample<'static>, NvmlError>,
    last: &mut Option<GpmSample<'static>>,
) -> [Option<f32>; GPM_METRICS.len()] {
    let sample = match take() {
        Ok(sample) => sample,
        Err(error) => {
            tracing::debug!(%error, "cannot take a GPM sample");
            *last = None;
            return [None; GPM_METRICS.len()];
        }
    };
    let mut values = [None; GPM_METRICS.len()];
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

/// Merges process lists (compute, graphics, MPS clients) into `merged`
/// (emptied first): one entry per pid, in first-seen order, with the used
/// GPU memory in bytes (`None` where NVML does not give it). A process in
/// several lists is one process holding one amount of memory, which each
/// list reports whole, so the larger value is kept rather than the sum.
pub fn merge_processes(lists: &[Vec<(u32, Option<u64>)>], merged: &mut Vec<(u32, Option<u64>)>) {
    merged.clear();
    for &(pid, used) in lists.iter().flatten() {
        match merged.iter_mut().find(|(p, _)| *p == pid) {
            Some((_, known)) => *known = (*known).max(used),
            None => merged.push((pid, used)),
        }
    }
}

/// NVML's PCIe throughput unit, KB/s (1024 bytes), as bytes per second.
pub fn kb_to_bytes(kb_per_s: u32) -> i64 {
    i64::from(kb_per_s) * 1024
}

fn to_i32(value: u32) -> Option<i32> {
    i32::try_from(value).ok()
}

pub(super) fn to_i64(value: u64) -> Option<i64> {
    i64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_merge_per_pid() {
        let compute = vec![(10, Some(100)), (11, None)];
        let graphics = vec![(12, Some(5)), (10, Some(100)), (11, Some(7))];
        let mps = vec![(13, Some(9)), (12, Some(6))];
        let mut merged = Vec::new();
        merge_processes(&[compute, graphics, mps], &mut merged);
        assert_eq!(merged, [(10, Some(100)), (11, Some(7)), (12, Some(6)), (13, Some(9))]);
        merge_processes(&[vec![(3, None)], vec![]], &mut merged);
        assert_eq!(merged, [(3, None)]);
        merge_processes(&[vec![], vec![]], &mut merged);
        assert!(merged.is_empty());
    }

    #[test]
    fn mig_profiles_and_their_slices_from_the_names() {
        let cases = [
            ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", Some("3g.40gb"), Some(3)),
            ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", Some("1g.5gb"), Some(1)),
            ("NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", Some("1c.3g.40gb"), Some(1)),
            ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", Some("1g.10gb+me"), Some(1)),
            ("NVIDIA H200 MIG 7g.141gb", Some("7g.141gb"), Some(7)),
            ("NVIDIA H100 80GB HBM3", None, None),
            ("Something MIG ", None, None),
        ];
        for (name, profile, slices) in cases {
            assert_eq!(mig_profile(name), profile, "{name}");
            assert_eq!(mig_profile(name).and_then(profile_slices), slices, "{name}");
        }
        assert_eq!(profile_slices("0g.1gb"), None);
        assert_eq!(profile_slices("xg.1gb"), None);
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
    fn pcie_rates_from_the_counters() {
        let a = PcieCount { at_us: 1_000_000, tx_bytes: 1_000, rx_bytes: 5_000 };
        let b = PcieCount { at_us: 1_500_000, tx_bytes: 3_000, rx_bytes: 5_000 };
        assert_eq!(pcie_rates(a, b), (Some(4_000), Some(0)));
        // A counter that went back (wrapped, reset) gives no rate.
        let c = PcieCount { at_us: 2_500_000, tx_bytes: 10, rx_bytes: 6_000 };
        assert_eq!(pcie_rates(b, c), (None, Some(1_000)));
        assert_eq!(pcie_rates(b, b), (None, None));
        assert_eq!(pcie_rates(c, b), (None, None));
    }

    #[test]
    fn refusals_are_not_failures() {
        for e in [NvmlError::NotSupported, NvmlError::NoPermission, NvmlError::FunctionNotFound] {
            assert!(is_refusal(&e), "{e}");
        }
        for e in [NvmlError::GpuLost, NvmlError::NotFound, NvmlError::Unknown] {
            assert!(!is_refusal(&e), "{e}");
        }
    }
}
