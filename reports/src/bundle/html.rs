//! The report as one self-contained HTML page: inline CSS, no scripts, no
//! fonts or images from elsewhere; charts are relative `<img>` links to
//! the PNGs beside it. Every piece of text from the report is escaped.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::report::{Report, Section};
use super::table::TableData;

const CSS: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f3f4f6; color: #1f2328;
  font: 16px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 32px 24px 48px; }
h1 { font-size: 30px; line-height: 1.2; margin: 0 0 6px; }
.meta { color: #57606a; font-size: 14px; margin: 0 0 28px; }
.meta span { white-space: nowrap; }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(210px, 1fr)); gap: 16px; margin: 0 0 32px; }
.figure { background: #fff; border-radius: 10px; padding: 18px 20px; border-top: 4px solid #0072b2;
  box-shadow: 0 1px 3px rgba(0, 0, 0, .08); }
.figure .label { font-size: 14px; color: #57606a; }
.figure .value { font-size: 34px; font-weight: 700; line-height: 1.2; margin-top: 4px;
  font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.figure .change { font-size: 14px; color: #57606a; margin-top: 6px; }
section.part { background: #fff; border-radius: 10px; padding: 22px 26px; margin: 0 0 24px;
  box-shadow: 0 1px 3px rgba(0, 0, 0, .08); }
h2 { font-size: 21px; margin: 0 0 8px; }
p { margin: 0 0 10px; }
figure.chart { margin: 16px 0; }
figure.chart img { display: block; width: 100%; height: auto; border: 1px solid #e5e7eb; border-radius: 6px; }
.table { overflow-x: auto; margin: 16px 0 6px; }
table { border-collapse: collapse; width: 100%; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 7px 12px; border-bottom: 1px solid #e5e7eb; text-align: left; vertical-align: top; }
td { white-space: nowrap; }
th { background: #f6f8fa; font-weight: 600; border-bottom: 2px solid #d0d7de; }
th.num, td.num { text-align: right; white-space: nowrap; }
tbody tr:nth-child(even) td { background: #fafbfc; }
.csv { font-size: 13px; color: #57606a; }
a { color: #0969da; }
footer { color: #6e7781; font-size: 13px; text-align: center; margin-top: 32px; }
@media print {
  body { background: #fff; }
  main { max-width: none; padding: 0; }
  .figure, section.part { box-shadow: none; border: 1px solid #d0d7de; break-inside: avoid; }
}
"#;

/// The page for `report`.
pub(super) fn render(report: &Report) -> String {
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
    for section in &report.sections {
        push_section(&mut out, section, &mut ids);
    }
    out.push_str(
        "<footer>Made by apron. Charts are PNG files beside this page; tables are also CSV files.</footer>\n",
    );
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

fn push_section(out: &mut String, section: &Section, ids: &mut HashMap<String, usize>) {
    let id = unique_id(&section.heading, ids);
    let _ = writeln!(out, "<section class=\"part\" id=\"{id}\">\n<h2>{}</h2>", escape(&section.heading));
    for paragraph in &section.paragraphs {
        let _ = writeln!(out, "<p>{}</p>", escape(paragraph));
    }
    if let Some(chart) = section.chart {
        let _ = writeln!(
            out,
            "<figure class=\"chart\"><img src=\"{}\" alt=\"{}\"></figure>",
            escape(&chart.file_name()),
            escape(chart.title())
        );
    }
    if let Some(table) = &section.table {
        push_table(out, table);
    }
    out.push_str("</section>\n");
}

fn push_table(out: &mut String, table: &TableData) {
    let class = |col: usize| if table.is_numeric(col) { " class=\"num\"" } else { "" };
    out.push_str("<div class=\"table\"><table>\n<thead><tr>");
    for (col, heading) in table.columns.iter().enumerate() {
        // `idle_held_gpu_hours` reads, and wraps, as "idle held gpu hours".
        let _ = write!(out, "<th scope=\"col\"{}>{}</th>", class(col), escape(&heading.replace('_', " ")));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in table.shown_rows() {
        out.push_str("<tr>");
        for (col, cell) in row.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(col), escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    let file = escape(&table.file_name());
    let shown = table.shown_rows().len();
    if shown < table.rows.len() {
        let _ = writeln!(
            out,
            "<p class=\"csv\">The first {shown} of {} rows; all of them as CSV: <a href=\"{file}\">{file}</a></p>",
            table.rows.len()
        );
    } else {
        let _ = writeln!(out, "<p class=\"csv\">This table as CSV: <a href=\"{file}\">{file}</a></p>");
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
