//! Every colour the charts use, and the no-data hatch.
//!
//! Series colours come from the Okabe–Ito palette, which stays distinct
//! under the common colour-vision deficiencies; busy is always blue and
//! idle always orange, across charts. Utilization is drawn on the viridis
//! scale (perceptually uniform, readable in greyscale). Cells without data
//! are a light grey with diagonal lines, a pattern no scale colour can be
//! mistaken for.

use plotters::element::{PathElement, Rectangle};
use plotters::style::{Color, RGBColor};

use super::canvas::{Area, DrawResult};
use super::rect::Rect;

/// Busy GPUs and busy cost: Okabe–Ito blue.
pub(super) const BUSY: RGBColor = RGBColor(0x00, 0x72, 0xB2);
/// Idle GPUs with memory held, and idle cost: Okabe–Ito orange.
pub(super) const IDLE_HELD: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
/// Idle GPUs with nothing on them: light grey.
pub(super) const IDLE_EMPTY: RGBColor = RGBColor(0xC8, 0xC8, 0xC8);
/// GPUs whose activity is unknown: Okabe–Ito reddish purple.
pub(super) const UNKNOWN: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
/// The second line on a dual-axis chart: Okabe–Ito vermillion.
pub(super) const SECOND_LINE: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
/// SM activity (GPM) on a job's timeline: Okabe–Ito bluish green.
pub(super) const SM_LINE: RGBColor = RGBColor(0x00, 0x9E, 0x73);
/// Tensor activity (GPM) on a job's timeline: Okabe–Ito orange.
pub(super) const TENSOR_LINE: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
/// The outline of an idle window on the hour-of-week heatmap: a red that
/// stands out on every colour of the viridis scale.
pub(super) const WINDOW: RGBColor = RGBColor(0xE6, 0x19, 0x4B);

/// Titles and values.
pub(super) const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);
/// Axis titles, tick labels and legends.
pub(super) const TEXT: RGBColor = RGBColor(0x44, 0x44, 0x44);
/// The footer and the "no data" message.
pub(super) const MUTED: RGBColor = RGBColor(0x77, 0x77, 0x77);
/// Axis lines and the footer rule.
pub(super) const AXIS: RGBColor = RGBColor(0x99, 0x99, 0x99);
/// Major grid lines.
pub(super) const GRID: RGBColor = RGBColor(0xDD, 0xDD, 0xDD);
/// Minor grid lines.
pub(super) const GRID_LIGHT: RGBColor = RGBColor(0xEE, 0xEE, 0xEE);

/// Ground of a no-data cell.
pub(super) const NO_DATA: RGBColor = RGBColor(0xEB, 0xEB, 0xEB);
/// Lines of the no-data hatch.
pub(super) const NO_DATA_LINE: RGBColor = RGBColor(0xB4, 0xB4, 0xB4);

/// Viridis sampled at 0.0, 0.1, … 1.0; [`viridis`] interpolates between.
const VIRIDIS: [(u8, u8, u8); 11] = [
    (0x44, 0x01, 0x54),
    (0x48, 0x24, 0x75),
    (0x41, 0x44, 0x87),
    (0x35, 0x5F, 0x8D),
    (0x2A, 0x78, 0x8E),
    (0x21, 0x91, 0x8C),
    (0x22, 0xA8, 0x84),
    (0x44, 0xBF, 0x70),
    (0x7A, 0xD1, 0x51),
    (0xBD, 0xDF, 0x26),
    (0xFD, 0xE7, 0x25),
];

/// The viridis colour at `t` in 0..=1 (clamped; NaN reads as 0): dark
/// purple at 0, yellow at 1.
pub(super) fn viridis(t: f64) -> RGBColor {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let pos = t * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The utilization colour for `pct` percent (0–100, clamped).
pub(super) fn utilization(pct: f64) -> RGBColor {
    viridis(pct / 100.0)
}

/// Whether text on `colour` should be white rather than dark.
pub(super) fn needs_light_text(colour: RGBColor) -> bool {
    let RGBColor(r, g, b) = colour;
    0.299 * f64::from(r) + 0.587 * f64::from(g) + 0.114 * f64::from(b) < 140.0
}

/// Fills `rect` with the no-data hatch: grey ground, darker diagonal lines
/// every `spacing` pixels, on a grid shared by all cells so neighbouring
/// cells' lines join up.
pub(super) fn hatch(area: &Area<'_>, rect: Rect, spacing: i32) -> DrawResult {
    if rect.width() <= 0 || rect.height() <= 0 {
        return Ok(());
    }
    // plotters fills rectangles up to, not including, the far corner.
    area.draw(&Rectangle::new([(rect.left, rect.top), (rect.right, rect.bottom)], NO_DATA.filled()))?;
    let spacing = spacing.max(3);
    let (x0, y0, x1, y1) = (rect.left, rect.top, rect.right - 1, rect.bottom - 1);
    // Lines x + y = c for every multiple c of `spacing`, clipped to the rectangle.
    let mut c = (x0 + y0).div_euclid(spacing) * spacing;
    while c <= x1 + y1 {
        let start_x = (c - y0).min(x1);
        let end_x = (c - y1).max(x0);
        if start_x >= end_x {
            let line = vec![(start_x, c - start_x), (end_x, c - end_x)];
            area.draw(&PathElement::new(line, NO_DATA_LINE.stroke_width(1)))?;
        }
        c += spacing;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viridis_hits_its_anchors_and_clamps() {
        assert_eq!(viridis(0.0), RGBColor(0x44, 0x01, 0x54));
        assert_eq!(viridis(1.0), RGBColor(0xFD, 0xE7, 0x25));
        assert_eq!(viridis(0.5), RGBColor(0x21, 0x91, 0x8C));
        assert_eq!(viridis(-3.0), viridis(0.0));
        assert_eq!(viridis(7.0), viridis(1.0));
        assert_eq!(viridis(f64::NAN), viridis(0.0));
        assert_eq!(utilization(100.0), viridis(1.0));
    }

    #[test]
    fn viridis_gets_lighter_as_it_rises() {
        let luma = |c: RGBColor| 0.299 * f64::from(c.0) + 0.587 * f64::from(c.1) + 0.114 * f64::from(c.2);
        let mut last = -1.0;
        for i in 0..=100 {
            let l = luma(viridis(f64::from(i) / 100.0));
            assert!(l >= last - 0.5, "viridis luma drops at {i}");
            last = l;
        }
        assert!(needs_light_text(viridis(0.1)));
        assert!(!needs_light_text(viridis(0.9)));
    }
}
