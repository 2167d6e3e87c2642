//! `apron starved`: processes that held GPU memory while their GPU sat idle
//! by the activity rule but moved data over PCIe: starved of input, not
//! zombies ([`crate::report::figures::starved`]), with the GPU's activity and
//! traffic over the stretch.

use std::io::Write;

use crate::cli::{GlobalArgs, StarvedArgs};
use crate::commands::zombies::{HeldIdle, HeldIdleFlags};
use crate::error::Error;
use crate::output::{Style, write_rows};

/// Lists the data-starved stretches, most memory-minutes first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &StarvedArgs, mut out: W) -> Result<(), Error> {
    // The same pass as `zombies`' finds the stretches; the traffic tells them apart.
    let flags =
        HeldIdleFlags { min_idle: args.min_idle, min_mem: args.min_mem, starved_pcie: args.starved_pcie };
    let held = HeldIdle::prepare(global, &args.period, flags).await?;
    held.report.header.print(global.format, &mut out)?;
    let (_, starved) = held.stretches().await?;
    write_rows(global.format, &Style::report(&held.report.config.currency), &starved, out)?;
    Ok(())
}
