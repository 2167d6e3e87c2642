//! The report as one HTML page: inline CSS, no scripts, no fonts or images
//! from elsewhere. Charts and the CSV links are relative links to the files
//! beside it, or `data:` URLs when the bundle is written with
//! [`Assets::Embedded`](super::Assets::Embedded) (the caller passes the URL
//! of each file in `urls`). Every piece of text from the report is escaped;
//! table columns get their titles and cells their format from `columns.rs`.
//!
//! The page uses the window's width: tables wrap their titles and words
//! (never a number, a name or a time) so that at 1280 px no table is wider than the
//! page; printed, nothing scrolls, a table row, a chart or a headline
//! figure is never split across pages, and a heading stays with what follows.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::columns::{self, Column};
use super::report::{Report, Section};
use super::table::TableData;

const CSS: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f3f4f6; color: #1f2328;
  font: 16px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { margin: 0 auto; padding: 28px clamp(10px, 2.5vw, 32px) 48px; }
h1 { font-size: 30px; line-height: 1.2; margin: 0 0 6px; }
.meta { color: #57606a; font-size: 14px; margin: 0 0 24px; }
.meta span { white-space: nowrap; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 14px; margin: 0 0 28px; }
.figure { background: #fff; border-radius: 10px; padding: 16px 18px; border-top: 4px solid #0072b2;
  box-shadow: 0 1px 3px rgba(0, 0, 0, .08); }
.figure .label { font-size: 14px; color: #57606a; }
.figure .value { font-size: 30px; font-weight: 700; line-height: 1.2; margin-top: 4px;
  font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.figure .change { font-size: 14px; color: #57606a; margin-top: 6px; }
section.part { background: #fff; border-radius: 10px; padding: 20px clamp(10px, 1.8vw, 24px); margin: 0 0 22px;
  box-shadow: 0 1px 3px rgba(0, 0, 0, .08); }
h2 { font-size: 21px; margin: 0 0 8px; }
p { margin: 0 0 10px; max-width: 110ch; }
figure.chart { margin: 16px 0; }
figure.chart img { display: block; width: 100%; max-width: 1200px; height: auto;
  border: 1px solid #e5e7eb; border-radius: 6px; }
.table { overflow-x: auto; margin: 14px 0 6px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; line-height: 1.35;
  font-variant-numeric: tabular-nums; }
th, td { padding: 5px 7px; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
td { overflow-wrap: break-word; }
th { background: #f6f8fa; font-weight: 600; border-bottom: 2px solid #d0d7de; vertical-align: bottom;
  hyphens: manual; }
th.num, td.num { text-align: right; }
td.num, td.line { white-space: nowrap; overflow-wrap: normal; }
tbody tr:nth-child(even) td { background: #fafbfc; }
.csv { font-size: 13px; color: #57606a; }
a { color: #0969da; }
footer { color: #6e7781; font-size: 13px; text-align: center; margin-top: 32px; }
@media print {
  body { background: #fff; font-size: 11pt; }
  main { padding: 0; }
  .figures { gap: 8px; margin-bottom: 16px; }
  .figure, section.part { box-shadow: none; border-radius: 0; }
  .figure { border: 1px solid #d0d7de; border-top: 3px solid #0072b2; break-inside: avoid; }
  section.part { padding: 0; margin: 0 0 18px; }
  h1, h2 { break-after: avoid; }
  .lead { break-inside: avoid; }
  p { orphans: 2; widows: 2; }
  figure.chart, tr { break-inside: avoid; }
  figure.chart img { max-width: 100%; }
  thead { display: table-header-group; }
  .table { overflow: visible; }
  table { font-size: 9pt; }
  tbody tr:nth-child(even) td { background: none; }
  a { color: inherit; }
}
"#;

/// The page for `report`. `urls` maps a file of the folder (`team-spend.png`,
/// `spend.csv`) to the URL the page uses for it instead of its relative name;
/// `footer` is the page's last line.
pub(super) fn render(report: &Report, urls: &HashMap<String, String>, footer: &str) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let title = escape(&report.title);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<meta name=\"generator\" content=\"apron\">\n");
    let _ = writeln!(out, "<title>{title}</title>");
    let _ = writeln!(out, "<style>{CSS}</style>\n</head>\n<body>\n<main>");

    let _ = writeln!(out, "<header>\n<h1>{title}</h1>");
    let mut meta =
        vec![format!("Period: {}", escape(&report.period)), format!("Data: {}", escape(&report.data))];
    if !report.config.is_empty() {
        meta.push(format!("Config: {}", escape(&report.config)));
    }
    if !report.currency.is_empty() {
        meta.push(format!("Amounts in {}", escape(&report.currency)));
    }
    let meta: Vec<String> = meta.into_iter().map(|m| format!("<span>{m}</span>")).collect();
    let _ = writeln!(out, "<p class=\"meta\">{}</p>\n</header>", meta.join(" · "));

    if !report.headline.is_empty() {
        out.push_str("<section class=\"figures\" aria-label=\"Headline figures\">\n");
        for figure in &report.headline {
            let _ = write!(
                out,
                "<div class=\"figure\"><div class=\"label\">{}</div><div class=\"value\">{}</div>",
                escape(&figure.label),
                escape(&figure.value)
            );
            if let Some(change) = &figure.change {
                let _ = write!(out, "<div class=\"change\">{}</div>", escape(change));
            }
            out.push_str("</div>\n");
        }
        out.push_str("</section>\n");
    }

    let mut ids: HashMap<String, usize> = HashMap::new();
    let page = Page { currency: &report.currency, urls };
    for section in &report.sections {
        page.push_section(&mut out, section, &mut ids);
    }
    let _ = writeln!(out, "<footer>{}</footer>", escape(footer));
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

/// What every section of one page shares.
struct Page<'a> {
    currency: &'a str,
    urls: &'a HashMap<String, String>,
}

impl Page<'_> {
    /// The escaped URL of the folder's file `name`.
    fn url(&self, name: &str) -> String {
        escape(self.urls.get(name).map_or(name, String::as_str))
    }

    fn push_section(&self, out: &mut String, section: &Section, ids: &mut HashMap<String, usize>) {
        let id = unique_id(&section.heading, ids);
        // The heading, its text and its chart are one block a printed page
        // does not split; a long table after them may break between rows.
        let _ = writeln!(
            out,
            "<section class=\"part\" id=\"{id}\">\n<div class=\"lead\">\n<h2>{}</h2>",
            escape(&section.heading)
        );
        for paragraph in &section.paragraphs {
            let _ = writeln!(out, "<p>{}</p>", escape(paragraph));
        }
        if let Some(chart) = section.chart {
            let _ = writeln!(
                out,
                "<figure class=\"chart\"><img src=\"{}\" alt=\"{}\"></figure>",
                self.url(&chart.file_name()),
                escape(chart.title())
            );
        }
        out.push_str("</div>\n");
        if let Some(table) = &section.table {
            self.push_table(out, table);
        }
        out.push_str("</section>\n");
    }

    fn push_table(&self, out: &mut String, table: &TableData) {
        let columns: Vec<&Column> = table
            .columns
            .iter()
            .map(|name| columns::column(name).expect("write_bundle checks that every column has a title"))
            .collect();
        let class = |c: &Column| match (c.kind.is_numeric(), c.kind.keeps_one_line()) {
            (true, _) => " class=\"num\"",
            (false, true) => " class=\"line\"",
            (false, false) => "",
        };
        out.push_str("<div class=\"table\"><table>\n<thead><tr>");
        for c in &columns {
            let th_class = if c.kind.is_numeric() { " class=\"num\"" } else { "" };
            let _ = write!(out, "<th scope=\"col\"{th_class}>{}</th>", escape(&c.title(self.currency)));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (r, row) in table.shown_rows().iter().enumerate() {
            out.push_str("<tr>");
            for (i, (c, cell)) in columns.iter().zip(row).enumerate() {
                let shown = c.show(cell, table.number(r, i), self.currency);
                let _ = write!(out, "<td{}>{}</td>", class(c), escape(&shown));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table></div>\n");
        let name = table.file_name();
        let link =
            format!("<a href=\"{}\" download=\"{}\">{}</a>", self.url(&name), escape(&name), escape(&name));
        let shown = table.shown_rows().len();
        if shown < table.row_count() {
            let _ = writeln!(
                out,
                "<p class=\"csv\">The first {shown} of {} rows; all of them as CSV: {link}</p>",
                table.row_count()
            );
        } else {
            let _ = writeln!(out, "<p class=\"csv\">This table as CSV: {link}</p>");
        }
    }
}

/// An HTML id from `heading` ("Spend by team" → "spend-by-team"), made
/// unique with a counter.
fn unique_id(heading: &str, ids: &mut HashMap<String, usize>) -> String {
    let mut slug = String::new();
    for c in heading.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "section".to_owned() } else { slug.to_owned() };
    let seen = ids.entry(slug.clone()).or_insert(0);
    *seen += 1;
    if *seen == 1 { slug } else { format!("{slug}-{seen}") }
}

/// `text` safe inside HTML text and double- or single-quoted attributes.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("€1,240 · ok"), "€1,240 · ok");
    }

    #[test]
    fn ids_are_slugs_and_unique() {
        let mut ids = HashMap::new();
        assert_eq!(unique_id("Spend by team", &mut ids), "spend-by-team");
        assert_eq!(unique_id("Spend by team!", &mut ids), "spend-by-team-2");
        assert_eq!(unique_id("???", &mut ids), "section");
    }
}
