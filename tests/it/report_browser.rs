//! End to end: the monthly report as people read it, in a real browser.
//!
//! `apron demo` (two simulated days of October 2026: the widest tables a
//! report has, spend with its budget columns and zombies with GPU UUIDs)
//! writes the report twice, with and without `--self-contained`, and:
//!
//! - every column of every table has a title (its unit in it) that the page
//!   and `summary.md` show, while the CSV headers keep the column names;
//! - headless Chromium at 1280 px loads every chart (complete, 1600 px wide
//!   as drawn) and nothing is wider than the page: no table scrolls or
//!   hides a column;
//! - the self-contained `index.html`, copied alone into an empty folder,
//!   still shows every chart and links nothing outside itself;
//! - printed to PDF it is a PDF with pages whose text holds every section
//!   title, the fleet cost and every table's first row whole, and no word
//!   lies outside the page.

use std::path::{Path, PathBuf};
use std::process::Command;

use apron_tests::browser::{measure, pdf_text, print_to_pdf};
use apron_tests::checks::Checks;
use apron_tests::{bin, files_under, stdout_of};
use serde_json::Value;

/// The page width the report must fit, in CSS pixels.
const WIDTH: u32 = 1280;

/// Charts a report shows, each drawn 1600 px wide.
const CHARTS: usize = 6;
const CHART_WIDTH: u64 = 1600;

/// What the probe script measures in the page: the page's width and
/// scrolling width, each image, each table's right edge and whether its
/// scrolling box hides part of it.
const PROBE: &str = "{
  page: document.documentElement.clientWidth,
  scroll: document.documentElement.scrollWidth,
  images: [...document.images].map(i => ({
    complete: i.complete, width: i.naturalWidth, embedded: i.getAttribute('src').startsWith('data:image/png;base64,')
  })),
  tables: [...document.querySelectorAll('table')].map(t => ({
    right: t.getBoundingClientRect().right,
    hidden: t.parentElement.scrollWidth - t.parentElement.clientWidth
  })),
  wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5).map(e => e.tagName + '.' + e.className)
}";

/// `apron demo --out DIR` with `extra` flags; returns its stdout.
fn demo(out_dir: &Path, extra: &[&str]) -> String {
    stdout_of(
        Command::new(bin("apron"))
            .args(["demo", "--month", "2026-10", "--days", "2", "--out"])
            .arg(out_dir)
            .args(extra)
            .current_dir(out_dir.parent().expect("a parent folder"))
            .env_remove("APRON_DATA"),
    )
}

/// `text` with the page's escapes undone.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The text of every `<tag …>…</tag>` in `html`, in order, unescaped.
fn elements(html: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        rest = &rest[at + open.len()..];
        // `<th` is not `<thead`.
        if !rest.starts_with(['>', ' ']) {
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let Some(end) = rest.find(&close) else { break };
        out.push(unescape(&rest[gt + 1..end]));
        rest = &rest[end..];
    }
    out
}

/// The cells of each table's first body row that stay on one line
/// (numbers, names, times: class `num` or `line`) and are not empty.
fn first_rows(html: &str) -> Vec<Vec<String>> {
    html.split("<tbody>\n")
        .skip(1)
        .map(|body| {
            let row = &body[..body.find("</tr>").unwrap_or(0)];
            row.split("<td")
                .skip(1)
                .filter(|cell| cell.starts_with(" class=\"num\">") || cell.starts_with(" class=\"line\">"))
                .map(|cell| {
                    unescape(&cell[cell.find('>').map_or(0, |i| i + 1)..cell.find("</td>").unwrap_or(0)])
                })
                .filter(|cell| !cell.is_empty())
                .collect()
        })
        .collect()
}

/// The column names of a CSV file's header (report column names hold no
/// commas or quotes).
fn csv_header(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read a CSV");
    text.lines().next().unwrap_or_default().split(',').map(str::to_owned).collect()
}

/// The page at `WIDTH`: every image loaded, nothing wider than the page.
fn check_layout(c: &mut Checks, what: &str, page: &Path, embedded: bool) {
    let m = measure(page, WIDTH, PROBE);
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let width = num(&m["page"]);
    c.check(width > 1200.0 && width <= f64::from(WIDTH), || format!("{what}: the page is {width} px wide"));
    c.check(num(&m["scroll"]) <= width, || format!("{what}: the page scrolls sideways to {}", m["scroll"]));
    let images = m["images"].as_array().cloned().unwrap_or_default();
    c.eq(&format!("{what}: images"), images.len(), CHARTS);
    for (i, image) in images.iter().enumerate() {
        c.check(image["complete"] == true && image["width"].as_u64() == Some(CHART_WIDTH), || {
            format!("{what}: image {i} is broken: {image}")
        });
        c.check(image["embedded"] == embedded, || {
            format!("{what}: image {i} embedded should be {embedded}: {image}")
        });
    }
    let tables = m["tables"].as_array().cloned().unwrap_or_default();
    c.check(tables.len() >= 8, || format!("{what}: {} tables, want every report table", tables.len()));
    for (i, table) in tables.iter().enumerate() {
        c.check(num(&table["right"]) <= width && num(&table["hidden"]) <= 0.0, || {
            format!("{what}: table {i} is wider than the {width} px page: {table}")
        });
    }
    c.check(m["wide"].as_array().is_some_and(Vec::is_empty), || {
        format!("{what}: elements wider than the page: {}", m["wide"])
    });
}

/// The page printed to PDF: pages, the section titles, the fleet cost and
/// each table's first row readable, no word outside the page.
fn check_pdf(c: &mut Checks, what: &str, page: &Path, fleet_cost: &str) {
    let html = std::fs::read_to_string(page).expect("read the page");
    let pdf = page.with_file_name("report.pdf");
    let bytes = print_to_pdf(page, &pdf);
    c.check(bytes.starts_with(b"%PDF-"), || {
        format!("{what}: not a PDF: {:?}", &bytes[..bytes.len().min(16)])
    });

    let text = pdf_text(&pdf, &[]);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for title in elements(&html, "h2") {
        c.check(words.contains(&title), || format!("{what}: the PDF's text lacks the section {title:?}"));
    }
    c.check(words.contains(fleet_cost), || {
        format!("{what}: the PDF's text lacks the fleet cost {fleet_cost}")
    });

    // Each table's first row whole, on one line: a table cut at the
    // page's edge loses its last columns.
    let layout = pdf_text(&pdf, &["-layout"]);
    for (i, row) in first_rows(&html).iter().enumerate() {
        let whole = layout.lines().any(|line| {
            let mut at = 0;
            row.iter().all(|cell| match line[at..].find(cell.as_str()) {
                Some(found) => {
                    at += found + cell.len();
                    true
                }
                None => false,
            })
        });
        c.check(whole, || format!("{what}: table {i}'s first row is not whole in the PDF: {row:?}"));
    }

    let bbox = pdf_text(&pdf, &["-bbox"]);
    let attr = |tag: &str, name: &str| -> Option<f64> {
        let key = format!("{name}=\"");
        let at = tag.find(&key)? + key.len();
        tag[at..].split('"').next()?.parse().ok()
    };
    let mut pages = 0;
    for page in bbox.split("<page ").skip(1) {
        pages += 1;
        let page_width = attr(page, "width").unwrap_or(0.0);
        for word in page.split("<word ").skip(1) {
            let (x0, x1) = (attr(word, "xMin").unwrap_or(-1.0), attr(word, "xMax").unwrap_or(f64::MAX));
            c.check(x0 >= 0.0 && x1 <= page_width, || {
                format!(
                    "{what}: page {pages}: a word outside the {page_width} pt page: {}",
                    &word[..word.len().min(120)]
                )
            });
        }
    }
    c.check(pages >= 2, || format!("{what}: the PDF has {pages} pages"));
}

#[test]
fn the_report_reads_well_in_a_browser_mailed_alone_and_printed() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let (linked, embedded) = (tmp.path().join("linked"), tmp.path().join("embedded"));
    let stdout = demo(&linked, &[]);
    demo(&embedded, &["--self-contained"]);
    let fleet_cost = stdout
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("fleet cost"))
        .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_owned())
        .unwrap_or_else(|| panic!("no fleet cost in the demo's headline:\n{stdout}"));
    assert!(fleet_cost.starts_with('$') && fleet_cost.contains('.'), "{fleet_cost}");
    let mut c = Checks::default();

    // Every column of every table: a title in the page and the summary,
    // its name in the CSV.
    let html = std::fs::read_to_string(linked.join("index.html")).expect("read the page");
    let summary = std::fs::read_to_string(linked.join("summary.md")).expect("read summary.md");
    let headers = elements(&html, "th");
    let csvs: Vec<PathBuf> =
        files_under(&linked).into_iter().filter(|p| p.extension().is_some_and(|e| e == "csv")).collect();
    c.check(csvs.len() >= 8, || format!("{} CSV files, want every report table: {csvs:?}", csvs.len()));
    for csv in &csvs {
        for name in csv_header(csv) {
            let snake = !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            c.check(snake, || format!("{}: the CSV column {name:?} is not a snake_case name", csv.display()));
            let Some(column) = apron_reports::column(&name) else {
                c.fail(format!("{}: column {name:?} has no title in apron_reports::COLUMNS", csv.display()));
                continue;
            };
            let title = column.title("USD");
            c.check(headers.contains(&title), || format!("the page has no column titled {title:?} ({name})"));
            c.check(summary.contains(&format!("| {title} |")), || {
                format!("summary.md has no column {title:?}")
            });
        }
    }
    for th in &headers {
        c.check(!th.contains('_'), || format!("a raw column name on the page: {th:?}"));
    }
    c.check(!summary.contains("\\."), || "summary.md escapes a '.' (a number reads 9276\\.35)".to_owned());

    // In the browser, linked and, copied alone, self-contained.
    check_layout(&mut c, "linked", &linked.join("index.html"), false);
    let alone = tmp.path().join("alone");
    std::fs::create_dir(&alone).expect("create a folder");
    std::fs::copy(embedded.join("index.html"), alone.join("index.html")).expect("copy the page");
    check_layout(&mut c, "self-contained", &alone.join("index.html"), true);
    let page = std::fs::read_to_string(alone.join("index.html")).expect("read the page");
    for attr in ["src=\"", "href=\""] {
        for (at, _) in page.match_indices(attr) {
            let target = &page[at + attr.len()..];
            c.check(target.starts_with("data:") || target.starts_with('#'), || {
                format!("the self-contained page links a file: {}", &target[..target.len().min(40)])
            });
        }
    }

    // Printed.
    check_pdf(&mut c, "linked, printed", &linked.join("index.html"), &fleet_cost);
    check_pdf(&mut c, "self-contained, printed", &alone.join("index.html"), &fleet_cost);
    c.finish();
}
