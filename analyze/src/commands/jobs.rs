//! `apron jobs`: every job over the period (default the last 30 days), the
//! costliest idle first ([`crate::report::figures::jobs`]), from the
//! ledger's one pass over the period's minutes.

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::figures::jobs::jobs;

/// `apron jobs [--user U] [--team T] [period]`.
#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// Only this user's jobs (as shown: the name, or "uid N")
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,

    /// Only this team's jobs
    #[arg(long, value_name = "TEAM")]
    pub team: Option<String>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Lists the jobs.
pub async fn run<W: Write>(global: &GlobalArgs, args: &JobsArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let jobs = jobs(&report)?.only(args.user.as_deref(), args.team.as_deref());
    let idle: f64 = jobs.rows.iter().map(|r| r.idle_cost).sum();
    let cost: f64 = jobs.rows.iter().map(|r| r.cost).sum();
    let money = |x| apron_reports::money(x, &report.config.currency);
    report.header.push(format!(
        "Jobs: {}, costing {}, of which {} idle",
        jobs.rows.len(),
        money(cost),
        money(idle)
    ));
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &jobs, out)?;
    Ok(())
}
