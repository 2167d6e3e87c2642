//! The report as Markdown (`summary.md`): the same content as the page,
//! for a wiki, a chat message or a terminal. Tables become pipe tables,
//! charts image links to the PNGs beside it; report text is escaped so it
//! reads literally.

use std::fmt::Write as _;

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
        push_section(&mut out, section);
    }
    out
}

fn push_section(out: &mut String, section: &Section) {
    let _ = writeln!(out, "## {}\n", inline(&section.heading));
    for paragraph in &section.paragraphs {
        let _ = writeln!(out, "{}\n", block(paragraph));
    }
    if let Some(chart) = section.chart {
        let _ = writeln!(out, "![{}]({})\n", inline(chart.title()), chart.file_name());
    }
    if let Some(table) = &section.table {
        push_table(out, table);
    }
}

fn push_table(out: &mut String, table: &TableData) {
    let row =
        |cells: &mut dyn Iterator<Item = String>| format!("| {} |", cells.collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "{}", row(&mut table.columns.iter().map(|c| inline(c))));
    let rule =
        (0..table.columns.len()).map(|col| if table.is_numeric(col) { "---:" } else { "---" }.to_owned());
    let _ = writeln!(out, "{}", row(&mut rule.into_iter()));
    for cells in table.shown_rows() {
        let _ = writeln!(out, "{}", row(&mut cells.iter().map(|c| inline(c))));
    }
    let shown = table.shown_rows().len();
    if shown < table.rows.len() {
        let _ = writeln!(
            out,
            "\nThe first {shown} of {} rows; all of them as CSV: [{name}]({name})\n",
            table.rows.len(),
            name = table.file_name()
        );
    } else {
        let _ = writeln!(out, "\nThis table as CSV: [{name}]({name})\n", name = table.file_name());
    }
}

/// Characters Markdown may read as markup anywhere in a line (`|` only
/// in tables, but escaping it elsewhere is harmless).
fn is_special(c: char) -> bool {
    matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~')
}

/// `text` on one line with markup characters escaped.
fn inline(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    escape_line(&one_line)
}

/// A paragraph: line breaks kept, blank lines dropped (they would split
/// it), each line escaped.
fn block(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(escape_line).collect::<Vec<_>>().join("\n")
}

fn escape_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    // A line that starts like a heading, a list item or a heading
    // underline would become one.
    let mut chars = line.chars();
    let first = chars.next();
    let second = chars.next();
    let block_marker = match first {
        Some('#') => true,
        Some(c @ ('-' | '+' | '=')) => second.is_none_or(char::is_whitespace) || line.chars().all(|x| x == c),
        _ => false,
    };
    if block_marker {
        out.push('\\');
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    for (i, c) in line.chars().enumerate() {
        if is_special(c) || (digits > 0 && i == digits && matches!(c, '.' | ')')) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(inline("a_b *c* [d](e) <f> | g"), r"a\_b \*c\* \[d\](e) \<f\> \| g");
        assert_eq!(inline("1. not a list"), r"1\. not a list");
        assert_eq!(inline("- not a bullet"), r"\- not a bullet");
        assert_eq!(inline("-$5.00"), "-$5.00");
        assert_eq!(inline("---"), r"\---");
        assert_eq!(inline("Wow! node #3"), "Wow! node #3");
        assert_eq!(inline("two\nlines"), "two lines");
        assert_eq!(block("one\n\n# two"), "one\n\\# two");
    }
}
