//! Shipping while recording (`apron-recorder --ship s3://BUCKET/PREFIX`):
//! this host's closed days go to the bucket as soon as they are compacted.
//!
//! - **Never in the tick's way.** A thread of its own, with an async
//!   runtime of its own, does every request; the tick loop only reads its
//!   counters for the health line (`ship_shipped`, `ship_pending`,
//!   `ship_failed`, `ship_expired_pending`). A store that is down, slow or
//!   refusing costs retries here, never a tick.
//! - **Never silent.** Retention removes no day that is not shipped, so a
//!   store that keeps failing keeps expired days on disk: each failing pass
//!   says how many ([`ShipHealth::expired_pending`], also on the health line
//!   and `/metrics`), and the disk fills only with warnings all the way.
//! - **Passes.** Every `every` (`--ship-every`, default 1 min) a pass lists
//!   this host's closed partitions that the daily maintenance has compacted
//!   (the days before the `today` of its last run: a day's last file is
//!   written at midnight and merged after it, so a day is never shipped
//!   before it is whole), leaves out the marked ones
//!   ([`super::markers`]: no hashing, no request), ships the others oldest
//!   first exactly as `apron-recorder ship` does, and marks each one once
//!   the store confirmed it. A partition still holding several files waits
//!   for the daily compaction.
//! - **Backoff.** A pass stops at its first failure (a store refusing one
//!   file refuses the next), and the next pass comes after twice `every`,
//!   then four times, up to 64 times or 15 minutes, whichever is less; a
//!   good pass resets it.
//! - **Restarts.** The backlog is whatever closed partition has no marker
//!   naming its file, so a restart picks it up where it was; an upload cut
//!   short is never visible (a PUT is whole or absent, a multipart upload
//!   visible only once completed) and is done again.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use apron_schemas::DataLayout;
use apron_schemas::time::DAY_MS;
use apron_store::remote::Remote;
use tracing::{info, warn};

use super::{Partition, ShipReport, closed_partitions, markers, ship_partition};
use crate::maintenance::NEVER;
use crate::retention::{RetentionPolicy, is_expired};

/// The longest wait between failing passes.
const MAX_BACKOFF: Duration = Duration::from_secs(15 * 60);

/// Backoff doubles at most this many times.
const MAX_DOUBLINGS: u32 = 6;

/// What shipping has done since the recorder started, for the health line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShipHealth {
    /// Files uploaded and confirmed.
    pub shipped: u64,
    /// Closed partitions of this host not shipped yet, as of the last pass.
    pub pending: u64,
    /// Uploads, look-ups or removals that failed (each retried later).
    pub failed: u64,
    /// Of the pending partitions, those past their retention: kept on disk
    /// only because they are not shipped yet, as of the last pass.
    pub expired_pending: u64,
}

#[derive(Debug, Default)]
struct Shared {
    shipped: AtomicU64,
    pending: AtomicU64,
    failed: AtomicU64,
    expired_pending: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    fn stopping(&self) -> bool {
        *self.stop.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps `d`, or less when told to stop; whether to stop.
    fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stop = self.wake.wait_timeout(stop, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        *stop
    }
}

/// The shipping thread of a recording run.
#[derive(Debug)]
pub struct LiveShipper {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

/// The wait before the pass after `failures` failing passes in a row.
pub fn backoff(every: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return every;
    }
    every.saturating_mul(1 << failures.min(MAX_DOUBLINGS)).min(MAX_BACKOFF.max(every))
}

impl LiveShipper {
    /// Starts shipping `host`'s closed days under `layout` to `remote`, a
    /// pass every `every`. Creates `DATA/.ship` first, so retention holds
    /// back unshipped days from now on.
    ///
    /// `compacted_before` is the daily maintenance's
    /// ([`crate::maintenance::DailyMaintenance::compacted_before`]): days
    /// from it on are not shipped yet. `retention` is the maintenance's
    /// too: the pending days past it are counted apart.
    pub fn start(
        layout: DataLayout,
        host: &str,
        remote: Remote,
        every: Duration,
        compacted_before: Arc<AtomicI64>,
        retention: RetentionPolicy,
    ) -> std::io::Result<Self> {
        apron_store::create::create_dir_all(&layout.ship_root())?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let shared = Arc::new(Shared::default());
        let (thread_shared, host, url) = (Arc::clone(&shared), host.to_owned(), remote.url().to_owned());
        let handle = std::thread::Builder::new().name("apron-ship".into()).spawn(move || {
            let mut failures = 0u32;
            loop {
                let compacted = compacted_before.load(Ordering::Acquire);
                let first_open = chrono::DateTime::from_timestamp_millis(compacted.saturating_mul(DAY_MS))
                    .map(|t| t.date_naive())
                    .filter(|_| compacted != NEVER);
                let outcome = match first_open {
                    Some(today) => {
                        runtime.block_on(pass(&layout, &host, &remote, today, &retention, &thread_shared))
                    }
                    // The first maintenance run is still going.
                    None => Ok(()),
                };
                match outcome {
                    Ok(()) => failures = 0,
                    Err(e) => {
                        failures = failures.saturating_add(1);
                        warn!(error = %e, retry_in = ?backoff(every, failures), failures,
                            pending = thread_shared.pending.load(Ordering::Relaxed),
                            expired_pending = thread_shared.expired_pending.load(Ordering::Relaxed),
                            "cannot ship closed days; recording goes on and shipping is retried (days past retention stay on disk until shipped)");
                    }
                }
                if thread_shared.sleep(backoff(every, failures)) {
                    break;
                }
            }
        })?;
        info!(to = %url, every = ?every, "shipping closed days");
        Ok(Self { shared, handle: Some(handle) })
    }

    /// The counters so far.
    pub fn health(&self) -> ShipHealth {
        ShipHealth {
            shipped: self.shared.shipped.load(Ordering::Relaxed),
            pending: self.shared.pending.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
            expired_pending: self.shared.expired_pending.load(Ordering::Relaxed),
        }
    }

    /// Tells the thread to stop and waits at most `wait` for it: between
    /// files it stops at once; an upload in flight is left unfinished (it
    /// is never visible so, and is done again at the next start).
    pub fn stop(&mut self, wait: Duration) {
        *self.shared.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        let deadline = Instant::now() + wait;
        while self.handle.as_ref().is_some_and(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        match self.handle.take() {
            Some(h) if h.is_finished() => {
                let _ = h.join();
            }
            Some(_) => info!("an upload is still in flight at shutdown; it is done again at the next start"),
            None => {}
        }
    }
}

impl Drop for LiveShipper {
    fn drop(&mut self) {
        *self.shared.stop.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
    }
}

/// One pass: ships `host`'s closed partitions not marked shipped to
/// `remote`, oldest first; stops at the first failure (its one-line cause).
/// Counts the pending ones, and of those the ones past `retention`.
async fn pass(
    layout: &DataLayout,
    host: &str,
    remote: &Remote,
    today: chrono::NaiveDate,
    retention: &RetentionPolicy,
    shared: &Shared,
) -> Result<(), String> {
    let partitions = closed_partitions(layout, None, today, Some(host)).inspect_err(|_| {
        shared.failed.fetch_add(1, Ordering::Relaxed);
    })?;
    let mut todo: Vec<_> = partitions
        .iter()
        .filter(|p| {
            !p.files.is_empty() && !markers::is_shipped(layout, p.table, p.date, &p.host, Some(remote.url()))
        })
        .collect();
    todo.sort_by(|a, b| (a.date, &a.relative).cmp(&(b.date, &b.relative)));
    shared.pending.store(todo.len() as u64, Ordering::Relaxed);
    // Against the clock's today, as retention's run at midnight is.
    let now = chrono::Utc::now().date_naive();
    let expired = |p: &Partition| is_expired(p.date, now, retention.days(p.table));
    shared.expired_pending.store(todo.iter().filter(|p| expired(p)).count() as u64, Ordering::Relaxed);
    for partition in todo {
        if shared.stopping() {
            return Ok(());
        }
        if partition.files.len() > 1 {
            // Not compacted yet: the daily maintenance merges it first.
            continue;
        }
        let mut report = ShipReport::default();
        ship_partition(remote, partition, &mut report).await;
        if let Some(first) = report.failed.first() {
            shared.failed.fetch_add(report.failed.len() as u64, Ordering::Relaxed);
            return Err(first.clone());
        }
        for (url, bytes) in &report.shipped {
            info!(url = %url, bytes, "shipped a closed day's file");
        }
        for url in &report.removed {
            info!(url = %url, "removed an object its partition no longer has");
        }
        shared.shipped.fetch_add(report.shipped.len() as u64, Ordering::Relaxed);
        if let Err(e) = super::mark(layout, remote, partition) {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
        shared.pending.fetch_sub(1, Ordering::Relaxed);
        if expired(partition) {
            shared.expired_pending.fetch_sub(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_the_pass_interval_and_is_capped() {
        let s = Duration::from_secs;
        assert_eq!(backoff(s(60), 0), s(60));
        assert_eq!(backoff(s(60), 1), s(120));
        assert_eq!(backoff(s(60), 3), s(480));
        assert_eq!(backoff(s(60), 5), s(900), "15 minutes at most");
        assert_eq!(backoff(s(1), 6), s(64));
        assert_eq!(backoff(s(1), 60), s(64), "64 times the interval at most");
        assert_eq!(backoff(s(3600), 2), s(3600), "never less than the interval");
    }
}
