//! Horizontal team bars, shared by [`super::idle_cost`] and
//! [`super::team_spend`]: which teams are shown in what order, and the
//! bars themselves with the team names beside them and each bar's amount
//! at its end.
//!
//! Bars are ranked by the chart's measure, largest at the top. Past
//! [`MAX_BARS`] the smallest teams are summed into one "N other teams" bar
//! so names stay readable; the totals are unchanged. Amounts that are
//! negative or not finite count as zero. Horizontal bars keep long team
//! names level and readable however many teams there are. GPU time no
//! process held is named in words ([`crate::team_label`]), not by its key.

use plotters::chart::ChartBuilder;
use plotters::element::Rectangle;
use plotters::style::{Color, RGBColor};

use super::axis::{self, Ticked};
use super::canvas::{Area, DrawError};
use super::frame::{self, Frame};
use super::palette::{INK, TEXT};
use super::rect::Rect;
use super::series::TeamCost;
use super::text::{self, Align, Font, Line};
use crate::number::money_whole;
use crate::team::team_label;

/// Most bars a team chart draws, the "other teams" bar included (the
/// docs of `idle_cost` and `team_spend` say 20).
pub(super) const MAX_BARS: usize = 20;

/// One part of a bar: its colour and the amount it stands for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Segment {
    pub(super) colour: RGBColor,
    pub(super) amount: fn(&TeamCost) -> f64,
}

/// `teams` cleaned, ranked by `measure` (descending, then by name), with
/// the tail folded into one bar past [`MAX_BARS`].
pub(super) fn ranked(teams: &[TeamCost], measure: fn(&TeamCost) -> f64) -> Vec<TeamCost> {
    let ok = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    let mut out: Vec<TeamCost> = teams
        .iter()
        .map(|t| TeamCost { team: t.team.clone(), busy_cost: ok(t.busy_cost), idle_cost: ok(t.idle_cost) })
        .collect();
    out.sort_by(|a, b| measure(b).total_cmp(&measure(a)).then_with(|| a.team.cmp(&b.team)));
    if out.len() > MAX_BARS {
        let tail = out.split_off(MAX_BARS - 1);
        out.push(TeamCost {
            team: format!("{} other teams", tail.len()),
            busy_cost: tail.iter().map(|t| t.busy_cost).sum(),
            idle_cost: tail.iter().map(|t| t.idle_cost).sum(),
        });
    }
    out
}

/// Draws one bar per team of `ranked` (top to bottom), each made of
/// `segments` left to right and labelled with their sum in `currency`;
/// returns the plot rectangle.
pub(super) fn draw(
    root: &Area<'_>,
    frame: &Frame,
    ranked: &[TeamCost],
    segments: &[Segment],
    currency: &str,
    x_title: &str,
) -> Result<Rect, DrawError> {
    let n = ranked.len().max(1);
    let total = |t: &TeamCost| segments.iter().map(|s| (s.amount)(t)).sum::<f64>();
    let max = ranked.iter().map(total).fold(0.0, f64::max);

    let plot_height = frame.body.height() - axis::x_area(frame) - frame.px(8.0);
    let row = f64::from(plot_height) / n as f64;
    let tick = axis::tick_font(frame);
    let name_font = Font { size: tick.size.min(row * 0.7).max(frame.size(10.0)), ..tick };
    let names: Vec<String> =
        ranked.iter().map(|t| text::fit(team_label(&t.team), &name_font, frame.body.width() / 4)).collect();
    let widest_name = names.iter().map(|l| text::width(l, &name_font)).max().unwrap_or(0);
    let y_area = axis::y_area(frame, widest_name);

    // Leave room right of the longest bar for its amount.
    let value_font = Font::bold(name_font.size, INK);
    let value_room = f64::from(text::width(&money_whole(max, currency), &value_font) + frame.px(16.0));
    let plot_width = f64::from(frame.body.width() - y_area - frame.px(24.0));
    let needed =
        if plot_width > 2.0 * value_room { max * plot_width / (plot_width - value_room) } else { max * 2.0 };
    let x_ticks = axis::value_ticks(needed, 6);
    let x_max = x_ticks.last().copied().unwrap_or(1.0);

    let body = frame::body_area(root, frame);
    let mut chart = ChartBuilder::on(&body)
        .margin_top(frame.px(8.0))
        .margin_right(frame.px(24.0))
        .x_label_area_size(axis::x_area(frame))
        .y_label_area_size(y_area)
        .build_cartesian_2d(
            Ticked::new(0.0..x_max, x_ticks.clone()),
            Ticked::new(0.0..n as f64, Vec::new()),
        )?;
    let mut mesh = chart.configure_mesh();
    axis::style_mesh(&mut mesh, frame);
    mesh.disable_y_mesh().draw()?;

    // Rank 0 at the top: its band is n-1..n.
    let band = |rank: usize| (n - 1 - rank) as f64;
    for (rank, t) in ranked.iter().enumerate() {
        let (low, high) = (band(rank) + 0.18, band(rank) + 0.82);
        let mut from = 0.0;
        for segment in segments {
            let to = from + (segment.amount)(t);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(from, low), (to, high)],
                segment.colour.filled(),
            )))?;
            from = to;
        }
    }

    let plot = axis::plot_rect(chart.plotting_area().get_pixel_range());
    let font = Font { colour: TEXT, ..name_font };
    for (rank, (t, name)) in ranked.iter().zip(&names).enumerate() {
        let (_, y) = chart.backend_coord(&(0.0, band(rank) + 0.5));
        text::draw(root, name, &font, (plot.left - frame.px(12.0), y), Align::Right, Line::Middle)?;
        let (x, _) = chart.backend_coord(&(total(t), 0.0));
        let amount = money_whole(total(t), currency);
        text::draw(root, &amount, &value_font, (x + frame.px(8.0), y), Align::Left, Line::Middle)?;
    }
    let x_labels: Vec<_> =
        x_ticks.iter().map(|v| (chart.backend_coord(&(*v, 0.0)).0, money_whole(*v, currency))).collect();
    axis::x_labels(root, frame, plot, &x_labels)?;
    axis::titles(root, frame, plot, Some(x_title), Some("Team"), None)?;
    Ok(plot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(name: &str, busy: f64, idle: f64) -> TeamCost {
        TeamCost { team: name.to_owned(), busy_cost: busy, idle_cost: idle }
    }

    #[test]
    fn ranks_descending_and_cleans() {
        let got =
            ranked(&[team("a", 1.0, 5.0), team("b", f64::NAN, 9.0), team("c", 3.0, -1.0)], |t| t.idle_cost);
        let names: Vec<_> = got.iter().map(|t| t.team.as_str()).collect();
        assert_eq!(names, vec!["b", "a", "c"]);
        assert_eq!(got[0].busy_cost, 0.0);
        assert_eq!(got[2].idle_cost, 0.0);
    }

    #[test]
    fn folds_the_tail_into_other_teams() {
        let teams: Vec<_> = (0..30).map(|i| team(&format!("t{i:02}"), 0.0, f64::from(100 - i))).collect();
        let got = ranked(&teams, |t| t.idle_cost);
        assert_eq!(got.len(), MAX_BARS);
        assert_eq!(got[MAX_BARS - 1].team, "11 other teams");
        let total: f64 = got.iter().map(|t| t.idle_cost).sum();
        assert_eq!(total, teams.iter().map(|t| t.idle_cost).sum::<f64>());
    }
}
