//! `apron`: SQL and reports over the Parquet files `apron-recorder` writes.
//! This binary parses its arguments and calls `apron_analyze`.

use std::process::ExitCode;

use apron_analyze::{Cli, EXIT_FAILURE, cli, logging, one_line};
use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    limit_malloc_arenas();
    let matches = match Cli::command().try_get_matches() {
        Ok(matches) => matches,
        Err(err) => return cli::exit_for_clap_error(&err),
    };
    if let Some(line) = cli::unused_global(&matches) {
        eprintln!("{line}");
        return ExitCode::from(EXIT_FAILURE);
    }
    let cli = match Cli::from_arg_matches(&matches) {
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
            // Errors name files, hosts and values from the data: shown safe
            // for a terminal.
            eprintln!("error: {}", apron_cli::printable::printable(&one_line(err.as_ref())));
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// Caps glibc's malloc arenas at twice the cores (its default is eight
/// times). The ledger's slices are allocated and freed by the engine's
/// workers and a blocking thread in turn, and each arena keeps what was
/// freed in it: with the default, a month's report held 64 MiB more at
/// 512 GPUs than at 64 without holding more data (measured with
/// `MALLOC_ARENA_MAX`, which still wins when set; time unchanged at 4 on
/// 2 cores, 13% slower at 1).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let arenas = libc::c_int::try_from(cores.saturating_mul(2).max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: called first in main, before any other thread exists;
        // mallopt only sets a tuning parameter of the allocator.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}
