//! `apron sql` on a terminal without a query: an interactive shell over one
//! [`Console`], with reedline's line editing, a history kept in a file
//! ([`history_path`]), completion ([`super::complete`]) in a menu on Tab,
//! statements over several lines (ended by `;`, a continuation prompt
//! meanwhile, the lines one entry to edit and in the history) and the dot
//! commands ([`super::dot`]).
//!
//! A statement that fails prints the one-line error `apron sql QUERY`
//! would print, and the shell goes on. Ctrl-C while a statement runs
//! cancels it (its future is dropped, which stops the engine's tasks) and
//! the shell goes on (the line editor has the terminal in raw mode only
//! while it reads, so Ctrl-C meanwhile is a SIGINT); at the prompt it
//! clears the line. Ctrl-D or `.quit` leaves.
//!
//! A terminal the line editor cannot drive (one that never answers its
//! question for the cursor's place: a serial console, some multiplexers)
//! gets one warning, then plain lines ([`read_plain`]): the same prompts,
//! statements and history, with the terminal's own line editing only.

use std::borrow::Cow;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use datafusion::sql::sqlparser::dialect::{GenericDialect, dialect_from_str};
use nu_ansi_term::Style;
use reedline::{
    Color, ColumnarMenu, Emacs, FileBackedHistory, HistoryItem, KeyCode, KeyModifiers, MenuBuilder, Prompt,
    PromptEditMode, PromptHistorySearch, PromptHistorySearchStatus, Reedline, ReedlineEvent, ReedlineMenu,
    Signal, SimpleMatchHighlighter, ValidationResult, Validator, default_emacs_keybindings,
};

use crate::error::{Error, OutputError, one_line};

use super::complete::{ShellCompleter, Vocabulary};
use super::console::{Console, Flow};
use super::dot;
use super::statements::Splitter;

/// The prompt where a statement starts.
const PROMPT: &str = "apron> ";
/// The prompt on the lines that continue a statement.
const CONTINUE: &str = "   ...> ";
/// What the shell says when Ctrl-C cancelled a statement (on a line of
/// its own, after whatever the statement printed).
const CANCELLED: &str = "\nquery cancelled (Ctrl-C)";
/// Entries the history keeps.
const HISTORY_SIZE: usize = 10_000;

/// The completion menu's name, which Tab opens.
const COMPLETION_MENU: &str = "completion_menu";

/// The menu of completions: names as they are written, the selected one
/// in reverse video, the part already typed underlined; no colour.
fn completion_menu() -> ColumnarMenu {
    ColumnarMenu::default()
        .with_name(COMPLETION_MENU)
        .with_text_style(Style::new())
        .with_selected_text_style(Style::new().reverse())
        .with_match_text_style(Style::new().underline())
        .with_selected_match_text_style(Style::new().reverse().underline())
        .with_description_text_style(Style::new())
}

/// Runs the shell on `console` until Ctrl-D or `.quit`, printing results to
/// `out` and errors and notes on stderr. Fails only when the terminal
/// cannot be read or the output written.
pub(crate) async fn run<W: Write>(console: &mut Console<'_>, mut out: W) -> Result<(), Error> {
    catch_interrupts();
    let completer = ShellCompleter::default();
    completer.set(Vocabulary::read(console.session()).await);
    let dialect = console.session().context().state().config().options().sql_parser.dialect.to_string();
    let (history, mut history_path) = History::open();
    // Tab opens the menu of completions, or completes at once when there
    // is one (or their common start); again, the next one in the menu.
    let mut keys = default_emacs_keybindings();
    keys.add_binding(
        KeyModifiers::NONE,
        KeyCode::Tab,
        ReedlineEvent::UntilFound(vec![
            ReedlineEvent::Menu(COMPLETION_MENU.to_owned()),
            ReedlineEvent::MenuNext,
        ]),
    );
    keys.add_binding(KeyModifiers::SHIFT, KeyCode::BackTab, ReedlineEvent::MenuPrevious);
    let mut editor = Reedline::create()
        .with_history(history)
        .with_completer(Box::new(completer.clone()))
        .with_quick_completions(true)
        .with_partial_completions(true)
        .with_menu(ReedlineMenu::EngineCompleter(Box::new(completion_menu())))
        .with_edit_mode(Box::new(Emacs::new(keys)))
        .with_validator(Box::new(StatementEnd { dialect: dialect.clone() }))
        // Without ANSI the menu marks its selection by upper-casing it
        // (`GPU_MINUTE_STATES`, a name no table has), so the menu styles
        // its selection instead: in reverse video, an attribute, not a
        // colour; the prompt and the typed text stay the terminal's own.
        .with_highlighter(Box::new(SimpleMatchHighlighter::default()))
        .with_ansi_colors(true);
    writeln!(
        out,
        "apron sql over {} ({}). End statements with ;  .help for help, Ctrl-D to leave.",
        console.session().layout().root().display(),
        console.session().tables().iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
    )
    .and_then(|()| out.flush())
    .map_err(|source| OutputError::Write { source })?;

    // Whether the line editor gave up on this terminal and lines are read
    // as they come ([`read_plain`]).
    let mut plain = false;
    loop {
        let entry = if plain {
            let Some(entry) = read_plain(&dialect, &mut out)? else { break };
            // The line editor keeps what it reads itself.
            if let Err(err) = editor.history_mut().save(HistoryItem::from_command_line(&entry)) {
                tracing::debug!(error = %err, "cannot add the entry to the history");
            }
            entry
        } else {
            match editor.read_line(&ShellPrompt) {
                Ok(Signal::Success(entry)) => entry,
                // The line editor cleared the line.
                Ok(Signal::CtrlC) => continue,
                Ok(Signal::CtrlD) => break,
                // Mostly a terminal that does not say where its cursor is
                // (a serial console, some multiplexers and IDE panes): it
                // is read line by line instead, as a shell does without
                // its line editor.
                Err(err) => {
                    eprintln!(
                        "warning: the line editor cannot work on this terminal ({err}); \
                         reading plain lines: no editing, completion or history keys"
                    );
                    plain = true;
                    continue;
                }
            }
        };
        // Each entry is in the file as soon as it is typed, so a shell
        // killed keeps it.
        if let Some(path) = &history_path
            && let Err(err) = editor.sync_history()
        {
            warn(path, &err);
            history_path = None;
        }
        if entry.trim_start().starts_with('.') {
            let done = match dot::parse(&entry) {
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
        // The validator let the entry through: it ends with a statement's
        // `;`, or holds no statement.
        let mut splitter = console.splitter();
        let statements: Vec<_> = entry.split('\n').flat_map(|line| splitter.push_line(line)).collect();
        for statement in statements {
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
            completer.set(Vocabulary::read(console.session()).await);
        }
    }
    Ok(())
}

/// The shell's prompts: [`PROMPT`] where a statement starts, [`CONTINUE`]
/// on the lines that continue it.
struct ShellPrompt;

impl Prompt for ShellPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed(PROMPT)
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed(CONTINUE)
    }

    // The terminal's own colour (the line editor's default is green).
    fn get_prompt_color(&self) -> Color {
        Color::Reset
    }

    fn get_prompt_multiline_color(&self) -> nu_ansi_term::Color {
        nu_ansi_term::Color::Default
    }

    fn get_indicator_color(&self) -> Color {
        Color::Reset
    }

    fn get_prompt_right_color(&self) -> Color {
        Color::Reset
    }

    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        let failing = match search.status {
            PromptHistorySearchStatus::Passing => "",
            PromptHistorySearchStatus::Failing => "failing ",
        };
        Cow::Owned(format!("({failing}reverse-search: {}) ", search.term))
    }
}

/// Enter ends the entry when it is a dot command or ends its statements
/// with `;` (as [`Splitter`] finds them, in the session's dialect);
/// otherwise it starts a line that continues the statement.
struct StatementEnd {
    /// The name of the session's SQL dialect.
    dialect: String,
}

impl Validator for StatementEnd {
    fn validate(&self, entry: &str) -> ValidationResult {
        if entry.trim_start().starts_with('.') {
            return ValidationResult::Complete;
        }
        let dialect = dialect_from_str(&self.dialect).unwrap_or_else(|| Box::new(GenericDialect {}));
        let mut splitter = Splitter::new(dialect);
        for line in entry.split('\n') {
            splitter.push_line(line);
        }
        if splitter.is_pending() { ValidationResult::Incomplete } else { ValidationResult::Complete }
    }
}

/// Reads one entry from standard input as plain lines (the terminal's own
/// line editing only), [`PROMPT`] before its first line and [`CONTINUE`]
/// before the next, until it is complete as [`StatementEnd`] says; `None`
/// at the end of the input (Ctrl-D) before an entry starts. An entry the
/// input ends in the middle of is returned as it is, to run.
fn read_plain<W: Write>(dialect: &str, out: &mut W) -> Result<Option<String>, Error> {
    let validator = StatementEnd { dialect: dialect.to_owned() };
    let mut entry = String::new();
    loop {
        let prompt = if entry.is_empty() { PROMPT } else { CONTINUE };
        out.write_all(prompt.as_bytes()).map_err(|source| OutputError::Write { source })?;
        flush(out)?;
        let mut line = String::new();
        let read = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|source| OutputError::Terminal { source })?;
        if read == 0 {
            return Ok((!entry.trim().is_empty()).then_some(entry));
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if !entry.is_empty() {
            entry.push('\n');
        }
        entry.push_str(line);
        if entry.trim().is_empty() {
            entry.clear();
            continue;
        }
        if matches!(validator.validate(&entry), ValidationResult::Complete) {
            return Ok(Some(entry));
        }
    }
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
/// written is one warning, then the shell goes on with a history in memory.
///
/// It holds every statement typed, literals and all, so it is private:
/// made `0600` in a folder made `0700` (the XDG base directory rule for
/// state), whatever the umask; one found readable by others (as apron made
/// it before) is narrowed to its owner's bits (`0644` becomes `0600`) when
/// it is the user's own.
struct History;

impl History {
    /// The history, read from its file (its folder made), and the file's
    /// path; without a file, a history in memory and `None`.
    fn open() -> (Box<FileBackedHistory>, Option<PathBuf>) {
        let memory = || Box::new(FileBackedHistory::new(HISTORY_SIZE).expect("a history of 10,000 entries"));
        let Some(path) = history_path(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")) else {
            return (memory(), None);
        };
        if let Err(err) = make_private(&path) {
            warn(&path, &err);
            return (memory(), None);
        }
        match FileBackedHistory::with_file(HISTORY_SIZE, path.clone()) {
            Ok(history) => (Box::new(history), Some(path)),
            Err(err) => {
                warn(&path, &err);
                (memory(), None)
            }
        }
    }
}

/// Creates the history file `path` (and its missing folders) private
/// before the line editor opens it, which would create it with the
/// umask's mode; narrows the mode of one readable by others.
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let file = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(path)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        // Only the owner may change a file's mode: another's history is
        // left as it is (and read, as before).
        match file.set_permissions(std::fs::Permissions::from_mode(mode & 0o700)) {
            Ok(()) => tracing::debug!(path = %path.display(), "made the history private (0600)"),
            Err(err) => {
                tracing::debug!(path = %path.display(), error = %err, "cannot make the history private")
            }
        }
    }
    Ok(())
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
