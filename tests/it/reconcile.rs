//! End to end: on a simulated month (8 GPUs, October 2026, written by
//! `apron-recorder simulate`), the cost reports reconcile: spend's rows add
//! up to the fleet total in its header to the cent, each row's busy and idle
//! cost to its cost, its hours to its GPU-hours; idle-cost by team, user,
//! host and GPU all add up to spend's idle cost; idle-empty time belongs to
//! "(unallocated)" only; and the month's spend is the sum of its two halves.
//!
//! The config maps the simulated organisation's users, Kubernetes
//! namespaces and Slurm accounts (recorder/src/source/sim/org.rs) to their
//! teams, leaving out "platform", whose processes are then "unassigned".
//!
//! Every mismatch is collected; the test fails once at the end, listing all.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use apron_tests::checks::Checks;
use apron_tests::{bin, number_after};
use serde_json::Value;

const CONFIG: &str = r#"currency = "USD"

[energy]
price_per_kwh = 0.15
pue = 1.4

[[gpu_cost]]
model = "NVIDIA H100 80GB HBM3"
purchase_price = 30000
lifetime_years = 3
ops_per_gpu_hour = 0.25

[[team]]
name = "vision"
users = ["alice", "bob", "carol"]
k8s_namespaces = ["vision-*"]

[[team]]
name = "nlp"
users = ["dmitri", "emma", "farid", "grace"]
k8s_namespaces = ["nlp-serve"]
slurm_accounts = ["nlp"]

[[team]]
name = "speech"
users = ["hana", "ivan"]
k8s_namespaces = ["speech-serve"]
slurm_accounts = ["speech"]

[[team]]
name = "recsys"
users = ["jamal", "kira", "liam"]
k8s_namespaces = ["recsys-*"]

[[team]]
name = "research"
users = ["maya", "nils", "oscar"]
slurm_accounts = ["research"]
"#;

/// Whole cents of a printed amount.
fn cents(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

fn f(row: &Value, key: &str) -> f64 {
    row[key].as_f64().unwrap_or(f64::NAN)
}

fn s<'a>(row: &'a Value, key: &str) -> &'a str {
    row[key].as_str().unwrap_or_default()
}

/// Runs `apron --format json ARGS…` over `data` with `config`; its rows and
/// stderr lines (the header), or `None` (recorded) when it failed.
fn apron(c: &mut Checks, data: &Path, config: &Path, args: &[&str]) -> Option<(Vec<Value>, Vec<String>)> {
    let out: Output = Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .arg("--config")
        .arg(config)
        .args(["--format", "json"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        c.failures.push(format!("apron {}: {}: {}", args.join(" "), out.status, stderr.trim()));
        return None;
    }
    let rows = serde_json::from_slice::<Vec<Value>>(&out.stdout);
    c.check(rows.is_ok(), || format!("apron {}: stdout is not a JSON array", args.join(" ")));
    Some((rows.ok()?, stderr.lines().map(str::to_owned).collect()))
}

/// The fleet total and idle cost of spend's `Cost:` header line.
fn cost_line(header: &[String]) -> Option<(f64, f64)> {
    let line = header.iter().find(|l| l.starts_with("Cost:"))?;
    Some((number_after(line, "Cost:")?, number_after(line, "idle")?))
}

#[test]
fn a_simulated_month_reconciles_to_the_cent() {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, CONFIG).expect("write the config");
    // One sample every 10 s keeps the month small for a debug build; the
    // minute tables are the same shape as at 1 Hz.
    let out = Command::new(bin("apron-recorder"))
        .arg("simulate")
        .arg("--data")
        .arg(&data)
        .args(["--gpus", "8", "--days", "30", "--start", "2026-10-01", "--interval", "10s"])
        .stdin(Stdio::null())
        .output()
        .expect("apron-recorder runs");
    assert!(out.status.success(), "simulate: {}", String::from_utf8_lossy(&out.stderr));
    let mut c = Checks::default();
    let month = ["--month", "2026-10"];

    // --- spend ---------------------------------------------------------
    let Some((spend, header)) = apron(&mut c, &data, &config, &["spend", month[0], month[1]]) else {
        panic!("spend failed: {:?}", c.failures);
    };
    let (total, total_idle) = cost_line(&header).expect("spend prints a Cost: line");
    let teams: Vec<&str> = spend.iter().map(|r| s(r, "team")).collect();
    for team in ["vision", "nlp", "speech", "recsys", "research", "unassigned", "(unallocated)"] {
        c.check(teams.contains(&team), || format!("spend: no row for {team}: {teams:?}"));
    }
    c.check(!teams.contains(&"platform"), || "spend: platform is in no [[team]]".to_owned());
    c.check(spend.iter().any(|r| s(r, "team") == "unassigned" && f(r, "cost") > 0.0), || {
        "spend: platform's processes cost nothing as unassigned".to_owned()
    });
    let sum_cents = |key: &str| spend.iter().map(|r| cents(f(r, key))).sum::<i64>();
    c.check(sum_cents("cost") == cents(total), || {
        format!("spend: rows add up to {} cents, the header's total is {}", sum_cents("cost"), cents(total))
    });
    c.check(sum_cents("idle_cost") == cents(total_idle), || {
        format!(
            "spend: idle costs add up to {} cents, the header says {}",
            sum_cents("idle_cost"),
            cents(total_idle)
        )
    });
    let share: f64 = spend.iter().map(|r| f(r, "share_pct")).sum();
    // Each share is rounded to 0.1: off by at most 0.05 each.
    c.near("spend: Σ share_pct", share, 100.0, 0.05 * spend.len() as f64 + 1e-9);
    for r in &spend {
        let team = s(r, "team");
        c.check(cents(f(r, "busy_cost")) + cents(f(r, "idle_cost")) == cents(f(r, "cost")), || {
            format!("spend {team}: busy {} + idle {} ≠ cost {}", r["busy_cost"], r["idle_cost"], r["cost"])
        });
        let parts = f(r, "busy_gpu_hours") + f(r, "idle_held_gpu_hours") + f(r, "idle_empty_gpu_hours");
        c.near(&format!("spend {team}: busy + idle-held + idle-empty hours"), parts, f(r, "gpu_hours"), 0.02);
        for (key, v) in r.as_object().into_iter().flatten() {
            c.check(v.as_f64().is_none_or(|x| x >= 0.0), || format!("spend {team}: {key} = {v} < 0"));
        }
        if team != "(unallocated)" {
            c.check(f(r, "idle_empty_gpu_hours") == 0.0, || {
                format!("spend {team}: idle-empty hours {} outside (unallocated)", r["idle_empty_gpu_hours"])
            });
        }
    }
    c.check(
        spend.iter().any(|r| s(r, "team") == "(unallocated)" && f(r, "idle_empty_gpu_hours") > 0.0),
        || "spend: a simulated month has idle-empty time".to_owned(),
    );
    // GPU-hours add up to the recorded hours (each row off by ≤ 0.005).
    let recorded = header.iter().find_map(|l| number_after(l, "Recorded:")).unwrap_or(f64::NAN);
    let hours: f64 = spend.iter().map(|r| f(r, "gpu_hours")).sum();
    c.near("spend: Σ gpu_hours = recorded", hours, recorded, 0.005 * spend.len() as f64 + 0.05);
    // 8 GPUs × 30 days recorded, 31 in October: 5 760 and 192 GPU-hours.
    c.near("spend: recorded GPU-hours", recorded, 8.0 * 30.0 * 24.0, 0.05);
    let unrecorded = header.iter().find_map(|l| number_after(l, "unrecorded:")).unwrap_or(f64::NAN);
    c.near("spend: unrecorded GPU-hours", unrecorded, 8.0 * 24.0, 0.05);

    // --- idle-cost by team, user, host and GPU -------------------------
    let by_team: BTreeMap<&str, &Value> = spend.iter().map(|r| (s(r, "team"), r)).collect();
    for (by, key) in [("team", "team"), ("user", "user"), ("host", "host"), ("gpu", "gpu_uuid")] {
        let Some((rows, _)) = apron(&mut c, &data, &config, &["idle-cost", "--by", by, month[0], month[1]])
        else {
            continue;
        };
        let idle: f64 = rows.iter().map(|r| f(r, "idle_cost")).sum();
        // Each row is rounded to the cent on its own: off by ≤ 0.005 each,
        // against a total itself rounded to the cent.
        let tolerance = 0.01 * rows.len().max(spend.len()) as f64 + 1e-9;
        c.near(&format!("idle-cost --by {by}: Σ idle_cost = spend's idle cost"), idle, total_idle, tolerance);
        for r in &rows {
            let k = s(r, key);
            let parts = f(r, "idle_held_gpu_hours") + f(r, "idle_empty_gpu_hours");
            c.near(
                &format!("idle-cost --by {by} {k}: held + empty hours"),
                parts,
                f(r, "idle_gpu_hours"),
                0.02,
            );
            if matches!(by, "team" | "user") && k != "(unallocated)" {
                c.check(f(r, "idle_empty_gpu_hours") == 0.0, || {
                    format!("idle-cost --by {by} {k}: idle-empty hours outside (unallocated)")
                });
            }
        }
        if by == "team" {
            // Team by team, the same idle cost and hours as spend's rows.
            for r in &rows {
                let team = s(r, "team");
                let Some(sp) = by_team.get(team) else {
                    c.failures.push(format!("idle-cost --by team: {team} is not in spend"));
                    continue;
                };
                c.near(
                    &format!("{team}: idle-cost's idle_cost vs spend's"),
                    f(r, "idle_cost"),
                    f(sp, "idle_cost"),
                    0.01 + 1e-9,
                );
                let spend_idle = f(sp, "idle_held_gpu_hours") + f(sp, "idle_empty_gpu_hours");
                c.near(
                    &format!("{team}: idle-cost's idle hours vs spend's"),
                    f(r, "idle_gpu_hours"),
                    spend_idle,
                    0.02,
                );
            }
            for (team, sp) in &by_team {
                c.check(f(sp, "idle_cost") == 0.0 || rows.iter().any(|r| s(r, "team") == *team), || {
                    format!("spend's {team} has idle cost {}, idle-cost has no row", sp["idle_cost"])
                });
            }
        }
    }

    // --- the month is the sum of its halves ------------------------------
    let halves =
        [["--from", "2026-10-01", "--to", "2026-10-16"], ["--from", "2026-10-16", "--to", "2026-11-01"]];
    let mut half_team: BTreeMap<String, f64> = BTreeMap::new();
    let mut half_total = 0.0;
    for half in halves {
        let mut args = vec!["spend"];
        args.extend_from_slice(&half);
        let Some((rows, header)) = apron(&mut c, &data, &config, &args) else { continue };
        half_total += cost_line(&header).map_or(f64::NAN, |(t, _)| t);
        for r in &rows {
            *half_team.entry(s(r, "team").to_owned()).or_default() += f(r, "cost");
        }
    }
    // Three totals each rounded to the cent (±0.005).
    c.near("spend: first half + second half = month", half_total, total, 0.015 + 1e-9);
    for (team, cost) in &half_team {
        // Each of three rows is within a cent of its exact amount.
        let month_cost = by_team.get(team.as_str()).map_or(0.0, |r| f(r, "cost"));
        c.near(&format!("spend {team}: halves = month"), *cost, month_cost, 0.03 + 1e-9);
    }

    assert!(c.failures.is_empty(), "{} check(s) failed:\n- {}", c.failures.len(), c.failures.join("\n- "));
}
