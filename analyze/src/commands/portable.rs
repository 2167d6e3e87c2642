//! `apron export-config`, `apron ddl` and `apron export-sql`: apron's
//! tables, config and reports for Spark, Trino or Athena
//! ([`crate::commands::portable::engines`], [`crate::config::tables`]).

pub mod engines;

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::config::Config;
use crate::error::{Error, InputError, OutputError};
use crate::report::figures::idle_cost::IdleBy;
use crate::report::period::Period;
use engines::{Engine, PortableQuery};

/// `apron export-config --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ExportConfigArgs {
    /// The folder to write the tables into (created if missing; the three
    /// tables' files in it are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `apron ddl --engine spark|trino|athena --location URL`.
#[derive(Debug, Clone, Args)]
pub struct DdlArgs {
    /// The engine the statements are for.
    #[arg(long, value_enum)]
    pub engine: Engine,

    /// Where the tables' folders are, as the engine reads it: the bucket
    /// prefix apron-recorder --ship writes (s3://BUCKET/PREFIX), or a data
    /// folder (file:///data/apron, or an absolute path).
    #[arg(long, value_name = "URL")]
    pub location: String,

    /// Where `apron export-config --out` wrote the config tables, as the
    /// engine reads it. Default: LOCATION/apron_config.
    #[arg(long, value_name = "URL")]
    pub config_location: Option<String>,

    /// The schema (database) the tables are created in.
    #[arg(long, default_value = "apron")]
    pub schema: String,
}

/// What `apron export-sql` computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportReport {
    /// `apron spend`: cost per team.
    Spend,
    /// `apron idle-cost --by …`: idle cost by team, user, host or GPU.
    IdleCost,
    /// Every GPU-minute of the period priced and attributed (the view
    /// minute_costs), for any other sum.
    MinuteCosts,
}

/// `apron export-sql spend|idle-cost|minute-costs --engine E [period]`.
#[derive(Debug, Clone, Args)]
pub struct ExportSqlArgs {
    /// The report.
    #[arg(value_enum)]
    pub report: ExportReport,

    /// The engine the statement is for.
    #[arg(long, value_enum)]
    pub engine: Engine,

    /// What idle-cost groups by (idle-cost only).
    #[arg(long, value_enum)]
    pub by: Option<IdleBy>,

    /// The schema (database) `apron ddl` created the tables in.
    #[arg(long, default_value = "apron")]
    pub schema: String,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

fn print<W: Write>(mut out: W, text: &str) -> Result<(), Error> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| Error::from(OutputError::Write { source }))
}

/// Writes the config's tables into `args.out` and prints each file written.
pub fn export_config<W: Write>(global: &GlobalArgs, args: &ExportConfigArgs, out: W) -> Result<(), Error> {
    let config = Config::load(global.config.as_deref())?;
    let files = crate::config::tables::write(&config, &args.out)?;
    let text: String = files.iter().map(|f| format!("wrote {}\n", f.display())).collect();
    print(out, &text)
}

/// Prints the statements creating the tables on `args.engine`.
pub fn ddl<W: Write>(args: &DdlArgs, out: W) -> Result<(), Error> {
    let text = engines::ddl(args.engine, &args.location, args.config_location.as_deref(), &args.schema)?;
    print(out, &text)
}

/// Prints the statement computing `args.report` on `args.engine`.
pub fn export_sql<W: Write>(args: &ExportSqlArgs, out: W) -> Result<(), Error> {
    let report = match (args.report, args.by) {
        (ExportReport::Spend, None) => PortableQuery::Spend,
        (ExportReport::MinuteCosts, None) => PortableQuery::MinuteCosts,
        (ExportReport::IdleCost, by) => PortableQuery::IdleCost(by.unwrap_or(IdleBy::Team)),
        (_, Some(_)) => {
            return Err(
                InputError::Usage { message: "--by applies to export-sql idle-cost only".into() }.into()
            );
        }
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let period = Period::choose(&args.period.choice(), now_ms)?;
    let text = engines::statement(report, args.engine, &args.schema, &period)?;
    print(out, &text)
}
