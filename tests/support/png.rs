//! What a chart PNG looks like to a test: its size and whether anything was
//! drawn on it, decoded with the `image` crate (the decoder apron's own
//! encoder comes with, but a separate path from the drawing code).

use std::path::Path;

/// The facts about one decoded PNG that the chart tests check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PngFacts {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Distinct RGB colours among its pixels.
    pub colours: usize,
    /// Share of pixels that are not pure white, 0–1.
    pub non_white: f64,
}

/// Decodes the PNG at `path`; `Err` says why it is not one.
pub fn inspect(path: &Path) -> Result<PngFacts, String> {
    // The format from the bytes, not from the file name.
    let reader = image::io::Reader::open(path)
        .and_then(image::io::Reader::with_guessed_format)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    if reader.format() != Some(image::ImageFormat::Png) {
        return Err(format!("{} is not a PNG file", path.display()));
    }
    let img = reader.decode().map_err(|e| format!("{} does not decode: {e}", path.display()))?.to_rgb8();
    // One bit per 24-bit colour (2 MiB): fast even in a debug build.
    let mut seen = vec![0u64; 1 << 18];
    let mut colours = 0usize;
    let mut non_white = 0usize;
    for p in img.pixels() {
        let [r, g, b] = p.0;
        let rgb = (usize::from(r) << 16) | (usize::from(g) << 8) | usize::from(b);
        let (word, bit) = (rgb / 64, 1u64 << (rgb % 64));
        if seen[word] & bit == 0 {
            seen[word] |= bit;
            colours += 1;
        }
        if rgb != 0xFF_FF_FF {
            non_white += 1;
        }
    }
    let pixels = (img.width() as usize * img.height() as usize).max(1);
    Ok(PngFacts {
        width: img.width(),
        height: img.height(),
        colours,
        non_white: non_white as f64 / pixels as f64,
    })
}

/// Checks the PNG at `path` is `width`×`height` and has a chart drawn on it
/// (at least 50 colours: text, axes and series are anti-aliased; at least
/// 2% of the pixels not white: the sparsest chart, a line chart, is about
/// 3%). Returns what is wrong, if anything.
pub fn check_chart(path: &Path, width: u32, height: u32) -> Result<PngFacts, String> {
    let facts = inspect(path)?;
    let name = path.display();
    if (facts.width, facts.height) != (width, height) {
        return Err(format!("{name} is {}x{}, want {width}x{height}", facts.width, facts.height));
    }
    if facts.colours < 50 {
        return Err(format!("{name} has {} colours: looks blank", facts.colours));
    }
    if facts.non_white < 0.02 {
        return Err(format!("{name} is {:.1}% non-white: looks blank", 100.0 * facts.non_white));
    }
    Ok(facts)
}
