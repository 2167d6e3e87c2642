//! The team-spend chart: each team's GPU spend as one horizontal bar, busy
//! time then idle time, largest total at the top, each labelled with its
//! total.

use std::path::Path;

use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::legend::{Entry, Swatch};
use super::name::ChartName;
use super::palette::{BUSY, IDLE_HELD};
use super::rect::Rect;
use super::series::TeamCost;
use super::team_bars::{self, Segment};

/// Draws the team-spend chart of `teams` into the PNG `out`, teams ranked
/// by total spend. Amounts are in `ctx.currency`. Past 20 teams the
/// smallest are summed into one "N other teams" bar; negative or
/// non-finite amounts count as zero.
pub fn team_spend(teams: &[TeamCost], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::TeamSpend, ctx, out, |root| draw(teams, ctx, root))
}

/// Draws the chart on `root`; returns the plot rectangle, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    teams: &[TeamCost],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Rect>, DrawError> {
    let legend = [Entry::new("Busy", Swatch::Fill(BUSY)), Entry::new("Idle", Swatch::Fill(IDLE_HELD))];
    let frame = frame::draw(root, ChartName::TeamSpend, ctx, &legend)?;
    let ranked = team_bars::ranked(teams, |t| t.busy_cost + t.idle_cost);
    if ranked.is_empty() {
        frame::no_data(root, &frame)?;
        return Ok(None);
    }
    let segments = [
        Segment { colour: BUSY, amount: |t| t.busy_cost },
        Segment { colour: IDLE_HELD, amount: |t| t.idle_cost },
    ];
    let x_title = format!("Cost of GPU time ({})", ctx.currency);
    team_bars::draw(root, &frame, &ranked, &segments, &ctx.currency, &x_title).map(Some)
}
