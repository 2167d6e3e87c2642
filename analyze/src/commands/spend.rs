//! `apron spend`: what each team's GPU time cost in the period, with the
//! fleet's cost in the header ([`crate::report::figures::spend`]).

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::figures::spend::spend;

/// `apron spend [period]`.
#[derive(Debug, Clone, Args)]
pub struct SpendArgs {
    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Prints the spend per team.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SpendArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let spend = spend(&report).await?;
    report.header.push(spend.totals.header_line(&report.config.currency));
    if spend.rows.iter().any(|r| r.team == apron_reports::UNALLOCATED) {
        report.header.push(crate::report::header::unallocated_line());
    }
    for line in spend.budget_lines(&report.config) {
        report.header.push(line);
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &spend, out)?;
    Ok(())
}
