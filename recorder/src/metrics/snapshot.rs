//! What a scrape serves ([`Snapshot`]) and the recorder's counters in it
//! ([`Health`]).

use apron_schemas::{GpuSample, ProcSample};

use super::minute::MinuteReport;
use crate::kubernetes::KubeHealth;
use crate::ship::live::ShipHealth;

/// The recorder's counters at one tick.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Health {
    /// Ticks sampled.
    pub ticks: u64,
    /// Ticks skipped because the loop woke too late.
    pub missed_ticks: u64,
    /// Per-GPU sampling failures.
    pub gpu_errors: u64,
    /// Of those, GPUs that did not answer in time.
    pub gpu_stalls: u64,
    /// Queries NVML refused (not supported, not permitted).
    pub refused_queries: u64,
    /// How long the last tick's sampling took, µs.
    pub sample_us: u64,
    /// Parquet files written.
    pub files: u64,
    /// `gpu_samples` rows written to Parquet.
    pub gpu_rows: u64,
    /// `proc_samples` rows written to Parquet.
    pub proc_rows: u64,
    /// Rows held in memory, not yet in Parquet.
    pub held_rows: u64,
    /// Rows dropped from memory while the disk refused writes.
    pub dropped_rows: u64,
    /// Of those, rows no WAL segment holds: lost.
    pub lost_rows: u64,
    /// Writes the disk refused.
    pub write_errors: u64,
    /// Failures of the write-ahead log.
    pub wal_errors: u64,
    /// Shipping's counters, when the recorder ships.
    pub ship: Option<ShipHealth>,
    /// The Kubernetes lookups' counters, when on (the real GPUs' source).
    pub k8s: Option<KubeHealth>,
}

/// What a scrape serves: the last tick, the minute states, the health.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The host recorded.
    pub host: String,
    /// The last tick's time, ms since the Unix epoch; `None` before the first.
    pub ts_ms: Option<i64>,
    /// The last tick's GPU rows.
    pub gpus: Vec<GpuSample>,
    /// The last tick's process rows.
    pub procs: Vec<ProcSample>,
    /// Each GPU's last full minute.
    pub minutes: Vec<MinuteReport>,
    /// The counters.
    pub health: Health,
    /// PCI bus id by GPU index, where the source knows it.
    pub pci_bus_ids: Vec<Option<String>>,
    /// Bytes of the host's WAL segments on disk (read by the scrape).
    pub wal_bytes: u64,
    /// Ticks at which a scrape held the snapshot, so that tick's copy waited for the next.
    pub late_copies: u64,
    /// Each GPU's last XID and error counters.
    pub faults: Vec<super::faults::GpuFaults>,
    /// The version of `faults` (copied only when it changed).
    pub faults_version: u64,
}

impl Snapshot {
    /// Copies `from` into `self`, reusing `self`'s buffers.
    pub(super) fn copy_from(&mut self, from: &Snapshot) {
        if self.host != from.host {
            self.host.clone_from(&from.host);
        }
        self.ts_ms = from.ts_ms;
        self.gpus.clone_from(&from.gpus);
        self.procs.clone_from(&from.procs);
        self.minutes.clone_from(&from.minutes);
        self.health = from.health;
        if self.pci_bus_ids != from.pci_bus_ids {
            self.pci_bus_ids.clone_from(&from.pci_bus_ids);
        }
        self.wal_bytes = from.wal_bytes;
        self.late_copies = from.late_copies;
        if self.faults_version != from.faults_version {
            self.faults.clone_from(&from.faults);
            self.faults_version = from.faults_version;
        }
    }
}
