//! End-to-end tests of `apron.toml` through the real `apron` binary:
//! `apron --config FILE config` prints the file's values, a bad file is one
//! line on stderr naming the file, the line and the key (exit code 2), and
//! without a file apron says it runs on the defaults.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

/// Runs `apron ARGS` in the folder `cwd`, with no `$APRON_DATA`.
fn apron(cwd: &Path, args: &[&str]) -> Output {
    Command::new(apron_tests::bin("apron"))
        .args(args)
        .current_dir(cwd)
        .env_remove("APRON_DATA")
        .env_remove("RUST_LOG")
        .output()
        .expect("apron runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("UTF-8 errors")
}

const FILE: &str = r#"currency = "EUR"

[idle]
threshold_pct = 3

[energy]
price_per_kwh = 0.27
pue = 1.25

[[gpu_cost]]
model = "NVIDIA H100 80GB HBM3"
purchase_price = 31000
lifetime_years = 3
ops_per_gpu_hour = 0.25

[[team]]
name = "vision"
users = ["alice", "bob"]
k8s_namespaces = ["vision-*"]
slurm_accounts = ["vision"]

[zombie]
min_mem_mib = 1024
min_idle = "20m"

[reclaim]
for = "90m"
"#;

#[test]
fn config_prints_the_files_values() {
    let dir = TempDir::new().expect("tempdir");
    let path = dir.path().join("fleet.toml");
    std::fs::write(&path, FILE).expect("write the config");
    let path_arg = path.to_str().expect("a UTF-8 temp path");

    let out = apron(dir.path(), &["--config", path_arg, "config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().next(), Some(format!("# apron configuration: {path_arg}").as_str()), "{text}");
    for line in [
        "currency = \"EUR\"",
        "threshold_pct = 3.0",
        "price_per_kwh = 0.27",
        "pue = 1.25",
        "model = \"NVIDIA H100 80GB HBM3\"",
        "purchase_price = 31000.0",
        "name = \"vision\"",
        "k8s_namespaces = [\"vision-*\"]",
        "min_mem_mib = 1024",
        "min_idle = \"20m\"",
        "for = \"1h 30m\"",
        // Left out of the file: the defaults.
        "high_usage_15m = 80.0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    // The file gives a gpu_cost entry, so the default "*" one is not added.
    assert!(!text.contains("model = \"*\""), "{text}");

    // What it prints is itself a valid config with the same values.
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &text).expect("write the printed config");
    let out2 = apron(dir.path(), &["--config", again.to_str().expect("UTF-8"), "config"]);
    assert!(out2.status.success(), "{}", stderr(&out2));
    let text2 = stdout(&out2);
    assert_eq!(text.lines().skip(1).collect::<Vec<_>>(), text2.lines().skip(1).collect::<Vec<_>>());

    let out = apron(dir.path(), &["config", "--config", path_arg, "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(json["source"], path_arg);
    assert_eq!(json["currency"], "EUR");
    assert_eq!(json["energy"]["price_per_kwh"], 0.27);
    assert_eq!(json["team"][0]["users"][1], "bob");
    assert_eq!(json["alerts"]["low_usage_4h"], 10.0);
}

#[test]
fn the_current_folders_apron_toml_is_used_without_config() {
    let dir = TempDir::new().expect("tempdir");
    std::fs::write(dir.path().join("apron.toml"), "currency = \"SEK\"\n").expect("write");
    let out = apron(dir.path(), &["config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().next(), Some("# apron configuration: apron.toml"), "{text}");
    assert!(text.contains("currency = \"SEK\""), "{text}");
}

/// Runs `apron --config FILE config` on `text` and returns the one stderr line.
fn refused(text: &str) -> String {
    let dir = TempDir::new().expect("tempdir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).expect("write the config");
    let out = apron(dir.path(), &["--config", "bad.toml", "config"]);
    assert_eq!(out.status.code(), Some(2), "stdout: {}", stdout(&out));
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "not one line: {err:?}");
    err.trim_end().to_owned()
}

#[test]
fn a_bad_config_is_one_line_with_file_line_and_key() {
    let text = "currency = \"USD\"\n\n[idle]\nthreshold_pct = 5\n\n[energy]\nprise_per_kwh = 0.2\n";
    assert_eq!(
        refused(text),
        "error: bad.toml:7: unknown key `prise_per_kwh` in [energy] (expected `price_per_kwh` or `pue`)"
    );
    let text = "currency = \"USD\"\n[idle]\nthreshold_pct = \"five\"\n";
    assert_eq!(refused(text), "error: bad.toml:3: `threshold_pct`: expected a number, found string \"five\"");
    let text =
        "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = -5\nlifetime_years = 4\nops_per_gpu_hour = 0.2\n";
    assert_eq!(refused(text), "error: bad.toml:3: `purchase_price` must not be negative");
    // Absurd numbers, which would overflow the reports' money, are refused.
    assert_eq!(refused("[energy]\npue = 1e300\n"), "error: bad.toml:2: `pue` must be at most 3");
    let text =
        "[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 1e308\nlifetime_years = 4\nops_per_gpu_hour = 0.2\n";
    assert_eq!(refused(text), "error: bad.toml:3: `purchase_price` must be at most 10,000,000,000");
    let text = "[zombie]\nmin_idle = \"soon\"\n";
    assert!(refused(text).starts_with("error: bad.toml:2: `min_idle`: expected a duration"));
    let text = "[[team]]\nname = \"a\"\n\n[[team]]\nusers = [\"x\"]\n";
    assert_eq!(refused(text), "error: bad.toml:4: team rule without a `name`");
}

#[test]
fn a_missing_config_file_is_named() {
    let dir = TempDir::new().expect("tempdir");
    let out = apron(dir.path(), &["--config", "nope.toml", "config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("error: cannot read config file nope.toml: "), "{err}");
}

#[test]
fn without_a_file_apron_uses_the_defaults_and_says_so() {
    let dir = TempDir::new().expect("tempdir");
    let out = apron(dir.path(), &["config"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let first = text.lines().next().expect("a first line");
    assert!(first.starts_with("# apron configuration: defaults"), "{text}");
    for line in [
        "currency = \"USD\"",
        "threshold_pct = 5.0",
        "price_per_kwh = 0.15",
        "pue = 1.4",
        "model = \"*\"",
        "purchase_price = 25000.0",
        "lifetime_years = 4.0",
        "ops_per_gpu_hour = 0.2",
        "min_mem_mib = 256",
        "min_idle = \"10m\"",
        "for = \"2h\"",
        "low_usage_1h = 10.0",
        "low_usage_4h = 10.0",
        "high_usage_15m = 80.0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
    let out = apron(dir.path(), &["config", "--format", "json"]);
    let json: Value = serde_json::from_str(&stdout(&out)).expect("one JSON object");
    assert_eq!(json["source"], "defaults");
}
