//! Tab completion in the shell of `apron sql`: the names of the session's
//! tables and views, of their columns and of its functions, read from the
//! session's catalog ([`Vocabulary::read`], again after each statement,
//! as naming a view registers it), the views registered on demand, the
//! SQL keywords of the parser, and the dot commands at the start of a
//! line.
//!
//! Only completion: no hints or colours (where a statement ends is
//! [`super::shell`]'s validator's, through [`super::statements`]).

use std::sync::{Arc, PoisonError, RwLock};

use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;
use reedline::{Completer, Span, Suggestion};

use crate::session::Session;

use super::dot::COMMANDS;

/// Views registered the first time a statement names them
/// ([`super::views`]): completed before they exist.
const ON_DEMAND: &[&str] =
    &["minute_costs", "cost_buckets", "gpu_minute_states", "proc_minute_states", "alloc_minute_states"];

/// The names the shell completes.
#[derive(Debug, Default, Clone)]
pub(crate) struct Vocabulary {
    /// Tables and views, sorted.
    tables: Vec<String>,
    /// Columns of every table and view, sorted, each once.
    columns: Vec<String>,
    /// Scalar, aggregate and window functions, sorted.
    functions: Vec<String>,
}

impl Vocabulary {
    /// The names `session`'s catalog holds now (its default schema).
    pub(crate) async fn read(session: &Session) -> Self {
        let ctx = session.context();
        let state = ctx.state();
        let options = &state.config().options().catalog;
        let mut tables: Vec<String> = ON_DEMAND.iter().map(|t| (*t).to_owned()).collect();
        let mut columns = Vec::new();
        if let Some(schema) =
            ctx.catalog(&options.default_catalog).and_then(|c| c.schema(&options.default_schema))
        {
            for name in schema.table_names() {
                if let Ok(Some(table)) = schema.table(&name).await {
                    columns.extend(table.schema().fields().iter().map(|f| f.name().clone()));
                }
                tables.push(name);
            }
        }
        let mut functions: Vec<String> = state
            .scalar_functions()
            .keys()
            .chain(state.aggregate_functions().keys())
            .chain(state.window_functions().keys())
            .cloned()
            .collect();
        for names in [&mut tables, &mut columns, &mut functions] {
            names.sort();
            names.dedup();
        }
        Self { tables, columns, functions }
    }

    /// The completions of `word` (not empty): tables, then columns, then
    /// functions, then keywords (in the case `word` is typed in), each
    /// name once.
    fn complete_word(&self, word: &str) -> Vec<String> {
        let lower = word.to_lowercase();
        let upper = word.to_uppercase();
        let typed_upper = word.chars().any(char::is_uppercase);
        let names = [&self.tables, &self.columns, &self.functions]
            .into_iter()
            .flat_map(|names| names.iter().filter(|n| n.to_lowercase().starts_with(&lower)).cloned());
        let keywords = ALL_KEYWORDS
            .iter()
            .filter(|k| k.starts_with(&upper))
            .map(|k| if typed_upper { (*k).to_owned() } else { k.to_lowercase() });
        let mut seen = std::collections::HashSet::new();
        names.chain(keywords).filter(|n| seen.insert(n.to_lowercase())).collect()
    }

    /// The tables and views whose names start with `word`.
    fn complete_table(&self, word: &str) -> Vec<String> {
        let lower = word.to_lowercase();
        self.tables.iter().filter(|t| t.starts_with(&lower)).cloned().collect()
    }
}

/// The shell's line editor's completer: completion over a
/// [`Vocabulary`] the shell replaces after each statement.
#[derive(Debug, Default, Clone)]
pub(crate) struct ShellCompleter {
    /// The names completed; shared with the shell, which replaces them.
    pub(crate) vocabulary: Arc<RwLock<Vocabulary>>,
}

impl ShellCompleter {
    /// Replaces the names completed.
    pub(crate) fn set(&self, vocabulary: Vocabulary) {
        *self.vocabulary.write().unwrap_or_else(PoisonError::into_inner) = vocabulary;
    }

    /// Where the word before `pos` in `line` starts, and its completions.
    fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let vocabulary = self.vocabulary.read().unwrap_or_else(PoisonError::into_inner);
        let before = &line[..pos];
        let start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_alphanumeric() || *c == '_')
            .last()
            .map_or(pos, |(i, _)| i);
        let word = &before[start..];
        let trimmed = before.trim_start();
        let names = if trimmed.starts_with('.') && !trimmed.contains(char::is_whitespace) {
            // A dot command's name, its `.` included.
            let start = pos - trimmed.len();
            let names = COMMANDS
                .iter()
                .filter_map(|(c, _)| c.split_whitespace().next())
                .filter(|c| c.starts_with(trimmed))
                .map(str::to_owned)
                .collect();
            return (start, names);
        } else if trimmed.starts_with(".schema") {
            vocabulary.complete_table(word)
        } else if word.is_empty() {
            Vec::new()
        } else {
            vocabulary.complete_word(word)
        };
        (start, names)
    }
}

impl Completer for ShellCompleter {
    fn complete(&mut self, line: &str, pos: usize) -> Vec<Suggestion> {
        let (start, names) = self.candidates(line, pos);
        names
            .into_iter()
            .map(|value| Suggestion { value, span: Span::new(start, pos), ..Suggestion::default() })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completer() -> ShellCompleter {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let completer = ShellCompleter::default();
        completer.set(Vocabulary {
            tables: names(&["gpu_minutes", "gpu_samples", "proc_samples"]),
            columns: names(&["gpu_util_pct", "host", "ts"]),
            functions: names(&["sum", "substr"]),
        });
        completer
    }

    fn complete(line: &str) -> (usize, Vec<String>) {
        let suggestions = completer().complete(line, line.len());
        let starts: Vec<usize> = suggestions.iter().map(|s| s.span.start).collect();
        assert!(suggestions.iter().all(|s| s.span.end == line.len()), "{suggestions:?}");
        // Every suggestion replaces the same word (none: where the cursor is).
        let start = starts.first().copied().unwrap_or(line.len());
        assert!(starts.iter().all(|s| *s == start), "{suggestions:?}");
        (start, suggestions.into_iter().map(|s| s.value).collect())
    }

    #[test]
    fn tables_columns_functions_then_keywords() {
        assert_eq!(complete("SELECT count(*) FROM gpu_sa"), (21, vec!["gpu_samples".to_owned()]));
        assert_eq!(complete("SELECT gpu_").1, ["gpu_minutes", "gpu_samples", "gpu_util_pct"]);
        let (start, names) = complete("select su");
        assert_eq!(start, 7);
        assert_eq!(&names[..2], ["sum", "substr"]);
        assert!(names.contains(&"substring".to_owned()), "keywords in the case typed: {names:?}");
        let (_, names) = complete("SEL");
        assert_eq!(names, ["SELECT"]);
        assert_eq!(complete("SELECT ").1, Vec::<String>::new(), "nothing typed, nothing offered");
    }

    #[test]
    fn dot_commands_and_the_tables_of_schema() {
        assert_eq!(complete(".ta"), (0, vec![".tables".to_owned()]));
        assert_eq!(complete("  .s").1, [".schema"]);
        assert_eq!(complete(".schema gpu_").1, ["gpu_minutes", "gpu_samples"]);
    }
}
