//! Zombies: processes that held GPU memory while their GPU sat idle for a
//! stretch (`queries/zombies.sql`), each with its user and team as
//! `proc_minute_states` gives them; most memory-minutes first.

use std::collections::BTreeSet;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{Report, query, unreadable, whole_minutes};
use crate::columns::{self, Columns, batch_of};
use crate::error::Error;
use crate::output::Rows;
use crate::queries;

/// One process's idle stretch on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ZombieRow {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// GPU UUID.
    pub gpu_uuid: String,
    /// Process id.
    pub pid: i32,
    /// When the process started, milliseconds since the epoch (UTC); `None`
    /// when it was not recorded.
    pub proc_start: Option<i64>,
    /// Its command name, when recorded.
    pub comm: Option<String>,
    /// Its user: the name, else "uid N", else "(unknown)".
    pub user: Option<String>,
    /// Its team, by the config's rules.
    pub team: String,
    /// Most memory it held during the stretch (bytes); `None` when NVML
    /// gave no figure all along (a process on a GPU holds a context).
    pub used_mem_bytes: Option<i64>,
    /// First minute of the stretch, milliseconds since the epoch (UTC).
    pub idle_since: i64,
    /// Length of the stretch (minutes).
    pub idle_minutes: i64,
    /// Whether the process is in its GPU's newest recorded minute.
    pub still_running: bool,
}

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
}

/// The zombie stretches in the period of `report`: processes holding at
/// least `min_mem_mib` MiB (or an unknown amount) on a GPU idle for at
/// least `min_idle`.
pub async fn zombies(report: &Report, min_idle: Duration, min_mem_mib: u64) -> Result<Zombies, Error> {
    crate::cost::register_states(&report.session, &report.config, &report.period).await?;
    let min_mem_bytes = i64::try_from(min_mem_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
    let params =
        vec![ScalarValue::Int64(Some(min_mem_bytes)), ScalarValue::Int64(Some(whole_minutes(min_idle)))];
    let batch = query(&report.session, queries::ZOMBIES, params).await?;
    Ok(Zombies { rows: read(&batch).map_err(unreadable)? })
}

/// The rows of `queries/zombies.sql`.
fn read(batch: &RecordBatch) -> Result<Vec<ZombieRow>, ArrowError> {
    let c = Columns::of(batch);
    let (host, gpu_index, gpu_uuid, pid) =
        (c.text("host")?, c.i32("gpu_index")?, c.text("gpu_uuid")?, c.i32("pid")?);
    let (proc_start, comm, user) =
        (c.timestamp_ms_opt("proc_start")?, c.text_opt("comm")?, c.text_opt("user")?);
    let team = c.text("team")?;
    let (used_mem_bytes, idle_since) = (c.i64_opt("used_mem_bytes")?, c.timestamp_ms("idle_since")?);
    let (idle_minutes, still_running) = (c.i64("idle_minutes")?, c.bool("still_running")?);
    Ok((0..c.len())
        .map(|i| ZombieRow {
            host: host[i].clone(),
            gpu_index: gpu_index[i],
            gpu_uuid: gpu_uuid[i].clone(),
            pid: pid[i],
            proc_start: proc_start[i],
            comm: comm[i].clone(),
            user: user[i].clone(),
            team: team[i].clone(),
            used_mem_bytes: used_mem_bytes[i],
            idle_since: idle_since[i],
            idle_minutes: idle_minutes[i],
            still_running: still_running[i],
        })
        .collect())
}

impl Rows for Zombies {
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        batch_of(vec![
            ("host", columns::text(r.iter().map(|row| row.host.as_str()))),
            ("gpu_index", columns::int32(r.iter().map(|row| row.gpu_index))),
            ("gpu_uuid", columns::text(r.iter().map(|row| row.gpu_uuid.as_str()))),
            ("pid", columns::int32(r.iter().map(|row| row.pid))),
            ("proc_start", columns::timestamp_ms(r.iter().map(|row| row.proc_start))),
            ("comm", columns::text(r.iter().map(|row| row.comm.as_deref()))),
            ("user", columns::text(r.iter().map(|row| row.user.as_deref()))),
            ("team", columns::text(r.iter().map(|row| row.team.as_str()))),
            ("used_mem_bytes", columns::int64(r.iter().map(|row| row.used_mem_bytes))),
            ("idle_since", columns::timestamp_ms(r.iter().map(|row| row.idle_since))),
            ("idle_minutes", columns::int64(r.iter().map(|row| row.idle_minutes))),
            ("still_running", columns::boolean(r.iter().map(|row| row.still_running))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
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
                "still_running"
            ]
        );
        let c = Columns::of(&batch);
        assert_eq!(c.timestamp_ms_opt("proc_start").expect("times")[4], None);
        assert_eq!(c.text_opt("comm").expect("text")[0], None);
    }
}
