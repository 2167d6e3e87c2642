//! The session of `apron sql` without a query, shared by the interactive
//! shell ([`super::shell`]) and a script read from standard input
//! ([`super::script`]): one [`Session`] opened at the start, statements
//! run on it one at a time exactly as `apron sql QUERY` runs its query
//! (read-only, the views they name registered for the period given at the
//! start, the same errors), the dot commands carried out, and the format
//! and timer they set.
//!
//! Reading lines and reporting errors is the callers' job.

use std::io::Write;
use std::time::Instant;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::error::{Error, OutputError};
use crate::output::Format;
use crate::session::Session;

use super::dot::{self, Dot};
use super::rerun::{Counting, MAX_TRIES, vanished};
use super::statements::Splitter;
use super::views::{Registered, register_named};

/// The SQL of `.tables`.
const TABLES_SQL: &str = "SELECT table_name, table_type FROM information_schema.tables \
                          WHERE table_schema = 'public' ORDER BY table_name";

/// What comes after a dot command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Read the next line.
    Continue,
    /// `.quit`: stop reading.
    Quit,
}

/// A session over the data folder that runs statements one at a time.
pub(crate) struct Console<'a> {
    global: &'a GlobalArgs,
    period: &'a PeriodArgs,
    session: Session,
    registered: Registered,
    format: Format,
    timer: bool,
}

impl std::fmt::Debug for Console<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("session", &self.session)
            .field("format", &self.format)
            .field("timer", &self.timer)
            .finish_non_exhaustive()
    }
}

impl<'a> Console<'a> {
    /// Opens the data folder of `global`; the views a statement names are
    /// registered for `period`, chosen when first needed. Results print in
    /// `global.format` until `.format` says otherwise.
    pub(crate) async fn open(global: &'a GlobalArgs, period: &'a PeriodArgs) -> Result<Self, Error> {
        let session = Session::open(&global.data, global.memory_limit()).await?;
        Ok(Self {
            global,
            period,
            session,
            registered: Registered::default(),
            format: global.format,
            timer: false,
        })
    }

    /// The session statements run on.
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// A splitter of SQL text into statements, in the session's dialect.
    pub(crate) fn splitter(&self) -> Splitter {
        Splitter::new(self.session.dialect())
    }

    /// Runs the statement `sql` and prints its rows to `out` in the
    /// console's format; with the timer on, then prints the time it took
    /// on stderr. When it returns `Ok`, the result is written and flushed.
    ///
    /// A data file that vanished under the query (a day compacted) opens
    /// the data folder again and runs the statement again, if nothing was
    /// printed yet, as `apron sql QUERY` does.
    pub(crate) async fn execute<W: Write>(&mut self, sql: &str, out: W) -> Result<(), Error> {
        let started = Instant::now();
        let mut out = Counting::new(out);
        let mut tries = 0;
        loop {
            tries += 1;
            match self.try_execute(sql, &mut out).await {
                Err(e) if tries < MAX_TRIES && out.written == 0 && vanished(&e) => {
                    tracing::debug!(error = %e, "a data file vanished during the query; opening the data folder again");
                    self.session = Session::open(&self.global.data, self.global.memory_limit()).await?;
                    self.registered = Registered::default();
                }
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
        if self.timer {
            eprintln!("time: {:.3} s", started.elapsed().as_secs_f64());
        }
        Ok(())
    }

    async fn try_execute<W: Write>(&mut self, sql: &str, out: W) -> Result<(), Error> {
        register_named(&self.session, self.global, self.period, sql, &mut self.registered).await?;
        // No values to bind: a placeholder is refused as `apron sql QUERY`
        // refuses one without its --param.
        let df = crate::commands::sql::params::bind_to(self.session.sql(sql).await?, Vec::new())?;
        self.session.print(df, self.format, out).await.map(drop)
    }

    /// Carries out `dot`, printing what it prints to `out`.
    pub(crate) async fn dot<W: Write>(&mut self, dot: Dot, mut out: W) -> Result<Flow, Error> {
        match dot {
            Dot::Tables => self.execute(TABLES_SQL, out).await?,
            // The name is checked to be a plain (qualified) name; naming a
            // view registers it, as any statement that names it would.
            Dot::Schema(table) => self.execute(&format!("DESCRIBE {table}"), out).await?,
            Dot::Format(format) => self.format = format,
            Dot::Timer(on) => self.timer = on,
            Dot::Help => out
                .write_all(dot::help().as_bytes())
                .and_then(|()| out.flush())
                .map_err(|source| OutputError::Write { source })?,
            Dot::Quit => return Ok(Flow::Quit),
        }
        Ok(Flow::Continue)
    }
}
