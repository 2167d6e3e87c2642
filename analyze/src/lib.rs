//! apron's analysis library: the `apron` command line, the DataFusion
//! session over a data folder, read-only SQL, and result printing.
//!
//! What the files hold and where is `apron_schemas`' business; recording is
//! `apron-recorder`'s. The `apron` binary only parses its arguments and calls
//! [`run`].
//!
//! - [`cli`]: the command line (global options, one subcommand per command);
//! - [`config`]: `apron.toml`, its defaults, and which team owns a process;
//! - [`memory`]: the memory limit of every command (`--memory-limit`), the
//!   query engine's pool and spill folder under it;
//! - [`session`]: a [`Session`] over a data folder, tables registered from
//!   their folders, read-only planning, errors that name the bad table or file;
//! - [`report_context`]: the [`report_context::Report`] every report over a
//!   period starts from (config, session, period, coverage, header);
//! - [`figures`]: every figure apron states, one module per report or chart
//!   series (`figures/spend.rs`, …), returned as typed rows: where a money
//!   figure is computed (to the cent, keeping totals), in one place;
//! - [`columns`]: a query result's columns read by name into Rust values,
//!   and typed rows built back into a batch;
//! - [`output`]: `--format table|csv|json` for any result, and for typed
//!   rows ([`output::Rows`]);
//! - [`commands`]: one module per command (`commands/sql.rs`, …): parse,
//!   call a figure, print;
//! - [`charts`]: the series each chart draws, from the figures;
//! - [`params`]: the `--param NAME=VALUE` values of `apron sql`, typed and
//!   matched to the query's placeholders;
//! - [`ledger`]: a period's GPU-minutes priced, attributed and followed in
//!   stretches, in one pass a day at a time: what the cost reports read;
//! - [`import`]: `apron import`'s parsers of nvidia-smi and pynvml CSV
//!   logs and of dcgm-exporter series in Prometheus, written through the
//!   recorder's writer;
//! - [`integrity`]: finds the Parquet file that broke a query;
//! - `store`: the file system the listings read, where an empty data file
//!   is an error;
//! - [`panic_guard`]: a library's panic on bad input becomes an error;
//! - [`this_host`]: this machine's host name, as the recorder names it;
//! - [`error`]: the [`Error`] every command returns, and its one-line form.

pub mod charts;
pub mod cli;
pub mod columns;
pub mod commands;
pub mod config;
pub mod config_tables;
pub mod cost;
pub mod error;
pub mod fence;
pub mod figures;
pub mod header;
pub mod import;
pub mod integrity;
pub mod ledger;
pub mod logging;
pub mod memory;
pub mod minutes;
pub mod output;
pub mod panic_guard;
pub mod params;
pub mod period;
pub mod portable;
pub mod queries;
pub mod query_schema;
pub mod recent;
pub mod report_context;
pub mod rounding;
pub mod session;
mod store;
pub mod this_host;

use std::io::BufWriter;
use std::panic::AssertUnwindSafe;

pub use cli::{Cli, EXIT_FAILURE};
pub use config::Config;
pub use error::{Error, one_line};
pub use output::Format;
pub use session::Session;

/// Worker threads of the query runtime: one per core (at least two, to
/// overlap reading and decoding), so a big scan uses the whole machine.
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// Runs the command of `cli` on a fresh async runtime, printing its result
/// on stdout. When it returns `Ok`, all of the result is written and flushed.
///
/// This is the process's entry point: it installs a panic hook that prints
/// nothing, so that a panic deep in a library becomes one error line.
pub fn run(cli: &Cli) -> Result<commands::Outcome, Error> {
    panic_guard::install_quiet_hook();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .thread_name("apron-query")
        .enable_all()
        .build()
        .map_err(|source| Error::Runtime { source })?;
    let out = BufWriter::new(std::io::stdout().lock());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(commands::run(cli, out))));
    result
        .unwrap_or_else(|payload| Err(Error::Panic { message: panic_guard::panic_message(payload.as_ref()) }))
}
