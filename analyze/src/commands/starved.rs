//! `apron starved`: processes that held GPU memory while their GPU sat idle
//! by the activity rule but moved data over PCIe: starved of input, not
//! zombies ([`crate::report::figures::starved`]), with the GPU's activity and
//! traffic over the stretch.

use std::io::Write;

use clap::Args;

use crate::cli::GlobalArgs;
use crate::cli::flag_groups::{HeldIdleArgs, PeriodArgs, parse_starved_pcie};
use crate::commands::Report;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::zombies::held_idle;

/// `apron starved [--min-idle 10m] [--min-mem 256] [--starved-pcie 100] [period]`.
#[derive(Debug, Clone, Args)]
pub struct StarvedArgs {
    /// The stretch's least length and memory held.
    #[command(flatten)]
    pub held: HeldIdleArgs,

    /// PCIe traffic, MiB/s in and out, at or above which the GPU's mean
    /// over the stretch makes a process starved of data (default:
    /// `[zombie] starved_pcie_mib_per_s`, 100; 0: none is).
    #[arg(long, value_name = "MIB_PER_S", value_parser = parse_starved_pcie)]
    pub starved_pcie: Option<u64>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Lists the data-starved stretches, most memory-minutes first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &StarvedArgs, mut out: W) -> Result<(), Error> {
    // The same pass as `zombies`' finds the stretches; the traffic tells them apart.
    let (min_idle, min_mem) = (args.held.min_idle, args.held.min_mem);
    let mut report = Report::prepare_stretches(global, &args.period, |c| {
        rules(
            min_idle.unwrap_or(c.zombie.min_idle),
            min_mem.unwrap_or(c.zombie.min_mem_mib),
            c.reclaim.idle_for,
        )
    })
    .await?;
    // Its rows say what is still running or idle: the header says as of when.
    report.header.keep_still();
    report.header.print(global.format, &mut out)?;
    let threshold = args.starved_pcie.unwrap_or(report.config.zombie.starved_pcie_mib_per_s);
    let (_, starved) = held_idle(&report, threshold)?;
    write_rows(global.format, &Style::report(&report.config.currency), &starved, out)?;
    Ok(())
}
