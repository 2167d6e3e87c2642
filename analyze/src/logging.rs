//! Diagnostic logging of the `apron` binary: `tracing` events to stderr,
//! filtered by `$APRON_LOG` (e.g. `APRON_LOG=debug`), warnings only by
//! default. Results go to stdout and never mix with logs.

use tracing_subscriber::EnvFilter;

/// The environment variable holding the log filter.
pub const LOG_ENV: &str = "APRON_LOG";

/// Installs the stderr subscriber. A bad filter falls back to the default
/// rather than failing the command; a second call does nothing.
pub fn init() {
    let filter = EnvFilter::try_from_env(LOG_ENV).unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
