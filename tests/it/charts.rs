//! End to end: `apron chart NAME --out FILE.png` draws every chart of the
//! hand-built fleet (`apron_tests::scenario`) as a PNG of the size asked
//! for with something drawn on it, refuses an unknown chart name or an
//! output folder that does not exist with one error line, and the `apron`
//! binary draws its text without fontconfig or FreeType. What the charts
//! show is checked on their data series, in `tests/it/chart_series.rs`.

use std::path::Path;
use std::process::{Command, Output};

use apron_tests::png::check_chart;
use apron_tests::scenario::{FROM_TO, Fixture};
use apron_tests::{bin, files_under};

/// Every chart name, as `apron chart --help` lists them.
const CHARTS: [&str; 6] = ["fleet-state", "idle-cost", "team-spend", "hour-of-week", "gpu-days", "power"];

/// `apron chart NAME --from … --to … --out OUT EXTRA…` on the scenario.
fn chart(fx: &Fixture, name: &str, out: &Path, extra: &[&str]) -> Output {
    let out = out.to_str().expect("a UTF-8 temporary path");
    let mut args = vec!["chart", name, "--out", out];
    args.extend_from_slice(&FROM_TO);
    args.extend_from_slice(extra);
    fx.apron(&args)
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr).lines().map(str::to_owned).collect()
}

#[test]
fn every_chart_is_a_png_of_the_size_asked_for_with_something_drawn() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut failures = Vec::new();
    for name in CHARTS {
        for (width, height, extra) in
            [(1600, 900, &[][..]), (800, 450, &["--width", "800", "--height", "450"][..])]
        {
            let path = dir.path().join(format!("{name}-{width}x{height}.png"));
            let out = chart(&fx, name, &path, extra);
            if !out.status.success() {
                failures.push(format!(
                    "chart {name} {width}x{height}: {}, stderr: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                continue;
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !stdout.starts_with(&format!("wrote {} (", path.display())) {
                failures.push(format!("chart {name}: stdout does not say where it wrote: {stdout:?}"));
            }
            match check_chart(&path, width, height) {
                Ok(facts) => eprintln!(
                    "{name} {width}x{height}: {} colours, {:.1}% non-white",
                    facts.colours,
                    100.0 * facts.non_white
                ),
                Err(e) => failures.push(format!("chart {name}: {e}")),
            }
        }
    }
    // Only the PNGs asked for: no temporary file left beside them.
    let left: Vec<String> = files_under(dir.path())
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .filter(|n| !n.ends_with(".png") || n.starts_with('.'))
        .collect();
    if !left.is_empty() {
        failures.push(format!("files other than the charts left in the folder: {left:?}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_unknown_chart_is_one_error_line_and_no_file() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("x.png");
    let out = fx.apron(&["chart", "nosuch", "--out", path.to_str().expect("UTF-8 path")]);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stderr_lines(&out),
        ["error: invalid value 'nosuch' for '<NAME>' [possible values: fleet-state, idle-cost, team-spend, \
             hour-of-week, gpu-days, power] (see 'apron chart --help')"]
    );
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(files_under(dir.path()).is_empty(), "files written: {:?}", files_under(dir.path()));
}

#[test]
fn a_chart_into_a_missing_folder_is_one_error_line_naming_the_path() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let missing = dir.path().join("no-such-folder");
    let path = missing.join("power.png");
    let out = chart(&fx, "power", &path, &[]);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "one error line: {lines:?}");
    assert!(lines[0].starts_with("error: "), "{lines:?}");
    assert!(lines[0].contains(&path.display().to_string()), "the line names {}: {lines:?}", path.display());
    assert!(!missing.exists(), "the folder was created");
}

#[test]
fn a_chart_over_an_existing_file_is_refused_without_force() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("a temporary folder");
    // What `apron report` wrote there before: it must survive a chart
    // drawn into the same folder by mistake.
    let path = dir.path().join("idle-cost.png");
    std::fs::write(&path, b"the report's chart\n").expect("write");
    let out = chart(&fx, "idle-cost", &path, &[]);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {}", String::from_utf8_lossy(&out.stderr));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "one error line: {lines:?}");
    assert!(lines[0].starts_with("error: "), "{lines:?}");
    assert!(lines[0].contains(&path.display().to_string()), "the line names {}: {lines:?}", path.display());
    assert!(lines[0].contains("--force"), "the line says how to replace it: {lines:?}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(std::fs::read(&path).expect("read"), b"the report's chart\n", "the file is as it was");

    // With --force it is replaced by the chart.
    let out = chart(&fx, "idle-cost", &path, &["--force"]);
    assert!(out.status.success(), "{}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    check_chart(&path, 1600, 900).expect("the chart replaced the file");
}

#[test]
fn apron_draws_text_without_fontconfig_or_freetype() {
    let apron = bin("apron");
    let out = match Command::new("ldd").arg(&apron).output() {
        Ok(out) => out,
        Err(e) => {
            println!("skipped: ldd cannot run here ({e})");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ldd {}: {}: {text}", apron.display(), out.status);
    let linked: Vec<&str> =
        text.lines().filter(|l| l.contains("fontconfig") || l.contains("freetype")).collect();
    assert!(linked.is_empty(), "{} links {linked:?}", apron.display());
}
