//! `apron jobs`: every job over the period (default the last 30 days), the
//! costliest idle first ([`crate::report::figures::jobs`]), from the
//! ledger's one pass over the period's minutes.

use std::io::Write;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::commands::ReportContext;
use crate::error::{Error, OutputError};
use crate::output::{Style, write_rows};
use crate::report::figures::jobs::{Jobs, jobs};
use crate::report::figures::notices::notices;

/// `apron jobs [--user U] [--team T] [period]`.
#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// Only this user's jobs (as shown: the name, or "uid N")
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,

    /// Only this team's jobs
    #[arg(long, value_name = "TEAM")]
    pub team: Option<String>,

    /// Also write one plain-text notice per user whose jobs left GPUs idle
    /// into DIR (USER.txt: their costliest idle jobs, the figures, what to
    /// do, their team's cost), ready for `mail`; apron sends nothing
    #[arg(long, value_name = "DIR")]
    pub notices: Option<std::path::PathBuf>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// Writes the notices of `users` into `dir` (the team's figures are all
/// its jobs', whatever `--user` and `--team` keep); returns how many.
fn write_notices(
    dir: &std::path::Path,
    all: &Jobs,
    users: &std::collections::BTreeSet<&str>,
    report: &ReportContext,
) -> Result<usize, Error> {
    let failed = |path: &std::path::Path, e: std::io::Error| -> Error {
        OutputError::File { path: path.to_path_buf(), source: Box::new(e) }.into()
    };
    std::fs::create_dir_all(dir).map_err(|e| failed(dir, e))?;
    let mut notices = notices(&all.rows, &all.thresholds, &report.period.label(), &report.config.currency);
    notices.retain(|n| users.contains(n.user.as_str()));
    for n in &notices {
        let path = dir.join(&n.file_name);
        apron_files::replace::write(&path, n.text.as_bytes()).map_err(|e| failed(&path, e))?;
    }
    Ok(notices.len())
}

/// Lists the jobs.
pub async fn run<W: Write>(global: &GlobalArgs, args: &JobsArgs, mut out: W) -> Result<(), Error> {
    let mut report = ReportContext::prepare_costs(global, &args.period).await?;
    let all = jobs(&report)?;
    let jobs = all.clone().only(args.user.as_deref(), args.team.as_deref());
    if let Some(dir) = &args.notices {
        let users: std::collections::BTreeSet<&str> = jobs.rows.iter().map(|r| r.user.as_str()).collect();
        let written = write_notices(dir, &all, &users, &report)?;
        report.header.push(format!("Notices: {written} written to {}", dir.display()));
    }
    let idle: f64 = jobs.rows.iter().map(|r| r.idle_cost).sum();
    let cost: f64 = jobs.rows.iter().map(|r| r.cost).sum();
    let money = |x| apron_reports::money(x, &report.config.currency);
    report.header.push(format!(
        "Jobs: {}, costing {}, of which {} idle",
        jobs.rows.len(),
        money(cost),
        money(idle)
    ));
    report.header.print(global.format, &mut out)?;
    write_rows(global.format, &Style::report(&report.config.currency), &jobs, out)?;
    Ok(())
}
