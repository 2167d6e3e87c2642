//! A command line clap refuses, as one line on stderr.

use std::process::ExitCode;

/// The exit code of a refused command line (the same as any other failure
/// of either binary).
pub const EXIT_USAGE: u8 = 2;

/// What a binary does with a command line clap did not parse: `--help` and
/// `--version` print as clap writes them and succeed; any other error prints
/// [`one_line`] on stderr, pointing to the help of the command `args` named
/// ([`command_path`] in `cmd`), and fails with [`EXIT_USAGE`].
pub fn exit(err: &clap::Error, cmd: &clap::Command, args: &[String]) -> ExitCode {
    use clap::error::ErrorKind;
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match err.print() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(EXIT_USAGE),
        },
        _ => {
            eprintln!("{}", one_line(err, &command_path(cmd, args)));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The one line printed for a refused command line of the command `path`
/// (`apron`, `apron spend`):
/// `error: unrecognized subcommand 'spnd'; did you mean 'spend'? (see 'apron --help')`,
/// `error: unexpected argument '--mnth' found; did you mean '--month'? (see 'apron spend --help')`.
///
/// That is clap's message up to its first blank line (the usage block after
/// it is left out), joined onto one line, so a message that lists what is
/// missing on a second line keeps the list; then clap's suggestion of a
/// similar subcommand, flag or value, and the help of the command that
/// refused it.
pub fn one_line(err: &clap::Error, path: &str) -> String {
    use clap::error::{ContextKind, ContextValue};
    let rendered = err.render().to_string();
    let message: Vec<&str> =
        rendered.lines().map(str::trim).skip_while(|l| l.is_empty()).take_while(|l| !l.is_empty()).collect();
    let message = message.join(" ");
    let mut message = match message.as_str() {
        "" => "error: invalid arguments".to_owned(),
        m if m.starts_with("error:") => m.to_owned(),
        m => format!("error: {m}"),
    };
    let suggested =
        [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg, ContextKind::SuggestedValue]
            .into_iter()
            .find_map(|kind| match err.get(kind) {
                Some(ContextValue::String(s)) => Some(vec![s.clone()]),
                Some(ContextValue::Strings(s)) if !s.is_empty() => Some(s.clone()),
                _ => None,
            });
    if let Some(names) = suggested {
        let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        message.push_str(&format!("; did you mean {}?", names.join(" or ")));
    }
    format!("{message} (see '{path} --help')")
}

/// The command a command line names: `cmd`'s name and each subcommand
/// named in `args` (the arguments after the binary's own name), as deep as
/// they go (`apron import pynvml`). Words after `--` are never commands.
pub fn command_path(cmd: &clap::Command, args: &[String]) -> String {
    let mut path = vec![cmd.get_name().to_owned()];
    let mut current = cmd;
    for arg in args {
        if arg == "--" {
            break;
        }
        if let Some(sub) = current.find_subcommand(arg) {
            path.push(sub.get_name().to_owned());
            current = sub;
        }
    }
    path.join(" ")
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::*;

    /// A small command line shaped like apron's.
    #[derive(Debug, Parser)]
    #[command(name = "tool")]
    struct Cli {
        #[arg(long, global = true)]
        format: Option<String>,
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, Subcommand)]
    enum Command {
        Spend {
            #[arg(long)]
            month: Option<String>,
        },
        Zombies,
    }

    fn refused(args: &[&str]) -> String {
        let err = Cli::try_parse_from(args).expect_err("refused");
        let rest: Vec<String> = args[1..].iter().map(|a| (*a).to_owned()).collect();
        one_line(&err, &command_path(&Cli::command(), &rest))
    }

    #[test]
    fn a_misspelt_command_or_flag_keeps_the_suggestion_and_names_the_help() {
        Cli::command().debug_assert();
        assert_eq!(
            refused(&["tool", "spnd"]),
            "error: unrecognized subcommand 'spnd'; did you mean 'spend'? (see 'tool --help')"
        );
        assert_eq!(
            refused(&["tool", "spend", "--mnth", "x"]),
            "error: unexpected argument '--mnth' found; did you mean '--month'? (see 'tool spend --help')"
        );
        assert_eq!(
            refused(&["tool", "zombies", "--frob"]),
            "error: unexpected argument '--frob' found (see 'tool zombies --help')"
        );
        assert_eq!(
            refused(&["tool", "--frob"]),
            "error: unexpected argument '--frob' found (see 'tool --help')"
        );
        assert_eq!(
            refused(&["tool", "spend", "--month"]),
            "error: a value is required for '--month <MONTH>' but none was supplied (see 'tool spend --help')"
        );
    }

    #[test]
    fn a_missing_command_is_one_line() {
        let line = refused(&["tool"]);
        assert!(line.starts_with("error: "), "{line}");
        assert!(!line.contains('\n'), "{line}");
        assert!(line.ends_with("(see 'tool --help')"), "{line}");
    }
}
