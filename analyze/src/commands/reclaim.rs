//! `apron reclaim`: GPUs idle for at least `--for` in a row, over the period
//! (default the last 30 days), with the idle threshold and the default
//! stretch from the config ([`crate::report::figures::reclaim`]); the header gives
//! their GPU-hours and, apart, the MIG slices no instance holds.

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::Error;
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::reclaim::reclaim;

/// `apron reclaim [--for 2h] [period]`.
#[derive(Debug, Clone, Args)]
pub struct ReclaimArgs {
    /// Shortest idle stretch to report (default: `[reclaim] for` of the
    /// config, 2h).
    #[arg(long = "for", value_parser = apron_cli::units::positive_hours)]
    pub idle_for: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Lists the idle stretches, longest first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ReclaimArgs, mut out: W) -> Result<(), Error> {
    // The ledger's pass finds the stretches by the rules asked for.
    let idle_for = args.idle_for;
    let mut report = ReportContext::prepare_stretches(global, &args.period, |c| {
        rules(c.zombie.min_idle, c.zombie.min_mem_mib, idle_for.unwrap_or(c.reclaim.idle_for))
    })
    .await?;
    // Its rows say what is still running or idle: the header says as of when.
    report.header.keep_still();
    let idle_for = args.idle_for.unwrap_or(report.config.reclaim.idle_for);
    let reclaim = reclaim(&report)?;
    report.header.push(reclaim.headline(idle_for));
    for line in reclaim.unpartitioned_lines(&report.config.currency) {
        report.header.push(line);
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &reclaim, out)?;
    Ok(())
}
