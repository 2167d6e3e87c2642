//! `apron events`: what went wrong with the GPUs over the period (default
//! the last 30 days): each GPU's faults (XID errors, ECC errors, GPUs lost,
//! error counters that moved) with what each means, the action it calls
//! for and whether the GPU should be drained; the header names the GPUs to
//! drain ([`crate::report::figures::events`]), and each fault's row the
//! GPU-hours and money it took until the GPU next did work
//! ([`crate::ledger::downtime`]).

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use apron_schemas::time::HOUR_MS;

use crate::error::Error;
use crate::ledger::Ledger;
use crate::output::{Style, write_rows};
use crate::report::figures::events::faults;

/// `apron events [--drain] [period]`.
#[derive(Debug, Clone, Args)]
pub struct EventsArgs {
    /// Only the faults that call for draining their GPU (a fatal XID, an
    /// uncorrectable ECC error, a pending or failed row remapping, a
    /// pending page retirement, a GPU lost and not back)
    #[arg(long)]
    pub drain: bool,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Lists the faults, the latest first.
pub async fn run<W: Write>(global: &GlobalArgs, args: &EventsArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare(global, &args.period).await?;
    let mut faults = faults(&report).await?;
    // The time the faults took, from the minutes of their hosts only.
    let hosts = faults.down_hosts();
    if !hosts.is_empty() {
        let rules = ReportContext::config_rules(&report.config);
        let ledger =
            Ledger::compute_hosts(&report.session, &report.config, &report.period, HOUR_MS, rules, &hosts)
                .await?;
        faults.add_downtime(&ledger.downtime);
    }
    report.header.push(format!("Faults: {}", faults.summary_with_downtime(&report.config.currency)));
    if args.drain {
        faults.rows.retain(|r| r.drain);
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &faults, out)?;
    Ok(())
}
