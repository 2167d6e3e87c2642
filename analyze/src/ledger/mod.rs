//! The ledger of a period: every GPU-minute's state and cost, attributed to
//! its processes, computed in one pass over the rollups a day at a time,
//! and kept only as what the reports need of it: `cost_buckets` (the costs
//! summed per bucket, GPU, state and owner: [`cost_buckets`]), the energy not
//! measured, and the reclaim and zombie stretches ([`stretch_finder`]).
//!
//! The definitions are the SQL views' (`queries/gpu_minute_states.sql`,
//! `proc_minute_states.sql`, `minute_costs.sql`, `zombies.sql`,
//! `reclaim.sql`), which `apron sql` still serves; the ledger computes the
//! same figures without the joins and windows that make those views grow
//! with the fleet in time and memory (`ledger/tests.rs` holds the two to
//! the same numbers). A day of the fleet is in memory at a time, and
//! what is kept grows with GPUs × buckets, not with minutes.

// Every public item of the ledger says what it is and its unit (and which
// column or SQL expression it follows, where it is one).
#![deny(missing_docs)]

use map::HashMap;

use apron_schemas::Table;
use std::collections::BTreeSet;

use apron_schemas::time::{DAY_MS, HOUR_MINUTES, HOUR_SECS, MINUTE_MS};

use crate::config::{Config, gpu_cost_for};
use crate::config::{avoidable_rate_per_second, rate_per_second};
use crate::error::{Error, SessionError};
use crate::report::period::Period;
use crate::session::Session;

pub mod cost_buckets;
pub mod cost_buckets_file;
pub mod coverage;
pub mod downtime;
pub mod jobs;
pub mod map;
pub mod minutes;
pub mod read;
pub mod stretch_finder;
pub mod stretches;

pub use coverage::LedgerCoverage;
pub use stretch_finder::Rules;

use coverage::CoverageRow;

use cost_buckets::{CostBuckets, Key, Sums};
use cost_buckets_file::{CostBucketsFile, CostBucketsTable};
use minutes::{State, Teams, alloc_shares, shares};
use read::Names;
use stretch_finder::{Freed, Stretch};
use stretches::{ReclaimRow, Unpartitioned, ZombieRow};

/// The owner of a minute no process holds, in team and user.
const UNALLOCATED: &str = "(unallocated)";

/// Rows per batch of `cost_buckets`.
const BATCH_ROWS: usize = 64 * 1024;

/// What the reports need of a period's GPU-minutes.
#[derive(Debug)]
pub struct Ledger {
    /// `cost_buckets`' rows, in a file.
    pub buckets: CostBucketsTable,
    /// Seconds of GPU time with neither energy nor power known.
    pub energy_unknown_seconds: f64,
    /// The rules the stretches below were found with.
    pub rules: Rules,
    /// Reclaim stretches, longest first (as `queries/reclaim.sql` orders them).
    pub reclaim: Vec<ReclaimRow>,
    /// What the reclaim stretches add up to.
    pub reclaim_sum: ReclaimSum,
    /// Each partitioned GPU's slices no MIG instance held, by host and
    /// index: not reclaim stretches, listed apart.
    pub unpartitioned: Vec<Unpartitioned>,
    /// Stretches of processes holding memory on idle GPUs, most
    /// memory-minutes first: the zombies of `queries/zombies.sql` and the
    /// data-starved of `queries/starved.sql` together, each with its GPU's
    /// PCIe traffic, by which `crate::report::figures::zombies` tells them apart.
    pub zombies: Vec<ZombieRow>,
    /// What reclaiming each GPU once idle `reclaim_min_minutes` in a row
    /// would have freed, per team whose share it was (only teams with
    /// something freed), most money first.
    pub reclaimed: Vec<Reclaimed>,
    /// What ending each of [`Ledger::zombies`] (in its order) once it had
    /// held memory on its idle GPU `zombie_min_minutes` would have freed.
    pub zombie_freed: Vec<ZombieFreed>,
    /// What reclaiming GPUs by the rule would have freed, per GPU and hour
    /// of the week (0 = Monday 00:00 UTC), summed over the period: to tell
    /// how much of an idle window's cost reclaiming frees already.
    pub reclaimed_at: Vec<FreedAt>,
    /// What the rollups hold in the period; `None` when they hold nothing.
    pub coverage: Option<LedgerCoverage>,
    /// The stretches faults took GPUs out of service, by GPU then time
    /// ([`downtime`]).
    pub downtime: Vec<downtime::DownStretch>,
    /// Every job's GPU time, the costliest idle first ([`jobs`]).
    pub jobs: Vec<jobs::JobRow>,
}

/// What reclaiming GPUs by the rule would have freed of one team's GPU
/// time ([`Ledger::reclaimed`]): GPU-hours (a MIG instance's by its share of
/// its GPU), their exact cost, and of it the cash not spent (energy, and
/// operating cost where the config marks it avoidable).
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaimed {
    /// The team (`minute_costs.team`).
    pub team: String,
    /// GPU-hours freed.
    pub gpu_hours: f64,
    /// Their exact cost (currency).
    pub cost: f64,
    /// Of `cost`, the energy's part (currency).
    pub energy_cost: f64,
    /// Of `cost`, the avoidable operating cost's part (currency; 0 where the config does not mark it
    /// avoidable).
    pub ops_cost: f64,
}

/// What ending one zombie stretch by the rule would have freed
/// ([`Ledger::zombie_freed`]): its share of the minutes past the rule, and
/// of those the ones reclaiming its GPU would not have freed anyway; each
/// as (GPU-hours, exact cost). Of the latter also the cash not spent
/// (energy, avoidable operating cost) and the cost by hour of the week.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZombieFreed {
    /// Its share of the minutes past the rule: (GPU-hours, exact cost in currency).
    pub freed: (f64, f64),
    /// Of `freed`, what reclaiming its GPU would not have freed anyway: (GPU-hours, exact cost in currency).
    pub alone: (f64, f64),
    /// (energy, avoidable operating cost) of `alone`.
    pub alone_cash: (f64, f64),
    /// `alone`'s cost by hour of the week (0 = Monday 00:00 UTC), hours
    /// with none left out.
    pub alone_at: Vec<(usize, f64)>,
}

/// Cost freed on one GPU in one hour of the week, summed over a period.
#[derive(Debug, Clone, PartialEq)]
pub struct FreedAt {
    /// The GPU's UUID (`gpu_uuid`).
    pub gpu_uuid: String,
    /// 0 = Monday 00:00–01:00 UTC, 167 = Sunday 23:00.
    pub hour_of_week: usize,
    /// Cost freed (currency).
    pub cost: f64,
}

/// What the reclaim stretches add up to, each GPU-minute counted by its
/// capacity share, so that an idle `1g.10gb` MIG instance's hour is 1/7
/// of a GPU-hour, as its cost is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReclaimSum {
    /// GPU-hours.
    pub gpu_hours: f64,
    /// Whole or partitioned GPUs with a stretch.
    pub gpus: usize,
    /// MIG instances with a stretch.
    pub instances: usize,
}

impl ReclaimSum {
    fn of<T>(stretches: &[(u32, Stretch<T>)]) -> ReclaimSum {
        let gpu_minutes: f64 = stretches.iter().map(|(_, s)| s.gpu_minutes).sum();
        let count = |instance: bool| {
            let units: BTreeSet<u32> =
                stretches.iter().filter(|(_, s)| s.instance == instance).map(|(gpu, _)| *gpu).collect();
            units.len()
        };
        ReclaimSum {
            gpu_hours: gpu_minutes / HOUR_MINUTES as f64,
            gpus: count(false),
            instances: count(true),
        }
    }
}

impl Ledger {
    /// The ledger of `period` under `config`, its costs summed per bucket of
    /// `bucket_ms` (a whole number of minutes dividing an hour or a day),
    /// its stretches found by `rules`.
    pub async fn compute(
        session: &Session,
        config: &Config,
        period: &Period,
        bucket_ms: i64,
        rules: Rules,
    ) -> Result<Ledger, Error> {
        Self::compute_sliced(session, config, period, bucket_ms, rules, HOSTS_PER_SLICE).await
    }

    /// [`Ledger::compute`], reading `hosts_per_slice` hosts' day at a time.
    pub async fn compute_sliced(
        session: &Session,
        config: &Config,
        period: &Period,
        bucket_ms: i64,
        rules: Rules,
        hosts_per_slice: usize,
    ) -> Result<Ledger, Error> {
        let slices = slices(session, period, hosts_per_slice.max(1)).await;
        Self::compute_slices(session, config, period, bucket_ms, rules, slices).await
    }

    /// [`Ledger::compute`] over `hosts` only (a host a slice of its own):
    /// what `apron events` needs of the hosts whose GPUs faulted.
    pub async fn compute_hosts(
        session: &Session,
        config: &Config,
        period: &Period,
        bucket_ms: i64,
        rules: Rules,
        hosts: &BTreeSet<String>,
    ) -> Result<Ledger, Error> {
        let mut slices = Vec::new();
        let mut day_start = period.start_ms.div_euclid(DAY_MS) * DAY_MS;
        while day_start < period.end_ms {
            let (start_ms, end_ms) = (period.start_ms.max(day_start), period.end_ms.min(day_start + DAY_MS));
            let date = i32::try_from(day_start / DAY_MS).unwrap_or(i32::MAX);
            for host in hosts {
                slices.push(read::Slice { start_ms, end_ms, date, hosts: read::Hosts::one(host) });
            }
            day_start += DAY_MS;
        }
        Self::compute_slices(session, config, period, bucket_ms, rules, slices).await
    }

    /// The ledger of `period` read in `slices`, in order.
    async fn compute_slices(
        session: &Session,
        config: &Config,
        period: &Period,
        bucket_ms: i64,
        rules: Rules,
        slices: Vec<read::Slice>,
    ) -> Result<Ledger, Error> {
        let bucket_ms = bucket_ms.max(MINUTE_MS);
        let faults = downtime::down_faults(session, period.start_ms, period.end_ms).await?;
        // Stretches still open end at the period's end, now, or the data's end (see finish).
        let end_ms = period.end_ms.min(chrono::Utc::now().timestamp_millis());
        let mut pass = Some(Pass::new(config.clone(), bucket_ms, rules, faults, end_ms)?);
        // Each day is read (by the engine's workers) while the day before is
        // worked through (on a blocking thread): the two overlap.
        let mut working: Option<tokio::task::JoinHandle<Result<Pass, Error>>> = None;
        let began = std::time::Instant::now();
        let (mut reading, mut waiting) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        for slice in slices {
            let read_at = std::time::Instant::now();
            let day = read::day(session, &slice).await?;
            reading += read_at.elapsed();
            let wait_at = std::time::Instant::now();
            if let Some(done) = working.take() {
                pass = Some(joined(done.await)?);
            }
            waiting += wait_at.elapsed();
            if let Some(mut this) = pass.take() {
                working = Some(tokio::task::spawn_blocking(move || {
                    this.day(&day)?;
                    Ok(this)
                }));
            }
        }
        if let Some(done) = working.take() {
            pass = Some(joined(done.await)?);
        }
        tracing::debug!(?reading, ?waiting, elapsed = ?began.elapsed(), "read and worked through the period's days");
        match pass {
            Some(pass) => pass.finish(),
            None => unreachable!("the pass comes back from each day's work"),
        }
    }

    /// Registers `cost_buckets` with `session`, replacing any before.
    pub fn register(&self, session: &Session) -> Result<(), Error> {
        let ctx = session.context();
        let table = self.buckets.provider(ctx).map_err(|source| SessionError::Execute { source })?;
        ctx.deregister_table("cost_buckets").map_err(|source| SessionError::Execute { source })?;
        ctx.register_table("cost_buckets", table).map_err(|source| SessionError::Execute { source })?;
        Ok(())
    }
}

/// Hosts read at once: about 128 GPUs' day in memory, whatever the fleet.
const HOSTS_PER_SLICE: usize = 8;

/// The slices the period is read in: day by day, and each day by
/// `hosts_per_slice` hosts. Each slice names its hosts (every host with a
/// folder that day in any table, or rows in the write-ahead log), so that
/// each host's folder of the day is listed once in all. A day one slice
/// reads whole is read as one range of host names instead: its one listing
/// of the day is all the slice needs, and planning a branch per named host
/// cost more (64 GPUs, a month: 12% of `spend`'s CPU). A day with a host
/// name the engine may read differently from its folder's (one that is not
/// a name the recorder writes, e.g. percent-encoded by another tool), and
/// every day of a bucket (where a listing per host costs a request), is
/// read in ranges too.
async fn slices(session: &Session, period: &Period, hosts_per_slice: usize) -> Vec<read::Slice> {
    let mut out = Vec::new();
    let mut day_start = period.start_ms.div_euclid(DAY_MS) * DAY_MS;
    while day_start < period.end_ms {
        let (start_ms, end_ms) = (period.start_ms.max(day_start), period.end_ms.min(day_start + DAY_MS));
        let date = i32::try_from(day_start / DAY_MS).unwrap_or(i32::MAX);
        let day = chrono::DateTime::from_timestamp_millis(day_start).map(|d| d.date_naive());
        let named = match day {
            Some(day) => session.hosts_of_day(day).await,
            None => Some(Vec::new()),
        };
        let per_day: Vec<read::Hosts> = match named {
            // A day with no host still has its (empty) slice, as every day is worked through.
            Some(hosts) if hosts.is_empty() => vec![read::Hosts::Named(Vec::new())],
            Some(hosts) if hosts.len() <= hosts_per_slice => host_ranges(&hosts, hosts_per_slice),
            Some(hosts) if read::Hosts::all_nameable(&hosts) => {
                hosts.chunks(hosts_per_slice).map(|chunk| read::Hosts::Named(chunk.to_vec())).collect()
            }
            _ => {
                let hosts = match day {
                    Some(d) => session.hosts_on(Table::GpuMinutes, d).await,
                    None => Vec::new(),
                };
                host_ranges(&hosts, hosts_per_slice)
            }
        };
        out.extend(per_day.into_iter().map(|hosts| read::Slice { start_ms, end_ms, date, hosts }));
        day_start += DAY_MS;
    }
    out
}

/// Ranges of host names that together cover every name, each holding
/// `per_slice` of `hosts` (sorted), the first from the empty name, the last
/// to the greatest.
fn host_ranges(hosts: &[String], per_slice: usize) -> Vec<read::Hosts> {
    let mut cuts: Vec<String> = vec![String::new()];
    cuts.extend(hosts.iter().step_by(per_slice.max(1)).skip(1).cloned());
    cuts.push(char::MAX.to_string());
    cuts.windows(2).map(|pair| read::Hosts::Range(pair[0].clone(), pair[1].clone())).collect()
}

/// The result of a day's work on a blocking thread.
fn joined(done: Result<Result<Pass, Error>, tokio::task::JoinError>) -> Result<Pass, Error> {
    done.map_err(|e| SessionError::Execute {
        source: datafusion::error::DataFusionError::External(Box::new(e)),
    })?
}

/// A day's rows and minutes, kept from one day to the next so their memory
/// is not asked for again each day.
#[derive(Debug, Default)]
struct Buffers {
    gpu_parts: Vec<read::GpuPart>,
    proc_parts: Vec<read::ProcPart>,
    alloc_parts: Vec<read::AllocPart>,
    gpus: Vec<minutes::GpuMinuteState>,
    procs: Vec<minutes::ProcMinuteState>,
    allocs: Vec<minutes::AllocMinuteState>,
}

/// The pass over the days, with what it carries from one day to the next.
struct Pass {
    buffers: Buffers,
    coverage: coverage::CoverageTally,
    config: Config,
    bucket_ms: i64,
    names: Names,
    teams: Teams,
    /// Per GPU model: what a second costs besides energy, and of that what
    /// is avoidable.
    rates: HashMap<Option<u32>, (f64, f64)>,
    unallocated: u32,
    cost_buckets: CostBuckets,
    /// Where `cost_buckets`'s rows go after each slice.
    file: CostBucketsFile,
    stretch_finder: stretch_finder::StretchFinder,
    energy_unknown_seconds: f64,
    /// What reclaiming GPUs after the reclaim rule would have freed, by team.
    reclaimed: HashMap<u32, Freed>,
    /// The same by GPU and hour of the week: cost.
    reclaimed_at: HashMap<(u32, usize), f64>,
    /// Each partitioned GPU's unheld slices: host, index, GPU time and cost.
    unpartitioned: HashMap<u32, (u32, i32, Freed)>,
    /// The faults that take GPUs down, followed minute by minute.
    downtime: downtime::Downtime,
    /// Where stretches still open end.
    end_ms: i64,
    /// Each job's share of the minutes.
    jobs: jobs::Jobs,
    /// Where the pass's time goes, for `APRON_LOG=debug`.
    timings: Timings,
}

/// Time spent in each step of the pass over the days.
#[derive(Debug, Default)]
struct Timings {
    /// Making the engine's rows into parts, and noting what they cover.
    parts: std::time::Duration,
    /// Summing the parts into GPU- and process-minutes.
    minutes: std::time::Duration,
    /// Pricing, attributing, following the stretches.
    attributing: std::time::Duration,
    /// Writing `cost_buckets`.
    writing: std::time::Duration,
}

impl Pass {
    fn new(
        config: Config,
        bucket_ms: i64,
        rules: Rules,
        faults: Vec<downtime::Fault>,
        end_ms: i64,
    ) -> Result<Self, Error> {
        let mut names = Names::default();
        let unallocated = names.id(UNALLOCATED);
        let jobs = jobs::Jobs::new(faults.clone(), &mut names);
        let downtime = downtime::Downtime::new(faults, &mut names);
        Ok(Pass {
            buffers: Buffers::default(),
            coverage: coverage::CoverageTally::default(),
            config,
            bucket_ms,
            names,
            teams: Teams::default(),
            rates: HashMap::default(),
            unallocated,
            cost_buckets: CostBuckets::default(),
            file: CostBucketsFile::create(CostBuckets::schema())?,
            stretch_finder: stretch_finder::StretchFinder::new(rules),
            energy_unknown_seconds: 0.0,
            reclaimed: HashMap::default(),
            reclaimed_at: HashMap::default(),
            unpartitioned: HashMap::default(),
            downtime,
            end_ms,
            jobs,
            timings: Timings::default(),
        })
    }

    /// What a second of a GPU of `model` costs besides energy, and of that
    /// what using it less would not spend.
    fn rate(&mut self, model: Option<u32>) -> (f64, f64) {
        if let Some(&r) = self.rates.get(&model) {
            return r;
        }
        let name = model.map_or("", |m| self.names.name(m));
        let cost = gpu_cost_for(&self.config, name);
        let r = (rate_per_second(cost), avoidable_rate_per_second(cost));
        self.rates.insert(model, r);
        r
    }

    fn day(&mut self, day: &read::Day) -> Result<(), Error> {
        // The buffers are the pass's, kept from day to day.
        let mut buffers = std::mem::take(&mut self.buffers);
        let Buffers { gpu_parts, proc_parts, alloc_parts, gpus, procs, allocs } = &mut buffers;
        let at = std::time::Instant::now();
        day.parts(&mut self.names, gpu_parts, proc_parts, alloc_parts)?;
        self.coverage.parts(gpu_parts);
        self.timings.parts += at.elapsed();
        let at = std::time::Instant::now();
        let threshold = self.config.idle.threshold_pct;
        minutes::gpu_minutes(gpu_parts, &self.names, threshold, gpus);
        minutes::proc_minutes(proc_parts, &mut self.names, &mut self.teams, &self.config, procs);
        minutes::alloc_minutes(alloc_parts, &mut self.names, &mut self.teams, &self.config, allocs);
        minutes::mark_allocated(gpus, allocs);
        self.timings.minutes += at.elapsed();
        let at = std::time::Instant::now();
        let (price, pue) = (self.config.energy.price_per_kwh, self.config.energy.pue);
        // The rows of one GPU's bucket: minutes come GPU by GPU, in time
        // order, so a bucket's rows are complete when the next one starts.
        let mut bucket: Vec<(Key, Sums)> = Vec::new();
        let (mut p, mut a) = (0, 0);
        for g in gpus.iter() {
            // The process-minutes of this GPU-minute: both lists are sorted
            // by GPU then minute.
            while p < procs.len() && (procs[p].gpu_uuid, procs[p].minute) < (g.gpu_uuid, g.minute) {
                p += 1;
            }
            let from = p;
            while p < procs.len() && (procs[p].gpu_uuid, procs[p].minute) == (g.gpu_uuid, g.minute) {
                p += 1;
            }
            let on = &procs[from..p];
            // And its allocations, sorted the same way.
            while a < allocs.len() && (allocs[a].gpu_uuid, allocs[a].minute) < (g.gpu_uuid, g.minute) {
                a += 1;
            }
            let from = a;
            while a < allocs.len() && (allocs[a].gpu_uuid, allocs[a].minute) == (g.gpu_uuid, g.minute) {
                a += 1;
            }
            let allocated = &allocs[from..a];
            self.energy_unknown_seconds += g.energy_unknown_seconds;
            let gpu_seconds = g.seconds * g.capacity_share;
            let (rate, avoidable) = self.rate(g.gpu_model);
            let energy = g.energy_j / 3_600_000.0 * price * pue;
            let cost = gpu_seconds * rate + energy;
            let start = g.minute - g.minute.rem_euclid(self.bucket_ms);
            if bucket.first().is_some_and(|(k, _)| (k.gpu_uuid, k.minute) != (g.gpu_uuid, start)) {
                self.cost_buckets.extend(bucket.drain(..));
            }
            let key = |team, user| Key {
                minute: start,
                gpu_uuid: g.gpu_uuid,
                host: g.host,
                gpu_index: g.gpu_index,
                gpu_model: g.gpu_model,
                parent_gpu_uuid: g.parent_gpu_uuid,
                mig_profile: g.mig_profile,
                state: g.state,
                team,
                user,
            };
            let mut add = |key: Key, share: f64| {
                let sums = match bucket.iter_mut().position(|(k, _)| *k == key) {
                    Some(i) => &mut bucket[i].1,
                    None => {
                        bucket.push((key, Sums::default()));
                        &mut bucket.last_mut().expect("just pushed").1
                    }
                };
                sums.add(gpu_seconds * share, g.energy_j * share, cost * share, g.util_pct, g.activity_pct);
            };
            if g.state == State::IdleEmpty || (on.is_empty() && allocated.is_empty()) {
                add(key(self.unallocated, self.unallocated), 1.0);
            } else if on.is_empty() {
                // No process ran in it: whoever it is allocated to holds it.
                for (h, share) in allocated.iter().zip(alloc_shares(allocated)) {
                    add(key(h.team, h.user), share);
                    self.jobs.add(g, (h.holder, h.user, h.team), share, gpu_seconds, cost, None);
                }
            } else {
                for (o, share) in on.iter().zip(shares(g.state, on)) {
                    add(key(o.team, o.user), share);
                    self.jobs.add(g, (o.job, o.user, o.team), share, gpu_seconds, cost, o.used_mem_bytes);
                }
            }
            let whole =
                Freed { seconds: gpu_seconds, cost, energy_cost: energy, ops_cost: gpu_seconds * avoidable };
            if g.partitioned() {
                let unheld =
                    self.unpartitioned.entry(g.gpu_uuid).or_insert((g.host, g.gpu_index, Freed::default()));
                (unheld.0, unheld.1) = (g.host, g.gpu_index);
                unheld.2.add(whole);
            }
            self.stretch_finder.minute(g, on, allocated);
            self.savings(g, on, allocated, whole);
            if !self.downtime.is_empty() {
                self.downtime.minute(g, &self.names, cost, rate);
            }
        }
        self.cost_buckets.extend(bucket);
        for p in procs.iter() {
            self.stretch_finder.seen(p);
        }
        for h in allocs.iter() {
            self.stretch_finder.allocated(h);
        }
        self.timings.attributing += at.elapsed();
        let at = std::time::Instant::now();
        self.buffers = buffers;
        self.cost_buckets.drain_into(&self.names, BATCH_ROWS, &mut self.file)?;
        self.timings.writing += at.elapsed();
        Ok(())
    }

    /// What ending the stretches early would have freed of this minute
    /// (`whole`: its GPU-seconds, cost and cash): the whole minute, for its
    /// owners' teams, once its GPU has been idle longer than the reclaim
    /// rule; and the share of each process that has held memory on it idle
    /// longer than the zombie rule, kept with that process's stretch
    /// (whether it is a zombie or starved of data is known at the
    /// stretch's end).
    fn savings(
        &mut self,
        g: &minutes::GpuMinuteState,
        on: &[minutes::ProcMinuteState],
        allocated: &[minutes::AllocMinuteState],
        whole: Freed,
    ) {
        let rules = self.stretch_finder.rules();
        let Some(idle) = self.stretch_finder.idle_for(g.gpu_uuid, g.minute) else { return };
        let reclaimed = idle > rules.reclaim_min_minutes;
        if reclaimed {
            let at = stretch_finder::hour_of_week(g.minute);
            *self.reclaimed_at.entry((g.gpu_uuid, at)).or_default() += whole.cost;
        }
        if g.state == State::IdleEmpty || (on.is_empty() && allocated.is_empty()) {
            if reclaimed {
                self.reclaimed.entry(self.unallocated).or_default().add(whole);
            }
            return;
        }
        if on.is_empty() {
            if reclaimed {
                for (h, share) in allocated.iter().zip(alloc_shares(allocated)) {
                    self.reclaimed.entry(h.team).or_default().add(whole.scaled(share));
                }
            }
            return;
        }
        for (o, share) in on.iter().zip(shares(g.state, on)) {
            let part = whole.scaled(share);
            if reclaimed {
                self.reclaimed.entry(o.team).or_default().add(part);
            }
            let key = (o.gpu_uuid, o.pid, o.proc_start);
            if self.stretch_finder.holding_for(key, g.minute).is_some_and(|m| m > rules.zombie_min_minutes) {
                self.stretch_finder.free(key, g.minute, part, !reclaimed);
            }
        }
    }

    fn finish(mut self) -> Result<Ledger, Error> {
        let default_rate = self.rate(None).0;
        let Pass {
            names,
            mut cost_buckets,
            mut file,
            mut stretch_finder,
            energy_unknown_seconds,
            coverage: tally,
            reclaimed,
            reclaimed_at,
            unpartitioned,
            downtime,
            end_ms,
            jobs,
            timings,
            ..
        } = self;
        let jobs = jobs.finish(&names, tally.last_minute);
        // Nothing is known past the data's last minute: a stretch still open
        // ends there.
        let end_ms = tally.last_minute.map_or(end_ms, |last| end_ms.min(last + MINUTE_MS));
        let downtime = downtime.finish(&names, end_ms, default_rate);
        tracing::debug!(?timings, "the pass's steps");
        cost_buckets.drain_into(&names, BATCH_ROWS, &mut file)?;
        let coverage = match (tally.first_minute, tally.last_minute) {
            (Some(first_minute), Some(last_minute)) => Some(LedgerCoverage {
                row: CoverageRow {
                    first_minute,
                    last_minute,
                    gpus: tally.gpus(),
                    recorded_seconds: tally.recorded_seconds,
                    models: tally.models(&names),
                },
                model_hours: tally.model_hours(&names),
            }),
            _ => None,
        };
        stretch_finder.finish();
        let reclaim_sum = ReclaimSum::of(&stretch_finder.reclaim);
        let names = &names;
        let newest = |gpu: u32| stretch_finder.newest.get(&gpu).copied();
        let first_allocated =
            |gpu: u32, holder: u32| stretch_finder.first_allocated.get(&(gpu, holder)).copied();
        let mut reclaim: Vec<ReclaimRow> = stretch_finder
            .reclaim
            .iter()
            .map(|(gpu, s)| {
                let mut users: Vec<&str> = s.about.users.iter().map(|&u| names.name(u)).collect();
                users.sort_unstable();
                let mut holders: Vec<&str> = s.about.allocated.iter().map(|&h| names.name(h)).collect();
                holders.sort_unstable();
                let since = s.about.allocated.iter().filter_map(|&h| first_allocated(*gpu, h)).min();
                ReclaimRow {
                    host: names.name(s.host).to_owned(),
                    gpu_index: s.gpu_index,
                    gpu_uuid: names.name(*gpu).to_owned(),
                    idle_since: s.since,
                    idle_minutes: s.minutes,
                    idle_gpu_hours: s.gpu_minutes / HOUR_MINUTES as f64,
                    held_by: users.join(","),
                    allocated_to: holders.join(","),
                    allocated_since: since,
                    still_idle: newest(*gpu) == Some(s.last),
                }
            })
            .collect();
        reclaim.sort_by(|a, b| {
            (b.idle_minutes, &a.host, a.gpu_index, a.idle_since).cmp(&(
                a.idle_minutes,
                &b.host,
                b.gpu_index,
                b.idle_since,
            ))
        });
        let mut alone_by_stretch: HashMap<(stretch_finder::Process, i64), Vec<(usize, f64)>> =
            HashMap::default();
        for ((key, since, hour), cost) in std::mem::take(&mut stretch_finder.alone_at) {
            alone_by_stretch.entry((key, since)).or_default().push((hour, cost));
        }
        let mut zombies: Vec<(i64, ZombieRow, ZombieFreed)> = stretch_finder
            .zombies
            .iter()
            .map(|(key @ (gpu, pid, start), s)| {
                let row = ZombieRow {
                    host: names.name(s.host).to_owned(),
                    gpu_index: s.gpu_index,
                    gpu_uuid: names.name(*gpu).to_owned(),
                    pid: *pid,
                    proc_start: *start,
                    comm: s.about.comm.map(|c| names.name(c).to_owned()),
                    user: Some(names.name(s.about.user).to_owned()),
                    team: names.name(s.about.team).to_owned(),
                    used_mem_bytes: s.about.used_mem_bytes,
                    idle_since: s.since,
                    idle_minutes: s.minutes,
                    still_running: stretch_finder.last_seen.get(key).copied() == newest(*gpu),
                    still_idle: newest(*gpu) == Some(s.last),
                    activity_pct: s.about.traffic.activity_pct(),
                    pcie_rx_mib_per_s: s.about.traffic.rx_mib_per_s(),
                    pcie_tx_mib_per_s: s.about.traffic.tx_mib_per_s(),
                };
                let hours = |f: Freed| (f.seconds / HOUR_SECS as f64, f.cost);
                let mut alone_at = alone_by_stretch.remove(&(*key, s.since)).unwrap_or_default();
                alone_at.sort_by_key(|&(h, _)| h);
                let a = s.about.freed_alone;
                let freed = ZombieFreed {
                    freed: hours(s.about.freed),
                    alone: hours(a),
                    alone_cash: (a.energy_cost, a.ops_cost),
                    alone_at,
                };
                (s.about.used_mem_bytes.unwrap_or(0).saturating_mul(s.minutes), row, freed)
            })
            .collect();
        zombies.sort_by(|(wa, a, _), (wb, b, _)| {
            (wb, &a.host, a.gpu_index, a.pid, a.idle_since).cmp(&(
                wa,
                &b.host,
                b.gpu_index,
                b.pid,
                b.idle_since,
            ))
        });
        let mut reclaimed: Vec<Reclaimed> = reclaimed
            .into_iter()
            .map(|(team, f)| Reclaimed {
                team: names.name(team).to_owned(),
                gpu_hours: f.seconds / HOUR_SECS as f64,
                cost: f.cost,
                energy_cost: f.energy_cost,
                ops_cost: f.ops_cost,
            })
            .collect();
        let mut reclaimed_at: Vec<FreedAt> = reclaimed_at
            .into_iter()
            .map(|((gpu, hour_of_week), cost)| FreedAt {
                gpu_uuid: names.name(gpu).to_owned(),
                hour_of_week,
                cost,
            })
            .collect();
        reclaimed_at.sort_by(|a, b| (&a.gpu_uuid, a.hour_of_week).cmp(&(&b.gpu_uuid, b.hour_of_week)));
        reclaimed.sort_by(|a, b| b.cost.total_cmp(&a.cost).then_with(|| a.team.cmp(&b.team)));
        let mut unpartitioned: Vec<Unpartitioned> = unpartitioned
            .into_iter()
            .map(|(gpu, (host, index, f))| Unpartitioned {
                host: names.name(host).to_owned(),
                gpu_index: index,
                gpu_uuid: names.name(gpu).to_owned(),
                gpu_hours: f.seconds / HOUR_SECS as f64,
                cost: f.cost,
            })
            .collect();
        unpartitioned
            .sort_by(|a, b| (&a.host, a.gpu_index, &a.gpu_uuid).cmp(&(&b.host, b.gpu_index, &b.gpu_uuid)));
        let zombie_freed = zombies.iter().map(|(_, _, f)| f.clone()).collect();
        Ok(Ledger {
            buckets: file.finish()?,
            reclaimed,
            zombie_freed,
            reclaimed_at,
            energy_unknown_seconds,
            rules: stretch_finder.rules(),
            reclaim,
            reclaim_sum,
            unpartitioned,
            zombies: zombies.into_iter().map(|(_, r, _)| r).collect(),
            coverage,
            downtime,
            jobs,
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod reclaim_sum_tests {
    use super::*;

    fn stretch(minutes: i64, share: f64, instance: bool) -> Stretch<()> {
        Stretch {
            host: 0,
            gpu_index: 0,
            since: 0,
            last: (minutes - 1) * MINUTE_MS,
            minutes,
            gpu_minutes: minutes as f64 * share,
            instance,
            about: (),
        }
    }

    /// A 1g.10gb instance idle 140 minutes is 140/7 GPU-minutes; a whole GPU
    /// idle twice, 60 and 90 minutes, is 150 and counts once; the partitioned
    /// GPU's unassigned 3/7 idle 70 minutes is 30 GPU-minutes and a GPU.
    #[test]
    fn instances_count_by_their_share_and_apart_from_gpus() {
        let stretches = [
            (1, stretch(140, 1.0 / 7.0, true)),
            (2, stretch(60, 1.0, false)),
            (2, stretch(90, 1.0, false)),
            (3, stretch(70, 3.0 / 7.0, false)),
        ];
        let sum = ReclaimSum::of(&stretches);
        assert_eq!((sum.gpus, sum.instances), (2, 1));
        assert!((sum.gpu_hours - (20.0 + 150.0 + 30.0) / 60.0).abs() < 1e-12, "{sum:?}");
    }
}
