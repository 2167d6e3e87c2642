//! What every report over a period starts from: the effective config, the
//! session over the data folder, the period chosen, what the data holds in
//! it, and the header lines that say so ([`ReportContext`]).
//!
//! The figures (`crate::report::figures`), the charts (`crate::report::charts`) and the
//! commands all take a [`ReportContext`]; none of them builds one its own way.

use std::time::Duration;

use apron_schemas::time::{HOUR_MS, HOUR_SECS, MINUTE_MS, MINUTE_SECS};

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::config::Config;
use crate::error::Error;
use crate::ledger::{Ledger, Rules};
use crate::report::header::{Coverage, Header, config_warnings};
use crate::report::period::Period;
use crate::session::{Days, Session};

/// What every report over a period starts from.
#[derive(Debug)]
pub struct ReportContext {
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
    /// GPU-hours of the period whose energy was not measured (neither an
    /// energy counter nor a power reading); known once the costs are
    /// registered ([`ReportContext::with_costs`]), 0 before.
    pub energy_unknown_hours: f64,
    /// The period's ledger, once the costs are registered.
    pub ledger: Option<Ledger>,
    /// The time the report was asked for (ms since the epoch): whether a
    /// period, or a month, is over.
    pub now_ms: i64,
}

impl ReportContext {
    /// Loads the config, opens the data folder, chooses the period and
    /// finds what the data holds in it (an empty period is an error). Config
    /// warnings go to stderr.
    pub async fn prepare(global: &GlobalArgs, period: &PeriodArgs) -> Result<ReportContext, Error> {
        let report = Self::prepare_quietly(global, period).await?;
        for warning in config_warnings(&report.config, &report.coverage) {
            eprintln!("{warning}");
        }
        Ok(report)
    }

    /// [`ReportContext::prepare`] without printing the config warnings.
    pub async fn prepare_quietly(global: &GlobalArgs, period: &PeriodArgs) -> Result<ReportContext, Error> {
        let config = Config::load(global.config.as_deref())?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let period = Period::choose(&period.choice(), now_ms)?;
        let session = open(global, &period).await?;
        let coverage = Coverage::of(&session, &period, now_ms).await?;
        Ok(ReportContext::new(config, session, period, coverage, now_ms))
    }

    /// [`ReportContext::prepare`] and [`ReportContext::with_costs`] in one pass: the
    /// header's coverage comes from the ledger's pass, not from reading
    /// the rollups again. Config warnings go to stderr.
    pub async fn prepare_costs(global: &GlobalArgs, period: &PeriodArgs) -> Result<ReportContext, Error> {
        Self::prepare_costs_by(global, period, ReportContext::config_rules).await
    }

    /// [`ReportContext::prepare_costs`] without printing the config
    /// warnings, and `None` when the period holds no data: what a report
    /// reads of another period (the month before). The error an empty
    /// period gives elsewhere names where the data lies, which reads the
    /// whole data folder; this does not (docs/src/performance.md, "The
    /// report at 4,096 GPUs, step by step").
    pub async fn prepare_costs_if_any(
        global: &GlobalArgs,
        period: &PeriodArgs,
    ) -> Result<Option<ReportContext>, Error> {
        match Self::prepare_ledger_if_any(global, period, ReportContext::config_rules).await? {
            Prepared::Data(prepared) => {
                let (report, ledger) = *prepared;
                Ok(Some(report.attach(ledger)?))
            }
            Prepared::Empty(_) => Ok(None),
        }
    }

    /// [`ReportContext::prepare_costs`] with the ledger's stretches found by the
    /// rules `rules_of` gives for the config (`savings`).
    pub async fn prepare_costs_by(
        global: &GlobalArgs,
        period: &PeriodArgs,
        rules_of: impl FnOnce(&Config) -> Rules,
    ) -> Result<ReportContext, Error> {
        let (report, ledger) = Self::prepare_ledger(global, period, rules_of).await?;
        for warning in config_warnings(&report.config, &report.coverage) {
            eprintln!("{warning}");
        }
        report.attach(ledger)
    }

    /// [`ReportContext::prepare`] for `zombies` and `reclaim`: the ledger's pass
    /// finds the stretches by the rules `rules_of` gives for the config,
    /// and the header's coverage comes from it. The header is `prepare`'s.
    pub async fn prepare_stretches(
        global: &GlobalArgs,
        period: &PeriodArgs,
        rules_of: impl FnOnce(&Config) -> Rules,
    ) -> Result<ReportContext, Error> {
        let (mut report, ledger) = Self::prepare_ledger(global, period, rules_of).await?;
        for warning in config_warnings(&report.config, &report.coverage) {
            eprintln!("{warning}");
        }
        report.ledger = Some(ledger);
        Ok(report)
    }

    /// The config, session, period, ledger and coverage of a report, the
    /// ledger's stretches found by `rules_of`'s rules. An empty period is
    /// an error that says where the data lies.
    async fn prepare_ledger(
        global: &GlobalArgs,
        period: &PeriodArgs,
        rules_of: impl FnOnce(&Config) -> Rules,
    ) -> Result<(ReportContext, Ledger), Error> {
        match Self::prepare_ledger_if_any(global, period, rules_of).await? {
            Prepared::Data(prepared) => Ok(*prepared),
            Prepared::Empty(empty) => {
                // Nothing in the period: the coverage says so, as an error.
                let coverage = Coverage::of(&empty.session, &empty.period, empty.now_ms).await?;
                Ok((
                    ReportContext::new(empty.config, empty.session, empty.period, coverage, empty.now_ms),
                    empty.ledger,
                ))
            }
        }
    }

    /// [`ReportContext::prepare_ledger`], an empty period given back as
    /// such, its coverage not looked for.
    async fn prepare_ledger_if_any(
        global: &GlobalArgs,
        period: &PeriodArgs,
        rules_of: impl FnOnce(&Config) -> Rules,
    ) -> Result<Prepared, Error> {
        let config = Config::load(global.config.as_deref())?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        let period = Period::choose(&period.choice(), now_ms)?;
        let session = open(global, &period).await?;
        let bucket_ms = bucket_ms(&period);
        let rules = rules_of(&config);
        let ledger = Ledger::compute(&session, &config, &period, bucket_ms, rules).await?;
        let Some(seen) = &ledger.coverage else {
            return Ok(Prepared::Empty(Box::new(EmptyPeriod { config, session, period, now_ms, ledger })));
        };
        let coverage =
            Coverage::from_row(&session, &period, now_ms, seen.row.clone(), seen.model_hours.clone()).await?;
        Ok(Prepared::Data(Box::new((ReportContext::new(config, session, period, coverage, now_ms), ledger))))
    }

    /// A report over `period` with its coverage found, its header made from
    /// it, no ledger attached yet.
    fn new(
        config: Config,
        session: Session,
        period: Period,
        coverage: Coverage,
        now_ms: i64,
    ) -> ReportContext {
        let header = Header::new(&period, &coverage, &session, &config);
        ReportContext {
            config,
            session,
            period,
            coverage,
            header,
            energy_unknown_hours: 0.0,
            ledger: None,
            now_ms,
        }
    }

    /// Computes the period's ledger ([`Ledger`]) and registers its
    /// `cost_buckets` for the cost reports, bucketed as the period's charts
    /// are (at most an hour), its stretches found by the config's zombie and
    /// reclaim rules; adds to the header for how long energy was not
    /// measured, if at all.
    pub async fn with_costs(self) -> Result<ReportContext, Error> {
        let ledger =
            Ledger::compute(&self.session, &self.config, &self.period, bucket_ms(&self.period), self.rules())
                .await?;
        self.attach(ledger)
    }

    /// Registers `ledger`'s `cost_buckets`, states the energy not measured,
    /// and keeps it.
    fn attach(mut self, ledger: Ledger) -> Result<ReportContext, Error> {
        ledger.register(&self.session)?;
        self.energy_unknown_hours = ledger.energy_unknown_seconds / HOUR_SECS as f64;
        if let Some(line) = crate::report::header::energy_unknown_line(self.energy_unknown_hours) {
            self.header.push(line);
        }
        self.ledger = Some(ledger);
        Ok(self)
    }

    /// The period's ledger, as the report was prepared with it
    /// ([`ReportContext::prepare_costs`], [`ReportContext::prepare_stretches`],
    /// [`ReportContext::with_costs`]): figures read it and never compute one.
    pub fn ledger(&self) -> Result<&Ledger, Error> {
        self.ledger
            .as_ref()
            .ok_or(Error::Internal { message: "a report needs its ledger and was prepared without one" })
    }

    /// Where the period's data ends (ms since the epoch): the end of its
    /// last recorded minute, as the ledger saw it, else the last sample.
    pub fn data_end_ms(&self) -> i64 {
        match self.ledger.as_ref().and_then(|l| l.coverage.as_ref()) {
            Some(seen) => seen.row.last_minute + MINUTE_MS,
            None => self.coverage.last_ms,
        }
    }

    /// The stretch rules of the config: what `zombies` and `reclaim` find by default.
    pub fn rules(&self) -> Rules {
        Self::config_rules(&self.config)
    }

    /// The stretch rules of `config`.
    pub fn config_rules(config: &Config) -> Rules {
        rules(config.zombie.min_idle, config.zombie.min_mem_mib, config.reclaim.idle_for)
    }
}

/// The calendar month holding a moment, so far: what `apron alerts`' budget
/// rules read ([`crate::report::figures::alerts`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonthSoFar {
    /// The whole calendar month.
    pub month: Period,
    /// Where its data ends: the end of its last recorded minute.
    pub data_end_ms: i64,
}

impl MonthSoFar {
    /// The month holding `now_ms`, from its first hour to `now_ms`, with its
    /// ledger's `cost_buckets` registered in `session` (which has none
    /// before) for the budget figures. `None` when no team has a budget,
    /// the month has not begun, or it holds no data.
    pub async fn open(session: &Session, config: &Config, now_ms: i64) -> Result<Option<MonthSoFar>, Error> {
        use crate::report::period::month_holding;
        let Some(month) = month_holding(now_ms).filter(|_| config.any_budget()) else {
            return Ok(None);
        };
        if now_ms <= month.start_ms {
            return Ok(None);
        }
        let so_far = Period { start_ms: month.start_ms, end_ms: now_ms };
        let ledger =
            Ledger::compute(session, config, &so_far, HOUR_MS, ReportContext::config_rules(config)).await?;
        let Some(seen) = &ledger.coverage else { return Ok(None) };
        let data_end_ms = seen.row.last_minute + MINUTE_MS;
        ledger.register(session)?;
        Ok(Some(MonthSoFar { month, data_end_ms }))
    }
}

/// A period's report made ready, or the period found empty.
enum Prepared {
    Data(Box<(ReportContext, Ledger)>),
    Empty(Box<EmptyPeriod>),
}

/// What was read of a period in which the ledger found no minute.
struct EmptyPeriod {
    config: Config,
    session: Session,
    period: Period,
    now_ms: i64,
    ledger: Ledger,
}

/// The session of a report over `period`: on a bucket, only the period's
/// days are listed.
async fn open(global: &GlobalArgs, period: &Period) -> Result<Session, Error> {
    let days = Days::of_range(period.start_ms, period.end_ms);
    Session::open_within(&global.data, global.memory_limit(), days).await
}

/// The bucket of a period's `cost_buckets`: its charts' (at most an hour).
fn bucket_ms(period: &Period) -> i64 {
    period.chart_bucket_seconds().min(HOUR_SECS as i64) * 1000
}

/// Stretch rules: a zombie holds at least `zombie_min_mem_mib` MiB for at
/// least `zombie_min_idle`; a GPU is reclaimable after `reclaim_for` idle.
pub fn rules(zombie_min_idle: Duration, zombie_min_mem_mib: u64, reclaim_for: Duration) -> Rules {
    Rules {
        zombie_min_mem_bytes: i64::try_from(zombie_min_mem_mib.saturating_mul(1 << 20)).unwrap_or(i64::MAX),
        zombie_min_minutes: whole_minutes(zombie_min_idle),
        reclaim_min_minutes: whole_minutes(reclaim_for),
    }
}

/// Whole minutes of `d`, rounded up, at least one: how many idle minutes a
/// stretch needs.
pub fn whole_minutes(d: Duration) -> i64 {
    i64::try_from(d.as_secs().div_ceil(MINUTE_SECS)).unwrap_or(i64::MAX).max(1)
}
