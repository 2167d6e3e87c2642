//! Slurm jobs as Slurm describes them: a job's account, user and partition,
//! and the GPUs each job running on this node was allocated, asked of
//! Slurm itself (`scontrol`, `squeue`) on a thread of its own.
//!
//! A process's job id comes from its cgroup under Slurm's hierarchy
//! ([`crate::identity`], trusted); everything else about the job comes
//! from here. The tick only reads what this module has cached
//! ([`SlurmLookups::view`]): meeting a job id it has no answer for queues
//! the question and wakes the lookup thread, which runs `scontrol -d -o
//! show job ID` with a time limit ([`command`]), parses the record
//! ([`scontrol`]) and caches it per job. A job is asked about once; a
//! failure (a timeout, a controller that does not answer, a record that
//! cannot be read) is asked again with backoff; a job Slurm does not know
//! (ended and purged, or never was) again only after a while; a job unseen
//! for a while is forgotten. With `squeue`, the thread also lists this
//! node's running jobs every [`RUNNING_JOBS_EVERY`] and asks about the new
//! ones, so that [`SlurmLookups::allocations`] can say which GPUs each job
//! holds here, processes or not. Failures are counted
//! ([`SlurmHealth`], in the recorder's health line) and warned about once
//! per kind; none is fatal and none delays a tick.
//!
//! Which team a job's account belongs to is apron's config's business;
//! what the recorder does with allocations is the tick's.

pub mod command;
pub mod hostlist;
pub mod scontrol;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use apron_schemas::Text;

use self::command::Ran;
pub use self::scontrol::SlurmJob;

/// How long one `scontrol` or `squeue` may run before it is killed.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// How often this node's running jobs are listed (with `squeue`).
pub const RUNNING_JOBS_EVERY: Duration = Duration::from_secs(30);

/// The first wait before a failed question is asked again; it doubles at
/// each failure in a row, up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(5);

/// The longest wait before a failed question is asked again.
const RETRY_MAX: Duration = Duration::from_secs(300);

/// How long before a job Slurm did not know is asked about again.
const UNKNOWN_RETRY: Duration = Duration::from_secs(600);

/// A job neither met by the tick nor listed by `squeue` for this long is
/// forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(900);

/// Where and how to ask Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmOptions {
    /// The `scontrol` to run.
    pub scontrol: PathBuf,
    /// The `squeue` to run for this node's running jobs; `None`: not
    /// listed (allocations are then known only for jobs met by the tick).
    pub squeue: Option<PathBuf>,
    /// This node's name in Slurm (its `NodeName`).
    pub node: String,
    /// How long one command may run.
    pub timeout: Duration,
}

impl SlurmOptions {
    /// The options from the recorder's flags: `scontrol` is `given`
    /// (empty: off), else the `scontrol` found on `PATH` (none: off);
    /// `squeue` is the one beside that `scontrol`, if there is one; the
    /// node is `node`, else this machine's short host name. `Ok(None)`
    /// when Slurm lookups are off; an error when `given` is not an
    /// executable file.
    pub fn from_flags(
        given: Option<&Path>,
        off: bool,
        node: Option<&str>,
    ) -> Result<Option<SlurmOptions>, SlurmFlagError> {
        if off {
            return Ok(None);
        }
        let scontrol = match given {
            Some(path) if path.as_os_str().is_empty() => return Ok(None),
            Some(path) if !is_executable(path) => {
                return Err(SlurmFlagError::NotExecutable { path: path.to_path_buf() });
            }
            Some(path) => path.to_path_buf(),
            None => match find_on_path("scontrol") {
                Some(path) => path,
                None => return Ok(None),
            },
        };
        let squeue = Some(scontrol.with_file_name("squeue")).filter(|p| is_executable(p));
        let node = match node.map(str::to_owned).or_else(short_host_name) {
            Some(node) => node,
            None => return Err(SlurmFlagError::NoNodeName),
        };
        Ok(Some(SlurmOptions { scontrol, squeue, node, timeout: COMMAND_TIMEOUT }))
    }
}

/// The Slurm flags cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SlurmFlagError {
    /// `--scontrol PATH` names no executable file.
    #[error("--scontrol {}: no executable file there (--scontrol '' or --no-slurm turns Slurm lookups off)", path.display())]
    NotExecutable {
        /// The path given.
        path: PathBuf,
    },
    /// This machine's host name cannot be read to name its Slurm node.
    #[error("cannot read this machine's host name to name its Slurm node; pass --slurm-node NAME")]
    NoNodeName,
}

/// `name` in the first folder of `PATH` that holds it as an executable file.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// This machine's host name up to its first dot, as Slurm names nodes.
fn short_host_name() -> Option<String> {
    let name = nix::unistd::gethostname().ok()?;
    let name = name.to_string_lossy();
    name.split('.').next().filter(|n| !n.is_empty()).map(str::to_owned)
}

/// What the lookups have done since the recorder started; the health line
/// shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlurmHealth {
    /// `scontrol show job` runs.
    pub asked: u64,
    /// Of which answered with the job's record.
    pub known: u64,
    /// Of which Slurm did not know the job.
    pub unknown: u64,
    /// Of which failed: timed out, did not start, exited with an error,
    /// or printed a record that could not be read.
    pub failed: u64,
    /// Of the failures, runs killed at the time limit (`squeue`'s too).
    pub timeouts: u64,
    /// `squeue` runs listing this node's running jobs.
    pub listed: u64,
    /// Of which failed.
    pub list_failed: u64,
}

/// A job running on this node and the GPUs Slurm allocated it here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The job's id.
    pub job_id: Text,
    /// Its account; `None` without accounting.
    pub account: Option<Text>,
    /// Its user's name.
    pub user: Option<Text>,
    /// Its partition.
    pub partition: Option<Text>,
    /// Slurm's indexes (`IDX`) of the GPUs it holds on this node,
    /// ascending. Slurm numbers a node's GPUs in the order of its
    /// gres.conf `File=` devices (natural order of `/dev/nvidiaN`, i.e.
    /// by minor number), re-sorted by `Links` where they are known
    /// (AutoDetect=nvml fills them in NVML's order, by PCI bus id): not
    /// necessarily NVML's index.
    pub gpu_indexes: Vec<u32>,
}

/// What Slurm said about one job.
#[derive(Debug, Clone)]
enum Answer {
    /// Not asked yet, or asked and failed.
    Pending,
    /// Its record.
    Known(Arc<SlurmJob>),
    /// Slurm does not know it.
    Unknown,
}

#[derive(Debug)]
struct Entry {
    answer: Answer,
    /// When the tick or `squeue` last mentioned it.
    last_seen: Instant,
    /// When to ask about it (again); `None`: not to.
    due: Option<Instant>,
    /// Failures in a row.
    failures: u32,
}

#[derive(Debug, Default)]
struct State {
    jobs: HashMap<String, Entry>,
    /// The job ids of the last `squeue` of this node's running jobs.
    running: Vec<String>,
    /// When `squeue` is due.
    list_due: Option<Instant>,
    health: SlurmHealth,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    options: SlurmOptions,
    /// Set when the recorder stops: a command in flight is killed.
    stopping: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic on the lookup thread leaves counters, never a half-made entry.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tick's side of the lookups: cheap to clone, never blocks on Slurm.
#[derive(Debug, Clone)]
pub struct SlurmLookups {
    shared: Arc<Shared>,
}

/// How long dropping the resolver waits for the lookup thread to end (and
/// kill a command in flight).
const STOP_WAIT: Duration = Duration::from_secs(1);

/// The lookup thread: stopped when dropped, a command in flight killed.
#[derive(Debug)]
pub struct SlurmResolver {
    lookups: SlurmLookups,
    /// Disconnected once the lookup thread has ended.
    ended: mpsc::Receiver<()>,
}

impl SlurmResolver {
    /// Starts the lookup thread.
    pub fn start(options: SlurmOptions) -> std::io::Result<SlurmResolver> {
        let list_due = options.squeue.as_ref().map(|_| Instant::now());
        let shared = Arc::new(Shared {
            state: Mutex::new(State { list_due, ..State::default() }),
            wake: Condvar::new(),
            options,
            stopping: AtomicBool::new(false),
        });
        let thread = Arc::clone(&shared);
        let (alive, ended) = mpsc::channel::<()>();
        std::thread::Builder::new().name("slurm-lookup".into()).spawn(move || {
            // Dropped when the thread ends, however it ends.
            let _alive = alive;
            lookup_loop(&thread);
        })?;
        tracing::info!(scontrol = %shared.options.scontrol.display(),
            squeue = %shared.options.squeue.as_deref().map_or_else(|| "(none)".into(), |p| p.display().to_string()),
            node = %shared.options.node, "Slurm jobs are looked up in Slurm");
        Ok(SlurmResolver { lookups: SlurmLookups { shared }, ended })
    }

    /// The handle the tick reads through.
    pub fn lookups(&self) -> SlurmLookups {
        self.lookups.clone()
    }
}

impl Drop for SlurmResolver {
    fn drop(&mut self) {
        self.lookups.shared.stopping.store(true, Ordering::Relaxed);
        self.lookups.shared.lock().stop = true;
        self.lookups.shared.wake.notify_all();
        // A command in flight is killed within its poll interval; a
        // thread that does not end in time is left to the process's exit.
        let _ = self.ended.recv_timeout(STOP_WAIT);
    }
}

/// The cache as one tick sees it: held for the tick's lookups, then
/// dropped (which wakes the lookup thread if a job was new).
#[derive(Debug)]
pub struct JobView<'a> {
    state: MutexGuard<'a, State>,
    wake: &'a Condvar,
    now: Instant,
    queued: bool,
}

impl JobView<'_> {
    /// What Slurm said about job `job_id` (a cgroup's job id), if it has
    /// answered; a job not asked about yet is queued for the lookup
    /// thread. Never waits for Slurm.
    pub fn job(&mut self, job_id: &str) -> Option<Arc<SlurmJob>> {
        let now = self.now;
        match self.state.jobs.get_mut(job_id) {
            Some(entry) => {
                entry.last_seen = now;
                match &entry.answer {
                    Answer::Known(job) => Some(Arc::clone(job)),
                    Answer::Pending | Answer::Unknown => None,
                }
            }
            None => {
                let entry = Entry { answer: Answer::Pending, last_seen: now, due: Some(now), failures: 0 };
                self.state.jobs.insert(job_id.to_owned(), entry);
                self.queued = true;
                None
            }
        }
    }
}

impl Drop for JobView<'_> {
    fn drop(&mut self) {
        if self.queued {
            self.wake.notify_all();
        }
    }
}

impl SlurmLookups {
    /// The cache, for one tick's lookups.
    pub fn view(&self) -> JobView<'_> {
        JobView { state: self.shared.lock(), wake: &self.shared.wake, now: Instant::now(), queued: false }
    }

    /// The counters so far.
    pub fn health(&self) -> SlurmHealth {
        self.shared.lock().health
    }

    /// The jobs running on this node that hold GPUs here, with those GPUs
    /// (Slurm's indexes), by job id: those `squeue` last listed, and those
    /// in `met` (the jobs of this tick's processes, running since they run
    /// a process; without `squeue`, the only ones known). Jobs whose record
    /// has not come yet are missing until it does.
    pub fn allocations(&self, met: &[&str]) -> Vec<Allocation> {
        let state = self.shared.lock();
        let node = &self.shared.options.node;
        let mut ids: Vec<&str> =
            state.running.iter().map(String::as_str).chain(met.iter().copied()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut out: Vec<Allocation> = ids
            .into_iter()
            .filter_map(|id| match &state.jobs.get(id)?.answer {
                Answer::Known(job) => Some(job),
                _ => None,
            })
            .filter_map(|job| {
                let gpu_indexes = job.gpus_on(node);
                (!gpu_indexes.is_empty()).then(|| Allocation {
                    job_id: job.job_id.as_str().into(),
                    account: job.account.clone(),
                    user: job.user.clone(),
                    partition: job.partition.clone(),
                    gpu_indexes,
                })
            })
            .collect();
        out.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        out
    }
}

/// What the lookup thread does next.
enum Work {
    Job(String),
    List,
}

/// Kinds of failure warned about once each.
#[derive(Debug, Default)]
struct Warned {
    timeout: bool,
    failed: bool,
    unreadable: bool,
    list: bool,
}

fn lookup_loop(shared: &Shared) {
    let mut warned = Warned::default();
    loop {
        let work = {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                let now = Instant::now();
                let running = std::mem::take(&mut state.running);
                state
                    .jobs
                    .retain(|id, e| now.duration_since(e.last_seen) < FORGET_AFTER || running.contains(id));
                state.running = running;
                let next_job =
                    state.jobs.iter().filter_map(|(id, e)| Some((e.due?, id))).min_by_key(|(due, _)| *due);
                let next = [next_job.map(|(due, _)| due), state.list_due].into_iter().flatten().min();
                match next {
                    Some(due) if due <= now => {
                        break match next_job {
                            Some((job_due, id)) if job_due <= now => Work::Job(id.clone()),
                            _ => Work::List,
                        };
                    }
                    // Woken by the tick, by a stop, or at the next due time
                    // (at least once a minute, to forget old jobs).
                    Some(due) => {
                        let wait = due.duration_since(now).min(Duration::from_secs(60));
                        state =
                            shared.wake.wait_timeout(state, wait).unwrap_or_else(PoisonError::into_inner).0;
                    }
                    None => {
                        state = shared
                            .wake
                            .wait_timeout(state, Duration::from_secs(60))
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                }
            }
        };
        match work {
            Work::Job(id) => ask_job(shared, &id, &mut warned),
            Work::List => list_running(shared, &mut warned),
        }
    }
}

/// Runs `scontrol -d -o show job ID` and stores what it says.
fn ask_job(shared: &Shared, job_id: &str, warned: &mut Warned) {
    let options = &shared.options;
    let args = ["-d", "-o", "show", "job", job_id];
    let ran = command::run(&options.scontrol, &args, options.timeout, &shared.stopping);
    let answer = match ran {
        Ran::Exited { success: true, stdout, .. } => match scontrol::parse_job(&stdout, job_id) {
            Ok(job) => Ok(Answer::Known(Arc::new(job))),
            Err(error) => {
                if !std::mem::replace(&mut warned.unreadable, true) {
                    tracing::warn!(job = job_id, %error, "cannot read Slurm's record of a job: its account is \
                        recorded as unknown (this warning is not repeated; the health line counts them)");
                }
                Err(false)
            }
        },
        Ran::Exited { stderr, .. } if scontrol::is_unknown_job(&stderr) => Ok(Answer::Unknown),
        Ran::Exited { stderr, .. } => {
            if !std::mem::replace(&mut warned.failed, true) {
                tracing::warn!(scontrol = %options.scontrol.display(), job = job_id, error = %stderr.trim(),
                    "scontrol failed; asking again later (this warning is not repeated; the health line counts them)");
            }
            Err(false)
        }
        Ran::TimedOut => {
            if !std::mem::replace(&mut warned.timeout, true) {
                tracing::warn!(scontrol = %options.scontrol.display(), job = job_id, timeout = ?options.timeout,
                    "scontrol did not answer in time and was killed; asking again later (this warning is not \
                     repeated; the health line counts them)");
            }
            Err(true)
        }
        Ran::Stopped => return,
        Ran::NotStarted(error) => {
            if !std::mem::replace(&mut warned.failed, true) {
                tracing::warn!(scontrol = %options.scontrol.display(), %error,
                    "cannot run scontrol; asking again later (this warning is not repeated; the health line counts them)");
            }
            Err(false)
        }
    };
    let mut state = shared.lock();
    state.health.asked += 1;
    let now = Instant::now();
    let Some(entry) = state.jobs.get_mut(job_id) else { return };
    let counted = match answer {
        Ok(answer) => {
            entry.failures = 0;
            entry.due = matches!(answer, Answer::Unknown).then(|| now + UNKNOWN_RETRY);
            let known = matches!(answer, Answer::Known(_));
            entry.answer = answer;
            if known { (1, 0, 0, 0) } else { (0, 1, 0, 0) }
        }
        Err(timed_out) => {
            entry.failures = entry.failures.saturating_add(1);
            let backoff = RETRY_FIRST.saturating_mul(1u32 << (entry.failures.min(16) - 1)).min(RETRY_MAX);
            entry.due = Some(now + backoff);
            (0, 0, 1, u64::from(timed_out))
        }
    };
    let h = &mut state.health;
    h.known += counted.0;
    h.unknown += counted.1;
    h.failed += counted.2;
    h.timeouts += counted.3;
}

/// Runs `squeue` for this node's running jobs, and queues the new ones.
fn list_running(shared: &Shared, warned: &mut Warned) {
    let options = &shared.options;
    let Some(squeue) = &options.squeue else { return };
    let nodelist = format!("--nodelist={}", options.node);
    let args = ["--noheader", "--states=RUNNING", nodelist.as_str(), "--format=%A"];
    let ran = command::run(squeue, &args, options.timeout, &shared.stopping);
    if matches!(ran, Ran::Stopped) {
        return;
    }
    let mut state = shared.lock();
    state.health.listed += 1;
    let now = Instant::now();
    state.list_due = Some(now + RUNNING_JOBS_EVERY);
    match ran {
        Ran::Exited { success: true, stdout, .. } => {
            let ids = scontrol::parse_job_ids(&stdout);
            for id in &ids {
                let entry = state.jobs.entry(id.clone()).or_insert(Entry {
                    answer: Answer::Pending,
                    last_seen: now,
                    due: Some(now),
                    failures: 0,
                });
                entry.last_seen = now;
            }
            state.running = ids;
        }
        other => {
            state.health.list_failed += 1;
            if matches!(other, Ran::TimedOut) {
                state.health.timeouts += 1;
            }
            if !std::mem::replace(&mut warned.list, true) {
                let error = match other {
                    Ran::Exited { stderr, .. } => stderr.trim().to_owned(),
                    Ran::TimedOut | Ran::Stopped => format!("no answer within {:?}", options.timeout),
                    Ran::NotStarted(e) => e.to_string(),
                };
                tracing::warn!(squeue = %squeue.display(), %error, "cannot list this node's running Slurm jobs; \
                    trying again later (this warning is not repeated; the health line counts them)");
            }
        }
    }
}

#[cfg(test)]
mod tests;
