//! One module per `apron` command. Each exposes `run(global, args, out)`:
//! it opens a [`crate::Session`] over `global.data`, plans its SQL through it
//! (read-only), prints with [`crate::Session::print`] in `global.format` to
//! `out`, and returns [`crate::Error`]. Parsing is [`crate::cli`]'s job.

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::error::Error;

pub mod config;
pub mod pick;
pub mod sql;

/// Runs the command `cli` names, writing its result to `out`.
pub async fn run<W: Write>(cli: &Cli, out: W) -> Result<(), Error> {
    match &cli.command {
        Command::Sql(args) => sql::run(&cli.global, args, out).await,
        Command::Config(args) => config::run(&cli.global, args, out).await,
        Command::Pick(args) => pick::run(&cli.global, args, out).await,
    }
}
