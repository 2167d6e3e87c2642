//! `apron reclaim`: GPUs idle for at least `--for` in a row
//! (`queries/reclaim.sql`), over the last `--last` (default 30 days), with
//! the idle threshold and the default stretch from the config.

use std::io::Write;

use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, ReclaimArgs};
use crate::config::Config;
use crate::error::Error;
use crate::queries;
use crate::session::Session;

/// Lists the idle stretches, longest first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ReclaimArgs, out: W) -> Result<(), Error> {
    let config = Config::load(global.config.as_deref())?;
    let session = Session::open(&global.data).await?;
    let idle_for = args.idle_for.unwrap_or(config.reclaim.idle_for);
    let min_minutes = super::whole_minutes(idle_for);
    let [start, end] = super::last_period(args.last);
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
