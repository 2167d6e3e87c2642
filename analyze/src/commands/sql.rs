//! `apron sql QUERY | sql -f FILE [--param NAME=VALUE …] [--out FILE]`:
//! one ad-hoc read-only query over the data folder, its placeholders bound
//! to the `--param` values ([`crate::commands::sql::params`]), printed in the chosen
//! format or written to a file (`out_file`); and `apron sql` alone, the
//! same session for many statements (`console`): an interactive shell on
//! a terminal (`shell`), else the statements of standard input
//! (`script`). `apron sql --show [NAME]` prints a named report's SQL as
//! the binary carries it, or lists the names (`show`).
//!
//! So that every `queries/*.sql` runs on its own as its header says, a query
//! whose text names `minute_costs`, `gpu_minute_states` or
//! `proc_minute_states` gets those views registered for the period
//! flags and the config, one that names `cost_buckets` gets the period's
//! ledger ([`crate::ledger`]) per minute, and one that names an `apron_` function
//! (`apron_team`, `apron_gpu_rate`) gets those functions from the config
//! (`views`): `apron sql -f queries/spend.sql --month 2026-11` runs a
//! report's SQL as is. The config is read only then, so a plain query needs
//! none.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;

use datafusion::prelude::DataFrame;

use crate::cli::flag_groups::GlobalArgs;
use crate::error::{Error, InputError, OutputError};
use crate::session::Session;
use params::Param;

mod args;
mod complete;
mod console;
mod dot;
mod out_file;
pub mod params;
mod rerun;
mod script;
mod shell;
mod show;
mod statements;
mod views;

pub use args::SqlArgs;
use out_file::FileFormat;
use rerun::{Counting, MAX_TRIES, vanished};
use views::Registered;

/// Runs `apron sql` with `args`: the query of the argument or `-f FILE`
/// (standard input for `-f -`), printed to `out` or written to `--out
/// FILE`; without either, the shell on a terminal, else the statements
/// standard input holds.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SqlArgs, out: W) -> Result<(), Error> {
    if let Some(name) = &args.show {
        return show::run(name, out);
    }
    // An --out the command cannot write is refused before anything is read.
    let out_format = args.out.as_deref().map(FileFormat::of).transpose()?;
    if args.query.is_none() && args.file.is_none() {
        let mut console = console::Console::open(global, &args.period).await?;
        let stdin = std::io::stdin();
        return if stdin.is_terminal() {
            shell::run(&mut console, out).await
        } else {
            script::run(&mut console, stdin.lock(), out).await
        };
    }
    // The query first: a missing query file is reported even without data.
    let query = query_text(args)?;
    // A malformed --param is refused before any data is read.
    let params = params::parse_all(&args.params)?;
    match (&args.out, out_format) {
        (Some(path), Some(format)) => write_file(global, args, &query, &params, path, format, out).await,
        _ => print(global, args, &query, &params, out).await,
    }
}

/// Runs `query` and prints its rows to `out` in `global.format`.
async fn print<W: Write>(
    global: &GlobalArgs,
    args: &SqlArgs,
    query: &str,
    params: &[Param],
    out: W,
) -> Result<(), Error> {
    let mut out = Counting::new(out);
    let mut tries = 0;
    loop {
        tries += 1;
        let (session, df) = plan(global, args, query, params).await?;
        let printed = session.print(df, global.format, &mut out).await.map(drop);
        match printed {
            // A file listed for this query was replaced meanwhile (a day
            // compacted, a recovered file): list again and rerun, if
            // nothing has been printed yet.
            Err(e) if tries < MAX_TRIES && out.written == 0 && vanished(&e) => {
                tracing::debug!(error = %e, "a data file vanished during the query; running it again");
            }
            result => return result,
        }
    }
}

/// Runs `query` and writes its rows to `path` in `format`, then says how
/// many on `out`. Ctrl-C stops it, leaving `path` as it was.
async fn write_file<W: Write>(
    global: &GlobalArgs,
    args: &SqlArgs,
    query: &str,
    params: &[Param],
    path: &Path,
    format: FileFormat,
    mut out: W,
) -> Result<(), Error> {
    let mut tries = 0;
    let rows = loop {
        tries += 1;
        let written = async {
            let (session, df) = plan(global, args, query, params).await?;
            out_file::write(&session, df, path, format).await
        };
        let written = tokio::select! {
            // Listening before the query starts, so no Ctrl-C is missed.
            biased;
            _ = tokio::signal::ctrl_c() => Err(OutputError::Interrupted { path: path.to_path_buf() }.into()),
            written = written => written,
        };
        match written {
            // As in `print`; nothing of a failed try is left.
            Err(e) if tries < MAX_TRIES && vanished(&e) => {
                tracing::debug!(error = %e, "a data file vanished during the query; running it again");
            }
            result => break result?,
        }
    };
    let noun = if rows == 1 { "row" } else { "rows" };
    writeln!(out, "wrote {rows} {noun} to {}", path.display())
        .and_then(|()| out.flush())
        .map_err(|source| OutputError::Write { source }.into())
}

/// Opens the data folder, registers the views `query` names and plans it
/// with `params` bound. No file is read yet.
async fn plan(
    global: &GlobalArgs,
    args: &SqlArgs,
    query: &str,
    params: &[Param],
) -> Result<(Session, DataFrame), Error> {
    let session = Session::open(&global.data, global.memory_limit()).await?;
    views::register_named(&session, global, &args.period, query, &mut Registered::default()).await?;
    let df = params::bind_to(session.sql(query).await?, params.to_vec())?;
    Ok((session, df))
}

/// The query text of `args`: the argument, or the contents of `-f FILE`.
fn query_text(args: &SqlArgs) -> Result<String, Error> {
    match (&args.query, &args.file) {
        (Some(query), _) => Ok(query.clone()),
        (None, Some(path)) if path == Path::new("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|source| InputError::ReadQuery { path: path.clone(), source })?;
            Ok(text)
        }
        (None, Some(path)) => Ok(std::fs::read_to_string(path)
            .map_err(|source| InputError::ReadQuery { path: path.clone(), source })?),
        // `run` opens the shell then; an empty query gets DataFusion's
        // "no statement" error like any other empty text.
        (None, None) => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::flag_groups::PeriodArgs;

    #[test]
    fn a_missing_query_file_is_named() {
        let args = SqlArgs {
            query: None,
            file: Some("/nonexistent/q.sql".into()),
            out: None,
            params: Vec::new(),
            show: None,
            period: PeriodArgs::default(),
        };
        let err = query_text(&args).expect_err("no such file");
        assert!(matches!(err, Error::Input(InputError::ReadQuery { .. })));
        assert!(err.to_string().contains("/nonexistent/q.sql"), "{err}");
    }

    #[test]
    fn the_query_comes_from_the_argument_or_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.sql");
        std::fs::write(&path, "SELECT 2").expect("write");
        let from_file = SqlArgs {
            query: None,
            file: Some(path),
            out: None,
            params: Vec::new(),
            show: None,
            period: PeriodArgs::default(),
        };
        assert_eq!(query_text(&from_file).expect("reads"), "SELECT 2");
        let inline = SqlArgs {
            query: Some("SELECT 1".into()),
            file: None,
            out: None,
            params: Vec::new(),
            show: None,
            period: PeriodArgs::default(),
        };
        assert_eq!(query_text(&inline).expect("given"), "SELECT 1");
    }
}
