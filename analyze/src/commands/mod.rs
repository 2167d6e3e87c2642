//! One module per `apron` command. Each exposes `run(global, args, out)`:
//! it opens a [`crate::Session`] over `global.data`, plans its SQL through it
//! (read-only), prints with [`crate::Session::print`] in `global.format` to
//! `out`, and returns [`crate::Error`]. Parsing is [`crate::cli`]'s job.

use std::io::Write;

use crate::cli::{Cli, Command, GlobalArgs, PeriodArgs};
use crate::config::Config;
use crate::error::Error;
use crate::header::{Coverage, Header, config_warnings};
use crate::period::Period;
use crate::session::Session;

pub mod alerts;
pub mod chart;
pub mod config;
pub mod demo;
pub mod idle_cost;
pub mod pick;
pub mod reclaim;
pub mod report;
pub mod spend;
pub mod sql;
pub mod windows;
pub mod zombies;

/// What every report over a period starts from.
#[derive(Debug)]
pub struct Report {
    /// The effective configuration.
    pub config: Config,
    /// The session over the data folder.
    pub session: Session,
    /// The period chosen.
    pub period: Period,
    /// What the data holds in it.
    pub coverage: Coverage,
    /// The header to print, which commands may extend.
    pub header: Header,
}

impl Report {
    /// Loads the config, opens the data folder, chooses the period and
    /// finds what the data holds in it (an empty period is an error). Config
    /// warnings go to stderr.
    pub async fn prepare(global: &GlobalArgs, period: &PeriodArgs) -> Result<Report, Error> {
        let report = Self::prepare_quietly(global, period).await?;
        for warning in config_warnings(&report.config, &report.coverage) {
            eprintln!("{warning}");
        }
        Ok(report)
    }

    /// [`Report::prepare`] without printing the config warnings.
    pub async fn prepare_quietly(global: &GlobalArgs, period: &PeriodArgs) -> Result<Report, Error> {
        let config = Config::load(global.config.as_deref())?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let period = Period::choose(&period.choice(), now_ms)?;
        let session = Session::open(&global.data).await?;
        let coverage = Coverage::of(&session, &period, now_ms).await?;
        let header = Header::new(&period, &coverage, &session, &config);
        Ok(Report { config, session, period, coverage, header })
    }

    /// Registers `minute_costs` for the period, for the cost reports, and
    /// adds to the header for how long energy was not measured, if at all.
    pub async fn with_costs(self) -> Result<Report, Error> {
        crate::cost::register_minute_costs(&self.session, &self.config, &self.period).await?;
        self.with_energy_line().await
    }

    /// [`Report::with_costs`], computed once and held in memory, for a
    /// command that reads it many times (the monthly report).
    pub async fn with_costs_in_memory(self) -> Result<Report, Error> {
        crate::cost::register_minute_costs_as(
            &self.session,
            &self.config,
            &self.period,
            crate::cost::Keep::InMemory,
        )
        .await?;
        self.with_energy_line().await
    }

    async fn with_energy_line(mut self) -> Result<Report, Error> {
        let unknown = crate::header::energy_unknown_hours(&self.session).await?;
        if let Some(line) = crate::header::energy_unknown_line(unknown) {
            self.header.push(line);
        }
        Ok(self)
    }
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
        Command::Spend(args) => done(spend::run(&cli.global, args, out).await),
        Command::IdleCost(args) => done(idle_cost::run(&cli.global, args, out).await),
        Command::Windows(args) => done(windows::run(&cli.global, args, out).await),
        Command::Chart(args) => done(chart::run(&cli.global, args, out).await),
        Command::Report(args) => done(report::run(&cli.global, args, out).await),
        Command::Demo(args) => done(demo::run(&cli.global, args, out).await),
    }
}
