//! Text on the charts: laid out with the embedded font and placed by the
//! top, middle or baseline of its capitals, left, centred or right, level
//! or turned a quarter.
//!
//! Glyphs are rasterised here with ab_glyph rather than through plotters'
//! text drawing, which drops each glyph's side bearing (so "UTC" reads
//! "U TC") and puts the baseline half a font size below any anchor. Sizes
//! are font sizes in pixels as plotters counts them: ascent plus descent.

use ab_glyph::{Font as _, GlyphId, PxScale, ScaleFont, point};
use plotters::style::{Color, RGBColor};

use super::canvas::{Area, DrawResult};
use crate::fonts;

/// A font size, weight and colour.
#[derive(Debug, Clone, Copy)]
pub(super) struct Font {
    pub(super) size: f64,
    pub(super) bold: bool,
    pub(super) colour: RGBColor,
}

impl Font {
    pub(super) fn regular(size: f64, colour: RGBColor) -> Self {
        Self { size, bold: false, colour }
    }

    pub(super) fn bold(size: f64, colour: RGBColor) -> Self {
        Self { size, bold: true, colour }
    }

    /// Height of the capitals in pixels.
    pub(super) fn cap_height(&self) -> f64 {
        // DejaVu Sans: capitals 1493 units of ascent + descent 2384.
        self.size * 1493.0 / 2384.0
    }
}

/// Horizontal placement relative to the anchor point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Centre,
    Right,
}

/// Vertical placement of level text relative to the anchor point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line {
    /// The top of the capitals is at the anchor.
    Top,
    /// The capitals are centred on the anchor.
    Middle,
}

/// Which way text reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    Level,
    /// Bottom to top (a left axis title).
    Up,
    /// Top to bottom (a right axis title).
    Down,
}

/// Draws level `text` at `(x, y)` on the canvas.
pub(super) fn draw(
    area: &Area<'_>,
    text: &str,
    font: &Font,
    (x, y): (i32, i32),
    align: Align,
    line: Line,
) -> DrawResult {
    let baseline = match line {
        Line::Top => f64::from(y) + font.cap_height(),
        Line::Middle => f64::from(y) + font.cap_height() / 2.0,
    };
    let left = f64::from(x) - shift(align, advance(text, font));
    rasterise(area, text, font, (left, baseline), Turn::Level)
}

/// Draws `text` turned to read bottom to top (`up`) or top to bottom,
/// centred on `(x, y)` both along and across the text.
pub(super) fn draw_turned(
    area: &Area<'_>,
    text: &str,
    font: &Font,
    (x, y): (i32, i32),
    up: bool,
) -> DrawResult {
    let half = advance(text, font) / 2.0;
    let half_cap = font.cap_height() / 2.0;
    // The pen starts at the text's start and the baseline lies on the side
    // the glyphs' feet point to.
    let (origin, turn) = if up {
        ((f64::from(x) + half_cap, f64::from(y) + half), Turn::Up)
    } else {
        ((f64::from(x) - half_cap, f64::from(y) - half), Turn::Down)
    };
    rasterise(area, text, font, origin, turn)
}

/// The advance width of `text` in whole pixels (rounded up).
pub(super) fn width(text: &str, font: &Font) -> i32 {
    advance(text, font).ceil() as i32
}

/// `text`, cut with an ellipsis if needed so it is at most `max_width`
/// pixels wide.
pub(super) fn fit(text: &str, font: &Font, max_width: i32) -> String {
    if width(text, font) <= max_width {
        return text.to_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    (0..chars.len())
        .rev()
        .map(|keep| chars[..keep].iter().chain(std::iter::once(&'…')).collect::<String>())
        .find(|candidate| width(candidate, font) <= max_width)
        .unwrap_or_default()
}

fn shift(align: Align, width: f64) -> f64 {
    match align {
        Align::Left => 0.0,
        Align::Centre => width / 2.0,
        Align::Right => width,
    }
}

/// Pen advance of `text` in pixels, kerning included.
fn advance(text: &str, font: &Font) -> f64 {
    let Some(face) = fonts::face(font.bold) else {
        return 0.0;
    };
    let scaled = face.as_scaled(PxScale::from(font.size as f32));
    let mut pen = 0.0f32;
    let mut prev: Option<GlyphId> = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(prev) = prev {
            pen += scaled.kern(prev, id);
        }
        pen += scaled.h_advance(id);
        prev = Some(id);
    }
    f64::from(pen)
}

/// Draws `text` with its pen starting at `origin` on the baseline, turned
/// as asked. Coverage is blended onto what is already drawn.
fn rasterise(area: &Area<'_>, text: &str, font: &Font, origin: (f64, f64), turn: Turn) -> DrawResult {
    // Faces load before any chart draws (canvas::render); without them
    // there is nothing to draw with.
    let Some(face) = fonts::face(font.bold) else {
        return Ok(());
    };
    let scale = PxScale::from(font.size as f32);
    let scaled = face.as_scaled(scale);
    let (w, h) = area.dim_in_pixel();
    let (w, h) = (w as i32, h as i32);
    // Glyphs are laid out level with the pen at (0, 0) and subpixel
    // offsets kept, then each pixel is placed on the canvas.
    let (ox, oy) = (origin.0.floor(), origin.1.floor());
    let (fx, fy) = ((origin.0 - ox) as f32, (origin.1 - oy) as f32);
    let (ox, oy) = (ox as i32, oy as i32);
    let mut pixels: Vec<(i32, i32, f32)> = Vec::new();
    let mut pen = 0.0f32;
    let mut prev: Option<GlyphId> = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(prev) = prev {
            pen += scaled.kern(prev, id);
        }
        let (gx, gy) = if turn == Turn::Level { (fx, fy) } else { (0.0, 0.0) };
        let glyph = id.with_scale_and_position(scale, point(pen + gx, gy));
        if let Some(outline) = face.outline_glyph(glyph) {
            let bounds = outline.px_bounds();
            let (bx, by) = (bounds.min.x as i32, bounds.min.y as i32);
            outline.draw(|px, py, coverage| {
                if coverage > 0.0 {
                    pixels.push((bx + px as i32, by + py as i32, coverage));
                }
            });
        }
        pen += scaled.h_advance(id);
        prev = Some(id);
    }
    for (lx, ly, coverage) in pixels {
        let (x, y) = match turn {
            Turn::Level => (ox + lx, oy + ly),
            Turn::Up => (ox + ly, oy - lx),
            Turn::Down => (ox - ly, oy + lx),
        };
        if (0..w).contains(&x) && (0..h).contains(&y) {
            area.draw_pixel((x, y), &font.colour.mix(f64::from(coverage.min(1.0))))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ab_glyph::Font as _;

    use super::*;

    #[test]
    fn cap_height_matches_the_font() {
        crate::fonts::ensure_loaded().unwrap();
        let face = fonts::face(false).unwrap();
        let font = Font::regular(100.0, RGBColor(0, 0, 0));
        let glyph = face.glyph_id('H').with_scale_and_position(PxScale::from(100.0), point(0.0, 0.0));
        let bounds = face.outline_glyph(glyph).unwrap().px_bounds();
        assert!((f64::from(-bounds.min.y) - font.cap_height()).abs() <= 1.0, "{bounds:?}");
    }

    #[test]
    fn fit_cuts_with_an_ellipsis() {
        crate::fonts::ensure_loaded().unwrap();
        let font = Font::regular(16.0, RGBColor(0, 0, 0));
        let long = "a-very-long-team-name-indeed";
        let fitted = fit(long, &font, width(long, &font) / 2);
        assert!(fitted.ends_with('…'));
        assert!(width(&fitted, &font) <= width(long, &font) / 2);
        assert_eq!(fit("ok", &font, 1000), "ok");
        assert!(width("ab", &font) > width("a", &font));
    }
}
