//! `apron idle-cost --by team|user|host|gpu`: what idle GPU time cost in
//! the period, largest first, with the total in the header
//! ([`crate::report::figures::idle_cost`]).

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::figures::idle_cost::{IdleBy, idle_cost};

/// `apron idle-cost [--by team|user|host|gpu] [period]`.
#[derive(Debug, Clone, Args)]
pub struct IdleCostArgs {
    /// What to group idle time by.
    #[arg(long, value_enum, default_value_t = IdleBy::Team)]
    pub by: IdleBy,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Prints the idle cost per group.
pub async fn run<W: Write>(global: &GlobalArgs, args: &IdleCostArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let idle = idle_cost(&report, args.by).await?;
    report.header.push(idle.header_line(&report.config.currency));
    if idle.rows.iter().any(|r| r.key.as_deref() == Some(apron_reports::UNALLOCATED)) {
        report.header.push(crate::report::header::unallocated_line());
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &idle, out)?;
    Ok(())
}
