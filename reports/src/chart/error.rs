//! [`ChartError`]: a chart that could not be drawn or written, naming the
//! chart and its output file.

use std::path::PathBuf;

use super::context::ChartContext;
use super::name::ChartName;
use crate::fonts::FontError;

/// A chart that could not be drawn or written. Every variant names the
/// output file.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The canvas size in [`ChartContext`] is outside what a chart can lay out.
    #[error(
        "cannot draw chart {chart} into {path}: a {width}x{height} canvas is outside {}x{} to {max}x{max}",
        ChartContext::MIN_WIDTH,
        ChartContext::MIN_HEIGHT,
        max = ChartContext::MAX_SIDE
    )]
    CanvasSize {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The requested width in pixels.
        width: u32,
        /// The requested height in pixels.
        height: u32,
    },
    /// The embedded font did not load.
    #[error("cannot draw chart {chart} into {path}")]
    Font {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// Which font failed.
        #[source]
        source: FontError,
    },
    /// plotters failed while drawing.
    #[error("cannot draw chart {chart} into {path}")]
    Draw {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// plotters' error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The drawn pixels did not encode as PNG.
    #[error("cannot encode chart {chart} as PNG for {path}")]
    Encode {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The encoder's error.
        #[source]
        source: image::ImageError,
    },
    /// The PNG could not be written (missing folder, no permission, disk full).
    #[error("cannot write chart {chart} to {path}")]
    Write {
        /// The chart.
        chart: ChartName,
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
