//! The minute tables as reports see them: complete, whatever the recorder
//! left behind.
//!
//! `gpu_minutes` and `proc_minutes` are registered as the union of three
//! disjoint parts:
//!
//! 1. the rollup files the recorder wrote when it closed each raw file;
//! 2. the rollups of the rows still in the write-ahead log (the open file),
//!    computed when the session opens ([`crate::session::recent`]);
//! 3. minutes computed from raw files (`queries/gpu_minutes_from_raw.sql`,
//!    `queries/proc_minutes_from_raw.sql`) for every (date, host) partition
//!    that has raw files but no `gpu_minutes` file: data imported or written
//!    by other tools, or rollups deleted.
//!
//! So every report gives the same answer on raw files alone, and reads the
//! small rollups where they exist. A partition counts as rolled up as soon
//! as it holds one `gpu_minutes` file (the recorder writes a file's rollups
//! right after the file itself): raw files added by hand to a partition the
//! recorder also wrote are not seen by the reports until their rollups are.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use apron_schemas::folders::{Unlistable, data_files, partition_dirs};
use apron_schemas::{DataLayout, Table};
use chrono::NaiveDate;
use datafusion::arrow::datatypes::DataType;
use datafusion::catalog::TableProvider;
use datafusion::error::DataFusionError;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::functions::expr_fn::concat;
use datafusion::logical_expr::{LogicalPlan, cast, col, lit};
use datafusion::prelude::{SessionConfig, SessionContext};

use crate::session::queries;

/// One Hive partition: a UTC date and a host.
pub(crate) type Partition = (NaiveDate, String);

/// The partitions of `table` under `layout` that hold at least one data file.
pub(crate) fn partitions(layout: &DataLayout, table: Table) -> BTreeSet<Partition> {
    // Folders that cannot be listed hold nothing the reports can read.
    let dirs = partition_dirs(layout, table, Unlistable::Skip).unwrap_or_default();
    dirs.into_iter().filter(|p| has_data_file(&p.path)).map(|p| (p.date, p.host)).collect()
}

fn has_data_file(dir: &Path) -> bool {
    !data_files(dir).is_empty()
}

/// What part 3 needs: the raw partitions with no rollups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unrolled {
    /// Every raw partition has rollups: nothing to compute.
    None,
    /// No partition has rollups: compute minutes from every raw file.
    All,
    /// These partitions have raw files and no rollups.
    Some(BTreeSet<Partition>),
}

/// Which raw partitions under `layout` lack rollups.
pub(crate) fn unrolled(layout: &DataLayout) -> Unrolled {
    let rolled = partitions(layout, Table::GpuMinutes);
    let mut raw = partitions(layout, Table::GpuSamples);
    raw.extend(partitions(layout, Table::ProcSamples));
    let missing: BTreeSet<Partition> = raw.difference(&rolled).cloned().collect();
    if missing.is_empty() {
        Unrolled::None
    } else if rolled.is_empty() {
        Unrolled::All
    } else {
        Unrolled::Some(missing)
    }
}

/// The plans of part 3, `gpu_minutes` then `proc_minutes` rows computed
/// from `gpu_samples` and `proc_samples` (the raw files only, no WAL rows:
/// those are part 2), narrowed to `which`. `None` when there is nothing to
/// compute. `config` and `runtime` are the main session's (its memory
/// pool), though the plans run there anyway.
pub(crate) async fn from_raw(
    config: SessionConfig,
    runtime: Arc<RuntimeEnv>,
    gpu_samples: Option<Arc<dyn TableProvider>>,
    proc_samples: Option<Arc<dyn TableProvider>>,
    which: &Unrolled,
) -> Result<Option<(LogicalPlan, LogicalPlan)>, DataFusionError> {
    let Some(gpu_samples) = gpu_samples else { return Ok(None) };
    if *which == Unrolled::None {
        return Ok(None);
    }
    // A context of its own, where the raw tables are the narrowed ones; the
    // plans it makes hold their sources and run in the main session.
    let ctx = SessionContext::new_with_config_rt(config, runtime);
    let narrow = |provider: Arc<dyn TableProvider>| -> Result<Arc<dyn TableProvider>, DataFusionError> {
        let df = ctx.read_table(provider)?;
        let df = match which {
            Unrolled::Some(parts) => {
                let key = concat(vec![cast(col("date"), DataType::Utf8), lit("/"), col("host")]);
                let list = parts.iter().map(|(d, h)| lit(format!("{d}/{h}"))).collect();
                df.filter(key.in_list(list, false))?
            }
            _ => df,
        };
        Ok(df.into_view())
    };
    ctx.register_table("gpu_samples", narrow(gpu_samples)?)?;
    let procs = match proc_samples {
        Some(p) => narrow(p)?,
        None => Arc::new(datafusion::datasource::empty::EmptyTable::new(
            crate::session::table_schema::full_schema(Table::ProcSamples),
        )),
    };
    ctx.register_table("proc_samples", procs)?;
    let gpu = ctx.sql(queries::GPU_MINUTES_FROM_RAW).await?.into_unoptimized_plan();
    let proc = ctx.sql(queries::PROC_MINUTES_FROM_RAW).await?.into_unoptimized_plan();
    Ok(Some((gpu, proc)))
}
