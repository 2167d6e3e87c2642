//! `apron sql QUERY | sql -f FILE`: one ad-hoc read-only query over the data
//! folder, printed in the chosen format.

use std::io::{Read, Write};
use std::path::Path;

use crate::cli::{GlobalArgs, SqlArgs};
use crate::error::Error;
use crate::session::Session;

/// Reads the query (from the command line, a file, or standard input for
/// `-f -`), runs it over `global.data` and prints the rows to `out`.
pub async fn run<W: Write>(global: &GlobalArgs, args: &SqlArgs, out: W) -> Result<(), Error> {
    // The query first: a missing query file is reported even without data.
    let query = query_text(args)?;
    let session = Session::open(&global.data)?;
    let df = session.sql(&query).await?;
    session.print(df, global.format, out).await?;
    Ok(())
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

    #[test]
    fn a_missing_query_file_is_named() {
        let args = SqlArgs { query: None, file: Some("/nonexistent/q.sql".into()) };
        let err = query_text(&args).expect_err("no such file");
        assert!(matches!(err, Error::ReadQuery { .. }));
        assert!(err.to_string().contains("/nonexistent/q.sql"), "{err}");
    }

    #[test]
    fn the_query_comes_from_the_argument_or_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.sql");
        std::fs::write(&path, "SELECT 2").expect("write");
        let from_file = SqlArgs { query: None, file: Some(path) };
        assert_eq!(query_text(&from_file).expect("reads"), "SELECT 2");
        let inline = SqlArgs { query: Some("SELECT 1".into()), file: None };
        assert_eq!(query_text(&inline).expect("given"), "SELECT 1");
    }
}
