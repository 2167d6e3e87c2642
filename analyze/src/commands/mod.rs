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

/// The parameters of a period ending now and reaching back `last`: its
/// start and end as UTC timestamps, ready to bind as `$1` and `$2`.
pub(crate) fn last_period(last: std::time::Duration) -> [datafusion::common::ScalarValue; 2] {
    let now = chrono::Utc::now().timestamp_millis();
    let start = now.saturating_sub(i64::try_from(last.as_millis()).unwrap_or(i64::MAX));
    let ts = |ms| datafusion::common::ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()));
    [ts(start), ts(now)]
}

/// Whole minutes of `d`, rounded up, at least one: how many idle minutes a
/// stretch needs.
pub(crate) fn whole_minutes(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_secs().div_ceil(60)).unwrap_or(i64::MAX).max(1)
}

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
