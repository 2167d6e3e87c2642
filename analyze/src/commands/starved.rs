//! `apron starved`: processes that held GPU memory while their GPU sat idle
//! by the activity rule but moved data over PCIe: starved of input, not
//! zombies ([`crate::report::figures::starved`]), with the GPU's activity and
//! traffic over the stretch.

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::{HeldIdleArgs, PeriodArgs, parse_starved_pcie};
use crate::commands::zombies::HeldIdle;
use crate::error::Error;
use crate::output::{Style, write_rows};

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
    let held = HeldIdle::prepare(global, &args.period, &args.held, args.starved_pcie).await?;
    held.report.header.print(global.format, &mut out)?;
    let (_, starved) = held.stretches()?;
    write_rows(global.format, &Style::report(&held.report.config.currency), &starved, out)?;
    Ok(())
}
