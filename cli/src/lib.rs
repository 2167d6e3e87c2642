//! What apron's two binaries, `apron` and `apron-recorder`, share on the
//! command line, so that both speak alike:
//!
//! - [`errors`]: a refused command line as one line, keeping clap's "did
//!   you mean" and pointing to the help of the command that refused it;
//! - [`units`]: durations (`30d`, `1h30m`) and sizes (`1GiB`, `512M`) as
//!   people type them, a bare number refused with the unit it likely meant;
//! - [`docs`]: shell completions and manual pages, generated from the same
//!   clap definitions as the parser;
//! - [`printable`]: text made safe for a terminal, control characters shown
//!   as escapes.
//!
//! No command's behaviour lives here.

pub mod docs;
pub mod errors;
pub mod printable;
pub mod units;
