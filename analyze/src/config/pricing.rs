//! Money: the config's prices and team rules made available to SQL, and the
//! views every report reads: `gpu_minute_states` (each GPU-minute's
//! seconds, activity, energy and state: `queries/gpu_minute_states.sql`),
//! `proc_minute_states` (each process-minute's memory, user and team:
//! `queries/proc_minute_states.sql`) and `minute_costs` (each GPU-minute
//! priced and attributed: `queries/minute_costs.sql`).
//!
//! The views read the config's prices and team rules as tables
//! ([`crate::config::tables`]: `apron_gpu_rates`, `apron_team_rules`), so
//! their SQL runs unchanged on other engines (`apron export-sql`). For
//! ad-hoc queries two SQL functions carry the same decisions:
//! `apron_gpu_rate(gpu_model)`, what a second of a GPU of that model costs
//! besides energy (its purchase price written off over its lifetime, plus
//! its operating cost), and `apron_team(user, uid, k8s_namespace,
//! slurm_account[, k8s_labels])`, the team the config's rules give a process. The
//! decisions themselves are [`crate::config`]'s; this module only applies them.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ScalarUDF, Signature, SimpleScalarUDF, TypeSignature, Volatility, create_udf,
};

use crate::config::{Config, Who, gpu_cost_for, rate_per_second, team_of};
use crate::error::{Error, SessionError};
use crate::report::period::Period;
use crate::session::Session;
use crate::session::queries;

/// Registers `apron_gpu_rate` and `apron_team` with `session`, applying `config`.
pub fn register_functions(session: &Session, config: &Config) {
    let ctx = session.context();
    let rates = Arc::new(config.clone());
    let rate = create_udf(
        "apron_gpu_rate",
        vec![DataType::Utf8],
        DataType::Float64,
        Volatility::Immutable,
        Arc::new(move |args: &[ColumnarValue]| gpu_rate(&rates, args)),
    );
    ctx.register_udf(rate);
    let teams = Arc::new(config.clone());
    // Four arguments as before pod labels were recorded; a fifth, the
    // labels, for a config with `k8s_labels` rules.
    let four = vec![DataType::Utf8, DataType::Int64, DataType::Utf8, DataType::Utf8];
    let five = [four.clone(), vec![DataType::Utf8]].concat();
    let signature = Signature::one_of(
        vec![TypeSignature::Exact(four), TypeSignature::Exact(five)],
        Volatility::Immutable,
    );
    let team = SimpleScalarUDF::new_with_signature(
        "apron_team",
        signature,
        DataType::Utf8,
        Arc::new(move |args: &[ColumnarValue]| team(&teams, args)),
    );
    ctx.register_udf(ScalarUDF::from(team));
}

/// Registers the functions, the config's tables and the views
/// `gpu_minute_states`, `proc_minute_states` and `alloc_minute_states` for
/// `period` under `config`: what zombies, reclaim and `minute_costs` read.
pub async fn register_states(session: &Session, config: &Config, period: &Period) -> Result<(), Error> {
    register_functions(session, config);
    crate::config::tables::register(session, config)?;
    let [start, end] = period.params();
    let threshold = ScalarValue::Float64(Some(config.idle.threshold_pct));
    // In the order they read each other: gpu_minute_states reads
    // alloc_minute_states.
    let views = [
        ("alloc_minute_states", queries::ALLOC_MINUTE_STATES, vec![start.clone(), end.clone()]),
        ("gpu_minute_states", queries::GPU_MINUTE_STATES, vec![start.clone(), end.clone(), threshold]),
        ("proc_minute_states", queries::PROC_MINUTE_STATES, vec![start, end]),
    ];
    let ctx = session.context();
    for (name, sql, params) in views {
        let view = session.sql_with_params(sql, params).await?.into_view();
        // Registered again (zombies and reclaim beside the costs of one
        // report): the newest registration stands.
        ctx.deregister_table(name).map_err(|source| SessionError::Execute { source })?;
        ctx.register_table(name, view).map_err(|source| SessionError::Execute { source })?;
    }
    Ok(())
}

/// Registers `minute_costs` for `period` under `config` (with the functions
/// and views it needs), as a view: each query that reads it computes it
/// again (`apron sql`; the reports read the ledger's `cost_buckets`).
pub async fn register_minute_costs(session: &Session, config: &Config, period: &Period) -> Result<(), Error> {
    register_states(session, config, period).await?;
    let params = vec![
        ScalarValue::Float64(Some(config.energy.price_per_kwh)),
        ScalarValue::Float64(Some(config.energy.pue)),
    ];
    let view = session.sql_with_params(queries::MINUTE_COSTS, params).await?.into_view();
    let ctx = session.context();
    ctx.deregister_table("minute_costs").map_err(|source| SessionError::Execute { source })?;
    ctx.register_table("minute_costs", view).map_err(|source| SessionError::Execute { source })?;
    Ok(())
}

fn gpu_rate(config: &Config, args: &[ColumnarValue]) -> Result<ColumnarValue, DataFusionError> {
    let arrays = ColumnarValue::values_to_arrays(args)?;
    let models = cast(&arrays[0], &DataType::Utf8)?;
    let models = models.as_string::<i32>();
    let mut known: HashMap<Option<&str>, f64> = HashMap::new();
    let rates: Float64Array = (0..models.len())
        .map(|i| {
            let model = models.is_valid(i).then(|| models.value(i));
            let rate = *known
                .entry(model)
                .or_insert_with(|| rate_per_second(gpu_cost_for(config, model.unwrap_or(""))));
            Some(rate)
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(rates) as ArrayRef))
}

/// A process's attributes the team rules look at: user, uid, Kubernetes
/// namespace, Slurm account, pod labels.
type Identity<'a> = (Option<&'a str>, Option<i64>, Option<&'a str>, Option<&'a str>, Option<&'a str>);

/// The `apron_team` of each row: rows of one batch repeat a few
/// identities, so each distinct one is matched against the rules once.
fn team(config: &Config, args: &[ColumnarValue]) -> Result<ColumnarValue, DataFusionError> {
    let arrays = ColumnarValue::values_to_arrays(args)?;
    let text = |i: usize| -> Result<ArrayRef, DataFusionError> { Ok(cast(&arrays[i], &DataType::Utf8)?) };
    let (user, ns, account) = (text(0)?, text(2)?, text(3)?);
    let (user, ns, account) = (user.as_string::<i32>(), ns.as_string::<i32>(), account.as_string::<i32>());
    let labels = if arrays.len() > 4 { Some(text(4)?) } else { None };
    let labels = labels.as_ref().map(|l| l.as_string::<i32>());
    let uid = cast(&arrays[1], &DataType::Int64)?;
    let uid = uid.as_primitive::<Int64Type>();
    fn get(a: &StringArray, i: usize) -> Option<&str> {
        a.is_valid(i).then(|| a.value(i))
    }
    let mut known: HashMap<Identity<'_>, &str> = HashMap::new();
    let teams: StringArray = (0..user.len())
        .map(|i| {
            let key = (
                get(user, i),
                uid.is_valid(i).then(|| uid.value(i)),
                get(ns, i),
                get(account, i),
                labels.and_then(|l| get(l, i)),
            );
            Some(*known.entry(key).or_insert_with_key(
                |&(user, uid, k8s_namespace, slurm_account, k8s_labels)| {
                    team_of(config, &Who { user, uid, k8s_namespace, k8s_labels, slurm_account })
                },
            ))
        })
        .collect();
    Ok(ColumnarValue::Array(Arc::new(teams) as ArrayRef))
}
