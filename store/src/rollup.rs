//! Minute rollups: pure functions from the rows of one closed file to its
//! `gpu_minutes` and `proc_minutes` rows (schemas: `apron_schemas::gpu_minutes`,
//! `apron_schemas::proc_minutes`). The writer calls them in
//! [`crate::writer::RollingWriter::close`] and writes their rows under the
//! same (start, seq) name as the raw files.
//!
//! How each column is computed, for a GPU (or a process on a GPU) and the
//! UTC minute `minute = ts - ts mod 60 s` of each sample:
//!
//! - `seconds`: the sum of `interval_ms` of the minute's samples / 1000;
//!   `samples`: their number.
//! - `x_mean`: interval-weighted, `Σ x·interval_ms / Σ interval_ms` over the
//!   samples whose `x` is not null; null when none has it (nulls stay
//!   unknown, they are never read as 0).
//! - `x_max`: the highest non-null value; null when none.
//! - `energy_j` (GPU): the sum over the minute's samples of each sample's
//!   energy, null when no sample has one. A sample's energy is the energy
//!   counter's delta to the previous sample of the same GPU, when that
//!   sample is exactly one `interval_ms` earlier, both counters are known and
//!   the counter did not go back (a driver reload resets it); else
//!   `power_mw × interval_ms`; else unknown. The previous sample may be in
//!   the previous file: the writer carries each GPU's last sample from one
//!   file to the next ([`EnergyCarry`]); after a restart the first sample
//!   falls back to power × interval.
//! - `proc_held`: some `proc_minutes` row of the GPU-minute has
//!   `used_mem_bytes_max` above 0 or null (NVML lists a process on a GPU
//!   only while it has a context there, and a context is memory);
//!   `proc_count`: its number of `proc_minutes` rows, i.e. distinct
//!   (`pid`, `proc_start`).
//! - identity columns of `proc_minutes`: each the minute's last non-null.
//! - `alloc_minutes` ([`alloc_minutes`], [`AllocMinutes`]): one row per
//!   (GPU, minute, holder) the cluster allocated; `seconds` the sum of
//!   `interval_ms` of the ticks that saw the allocation / 1000, `samples`
//!   their number, `gpu_index` the minute's last. A holder seen twice in
//!   one tick (two processes of one pod) counts once.
//!
//! **Split minutes.** Files rotate on minute-aligned windows by default, so
//! a minute is rarely split across files; where it is (a `--rotate` that
//! does not divide a minute, a restart mid-minute), each file has its own
//! row for that GPU-minute. Queries must aggregate rollups by
//! (`gpu_uuid`, `minute`) (processes: (`gpu_uuid`, `pid`, `proc_start`,
//! `minute`)) with sums of `seconds`, `samples` and `energy_j`,
//! seconds-weighted means, maxima of maxima, and `bool_or(proc_held)`.
//! Compaction keeps such rows apart; it does not merge them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apron_schemas::minute_state::holds_memory;
use apron_schemas::time::MINUTE_MS;
use apron_schemas::{
    AllocMinute, AllocSample, GpuMinute, GpuSample, Holder, ProcIdentity, ProcMinute, ProcSample, Text,
};

/// The start of the UTC minute that holds `ts_ms`.
pub fn minute_of(ts_ms: i64) -> i64 {
    ts_ms.div_euclid(MINUTE_MS) * MINUTE_MS
}

/// The last sample of each GPU seen so far (its time and energy counter),
/// so the first sample of the next file can take its energy from the
/// counter's delta too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnergyCarry {
    last: HashMap<Text, LastSample>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct LastSample {
    ts: i64,
    energy_mj: Option<i64>,
}

impl EnergyCarry {
    /// A carry that knows no previous sample (a fresh start).
    pub fn new() -> Self {
        Self::default()
    }
}

/// The rollups of one closed file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollup {
    /// One row per GPU-minute, in (`gpu_uuid`, `minute`) order.
    pub gpu_minutes: Vec<GpuMinute>,
    /// One row per (GPU, process)-minute, in (`gpu_uuid`, `minute`, `pid`,
    /// `proc_start`) order (a null `proc_start` last).
    pub proc_minutes: Vec<ProcMinute>,
    /// `carry` advanced past this file's samples: what the next file's
    /// rollup starts from.
    pub carry: EnergyCarry,
}

/// The rollups of a file's rows: `gpus` in (`gpu_uuid`, `ts`) order and
/// `procs` in (`gpu_uuid`, `ts`) order (as every apron file is), `carry`
/// holding the last sample of each GPU before them. Rows out of that order
/// give a GPU-minute more than one row (each right for its rows), never a
/// wrong sum.
pub fn rollup<'a, 'b>(
    gpus: impl IntoIterator<Item = &'a GpuSample>,
    procs: impl IntoIterator<Item = &'b ProcSample>,
    carry: &EnergyCarry,
) -> Rollup {
    let proc_minutes = proc_minutes(procs);
    let (gpu_minutes, carry) = gpu_minutes(gpus, &proc_minutes, carry);
    Rollup { gpu_minutes, proc_minutes, carry }
}

/// An interval-weighted mean in the making, exact in integers.
#[derive(Debug, Clone, Copy, Default)]
struct Mean {
    weighted: i128,
    weight_ms: i64,
}

impl Mean {
    fn add(&mut self, value: Option<i64>, interval_ms: i64) {
        if let Some(v) = value {
            self.weighted += i128::from(v) * i128::from(interval_ms);
            self.weight_ms += interval_ms;
        }
    }

    fn value(self) -> Option<f64> {
        (self.weight_ms > 0).then(|| self.weighted as f64 / self.weight_ms as f64)
    }
}

/// An interval-weighted mean of a fractional metric (`sm_active_pct` is
/// a float in the samples), summed in `f64`.
#[derive(Debug, Clone, Copy, Default)]
struct MeanF {
    weighted: f64,
    weight_ms: i64,
}

impl MeanF {
    fn add(&mut self, value: Option<f32>, interval_ms: i64) {
        if let Some(v) = value.filter(|v| v.is_finite()) {
            self.weighted += f64::from(v) * interval_ms as f64;
            self.weight_ms += interval_ms;
        }
    }

    fn value(self) -> Option<f64> {
        (self.weight_ms > 0).then(|| self.weighted / self.weight_ms as f64)
    }
}

fn max_opt<T: Ord>(acc: Option<T>, v: Option<T>) -> Option<T> {
    match (acc, v) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn same(a: &Text, b: &Text) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

/// One GPU-minute being summed.
#[derive(Debug)]
struct GpuAcc {
    minute: i64,
    gpu_uuid: Text,
    gpu_index: i32,
    gpu_model: Option<Text>,
    interval_ms: i64,
    samples: i32,
    util: Mean,
    util_max: Option<i32>,
    mem_util: Mean,
    sm_active: MeanF,
    tensor_active: MeanF,
    dram_active: MeanF,
    fb_used_max: Option<i64>,
    fb_total: Option<i64>,
    energy_uj: Option<i64>,
    power: Mean,
    tx: Mean,
    rx: Mean,
    /// MIG: the minute's last known parent, profile and slices.
    parent_gpu_uuid: Option<Text>,
    mig_profile: Option<Text>,
    mig_slices: Option<i32>,
    mig_total_slices: Option<i32>,
}

impl GpuAcc {
    fn new(minute: i64, row: &GpuSample) -> Self {
        Self {
            minute,
            gpu_uuid: row.gpu_uuid.clone(),
            gpu_index: row.gpu_index,
            gpu_model: None,
            interval_ms: 0,
            samples: 0,
            util: Mean::default(),
            util_max: None,
            mem_util: Mean::default(),
            sm_active: MeanF::default(),
            tensor_active: MeanF::default(),
            dram_active: MeanF::default(),
            fb_used_max: None,
            fb_total: None,
            energy_uj: None,
            power: Mean::default(),
            tx: Mean::default(),
            rx: Mean::default(),
            parent_gpu_uuid: None,
            mig_profile: None,
            mig_slices: None,
            mig_total_slices: None,
        }
    }

    fn add(&mut self, row: &GpuSample, energy_uj: Option<i64>) {
        let w = i64::from(row.interval_ms);
        self.gpu_index = row.gpu_index;
        if row.gpu_model.is_some() {
            self.gpu_model.clone_from(&row.gpu_model);
        }
        self.interval_ms += w;
        self.samples += 1;
        self.util.add(row.gpu_util_pct.map(i64::from), w);
        self.util_max = max_opt(self.util_max, row.gpu_util_pct);
        self.mem_util.add(row.mem_util_pct.map(i64::from), w);
        self.sm_active.add(row.sm_active_pct, w);
        self.tensor_active.add(row.tensor_active_pct, w);
        self.dram_active.add(row.dram_active_pct, w);
        self.fb_used_max = max_opt(self.fb_used_max, row.fb_used_bytes);
        self.fb_total = max_opt(self.fb_total, row.fb_total_bytes);
        if let Some(e) = energy_uj {
            self.energy_uj = Some(self.energy_uj.unwrap_or(0).saturating_add(e));
        }
        self.power.add(row.power_mw.map(i64::from), w);
        self.tx.add(row.pcie_tx_bytes_per_s, w);
        self.rx.add(row.pcie_rx_bytes_per_s, w);
        if row.parent_gpu_uuid.is_some() {
            self.parent_gpu_uuid.clone_from(&row.parent_gpu_uuid);
        }
        if row.mig_profile.is_some() {
            self.mig_profile.clone_from(&row.mig_profile);
        }
        self.mig_slices = row.mig_slices.or(self.mig_slices);
        self.mig_total_slices = row.mig_total_slices.or(self.mig_total_slices);
    }

    fn finish(self, procs: Option<&(bool, i32)>) -> GpuMinute {
        let (proc_held, proc_count) = procs.copied().unwrap_or((false, 0));
        GpuMinute {
            minute: self.minute,
            gpu_uuid: self.gpu_uuid,
            gpu_index: self.gpu_index,
            gpu_model: self.gpu_model,
            seconds: self.interval_ms as f64 / 1000.0,
            samples: self.samples,
            gpu_util_pct_mean: self.util.value(),
            gpu_util_pct_max: self.util_max,
            mem_util_pct_mean: self.mem_util.value(),
            sm_active_pct_mean: self.sm_active.value(),
            fb_used_bytes_max: self.fb_used_max,
            fb_total_bytes: self.fb_total,
            energy_j: self.energy_uj.map(|uj| uj as f64 / 1e6),
            power_mw_mean: self.power.value(),
            pcie_tx_bytes_per_s_mean: self.tx.value(),
            pcie_rx_bytes_per_s_mean: self.rx.value(),
            proc_held,
            proc_count,
            parent_gpu_uuid: self.parent_gpu_uuid,
            mig_profile: self.mig_profile,
            mig_slices: self.mig_slices,
            mig_total_slices: self.mig_total_slices,
            tensor_active_pct_mean: self.tensor_active.value(),
            dram_active_pct_mean: self.dram_active.value(),
        }
    }
}

/// The energy of `row` in microjoules (see the module docs), given the
/// GPU's previous sample.
fn sample_energy_uj(prev: Option<LastSample>, row: &GpuSample) -> Option<i64> {
    let interval = i64::from(row.interval_ms);
    if let (Some(prev), Some(now)) = (prev, row.energy_mj)
        && let Some(before) = prev.energy_mj
        && row.ts - prev.ts == interval
        && now >= before
    {
        return (now - before).checked_mul(1_000);
    }
    // mW × ms = µJ.
    row.power_mw.map(|p| i64::from(p) * interval)
}

/// The `gpu_minutes` rows of `gpus` (in (`gpu_uuid`, `ts`) order), with
/// `proc_held` and `proc_count` from `procs` (the same file's
/// `proc_minutes`), and `carry` advanced past `gpus`.
pub fn gpu_minutes<'a>(
    gpus: impl IntoIterator<Item = &'a GpuSample>,
    procs: &[ProcMinute],
    carry: &EnergyCarry,
) -> (Vec<GpuMinute>, EnergyCarry) {
    let mut by_minute: HashMap<(Text, i64), (bool, i32)> = HashMap::new();
    for p in procs {
        let e = by_minute.entry((p.gpu_uuid.clone(), p.minute)).or_insert((false, 0));
        e.0 |= holds_memory(p.used_mem_bytes_max);
        e.1 += 1;
    }
    let mut carry = carry.clone();
    let mut out = Vec::new();
    let mut acc: Option<GpuAcc> = None;
    // The previous sample of the GPU of `acc`.
    let mut prev: Option<LastSample> = None;
    for row in gpus {
        let minute = minute_of(row.ts);
        let same_gpu = acc.as_ref().is_some_and(|a| same(&a.gpu_uuid, &row.gpu_uuid));
        if !same_gpu {
            if let (Some(a), Some(p)) = (&acc, prev) {
                carry.last.insert(a.gpu_uuid.clone(), p);
            }
            prev = carry.last.get(&row.gpu_uuid).copied();
        }
        if !(same_gpu && acc.as_ref().is_some_and(|a| a.minute == minute)) {
            if let Some(done) = acc.take() {
                let key = (done.gpu_uuid.clone(), done.minute);
                out.push(done.finish(by_minute.get(&key)));
            }
            acc = Some(GpuAcc::new(minute, row));
        }
        let energy = sample_energy_uj(prev, row);
        if let Some(a) = acc.as_mut() {
            a.add(row, energy);
        }
        prev = Some(LastSample { ts: row.ts, energy_mj: row.energy_mj });
    }
    if let Some(done) = acc {
        if let Some(p) = prev {
            carry.last.insert(done.gpu_uuid.clone(), p);
        }
        let key = (done.gpu_uuid.clone(), done.minute);
        out.push(done.finish(by_minute.get(&key)));
    }
    (out, carry)
}

/// One (GPU, process)-minute being summed.
#[derive(Debug)]
struct ProcAcc {
    pid: i32,
    identity: ProcIdentity,
    interval_ms: i64,
    samples: i32,
    mem: Mean,
    mem_max: Option<i64>,
    sm: Mean,
    mem_util: Mean,
}

impl ProcAcc {
    fn add(&mut self, row: &ProcSample) {
        let w = i64::from(row.interval_ms);
        let id = &mut self.identity;
        let r = &row.identity;
        // Each text the minute's last non-null; a text the same as the one
        // kept (a process's rows share their identity's texts) is not
        // cloned again.
        macro_rules! last_known {
            ($($f:ident),*) => {
                $(if let Some(v) = &r.$f && !id.$f.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, v)) {
                    id.$f = Some(v.clone());
                })*
            };
        }
        if r.uid.is_some() {
            id.uid = r.uid;
        }
        last_known!(
            comm,
            user,
            container_id,
            k8s_pod_uid,
            k8s_namespace,
            k8s_pod_name,
            k8s_container,
            k8s_labels,
            slurm_job_id,
            slurm_account,
            slurm_partition
        );
        self.interval_ms += w;
        self.samples += 1;
        self.mem.add(row.used_mem_bytes, w);
        self.mem_max = max_opt(self.mem_max, row.used_mem_bytes);
        self.sm.add(row.sm_util_pct.map(i64::from), w);
        self.mem_util.add(row.mem_util_pct.map(i64::from), w);
    }

    fn finish(self, minute: i64, gpu_uuid: &Text) -> ProcMinute {
        ProcMinute {
            minute,
            gpu_uuid: gpu_uuid.clone(),
            pid: self.pid,
            identity: self.identity,
            seconds: self.interval_ms as f64 / 1000.0,
            samples: self.samples,
            used_mem_bytes_mean: self.mem.value(),
            used_mem_bytes_max: self.mem_max,
            sm_util_pct_mean: self.sm.value(),
            mem_util_pct_mean: self.mem_util.value(),
        }
    }
}

/// The `proc_minutes` rows of `procs` (in (`gpu_uuid`, `ts`) order), in
/// (`gpu_uuid`, `minute`, `pid`, `proc_start`) order, a null `proc_start`
/// last (the order files declare: nulls last).
pub fn proc_minutes<'a>(procs: impl IntoIterator<Item = &'a ProcSample>) -> Vec<ProcMinute> {
    let mut out = Vec::new();
    // The GPU-minute being summed and its processes (a handful: a linear
    // search beats a map).
    let mut current: Option<(Text, i64)> = None;
    let mut accs: Vec<ProcAcc> = Vec::new();
    let flush = |current: &Option<(Text, i64)>, accs: &mut Vec<ProcAcc>, out: &mut Vec<ProcMinute>| {
        if let Some((uuid, minute)) = current {
            accs.sort_by_key(|a| (a.pid, a.identity.proc_start.is_none(), a.identity.proc_start));
            out.extend(accs.drain(..).map(|a| a.finish(*minute, uuid)));
        }
    };
    for row in procs {
        let minute = minute_of(row.ts);
        if !current.as_ref().is_some_and(|(u, m)| *m == minute && same(u, &row.gpu_uuid)) {
            flush(&current, &mut accs, &mut out);
            current = Some((row.gpu_uuid.clone(), minute));
        }
        let start = row.identity.proc_start;
        let i = match accs.iter().position(|a| a.pid == row.pid && a.identity.proc_start == start) {
            Some(i) => i,
            None => {
                accs.push(ProcAcc {
                    pid: row.pid,
                    identity: ProcIdentity { proc_start: start, ..Default::default() },
                    interval_ms: 0,
                    samples: 0,
                    mem: Mean::default(),
                    mem_max: None,
                    sm: Mean::default(),
                    mem_util: Mean::default(),
                });
                accs.len() - 1
            }
        };
        accs[i].add(row);
    }
    flush(&current, &mut accs, &mut out);
    out
}

/// `alloc_minutes` in the making: allocations added in any order, rows
/// handed out in (`gpu_uuid`, `minute`, holder) order. It holds one entry
/// per (GPU, minute, holder), a sixtieth of the ticks' allocations, so a
/// file streamed chunk by chunk ([`crate::file_stream`]) adds as it goes.
#[derive(Debug, Clone, Default)]
pub struct AllocMinutes {
    /// By GPU, then minute: each holder's sum, in the order first added
    /// (a GPU-minute has one or a few). Looked up by borrowing the
    /// sample's text, so a tick that adds to an entry clones nothing.
    rows: BTreeMap<Text, BTreeMap<i64, Vec<(Holder, AllocSum)>>>,
}

#[derive(Debug, Clone, Copy)]
struct AllocSum {
    interval_ms: i64,
    samples: i32,
    gpu_index: i32,
    /// The latest tick counted, so a holder listed twice in one tick counts
    /// once (ticks come in time order in a file; out of order, a repeat is
    /// counted again, as a split minute's rows are).
    last_ts: i64,
}

impl AllocMinutes {
    /// Nothing added yet.
    pub fn new() -> AllocMinutes {
        AllocMinutes::default()
    }

    /// Adds one tick's allocation of one GPU to one holder.
    pub fn add(&mut self, a: &AllocSample) {
        let minutes = match self.rows.get_mut(&*a.gpu_uuid) {
            Some(minutes) => minutes,
            None => self.rows.entry(a.gpu_uuid.clone()).or_default(),
        };
        let holders = minutes.entry(minute_of(a.ts)).or_default();
        let i = match holders.iter().position(|(h, _)| *h == a.holder) {
            Some(i) => i,
            None => {
                let sum = AllocSum { interval_ms: 0, samples: 0, gpu_index: a.gpu_index, last_ts: i64::MIN };
                holders.push((a.holder.clone(), sum));
                holders.len() - 1
            }
        };
        let sum = &mut holders[i].1;
        if sum.last_ts == a.ts {
            return;
        }
        if a.ts > sum.last_ts {
            sum.gpu_index = a.gpu_index;
            sum.last_ts = a.ts;
        }
        sum.interval_ms += i64::from(a.interval_ms.max(0));
        sum.samples += 1;
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows, in (`gpu_uuid`, `minute`, holder) order.
    pub fn finish(self) -> Vec<AllocMinute> {
        let mut out = Vec::new();
        for (gpu_uuid, minutes) in self.rows {
            for (minute, mut holders) in minutes {
                holders.sort_by(|a, b| a.0.cmp(&b.0));
                out.extend(holders.into_iter().map(|(holder, s)| AllocMinute {
                    minute,
                    gpu_uuid: gpu_uuid.clone(),
                    gpu_index: s.gpu_index,
                    holder,
                    seconds: s.interval_ms as f64 / 1_000.0,
                    samples: s.samples,
                }));
            }
        }
        out
    }
}

/// The `alloc_minutes` rows of a file's allocations, in any order.
pub fn alloc_minutes<'a>(allocs: impl IntoIterator<Item = &'a AllocSample>) -> Vec<AllocMinute> {
    let mut out = AllocMinutes::new();
    for a in allocs {
        out.add(a);
    }
    out.finish()
}

#[cfg(test)]
mod tests;
