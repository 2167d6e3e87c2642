//! The flag groups several commands flatten into their arguments
//! (`#[command(flatten)]`), each defined once: the period (`--month`,
//! `--from`/`--to`, `--last`), the thresholds of a memory-holding idle
//! stretch (`--min-idle`, `--min-mem`), and how a report is written
//! (`--force`, `--self-contained`); and the value parsers those commands
//! share. The global options (data folder, config, format, memory limit)
//! are [`crate::cli::GlobalArgs`].

use std::path::PathBuf;

use chrono::NaiveDate;
use clap::Args;

use crate::output::Format;
use crate::report::period::{self, PeriodChoice};
use crate::session::memory::{MEMORY_LIMIT_ENV, MemoryLimit};

/// Options every command takes, before or after its name.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Data folder written by apron-recorder (DATA/TABLE/date=…/host=…/).
    /// Default: $APRON_DATA, else ./data
    #[arg(long, global = true, value_name = "DIR", env = "APRON_DATA", default_value = "./data")]
    pub data: PathBuf,

    /// Cost and team configuration (apron.toml); without it the documented
    /// defaults apply. `sql` uses it only for the view minute_costs and the
    /// apron_ functions.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// How results are printed.
    #[arg(long, global = true, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// The most memory a query may hold, e.g. 512M, 2G, 1.5GiB (K, M, G, T
    /// are powers of 1024). Sorts and aggregations past it spill to a
    /// temporary folder under $TMPDIR (else /tmp); a query that still does
    /// not fit fails and says so. Default: $APRON_MEMORY_LIMIT, else the
    /// smaller of 2 GiB and half this machine's memory.
    #[arg(long, global = true, value_name = "SIZE", env = MEMORY_LIMIT_ENV)]
    pub memory_limit: Option<MemoryLimit>,
}

impl GlobalArgs {
    /// The memory limit given, else the default for this machine.
    pub fn memory_limit(&self) -> MemoryLimit {
        self.memory_limit.unwrap_or_else(MemoryLimit::for_this_machine)
    }
}

/// The period of a report: `--month`, or `--from`/`--to`, or `--last`;
/// default the last 30 days. Half-open and in UTC.
#[derive(Debug, Clone, Default, Args)]
pub struct PeriodArgs {
    /// A UTC calendar month, YYYY-MM (e.g. 2026-11).
    #[arg(long, value_name = "YYYY-MM", value_parser = period::parse_month, conflicts_with_all = ["from", "to", "last"])]
    pub month: Option<NaiveDate>,

    /// Period start, inclusive: YYYY-MM-DD (midnight UTC) or an RFC 3339
    /// time (2026-11-02T08:00:00Z). Default: 30 days before --to.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time, conflicts_with = "last")]
    pub from: Option<i64>,

    /// Period end, exclusive, in the same forms as --from. Default: now.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time, conflicts_with = "last")]
    pub to: Option<i64>,

    /// The period ending now (e.g. 7d, 12h). Default: 30d.
    #[arg(long, value_parser = apron_cli::units::positive_days)]
    pub last: Option<std::time::Duration>,
}

impl PeriodArgs {
    /// The flags as a [`PeriodChoice`].
    pub fn choice(&self) -> PeriodChoice {
        PeriodChoice { month: self.month, from: self.from, to: self.to, last: self.last }
    }
}

/// The thresholds of a stretch in which a process held GPU memory while its
/// GPU sat idle (`zombies`, `starved`); `None`: the config's.
#[derive(Debug, Clone, Default, Args)]
pub struct HeldIdleArgs {
    /// Shortest idle stretch (default: `[zombie] min_idle` of the config, 10m).
    #[arg(long, value_parser = apron_cli::units::positive_minutes)]
    pub min_idle: Option<std::time::Duration>,

    /// Least GPU memory held: MiB (256) or a size (1GiB, 512M) (default:
    /// `[zombie] min_mem_mib`, 256).
    #[arg(long, value_name = "MIB", value_parser = apron_cli::units::mib)]
    pub min_mem: Option<u64>,
}

/// How `report` and `demo` write the report into --out.
#[derive(Debug, Clone, Default, Args)]
pub struct ReportWriteArgs {
    /// Write into --out even when it holds other files and no earlier
    /// report (apron's files in it are replaced; nothing else is touched).
    #[arg(long)]
    pub force: bool,

    /// Embed the charts and the tables' CSVs in index.html as data: URLs,
    /// so the page alone is the whole report, one file to mail (the PNG and
    /// CSV files are written beside it all the same).
    #[arg(long)]
    pub self_contained: bool,
}

/// The longest `zombies --wait` and `windows --grace`.
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(3_600);

/// A TERM-to-KILL wait: a duration longer than zero, at most [`MAX_WAIT`].
pub(crate) fn parse_wait(s: &str) -> Result<std::time::Duration, String> {
    let d = apron_cli::units::positive_seconds(s)?;
    if d > MAX_WAIT {
        return Err("must be at most 1h".into());
    }
    Ok(d)
}

/// A `--starved-pcie` value: whole MiB/s, at most
/// [`crate::config::MAX_STARVED_PCIE_MIB_PER_S`].
pub(crate) fn parse_starved_pcie(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v <= crate::config::MAX_STARVED_PCIE_MIB_PER_S => Ok(v),
        _ => Err("expected a whole number of MiB/s from 0 to 1048576".into()),
    }
}
