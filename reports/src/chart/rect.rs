//! [`Rect`]: a pixel rectangle on the canvas, the geometry the frame, the
//! legend and the palette's hatching share. It draws nothing and imports
//! nothing of the charts.

/// A pixel rectangle on the canvas: `left..right`, `top..bottom`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Rect {
    pub(super) left: i32,
    pub(super) top: i32,
    pub(super) right: i32,
    pub(super) bottom: i32,
}

impl Rect {
    pub(super) fn width(&self) -> i32 {
        self.right - self.left
    }

    pub(super) fn height(&self) -> i32 {
        self.bottom - self.top
    }

    pub(super) fn centre(&self) -> (i32, i32) {
        ((self.left + self.right) / 2, (self.top + self.bottom) / 2)
    }
}
