//! `apron`: SQL and reports over the Parquet files `apron-recorder` writes.
//! This binary parses its arguments and calls `apron_analyze`.

use std::process::ExitCode;

use apron_analyze::{Cli, EXIT_FAILURE, cli, logging, one_line};
use clap::Parser;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return cli::exit_for_clap_error(&err),
    };
    logging::init();
    match apron_analyze::run(&cli) {
        Ok(apron_analyze::commands::Outcome::Done) => ExitCode::SUCCESS,
        Ok(apron_analyze::commands::Outcome::AlertsFired) => ExitCode::from(1),
        // The reader of the output went away (`apron sql … | head`): it has
        // what it wanted.
        Err(err) if err.is_broken_pipe() => ExitCode::SUCCESS,
        Err(err) => {
            let err = anyhow::Error::new(err);
            eprintln!("error: {}", one_line(err.as_ref()));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}
