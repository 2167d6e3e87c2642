//! `apron sql < queries.sql`: the statements and dot commands read from a
//! standard input that is not a terminal, run in turn on one
//! [`Console`], each result printed as it completes.
//!
//! Statements end at `;` ([`super::statements`]); a last one without `;`
//! runs at the end of the input. A dot command is a line starting with
//! `.` between statements. The first statement or command that fails
//! stops the script: nothing after it runs, and the error names it by its
//! number, line and first words (as `psql -v ON_ERROR_STOP=1` and duckdb
//! do).

use std::io::{BufRead, Write};
use std::path::PathBuf;

use crate::error::{Error, InputError};

use super::console::{Console, Flow};
use super::dot;

/// Runs what `input` holds on `console`, printing to `out`. When it
/// returns `Ok`, every statement ran and its result is written.
pub(crate) async fn run<R: BufRead, W: Write>(
    console: &mut Console<'_>,
    input: R,
    mut out: W,
) -> Result<(), Error> {
    let mut splitter = console.splitter();
    let mut number = 0;
    for (index, line) in input.lines().enumerate() {
        let line = line.map_err(|source| InputError::ReadQuery { path: PathBuf::from("-"), source })?;
        if !splitter.is_pending() && line.trim_start().starts_with('.') {
            splitter.skip_line();
            number += 1;
            let failed = |e| failed(number, index + 1, &line, e);
            let dot = dot::parse(&line).map_err(failed)?;
            if console.dot(dot, &mut out).await.map_err(failed)? == Flow::Quit {
                return Ok(());
            }
            continue;
        }
        for statement in splitter.push_line(&line) {
            number += 1;
            console
                .execute(&statement.text, &mut out)
                .await
                .map_err(|e| failed(number, statement.line, &statement.text, e))?;
        }
    }
    if let Some(statement) = splitter.finish() {
        number += 1;
        console
            .execute(&statement.text, &mut out)
            .await
            .map_err(|e| failed(number, statement.line, &statement.text, e))?;
    }
    Ok(())
}

/// The error of statement `number`, on `line`, whose text is `text`.
fn failed(number: usize, line: usize, text: &str, source: Error) -> Error {
    Error::Statement { number, line, excerpt: excerpt(text), source: Box::new(source) }
}

/// The first words of `text`, on one line, for an error message.
fn excerpt(text: &str) -> String {
    const LONGEST: usize = 40;
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match words.char_indices().nth(LONGEST) {
        Some((cut, _)) => format!("{}…", &words[..cut]),
        None => words,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_one_short_line() {
        assert_eq!(excerpt("SELECT\n  1"), "SELECT 1");
        let long = format!("SELECT {}", "x, ".repeat(30));
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 41, "{cut}");
        assert!(cut.ends_with('…'));
    }
}
