//! End to end: `apron windows --cron 'COMMAND'` on the Parquet files of a
//! simulated fleet (4 hosts, one of them with GPUs in MIG mode, two weeks).
//!
//! - Every line of the crontab is a comment, `CRON_TZ=UTC` (once per host,
//!   before its jobs) or a job whose five time fields parse and lie in
//!   cron's ranges.
//! - The start and stop times of each window's jobs are the windows
//!   `apron windows --show windows` reports with the same flags, read back
//!   from their labels ("Sat 19:00 – Mon 08:00", "Tue, Wed 01:00–08:00"):
//!   a start at each run's first hour, a stop at each run's end, and a
//!   timeout of the run's length.
//! - `CUDA_VISIBLE_DEVICES` lists exactly the GPUs a second path finds: an
//!   SQL query through `apron sql` over `gpu_minute_states` (not the
//!   ledger's `cost_buckets` the command reads): the whole GPUs at least
//!   that idle in every hour of the window; a host without one has no
//!   line.
//! - The lines run, through sh, as cron runs them (`%` handling included):
//!   the command starts with those GPUs in its environment and its `%`,
//!   quotes and backslashes intact; a second start starts nothing; the stop
//!   ends everything the start started, even what ignores TERM; a stale pid
//!   file stops nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use apron_tests::bin;
use apron_tests::checks::Checks;
use serde_json::Value;

/// The simulated period: two whole weeks, Monday to Monday.
const PERIOD: [&str; 4] = ["--from", "2026-11-02", "--to", "2026-11-16"];

/// The window flags, not the defaults: they must apply to `--cron` too.
const FLAGS: [&str; 4] = ["--min-idle-share", "55", "--min-hours", "3"];

/// `--min-idle-share`, as a number.
const MIN_SHARE: f64 = 55.0;

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// The simulated fleet's data folder, written once for this test binary.
fn data() -> &'static Path {
    static DATA: OnceLock<tempfile::TempDir> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        // One sample a minute keeps two weeks of 32 GPUs small for a debug
        // build; the minute tables are the same shape as at 1 Hz.
        let out = Command::new(bin("apron-recorder"))
            .args(["simulate", "--gpus", "32", "--days", "14", "--start", "2026-11-02", "--interval", "60s"])
            .arg("--data")
            .arg(dir.path().join("data"))
            .env_remove("APRON_DATA")
            .stdin(Stdio::null())
            .output()
            .expect("apron-recorder runs");
        assert!(out.status.success(), "simulate: {}", String::from_utf8_lossy(&out.stderr));
        dir
    })
    .path()
}

/// What `apron --data DATA ARGS…` prints on stdout; it must succeed.
fn apron(args: &[&str]) -> String {
    let out = Command::new(bin("apron"))
        .arg("--data")
        .arg(data().join("data"))
        .args(args)
        .env_remove("APRON_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert!(
        out.status.success(),
        "apron {}: {}: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The rows of `apron --format json ARGS…`.
fn json(args: &[&str]) -> Vec<Value> {
    let all = [&["--format", "json"][..], args].concat();
    serde_json::from_str(&apron(&all)).expect("a JSON array")
}

/// A run of hours of the week: (first hour, 0 = Monday 00:00 UTC; hours).
type Run = (usize, usize);

fn day(name: &str) -> usize {
    DAYS.iter().position(|d| *d == name).unwrap_or_else(|| panic!("no day {name:?}"))
}

/// `HH:MM` as an hour, `24:00` included; only whole hours are windows.
fn hour(text: &str) -> usize {
    let (h, m) = text.split_once(':').unwrap_or_else(|| panic!("no time in {text:?}"));
    assert_eq!(m, "00", "windows are whole hours: {text}");
    h.parse().unwrap_or_else(|_| panic!("no hour in {text:?}"))
}

/// The runs a window's label states, as README shows the labels:
/// `Mon–Fri 00:00–06:00`, `Tue, Wed 01:00–08:00`, `Mon–Thu 22:00–06:00
/// (overnight)`, `Sat 19:00 – Mon 08:00`, `every hour of the week`.
fn runs_of(label: &str) -> Vec<Run> {
    if label == "every hour of the week" {
        return vec![(0, 168)];
    }
    if let Some((from, to)) = label.split_once(" – ") {
        // One run over midnight: `Sat 19:00 – Mon 08:00`.
        let at = |s: &str| {
            let (d, t) = s.split_once(' ').unwrap_or_else(|| panic!("no day and time in {s:?}"));
            day(d) * 24 + hour(t)
        };
        let (start, end) = (at(from), at(to));
        return vec![(start, (end + 168 - start) % 168)];
    }
    let label = label.trim_end_matches(" (overnight)");
    let (days, times) = label.rsplit_once(' ').unwrap_or_else(|| panic!("no times in {label:?}"));
    let (from, to) = times.split_once('–').unwrap_or_else(|| panic!("no time range in {label:?}"));
    let (from, to) = (hour(from), hour(to));
    let hours = if to > from { to - from } else { to + 24 - from };
    let days: Vec<usize> = if let Some((a, b)) = days.split_once('–') {
        (day(a)..=day(b)).collect()
    } else {
        days.split(", ").map(day).collect()
    };
    days.into_iter().map(|d| (d * 24 + from, hours)).collect()
}

/// One hour of the week, `(minute, hour, cron day)`, as a crontab names it.
fn cron_time(hour_of_week: usize) -> CronTime {
    let h = hour_of_week % 168;
    (0, (h % 24) as u32, ((h / 24 + 1) % 7) as u32)
}

/// The times a job's five fields stand for, `(minute, hour, cron day)`
/// with Sunday 0, or why they do not parse or lie out of range.
fn fields(five: &[&str]) -> Result<BTreeSet<CronTime>, String> {
    let [minute, hour, dom, month, dow] = five else { return Err(format!("{} fields", five.len())) };
    let number = |s: &str, max: u32| -> Result<u32, String> {
        match s.parse::<u32>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!("{s:?} is not a number from 0 to {max}")),
        }
    };
    let (minute, hour) = (number(minute, 59)?, number(hour, 23)?);
    if *dom != "*" || *month != "*" {
        return Err(format!("day of month {dom:?} and month {month:?}: want * *"));
    }
    let mut days = BTreeSet::new();
    if *dow == "*" {
        days.extend(0..7);
    } else {
        for part in dow.split(',') {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (number(a, 7)?, number(b, 7)?),
                None => (number(part, 7)?, number(part, 7)?),
            };
            if a > b {
                return Err(format!("day range {part:?} runs backwards"));
            }
            days.extend((a..=b).map(|d| d % 7));
        }
    }
    Ok(days.into_iter().map(|d| (minute, hour, d)).collect())
}

/// What cron hands to sh for a job's command (Vixie cron, cronie): up to
/// the first `%` not escaped by a backslash, each `\%` read as `%`; and
/// whether a `%` ended it early.
fn as_cron_runs(command: &str) -> (String, bool) {
    let mut out = String::new();
    let mut escaped = false;
    for c in command.chars() {
        if escaped {
            if c == '%' {
                out.pop();
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '%' => return (out, true),
            _ => {}
        }
        out.push(c);
    }
    (out, false)
}

/// A time a job runs at: `(minute, hour, cron day)`, Sunday 0.
type CronTime = (u32, u32, u32);

/// A job line: when it runs, and its command.
#[derive(Debug)]
struct Job {
    times: BTreeSet<CronTime>,
    command: String,
}

/// A window's two jobs on one host.
#[derive(Debug, Default)]
struct Jobs {
    start: Option<Job>,
    stop: Option<Job>,
    /// The GPU indices the window's comment names.
    comment_gpus: String,
}

/// `text` after `key`, up to the first character in `end`.
fn after<'a>(text: &'a str, key: &str, end: &[char]) -> Option<&'a str> {
    let rest = &text[text.find(key)? + key.len()..];
    Some(rest.split(end).next().unwrap_or(rest))
}

/// The crontab, host by host, window label by window label; every line
/// that is not a comment, `CRON_TZ=UTC` or a job whose fields parse is a
/// failure.
fn parse(text: &str, c: &mut Checks) -> BTreeMap<String, BTreeMap<String, Jobs>> {
    let mut hosts: BTreeMap<String, BTreeMap<String, Jobs>> = BTreeMap::new();
    let mut host: Option<String> = None;
    let mut label: Option<String> = None;
    let mut tz = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("# host ") {
            host = Some(name.to_owned());
            c.check(hosts.insert(name.to_owned(), BTreeMap::new()).is_none(), || {
                format!("host {name} twice")
            });
            (label, tz) = (None, false);
            continue;
        }
        if let Some(note) = line.strip_prefix('#') {
            let Some(h) = &host else { continue };
            if note.trim_start().starts_with("GPUs in MIG mode") {
                continue;
            }
            match note.trim().rsplit_once(": ") {
                Some((l, gpus)) => {
                    let gpus = gpus.trim_start_matches("GPUs ").trim_start_matches("GPU ").to_owned();
                    label = Some(l.to_owned());
                    let jobs = hosts.entry(h.clone()).or_default().entry(l.to_owned()).or_default();
                    jobs.comment_gpus = gpus;
                }
                None => c.fail(format!("{h}: a comment that names no window: {line}")),
            }
            continue;
        }
        if line == "CRON_TZ=UTC" {
            c.check(host.is_some() && !tz, || format!("CRON_TZ=UTC outside a host or twice: {line}"));
            tz = true;
            continue;
        }
        let (Some(h), Some(l)) = (&host, &label) else {
            c.fail(format!("a job outside a host's window: {line}"));
            continue;
        };
        c.check(tz, || format!("{h}: a job before CRON_TZ=UTC: {line}"));
        let parts: Vec<&str> = line.splitn(6, ' ').collect();
        if parts.len() < 6 {
            c.fail(format!("{h}: not a crontab job: {line}"));
            continue;
        }
        let times = match fields(&parts[..5]) {
            Ok(t) => t,
            Err(e) => {
                c.fail(format!("{h}: {e}: {line}"));
                continue;
            }
        };
        let command = parts[5].to_owned();
        let jobs = hosts.entry(h.clone()).or_default().entry(l.clone()).or_default();
        let slot = if command.contains("CUDA_VISIBLE_DEVICES=") {
            &mut jobs.start
        } else if command.contains("kill -s TERM") {
            &mut jobs.stop
        } else {
            c.fail(format!("{h}: neither a start nor a stop: {line}"));
            continue;
        };
        c.check(slot.is_none(), || format!("{h} {l}: two starts or two stops"));
        *slot = Some(Job { times, command });
    }
    hosts
}

/// The GPUs a window must list, by the second path.
#[derive(Debug, Default)]
struct Expected {
    /// Each host's GPU indices clearly at least `MIN_SHARE` idle in every hour.
    sure: BTreeMap<String, BTreeSet<i64>>,
    /// (host, index) within 1e-6 of the share in some hour, where sums in
    /// another order may fall either side: listed or not.
    borderline: BTreeSet<(String, i64)>,
}

/// The whole GPUs of each host at least `MIN_SHARE` idle in every hour of
/// `runs`, by the second path: `gpu_minute_states` through `apron sql`.
fn expected(cells: &[Value], runs: &[Run]) -> Expected {
    let hours: BTreeSet<usize> = runs.iter().flat_map(|&(s, n)| (s..s + n).map(|h| h % 168)).collect();
    // (host, index, uuid) → hour of the week → idle share.
    let mut gpus: BTreeMap<(String, i64, String), BTreeMap<usize, f64>> = BTreeMap::new();
    let mig_mode: BTreeSet<&str> = cells.iter().filter_map(|r| r["parent_gpu_uuid"].as_str()).collect();
    for r in cells {
        let uuid = r["gpu_uuid"].as_str().expect("gpu_uuid");
        if !r["parent_gpu_uuid"].is_null() || mig_mode.contains(uuid) {
            continue;
        }
        let key = (
            r["host"].as_str().expect("host").to_owned(),
            r["gpu_index"].as_i64().expect("gpu_index"),
            uuid.to_owned(),
        );
        let h = r["day"].as_u64().expect("day") as usize * 24 + r["hour"].as_u64().expect("hour") as usize;
        let seconds = r["seconds"].as_f64().expect("seconds");
        if seconds > 0.0 {
            gpus.entry(key)
                .or_default()
                .insert(h, 100.0 * r["idle_seconds"].as_f64().expect("idle") / seconds);
        }
    }
    let mut want = Expected::default();
    for ((host, index, _), week) in gpus {
        let shares: Vec<Option<f64>> = hours.iter().map(|h| week.get(h).copied()).collect();
        if shares.iter().all(|s| s.is_some_and(|s| s >= MIN_SHARE + 1e-6)) {
            want.sure.entry(host).or_default().insert(index);
        } else if shares.iter().all(|s| s.is_some_and(|s| s >= MIN_SHARE - 1e-6)) {
            want.borderline.insert((host, index));
        }
    }
    want
}

const CELLS_SQL: &str = "SELECT host, gpu_index, gpu_uuid, parent_gpu_uuid, \
    (CAST(date_part('dow', minute) AS INT) + 6) % 7 AS day, CAST(date_part('hour', minute) AS INT) AS hour, \
    sum(seconds) AS seconds, \
    sum(CASE WHEN state IN ('idle_held', 'idle_empty') THEN seconds ELSE 0 END) AS idle_seconds \
    FROM gpu_minute_states GROUP BY 1, 2, 3, 4, 5, 6";

#[test]
fn the_crontab_starts_and_stops_at_the_windows_on_the_idle_gpus() {
    let command = "python train.py --log /tmp/train-$(date +%F).log";
    let windows = json(&[&["windows", "--show", "windows"][..], &FLAGS, &PERIOD].concat());
    let text = apron(&[&["windows", "--cron", command][..], &FLAGS, &PERIOD].concat());
    let cells = json(&[&["sql", CELLS_SQL][..], &PERIOD].concat());
    let mut c = Checks::default();
    let hosts = parse(&text, &mut c);

    // The windows, as `--show windows` reports them.
    let mut by_label: BTreeMap<String, Vec<Run>> = BTreeMap::new();
    for w in &windows {
        let label = w["window"].as_str().expect("window").to_owned();
        let runs = runs_of(&label);
        let hours: usize = runs.iter().map(|r| r.1).sum();
        c.eq(
            &format!("{label}: hours from the label"),
            hours as u64,
            w["hours_per_week"].as_u64().expect("hours"),
        );
        by_label.insert(label, runs);
    }
    assert!(by_label.len() >= 3, "the fleet has recurring idle windows: {by_label:?}");
    assert!(
        by_label.values().any(|r| r.len() == 1 && r[0].0 + r[0].1 > 168),
        "a window runs over the end of the week: {by_label:?}"
    );
    assert!(by_label.values().any(|r| r.len() > 1), "a window recurs on several days: {by_label:?}");

    let mut listed = 0;
    for (label, runs) in &by_label {
        let Expected { sure: want, borderline } = expected(&cells, runs);
        for (host, windows) in &hosts {
            let want_here = want.get(host).cloned().unwrap_or_default();
            let Some(jobs) = windows.get(label) else {
                c.check(want_here.is_empty(), || {
                    format!("{host} {label}: no lines, want GPUs {want_here:?}")
                });
                continue;
            };
            let (Some(Job { times: starts, command: start }), Some(Job { times: stops, command: stop })) =
                (&jobs.start, &jobs.stop)
            else {
                c.fail(format!("{host} {label}: a start and a stop line, got {jobs:?}"));
                continue;
            };
            listed += 1;
            // The times: each run's first hour and its end.
            let want_starts: BTreeSet<_> = runs.iter().map(|r| cron_time(r.0)).collect();
            let want_stops: BTreeSet<_> = runs.iter().map(|r| cron_time(r.0 + r.1)).collect();
            c.eq(&format!("{host} {label}: start times"), starts, &want_starts);
            c.eq(&format!("{host} {label}: stop times"), stops, &want_stops);
            // `exec timeout -k GRACE SECONDS sh -c …`
            let timeout = start
                .split("exec timeout -k ")
                .nth(1)
                .and_then(|t| t.split(' ').nth(1))
                .and_then(|s| s.parse::<usize>().ok());
            c.eq(&format!("{host} {label}: timeout (s)"), timeout, Some(runs[0].1 * 3600));
            // The GPUs.
            let devices = after(start, "CUDA_VISIBLE_DEVICES=", &[';', ' ']).unwrap_or_default();
            let got: BTreeSet<i64> = devices.split(',').filter_map(|d| d.parse().ok()).collect();
            c.check(!got.is_empty() && devices.split(',').count() == got.len(), || {
                format!("{host} {label}: CUDA_VISIBLE_DEVICES={devices:?} is not a list of distinct indices")
            });
            c.eq(&format!("{host} {label}: the comment's GPUs"), jobs.comment_gpus.as_str(), devices);
            let extra: Vec<&i64> =
                got.difference(&want_here).filter(|i| !borderline.contains(&(host.clone(), **i))).collect();
            let missing: Vec<&i64> = want_here.difference(&got).collect();
            c.check(extra.is_empty() && missing.is_empty(), || {
                format!(
                    "{host} {label}: CUDA_VISIBLE_DEVICES={devices}: not idle {extra:?}, missing {missing:?}"
                )
            });
            c.check(start.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID"), || {
                format!("{host}: CUDA counts as NVML")
            });
            // Start and stop share one pid file.
            c.eq(
                &format!("{host} {label}: pid file"),
                after(start, "f=\"", &['"']),
                after(stop, "f=\"", &['"']),
            );
            // The command reaches sh whole, its % intact.
            for job in [start, stop] {
                let (runs, cut) = as_cron_runs(job);
                c.check(!cut, || format!("{host} {label}: cron would cut the command at a %: {job}"));
                c.check(job.len() < 1000, || format!("{host} {label}: a line of {} characters", job.len()));
                if job == start {
                    c.check(runs.ends_with(&format!("sh -c '{command}'")), || format!("cron runs {runs}"));
                }
            }
        }
        // A host whose GPUs are idle in the window has its lines.
        for (host, gpus) in &want {
            c.check(hosts.get(host).is_some_and(|w| w.contains_key(label)), || {
                format!("{host} {label}: GPUs {gpus:?} are idle, but the host has no line for the window")
            });
        }
    }
    for (host, windows) in &hosts {
        for label in windows.keys() {
            c.check(by_label.contains_key(label), || {
                format!("{host}: {label:?} is no window of --show windows")
            });
        }
        c.check(!windows.is_empty(), || format!("{host}: a header without lines"));
    }
    // gpu-node03's GPUs 0–3 are in MIG mode: named as left out, never listed.
    c.check(text.contains("# host gpu-node03\n# GPUs in MIG mode, not used: 0,1,2,3\n"), || {
        "gpu-node03's GPUs in MIG mode are not said to be left out".to_owned()
    });
    for (label, jobs) in hosts.get("gpu-node03").into_iter().flatten() {
        let gpus: Vec<&str> = jobs.comment_gpus.split(',').collect();
        c.check(!gpus.iter().any(|i| ["0", "1", "2", "3"].contains(i)), || {
            format!("gpu-node03 {label}: a GPU in MIG mode is listed: {gpus:?}")
        });
    }
    c.check(listed >= 4, || format!("only {listed} windows have lines:\n{text}"));
    assert!(
        c.failures.is_empty(),
        "{} failures:\n{}\n\ncrontab:\n{text}",
        c.failures.len(),
        c.failures.join("\n")
    );
}

/// The processes of process group `pgid` that have not exited (zombies
/// left out: they have, and only wait for their parent).
fn group(pgid: i32) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // After the command name in parentheses: state, ppid, pgrp, …
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.len() > 2 && fields[2] == pgid.to_string() && !matches!(fields[0], "Z" | "X") {
            pids.push(pid);
        }
    }
    pids
}

/// Kills process group `.0` if the test fails while it may run, so a
/// failed test leaves nothing behind.
struct KillOnPanic(i32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() && self.0 > 1 {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
}

/// Waits up to `limit` for `done`.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// sh running a job's command as cron would, with `home` as `$HOME`.
fn job(line: &str, home: &Path) -> Command {
    let command = line.splitn(6, ' ').nth(5).expect("a job has a command");
    let (command, cut) = as_cron_runs(command);
    assert!(!cut, "cron would cut the command at a %: {line}");
    let mut sh = Command::new("/bin/sh");
    sh.arg("-c").arg(command).env("HOME", home).stdin(Stdio::null()).stdout(Stdio::null());
    sh
}

#[test]
fn the_lines_start_the_command_once_and_stop_only_what_they_started() {
    // Its % signs, quotes and a backslash before a % must reach sh as
    // written. Its main part ends on TERM, and `timeout` with it; the
    // subshell ignores TERM and outlives both: only the stop line's KILL
    // after the grace ends it.
    let command = "printf '%s\\n' \"$CUDA_VISIBLE_DEVICES\" >\"$HOME/devices\"; \
                   echo 5\\% >\"$HOME/percent\"; date +%s >\"$HOME/started\"; \
                   (trap '' TERM; sleep 300; echo never) & sleep 300";
    let text = apron(&[&["windows", "--cron", command, "--grace", "2s"][..], &FLAGS, &PERIOD].concat());
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#') && l.contains(" f=\"")).collect();
    let (start, stop) = (lines[0], lines[1]);
    assert!(start.contains("CUDA_VISIBLE_DEVICES=") && stop.contains("kill -s TERM"), "{start}\n{stop}");
    let home = tempfile::tempdir().expect("a home folder");
    let pid_file: PathBuf =
        home.path().join(after(start, "f=\"$HOME/", &['"']).expect("the start line names its pid file"));
    for tool in ["flock", "timeout"] {
        let found = Command::new("/bin/sh").arg("-c").arg(format!("command -v {tool}")).output();
        assert!(found.is_ok_and(|o| o.status.success()), "the lines need {tool} (util-linux, coreutils)");
    }

    // Start: the command runs with the window's GPUs and its text intact.
    let mut started = job(start, home.path()).spawn().expect("sh runs");
    // The job's pid is its process group's id (`timeout` makes it so).
    let _guard = KillOnPanic(i32::try_from(started.id()).expect("a pid"));
    let read = |name: &str| std::fs::read_to_string(home.path().join(name)).unwrap_or_default();
    assert!(wait_for(Duration::from_secs(20), || !read("started").is_empty()), "the command did not start");
    let devices = after(start, "CUDA_VISIBLE_DEVICES=", &[';']).expect("GPUs");
    assert_eq!(read("devices").trim(), devices);
    assert_eq!(read("percent").trim(), "5%");
    assert!(read("started").trim().parse::<u64>().is_ok(), "date +%s gave {:?}", read("started"));
    let pgid: i32 = std::fs::read_to_string(&pid_file).expect("the pid file").trim().parse().expect("a pid");
    assert_eq!(pgid, i32::try_from(started.id()).expect("a pid"), "the pid file holds the job's pid");
    assert!(
        wait_for(Duration::from_secs(5), || group(pgid).len() >= 4),
        "timeout, sh, subshell, sleeps: {:?}",
        group(pgid)
    );

    // A second start while it runs starts nothing.
    std::fs::remove_file(home.path().join("started")).expect("remove");
    let again = job(start, home.path()).status().expect("sh runs");
    assert!(again.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read("started"), "", "started twice");
    assert_eq!(std::fs::read_to_string(&pid_file).expect("pid file").trim(), pgid.to_string());

    // Stop: TERM ends timeout and the main part; KILL after the 2 s grace
    // ends the subshell that ignores TERM.
    let t = Instant::now();
    let stopped = job(stop, home.path()).status().expect("sh runs");
    assert!(stopped.success(), "stop: {stopped}");
    assert!(wait_for(Duration::from_secs(10), || group(pgid).is_empty()), "still running: {:?}", group(pgid));
    assert!(t.elapsed() >= Duration::from_secs(1), "KILL came before the grace");
    let _ = started.wait();

    // A stale pid file (its pid now another process group's) stops nothing.
    let mut other = {
        use std::os::unix::process::CommandExt;
        Command::new("sleep").arg("300").process_group(0).spawn().expect("sleep runs")
    };
    let other_pid = i32::try_from(other.id()).expect("a pid");
    std::fs::write(&pid_file, format!("{other_pid}\n")).expect("write the pid file");
    let stale = job(stop, home.path()).status().expect("sh runs");
    assert!(stale.success());
    std::thread::sleep(Duration::from_millis(300));
    let alive = group(other_pid) == [other_pid];
    let _ = other.kill();
    let _ = other.wait();
    assert!(alive, "the stop line signalled a process it did not start");
}

#[test]
fn a_command_cron_cannot_run_is_refused_in_one_line() {
    let cases: [(&[&str], &str); 5] = [
        (&["windows", "--cron", ""], "the command is empty"),
        (&["windows", "--cron", "  "], "the command is empty"),
        (&["windows", "--cron", "train.sh\nrm -rf /"], "control character"),
        (&["windows", "--grace", "30s"], "--cron"),
        (&["windows", "--cron", "train.sh", "--show", "windows"], "cannot be used with"),
    ];
    for (args, want) in cases {
        let out = Command::new(bin("apron"))
            .args(["--data", "/nonexistent"])
            .args(args)
            .env_remove("APRON_DATA")
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: printed {:?}", String::from_utf8_lossy(&out.stdout));
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: one line, got {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
}
