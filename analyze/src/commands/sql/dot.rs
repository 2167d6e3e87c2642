//! The dot commands of `apron sql` without a query (`.tables`, `.schema
//! TABLE`, `.format`, `.timer`, `.help`, `.quit`): a line starting with `.`
//! where a statement would start, parsed here; [`super::console`] carries
//! them out.

use crate::error::{Error, InputError};
use crate::output::Format;

/// One dot command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dot {
    /// `.tables`: the tables and views of the session.
    Tables,
    /// `.schema TABLE`: the columns of a table, their types and nullability.
    Schema(String),
    /// `.format table|csv|json`: how the next results print.
    Format(Format),
    /// `.timer on|off`: whether each statement's time is printed after it.
    Timer(bool),
    /// `.help`: the keys, the dot commands and the views.
    Help,
    /// `.quit` or `.exit`: the end of the shell or of the script.
    Quit,
}

/// The dot commands and what they do, as `.help` prints them and the
/// shell completes them.
pub(crate) const COMMANDS: &[(&str, &str)] = &[
    (".tables", "list the tables and views"),
    (".schema TABLE", "the columns of TABLE, their types and whether they may be null"),
    (".format table|csv|json", "how results print from now on"),
    (".timer on|off", "print each statement's time (on stderr) after its result"),
    (".help", "this help"),
    (".quit", "leave (also .exit, or Ctrl-D)"),
];

/// Parses `line`, a line starting with `.` (blanks and a `;` at its end
/// are ignored).
pub(crate) fn parse(line: &str) -> Result<Dot, Error> {
    let line = line.trim().trim_end_matches(';');
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or(".");
    let args: Vec<&str> = words.collect();
    let usage = |text: &str| -> Error { InputError::Usage { message: format!("usage: {text}") }.into() };
    let dot = match (command, args.as_slice()) {
        (".tables", []) => Dot::Tables,
        (".tables", _) => return Err(usage(".tables")),
        (".schema", [table]) if is_table_name(table) => Dot::Schema((*table).to_owned()),
        (".schema", _) => return Err(usage(".schema TABLE (a table or view name, as .tables lists it)")),
        (".format", [name]) => match *name {
            "table" => Dot::Format(Format::Table),
            "csv" => Dot::Format(Format::Csv),
            "json" => Dot::Format(Format::Json),
            _ => return Err(usage(".format table|csv|json")),
        },
        (".format", _) => return Err(usage(".format table|csv|json")),
        (".timer", ["on"]) => Dot::Timer(true),
        (".timer", ["off"]) => Dot::Timer(false),
        (".timer", _) => return Err(usage(".timer on|off")),
        (".help", _) => Dot::Help,
        (".quit" | ".exit", _) => Dot::Quit,
        _ => {
            return Err(InputError::Usage {
                message: format!("unknown command {command}; .help lists the commands"),
            }
            .into());
        }
    };
    Ok(dot)
}

/// The help `.help` prints: the dot commands, the keys and the views
/// registered on demand.
pub(crate) fn help() -> String {
    let mut text = String::from(
        "End each statement with ; (it may span lines). Statements are read-only, as for apron sql QUERY.\n",
    );
    let width = COMMANDS.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    for (command, what) in COMMANDS {
        text.push_str(&format!("  {command:width$}  {what}\n"));
    }
    text.push_str(
        "Keys: Tab completes table, column and function names and keywords; Up and Down walk the \
         history; Ctrl-C cancels the running query or clears the line; Ctrl-D leaves.\n\
         minute_costs, cost_buckets, gpu_minute_states, proc_minute_states, alloc_minute_states \
         and the apron_ functions are registered the first time a statement names them, for the period given \
         when the shell started (default the last 30 days).\n",
    );
    text
}

/// A table name `.schema` takes: letters, digits and `_`, with a schema
/// before a `.` (`information_schema.tables`); passed to `DESCRIBE` as is.
fn is_table_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_parses() {
        assert_eq!(parse(".tables").expect("parses"), Dot::Tables);
        assert_eq!(parse("  .schema gpu_samples; ").expect("parses"), Dot::Schema("gpu_samples".into()));
        assert_eq!(parse(".format csv").expect("parses"), Dot::Format(Format::Csv));
        assert_eq!(parse(".timer on").expect("parses"), Dot::Timer(true));
        assert_eq!(parse(".timer off").expect("parses"), Dot::Timer(false));
        assert_eq!(parse(".help").expect("parses"), Dot::Help);
        assert_eq!(parse(".quit").expect("parses"), Dot::Quit);
        assert_eq!(parse(".exit").expect("parses"), Dot::Quit);
    }

    #[test]
    fn mistakes_say_how_it_is_used() {
        let message = |line: &str| parse(line).expect_err("refused").to_string();
        assert_eq!(message(".format xml"), "usage: .format table|csv|json");
        assert_eq!(message(".timer"), "usage: .timer on|off");
        assert!(message(".schema").starts_with("usage: .schema TABLE"));
        assert!(message(".schema a;b").starts_with("usage: .schema TABLE"));
        assert_eq!(message(".frob"), "unknown command .frob; .help lists the commands");
    }

    #[test]
    fn help_lists_every_command() {
        let help = help();
        for (command, _) in COMMANDS {
            assert!(help.contains(command), "{help}");
        }
    }
}
