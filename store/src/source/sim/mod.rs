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
//! MIG: the fleet's third host (`gpu-node03`, H100) is the shared box whose
//! GPUs 0–3 are in MIG mode, each laid out differently: GPU 0 as seven
//! 1g.10gb, GPU 1 as 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb, GPU 2 as
//! 4g.40gb + 3g.40gb, GPU 3 as two 3g.40gb with its seventh slice in no
//! instance (idle capacity); GPUs 4–7 are whole (`hardware`). Each instance
//! is a slot of the workload of its own, used for what MIG is for:
//! notebooks, inference servers, debug runs and small single-instance
//! training; no multi-GPU job spans instances or takes a partitioned GPU
//! (`schedule`). Each tick, such a GPU gives its own row (the board's power,
//! energy, temperature, clocks and PCIe, following its instances' work
//! weighted by their slices; no utilization or activity) and a row per
//! instance (`MIG-…` UUID, profile, slices, memory and GPM activity), its
//! processes' rows on the instances (`sensor`). Each tick also lists the
//! cluster's allocations (`Tick::allocations`): the pod or Slurm job of
//! each GPU's or instance's live processes, and notebook pods that keep a
//! GPU allocated after their kernel ended (`schedule`). Hosts built alone
//! ([`SimHost::new`]) are whole GPUs only.
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
//! rest (the ignored test `sample_speed`: `cargo test -p apron-store
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
use hardware::{GpuModel, MigLayout};
use schedule::Schedule;
use sensor::{At, Instance, Load, Partition, Sensor};

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
        let (model, layout) = (hardware::for_fleet_host(n), hardware::mig_layout_for_fleet_host(n));
        SimHost::build(&name, model, layout, slurm_base, count, seed, start_ms)
    }

    /// The fleet's hosts, each a [`Source`].
    pub fn into_hosts(self) -> Vec<SimHost> {
        self.hosts
    }
}

/// One simulated host: its GPUs, their MIG instances, and the processes on
/// them.
#[derive(Debug)]
pub struct SimHost {
    host: String,
    model: &'static GpuModel,
    schedule: Schedule,
    /// One per GPU, by index.
    sensors: Vec<Sensor>,
    /// Where each GPU's work is, by index.
    parts: Vec<Part>,
    /// The MIG instances of the partitioned GPUs, by GPU and then place.
    instances: Vec<Instance>,
    /// The workload slot of each instance.
    instance_slots: Vec<usize>,
    /// The GPUs and instances in `gpu_uuid` order, the order of a file's rows.
    by_uuid: Vec<Unit>,
    clock: Clock,
}

/// Where one GPU's work is in the host's workload.
#[derive(Debug, Clone)]
enum Part {
    /// A whole GPU: one workload slot.
    Whole(usize),
    /// A GPU in MIG mode: these entries of [`SimHost::instances`].
    Partitioned(std::ops::Range<usize>),
}

/// What has a row of its own each tick.
#[derive(Debug, Clone, Copy)]
enum Unit {
    /// GPU `n` (its index), whole or partitioned.
    Gpu(usize),
    /// Entry `n` of [`SimHost::instances`].
    Instance(usize),
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
        SimHost::build(host, hardware::for_hash(hash), &[], slurm_base, gpus, seed, start_ms)
    }

    /// The host of `gpus` GPUs of `model`, those with instances in
    /// `layout` in MIG mode.
    fn build(
        host: &str,
        model: &'static GpuModel,
        layout: MigLayout,
        slurm_base: u64,
        gpus: usize,
        seed: u64,
        start_ms: i64,
    ) -> SimHost {
        let host_seed = noise::mix(seed ^ noise::fnv(host));
        let mut rng = ChaCha8Rng::seed_from_u64(host_seed);
        let uuids: Vec<String> = (0..gpus).map(|i| hardware::uuid(seed, host, i)).collect();
        let mut by_uuid: Vec<(String, Unit)> =
            uuids.iter().enumerate().map(|(i, uuid)| (uuid.clone(), Unit::Gpu(i))).collect();
        let sensors: Vec<Sensor> =
            uuids.into_iter().enumerate().map(|(i, uuid)| Sensor::new(uuid, i, model, &mut rng)).collect();
        // The workload's slots, GPU by GPU: one for a whole GPU, one per
        // instance of a partitioned one.
        let (mut slots, mut parts, mut instances, mut instance_slots) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (i, sensor) in sensors.iter().enumerate() {
            let profiles = layout.get(i).copied().unwrap_or_default();
            if profiles.is_empty() {
                parts.push(Part::Whole(slots.len()));
                slots.push(None);
                continue;
            }
            let first = instances.len();
            for (k, &profile) in profiles.iter().enumerate() {
                let uuid = hardware::mig_uuid(seed, host, i, k);
                by_uuid.push((uuid.clone(), Unit::Instance(instances.len())));
                instances.push(Instance::new(uuid, sensor, profile, &mut rng));
                instance_slots.push(slots.len());
                slots.push(Some(profile));
            }
            parts.push(Part::Partitioned(first..instances.len()));
        }
        by_uuid.sort_by(|a, b| a.0.cmp(&b.0));
        let by_uuid = by_uuid.into_iter().map(|(_, unit)| unit).collect();
        let mut schedule = Schedule::new(
            noise::mix(host_seed ^ 0x5C4E_D01E),
            model,
            &slots,
            slurm_base,
            start_ms - schedule::PREROLL_MS,
        );
        schedule.advance(start_ms);
        let clock = Clock { last_ts: None, lag: (0, 0.0) };
        SimHost {
            host: host.to_owned(),
            model,
            schedule,
            sensors,
            parts,
            instances,
            instance_slots,
            by_uuid,
            clock,
        }
    }

    /// Samples GPU `g` (whole or partitioned; not its instances) at `at`
    /// into `out`, from the workload `slots`.
    fn sample_gpu(&mut self, g: usize, slots: &mut [schedule::Slot], at: &At, out: &mut Tick) {
        match &self.parts[g] {
            Part::Whole(slot) => self.sensors[g].sample(self.model, &mut slots[*slot].procs, at, out),
            Part::Partitioned(range) => {
                let mut sum = Partition::default();
                for k in range.clone() {
                    let procs = &mut slots[self.instance_slots[k]].procs;
                    sum.add(&self.instances[k], &Load::of(procs, at), procs.len());
                }
                self.sensors[g].sample_partitioned(self.model, &sum, at, out);
            }
        }
    }

    /// The NVML name of this host's GPU model (`NVIDIA H100 80GB HBM3`).
    pub fn gpu_model(&self) -> &str {
        self.model.name
    }

    /// Samples the ticks `ticks` (increasing times, each standing for
    /// `interval_ms`) GPU by GPU instead of tick by tick: for each GPU and
    /// MIG instance in `gpu_uuid` order (the instances' `MIG-…` after every
    /// `GPU-…`), and for each tick in turn, hands `emit` a tick holding that
    /// GPU's or instance's row and its processes' rows, and clears it when
    /// `emit` returns. So a file's rows come in the file's order and only
    /// one tick of one GPU is ever held.
    ///
    /// The rows are exactly those [`Source::sample`] at each of `ticks`
    /// would give, and afterwards the host is where those calls would have
    /// left it: GPUs share only the workload, whose future does not depend
    /// on the sampling, so each GPU replays a copy of it (a partitioned
    /// GPU's row works out its instances' load again: a pure function of
    /// the workload and the time). When `emit` fails,
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
        for u in 0..self.by_uuid.len() {
            let unit = self.by_uuid[u];
            let mut schedule = self.schedule.clone();
            let mut clock = self.clock;
            for ts in ticks.clone() {
                schedule.advance(ts);
                let at = clock.step(ts, interval_ms);
                tick.clear();
                match unit {
                    Unit::Gpu(g) => {
                        self.sample_gpu(g, &mut schedule.gpus, &at, &mut tick);
                        if let Part::Whole(slot) = self.parts[g] {
                            let (uuid, index) = self.sensors[g].id();
                            schedule.gpus[slot].allocations(
                                ts,
                                interval_ms,
                                uuid,
                                index,
                                &mut tick.allocations,
                            );
                        }
                    }
                    Unit::Instance(k) => {
                        let slot = &mut schedule.gpus[self.instance_slots[k]];
                        self.instances[k].sample(self.model, &mut slot.procs, &at, &mut tick);
                        let (uuid, index) = self.instances[k].id();
                        slot.allocations(ts, interval_ms, uuid, index, &mut tick.allocations);
                    }
                }
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

    /// Each GPU's row by index; a partitioned GPU's own row is followed by
    /// its instances' rows.
    fn sample(&mut self, ts_ms: i64, interval_ms: i32, out: &mut Tick) {
        self.schedule.advance(ts_ms);
        let at = self.clock.step(ts_ms, interval_ms);
        out.gpus.reserve(self.sensors.len() + self.instances.len());
        for (g, sensor) in self.sensors.iter_mut().enumerate() {
            match &self.parts[g] {
                Part::Whole(slot) => {
                    let slot = &mut self.schedule.gpus[*slot];
                    sensor.sample(self.model, &mut slot.procs, &at, out);
                    let (uuid, index) = sensor.id();
                    slot.allocations(ts_ms, interval_ms, uuid, index, &mut out.allocations);
                }
                Part::Partitioned(range) => {
                    // The instances first: the GPU's row sums their loads,
                    // and then goes before them.
                    let first = out.gpus.len();
                    let mut sum = Partition::default();
                    for k in range.clone() {
                        let slot = &mut self.schedule.gpus[self.instance_slots[k]];
                        let load = self.instances[k].sample(self.model, &mut slot.procs, &at, out);
                        sum.add(&self.instances[k], &load, slot.procs.len());
                        let (uuid, index) = self.instances[k].id();
                        slot.allocations(ts_ms, interval_ms, uuid, index, &mut out.allocations);
                    }
                    sensor.sample_partitioned(self.model, &sum, &at, out);
                    out.gpus[first..].rotate_right(1);
                }
            }
        }
    }
}
