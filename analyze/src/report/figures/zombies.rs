//! Zombies: processes that held GPU memory while their GPU sat idle for a
//! stretch (`queries/zombies.sql`), each with its user and team as
//! `proc_minute_states` gives them; most memory-minutes first.
//!
//! The ledger's pass finds every such stretch with its GPU's PCIe traffic;
//! this module tells them apart ([`is_starved`]): a stretch during which the
//! GPU moved at least `[zombie] starved_pcie_mib_per_s` over PCIe is a
//! process starved of data ([`super::starved`], `queries/starved.sql`), not
//! a zombie. For the zombies still running it finds what stops each: its
//! Kubernetes pod or Slurm job, if any (`queries/process_jobs.sql`); the
//! commands themselves are `apron zombies --commands`'.

use std::collections::{BTreeSet, HashMap};

use apron_schemas::time::MINUTE_MS;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::starved::{Starved, held_idle_columns};
use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::output::Rows;
use crate::report::columns::{Columns, batch_of};
use crate::report::period::timestamp;
use crate::session::queries;

pub use crate::ledger::stretches::ZombieRow;

/// The zombie stretches of a period.
#[derive(Debug, Clone, PartialEq)]
pub struct Zombies {
    /// One row per stretch, most memory-minutes first.
    pub rows: Vec<ZombieRow>,
}

impl Zombies {
    /// Distinct processes among the rows (a process idle in several
    /// stretches has a row for each).
    pub fn processes(&self) -> usize {
        self.rows.iter().map(|r| (r.gpu_uuid.as_str(), r.pid, r.proc_start)).collect::<BTreeSet<_>>().len()
    }

    /// Distinct processes holding memory on an idle GPU now ([`idle_now`]):
    /// not every process that paused once in the period, only those whose
    /// stretch runs up to the data's last minute.
    pub fn processes_idle_now(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| idle_now(r))
            .map(|r| (r.host.as_str(), r.pid, r.proc_start))
            .collect::<BTreeSet<_>>()
            .len()
    }
}

/// Whether a stretch is a data-starved process's rather than a zombie's:
/// its GPU moved at least `starved_pcie_mib_per_s` MiB/s over PCIe
/// meanwhile, received and sent together. With 0, none is; a stretch whose
/// traffic is unknown throughout is a zombie's.
pub fn is_starved(row: &ZombieRow, starved_pcie_mib_per_s: u64) -> bool {
    starved_pcie_mib_per_s > 0
        && row.pcie_rx_mib_per_s.unwrap_or(0.0) + row.pcie_tx_mib_per_s.unwrap_or(0.0)
            >= starved_pcie_mib_per_s as f64
}

/// The stretches of processes holding memory on an idle GPU in the period
/// of `report`, as its ledger found them (by the zombie rules it was
/// prepared with), told apart by `starved_pcie_mib_per_s` ([`is_starved`]):
/// the zombies, and the processes starved of data. Both keep the ledger's
/// order, most memory-minutes first.
pub fn held_idle(report: &ReportContext, starved_pcie_mib_per_s: u64) -> Result<(Zombies, Starved), Error> {
    let rows = report.ledger()?.zombies.clone();
    let (starved, zombies) = rows.into_iter().partition(|r| is_starved(r, starved_pcie_mib_per_s));
    Ok((Zombies { rows: zombies }, Starved { rows: starved }))
}

/// The zombie stretches in the period of `report`, without those starved
/// of data by the config's `[zombie] starved_pcie_mib_per_s`.
pub fn zombies(report: &ReportContext) -> Result<Zombies, Error> {
    Ok(held_idle(report, report.config.zombie.starved_pcie_mib_per_s)?.0)
}

/// A zombie idle now, with what stops it.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// Its first stretch in the list (the most memory-minutes) of those
    /// idle now.
    pub zombie: ZombieRow,
    /// The NVML indexes of the GPUs it holds idle now, in the list's order
    /// (the first is `zombie`'s).
    pub gpu_indexes: Vec<i32>,
    /// The UUIDs of those GPUs, in the same order.
    pub gpu_uuids: Vec<String>,
    /// Its Kubernetes pod's uid, from its cgroup, when it runs in one.
    pub k8s_pod_uid: Option<String>,
    /// Its Slurm job, from its cgroup, when it runs in one.
    pub slurm_job_id: Option<String>,
}

/// Whether a stretch's process holds memory on an idle GPU now: the
/// stretch runs up to its GPU's newest recorded minute (`still_idle`), so
/// the process is there too (`still_running`).
pub fn idle_now(row: &ZombieRow) -> bool {
    row.still_running && row.still_idle
}

/// The processes of `zombies` idle now ([`idle_now`]), one each (by host,
/// pid and start time) in the list's order, with their pod and Slurm job
/// read from `proc_minutes` where the process was last seen idle. A
/// process idle earlier and busy now, or gone, is not among them.
pub async fn running(report: &ReportContext, zombies: &Zombies) -> Result<Vec<Running>, Error> {
    let mut out: Vec<Running> = Vec::new();
    let mut at: HashMap<(&str, i32, Option<i64>), usize> = HashMap::new();
    for row in zombies.rows.iter().filter(|r| idle_now(r)) {
        match at.get(&(row.host.as_str(), row.pid, row.proc_start)) {
            Some(&i) => {
                if !out[i].gpu_uuids.contains(&row.gpu_uuid) {
                    out[i].gpu_indexes.push(row.gpu_index);
                    out[i].gpu_uuids.push(row.gpu_uuid.clone());
                }
            }
            None => {
                at.insert((row.host.as_str(), row.pid, row.proc_start), out.len());
                out.push(Running {
                    zombie: row.clone(),
                    gpu_indexes: vec![row.gpu_index],
                    gpu_uuids: vec![row.gpu_uuid.clone()],
                    k8s_pod_uid: None,
                    slurm_job_id: None,
                });
            }
        }
    }
    // Each process held memory in the last minute of each of its stretches.
    let last = |r: &ZombieRow| r.idle_since + (r.idle_minutes - 1).max(0) * MINUTE_MS;
    let running_rows = zombies.rows.iter().filter(|r| idle_now(r));
    let (Some(from), Some(to)) = (running_rows.clone().map(last).min(), running_rows.clone().map(last).max())
    else {
        return Ok(out);
    };
    if !report.session.tables().iter().any(|t| t.name() == "proc_minutes") {
        return Ok(out);
    }
    let batch =
        query(&report.session, queries::PROCESS_JOBS, vec![timestamp(from), timestamp(to + MINUTE_MS)])
            .await?;
    let jobs = ProcessJobs::of(&batch).map_err(unreadable)?;
    // The rows' GPUs by process, to find a job recorded on any of them.
    let gpus: HashMap<(i32, Option<i64>, &str), &str> =
        running_rows.map(|r| ((r.pid, r.proc_start, r.gpu_uuid.as_str()), r.host.as_str())).collect();
    for job in jobs {
        let Some(&host) = gpus.get(&(job.pid, job.proc_start, job.gpu_uuid.as_str())) else { continue };
        let Some(&i) = at.get(&(host, job.pid, job.proc_start)) else { continue };
        let r = &mut out[i];
        r.k8s_pod_uid = r.k8s_pod_uid.take().or(job.k8s_pod_uid);
        r.slurm_job_id = r.slurm_job_id.take().or(job.slurm_job_id);
    }
    Ok(out)
}

/// One row of `queries/process_jobs.sql`.
struct ProcessJobs {
    gpu_uuid: String,
    pid: i32,
    proc_start: Option<i64>,
    k8s_pod_uid: Option<String>,
    slurm_job_id: Option<String>,
}

impl ProcessJobs {
    fn of(batch: &RecordBatch) -> Result<Vec<ProcessJobs>, ArrowError> {
        let c = Columns::of(batch);
        let (uuid, pid, start) = (c.text("gpu_uuid")?, c.i32("pid")?, c.timestamp_ms_opt("proc_start")?);
        let (pod, job) = (c.text_opt("k8s_pod_uid")?, c.text_opt("slurm_job_id")?);
        let rows = uuid.into_iter().zip(pid).zip(start).zip(pod).zip(job);
        Ok(rows
            .map(|((((gpu_uuid, pid), proc_start), k8s_pod_uid), slurm_job_id)| ProcessJobs {
                gpu_uuid,
                pid,
                proc_start,
                k8s_pod_uid,
                slurm_job_id,
            })
            .collect())
    }
}

impl Rows for Zombies {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        batch_of(held_idle_columns(&self.rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::columns::Columns;

    fn row(gpu_uuid: &str, pid: i32, proc_start: Option<i64>, idle_since: i64) -> ZombieRow {
        ZombieRow {
            host: "node01".into(),
            gpu_index: 0,
            gpu_uuid: gpu_uuid.into(),
            pid,
            proc_start,
            comm: None,
            user: Some("alice".into()),
            team: "vision".into(),
            used_mem_bytes: Some(1 << 30),
            idle_since,
            idle_minutes: 30,
            still_running: false,
            still_idle: false,
            activity_pct: Some(1.0),
            pcie_rx_mib_per_s: None,
            pcie_tx_mib_per_s: None,
        }
    }

    #[test]
    fn traffic_in_and_out_at_the_threshold_makes_a_stretch_starved() {
        let with = |rx: Option<f64>, tx: Option<f64>| ZombieRow {
            pcie_rx_mib_per_s: rx,
            pcie_tx_mib_per_s: tx,
            ..row("GPU-a", 7, Some(1_000), 0)
        };
        assert!(is_starved(&with(Some(60.0), Some(40.0)), 100), "received and sent add up");
        assert!(!is_starved(&with(Some(60.0), Some(39.9)), 100));
        assert!(is_starved(&with(Some(100.0), None), 100), "one direction known is enough");
        assert!(!is_starved(&with(None, None), 1), "unknown traffic: a zombie");
        assert!(!is_starved(&with(Some(1e6), Some(1e6)), 0), "0 turns it off");
    }

    #[test]
    fn a_process_idle_in_two_stretches_counts_once() {
        let zombies = Zombies {
            rows: vec![
                row("GPU-a", 7, Some(1_000), 0),
                row("GPU-a", 7, Some(1_000), 3_600_000),
                // The same pid started again is another process; so is the pid on another GPU.
                row("GPU-a", 7, Some(2_000), 0),
                row("GPU-b", 7, Some(1_000), 0),
                row("GPU-b", 8, None, 0),
            ],
        };
        assert_eq!(zombies.processes(), 4);
        let batch = zombies.to_batch().expect("columns of one length");
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            [
                "host",
                "gpu_index",
                "gpu_uuid",
                "pid",
                "proc_start",
                "comm",
                "user",
                "team",
                "used_mem_bytes",
                "idle_since",
                "idle_minutes",
                "still_running",
                "still_idle"
            ]
        );
        let c = Columns::of(&batch);
        assert_eq!(c.timestamp_ms_opt("proc_start").expect("times")[4], None);
        assert_eq!(c.text_opt("comm").expect("text")[0], None);
        assert_eq!(zombies.processes_idle_now(), 0, "none is idle now");
        // Idle now: still running, its stretch up to the newest minute; one
        // process on two GPUs counts once; idle earlier and busy now does not.
        let now = |gpu: &str, pid: i32, idle: bool| ZombieRow {
            still_running: true,
            still_idle: idle,
            ..row(gpu, pid, Some(1_000), 0)
        };
        let zombies = Zombies {
            rows: vec![
                now("GPU-a", 7, true),
                now("GPU-b", 7, true),
                now("GPU-c", 8, false),
                now("GPU-d", 9, true),
            ],
        };
        assert_eq!((zombies.processes(), zombies.processes_idle_now()), (4, 2));
    }
}
