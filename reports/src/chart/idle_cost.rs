//! The idle-cost chart: what each team's idle GPU time cost, one
//! horizontal bar per team, largest at the top, each labelled with the
//! amount.

use std::path::Path;

use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::name::ChartName;
use super::palette::IDLE_HELD;
use super::rect::Rect;
use super::series::TeamCost;
use super::team_bars::{self, Segment};

/// Draws the idle-cost chart of `teams` into the PNG `out`. Amounts are in
/// `ctx.currency`. Past 20 teams the smallest are summed into one "N other
/// teams" bar; negative or non-finite amounts count as zero.
pub fn idle_cost(teams: &[TeamCost], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::IdleCost, ctx, out, |root| draw(teams, ctx, root))
}

/// Draws the chart on `root`; returns the plot rectangle, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    teams: &[TeamCost],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Rect>, DrawError> {
    let frame = frame::draw(root, ChartName::IdleCost, ctx, &[])?;
    let ranked = team_bars::ranked(teams, |t| t.idle_cost);
    if ranked.is_empty() {
        frame::no_data(root, &frame)?;
        return Ok(None);
    }
    let segments = [Segment { colour: IDLE_HELD, amount: |t| t.idle_cost }];
    let x_title = format!("Cost of idle GPU time ({})", ctx.currency);
    team_bars::draw(root, &frame, &ranked, &segments, &ctx.currency, &x_title).map(Some)
}
