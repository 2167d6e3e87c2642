//! The simulated fleet: a seeded, deterministic stand-in for NVML that the
//! demo, the tests and `simulate` record from.
//!
//! A [`SimFleet`] is hosts of eight GPUs (`gpu-node01`, `gpu-node02`, …; the
//! last may have fewer), one GPU model per host (H100, A100 or L40S, as NVML
//! names them). On them six teams ([`teams`]) run training jobs (single GPU
//! or DDP across several), inference servers that follow the day, notebooks
//! that hold memory and sit idle for days, short debug runs; dead jobs leave
//! zombies; some GPUs sit empty, more at night and at weekends. The
//! personas and their parameters are in `workload`, the arrival of work in
//! `schedule`, the sensor physics in `sensor`.
//!
//! Determinism: the same `(gpus, seed, start_ms)` and the same sequence of
//! tick times give identical rows. The schedule depends only on the seed and
//! the start (events are handled in time order, whatever ticks are asked
//! for); per-tick noise is a hash of a key and the tick time. Only the
//! temperature (a lag) and the energy counter (an integral) depend on the
//! earlier ticks. Time comes from `ts_ms` alone; the clock is never read.
//! Ticks are expected in increasing time; a tick earlier than the last one
//! sees the workload as it was at the last one.
//!
//! Speed: in a release build a GPU row with its process rows (half to
//! three quarters of a process row per GPU row) costs 0.2–0.3 µs, of which
//! the simulation is about a fifth and allocating the rows' `String`s the
//! rest (the ignored test `sample_speed`: `cargo test -p apron-recorder
//! --release --lib -- --ignored --nocapture sample_speed`).

mod calendar;
mod hardware;
mod noise;
mod org;
mod schedule;
mod sensor;
mod workload;

#[cfg(test)]
mod tests;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub use org::{SimTeam, SimUser, teams};

use super::{Source, Tick};
use hardware::GpuModel;
use schedule::Schedule;
use sensor::{At, Sensor};

/// GPUs per simulated host.
pub const GPUS_PER_HOST: usize = 8;

/// Slurm job ids of the n-th host start at `SLURM_BASE + n * SLURM_STRIDE`,
/// so hosts of one fleet do not share ids.
const SLURM_BASE: u64 = 400_000;
const SLURM_STRIDE: u64 = 50_000;

/// A simulated fleet: hosts of simulated GPUs.
#[derive(Debug)]
pub struct SimFleet {
    hosts: Vec<SimHost>,
}

impl SimFleet {
    /// A fleet of `gpus` GPUs spread over hosts of eight (`gpu-node01`, …),
    /// seeded by `seed`, whose simulated history starts at `start_ms`
    /// (milliseconds since the Unix epoch).
    pub fn new(gpus: usize, seed: u64, start_ms: i64) -> SimFleet {
        let hosts =
            (0..SimFleet::host_count(gpus)).map(|n| SimFleet::host(gpus, seed, start_ms, n)).collect();
        SimFleet { hosts }
    }

    /// How many hosts a fleet of `gpus` GPUs has.
    pub fn host_count(gpus: usize) -> usize {
        gpus.div_ceil(GPUS_PER_HOST)
    }

    /// Host `n` (from 0, below [`SimFleet::host_count`]) of the fleet
    /// [`SimFleet::new`] builds with the same arguments, built alone: a
    /// worker builds the host it simulates next, so only the hosts in flight
    /// are in memory.
    pub fn host(gpus: usize, seed: u64, start_ms: i64, n: usize) -> SimHost {
        let name = format!("gpu-node{:02}", n + 1);
        let count = gpus.saturating_sub(n * GPUS_PER_HOST).min(GPUS_PER_HOST);
        let slurm_base = SLURM_BASE + n as u64 * SLURM_STRIDE;
        SimHost::build(&name, hardware::for_fleet_host(n), slurm_base, count, seed, start_ms)
    }

    /// The fleet's hosts, each a [`Source`].
    pub fn into_hosts(self) -> Vec<SimHost> {
        self.hosts
    }
}

/// One simulated host: its GPUs and the processes on them.
#[derive(Debug)]
pub struct SimHost {
    host: String,
    model: &'static GpuModel,
    schedule: Schedule,
    sensors: Vec<Sensor>,
    /// The sensors' indices in `gpu_uuid` order, the order of a file's rows.
    by_uuid: Vec<usize>,
    clock: Clock,
}

/// What every GPU of a host shares from one tick to the next: the time
/// step and the temperature lag's step for it.
#[derive(Debug, Clone, Copy)]
struct Clock {
    /// The previous tick's time.
    last_ts: Option<i64>,
    /// The temperature lag's step for the last time step seen: (dt, alpha).
    lag: (i64, f32),
}

impl Clock {
    /// Moves to the tick at `ts_ms` standing for `interval_ms`.
    fn step(&mut self, ts_ms: i64, interval_ms: i32) -> At {
        let dt_ms = match self.last_ts {
            Some(last) if ts_ms > last => ts_ms - last,
            _ => i64::from(interval_ms.max(0)),
        };
        self.last_ts = Some(ts_ms);
        if self.lag.0 != dt_ms {
            self.lag = (dt_ms, 1.0 - (-(dt_ms as f32) / sensor::THERMAL_TAU_MS).exp());
        }
        At { ts: ts_ms, interval_ms, dt_ms, alpha: self.lag.1, cal: calendar::Calendar::at(ts_ms) }
    }
}

impl SimHost {
    /// A single simulated host named `host` with `gpus` GPUs, seeded by
    /// `seed`, whose history starts at `start_ms`; its GPU model is picked
    /// from the seed and the name.
    pub fn new(host: &str, gpus: usize, seed: u64, start_ms: i64) -> SimHost {
        let hash = noise::mix(seed ^ noise::fnv(host));
        let slurm_base = SLURM_BASE + (hash >> 32) % 40 * SLURM_STRIDE;
        SimHost::build(host, hardware::for_hash(hash), slurm_base, gpus, seed, start_ms)
    }

    fn build(
        host: &str,
        model: &'static GpuModel,
        slurm_base: u64,
        gpus: usize,
        seed: u64,
        start_ms: i64,
    ) -> SimHost {
        let host_seed = noise::mix(seed ^ noise::fnv(host));
        let mut rng = ChaCha8Rng::seed_from_u64(host_seed);
        let uuids: Vec<String> = (0..gpus).map(|i| hardware::uuid(seed, host, i)).collect();
        let mut by_uuid: Vec<usize> = (0..gpus).collect();
        by_uuid.sort_by(|&a, &b| uuids[a].cmp(&uuids[b]));
        let sensors: Vec<Sensor> =
            uuids.into_iter().enumerate().map(|(i, uuid)| Sensor::new(uuid, i, model, &mut rng)).collect();
        let mut schedule = Schedule::new(
            noise::mix(host_seed ^ 0x5C4E_D01E),
            model,
            gpus,
            slurm_base,
            start_ms - schedule::PREROLL_MS,
        );
        schedule.advance(start_ms);
        let clock = Clock { last_ts: None, lag: (0, 0.0) };
        SimHost { host: host.to_owned(), model, schedule, sensors, by_uuid, clock }
    }

    /// The NVML name of this host's GPU model (`NVIDIA H100 80GB HBM3`).
    pub fn gpu_model(&self) -> &str {
        self.model.name
    }

    /// Samples the ticks `ticks` (increasing times, each standing for
    /// `interval_ms`) GPU by GPU instead of tick by tick: for each GPU in
    /// `gpu_uuid` order, and for each tick in turn, hands `emit` a tick
    /// holding that GPU's row and its processes' rows, and clears it when
    /// `emit` returns. So a file's rows come in the file's order and only
    /// one tick of one GPU is ever held.
    ///
    /// The rows are exactly those [`Source::sample`] at each of `ticks`
    /// would give, and afterwards the host is where those calls would have
    /// left it: GPUs share only the workload, whose future does not depend
    /// on the sampling, so each GPU replays a copy of it. When `emit` fails,
    /// its error is returned at once, and the host is left part-way
    /// (sample it no more).
    pub fn sample_by_gpu<E>(
        &mut self,
        ticks: impl Iterator<Item = i64> + Clone,
        interval_ms: i32,
        mut emit: impl FnMut(&mut Tick) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut tick = Tick::default();
        let mut end = None;
        for &g in &self.by_uuid {
            let mut schedule = self.schedule.clone();
            let mut clock = self.clock;
            for ts in ticks.clone() {
                schedule.advance(ts);
                let at = clock.step(ts, interval_ms);
                tick.clear();
                self.sensors[g].sample(self.model, &mut schedule.gpus[g].procs, &at, &mut tick);
                emit(&mut tick)?;
            }
            end = Some((schedule, clock));
        }
        match end {
            Some((schedule, clock)) => (self.schedule, self.clock) = (schedule, clock),
            // No GPU: the workload and the clock still move on.
            None => {
                for ts in ticks {
                    self.schedule.advance(ts);
                    self.clock.step(ts, interval_ms);
                }
            }
        }
        Ok(())
    }
}

impl Source for SimHost {
    fn host(&self) -> &str {
        &self.host
    }

    fn sample(&mut self, ts_ms: i64, interval_ms: i32, out: &mut Tick) {
        self.schedule.advance(ts_ms);
        let at = self.clock.step(ts_ms, interval_ms);
        out.gpus.reserve(self.sensors.len());
        for (sensor, slot) in self.sensors.iter_mut().zip(self.schedule.gpus.iter_mut()) {
            sensor.sample(self.model, &mut slot.procs, &at, out);
        }
    }
}
