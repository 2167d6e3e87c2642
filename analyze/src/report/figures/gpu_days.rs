//! GPU-days: every physical GPU's busy share per UTC day
//! (`queries/gpu_days.sql` over `minute_costs`), the series of the gpu-days
//! chart, each GPU labelled `host/index`: a MIG GPU is one row, its
//! instances each counted by its share of it.

use apron_reports::GpuDayCell;
use chrono::NaiveDate;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Date32Type;
use datafusion::arrow::error::ArrowError;

use super::{ReportContext, query, unreadable};
use crate::error::Error;
use crate::report::columns::Columns;
use crate::session::queries;

/// Each physical GPU's busy share per day of `report` (which has
/// `minute_costs` registered), by host, index and day.
pub async fn gpu_days(report: &ReportContext) -> Result<Vec<GpuDayCell>, Error> {
    let batch = query(&report.session, queries::GPU_DAYS, Vec::new()).await?;
    read(&batch).map_err(unreadable)
}

fn read(batch: &RecordBatch) -> Result<Vec<GpuDayCell>, ArrowError> {
    let c = Columns::of(batch);
    let (host, gpu_index, day, util) =
        (c.text("host")?, c.i32("gpu_index")?, c.date32("day")?, c.f64_opt("busy_share_pct")?);
    Ok((0..c.len())
        .map(|i| GpuDayCell {
            gpu: format!("{}/{}", host[i], gpu_index[i]),
            day: Date32Type::to_naive_date_opt(day[i]).unwrap_or(NaiveDate::MIN),
            busy_share_pct: util[i],
        })
        .collect())
}
