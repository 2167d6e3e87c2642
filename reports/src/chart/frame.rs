//! What every chart has around its plot: the title, the legend row, the
//! footer with period and data folder, and the "no data" placeholder.
//!
//! The frame lays these out from the canvas size and hands the chart the
//! rectangle left for its plot (the body). Sizes scale with the canvas:
//! `s` is 1.0 at 1600x900.

use plotters::element::{PathElement, Rectangle};
use plotters::style::Color;

use super::canvas::{Area, DrawError, DrawResult};
use super::context::ChartContext;
use super::legend::{self, Entry};
use super::name::ChartName;
use super::palette::{AXIS, GRID, INK, MUTED};
use super::rect::Rect;
use super::text::{self, Align, Font, Line};

/// The drawn frame: where the chart's plot goes, and the scale.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    /// The space for the plot with its axes, in canvas pixels.
    pub(super) body: Rect,
    /// Size factor: 1.0 at 1600x900.
    pub(super) s: f64,
}

impl Frame {
    /// `px` pixels at 1600x900, scaled to this canvas.
    pub(super) fn px(&self, px: f64) -> i32 {
        (px * self.s).round() as i32
    }

    /// A font size of `px` pixels at 1600x900, scaled to this canvas.
    pub(super) fn size(&self, px: f64) -> f64 {
        px * self.s
    }
}

/// Draws the title, the legend row (when `legend` is not empty) and the
/// footer of `chart` on `root`, and returns the space left for the plot.
pub(super) fn draw(
    root: &Area<'_>,
    chart: ChartName,
    ctx: &ChartContext,
    legend: &[Entry],
) -> Result<Frame, DrawError> {
    draw_titled(root, chart.title(), ctx, legend)
}

/// [`draw`] with a title of the caller's (a chart of one job's GPU names them).
pub(super) fn draw_titled(
    root: &Area<'_>,
    title: &str,
    ctx: &ChartContext,
    legend: &[Entry],
) -> Result<Frame, DrawError> {
    let (w, h) = root.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    let s = (f64::from(w) / 1600.0).min(f64::from(h) / 900.0);
    let px = |v: f64| (v * s).round() as i32;
    let margin = px(40.0);

    let title_font = Font::bold(36.0 * s, INK);
    let title = text::fit(title, &title_font, w - 2 * margin);
    text::draw(root, &title, &title_font, (margin, px(26.0)), Align::Left, Line::Top)?;

    let mut top = px(80.0);
    if !legend.is_empty() {
        legend::draw(root, legend, (margin, px(92.0)), s)?;
        top = px(116.0);
    }

    let rule = h - px(46.0);
    root.draw(&PathElement::new(vec![(margin, rule), (w - margin, rule)], GRID.stroke_width(1)))?;
    let footer_font = Font::regular(18.0 * s, MUTED);
    let footer = format!("Period: {} · Data: {}", ctx.period, ctx.data);
    let footer = text::fit(&footer, &footer_font, w - 2 * margin);
    text::draw(root, &footer, &footer_font, (margin, h - px(23.0)), Align::Left, Line::Middle)?;

    let body = Rect { left: margin, top, right: w - margin, bottom: rule - px(8.0) };
    Ok(Frame { body, s })
}

/// Fills the body with the empty-period placeholder: a light outline and
/// "no data in this period" in the middle.
pub(super) fn no_data(root: &Area<'_>, frame: &Frame) -> DrawResult {
    let b = frame.body;
    let inset = frame.px(10.0);
    root.draw(&Rectangle::new(
        [(b.left + inset, b.top + inset), (b.right - inset, b.bottom - inset)],
        AXIS.stroke_width(1),
    ))?;
    let font = Font::regular(frame.size(30.0), MUTED);
    text::draw(root, "no data in this period", &font, b.centre(), Align::Centre, Line::Middle)
}

/// The body as a drawing area of its own, for plotters' chart builder.
pub(super) fn body_area<'a>(root: &Area<'a>, frame: &Frame) -> Area<'a> {
    let b = frame.body;
    root.clone().shrink((b.left, b.top), (b.width().max(1) as u32, b.height().max(1) as u32))
}
