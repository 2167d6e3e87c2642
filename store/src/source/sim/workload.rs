//! The personas: what a process does on its GPU. Each kind of work draws
//! its parameters once, when it starts ([`Work::new`], [`duration_ms`],
//! [`memory_bytes`]); afterwards its activity at any time is a pure function
//! of the time, its age, its key and the calendar ([`Work::activity`]), so
//! it costs a hash and a few float operations per tick.
//!
//! | kind | runs for | utilization | memory | PCIe |
//! | --- | --- | --- | --- | --- |
//! | training | 45 min – 5 days, median 8 h | 86–99 % after a 2–10 min ramp; 30–150 s checkpoint dips every 30–120 min; 5 % of 5-min windows stalled on input | 55–95 % of the GPU | RX bursts in 1 of 4–30 s, TX at checkpoints |
//! | data-starved training (12 % of training) | as training | 20–45 % | as training | RX flat out |
//! | inference | 12 h – 14 days, median 3 days | peak 45–95 % × the daily demand curve | 10–45 %, or 85–92 % (pre-allocating servers) | small, follows demand |
//! | notebook | 2 h – 12 days, median 36 h | 0–2 %, a used cell now and then in office hours | 2–30 GiB | none when idle |
//! | debug run | 3 min – 4 h, median 25 min | 25–90 %, paused 30 % of the time | 2–40 GiB | moderate |
//! | zombie | 45 min – 7 days, median 16 h | 0 | what the dead job held | none |
//!
//! On a MIG instance "the GPU" is the instance: memory is a share of the
//! instance's, at most half (notebooks) or 70 % (debug runs) of it, and
//! utilization is of its slices.

use std::f64::consts::TAU;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use apron_schemas::time;

use super::calendar::Calendar;
use super::hardware::GpuModel;
use super::noise::{self, unit};

// The workloads draw durations as real numbers of milliseconds.
const MIN_MS: f64 = time::MINUTE_MS as f64;
const HOUR_MS: f64 = time::HOUR_MS as f64;
const DAY_MS: f64 = time::DAY_MS as f64;
const GIB: f32 = (1u64 << 30) as f32;

/// Salts that make a process's episodes (stalls, bursts, pauses)
/// independent of its per-tick noise.
const STALL: u64 = 0x5157_A11E_D0D0_0001;
const BURST: u64 = 0xB0B5_7000_0000_0002;
const PAUSE: u64 = 0x9A05_E000_0000_0003;

/// What a process is doing on its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A long training run.
    Training,
    /// A model server following the daily demand.
    Inference,
    /// A notebook kernel that holds memory and mostly sits idle.
    Notebook,
    /// A short interactive or test run.
    Debug,
    /// A dead job's process still holding its memory.
    Zombie,
}

impl Kind {
    /// The chance that a process of this kind, when its job ends, stays
    /// behind as a zombie (a hung NCCL rank, an orphaned worker, a
    /// suspended shell job).
    pub(super) fn zombie_chance(self) -> f32 {
        match self {
            Kind::Training => 0.12,
            Kind::Debug => 0.08,
            Kind::Inference | Kind::Notebook | Kind::Zombie => 0.0,
        }
    }
}

/// The parameters of one process's work, drawn when it starts.
#[derive(Debug, Clone)]
pub(super) struct Work {
    pub(super) kind: Kind,
    /// Utilization while working (inference: at peak demand), percent.
    level: f32,
    /// A training run whose input pipeline cannot keep up.
    starved: bool,
    /// Training: loading the model and the first batches.
    warmup_ms: i64,
    /// Training: time between checkpoints, and a checkpoint's length.
    ckpt_every_ms: i64,
    ckpt_ms: i64,
    /// Training: share of seconds with a data-loading burst.
    burst_share: f32,
    /// PCIe receive rate while working, and in bursts, bytes per second.
    rx_base: f32,
    rx_burst: f32,
    /// PCIe transmit rate while checkpointing, bytes per second.
    tx_ckpt: f32,
    /// Memory-controller busy per percent of utilization.
    pub(super) mem_ratio: f32,
    /// Share of the power headroom (limit − idle) drawn at 100 % utilization.
    pub(super) intensity: f32,
    /// GPM: SMs active per percent of utilization; occupancy and tensor
    /// activity as shares of SM activity.
    pub(super) sm_eff: f32,
    pub(super) occupancy: f32,
    pub(super) tensor: f32,
    /// Decoder utilization at peak demand (video inference), percent.
    dec: f32,
}

/// What a process does at one tick.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Activity {
    /// Its share of the GPU's time, percent (may sum above 100 over
    /// processes; the GPU caps it).
    pub(super) util: f32,
    /// Share of its memory allocated so far (it grows while loading).
    pub(super) mem_frac: f32,
    /// PCIe receive and transmit, bytes per second.
    pub(super) rx: f32,
    pub(super) tx: f32,
    /// Decoder utilization, percent.
    pub(super) dec: f32,
}

fn range(rng: &mut ChaCha8Rng, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * rng.random::<f32>()
}

/// A log-normal draw with this median and log-space spread, clamped.
fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64, lo: f64, hi: f64) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    let z = (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos();
    (median * (sigma * z).exp()).clamp(lo, hi)
}

/// How long a process of `kind` runs, milliseconds.
pub(super) fn duration_ms(kind: Kind, rng: &mut ChaCha8Rng) -> i64 {
    let ms = match kind {
        Kind::Training => lognormal(rng, 8.0 * HOUR_MS, 1.0, 45.0 * MIN_MS, 5.0 * DAY_MS),
        Kind::Inference => lognormal(rng, 3.0 * DAY_MS, 0.6, 12.0 * HOUR_MS, 14.0 * DAY_MS),
        Kind::Notebook => lognormal(rng, 36.0 * HOUR_MS, 0.9, 2.0 * HOUR_MS, 12.0 * DAY_MS),
        Kind::Debug => lognormal(rng, 25.0 * MIN_MS, 0.8, 3.0 * MIN_MS, 4.0 * HOUR_MS),
        Kind::Zombie => lognormal(rng, 16.0 * HOUR_MS, 1.0, 45.0 * MIN_MS, 7.0 * DAY_MS),
    };
    ms as i64
}

/// How much GPU memory a process of `kind` wants, bytes, on a GPU (or MIG
/// instance) of `fb_total_bytes` (before it is fitted next to what the GPU
/// already holds).
pub(super) fn memory_bytes(kind: Kind, rng: &mut ChaCha8Rng, fb_total_bytes: i64) -> i64 {
    let fb = fb_total_bytes as f32;
    let bytes = match kind {
        Kind::Training => fb * range(rng, 0.55, 0.95),
        Kind::Inference if rng.random::<f32>() < 0.4 => fb * range(rng, 0.85, 0.92),
        Kind::Inference => fb * range(rng, 0.10, 0.45),
        Kind::Notebook => (range(rng, 2.0, 30.0) * GIB).min(fb * 0.5),
        Kind::Debug | Kind::Zombie => (range(rng, 2.0, 40.0) * GIB).min(fb * 0.7),
    };
    bytes as i64
}

impl Work {
    /// Draws the parameters of a new process of `kind` on `model`; `video`
    /// marks an inference server that decodes video.
    pub(super) fn new(kind: Kind, rng: &mut ChaCha8Rng, model: &GpuModel, video: bool) -> Work {
        let pcie = model.pcie_max_bytes_per_s;
        let mut w = Work {
            kind,
            level: 0.0,
            starved: false,
            warmup_ms: 0,
            ckpt_every_ms: 1,
            ckpt_ms: 0,
            burst_share: 0.0,
            rx_base: 0.0,
            rx_burst: 0.0,
            tx_ckpt: 0.0,
            mem_ratio: range(rng, 0.3, 0.6),
            intensity: range(rng, 0.5, 0.85),
            sm_eff: range(rng, 0.5, 0.8),
            occupancy: range(rng, 0.2, 0.45),
            tensor: range(rng, 0.1, 0.5),
            dec: 0.0,
        };
        match kind {
            Kind::Training => {
                w.starved = rng.random::<f32>() < 0.12;
                w.level = if w.starved { range(rng, 20.0, 45.0) } else { range(rng, 86.0, 99.0) };
                w.warmup_ms = rng.random_range(120_000..600_000);
                w.ckpt_every_ms = rng.random_range(30 * 60_000..120 * 60_000);
                w.ckpt_ms = rng.random_range(30_000..150_000);
                w.burst_share = 1.0 / range(rng, 4.0, 30.0);
                w.rx_base = pcie * range(rng, 0.01, 0.06);
                w.rx_burst = pcie * range(rng, 0.15, 0.5);
                w.tx_ckpt = pcie * range(rng, 0.2, 0.5);
                w.mem_ratio = range(rng, 0.35, 0.75);
                w.intensity = range(rng, 0.65, 1.08);
                w.sm_eff = range(rng, 0.65, 0.92);
                w.occupancy = range(rng, 0.25, 0.6);
                w.tensor = range(rng, 0.2, 0.75);
            }
            Kind::Inference => {
                w.level = range(rng, 45.0, 95.0);
                w.rx_base = range(rng, 20e6, 300e6);
                w.intensity = range(rng, 0.55, 0.85);
                w.tensor = range(rng, 0.15, 0.5);
                w.dec = if video { range(rng, 15.0, 45.0) } else { 0.0 };
            }
            Kind::Notebook => {
                w.level = range(rng, 20.0, 75.0);
                w.rx_base = pcie * range(rng, 0.02, 0.12);
                w.mem_ratio = range(rng, 0.2, 0.5);
                w.sm_eff = range(rng, 0.4, 0.7);
                w.tensor = range(rng, 0.05, 0.3);
            }
            Kind::Debug | Kind::Zombie => {
                w.level = range(rng, 25.0, 90.0);
                w.rx_base = pcie * range(rng, 0.005, 0.08);
                w.intensity = range(rng, 0.5, 0.9);
            }
        }
        w
    }

    /// What the process does at `t`, having started at `start_ms`; `key` is
    /// the process's noise key.
    pub(super) fn activity(&self, t: i64, start_ms: i64, key: u64, cal: &Calendar) -> Activity {
        let h = noise::at(key, t);
        let (u0, u1, u2, u3) = (unit(h, 0), unit(h, 1), unit(h, 2), unit(h, 3));
        let mut a = Activity { mem_frac: 1.0, ..Activity::default() };
        match self.kind {
            Kind::Zombie => {}
            Kind::Training => {
                let age = (t - start_ms).max(0);
                if age < self.warmup_ms {
                    // Loading weights and the first batches: memory fills,
                    // PCIe is busy, kernels start to run.
                    let f = age as f32 / self.warmup_ms as f32;
                    a.util = self.level * f * f * (0.5 + 0.5 * u0);
                    a.mem_frac = 0.25 + 0.75 * f;
                    a.rx = self.rx_burst * (0.4 + 0.6 * u1);
                    a.tx = self.rx_base * 0.05 * u2;
                } else if (age - self.warmup_ms) % self.ckpt_every_ms < self.ckpt_ms {
                    // Checkpoint: weights and optimiser state go to the host.
                    a.util = 3.0 * u0;
                    a.rx = self.rx_base * 0.1 * u1;
                    a.tx = self.tx_ckpt * (0.7 + 0.3 * u2);
                } else if self.starved {
                    a.util = self.level + 10.0 * noise::smooth(key, t, 20_000) + 8.0 * (u0 - 0.5);
                    a.rx = self.rx_burst * (0.75 + 0.25 * u1);
                    a.tx = self.rx_base * 0.05 * u2;
                } else if noise::in_window(key ^ STALL, t, 300_000, 0.05) {
                    // The input pipeline stalls: kernels wait, copies run flat out.
                    a.util = 12.0 + 30.0 * u0;
                    a.rx = self.rx_burst * (0.8 + 0.2 * u1);
                    a.tx = self.rx_base * 0.05 * u2;
                } else {
                    a.util = self.level + 3.0 * noise::smooth(key, t, 40_000) + 4.0 * (u0 - 0.5);
                    if u2 < 0.02 {
                        // A straggler rank or a logging step: a short dip.
                        a.util *= 0.3 + 0.5 * u1;
                    }
                    a.rx = self.rx_base * (0.5 + u1);
                    if u3 < self.burst_share {
                        // The next batches arrive.
                        a.rx += self.rx_burst * (0.6 + 0.4 * u0);
                    }
                    a.tx = self.rx_base * 0.05 * u2;
                }
            }
            Kind::Inference => {
                let d = cal.demand;
                a.util = self.level * d * (0.8 + 0.4 * u0) + 6.0 * d * noise::smooth(key, t, 30_000);
                a.rx = self.rx_base * d * (0.5 + u1);
                a.tx = a.rx * (0.4 + 0.4 * u2);
                a.dec = self.dec * d * (0.8 + 0.4 * u3);
            }
            Kind::Notebook => {
                if cal.office && noise::in_window(key ^ BURST, t, 600_000, 0.10) {
                    // Someone runs a cell.
                    a.util = self.level * (0.7 + 0.3 * noise::smooth(key, t, 20_000)) + 10.0 * (u0 - 0.5);
                    a.rx = self.rx_base * u1;
                    a.tx = self.rx_base * 0.1 * u2;
                } else if u0 < 0.015 {
                    a.util = 2.0;
                } else if u0 < 0.06 {
                    a.util = 1.0;
                }
            }
            Kind::Debug => {
                a.mem_frac = (0.3 + (t - start_ms).max(0) as f32 / 60_000.0).min(1.0);
                if noise::in_window(key ^ PAUSE, t, 120_000, 0.3) {
                    // Stopped at a breakpoint, or the user reads a traceback.
                    a.util = if u0 < 0.1 { 1.0 } else { 0.0 };
                } else {
                    a.util = self.level * (0.75 + 0.25 * noise::smooth(key, t, 15_000)) + 12.0 * (u0 - 0.5);
                    a.rx = self.rx_base * (0.3 + u1);
                    a.tx = self.rx_base * 0.2 * u2;
                }
            }
        }
        a.util = a.util.clamp(0.0, 100.0);
        a
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::source::sim::hardware::H100;

    fn mean_util(work: &Work, from: i64, to: i64, step: i64, cal: &Calendar) -> f32 {
        let n = ((to - from) / step) as f32;
        (from..to).step_by(step as usize).map(|t| work.activity(t, 0, 11, cal).util).sum::<f32>() / n
    }

    #[test]
    fn personas_keep_to_their_levels() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let office = Calendar { office: true, demand: 0.9 };
        let night = Calendar { office: false, demand: 0.06 };
        let mut saw_starved = false;
        for _ in 0..40 {
            let w = Work::new(Kind::Training, &mut rng, &H100, false);
            // After warm-up, over many hours: checkpoints and stalls cost a few percent.
            let mean = mean_util(&w, 3_600_000, 30 * 3_600_000, 7_000, &office);
            if w.starved {
                saw_starved = true;
                assert!((10.0..50.0).contains(&mean), "starved training at {mean}");
            } else {
                assert!(mean > 70.0, "training at {mean}");
            }
            assert!(mean_util(&w, 0, 60_000, 1_000, &office) < 20.0, "a run warms up");
        }
        assert!(saw_starved);
        for _ in 0..20 {
            let w = Work::new(Kind::Inference, &mut rng, &H100, false);
            let day = mean_util(&w, 0, 3_600_000, 5_000, &office);
            let quiet = mean_util(&w, 0, 3_600_000, 5_000, &night);
            assert!(day > 30.0 && quiet < 8.0, "inference {day} by day, {quiet} at night");
        }
        for _ in 0..20 {
            let w = Work::new(Kind::Notebook, &mut rng, &H100, false);
            assert!(mean_util(&w, 0, 86_400_000, 11_000, &night) < 1.0);
            assert!(mean_util(&w, 0, 86_400_000, 11_000, &office) < 12.0);
        }
        let mut z = Work::new(Kind::Training, &mut rng, &H100, false);
        z.kind = Kind::Zombie;
        assert_eq!(mean_util(&z, 0, 3_600_000, 1_000, &office), 0.0);
    }

    #[test]
    fn durations_and_memory_stay_in_bounds() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for kind in [Kind::Training, Kind::Inference, Kind::Notebook, Kind::Debug, Kind::Zombie] {
            for _ in 0..200 {
                let d = duration_ms(kind, &mut rng);
                assert!((3 * 60_000..=21 * 86_400_000).contains(&d), "{kind:?} {d}");
                let m = memory_bytes(kind, &mut rng, H100.fb_total_bytes);
                assert!(m >= 1 << 30 && m < H100.fb_total_bytes, "{kind:?} {m}");
            }
        }
    }
}
