//! The report as Markdown (`summary.md`): the same content as the page,
//! for a wiki, a chat message or a terminal. Tables become pipe tables with
//! the page's column titles and cell formats (`columns.rs`), numbers
//! right-aligned; charts image links to the PNGs beside it. Report text is
//! escaped so it reads literally, and only where Markdown would read it as
//! markup: `12.50` and `still_idle` stay as they are, a `|` in a table cell
//! or a line that would start a list does not.

use std::fmt::Write as _;

use super::columns::{self, Column};
use super::report::{Report, Section};
use super::table::TableData;

/// The Markdown for `report`.
pub(super) fn render(report: &Report) -> String {
    let mut out = String::with_capacity(8 * 1024);
    let _ = writeln!(out, "# {}\n", inline(&report.title));
    let mut meta =
        vec![format!("Period: {}", inline(&report.period)), format!("Data: {}", inline(&report.data))];
    if !report.config.is_empty() {
        meta.push(format!("Config: {}", inline(&report.config)));
    }
    if !report.currency.is_empty() {
        meta.push(format!("Amounts in {}", inline(&report.currency)));
    }
    let _ = writeln!(out, "{}\n", meta.join(" · "));

    if !report.headline.is_empty() {
        for figure in &report.headline {
            let _ = write!(out, "- **{}:** {}", inline(&figure.label), inline(&figure.value));
            if let Some(change) = &figure.change {
                let _ = write!(out, " ({})", inline(change));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    for section in &report.sections {
        push_section(&mut out, section, &report.currency);
    }
    out
}

fn push_section(out: &mut String, section: &Section, currency: &str) {
    let _ = writeln!(out, "## {}\n", inline(&section.heading));
    for paragraph in &section.paragraphs {
        let _ = writeln!(out, "{}\n", block(paragraph));
    }
    if let Some(chart) = section.chart {
        let _ = writeln!(out, "![{}]({})\n", inline(chart.title()), chart.file_name());
    }
    if let Some(table) = &section.table {
        push_table(out, table, currency);
    }
}

fn push_table(out: &mut String, table: &TableData, currency: &str) {
    let columns: Vec<&Column> = table
        .columns
        .iter()
        .map(|name| columns::column(name).expect("write_bundle checks that every column has a title"))
        .collect();
    let row =
        |cells: &mut dyn Iterator<Item = String>| format!("| {} |", cells.collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "{}", row(&mut columns.iter().map(|c| cell(&c.title(currency)))));
    let rule = columns.iter().map(|c| if c.kind.is_numeric() { "---:" } else { "---" }.to_owned());
    let _ = writeln!(out, "{}", row(&mut rule.into_iter()));
    for (r, cells) in table.shown_rows().iter().enumerate() {
        let mut shown = columns
            .iter()
            .zip(cells)
            .enumerate()
            .map(|(i, (c, text))| cell(&c.show(text, table.number(r, i), currency)));
        let _ = writeln!(out, "{}", row(&mut shown));
    }
    let shown = table.shown_rows().len();
    if shown < table.row_count() {
        let _ = writeln!(
            out,
            "\nThe first {shown} of {} rows; all of them as CSV: [{name}]({name})\n",
            table.row_count(),
            name = table.file_name()
        );
    } else {
        let _ = writeln!(out, "\nThis table as CSV: [{name}]({name})\n", name = table.file_name());
    }
}

/// `text` as one table cell: on one line, inline markup and `|` escaped.
fn cell(text: &str) -> String {
    inline(text).replace('|', r"\|")
}

/// `text` on one line, inside a line (a heading, a list item, a cell):
/// inline markup escaped.
fn inline(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    escape(&one_line, false)
}

/// A paragraph: line breaks kept, blank lines dropped (they would split
/// it), each line escaped, its start included.
fn block(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| escape(l, true))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` with control characters written as escapes, and what Markdown
/// reads as markup escaped, and only that:
/// backticks, brackets, tildes; `*` and `_` where they could open or close
/// emphasis (not in `still_idle` or `4 * 2`); `<` before what could be a
/// tag; `&` before what could be an entity; `\` before punctuation or at
/// the end. At the start of a line (`line_start`), also what would start a
/// block: a heading (`#`), a quote (`>`), a list item (`- `, `+ `, `1. `,
/// `1) `), a rule or a heading underline (`---`, `===`).
fn escape(line: &str, line_start: bool) -> String {
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::with_capacity(line.len() + 8);
    let word = |i: Option<usize>| i.and_then(|i| chars.get(i)).is_some_and(|c| c.is_alphanumeric());
    let space = |i: Option<usize>| i.and_then(|i| chars.get(i)).is_none_or(|c| c.is_whitespace());
    if line_start && starts_block(&chars) {
        out.push('\\');
    }
    let digits = if line_start { chars.iter().take_while(|c| c.is_ascii_digit()).count() } else { 0 };
    for (i, &c) in chars.iter().enumerate() {
        let (before, after) = (i.checked_sub(1), Some(i + 1));
        let special = match c {
            '`' | '[' | ']' | '~' => true,
            '\\' => chars.get(i + 1).is_none_or(char::is_ascii_punctuation),
            '*' => !(space(before) && space(after)),
            '_' => !(word(before) && word(after)),
            '<' => chars.get(i + 1).is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')),
            '&' => {
                let name =
                    chars[i + 1..].iter().take_while(|n| n.is_ascii_alphanumeric() || **n == '#').count();
                name > 0 && chars.get(i + 1 + name) == Some(&';')
            }
            '.' | ')' => digits > 0 && i == digits && space(after),
            _ => false,
        };
        if special {
            out.push('\\');
        }
        if c.is_control() {
            // A recorded name's escape sequence shows, as on the terminal
            // (`\u{1b}`), instead of acting on a terminal that shows the file.
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether a line starting with `chars` would start a heading, a quote, a
/// bullet, a rule or a heading underline (ordered lists are the digits'
/// case in [`escape`]). A `*` there is escaped anyway.
fn starts_block(chars: &[char]) -> bool {
    match chars.first() {
        Some('#' | '>') => true,
        Some(&c @ ('-' | '+' | '=')) => {
            chars.get(1).is_none_or(|n| n.is_whitespace()) || chars.iter().all(|&x| x == c || x == ' ')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_where_markdown_reads_it() {
        assert_eq!(inline("a _b_ *c* [d](e) <f> | g"), r"a \_b\_ \*c\* \[d\](e) \<f> | g");
        assert_eq!(cell("a | b"), r"a \| b", "a pipe ends a cell");
        assert_eq!(inline("still_idle marks 4 * 2 GPUs"), "still_idle marks 4 * 2 GPUs");
        assert_eq!(
            inline("9276.35 GPU-hours, 1. not a list inside a line"),
            "9276.35 GPU-hours, 1. not a list inside a line"
        );
        assert_eq!(
            inline("Tom & Jerry &amp; `x` ~y~ C:\\data \\*"),
            r"Tom & Jerry \&amp; \`x\` \~y\~ C:\data \\\*"
        );
        assert_eq!(block("1. not a list"), r"1\. not a list");
        assert_eq!(block("1.5 GPUs, 2026-11-02"), "1.5 GPUs, 2026-11-02");
        assert_eq!(block("- not a bullet"), r"\- not a bullet");
        assert_eq!(block("> not a quote"), r"\> not a quote");
        assert_eq!(block("-$5.00"), "-$5.00");
        assert_eq!(block("---"), r"\---");
        assert_eq!(block("Wow! node #3"), "Wow! node #3");
        assert_eq!(inline("two\nlines"), "two lines");
        assert_eq!(block("one\n\n# two"), "one\n\\# two");
        // An escape sequence in a recorded name shows instead of acting.
        assert_eq!(cell("py\u{1b}]0;x\u{7}"), "py\\u{1b}\\]0;x\\u{7}");
    }
}
