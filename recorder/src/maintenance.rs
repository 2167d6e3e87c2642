//! Upkeep of a data folder once a day closes: compaction of closed days
//! ([`crate::compact`]), then retention ([`crate::retention`]), under one
//! lock so that two recorders, or a recorder and `apron-recorder compact`,
//! never work on the same folder at once.
//!
//! The live recorder runs it in a background thread when the UTC date
//! changes ([`DailyMaintenance`]), so ticks go on while a day is merged;
//! `apron-recorder compact` runs it on demand ([`run`]).

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread::JoinHandle;

use apron_schemas::DataLayout;
use apron_schemas::time::DAY_MS;
use chrono::NaiveDate;
use tracing::{info, warn};

use crate::compact::{Compacted, compact};
use crate::data_lock::DataLock;
use crate::maintenance_error::MaintenanceError;
use crate::retention::{Removed, RetentionOutcome, RetentionPolicy, apply_retention};

/// What one maintenance run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    /// Partitions merged into one file each.
    pub compacted: Vec<Compacted>,
    /// Partitions removed as expired.
    pub removed: Vec<Removed>,
    /// Expired partitions held because they are not shipped yet.
    pub held: Vec<std::path::PathBuf>,
}

/// [`run`] as of now: today (UTC) is the first day left open, and the
/// clock names the merged files.
pub fn run_now(
    layout: &DataLayout,
    host: Option<&str>,
    retention: Option<&RetentionPolicy>,
) -> Result<MaintenanceReport, MaintenanceError> {
    let now = chrono::Utc::now();
    run(layout, host, now.date_naive(), retention, now.timestamp_millis())
}

/// Compacts every closed day (before `today`, UTC) of `host` (every host
/// when `None`), then removes the day partitions `retention` says have
/// expired (`None`: keep everything). Holds the data folder's lock
/// throughout. When this returns `Ok`, every partition it names is merged
/// or gone, durably.
pub fn run(
    layout: &DataLayout,
    host: Option<&str>,
    today: NaiveDate,
    retention: Option<&RetentionPolicy>,
    now_ms: i64,
) -> Result<MaintenanceReport, MaintenanceError> {
    if !layout.root().is_dir() {
        return Err(MaintenanceError::Io {
            op: "open the data folder",
            path: layout.root().to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotFound, "no such folder"),
        });
    }
    let lock = DataLock::acquire(layout)?;
    let compacted = compact(layout, host, today, now_ms, &lock)?;
    let kept = match retention {
        Some(policy) => apply_retention(layout, host, today, policy, &lock)?,
        None => RetentionOutcome::default(),
    };
    Ok(MaintenanceReport { compacted, removed: kept.removed, held: kept.held })
}

/// Runs [`run`] in a background thread each time the recorder's UTC date
/// changes, one run at a time, for one host. The tick loop calls
/// [`DailyMaintenance::on_tick`] after each tick's rows reached the writer
/// (so the day before is closed by then).
#[derive(Debug)]
pub struct DailyMaintenance {
    layout: DataLayout,
    host: String,
    retention: RetentionPolicy,
    /// The UTC day (days since the epoch) of the last tick seen.
    day: Option<i64>,
    running: Option<JoinHandle<()>>,
    /// The `today` (days since the epoch) of the last run that succeeded:
    /// every day before it is compacted. [`NEVER`] before the first.
    compacted_before: Arc<AtomicI64>,
}

/// [`DailyMaintenance::compacted_before`] before any run succeeded.
pub const NEVER: i64 = i64::MIN;

impl DailyMaintenance {
    /// Maintenance of `host`'s partitions under `layout` with `retention`.
    pub fn new(layout: DataLayout, host: &str, retention: RetentionPolicy) -> Self {
        let compacted_before = Arc::new(AtomicI64::new(NEVER));
        Self { layout, host: host.to_owned(), retention, day: None, running: None, compacted_before }
    }

    /// The UTC day (days since the epoch) before which every day of this
    /// host is compacted, as of the last run that succeeded ([`NEVER`]
    /// before one): the shipper ships no day at or after it, so it never
    /// ships a day whose last file is still being written or merged.
    pub fn compacted_before(&self) -> Arc<AtomicI64> {
        Arc::clone(&self.compacted_before)
    }

    /// Called with each tick's time: starts a run in the background when the
    /// tick is on a new UTC day (and at the first tick, to catch up after
    /// downtime), unless the previous run is still going.
    pub fn on_tick(&mut self, ts_ms: i64) {
        let day = ts_ms.div_euclid(DAY_MS);
        if self.day == Some(day) {
            return;
        }
        self.day = Some(day);
        if self.running.as_ref().is_some_and(|h| !h.is_finished()) {
            warn!("the previous day's compaction is still running; skipping this one");
            return;
        }
        if let Some(done) = self.running.take() {
            let _ = done.join();
        }
        let Some(today) = chrono::DateTime::from_timestamp_millis(ts_ms).map(|t| t.date_naive()) else {
            return;
        };
        let (layout, host, retention) = (self.layout.clone(), self.host.clone(), self.retention);
        let compacted_before = Arc::clone(&self.compacted_before);
        let spawned = std::thread::Builder::new().name("apron-compact".into()).spawn(move || {
            match run(&layout, Some(&host), today, Some(&retention), ts_ms) {
                Ok(report) => {
                    compacted_before.store(day, Ordering::Release);
                    for c in &report.compacted {
                        info!(table = %c.table, date = %c.date, host = %c.host, files = c.files, rows = c.rows,
                            "compacted a closed day");
                    }
                    for r in &report.removed {
                        info!(table = %r.table, date = %r.date, "removed an expired day");
                    }
                    if !report.held.is_empty() {
                        warn!(held = report.held.len(), first = %report.held[0].display(),
                            "kept expired days: they are not shipped yet, and stay on disk until they are");
                    }
                }
                Err(e) => {
                    warn!(error = %apron_store::error_chain::format_chain(&e), "cannot compact closed days; trying again tomorrow")
                }
            }
        });
        match spawned {
            Ok(handle) => self.running = Some(handle),
            Err(e) => warn!(error = %e, "cannot start the compaction thread; trying again tomorrow"),
        }
    }

    /// Waits for a run in progress to finish (at shutdown, so a merge is
    /// not cut short; a cut-short merge is harmless but wasted).
    pub fn finish(&mut self) {
        if let Some(handle) = self.running.take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_succeeds_says_which_days_are_compacted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ts = 1_796_083_200_000 + 5_000; // 2026-12-01T00:00:05Z
        let mut daily = DailyMaintenance::new(DataLayout::new(tmp.path()), "n1", RetentionPolicy::default());
        let compacted = daily.compacted_before();
        assert_eq!(compacted.load(Ordering::Acquire), NEVER);
        daily.on_tick(ts);
        daily.finish();
        assert_eq!(compacted.load(Ordering::Acquire), ts / DAY_MS, "every day before 2026-12-01");
        // A run that fails (no data folder) leaves it as it was.
        let missing = DataLayout::new(tmp.path().join("missing"));
        let mut failing = DailyMaintenance::new(missing, "n1", RetentionPolicy::default());
        let never = failing.compacted_before();
        failing.on_tick(ts);
        failing.finish();
        assert_eq!(never.load(Ordering::Acquire), NEVER);
    }
}
