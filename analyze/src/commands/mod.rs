//! One module per `apron` command. Each exposes `run(global, args, out)`:
//! it opens a [`crate::Session`] over `global.data`, plans its SQL through it
//! (read-only), prints with [`crate::Session::print`] in `global.format` to
//! `out`, and returns [`crate::Error`]. Parsing is [`crate::cli`]'s job.

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::error::Error;

pub mod alerts;
pub mod config;
pub mod pick;
pub mod reclaim;
pub mod sql;
pub mod zombies;

/// How a command that succeeded wants the process to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0.
    Done,
    /// `apron alerts` found rules firing: exit code 1.
    AlertsFired,
}

/// Runs the command `cli` names, writing its result to `out`.
pub async fn run<W: Write>(cli: &Cli, out: W) -> Result<Outcome, Error> {
    let done = |r: Result<(), Error>| r.map(|()| Outcome::Done);
    match &cli.command {
        Command::Sql(args) => done(sql::run(&cli.global, args, out).await),
        Command::Config(args) => done(config::run(&cli.global, args, out).await),
        Command::Pick(args) => done(pick::run(&cli.global, args, out).await),
        Command::Alerts(args) => alerts::run(&cli.global, args, out).await,
        Command::Reclaim(args) => done(reclaim::run(&cli.global, args, out).await),
        Command::Zombies(args) => done(zombies::run(&cli.global, args, out).await),
    }
}
