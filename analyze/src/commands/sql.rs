//! `apron sql QUERY | sql -f FILE`: one ad-hoc read-only query over the data
//! folder, printed in the chosen format. A query that reads `minute_costs`,
//! `gpu_minute_states` or `proc_minute_states` gets them registered for the
//! period flags and the config, so
//! `apron sql -f queries/spend.sql --month 2026-11` runs a report's SQL as is.

use std::io::{Read, Write};
use std::path::Path;

use crate::cli::{GlobalArgs, SqlArgs};
use crate::config::Config;
use crate::error::Error;
use crate::period::Period;
use crate::session::Session;

/// Runs of a query whose files vanished under it (compaction swapping a
/// partition in) before it gives up.
const MAX_TRIES: u32 = 3;

/// Reads the query (from the command line, a file, or standard input for
/// `-f -`), runs it over `global.data` and prints the rows to `out`.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SqlArgs, out: W) -> Result<(), Error> {
    // The query first: a missing query file is reported even without data.
    let query = query_text(args)?;
    let mut out = Counting { inner: out, written: 0 };
    let mut tries = 0;
    loop {
        tries += 1;
        let session = Session::open(&global.data).await?;
        let config = || Config::load(global.config.as_deref());
        let period = || Period::choose(&args.period.choice(), chrono::Utc::now().timestamp_millis());
        crate::cost::register_for_query(&session, config, period, &query).await?;
        let df = session.sql(&query).await?;
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
                .map_err(|source| Error::ReadQuery { path: path.clone(), source })?;
            Ok(text)
        }
        (None, Some(path)) => {
            std::fs::read_to_string(path).map_err(|source| Error::ReadQuery { path: path.clone(), source })
        }
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
        let gone = Error::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory"),
        };
        assert!(vanished(&gone));
        let denied = Error::ReadQuery {
            path: "x".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        };
        assert!(!vanished(&denied));
    }

    #[test]
    fn a_missing_query_file_is_named() {
        let args =
            SqlArgs { query: None, file: Some("/nonexistent/q.sql".into()), period: PeriodArgs::default() };
        let err = query_text(&args).expect_err("no such file");
        assert!(matches!(err, Error::ReadQuery { .. }));
        assert!(err.to_string().contains("/nonexistent/q.sql"), "{err}");
    }

    #[test]
    fn the_query_comes_from_the_argument_or_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.sql");
        std::fs::write(&path, "SELECT 2").expect("write");
        let from_file = SqlArgs { query: None, file: Some(path), period: PeriodArgs::default() };
        assert_eq!(query_text(&from_file).expect("reads"), "SELECT 2");
        let inline = SqlArgs { query: Some("SELECT 1".into()), file: None, period: PeriodArgs::default() };
        assert_eq!(query_text(&inline).expect("given"), "SELECT 1");
    }
}
