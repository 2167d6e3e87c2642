//! `apron config`: prints the effective configuration and where it came
//! from. Reading and checking the file is [`crate::config`]'s job.

use std::io::Write;

use crate::cli::{ConfigArgs, GlobalArgs};
use crate::config::Config;
use crate::error::Error;
use crate::output::Format;

/// Loads the configuration `global.config` names (else `./apron.toml`,
/// else the defaults) and prints it to `out`: as `apron.toml` text after a
/// comment line naming its source for `--format table` and `csv`, as one
/// JSON object with a `source` key for `--format json`. Needs no data folder.
pub async fn run<W: Write>(global: &GlobalArgs, _args: &ConfigArgs, mut out: W) -> Result<(), Error> {
    let config = Config::load(global.config.as_deref())?;
    let text = match global.format {
        Format::Json => config.to_json()?,
        Format::Table | Format::Csv => config.to_toml()?,
    };
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|source| Error::Write { source })
}
