//! Where samples come from. A [`Source`] samples every GPU and GPU process of
//! one host when the tick loop asks; it never reads the clock itself (the
//! loop passes the tick time in), so a simulated month runs through the same
//! code in seconds.
//!
//! Two implementations: the recorder's `NvmlSource` (the real GPUs, in
//! `apron_recorder::source::nvml`, the only module that imports
//! `nvml_wrapper`) and [`sim::SimHost`] here (a seeded, deterministic
//! simulated host, used by the demo and the tests).

pub mod sim;

use apron_schemas::{AllocSample, GpuEvent, GpuSample, ProcSample};

/// What one tick of one host produced.
#[derive(Debug, Default, Clone)]
pub struct Tick {
    /// One row per GPU that answered.
    pub gpus: Vec<GpuSample>,
    /// One row per (GPU, process).
    pub procs: Vec<ProcSample>,
    /// One row per (GPU, holder): the pods and Slurm jobs the cluster had
    /// allocated each GPU to at the tick, whether or not they run a
    /// process on it (empty outside a cluster).
    pub allocations: Vec<AllocSample>,
    /// The GPUs' events since the tick before: the driver's (an XID, an
    /// ECC error), a GPU lost or back, error counters that moved.
    pub events: Vec<GpuEvent>,
    /// The error counters read this tick, every one whether it moved or
    /// not (`kind`, `detail`, `value`; once a minute per GPU): what
    /// `/metrics` serves. Not written: `events` holds those that moved.
    pub readings: Vec<GpuEvent>,
    /// GPUs that could not be sampled this tick. The others are still in
    /// `gpus`: one GPU failing never stops the recording of the rest.
    pub failures: Vec<GpuFailure>,
    /// Queries the source asked and was refused this tick (NVML: not
    /// supported, not permitted, not in this driver), their values
    /// recorded as unknown.
    pub refusals: u32,
}

impl Tick {
    /// Empties the tick for reuse, keeping its allocations.
    pub fn clear(&mut self) {
        self.gpus.clear();
        self.procs.clear();
        self.allocations.clear();
        self.events.clear();
        self.readings.clear();
        self.failures.clear();
        self.refusals = 0;
    }
}

/// A GPU that could not be sampled at one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuFailure {
    /// NVML index of the GPU.
    pub gpu_index: u32,
    /// Its UUID, when it was known from an earlier tick.
    pub gpu_uuid: Option<String>,
    /// What failed, for the log (e.g. "cannot read utilization: GPU is lost").
    pub error: String,
    /// Whether the GPU did not answer in time (a call blocked in the driver)
    /// rather than answered with an error.
    pub stalled: bool,
}

/// A sampler of one host's GPUs and GPU processes.
pub trait Source {
    /// The host name the samples belong to (the `host` partition).
    fn host(&self) -> &str;

    /// Samples every GPU and GPU process once, for the tick at `ts_ms`
    /// (milliseconds since the Unix epoch, UTC) that stands for
    /// `interval_ms`, appending to `out`. Per-GPU problems go into
    /// `out.failures`; this never fails as a whole once the source is open.
    fn sample(&mut self, ts_ms: i64, interval_ms: i32, out: &mut Tick);

    /// The GPUs' PCI bus ids by index (`00000000:07:00.0`, as NVML writes
    /// them; `None` where unknown), read once when the source opened;
    /// empty when the source has none.
    fn pci_bus_ids(&self) -> Vec<Option<String>> {
        Vec::new()
    }

    /// Moves the GPUs' events that arrived since the last tick (or the
    /// last call) to `out`; [`Source::sample`] takes them into its tick
    /// too. A source without events between ticks has none.
    fn take_events(&mut self, _out: &mut Vec<GpuEvent>) {}

    /// Asks the source to call `wake` whenever an event arrives between
    /// ticks, so the caller takes it ([`Source::take_events`]) and makes it
    /// durable at once rather than at the next tick.
    fn wake_on_events(&mut self, _wake: std::sync::Arc<dyn Fn() + Send + Sync>) {}
}
