//! `apron`: SQL and reports over the Parquet files `apron-recorder` writes.
//! This binary parses its arguments and calls `apron_analyze`.

use std::process::ExitCode;

use apron_analyze::{Cli, EXIT_FAILURE, cli, logging, one_line};
use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    tune_malloc();
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

/// Tunes glibc's malloc for the ledger's slices, which the engine's
/// workers and a blocking thread allocate and free in turn. Each setting
/// yields to its environment variable when that is set.
///
/// - Arenas: as many as cores, at least 2 (the default is eight times the
///   cores). Each arena keeps what was freed in it, so more arenas held
///   more memory for the same live data; one arena was slower.
/// - Blocks of 128 KiB and more are mapped and unmapped on their own, and
///   the heap is trimmed past 128 KiB free (glibc's starting values, which
///   it otherwise raises as large blocks are freed, up to 32 MiB). The
///   engine's column buffers are such blocks: kept in the heap, their holes
///   grew the peak.
///
/// The figures before and after are in docs/src/performance.md ("The
/// allocator").
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const LARGE_BLOCK: libc::c_int = 128 * 1024;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        let settings = [
            ("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, arenas),
            ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, LARGE_BLOCK),
            ("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, LARGE_BLOCK),
        ];
        for (variable, parameter, value) in settings {
            if std::env::var_os(variable).is_none() {
                // SAFETY: called first in main, before any other thread
                // exists; mallopt only sets a tuning parameter of the
                // allocator.
                unsafe {
                    libc::mallopt(parameter, value);
                }
            }
        }
    }
}
