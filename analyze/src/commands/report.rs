//! `apron report --month YYYY-MM --out DIR`: the monthly report a manager
//! reads. One page (`index.html`, and `summary.md`) with the fleet's cost,
//! its idle cost and share, the teams with the most idle cost, zombies and
//! reclaim candidates, the change against the previous month, and every
//! chart; beside it each chart as a PNG and each table as a CSV.
//!
//! The figures are the same typed rows as `apron spend`, `idle-cost`,
//! `windows`, `zombies`, `reclaim` and `chart` print
//! ([`crate::report::figures`]); each table's CSV is built from the batch the
//! command prints. The page and the files are drawn by `apron_reports`.

use std::io::Write;
use std::path::{Path, PathBuf};

use apron_reports::{Assets, ChartName, CsvLines, Figure, NO_ONE, Section, TableData, grouped, team_label};
use chrono::{Datelike, NaiveDate};
use clap::Args;
use datafusion::arrow::array::{Array, ArrayRef, RecordBatch};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::{PeriodArgs, ReportWriteArgs};
use crate::commands::ReportContext;
use crate::error::{Error, OutputError, SessionError};
use crate::output::Rows;
use crate::report::charts;
use crate::report::figures::budgets::Budgets;
use crate::report::figures::idle_cost::IdleBy;
use crate::report::figures::{actions, events, idle_cost, jobs, reclaim, savings, spend, windows, zombies};
use crate::report::header::hours;
use crate::report::period::{self, Period};

/// `apron report --month YYYY-MM --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The UTC calendar month to report on, YYYY-MM.
    #[arg(long, value_name = "YYYY-MM", value_parser = period::parse_month)]
    pub month: NaiveDate,

    /// The folder to write the report into: a new or empty folder, or an
    /// earlier report's (whose files are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    /// Whether to replace other files, and whether to embed the charts.
    #[command(flatten)]
    pub write: ReportWriteArgs,
}

/// Rows shown of the long tables (zombies, reclaim candidates, GPUs); the
/// CSVs hold all of them.
const TOP_ROWS: usize = 25;

/// The headline of a report, for the terminal.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// The month, `November 2026`.
    pub month: String,
    /// The report's period.
    pub period: String,
    /// Fleet cost (currency).
    pub cost: f64,
    /// Of which idle.
    pub idle_cost: f64,
    /// Of which with no activity known (neither busy nor idle).
    pub unknown_cost: f64,
    /// Recorded GPU-hours.
    pub gpu_hours: f64,
    /// Of which with no activity known.
    pub unknown_gpu_hours: f64,
    /// The header's line on energy that was not measured, if any
    /// ([`crate::report::header::energy_unknown_line`]).
    pub energy_unknown: Option<String>,
    /// GPUs recorded.
    pub gpus: i64,
    /// Who held the GPUs whose idle time cost the most, at most three:
    /// (team, idle cost); "(unallocated)" is idle time no process or allocation held.
    pub top_idle_teams: Vec<(String, f64)>,
    /// Zombie processes holding memory on an idle GPU now (distinct
    /// processes), and those that did for the rule's length at some point
    /// in the period.
    pub zombies_now: usize,
    pub zombies_in_period: usize,
    /// GPU-hours zombies held idle past the rule (each GPU-minute once).
    pub zombie_gpu_hours: f64,
    /// The GPUs (and MIG instances) with at least one idle stretch of the
    /// reclaim length, in words: `3 GPUs and 2 MIG instances`.
    pub reclaim_units: String,
    /// GPU-hours in those stretches (a MIG instance's by its share of its
    /// GPU): capacity that could have been handed back.
    pub reclaim_hours: f64,
    /// The reclaim stretch length, as configured.
    pub reclaim_for: std::time::Duration,
    /// MIG slices no instance held, apart from reclaim (nobody holds them):
    /// GPU-hours and their cost (currency); zero without MIG.
    pub unused_mig: (f64, f64),
    /// The recurring idle windows, in words.
    pub windows: Vec<String>,
    /// The actions worth most money ([`actions::actions`]): what, worth, how.
    pub actions: Vec<(String, f64, String)>,
    /// What the actions that free capacity are worth together, each
    /// GPU-minute once (currency); `None` with fewer than two.
    pub together: Option<f64>,
    /// Capacity reclaiming and ending zombies by the config's rules would
    /// have freed, valued at cost (currency), and its GPU-hours.
    pub saved: f64,
    pub saved_gpu_hours: f64,
    /// Of it: held by someone, and already free, in words
    /// ([`savings::Savings::split_phrase`]); and the cash not spent
    /// ([`savings::Savings::cash_phrase`]).
    pub saved_split: String,
    pub saved_cash: String,
    /// The currency.
    pub currency: String,
    /// One line for each GPU model no `[[gpu_cost]]` entry priced
    /// ([`crate::report::header::Unpriced::line`]).
    pub unpriced: Vec<String>,
    /// The faults' line ([`events::Faults::summary_with_downtime`]);
    /// `None` when none was recorded.
    pub faults: Option<String>,
    /// The report's page.
    pub index: PathBuf,
}

impl Headline {
    /// The headline as the terminal shows it.
    pub fn lines(&self) -> Vec<String> {
        let money = |x| apron_reports::money(x, &self.currency);
        let idle_pct = if self.cost > 0.0 { 100.0 * self.idle_cost / self.cost } else { 0.0 };
        let mut lines = vec![
            format!("{}: {} GPUs, {} GPU-hours recorded", self.month, self.gpus, grouped(self.gpu_hours, 0)),
            format!("  fleet cost     {}", money(self.cost)),
            format!("  idle cost      {} ({idle_pct:.1}% of it)", money(self.idle_cost)),
        ];
        if self.unknown_gpu_hours > 0.0 {
            lines.push(format!(
                "  unknown        {} for {} GPU-hours with no activity known (neither busy nor idle)",
                money(self.unknown_cost),
                hours(self.unknown_gpu_hours)
            ));
        }
        if !self.top_idle_teams.is_empty() {
            let teams: Vec<String> =
                self.top_idle_teams.iter().map(|(t, c)| format!("{} {}", team_label(t), money(*c))).collect();
            lines.push(format!("  top idle cost  {}", teams.join(", ")));
        }
        lines.push(format!(
            "  zombies        {} holding memory on an idle GPU now ({} in the period, {} GPU-hours held idle past the rule)",
            match self.zombies_now {
                1 => "1 process".to_owned(),
                n => format!("{n} processes"),
            },
            self.zombies_in_period,
            hours(self.zombie_gpu_hours)
        ));
        lines.push(format!(
            "  reclaimable    {} GPU-hours on {}, in idle stretches of {} or more",
            hours(self.reclaim_hours),
            self.reclaim_units,
            humantime::format_duration(self.reclaim_for)
        ));
        if self.unused_mig.0 > 0.0 {
            lines.push(format!(
                "  unused MIG     {} GPU-hours ({}) in slices no MIG instance holds: the MIG layout's, not reclaimable",
                hours(self.unused_mig.0),
                money(self.unused_mig.1)
            ));
        }
        if let Some(w) = self.windows.first() {
            lines.push(format!("  idle window    {w}"));
        }
        lines.push(format!(
            "  would free     {} GPU-hours of capacity, worth {} at cost, by reclaiming idle GPUs and ending zombies:",
            hours(self.saved_gpu_hours),
            money(self.saved)
        ));
        lines.push(format!("                 {}", self.saved_split));
        lines.push(format!("                 {}", self.saved_cash));
        for (i, (what, worth, how)) in self.actions.iter().enumerate() {
            let label = if i == 0 { "  act first     " } else { "                " };
            lines.push(format!("{label}{}. {what}: {} ({how})", i + 1, money(*worth)));
        }
        if let Some(together) = self.together {
            lines.push(format!(
                "  together       {} (the actions that free capacity, each GPU-minute once)",
                money(together)
            ));
        }
        if let Some(faults) = &self.faults {
            lines.push(format!("  faults         {faults}"));
        }
        lines.extend(self.unpriced.iter().cloned());
        lines.extend(self.energy_unknown.iter().cloned());
        lines.push(format!("Report: {}", self.index.display()));
        lines
    }
}

/// Writes the report and prints where it is.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ReportArgs, mut out: W) -> Result<(), Error> {
    check_out_dir(&args.out, args.write.force)?;
    let headline = write_report(global, args.month, &args.out, assets(args.write.self_contained)).await?;
    for line in headline.lines() {
        writeln!(out, "{line}").map_err(|source| OutputError::Write { source })?;
    }
    Ok(())
}

/// How the page refers to its charts and CSVs: embedded with
/// `--self-contained`, else linked.
pub(crate) fn assets(self_contained: bool) -> Assets {
    if self_contained { Assets::Embedded } else { Assets::Linked }
}

/// Writes the report of `month` over `global.data` into `out_dir`, with a
/// progress bar on a terminal, and returns its headline. `assets` says
/// whether the page embeds its charts and CSVs or links them.
pub async fn write_report(
    global: &GlobalArgs,
    month: NaiveDate,
    out_dir: &Path,
    assets: Assets,
) -> Result<Headline, Error> {
    let progress = progress_bar();
    let step = |msg: &'static str| {
        tracing::debug!(step = msg, "report");
        progress.set_message(msg);
        progress.inc(1);
    };
    let period_args = PeriodArgs { month: Some(month), ..PeriodArgs::default() };
    step("reading the data");
    let report = ReportContext::prepare_costs(global, &period_args).await?;
    let figures = MonthFigures::compute(global, month, &report, &step).await?;

    std::fs::create_dir_all(out_dir)
        .map_err(|e| OutputError::ReportContext { path: out_dir.to_path_buf(), source: Box::new(e) })?;
    write_charts(&report, &figures, out_dir, &step).await?;

    let unpriced: Vec<String> = crate::report::header::unpriced(&report.config, &report.coverage)
        .iter()
        .map(|u| u.line(&report.config))
        .collect();
    let sections = sections(&report, &figures, month, &unpriced)?;

    step("writing the page");
    let bundle = apron_reports::Report {
        title: format!("GPU fleet report: {}", month_name(month)),
        period: report.period.label(),
        data: report.session.layout().root().display().to_string(),
        config: report.config.source.to_string(),
        currency: report.config.currency.clone(),
        headline: headline_figures(&report, &figures),
        sections,
    };
    apron_reports::write_bundle(&bundle, out_dir, assets)
        .map_err(|e| OutputError::ReportContext { path: out_dir.to_path_buf(), source: Box::new(e) })?;
    progress.finish_and_clear();
    Ok(headline(&report, figures, month, unpriced, out_dir))
}

/// The report's progress bar: the data, spend, idle cost, windows,
/// zombies, reclaim, the previous month, faults, each chart, the page.
fn progress_bar() -> ProgressBar {
    let steps = 8 + ChartName::ALL.len() as u64 + 1;
    let progress = ProgressBar::new(steps).with_style(
        ProgressStyle::with_template("{spinner} report [{bar:20}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    progress.enable_steady_tick(std::time::Duration::from_millis(120));
    progress
}

/// The figures of the month the page, the charts and the headline show,
/// each computed once.
struct MonthFigures {
    spend: spend::Spend,
    idle_teams: idle_cost::IdleCost,
    idle_gpus: idle_cost::IdleCost,
    profile: windows::Profile,
    /// The recurring idle windows, in words.
    window_lines: Vec<String>,
    zombies: zombies::Zombies,
    reclaim: reclaim::Reclaim,
    /// The month before's name and spend totals; `None` without data.
    previous: Option<(String, spend::Totals)>,
    savings: savings::Savings,
    actions: actions::Actions,
    /// The GPUs' faults, with the time they took.
    faults: events::Faults,
    /// The month's jobs, summed, and the costliest idle.
    jobs: JobsSummary,
}

/// What the report shows of the month's jobs: their count, idle cost and
/// findings, and the costliest idle ([`JOB_ROWS`]) as rows. The ledger
/// keeps every job (a month of thousands of GPUs has hundreds of thousands);
/// the report copies only those it shows.
struct JobsSummary {
    count: usize,
    idle_cost: f64,
    finding_counts: Vec<(&'static str, usize)>,
    /// The first [`JOB_ROWS`] jobs, the costliest idle first.
    top: jobs::Jobs,
}

impl JobsSummary {
    fn of(report: &ReportContext) -> Result<JobsSummary, Error> {
        let all = &report.ledger()?.jobs;
        let thresholds = report.config.jobs.clone();
        Ok(JobsSummary {
            count: all.len(),
            idle_cost: all.iter().map(|r| r.idle_cost).sum(),
            finding_counts: jobs::finding_counts(all, &thresholds),
            top: jobs::Jobs { rows: all.iter().take(JOB_ROWS).cloned().collect(), thresholds },
        })
    }
}

impl MonthFigures {
    /// Computes the figures over `report` (and the month before `month`),
    /// calling `step` as each part starts.
    async fn compute(
        global: &GlobalArgs,
        month: NaiveDate,
        report: &ReportContext,
        step: &dyn Fn(&'static str),
    ) -> Result<MonthFigures, Error> {
        let currency = &report.config.currency;
        step("spend per team");
        let spend = spend::spend(report).await?;
        step("idle cost");
        let idle_teams = idle_cost::idle_cost(report, IdleBy::Team).await?;
        let idle_gpus = idle_cost::idle_cost(report, IdleBy::Gpu).await?;
        step("idle windows");
        let profile = windows::profile(report).await?;
        let window_lines = profile
            .idle_windows(windows::DEFAULT_MIN_IDLE_SHARE_PCT, windows::DEFAULT_MIN_HOURS, currency)
            .sentences();
        // The costliest window's worth: its cron lines' GPUs' idle cost in it.
        let costliest = profile
            .recurring_windows(windows::DEFAULT_MIN_IDLE_SHARE_PCT, windows::DEFAULT_MIN_HOURS)
            .into_iter()
            .next();
        let window_worth = match &costliest {
            Some(w) => Some(windows::window_worth(
                &w.runs,
                &windows::gpu_weeks(report).await?,
                windows::DEFAULT_MIN_IDLE_SHARE_PCT,
            )),
            None => None,
        };
        step("zombies");
        let zombies = zombies::zombies(report)?;
        step("reclaim candidates");
        let reclaim = reclaim::reclaim(report)?;
        step("the previous month");
        let previous = previous_month(global, month).await?;
        step("faults");
        let mut faults = events::faults(report).await?;
        faults.add_downtime(&report.ledger()?.downtime);
        tracing::debug!(part = "jobs", "report");
        let jobs = JobsSummary::of(report)?;
        tracing::debug!(part = "savings", "report");
        let (reclaim_after, zombie_after) = (report.config.reclaim.idle_for, report.config.zombie.min_idle);
        let savings = savings::savings(report, &spend, reclaim_after, zombie_after)?;
        let month_arg = month.format("%Y-%m").to_string();
        let reclaimable_now: std::collections::BTreeSet<&str> =
            reclaim.rows.iter().filter(|r| r.still_idle).map(|r| r.gpu_uuid.as_str()).collect();
        tracing::debug!(part = "actions", "report");
        let actions = actions::actions(&actions::Findings {
            month: &month_arg,
            savings: &savings,
            zombies_now: zombies.processes_idle_now(),
            zombies_in_period: zombies.processes(),
            reclaimable_now: reclaimable_now.len(),
            window: costliest.as_ref().map(|w| &w.window).zip(window_worth.as_ref()),
            budgets: spend.budgets.as_ref(),
            currency,
        });
        Ok(MonthFigures {
            spend,
            idle_teams,
            idle_gpus,
            profile,
            window_lines,
            zombies,
            reclaim,
            previous,
            savings,
            actions,
            faults,
            jobs,
        })
    }
}

/// Draws every chart as a PNG into `out_dir`, calling `step` before each.
async fn write_charts(
    report: &ReportContext,
    figures: &MonthFigures,
    out_dir: &Path,
    step: &dyn Fn(&'static str),
) -> Result<(), Error> {
    let ctx = charts::context(report);
    for name in ChartName::ALL {
        step(chart_step(name));
        let out = out_dir.join(name.file_name());
        // The series the report has computed already are drawn as they are.
        match name {
            ChartName::TeamSpend => {
                apron_reports::team_spend(&charts::team_spend_of(&figures.spend), &ctx, &out)?
            }
            ChartName::IdleCost => {
                apron_reports::idle_cost(&charts::idle_by_team_of(&figures.idle_teams), &ctx, &out)?
            }
            ChartName::HourOfWeek => {
                apron_reports::hour_of_week(&charts::hour_of_week_of(&figures.profile), &ctx, &out)?
            }
            _ => charts::render(name, report, &ctx, &out).await?,
        }
    }
    Ok(())
}

/// The page's headline figures, with the change against the month before
/// where it has data.
fn headline_figures(report: &ReportContext, figures: &MonthFigures) -> Vec<Figure> {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    let totals = &figures.spend.totals;
    let change = |now: f64, before: Option<f64>| -> Option<String> {
        let (before, name) = (before?, figures.previous.as_ref()?.0.clone());
        if before <= 0.0 {
            return None;
        }
        Some(format!("{:+.1}% vs {name}", 100.0 * (now - before) / before))
    };
    let prev = figures.previous.as_ref().map(|(_, t)| *t);
    let idle_pct = totals.idle_pct();
    let zombies_now = figures.zombies.processes_idle_now();
    let zombie_count = figures.zombies.processes();
    let zombie_after = report.config.zombie.min_idle;
    vec![
        Figure {
            label: "Fleet cost".into(),
            value: money(totals.cost),
            change: change(totals.cost, prev.map(|p| p.cost)),
        },
        Figure {
            label: "Idle cost".into(),
            value: format!("{} ({idle_pct:.0}%)", money(totals.idle_cost)),
            change: change(totals.idle_cost, prev.map(|p| p.idle_cost)),
        },
        Figure {
            label: "GPU-hours recorded".into(),
            value: hours(totals.gpu_hours),
            change: change(totals.gpu_hours, prev.map(|p| p.gpu_hours)),
        },
        Figure {
            label: "Busy share of GPU time".into(),
            value: format!("{:.0}%", totals.busy_pct()),
            change: None,
        },
        Figure {
            label: "Zombies idle now (of the month's)".into(),
            value: format!("{zombies_now} of {zombie_count}"),
            change: None,
        },
        Figure {
            label: format!("GPU-hours zombies held idle past {}", humantime::format_duration(zombie_after)),
            value: hours(figures.savings.total.zombie_gpu_hours),
            change: None,
        },
        Figure {
            label: format!(
                "GPU-hours idle {}+ in a row",
                humantime::format_duration(report.config.reclaim.idle_for)
            ),
            value: hours(figures.reclaim.gpu_hours()),
            change: None,
        },
    ]
}

/// The page's sections in order, each with the table its command prints
/// (the budgets only when there are budgets).
fn sections(
    report: &ReportContext,
    figures: &MonthFigures,
    month: NaiveDate,
    unpriced: &[String],
) -> Result<Vec<Section>, Error> {
    let currency = &report.config.currency;
    // Each table is the batch its command prints.
    let printed = |rows: &dyn Rows| {
        rows.to_batch().map_err(|e| Error::from(SessionError::Execute { source: e.into() }))
    };
    let (spend_rows, idle_team_rows, idle_gpu_rows) =
        (printed(&figures.spend)?, printed(&figures.idle_teams)?, printed(&figures.idle_gpus)?);
    // The budget columns only when there are budgets (their own section).
    let spend_rows =
        if figures.spend.budgets.is_some() { spend_rows } else { without_budget_columns(&spend_rows)? };
    let savings_rows = printed(&figures.savings)?;
    let (zombie_rows, reclaim_rows) = (printed(&figures.zombies)?, printed(&figures.reclaim)?);

    let mut sections = vec![actions_section(&figures.actions, currency)];
    if let Some(b) = &figures.spend.budgets {
        sections.push(budgets_section(b, &printed(b)?, currency));
    }
    sections.extend([
        spend_section(report, figures, month, &spend_rows),
        idle_teams_section(report, figures, &idle_team_rows),
        fleet_state_section(report, figures),
        windows_section(figures),
        gpu_days_section(&idle_gpu_rows),
        zombies_section(report, figures, &zombie_rows),
        reclaim_section(report, figures, &reclaim_rows),
        savings_section(report, figures, month, &savings_rows),
    ]);
    if figures.jobs.count > 0 {
        sections.push(jobs_section(report, &figures.jobs, &printed(&figures.jobs.top)?));
    }
    if !figures.faults.rows.is_empty() {
        sections.push(health_section(report, &figures.faults, &printed(&figures.faults)?));
    }
    sections.push(power_section(report, figures));
    sections.push(about_section(report, unpriced));
    Ok(sections)
}

/// Each team's spend against its budget, or its forecast.
fn budgets_section(budgets: &Budgets, rows: &RecordBatch, currency: &str) -> Section {
    Section {
        heading: "Budgets".into(),
        paragraphs: budgets
            .rows
            .iter()
            .map(|r| r.sentence(currency, budgets.over))
            .chain(std::iter::once(if budgets.over {
                "Each team's spend in the month against its budget_per_month.".to_owned()
            } else {
                "The forecast assumes the rest of the month goes as the month so far went, \
                 hour of the week by hour of the week."
                    .to_owned()
            }))
            .collect(),
        table: Some(table("budgets", rows, usize::MAX)),
        chart: None,
    }
}

/// What each team's GPU time cost, against the month before.
fn spend_section(
    report: &ReportContext,
    figures: &MonthFigures,
    month: NaiveDate,
    rows: &RecordBatch,
) -> Section {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    let totals = &figures.spend.totals;
    let month_name = month_name(month);
    let previous_paragraph = match &figures.previous {
        Some((name, p)) => format!(
            "Against {name}: fleet cost {} (was {}), idle cost {} (was {}).",
            money(totals.cost),
            money(p.cost),
            money(totals.idle_cost),
            money(p.idle_cost)
        ),
        None => format!("There is no data for the month before {month_name} to compare with."),
    };
    Section {
        heading: "Spend by team".into(),
        paragraphs: vec![
            format!(
                "The fleet of {} GPUs cost {} in {month_name}; {} of it ({:.1}%) paid for GPUs that sat idle.",
                report.coverage.gpus,
                money(totals.cost),
                money(totals.idle_cost),
                totals.idle_pct()
            ),
            previous_paragraph,
            format!(
                "A team's cost is its processes' share of each GPU-minute they held (by memory held × time), and \
                 of a minute no process ran in, its pods' and jobs' share of the GPUs the cluster allocated to them. \
                 \"{NO_ONE}\" is GPU time no process or allocation held (\"(unallocated)\" in the CSV files); \
                 \"unassigned\" is processes and allocations no team rule in the config claims."
            ),
        ],
        table: Some(table("spend", rows, usize::MAX)),
        chart: Some(ChartName::TeamSpend),
    }
}

/// Who held the GPUs whose idle time cost the most.
fn idle_teams_section(report: &ReportContext, figures: &MonthFigures, rows: &RecordBatch) -> Section {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    let top_idle_teams = figures.idle_teams.top(3);
    Section {
        heading: "Idle cost by team".into(),
        paragraphs: vec![if top_idle_teams.is_empty() {
            "No GPU sat idle.".to_owned()
        } else {
            format!(
                "Who held the GPUs whose idle time cost the most: {}. \"{NO_ONE}\" is idle time with no process on \
                 the GPU: capacity nobody used, not a team's.",
                top_idle_teams
                    .iter()
                    .map(|(t, c)| format!("{} ({})", team_label(t), money(*c)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }],
        table: Some(table("idle-cost-by-team", rows, usize::MAX)),
        chart: Some(ChartName::IdleCost),
    }
}

/// How many GPUs were busy, idle-held, idle-empty (and unknown) on average.
fn fleet_state_section(report: &ReportContext, figures: &MonthFigures) -> Section {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    let totals = &figures.spend.totals;
    let mean = totals.mean_gpus(report.period.elapsed_hours(i64::MAX));
    Section {
        heading: "Busy and idle GPUs over the month".into(),
        paragraphs: vec![format!(
            "On average {:.1} GPUs were busy, {:.1} idle while a process held memory on them, and {:.1} idle and empty{}.",
            mean.busy,
            mean.idle_held,
            mean.idle_empty,
            if totals.unknown_gpu_hours > 0.0 {
                format!(
                    "; {:.1} reported no activity (neither utilization nor SM activity), {} of cost, counted neither busy nor idle",
                    mean.unknown,
                    money(totals.unknown_cost)
                )
            } else {
                String::new()
            }
        )],
        table: None,
        chart: Some(ChartName::FleetState),
    }
}

/// The recurring idle windows, in words.
fn windows_section(figures: &MonthFigures) -> Section {
    Section {
        heading: "When the fleet sits idle".into(),
        paragraphs: if figures.window_lines.is_empty() {
            vec!["No hour of the week was 60% idle or more for 2 hours in a row.".into()]
        } else {
            let mut p = vec!["Recurring idle windows (hours of the week, UTC, at least 60% of GPU time idle; outlined on the chart):".to_owned()];
            p.extend(figures.window_lines.iter().cloned());
            p
        },
        table: None,
        chart: Some(ChartName::HourOfWeek),
    }
}

/// Each GPU's busy share per day, and the GPUs whose idle time cost most.
fn gpu_days_section(idle_gpu_rows: &RecordBatch) -> Section {
    Section {
        heading: "Every GPU, every day".into(),
        paragraphs: vec![format!(
            "The busy share of each physical GPU's time per day (a MIG GPU's instances each counted by their \
             share of it), and the GPUs whose idle time cost the most:"
        )],
        table: Some(picked(
            "idle-cost-by-gpu",
            idle_gpu_rows,
            &[
                "host",
                "gpu_index",
                "idle_gpu_hours",
                "idle_held_gpu_hours",
                "idle_empty_gpu_hours",
                "idle_cost",
                "gpu_uuid",
            ],
            TOP_ROWS,
        )),
        chart: Some(ChartName::GpuDays),
    }
}

/// The processes that held memory on an idle GPU.
fn zombies_section(report: &ReportContext, figures: &MonthFigures, rows: &RecordBatch) -> Section {
    let zombie_count = figures.zombies.processes();
    let zombies_now = figures.zombies.processes_idle_now();
    Section {
        heading: "Zombies".into(),
        paragraphs: vec![
            format!(
                "Processes that held at least {} MiB of GPU memory while their GPU sat idle for {} or more: {zombie_count} \
                 in the month, of which {zombies_now} still do at the data's last minute. \
                 Most memory × time first; a process idle in several stretches has a row for each.",
                report.config.zombie.min_mem_mib,
                humantime::format_duration(report.config.zombie.min_idle)
            ),
            "\"Still running\": the process is on its GPU at the data's last minute. \"Still idle\": its GPU is \
             still idle then, so it holds memory on an idle GPU now: a zombie to stop. A process still running \
             but not still idle paused once and went back to work."
                .to_owned(),
        ],
        table: Some(picked(
            "zombies",
            rows,
            &[
                "host",
                "gpu_index",
                "user",
                "team",
                "comm",
                "pid",
                "used_mem_bytes",
                "idle_since",
                "idle_minutes",
                "still_running",
                "still_idle",
                "gpu_uuid",
                "proc_start",
            ],
            TOP_ROWS,
        )),
        chart: None,
    }
}

/// The GPUs idle for the reclaim length in a row, and MIG slices nobody holds.
fn reclaim_section(report: &ReportContext, figures: &MonthFigures, rows: &RecordBatch) -> Section {
    let reclaim = &figures.reclaim;
    Section {
        heading: "Reclaim candidates".into(),
        paragraphs: std::iter::once(format!(
            "Idle for {} or more in a row: {}, in {} stretches of {} GPU-hours in all \
             (idle_gpu_hours: a MIG instance's hours counted by its share of its GPU; idle_minutes: \
             how long the stretch lasted), longest first.",
            humantime::format_duration(report.config.reclaim.idle_for),
            reclaim.units(),
            reclaim.rows.len(),
            hours(reclaim.gpu_hours())
        ))
        .chain(reclaim.unpartitioned_sentences(&report.config.currency).into_iter().map(|s| {
            format!(
                "Not a candidate, apart: {s}. Nobody holds that capacity; the MIG layout leaves it \
                 unused (make an instance of it, or change the layout, to use it)."
            )
        }))
        .collect(),
        table: Some(picked(
            "reclaim",
            rows,
            &[
                "host",
                "gpu_index",
                "idle_since",
                "idle_gpu_hours",
                "idle_minutes",
                "held_by",
                "allocated_to",
                "allocated_since",
                "still_idle",
                "gpu_uuid",
            ],
            TOP_ROWS,
        )),
        chart: None,
    }
}

/// What reclaiming and ending zombies by the config's rules would free.
fn savings_section(
    report: &ReportContext,
    figures: &MonthFigures,
    month: NaiveDate,
    rows: &RecordBatch,
) -> Section {
    let currency = &report.config.currency;
    let money = |x: f64| apron_reports::money(x, currency);
    let savings = &figures.savings;
    let (reclaim_after, zombie_after) = (report.config.reclaim.idle_for, report.config.zombie.min_idle);
    Section {
        heading: "What acting would free".into(),
        paragraphs: vec![
            format!(
                "Had GPUs been reclaimed after {} idle and zombies ended after {}, {} GPU-hours of capacity \
                 would have been freed, worth {} at cost: {:.1}% of the {} idle cost. Reclaiming alone: {}; \
                 ending zombies alone: {} (each GPU-minute counted once in the total).",
                humantime::format_duration(reclaim_after),
                humantime::format_duration(zombie_after),
                hours(savings.total.freed_gpu_hours),
                money(savings.total.freed_cost),
                savings.total.of_idle_pct().unwrap_or(0.0),
                money(savings.total.idle_cost),
                money(savings.total.reclaim_cost),
                money(savings.total.zombie_cost)
            ),
            format!(
                "Capacity is not cash. Of it, {}. Then {}.",
                savings.split_phrase(currency),
                savings.cash_phrase(currency)
            ),
            format!(
                "Other rules: apron savings --month {} --reclaim-after 4h --zombie-after 1h",
                month.format("%Y-%m")
            ),
        ],
        table: Some(table("savings", rows, usize::MAX)),
        chart: None,
    }
}

/// Jobs shown and written in the report: the costliest idle (`apron jobs`
/// lists them all).
const JOB_ROWS: usize = 10;

/// The jobs whose idle time cost most, and how many have each finding.
fn jobs_section(report: &ReportContext, jobs: &JobsSummary, rows: &RecordBatch) -> Section {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    let top: f64 = jobs.top.rows.iter().map(|r| r.idle_cost).sum();
    let counts: Vec<String> = jobs.finding_counts.iter().map(|(kind, n)| format!("{kind}: {n}")).collect();
    Section {
        heading: "Jobs".into(),
        paragraphs: vec![
            format!(
                "{} jobs held GPUs this month (a Slurm job, else a pod, else a container, else a process); their idle \
                 time cost {}, of which the {} below {}. Jobs by finding: {}.",
                jobs.count,
                money(jobs.idle_cost),
                jobs.top.rows.len(),
                money(top),
                counts.join(", ")
            ),
            "Each job's share of the GPU-minutes it held, priced as its team's spend; its grade is by mean activity \
             (A 70% or more, B 50, C 30, D 10, F under 10). apron jobs lists them all, with --user or --team."
                .to_owned(),
        ],
        table: Some(picked(
            "jobs",
            rows,
            &[
                "job",
                "user",
                "team",
                "gpu_count",
                "gpu_hours",
                "cost",
                "idle_cost",
                "idle_share_pct",
                "activity_pct",
                "peak_mem_pct",
                "grade",
                "findings",
            ],
            JOB_ROWS,
        )),
        chart: None,
    }
}

/// The GPUs' faults: what happened, which GPUs to drain, and the time
/// faults took (only when some fault was recorded).
fn health_section(report: &ReportContext, faults: &events::Faults, rows: &RecordBatch) -> Section {
    let currency = &report.config.currency;
    let mut paragraphs = vec![format!("{}.", faults.headline())];
    paragraphs.push(match faults.downtime_phrase(currency) {
        Some(took) => format!(
            "Of the GPUs' time, {took}. A fault that takes a GPU out of service (an XID NVIDIA calls fatal, a \
             double-bit ECC error, a GPU that stopped answering, a row remapping pending or failed) takes it \
             from the start of the fault's minute until the GPU next did work (its first busy minute after \
             it), or the end of the month's data: time it may have sat broken, then waited for a repair and for work. \
             Those minutes stay in the figures above as they were recorded (idle or unknown); the unrecorded \
             ones, while it did not answer, are priced here at the GPU's rate."
        ),
        None => "No fault took a GPU out of service.".to_owned(),
    });
    paragraphs.push(
        "Each GPU's faults, the latest first, with what each means and the action it calls for (NVIDIA's XID \
         catalogue for XIDs); the processes on the GPU at the last one are whose work it hit. \
         apron events --drain lists the GPUs to drain; re-check a GPU before draining it."
            .to_owned(),
    );
    Section {
        heading: "Health".into(),
        paragraphs,
        table: Some(picked(
            "faults",
            rows,
            &[
                "host",
                "gpu_index",
                "fault",
                "action",
                "drain",
                "events",
                "first_at",
                "last_at",
                "down_gpu_hours",
                "down_cost",
                "still_down",
                "on_gpu",
                "gpu_uuid",
            ],
            TOP_ROWS,
        )),
        chart: None,
    }
}

/// The energy the GPUs drew, with the data centre's overhead.
fn power_section(report: &ReportContext, figures: &MonthFigures) -> Section {
    let energy_kwh = figures.spend.totals.energy_kwh;
    Section {
        heading: "Power and energy".into(),
        paragraphs: vec![format!(
            "The GPUs drew {} kWh ({} with the data centre's overhead, PUE {}).",
            hours(energy_kwh),
            hours(energy_kwh * report.config.energy.pue),
            report.config.energy.pue
        )],
        table: None,
        chart: Some(ChartName::Power),
    }
}

/// What was recorded, how a GPU-minute is judged and priced, the config and
/// data read, and what is unknown or unpriced.
fn about_section(report: &ReportContext, unpriced: &[String]) -> Section {
    let money = |x: f64| apron_reports::money(x, &report.config.currency);
    Section {
        heading: "About these figures".into(),
        paragraphs: vec![
            format!(
                "Recorded: {} GPU-hours; unrecorded: {} GPU-hours, which are not counted as idle.",
                grouped(report.coverage.recorded_hours, 1),
                grouped(report.coverage.unrecorded_hours, 1)
            ),
            format!(
                "A GPU-minute is idle when its mean utilization (else its mean SM activity) is under {}%; with neither \
                 known it is unknown, never idle. Its cost is its share of the GPU's price \
                 written off over its lifetime, its operating cost, and its energy at {} per kWh × PUE {}.",
                report.config.idle.threshold_pct,
                money(report.config.energy.price_per_kwh),
                report.config.energy.pue
            ),
            format!("Config: {}. Data: {}.", report.config.source, report.session.layout().root().display()),
        ]
        .into_iter()
        .chain(crate::report::header::energy_unknown_line(report.energy_unknown_hours))
        .chain(unpriced.iter().cloned())
        .collect(),
        table: None,
        chart: None,
    }
}

/// The report's headline for the terminal.
fn headline(
    report: &ReportContext,
    figures: MonthFigures,
    month: NaiveDate,
    unpriced: Vec<String>,
    out_dir: &Path,
) -> Headline {
    let currency = report.config.currency.clone();
    let totals = figures.spend.totals;
    let savings = &figures.savings;
    let reclaim = &figures.reclaim;
    Headline {
        month: month_name(month),
        period: report.period.label(),
        cost: totals.cost,
        idle_cost: totals.idle_cost,
        unknown_cost: totals.unknown_cost,
        gpu_hours: totals.gpu_hours,
        unknown_gpu_hours: totals.unknown_gpu_hours,
        energy_unknown: crate::report::header::energy_unknown_line(report.energy_unknown_hours),
        gpus: report.coverage.gpus,
        top_idle_teams: figures.idle_teams.top(3),
        zombies_now: figures.zombies.processes_idle_now(),
        zombies_in_period: figures.zombies.processes(),
        zombie_gpu_hours: savings.total.zombie_gpu_hours,
        reclaim_units: reclaim.units(),
        reclaim_hours: reclaim.gpu_hours(),
        reclaim_for: report.config.reclaim.idle_for,
        unused_mig: reclaim.unpartitioned.iter().fold((0.0, 0.0), |(h, c), u| (h + u.gpu_hours, c + u.cost)),
        windows: figures.window_lines,
        actions: figures.actions.shown.iter().map(|a| (a.what.clone(), a.worth, a.how.clone())).collect(),
        together: figures.actions.together.as_ref().map(|t| t.worth),
        saved: savings.total.freed_cost,
        saved_gpu_hours: savings.total.freed_gpu_hours,
        saved_split: savings.split_phrase(&currency),
        saved_cash: savings.cash_phrase(&currency),
        faults: (!figures.faults.rows.is_empty()).then(|| figures.faults.summary_with_downtime(&currency)),
        currency,
        unpriced,
        index: out_dir.join("index.html"),
    }
}

/// The report's first section: the actions worth most money, and those
/// that free capacity together.
fn actions_section(actions: &actions::Actions, currency: &str) -> Section {
    let shown = &actions.shown;
    let mut rows: Vec<Vec<String>> = shown
        .iter()
        .map(|a| vec![a.what.clone(), format!("{:.2}", a.worth), a.because.clone(), a.how.clone()])
        .collect();
    let mut numbers: Vec<Vec<Option<f64>>> =
        shown.iter().map(|a| vec![None, Some(a.worth), None, None]).collect();
    if let Some(t) = &actions.together {
        rows.push(vec![
            "Together: the actions that free capacity".to_owned(),
            format!("{:.2}", t.worth),
            t.because.clone(),
            String::new(),
        ]);
        numbers.push(vec![None, Some(t.worth), None, None]);
    }
    let budget_note = if shown.iter().any(|a| !a.kind.frees_capacity()) {
        " A budget's overrun is spend, not capacity: it is not in the total."
    } else {
        ""
    };
    Section {
        heading: "Actions worth most this month".into(),
        paragraphs: vec![if shown.is_empty() {
            "Nothing to act on: no idle stretch, zombie, idle window or budget overrun was worth money this month."
                .to_owned()
        } else {
            format!(
                "What each action alone would have freed in the month's data (GPU time valued at cost, in {currency}; \
                 not cash: see What acting would free), most first, and the command that lists what to act on. \
                 Two actions can free the same GPU-minute, so they do not add up: the last row counts each once.{budget_note} \
                 apron does none of it itself."
            )
        }],
        table: (!shown.is_empty()).then(|| TableData {
            name: "actions".into(),
            columns: ["action", "worth", "because", "how"].map(str::to_owned).to_vec(),
            shown: None,
            rows,
            numbers,
            rest: CsvLines::new(),
        }),
        chart: None,
    }
}

/// `spend`'s printed rows without the budget columns.
fn without_budget_columns(batch: &RecordBatch) -> Result<RecordBatch, Error> {
    let schema = batch.schema();
    let keep: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| !["budget", "budget_used_pct", "forecast"].contains(&schema.field(i).name().as_str()))
        .collect();
    batch.project(&keep).map_err(|e| SessionError::Execute { source: e.into() }.into())
}

/// Whether a report may be written into `out_dir`: a new or empty folder,
/// or an earlier report's ([`apron_reports::MARKER`]), or any folder with
/// `force`. Anything else is [`OutputError::OutDirNotEmpty`], so `--out /` or
/// `--out ~` never scatters files among someone's own. Checked before
/// anything is computed or written.
pub(crate) fn check_out_dir(out_dir: &Path, force: bool) -> Result<(), Error> {
    use apron_reports::OutDirState;
    let state = apron_reports::out_dir_state(out_dir)
        .map_err(|e| OutputError::ReportContext { path: out_dir.to_path_buf(), source: Box::new(e) })?;
    match state {
        OutDirState::Missing | OutDirState::Empty | OutDirState::Report => Ok(()),
        OutDirState::Other if force => Ok(()),
        OutDirState::Other => {
            Err(OutputError::OutDirNotEmpty { path: out_dir.to_path_buf(), marker: apron_reports::MARKER }
                .into())
        }
        OutDirState::NotAFolder => Err(OutputError::ReportContext {
            path: out_dir.to_path_buf(),
            source: "it exists and is not a folder".into(),
        }
        .into()),
    }
}

/// `November 2026`.
fn month_name(month: NaiveDate) -> String {
    month.format("%B %Y").to_string()
}

fn chart_step(name: ChartName) -> &'static str {
    match name {
        ChartName::FleetState => "chart fleet-state",
        ChartName::IdleCost => "chart idle-cost",
        ChartName::TeamSpend => "chart team-spend",
        ChartName::HourOfWeek => "chart hour-of-week",
        ChartName::GpuDays => "chart gpu-days",
        ChartName::Power => "chart power",
        ChartName::JobTimeline => "chart job-timeline",
    }
}

/// The spend totals of the month before `month`, with its name; `None`
/// when it has no data.
async fn previous_month(
    global: &GlobalArgs,
    month: NaiveDate,
) -> Result<Option<(String, spend::Totals)>, Error> {
    let Some(before) = Period::previous_month(month) else { return Ok(None) };
    let args = PeriodArgs { month: Some(before), ..PeriodArgs::default() };
    let Some(report) = ReportContext::prepare_costs_if_any(global, &args).await? else { return Ok(None) };
    let totals = spend::spend(&report).await?.totals;
    let name = if before.year() == month.year() { before.format("%B") } else { before.format("%B %Y") };
    Ok(Some((name.to_string(), totals)))
}

/// One cell as the CSV holds it: as `--format csv` prints it (numbers as
/// the command computed them, times in RFC 3339 to the millisecond), null
/// as empty, so a report's CSV and the command's agree cell for cell. The
/// page and the summary show it by its column's kind
/// ([`apron_reports::COLUMNS`]): `$1,234.56`, `1,234.5`, `2026-11-02 10:05`.
/// A column that is not there, or that cannot be shown, has empty cells.
struct Cells<'a> {
    column: Option<(&'a dyn Array, ArrayFormatter<'a>)>,
}

impl<'a> Cells<'a> {
    fn of(column: Option<&'a ArrayRef>) -> Cells<'a> {
        let column = column.and_then(|c| {
            let f = ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default()).ok()?;
            Some((c.as_ref(), f))
        });
        Cells { column }
    }

    /// Row `i`'s cell, written into `out` (emptied first).
    fn write(&self, i: usize, out: &mut String) {
        use std::fmt::Write as _;
        out.clear();
        if let Some((column, f)) = &self.column
            && column.is_valid(i)
        {
            let _ = write!(out, "{}", f.value(i));
        }
    }

    fn get(&self, i: usize) -> String {
        let mut out = String::new();
        self.write(i, &mut out);
        out
    }
}

/// The columns `picks` of `batch`, in that order, as a table named `name`,
/// the page showing at most `shown` rows: a reader's choice of the
/// command's columns, with their names and units.
fn picked(name: &str, batch: &RecordBatch, picks: &[&str], shown: usize) -> TableData {
    let columns: Vec<Cells<'_>> =
        picks.iter().map(|source| Cells::of(batch.column_by_name(source))).collect();
    let numbers = shown_numbers(batch, picks.iter().map(|source| batch.column_by_name(source)), shown);
    cells_table(
        name,
        picks.iter().map(|p| (*p).to_owned()).collect(),
        &columns,
        batch.num_rows(),
        shown,
        numbers,
    )
}

/// `batch` as a table named `name` (its CSV's stem), the page showing at
/// most `shown` rows.
fn table(name: &str, batch: &RecordBatch, shown: usize) -> TableData {
    let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    let columns: Vec<Cells<'_>> = batch.columns().iter().map(|c| Cells::of(Some(c))).collect();
    let numbers = shown_numbers(batch, batch.columns().iter().map(Some), shown);
    cells_table(name, names, &columns, batch.num_rows(), shown, numbers)
}

/// The table of `columns`' `n` rows: the first `shown` cell by cell, for
/// the page, and the rest as the lines of its CSV. A month of thousands of
/// GPUs has hundreds of thousands of zombie and reclaim rows: as a string
/// per cell they took some 250 MB of the report's peak.
fn cells_table(
    name: &str,
    names: Vec<String>,
    columns: &[Cells<'_>],
    n: usize,
    shown: usize,
    numbers: Vec<Vec<Option<f64>>>,
) -> TableData {
    let held = shown.min(n);
    let rows = (0..held).map(|i| columns.iter().map(|c| c.get(i)).collect()).collect();
    let mut rest = CsvLines::new();
    let mut cells = vec![String::new(); columns.len()];
    for i in held..n {
        for (c, cell) in columns.iter().zip(cells.iter_mut()) {
            c.write(i, cell);
        }
        rest.push(cells.iter().map(String::as_str));
    }
    TableData {
        name: name.to_owned(),
        columns: names,
        rows,
        numbers,
        shown: (shown < n).then_some(shown),
        rest,
    }
}

/// The numbers of the first `shown` rows of `batch` in `columns` (a column
/// `None`: no numbers), row by row: the page and the summary format those
/// rows' numbers; the CSV, which holds every row, takes their text.
fn shown_numbers<'a>(
    batch: &RecordBatch,
    columns: impl Iterator<Item = Option<&'a ArrayRef>>,
    shown: usize,
) -> Vec<Vec<Option<f64>>> {
    let n = shown.min(batch.num_rows());
    let by_column: Vec<Vec<Option<f64>>> =
        columns.map(|c| c.map_or_else(Vec::new, |c| numbers(c.slice(0, n).as_ref()))).collect();
    (0..n).map(|i| by_column.iter().map(|c| c.get(i).copied().flatten()).collect()).collect()
}

/// The number in each cell of `column` (`None` for null, or every cell of
/// a column that is not numbers: text, times, flags), as the batch holds
/// it: the page formats these, not the cells' text.
fn numbers(column: &dyn Array) -> Vec<Option<f64>> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{DataType, Float64Type};
    let floats = if column.data_type().is_numeric() { cast(column, &DataType::Float64).ok() } else { None };
    match floats {
        Some(floats) => floats.as_primitive::<Float64Type>().iter().collect(),
        None => vec![None; column.len()],
    }
}
