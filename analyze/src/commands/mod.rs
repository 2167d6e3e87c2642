//! One module per `apron` command. Each exposes `run(global, args, out)`:
//! it takes its parsed arguments, calls the figure it prints
//! ([`crate::report::figures`]; `sql` and `pick` plan their own SQL through a
//! [`crate::Session`]), prints it in `global.format` to `out`, and returns
//! [`crate::Error`]. Each command's module also defines its arguments (its
//! `Args`, which [`crate::cli`] names in its command list; flag groups
//! several commands share are [`crate::cli::flag_groups`]); computing a figure is
//! [`crate::report::figures`]'.

use std::io::Write;

use crate::cli::{Cli, Command};
use crate::error::Error;
/// What every report over a period starts from (kept here for the
/// commands' callers; it lives in [`crate::report::context`]).
pub use crate::report::context::ReportContext;

pub mod alerts;
pub mod chart;
pub mod config;
pub mod demo;
pub mod docs;
pub mod events;
pub mod idle_cost;
pub mod import;
pub mod job;
pub mod jobs;
mod outcome;
pub mod pick;
pub mod portable;
pub mod reclaim;
pub mod report;
pub mod savings;
pub mod spend;
pub mod sql;
pub mod starved;
pub mod windows;
pub mod zombies;

pub use outcome::Outcome;

/// Runs the command `cli` names, writing its result to `out`.
pub async fn run<W: Write>(cli: &Cli, out: W) -> Result<Outcome, Error> {
    let done = |r: Result<(), Error>| r.map(|()| Outcome::Done);
    match &cli.command {
        Command::Sql(args) => done(sql::run(&cli.global, args, out).await),
        Command::Config(args) => done(config::run(&cli.global, args, out).await),
        Command::Pick(args) => done(pick::run(&cli.global, args, out).await),
        Command::Alerts(args) => alerts::run(&cli.global, args, out).await,
        Command::Reclaim(args) => done(reclaim::run(&cli.global, args, out).await),
        Command::Savings(args) => done(savings::run(&cli.global, args, out).await),
        Command::Zombies(args) => done(zombies::run(&cli.global, args, out).await),
        Command::Starved(args) => done(starved::run(&cli.global, args, out).await),
        Command::Events(args) => done(events::run(&cli.global, args, out).await),
        Command::Jobs(args) => done(jobs::run(&cli.global, args, out).await),
        Command::Job(args) => done(job::run(&cli.global, args, out).await),
        Command::Spend(args) => done(spend::run(&cli.global, args, out).await),
        Command::IdleCost(args) => done(idle_cost::run(&cli.global, args, out).await),
        Command::Windows(args) => done(windows::run(&cli.global, args, out).await),
        Command::Chart(args) => done(chart::run(&cli.global, args, out).await),
        Command::Report(args) => done(report::run(&cli.global, args, out).await),
        Command::ExportConfig(args) => done(portable::export_config(&cli.global, args, out)),
        Command::Ddl(args) => done(portable::ddl(args, out)),
        Command::ExportSql(args) => done(portable::export_sql(args, out)),
        Command::Import(args) => done(import::run(&cli.global, args, out).await),
        Command::Demo(args) => done(demo::run(&cli.global, args, out).await),
        Command::Completions(args) => done(docs::completions(args, out)),
        Command::ManPages(args) => done(docs::man_pages(args, out)),
    }
}
