//! End to end: `apron report --month YYYY-MM --out DIR`, the monthly report
//! bundle, on the hand-built fleet of `apron_tests::scenario` (ten minutes
//! on Monday 2026-11-02; `tests/it/reports.rs` works its figures out by hand).
//!
//! - The folder holds the page, the summary, the six charts and the five
//!   tables, and nothing else; its figures are the ones `apron spend` and
//!   `apron idle-cost` print; the page links every file, names no outside
//!   resource, and a second run replaces the files cleanly.
//! - The change against the previous month: the scenario written four
//!   times into October 2026 (Mondays the 5th, 12th, 19th and 26th) costs
//!   4 × 2.7964 = 11.1856, $11.19 to the cent, against November's $2.80:
//!   (2.80 − 11.19) / 11.19 = −74.98%, "-75.0% vs October" (the exact
//!   figures give −75% too). Without October data the page says so.
//! - A month without data is one error line, and no file is written.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;

use apron_tests::png::check_chart;
use apron_tests::scenario::{self, Fixture, ms};
use apron_tests::{files_under, number_after};
use serde_json::Value;

const PNGS: [&str; 6] =
    ["fleet-state.png", "idle-cost.png", "team-spend.png", "hour-of-week.png", "gpu-days.png", "power.png"];

const CSVS: [&str; 7] = [
    "spend.csv",
    "idle-cost-by-team.csv",
    "idle-cost-by-gpu.csv",
    "zombies.csv",
    "reclaim.csv",
    "savings.csv",
    "jobs.csv",
];

/// The names of the files in `dir` (recursively), sorted.
fn names(dir: &Path) -> BTreeSet<String> {
    files_under(dir)
        .iter()
        .map(|p| p.strip_prefix(dir).expect("under dir").to_string_lossy().into_owned())
        .collect()
}

/// The files a report folder holds.
fn bundle_names() -> BTreeSet<String> {
    [".apron-report", "index.html", "summary.md"]
        .into_iter()
        .chain(PNGS)
        .chain(CSVS)
        .map(str::to_owned)
        .collect()
}

/// `apron report --month MONTH --out DIR` on `fx`, which must succeed.
fn report(fx: &Fixture, month: &str, dir: &Path) -> Output {
    let out = fx.apron(&["report", "--month", month, "--out", dir.to_str().expect("UTF-8 path")]);
    assert!(
        out.status.success(),
        "apron report --month {month}: {}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `apron spend --month MONTH --format json` on `fx`: the rows and the
/// header lines.
fn spend(fx: &Fixture, month: &str) -> (Vec<Value>, Vec<String>) {
    let out = fx.apron(&["spend", "--month", month, "--format", "json"]);
    assert!(out.status.success(), "apron spend: {}", String::from_utf8_lossy(&out.stderr));
    let rows = serde_json::from_slice(&out.stdout).expect("spend prints a JSON array");
    (rows, String::from_utf8_lossy(&out.stderr).lines().map(str::to_owned).collect())
}

/// The fleet cost spend's header prints ("Cost:     $2.80 for …"), as
/// printed ("$2.80") and as a number.
fn printed_cost(header: &[String]) -> (String, f64) {
    let line = header.iter().find(|l| l.starts_with("Cost:")).expect("spend prints a Cost: line");
    let text = line.trim_start_matches("Cost:").split_whitespace().next().expect("an amount").to_owned();
    (text, number_after(line, "Cost:").expect("a number after Cost:"))
}

/// The values of `column` in a CSV file with a header line and no quoted
/// commas.
fn csv_column(path: &Path, column: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("read the CSV");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header line").split(',').collect();
    let at = header.iter().position(|h| *h == column).unwrap_or_else(|| panic!("{column} in {header:?}"));
    lines.map(|l| l.split(',').nth(at).expect("a full row").to_owned()).collect()
}

/// Every `src="…"` and `href="…"` target of `html`.
fn links(html: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for attr in ["src=\"", "href=\""] {
        for (i, _) in html.match_indices(attr) {
            let rest = &html[i + attr.len()..];
            out.insert(rest[..rest.find('"').unwrap_or(rest.len())].to_owned());
        }
    }
    out
}

#[test]
fn the_monthly_report_holds_every_file_with_the_figures_of_the_reports() {
    let fx = Fixture::new();
    let dir = fx.dir.path().join("report");
    let out = report(&fx, "2026-11", &dir);

    let stdout = String::from_utf8_lossy(&out.stdout);
    let want_last = format!("Report: {}", dir.join("index.html").display());
    assert_eq!(stdout.lines().last(), Some(want_last.as_str()), "stdout:\n{stdout}");
    assert!(stdout.contains("  fleet cost     $2.80\n"), "headline fleet cost, stdout:\n{stdout}");
    assert!(
        stdout.contains("  idle cost      $1.22 (43.6% of it)\n"),
        "headline idle cost, stdout:\n{stdout}"
    );

    // Exactly the bundle: no temporary file left, nothing missing.
    assert_eq!(names(&dir), bundle_names());
    for png in PNGS {
        if let Err(e) = check_chart(&dir.join(png), 1600, 900) {
            panic!("{e}");
        }
    }

    // The tables are the reports' figures.
    let (rows, header) = spend(&fx, "2026-11");
    let want: Vec<String> =
        rows.iter().map(|r| format!("{:.2}", r["cost"].as_f64().unwrap_or(f64::NAN))).collect();
    assert_eq!(csv_column(&dir.join("spend.csv"), "cost"), want, "spend.csv's cost = apron spend's");
    // By hand (tests/it/reports.rs): nlp, vision, (unallocated), unassigned.
    assert_eq!(csv_column(&dir.join("spend.csv"), "team"), ["nlp", "vision", "(unallocated)", "unassigned"]);
    assert_eq!(want, ["0.97", "0.76", "0.61", "0.46"]);
    let idle = fx.apron(&["idle-cost", "--by", "team", "--month", "2026-11", "--format", "json"]);
    let idle: Vec<Value> = serde_json::from_slice(&idle.stdout).expect("idle-cost prints a JSON array");
    let want: Vec<String> =
        idle.iter().map(|r| format!("{:.2}", r["idle_cost"].as_f64().unwrap_or(f64::NAN))).collect();
    assert_eq!(csv_column(&dir.join("idle-cost-by-team.csv"), "idle_cost"), want);
    // Nothing was idle 10 minutes or 2 hours in a row: header lines only.
    for empty in ["zombies.csv", "reclaim.csv"] {
        let text = std::fs::read_to_string(dir.join(empty)).expect("read");
        assert_eq!(text.lines().count(), 1, "{empty}: {text}");
    }

    // The page: the fleet cost as spend prints it, every file linked and
    // every link a file, nothing from outside.
    let html = std::fs::read_to_string(dir.join("index.html")).expect("read index.html");
    let (cost, value) = printed_cost(&header);
    assert_eq!((cost.as_str(), value), ("$2.80", 2.80));
    assert!(
        html.contains(&format!("<div class=\"label\">Fleet cost</div><div class=\"value\">{cost}</div>")),
        "the page's Fleet cost figure is {cost}"
    );
    let linked = links(&html);
    let on_disk: BTreeSet<String> =
        names(&dir).into_iter().filter(|n| n.ends_with(".png") || n.ends_with(".csv")).collect();
    assert_eq!(linked, on_disk, "the page links exactly the PNGs and CSVs in the folder");
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("http://") && !lower.contains("https://"), "an outside reference in the page");
    assert!(!lower.contains("src=\"//") && !lower.contains("href=\"//"), "a protocol-relative reference");
    let summary = std::fs::read_to_string(dir.join("summary.md")).expect("read summary.md");
    assert!(summary.contains(&cost), "summary.md has the fleet cost {cost}");

    // The tables read as a person reads them: titles with units, money as
    // money, numbers right-aligned; the CSV keeps names and plain numbers
    // (above: spend.csv's cost column is "0.97", …).
    assert!(html.contains(r#"<th scope="col" class="num">Cost ($)</th>"#), "a titled money column");
    assert!(html.contains(r#"<td class="line">nlp</td>"#), "nlp's spend row");
    assert!(summary.contains("\n| Team | GPU-hours | Busy GPU-hours | Idle-held GPU-hours |"), "{summary}");
    // nlp's row (tests/it/reports.rs): $0.97 of the fleet's $2.80 is 34.6%.
    let nlp = summary.lines().find(|l| l.starts_with("| nlp |")).expect("nlp's spend row in summary.md");
    assert_eq!(
        nlp,
        "| nlp | 0.13 | 0.13 | 0.00 | 0.00 | 0.00 | 0.04 | $0.97 | $0.97 | $0.00 | $0.00 | 34.6 |"
    );

    // Again into the same folder: the same files, the same tables.
    let csvs: Vec<String> =
        CSVS.iter().map(|c| std::fs::read_to_string(dir.join(c)).expect("read")).collect();
    report(&fx, "2026-11", &dir);
    assert_eq!(names(&dir), bundle_names(), "a second run leaves the same files");
    for (name, before) in CSVS.iter().zip(&csvs) {
        assert_eq!(&std::fs::read_to_string(dir.join(name)).expect("read"), before, "{name} changed");
    }
}

#[test]
fn unallocated_reads_in_plain_words_where_a_person_reads_it() {
    // The scenario's idle cost (tests/it/reports.rs): vision $0.61 held idle,
    // $0.61 idle with no process on GPU-B ("(unallocated)"), nothing else.
    let fx = Fixture::new();
    let dir = fx.dir.path().join("report");
    let out = report(&fx, "2026-11", &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let top = stdout.lines().find(|l| l.starts_with("  top idle cost")).expect("a top idle cost line");
    println!("{top}");
    // Both, the empty GPU's too though it is no team's, and never the key.
    assert!(top.contains("no one (GPU empty) $0.61"), "{top}");
    assert!(top.contains("vision $0.61"), "{top}");
    assert!(!stdout.contains("(unallocated)"), "the headline names no key:\n{stdout}");

    // The page and the summary: the team cell in words, in every table.
    let html = std::fs::read_to_string(dir.join("index.html")).expect("read index.html");
    let summary = std::fs::read_to_string(dir.join("summary.md")).expect("read summary.md");
    assert!(html.contains(r#"<td class="line">no one (GPU empty)</td>"#), "the team cell in words");
    assert!(!html.contains(r#"<td class="line">(unallocated)</td>"#), "no key in a table cell");
    assert!(summary.lines().any(|l| l.starts_with("| no one (GPU empty) |")), "{summary}");
    assert!(!summary.lines().any(|l| l.starts_with("| (unallocated) |")), "{summary}");
    // The CSV files keep the key, for scripts.
    assert!(csv_column(&dir.join("spend.csv"), "team").contains(&"(unallocated)".to_owned()));
    assert!(csv_column(&dir.join("idle-cost-by-team.csv"), "team").contains(&"(unallocated)".to_owned()));
}

/// The header and rows of a CSV text (quoted fields read as the csv crate
/// reads them).
fn csv_rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
    let header = reader.headers().expect("a header line").iter().map(str::to_owned).collect();
    let rows = reader.records().map(|r| r.expect("a CSV row").iter().map(str::to_owned).collect()).collect();
    (header, rows)
}

#[test]
fn the_report_csv_files_have_the_commands_columns_names_and_units() {
    // Rules short enough for the scenario's ten minutes: alice's 5 idle
    // minutes on GPU-A are a zombie, GPU-A and GPU-B reclaim candidates.
    let fx = Fixture::new();
    let config = std::fs::read_to_string(&fx.config).expect("the config")
        + "\n[zombie]\nmin_idle = \"3m\"\n\n[reclaim]\nfor = \"3m\"\n";
    std::fs::write(&fx.config, config).expect("write the config");
    let dir = fx.dir.path().join("report");
    report(&fx, "2026-11", &dir);
    let mut failures = Vec::new();
    for (file, command) in [
        ("spend.csv", &["spend"][..]),
        ("idle-cost-by-team.csv", &["idle-cost", "--by", "team"][..]),
        ("idle-cost-by-gpu.csv", &["idle-cost", "--by", "gpu"][..]),
        ("zombies.csv", &["zombies"][..]),
        ("reclaim.csv", &["reclaim"][..]),
    ] {
        let mut args = vec!["--format", "csv"];
        args.extend_from_slice(command);
        args.extend_from_slice(&["--month", "2026-11"]);
        let out = fx.apron(&args);
        assert!(out.status.success(), "apron {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        let (names, rows) = csv_rows(&String::from_utf8_lossy(&out.stdout));
        let (file_names, file_rows) = csv_rows(&std::fs::read_to_string(dir.join(file)).expect("read"));
        println!("{file}: {file_names:?}, {} rows; apron {}: {names:?}", file_rows.len(), command.join(" "));
        assert!(!file_rows.is_empty(), "{file} has rows to compare");
        if file_rows.len() != rows.len() {
            failures.push(format!("{file}: {} rows, the command {}", file_rows.len(), rows.len()));
            continue;
        }
        // Each of the file's columns is one of the command's, cell for cell:
        // the same name, unit and precision (times to the second and beyond).
        for (k, name) in file_names.iter().enumerate() {
            let Some(at) = names.iter().position(|n| n == name) else {
                failures.push(format!("{file}: column {name} is not one of the command's {names:?}"));
                continue;
            };
            for (file_row, row) in file_rows.iter().zip(&rows) {
                if file_row[k] != row[at] {
                    failures.push(format!(
                        "{file}: {name}: {:?} in the file, {:?} from the command",
                        file_row[k], row[at]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_page_compares_with_the_month_before() {
    let fx = Fixture::new();
    for day in ["05", "12", "19", "26"] {
        scenario::write_at(&fx.data, ms(&format!("2026-10-{day}T10:00:00Z")));
    }
    let dir = fx.dir.path().join("report");
    report(&fx, "2026-11", &dir);
    let html = std::fs::read_to_string(dir.join("index.html")).expect("read index.html");

    // The change from the figures `apron spend` prints for each month.
    let (_, november) = printed_cost(&spend(&fx, "2026-11").1);
    let (october_text, october) = printed_cost(&spend(&fx, "2026-10").1);
    assert_eq!((november, october_text.as_str()), (2.80, "$11.19"), "4 × 2.7964 = 11.1856");
    let change = format!("{:+.1}% vs October", 100.0 * (november - october) / october);
    assert_eq!(change, "-75.0% vs October");
    let figure = format!(
        "<div class=\"label\">Fleet cost</div><div class=\"value\">$2.80</div><div class=\"change\">{change}</div>"
    );
    assert!(html.contains(&figure), "the page's fleet cost figure has {change:?}");
    assert!(html.contains("Against October: fleet cost $2.80 (was $11.19)"), "the spend section compares");
    assert!(!html.contains("no data for the month before"));

    // Without October's data there is nothing to compare with.
    let fx = Fixture::new();
    let dir = fx.dir.path().join("report");
    report(&fx, "2026-11", &dir);
    let html = std::fs::read_to_string(dir.join("index.html")).expect("read index.html");
    assert!(html.contains("There is no data for the month before November 2026 to compare with."));
    assert!(!html.contains("vs October") && !html.contains("class=\"change\""), "no change is shown");
}

#[test]
fn a_month_without_data_is_one_error_line_and_writes_nothing() {
    let fx = Fixture::new();
    let fresh = fx.dir.path().join("fresh");
    let existing = fx.dir.path().join("existing");
    std::fs::create_dir(&existing).expect("create a folder");
    for dir in [&fresh, &existing] {
        let out = fx.apron(&["report", "--month", "2025-01", "--out", dir.to_str().expect("UTF-8 path")]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one error line: {lines:?}");
        assert!(lines[0].starts_with("error: "), "{lines:?}");
        assert!(lines[0].contains("2025-01-01 00:00 – 2025-02-01 00:00 UTC"), "names the period: {lines:?}");
        assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
        assert!(files_under(dir).is_empty(), "files written into {}: {:?}", dir.display(), files_under(dir));
    }
    assert!(!fresh.exists(), "the report folder was created for nothing");
}

#[test]
fn a_folder_that_is_not_a_report_is_refused_unless_forced() {
    let fx = Fixture::new();
    let home = fx.dir.path().join("home");
    std::fs::create_dir(&home).expect("create a folder");
    std::fs::write(home.join("notes.txt"), b"mine").expect("write a file of the user's");
    let home_arg = home.to_str().expect("UTF-8 path");

    let out = fx.apron(&["report", "--month", "2026-11", "--out", home_arg]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("error: will not write the report into"), "{lines:?}");
    assert!(lines[0].contains(home_arg) && lines[0].contains("--force"), "{lines:?}");
    assert!(out.stdout.is_empty());
    assert_eq!(files_under(&home), [home.join("notes.txt")], "nothing written");

    // Told to, it writes the report beside the user's file and marks the
    // folder, so the next run needs no --force.
    let out = fx.apron(&["report", "--month", "2026-11", "--out", home_arg, "--force"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut want = bundle_names();
    want.insert("notes.txt".to_owned());
    assert_eq!(names(&home), want);
    report(&fx, "2026-11", &home);
    assert_eq!(std::fs::read(home.join("notes.txt")).expect("read"), b"mine", "the user's file is untouched");

    // A file is not a folder, --force or not.
    let file = home.join("notes.txt");
    for force in [&[][..], &["--force"]] {
        let mut args = vec!["report", "--month", "2026-11", "--out", file.to_str().expect("UTF-8")];
        args.extend_from_slice(force);
        let out = fx.apron(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
        assert!(stderr.contains("is not a folder"), "{stderr}");
    }
}

#[test]
fn names_that_look_like_formulas_are_text_in_the_csv_files() {
    use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
    use apron_store::source::Tick;
    use apron_store::writer::RollingWriter;
    use std::process::{Command, Stdio};

    // One idle GPU for 15 minutes, held by a process whose user and name
    // are formulas: a zombie, owned by a team whose name is one too.
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let data = tmp.path().join("data");
    let start = ms("2026-11-02T10:00:00Z");
    let mut w = RollingWriter::new(DataLayout::new(&data), "h1", std::time::Duration::from_secs(3_600))
        .expect("host h1");
    for n in 0..90 {
        let ts = start + n * scenario::STEP_MS;
        let tick = Tick {
            gpus: vec![GpuSample {
                ts,
                gpu_uuid: "GPU-A".into(),
                gpu_model: Some("Test A".into()),
                interval_ms: scenario::STEP_MS as i32,
                gpu_util_pct: Some(0),
                power_mw: Some(100_000),
                ..Default::default()
            }],
            procs: vec![ProcSample {
                ts,
                gpu_uuid: "GPU-A".into(),
                pid: 4242,
                interval_ms: scenario::STEP_MS as i32,
                identity: ProcIdentity {
                    proc_start: Some(start - 60_000),
                    comm: Some("@SUM(1+1)".into()),
                    uid: Some(1001),
                    user: Some("=1+2".into()),
                    ..Default::default()
                },
                used_mem_bytes: Some(scenario::GIB),
                ..Default::default()
            }],
            ..Default::default()
        };
        w.push(ts, &tick).expect("push");
    }
    w.close().expect("close");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, "[[team]]\nname = \"-team\"\nusers = [\"=1+2\"]\n").expect("write the config");
    let dir = tmp.path().join("report");
    let out = Command::new(apron_tests::bin("apron"))
        .arg("--data")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .args(["report", "--month", "2026-11", "--out"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let zombies = std::fs::read_to_string(dir.join("zombies.csv")).expect("read zombies.csv");
    assert_eq!(zombies.lines().count(), 2, "one zombie: {zombies}");
    assert_eq!(csv_column(&dir.join("zombies.csv"), "user"), ["'=1+2"]);
    assert_eq!(csv_column(&dir.join("zombies.csv"), "comm"), ["'@SUM(1+1)"]);
    assert_eq!(csv_column(&dir.join("zombies.csv"), "team"), ["'-team"]);
    assert_eq!(csv_column(&dir.join("zombies.csv"), "pid"), ["4242"], "numbers stay numbers");
    assert_eq!(csv_column(&dir.join("spend.csv"), "team"), ["'-team"]);
    assert_eq!(csv_column(&dir.join("idle-cost-by-team.csv"), "team"), ["'-team"]);
    for file in files_under(&dir).iter().filter(|p| p.extension().is_some_and(|e| e == "csv")) {
        let text = std::fs::read_to_string(file).expect("read a CSV");
        for line in text.lines().skip(1) {
            for cell in line.split(',') {
                let cell = cell.trim_matches('"');
                let looks_like_formula = cell.starts_with(['=', '+', '@'])
                    || (cell.starts_with('-') && cell.parse::<f64>().is_err());
                assert!(!looks_like_formula, "{}: {cell:?} in {line:?}", file.display());
            }
        }
    }
}
