//! `apron zombies`: processes that held GPU memory while their GPU sat idle,
//! each with its team ([`crate::report::figures::zombies`]); those whose GPU moved
//! data over PCIe meanwhile are `apron starved`'s. With `--commands`, the
//! shell script that stops the zombies still running ([`script`]).

use std::io::Write;
use std::time::Duration;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::{HeldIdleArgs, PeriodArgs};
use crate::commands::ReportContext;
use crate::error::{Error, InputError, OutputError};
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::starved::Starved;
use crate::report::figures::zombies::{Zombies, held_idle, running};

mod args;
pub mod script;

pub use args::ZombiesArgs;

/// The wait between TERM and KILL without `--wait`.
const DEFAULT_WAIT_S: u64 = 30;

/// How long before now a period given to `--commands` may end: what is
/// idle "now" is read from the period's newest minutes.
const NEAR_NOW_MS: i64 = 10 * 60 * 1_000;

/// Why `--commands` refuses a period that ended `ago_ms` before now, `None`
/// when it ends near enough to now or `any_period` says to go on.
fn period_refused(end_ms: i64, now_ms: i64, any_period: bool) -> Option<String> {
    let ago_ms = now_ms - end_ms;
    (ago_ms > NEAR_NOW_MS && !any_period).then(|| {
        format!(
            "zombies --commands: the period ends {} before now, and only a process idle now may be \
             stopped; use a period that ends now (--last 1d), or --any-period to print the commands \
             anyway (each host still re-checks, before it acts, that the process is idle now)",
            humantime::format_duration(std::time::Duration::from_secs((ago_ms / 60_000 * 60) as u64))
        )
    })
}

/// The report `zombies` and `starved` read, with the rules its stretches
/// were found by.
#[derive(Debug)]
pub(crate) struct HeldIdle {
    /// The period's report; its header keeps what is still running or idle.
    pub(crate) report: ReportContext,
    /// The shortest stretch.
    pub(crate) min_idle: Duration,
    /// The least PCIe traffic of a data-starved process (MiB/s; 0: none is).
    pub(crate) starved_pcie: u64,
}

impl HeldIdle {
    /// Opens the period's report for `zombies` or `starved`: the ledger's
    /// pass finds the stretches by the rules `held` and `starved_pcie` ask
    /// for, else the config's, and the header says as of when what is still
    /// running or idle was read.
    pub(crate) async fn prepare(
        global: &GlobalArgs,
        period: &PeriodArgs,
        held: &HeldIdleArgs,
        starved_pcie: Option<u64>,
    ) -> Result<HeldIdle, Error> {
        let (min_idle, min_mem) = (held.min_idle, held.min_mem);
        let mut report = ReportContext::prepare_stretches(global, period, |c| {
            rules(
                min_idle.unwrap_or(c.zombie.min_idle),
                min_mem.unwrap_or(c.zombie.min_mem_mib),
                c.reclaim.idle_for,
            )
        })
        .await?;
        // Its rows say what is still running or idle: the header says as of when.
        report.header.keep_still();
        let zombie = &report.config.zombie;
        let min_idle = min_idle.unwrap_or(zombie.min_idle);
        let starved_pcie = starved_pcie.unwrap_or(zombie.starved_pcie_mib_per_s);
        Ok(HeldIdle { report, min_idle, starved_pcie })
    }

    /// The zombies' stretches and the data-starved processes', as
    /// [`held_idle`] tells them apart by these rules.
    pub(crate) fn stretches(&self) -> Result<(Zombies, Starved), Error> {
        held_idle(&self.report, self.starved_pcie)
    }
}

/// Lists the zombie stretches, most memory-minutes first, or prints the
/// commands that stop those still running.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ZombiesArgs, mut out: W) -> Result<(), Error> {
    let held = HeldIdle::prepare(global, &args.period, &args.held, args.starved_pcie).await?;
    let (zombies, _) = held.stretches()?;
    let (report, min_idle) = (&held.report, held.min_idle);
    if args.commands {
        if let Some(message) = period_refused(report.period.end_ms, report.now_ms, args.any_period) {
            return Err(InputError::Usage { message }.into());
        }
        let running = running(report, &zombies).await?;
        let wait_s = args.wait.map_or(DEFAULT_WAIT_S, |d| d.as_secs_f64().ceil() as u64).max(1);
        let options = script::Options {
            wait_s,
            min_idle_minutes: min_idle.as_secs().div_ceil(60),
            threshold_pct: report.config.idle.threshold_pct,
            header: report.header.lines(),
        };
        let text = script::script(&running, &options);
        return out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source }.into());
    }
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &zombies, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_need_a_period_that_ends_near_now() {
        let now = 1_796_025_600_000;
        assert_eq!(period_refused(now, now, false), None);
        assert_eq!(period_refused(now - NEAR_NOW_MS, now, false), None);
        let refused = period_refused(now - 3 * 86_400_000 - 90_000, now, false).expect("refused");
        assert!(refused.starts_with("zombies --commands: the period ends 3days 1m before now"), "{refused}");
        assert!(refused.contains("--any-period"), "{refused}");
        assert_eq!(period_refused(now - 3 * 86_400_000, now, true), None);
    }
}
