//! apron's analysis library: the `apron` command line, the DataFusion
//! session over a data folder, the ledger and the figures of the reports,
//! and result printing.
//!
//! What the files hold and where is `apron_schemas`' business; recording is
//! `apron-recorder`'s. The `apron` binary only parses its arguments and calls
//! [`run`]. The folders follow the data's path, stage by stage:
//!
//! - [`config`]: `apron.toml` and its defaults, which team owns a process,
//!   the config as SQL tables ([`config::tables`]) and the priced views every
//!   report reads ([`config::pricing`]);
//! - [`session`]: a [`Session`] over a data folder, local
//!   (`session::local_files`, behind the write-ahead log's fence) or in a
//!   bucket ([`session::object_storage`]): tables registered with their
//!   schema, the minute tables made complete, the newest rows of a running
//!   recorder, read-only planning, the memory limit, the named reports' SQL
//!   ([`session::queries`]), and errors that name the bad table or file;
//! - [`ledger`]: a period's GPU-minutes priced, attributed and followed in
//!   stretches, in one pass a day at a time: what the cost reports read;
//! - [`report`]: what a report over a period starts from
//!   ([`report::context`]: config, session, period, coverage, header), and
//!   every figure apron states ([`report::figures`], one module per report
//!   or chart series, money to the cent keeping totals), read into typed
//!   rows ([`report::columns`]), rounded ([`report::rounding`]) and drawn
//!   ([`report::charts`]);
//! - [`output`]: `--format table|csv|json` for any result, and for typed
//!   rows ([`output::Rows`]);
//! - [`cli`] and [`commands`]: the command line, and one module per
//!   command (`commands/sql.rs`, …): parse, call a figure, print;
//! - [`import`]: `apron import`'s parsers of nvidia-smi and pynvml CSV
//!   logs and of dcgm-exporter series in Prometheus, written through the
//!   recorder's writer;
//! - [`error`]: the [`Error`] every command returns, and its one-line form;
//!   [`logging`]: diagnostics on stderr.

pub mod cli;
pub mod commands;
pub mod config;
pub mod error;
pub use apron_schemas::xid as faults;
pub mod import;
pub mod ledger;
pub mod logging;
pub mod output;
pub mod report;
pub mod session;

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
    session::panic_guard::install_quiet_hook();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .thread_name("apron-query")
        .enable_all()
        .build()
        .map_err(|source| Error::Runtime { source })?;
    let out = BufWriter::new(std::io::stdout().lock());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(commands::run(cli, out))));
    result.unwrap_or_else(|payload| {
        Err(Error::Panic { message: session::panic_guard::panic_message(payload.as_ref()) })
    })
}
