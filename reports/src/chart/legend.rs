//! The legend row under a chart's title: a swatch and a label per series.
//!
//! plotters draws its legends inside the plot, where they cover data; a row
//! of its own above the plot never does. The frame decides where the row
//! goes; this module draws it.

use plotters::element::{PathElement, Rectangle};
use plotters::style::Color;
use plotters::style::RGBColor;

use super::canvas::{Area, DrawResult};
use super::palette::{self, TEXT};
use super::rect::Rect;
use super::text::{self, Align, Font, Line};

/// How a series looks in the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Swatch {
    /// A filled area or bar.
    Fill(RGBColor),
    /// A solid line.
    Line(RGBColor),
    /// The no-data hatch.
    NoData,
    /// The heatmaps' colour scale, low to high, left to right.
    Scale,
    /// A rectangle's outline, as the hour-of-week chart marks idle windows.
    Outline(RGBColor),
}

/// One legend item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) label: String,
    pub(super) swatch: Swatch,
}

impl Entry {
    pub(super) fn new(label: impl Into<String>, swatch: Swatch) -> Self {
        Self { label: label.into(), swatch }
    }
}

/// Draws `entries` left to right starting at `x`, centred on the row `y`;
/// `s` is the canvas scale (1.0 at 1600x900).
pub(super) fn draw(area: &Area<'_>, entries: &[Entry], (x, y): (i32, i32), s: f64) -> DrawResult {
    let font = Font::regular(21.0 * s, TEXT);
    let (sw, sh) = ((34.0 * s) as i32, (16.0 * s) as i32);
    let mut left = x;
    for entry in entries {
        let (top, bottom) = (y - sh / 2, y + sh / 2);
        match entry.swatch {
            Swatch::Fill(colour) => {
                area.draw(&Rectangle::new([(left, top), (left + sw, bottom)], colour.filled()))?;
            }
            Swatch::Line(colour) => {
                let stroke = colour.stroke_width((3.0 * s).round().max(1.0) as u32);
                area.draw(&PathElement::new(vec![(left, y), (left + sw, y)], stroke))?;
            }
            Swatch::NoData => {
                palette::hatch(area, Rect { left, top, right: left + sw, bottom }, (6.0 * s).round() as i32)?;
            }
            Swatch::Scale => {
                for x in left..=left + sw {
                    let t = f64::from(x - left) / f64::from(sw.max(1));
                    area.draw(&PathElement::new(
                        vec![(x, top), (x, bottom)],
                        palette::viridis(t).stroke_width(1),
                    ))?;
                }
            }
            Swatch::Outline(colour) => {
                let stroke = colour.stroke_width((3.0 * s).round().max(1.0) as u32);
                area.draw(&Rectangle::new([(left, top), (left + sw, bottom)], stroke))?;
            }
        }
        let label_x = left + sw + (10.0 * s) as i32;
        text::draw(area, &entry.label, &font, (label_x, y), Align::Left, Line::Middle)?;
        left = label_x + text::width(&entry.label, &font) + (36.0 * s) as i32;
    }
    Ok(())
}
