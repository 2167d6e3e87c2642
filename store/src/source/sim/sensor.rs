//! One GPU's sensors: turns what its processes do at a tick into the
//! readings NVML would give (`gpu_samples` and `proc_samples` rows). Power
//! follows utilization and jitters around its level, temperature follows
//! power with a lag, clocks drop when idle and when power-capped, the energy
//! counter integrates the power level over time.
//!
//! A GPU in MIG mode gives rows as NVML does for one: its own row has the
//! board's readings (power, energy, temperature, clocks, PCIe, driven by
//! all its instances' work; its memory in use is theirs) and no
//! utilization or GPM activity at all, since NVML gives none for a
//! partitioned GPU and its unassigned slices must not look busy; it has no
//! process rows. Each instance ([`Instance`]) has a row of its own with
//! only what NVML gives for one: its memory and its GPM activity, as a
//! whole GPU's would be for the same work; its processes' rows have their
//! memory and no utilization.
//!
//! This is the hot path (`simulate` runs it ~170 M times for a month of 64
//! GPUs): a hash or two and a few float operations per GPU and process, and
//! no allocation beyond the row's own strings.

use apron_schemas::{GpuSample, ProcSample};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::calendar::Calendar;
use super::hardware::{GpuModel, MIG_TOTAL_SLICES, MigProfile};
use super::noise::{self, unit};
use super::schedule::Proc;
use crate::source::Tick;

/// NVML clock event reasons (`nvmlClocksEventReason…`).
const REASON_GPU_IDLE: i64 = 0x1;
const REASON_SW_POWER_CAP: i64 = 0x4;
const REASON_SW_THERMAL: i64 = 0x20;

/// Time constant of the die temperature following power, ms.
pub(super) const THERMAL_TAU_MS: f32 = 90_000.0;

const MIB: i64 = 1 << 20;

/// What every GPU of a host shares at one tick.
#[derive(Debug, Clone, Copy)]
pub(super) struct At {
    pub(super) ts: i64,
    pub(super) interval_ms: i32,
    /// Time since the host's previous tick (the interval on the first), ms.
    pub(super) dt_ms: i64,
    /// How far the temperature moves toward its target this tick (0–1).
    pub(super) alpha: f32,
    pub(super) cal: Calendar,
}

/// The physical state and fixed identity of one GPU.
#[derive(Debug)]
pub(super) struct Sensor {
    uuid: apron_schemas::Text,
    model_name: apron_schemas::Text,
    index: i32,
    key: u64,
    /// Inlet temperature, °C.
    ambient_c: f32,
    /// Die temperature, °C; `None` before the first tick.
    temp_c: Option<f32>,
    /// The energy counter, µJ (reported in mJ).
    energy_uj: i64,
    /// Framebuffer in use with no process, and a context's overhead, bytes.
    empty_fb_bytes: i64,
    context_fb_bytes: i64,
}

impl Sensor {
    /// The GPU's UUID and NVML index, as its rows name it.
    pub(super) fn id(&self) -> (&apron_schemas::Text, i32) {
        (&self.uuid, self.index)
    }

    /// GPU `index` of `model`, called `uuid`; its constants come from `rng`.
    pub(super) fn new(uuid: String, index: usize, model: &GpuModel, rng: &mut ChaCha8Rng) -> Sensor {
        Sensor {
            uuid: uuid.into(),
            model_name: model.name.into(),
            index: i32::try_from(index).unwrap_or(i32::MAX),
            key: rng.random(),
            ambient_c: 26.0 + 8.0 * rng.random::<f32>(),
            temp_c: None,
            // The counter runs since the driver loaded: days to months ago.
            energy_uj: rng.random_range(10_000_000_000..2_000_000_000_000) * 1_000,
            empty_fb_bytes: rng.random_range(0..5) * MIB,
            context_fb_bytes: rng.random_range(480..540) * MIB,
        }
    }

    /// Samples this whole GPU and its processes at `at`, appending one GPU
    /// row and one row per process to `out`.
    pub(super) fn sample(&mut self, model: &GpuModel, procs: &mut [Proc], at: &At, out: &mut Tick) {
        let ts = at.ts;
        let load = Load::of(procs, at);
        let util = load.util;
        let board = self.board(model, !procs.is_empty(), load.draw, util, util >= 0.5, at);
        let fb_used = if procs.is_empty() {
            self.empty_fb_bytes
        } else {
            (load.held + self.context_fb_bytes + (procs.len() as i64 - 1) * 8 * MIB).min(model.fb_total_bytes)
        };
        let pct = |x: f32| (x + 0.5) as i32;
        let gpm = |x: f32| model.gpm.then(|| gpm_pct(x));
        out.gpus.push(GpuSample {
            ts,
            gpu_uuid: self.uuid.clone(),
            gpu_index: self.index,
            gpu_model: Some(self.model_name.clone()),
            interval_ms: at.interval_ms,
            gpu_util_pct: Some(pct(util)),
            mem_util_pct: Some(pct(load.mem_util)),
            fb_used_bytes: Some(fb_used),
            fb_total_bytes: Some(model.fb_total_bytes),
            power_mw: Some(board.power as i32),
            power_limit_mw: Some(model.power_limit_mw),
            energy_mj: Some(self.energy_uj / 1_000),
            sm_clock_mhz: Some(board.sm_clock_mhz),
            temp_c: Some(board.temp_c),
            enc_util_pct: Some(0),
            dec_util_pct: Some(pct(load.dec.min(100.0))),
            pcie_tx_bytes_per_s: Some(pcie(model, load.tx)),
            pcie_rx_bytes_per_s: Some(pcie(model, load.rx)),
            clock_event_reasons: Some(board.reasons),
            sm_active_pct: gpm(load.sm_active.min(100.0)),
            sm_occupancy_pct: gpm(load.occupancy.min(100.0)),
            tensor_active_pct: gpm(load.tensor.min(100.0)),
            dram_active_pct: gpm((load.mem_util * 0.9).min(100.0)),
            // The graphics engine is active whenever a kernel runs, however
            // few SMs it fills: the time-based figure, at least SM activity.
            gr_engine_active_pct: gpm(util),
            parent_gpu_uuid: None,
            mig_profile: None,
            mig_slices: None,
            mig_total_slices: None,
        });
        for p in procs.iter() {
            out.procs.push(ProcSample {
                ts,
                gpu_uuid: self.uuid.clone(),
                pid: p.pid,
                interval_ms: at.interval_ms,
                identity: p.identity.clone(),
                used_mem_bytes: Some(p.tick_mem),
                sm_util_pct: Some(pct(p.tick_util)),
                mem_util_pct: Some(pct(p.tick_util * p.work.mem_ratio)),
            });
        }
    }

    /// Samples this GPU in MIG mode at `at`, its instances' work at that
    /// tick summed in `instances`, appending its own row to `out` (no
    /// process rows: those are on the instances).
    pub(super) fn sample_partitioned(
        &mut self,
        model: &GpuModel,
        instances: &Partition,
        at: &At,
        out: &mut Tick,
    ) {
        let board = self.board(model, instances.procs, instances.draw, instances.util, instances.busy, at);
        out.gpus.push(GpuSample {
            ts: at.ts,
            gpu_uuid: self.uuid.clone(),
            gpu_index: self.index,
            gpu_model: Some(self.model_name.clone()),
            interval_ms: at.interval_ms,
            fb_used_bytes: Some(instances.fb_used),
            fb_total_bytes: Some(model.fb_total_bytes),
            power_mw: Some(board.power as i32),
            power_limit_mw: Some(model.power_limit_mw),
            energy_mj: Some(self.energy_uj / 1_000),
            sm_clock_mhz: Some(board.sm_clock_mhz),
            temp_c: Some(board.temp_c),
            pcie_tx_bytes_per_s: Some(pcie(model, instances.tx)),
            pcie_rx_bytes_per_s: Some(pcie(model, instances.rx)),
            clock_event_reasons: Some(board.reasons),
            mig_total_slices: Some(MIG_TOTAL_SLICES),
            ..GpuSample::default()
        });
    }

    /// The board at `at`, drawing `draw` (percent of the power headroom,
    /// before capping) with kernels running `util` percent of the time;
    /// `context`: some process has a context open; `busy`: clocks are up.
    /// Moves the temperature and the energy counter on by the tick.
    fn board(&mut self, model: &GpuModel, context: bool, draw: f32, util: f32, busy: bool, at: &At) -> Board {
        let h = noise::at(self.key, at.ts);
        let (u0, u1, u2, u3) = (unit(h, 0), unit(h, 1), unit(h, 2), unit(h, 3));
        let limit = model.power_limit_mw as f32;
        let floor = if context { model.idle_mw + model.context_mw } else { model.idle_mw };
        // The mean draw over the interval: it drives the energy counter and
        // the heat; the reading jitters around it.
        let mut level = floor + (limit - floor) * draw * 0.01;
        let mut clock = if busy { model.sm_clock_max_mhz as f32 } else { model.sm_clock_idle_mhz as f32 };
        let mut reasons = if busy { 0 } else { REASON_GPU_IDLE };
        if level > limit * 0.985 {
            level = limit * (0.975 + 0.02 * u1);
            reasons |= REASON_SW_POWER_CAP;
            clock -= (model.sm_clock_max_mhz - model.sm_clock_idle_mhz) as f32 * (0.05 + 0.08 * u2);
        }
        let jitter = 0.004 + 0.016 * util * 0.01;
        let power = (level * (1.0 + jitter * (2.0 * u0 - 1.0))).min(limit);

        let target = self.ambient_c + model.temp_rise_c * (level - model.idle_mw) / (limit - model.idle_mw);
        let temp = match self.temp_c {
            Some(t) => t + (target - t) * at.alpha,
            None => target,
        };
        self.temp_c = Some(temp);
        if busy && temp > 83.0 {
            reasons |= REASON_SW_THERMAL;
            clock -= (temp - 83.0) * 30.0;
        }
        self.energy_uj += level as i64 * at.dt_ms;
        Board {
            power,
            sm_clock_mhz: ((clock as i32) / 15) * 15,
            temp_c: (temp + 0.6 * (u3 - 0.5) + 0.5) as i32,
            reasons,
        }
    }
}

/// A board's readings at one tick.
#[derive(Debug, Clone, Copy)]
struct Board {
    /// Power reading, mW.
    power: f32,
    sm_clock_mhz: i32,
    temp_c: i32,
    reasons: i64,
}

/// A PCIe rate of `bytes_per_s` as NVML reports it: in KiB/s, at most the bus.
fn pcie(model: &GpuModel, bytes_per_s: f32) -> i64 {
    ((bytes_per_s.min(model.pcie_max_bytes_per_s) as i64) >> 10) << 10
}

/// A GPM percentage as NVML reports it: one decimal.
fn gpm_pct(x: f32) -> f32 {
    ((x * 10.0 + 0.5) as i32) as f32 / 10.0
}

/// What the processes of one GPU or MIG instance do together at one tick.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Load {
    /// Time a kernel ran, percent (0–100).
    util: f32,
    /// Time the memory controller was busy, percent (0–100).
    mem_util: f32,
    /// Σ utilization × intensity: how far the draw goes from the floor
    /// toward the limit, percent of that headroom (above 100 caps).
    draw: f32,
    /// GPM: SMs active, their occupancy and tensor pipes, percent (uncapped).
    sm_active: f32,
    occupancy: f32,
    tensor: f32,
    /// PCIe receive and transmit, bytes per second.
    rx: f32,
    tx: f32,
    /// Decoder, percent (uncapped).
    dec: f32,
    /// Memory the processes hold, bytes.
    held: i64,
}

impl Load {
    /// The load of `procs` at `at`; leaves each process's utilization and
    /// memory at the tick in its `tick_util` and `tick_mem`.
    pub(super) fn of(procs: &mut [Proc], at: &At) -> Load {
        let ts = at.ts;
        let mut util = 0.0f32;
        let (mut rx, mut tx, mut dec) = (0.0f32, 0.0f32, 0.0f32);
        let mut held = 0i64;
        for p in procs.iter_mut() {
            let a = p.work.activity(ts, p.start_ms, p.key, &at.cal);
            p.tick_util = a.util;
            p.tick_mem = if a.mem_frac >= 1.0 {
                p.mem_bytes
            } else {
                ((p.mem_bytes as f32 * a.mem_frac) as i64) & !(2 * MIB - 1)
            };
            util += a.util;
            rx += a.rx;
            tx += a.tx;
            dec += a.dec;
            held += p.tick_mem;
        }
        // Kernels of several processes overlap; the GPU is busy 100 % at most.
        let scale = if util > 100.0 { 100.0 / util } else { 1.0 };
        let (mut draw, mut mem_util, mut sm_active, mut occupancy, mut tensor) = (0.0f32, 0.0, 0.0, 0.0, 0.0);
        for p in procs.iter_mut() {
            p.tick_util *= scale;
            let w = &p.work;
            draw += p.tick_util * w.intensity;
            mem_util += p.tick_util * w.mem_ratio;
            let active = p.tick_util * w.sm_eff;
            sm_active += active;
            occupancy += active * w.occupancy;
            tensor += active * w.tensor;
        }
        Load {
            util: util.min(100.0),
            mem_util: mem_util.min(100.0),
            draw,
            sm_active,
            occupancy,
            tensor,
            rx,
            tx,
            dec,
            held,
        }
    }
}

/// What the instances of a GPU in MIG mode add up to at one tick: what
/// its own row reads.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Partition {
    /// Σ each instance's draw × its share of the GPU's slices, percent of
    /// the power headroom; likewise its kernels' time.
    draw: f32,
    util: f32,
    /// Whether any instance runs kernels (the clocks go up for all).
    busy: bool,
    /// Whether any instance has a process (a context is open).
    procs: bool,
    /// PCIe, bytes per second: the instances' sum.
    rx: f32,
    tx: f32,
    /// Memory in use on the instances, bytes.
    fb_used: i64,
}

impl Partition {
    /// Adds `instance`, whose `procs` processes made `load` this tick.
    pub(super) fn add(&mut self, instance: &Instance, load: &Load, procs: usize) {
        let share = instance.profile.slices as f32 / MIG_TOTAL_SLICES as f32;
        self.draw += load.draw * share;
        self.util += load.util * share;
        self.busy |= load.util >= 0.5;
        self.procs |= procs > 0;
        self.rx += load.rx;
        self.tx += load.tx;
        self.fb_used += instance.fb_used(load, procs);
    }
}

/// The fixed identity of one MIG instance; its readings come from its
/// processes alone (the board's are its parent's).
#[derive(Debug)]
pub(super) struct Instance {
    uuid: apron_schemas::Text,
    parent_uuid: apron_schemas::Text,
    model_name: apron_schemas::Text,
    /// The parent GPU's NVML index.
    index: i32,
    profile: &'static MigProfile,
    profile_name: apron_schemas::Text,
    /// Memory in use with no process, and a context's overhead, bytes.
    empty_fb_bytes: i64,
    context_fb_bytes: i64,
}

impl Instance {
    /// The instance's UUID and its parent GPU's NVML index, as its rows
    /// name them.
    pub(super) fn id(&self) -> (&apron_schemas::Text, i32) {
        (&self.uuid, self.index)
    }

    /// An instance of `profile` called `uuid`, carved from `parent`; its
    /// constants come from `rng`.
    pub(super) fn new(
        uuid: String,
        parent: &Sensor,
        profile: &'static MigProfile,
        rng: &mut ChaCha8Rng,
    ) -> Instance {
        Instance {
            uuid: uuid.into(),
            parent_uuid: parent.uuid.clone(),
            model_name: parent.model_name.clone(),
            index: parent.index,
            profile,
            profile_name: profile.name.into(),
            empty_fb_bytes: rng.random_range(0..4) * 2 * MIB,
            context_fb_bytes: rng.random_range(250..330) * MIB,
        }
    }

    /// Memory in use on the instance with `procs` processes holding what
    /// `load` says, bytes: theirs and their contexts'.
    fn fb_used(&self, load: &Load, procs: usize) -> i64 {
        if procs == 0 {
            self.empty_fb_bytes
        } else {
            (load.held + self.context_fb_bytes + (procs as i64 - 1) * 8 * MIB)
                .min(self.profile.fb_total_bytes)
        }
    }

    /// Samples this instance and its processes at `at`, appending one row
    /// for it and one per process to `out`; returns their load, for the
    /// parent's row.
    pub(super) fn sample(&self, model: &GpuModel, procs: &mut [Proc], at: &At, out: &mut Tick) -> Load {
        let load = Load::of(procs, at);
        let gpm = |x: f32| model.gpm.then(|| gpm_pct(x));
        out.gpus.push(GpuSample {
            ts: at.ts,
            gpu_uuid: self.uuid.clone(),
            gpu_index: self.index,
            gpu_model: Some(self.model_name.clone()),
            interval_ms: at.interval_ms,
            fb_used_bytes: Some(self.fb_used(&load, procs.len())),
            fb_total_bytes: Some(self.profile.fb_total_bytes),
            sm_active_pct: gpm(load.sm_active.min(100.0)),
            sm_occupancy_pct: gpm(load.occupancy.min(100.0)),
            tensor_active_pct: gpm(load.tensor.min(100.0)),
            dram_active_pct: gpm((load.mem_util * 0.9).min(100.0)),
            gr_engine_active_pct: gpm(load.util),
            parent_gpu_uuid: Some(self.parent_uuid.clone()),
            mig_profile: Some(self.profile_name.clone()),
            mig_slices: Some(self.profile.slices),
            mig_total_slices: Some(MIG_TOTAL_SLICES),
            ..GpuSample::default()
        });
        for p in procs.iter() {
            out.procs.push(ProcSample {
                ts: at.ts,
                gpu_uuid: self.uuid.clone(),
                pid: p.pid,
                interval_ms: at.interval_ms,
                identity: p.identity.clone(),
                used_mem_bytes: Some(p.tick_mem),
                sm_util_pct: None,
                mem_util_pct: None,
            });
        }
        load
    }
}
