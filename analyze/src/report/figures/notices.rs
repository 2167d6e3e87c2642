//! Notices to owners: one plain-text letter per user whose jobs left GPUs
//! idle in the period (`apron jobs --notices DIR`), with their jobs that
//! wasted most, the figures, what to do about each finding and what their
//! team's GPU time cost. Ready for `mail` from cron; apron sends nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::jobs::{FINDING_KINDS, Thresholds, findings_by_kind, grade};
use crate::ledger::jobs::JobRow;

/// Jobs a notice lists at most: the ones whose idle time cost most.
pub const JOBS_PER_NOTICE: usize = 5;

/// One user's notice.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    /// The user as shown (a name, `uid N`, `(unknown)`).
    pub user: String,
    /// The file name: the user's name with anything but letters, digits,
    /// `.`, `_` and `-` made `_`, and `.txt`.
    pub file_name: String,
    /// The letter.
    pub text: String,
}

/// What to do about a finding of kind `kind` ([`FINDING_KINDS`]).
fn advice(kind: &str) -> &'static str {
    match kind {
        k if k == FINDING_KINDS[0] => {
            "ask for only the GPUs the job uses (Slurm --gres=gpu:N, a pod's nvidia.com/gpu limit), or make \
             the code use them all (torch.distributed, DistributedDataParallel)"
        }
        k if k == FINDING_KINDS[1] => {
            "end interactive sessions and notebook kernels when done: an idle one holds its GPU, and its cost"
        }
        k if k == FINDING_KINDS[3] => {
            "feed the GPUs faster: more data-loader workers, the data on local disk, pinned memory, prefetching"
        }
        k if k == FINDING_KINDS[4] => {
            "train in bf16 or fp16 mixed precision (torch.autocast), or allow TF32 \
             (torch.backends.cuda.matmul.allow_tf32 = True): FP32 math leaves the tensor cores idle"
        }
        k if k == FINDING_KINDS[5] => {
            "a failed or slow run may be the GPU's fault, not the code's: tell the cluster's operators, \
             and rerun on other GPUs"
        }
        _ => "ask for a smaller GPU or a MIG slice where the cluster has them",
    }
}

/// The file name of `user`'s notice.
fn file_name(user: &str) -> String {
    let safe: String = user
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    let safe = safe.trim_start_matches('.');
    format!("{}.txt", if safe.is_empty() { "_" } else { safe })
}

/// The notices of `jobs` (a period's, all of them: the team's figures are
/// its jobs'), over `period` (in words), in `currency`, the findings by
/// `thresholds`: one per user whose jobs' idle time cost a cent or more,
/// by user.
pub fn notices(jobs: &[JobRow], thresholds: &Thresholds, period: &str, currency: &str) -> Vec<Notice> {
    let money = |x: f64| apron_reports::money(x, currency);
    let mut teams: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let mut users: BTreeMap<&str, Vec<&JobRow>> = BTreeMap::new();
    for j in jobs {
        let t = teams.entry(j.team.as_str()).or_default();
        t.0 += j.cost;
        t.1 += j.idle_cost;
        users.entry(j.user.as_str()).or_default().push(j);
    }
    let mut out = Vec::new();
    for (user, mut mine) in users {
        let (cost, idle): (f64, f64) =
            mine.iter().fold((0.0, 0.0), |(c, i), j| (c + j.cost, i + j.idle_cost));
        let hours: f64 = mine.iter().map(|j| j.gpu_hours).sum();
        if idle < 0.005 {
            continue;
        }
        mine.sort_by(|a, b| b.idle_cost.total_cmp(&a.idle_cost).then_with(|| a.job.cmp(&b.job)));
        let mut t = String::new();
        let pct = if cost > 0.0 { 100.0 * idle / cost } else { 0.0 };
        let _ = writeln!(t, "To: {user}");
        let _ = writeln!(
            t,
            "Subject: your GPU jobs, {period}: {} of {} while the GPUs sat idle",
            money(idle),
            money(cost)
        );
        let _ = writeln!(t);
        let _ = writeln!(t, "Hello {user},");
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "In the period {period}, your {} held GPUs for {} GPU-hours, costing {}; {} of it ({pct:.0}%) paid for GPUs \
             that sat idle.",
            match mine.len() {
                1 => "1 job".to_owned(),
                n => format!("{n} jobs"),
            },
            crate::report::header::hours(hours),
            money(cost),
            money(idle),
        );
        let _ = writeln!(t);
        let _ = writeln!(t, "The jobs whose idle time cost most:");
        let mut kinds: Vec<&str> = Vec::new();
        for (n, j) in mine.iter().take(JOBS_PER_NOTICE).enumerate() {
            let when = |ms: i64| {
                chrono::DateTime::from_timestamp_millis(ms)
                    .map_or_else(String::new, |d| d.format("%Y-%m-%d %H:%M").to_string())
            };
            let _ = writeln!(t);
            let _ = writeln!(
                t,
                "{}. {} ({} GPU{}: {}), {} to {} UTC{}",
                n + 1,
                j.job,
                j.gpus.len(),
                if j.gpus.len() == 1 { "" } else { "s" },
                j.gpus.join(" "),
                when(j.start_ms),
                when(j.end_ms),
                if j.still_running { ", still running" } else { "" }
            );
            let activity = j.util_pct.map_or("unknown".to_owned(), |a| format!("{a:.1}%"));
            let memory = j.peak_mem_pct.map_or(String::new(), |m| format!(", peak memory {m:.1}% of a GPU"));
            let _ = writeln!(
                t,
                "   {} GPU-hours, {}, of which idle {} ({:.0}%); activity {activity} (grade {}){memory}",
                crate::report::header::hours(j.gpu_hours),
                money(j.cost),
                money(j.idle_cost),
                j.idle_pct,
                grade(j.util_pct)
            );
            for (kind, finding) in findings_by_kind(j, thresholds) {
                let _ = writeln!(t, "   - {finding}");
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
        }
        if mine.len() > JOBS_PER_NOTICE {
            let _ = writeln!(t);
            let _ = writeln!(t, "({} more jobs: apron jobs --user '{user}')", mine.len() - JOBS_PER_NOTICE);
        }
        if !kinds.is_empty() {
            let _ = writeln!(t);
            let _ = writeln!(t, "What to do:");
            for kind in &kinds {
                let _ = writeln!(t, "- {kind}: {}", advice(kind));
            }
        }
        let mut by_team: Vec<&str> = mine.iter().map(|j| j.team.as_str()).collect();
        by_team.sort_unstable();
        by_team.dedup();
        let _ = writeln!(t);
        for team in by_team {
            let (team_cost, team_idle) = teams.get(team).copied().unwrap_or_default();
            let _ = writeln!(
                t,
                "Your jobs are billed to team {team}, whose jobs' GPU time cost {} in the period, {} of it idle.",
                money(team_cost),
                money(team_idle)
            );
        }
        let _ = writeln!(t);
        let _ = writeln!(t, "-- ");
        let _ =
            writeln!(t, "Figures from apron (apron jobs --user '{user}' lists every job with its figures).");
        out.push(Notice { user: user.to_owned(), file_name: file_name(user), text: t });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_plain() {
        assert_eq!(file_name("alice"), "alice.txt");
        assert_eq!(file_name("uid 1001"), "uid_1001.txt");
        assert_eq!(file_name("(unknown)"), "_unknown_.txt");
        assert_eq!(file_name("../etc/x"), "_etc_x.txt");
        assert_eq!(file_name(".."), "_.txt");
    }
}
