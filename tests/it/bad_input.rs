//! End to end: user mistakes on the cost reports' command lines end with
//! exit code 2, one `error:` line on stderr that says what is wrong, and
//! nothing on stdout: no panic, no backtrace. A config that prices a model
//! the data does not hold is a warning, not an error.
//!
//! Runs on the hand-built fleet of `apron_tests::scenario` (Monday
//! 2026-11-02 10:00–10:10 UTC).

use std::process::Output;

use apron_tests::scenario::{FROM_TO, Fixture};

/// The text of `out`'s stderr.
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `out` is a refused command line or bad input: exit code 2, nothing on
/// stdout, exactly one line on stderr, starting `error:`, with no panic or
/// backtrace, and containing each of `mentions`.
fn assert_one_error(args: &[&str], out: &Output, mentions: &[&str]) {
    let text = stderr(out);
    let what = format!("apron {}", args.join(" "));
    assert_eq!(out.status.code(), Some(2), "{what}: exit code; stderr: {text}");
    assert!(out.stdout.is_empty(), "{what}: stdout: {}", String::from_utf8_lossy(&out.stdout));
    for bad in ["panicked", "backtrace", "RUST_BACKTRACE", "stack"] {
        assert!(!text.contains(bad), "{what}: stderr mentions {bad:?}: {text}");
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line on stderr, got {lines:?}");
    assert!(lines[0].starts_with("error: "), "{what}: {text}");
    for m in mentions {
        assert!(lines[0].contains(m), "{what}: the error names {m:?}: {text}");
    }
}

#[test]
fn bad_command_lines_are_one_error_line_and_exit_2() {
    let fx = Fixture::new();
    let cases: [(&[&str], &[&str]); 5] = [
        // clap refuses these; apron folds its message into one line.
        (&["idle-cost", "--by", "nobody"], &["'nobody'", "--by", "team, user, host, gpu"]),
        (&["spend", "--from", "2026-13-01"], &["'2026-13-01'", "--from", "YYYY-MM-DD"]),
        (&["spend", "--month", "2026-1"], &["'2026-1'", "--month", "YYYY-MM"]),
        (
            &["spend", "--month", "2026-11", "--from", "2026-11-02"],
            &["--month", "--from", "cannot be used with"],
        ),
        // apron refuses this one itself.
        (
            &["spend", "--from", "2026-11-05", "--to", "2026-11-02"],
            &["--from 2026-11-05 00:00", "--to 2026-11-02 00:00"],
        ),
    ];
    for (args, mentions) in cases {
        for format in ["table", "json"] {
            let mut all = vec!["--format", format];
            all.extend_from_slice(args);
            assert_one_error(&all, &fx.apron(&all), mentions);
        }
    }
}

#[test]
fn a_period_without_data_names_the_period_and_what_the_data_covers() {
    let fx = Fixture::new();
    for report in [&["spend"][..], &["idle-cost", "--by", "user"], &["windows"], &["zombies"], &["reclaim"]] {
        let mut args = report.to_vec();
        args.extend_from_slice(&["--month", "2025-01"]);
        let out = fx.apron(&args);
        assert_one_error(
            &args,
            &out,
            &[
                "2025-01-01 00:00 – 2025-02-01 00:00 UTC",
                &fx.data.display().to_string(),
                "the data covers 2026-11-02 10:00",
            ],
        );
    }
}

#[test]
fn a_config_pricing_a_model_the_data_lacks_is_a_warning() {
    let fx = Fixture::new();
    // "Test X" instead of "Test A": nothing matches it, so every GPU is
    // priced by "*" (0.001 per second): 28 recorded minutes × (60 × 0.001 +
    // 0.0013 energy) = 1.7164 → $1.72.
    let text =
        std::fs::read_to_string(&fx.config).expect("read the config").replace("\"Test A\"", "\"Test X\"");
    let config = fx.dir.path().join("typo.toml");
    std::fs::write(&config, text).expect("write the config");
    let mut args = vec!["--format", "json", "spend"];
    args.extend_from_slice(&FROM_TO);
    let out = fx.apron_with(&config, &args);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "stderr: {text}");
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("\"Test X\"") && warnings[0].contains("typo.toml"), "{text}");
    assert!(!text.contains("error:") && !text.contains("panicked"), "{text}");
    assert!(text.contains("\nCost:     $1.72 for 0.47 GPU-hours"), "{text}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let total: f64 = rows.iter().map(|r| r["cost"].as_f64().expect("cost")).sum();
    assert!((total - 1.72).abs() < 1e-9, "{rows:?}");
}

/// `apron ARGS…` on `fx` fails with one error line naming `file` and
/// saying what is wrong with it (`what`); a report writes nothing.
fn assert_names_the_file(fx: &Fixture, args: &[&str], file: &std::path::Path, what: &str) {
    let out = fx.apron(args);
    assert_one_error(args, &out, &[&file.display().to_string(), what]);
}

#[test]
fn an_empty_or_non_parquet_data_file_is_named_by_every_command() {
    let month = ["--month", "2026-11"];
    for (name, bytes, what) in [
        ("zz-empty.parquet", &b""[..], "the file is empty (0 bytes), not Parquet"),
        ("zz-junk.parquet", &b"not parquet\n"[..], "corrupt or truncated Parquet file"),
    ] {
        for raw_only in [false, true] {
            let fx = Fixture::new();
            if raw_only {
                // The minute tables then come from the raw files.
                fx.remove_rollups();
            }
            let file = fx.data.join("gpu_samples/date=2026-11-02/host=h1").join(name);
            std::fs::write(&file, bytes).expect("write the bad file");
            let report = fx.dir.path().join("report");
            let report = report.to_str().expect("UTF-8 path");
            let mut commands: Vec<Vec<&str>> = vec![
                vec!["sql", "SELECT count(*) FROM gpu_samples"],
                vec!["spend", month[0], month[1]],
                vec!["idle-cost", month[0], month[1]],
                vec!["report", month[0], month[1], "--out", report],
            ];
            if raw_only {
                // The minutes computed from the raw files read it too.
                commands.push(vec!["--format", "csv", "sql", "SELECT count(*) FROM gpu_minutes"]);
            }
            for args in &commands {
                assert_names_the_file(&fx, args, &file, what);
            }
            assert!(!std::path::Path::new(report).exists(), "a failed report wrote {report}");

            // Without the file, the same data answers again.
            std::fs::remove_file(&file).expect("remove the bad file");
            let out = fx.apron(&["--format", "csv", "sql", "SELECT count(*) AS n FROM gpu_samples"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
            assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n168\n");
        }
    }
    // A zero-byte file in the rollups is named too.
    let fx = Fixture::new();
    let file = fx.data.join("gpu_minutes/date=2026-11-02/host=h2/zz.parquet");
    std::fs::write(&file, b"").expect("write the empty file");
    assert_names_the_file(&fx, &["spend", month[0], month[1]], &file, "empty (0 bytes)");
}

/// The scenario's config with its `"*"` entry removed and "Test A" renamed
/// `test_a_as`, written next to the data; returns its path.
fn config_without_star(fx: &Fixture, test_a_as: &str, name: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(&fx.config).expect("read the config");
    let star =
        "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 1\nops_per_gpu_hour = 3.6\n";
    assert!(text.contains(star), "the scenario's config has a \"*\" entry");
    let text = text.replace(star, "").replace("\"Test A\"", &format!("\"{test_a_as}\""));
    let path = fx.dir.path().join(name);
    std::fs::write(&path, text).expect("write the config");
    path
}

/// The `Unpriced:` lines of a header on stderr.
fn unpriced_lines(out: &Output) -> Vec<String> {
    stderr(out).lines().filter(|l| l.starts_with("Unpriced:")).map(str::to_owned).collect()
}

#[test]
fn models_no_gpu_cost_entry_prices_are_named_with_their_gpu_hours() {
    let fx = Fixture::new();
    let mut spend = vec!["--format", "json", "spend"];
    spend.extend_from_slice(&FROM_TO);

    // The scenario's own config prices every model ("*"): nothing to say.
    let out = fx.apron(&spend);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(unpriced_lines(&out).is_empty(), "{}", stderr(&out));

    // Only "Test A" priced: GPU-B ("Test B", 10 recorded minutes) takes the
    // default, 25 000 over 4 years of 365.25 days + 0.20 an hour.
    let config = config_without_star(&fx, "Test A", "only-a.toml");
    let out = fx.apron_with(&config, &spend);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let lines = unpriced_lines(&out);
    assert_eq!(lines.len(), 1, "{}", stderr(&out));
    assert!(
        lines[0].starts_with("Unpriced: 0.17 GPU-hours of Test B (1 GPU) priced at the default"),
        "{lines:?}"
    );
    assert!(lines[0].contains("25,000 USD over 4 years + 0.20 USD/h"), "{lines:?}");
    assert!(lines[0].contains("only-a.toml"), "{lines:?}");
    // And that is the price it got: Test A 18 min × 60 s × 0.002, energy
    // 28 min × 0.0013, Test B 600 s at the default rate.
    let default_rate = 25_000.0 / (4.0 * 365.25 * 86_400.0) + 0.20 / 3_600.0;
    let want: f64 = 1_080.0 * 0.002 + 28.0 * 0.0013 + 600.0 * default_rate;
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let total: f64 = rows.iter().map(|r| r["cost"].as_f64().expect("cost")).sum();
    assert!((total - (want * 100.0).round() / 100.0).abs() < 1e-9, "{total} vs {want}");

    // Neither model priced (a typo): both named, Test A with its 18 minutes
    // on two GPUs, in every report's header.
    let config = config_without_star(&fx, "Test X", "typo.toml");
    for report in [&["spend"][..], &["idle-cost"], &["zombies"], &["reclaim"], &["windows"]] {
        let mut args = vec!["--format", "csv"];
        args.extend_from_slice(report);
        args.extend_from_slice(&FROM_TO);
        let out = fx.apron_with(&config, &args);
        assert_eq!(out.status.code(), Some(0), "{report:?}: {}", stderr(&out));
        let lines = unpriced_lines(&out);
        let named: Vec<(String, f64)> = lines
            .iter()
            .map(|l| {
                let model =
                    l.split(" GPU-hours of ").nth(1).and_then(|r| r.split(" (").next()).expect("a model");
                (model.to_owned(), apron_tests::number_after(l, "Unpriced:").expect("GPU-hours"))
            })
            .collect();
        assert_eq!(
            named,
            [("Test A".to_owned(), 0.30), ("Test B".to_owned(), 0.17)],
            "{report:?}: {lines:?}"
        );
        assert!(lines[0].contains("(2 GPUs)"), "{lines:?}");
    }

    // apron config over the data folder says the same.
    let mut args = vec!["config"];
    args.extend_from_slice(&FROM_TO);
    let out = fx.apron_with(&config, &args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("# Unpriced: 0.30 GPU-hours of Test A (2 GPUs)"), "{text}");
    assert!(text.contains("# Unpriced: 0.17 GPU-hours of Test B (1 GPU)"), "{text}");
    let mut args = vec!["--format", "json", "config"];
    args.extend_from_slice(&FROM_TO);
    let out = fx.apron_with(&config, &args);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let models = json["unpriced"]["models"].as_array().expect("a list of models");
    let got: Vec<(&str, f64)> = models
        .iter()
        .map(|m| (m["gpu_model"].as_str().unwrap_or(""), m["gpu_hours"].as_f64().unwrap_or(f64::NAN)))
        .collect();
    assert_eq!(got.len(), 2, "{json}");
    assert!(got[0].0 == "Test A" && (got[0].1 - 0.3).abs() < 1e-9, "{got:?}");
    assert!(got[1].0 == "Test B" && (got[1].1 - 10.0 / 60.0).abs() < 1e-9, "{got:?}");

    // The monthly report says it on the page and in its headline.
    let dir = fx.dir.path().join("report");
    let out =
        fx.apron_with(&config, &["report", "--month", "2026-11", "--out", dir.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().filter(|l| l.starts_with("Unpriced:")).count(), 2, "{stdout}");
    let html = std::fs::read_to_string(dir.join("index.html")).expect("read the page");
    assert!(html.contains("Unpriced: 0.30 GPU-hours of Test A (2 GPUs)"), "the page names Test A");
}
