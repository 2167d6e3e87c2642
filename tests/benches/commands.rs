//! Benchmark: how long `apron`'s commands take on a simulated month, run as
//! a user runs them (the binaries of this profile, as processes), and the
//! peak memory of each.
//!
//! `cargo bench -p apron-tests --bench commands` simulates
//! `APRON_BENCH_GPUS` GPUs (default 64) for `APRON_BENCH_DAYS` days
//! (default 30) of October 2026 at one sample every `APRON_BENCH_INTERVAL`
//! (default 1s) with `apron-recorder simulate`, then times `spend`,
//! `idle-cost`, `windows`, `zombies`, `reclaim`, one chart and the monthly
//! `report` over that month, and last a two-day `apron demo`.
//!
//! The end-to-end tests used to print their own wall time (`tests/demo.rs`,
//! `reconcile.rs`, `report.rs`, `reports.rs`, `queries.rs`, `charts.rs`,
//! `chart_series.rs`); they now only check results, and the times are
//! measured here.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Wall time and peak resident memory of one command.
struct Figures {
    seconds: f64,
    peak_rss_mb: f64,
}

/// Runs `cmd` to completion and measures it; panics when it fails. Its
/// errors go to the bench's stderr.
#[expect(clippy::zombie_processes, reason = "the child is reaped by wait4, which also gives its rusage")]
fn measure(what: &str, cmd: &mut Command) -> Figures {
    let child =
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().expect("starts");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    let t0 = Instant::now();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with valid pointers.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = t0.elapsed().as_secs_f64();
    assert_eq!(waited, pid, "wait4");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{what} failed");
    // ru_maxrss is in KiB on Linux.
    Figures { seconds, peak_rss_mb: usage.ru_maxrss as f64 / 1024.0 }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn apron(data: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(apron_tests::bin("apron"));
    cmd.arg("--data").arg(data).args(args).env_remove("APRON_DATA");
    cmd
}

fn main() {
    let gpus = env_or("APRON_BENCH_GPUS", "64");
    let days = env_or("APRON_BENCH_DAYS", "30");
    let interval = env_or("APRON_BENCH_INTERVAL", "1s");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    println!(
        "apron commands on a simulated month: {gpus} GPUs, {days} days from 2026-10-01, a sample every {interval}"
    );

    let mut simulate = Command::new(apron_tests::bin("apron-recorder"));
    simulate.arg("simulate").arg("--data").arg(&data);
    simulate.args(["--gpus", &gpus, "--days", &days, "--start", "2026-10-01", "--interval", &interval]);
    report("apron-recorder simulate", &measure("simulate", &mut simulate));

    let month = ["--month", "2026-10"];
    let out = tmp.path().join("report");
    let chart = tmp.path().join("fleet-state.png");
    let chart = chart.to_str().expect("UTF-8 path");
    let out_str = out.to_str().expect("UTF-8 path");
    let commands: [(&str, Vec<&str>); 7] = [
        ("apron spend", vec!["spend"]),
        ("apron idle-cost", vec!["idle-cost"]),
        ("apron windows", vec!["windows"]),
        ("apron zombies", vec!["zombies"]),
        ("apron reclaim", vec!["reclaim"]),
        ("apron chart fleet-state", vec!["chart", "fleet-state", "--out", chart]),
        ("apron report", vec!["report", "--out", out_str]),
    ];
    for (what, args) in commands {
        let mut args = args;
        args.extend_from_slice(&month);
        report(what, &measure(what, &mut apron(&data, &args)));
    }

    let demo = tmp.path().join("demo");
    let mut cmd = Command::new(apron_tests::bin("apron"));
    cmd.args(["demo", "--month", "2026-10", "--days", "2", "--out"]).arg(&demo).current_dir(tmp.path());
    report("apron demo --days 2", &measure("demo", &mut cmd));
}

fn report(what: &str, f: &Figures) {
    println!("  {what}: {:.2} s wall, peak RSS {:.0} MB", f.seconds, f.peak_rss_mb);
}
