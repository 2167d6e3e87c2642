//! Snapshot tests of what a user reads: the `--help` of `apron`, of each of
//! its commands, of `apron-recorder` and of its commands; and the one line
//! `apron` prints for each kind of bad input, with its exit code. Each runs
//! the real binary as a process, with an empty environment (no
//! `$APRON_DATA` in the help's defaults) in a temporary folder.
//!
//! The snapshots are `tests/it/snapshots/it__cli_snapshots__*.snap`. A
//! changed help text or message fails the test; when the change is meant,
//! accept it with `INSTA_UPDATE=always cargo test -p apron-tests --test it
//! cli_snapshots::` (or `cargo insta review`) and commit the `.snap` files. On CI (`CI` set)
//! insta writes nothing and a mismatch fails.
//!
//! Temporary paths are replaced by `[TMP]` before comparing.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use apron_tests::scenario::Fixture;

/// Runs `bin ARGS` in `cwd` with nothing in its environment.
fn run(bin: &str, cwd: &Path, args: &[&str]) -> Output {
    Command::new(apron_tests::bin(bin))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// The command names listed under `Commands:` in a help text, without
/// clap's `help`.
fn commands_in(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The `--help` of `bin`, of each of its commands and of theirs, each a
/// snapshot named `{bin}_help`, `{bin}_{command}_help` or
/// `{bin}_{command}_{sub}_help`.
fn snapshot_helps(bin: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let main = run(bin, dir.path(), &["--help"]);
    assert_eq!(main.status.code(), Some(0), "{bin} --help: {}", text(&main.stderr));
    let help = text(&main.stdout);
    insta::assert_snapshot!(format!("{bin}_help"), help);
    let commands = commands_in(&help);
    for command in &commands {
        let out = run(bin, dir.path(), &[command, "--help"]);
        assert_eq!(out.status.code(), Some(0), "{bin} {command} --help: {}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "{bin} {command} --help: {}", text(&out.stderr));
        let help = text(&out.stdout);
        insta::assert_snapshot!(format!("{bin}_{command}_help"), help);
        // A command with commands of its own (`apron import`): theirs too.
        for sub in commands_in(&help) {
            let out = run(bin, dir.path(), &[command, &sub, "--help"]);
            assert_eq!(out.status.code(), Some(0), "{bin} {command} {sub} --help: {}", text(&out.stderr));
            insta::assert_snapshot!(format!("{bin}_{command}_{sub}_help"), text(&out.stdout));
        }
    }
    commands
}

#[test]
fn help_of_apron_and_every_command() {
    let commands = snapshot_helps("apron");
    // Every command has its snapshot: a new command shows up here first.
    let expected = [
        "sql",
        "config",
        "pick",
        "alerts",
        "reclaim",
        "savings",
        "zombies",
        "starved",
        "events",
        "jobs",
        "job",
        "spend",
        "idle-cost",
        "windows",
        "chart",
        "report",
        "export-config",
        "ddl",
        "export-sql",
        "import",
        "demo",
        "completions",
        "man-pages",
    ];
    assert_eq!(commands, expected);
}

#[test]
fn help_of_apron_recorder_and_every_command() {
    let commands = snapshot_helps("apron-recorder");
    assert_eq!(commands, ["simulate", "ship", "compact", "idle-now", "completions", "man-pages"]);
}

/// One bad-input case: a name, and `apron`'s arguments (`{DATA}`,
/// `{CONFIG}` and `{TMP}` stand for the fixture's paths).
struct Case {
    name: &'static str,
    args: &'static [&'static str],
}

/// Bad input of every kind `apron` refuses, on the scenario fleet with the
/// damage [`damage`] does.
const CASES: &[Case] = &[
    // The command line (clap's own message, folded onto one line).
    Case { name: "bad --format", args: &["--format", "xml", "spend"] },
    Case { name: "unknown flag", args: &["spend", "--frob"] },
    Case { name: "bad --month", args: &["spend", "--month", "2026-13"] },
    Case { name: "bad --from", args: &["spend", "--from", "yesterday"] },
    Case { name: "bad --by", args: &["idle-cost", "--by", "nobody"] },
    Case { name: "bad --window", args: &["pick", "--host", "h1", "--window", "soon"] },
    Case { name: "conflicting period flags", args: &["spend", "--month", "2026-11", "--last", "7d"] },
    Case { name: "sql --out without a query", args: &["sql", "--out", "{TMP}/result.csv"] },
    Case { name: "misspelt command", args: &["spnd", "--month", "2026-11"] },
    Case { name: "misspelt flag", args: &["spend", "--mnth", "2026-11"] },
    Case { name: "a duration without its unit", args: &["spend", "--last", "30"] },
    Case { name: "a size that is not one", args: &["zombies", "--min-mem", "lots"] },
    Case {
        name: "a flag the demo does not use",
        args: &["demo", "--data", "{TMP}/d", "--out", "{TMP}/demo"],
    },
    Case {
        name: "a flag the report does not use",
        args: &["report", "--month", "2026-11", "--format", "csv", "--out", "{TMP}/r"],
    },
    // The commands for other engines.
    Case { name: "ddl for an unknown engine", args: &["ddl", "--engine", "oracle", "--location", "/data"] },
    Case { name: "ddl at a relative location", args: &["ddl", "--engine", "spark", "--location", "data"] },
    Case {
        name: "ddl with a bad schema",
        args: &["ddl", "--engine", "trino", "--location", "/d", "--schema", "Fleet-1"],
    },
    Case {
        name: "export-sql spend --by",
        args: &["export-sql", "spend", "--by", "user", "--engine", "spark"],
    },
    Case {
        name: "export-config into a file",
        args: &["export-config", "--out", "{TMP}/bad-key.toml/tables"],
    },
    // The period.
    Case { name: "--from after --to", args: &["spend", "--from", "2026-11-05", "--to", "2026-11-02"] },
    Case { name: "a period without data", args: &["spend", "--month", "2025-01"] },
    // The config file.
    Case { name: "missing config file", args: &["--config", "{TMP}/nope.toml", "config"] },
    Case { name: "bad config key", args: &["--config", "{TMP}/bad-key.toml", "config"] },
    Case { name: "bad config line", args: &["--config", "{TMP}/bad-line.toml", "config"] },
    Case { name: "bad config value", args: &["--config", "{TMP}/bad-value.toml", "config"] },
    // The data folder and its files.
    Case { name: "missing data folder", args: &["--data", "{TMP}/absent", "sql", "SELECT 1"] },
    Case { name: "data folder is a file", args: &["--data", "{TMP}/bad-key.toml", "sql", "SELECT 1"] },
    Case { name: "empty data folder", args: &["--data", "{TMP}/empty", "spend"] },
    Case {
        name: "corrupt Parquet file",
        args: &["--data", "{TMP}/corrupt", "sql", "SELECT count(*) FROM gpu_samples"],
    },
    Case {
        name: "empty Parquet file",
        args: &["--data", "{TMP}/zero", "sql", "SELECT count(*) FROM gpu_samples"],
    },
    Case { name: "unknown host for pick", args: &["pick", "--host", "nosuchhost"] },
    // The query.
    Case { name: "missing query file", args: &["sql", "-f", "{TMP}/nope.sql"] },
    Case { name: "bad SQL", args: &["sql", "SELEC 1"] },
    Case { name: "unknown table", args: &["sql", "SELECT * FROM nope"] },
    Case { name: "unknown column", args: &["sql", "SELECT nope FROM gpu_samples"] },
    Case { name: "a statement that writes", args: &["sql", "DROP TABLE gpu_samples"] },
    // --param.
    Case { name: "--param without =", args: &["sql", "SELECT $1", "--param", "2026-11-01"] },
    Case { name: "--param with a bad name", args: &["sql", "SELECT $1", "--param", "a b=1"] },
    Case { name: "--param the query lacks", args: &["sql", "SELECT $1", "--param", "1=a", "--param", "2=b"] },
    Case { name: "--param for a query without any", args: &["sql", "SELECT 1", "--param", "1=a"] },
    Case { name: "--param missing", args: &["sql", "SELECT $1, $2, $host", "--param", "2=b"] },
    Case { name: "--param given twice", args: &["sql", "SELECT $1", "--param", "1=a", "--param", "$1=b"] },
    // Other option values and the output.
    Case { name: "sql --out of an unknown kind", args: &["sql", "SELECT 1", "--out", "{TMP}/result.xlsx"] },
    Case { name: "unknown chart", args: &["chart", "nope", "--out", "{TMP}/x.png"] },
    Case { name: "demo without hosts", args: &["demo", "--hosts", "0", "--out", "{TMP}/demo"] },
    Case {
        name: "report into a folder of other files",
        args: &["report", "--month", "2026-11", "--out", "{TMP}/busy"],
    },
    Case {
        name: "demo simulating into a file",
        args: &[
            "demo",
            "--month",
            "2026-11",
            "--days",
            "1",
            "--hosts",
            "1",
            "--out",
            "{TMP}/demo",
            "--keep-data",
            "{TMP}/bad-key.toml",
        ],
    },
];

/// Writes the files the cases read: bad configs, an empty data folder, data
/// folders with a corrupt and an empty Parquet file, a folder of someone
/// else's files.
fn damage(fx: &Fixture) {
    let tmp = fx.dir.path();
    let write = |rel: &str, bytes: &[u8]| {
        let path = tmp.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
    };
    write("bad-key.toml", b"currency = \"EUR\"\n\n[energy]\nprise_per_kwh = 0.2\n");
    write("bad-line.toml", b"currency = \"EUR\"\n[idle\nthreshold_pct = 5\n");
    write("bad-value.toml", b"[idle]\nthreshold_pct = 500\n");
    std::fs::create_dir_all(tmp.join("empty")).expect("mkdir");
    for (folder, bytes) in [("corrupt", &b"not parquet\n"[..]), ("zero", &b""[..])] {
        apron_tests::scenario::write(&tmp.join(folder));
        write(&format!("{folder}/gpu_samples/date=2026-11-02/host=h1/zz-bad.parquet"), bytes);
    }
    write("busy/notes.txt", b"someone's notes\n");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let fx = Fixture::new();
    damage(&fx);
    let tmp = fx.dir.path().to_str().expect("UTF-8 path").to_owned();
    let mut transcript = String::new();
    for case in CASES {
        // The fixture's data and config, unless the case names its own
        // (clap refuses an option given twice).
        let mut args: Vec<&str> = Vec::new();
        // Only the ones the command uses: the others are refused.
        let uses: &[&str] = match case.args.iter().find(|a| !a.starts_with('-')) {
            Some(&("demo" | "ddl" | "export-sql")) => &[],
            Some(&"export-config") => &["--config"],
            Some(&"import") => &["--data"],
            _ => &["--data", "--config"],
        };
        for (flag, value) in [("--data", "{DATA}"), ("--config", "{CONFIG}")] {
            if uses.contains(&flag) && !case.args.contains(&flag) {
                args.extend([flag, value]);
            }
        }
        let args: Vec<String> = args
            .iter()
            .chain(case.args)
            .map(|a| {
                a.replace("{DATA}", &fx.data.display().to_string())
                    .replace("{CONFIG}", &fx.config.display().to_string())
                    .replace("{TMP}", &tmp)
            })
            .collect();
        let out = run("apron", fx.dir.path(), &args.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = text(&out.stderr);
        assert!(out.stdout.is_empty(), "{}: stdout {}", case.name, text(&out.stdout));
        assert_eq!(stderr.lines().count(), 1, "{}: one line on stderr: {stderr}", case.name);
        assert!(!stderr.contains("panicked"), "{}: {stderr}", case.name);
        let shown: Vec<String> = case
            .args
            .iter()
            .map(|a| if a.contains(' ') { format!("\"{a}\"") } else { (*a).to_owned() })
            .collect();
        transcript.push_str(&format!(
            "# {}\n$ apron {}\nexit code {}\n{}\n",
            case.name,
            shown.join(" "),
            out.status.code().map_or("none (signal)".to_owned(), |c| c.to_string()),
            stderr.replace(&tmp, "[TMP]").trim_end()
        ));
    }
    insta::assert_snapshot!("bad_input_errors", transcript);
}
