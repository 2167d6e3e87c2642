//! `apron reclaim`: GPUs idle for at least `--for` in a row
//! (`queries/reclaim.sql`), over the period (default the last 30 days), with
//! the idle threshold and the default stretch from the config.

use std::io::Write;

use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, ReclaimArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::queries;

/// Lists the idle stretches, longest first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ReclaimArgs, mut out: W) -> Result<(), Error> {
    let report = Report::prepare(global, &args.period).await?;
    report.header.print(global.format, &mut out)?;
    let idle_for = args.idle_for.unwrap_or(report.config.reclaim.idle_for);
    let batch = reclaim(&report, idle_for).await?;
    crate::output::write_batches(global.format, batch.schema(), &[batch], out)?;
    Ok(())
}

/// The idle stretches of at least `idle_for` in the period of `report`,
/// longest first.
pub async fn reclaim(report: &Report, idle_for: Duration) -> Result<RecordBatch, Error> {
    crate::cost::register_states(&report.session, &report.config, &report.period).await?;
    let params = vec![ScalarValue::Int64(Some(super::whole_minutes(idle_for)))];
    let df = report.session.sql_with_params(queries::RECLAIM, params).await?;
    report.session.collect_batch(df).await
}
