//! The crontab `apron windows --cron COMMAND` prints: per host, the lines
//! that start COMMAND at the start of each recurring idle window, on the
//! host's GPUs idle in it, and stop it at the window's end. apron installs
//! nothing and starts nothing; it writes text, from the windows
//! ([`crate::report::figures::windows::find_recurring`]) and each GPU's week
//! ([`crate::report::figures::windows::idle_gpus`]), and this module is pure.
//!
//! Per host (by name) a `# host NAME` header and `CRON_TZ=UTC` (the windows
//! are hours of the UTC week), then per window (earliest first) a comment
//! and two lines:
//!
//! - start, `M H * * DOW` at each run's first hour: takes a lock on the
//!   window's pid file (`$HOME/.apron-window.HOST.START.HASH.pid`; an
//!   earlier start still running keeps it, and nothing is started again),
//!   writes its pid there, and becomes
//!   `timeout -k GRACE LENGTH sh -c 'COMMAND'` with
//!   `CUDA_VISIBLE_DEVICES` (NVML indices, `CUDA_DEVICE_ORDER=PCI_BUS_ID`
//!   so that CUDA counts as NVML does). `timeout` runs the command in a
//!   process group of its own, whose id is that pid, and ends it after the
//!   window's length even when no stop line runs. The command and all it
//!   starts inherit the lock: it is held while any of them runs.
//! - stop, `M H * * DOW` at each run's end: only while the lock is held
//!   (so a stale pid file, whose pid may belong to another process by now,
//!   is never signalled), TERM to that process group, then KILL if the lock
//!   is still held after the grace.
//!
//! Days are cron's numbers (Sunday 0). A window over midnight or the end of
//! the week (`Sat 19:00 – Mon 06:00`) starts on its first day and stops on
//! its last: the start and stop lines have days of their own. A window of
//! the whole week has no end: its start line runs each Monday 00:00 (the
//! lock keeps a running command from being started twice) without a
//! timeout, and there is no stop line.
//!
//! COMMAND is single-quoted for sh, and every `%` escaped for cron (which
//! reads an unescaped `%` as a newline); text from the data is only used in
//! comments (control characters replaced) and, reduced to letters, digits,
//! `.`, `_` and `-`, in file names.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::report::figures::windows::{
    DAYS, GpuWeek, HOURS_PER_WEEK, Partition, RecurringWindow, Run, idle_gpus,
};

/// The longest job line a crontab may hold for every cron: Vixie cron (and
/// Debian's) reads at most 1,000 characters of a command (`MAX_COMMAND`).
pub const MAX_LINE: usize = 1_000;

/// What the crontab is made with besides the windows and the GPUs.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The command, shell text (checked by [`check_command`]).
    pub command: &'a str,
    /// Seconds the command gets between TERM and KILL (at least 1).
    pub grace_s: u64,
    /// The least idle share of each hour of a window for a GPU to be used
    /// in it (%): the windows' own.
    pub min_share_pct: f64,
    /// The report's header lines (period, data, config, windows), shown as
    /// comments.
    pub header: &'a [String],
}

/// Refuses a command a crontab line cannot hold: empty, or more than one
/// line (a newline or another control character but tab).
pub fn check_command(command: &str) -> Result<(), String> {
    if command.trim().is_empty() {
        return Err("the command is empty: give the shell command to run in the idle windows".into());
    }
    if let Some(c) = command.chars().find(|c| c.is_control() && *c != '\t') {
        return Err(format!(
            "the command holds a control character ({c:?}): a crontab line is one line; \
             put the commands in a script and give its path"
        ));
    }
    Ok(())
}

/// The crontab for `windows` (as found, any order) on the GPUs of `gpus`,
/// or why there can be none: a bad command, or one so long that the lines
/// pass [`MAX_LINE`].
pub fn crontab(
    windows: &[RecurringWindow],
    gpus: &[GpuWeek],
    options: &Options<'_>,
) -> Result<String, String> {
    check_command(options.command)?;
    let mut out = String::new();
    let grace = options.grace_s.max(1);
    let _ = writeln!(
        out,
        "# apron windows --cron: a command started in each recurring idle window, on the GPUs idle in it, \
         and stopped at the window's end."
    );
    for line in options.header {
        let _ = writeln!(out, "# {}", comment(line));
    }
    let _ = write!(
        out,
        "#\n\
         # Each host installs the lines under its \"# host NAME\" header (crontab -e), at the end of its\n\
         # crontab: CRON_TZ applies to the lines after it. The times are UTC. A cron that honours CRON_TZ\n\
         # (cronie: RHEL, Fedora, Arch) reads them so; one that does not (Debian's, Ubuntu's) reads them in\n\
         # the system time zone: set that to UTC, or shift the hours.\n\
         # A start line runs the command with sh under `timeout` for the window's length, with\n\
         # CUDA_VISIBLE_DEVICES set to the host's GPUs (NVML indices) at least {share}% idle in every\n\
         # hour of the window, and keeps its process group's id in $HOME/.apron-window.*.pid, locked\n\
         # (flock) while anything it started runs; it starts nothing while an earlier start still runs.\n\
         # The stop line signals that group only while the lock is held: TERM, then KILL after {grace} s.\n\
         # MIG instances are not used: a CUDA process sees at most one MIG device.\n",
        share = options.min_share_pct,
    );
    let hash = fnv1a(options.command);
    let quoted = quote(options.command);
    let mut order: Vec<&RecurringWindow> = windows.iter().filter(|w| !w.runs.is_empty()).collect();
    order.sort_by_key(|w| w.runs[0].start);
    // Each host's windows, hosts by name.
    let mut hosts: Vec<(String, Vec<Scheduled<'_>>)> = Vec::new();
    for window in &order {
        for h in idle_gpus(&window.runs, gpus, options.min_share_pct) {
            let scheduled = Scheduled { window, gpu_indices: h.gpu_indices };
            match hosts.iter_mut().find(|(name, _)| *name == h.host) {
                Some((_, list)) => list.push(scheduled),
                None => hosts.push((h.host, vec![scheduled])),
            }
        }
    }
    hosts.sort_by(|a, b| a.0.cmp(&b.0));
    if order.is_empty() {
        out.push_str("\n# No recurring idle window in this period: nothing to schedule.\n");
    } else if hosts.is_empty() {
        out.push_str("\n# No GPU is idle in every hour of any window: nothing to schedule.\n");
    }
    for (host, list) in &hosts {
        let _ = writeln!(out, "\n# host {}", comment(host));
        let mig = mig_indices(gpus, host);
        if !mig.is_empty() {
            let list: Vec<String> = mig.iter().map(i32::to_string).collect();
            let _ = writeln!(out, "# GPUs in MIG mode, not used: {}", list.join(","));
        }
        out.push_str("CRON_TZ=UTC\n");
        for Scheduled { window, gpu_indices: indices } in list {
            let devices: Vec<String> = indices.iter().map(i32::to_string).collect();
            let devices = devices.join(",");
            let pidfile = pid_file(host, window.runs[0].start, hash);
            let gpus = if indices.len() == 1 { "GPU" } else { "GPUs" };
            let _ = writeln!(out, "# {}: {gpus} {devices}", comment(&window.window.label));
            let (start, stop) = schedule(&window.runs);
            let whole_week = window.runs.iter().any(|r| r.hours >= HOURS_PER_WEEK);
            let run = if whole_week {
                // No end: no timeout.
                format!("exec sh -c {quoted}")
            } else {
                format!("exec timeout -k {grace} {} sh -c {quoted}", window.runs[0].hours * 3_600)
            };
            let _ = writeln!(
                out,
                "{start} f=\"{pidfile}\"; exec 9>>\"$f\"; flock -n 9 || exit 0; echo $$ >\"$f\"; \
                 export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={devices}; {run}"
            );
            if let (Some(stop), false) = (stop, whole_week) {
                let _ = writeln!(
                    out,
                    "{stop} f=\"{pidfile}\"; exec 9>>\"$f\"; flock -n 9 && exit 0; p=$(cat \"$f\"); \
                     [ \"$p\" -gt 1 ] 2>/dev/null || {{ echo \"apron: no pid in $f\" >&2; exit 1; }}; \
                     kill -s TERM -- \"-$p\"; flock -w {grace} 9 || kill -s KILL -- \"-$p\""
                );
            }
        }
    }
    // Comments are not read as commands: only the jobs' lengths count.
    let jobs = out.lines().filter(|l| !l.starts_with('#'));
    if let Some(long) = jobs.map(str::len).max().filter(|&n| n > MAX_LINE) {
        return Err(format!(
            "the command makes crontab lines of {long} characters, more than the {MAX_LINE} some crons \
             read (Debian's): put it in a script and give the script's path"
        ));
    }
    Ok(out)
}

/// A window on one host, and the host's GPUs idle in it.
#[derive(Debug)]
struct Scheduled<'a> {
    window: &'a RecurringWindow,
    gpu_indices: Vec<i32>,
}

/// When a job runs: minute, hour and days of the week (0 = Monday).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    /// Minute of the hour, 0–59.
    pub minute: usize,
    /// Hour of the day, 0–23 (UTC).
    pub hour: usize,
    /// Days of the week, 0 = Monday … 6 = Sunday.
    pub days: BTreeSet<usize>,
}

impl std::fmt::Display for When {
    /// The five time fields of a crontab line: `0 19 * * 6`, `0 0 * * 1-5`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} * * {}", self.minute, self.hour, days_field(&self.days))
    }
}

/// When a window's command starts and when it stops: each run's first
/// hour, and each run's end; the start and stop share a minute and an hour
/// across the runs (a window's runs start at one hour of the day and have
/// one length). A window of the whole week starts each Monday 00:00 and
/// has no stop (`None`).
pub fn schedule(runs: &[Run]) -> (When, Option<When>) {
    let at = |hour_of_week: &[usize]| When {
        minute: 0,
        hour: hour_of_week.first().map_or(0, |h| h % 24),
        days: hour_of_week.iter().map(|h| h / 24).collect(),
    };
    if runs.iter().any(|r| r.hours >= HOURS_PER_WEEK) {
        return (at(&[0]), None);
    }
    let starts: Vec<usize> = runs.iter().map(|r| r.start % HOURS_PER_WEEK).collect();
    let ends: Vec<usize> = runs.iter().map(Run::end).collect();
    (at(&starts), Some(at(&ends)))
}

/// Days of the week (0 = Monday) as cron's day-of-week field: cron's
/// numbers (Sunday 0, Monday 1), ascending, consecutive ones as a range
/// when there are three or more (`1-5`, `0,6`, `3,4`), `*` for every day.
pub fn days_field(days: &BTreeSet<usize>) -> String {
    let cron: BTreeSet<usize> = days.iter().map(|d| (d + 1) % 7).collect();
    if cron.len() == 7 {
        return "*".to_owned();
    }
    let cron: Vec<usize> = cron.into_iter().collect();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cron.len() {
        let mut j = i;
        while j + 1 < cron.len() && cron[j + 1] == cron[j] + 1 {
            j += 1;
        }
        match j - i {
            0 => parts.push(cron[i].to_string()),
            1 => parts.extend([cron[i].to_string(), cron[j].to_string()]),
            _ => parts.push(format!("{}-{}", cron[i], cron[j])),
        }
        i = j + 1;
    }
    parts.join(",")
}

/// `command` as one sh word for a crontab line: single-quoted (a `'` as
/// `'\''`), each `%` escaped as `\%`, which cron passes to sh as `%`. Cron
/// passes a backslash followed by anything else as it is, so a `\` right
/// before a `%` of the command cannot be written as `\\%` (cron would end
/// the command at that `%`): the quote is closed and opened again between
/// them (`\''\%`), which sh reads as nothing.
pub fn quote(command: &str) -> String {
    let mut out = String::with_capacity(command.len() + 8);
    out.push('\'');
    let mut previous = None;
    for c in command.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '%' if previous == Some('\\') => out.push_str("''\\%"),
            '%' => out.push_str("\\%"),
            c => out.push(c),
        }
        previous = Some(c);
    }
    out.push('\'');
    out
}

/// The pid file of a window's command on `host`: named after the host (a
/// home folder may be shared by several hosts), the window's first hour of
/// the week, and the command (two commands scheduled in one window do not
/// share a lock).
fn pid_file(host: &str, start: usize, hash: u32) -> String {
    let host: String =
        host.chars().map(|c| if c.is_ascii_alphanumeric() || ".-_".contains(c) { c } else { '_' }).collect();
    let day = DAYS[(start / 24) % 7].to_ascii_lowercase();
    format!("$HOME/.apron-window.{host}.{day}{:02}00.{hash:08x}.pid", start % 24)
}

/// The NVML indices of `host`'s GPUs in MIG mode (their own or their
/// instances'), ascending.
fn mig_indices(gpus: &[GpuWeek], host: &str) -> Vec<i32> {
    let set: BTreeSet<i32> = gpus
        .iter()
        .filter(|g| g.host == host && g.partition != Partition::Whole)
        .map(|g| g.gpu_index)
        .collect();
    set.into_iter().collect()
}

/// FNV-1a, 32 bits: a short name for a command that stays the same from
/// one apron version to the next.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// `text` fit for a comment line: control characters replaced by spaces.
fn comment(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures::windows::Window;

    fn days(list: &[usize]) -> BTreeSet<usize> {
        list.iter().copied().collect()
    }

    /// A window of `runs` (start hour of the week, hours) labelled `label`.
    fn window(label: &str, runs: &[(usize, usize)]) -> RecurringWindow {
        RecurringWindow {
            window: Window {
                label: label.to_owned(),
                hours_per_week: runs.iter().map(|r| r.1).sum(),
                idle_share_pct: 90.0,
                idle_gpu_hours_per_week: 0.0,
                idle_cost_per_week: 0.0,
            },
            runs: runs.iter().map(|&(start, hours)| Run { start, hours }).collect(),
        }
    }

    /// A whole GPU idle (100%) in the hours `idle` says, busy (0%) in the others.
    fn gpu(host: &str, index: i32, partition: Partition, idle: impl Fn(usize) -> bool) -> GpuWeek {
        GpuWeek {
            host: host.to_owned(),
            gpu_index: index,
            gpu_uuid: format!("GPU-{host}-{index}"),
            partition,
            idle_share_pct: (0..HOURS_PER_WEEK).map(|h| Some(if idle(h) { 100.0 } else { 0.0 })).collect(),
            idle_cost: (0..HOURS_PER_WEEK).map(|h| if idle(h) { 1.0 } else { 0.0 }).collect(),
        }
    }

    fn options<'a>(command: &'a str, header: &'a [String]) -> Options<'a> {
        Options { command, grace_s: 30, min_share_pct: 60.0, header }
    }

    /// The crontab's job lines: (the five time fields, the command).
    fn jobs(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty() && !l.starts_with("CRON_TZ="))
            .map(|l| {
                let fields: Vec<&str> = l.splitn(6, ' ').collect();
                (fields[..5].join(" "), fields[5].to_owned())
            })
            .collect()
    }

    #[test]
    fn days_are_cron_numbers_with_sunday_zero() {
        assert_eq!(days_field(&days(&[0, 1, 2, 3, 4])), "1-5");
        assert_eq!(days_field(&days(&[5, 6])), "0,6");
        assert_eq!(days_field(&days(&[2, 3])), "3,4");
        assert_eq!(days_field(&days(&[4, 5, 6])), "0,5,6");
        assert_eq!(days_field(&days(&[0, 1, 2, 3, 4, 5])), "1-6");
        assert_eq!(days_field(&days(&[0, 1, 2, 3, 4, 5, 6])), "*");
        assert_eq!(days_field(&days(&[6])), "0");
    }

    #[test]
    fn windows_over_midnight_and_the_week_stop_on_their_last_day() {
        // Mon–Fri 00:00–06:00.
        let runs: Vec<Run> = (0..5).map(|d| Run { start: d * 24, hours: 6 }).collect();
        let (start, stop) = schedule(&runs);
        assert_eq!(start.to_string(), "0 0 * * 1-5");
        assert_eq!(stop.expect("an end").to_string(), "0 6 * * 1-5");
        // Mon–Thu 22:00–06:00 (overnight): stops Tuesday to Friday.
        let runs: Vec<Run> = (0..4).map(|d| Run { start: d * 24 + 22, hours: 8 }).collect();
        let (start, stop) = schedule(&runs);
        assert_eq!(start.to_string(), "0 22 * * 1-4");
        assert_eq!(stop.expect("an end").to_string(), "0 6 * * 2-5");
        // Fri–Sun 20:00–02:00: the last run ends on Monday, past the week's end.
        let runs: Vec<Run> = (4..7).map(|d| Run { start: d * 24 + 20, hours: 6 }).collect();
        let (start, stop) = schedule(&runs);
        assert_eq!(start.to_string(), "0 20 * * 0,5,6");
        assert_eq!(stop.expect("an end").to_string(), "0 2 * * 0,1,6");
        // Sat 00:00 – Mon 08:00: one run of 56 h.
        let (start, stop) = schedule(&[Run { start: 5 * 24, hours: 56 }]);
        assert_eq!(start.to_string(), "0 0 * * 6");
        assert_eq!(stop.expect("an end").to_string(), "0 8 * * 1");
        // Sun 17:00 – Mon 06:00.
        let (start, stop) = schedule(&[Run { start: 6 * 24 + 17, hours: 13 }]);
        assert_eq!(start.to_string(), "0 17 * * 0");
        assert_eq!(stop.expect("an end").to_string(), "0 6 * * 1");
        // Every hour of the week: started on Mondays, never stopped.
        let (start, stop) = schedule(&[Run { start: 0, hours: HOURS_PER_WEEK }]);
        assert_eq!(start.to_string(), "0 0 * * 1");
        assert_eq!(stop, None);
    }

    #[test]
    fn percent_signs_and_quotes_survive_cron_and_sh() {
        assert_eq!(quote("date +%s"), r"'date +\%s'");
        assert_eq!(quote("echo it's"), r"'echo it'\''s'");
        assert_eq!(quote(r"printf '100%%\n'"), r"'printf '\''100\%\%\n'\'''");
        // A backslash before a %: the quote is closed and opened between them.
        assert_eq!(quote(r"echo \%"), r"'echo \''\%'");
        assert_eq!(quote("a%"), r"'a\%'");
    }

    #[test]
    fn bad_commands_are_refused() {
        assert!(check_command("").is_err());
        assert!(check_command("  \t").is_err());
        assert!(check_command("train.sh\nrm -rf /").is_err());
        assert!(check_command("train.sh\r").is_err());
        assert!(check_command("python train.py\t--resume").is_ok());
        let header: Vec<String> = Vec::new();
        let long = "x".repeat(MAX_LINE);
        let w = [window("Mon 00:00–06:00", &[(0, 6)])];
        let gpus = [gpu("a", 0, Partition::Whole, |_| true)];
        let err = crontab(&w, &gpus, &options(&long, &header)).expect_err("too long");
        assert!(err.contains("script"), "{err}");
        assert!(crontab(&w, &gpus, &options("", &header)).is_err());
        // A long comment is no long command.
        let header = vec![format!("Data:     /{}", "d".repeat(2 * MAX_LINE))];
        assert!(crontab(&w, &gpus, &options("train.sh", &header)).is_ok());
    }

    #[test]
    fn each_host_gets_its_idle_gpus_per_window() {
        // Window A: Tue–Fri 00:00–06:00; window B: Sat 19:00 – Mon 06:00 (wraps the week).
        let a = window("Tue–Fri 00:00–06:00", &[(24, 6), (48, 6), (72, 6), (96, 6)]);
        let b = window("Sat 19:00 – Mon 06:00", &[(5 * 24 + 19, 35)]);
        let weekend = |h: usize| !(6..5 * 24 + 19).contains(&h);
        let nights = |h: usize| h % 24 < 6 && (24..5 * 24).contains(&h);
        let gpus = vec![
            gpu("node-b", 3, Partition::Whole, move |h| weekend(h) || nights(h)),
            gpu("node-b", 1, Partition::Whole, weekend),
            // Busy one hour of the weekend: never in window B.
            gpu("node-b", 2, Partition::Whole, move |h| weekend(h) && h != 6 * 24 + 3),
            // MIG: never used, however idle.
            gpu("node-b", 0, Partition::MigMode, |_| true),
            gpu("node-b", 0, Partition::MigInstance, |_| true),
            gpu("node-a", 5, Partition::Whole, nights),
            // Never idle: node-c gets no line.
            gpu("node-c", 0, Partition::Whole, |_| false),
        ];
        let header = vec!["Period:   2026-11-02 00:00 – 2026-11-16 00:00 UTC (14 days)".to_owned()];
        // The windows come costliest first; the crontab lists them by start.
        let text = crontab(&[b.clone(), a.clone()], &gpus, &options("train.sh --epochs 5", &header))
            .expect("a crontab");
        assert!(text.contains("# Period:   2026-11-02"), "the header is a comment:\n{text}");
        assert!(!text.contains("node-c"), "a host without idle GPUs has no line:\n{text}");
        let hosts: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# host ")).collect();
        assert_eq!(hosts, ["node-a", "node-b"]);
        let node_b = text.split("# host node-b").nth(1).expect("node-b's part");
        assert!(node_b.starts_with("\n# GPUs in MIG mode, not used: 0\nCRON_TZ=UTC\n"), "{node_b}");
        let jobs_b = jobs(node_b);
        assert_eq!(jobs_b.len(), 4, "{node_b}");
        assert_eq!(jobs_b[0].0, "0 0 * * 2-5");
        assert!(jobs_b[0].1.contains("CUDA_VISIBLE_DEVICES=3;"), "{}", jobs_b[0].1);
        assert!(
            jobs_b[0].1.contains("exec timeout -k 30 21600 sh -c 'train.sh --epochs 5'"),
            "{}",
            jobs_b[0].1
        );
        assert_eq!(jobs_b[1].0, "0 6 * * 2-5");
        assert_eq!(jobs_b[2].0, "0 19 * * 6");
        assert!(jobs_b[2].1.contains("CUDA_VISIBLE_DEVICES=1,3;"), "{}", jobs_b[2].1);
        assert!(jobs_b[2].1.contains("timeout -k 30 126000 "), "35 h: {}", jobs_b[2].1);
        assert_eq!(jobs_b[3].0, "0 6 * * 1");
        assert!(jobs_b[3].1.contains("flock -w 30 9 || kill -s KILL"), "{}", jobs_b[3].1);
        // Start and stop of a window share one pid file, per host and window.
        let file = |job: &str| job.split('"').nth(1).map(str::to_owned).expect("a pid file");
        assert_eq!(file(&jobs_b[2].1), file(&jobs_b[3].1));
        assert_ne!(file(&jobs_b[0].1), file(&jobs_b[2].1));
        assert!(
            file(&jobs_b[2].1).starts_with("$HOME/.apron-window.node-b.sat1900."),
            "{}",
            file(&jobs_b[2].1)
        );
        let node_a =
            text.split("# host node-a").nth(1).and_then(|t| t.split("# host ").next()).expect("node-a");
        let jobs_a = jobs(node_a);
        assert_eq!(jobs_a.len(), 2, "node-a is idle in window A only:\n{node_a}");
        assert!(jobs_a[0].1.contains("CUDA_VISIBLE_DEVICES=5;"));
        assert_ne!(file(&jobs_a[0].1), file(&jobs_b[0].1), "hosts may share a home folder");
        // A per cent sign in the command is escaped on every line.
        let text = crontab(&[a], &gpus, &options("date +%s >>~/ran", &header)).expect("a crontab");
        for (_, job) in jobs(&text) {
            assert!(!job.replace("\\%", "").contains('%'), "an unescaped %: {job}");
        }
    }

    #[test]
    fn a_whole_week_window_starts_weekly_and_never_stops() {
        let all = window("every hour of the week", &[(0, HOURS_PER_WEEK)]);
        let gpus = [gpu("n", 0, Partition::Whole, |_| true)];
        let header = Vec::new();
        let text = crontab(&[all], &gpus, &options("serve", &header)).expect("a crontab");
        let jobs = jobs(&text);
        assert_eq!(jobs.len(), 1, "{text}");
        assert_eq!(jobs[0].0, "0 0 * * 1");
        assert!(jobs[0].1.ends_with("exec sh -c 'serve'"), "{}", jobs[0].1);
    }

    #[test]
    fn no_window_or_no_idle_gpu_says_so() {
        let header = Vec::new();
        let text = crontab(&[], &[], &options("x", &header)).expect("a crontab");
        assert!(text.contains("No recurring idle window"), "{text}");
        assert!(jobs(&text).is_empty());
        let w = [window("Mon 00:00–06:00", &[(0, 6)])];
        let gpus = [gpu("n", 0, Partition::Whole, |_| false)];
        let text = crontab(&w, &gpus, &options("x", &header)).expect("a crontab");
        assert!(text.contains("No GPU is idle"), "{text}");
        assert!(jobs(&text).is_empty());
    }
}
