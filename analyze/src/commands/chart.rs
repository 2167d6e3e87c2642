//! `apron chart NAME [period] --out FILE.png`: one chart of the period,
//! drawn from the same series as the reports ([`crate::report::charts`]). An
//! existing FILE is replaced only with `--force`.

use std::io::Write;
use std::path::PathBuf;

use apron_reports::ChartName;
use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::{Error, InputError, OutputError};
use crate::report::charts;

/// `apron chart NAME [period] --out FILE.png`.
#[derive(Debug, Clone, Args)]
pub struct ChartArgs {
    /// The chart: fleet-state, idle-cost, team-spend, hour-of-week,
    /// gpu-days or power.
    #[arg(value_parser = chart_names(), hide_possible_values = true)]
    pub name: String,

    /// The PNG file to write: a new file (an existing one is replaced only
    /// with --force).
    #[arg(long, value_name = "FILE.png")]
    pub out: PathBuf,

    /// Replace --out if it exists.
    #[arg(long)]
    pub force: bool,

    /// Width in pixels.
    #[arg(long, default_value_t = 1600)]
    pub width: u32,

    /// Height in pixels.
    #[arg(long, default_value_t = 900)]
    pub height: u32,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// The chart names, as possible values: clap refuses any other (naming
/// them, and the likely one), and the completion scripts offer them.
fn chart_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        apron_reports::ChartName::ALL.map(apron_reports::ChartName::name),
    )
}

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
    let report = ReportContext::prepare_costs(global, &args.period).await?;
    let ctx = charts::context(&report).with_size(args.width, args.height);
    charts::render(name, &report, &ctx, &args.out).await?;
    writeln!(out, "wrote {} ({}, {})", args.out.display(), name.title(), report.period.label())
        .map_err(|source| Error::from(OutputError::Write { source }))
}
