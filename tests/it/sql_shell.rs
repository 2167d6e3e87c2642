//! End to end: `apron sql` without a query. From a standard input that is
//! not a terminal it runs the statements it reads (`apron sql <
//! queries.sql`), each result as `apron sql QUERY` alone prints it, and
//! stops at the first that fails; on a terminal (a pseudo-terminal driven
//! by the test) it is an interactive shell: statements over several
//! lines, dot commands, the timer, a history kept in a file and read back,
//! completion, and Ctrl-C cancelling a running query, not the shell.
//!
//! Runs on the hand-built fleet of `apron_tests::scenario` (Monday
//! 2026-11-02 10:00–10:10 UTC): h1 holds GPU-A and GPU-B (60 samples each,
//! GPU-A at 50% for 30 of them), h2 GPU-C (48 samples at 100%); 138 process
//! samples; its minute_costs are 33 rows costing 2.7964 in all.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_tests::pty::Terminal;
use apron_tests::scenario::{FROM_TO, Fixture};

/// `apron --data DATA --config CONFIG ARGS…` with `input` on its standard
/// input (a pipe, not a terminal).
fn apron_stdin(fx: &Fixture, args: &[&str], input: &str) -> Output {
    let mut child = Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(&fx.data)
        .arg("--config")
        .arg(&fx.config)
        .args(args)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin.write_all(input.as_bytes()).expect("write the script");
    drop(stdin);
    apron_tests::wait_with_timeout(child, Duration::from_secs(120))
}

/// What `apron --format FORMAT sql --from … --to … QUERY` alone prints.
fn alone(fx: &Fixture, format: &str, query: &str) -> String {
    let mut args = vec!["--format", format, "sql"];
    args.extend(FROM_TO);
    args.push(query);
    let out = fx.apron(&args);
    assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn a_script_on_standard_input_prints_each_result_in_turn() {
    let fx = Fixture::new();
    let by_host = "SELECT host, count(*) AS n\nFROM gpu_samples\nGROUP BY host\nORDER BY host";
    let quoted = "SELECT 'a;b' AS text, count(*) AS n FROM proc_samples";
    let util = "SELECT sum(gpu_util_pct) AS util FROM gpu_samples";
    let costs =
        "SELECT count(*) AS rows, round(sum(cost), 4) AS cost, sum(seconds) AS seconds FROM minute_costs";
    let script = format!(
        "-- GPU samples per host; this comment's ; ends nothing\n\
         {by_host};\n\
         {quoted}; /* a comment; with a semicolon */\n\
         .format csv\n\
         {util};\n\
         {costs}\n"
    );
    let mut args = vec!["--format", "json", "sql"];
    args.extend(FROM_TO);
    let out = apron_stdin(&fx, &args, &script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "");
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");

    // Each result is what the statement alone prints, in the format of its
    // place in the script.
    let expected = [
        alone(&fx, "json", by_host),
        alone(&fx, "json", quoted),
        alone(&fx, "csv", util),
        alone(&fx, "csv", costs),
    ]
    .concat();
    assert_eq!(stdout, expected);

    // And the numbers, worked out by hand from the scenario.
    let lines: Vec<&str> = stdout.lines().collect();
    let by_host: serde_json::Value = serde_json::from_str(lines[0]).expect("JSON");
    assert_eq!(by_host, serde_json::json!([{"host": "h1", "n": 120}, {"host": "h2", "n": 48}]));
    let quoted: serde_json::Value = serde_json::from_str(lines[1]).expect("JSON");
    assert_eq!(quoted, serde_json::json!([{"text": "a;b", "n": 138}]));
    assert_eq!(lines[2..4], ["util", "6300"]);
    assert_eq!(lines[4], "rows,cost,seconds");
    let figures: Vec<f64> = lines[5].split(',').map(|v| v.parse().expect("a number")).collect();
    assert_eq!(figures, [33.0, 2.7964, 1680.0]);
    assert_eq!(lines.len(), 6);
}

#[test]
fn the_first_failing_statement_stops_the_script_and_is_named() {
    let fx = Fixture::new();
    for (script, printed, named) in [
        (
            "SELECT 1 AS one;\n\nSELECT nope\n  FROM gpu_samples;\nSELECT 2 AS two;\n",
            "one\n1\n",
            "error: statement 2 (line 3: SELECT nope FROM gpu_samples): invalid query: ",
        ),
        (
            "SELECT 1 AS one;\n.format xml\nSELECT 2 AS two;\n",
            "one\n1\n",
            "error: statement 2 (line 2: .format xml): usage: .format table|csv|json",
        ),
        // The same read-only rule as `apron sql QUERY`.
        (
            ".tables\nDROP TABLE gpu_samples;\nSELECT 2 AS two;\n",
            "table_name,table_type\nalloc_minutes,BASE TABLE\ngpu_events,BASE TABLE\ngpu_minutes,BASE TABLE\n\
             gpu_samples,BASE TABLE\nproc_minutes,BASE TABLE\nproc_samples,BASE TABLE\n",
            "error: statement 2 (line 2: DROP TABLE gpu_samples): apron sql is read-only: DROP TABLE is not allowed",
        ),
    ] {
        let out = apron_stdin(&fx, &["--format", "csv", "sql"], script);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{script}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), printed, "{script}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(named), "{script}: {stderr}");
    }
    // The unknown column is named, as `apron sql` alone names it.
    let out = apron_stdin(&fx, &["sql"], "SELECT nope FROM gpu_samples;");
    let alone = fx.apron(&["sql", "SELECT nope FROM gpu_samples"]);
    let alone = String::from_utf8_lossy(&alone.stderr);
    let line = String::from_utf8_lossy(&out.stderr);
    let cause = alone.trim_end().strip_prefix("error: ").expect("an error line");
    assert_eq!(
        line.trim_end(),
        format!("error: statement 1 (line 1: SELECT nope FROM gpu_samples): {cause}")
    );
}

/// `apron sql` on a terminal, with its history under `state`.
fn shell(fx: &Fixture, state: &Path, home: &Path) -> Terminal {
    let mut command = Command::new(apron_tests::bin("apron"));
    command
        .arg("--data")
        .arg(&fx.data)
        .arg("--config")
        .arg(&fx.config)
        .arg("sql")
        .args(FROM_TO)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .env("XDG_STATE_HOME", state)
        .env("HOME", home)
        .env("TERM", "xterm");
    Terminal::spawn(&mut command)
}

/// How long any one answer of the shell may take before the test fails.
const ANSWER: Duration = Duration::from_secs(60);

/// The shell's answer to what was just typed: what it printed up to
/// `needle` (a part of the answer, not of what was typed) and on to the
/// next prompt. Waiting for the prompt alone would not do: the line editor
/// paints a prompt again as it pleases (once the terminal has said where
/// its cursor is, and over an entry when Enter ends it).
fn reply(term: &mut Terminal, needle: &str) -> String {
    let mut text = term.expect(needle, ANSWER);
    text.push_str(&term.expect("apron> ", ANSWER));
    text
}

#[test]
fn the_shell_runs_statements_and_dot_commands_keeps_history_and_completes() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    let home = fx.dir.path().join("home");
    let mut term = shell(&fx, &state, &home);
    term.expect("apron> ", ANSWER);

    // A statement over two lines: the second gets the continuation prompt.
    term.send("SELECT count(*) AS n\r");
    term.expect("...> ", ANSWER);
    term.send("FROM gpu_samples;\r");
    let answer = reply(&mut term, "| 168 |");
    assert!(answer.contains("| 168 |"), "{answer}");

    term.send(".tables\r");
    let tables = reply(&mut term, "| proc_samples ");
    for table in ["gpu_minutes", "gpu_samples", "proc_minutes", "proc_samples"] {
        assert!(tables.contains(&format!("| {table} ")), "{tables}");
    }

    term.send(".schema gpu_samples\r");
    let schema = reply(&mut term, "| host ");
    assert!(schema.contains("| column_name "), "{schema}");
    assert!(schema.contains("| gpu_util_pct "), "{schema}");
    assert!(schema.contains("| host "), "{schema}");

    // A bad statement is its one-line error, and the shell goes on.
    term.send("SELECT nope FROM gpu_samples;\r");
    let error = reply(&mut term, "error: ");
    assert!(error.contains("error: invalid query: Schema error: No field named nope"), "{error}");

    term.send(".timer on\r");
    term.expect("apron> ", ANSWER);
    term.send("SELECT 6 * 7 AS answer;\r");
    let timed = reply(&mut term, "time: ");
    assert!(timed.contains("|     42 |"), "{timed}");
    let time = timed.split("time: ").nth(1).and_then(|t| t.split(" s").next()).unwrap_or_default();
    let (whole, decimals) = time.split_once('.').unwrap_or_default();
    assert!(
        !whole.is_empty() && whole.chars().all(|c| c.is_ascii_digit()) && decimals.len() == 3,
        "a time in seconds: {timed}"
    );
    term.send(".timer off\r");
    term.expect("apron> ", ANSWER);

    // Tab completes a table name from the session's catalog.
    term.send("SELECT count(*) AS procs FROM proc_sa\t");
    term.expect("FROM proc_samples", ANSWER);
    term.send(";\r");
    let completed = reply(&mut term, "|   138 |");
    assert!(completed.contains("|   138 |"), "{completed}");

    // Ctrl-D leaves.
    term.send("\x04");
    assert!(term.wait(ANSWER).success());

    // The history is in the file, a statement over lines as one entry (its
    // line breaks written `<\n>`, as the line editor writes them).
    let file = state.join("apron").join("history");
    let history = std::fs::read_to_string(&file).expect("the history file");
    for entry in
        ["SELECT count(*) AS n<\\n>FROM gpu_samples;", ".schema gpu_samples", "SELECT 6 * 7 AS answer;"]
    {
        assert!(history.lines().any(|l| l == entry), "{entry:?} in {history}");
    }
    assert!(!home.exists(), "with XDG_STATE_HOME set, nothing goes under HOME");

    // The next shell reads it back: Up twice is the completed statement.
    let mut term = shell(&fx, &state, &home);
    term.expect("apron> ", ANSWER);
    term.send("\x1b[A");
    term.expect("FROM proc_samples;", ANSWER);
    term.send("\x1b[A");
    term.expect(".timer off", ANSWER);
    term.send("\x1b[B");
    term.expect("FROM proc_samples;", ANSWER);
    term.send("\r");
    let again = reply(&mut term, "|   138 |");
    assert!(again.contains("|   138 |"), "{again}");
    term.send(".quit\r");
    assert!(term.wait(ANSWER).success());
}

#[test]
fn ctrl_c_cancels_the_running_query_not_the_shell() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    let mut term = shell(&fx, &state, fx.dir.path());
    term.expect("apron> ", ANSWER);
    // Ten trillion rows: hours of work.
    term.send("SELECT sum(value) AS s FROM generate_series(1, 10000000000000);\r");
    term.expect("10000000000000);", ANSWER);
    // Ctrl-C typed before the line editor hands the terminal back is a
    // Ctrl-C at the prompt: it clears a line. Type it again until the query
    // says it was cancelled.
    let mut cancelled = false;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(200));
        term.send("\x03");
        if term.try_expect("query cancelled (Ctrl-C)", Duration::from_secs(3)).is_some() {
            cancelled = true;
            break;
        }
    }
    assert!(cancelled, "Ctrl-C did not cancel the query:\n{}", term.output());
    term.expect("apron> ", ANSWER);
    term.send("SELECT 40 + 2 AS answer;\r");
    let answer = reply(&mut term, "|     42 |");
    assert!(answer.contains("|     42 |"), "the shell answers the next query: {answer}");
    term.send(".quit\r");
    assert!(term.wait(ANSWER).success());
}

/// `text` without the terminal's escape sequences (`ESC [ … letter`,
/// `ESC 7`, `ESC 8`): what a person reads.
fn shown(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        if chars.next_if_eq(&'[').is_some() {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

#[test]
fn the_menu_of_completions_shows_names_as_they_are_written() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    let mut term = shell(&fx, &state, fx.dir.path());
    term.expect("apron> ", ANSWER);
    // Three names start so: the view named on demand, the table, a column.
    term.send("SELECT * FROM gpu_m\t");
    // Each painting ends with the cursor shown again; styles may split a
    // name, so the text is read as shown.
    let mut painted = String::new();
    while !shown(&painted).contains("gpu_model") {
        painted.push_str(&term.expect("\x1b[?25h", ANSWER));
    }
    let menu = shown(&painted);
    assert!(menu.contains("gpu_minute_states"), "the first (selected) name as written: {menu:?}");
    assert!(!menu.contains("GPU_MINUTE_STATES"), "no name upper-cased: {menu:?}");
    assert!(menu.contains("gpu_minutes"), "{menu:?}");
    // Enter takes the selected name, as written.
    term.send("\r");
    term.expect("FROM gpu_minute_states", ANSWER);
    // Ctrl-C clears the line; Ctrl-D at the empty prompt leaves.
    term.send("\x03");
    term.expect("apron> ", ANSWER);
    term.send("\x04");
    assert!(term.wait(ANSWER).success());
}

#[test]
fn a_history_that_cannot_be_written_is_one_warning() {
    let fx = Fixture::new();
    // The state folder is a file: no history folder can be made in it.
    let state = fx.dir.path().join("state");
    std::fs::write(&state, "not a folder").expect("write");
    let mut term = shell(&fx, &state, fx.dir.path());
    let start = term.expect("apron> ", ANSWER);
    let warnings: Vec<&str> = start.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{start}");
    assert!(warnings[0].contains("cannot keep the history in"), "{start}");
    term.send("SELECT 1 AS one;\r");
    let answer = reply(&mut term, "|   1 |");
    assert!(answer.contains("|   1 |"), "{answer}");
    assert!(!answer.contains("warning:"), "said once: {answer}");
    term.send("\x04");
    assert!(term.wait(ANSWER).success());
}

/// [`shell`] under `umask`, on a terminal that answers the questions for
/// its cursor's place or (`silent`) never does.
fn shell_with(fx: &Fixture, state: &Path, umask: libc::mode_t, silent: bool) -> Terminal {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(apron_tests::bin("apron"));
    command
        .arg("--data")
        .arg(&fx.data)
        .arg("--config")
        .arg(&fx.config)
        .arg("sql")
        .args(FROM_TO)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .env("XDG_STATE_HOME", state)
        .env("HOME", fx.dir.path())
        .env("TERM", "xterm");
    // SAFETY: umask(2) is async-signal-safe and sets only the child's mask.
    unsafe {
        command.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    if silent { Terminal::spawn_silent(&mut command) } else { Terminal::spawn(&mut command) }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o777
}

/// The history holds every statement typed: `0600` in a `0700` folder
/// under the usual umask, and a history apron once made `0644` is made
/// `0600`.
#[test]
fn the_history_is_the_users_alone() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    let mut term = shell_with(&fx, &state, 0o022, false);
    term.expect("apron> ", ANSWER);
    term.send("SELECT 'a literal' AS said;\r");
    reply(&mut term, "a literal |");
    term.send("\x04");
    assert!(term.wait(ANSWER).success());
    let file = state.join("apron").join("history");
    assert!(std::fs::read_to_string(&file).expect("the history").contains("'a literal'"));
    assert_eq!(mode(&file), 0o600, "the history file");
    assert_eq!(mode(&state.join("apron")), 0o700, "its folder");

    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut term = shell_with(&fx, &state, 0o022, false);
    term.expect("apron> ", ANSWER);
    term.send(".quit\r");
    assert!(term.wait(ANSWER).success());
    assert_eq!(mode(&file), 0o600, "an old history is made private");
}

/// A terminal that never answers the line editor's question for the
/// cursor's place (a serial console, some multiplexers): one warning, then
/// plain lines, a statement over several of them, errors that do not end
/// the shell, the history kept, Ctrl-D to leave.
#[test]
fn a_terminal_that_does_not_say_where_its_cursor_is_gets_plain_lines() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    let mut term = shell_with(&fx, &state, 0o022, true);
    let start = term.expect("reading plain lines", ANSWER);
    let warnings: Vec<&str> = start.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{start}");
    term.expect("apron> ", ANSWER);
    term.send("SELECT count(*) AS n\n");
    term.expect("...> ", ANSWER);
    term.send("FROM gpu_samples;\n");
    let answer = reply(&mut term, "| 168 |");
    assert!(answer.contains("| 168 |"), "{answer}");
    term.send("SELECT nope FROM gpu_samples;\n");
    let error = reply(&mut term, "error: ");
    assert!(error.contains("error: invalid query: Schema error: No field named nope"), "{error}");
    term.send(".tables\n");
    reply(&mut term, "| proc_samples ");
    term.send("\x04");
    assert!(term.wait(ANSWER).success(), "Ctrl-D leaves");
    let history = std::fs::read_to_string(state.join("apron").join("history")).expect("the history");
    assert!(history.lines().any(|l| l == "SELECT count(*) AS n<\\n>FROM gpu_samples;"), "{history}");
    assert!(history.lines().any(|l| l == ".tables"), "{history}");
}
