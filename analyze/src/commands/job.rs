//! `apron job ID [period] [--out DIR]`: one job's report, as Princeton's
//! jobstats shows one: its row of `apron jobs`, its findings one per line,
//! and with `--out` a PNG timeline per GPU it held (utilization, memory
//! used, SM and tensor activity; `queries/job_timeline.sql`).

use std::io::Write;
use std::path::{Path, PathBuf};

use apron_reports::TimelinePoint;
use clap::Args;
use datafusion::common::ScalarValue;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::{Error, InputError, OutputError, SessionError};
use crate::ledger::jobs::JobRow;
use crate::output::{Style, write_rows};
use crate::report::charts;
use crate::report::columns::Columns;
use crate::report::figures::jobs::{Jobs, findings, grade, jobs};
use crate::session::queries;

/// A timeline has at most about this many points: a long job's minutes are
/// averaged into buckets of whole minutes.
const TIMELINE_POINTS: i64 = 720;

/// `apron job ID [period] [--out DIR]`.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// The job as `apron jobs` names it ("job 1234", "pod NS/POD",
    /// "container ID", "process PID on HOST since …"), or without its kind
    /// ("1234", "NS/POD", "process 4242" when one process has that pid)
    #[arg(value_name = "ID")]
    pub id: String,

    /// Also draw a PNG timeline per GPU the job held into DIR
    /// (JOB-HOST-INDEX.png, replaced whole)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// The job `id` names among `rows`: its whole name, or the name without
/// its kind; an error names the period's candidates when it names none
/// or several.
fn find<'a>(rows: &'a [JobRow], id: &str, period: &str) -> Result<&'a JobRow, Error> {
    let id = id.trim();
    let names = |r: &JobRow| {
        r.job == id
            || ["job", "pod", "container"].iter().any(|kind| r.job == format!("{kind} {id}"))
            || (r.kind == "process" && r.job.starts_with(&format!("{id} on ")))
            || (r.kind == "process" && r.job.starts_with(&format!("process {id} on ")))
    };
    let found: Vec<&JobRow> = rows.iter().filter(|r| names(r)).collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(InputError::Usage {
            message: format!("no job '{id}' held a GPU in {period}; `apron jobs` lists the period's jobs"),
        }
        .into()),
        many => Err(InputError::Usage {
            message: format!(
                "'{id}' names {} jobs in {period}: {}; give one whole",
                many.len(),
                many.iter().map(|r| format!("'{}'", r.job)).collect::<Vec<_>>().join(", ")
            ),
        }
        .into()),
    }
}

/// A name safe in a file name: letters, digits, `.`, `_` and `-` kept,
/// anything else `_`.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect()
}

/// The minutes of GPU `uuid` on `host` from `start_ms` to `end_ms`,
/// averaged into buckets of whole minutes (at most about
/// [`TIMELINE_POINTS`]): means of the minutes that measured each value,
/// memory the bucket's most.
async fn timeline(
    report: &ReportContext,
    (host, uuid): (&str, &str),
    (start_ms, end_ms): (i64, i64),
) -> Result<Vec<TimelinePoint>, Error> {
    let at = |ms: i64| ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()));
    let params = vec![at(start_ms), at(end_ms), ScalarValue::from(host), ScalarValue::from(uuid)];
    let df = report.session.sql_with_params(queries::JOB_TIMELINE, params).await?;
    let batch = report.session.collect_batch(df).await?;
    let unreadable = |e: datafusion::arrow::error::ArrowError| SessionError::Execute { source: e.into() };
    let c = Columns::of(&batch);
    let minute = c.timestamp_ms("minute").map_err(unreadable)?;
    let values = [
        c.f64_opt("util_pct").map_err(unreadable)?,
        c.f64_opt("sm_active_pct").map_err(unreadable)?,
        c.f64_opt("tensor_active_pct").map_err(unreadable)?,
    ];
    let mem = c.f64_opt("mem_pct").map_err(unreadable)?;
    let minute_ms = apron_schemas::time::MINUTE_MS;
    let minutes = ((end_ms - start_ms).max(0) + minute_ms - 1) / minute_ms;
    let bucket_ms = ((minutes + TIMELINE_POINTS - 1) / TIMELINE_POINTS).max(1) * minute_ms;
    let mut points: Vec<TimelinePoint> = Vec::new();
    let mut sums = [(0.0, 0u32); 3];
    let mut peak: Option<f64> = None;
    let mut bucket: Option<i64> = None;
    let flush = |t_ms: i64, sums: &[(f64, u32); 3], peak: Option<f64>, points: &mut Vec<TimelinePoint>| {
        let mean = |(sum, n): (f64, u32)| if n > 0 { sum / f64::from(n) } else { f64::NAN };
        points.push(TimelinePoint {
            t_ms,
            util_pct: mean(sums[0]),
            sm_active_pct: mean(sums[1]),
            tensor_active_pct: mean(sums[2]),
            mem_pct: peak.unwrap_or(f64::NAN),
        });
    };
    for i in 0..minute.len() {
        let b = start_ms + (minute[i] - start_ms).div_euclid(bucket_ms) * bucket_ms;
        if let Some(open) = bucket
            && open != b
        {
            flush(open, &sums, peak, &mut points);
            (sums, peak) = ([(0.0, 0); 3], None);
        }
        bucket = Some(b);
        for (sum, value) in sums.iter_mut().zip(&values) {
            if let Some(v) = value[i] {
                sum.0 += v;
                sum.1 += 1;
            }
        }
        peak = match (peak, mem[i]) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    if let Some(open) = bucket {
        flush(open, &sums, peak, &mut points);
    }
    Ok(points)
}

/// Draws a timeline per GPU of `job` into `dir`; returns the files written.
async fn draw_timelines(report: &ReportContext, job: &JobRow, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::from(OutputError::File { path: dir.to_path_buf(), source: Box::new(e) }))?;
    let ctx = charts::context(report);
    let mut written = Vec::new();
    for (gpu, uuid) in job.gpus.iter().zip(&job.gpu_uuids) {
        let (host, index) = gpu.rsplit_once('/').unwrap_or((gpu.as_str(), ""));
        let points = timeline(report, (host, uuid), (job.start_ms, job.end_ms)).await?;
        let path = dir.join(format!("{}-{}-{}.png", file_part(&job.job), file_part(host), file_part(index)));
        let title = format!("{}, GPU {gpu}", job.job);
        apron_reports::job_timeline(&title, &points, &ctx, &path)?;
        written.push(path);
    }
    Ok(written)
}

/// Shows the job.
pub async fn run<W: Write>(global: &GlobalArgs, args: &JobArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let all = jobs(&report)?;
    let job = find(&all.rows, &args.id, &report.period.label())?.clone();
    let money = |x| apron_reports::money(x, &report.config.currency);
    report.header.push(format!(
        "Job: {} ({}), {} of {}, on {}; {:.1} GPU-hours costing {}, of which {} idle; grade {}",
        job.job,
        job.kind,
        job.user,
        job.team,
        job.gpus.join(" "),
        job.gpu_hours,
        money(job.cost),
        money(job.idle_cost),
        grade(job.util_pct)
    ));
    let found = findings(&job, &all.thresholds);
    if found.is_empty() {
        report.header.push("Findings: none");
    }
    for f in found {
        report.header.push(format!("Finding: {f}"));
    }
    match &args.out {
        Some(dir) => {
            let written = draw_timelines(&report, &job, dir).await?;
            let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
            report.header.push(format!("Timelines: {}", names.join(" ")));
        }
        None => report.header.push("Timelines: add --out DIR for a PNG per GPU"),
    }
    report.header.print(global.format, &mut out)?;
    let one = Jobs { rows: vec![job], thresholds: all.thresholds };
    write_rows(global.format, &Style::report(&report.config.currency), &one, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(job: &str, kind: &'static str) -> JobRow {
        JobRow {
            job: job.into(),
            kind,
            user: "u".into(),
            team: "t".into(),
            hosts: vec![],
            gpus: vec![],
            gpu_uuids: vec![],
            start_ms: 0,
            end_ms: 0,
            still_running: false,
            gpu_hours: 0.0,
            cost: 0.0,
            idle_cost: 0.0,
            idle_pct: 0.0,
            util_pct: None,
            sm_active_pct: None,
            tensor_active_pct: None,
            dram_active_pct: None,
            peak_mem_bytes: None,
            peak_mem_pct: None,
            gpus_unused: 0,
            on_mig: false,
            pcie_mib_per_s: None,
            faults: vec![],
        }
    }

    #[test]
    fn a_job_is_found_by_its_name_with_or_without_its_kind() {
        let rows = [
            row("job 1234", "slurm"),
            row("pod ml/train-0", "pod"),
            row("container 0123456789ab", "container"),
            row("process 42 on h1 since 2026-10-01 10:00:00 UTC", "process"),
            row("process 42 on h2 since 2026-10-02 10:00:00 UTC", "process"),
            row("process 7 on h1 since 2026-10-01 10:00:00 UTC", "process"),
        ];
        let found = |id: &str| find(&rows, id, "October").map(|r| r.job.clone()).map_err(|e| e.to_string());
        assert_eq!(found("1234"), Ok("job 1234".into()));
        assert_eq!(found("job 1234"), Ok("job 1234".into()));
        assert_eq!(found("ml/train-0"), Ok("pod ml/train-0".into()));
        assert_eq!(found("0123456789ab"), Ok("container 0123456789ab".into()));
        assert_eq!(found("process 7"), Ok("process 7 on h1 since 2026-10-01 10:00:00 UTC".into()));
        assert_eq!(
            found("process 42 on h2 since 2026-10-02 10:00:00 UTC"),
            Ok("process 42 on h2 since 2026-10-02 10:00:00 UTC".into())
        );
        let two = found("process 42").expect_err("two processes had pid 42");
        assert!(two.contains("names 2 jobs in October") && two.contains("on h2 since"), "{two}");
        let none = found("99").expect_err("no job 99");
        assert!(none.contains("no job '99' held a GPU in October"), "{none}");
        assert!(found("123").is_err(), "a prefix of an id is not the id");
    }

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(file_part("pod ml/train-0"), "pod_ml_train-0");
        assert_eq!(file_part("../x"), ".._x");
    }
}
