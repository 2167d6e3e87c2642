//! `apron reclaim`: GPUs idle for at least `--for` in a row
//! (`queries/reclaim.sql`), over the period (default the last 30 days), with
//! the idle threshold and the default stretch from the config.

use std::io::Write;

use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, ReclaimArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::queries;

/// Lists the idle stretches, longest first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ReclaimArgs, mut out: W) -> Result<(), Error> {
    let Report { config, session, period, header, .. } = Report::prepare(global, &args.period).await?;
    let idle_for = args.idle_for.unwrap_or(config.reclaim.idle_for);
    let min_minutes = super::whole_minutes(idle_for);
    header.print(global.format, &mut out)?;
    let [start, end] = period.params();
    let params = vec![
        start,
        end,
        ScalarValue::Float64(Some(config.idle.threshold_pct)),
        ScalarValue::Int64(Some(min_minutes)),
    ];
    let df = session.sql_with_params(queries::RECLAIM, params).await?;
    session.print(df, global.format, out).await?;
    Ok(())
}
