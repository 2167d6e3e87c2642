//! What `apron sql` registers for a statement that names it, and only
//! then (so a plain query needs no config): the views `minute_costs`,
//! `gpu_minute_states` and `proc_minute_states` ([`crate::config::pricing`]) and the
//! ledger's `cost_buckets` ([`crate::ledger`]) for the period flags under
//! the config, and the config's `apron_` functions and tables.
//!
//! One query registers what it names once; the shell and a script keep a
//! [`Registered`] across their statements, so a view is registered the
//! first time a statement names it (the ledger is computed once).

use apron_schemas::time::MINUTE_MS;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::config::Config;
use crate::error::Error;
use crate::ledger::Ledger;
use crate::report::period::Period;
use crate::session::Session;

/// What a session has registered so far of the views and functions above.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Registered {
    /// `apron_gpu_rate`, `apron_team` and the config's tables.
    functions: bool,
    /// `gpu_minute_states` and `proc_minute_states` (with the functions).
    states: bool,
    /// `minute_costs` (with the states).
    costs: bool,
    /// `cost_buckets`.
    buckets: bool,
}

/// Registers in `session` what `text` names and `registered` lacks, for the
/// period of `period` (chosen now) under `global.config`.
pub(crate) async fn register_named(
    session: &Session,
    global: &GlobalArgs,
    period: &PeriodArgs,
    text: &str,
    registered: &mut Registered,
) -> Result<(), Error> {
    let text = text.to_ascii_lowercase();
    let config = || Config::load(global.config.as_deref());
    let period = || Period::choose(&period.choice(), chrono::Utc::now().timestamp_millis());
    if text.contains("minute_costs") {
        if !registered.costs {
            crate::config::pricing::register_minute_costs(session, &config()?, &period()?).await?;
            registered.costs = true;
            registered.states = true;
            registered.functions = true;
        }
    } else if text.contains("gpu_minute_states")
        || text.contains("proc_minute_states")
        || text.contains("alloc_minute_states")
    {
        if !registered.states {
            crate::config::pricing::register_states(session, &config()?, &period()?).await?;
            registered.states = true;
            registered.functions = true;
        }
    } else if text.contains("apron_") && !registered.functions {
        // A query that calls an `apron_` function or reads a config table
        // gets them from the config.
        let config = config()?;
        crate::config::pricing::register_functions(session, &config);
        crate::config::tables::register(session, &config)?;
        registered.functions = true;
    }
    if text.contains("cost_buckets") && !registered.buckets {
        register_cost_buckets(session, config()?, &period()?).await?;
        registered.buckets = true;
    }
    Ok(())
}

/// Registers `cost_buckets` for `period` under `config`, per minute.
async fn register_cost_buckets(session: &Session, config: Config, period: &Period) -> Result<(), Error> {
    let rules = crate::report::context::rules(
        config.zombie.min_idle,
        config.zombie.min_mem_mib,
        config.reclaim.idle_for,
    );
    let ledger = Ledger::compute(session, &config, period, MINUTE_MS, rules).await?;
    ledger.register(session)
}
