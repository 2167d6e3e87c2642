//! `apron idle-cost --by team|user|host|gpu`: what idle GPU time cost in
//! the period, largest first, with the total in the header
//! ([`crate::report::figures::idle_cost`]).

use std::io::Write;

use crate::cli::{GlobalArgs, IdleCostArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::figures::idle_cost::idle_cost;

/// Prints the idle cost per group.
pub async fn run<W: Write>(global: &GlobalArgs, args: &IdleCostArgs, mut out: W) -> Result<(), Error> {
    let mut report = Report::prepare_costs(global, &args.period).await?;
    let idle = idle_cost(&report, args.by).await?;
    report.header.push(idle.header_line(&report.config.currency));
    if idle.rows.iter().any(|r| r.key.as_deref() == Some(apron_reports::UNALLOCATED)) {
        report.header.push(crate::report::header::unallocated_line());
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &idle, out)?;
    Ok(())
}
