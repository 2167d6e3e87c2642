//! Every job's efficiency over a period ([`crate::ledger::jobs`]): its GPU
//! time, cost and idle cost, activity, peak memory, an efficiency grade and
//! findings in words, each with the numbers it rests on.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::ReportContext;
use crate::error::Error;
use crate::ledger::jobs::{JobFault, JobRow};
use crate::output::Rows;
use crate::report::columns::{self, batch_of};

/// A job starved of data moves data over PCIe while its GPUs' activity
/// stays under this (%).
pub const STARVED_ACTIVITY_PCT: f64 = 10.0;

/// Tensor cores are unused when their pipes are active under this (%).
pub const TENSOR_UNUSED_PCT: f64 = 1.0;

/// The efficiency grade of a mean activity (%): A at 70 % or more, B at 50,
/// C at 30, D at 10, F under 10; `?` when unknown.
pub fn grade(util_pct: Option<f64>) -> &'static str {
    match util_pct {
        None => "?",
        Some(u) if u >= 70.0 => "A",
        Some(u) if u >= 50.0 => "B",
        Some(u) if u >= 30.0 => "C",
        Some(u) if u >= 10.0 => "D",
        Some(_) => "F",
    }
}

/// What is wrong with a job, in words, each with its numbers, by the
/// thresholds `t` (`[jobs]`).
pub fn findings(j: &JobRow, t: &Thresholds) -> Vec<String> {
    findings_by_kind(j, t).into_iter().map(|(_, text)| text).collect()
}

/// The kinds of finding, in the order [`findings_by_kind`] gives them.
pub const FINDING_KINDS: [&str; 6] = [
    "GPUs never used",
    "mostly idle",
    "memory a smaller GPU would hold",
    "starved of data",
    "tensor cores unused",
    "faults on its GPUs",
];

/// [`findings`], each with its kind (one of [`FINDING_KINDS`]).
pub fn findings_by_kind(j: &JobRow, t: &Thresholds) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let gpus = j.gpus.len();
    if gpus > 1 && j.gpus_unused > 0 {
        out.push((
            FINDING_KINDS[0],
            format!("{} of {gpus} GPUs never used (never busy while the job held them)", j.gpus_unused),
        ));
    }
    if j.idle_pct >= t.idle_share_pct {
        out.push((
            FINDING_KINDS[1],
            format!(
                "idle {:.0}% of its time: interactive (a notebook server?), or waiting on something",
                j.idle_pct
            ),
        ));
    }
    if let (Some(pct), Some(bytes)) = (j.peak_mem_pct, j.peak_mem_bytes)
        && pct < t.small_memory_pct
        && !j.on_mig
    {
        out.push((
            FINDING_KINDS[2],
            format!(
                "memory under {:.0}% of the GPU (peak {:.1} GiB, {pct:.1}%): a smaller GPU or a MIG slice would do",
                t.small_memory_pct,
                bytes as f64 / (1u64 << 30) as f64
            ),
        ));
    }
    if let (Some(pcie), Some(activity)) = (j.pcie_mib_per_s, j.util_pct)
        && t.starved_pcie_mib_per_s > 0
        && pcie >= t.starved_pcie_mib_per_s as f64
        && activity < STARVED_ACTIVITY_PCT
    {
        out.push((
            FINDING_KINDS[3],
            format!(
                "data-starved: its GPUs moved {pcie:.0} MiB/s over PCIe while {activity:.1}% active: the input \
                 (data loading, storage, network) holds it back"
            ),
        ));
    }
    if let (Some(tensor), Some(sm)) = (j.tensor_active_pct, j.sm_active_pct)
        && tensor < TENSOR_UNUSED_PCT
        && sm >= t.tensor_unused_sm_active_pct
    {
        out.push((
            FINDING_KINDS[4],
            format!(
                "tensor cores unused (tensor active {tensor:.1}% while SM active {sm:.0}%): check the precision \
                 (FP32 math runs on no tensor core: bf16 or fp16 mixed precision, or TF32)"
            ),
        ));
    }
    if !j.faults.is_empty() {
        out.push((
            FINDING_KINDS[5],
            format!("ran on GPUs with faults: {}; see apron events", fault_list(&j.faults)),
        ));
    }
    out
}

/// The faults of a job in words: `XID 79 ×2 on h/2 (took the GPU down), …`.
fn fault_list(faults: &[JobFault]) -> String {
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = faults
        .iter()
        .take(SHOWN)
        .map(|f| {
            let what = match f.xid {
                Some(code) if f.kind == apron_schemas::gpu_events::XID => format!("XID {code}"),
                _ => super::events::judge(&f.kind, f.xid, i64::from(f.events), (Some(1), Some(1)), false).0,
            };
            let down = if f.takes_down { " (took the GPU down)" } else { "" };
            format!("{what} ×{} on {}{down}", f.events, f.gpus.join(" "))
        })
        .collect();
    if faults.len() > SHOWN {
        let more = faults.len() - SHOWN;
        parts.push(format!("{more} more {}", if more == 1 { "kind" } else { "kinds" }));
    }
    parts.join(", ")
}

/// The thresholds of the findings (`[jobs]`).
pub use crate::config::Jobs as Thresholds;

/// The period's jobs, the costliest idle first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Jobs {
    /// One row per job.
    pub rows: Vec<JobRow>,
    /// The findings' thresholds.
    pub thresholds: Thresholds,
}

impl Jobs {
    /// Keeps the jobs of `user` and of `team` (each when given).
    pub fn only(mut self, user: Option<&str>, team: Option<&str>) -> Jobs {
        self.rows.retain(|r| user.is_none_or(|u| r.user == u) && team.is_none_or(|t| r.team == t));
        self
    }
}

/// How many of `rows` have each kind of finding by `thresholds`, in
/// [`FINDING_KINDS`]' order.
pub fn finding_counts(rows: &[JobRow], thresholds: &Thresholds) -> Vec<(&'static str, usize)> {
    FINDING_KINDS
        .iter()
        .map(|&k| {
            let has = |r: &&JobRow| findings_by_kind(r, thresholds).iter().any(|(f, _)| *f == k);
            (k, rows.iter().filter(has).count())
        })
        .collect()
}

/// The jobs of `report`'s period, from its ledger.
pub fn jobs(report: &ReportContext) -> Result<Jobs, Error> {
    Ok(Jobs { rows: report.ledger()?.jobs.clone(), thresholds: report.config.jobs.clone() })
}

impl Rows for Jobs {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        let joined = |v: &[String]| v.join(" ");
        batch_of(vec![
            ("job", columns::text(r.iter().map(|x| x.job.as_str()))),
            ("kind", columns::text(r.iter().map(|x| x.kind))),
            ("user", columns::text(r.iter().map(|x| x.user.as_str()))),
            ("team", columns::text(r.iter().map(|x| x.team.as_str()))),
            (
                "hosts",
                columns::text(
                    r.iter().map(|x| joined(&x.hosts)).collect::<Vec<_>>().iter().map(String::as_str),
                ),
            ),
            ("gpu_count", columns::int64(r.iter().map(|x| x.gpus.len() as i64))),
            (
                "gpu_list",
                columns::text(
                    r.iter().map(|x| joined(&x.gpus)).collect::<Vec<_>>().iter().map(String::as_str),
                ),
            ),
            ("start", columns::timestamp_ms(r.iter().map(|x| x.start_ms))),
            ("end", columns::timestamp_ms(r.iter().map(|x| x.end_ms))),
            ("still_running", columns::boolean(r.iter().map(|x| x.still_running))),
            ("gpu_hours", columns::float(r.iter().map(|x| x.gpu_hours))),
            ("cost", columns::float(r.iter().map(|x| x.cost))),
            ("idle_cost", columns::float(r.iter().map(|x| x.idle_cost))),
            ("idle_share_pct", columns::float(r.iter().map(|x| x.idle_pct))),
            ("activity_pct", columns::float(r.iter().map(|x| x.util_pct))),
            ("sm_active_pct", columns::float(r.iter().map(|x| x.sm_active_pct))),
            ("tensor_active_pct", columns::float(r.iter().map(|x| x.tensor_active_pct))),
            ("dram_active_pct", columns::float(r.iter().map(|x| x.dram_active_pct))),
            ("peak_mem_bytes", columns::int64(r.iter().map(|x| x.peak_mem_bytes))),
            ("peak_mem_pct", columns::float(r.iter().map(|x| x.peak_mem_pct))),
            ("grade", columns::text(r.iter().map(|x| grade(x.util_pct)))),
            (
                "findings",
                columns::text(
                    r.iter()
                        .map(|x| findings(x, &self.thresholds).join("; "))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(String::as_str),
                ),
            ),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> JobRow {
        JobRow {
            job: "job 7".into(),
            kind: "slurm",
            user: "alice".into(),
            team: "nlp".into(),
            hosts: vec!["h".into()],
            gpus: vec!["h/0".into(), "h/1".into(), "h/2".into(), "h/3".into()],
            gpu_uuids: vec!["GPU-0".into(), "GPU-1".into(), "GPU-2".into(), "GPU-3".into()],
            start_ms: 0,
            end_ms: 60_000,
            still_running: false,
            gpu_hours: 4.0,
            cost: 10.0,
            idle_cost: 7.5,
            idle_pct: 75.0,
            util_pct: Some(22.5),
            sm_active_pct: None,
            tensor_active_pct: None,
            dram_active_pct: None,
            peak_mem_bytes: Some(4 << 30),
            peak_mem_pct: Some(5.0),
            gpus_unused: 3,
            on_mig: false,
            pcie_mib_per_s: Some(300.0),
            faults: Vec::new(),
        }
    }

    #[test]
    fn findings_say_their_numbers_and_grades_follow_activity() {
        let t = Thresholds::default();
        let f = findings(&job(), &t);
        assert_eq!(f.len(), 3, "{f:?}");
        assert_eq!(f[0], "3 of 4 GPUs never used (never busy while the job held them)");
        assert!(f[1].starts_with("idle 75% of its time"), "{f:?}");
        assert!(f[2].contains("peak 4.0 GiB, 5.0%"), "{f:?}");
        assert!(findings(&JobRow { on_mig: true, ..job() }, &t).iter().all(|s| !s.contains("MIG slice")));
        let starved = findings(&JobRow { util_pct: Some(4.0), ..job() }, &t);
        assert!(
            starved.last().is_some_and(|s| s.starts_with("data-starved: its GPUs moved 300 MiB/s")),
            "{starved:?}"
        );
        let off = Thresholds { starved_pcie_mib_per_s: 0, ..Thresholds::default() };
        assert_eq!(findings(&JobRow { util_pct: Some(4.0), ..job() }, &off).len(), 3, "0: none is starved");
        let tensor = |tensor: f64, sm: f64| {
            findings(&JobRow { tensor_active_pct: Some(tensor), sm_active_pct: Some(sm), ..job() }, &t)
        };
        assert_eq!(
            tensor(0.4, 62.0).last().map(String::as_str),
            Some(
                "tensor cores unused (tensor active 0.4% while SM active 62%): check the precision (FP32 math \
                 runs on no tensor core: bf16 or fp16 mixed precision, or TF32)"
            )
        );
        assert_eq!(tensor(0.4, 29.0).len(), 3, "SM activity under 30%: not said");
        assert_eq!(tensor(1.0, 62.0).len(), 3, "tensor active 1%: used");
        let xid = |code: i32, events: u32, gpus: &[&str], takes_down: bool| JobFault {
            kind: "xid".into(),
            xid: Some(code),
            events,
            gpus: gpus.iter().map(|g| (*g).to_owned()).collect(),
            takes_down,
        };
        let dbe = JobFault { kind: "ecc_dbe".into(), xid: None, ..xid(0, 1, &["h/0"], true) };
        let faulted = JobRow { faults: vec![xid(79, 2, &["h/2"], true), dbe.clone()], ..job() };
        assert_eq!(
            findings(&faulted, &t).last().map(String::as_str),
            Some(
                "ran on GPUs with faults: XID 79 ×2 on h/2 (took the GPU down), double-bit ECC error \
                 (uncorrectable) ×1 on h/0 (took the GPU down); see apron events"
            )
        );
        let many = JobRow {
            faults: vec![
                xid(13, 3, &["h/0", "h/1"], false),
                xid(31, 2, &["h/1"], false),
                xid(43, 1, &["h/3"], false),
                dbe,
            ],
            ..job()
        };
        assert_eq!(
            findings(&many, &t).last().map(String::as_str),
            Some(
                "ran on GPUs with faults: XID 13 ×3 on h/0 h/1, XID 31 ×2 on h/1, XID 43 ×1 on h/3, 1 more kind; see apron events"
            )
        );
        assert_eq!(
            [None, Some(5.0), Some(10.0), Some(30.0), Some(50.0), Some(70.0)].map(grade),
            ["?", "F", "D", "C", "B", "A"]
        );
    }
}
