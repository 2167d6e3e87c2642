//! The data series behind each chart, taken from the same figures as the
//! reports (`crate::report::figures`), and the chart drawn from them by
//! `apron_reports`. Nothing here runs SQL or reads a query result.
//!
//! Every function here takes a [`ReportContext`] with `minute_costs` registered
//! ([`ReportContext::with_costs`]); the series therefore use the report's period
//! and config.

use std::path::Path;

use apron_reports::{
    ChartContext, ChartName, FleetStatePoint, GpuDayCell, HourOfWeek, HourOfWeekCell, PowerPoint, TeamCost,
    WeekRun, WeekWindow,
};

use crate::error::{Error, InputError};
use crate::report::figures::idle_cost::IdleBy;
use crate::report::figures::idle_cost::{self, IdleCost};
use crate::report::figures::spend::{self, Spend};
use crate::report::figures::windows::{self, Profile};
use crate::report::figures::{self, ReportContext};

/// The bucket for a time chart of the period (`Period::chart_bucket_seconds`).
pub fn bucket_seconds(report: &ReportContext) -> i64 {
    report.period.chart_bucket_seconds()
}

/// The context every chart of `report` is drawn with.
pub fn context(report: &ReportContext) -> ChartContext {
    ChartContext::new(
        report.period.label(),
        report.session.layout().root().display().to_string(),
        report.config.currency.clone(),
    )
}

/// Draws chart `name` of `report` into `out` (a PNG).
pub async fn render(
    name: ChartName,
    report: &ReportContext,
    ctx: &ChartContext,
    out: &Path,
) -> Result<(), Error> {
    let drawn = match name {
        ChartName::FleetState => apron_reports::fleet_state(&fleet_state(report).await?, ctx, out),
        ChartName::IdleCost => apron_reports::idle_cost(&idle_by_team(report).await?, ctx, out),
        ChartName::TeamSpend => apron_reports::team_spend(&team_spend(report).await?, ctx, out),
        ChartName::HourOfWeek => apron_reports::hour_of_week(&hour_of_week(report).await?, ctx, out),
        ChartName::GpuDays => apron_reports::gpu_days(&gpu_days(report).await?, ctx, out),
        ChartName::Power => apron_reports::power(&power(report).await?, ctx, out),
        ChartName::JobTimeline => {
            return Err(InputError::Usage {
                message: "a job's timeline is drawn by `apron job ID --out DIR`".into(),
            }
            .into());
        }
    };
    drawn.map_err(Error::from)
}

/// `fleet-state`: mean GPUs busy, idle-held, idle-empty and unknown per bucket.
pub async fn fleet_state(report: &ReportContext) -> Result<Vec<FleetStatePoint>, Error> {
    figures::fleet_state::fleet_state(report, bucket_seconds(report)).await
}

/// `team-spend`: busy and idle cost per team, from `apron spend`.
pub async fn team_spend(report: &ReportContext) -> Result<Vec<TeamCost>, Error> {
    Ok(team_spend_of(&spend::spend(report).await?))
}

/// The `team-spend` series of `apron spend`'s rows.
pub fn team_spend_of(spend: &Spend) -> Vec<TeamCost> {
    spend
        .rows
        .iter()
        .map(|r| TeamCost { team: r.team.clone(), busy_cost: r.busy_cost, idle_cost: r.idle_cost })
        .collect()
}

/// `idle-cost`: idle cost per team, from `apron idle-cost --by team`.
pub async fn idle_by_team(report: &ReportContext) -> Result<Vec<TeamCost>, Error> {
    Ok(idle_by_team_of(&idle_cost::idle_cost(report, IdleBy::Team).await?))
}

/// The `idle-cost` series of `apron idle-cost --by team`'s rows.
pub fn idle_by_team_of(idle: &IdleCost) -> Vec<TeamCost> {
    idle.rows
        .iter()
        .map(|r| TeamCost { team: r.key.clone().unwrap_or_default(), busy_cost: 0.0, idle_cost: r.idle_cost })
        .collect()
}

/// `hour-of-week`: mean utilization per hour of the week, from `apron
/// windows`, with the recurring idle windows it reports by default.
pub async fn hour_of_week(report: &ReportContext) -> Result<HourOfWeek, Error> {
    Ok(hour_of_week_of(&windows::profile(report).await?))
}

/// The `hour-of-week` series of the `apron windows` profile: its cells and
/// the windows `apron windows` reports with its default thresholds
/// ([`windows::DEFAULT_MIN_IDLE_SHARE_PCT`], [`windows::DEFAULT_MIN_HOURS`]),
/// as the report states them.
pub fn hour_of_week_of(profile: &Profile) -> HourOfWeek {
    let cells = profile
        .cells
        .iter()
        .map(|c| HourOfWeekCell {
            dow: u32::try_from(c.day).unwrap_or(0),
            hour: u32::try_from(c.hour).unwrap_or(0),
            mean_util_pct: c.mean_util_pct,
        })
        .collect();
    let windows = profile
        .recurring_windows(windows::DEFAULT_MIN_IDLE_SHARE_PCT, windows::DEFAULT_MIN_HOURS)
        .into_iter()
        .map(|w| WeekWindow {
            label: w.window.label,
            runs: w
                .runs
                .iter()
                .map(|r| WeekRun {
                    start: u32::try_from(r.start).unwrap_or(0),
                    hours: u32::try_from(r.hours).unwrap_or(0),
                })
                .collect(),
        })
        .collect();
    HourOfWeek { cells, windows }
}

/// `gpu-days`: each physical GPU's busy share per UTC day, rows labelled
/// `host/index` (a MIG GPU's instances in its row, by their shares).
pub async fn gpu_days(report: &ReportContext) -> Result<Vec<GpuDayCell>, Error> {
    figures::gpu_days::gpu_days(report).await
}

/// `power`: mean fleet power per bucket and the energy since the start.
pub async fn power(report: &ReportContext) -> Result<Vec<PowerPoint>, Error> {
    figures::power::power(report, bucket_seconds(report)).await
}
