//! `apron zombies`: processes that held GPU memory while their GPU sat idle,
//! each with its team ([`crate::figures::zombies`]).

use std::io::Write;

use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::commands::Report;
use crate::error::Error;
use crate::figures::zombies::zombies;
use crate::output::write_rows;
use crate::report_context::rules;

/// Lists the zombie stretches, most memory-minutes first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ZombiesArgs, mut out: W) -> Result<(), Error> {
    // The ledger's pass finds the stretches by the rules asked for.
    let (min_idle, min_mem) = (args.min_idle, args.min_mem);
    let report = Report::prepare_stretches(global, &args.period, |c| {
        rules(
            min_idle.unwrap_or(c.zombie.min_idle),
            min_mem.unwrap_or(c.zombie.min_mem_mib),
            c.reclaim.idle_for,
        )
    })
    .await?;
    report.header.print(global.format, &mut out)?;
    let min_idle = args.min_idle.unwrap_or(report.config.zombie.min_idle);
    let min_mem_mib = args.min_mem.unwrap_or(report.config.zombie.min_mem_mib);
    write_rows(global.format, &zombies(&report, min_idle, min_mem_mib).await?, out)?;
    Ok(())
}
