//! The pixel buffer a chart draws into, and the trip from pixels to a PNG
//! file.
//!
//! A chart module supplies a drawing function; this module checks the
//! canvas size, makes sure the embedded font is registered, runs the
//! function on a white RGB canvas, encodes PNG in memory and hands the
//! bytes to [`apron_files::replace`]. Drawing is in memory, so a failed chart
//! never leaves a partial file behind.

use std::path::Path;

use image::ImageEncoder;
use image::codecs::png::PngEncoder;
use plotters::backend::DrawingBackend;
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::prelude::{BitMapBackend, WHITE};

use super::context::ChartContext;
use super::error::ChartError;
use super::name::ChartName;
use crate::fonts;

/// The whole canvas, in pixel coordinates from the top left.
pub(super) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
/// What plotters returns when drawing fails.
pub(super) type DrawError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;
/// The result of a drawing step.
pub(super) type DrawResult = Result<(), DrawError>;

/// A drawn chart: RGB8 pixels, row by row, and whatever the drawing
/// function returned (tests use it to find where things were drawn).
#[derive(Debug)]
pub(super) struct Rendered<T> {
    pub(super) rgb: Vec<u8>,
    pub(super) width: u32,
    pub(super) height: u32,
    #[cfg_attr(not(test), expect(dead_code, reason = "only tests look at where things were drawn"))]
    pub(super) extra: T,
}

/// Draws `chart` on a white canvas of `ctx`'s size. `path` is only used to
/// name the output in errors.
pub(super) fn render<T>(
    chart: ChartName,
    ctx: &ChartContext,
    path: &Path,
    draw: impl FnOnce(&Area<'_>) -> Result<T, DrawError>,
) -> Result<Rendered<T>, ChartError> {
    let (width, height) = (ctx.width, ctx.height);
    let size_ok = (ChartContext::MIN_WIDTH..=ChartContext::MAX_SIDE).contains(&width)
        && (ChartContext::MIN_HEIGHT..=ChartContext::MAX_SIDE).contains(&height);
    if !size_ok {
        return Err(ChartError::CanvasSize { chart, path: path.to_owned(), width, height });
    }
    fonts::ensure_loaded().map_err(|source| ChartError::Font { chart, path: path.to_owned(), source })?;

    // Both sides are at most MAX_SIDE, so this fits in usize.
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    let drawn = (|| {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let extra = draw(&root)?;
        root.present()?;
        Ok(extra)
    })();
    let extra = drawn.map_err(|source: DrawError| ChartError::Draw {
        chart,
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    Ok(Rendered { rgb, width, height, extra })
}

/// Draws `chart` and atomically replaces `out` with it as a PNG.
pub(super) fn write_png<T>(
    chart: ChartName,
    ctx: &ChartContext,
    out: &Path,
    draw: impl FnOnce(&Area<'_>) -> Result<T, DrawError>,
) -> Result<(), ChartError> {
    let rendered = render(chart, ctx, out, draw)?;
    let mut png = Vec::with_capacity(256 * 1024);
    PngEncoder::new(&mut png)
        .write_image(&rendered.rgb, rendered.width, rendered.height, image::ColorType::Rgb8)
        .map_err(|source| ChartError::Encode { chart, path: out.to_owned(), source })?;
    apron_files::replace::write(out, &png).map_err(|source| ChartError::Write {
        chart,
        path: out.to_owned(),
        source,
    })
}
