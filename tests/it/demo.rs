//! End to end: `apron demo`, shortened to two days of October 2026, keeps
//! its simulated data, writes the complete report bundle and its config,
//! and prints a headline whose figures `apron spend` gives again on the
//! kept data with that config.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};

use apron_tests::png::check_chart;
use apron_tests::{bin, files_under, number_after, stdout_of};
use serde_json::Value;

/// The month simulated: fixed, so the test does not depend on today.
const MONTH: &str = "2026-10";

/// The report bundle and the demo's config.
fn bundle_names() -> BTreeSet<String> {
    [
        ".apron-report",
        "index.html",
        "summary.md",
        "apron.toml",
        "fleet-state.png",
        "idle-cost.png",
        "team-spend.png",
        "hour-of-week.png",
        "gpu-days.png",
        "power.png",
        "spend.csv",
        "idle-cost-by-team.csv",
        "idle-cost-by-gpu.csv",
        "zombies.csv",
        "reclaim.csv",
        "savings.csv",
        "budgets.csv",
        "actions.csv",
        "jobs.csv",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

/// The `date=…/host=…` partitions of `table` under `data` that hold at
/// least one Parquet file.
fn partitions(data: &Path, table: &str) -> BTreeSet<(String, String)> {
    let root = data.join(table);
    files_under(&root)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .filter_map(|p| {
            let rel = p.strip_prefix(&root).ok()?;
            let mut parts = rel.iter().map(|s| s.to_string_lossy().into_owned());
            let date = parts.next()?.strip_prefix("date=")?.to_owned();
            let host = parts.next()?.strip_prefix("host=")?.to_owned();
            Some((date, host))
        })
        .collect()
}

/// The amount on the headline line that starts with `label`.
fn headline(stdout: &str, label: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .unwrap_or_else(|| panic!("no {label:?} line in stdout:\n{stdout}"));
    number_after(line, label).unwrap_or_else(|| panic!("no amount in {line:?}"))
}

#[test]
fn a_two_day_demo_writes_the_bundle_and_its_figures_are_spends() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let out_dir = tmp.path().join("demo");
    let data = tmp.path().join("data");
    let stdout = stdout_of(
        Command::new(bin("apron"))
            .args(["demo", "--month", MONTH, "--days", "2", "--out"])
            .arg(&out_dir)
            .arg("--keep-data")
            .arg(&data)
            .current_dir(tmp.path())
            .env_remove("APRON_DATA"),
    );

    // The headline.
    assert!(
        stdout.starts_with("Simulated 32 GPUs on 4 hosts for 2 days of October 2026"),
        "stdout:\n{stdout}"
    );
    let fleet_cost = headline(&stdout, "fleet cost");
    let idle_cost = headline(&stdout, "idle cost");
    assert!(fleet_cost > 0.0 && idle_cost > 0.0 && idle_cost < fleet_cost, "stdout:\n{stdout}");
    let report_line = format!("Report: {}", out_dir.join("index.html").display());
    assert!(stdout.lines().any(|l| l == report_line), "no {report_line:?} in stdout:\n{stdout}");

    // The bundle, complete and nothing else.
    let names: BTreeSet<String> = files_under(&out_dir)
        .iter()
        .map(|p| p.strip_prefix(&out_dir).expect("under out").to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, bundle_names());
    for png in names.iter().filter(|n| n.ends_with(".png")) {
        if let Err(e) = check_chart(&out_dir.join(png), 1600, 900) {
            panic!("{e}");
        }
    }

    // The kept data: 4 hosts × 2 days, raw samples and minute rollups.
    for table in ["gpu_samples", "gpu_minutes"] {
        let parts = partitions(&data, table);
        let days: BTreeSet<&str> = parts.iter().map(|(d, _)| d.as_str()).collect();
        let hosts: BTreeSet<&str> = parts.iter().map(|(_, h)| h.as_str()).collect();
        assert_eq!(days, BTreeSet::from(["2026-10-01", "2026-10-02"]), "{table}'s days");
        assert_eq!(hosts.len(), 4, "{table}'s hosts: {hosts:?}");
        assert_eq!(parts.len(), 8, "{table}: every host on every day: {parts:?}");
    }

    // apron spend on the kept data with the demo's config says the same.
    let config = out_dir.join("apron.toml");
    let spend = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .args(["spend", "--month", MONTH, "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert!(spend.status.success(), "apron spend: {}", String::from_utf8_lossy(&spend.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&spend.stdout).expect("spend prints a JSON array");
    let cents = |key: &str| -> i64 {
        rows.iter().map(|r| (r[key].as_f64().unwrap_or(f64::NAN) * 100.0).round() as i64).sum()
    };
    let cents_of = |x: f64| (x * 100.0).round() as i64;
    assert_eq!(cents("cost"), cents_of(fleet_cost), "Σ spend cost = the headline's fleet cost");
    assert_eq!(cents("idle_cost"), cents_of(idle_cost), "Σ spend idle_cost = the headline's idle cost");
    let header = String::from_utf8_lossy(&spend.stderr);
    let cost_line = header.lines().find(|l| l.starts_with("Cost:")).expect("a Cost: line");
    assert_eq!(number_after(cost_line, "Cost:").map(cents_of), Some(cents_of(fleet_cost)), "{cost_line}");
    let teams: Vec<&str> = rows.iter().filter_map(|r| r["team"].as_str()).collect();
    let named = teams.iter().filter(|t| **t != "(unallocated)").count();
    assert!(named >= 5, "at least 5 teams besides (unallocated): {teams:?}");
    assert!(teams.contains(&"unassigned"), "the unmapped team shows as unassigned: {teams:?}");

    // The report leads with the actions worth most; their figures are the
    // savings' and the windows' computed apart (apron savings, apron windows).
    let page = std::fs::read_to_string(out_dir.join("index.html")).expect("the page");
    let first = page.find("<h2").map(|i| &page[i..]).unwrap_or_default();
    assert!(
        first.contains(">Actions worth most this month</h2>"),
        "the first section: {}",
        &first[..first.len().min(120)]
    );
    let actions = std::fs::read_to_string(out_dir.join("actions.csv")).expect("actions.csv");
    let (together, actions): (Vec<Vec<String>>, Vec<Vec<String>>) =
        actions.lines().skip(1).map(csv_fields).partition(|a| a[0].starts_with("Together"));
    assert!((1..=3).contains(&actions.len()), "{actions:?}");
    let savings = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .args(["savings", "--month", MONTH, "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    let rows: Vec<Value> = serde_json::from_slice(&savings.stdout).expect("savings prints a JSON array");
    let total = rows.iter().find(|r| r["team"] == "(total)").expect("a total row");
    let money = |cell: &str| cell.parse::<f64>().ok();
    let worth = |what: &str| actions.iter().find(|a| a[0].starts_with(what)).and_then(|a| money(&a[1]));
    if let Some(reclaim) = worth("Reclaim GPUs idle") {
        assert_eq!(
            cents_of(reclaim),
            cents_of(total["reclaim_cost"].as_f64().unwrap_or(f64::NAN)),
            "{actions:?}"
        );
    }
    if let Some(zombies) = worth("End zombie processes") {
        assert_eq!(
            cents_of(zombies),
            cents_of(total["zombie_cost"].as_f64().unwrap_or(f64::NAN)),
            "{actions:?}"
        );
    }
    let worths: Vec<f64> = actions.iter().filter_map(|a| money(&a[1])).collect();
    assert_eq!(worths.len(), actions.len(), "every action has its worth: {actions:?}");
    assert!(worths.windows(2).all(|w| w[0] >= w[1]), "most money first: {worths:?}");
    assert!(worth("Reclaim GPUs idle").is_some(), "two idle days leave GPUs to reclaim: {actions:?}");
    // Together, each GPU-minute once: at least what reclaiming and ending
    // zombies free together, at most the idle cost; no action more.
    let together = together.first().and_then(|a| money(&a[1])).expect("a Together row");
    let freed = total["freed_cost"].as_f64().unwrap_or(f64::NAN);
    assert!(cents_of(together) >= cents_of(freed), "together {together} < savings' {freed}");
    assert!(cents_of(together) <= cents_of(idle_cost), "together {together} > idle cost {idle_cost}");
    assert!(worths.iter().all(|w| cents_of(*w) <= cents_of(together)), "{worths:?} vs {together}");
}

/// The fields of one CSV line: commas split them except inside double
/// quotes, where `""` is a quote.
fn csv_fields(line: &str) -> Vec<String> {
    let (mut fields, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    fields.push(field);
    fields
}

#[test]
fn the_demo_refuses_a_folder_that_is_not_a_report_unless_forced() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let out_dir = tmp.path().join("home");
    std::fs::create_dir(&out_dir).expect("create a folder");
    std::fs::write(out_dir.join("notes.txt"), b"mine").expect("write a file of the user's");
    let out = Command::new(bin("apron"))
        .args(["demo", "--month", MONTH, "--days", "1", "--hosts", "1", "--out"])
        .arg(&out_dir)
        .current_dir(tmp.path())
        .env_remove("APRON_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&out_dir.display().to_string()) && stderr.contains("--force"), "{stderr}");
    assert_eq!(files_under(&out_dir), [out_dir.join("notes.txt")], "nothing written");
}
