//! `apron idle-cost --by team|user|host|gpu`: what idle GPU time cost in
//! the period (`queries/idle_cost.sql` over `minute_costs`), largest first,
//! with the key column named after the grouping.

use std::io::Write;
use std::sync::Arc;

use apron_reports::money;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, IdleBy, IdleCostArgs};
use crate::columns::{f64_column, replace_f64};
use crate::commands::Report;
use crate::error::Error;
use crate::queries;
use crate::rounding::{cents_keeping_total, round_columns};

/// Prints the idle cost per group.
pub async fn run<W: Write>(global: &GlobalArgs, args: &IdleCostArgs, mut out: W) -> Result<(), Error> {
    let mut report = Report::prepare(global, &args.period).await?.with_costs().await?;
    let batch = idle_cost(&report, args.by).await?;
    let total: f64 = f64_column(&batch, "idle_cost").iter().sum();
    report.header.push(format!("Idle:     {} in all", money(total, &report.config.currency)));
    report.header.print(global.format, &mut out)?;
    crate::output::write_batches(global.format, batch.schema(), &[batch], out)?;
    Ok(())
}

/// The idle-cost rows of `report` (which has `minute_costs` registered)
/// grouped `by`: the key column renamed (`team`, `user`, `host`, or
/// `gpu_uuid` followed by `host` and `gpu_index`), hours to 2 decimals and
/// money to the cent.
pub async fn idle_cost(report: &Report, by: IdleBy) -> Result<RecordBatch, Error> {
    let session = &report.session;
    let params = vec![ScalarValue::Utf8(Some(by.name().to_owned()))];
    let df = session.sql_with_params(queries::IDLE_COST, params).await?;
    let batch = session.collect_batch(df).await?;
    let execute = |source: ArrowError| Error::Execute { source: source.into() };
    // Money to the cent, keeping the total (the idle cost `apron spend` gives).
    let cents = cents_keeping_total(&f64_column(&batch, "idle_cost"))?;
    let batch = replace_f64(&batch, "idle_cost", cents.iter().map(|c| *c as f64 / 100.0).collect())
        .map_err(execute)?;
    let unknown = cents_keeping_total(&f64_column(&batch, "unknown_cost"))?;
    let batch = replace_f64(&batch, "unknown_cost", unknown.iter().map(|c| *c as f64 / 100.0).collect())
        .map_err(execute)?;
    let batch = round_columns(
        &batch,
        &[
            ("idle_gpu_hours", 2),
            ("idle_held_gpu_hours", 2),
            ("idle_empty_gpu_hours", 2),
            ("unknown_gpu_hours", 2),
        ],
    )
    .map_err(execute)?;
    keyed(&batch, by).map_err(execute)
}

/// `batch` with `key` named after `by`, and `host`, `gpu_index` kept only
/// for `--by gpu`.
fn keyed(batch: &RecordBatch, by: IdleBy) -> Result<RecordBatch, ArrowError> {
    let key_name = match by {
        IdleBy::Gpu => "gpu_uuid",
        other => other.name(),
    };
    let schema = batch.schema();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        match field.name().as_str() {
            "key" => fields.push(Arc::new(Field::new(key_name, field.data_type().clone(), true))),
            "host" | "gpu_index" if by != IdleBy::Gpu => continue,
            _ => fields.push(Arc::clone(field)),
        }
        columns.push(Arc::clone(column));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}
