//! Zombies: processes that held GPU memory while their GPU sat idle for a
//! stretch (`queries/zombies.sql`), each with its user and team as
//! `proc_minute_states` gives them; most memory-minutes first.

use std::collections::BTreeSet;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use apron_schemas::time::HOUR_MS;

use super::Report;
use crate::columns::{self, batch_of};
use crate::error::Error;
use crate::ledger::Ledger;
use crate::output::Rows;
use crate::report_context::rules;

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
}

/// The zombie stretches in the period of `report`: processes holding at
/// least `min_mem_mib` MiB (or an unknown amount) on a GPU idle for at
/// least `min_idle`.
pub async fn zombies(report: &Report, min_idle: Duration, min_mem_mib: u64) -> Result<Zombies, Error> {
    let rules = rules(min_idle, min_mem_mib, report.config.reclaim.idle_for);
    let rows = match &report.ledger {
        Some(ledger) if ledger.rules == rules => ledger.zombies.clone(),
        _ => Ledger::compute(&report.session, &report.config, &report.period, HOUR_MS, rules).await?.zombies,
    };
    Ok(Zombies { rows })
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
    use crate::columns::Columns;

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
