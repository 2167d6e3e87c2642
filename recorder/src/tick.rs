//! The live tick loop: wakes on a grid aligned to the wall clock (every
//! `interval` since the epoch, so ticks do not drift and line up across
//! hosts), samples the source, hands the rows to the writer, and on SIGTERM
//! or SIGINT writes everything held and returns.
//!
//! Time is read here and only here; sources get it passed in. The loop
//! sleeps in [`StopSignals::sleep`]: one wake-up per tick, and at once on a
//! stop signal.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apron_schemas::time::MINUTE_MS;
use apron_store::error_chain::format_chain;
use tracing::{error, info, warn};

use crate::kubernetes::{KubeCounters, KubeHealth};
use crate::maintenance::DailyMaintenance;
use crate::metrics::{Health, Publisher};
use crate::ship::live::{LiveShipper, ShipHealth};
use crate::slurm::{SlurmHealth, SlurmLookups};
use crate::stop_signal::{StopSignals, Wake};
use apron_store::source::{Source, Tick};
use apron_store::write_error::WriteError;
use apron_store::writer::{RollingWriter, WriterStats};

/// How often a write the disk keeps refusing is logged again.
const WRITE_LOG_EVERY_MS: i64 = MINUTE_MS;

/// How often the one-line health summary is logged by default.
pub const DEFAULT_HEALTH_EVERY: Duration = Duration::from_secs(300);

/// How often a GPU that keeps failing is logged again.
const FAILURE_LOG_EVERY_MS: i64 = MINUTE_MS;

/// What a recording run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Ticks sampled.
    pub ticks: u64,
    /// Ticks skipped because the loop woke too late (a suspended machine, a
    /// stalled disk); their time is unrecorded, not invented.
    pub ticks_missed: u64,
    /// Per-GPU sampling failures (one GPU at one tick).
    pub gpu_failures: u64,
    /// Of `gpu_failures`, those of a GPU that did not answer in time (a
    /// call blocked in the driver).
    pub gpu_stalls: u64,
    /// Queries the source was refused (not supported, not permitted, not
    /// in this driver); their values are recorded as unknown.
    pub refusals: u64,
    /// GPU events received (XID, ECC, lost and back, counters that moved).
    pub events: u64,
    /// The longest a source's sampling took at one tick, µs.
    pub sample_us_max: u64,
    /// Writes that failed and were retried later.
    pub write_errors: u64,
    /// What the writer wrote.
    pub written: WriterStats,
}

/// The next tick at or after `now_ms` on the grid of `interval_ms`,
/// strictly after `last_ms` (the previous tick) when there was one. A clock
/// that stepped back by more than two intervals is followed, not waited out.
pub fn next_tick(now_ms: i64, interval_ms: i64, last_ms: Option<i64>) -> i64 {
    let aligned = now_ms.div_euclid(interval_ms) * interval_ms;
    let next = if aligned < now_ms { aligned + interval_ms } else { aligned };
    match last_ms {
        Some(last) if next <= last && last - now_ms <= 2 * interval_ms => last + interval_ms,
        _ => next,
    }
}

fn now_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// Records from `source` into `writer` every `interval` until SIGTERM or
/// SIGINT, then closes the open file. When this returns `Ok`, every sample
/// taken is durable on disk.
pub fn run(
    signals: &StopSignals,
    source: &mut dyn Source,
    writer: &mut RollingWriter,
    interval: Duration,
) -> Result<RunStats, WriteError> {
    run_with_maintenance(signals, source, writer, interval, DEFAULT_HEALTH_EVERY, Companions::default())
}

/// What runs beside the tick loop, each optional.
#[derive(Debug, Default)]
pub struct Companions<'a> {
    /// Compacts closed days and applies retention after each UTC midnight.
    pub maintenance: Option<&'a mut DailyMaintenance>,
    /// Ships closed days (on its own thread); the health line counts it.
    pub shipper: Option<&'a LiveShipper>,
    /// Serves each tick at `/metrics`.
    pub metrics: Option<&'a mut Publisher>,
    /// Asks Slurm about jobs (on its own thread); the health line counts it.
    pub slurm: Option<&'a SlurmLookups>,
    /// Looks up Kubernetes names (on its own thread); the health line
    /// counts it.
    pub kubernetes: Option<KubeCounters>,
}

/// [`run`], also compacting closed days and applying retention in the
/// background each time the UTC date changes (and at the first tick), via
/// `with.maintenance`; a run in progress is waited for at shutdown. The
/// health line also counts what `with.shipper` (running on its own) has
/// shipped; each tick and the counters go to `with.metrics`.
pub fn run_with_maintenance(
    signals: &StopSignals,
    source: &mut dyn Source,
    writer: &mut RollingWriter,
    interval: Duration,
    health_every: Duration,
    with: Companions<'_>,
) -> Result<RunStats, WriteError> {
    let Companions { mut maintenance, shipper, mut metrics, slurm, kubernetes } = with;
    let interval_ms = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX).max(1);
    let row_interval = i32::try_from(interval_ms).unwrap_or(i32::MAX);
    let mut stats = RunStats::default();
    let mut tick = Tick::default();
    let mut last: Option<i64> = None;
    let mut last_failure_log: HashMap<u32, i64> = HashMap::new();
    let mut last_write_warning: Option<i64> = None;
    let health_every_ms = i64::try_from(health_every.as_millis()).unwrap_or(i64::MAX).max(1);
    let mut last_health = now_ms();
    // Events that arrive between ticks are written as they arrive.
    source.wake_on_events(signals.waker());
    let mut events = Vec::new();

    loop {
        let now = now_ms();
        let ts = next_tick(now, interval_ms, last);
        let wait = Duration::from_millis(u64::try_from(ts - now).unwrap_or(0));
        match signals.sleep(wait) {
            Ok(Wake::Deadline) => {}
            Ok(Wake::Events) => {
                events.clear();
                source.take_events(&mut events);
                if !events.is_empty() {
                    stats.events += events.len() as u64;
                    writer.push_events(now_ms(), &events);
                    if let Some(publisher) = metrics.as_deref_mut() {
                        publisher.events(&events);
                    }
                }
                continue;
            }
            Ok(Wake::Stop(signal)) => {
                info!(%signal, "stop signal: writing what is held");
                break;
            }
            Err(source) => {
                return Err(WriteError::Io {
                    op: "wait for the next tick of",
                    path: writer.host().into(),
                    source,
                });
            }
        }
        if let Some(prev) = last {
            stats.ticks_missed += u64::try_from((ts - prev) / interval_ms - 1).unwrap_or(0);
        }
        last = Some(ts);
        tick.clear();
        let sampling = std::time::Instant::now();
        source.sample(ts, row_interval, &mut tick);
        let sample_us = u64::try_from(sampling.elapsed().as_micros()).unwrap_or(u64::MAX);
        stats.sample_us_max = stats.sample_us_max.max(sample_us);
        stats.ticks += 1;
        stats.refusals += u64::from(tick.refusals);
        stats.events += tick.events.len() as u64;
        for f in &tick.failures {
            stats.gpu_failures += 1;
            stats.gpu_stalls += u64::from(f.stalled);
            let logged = last_failure_log.get(&f.gpu_index).copied();
            if logged.is_none_or(|t| ts - t >= FAILURE_LOG_EVERY_MS) {
                last_failure_log.insert(f.gpu_index, ts);
                warn!(gpu_index = f.gpu_index, gpu_uuid = f.gpu_uuid.as_deref().unwrap_or("?"), error = %f.error,
                    failures = stats.gpu_failures, "cannot sample GPU; the others keep recording");
            }
        }
        if let Err(e) = writer.push(ts, &tick) {
            stats.write_errors += 1;
            if last_write_warning.is_none_or(|t| ts - t >= WRITE_LOG_EVERY_MS || ts < t) {
                last_write_warning = Some(ts);
                let w = writer.stats();
                warn!(error = %format_chain(&e), held_rows = writer.pending_rows(), dropped_rows = w.dropped_rows,
                    lost_rows = w.lost_rows, write_errors = w.write_errors, "cannot write; sampling goes on into memory and the write is retried");
            }
        } else if last_write_warning.is_some() && !writer.refusing() {
            // Only after a write that succeeded and emptied the backlog: a
            // tick that retried nothing proves nothing.
            last_write_warning = None;
            info!(files = writer.stats().files, "writing works again; caught up");
        }
        if let Some(publisher) = metrics.as_deref_mut() {
            let k8s = kubernetes.as_ref().map(KubeCounters::health);
            publisher.publish(ts, &tick, &health_now(&stats, sample_us, writer, shipper, k8s));
        }
        if ts - last_health >= health_every_ms || ts < last_health {
            last_health = ts;
            log_health(
                &stats,
                writer,
                shipper.map(LiveShipper::health),
                slurm.map(SlurmLookups::health),
                kubernetes.as_ref().map(KubeCounters::health),
            );
        }
        // After the push: at the first tick of a day, the day before is closed.
        if let Some(m) = maintenance.as_deref_mut() {
            m.on_tick(ts);
        }
    }
    if let Err(e) = writer.close() {
        // The segments of the rows not written stay for recovery at the
        // next start; say exactly what waits there and what is lost.
        let h = writer.held();
        let w = writer.stats();
        error!(error = %format_chain(&e), ticks = stats.ticks, in_wal_rows = h.wal_rows, in_wal_ticks = h.wal_ticks,
            lost_rows = h.rows - h.wal_rows.min(h.rows), lost_ticks = h.ticks - h.wal_ticks.min(h.ticks),
            dropped_lost_rows = w.lost_rows,
            "cannot write the last rows; those in the WAL reach Parquet at the next start, the others are lost");
        return Err(e);
    }
    // The rows first; then let a merge in progress finish rather than leave
    // it for the next start to clear away.
    if let Some(m) = maintenance {
        m.finish();
    }
    stats.written = writer.stats();
    info!(
        ticks = stats.ticks,
        missed = stats.ticks_missed,
        files = stats.written.files,
        gpu_rows = stats.written.gpu_rows,
        proc_rows = stats.written.proc_rows,
        "recorder stopped; all rows written"
    );
    Ok(stats)
}

/// The counters `/metrics` serves, at this tick.
fn health_now(
    stats: &RunStats,
    sample_us: u64,
    writer: &RollingWriter,
    shipper: Option<&LiveShipper>,
    k8s: Option<KubeHealth>,
) -> Health {
    let w = writer.stats();
    Health {
        ticks: stats.ticks,
        missed_ticks: stats.ticks_missed,
        gpu_errors: stats.gpu_failures,
        gpu_stalls: stats.gpu_stalls,
        refused_queries: stats.refusals,
        sample_us,
        files: w.files,
        gpu_rows: w.gpu_rows,
        proc_rows: w.proc_rows,
        held_rows: writer.pending_rows() as u64,
        dropped_rows: w.dropped_rows,
        lost_rows: w.lost_rows,
        write_errors: w.write_errors,
        wal_errors: writer.wal_stats().unwrap_or_default().errors,
        ship: shipper.map(LiveShipper::health),
        k8s,
    }
}

/// The periodic one-line health summary: is the recorder keeping up, and
/// is anything being lost.
fn log_health(
    stats: &RunStats,
    writer: &RollingWriter,
    ship: Option<ShipHealth>,
    slurm: Option<SlurmHealth>,
    k8s: Option<KubeHealth>,
) {
    let w = writer.stats();
    let wal = writer.wal_stats().unwrap_or_default();
    let ship = ship.unwrap_or_default();
    let slurm = slurm.unwrap_or_default();
    let k8s = k8s.unwrap_or_default();
    info!(
        ticks = stats.ticks,
        missed_ticks = stats.ticks_missed,
        gpu_rows = w.gpu_rows,
        proc_rows = w.proc_rows,
        files = w.files,
        held_rows = writer.pending_rows(),
        dropped_rows = w.dropped_rows,
        lost_rows = w.lost_rows,
        write_errors = w.write_errors,
        gpu_errors = stats.gpu_failures,
        gpu_stalls = stats.gpu_stalls,
        refused_queries = stats.refusals,
        gpu_events = stats.events,
        sample_ms_max = stats.sample_us_max as f64 / 1000.0,
        wal_bytes = writer.wal_bytes_on_disk(),
        wal_errors = wal.errors,
        ship_shipped = ship.shipped,
        ship_pending = ship.pending,
        ship_failed = ship.failed,
        ship_expired_pending = ship.expired_pending,
        slurm_asked = slurm.asked,
        slurm_known = slurm.known,
        slurm_unknown = slurm.unknown,
        slurm_failed = slurm.failed,
        slurm_timeouts = slurm.timeouts,
        slurm_listed = slurm.listed,
        slurm_list_failed = slurm.list_failed,
        k8s_pods = k8s.pods,
        k8s_allocated_devices = k8s.allocated_devices,
        k8s_unresolved = k8s.unresolved,
        k8s_log_errors = k8s.log_errors,
        k8s_kubelet_errors = k8s.kubelet_errors,
        k8s_labelled_pods = k8s.labelled_pods,
        k8s_label_errors = k8s.label_errors,
        "health"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_snap_to_the_interval_grid() {
        assert_eq!(next_tick(10_250, 1_000, None), 11_000);
        assert_eq!(next_tick(11_000, 1_000, None), 11_000);
        assert_eq!(next_tick(12_345, 5_000, None), 15_000);
    }

    #[test]
    fn a_tick_is_never_repeated_even_if_the_clock_steps_back() {
        assert_eq!(next_tick(10_999, 1_000, Some(11_000)), 12_000);
    }

    #[test]
    fn a_clock_that_jumped_back_is_followed_not_waited_out() {
        assert_eq!(next_tick(5_000, 1_000, Some(11_000)), 5_000);
    }

    #[test]
    fn a_late_wakeup_skips_missed_ticks_rather_than_bunching_them() {
        assert_eq!(next_tick(15_200, 1_000, Some(11_000)), 16_000);
    }
}
