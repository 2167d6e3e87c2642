//! `apron windows`: the fleet's week hour by hour and the recurring idle
//! windows it shows, in words in the header and, with `--show windows`, as
//! rows ([`crate::report::figures::windows`]); with `--cron COMMAND`, the crontab
//! lines that run COMMAND in those windows on the GPUs idle in them
//! ([`cron`]).

use std::io::Write;

use crate::cli::flag_groups::GlobalArgs;
use crate::commands::ReportContext;
use crate::error::{Error, InputError, OutputError};
use crate::output::{Style, write_rows};
use crate::report::figures::windows::{gpu_weeks, profile};

mod args;
pub mod cron;

pub use args::{WindowsArgs, WindowsShow};

/// The time between TERM and KILL at a window's end without `--grace`.
const DEFAULT_GRACE_S: u64 = 60;

/// Prints the profile (or the windows) and the windows in words, or with
/// `--cron` the crontab.
pub async fn run<W: Write>(global: &GlobalArgs, args: &WindowsArgs, mut out: W) -> Result<(), Error> {
    let usage = |message: String| InputError::Usage { message: format!("--cron: {message}") };
    if let Some(command) = &args.cron {
        // Before the data is read: a command cron cannot run is a usage error.
        cron::check_command(command).map_err(usage)?;
    }
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let profile = profile(&report).await?;
    let min_hours = usize::try_from(args.min_hours).unwrap_or(usize::MAX).max(1);
    let windows = profile.idle_windows(args.min_idle_share, min_hours, &report.config.currency);
    for line in windows.header_lines() {
        report.header.push(line);
    }
    if let Some(command) = &args.cron {
        let gpus = gpu_weeks(&report).await?;
        let grace_s = args.grace.map_or(DEFAULT_GRACE_S, |d| d.as_secs_f64().ceil() as u64).max(1);
        let options = cron::Options {
            command,
            grace_s,
            min_share_pct: args.min_idle_share,
            header: report.header.lines(),
        };
        let recurring = profile.recurring_windows(args.min_idle_share, min_hours);
        let text = cron::crontab(&recurring, &gpus, &options).map_err(usage)?;
        return out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source }.into());
    }
    report.header.print(global.format, &mut out)?;
    match args.show {
        WindowsShow::Profile => {
            write_rows(global.format, &Style::report(&report.config.currency), &profile, out)?
        }
        WindowsShow::Windows => {
            write_rows(global.format, &Style::report(&report.config.currency), &windows, out)?
        }
    };
    Ok(())
}
