//! `apron-recorder simulate`: writes D days of a simulated fleet through the
//! same source trait and writer as live recording, as fast as the machine
//! allows. Hosts are independent, so they are spread over the cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use apron_schemas::DataLayout;
use chrono::NaiveDate;

use crate::source::sim::{SimFleet, SimHost};
use crate::source::{Source, Tick};
use crate::write_error::WriteError;
use crate::writer::{RollingWriter, WriterStats};
use apron_schemas::time::DAY_MS;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Where to write.
    pub layout: DataLayout,
    /// GPUs in the fleet (8 per host).
    pub gpus: usize,
    /// Days to simulate, from `start` 00:00 UTC.
    pub days: u32,
    /// First simulated day (UTC).
    pub start: NaiveDate,
    /// Seed of the fleet: the same seed gives the same files.
    pub seed: u64,
    /// Time between samples.
    pub interval: Duration,
    /// How long each file spans (files also close at UTC midnight).
    pub rotate: Duration,
    /// Worker threads (hosts are simulated in parallel).
    pub threads: usize,
}

/// What a simulation wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimulateStats {
    /// Hosts simulated.
    pub hosts: usize,
    /// Files, rows written over all hosts.
    pub written: WriterStats,
}

/// Simulates and writes. `progress(done, total)` is called now and then
/// with simulated GPU-seconds done and in all, from any worker thread.
pub fn simulate(
    opts: &SimulateOptions,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<SimulateStats, WriteError> {
    let start_ms = opts.start.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc().timestamp_millis();
    let end_ms = start_ms + i64::from(opts.days) * DAY_MS;
    let interval_ms = i64::try_from(opts.interval.as_millis()).unwrap_or(i64::MAX).max(1);
    let hosts = SimFleet::new(opts.gpus, opts.seed, start_ms).into_hosts();
    let n_hosts = hosts.len();
    let ticks = u64::try_from((end_ms - start_ms) / interval_ms).unwrap_or(0);
    let total = ticks * opts.gpus as u64;
    let done = AtomicU64::new(0);

    // Hand hosts out to workers round-robin; each worker runs its hosts
    // one after the other so only one host's open file is in memory per
    // worker.
    let threads = opts.threads.clamp(1, n_hosts.max(1));
    let mut shares: Vec<Vec<SimHost>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, h) in hosts.into_iter().enumerate() {
        shares[i % threads].push(h);
    }
    let results: Vec<Result<WriterStats, WriteError>> = thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                let done = &done;
                scope.spawn(move || {
                    let mut sum = WriterStats::default();
                    for mut host in share {
                        let s = run_host(&mut host, opts, start_ms, end_ms, interval_ms, &|gpu_ticks| {
                            let d = done.fetch_add(gpu_ticks, Ordering::Relaxed) + gpu_ticks;
                            progress(d, total);
                        })?;
                        sum.files += s.files;
                        sum.gpu_rows += s.gpu_rows;
                        sum.proc_rows += s.proc_rows;
                    }
                    Ok(sum)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a simulation worker does not panic")).collect()
    });
    let mut stats = SimulateStats { hosts: n_hosts, written: WriterStats::default() };
    for r in results {
        let s = r?;
        stats.written.files += s.files;
        stats.written.gpu_rows += s.gpu_rows;
        stats.written.proc_rows += s.proc_rows;
    }
    Ok(stats)
}

fn run_host(
    host: &mut SimHost,
    opts: &SimulateOptions,
    start_ms: i64,
    end_ms: i64,
    interval_ms: i64,
    progress: &dyn Fn(u64),
) -> Result<WriterStats, WriteError> {
    let mut writer = RollingWriter::new(opts.layout.clone(), host.host(), opts.rotate)?;
    let row_interval = i32::try_from(interval_ms).unwrap_or(i32::MAX);
    let mut tick = Tick::default();
    let mut pending_gpu_ticks = 0u64;
    let mut ts = start_ms;
    while ts < end_ms {
        tick.clear();
        host.sample(ts, row_interval, &mut tick);
        writer.push(ts, &tick)?;
        pending_gpu_ticks += tick.gpus.len() as u64;
        if pending_gpu_ticks >= 100_000 {
            progress(pending_gpu_ticks);
            pending_gpu_ticks = 0;
        }
        ts += interval_ms;
    }
    writer.close()?;
    progress(pending_gpu_ticks);
    Ok(writer.stats())
}
