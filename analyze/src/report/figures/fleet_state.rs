//! Fleet state: how many GPUs were busy, idle-held, idle-empty and of
//! unknown activity over time (`queries/fleet_state.sql` over `minute_costs`), the series of the
//! fleet-state chart.

use apron_reports::FleetStatePoint;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::report::columns::Columns;
use crate::session::queries;

/// The mean GPUs in each state per bucket of `bucket_seconds` (a whole
/// number of minutes) of `report` (which has `minute_costs` registered),
/// oldest first; buckets without data are left out.
pub async fn fleet_state(report: &ReportContext, bucket_seconds: i64) -> Result<Vec<FleetStatePoint>, Error> {
    let params = vec![ScalarValue::Int64(Some(bucket_seconds))];
    let batch = query(&report.session, queries::FLEET_STATE, params).await?;
    read(&batch).map_err(unreadable)
}

fn read(batch: &RecordBatch) -> Result<Vec<FleetStatePoint>, ArrowError> {
    let c = Columns::of(batch);
    let (bucket, busy, idle_held, idle_empty, unknown) = (
        c.timestamp_ms("bucket")?,
        c.f64("busy")?,
        c.f64("idle_held")?,
        c.f64("idle_empty")?,
        c.f64("unknown")?,
    );
    Ok((0..c.len())
        .map(|i| FleetStatePoint {
            t_ms: bucket[i],
            busy: busy[i],
            idle_held: idle_held[i],
            idle_empty: idle_empty[i],
            unknown: unknown[i],
        })
        .collect())
}
