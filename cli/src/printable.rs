//! Text for a terminal: what a process, a GPU, a pod or a host may be named
//! is data, and data can hold control characters (an escape sequence that
//! sets the terminal's title or clears its screen, a carriage return or a
//! newline that forges a line of a table). Every human-facing output of
//! both binaries (terminal tables, report headers, messages on stderr)
//! writes text through [`printable`]; machine formats (CSV, JSON, Parquet)
//! keep the data exact.

use std::borrow::Cow;

/// `text` with each control character (C0, DEL and C1) written as its Rust
/// escape (`\n`, `\t`, `\u{1b}`), so that it shows instead of acting; text
/// without one is returned as it is.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_show_as_escapes_and_the_rest_is_untouched() {
        assert!(matches!(printable("python3 é 日本"), Cow::Borrowed("python3 é 日本")));
        assert_eq!(printable("\u{1b}]0;owned\u{7}x"), "\\u{1b}]0;owned\\u{7}x");
        assert_eq!(printable("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(printable("\u{7f}\u{9b}2J"), "\\u{7f}\\u{9b}2J");
        assert!(!printable("\u{1b}[2J\u{0}").chars().any(char::is_control));
    }
}
