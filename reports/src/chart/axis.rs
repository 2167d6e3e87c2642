//! Axes of the charts drawn on a plotters Cartesian grid: tick positions,
//! tick labels, grid lines and axis titles with their units.
//!
//! Every axis gets its ticks from here (round values for amounts, see
//! [`value_ticks`]; [`super::time_axis`] for time), plotters draws the tick
//! marks and grid at exactly those values, and the labels and titles are
//! drawn with [`super::text`] so they sit centred where they belong.

use std::ops::Range;

use plotters::backend::DrawingBackend;
use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use plotters::style::{Color, RGBColor};

use super::canvas::{Area, DrawResult};
use super::frame::Frame;
use super::palette::{AXIS, GRID, GRID_LIGHT, INK, TEXT};
use super::rect::Rect;
use super::text::{self, Align, Font, Line};

/// Font of tick labels.
pub(super) fn tick_font(frame: &Frame) -> Font {
    Font::regular(frame.size(19.0), TEXT)
}

/// Font of axis titles.
pub(super) fn title_font(frame: &Frame) -> Font {
    Font::regular(frame.size(21.0), INK)
}

/// Room beside the plot for a vertical axis whose widest tick label is
/// `widest_label` pixels: tick marks, labels and the turned title.
pub(super) fn y_area(frame: &Frame, widest_label: i32) -> i32 {
    widest_label + frame.px(56.0)
}

/// Room under the plot for a horizontal axis: tick marks, labels, title.
pub(super) fn x_area(frame: &Frame) -> i32 {
    frame.px(64.0)
}

/// Round tick values from 0 up to at least `max` (values of 1, 2, 2.5 or 5
/// times a power of ten apart), at most about `target` of them. The last
/// tick is the top of the axis.
pub(super) fn value_ticks(max: f64, target: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let target = target.max(2) as f64;
    let raw = max / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude);
    let count = (max / step - 1e-9).ceil().max(1.0) as usize;
    (0..=count).map(|i| i as f64 * step).collect()
}

/// A linear `f64` axis whose tick marks and grid lines are exactly the
/// values given: `bold` with a grid line and tick, `light` with a faint
/// grid line only.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ticked {
    range: Range<f64>,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl Ticked {
    pub(super) fn new(range: Range<f64>, bold: Vec<f64>) -> Self {
        Self { range, bold, light: Vec::new() }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let length = limit.1 - limit.0;
        if span == 0.0 || length == 0 {
            return limit.1;
        }
        let t = (value - self.range.start) / span;
        // As plotters maps its own f64 axes, so both agree to the pixel.
        limit.0 + (f64::from(length) * t + 1e-3).floor() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() { self.light.clone() } else { self.bold.clone() }
    }
}

/// Applies apron's look to a plotters mesh: axis colour, light grid, tick
/// marks, and no plotters labels (they are drawn with [`y_labels`] and
/// [`x_labels`]).
pub(super) fn style_mesh<X, Y, DB>(mesh: &mut MeshStyle<'_, '_, X, Y, DB>, frame: &Frame)
where
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
    DB: DrawingBackend,
{
    mesh.axis_style(AXIS.stroke_width(1))
        .bold_line_style(GRID.stroke_width(1))
        .light_line_style(GRID_LIGHT.stroke_width(1))
        .set_all_tick_mark_size(frame.px(5.0))
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new());
}

/// The plot rectangle from plotters' pixel ranges
/// (`plotting_area().get_pixel_range()`).
pub(super) fn plot_rect((x, y): (Range<i32>, Range<i32>)) -> Rect {
    Rect { left: x.start, top: y.start, right: x.end, bottom: y.end }
}

/// Which side of the plot a vertical axis is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Left,
    Right,
}

/// Labels of a vertical axis: each `(pixel y, text)` centred on its tick,
/// beside the plot on `side`, in `colour`.
pub(super) fn y_labels(
    root: &Area<'_>,
    frame: &Frame,
    plot: Rect,
    side: Side,
    colour: RGBColor,
    labels: &[(i32, String)],
) -> DrawResult {
    let font = Font { colour, ..tick_font(frame) };
    let gap = frame.px(12.0);
    let (x, align) = match side {
        Side::Left => (plot.left - gap, Align::Right),
        Side::Right => (plot.right + gap, Align::Left),
    };
    for (y, label) in labels {
        text::draw(root, label, &font, (x, *y), align, Line::Middle)?;
    }
    Ok(())
}

/// Labels of the horizontal axis: each `(pixel x, text)` centred under its
/// tick; the first and last are kept inside the canvas.
pub(super) fn x_labels(root: &Area<'_>, frame: &Frame, plot: Rect, labels: &[(i32, String)]) -> DrawResult {
    let font = tick_font(frame);
    let y = plot.bottom + frame.px(14.0);
    let (canvas_width, _) = root.dim_in_pixel();
    let edge = frame.px(6.0);
    for (x, label) in labels {
        let half = text::width(label, &font) / 2;
        let x = (*x).clamp(half + edge, canvas_width as i32 - half - edge);
        text::draw(root, label, &font, (x, y), Align::Centre, Line::Top)?;
    }
    Ok(())
}

/// The titles of the axes that have one: `x` under the plot, `left` turned
/// up at the left edge of the body, `right` turned down at its right edge.
pub(super) fn titles(
    root: &Area<'_>,
    frame: &Frame,
    plot: Rect,
    x: Option<&str>,
    left: Option<&str>,
    right: Option<&str>,
) -> DrawResult {
    let font = title_font(frame);
    let (cx, cy) = plot.centre();
    let body = frame.body;
    if let Some(title) = x {
        let y = body.bottom - frame.px(12.0);
        text::draw(root, title, &font, (cx, y), Align::Centre, Line::Middle)?;
    }
    if let Some(title) = left {
        text::draw_turned(root, title, &font, (body.left + frame.px(10.0), cy), true)?;
    }
    if let Some(title) = right {
        text::draw_turned(root, title, &font, (body.right - frame.px(10.0), cy), false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: Vec<f64>, want: &[f64]) -> bool {
        got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-9)
    }

    #[test]
    fn value_ticks_are_round_and_cover_the_maximum() {
        assert!(close(value_ticks(64.0, 8), &[0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]));
        assert!(close(value_ticks(100.0, 5), &[0.0, 20.0, 40.0, 60.0, 80.0, 100.0]));
        assert!(close(value_ticks(48_000.0, 6), &[0.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 50_000.0]));
        assert!(close(value_ticks(0.7, 4), &[0.0, 0.2, 0.4, 0.6, 0.8]));
        assert!(close(value_ticks(0.0, 4), &[0.0, 0.25, 0.5, 0.75, 1.0]));
        assert!(close(value_ticks(f64::NAN, 4), &[0.0, 0.25, 0.5, 0.75, 1.0]));
    }
}
