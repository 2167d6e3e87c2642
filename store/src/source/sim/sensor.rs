//! One GPU's sensors: turns what its processes do at a tick into the
//! readings NVML would give (`gpu_samples` and `proc_samples` rows). Power
//! follows utilization and jitters around its level, temperature follows
//! power with a lag, clocks drop when idle and when power-capped, the energy
//! counter integrates the power level over time.
//!
//! This is the hot path (`simulate` runs it ~170 M times for a month of 64
//! GPUs): a hash or two and a few float operations per GPU and process, and
//! no allocation beyond the row's own strings.

use apron_schemas::{GpuSample, ProcSample};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::calendar::Calendar;
use super::hardware::GpuModel;
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

    /// Samples this GPU and its processes at `at`, appending one GPU row and
    /// one row per process to `out`.
    pub(super) fn sample(&mut self, model: &GpuModel, procs: &mut [Proc], at: &At, out: &mut Tick) {
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
        let util = util.min(100.0);
        let mem_util = mem_util.min(100.0);

        let h = noise::at(self.key, ts);
        let (u0, u1, u2, u3) = (unit(h, 0), unit(h, 1), unit(h, 2), unit(h, 3));
        let limit = model.power_limit_mw as f32;
        let floor = if procs.is_empty() { model.idle_mw } else { model.idle_mw + model.context_mw };
        // The mean draw over the interval: it drives the energy counter and
        // the heat; the reading jitters around it.
        let mut level = floor + (limit - floor) * draw * 0.01;
        let busy = util >= 0.5;
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

        let fb_used = if procs.is_empty() {
            self.empty_fb_bytes
        } else {
            (held + self.context_fb_bytes + (procs.len() as i64 - 1) * 8 * MIB).min(model.fb_total_bytes)
        };
        let pcie = |x: f32| ((x.min(model.pcie_max_bytes_per_s) as i64) >> 10) << 10;
        let pct = |x: f32| (x + 0.5) as i32;
        let gpm = |x: f32| model.gpm.then(|| ((x * 10.0 + 0.5) as i32) as f32 / 10.0);
        out.gpus.push(GpuSample {
            ts,
            gpu_uuid: self.uuid.clone(),
            gpu_index: self.index,
            gpu_model: Some(self.model_name.clone()),
            interval_ms: at.interval_ms,
            gpu_util_pct: Some(pct(util)),
            mem_util_pct: Some(pct(mem_util)),
            fb_used_bytes: Some(fb_used),
            fb_total_bytes: Some(model.fb_total_bytes),
            power_mw: Some(power as i32),
            power_limit_mw: Some(model.power_limit_mw),
            energy_mj: Some(self.energy_uj / 1_000),
            sm_clock_mhz: Some(((clock as i32) / 15) * 15),
            temp_c: Some(pct(temp + 0.6 * (u3 - 0.5))),
            enc_util_pct: Some(0),
            dec_util_pct: Some(pct(dec.min(100.0))),
            pcie_tx_bytes_per_s: Some(pcie(tx)),
            pcie_rx_bytes_per_s: Some(pcie(rx)),
            clock_event_reasons: Some(reasons),
            sm_active_pct: gpm(sm_active.min(100.0)),
            sm_occupancy_pct: gpm(occupancy.min(100.0)),
            tensor_active_pct: gpm(tensor.min(100.0)),
            dram_active_pct: gpm((mem_util * 0.9).min(100.0)),
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
}
