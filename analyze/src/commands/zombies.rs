//! `apron zombies`: processes that held GPU memory while their GPU sat idle
//! (`queries/zombies.sql`), each given its team by the config's rules.

use std::io::Write;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema};
use std::time::Duration;

use datafusion::arrow::compute::concat_batches;
use datafusion::common::ScalarValue;

use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::commands::Report;
use crate::config::{Config, team_of};
use crate::error::{Error, SessionError};
use crate::queries;

/// The columns printed, in order; `team` is computed here.
const COLUMNS: [&str; 12] = [
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
    "still_running",
];

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
/// least `min_mem_mib` MiB on a GPU idle for at least `min_idle`, each with
/// its team; most memory-minutes first.
pub async fn zombies(report: &Report, min_idle: Duration, min_mem_mib: u64) -> Result<RecordBatch, Error> {
    let min_mem_bytes = i64::try_from(min_mem_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX);
    let [start, end] = report.period.params();
    let params = vec![
        start,
        end,
        ScalarValue::Float64(Some(report.config.idle.threshold_pct)),
        ScalarValue::Int64(Some(min_mem_bytes)),
        ScalarValue::Int64(Some(super::whole_minutes(min_idle))),
    ];
    let df = report.session.sql_with_params(queries::ZOMBIES, params).await?;
    let (schema, batches) = report.session.collect(df).await?;
    let execute =
        |source: datafusion::arrow::error::ArrowError| SessionError::Execute { source: source.into() };
    let batches = batches
        .iter()
        .map(|b| with_team(b, &report.config))
        .collect::<Result<Vec<_>, _>>()
        .map_err(execute)?;
    let out_schema = match batches.first() {
        Some(b) => b.schema(),
        None => output_schema(&schema)?,
    };
    Ok(concat_batches(&out_schema, &batches).map_err(execute)?)
}

/// The printed schema: the query's columns of [`COLUMNS`], `team` as text.
fn output_schema(query: &Schema) -> Result<Arc<Schema>, Error> {
    let fields = COLUMNS
        .iter()
        .map(|name| match *name {
            "team" => Ok(Field::new("team", DataType::Utf8, false)),
            name => query
                .field_with_name(name)
                .cloned()
                .map_err(|source| SessionError::Execute { source: source.into() }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// `batch` with the identity columns replaced by the team they map to.
fn with_team(
    batch: &RecordBatch,
    config: &Config,
) -> Result<RecordBatch, datafusion::arrow::error::ArrowError> {
    let text = |name: &str| -> Result<Option<StringArray>, datafusion::arrow::error::ArrowError> {
        batch
            .column_by_name(name)
            .map(|c| cast(c, &DataType::Utf8).map(|a| a.as_string::<i32>().clone()))
            .transpose()
    };
    let (user, ns, account) = (text("user")?, text("k8s_namespace")?, text("slurm_account")?);
    let uid = batch.column_by_name("uid").map(|c| cast(c, &DataType::Int64)).transpose()?;
    let uid = uid.as_ref().map(|c| c.as_primitive::<Int64Type>());
    let get = |a: &Option<StringArray>, i: usize| {
        a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i).to_owned())
    };
    let teams: StringArray = (0..batch.num_rows())
        .map(|i| {
            let u = get(&user, i);
            let n = get(&ns, i);
            let s = get(&account, i);
            let id = uid.filter(|c| c.is_valid(i)).map(|c| c.value(i));
            Some(team_of(config, u.as_deref(), id, n.as_deref(), s.as_deref()).to_owned())
        })
        .collect();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for name in COLUMNS {
        if name == "team" {
            fields.push(Field::new("team", DataType::Utf8, false));
            columns.push(Arc::new(teams.clone()));
        } else {
            let idx = batch.schema().index_of(name)?;
            fields.push(batch.schema().field(idx).clone());
            columns.push(batch.column(idx).clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}
