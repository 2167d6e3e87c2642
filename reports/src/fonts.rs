//! The font every chart draws with, embedded in the binary.
//!
//! DejaVu Sans (regular and bold) is compiled in from `reports/fonts/`,
//! with its licence beside it. No system font is ever looked up: no
//! fontconfig, no FreeType. The faces are parsed once per process; they are
//! also registered with plotters as `sans-serif`, the family plotters falls
//! back to, because its axis code asks for a font even for empty labels.

use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::style::{FontStyle, register_font};

/// The family name registered with plotters.
pub(crate) const FAMILY: &str = "sans-serif";

static REGULAR: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
static BOLD: &[u8] = include_bytes!("../fonts/DejaVuSans-Bold.ttf");

/// The parsed faces, regular then bold.
static FACES: OnceLock<Result<[FontRef<'static>; 2], FontError>> = OnceLock::new();
static REGISTERED: OnceLock<Result<(), FontError>> = OnceLock::new();

/// An embedded font that does not parse: the font file in `reports/fonts/`
/// is damaged, so no chart can draw text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot load the embedded font {file}")]
pub struct FontError {
    /// The file under `reports/fonts/` that failed to parse.
    pub file: &'static str,
}

fn faces() -> &'static Result<[FontRef<'static>; 2], FontError> {
    FACES.get_or_init(|| {
        let regular = FontRef::try_from_slice(REGULAR).map_err(|_| FontError { file: "DejaVuSans.ttf" })?;
        let bold = FontRef::try_from_slice(BOLD).map_err(|_| FontError { file: "DejaVuSans-Bold.ttf" })?;
        Ok([regular, bold])
    })
}

/// Parses the embedded faces and registers them with plotters, once per
/// process. When this returns `Ok`, [`face`] returns `Some` for both weights.
pub(crate) fn ensure_loaded() -> Result<(), FontError> {
    faces().as_ref().map_err(Clone::clone)?;
    REGISTERED
        .get_or_init(|| {
            register_font(FAMILY, FontStyle::Normal, REGULAR)
                .map_err(|_| FontError { file: "DejaVuSans.ttf" })?;
            register_font(FAMILY, FontStyle::Bold, BOLD)
                .map_err(|_| FontError { file: "DejaVuSans-Bold.ttf" })
        })
        .clone()
}

/// The regular or bold face; `None` only if [`ensure_loaded`] failed.
pub(crate) fn face(bold: bool) -> Option<&'static FontRef<'static>> {
    faces().as_ref().ok().map(|[regular, heavy]| if bold { heavy } else { regular })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_fonts_load() {
        assert_eq!(ensure_loaded(), Ok(()));
        assert_eq!(ensure_loaded(), Ok(()));
        assert!(face(false).is_some());
        assert!(face(true).is_some());
    }
}
