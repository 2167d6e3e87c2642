//! The real GPUs of this host, through NVML (`libnvidia-ml`, the NVIDIA
//! driver's management library). This module and the ones under it are the
//! only ones that import `nvml_wrapper`.
//!
//! This module owns loading and initialising NVML (once per process), the
//! driver's version and what it implies ([`driver`]), and each tick: it
//! asks every GPU for its sample on the sampling threads ([`worker`],
//! [`gpu`]: one for all GPUs while their calls are quick), and
//! waits until a deadline so that one GPU stuck in the driver stalls only
//! its own rows, resolves who the processes are through
//! [`crate::identity`] (their Slurm job's account through
//! [`crate::slurm`]'s cache, and, in pods, their names through
//! [`crate::kubernetes`]'s, never waiting for either), and reports what
//! NVML refused once per GPU and kind (and counts it at every tick). The
//! clock and the tick come from the tick loop; the deadline is measured on
//! the monotonic clock.
//!
//! NVML's calls are slow (the process queries take milliseconds and the
//! driver's lock), so each is made at most once per GPU per tick; the PCIe
//! throughput call, which measures over 20 ms, is replaced by the PCIe byte
//! counters where the driver has them.

pub mod counters;
pub mod driver;
pub mod events;
pub mod gpu;
pub mod process_util;
mod raw;
mod worker;

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use apron_schemas::{AllocSample, GpuEvent, Holder, ProcSample, gpu_events};
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

pub use self::driver::ProcessCall;
use self::events::Inbox;
pub use self::events::Registration;
pub use self::gpu::PCIE_THROUGHPUT_EVERY;
use self::gpu::{GpuState, Outcome, Request, Spare, to_i64};
use self::worker::{Answer, Pool};
use crate::identity::IdentityCache;
use crate::kubernetes::Kubernetes;
use crate::slurm::SlurmLookups;
use apron_store::source::{GpuFailure, Source, Tick};

/// The library names tried, in order, when no path is given. Machines
/// without the driver's development package have only the versioned name.
const DEFAULT_LIBS: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// The share of the tick's interval a tick waits for the GPUs' answers; a
/// GPU that has not answered by then is stalled for this tick.
const DEADLINE_SHARE: (u32, u32) = (3, 4);

/// After this many ticks in a row at which every GPU failed (handles
/// fetched afresh included), NVML itself is re-initialised: a driver
/// reloaded under it answers nothing until then. Repeated every as many
/// ticks while they keep failing.
pub const REOPEN_NVML_AFTER_TICKS: u32 = 5;

/// The process's one NVML instance, leaked once initialised.
///
/// Why leaked: every `Device<'nvml>` borrows the `Nvml` it came from, and
/// the source must hold both, which safe Rust cannot do in one struct. NVML
/// is process-wide state anyway (the design initialises it once per
/// process), and the recorder samples until it exits, so a `&'static Nvml`
/// costs one allocation and only skips `nvmlShutdown` at exit, whose
/// resources the driver releases with the process.
static NVML: Mutex<Option<&'static Nvml>> = Mutex::new(None);

/// NVML could not be opened. Each message names what was being opened;
/// NVML's own error is the [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
pub enum NvmlOpenError {
    /// No NVML library could be loaded (not installed, or not NVML).
    #[error(
        "cannot load {tried}, the NVIDIA driver's NVML library (libnvidia-ml): is the NVIDIA driver \
         installed? On a machine without NVIDIA GPUs, record a simulated host with `--source sim`"
    )]
    LibraryMissing {
        /// The names or the path tried, in order.
        tried: String,
        /// Why the last one failed to load.
        #[source]
        source: NvmlError,
    },
    /// NVML loaded but the NVIDIA kernel driver is not running.
    #[error(
        "cannot initialise NVML from {lib}: the NVIDIA kernel driver is not loaded (does `nvidia-smi` \
         work?). On a machine without NVIDIA GPUs, record a simulated host with `--source sim`"
    )]
    DriverNotLoaded {
        /// The library that loaded.
        lib: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// The library and the running kernel driver are different versions:
    /// the driver was updated and the old one still runs.
    #[error(
        "cannot initialise NVML from {lib}: the NVML library and the running NVIDIA kernel driver are \
         different versions (the driver was updated without a reboot): reboot, or reload the driver \
         (unload and load the nvidia kernel modules)"
    )]
    VersionMismatch {
        /// The library that loaded.
        lib: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// NVML loaded but its initialisation failed otherwise.
    #[error("cannot initialise NVML from {lib}")]
    Init {
        /// The library that loaded.
        lib: String,
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// NVML would not say how many GPUs there are.
    #[error("cannot count the GPUs through NVML")]
    DeviceCount {
        /// NVML's error.
        #[source]
        source: NvmlError,
    },
    /// The GPUs' sampling thread could not be started.
    #[error("cannot start the thread that samples the GPUs through NVML")]
    Thread {
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
}

/// The real GPUs of this host, through NVML.
#[derive(Debug)]
pub struct NvmlSource {
    host: String,
    /// The driver's version, as NVML gives it; `None` when it would not.
    driver_version: Option<String>,
    /// The GPUs, by NVML index, and the threads that sample them.
    workers: Pool<GpuState, Request, Outcome>,
    /// Per NVML index: whether a cgroup hides the GPU (reported once, then
    /// not asked again).
    hidden: Vec<bool>,
    /// The UUID each GPU last answered with, for stalled GPUs' failures.
    uuids: Vec<Option<apron_schemas::Text>>,
    /// Per NVML index, the GPU's PCI bus id, read once at open (`None`:
    /// NVML would not say).
    pci_bus_ids: Vec<Option<String>>,
    /// The NVML index of each GPU by Slurm's index (`IDX`) of it
    /// ([`slurm_order`]), read once at open.
    slurm_order: Vec<u32>,
    /// Whether the Slurm allocations of a node with MIG were warned about.
    warned_slurm_mig: bool,
    /// (GPU index, query, NVML's words) already warned about: a handful,
    /// looked up without allocating a key.
    warned: Vec<(u32, &'static str, String)>,
    /// Per GPU, the buffers of its last answer, handed back with its
    /// next request.
    spare: Vec<Spare>,
    /// The answers of a tick, kept for the next tick's.
    answers: Vec<Answer<Outcome>>,
    identities: IdentityCache,
    /// What Slurm says about the jobs of the processes (account, partition);
    /// `None`: not asked.
    slurm: Option<SlurmLookups>,
    /// Kubernetes names of processes in pods, when looked up.
    kubernetes: Option<Kubernetes>,
    /// Counts `sample` calls: the sampling rounds.
    round: u64,
    /// The sampling threads at the last tick, to log when more start.
    lanes: usize,
    nvml: &'static Nvml,
    /// Ticks in a row at which every GPU asked failed.
    all_failed_ticks: u32,
    /// The driver's events, as the event thread receives them.
    inbox: Arc<Inbox>,
    /// What the event thread registered, per GPU.
    registrations: Vec<Registration>,
    /// Per GPU, since when it has been down (lost, or blocked in the driver
    /// for [`DOWN_AFTER_STALLED_TICKS`]): a `gpu_lost` event was written, and
    /// its next answer is a `gpu_back` one.
    down: Vec<Option<i64>>,
}

/// A GPU blocked in an NVML call for this many ticks is down: a `gpu_lost`
/// event (one slow call is not).
pub const DOWN_AFTER_STALLED_TICKS: u64 = 10;

impl NvmlSource {
    /// Initialises NVML (once per process), reads the driver's version and
    /// starts the thread that samples the GPUs (more start only when
    /// NVML's calls are slow or one blocks).
    ///
    /// `lib_path` is the NVML library to load; `None` tries
    /// `libnvidia-ml.so.1`, then `libnvidia-ml.so`, through the dynamic
    /// loader's search path. NVML is initialised by the first successful
    /// call in a process; later calls reuse it and ignore `lib_path`.
    ///
    /// A GPU whose handle cannot be had is not an error: it is reported as
    /// a [`GpuFailure`] at each tick until it answers, or once when a cgroup
    /// hides it.
    pub fn open(host: String, lib_path: Option<&Path>) -> Result<NvmlSource, NvmlOpenError> {
        let nvml = init(lib_path)?;
        let count = nvml.device_count().map_err(|source| NvmlOpenError::DeviceCount { source })?;
        if count == 0 {
            tracing::warn!("NVML reports no GPUs on this host");
        }
        let driver_version = nvml.sys_driver_version().ok();
        let process_call = match &driver_version {
            Some(v) => ProcessCall::for_driver(v),
            None => {
                tracing::warn!("NVML does not say the driver's version; reading process lists the usual way");
                ProcessCall::V3
            }
        };
        tracing::info!(
            driver = driver_version.as_deref().unwrap_or("?"),
            gpus = count,
            process_call = ?process_call,
            "NVML opened"
        );
        // Read once: a GPU does not move while the driver has it.
        // Each GPU's PCI bus id (for /metrics) and device file's minor
        // number (Slurm's order of GPUs), with one handle each.
        // The same handles register the GPUs' events.
        let devices: Vec<_> = (0..count).map(|index| nvml.device_by_index(index)).collect();
        let (pci_bus_ids, minors): (Vec<Option<String>>, Vec<Option<u32>>) = devices
            .iter()
            .map(|device| match device {
                Ok(d) => (d.pci_info().map(|p| p.bus_id).ok(), d.minor_number().ok()),
                Err(_) => (None, None),
            })
            .unzip();
        let slurm_order = slurm_order(&minors);
        let states = (0..count).map(|index| GpuState::new(nvml, index, process_call)).collect();
        let workers = Pool::spawn("nvml-lane", states, GpuState::sample)
            .map_err(|source| NvmlOpenError::Thread { source })?;
        let n = workers.len();
        let inbox = Arc::new(Inbox::default());
        let registrations = events::spawn(nvml, devices, Arc::clone(&inbox));
        Ok(NvmlSource {
            host,
            driver_version,
            workers,
            hidden: vec![false; n],
            uuids: vec![None; n],
            pci_bus_ids,
            slurm_order,
            warned_slurm_mig: false,
            warned: Vec::new(),
            spare: (0..n).map(|_| Spare::default()).collect(),
            answers: Vec::with_capacity(n),
            identities: IdentityCache::new(),
            slurm: None,
            kubernetes: None,
            round: 0,
            lanes: 1,
            nvml,
            all_failed_ticks: 0,
            inbox,
            registrations,
            down: vec![None; n],
        })
    }

    /// Takes each process's Slurm account from Slurm's answers in `slurm`
    /// (for a process whose cgroup puts it in a Slurm job); without it,
    /// `slurm_account` stays unknown.
    pub fn with_slurm(mut self, slurm: SlurmLookups) -> NvmlSource {
        self.slurm = Some(slurm);
        self
    }

    /// Fills the trusted Kubernetes fields of processes in pods
    /// (`k8s_namespace`, `k8s_pod_name`, `k8s_container`) from `kubernetes`,
    /// which looks them up on a thread of its own.
    pub fn with_kubernetes(mut self, kubernetes: Kubernetes) -> NvmlSource {
        self.kubernetes = Some(kubernetes);
        self
    }

    /// The Kubernetes lookups, when on: their answer's allocations
    /// ([`Kubernetes::allocations`]).
    pub fn kubernetes(&self) -> Option<&Kubernetes> {
        self.kubernetes.as_ref()
    }

    /// What the event thread registered for each GPU (XID, ECC events…).
    pub fn event_registrations(&self) -> &[Registration] {
        &self.registrations
    }

    /// Writes a `gpu_lost` event of GPU `i` at `ts_ms` unless it is down
    /// already (or its UUID was never known).
    fn went_down(&mut self, i: usize, ts_ms: i64, detail: String, out: &mut Tick) {
        if self.down[i].is_some() {
            return;
        }
        let Some(uuid) = self.uuids[i].clone() else { return };
        self.down[i] = Some(ts_ms);
        tracing::warn!(gpu_index = i, gpu_uuid = %uuid, %detail, "GPU down: recorded as a gpu_lost event");
        out.events.push(GpuEvent {
            ts: ts_ms,
            gpu_uuid: uuid,
            gpu_index: i32::try_from(i).unwrap_or(i32::MAX),
            kind: gpu_events::GPU_LOST.into(),
            detail: Some(detail.into()),
            ..GpuEvent::default()
        });
    }

    /// The NVIDIA driver's version (`"550.54.15"`), `None` when NVML would
    /// not say.
    pub fn driver_version(&self) -> Option<&str> {
        self.driver_version.as_deref()
    }

    /// Shuts NVML down and initialises it again, after a driver reload (or
    /// anything else that left every GPU failing); the workers fetch fresh
    /// handles at their next tick. Called only while no worker is in NVML.
    fn reopen_nvml(&mut self) {
        let lib = self.nvml.lib();
        let inbox = Arc::clone(&self.inbox);
        let result = inbox.outside_nvml(|| {
            let reopened = nvml_wrapper::error::nvml_sym(lib.nvmlShutdown.as_ref()).and_then(|shutdown| {
                let init = nvml_wrapper::error::nvml_sym(lib.nvmlInit_v2.as_ref())?;
                // SAFETY: plain calls without arguments into the loaded NVML.
                // No other thread is in NVML (every worker has answered and
                // waits for its next request; the event thread is kept out);
                // the handles and GPM samples the workers hold are only ever
                // passed back to NVML, which answers stale ones with an
                // error, upon which they are fetched again.
                unsafe {
                    // An NVML already shut down by the reload says so; init
                    // is what matters.
                    let _ = shutdown();
                    nvml_wrapper::error::nvml_try(init())
                }
            });
            if reopened.is_ok() {
                // The event thread's set is the old driver's: it registers
                // again before it waits again.
                inbox.nvml_reopened();
            }
            reopened
        });
        match result {
            Ok(()) => tracing::warn!(
                ticks = self.all_failed_ticks,
                "every GPU kept failing: NVML re-initialised (a driver reload or a reset under it?)"
            ),
            Err(error) => tracing::warn!(%error, ticks = self.all_failed_ticks,
                "every GPU keeps failing, and NVML cannot be re-initialised; trying again later"),
        }
    }

    /// Warns once per GPU, query and NVML answer.
    fn warn_once(&mut self, gpu_index: u32, query: &'static str, error: &str) -> bool {
        if self.warned.iter().any(|(g, q, e)| *g == gpu_index && *q == query && e == error) {
            return false;
        }
        self.warned.push((gpu_index, query, error.to_owned()));
        true
    }
}

/// Returns the process's NVML, initialising it on first use.
fn init(lib_path: Option<&Path>) -> Result<&'static Nvml, NvmlOpenError> {
    // A panic while holding the lock cannot leave a half-set `Option`.
    let mut held = NVML.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(nvml) = *held {
        return Ok(nvml);
    }
    let candidates: Vec<&OsStr> = match lib_path {
        Some(path) => vec![path.as_os_str()],
        None => DEFAULT_LIBS.iter().map(OsStr::new).collect(),
    };
    let mut missing = None;
    for lib in &candidates {
        match Nvml::builder().lib_path(lib).init() {
            Ok(nvml) => {
                let nvml: &'static Nvml = Box::leak(Box::new(nvml));
                *held = Some(nvml);
                return Ok(nvml);
            }
            // Not there, or not NVML (no `nvmlInit_v2`): try the next name.
            Err(error @ (NvmlError::LibloadingError(_) | NvmlError::FailedToLoadSymbol(_))) => {
                missing = Some(error);
            }
            Err(source @ NvmlError::DriverNotLoaded) => {
                return Err(NvmlOpenError::DriverNotLoaded {
                    lib: lib.to_string_lossy().into_owned(),
                    source,
                });
            }
            Err(source @ NvmlError::LibRmVersionMismatch) => {
                return Err(NvmlOpenError::VersionMismatch {
                    lib: lib.to_string_lossy().into_owned(),
                    source,
                });
            }
            Err(source) => {
                return Err(NvmlOpenError::Init { lib: lib.to_string_lossy().into_owned(), source });
            }
        }
    }
    let tried = candidates.iter().map(|c| c.to_string_lossy()).collect::<Vec<_>>().join(" or ");
    let source = missing.expect("every candidate failed to load, and there is at least one");
    Err(NvmlOpenError::LibraryMissing { tried, source })
}

impl Source for NvmlSource {
    fn host(&self) -> &str {
        &self.host
    }

    fn take_events(&mut self, out: &mut Vec<GpuEvent>) {
        self.inbox.take(out);
    }

    fn wake_on_events(&mut self, wake: Arc<dyn Fn() + Send + Sync>) {
        self.inbox.set_wake(wake);
    }

    fn pci_bus_ids(&self) -> Vec<Option<String>> {
        self.pci_bus_ids.clone()
    }

    fn sample(&mut self, ts_ms: i64, interval_ms: i32, out: &mut Tick) {
        self.identities.next_tick();
        if let Some(k) = self.kubernetes.as_mut() {
            k.begin_tick();
        }
        self.round += 1;
        let wait_ms = u64::try_from(interval_ms).unwrap_or(0) * u64::from(DEADLINE_SHARE.0)
            / u64::from(DEADLINE_SHARE.1);
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let (hidden, spare) = (&self.hidden, &mut self.spare);
        let mut answers = std::mem::take(&mut self.answers);
        let request = |i: usize| {
            (!hidden[i]).then(|| Request { ts_ms, interval_ms, spare: std::mem::take(&mut spare[i]) })
        };
        self.workers.round(self.round, request, deadline, &mut answers);
        if self.workers.lanes() != self.lanes {
            self.lanes = self.workers.lanes();
            tracing::info!(
                threads = self.lanes,
                gpus = self.workers.len(),
                "NVML sampling now runs on more threads (a GPU's calls are slow, or one is blocked in the driver)"
            );
        }
        let failed = answers.iter().filter(|a| matches!(a, Answer::Done(Outcome::Failed { .. }))).count();
        let asked = answers.iter().filter(|a| !matches!(a, Answer::Idle)).count();
        // Only when every worker answered: none is inside NVML meanwhile.
        if asked > 0 && failed == asked {
            self.all_failed_ticks += 1;
            if self.all_failed_ticks.is_multiple_of(REOPEN_NVML_AFTER_TICKS) {
                self.reopen_nvml();
            }
        } else {
            self.all_failed_ticks = 0;
        }

        // Who the processes are, with the whole tick's pids seen first (a
        // namespace mismatch is judged on all of them).
        self.identities.observe(
            answers
                .iter()
                .flat_map(|a| match a {
                    Answer::Done(Outcome::Sampled { procs, .. }) => procs.as_slice(),
                    _ => &[],
                })
                .filter_map(|p| i32::try_from(p.pid).ok()),
        );
        // Slurm's answers as cached now; a job not asked about yet is
        // queued, and its processes' account stays unknown until it answers.
        let lookups = self.slurm.clone();
        let mut slurm = lookups.as_ref().map(SlurmLookups::view);
        let first_proc = out.procs.len();
        for (i, answer) in answers.drain(..).enumerate() {
            let gpu_index = u32::try_from(i).unwrap_or(u32::MAX);
            match answer {
                Answer::Done(Outcome::Sampled { rows, procs, refusals, mut events, mut readings }) => {
                    let Some(row) = rows.first() else { continue };
                    if self.uuids[i].as_ref() != Some(&row.gpu_uuid) {
                        self.uuids[i] = Some(row.gpu_uuid.clone());
                    }
                    if let Some(since) = self.down[i].take() {
                        tracing::info!(gpu_index, gpu_uuid = %row.gpu_uuid, down_s = (ts_ms - since) / 1000,
                            "GPU answers again: recorded as a gpu_back event");
                        out.events.push(GpuEvent {
                            ts: ts_ms,
                            gpu_uuid: row.gpu_uuid.clone(),
                            gpu_index: row.gpu_index,
                            kind: gpu_events::GPU_BACK.into(),
                            value: Some((ts_ms - since) / 1000),
                            detail: Some("seconds down in value".into()),
                            ..GpuEvent::default()
                        });
                    }
                    out.events.append(&mut events);
                    out.readings.append(&mut readings);
                    for refusal in &refusals {
                        out.refusals += 1;
                        if self.warn_once(gpu_index, refusal.query, &refusal.error) {
                            tracing::warn!(gpu_index, gpu_uuid = %row.gpu_uuid, error = %refusal.error,
                                "NVML refuses {}: recorded as unknown (this warning is not repeated; \
                                 the health line counts them)", refusal.query);
                        }
                    }
                    for p in &procs {
                        // Host pids are below the kernel's pid_max (at most 2^22).
                        let Ok(pid) = i32::try_from(p.pid) else { continue };
                        let Some(on) = rows.get(p.row) else { continue };
                        let mut identity = self.identities.identity(pid).clone();
                        // The job from the kernel (its cgroup), its account
                        // and partition from Slurm: never from the
                        // process's environment.
                        if let (Some(view), Some(job_id)) = (slurm.as_mut(), identity.slurm_job_id.as_deref())
                            && let Some(job) = view.job(job_id)
                        {
                            identity.slurm_account = job.account.clone();
                            identity.slurm_partition = job.partition.clone();
                        }
                        out.procs.push(ProcSample {
                            ts: ts_ms,
                            gpu_uuid: on.gpu_uuid.clone(),
                            pid,
                            interval_ms,
                            identity,
                            used_mem_bytes: p.used_mem_bytes.and_then(to_i64),
                            sm_util_pct: p.sm_util_pct,
                            mem_util_pct: p.mem_util_pct,
                        });
                    }
                    out.gpus.extend(rows.iter().cloned());
                    // Back to the worker with the next request, to be filled again.
                    self.spare[i] = Spare { rows, procs, refusals, events, readings };
                }
                Answer::Done(Outcome::Failed { uuid, error, lost }) => {
                    if let Some(uuid) = &uuid {
                        self.uuids[i] = Some(uuid.as_str().into());
                    }
                    if lost {
                        self.went_down(i, ts_ms, error.clone(), out);
                    }
                    // Without a handle it cannot say; it was the same GPU.
                    let gpu_uuid = uuid.or_else(|| self.uuids[i].as_deref().map(str::to_owned));
                    out.failures.push(GpuFailure { gpu_index, gpu_uuid, error, stalled: false });
                }
                Answer::Done(Outcome::Hidden { error }) => {
                    self.hidden[i] = true;
                    tracing::warn!(gpu_index, %error,
                        "GPU not accessible to the recorder (hidden by its cgroup or container): not recorded, \
                         and not asked again until the recorder restarts");
                }
                Answer::TimedOut => out.failures.push(GpuFailure {
                    gpu_index,
                    gpu_uuid: self.uuids[i].as_deref().map(str::to_owned),
                    error: format!(
                        "no answer from NVML within {wait_ms} ms: a call is blocked in the driver (after an Xid \
                         or a driver hang?); its rows are missing until it answers"
                    ),
                    stalled: true,
                }),
                Answer::Stalled { since } => {
                    let ticks = self.round - since;
                    if ticks >= DOWN_AFTER_STALLED_TICKS {
                        let detail = format!("no answer for {ticks} ticks: an NVML call is blocked in the driver");
                        self.went_down(i, ts_ms, detail, out);
                    }
                    out.failures.push(GpuFailure {
                        gpu_index,
                        gpu_uuid: self.uuids[i].as_deref().map(str::to_owned),
                        error: format!("still blocked in an NVML call, for {ticks} ticks"),
                        stalled: true,
                    });
                }
                Answer::Idle => {}
            }
        }
        drop(slurm);
        self.answers = answers;
        self.inbox.take(&mut out.events);
        // With the whole tick's processes at hand: the join by GPU must
        // see every pod on a GPU.
        if let (Some(k), Some(rows)) = (self.kubernetes.as_mut(), out.procs.get_mut(first_proc..)) {
            k.fill_rows(rows);
        }
        // The cluster's books: which pods and jobs hold which GPUs, with
        // or without a process on them.
        if let Some(k) = self.kubernetes.as_ref() {
            k.push_allocations(ts_ms, interval_ms, &out.gpus, &mut out.allocations);
        }
        if let Some(lookups) = lookups.as_ref() {
            self.push_slurm_allocations(lookups, ts_ms, interval_ms, first_proc, out);
        }
    }
}

impl NvmlSource {
    /// Appends the GPUs Slurm allocated to the jobs running here (listed
    /// by `squeue`, or running a process this tick) to `out.allocations`,
    /// each Slurm index mapped to its GPU by [`slurm_order`]. On a node
    /// with GPUs in MIG mode Slurm's indexes count MIG devices, which this
    /// does not map: nothing is recorded, and that is warned about once.
    fn push_slurm_allocations(
        &mut self,
        lookups: &SlurmLookups,
        ts_ms: i64,
        interval_ms: i32,
        first_proc: usize,
        out: &mut Tick,
    ) {
        let mut met: Vec<&str> = Vec::new();
        for p in out.procs.get(first_proc..).unwrap_or_default() {
            if let Some(job) = p.identity.slurm_job_id.as_deref()
                && !met.contains(&job)
            {
                met.push(job);
            }
        }
        let jobs = lookups.allocations(&met);
        if jobs.is_empty() {
            return;
        }
        if out.gpus.iter().any(|g| g.parent_gpu_uuid.is_some()) {
            if !std::mem::replace(&mut self.warned_slurm_mig, true) {
                tracing::warn!(
                    "GPUs here are in MIG mode, where Slurm's GPU indexes count MIG devices: the \
                    GPUs Slurm allocated to jobs are not recorded on this node (processes still name their job)"
                );
            }
            return;
        }
        for job in jobs {
            for idx in &job.gpu_indexes {
                let Some(&index) = self.slurm_order.get(*idx as usize) else { continue };
                let Some(row) = out.gpus.iter().find(|g| i64::from(g.gpu_index) == i64::from(index)) else {
                    continue;
                };
                out.allocations.push(AllocSample {
                    ts: ts_ms,
                    interval_ms,
                    gpu_uuid: row.gpu_uuid.clone(),
                    gpu_index: row.gpu_index,
                    holder: Holder::slurm(
                        job.job_id.clone(),
                        job.account.clone(),
                        job.partition.clone(),
                        job.user.clone(),
                    ),
                });
            }
        }
    }
}

/// The NVML index of each GPU by Slurm's index of it: Slurm numbers a
/// node's GPUs in the order of their device files, `/dev/nvidiaN` by minor
/// number N (gres.conf `File=`, and AutoDetect=nvml sorts the same way), so
/// Slurm's `IDX` k is the GPU with the k-th smallest minor number. Where a
/// minor number is unknown, NVML's order stands (which it almost always
/// is: both follow the PCI bus).
pub fn slurm_order(minors: &[Option<u32>]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..minors.len() as u32).collect();
    if minors.iter().all(Option::is_some) {
        order.sort_by_key(|&i| minors[i as usize]);
    }
    order
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn missing_library_names_nvml_and_suggests_sim() {
        let path = Path::new("/nonexistent/apron-test/libnvidia-ml.so.1");
        let error = NvmlSource::open("node".into(), Some(path)).expect_err("no library at that path");
        let message = error.to_string();
        assert!(matches!(error, NvmlOpenError::LibraryMissing { .. }), "{error:?}");
        assert!(message.contains("/nonexistent/apron-test/libnvidia-ml.so.1"), "{message}");
        assert!(message.contains("libnvidia-ml"), "{message}");
        assert!(message.contains("--source sim"), "{message}");
        let cause = error.source().expect("the loader's error is kept").to_string();
        assert!(cause.contains("libnvidia-ml.so.1"), "{cause}");
    }

    #[test]
    fn slurm_numbers_gpus_by_minor_number() {
        // Minor numbers out of NVML's order (a board whose device files were
        // numbered otherwise): Slurm's IDX 0 is minor 0, NVML's GPU 2.
        assert_eq!(slurm_order(&[Some(2), Some(1), Some(0), Some(3)]), [2, 1, 0, 3]);
        assert_eq!(slurm_order(&[Some(4), Some(6), Some(5)]), [0, 2, 1], "gaps in the minors");
        assert_eq!(slurm_order(&[Some(1), None, Some(0)]), [0, 1, 2], "one unknown: NVML's order");
        assert!(slurm_order(&[]).is_empty());
    }
}
