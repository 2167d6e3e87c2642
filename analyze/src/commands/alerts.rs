//! `apron alerts`: the default alert rules checked now (or `--at` a time),
//! with the thresholds and budgets of the config ([`crate::report::figures::alerts`]). Prints the rules that fire
//! and ends with exit code 1 when any does, 0 when none does (printing
//! nothing, so cron mails only when there is something to say).

use std::io::Write;

use chrono::Utc;
use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::commands::outcome::Outcome;
use crate::config::Config;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::context::MonthSoFar;
use crate::report::figures::alerts::alerts;
use crate::report::period;
use crate::session::Session;

/// `apron alerts [--at T]`.
#[derive(Debug, Clone, Args)]
pub struct AlertsArgs {
    /// Check the rules as of this time instead of now: YYYY-MM-DD (midnight
    /// UTC) or an RFC 3339 time. What would have fired then.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub at: Option<i64>,
}

/// Checks the rules over `global.data` and prints those that fire.
pub async fn run<W: Write>(global: &GlobalArgs, args: &AlertsArgs, out: W) -> Result<Outcome, Error> {
    let config = Config::load(global.config.as_deref())?;
    let session = Session::open(&global.data, global.memory_limit()).await?;
    let at = args.at.unwrap_or_else(|| Utc::now().timestamp_millis());
    let month = MonthSoFar::open(&session, &config, at).await?;
    let alerts = alerts(&session, &config, at, month.as_ref()).await?;
    if !alerts.firing() {
        return Ok(Outcome::Done);
    }
    write_rows(global.format, &Style::report(&config.currency), &alerts, out)?;
    Ok(Outcome::AlertsFired)
}
