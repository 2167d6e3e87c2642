//! `apron zombies`: processes that held GPU memory while their GPU sat idle,
//! each with its team ([`crate::report::figures::zombies`]); those whose GPU moved
//! data over PCIe meanwhile are `apron starved`'s. With `--commands`, the
//! shell script that stops the zombies still running ([`script`]).

use std::io::Write;

use crate::cli::GlobalArgs;
use crate::commands::Report;
use crate::error::{Error, InputError, OutputError};
use crate::output::{Style, write_rows};
use crate::report::context::rules;
use crate::report::figures::zombies::{held_idle, running};

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

/// Lists the zombie stretches, most memory-minutes first, or prints the
/// commands that stop those still running.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ZombiesArgs, mut out: W) -> Result<(), Error> {
    // The ledger's pass finds the stretches by the rules asked for.
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
    let min_idle = args.held.min_idle.unwrap_or(report.config.zombie.min_idle);
    let starved = args.starved_pcie.unwrap_or(report.config.zombie.starved_pcie_mib_per_s);
    let (zombies, _) = held_idle(&report, starved)?;
    if args.commands {
        if let Some(message) = period_refused(report.period.end_ms, report.now_ms, args.any_period) {
            return Err(InputError::Usage { message }.into());
        }
        let running = running(&report, &zombies).await?;
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
