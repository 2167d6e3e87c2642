//! `apron savings`: the period replayed with GPUs reclaimed after
//! `--reclaim-after` idle and zombies ended after `--zombie-after`, what it
//! would have freed per team against the idle cost
//! ([`crate::report::figures::savings`]).

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::savings::savings;
use crate::report::figures::spend::spend;

/// `apron savings [--reclaim-after 2h] [--zombie-after 30m] [period]`.
#[derive(Debug, Clone, Args)]
pub struct SavingsArgs {
    /// Reclaim a GPU once idle this long in a row (default: `[reclaim] for`
    /// of the config, 2h).
    #[arg(long, value_name = "DURATION", value_parser = apron_cli::units::positive_hours)]
    pub reclaim_after: Option<std::time::Duration>,

    /// End a zombie once it has held memory on its idle GPU this long
    /// (default: `[zombie] min_idle` of the config, 10m).
    #[arg(long, value_name = "DURATION", value_parser = apron_cli::units::positive_minutes)]
    pub zombie_after: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Prints what the rules would have freed, per team and in total.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SavingsArgs, mut out: W) -> Result<(), Error> {
    let (reclaim_after, zombie_after) = (args.reclaim_after, args.zombie_after);
    let mut report = ReportContext::prepare_costs_by(global, &args.period, |c| {
        rules(
            zombie_after.unwrap_or(c.zombie.min_idle),
            c.zombie.min_mem_mib,
            reclaim_after.unwrap_or(c.reclaim.idle_for),
        )
    })
    .await?;
    let reclaim_after = args.reclaim_after.unwrap_or(report.config.reclaim.idle_for);
    let zombie_after = args.zombie_after.unwrap_or(report.config.zombie.min_idle);
    let spend = spend(&report).await?;
    let savings = savings(&report, &spend, reclaim_after, zombie_after)?;
    report.header.push(spend.totals.header_line(&report.config.currency));
    if savings.rows.iter().any(|r| r.team == apron_reports::UNALLOCATED) {
        report.header.push(crate::report::header::unallocated_line());
    }
    for line in savings.header_lines(&report.config.currency) {
        report.header.push(line);
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &savings, out)?;
    Ok(())
}
