//! `apron windows`: the fleet's week hour by hour and the recurring idle
//! windows it shows, in words in the header and, with `--show windows`, as
//! rows ([`crate::figures::windows`]).

use std::io::Write;

use crate::cli::{GlobalArgs, WindowsArgs, WindowsShow};
use crate::commands::Report;
use crate::error::Error;
use crate::figures::windows::profile;
use crate::output::write_rows;

/// Prints the profile (or the windows) and the windows in words.
pub async fn run<W: Write>(global: &GlobalArgs, args: &WindowsArgs, mut out: W) -> Result<(), Error> {
    let mut report = Report::prepare_costs(global, &args.period).await?;
    let profile = profile(&report).await?;
    let min_hours = usize::try_from(args.min_hours).unwrap_or(usize::MAX).max(1);
    let windows = profile.idle_windows(args.min_idle_share, min_hours, &report.config.currency);
    for line in windows.header_lines() {
        report.header.push(line);
    }
    report.header.print(global.format, &mut out)?;
    match args.show {
        WindowsShow::Profile => write_rows(global.format, &profile, out)?,
        WindowsShow::Windows => write_rows(global.format, &windows, out)?,
    };
    Ok(())
}
