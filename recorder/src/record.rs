//! A recording run, start to end: what `apron-recorder` does when it is
//! not asked to simulate or compact. It blocks the stop signals, finds the
//! host name, opens the source, takes the recorder's lock, recovers what a
//! crash left in the write-ahead log, then ticks until SIGTERM or SIGINT
//! and writes the last rows. `main.rs` parses the flags into
//! [`RecordOptions`] and calls [`record`].

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use apron_schemas::{DataLayout, PathError};
use apron_store::error_chain::format_chain;
use apron_store::recover::recover;
use apron_store::source::Source;
use apron_store::source::sim::SimHost;
use apron_store::write_error::WriteError;
use apron_store::writer::RollingWriter;

use crate::kubernetes::{KubeCounters, KubeSources, Kubernetes};
use crate::lock::{LockError, RecorderLock};
use crate::maintenance::DailyMaintenance;
use crate::metrics::{MetricsServer, ServeError};
use crate::retention::RetentionPolicy;
use crate::ship::live::LiveShipper;
use crate::slurm::{SlurmLookups, SlurmOptions, SlurmResolver};
use crate::source::nvml::{NvmlOpenError, NvmlSource};
use crate::stop_signal::StopSignals;
use crate::tick;
use apron_store::remote::Remote;

/// How long a stopping recorder waits for an upload in flight.
const SHIP_STOP_WAIT: Duration = Duration::from_secs(2);

/// Where samples come from: `Nvml`, the real GPUs through NVML, or `Sim`, a
/// simulated host ([`SimHost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SourceKind {
    // No doc comments on the values: clap would print them and switch
    // `--help` to its long layout.
    Nvml,
    Sim,
}

/// How to record: the recorder's flags, parsed.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The data folder.
    pub data: PathBuf,
    /// Where samples come from.
    pub source: SourceKind,
    /// Time between samples.
    pub interval: Duration,
    /// How long each file spans before it closes.
    pub rotate: Duration,
    /// How often the write-ahead log is synced to disk.
    pub sync: Duration,
    /// Most rows held in memory while the disk refuses writes.
    pub buffer_rows: usize,
    /// How often the one-line health summary is logged.
    pub health_every: Duration,
    /// The host name to record under; `None`: this machine's.
    pub host: Option<String>,
    /// GPUs of the simulated host (with [`SourceKind::Sim`]).
    pub sim_gpus: usize,
    /// Seed of the simulated host (with [`SourceKind::Sim`]).
    pub sim_seed: u64,
    /// Path of the NVML library; `None`: the driver's.
    pub nvml_lib: Option<PathBuf>,
    /// How long the daily maintenance keeps each table's days.
    pub retention: RetentionPolicy,
    /// How often shipping (when on) looks for closed days not shipped yet.
    pub ship_every: Duration,
    /// Where to serve `/metrics`; `None`: not served.
    pub metrics: Option<SocketAddr>,
    /// The idle threshold (%) of `/metrics`' GPU-minute states.
    pub idle_threshold_pct: f64,
    /// Where to ask Slurm about the jobs of GPU processes (with
    /// [`SourceKind::Nvml`]); `None`: Slurm is not asked.
    pub slurm: Option<SlurmOptions>,
    /// Where the kubelet's sources are (with [`SourceKind::Nvml`]).
    pub kubernetes: KubeSources,
}

/// Recording could not start, or could not write its last rows.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The stop signals could not be blocked.
    #[error("cannot block SIGTERM and SIGINT for the tick loop")]
    Signals(#[source] io::Error),
    /// This machine's host name could not be read.
    #[error("cannot read this machine's host name; pass --host")]
    ReadHostName(#[source] nix::Error),
    /// This machine's host name cannot be a partition folder.
    #[error("this machine's host name cannot name a folder; pass --host NAME")]
    MachineHostName(#[source] PathError),
    /// The host name given cannot be a partition folder.
    #[error(transparent)]
    Host(PathError),
    /// NVML could not be opened.
    #[error(transparent)]
    Nvml(#[from] NvmlOpenError),
    /// The Slurm lookup thread could not start.
    #[error("cannot start the thread that asks Slurm about jobs")]
    Slurm(#[source] io::Error),
    /// The thread that looks up Kubernetes names could not start.
    #[error("cannot start the thread that reads the kubelet's pod names")]
    Kubernetes(#[source] io::Error),
    /// Another recorder records this host into this data folder.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The shipping thread could not start.
    #[error("cannot start shipping from {}", data.display())]
    Ship {
        /// The data folder.
        data: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// `/metrics` could not be served.
    #[error(transparent)]
    Metrics(#[from] ServeError),
    /// The writer or its write-ahead log could not start.
    #[error(transparent)]
    Writer(#[from] WriteError),
    /// The rows held at the end could not be written.
    #[error("cannot write the last rows under {}", data.display())]
    LastRows {
        /// The data folder.
        data: PathBuf,
        /// The cause.
        #[source]
        source: WriteError,
    },
}

/// Records until SIGTERM or SIGINT, shipping closed days to `ship` when
/// given ([`LiveShipper`]). When this returns `Ok`, every sampled row is in
/// Parquet under `opts.data`.
pub fn record(opts: &RecordOptions, ship: Option<Remote>) -> Result<(), RecordError> {
    // Before any thread starts (NVML's, the WAL's sync thread), so every
    // thread inherits the blocked mask and the stop signals reach only the
    // tick loop's wait.
    let signals = StopSignals::block().map_err(RecordError::Signals)?;
    let host = host_name(opts.host.as_deref())?;
    let layout = DataLayout::new(&opts.data);
    let now_ms = chrono::Utc::now().timestamp_millis();
    // Off the tick: the tick only reads what it has cached.
    let slurm = match (&opts.slurm, opts.source) {
        (Some(slurm), SourceKind::Nvml) => {
            Some(SlurmResolver::start(slurm.clone()).map_err(RecordError::Slurm)?)
        }
        _ => None,
    };
    let lookups = slurm.as_ref().map(SlurmResolver::lookups);
    let (mut source, kubernetes) = open_source(opts, &host, now_ms, lookups.clone())?;
    // Before anything touches the WAL (and after the source opened, so a
    // machine without a driver is told so and left untouched): a second recorder would replay and
    // delete the first one's open segment.
    let _lock = RecorderLock::acquire(&layout.recorder_lock_path(&host), &host)?;
    // What a crash left in the WAL goes to Parquet before anything new is
    // recorded, under the names the crashed writer would have used.
    match recover(&layout, &host) {
        Ok(r) if r.segments > 0 => tracing::info!(
            segments = r.segments,
            recovered = r.recovered,
            empty = r.empty,
            kept = r.kept,
            files = r.files,
            gpu_rows = r.gpu_rows,
            proc_rows = r.proc_rows,
            torn_bytes = r.torn_bytes,
            quarantined = r.quarantined,
            bad_frames = r.bad_frames,
            refused_rows = r.refused_rows,
            "recovered the write-ahead log"
        ),
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %format_chain(&e), "cannot recover the write-ahead log; recording anyway")
        }
    }
    let mut maintenance = DailyMaintenance::new(layout.clone(), &host, opts.retention);
    let mut shipper = ship
        .map(|remote| {
            LiveShipper::start(
                layout.clone(),
                &host,
                remote,
                opts.ship_every,
                maintenance.compacted_before(),
                opts.retention,
            )
        })
        .transpose()
        .map_err(|source| RecordError::Ship { data: opts.data.clone(), source })?;
    let mut metrics = match opts.metrics {
        Some(addr) => {
            let pci = source.pci_bus_ids();
            let served =
                MetricsServer::start(addr, &host, pci, layout.wal_dir(&host), opts.idle_threshold_pct)?;
            tracing::info!(addr = %served.0.addr(), "serving /metrics");
            Some(served)
        }
        None => None,
    };
    let mut writer =
        RollingWriter::new(layout, &host, opts.rotate)?.with_wal(opts.sync)?.with_max_rows(opts.buffer_rows);
    tracing::info!(host = %host, data = %opts.data.display(), source = ?opts.source, interval = ?opts.interval, rotate = ?opts.rotate, sync = ?opts.sync, "recording");
    let ran = tick::run_with_maintenance(
        &signals,
        source.as_mut(),
        &mut writer,
        opts.interval,
        opts.health_every,
        tick::Companions {
            maintenance: Some(&mut maintenance),
            shipper: shipper.as_ref(),
            metrics: metrics.as_mut().map(|(_, publisher)| publisher),
            slurm: lookups.as_ref(),
            kubernetes,
        },
    );
    // The endpoint stops answering once the last rows are written.
    drop(metrics);
    if let Some(s) = shipper.as_mut() {
        s.stop(SHIP_STOP_WAIT);
    }
    ran.map_err(|source| RecordError::LastRows { data: opts.data.clone(), source })?;
    Ok(())
}

/// The host name to record under: `given`, else this machine's; either
/// must be able to name a partition folder.
pub fn host_name(given: Option<&str>) -> Result<String, RecordError> {
    match given {
        Some(h) => {
            apron_schemas::paths::validate_host(h).map_err(RecordError::Host)?;
            Ok(h.to_owned())
        }
        None => {
            let name = nix::unistd::gethostname().map_err(RecordError::ReadHostName)?;
            let name = name.to_string_lossy().into_owned();
            apron_schemas::paths::validate_host(&name).map_err(RecordError::MachineHostName)?;
            Ok(name)
        }
    }
}

/// Opens the source `opts` asks for, sampling `host`; a simulated host's
/// history starts at `now_ms`. The real GPUs' source takes its processes'
/// Slurm accounts from `slurm` when given, and looks processes in pods up
/// in the kubelet's sources (`opts.kubernetes`), on a thread of its own;
/// its counters come back for the health line.
pub fn open_source(
    opts: &RecordOptions,
    host: &str,
    now_ms: i64,
    slurm: Option<SlurmLookups>,
) -> Result<(Box<dyn Source>, Option<KubeCounters>), RecordError> {
    Ok(match opts.source {
        SourceKind::Sim => (Box::new(SimHost::new(host, opts.sim_gpus, opts.sim_seed, now_ms)), None),
        SourceKind::Nvml => {
            let mut nvml = NvmlSource::open(host.to_owned(), opts.nvml_lib.as_deref())?;
            if let Some(slurm) = slurm {
                nvml = nvml.with_slurm(slurm);
            }
            let kubernetes = Kubernetes::start(opts.kubernetes.clone()).map_err(RecordError::Kubernetes)?;
            let counters = kubernetes.counters();
            (Box::new(nvml.with_kubernetes(kubernetes)), Some(counters))
        }
    })
}
