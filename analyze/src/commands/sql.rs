//! `apron sql QUERY | sql -f FILE [--param NAME=VALUE …]`: one ad-hoc
//! read-only query over the data folder, its placeholders bound to the
//! `--param` values ([`crate::params`]), printed in the chosen format.
//!
//! So that every `queries/*.sql` runs on its own as its header says, a query
//! whose text names `minute_costs`, `gpu_minute_states` or
//! `proc_minute_states` gets those views registered for the period
//! flags and the config, one that names `cost_buckets` gets the period's
//! ledger ([`crate::ledger`]) per minute, and one that names an `apron_` function
//! (`apron_team`, `apron_gpu_rate`) gets those functions from the config:
//! `apron sql -f queries/spend.sql --month 2026-11` runs a report's SQL as
//! is. The config is read only then, so a plain query needs none.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::Path;

use apron_schemas::time::MINUTE_MS;
use datafusion::prelude::DataFrame;

use crate::cli::{GlobalArgs, SqlArgs};
use crate::config::Config;
use crate::error::{Error, InputError, SessionError};
use crate::ledger::Ledger;
use crate::params::{self, Param};
use crate::period::Period;
use crate::session::Session;

/// Runs of a query whose files vanished under it (compaction swapping a
/// partition in) before it gives up.
const MAX_TRIES: u32 = 3;

/// Registers `cost_buckets` for `period` under `config`, per minute.
async fn register_cost_buckets(session: &Session, config: Config, period: &Period) -> Result<(), Error> {
    let rules = crate::report_context::rules(
        config.zombie.min_idle,
        config.zombie.min_mem_mib,
        config.reclaim.idle_for,
    );
    let ledger = Ledger::compute(session, &config, period, MINUTE_MS, rules).await?;
    ledger.register(session)
}

/// Reads the query (from the command line, a file, or standard input for
/// `-f -`), runs it over `global.data` and prints the rows to `out`.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SqlArgs, out: W) -> Result<(), Error> {
    // The query first: a missing query file is reported even without data.
    let query = query_text(args)?;
    // A malformed --param is refused before any data is read.
    let params = params::parse_all(&args.params)?;
    let mut out = Counting { inner: out, written: 0 };
    let mut tries = 0;
    loop {
        tries += 1;
        let session = Session::open(&global.data, global.memory_limit()).await?;
        let config = || Config::load(global.config.as_deref());
        let period = || Period::choose(&args.period.choice(), chrono::Utc::now().timestamp_millis());
        crate::cost::register_for_query(&session, config, period, &query).await?;
        if query.to_ascii_lowercase().contains("cost_buckets") {
            let config = Config::load(global.config.as_deref())?;
            let period = Period::choose(&args.period.choice(), chrono::Utc::now().timestamp_millis())?;
            register_cost_buckets(&session, config, &period).await?;
        }
        let df = bind(session.sql(&query).await?, params.clone())?;
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

/// `df` with its placeholders bound to the `--param` values `given`: each
/// placeholder needs one, and each one a placeholder.
fn bind(df: DataFrame, given: Vec<Param>) -> Result<DataFrame, Error> {
    let placeholders: HashSet<String> =
        params::placeholders(df.logical_plan()).map_err(|source| SessionError::Query { source })?;
    if placeholders.is_empty() && given.is_empty() {
        return Ok(df);
    }
    let values = params::bind(given, &placeholders)?;
    Ok(df.with_param_values(values).map_err(|source| SessionError::Query { source })?)
}

/// A writer that counts the bytes written through it.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Whether `err` comes from a data file that disappeared between the
/// listing and the read.
fn vanished(err: &Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::NotFound
        {
            return true;
        }
        if let Some(datafusion::object_store::Error::NotFound { .. }) = e.downcast_ref() {
            return true;
        }
        cur = e.source();
    }
    false
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
        // clap requires one of the two; an empty query gets DataFusion's
        // "no statement" error like any other empty text.
        (None, None) => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::PeriodArgs;

    #[test]
    fn a_file_gone_between_listing_and_reading_is_told_apart() {
        let gone = Error::from(InputError::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
        });
        assert!(vanished(&gone));
        let denied = Error::from(InputError::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        });
        assert!(!vanished(&denied));
    }

    #[test]
    fn a_missing_query_file_is_named() {
        let args = SqlArgs {
            query: None,
            file: Some("/nonexistent/q.sql".into()),
            params: Vec::new(),
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
        let from_file =
            SqlArgs { query: None, file: Some(path), params: Vec::new(), period: PeriodArgs::default() };
        assert_eq!(query_text(&from_file).expect("reads"), "SELECT 2");
        let inline = SqlArgs {
            query: Some("SELECT 1".into()),
            file: None,
            params: Vec::new(),
            period: PeriodArgs::default(),
        };
        assert_eq!(query_text(&inline).expect("given"), "SELECT 1");
    }
}
