//! SQL text read line by line, cut into statements where each `;` ends
//! one: the `;` are found by the SQL tokenizer of the session's dialect
//! (sqlparser's, which DataFusion parses with), so a `;` inside a string,
//! a quoted name or a comment ends nothing.
//!
//! What a statement means, and whether it is allowed, is the session's
//! business ([`crate::Session::sql`]); lines that are dot commands are the
//! caller's (they are never handed to the splitter).

use datafusion::sql::sqlparser::dialect::Dialect;
use datafusion::sql::sqlparser::tokenizer::{Location, Token, TokenWithSpan, Tokenizer, TokenizerError};

/// One statement: its text from its first word to its `;` (left out), and
/// the line it starts on, counting the lines given to the [`Splitter`]
/// from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Statement {
    /// The text, without the closing `;` and the comments before it.
    pub(crate) text: String,
    /// The line of its first word.
    pub(crate) line: usize,
}

/// Cuts the lines given to it into statements as their `;` arrive.
pub(crate) struct Splitter {
    dialect: Box<dyn Dialect>,
    /// The text after the last statement cut off: the start of the next.
    pending: String,
    /// The line `pending` starts on.
    pending_line: usize,
    /// The line the next line given is.
    next_line: usize,
}

impl std::fmt::Debug for Splitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Splitter")
            .field("pending", &self.pending)
            .field("pending_line", &self.pending_line)
            .finish_non_exhaustive()
    }
}

impl Splitter {
    /// A splitter of text in `dialect`, its first line numbered 1.
    pub(crate) fn new(dialect: Box<dyn Dialect>) -> Self {
        Self { dialect, pending: String::new(), pending_line: 1, next_line: 1 }
    }

    /// Adds `line` (without its line break) and returns the statements it
    /// ends, in order; a `;` ending nothing but comments or blanks yields
    /// none.
    pub(crate) fn push_line(&mut self, line: &str) -> Vec<Statement> {
        self.pending.push_str(line);
        self.pending.push('\n');
        self.next_line += 1;
        let tokens = match self.tokens() {
            Ok(tokens) => tokens,
            // A string, quoted name or comment still open: wait for the
            // line that closes it.
            Err(err) if waits_for_more(&err) => return Vec::new(),
            // Text the tokenizer refuses outright: a line ending in `;` ends
            // it, and the session reports what is wrong with it.
            Err(_) => {
                return if line.trim_end().ends_with(';') {
                    let text = self.pending.trim().trim_end_matches(';').to_owned();
                    let statement = Statement { text, line: self.pending_line };
                    self.clear();
                    vec![statement]
                } else {
                    Vec::new()
                };
            }
        };
        let mut statements = Vec::new();
        let mut cursor = Cursor::new(&self.pending);
        // The byte where the statement being read starts, and its first
        // word's offset and line.
        let mut start = 0;
        let mut first: Option<(usize, u64)> = None;
        for token in &tokens {
            match token.token {
                Token::Whitespace(_) | Token::EOF => {}
                Token::SemiColon => {
                    let end = cursor.offset(token.span.start);
                    if let Some((offset, line)) = first.take() {
                        statements.push(Statement {
                            text: self.pending[offset..end].trim_end().to_owned(),
                            line: self.pending_line + usize::try_from(line).unwrap_or(1) - 1,
                        });
                    }
                    start = end + ';'.len_utf8();
                }
                _ => {
                    if first.is_none() {
                        first = Some((cursor.offset(token.span.start), token.span.start.line));
                    }
                }
            }
        }
        if start > 0 {
            self.pending_line += self.pending[..start].matches('\n').count();
            self.pending.drain(..start);
        }
        statements
    }

    /// Counts a line the caller handled itself (a dot command between
    /// statements); what is pending, blanks or comments, is dropped.
    pub(crate) fn skip_line(&mut self) {
        self.next_line += 1;
        self.clear();
    }

    /// Drops the statement begun (Ctrl-C at the prompt).
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
        self.pending_line = self.next_line;
    }

    /// True when a statement is begun and not ended: text other than
    /// blanks and comments waits for its `;`.
    pub(crate) fn is_pending(&self) -> bool {
        match self.tokens() {
            Ok(tokens) => tokens.iter().any(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF)),
            Err(_) => true,
        }
    }

    /// The end of the input: the statement begun, if any, though no `;`
    /// ends it.
    pub(crate) fn finish(&mut self) -> Option<Statement> {
        if !self.is_pending() {
            return None;
        }
        let text = self.pending.trim().to_owned();
        let leading = self.pending.len() - self.pending.trim_start().len();
        let line = self.pending_line + self.pending[..leading].matches('\n').count();
        self.clear();
        // Comments before the first word stay: the session skips them.
        Some(Statement { text, line })
    }

    fn tokens(&self) -> Result<Vec<TokenWithSpan>, TokenizerError> {
        Tokenizer::new(self.dialect.as_ref(), &self.pending).with_unescape(false).tokenize_with_location()
    }
}

/// True for the tokenizer's errors that more text can mend: an unclosed
/// string, quoted name, dollar-quoted string or comment.
fn waits_for_more(err: &TokenizerError) -> bool {
    err.message.contains("Unterminated") || err.message.contains("EOF")
}

/// Turns the tokenizer's lines and columns (from 1, in characters) into
/// byte offsets of its text, walking forward only.
struct Cursor<'a> {
    text: &'a str,
    offset: usize,
    line: u64,
    column: u64,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, offset: 0, line: 1, column: 1 }
    }

    /// The byte offset of `at`, which is not before the last one asked.
    fn offset(&mut self, at: Location) -> usize {
        let mut chars = self.text[self.offset..].chars();
        while (self.line, self.column) < (at.line, at.column) {
            let Some(c) = chars.next() else { break };
            self.offset += c.len_utf8();
            if c == '\n' {
                self.line += 1;
                self.column = 1;
            } else {
                self.column += 1;
            }
        }
        self.offset
    }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;

    use super::*;

    /// The statements of `text` (text and line), and the one left at its end.
    type Split = (Vec<(String, usize)>, Option<(String, usize)>);

    fn split(text: &str) -> Split {
        let mut splitter = Splitter::new(Box::new(GenericDialect {}));
        let mut statements = Vec::new();
        for line in text.lines() {
            statements.extend(splitter.push_line(line).into_iter().map(|s| (s.text, s.line)));
        }
        (statements, splitter.finish().map(|s| (s.text, s.line)))
    }

    fn owned(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
        pairs.iter().map(|(t, l)| ((*t).to_owned(), *l)).collect()
    }

    #[test]
    fn each_semicolon_ends_a_statement_on_the_line_of_its_first_word() {
        let (statements, rest) = split("SELECT 1; SELECT 2;\n\nSELECT\n  3\n;\nSELECT 4");
        assert_eq!(statements, owned(&[("SELECT 1", 1), ("SELECT 2", 1), ("SELECT\n  3", 3)]));
        assert_eq!(rest, Some(("SELECT 4".to_owned(), 6)));
    }

    #[test]
    fn semicolons_in_strings_names_and_comments_end_nothing() {
        let text = "-- first; not a statement\nSELECT 'a;b' AS \"x;y\", /* c; */ 2 -- d;\n  AS two;\n";
        let (statements, rest) = split(text);
        assert_eq!(statements, owned(&[("SELECT 'a;b' AS \"x;y\", /* c; */ 2 -- d;\n  AS two", 2)]));
        assert_eq!(rest, None);
    }

    #[test]
    fn a_string_over_lines_waits_for_its_close() {
        let mut splitter = Splitter::new(Box::new(GenericDialect {}));
        assert!(splitter.push_line("SELECT 'one;").is_empty());
        assert!(splitter.is_pending());
        let done = splitter.push_line("two' AS s;");
        assert_eq!(done, [Statement { text: "SELECT 'one;\ntwo' AS s".into(), line: 1 }]);
        assert!(!splitter.is_pending());
    }

    #[test]
    fn comments_and_blanks_alone_are_no_statement() {
        let (statements, rest) = split("-- nothing\n;\n/* at all */ ;\n\n");
        assert!(statements.is_empty());
        assert_eq!(rest, None);
        let mut splitter = Splitter::new(Box::new(GenericDialect {}));
        splitter.push_line("-- a comment");
        assert!(!splitter.is_pending(), "a comment begins no statement");
    }

    #[test]
    fn lines_skipped_and_cleared_keep_the_count() {
        let mut splitter = Splitter::new(Box::new(GenericDialect {}));
        splitter.skip_line();
        splitter.push_line("SELECT 1,");
        splitter.clear();
        let done = splitter.push_line("SELECT 'é', 2;");
        assert_eq!(done, [Statement { text: "SELECT 'é', 2".into(), line: 3 }]);
    }

    #[test]
    fn text_the_tokenizer_refuses_is_handed_on_at_its_semicolon() {
        // `._` after anything but a name is no SQL the tokenizer reads.
        let refused = "SELECT ._x";
        assert!(Tokenizer::new(&GenericDialect {}, refused).tokenize().is_err());
        let mut splitter = Splitter::new(Box::new(GenericDialect {}));
        assert!(splitter.push_line(refused).is_empty(), "waits for its ;");
        let done = splitter.push_line("FROM t;");
        assert_eq!(done, [Statement { text: "SELECT ._x\nFROM t".into(), line: 1 }]);
        assert!(!splitter.is_pending());
        let done = splitter.push_line("SELECT 1;");
        assert_eq!(done, [Statement { text: "SELECT 1".into(), line: 3 }]);
    }
}
