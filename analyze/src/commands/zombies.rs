//! `apron zombies`: processes that held GPU memory while their GPU sat idle,
//! each with its team ([`crate::figures::zombies`]); those whose GPU moved
//! data over PCIe meanwhile are `apron starved`'s. With `--commands`, the
//! shell script that stops the zombies still running ([`script`]).

use std::io::Write;

use crate::cli::{GlobalArgs, ZombiesArgs};
use crate::commands::Report;
use crate::error::{Error, OutputError};
use crate::figures::zombies::{held_idle, running};
use crate::output::{Style, write_rows};
use crate::report_context::rules;

pub mod script;

/// The wait between TERM and KILL without `--wait`.
const DEFAULT_WAIT_S: u64 = 30;

/// Lists the zombie stretches, most memory-minutes first, or prints the
/// commands that stop those still running.
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
    let min_idle = args.min_idle.unwrap_or(report.config.zombie.min_idle);
    let min_mem_mib = args.min_mem.unwrap_or(report.config.zombie.min_mem_mib);
    let starved = args.starved_pcie.unwrap_or(report.config.zombie.starved_pcie_mib_per_s);
    let (zombies, _) = held_idle(&report, min_idle, min_mem_mib, starved).await?;
    if args.commands {
        let running = running(&report, &zombies).await?;
        let wait_s = args.wait.map_or(DEFAULT_WAIT_S, |d| d.as_secs_f64().ceil() as u64).max(1);
        let text = script::script(&running, &script::Options { wait_s, header: report.header.lines() });
        return out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source }.into());
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &zombies, out)?;
    Ok(())
}
