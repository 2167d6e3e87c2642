//! `apron chart NAME [period] --out FILE.png`: one chart of the period,
//! drawn from the same series as the reports ([`crate::report::charts`]). An
//! existing FILE is replaced only with `--force`.

use std::io::Write;

use apron_reports::ChartName;

use crate::cli::{ChartArgs, GlobalArgs};
use crate::commands::Report;
use crate::error::{Error, InputError, OutputError};
use crate::report::charts;

/// Draws the chart and says where it is.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ChartArgs, mut out: W) -> Result<(), Error> {
    // The name first: a typo is reported before any data is read.
    let name: ChartName = args
        .name
        .parse()
        .map_err(|e: apron_reports::UnknownChart| InputError::Usage { message: e.to_string() })?;
    // A file already there (a report's chart, say) is kept unless asked;
    // a link counts as a file, never followed to find out.
    if !args.force && std::fs::symlink_metadata(&args.out).is_ok() {
        return Err(OutputError::FileExists { path: args.out.clone() }.into());
    }
    let report = Report::prepare_costs(global, &args.period).await?;
    let ctx = charts::context(&report).with_size(args.width, args.height);
    charts::render(name, &report, &ctx, &args.out).await?;
    writeln!(out, "wrote {} ({}, {})", args.out.display(), name.title(), report.period.label())
        .map_err(|source| Error::from(OutputError::Write { source }))
}
