//! `apron savings`: the period replayed with GPUs reclaimed after
//! `--reclaim-after` idle and zombies ended after `--zombie-after`, what it
//! would have freed per team against the idle cost
//! ([`crate::report::figures::savings`]).

use std::io::Write;

use crate::cli::{GlobalArgs, SavingsArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::savings::savings;
use crate::report::figures::spend::spend;

/// Prints what the rules would have freed, per team and in total.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SavingsArgs, mut out: W) -> Result<(), Error> {
    let (reclaim_after, zombie_after) = (args.reclaim_after, args.zombie_after);
    let mut report = Report::prepare_costs_by(global, &args.period, |c| {
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
