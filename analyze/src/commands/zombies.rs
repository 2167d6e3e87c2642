//! `apron zombies`: processes that held GPU memory while their GPU sat idle
//! (`queries/zombies.sql`), each with its team by the config's rules.

use std::io::Write;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::queries;

/// Lists the zombie stretches, most memory-minutes first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ZombiesArgs, mut out: W) -> Result<(), Error> {
    let report = Report::prepare(global, &args.period).await?;
    report.header.print(global.format, &mut out)?;
    let min_idle = args.min_idle.unwrap_or(report.config.zombie.min_idle);
    let min_mem_mib = args.min_mem.unwrap_or(report.config.zombie.min_mem_mib);
    let batch = zombies(&report, min_idle, min_mem_mib).await?;
    crate::output::write_batches(global.format, batch.schema(), &[batch], out)?;
    Ok(())
}

/// The zombie stretches in the period of `report`: processes holding at
/// least `min_mem_mib` MiB (or an unknown amount) on a GPU idle for at least
/// `min_idle`, each with its user and team as `proc_minute_states` gives
/// them; most memory-minutes first.
pub async fn zombies(report: &Report, min_idle: Duration, min_mem_mib: u64) -> Result<RecordBatch, Error> {
    crate::cost::register_states(&report.session, &report.config, &report.period).await?;
    let min_mem_bytes = i64::try_from(min_mem_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
    let params = vec![
        ScalarValue::Int64(Some(min_mem_bytes)),
        ScalarValue::Int64(Some(super::whole_minutes(min_idle))),
    ];
    let df = report.session.sql_with_params(queries::ZOMBIES, params).await?;
    report.session.collect_batch(df).await
}
