//! The time faults took: from a fault that takes a GPU out of service
//! ([`apron_schemas::gpu_events::takes_gpu_down`]: a fatal XID, a
//! double-bit ECC error, a GPU lost, uncorrectable ECC errors counted, a
//! row remapping or page retirement pending, a remapping failed) until the
//! GPU next did work: the start of its first busy minute after the
//! fault's, or the end of the period's data (its last recorded minute;
//! nothing is known past it). A fault of a MIG-partitioned GPU takes
//! each of its instances down until that instance next does work; the
//! slices no instance holds are nobody's capacity and are left out.
//!
//! The minutes are recorded as they are (idle, unknown, or not recorded at
//! all while the GPU did not answer): this only says how many of them the
//! fault took. A stretch's cost is its recorded minutes' cost, as
//! `minute_costs` prices them (part of the fleet's cost), and its
//! unrecorded time at the GPU's rate without energy (not part of the
//! fleet's cost, which counts recorded time only): both are stated.

use apron_schemas::minute_state::State;
use apron_schemas::time::{HOUR_MS, MINUTE_MS};

use apron_schemas::gpu_events::{XID, takes_gpu_down};
use datafusion::common::ScalarValue;

use super::map::HashMap;
use super::minutes::GpuMinuteState;
use super::read::Names;
use crate::error::{Error, SessionError};
use crate::report::columns::Columns;
use crate::session::{Session, queries};
use std::collections::HashSet;

/// One fault that takes its GPU out of service.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// The GPU (or MIG instance) the driver named.
    pub gpu_uuid: String,
    /// When it happened, ms since the epoch.
    pub ts: i64,
    /// `gpu_events.kind`.
    pub kind: String,
    /// The XID code, for kind `xid`.
    pub xid: Option<i32>,
    /// `gpu_events.detail`.
    pub detail: Option<String>,
    /// Whether it takes its GPU out of service
    /// ([`apron_schemas::gpu_events::takes_gpu_down`]); the other faults read
    /// (XIDs that do not) are for `apron jobs`' findings only.
    pub takes_down: bool,
}

/// One stretch a GPU (or MIG instance) was out of service after a fault.
#[derive(Debug, Clone, PartialEq)]
pub struct DownStretch {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// The GPU or MIG instance that was down.
    pub gpu_uuid: String,
    /// The fault that began it.
    pub fault: Fault,
    /// Faults that take a GPU down within it, the first included.
    pub faults: u32,
    /// When the GPU next did work (the start of its first busy minute after
    /// the fault's), ms since the epoch; `None`: not within the period.
    pub until_ms: Option<i64>,
    /// GPU-hours from the start of the fault's minute to `until_ms` (or
    /// the end of the period's data), a MIG instance's by its share of its GPU.
    pub gpu_hours: f64,
    /// Of them, recorded (in the fleet's cost).
    pub recorded_gpu_hours: f64,
    /// The recorded minutes' cost and the unrecorded time's at the GPU's
    /// rate (currency).
    pub cost: f64,
    /// Of `cost`, the unrecorded time's (currency; not in the fleet's cost).
    pub unrecorded_cost: f64,
}

/// A stretch being followed.
#[derive(Debug, Clone)]
struct Open {
    /// Index of the fault that began it.
    first: usize,
    /// The newest fault in it, ms since the epoch.
    last_ts: i64,
    faults: u32,
    /// Recorded GPU-seconds (× capacity share).
    recorded_seconds: f64,
    cost: f64,
}

/// One GPU or MIG instance whose own faults, or its parent's, are followed.
#[derive(Debug, Clone)]
struct Track {
    /// Indices into [`Downtime::faults`], by time.
    faults: Vec<usize>,
    /// The first of `faults` not yet reached.
    next: usize,
    open: Option<Open>,
    host: String,
    gpu_index: i32,
    /// Capacity share and non-energy rate (currency per GPU-second) of its
    /// newest minute.
    share: f64,
    rate: f64,
    done: Vec<(Open, Option<i64>, i64)>,
}

impl Track {
    /// Closes the open stretch at `end_ms`; `until_ms`: the GPU did work again then.
    fn close(&mut self, until_ms: Option<i64>, end_ms: i64) {
        if let Some(open) = self.open.take() {
            self.done.push((open, until_ms, end_ms));
        }
    }

    /// Takes in the faults before `before_ms`, opening a stretch at the first.
    fn reach(&mut self, faults: &[Fault], before_ms: i64) {
        while let Some(&i) = self.faults.get(self.next)
            && faults[i].ts < before_ms
        {
            self.next += 1;
            match &mut self.open {
                Some(open) => {
                    open.faults += 1;
                    open.last_ts = open.last_ts.max(faults[i].ts);
                }
                None => {
                    self.open = Some(Open {
                        first: i,
                        last_ts: faults[i].ts,
                        faults: 1,
                        recorded_seconds: 0.0,
                        cost: 0.0,
                    });
                }
            }
        }
    }
}

/// Follows a period's GPU-minutes, GPU by GPU in time order, through the
/// stretches its faults took.
#[derive(Debug, Default)]
pub struct Downtime {
    faults: Vec<Fault>,
    /// Each GPU's faults (interned UUID), by time.
    by_gpu: HashMap<u32, Vec<usize>>,
    tracks: HashMap<u32, Track>,
    /// The GPUs whose MIG instances are followed (their faults are theirs).
    parents: HashSet<u32>,
}

impl Downtime {
    /// Follows `faults` (any order), their GPUs interned in `names`.
    pub fn new(mut faults: Vec<Fault>, names: &mut Names) -> Self {
        faults.retain(|f| f.takes_down);
        faults.sort_by(|a, b| (a.ts, &a.gpu_uuid, &a.kind).cmp(&(b.ts, &b.gpu_uuid, &b.kind)));
        let mut by_gpu: HashMap<u32, Vec<usize>> = HashMap::default();
        for (i, f) in faults.iter().enumerate() {
            by_gpu.entry(names.id(&f.gpu_uuid)).or_default().push(i);
        }
        Downtime { faults, by_gpu, tracks: HashMap::default(), parents: HashSet::default() }
    }

    /// Whether there is nothing to follow.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// Takes one GPU-minute: `cost` as `minute_costs` prices it, `rate`
    /// its GPU's cost per second without energy (for a whole GPU).
    pub fn minute(&mut self, g: &GpuMinuteState, names: &Names, cost: f64, rate: f64) {
        if self.faults.is_empty() || g.partitioned() {
            return;
        }
        let track = match self.tracks.get_mut(&g.gpu_uuid) {
            Some(t) => t,
            None => {
                let mut faults: Vec<usize> = self.by_gpu.get(&g.gpu_uuid).cloned().unwrap_or_default();
                if let Some(parent) = g.parent_gpu_uuid {
                    self.parents.insert(parent);
                    faults.extend(self.by_gpu.get(&parent).into_iter().flatten());
                }
                faults.sort_by_key(|&i| self.faults[i].ts);
                self.tracks.entry(g.gpu_uuid).or_insert(Track {
                    faults,
                    next: 0,
                    open: None,
                    host: names.name(g.host).to_owned(),
                    gpu_index: g.gpu_index,
                    share: g.capacity_share,
                    rate,
                    done: Vec::new(),
                })
            }
        };
        if track.faults.is_empty() {
            return;
        }
        (track.share, track.rate, track.gpu_index) = (g.capacity_share, rate, g.gpu_index);
        let did_work = g.state == State::Busy;
        if did_work
            && let Some(open) = &track.open
            && g.minute > minute_of(open.last_ts)
        {
            track.close(Some(g.minute), g.minute);
        }
        track.reach(&self.faults, g.minute + MINUTE_MS);
        if let Some(open) = &mut track.open {
            open.recorded_seconds += g.seconds * g.capacity_share;
            open.cost += cost;
        }
    }

    /// The stretches, the period ending at `end_ms` (stretches still open
    /// end there); `default_rate`: the non-energy rate of a GPU of unknown
    /// model, for a fault of a GPU with no minute in the period. By GPU,
    /// then time.
    pub fn finish(mut self, names: &Names, end_ms: i64, default_rate: f64) -> Vec<DownStretch> {
        // A GPU whose faults no minute reached (none recorded in the period):
        // down from its first fault to the end.
        // A GPU whose faults no minute of its own or of its MIG instances
        // reached (none recorded in the period): down from its first fault
        // to the end.
        let mut untaken: Vec<(u32, Vec<usize>)> = self
            .by_gpu
            .iter()
            .filter(|(gpu, _)| !self.tracks.contains_key(gpu) && !self.parents.contains(gpu))
            .map(|(&gpu, list)| (gpu, list.clone()))
            .collect();
        untaken.sort_unstable_by_key(|(gpu, _)| *gpu);
        for (gpu, list) in untaken {
            let f = &self.faults[list[0]];
            let track = Track {
                faults: list,
                next: 0,
                open: None,
                host: f.host.clone(),
                gpu_index: f.gpu_index,
                share: 1.0,
                rate: default_rate,
                done: Vec::new(),
            };
            self.tracks.insert(gpu, track);
        }
        let mut out = Vec::new();
        for (&gpu, track) in &mut self.tracks {
            track.reach(&self.faults, end_ms);
            track.close(None, end_ms);
            for (open, until_ms, stop_ms) in track.done.drain(..) {
                let fault = self.faults[open.first].clone();
                let from = minute_of(fault.ts);
                let gpu_hours = (stop_ms - from).max(0) as f64 / HOUR_MS as f64 * track.share;
                let recorded_gpu_hours = open.recorded_seconds / 3_600.0;
                let unrecorded_cost = (gpu_hours - recorded_gpu_hours).max(0.0) * 3_600.0 * track.rate;
                out.push(DownStretch {
                    host: track.host.clone(),
                    gpu_index: track.gpu_index,
                    gpu_uuid: names.name(gpu).to_owned(),
                    fault,
                    faults: open.faults,
                    until_ms,
                    gpu_hours,
                    recorded_gpu_hours,
                    cost: open.cost + unrecorded_cost,
                    unrecorded_cost,
                });
            }
        }
        out.sort_by(|a, b| {
            (&a.host, a.gpu_index, &a.gpu_uuid, a.fault.ts).cmp(&(
                &b.host,
                b.gpu_index,
                &b.gpu_uuid,
                b.fault.ts,
            ))
        });
        out
    }
}

/// The start of the minute of `ts_ms`.
fn minute_of(ts_ms: i64) -> i64 {
    ts_ms - ts_ms.rem_euclid(MINUTE_MS)
}

/// What the stretches add up to: GPU-hours, of them recorded, cost, of it
/// the unrecorded time's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DownSum {
    /// GPU-hours faults took.
    pub gpu_hours: f64,
    /// Of them recorded.
    pub recorded_gpu_hours: f64,
    /// Their cost (currency).
    pub cost: f64,
    /// Of it, the unrecorded time's (currency).
    pub unrecorded_cost: f64,
    /// GPUs and instances still down at the period's end.
    pub still_down: usize,
}

impl DownSum {
    /// The sum of `stretches`.
    pub fn of(stretches: &[DownStretch]) -> DownSum {
        stretches.iter().fold(DownSum::default(), |s, d| DownSum {
            gpu_hours: s.gpu_hours + d.gpu_hours,
            recorded_gpu_hours: s.recorded_gpu_hours + d.recorded_gpu_hours,
            cost: s.cost + d.cost,
            unrecorded_cost: s.unrecorded_cost + d.unrecorded_cost,
            still_down: s.still_down + usize::from(d.until_ms.is_none()),
        })
    }
}

/// The period's faults that take a GPU out of service
/// (`queries/down_faults.sql`, kept by
/// [`apron_schemas::gpu_events::takes_gpu_down`]), and its other XIDs
/// (`takes_down` false: a job's findings name them).
pub async fn down_faults(session: &Session, start_ms: i64, end_ms: i64) -> Result<Vec<Fault>, Error> {
    let at = |ms: i64| ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()));
    let df = session.sql_with_params(queries::DOWN_FAULTS, vec![at(start_ms), at(end_ms)]).await?;
    let batch = session.collect_batch(df).await?;
    let unreadable = |e: datafusion::arrow::error::ArrowError| SessionError::Execute { source: e.into() };
    let c = Columns::of(&batch);
    let (host, gpu_index, gpu_uuid, kind) = (
        c.text("host").map_err(unreadable)?,
        c.i32("gpu_index").map_err(unreadable)?,
        c.text("gpu_uuid").map_err(unreadable)?,
        c.text("kind").map_err(unreadable)?,
    );
    let (ts, xid, detail) = (
        c.timestamp_ms("ts").map_err(unreadable)?,
        c.i32_opt("xid").map_err(unreadable)?,
        c.text_opt("detail").map_err(unreadable)?,
    );
    let (value, delta) = (c.i64_opt("value").map_err(unreadable)?, c.i64_opt("delta").map_err(unreadable)?);
    Ok((0..c.len())
        .map(|i| (i, takes_gpu_down(&kind[i], xid[i], value[i], delta[i])))
        .filter(|&(i, down)| down || kind[i] == XID)
        .map(|(i, takes_down)| Fault {
            host: host[i].clone(),
            gpu_index: gpu_index[i],
            gpu_uuid: gpu_uuid[i].clone(),
            ts: ts[i],
            kind: kind[i].clone(),
            xid: xid[i],
            detail: detail[i].clone(),
            takes_down,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: i64 = MINUTE_MS;

    fn fault(gpu: &str, ts: i64, kind: &str) -> Fault {
        Fault {
            host: "h".into(),
            gpu_index: 0,
            gpu_uuid: gpu.into(),
            ts,
            kind: kind.into(),
            xid: None,
            detail: None,
            takes_down: true,
        }
    }

    /// A recorded minute of `gpu` (its parent `parent`, a MIG instance of
    /// `share`), busy or idle.
    fn minute(
        names: &mut Names,
        gpu: &str,
        parent: Option<&str>,
        share: f64,
        at: i64,
        busy: bool,
    ) -> GpuMinuteState {
        GpuMinuteState {
            gpu_uuid: names.id(gpu),
            minute: at,
            host: names.id("h"),
            gpu_index: 0,
            gpu_model: None,
            seconds: 60.0,
            util_pct: None,
            activity_pct: Some(if busy { 90.0 } else { 0.0 }),
            energy_j: 0.0,
            energy_unknown_seconds: 0.0,
            state: if busy { State::Busy } else { State::IdleEmpty },
            allocated: false,
            capacity_share: share,
            parent_gpu_uuid: parent.map(|p| names.id(p)),
            mig_profile: None,
            mig_slices: parent.map(|_| 1),
            mig_total_slices: parent.map(|_| 7),
            pcie_tx_bytes_per_s: None,
            pcie_rx_bytes_per_s: None,
            sm_active_pct: None,
            fb_total_bytes: None,
            tensor_active_pct: None,
            dram_active_pct: None,
        }
    }

    #[test]
    fn a_fault_takes_its_gpu_until_its_next_busy_minute_unrecorded_time_at_the_rate() {
        let mut names = Names::default();
        // Busy at minute 0; an XID at 0:30 and the GPU lost at 0:40 (one
        // stretch); nothing recorded for minutes 1–9; idle 10–14; busy at 15.
        let faults = vec![fault("A", 30_000, "xid"), fault("A", 40_000, "gpu_lost")];
        let mut d = Downtime::new(faults, &mut names);
        let rate = 0.001;
        let mut feed = |at: i64, busy: bool| {
            let g = minute(&mut names, "A", None, 1.0, at, busy);
            d.minute(&g, &names, 0.1, rate);
        };
        feed(0, true);
        for m in 10..15 {
            feed(m * M, false);
        }
        feed(15 * M, true);
        feed(16 * M, true);
        let out = d.finish(&names, 60 * M, rate);
        assert_eq!(out.len(), 1, "{out:?}");
        let s = &out[0];
        assert_eq!((s.faults, s.until_ms, s.fault.kind.as_str()), (2, Some(15 * M), "xid"));
        assert!((s.gpu_hours - 0.25).abs() < 1e-12, "{s:?}");
        assert!((s.recorded_gpu_hours - 6.0 / 60.0).abs() < 1e-12, "minute 0 and 10–14: {s:?}");
        // Six recorded minutes at 0.1, nine unrecorded at 60 s × 0.001.
        assert!((s.unrecorded_cost - 9.0 * 60.0 * rate).abs() < 1e-9, "{s:?}");
        assert!((s.cost - (0.6 + 0.54)).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn a_gpu_never_back_is_down_to_the_end_and_a_parents_fault_takes_each_instance() {
        let mut names = Names::default();
        let faults = vec![fault("P", 5 * M + 1, "ecc_dbe"), fault("B", 2 * M, "gpu_lost")];
        let mut d = Downtime::new(faults, &mut names);
        // Two instances of P, 1/7 each: I1 busy again at minute 8, I2 never.
        for m in 0..20 {
            let i1 = minute(&mut names, "I1", Some("P"), 1.0 / 7.0, m * M, !(5..8).contains(&m));
            d.minute(&i1, &names, 0.0, 0.0);
            let i2 = minute(&mut names, "I2", Some("P"), 1.0 / 7.0, m * M, m < 5);
            d.minute(&i2, &names, 0.0, 0.0);
        }
        // B: no minute at all in the period; down from minute 2 to the end.
        let out = d.finish(&names, 20 * M, 0.5);
        let got: Vec<(&str, Option<i64>, f64)> = out
            .iter()
            .map(|s| (s.gpu_uuid.as_str(), s.until_ms, (s.gpu_hours * 60.0 * 7.0).round()))
            .collect();
        // I1: minutes 5–7 (3 × 1/7 GPU-minute); I2: 5–19 (15); B: 18 whole minutes.
        assert_eq!(got, [("B", None, 18.0 * 7.0), ("I1", Some(8 * M), 3.0), ("I2", None, 15.0)]);
        assert!(out.iter().all(|s| s.fault.gpu_uuid == "P" || s.gpu_uuid == "B"));
        let b = &out[0];
        assert!((b.cost - 18.0 * 60.0 * 0.5).abs() < 1e-9, "unrecorded at the default rate: {b:?}");
        let sum = DownSum::of(&out);
        assert_eq!(sum.still_down, 2);
        assert!((sum.gpu_hours - (18.0 + 18.0 / 7.0) / 60.0).abs() < 1e-12, "{sum:?}");
    }
}
