//! What every chart takes besides its series: the footer's words, the
//! currency of money axes and the canvas size ([`ChartContext`]). The
//! charts read it; it reads none of them.

/// What every chart needs besides its series: the words for the footer, the
/// currency for money axes, and the canvas size in pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartContext {
    /// The report period as the reader should see it, e.g.
    /// `"2026-11-01 00:00 – 2026-12-01 00:00 UTC"`.
    pub period: String,
    /// The data folder the figures came from, as the user gave it.
    pub data: String,
    /// ISO 4217 code of every money amount, e.g. `"USD"`; see [`crate::money`].
    pub currency: String,
    /// Canvas width in pixels (at least [`ChartContext::MIN_WIDTH`]).
    pub width: u32,
    /// Canvas height in pixels (at least [`ChartContext::MIN_HEIGHT`]).
    pub height: u32,
}

impl ChartContext {
    /// Default canvas width in pixels.
    pub const DEFAULT_WIDTH: u32 = 1600;
    /// Default canvas height in pixels.
    pub const DEFAULT_HEIGHT: u32 = 900;
    /// Smallest canvas width a chart accepts, in pixels.
    pub const MIN_WIDTH: u32 = 480;
    /// Smallest canvas height a chart accepts, in pixels.
    pub const MIN_HEIGHT: u32 = 320;
    /// Largest canvas width or height a chart accepts, in pixels.
    pub const MAX_SIDE: u32 = 8000;

    /// A context for a 1600x900 canvas.
    pub fn new(period: impl Into<String>, data: impl Into<String>, currency: impl Into<String>) -> Self {
        Self {
            period: period.into(),
            data: data.into(),
            currency: currency.into(),
            width: Self::DEFAULT_WIDTH,
            height: Self::DEFAULT_HEIGHT,
        }
    }

    /// The same context with another canvas size in pixels.
    pub fn with_size(mut self, width: u32, height: u32) -> Self {
        self.width = width;
        self.height = height;
        self
    }
}

impl Default for ChartContext {
    fn default() -> Self {
        Self::new("", "", "USD")
    }
}
