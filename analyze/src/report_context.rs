//! What every report over a period starts from: the effective config, the
//! session over the data folder, the period chosen, what the data holds in
//! it, and the header lines that say so ([`Report`]).
//!
//! The figures (`crate::figures`), the charts (`crate::charts`) and the
//! commands all take a [`Report`]; none of them builds one its own way.

use crate::cli::{GlobalArgs, PeriodArgs};
use crate::config::Config;
use crate::error::Error;
use crate::header::{Coverage, Header, config_warnings};
use crate::period::Period;
use crate::session::Session;

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
    /// GPU-hours of the period whose energy was not measured (neither an
    /// energy counter nor a power reading); known once the costs are
    /// registered ([`Report::with_costs`]), 0 before.
    pub energy_unknown_hours: f64,
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
        let session = Session::open(&global.data, global.memory_limit()).await?;
        let coverage = Coverage::of(&session, &period, now_ms).await?;
        let header = Header::new(&period, &coverage, &session, &config);
        Ok(Report { config, session, period, coverage, header, energy_unknown_hours: 0.0 })
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
        self.energy_unknown_hours = crate::header::energy_unknown_hours(&self.session).await?;
        if let Some(line) = crate::header::energy_unknown_line(self.energy_unknown_hours) {
            self.header.push(line);
        }
        Ok(self)
    }
}
