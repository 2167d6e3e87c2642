//! Power: the fleet's mean power per time bucket and the energy drawn since
//! the period began (`queries/power.sql` over `minute_costs`), the series
//! of the power chart.

use apron_reports::PowerPoint;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::report::columns::Columns;
use crate::session::queries;

/// Mean fleet power per bucket of `bucket_seconds` (a whole number of
/// minutes) of `report` (which has `minute_costs` registered) and the
/// energy up to each bucket's end, oldest first.
pub async fn power(report: &ReportContext, bucket_seconds: i64) -> Result<Vec<PowerPoint>, Error> {
    let params = vec![ScalarValue::Int64(Some(bucket_seconds))];
    let batch = query(&report.session, queries::POWER, params).await?;
    read(&batch).map_err(unreadable)
}

fn read(batch: &RecordBatch) -> Result<Vec<PowerPoint>, ArrowError> {
    let c = Columns::of(batch);
    let (bucket, power_kw, energy_kwh) =
        (c.timestamp_ms("bucket")?, c.f64_opt("power_kw")?, c.f64_opt("energy_kwh")?);
    Ok((0..c.len())
        .map(|i| PowerPoint {
            t_ms: bucket[i],
            // The chart draws a bucket without measured energy at 0.
            power_kw: power_kw[i].unwrap_or(0.0),
            energy_kwh: energy_kwh[i].unwrap_or(0.0),
        })
        .collect())
}
