//! `apron completions SHELL` and `apron man-pages --out DIR`: generated from
//! the clap definition `apron` parses with ([`crate::cli::Cli`]).

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManPagesArgs};
use crate::error::{Error, OutputError};

/// Prints the completion script for `args.shell`.
pub fn completions<W: Write>(args: &CompletionsArgs, mut out: W) -> Result<(), Error> {
    let script = apron_cli::docs::completions(&mut Cli::command(), "apron", args.shell);
    out.write_all(&script).and_then(|()| out.flush()).map_err(|source| OutputError::Write { source }.into())
}

/// Writes the manual pages into `args.out` and lists them.
pub fn man_pages<W: Write>(args: &ManPagesArgs, mut out: W) -> Result<(), Error> {
    let pages = apron_cli::docs::man_pages(Cli::command(), &args.out)
        .map_err(|source| OutputError::ManPages { path: args.out.clone(), source })?;
    let text = format!("{} manual pages written to {}\n", pages.len(), args.out.display());
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| OutputError::Write { source }.into())
}
