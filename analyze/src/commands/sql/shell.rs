//! `apron sql` on a terminal without a query: an interactive shell over one
//! [`Console`], with rustyline's line editing, a history kept in a file
//! ([`history_path`]), completion ([`super::complete`]), statements over
//! several lines (ended by `;`, a continuation prompt meanwhile) and the dot
//! commands ([`super::dot`]).
//!
//! A statement that fails prints the one-line error `apron sql QUERY`
//! would print, and the shell goes on. Ctrl-C while a statement runs
//! cancels it (its future is dropped, which stops the engine's tasks) and
//! the shell goes on; at the prompt it clears the line. Ctrl-D or `.quit`
//! leaves.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use rustyline::Editor;
use rustyline::config::{CompletionType, Config};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;

use crate::error::{Error, OutputError, one_line};

use super::complete::{ShellHelper, Vocabulary};
use super::console::{Console, Flow};
use super::dot;

/// The prompt where a statement starts.
const PROMPT: &str = "apron> ";
/// The prompt on the lines that continue a statement.
const CONTINUE: &str = "   ...> ";
/// What the shell says when Ctrl-C cancelled a statement (on a line of
/// its own, after whatever the statement printed).
const CANCELLED: &str = "\nquery cancelled (Ctrl-C)";
/// Entries the history keeps.
const HISTORY_SIZE: usize = 10_000;

/// Runs the shell on `console` until Ctrl-D or `.quit`, printing results to
/// `out` and errors and notes on stderr. Fails only when the terminal
/// cannot be read or the output written.
pub(crate) async fn run<W: Write>(console: &mut Console<'_>, mut out: W) -> Result<(), Error> {
    catch_interrupts();
    let config = Config::builder()
        .auto_add_history(false)
        .history_ignore_space(true)
        .completion_type(CompletionType::List)
        .max_history_size(HISTORY_SIZE)
        .map_err(terminal_error)?
        .build();
    let mut editor: Editor<ShellHelper, FileHistory> = Editor::with_config(config).map_err(terminal_error)?;
    editor.set_helper(Some(ShellHelper { vocabulary: Vocabulary::read(console.session()).await }));
    let mut history = History::open(&mut editor);
    writeln!(
        out,
        "apron sql over {} ({}). End statements with ;  .help for help, Ctrl-D to leave.",
        console.session().layout().root().display(),
        console.session().tables().iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
    )
    .and_then(|()| out.flush())
    .map_err(|source| OutputError::Write { source })?;

    let mut splitter = console.splitter();
    loop {
        let prompt = if splitter.is_pending() { CONTINUE } else { PROMPT };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                splitter.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(err) => return Err(terminal_error(err)),
        };
        if !splitter.is_pending() && line.trim_start().starts_with('.') {
            splitter.skip_line();
            history.add(&mut editor, line.trim());
            let done = match dot::parse(&line) {
                Ok(dot) => cancellable(console.dot(dot, &mut out)).await,
                Err(err) => Some(Err(err)),
            };
            flush(&mut out)?;
            match done {
                Some(Ok(Flow::Quit)) => break,
                Some(Ok(Flow::Continue)) => {}
                Some(Err(err)) => report(err)?,
                None => eprintln!("{CANCELLED}"),
            }
            continue;
        }
        for statement in splitter.push_line(&line) {
            history.add(&mut editor, &format!("{};", statement.text));
            let done = cancellable(console.execute(&statement.text, &mut out)).await;
            // What a failed or cancelled statement printed comes before
            // what is said about it.
            flush(&mut out)?;
            match done {
                Some(Ok(())) => {}
                Some(Err(err)) => report(err)?,
                None => eprintln!("{CANCELLED}"),
            }
            // A statement that named a view registered it.
            if let Some(helper) = editor.helper_mut() {
                helper.vocabulary = Vocabulary::read(console.session()).await;
            }
        }
    }
    Ok(())
}

/// Runs `work` until it ends (`Some`) or Ctrl-C cancels it (`None`).
async fn cancellable<T>(work: impl Future<Output = Result<T, Error>>) -> Option<Result<T, Error>> {
    tokio::select! {
        // Listening before the work starts, so no Ctrl-C is missed.
        biased;
        _ = tokio::signal::ctrl_c() => None,
        done = work => Some(done),
    }
}

/// From now on, Ctrl-C (SIGINT) is told to the shell instead of ending the
/// process: a Ctrl-C between two statements is ignored rather than fatal.
fn catch_interrupts() {
    #[cfg(unix)]
    if let Err(err) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
        tracing::warn!(error = %err, "cannot catch Ctrl-C; it will end the shell");
    }
}

/// Prints `err` as `apron sql QUERY` would, on stderr, unless it is a
/// closed output, which ends the shell.
fn report(err: Error) -> Result<(), Error> {
    if err.is_broken_pipe() {
        return Err(err);
    }
    eprintln!("error: {}", one_line(&err));
    Ok(())
}

fn flush<W: Write>(out: &mut W) -> Result<(), Error> {
    out.flush().map_err(|source| OutputError::Write { source }.into())
}

fn terminal_error(err: ReadlineError) -> Error {
    let source = match err {
        ReadlineError::Io(io) => io,
        other => std::io::Error::other(other.to_string()),
    };
    OutputError::Terminal { source }.into()
}

/// Where the shell keeps its history: `$XDG_STATE_HOME/apron/history`
/// (an absolute `$XDG_STATE_HOME` only, as the XDG spec says), else
/// `$HOME/.local/state/apron/history`; `None` without either.
pub(crate) fn history_path(xdg_state_home: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_state_home)
        .or_else(|| absolute(home).map(|home| home.join(".local").join("state")))
        .map(|state| state.join("apron").join("history"))
}

/// The history file: read at the start, each new entry appended at once
/// (so a shell killed keeps what was typed). A file that cannot be read or
/// written is one warning, then the shell goes on without it.
struct History {
    path: Option<PathBuf>,
}

impl History {
    /// Loads the history file into `editor`, making its folder.
    fn open(editor: &mut Editor<ShellHelper, FileHistory>) -> Self {
        let Some(path) = history_path(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")) else {
            return Self { path: None };
        };
        if let Some(dir) = path.parent()
            && let Err(err) = std::fs::create_dir_all(dir)
        {
            warn(&path, &err);
            return Self { path: None };
        }
        match editor.load_history(&path) {
            Ok(()) => {}
            Err(ReadlineError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => {
                warn(&path, &err);
                return Self { path: None };
            }
        }
        Self { path: Some(path) }
    }

    /// Adds `entry` to the history and appends it to the file.
    fn add(&mut self, editor: &mut Editor<ShellHelper, FileHistory>, entry: &str) {
        if editor.add_history_entry(entry).is_err() {
            return;
        }
        if let Some(path) = &self.path
            && let Err(err) = editor.append_history(path)
        {
            warn(path, &err);
            self.path = None;
        }
    }
}

fn warn(path: &Path, err: &dyn std::fmt::Display) {
    eprintln!("warning: cannot keep the history in {}: {err}; going on without it", path.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_is_kept_where_xdg_says() {
        let os = |s: &str| Some(OsString::from(s));
        assert_eq!(history_path(os("/s"), os("/home/a")), Some(PathBuf::from("/s/apron/history")));
        assert_eq!(
            history_path(None, os("/home/a")),
            Some(PathBuf::from("/home/a/.local/state/apron/history"))
        );
        assert_eq!(
            history_path(os("relative"), os("/home/a")),
            Some(PathBuf::from("/home/a/.local/state/apron/history")),
            "a relative XDG_STATE_HOME is ignored"
        );
        assert_eq!(history_path(os(""), None), None);
    }
}
