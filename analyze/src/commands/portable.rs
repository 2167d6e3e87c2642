//! `apron export-config`, `apron ddl` and `apron export-sql`: apron's
//! tables, config and reports for Spark, Trino or Athena
//! ([`crate::commands::portable::engines`], [`crate::config::tables`]).

pub mod engines;

use std::io::Write;

use crate::cli::{DdlArgs, ExportConfigArgs, ExportReport, ExportSqlArgs, GlobalArgs, IdleBy};
use crate::config::Config;
use crate::error::{Error, InputError, OutputError};
use crate::report::period::Period;
use engines::Report;

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
        (ExportReport::Spend, None) => Report::Spend,
        (ExportReport::MinuteCosts, None) => Report::MinuteCosts,
        (ExportReport::IdleCost, by) => Report::IdleCost(by.unwrap_or(IdleBy::Team)),
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
