//! `apron-recorder idle-now`: whether GPUs of this host have been idle for
//! the last minutes by the newest data on disk, the write-ahead log of a
//! running recorder included. The script `apron zombies --commands` prints
//! asks this on each host, at the moment it would stop a process, so that a
//! process is stopped only while its GPU is idle now and not on what an
//! older report saw.
//!
//! A GPU-minute's state is docs/src/definitions.md's ([`apron_schemas::minute_state`]),
//! from the same minute rollups the analysis reads: the `gpu_minutes` (and
//! `proc_minutes`) files of the host's newest days, and the rollup
//! ([`apron_store::rollup`]) of the rows its WAL segments hold. A minute
//! split across files has the seconds-weighted mean of its parts. This
//! module reads; it never writes or locks anything, so it runs beside a
//! recorder.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use apron_schemas::minute_state::State;
use apron_schemas::time::MINUTE_MS;
use apron_schemas::{DataLayout, Table, gpu_samples, proc_samples};
use apron_store::rollup::{EnergyCarry, rollup};
use apron_store::wal::format::{self as wal, SegmentRows};
use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, TimestampMillisecondType};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The newest minute may start this long before now and still be "now":
/// the minute in progress, or the one just closed.
pub const FRESH_MS: i64 = 2 * MINUTE_MS;

/// What is asked: which GPUs, for how long, at which threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// GPUs named by UUID (or MIG UUID).
    pub gpus: Vec<String>,
    /// A Kubernetes pod uid: every GPU where a process of the pod held
    /// memory in the window is asked about too.
    pub pod: Option<String>,
    /// A Slurm job id: likewise.
    pub job: Option<String>,
    /// Minutes each GPU must have been idle, up to its newest (at least 1).
    pub minutes: i64,
    /// The idle threshold, percent (`idle.threshold_pct`).
    pub threshold_pct: f64,
}

/// One GPU-minute as the answer needs it, its parts merged.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Minute {
    /// Seconds recorded.
    pub seconds: f64,
    /// Seconds-weighted sums of the utilization and SM activity means, and
    /// the seconds they were known for.
    util: (f64, f64),
    sm: (f64, f64),
    /// Whether a process held memory.
    pub held: bool,
}

impl Minute {
    /// Adds one rollup row's part of the minute.
    pub fn add(&mut self, seconds: f64, util: Option<f64>, sm: Option<f64>, held: bool) {
        self.seconds += seconds;
        if let Some(u) = util {
            self.util = (self.util.0 + u * seconds, self.util.1 + seconds);
        }
        if let Some(s) = sm {
            self.sm = (self.sm.0 + s * seconds, self.sm.1 + seconds);
        }
        self.held |= held;
    }

    /// The minute's activity: mean utilization where known, else mean SM
    /// activity; `None` when neither is.
    pub fn activity_pct(&self) -> Option<f64> {
        let mean = |(sum, seconds): (f64, f64)| (seconds > 0.0).then(|| sum / seconds);
        mean(self.util).or_else(|| mean(self.sm))
    }
}

/// What the data holds for the question.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Window {
    /// Minutes by GPU, by minute start (ms since the epoch).
    pub gpus: BTreeMap<String, BTreeMap<i64, Minute>>,
    /// GPUs where a process of the pod asked about held memory.
    pub pod_gpus: BTreeSet<String>,
    /// GPUs where a process of the job asked about held memory.
    pub job_gpus: BTreeSet<String>,
}

/// The answer for one GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Idle in each of the minutes asked, up to its newest (`newest_ms`).
    Idle { gpu: String, newest_ms: i64 },
    /// Not recorded in the last minutes: the recorder is not running, or
    /// does not see the GPU.
    Stale { gpu: String, newest_ms: Option<i64> },
    /// Busy in the minute starting `minute_ms`, at `activity_pct`.
    Busy { gpu: String, minute_ms: i64, activity_pct: f64 },
    /// Activity unknown in that minute: never counted as idle.
    Unknown { gpu: String, minute_ms: i64 },
    /// That minute not recorded: a gap breaks the idle stretch.
    Gap { gpu: String, minute_ms: i64 },
}

impl Answer {
    /// Whether the GPU is idle now.
    pub fn idle(&self) -> bool {
        matches!(self, Answer::Idle { .. })
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        };
        match self {
            Answer::Idle { gpu, newest_ms } => {
                write!(f, "GPU {gpu} idle up to its newest minute, {}", at(*newest_ms))
            }
            Answer::Stale { gpu, newest_ms: Some(ms) } => {
                write!(f, "GPU {gpu} not recorded since {}: is the recorder running?", at(*ms))
            }
            Answer::Stale { gpu, newest_ms: None } => write!(f, "GPU {gpu} not recorded lately on this host"),
            Answer::Busy { gpu, minute_ms, activity_pct } => {
                write!(f, "GPU {gpu} busy at {} ({activity_pct:.1} % active)", at(*minute_ms))
            }
            Answer::Unknown { gpu, minute_ms } => {
                write!(f, "GPU {gpu}: activity unknown at {}", at(*minute_ms))
            }
            Answer::Gap { gpu, minute_ms } => write!(f, "GPU {gpu} not recorded at {}", at(*minute_ms)),
        }
    }
}

/// The answers for every GPU `question` names, from `window`, at `now_ms`.
/// A pod or job with no GPU in the window gives no answer for it; the
/// caller says so.
pub fn judge(question: &Question, window: &Window, now_ms: i64) -> Vec<Answer> {
    let mut gpus: BTreeSet<&str> = question.gpus.iter().map(String::as_str).collect();
    gpus.extend(window.pod_gpus.iter().map(String::as_str));
    gpus.extend(window.job_gpus.iter().map(String::as_str));
    let now_minute = now_ms - now_ms.rem_euclid(MINUTE_MS);
    gpus.into_iter()
        .map(|gpu| {
            let minutes = window.gpus.get(gpu);
            let newest = minutes.and_then(|m| m.keys().next_back().copied());
            let gpu = gpu.to_owned();
            let Some(newest) = newest.filter(|n| *n >= now_minute - FRESH_MS) else {
                return Answer::Stale { gpu, newest_ms: newest };
            };
            let minutes = minutes.expect("a GPU with a newest minute has minutes");
            for k in 0..question.minutes.max(1) {
                let minute_ms = newest - k * MINUTE_MS;
                let Some(m) = minutes.get(&minute_ms) else { return Answer::Gap { gpu, minute_ms } };
                match State::of(m.activity_pct(), question.threshold_pct, m.held) {
                    State::Busy => {
                        let activity_pct = m.activity_pct().unwrap_or(f64::NAN);
                        return Answer::Busy { gpu, minute_ms, activity_pct };
                    }
                    State::Unknown => return Answer::Unknown { gpu, minute_ms },
                    State::IdleHeld | State::IdleEmpty => {}
                }
            }
            Answer::Idle { gpu, newest_ms: newest }
        })
        .collect()
}

/// Reading the data failed.
#[derive(Debug, thiserror::Error)]
pub enum IdleNowError {
    /// A folder or file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A Parquet file could not be read.
    #[error("cannot read {}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What `host`'s data under `layout` holds from `from_ms` on: the minutes
/// of every GPU, and the GPUs of `question`'s pod and job.
pub fn read_window(
    layout: &DataLayout,
    host: &str,
    question: &Question,
    from_ms: i64,
) -> Result<Window, IdleNowError> {
    let mut window = Window::default();
    let from_minute = from_ms - from_ms.rem_euclid(MINUTE_MS);
    let first_day = chrono::DateTime::from_timestamp_millis(from_minute).map(|t| t.date_naive());
    let wants_procs = question.pod.is_some() || question.job.is_some();
    for table in [Table::GpuMinutes, Table::ProcMinutes] {
        if table == Table::ProcMinutes && !wants_procs {
            continue;
        }
        for path in partition_files(layout, table, host, first_day)? {
            let batches = read_parquet(&path, table)?;
            for batch in &batches {
                add_batch(&mut window, table, batch, question, from_minute)
                    .map_err(|source| IdleNowError::Parquet { path: path.clone(), source: source.into() })?;
            }
        }
    }
    let segments = wal::host_segments(layout, host)
        .map_err(|source| IdleNowError::Read { path: layout.wal_dir(host), source })?;
    for segment in segments {
        let rows = match wal::read_segment(&segment.path) {
            Ok(rows) => rows,
            // Turned into Parquet and deleted since it was listed: its
            // files were read above, or will be by the next asker.
            Err(wal::WalError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                continue;
            }
            Err(e) => {
                tracing::warn!(file = %segment.path.display(), error = %e, "cannot read a WAL segment; left out");
                continue;
            }
        };
        let SegmentRows { mut gpus, mut procs, .. } = rows;
        gpu_samples::sort(&mut gpus);
        proc_samples::sort(&mut procs);
        let minutes = rollup(&gpus, &procs, &EnergyCarry::new());
        for g in minutes.gpu_minutes.iter().filter(|g| g.minute >= from_minute) {
            window.gpus.entry(g.gpu_uuid.to_string()).or_default().entry(g.minute).or_default().add(
                g.seconds,
                g.gpu_util_pct_mean,
                g.sm_active_pct_mean,
                g.proc_held,
            );
        }
        for p in minutes.proc_minutes.iter().filter(|p| p.minute >= from_minute) {
            note_process(
                &mut window,
                question,
                &p.gpu_uuid,
                p.identity.k8s_pod_uid.as_deref(),
                p.identity.slurm_job_id.as_deref(),
            );
        }
    }
    Ok(window)
}

/// Adds what one row of `proc_minutes` says about the pod or job asked.
fn note_process(window: &mut Window, question: &Question, gpu: &str, pod: Option<&str>, job: Option<&str>) {
    if question.pod.is_some() && pod == question.pod.as_deref() {
        window.pod_gpus.insert(gpu.to_owned());
    }
    if question.job.is_some() && job == question.job.as_deref() {
        window.job_gpus.insert(gpu.to_owned());
    }
}

/// The data files of `table` for `host` in the date partitions from
/// `first_day` on (all of them when `None`).
fn partition_files(
    layout: &DataLayout,
    table: Table,
    host: &str,
    first_day: Option<chrono::NaiveDate>,
) -> Result<Vec<PathBuf>, IdleNowError> {
    let mut out = Vec::new();
    let dir = layout.table_dir(table);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(source) => return Err(IdleNowError::Read { path: dir, source }),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(date) = name.to_str().and_then(apron_schemas::paths::parse_date_dir_name) else { continue };
        if first_day.is_some_and(|d| date < d) {
            continue;
        }
        let partition = layout.partition_dir(table, date, host);
        let files = match std::fs::read_dir(&partition) {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(IdleNowError::Read { path: partition, source }),
        };
        for file in files.flatten() {
            if file.file_name().to_str().is_some_and(apron_schemas::paths::is_data_file_name) {
                out.push(file.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The columns of `table` this module reads.
fn columns(table: Table) -> &'static [&'static str] {
    match table {
        Table::GpuMinutes => {
            &["minute", "gpu_uuid", "seconds", "gpu_util_pct_mean", "sm_active_pct_mean", "proc_held"]
        }
        _ => &["minute", "gpu_uuid", "k8s_pod_uid", "slurm_job_id"],
    }
}

fn read_parquet(path: &Path, table: Table) -> Result<Vec<RecordBatch>, IdleNowError> {
    let parquet = |source: Box<dyn std::error::Error + Send + Sync>| IdleNowError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let file = match File::open(path) {
        Ok(file) => file,
        // Replaced by compaction since it was listed: the compacted file
        // holds its rows.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(IdleNowError::Read { path: path.to_path_buf(), source }),
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet(e.into()))?;
    let schema = builder.parquet_schema();
    let wanted = columns(table);
    let indices: Vec<usize> =
        (0..schema.num_columns()).filter(|i| wanted.contains(&schema.column(*i).name())).collect();
    let mask = ProjectionMask::leaves(schema, indices);
    let reader = builder.with_projection(mask).build().map_err(|e| parquet(e.into()))?;
    reader.collect::<Result<Vec<_>, _>>().map_err(|e| parquet(e.into()))
}

/// Adds the rows of one batch of `table` from `from_minute` on.
fn add_batch(
    window: &mut Window,
    table: Table,
    batch: &RecordBatch,
    question: &Question,
    from_minute: i64,
) -> Result<(), arrow::error::ArrowError> {
    let missing = |name: &str| arrow::error::ArrowError::SchemaError(format!("no column {name}"));
    let column = |name: &str| batch.column_by_name(name).ok_or_else(|| missing(name));
    let minute =
        column("minute")?.as_primitive_opt::<TimestampMillisecondType>().ok_or_else(|| missing("minute"))?;
    let gpu = column("gpu_uuid")?.as_string_opt::<i32>().ok_or_else(|| missing("gpu_uuid"))?;
    if table == Table::GpuMinutes {
        let seconds =
            column("seconds")?.as_primitive_opt::<Float64Type>().ok_or_else(|| missing("seconds"))?;
        let float = |name: &str| batch.column_by_name(name).and_then(|c| c.as_primitive_opt::<Float64Type>());
        let (util, sm) = (float("gpu_util_pct_mean"), float("sm_active_pct_mean"));
        let held = batch.column_by_name("proc_held").and_then(|c| c.as_boolean_opt());
        let value = |a: Option<&arrow::array::Float64Array>, i: usize| {
            a.filter(|a| a.is_valid(i)).map(|a| a.value(i))
        };
        for i in 0..batch.num_rows() {
            if minute.is_null(i) || gpu.is_null(i) || minute.value(i) < from_minute {
                continue;
            }
            let held = held.is_some_and(|h| h.is_valid(i) && h.value(i));
            window.gpus.entry(gpu.value(i).to_owned()).or_default().entry(minute.value(i)).or_default().add(
                if seconds.is_valid(i) { seconds.value(i) } else { 0.0 },
                value(util, i),
                value(sm, i),
                held,
            );
        }
    } else {
        let text = |name: &str| batch.column_by_name(name).and_then(|c| c.as_string_opt::<i32>());
        let (pod, job) = (text("k8s_pod_uid"), text("slurm_job_id"));
        for i in 0..batch.num_rows() {
            if minute.is_null(i) || gpu.is_null(i) || minute.value(i) < from_minute {
                continue;
            }
            let pod = pod.filter(|a| a.is_valid(i)).map(|a| a.value(i));
            let job = job.filter(|a| a.is_valid(i)).map(|a| a.value(i));
            note_process(window, question, gpu.value(i), pod, job);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_025_600_000 + 30_000;
    const M0: i64 = 1_796_025_600_000;

    fn window(gpu: &str, minutes: &[(i64, Option<f64>)]) -> Window {
        let mut w = Window::default();
        for (m, util) in minutes {
            w.gpus.entry(gpu.into()).or_default().entry(*m).or_default().add(60.0, *util, None, true);
        }
        w
    }

    fn ask(gpus: &[&str], minutes: i64) -> Question {
        Question {
            gpus: gpus.iter().map(|g| (*g).to_owned()).collect(),
            pod: None,
            job: None,
            minutes,
            threshold_pct: 5.0,
        }
    }

    #[test]
    fn idle_in_each_of_the_last_minutes_up_to_a_fresh_newest_one() {
        let w =
            window("GPU-a", &[(M0 - 2 * MINUTE_MS, Some(0.0)), (M0 - MINUTE_MS, Some(4.9)), (M0, Some(1.0))]);
        assert_eq!(
            judge(&ask(&["GPU-a"], 3), &w, NOW),
            [Answer::Idle { gpu: "GPU-a".into(), newest_ms: M0 }]
        );
        // One minute more than recorded: a gap.
        assert_eq!(
            judge(&ask(&["GPU-a"], 4), &w, NOW),
            [Answer::Gap { gpu: "GPU-a".into(), minute_ms: M0 - 3 * MINUTE_MS }]
        );
        // Recorded only until 3 minutes ago: stale.
        assert!(matches!(judge(&ask(&["GPU-a"], 1), &w, NOW + 3 * MINUTE_MS)[0], Answer::Stale { .. }));
        assert!(matches!(judge(&ask(&["GPU-x"], 1), &w, NOW)[0], Answer::Stale { newest_ms: None, .. }));
    }

    #[test]
    fn busy_or_unknown_in_any_minute_is_not_idle() {
        let w = window("GPU-a", &[(M0 - MINUTE_MS, Some(5.0)), (M0, Some(0.0))]);
        let answer = &judge(&ask(&["GPU-a"], 2), &w, NOW)[0];
        assert_eq!(
            answer,
            &Answer::Busy { gpu: "GPU-a".into(), minute_ms: M0 - MINUTE_MS, activity_pct: 5.0 }
        );
        assert!(answer.to_string().contains("busy at 2026-11-30 07:59 UTC (5.0 % active)"), "{answer}");
        // Idle now, busy before the stretch asked about: idle.
        assert!(judge(&ask(&["GPU-a"], 1), &w, NOW)[0].idle());
        let w = window("GPU-a", &[(M0, None)]);
        assert!(matches!(judge(&ask(&["GPU-a"], 1), &w, NOW)[0], Answer::Unknown { .. }));
    }

    #[test]
    fn a_split_minute_is_the_seconds_weighted_mean_of_its_parts() {
        let mut m = Minute::default();
        m.add(20.0, Some(14.0), None, false);
        m.add(40.0, Some(0.5), Some(80.0), true);
        assert!((m.activity_pct().expect("known") - 5.0).abs() < 1e-12);
        assert!(m.held);
        let mut sm_only = Minute::default();
        sm_only.add(60.0, None, Some(3.0), false);
        assert_eq!(sm_only.activity_pct(), Some(3.0));
    }

    #[test]
    fn a_pod_is_asked_about_on_every_gpu_it_holds() {
        let mut w = window("GPU-a", &[(M0, Some(0.0))]);
        w.gpus.entry("GPU-b".into()).or_default().entry(M0).or_default().add(60.0, Some(90.0), None, true);
        let q = Question { pod: Some("uid-1".into()), ..ask(&["GPU-a"], 1) };
        note_process(&mut w, &q, "GPU-b", Some("uid-1"), None);
        note_process(&mut w, &q, "GPU-c", Some("uid-2"), None);
        let answers = judge(&q, &w, NOW);
        assert_eq!(answers.len(), 2, "{answers:?}");
        assert!(answers[0].idle() && matches!(answers[1], Answer::Busy { .. }), "{answers:?}");
    }
}
