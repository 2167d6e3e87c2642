//! The `apron` command line: global options, one subcommand per command,
//! and how a command line clap refuses is reported.
//!
//! Parsing only; what each command does is in [`crate::commands`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Args, Parser, Subcommand};

use chrono::NaiveDate;

use crate::memory::{MEMORY_LIMIT_ENV, MemoryLimit};
use crate::output::Format;
use crate::period::{self, PeriodChoice};

/// The exit code of every failure: a bad command line, bad input, a failed
/// query.
pub const EXIT_FAILURE: u8 = 2;

/// apron: SQL and reports over the GPU samples `apron-recorder` writes.
#[derive(Debug, Parser)]
#[command(name = "apron", version, about, long_about = None)]
pub struct Cli {
    /// Options every command takes, before or after its name.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

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

/// apron's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one read-only SQL query over the recorded tables (gpu_samples,
    /// proc_samples, the minute rollups gpu_minutes and proc_minutes, all
    /// partitioned by date and host; minute_costs, every GPU-minute of the
    /// period priced and attributed, and cost_buckets, its sums per minute,
    /// GPU, state and owner; a Parquet or CSV file named in place of a
    /// table, FROM 'x.parquet'), with its $1 or $name placeholders bound by
    /// --param; or, without a query, a shell (or the statements of standard
    /// input) over the same tables. --show prints a named report's SQL.
    Sql(SqlArgs),

    /// Print the effective configuration (--config FILE, else ./apron.toml,
    /// else the defaults) as apron.toml, with a first line naming its source;
    /// with a data folder, also the GPU models of the period (default the
    /// last 30 days) that no [[gpu_cost]] entry prices.
    Config(ConfigArgs),

    /// Print the gpu_index of the least-loaded GPU of a host (this one
    /// unless --host names another; lowest mean utilization over the window,
    /// ties broken by most free memory), or a MIG instance's MIG-… UUID, for
    /// CUDA_VISIBLE_DEVICES=$(apron pick). With --format csv|json, print
    /// every GPU of the host, best first.
    Pick(PickArgs),

    /// Check the alert rules (low_usage_1h, low_usage_4h, high_usage_15m,
    /// no_data; thresholds in the config) now. Exit code 1 when any rule fires, 0
    /// when none does, 2 on error, for cron and scripts.
    Alerts(AlertsArgs),

    /// List GPUs idle (below the idle threshold, minute by minute) for at
    /// least --for in a row, since when, who held memory on them, and
    /// whether they still are: candidates to hand back.
    Reclaim(ReclaimArgs),

    /// Replay the period as if GPUs had been reclaimed after --reclaim-after
    /// idle and zombies ended after --zombie-after: the GPU-hours and money
    /// that would have been freed, per team, against the idle cost.
    Savings(SavingsArgs),

    /// List processes that held GPU memory while their GPU sat idle for at
    /// least --min-idle in a row: who, which GPU, how much, since when,
    /// and whether they still run. Processes whose GPU moved data over
    /// PCIe meanwhile are starved of data, not zombies (see `starved`).
    /// With --commands, print the commands that stop those still running.
    Zombies(ZombiesArgs),

    /// List processes that held GPU memory while their GPU sat idle for at
    /// least --min-idle in a row but moved data over PCIe meanwhile (at
    /// least --starved-pcie MiB/s): starved of input, not zombies, with
    /// the GPU's mean activity and PCIe traffic over the stretch.
    Starved(StarvedArgs),

    /// What each team's GPU time cost: GPU-hours busy, idle-held and
    /// idle-empty, energy and cost per team, adding up to the fleet's cost.
    Spend(SpendArgs),

    /// What idle GPU time cost, by team, user, host or GPU, largest first.
    IdleCost(IdleCostArgs),

    /// The fleet's week hour by hour (utilization, idle share, idle cost
    /// per week) and the recurring idle windows it shows, in words.
    Windows(WindowsArgs),

    /// Draw one chart as a PNG: fleet-state, idle-cost, team-spend,
    /// hour-of-week, gpu-days or power.
    Chart(ChartArgs),

    /// Write the monthly report: index.html, summary.md, every chart as a
    /// PNG and every table as a CSV, into --out DIR.
    Report(ReportArgs),

    /// Write the configuration's prices and team rules as three small
    /// Parquet tables (apron_settings, apron_gpu_rates, apron_team_rules)
    /// into --out DIR, one folder each, for Spark, Trino or Athena.
    ExportConfig(ExportConfigArgs),

    /// Print the statements that create apron's tables (partitioned by date
    /// and host, partitions discovered) and the config tables on Spark,
    /// Trino or Athena, `;`-separated.
    Ddl(DdlArgs),

    /// Print one SQL statement computing spend, idle-cost or every priced
    /// GPU-minute on Spark, Trino or Athena, generated from the same
    /// queries/*.sql apron runs, over the tables `apron ddl` creates.
    ExportSql(ExportSqlArgs),

    /// Import history kept elsewhere into the data folder, through the
    /// recorder's writer (same layout, sorted files, minute rollups; one
    /// file per table, host and UTC day): nvidia-smi CSV logs, the pynvml
    /// logger's CSV, or dcgm-exporter series in Prometheus. Rows already in
    /// the data folder are skipped, so importing twice adds nothing; a bad
    /// row stops the import before anything is written.
    Import(ImportArgs),

    /// Simulate a month of a realistic fleet into OUT/data, write its report
    /// and config into OUT, and print the headline figures and commands to
    /// explore it: what apron does, in one command, without a GPU.
    Demo(DemoArgs),

    /// Print the shell completion script for apron, e.g. `apron completions
    /// bash > ~/.local/share/bash-completion/completions/apron` (zsh: a file
    /// `_apron` in a folder of $fpath; fish: ~/.config/fish/completions/apron.fish).
    Completions(CompletionsArgs),

    /// Write apron's manual pages (apron.1 and one per command, apron-spend.1,
    /// …) into --out DIR, e.g. ~/.local/share/man/man1, then `man apron-spend`.
    ManPages(ManPagesArgs),
}

/// `apron completions SHELL`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: apron_cli::docs::Shell,
}

/// `apron man-pages --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ManPagesArgs {
    /// The folder to write the pages into (made if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `apron chart NAME [period] --out FILE.png`.
#[derive(Debug, Clone, Args)]
pub struct ChartArgs {
    /// The chart: fleet-state, idle-cost, team-spend, hour-of-week,
    /// gpu-days or power.
    #[arg(value_parser = chart_names(), hide_possible_values = true)]
    pub name: String,

    /// The PNG file to write: a new file (an existing one is replaced only
    /// with --force).
    #[arg(long, value_name = "FILE.png")]
    pub out: PathBuf,

    /// Replace --out if it exists.
    #[arg(long)]
    pub force: bool,

    /// Width in pixels.
    #[arg(long, default_value_t = 1600)]
    pub width: u32,

    /// Height in pixels.
    #[arg(long, default_value_t = 900)]
    pub height: u32,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// The chart names, as possible values: clap refuses any other (naming
/// them, and the likely one), and the completion scripts offer them.
fn chart_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        apron_reports::ChartName::ALL.map(apron_reports::ChartName::name),
    )
}

/// `apron report --month YYYY-MM --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// The UTC calendar month to report on, YYYY-MM.
    #[arg(long, value_name = "YYYY-MM", value_parser = period::parse_month)]
    pub month: NaiveDate,

    /// The folder to write the report into: a new or empty folder, or an
    /// earlier report's (whose files are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

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

/// `apron demo [--out DIR]`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The folder to write the report into: a new or empty folder, or an
    /// earlier report's (whose files are replaced).
    #[arg(long, value_name = "DIR", default_value = "apron-demo")]
    pub out: PathBuf,

    /// Write into --out even when it holds other files and no earlier
    /// report (apron's files in it are replaced; nothing else is touched).
    #[arg(long)]
    pub force: bool,

    /// Embed the charts and the tables' CSVs in index.html as data: URLs,
    /// so the page alone is the whole report, one file to mail (the PNG and
    /// CSV files are written beside it all the same).
    #[arg(long)]
    pub self_contained: bool,

    /// The month to simulate, YYYY-MM. Default: 2026-11, the month the
    /// README's examples use.
    #[arg(long, value_name = "YYYY-MM", value_parser = period::parse_month)]
    pub month: Option<NaiveDate>,

    /// Days of the month to simulate (a shorter demo), from its first day.
    #[arg(long, value_name = "DAYS")]
    pub days: Option<u32>,

    /// Hosts of 8 GPUs each.
    #[arg(long, default_value_t = 4)]
    pub hosts: usize,

    /// Time between simulated samples. The recorder samples every second;
    /// the demo samples less often to finish in a minute or two, which
    /// changes no figure but the row count.
    #[arg(long, default_value = "10s", value_parser = apron_cli::units::positive_seconds)]
    pub interval: std::time::Duration,

    /// Simulate into this folder instead of OUT/data (query it afterwards
    /// with `apron --data DIR --config OUT/apron.toml …`).
    #[arg(long, value_name = "DIR")]
    pub keep_data: Option<PathBuf>,
}

/// `apron import nvidia-smi|pynvml|prometheus …`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// What to import from.
    #[command(subcommand)]
    pub source: ImportSource,
}

/// Where `apron import` reads history from.
#[derive(Debug, Clone, Subcommand)]
pub enum ImportSource {
    /// The CSV of `nvidia-smi --query-gpu=timestamp,uuid,index,name,… --format=csv`
    /// (with or without nounits; noheader given --columns) into gpu_samples,
    /// or of `--query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory`
    /// (told by its pid column) into proc_samples. `[N/A]` and `[Not Supported]`
    /// are unknown (null); unknown columns are ignored.
    NvidiaSmi(NvidiaSmiArgs),

    /// The CSV of the pynvml logger (`time.time()`, then `util%|mem%|NMiB|W`
    /// per GPU in index order) into gpu_samples. GPUs get a stable synthetic
    /// UUID from the host and index.
    Pynvml(PynvmlArgs),

    /// dcgm-exporter series (DCGM_FI_DEV_*, DCGM_FI_PROF_*) from a Prometheus
    /// server's HTTP API into gpu_samples, one row per GPU and step, one host
    /// per Hostname label (else instance); Kubernetes pod labels become
    /// proc_samples rows.
    Prometheus(PrometheusArgs),
}

/// `apron import nvidia-smi FILE.csv… --host H [--tz ZONE]`.
#[derive(Debug, Clone, Args)]
pub struct NvidiaSmiArgs {
    /// The CSV files nvidia-smi wrote on the host: give its --query-gpu and
    /// --query-compute-apps logs together, so that each minute's rollup
    /// knows which processes held the GPU.
    #[arg(value_name = "FILE.csv", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,

    /// The host the file was logged on (its host= partition).
    #[arg(long)]
    pub host: String,

    /// The IANA zone of the node that logged the file (its timestamps are
    /// local time), e.g. Europe/Berlin.
    #[arg(long, value_name = "ZONE", default_value = "UTC", value_parser = parse_zone)]
    pub tz: chrono_tz::Tz,

    /// The columns of a file written with noheader, as given to --query-gpu
    /// or --query-compute-apps, e.g. timestamp,uuid,utilization.gpu. Values
    /// without a unit take nvidia-smi's (%, MiB, W, MHz).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub columns: Option<Vec<String>>,

    /// The time each row stands for. Default: the median spacing of each
    /// GPU's (or process's) consecutive samples.
    #[arg(long, value_parser = apron_cli::units::positive_seconds)]
    pub interval: Option<std::time::Duration>,

    /// The GPU model of rows without a name column (e.g. "NVIDIA H100 80GB HBM3").
    #[arg(long)]
    pub model: Option<String>,
}

/// `apron import pynvml FILE.csv --host H`.
#[derive(Debug, Clone, Args)]
pub struct PynvmlArgs {
    /// The CSV file the logger wrote.
    #[arg(value_name = "FILE.csv")]
    pub file: PathBuf,

    /// The host the file was logged on (its host= partition).
    #[arg(long)]
    pub host: String,

    /// The time each row stands for. Default: the median spacing of the
    /// samples (30s for the guide's logger).
    #[arg(long, value_parser = apron_cli::units::positive_seconds)]
    pub interval: Option<std::time::Duration>,

    /// The GPUs' model, which the log does not record (e.g. "NVIDIA H100 80GB HBM3").
    #[arg(long)]
    pub model: Option<String>,
}

/// `apron import prometheus --url URL --from T --to T [--step D]`.
#[derive(Debug, Clone, Args)]
pub struct PrometheusArgs {
    /// The Prometheus server, e.g. http://prometheus:9090.
    #[arg(long)]
    pub url: String,

    /// Period start, inclusive: YYYY-MM-DD (midnight UTC) or an RFC 3339 time.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub from: i64,

    /// Period end, exclusive, in the same forms as --from.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub to: i64,

    /// The time each row stands for: gauges are averaged over it, counters
    /// taken at its end.
    #[arg(long, default_value = "60s", value_parser = apron_cli::units::positive_seconds)]
    pub step: std::time::Duration,
}

fn parse_zone(s: &str) -> Result<chrono_tz::Tz, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)"))
}

/// `apron export-config --out DIR`.
#[derive(Debug, Clone, Args)]
pub struct ExportConfigArgs {
    /// The folder to write the tables into (created if missing; the three
    /// tables' files in it are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// `apron ddl --engine spark|trino|athena --location URL`.
#[derive(Debug, Clone, Args)]
pub struct DdlArgs {
    /// The engine the statements are for.
    #[arg(long, value_enum)]
    pub engine: Engine,

    /// Where the tables' folders are, as the engine reads it: the bucket
    /// prefix apron-recorder --ship writes (s3://BUCKET/PREFIX), or a data
    /// folder (file:///data/apron, or an absolute path).
    #[arg(long, value_name = "URL")]
    pub location: String,

    /// Where `apron export-config --out` wrote the config tables, as the
    /// engine reads it. Default: LOCATION/apron_config.
    #[arg(long, value_name = "URL")]
    pub config_location: Option<String>,

    /// The schema (database) the tables are created in.
    #[arg(long, default_value = "apron")]
    pub schema: String,
}

/// An engine that reads apron's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Apache Spark SQL (3.4 or later; tested with 4).
    Spark,
    /// Trino, with its Hive connector.
    Trino,
    /// Amazon Athena (engine version 3).
    Athena,
}

/// What `apron export-sql` computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportReport {
    /// `apron spend`: cost per team.
    Spend,
    /// `apron idle-cost --by …`: idle cost by team, user, host or GPU.
    IdleCost,
    /// Every GPU-minute of the period priced and attributed (the view
    /// minute_costs), for any other sum.
    MinuteCosts,
}

/// `apron export-sql spend|idle-cost|minute-costs --engine E [period]`.
#[derive(Debug, Clone, Args)]
pub struct ExportSqlArgs {
    /// The report.
    #[arg(value_enum)]
    pub report: ExportReport,

    /// The engine the statement is for.
    #[arg(long, value_enum)]
    pub engine: Engine,

    /// What idle-cost groups by (idle-cost only).
    #[arg(long, value_enum)]
    pub by: Option<IdleBy>,

    /// The schema (database) `apron ddl` created the tables in.
    #[arg(long, default_value = "apron")]
    pub schema: String,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
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

/// `apron spend [period]`.
#[derive(Debug, Clone, Args)]
pub struct SpendArgs {
    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// How `apron idle-cost` groups idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IdleBy {
    /// By team (the config's rules); idle-empty time is "(unallocated)".
    Team,
    /// By the user owning the processes; idle-empty time is "(unallocated)".
    User,
    /// By host.
    Host,
    /// By GPU (gpu_uuid, with host and gpu_index).
    Gpu,
}

impl IdleBy {
    /// The name `queries/idle_cost.sql` takes as `$1`.
    pub fn name(self) -> &'static str {
        match self {
            IdleBy::Team => "team",
            IdleBy::User => "user",
            IdleBy::Host => "host",
            IdleBy::Gpu => "gpu",
        }
    }
}

/// `apron idle-cost [--by team|user|host|gpu] [period]`.
#[derive(Debug, Clone, Args)]
pub struct IdleCostArgs {
    /// What to group idle time by.
    #[arg(long, value_enum, default_value_t = IdleBy::Team)]
    pub by: IdleBy,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// What `apron windows` prints as rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WindowsShow {
    /// The hour-of-week profile, one row per recorded hour of the week (168
    /// for a week or more of data); the windows are in the header.
    Profile,
    /// The recurring idle windows found, one row each.
    Windows,
}

/// `apron windows [--show profile|windows | --cron COMMAND [--grace D]]
/// [--min-idle-share PCT] [--min-hours H] [period]`.
#[derive(Debug, Clone, Args)]
pub struct WindowsArgs {
    /// What to print as rows.
    #[arg(long, value_enum, default_value_t = WindowsShow::Profile)]
    pub show: WindowsShow,

    /// Print crontab lines instead of rows: for each host, lines that start
    /// COMMAND (shell text, run by sh) at the start of each idle window,
    /// with CUDA_VISIBLE_DEVICES set to the host's GPUs idle in that
    /// window, and stop it at the window's end (times in UTC).
    #[arg(long, value_name = "COMMAND", conflicts_with = "show")]
    pub cron: Option<String>,

    /// With --cron: how long the command gets between TERM and KILL at the
    /// window's end, whole seconds, up to 1h (default 60s).
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, requires = "cron")]
    pub grace: Option<std::time::Duration>,

    /// An hour of the week belongs to an idle window when at least this
    /// share of its GPU time is idle (percent).
    #[arg(long, value_name = "PCT", default_value_t = 60.0, value_parser = parse_percent)]
    pub min_idle_share: f64,

    /// The shortest window reported, in hours.
    #[arg(long, value_name = "HOURS", default_value_t = 2)]
    pub min_hours: u32,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err("expected a percentage from 0 to 100".into()),
    }
}

/// `apron reclaim [--for 2h] [period]`.
#[derive(Debug, Clone, Args)]
pub struct ReclaimArgs {
    /// Shortest idle stretch to report (default: `[reclaim] for` of the
    /// config, 2h).
    #[arg(long = "for", value_parser = apron_cli::units::positive_hours)]
    pub idle_for: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// `apron zombies [--min-idle 10m] [--min-mem 256] [--starved-pcie 100]
/// [--commands [--wait 30s]] [period]`.
#[derive(Debug, Clone, Args)]
pub struct ZombiesArgs {
    /// Shortest idle stretch (default: `[zombie] min_idle` of the config, 10m).
    #[arg(long, value_parser = apron_cli::units::positive_minutes)]
    pub min_idle: Option<std::time::Duration>,

    /// Least GPU memory held: MiB (256) or a size (1GiB, 512M) (default:
    /// `[zombie] min_mem_mib`, 256).
    #[arg(long, value_name = "MIB", value_parser = apron_cli::units::mib)]
    pub min_mem: Option<u64>,

    /// PCIe traffic, MiB/s in and out, at or above which the GPU's mean
    /// over the stretch makes a process starved of data, not a zombie
    /// (default: `[zombie] starved_pcie_mib_per_s`, 100; 0: none is).
    #[arg(long, value_name = "MIB_PER_S", value_parser = parse_starved_pcie)]
    pub starved_pcie: Option<u64>,

    /// Print, instead of the list, a shell script that stops the zombies
    /// idle now, host by host, most memory-minutes first: a notice to the
    /// owner, TERM, a wait, KILL if still there (a Kubernetes pod is
    /// deleted, a Slurm job cancelled). Each host's part first re-checks
    /// that the pid is still the process recorded, that it is in its pod or
    /// job by its cgroup, and that its GPUs have been idle for --min-idle by
    /// the recorder's newest data there. apron itself sends no signal.
    #[arg(long)]
    pub commands: bool,

    /// With --commands: print the commands even for a period that ended
    /// more than 10 minutes ago (each host still re-checks, before it acts,
    /// that the process is idle now).
    #[arg(long, requires = "commands")]
    pub any_period: bool,

    /// With --commands: how long a process gets between TERM and KILL (a
    /// pod's grace period), whole seconds, up to 1h.
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, requires = "commands")]
    pub wait: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// `apron starved [--min-idle 10m] [--min-mem 256] [--starved-pcie 100] [period]`.
#[derive(Debug, Clone, Args)]
pub struct StarvedArgs {
    /// Shortest idle stretch (default: `[zombie] min_idle` of the config, 10m).
    #[arg(long, value_parser = apron_cli::units::positive_minutes)]
    pub min_idle: Option<std::time::Duration>,

    /// Least GPU memory held: MiB (256) or a size (1GiB, 512M) (default:
    /// `[zombie] min_mem_mib`, 256).
    #[arg(long, value_name = "MIB", value_parser = apron_cli::units::mib)]
    pub min_mem: Option<u64>,

    /// PCIe traffic, MiB/s in and out, at or above which the GPU's mean
    /// over the stretch makes a process starved of data (default:
    /// `[zombie] starved_pcie_mib_per_s`, 100; 0: none is).
    #[arg(long, value_name = "MIB_PER_S", value_parser = parse_starved_pcie)]
    pub starved_pcie: Option<u64>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// The longest `zombies --wait`.
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(3_600);

fn parse_wait(s: &str) -> Result<std::time::Duration, String> {
    let d = apron_cli::units::positive_seconds(s)?;
    if d > MAX_WAIT {
        return Err("must be at most 1h".into());
    }
    Ok(d)
}

fn parse_starved_pcie(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v <= crate::config::MAX_STARVED_PCIE_MIB_PER_S => Ok(v),
        _ => Err("expected a whole number of MiB/s from 0 to 1048576".into()),
    }
}

/// `apron savings [--reclaim-after 2h] [--zombie-after 30m] [period]`.
#[derive(Debug, Clone, Args)]
pub struct SavingsArgs {
    /// Reclaim a GPU once idle this long in a row (default: `[reclaim] for`
    /// of the config, 2h).
    #[arg(long, value_name = "DURATION", value_parser = apron_cli::units::positive_hours)]
    pub reclaim_after: Option<std::time::Duration>,

    /// End a zombie once it has held memory on its idle GPU this long
    /// (default: `[zombie] min_idle` of the config, 10m).
    #[arg(long, value_name = "DURATION", value_parser = apron_cli::units::positive_minutes)]
    pub zombie_after: Option<std::time::Duration>,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// `apron alerts [--at T]`.
#[derive(Debug, Clone, Args)]
pub struct AlertsArgs {
    /// Check the rules as of this time instead of now: YYYY-MM-DD (midnight
    /// UTC) or an RFC 3339 time. What would have fired then.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub at: Option<i64>,
}

/// `apron pick [--host H] [--window 5m]`.
#[derive(Debug, Clone, Args)]
pub struct PickArgs {
    /// The host whose GPUs to rank. Default: this machine, by the name
    /// apron-recorder records it under without --host (its host name).
    #[arg(long)]
    pub host: Option<String>,

    /// How far back to average utilization (e.g. 30s, 5m, 1h).
    #[arg(long, default_value = "5m", value_parser = apron_cli::units::positive_minutes)]
    pub window: std::time::Duration,
}

/// `apron config [period]`: the global options (`--config`, `--format`,
/// `--data`) and the period whose GPU models are checked against the
/// prices.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// The period whose GPU models are checked against the `[[gpu_cost]]`
    /// entries, when there is a data folder.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// `apron sql [QUERY | -f FILE] [--out FILE]`, or `apron sql --show [NAME]`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("source").args(["query", "file"])))]
pub struct SqlArgs {
    /// The query, e.g. "SELECT host, count(*) FROM gpu_samples GROUP BY
    /// host". Without a query or --file: on a terminal, an interactive shell
    /// (.help lists its commands); else the statements standard input holds
    /// (`apron sql < queries.sql`), each ended by `;`, each result printed in
    /// turn, dot commands such as `.format csv` on lines of their own. The
    /// first statement that fails stops them: its error names it, exit code
    /// 2.
    pub query: Option<String>,

    /// Read the query from FILE ("-" for standard input).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<PathBuf>,

    /// Write the result to FILE instead of printing it, in the format its
    /// extension names: .parquet, .csv, .json (one array, as --format json),
    /// .ndjson or .jsonl (one object per line). Rows are written as the
    /// query yields them, into a temporary file beside FILE that replaces
    /// FILE once complete: a query that fails leaves FILE as it was. Prints
    /// how many rows it wrote.
    #[arg(long, value_name = "FILE", requires = "source")]
    pub out: Option<PathBuf>,

    /// Bind VALUE to the query's placeholder $NAME: `--param 1=2026-11-01`
    /// binds $1, `--param host=gpu-07` binds $host. Repeat it for each
    /// placeholder; every one the query has needs a value. The value's type
    /// is read from its form: a date or time (2026-11-01,
    /// 2026-11-02T08:00:00Z) is a UTC timestamp (ms), a whole number is an
    /// Int64, a decimal number (2.5, 1e3) a Float64, anything else text
    /// (Utf8). Values are bound, never pasted into the SQL; cast in the
    /// query for another type (CAST($1 AS VARCHAR)).
    #[arg(long = "param", value_name = "NAME=VALUE", requires = "source")]
    pub params: Vec<String>,

    /// Print the SQL of the named report NAME as this binary carries it
    /// (queries/NAME.sql: `apron sql --show pick`), to read, or to run with
    /// `-f -` and the --param values its header lists; without NAME, list
    /// the names and what each answers.
    #[arg(
        long,
        value_name = "NAME",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with_all = ["query", "file", "out", "params"]
    )]
    pub show: Option<String>,

    /// The period of the views minute_costs (every GPU-minute priced and
    /// attributed, queries/minute_costs.sql) and cost_buckets (its sums from
    /// the ledger), registered for a query that names them; a query that
    /// names an apron_ function (apron_team, apron_gpu_rate) or config table
    /// (apron_settings, apron_gpu_rates, apron_team_rules) gets those from
    /// the config.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// What `apron` does with a command line clap did not turn into a [`Cli`]:
/// `--help` and `--version` print as clap writes them and succeed; any other
/// error prints [`clap_error_line`] on stderr and fails with [`EXIT_FAILURE`].
pub fn exit_for_clap_error(err: &clap::Error) -> ExitCode {
    use clap::CommandFactory;
    let args: Vec<String> = std::env::args().skip(1).collect();
    apron_cli::errors::exit(err, &Cli::command(), &args)
}

/// The one line `apron` prints for the command line `args` (after `apron`)
/// that clap refused: clap's message, its suggestion, and the help to read:
/// `error: unrecognized subcommand 'spnd'; did you mean 'spend'? (see 'apron --help')`.
pub fn clap_error_line(err: &clap::Error, args: &[&str]) -> String {
    use clap::CommandFactory;
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    apron_cli::errors::one_line(err, &apron_cli::errors::command_path(&Cli::command(), &args))
}

/// The global options a command does not use, so that giving one on the
/// command line is refused rather than ignored (`apron demo --data DIR`
/// would otherwise simulate somewhere else than the user thinks).
fn unused_globals(command: &str) -> &'static [&'static str] {
    match command {
        // The demo simulates into its own folder, with its own config, and
        // prints a headline; the docs print what clap knows.
        "demo" => &["data", "config", "format"],
        "completions" | "man-pages" | "ddl" | "export-sql" => &["data", "config", "format", "memory_limit"],
        // They write PNG, HTML, Markdown and CSV files, whatever --format.
        "chart" | "report" => &["format"],
        "export-config" => &["data", "format", "memory_limit"],
        "import" => &["config", "format", "memory_limit"],
        _ => &[],
    }
}

/// The line refusing a global option given on the command line that the
/// command does not use (one set in the environment, `APRON_DATA`, is
/// not refused: it is meant for every command). `None` when there is none.
pub fn unused_global(matches: &clap::ArgMatches) -> Option<String> {
    use clap::CommandFactory;
    let (command, sub) = matches.subcommand()?;
    let unused = unused_globals(command);
    Cli::command()
        .get_arguments()
        .filter(|a| unused.contains(&a.get_id().as_str()))
        .find(|a| sub.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|a| {
            let flag = a.get_long().map_or_else(|| a.get_id().to_string(), |l| format!("--{l}"));
            let why = match (command, flag.as_str()) {
                ("demo", "--data") => ": it simulates into OUT/data, or --keep-data DIR",
                ("demo", "--config") => ": it writes and uses OUT/apron.toml",
                _ => "",
            };
            format!("error: `apron {command}` does not use {flag}{why} (see 'apron {command} --help')")
        })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_options_go_before_or_after_the_command() {
        let before = Cli::try_parse_from(["apron", "--format", "csv", "--data", "/d", "sql", "SELECT 1"])
            .expect("parses");
        let after = Cli::try_parse_from(["apron", "sql", "SELECT 1", "--data", "/d", "--format", "csv"])
            .expect("parses");
        for cli in [before, after] {
            assert_eq!(cli.global.format, Format::Csv);
            assert_eq!(cli.global.data, PathBuf::from("/d"));
            let Command::Sql(args) = cli.command else { panic!("sql parses as sql") };
            assert_eq!(args.query.as_deref(), Some("SELECT 1"));
        }
    }

    #[test]
    fn sql_takes_a_query_or_a_file_not_both() {
        let cli = Cli::try_parse_from(["apron", "sql", "-f", "q.sql"]).expect("parses");
        let Command::Sql(args) = cli.command else { panic!("sql parses as sql") };
        assert_eq!(args.file, Some(PathBuf::from("q.sql")));
        assert!(Cli::try_parse_from(["apron", "sql", "SELECT 1", "-f", "q.sql"]).is_err());
        // Neither: the shell, or the statements of standard input.
        let cli = Cli::try_parse_from(["apron", "sql", "--month", "2026-11"]).expect("parses");
        let Command::Sql(args) = cli.command else { panic!("sql parses as sql") };
        assert_eq!((args.query, args.file), (None, None));
        // --out and --param go with one query.
        let cli = Cli::try_parse_from(["apron", "sql", "SELECT 1", "--out", "r.csv"]).expect("parses");
        let Command::Sql(args) = cli.command else { panic!("sql parses as sql") };
        assert_eq!(args.out, Some(PathBuf::from("r.csv")));
        assert!(Cli::try_parse_from(["apron", "sql", "--out", "r.csv"]).is_err());
        assert!(Cli::try_parse_from(["apron", "sql", "--param", "1=a"]).is_err());
    }

    #[test]
    fn config_takes_the_global_options() {
        let cli = Cli::try_parse_from(["apron", "config", "--config", "a.toml", "--format", "json"])
            .expect("parses");
        assert!(matches!(cli.command, Command::Config(_)));
        assert_eq!(cli.global.config, Some(PathBuf::from("a.toml")));
        assert_eq!(cli.global.format, Format::Json);
    }

    #[test]
    fn a_refused_command_line_is_one_line() {
        let refused = |args: &[&str]| {
            let err = Cli::try_parse_from(args).expect_err("refused");
            clap_error_line(&err, &args[1..])
        };
        assert_eq!(
            refused(&["apron", "--frob"]),
            "error: unexpected argument '--frob' found (see 'apron --help')"
        );
        let line = refused(&["apron", "--format", "xml", "sql", "x"]);
        assert!(line.starts_with("error: invalid value 'xml' for '--format <FORMAT>'"), "{line}");
        assert!(line.ends_with("(see 'apron sql --help')"), "{line}");
        assert!(!line.contains('\n'));
        assert_eq!(
            refused(&["apron", "pick", "--host"]),
            "error: a value is required for '--host <HOST>' but none was supplied (see 'apron pick --help')"
        );
        assert_eq!(
            refused(&["apron", "spend", "--last", "30"]),
            "error: invalid value '30' for '--last <LAST>': a duration needs a unit: did you mean 30d (30 days)? \
             (examples: 30s, 5m, 2h, 7d, 1h30m) (see 'apron spend --help')"
        );
        assert_eq!(
            refused(&["apron", "idle-cost", "--by", "tem"]),
            "error: invalid value 'tem' for '--by <BY>' [possible values: team, user, host, gpu]; did you mean 'team'? \
             (see 'apron idle-cost --help')"
        );
    }

    #[test]
    fn a_global_option_a_command_does_not_use_is_refused() {
        let refused =
            |args: &[&str]| unused_global(&Cli::command().try_get_matches_from(args).expect("parses"));
        assert_eq!(
            refused(&["apron", "demo", "--data", "x"]).as_deref(),
            Some(
                "error: `apron demo` does not use --data: it simulates into OUT/data, or --keep-data DIR \
                  (see 'apron demo --help')"
            )
        );
        assert_eq!(
            refused(&["apron", "--format", "csv", "report", "--month", "2026-11", "--out", "r"]).as_deref(),
            Some("error: `apron report` does not use --format (see 'apron report --help')")
        );
        assert_eq!(refused(&["apron", "demo", "--memory-limit", "1G"]), None);
        assert_eq!(refused(&["apron", "spend", "--data", "x", "--format", "csv"]), None);
    }

    #[test]
    fn durations_and_sizes_as_typed() {
        let cli = Cli::try_parse_from(["apron", "zombies", "--min-mem", "1GiB", "--min-idle", "1h30m"])
            .expect("parses");
        let Command::Zombies(args) = cli.command else { panic!("zombies") };
        assert_eq!(args.min_mem, Some(1024));
        assert_eq!(args.min_idle, Some(std::time::Duration::from_secs(5400)));
        let cli = Cli::try_parse_from(["apron", "spend", "--last", "30d"]).expect("parses");
        let Command::Spend(args) = cli.command else { panic!("spend") };
        assert_eq!(args.period.last, Some(std::time::Duration::from_secs(30 * 86_400)));
    }
}
