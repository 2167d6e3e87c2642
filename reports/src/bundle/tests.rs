//! Bundle tests: the files a report folder gets, what they say, escaping,
//! CSV quoting, and re-running into the same folder.

use super::*;

fn report() -> Report {
    Report {
        title: "GPU report <November>".to_owned(),
        period: "2026-11-01 00:00 – 2026-12-01 00:00 UTC".to_owned(),
        data: "/data/apron".to_owned(),
        config: "/etc/apron/apron.toml".to_owned(),
        currency: "USD".to_owned(),
        headline: vec![
            Figure {
                label: "Idle cost".to_owned(),
                value: "$12,400.00".to_owned(),
                change: Some("+12% vs October".to_owned()),
            },
            Figure { label: "Mean utilization".to_owned(), value: "41%".to_owned(), change: None },
        ],
        sections: vec![
            Section {
                heading: "Spend by team".to_owned(),
                paragraphs: vec!["Teams & <script>alert('x')</script> spent \"a lot\".".to_owned()],
                table: Some(TableData {
                    name: "spend".to_owned(),
                    columns: vec!["team".to_owned(), "cost".to_owned(), "share_pct".to_owned()],
                    rows: vec![
                        vec!["vision, \"core\"".to_owned(), "54500".to_owned(), "66.7".to_owned()],
                        vec!["speech".to_owned(), "27200.5".to_owned(), "33.3".to_owned()],
                    ],
                    shown: None,
                    numbers: Vec::new(),
                    rest: Default::default(),
                }),
                chart: Some(ChartName::TeamSpend),
            },
            Section {
                heading: "Idle hosts".to_owned(),
                paragraphs: vec![],
                table: Some(TableData {
                    name: "idle-hosts".to_owned(),
                    columns: vec!["host".to_owned(), "because".to_owned()],
                    rows: vec![vec!["node03".to_owned(), "line one\nline two | 3".to_owned()]],
                    shown: Some(5),
                    numbers: Vec::new(),
                    rest: Default::default(),
                }),
                chart: Some(ChartName::GpuDays),
            },
        ],
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn writes_page_summary_and_one_csv_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("reports").join("2026-11");
    let files = write_bundle(&report(), &out, Assets::Linked).unwrap();
    assert_eq!(files.html, out.join("index.html"));
    assert_eq!(files.markdown, out.join("summary.md"));
    assert_eq!(files.csv, vec![out.join("spend.csv"), out.join("idle-hosts.csv")]);
    assert_eq!(files.paths().count(), 4);
    assert_eq!(file_names(&out), vec![MARKER, "idle-hosts.csv", "index.html", "spend.csv", "summary.md"]);
    assert_eq!(files.missing_charts, vec![ChartName::TeamSpend, ChartName::GpuDays]);
}

#[test]
fn the_page_is_escaped_and_loads_nothing_from_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&report(), dir.path(), Assets::Linked).unwrap();
    let html = read(&dir.path().join("index.html"));
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>GPU report &lt;November&gt;</title>"));
    assert!(
        html.contains("Teams &amp; &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; spent &quot;a lot&quot;.")
    );
    assert!(!html.contains("<script"), "no scripts, and no injected ones");
    assert!(html.contains(r#"<img src="team-spend.png" alt="Spend by team: busy and idle">"#));
    assert!(html.contains(r#"<img src="gpu-days.png""#));
    assert!(html.contains(r#"<div class="value">$12,400.00</div>"#));
    assert!(html.contains(r#"<div class="change">+12% vs October</div>"#));
    assert!(
        html.contains(r#"<td class="num">$54,500.00</td><td class="num">66.7</td>"#),
        "money, fixed decimals"
    );
    assert!(html.contains(r#"<td class="num">$27,200.50</td>"#));
    assert!(html.contains(r#"<td class="line">vision, &quot;core&quot;</td>"#), "a name stays on one line");
    assert!(
        html.contains(r#"<th scope="col">Team</th><th scope="col" class="num">Cost ($)</th><th scope="col" class="num">Share (%)</th>"#),
        "titles with units, numbers right-aligned"
    );
    assert!(html.contains(r#"<th scope="col">Host</th><th scope="col">Because</th>"#));
    assert!(html.contains(r#"<a href="spend.csv" download="spend.csv">spend.csv</a>"#));
    assert!(!html.contains("data:"), "nothing embedded unless asked");
    assert!(html.contains("Charts are PNG files beside this page"));
    assert!(html.contains("Period: 2026-11-01 00:00 – 2026-12-01 00:00 UTC"));
    assert!(html.contains("Config: /etc/apron/apron.toml"));
    for external in ["http://", "https://", "<link", "@import", "url("] {
        assert!(!html.contains(external), "the page loads nothing from elsewhere: {external}");
    }
}

#[test]
fn the_summary_says_the_same_in_markdown() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&report(), dir.path(), Assets::Linked).unwrap();
    let md = read(&dir.path().join("summary.md"));
    assert!(md.starts_with("# GPU report \\<November>\n"));
    assert!(md.contains("- **Idle cost:** $12,400.00 (+12% vs October)\n"));
    assert!(md.contains("- **Mean utilization:** 41%\n"));
    assert!(md.contains("## Spend by team\n"));
    assert!(md.contains("![Spend by team: busy and idle](team-spend.png)"));
    assert!(md.contains(
        "| Team | Cost ($) | Share (%) |\n| --- | ---: | ---: |\n| vision, \"core\" | $54,500.00 | 66.7 |\n| speech | $27,200.50 | 33.3 |\n"
    ));
    assert!(
        md.contains("\n| node03 | line one line two \\| 3 |\n"),
        "a cell stays on one line, its pipe escaped"
    );
    assert!(md.contains("[spend.csv](spend.csv)"));
}

#[test]
fn csv_round_trips_commas_quotes_and_newlines() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&report(), dir.path(), Assets::Linked).unwrap();
    let raw = read(&dir.path().join("spend.csv"));
    assert_eq!(raw, "team,cost,share_pct\r\n\"vision, \"\"core\"\"\",54500,66.7\r\nspeech,27200.5,33.3\r\n");
    for table in report().sections.iter().filter_map(|s| s.table.clone()) {
        let mut reader = csv::Reader::from_path(dir.path().join(table.file_name())).unwrap();
        let headers: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
        assert_eq!(headers, table.columns);
        let rows: Vec<Vec<String>> =
            reader.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect();
        assert_eq!(rows, table.rows);
    }
}

#[test]
fn a_report_folder_is_told_apart_from_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    assert_eq!(out_dir_state(&out).unwrap(), OutDirState::Missing);
    std::fs::create_dir(&out).unwrap();
    assert_eq!(out_dir_state(&out).unwrap(), OutDirState::Empty);
    std::fs::write(out.join("notes.txt"), b"mine").unwrap();
    assert_eq!(out_dir_state(&out).unwrap(), OutDirState::Other);
    write_bundle(&report(), &out, Assets::Linked).unwrap();
    assert_eq!(out_dir_state(&out).unwrap(), OutDirState::Report);
    assert_eq!(out_dir_state(&out.join("notes.txt")).unwrap(), OutDirState::NotAFolder);
    let marked = dir.path().join("marked");
    mark_out_dir(&marked).unwrap();
    assert_eq!(out_dir_state(&marked).unwrap(), OutDirState::Report);
}

#[test]
fn csv_cells_never_become_formulas() {
    let mut r = report();
    r.sections[0].table.as_mut().unwrap().rows = vec![
        vec!["=1+2".to_owned(), "-3.25".to_owned(), "1".to_owned()],
        vec!["@cmd".to_owned(), "-x".to_owned(), "2".to_owned()],
    ];
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    assert_eq!(
        read(&dir.path().join("spend.csv")),
        "team,cost,share_pct\r\n'=1+2,-3.25,1\r\n'@cmd,'-x,2\r\n"
    );
    // The page and the summary show the names as they are.
    assert!(read(&dir.path().join("index.html")).contains(r#"<td class="line">=1+2</td>"#));
}

#[test]
fn running_again_overwrites_and_leaves_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&report(), dir.path(), Assets::Linked).unwrap();
    std::fs::write(dir.path().join("team-spend.png"), b"a chart").unwrap();
    let mut second = report();
    second.headline[0].value = "$99.00".to_owned();
    let files = write_bundle(&second, dir.path(), Assets::Linked).unwrap();
    let html = read(&dir.path().join("index.html"));
    assert!(html.contains("$99.00") && !html.contains("$12,400.00"));
    assert_eq!(files.missing_charts, vec![ChartName::GpuDays]);
    assert_eq!(
        file_names(dir.path()),
        vec![MARKER, "idle-hosts.csv", "index.html", "spend.csv", "summary.md", "team-spend.png"]
    );
}

#[test]
fn bad_tables_are_refused_before_anything_is_written() {
    type Spoil = fn(&mut Report);
    let cases: Vec<(Spoil, &str)> = vec![
        (
            |r| r.sections[0].table.as_mut().unwrap().name = "../spend".to_owned(),
            "table '../spend' in section 'Spend by team'",
        ),
        (|r| r.sections[0].table.as_mut().unwrap().name = ".hidden".to_owned(), "table '.hidden'"),
        (|r| r.sections[1].table.as_mut().unwrap().name = "spend".to_owned(), "two tables are named 'spend'"),
        (
            |r| r.sections[0].table.as_mut().unwrap().rows[1].push("extra".to_owned()),
            "table 'spend': row 2 has 4 cells but the table has 3 columns",
        ),
        (
            |r| r.sections[1].table.as_mut().unwrap().columns[1] = "Note".to_owned(),
            "table 'idle-hosts': column 'Note' has no title",
        ),
    ];
    for (spoil, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut bad = report();
        spoil(&mut bad);
        let err = write_bundle(&bad, dir.path(), Assets::Linked).unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
        assert!(file_names(dir.path()).is_empty(), "nothing written for: {message}");
    }
}

#[test]
fn an_unwritable_folder_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = write_bundle(&report(), &file.join("out"), Assets::Linked).unwrap_err();
    assert!(matches!(err, BundleError::CreateDir { .. }), "{err:?}");
    assert!(err.to_string().contains("a-file"), "{err}");
}

#[test]
fn a_long_table_shows_its_first_rows_and_keeps_all_in_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = report();
    let table = r.sections[0].table.as_mut().unwrap();
    table.rows = (0..30).map(|i| vec![format!("team-{i:02}"), format!("{i}.00"), "1".to_owned()]).collect();
    table.shown = Some(10);
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    assert!(html.contains("team-09") && !html.contains("team-10"), "only the first 10 rows are shown");
    assert!(html.contains("The first 10 of 30 rows"));
    let markdown = std::fs::read_to_string(dir.path().join("summary.md")).unwrap();
    assert!(markdown.contains("team-09") && !markdown.contains("team-10"));
    let csv = std::fs::read_to_string(dir.path().join("spend.csv")).unwrap();
    assert_eq!(csv.lines().count(), 31, "the CSV has the header and every row");
}

#[test]
fn the_summary_escapes_only_what_markdown_reads_as_markup() {
    let mut r = report();
    r.sections[1].paragraphs =
        vec!["9276.35 GPU-hours idle; still_idle marks them.".to_owned(), "1. starts like a list".to_owned()];
    r.sections[1].table.as_mut().unwrap().rows =
        vec![vec!["node_03".to_owned(), "apron reclaim --month 2026-11 | sort".to_owned()]];
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    let md = read(&dir.path().join("summary.md"));
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines.contains(&"9276.35 GPU-hours idle; still_idle marks them."), "{md}");
    assert!(lines.contains(&r"1\. starts like a list"), "{md}");
    assert!(lines.contains(&r"| node_03 | apron reclaim --month 2026-11 \| sort |"), "{md}");
    assert!(lines.contains(&"| vision, \"core\" | $54,500.00 | 66.7 |"), "{md}");
}

/// A stand-in for a chart's PNG: the page embeds the bytes as they are.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nnot really";

#[test]
fn an_embedded_page_holds_its_charts_and_csvs() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("team-spend.png"), PNG).unwrap();
    let files = write_bundle(&report(), dir.path(), Assets::Embedded).unwrap();
    let html = read(&files.html);
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    assert!(html.contains(&format!(
        r#"<img src="data:image/png;base64,{}" alt="Spend by team: busy and idle">"#,
        b64(PNG)
    )));
    let csv = std::fs::read(dir.path().join("spend.csv")).unwrap();
    assert!(html.contains(&format!(
        r#"<a href="data:text/csv;charset=utf-8;base64,{}" download="spend.csv">spend.csv</a>"#,
        b64(&csv)
    )));
    assert!(html.contains("This page holds its charts and its tables&#39; CSV files"));
    // The chart that was not there stays a link, and is reported.
    assert_eq!(files.missing_charts, vec![ChartName::GpuDays]);
    assert!(html.contains(r#"<img src="gpu-days.png""#));
    // The files are written beside the page all the same.
    assert_eq!(
        file_names(dir.path()),
        vec![MARKER, "idle-hosts.csv", "index.html", "spend.csv", "summary.md", "team-spend.png"]
    );
    assert!(read(&files.markdown).contains("![Spend by team: busy and idle](team-spend.png)"));
}

#[test]
fn every_column_title_is_shown_on_the_page_and_in_the_summary() {
    // One table with every column there is, each cell the column's name.
    let mut r = report();
    let names: Vec<String> = COLUMNS.iter().map(|c| c.name.to_owned()).collect();
    r.sections[0].table.as_mut().unwrap().columns = names.clone();
    r.sections[0].table.as_mut().unwrap().rows = vec![names];
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    let (html, md) = (read(&dir.path().join("index.html")), read(&dir.path().join("summary.md")));
    for c in COLUMNS {
        let title = c.title("USD");
        assert!(html.contains(&format!(">{}</th>", html::escape(&title))), "{title}");
        assert!(md.contains(&format!("| {title} |")), "{title}");
    }
}

#[test]
fn the_page_formats_the_numbers_given_and_the_csv_keeps_the_text() {
    let mut r = report();
    let table = r.sections[0].table.as_mut().unwrap();
    // The text and the numbers disagree on purpose: the page shows the
    // numbers, the CSV the text.
    table.numbers = vec![vec![None, Some(1.5), Some(12.25)], vec![None, None, Some(0.0)]];
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    let (html, md) = (read(&dir.path().join("index.html")), read(&dir.path().join("summary.md")));
    assert!(html.contains("$1.50") && !html.contains("$54,500.00"), "{html}");
    assert!(md.contains("$1.50") && md.contains("12.2"), "{md}");
    let csv = read(&dir.path().join("spend.csv"));
    assert!(csv.contains(",54500,66.7\r\n"), "{csv}");
    // A number per cell, or none at all.
    r.sections[0].table.as_mut().unwrap().numbers = vec![vec![None]];
    assert!(write_bundle(&r, dir.path(), Assets::Linked).is_err());

    // Numbers for the shown rows alone: the rows past them are in the CSV,
    // as text, and nowhere else.
    let table = r.sections[0].table.as_mut().unwrap();
    table.shown = Some(1);
    table.numbers = vec![vec![None, Some(1.5), Some(12.25)]];
    let dir = tempfile::tempdir().unwrap();
    write_bundle(&r, dir.path(), Assets::Linked).unwrap();
    let html = read(&dir.path().join("index.html"));
    assert!(html.contains("$1.50"), "{html}");
    let csv = read(&dir.path().join("spend.csv"));
    assert!(csv.contains(",54500,66.7\r\n"), "{csv}");
    // Fewer than the rows shown is an error.
    r.sections[0].table.as_mut().unwrap().shown = Some(2);
    let dir = tempfile::tempdir().unwrap();
    assert!(write_bundle(&r, dir.path(), Assets::Linked).is_err());
}

/// A table whose rows past the shown ones come as CSV lines writes the CSV
/// a table of cells writes, byte for byte (quotes, a formula defused, CRLF),
/// and the page says how many rows there are in all; a line of another
/// width is an error naming its row.
#[test]
fn rows_as_csv_lines_make_the_same_csv_as_rows_of_cells() {
    let cells = [
        ["vision, \"core\"", "54500", "66.7"],
        ["speech", "27200.5", "33.3"],
        ["=cmd|' /C calc'!A0", "-3", "line one\nline two"],
        ["", "", "0"],
    ];
    let whole = |r: &mut Report| {
        let t = r.sections[0].table.as_mut().unwrap();
        t.rows = cells.iter().map(|row| row.iter().map(|c| (*c).to_owned()).collect()).collect();
        t.shown = Some(1);
    };
    let mut a = report();
    whole(&mut a);
    let mut b = report();
    whole(&mut b);
    let t = b.sections[0].table.as_mut().unwrap();
    t.rows.truncate(1);
    for row in &cells[1..] {
        t.rest.push(row.iter().copied());
    }
    assert_eq!(t.row_count(), 4);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_bundle(&a, da.path(), Assets::Linked).unwrap();
    write_bundle(&b, db.path(), Assets::Linked).unwrap();
    for name in ["spend.csv", "index.html", "summary.md"] {
        assert_eq!(read(&da.path().join(name)), read(&db.path().join(name)), "{name}");
    }
    let csv = read(&db.path().join("spend.csv"));
    assert!(csv.contains("\r\n'=cmd|' /C calc'!A0,-3,\"line one\nline two\"\r\n"), "{csv}");
    assert!(read(&db.path().join("index.html")).contains("The first 1 of 4 rows"));

    b.sections[0].table.as_mut().unwrap().rest.push(["one", "two"]);
    let err = write_bundle(&b, tempfile::tempdir().unwrap().path(), Assets::Linked).unwrap_err().to_string();
    assert_eq!(err, "table 'spend': row 5 has 2 cells but the table has 3 columns");
}
