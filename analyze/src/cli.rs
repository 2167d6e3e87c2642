//! The `apron` command line: global options, one subcommand per command
//! (each naming the `Args` its module in [`crate::commands`] defines), and
//! how a command line clap refuses is reported.
//!
//! The flag groups several commands flatten in (the period, …) are
//! [`flag_groups`], beside the global options, so that the report context
//! reads them without reaching up into the commands.
//!
//! Parsing only; what each command does is in [`crate::commands`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::commands::alerts::AlertsArgs;
use crate::commands::chart::ChartArgs;
use crate::commands::config::ConfigArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::events::EventsArgs;
use crate::commands::idle_cost::IdleCostArgs;
use crate::commands::import::ImportArgs;
use crate::commands::job::JobArgs;
use crate::commands::jobs::JobsArgs;
use crate::commands::pick::PickArgs;
use crate::commands::portable::{DdlArgs, ExportConfigArgs, ExportSqlArgs};
use crate::commands::reclaim::ReclaimArgs;
use crate::commands::report::ReportArgs;
use crate::commands::savings::SavingsArgs;
use crate::commands::spend::SpendArgs;
use crate::commands::sql::SqlArgs;
use crate::commands::starved::StarvedArgs;
use crate::commands::windows::WindowsArgs;
use crate::commands::zombies::ZombiesArgs;

pub mod flag_groups;

use flag_groups::GlobalArgs;

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

/// apron's commands. `apron --help` lists each by its one-line `about`;
/// the doc comment is the paragraph `apron CMD --help` prints
/// (`long_about`, written without a final period, as clap prints it).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one read-only SQL query over the recorded tables (gpu_samples,
    /// proc_samples, the minute rollups gpu_minutes and proc_minutes, all
    /// partitioned by date and host; minute_costs, every GPU-minute of the
    /// period priced and attributed, and cost_buckets, its sums per minute,
    /// GPU, state and owner; a Parquet or CSV file named in place of a
    /// table, FROM 'x.parquet'), with its $1 or $name placeholders bound by
    /// --param; or, without a query, a shell (or the statements of standard
    /// input) over the same tables. --show prints a named report's SQL
    #[command(about = "Run a read-only SQL query over the recorded tables, or a SQL shell", long_about)]
    Sql(SqlArgs),

    /// Print the effective configuration (--config FILE, else ./apron.toml,
    /// else the defaults) as apron.toml, with a first line naming its source;
    /// with a data folder, also the GPU models of the period (default the
    /// last 30 days) that no [[gpu_cost]] entry prices
    // The help text names the config's table as apron.toml spells it.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[command(about = "Print the effective configuration and the GPU models it leaves unpriced", long_about)]
    Config(ConfigArgs),

    /// Print the gpu_index of the least-loaded GPU of a host (this one
    /// unless --host names another; lowest mean utilization over the window,
    /// ties broken by most free memory), or a MIG instance's MIG-… UUID, for
    /// CUDA_VISIBLE_DEVICES=$(apron pick). With --format csv|json, print
    /// every GPU of the host, best first
    #[command(about = "Print the least-loaded GPU of a host, for CUDA_VISIBLE_DEVICES", long_about)]
    Pick(PickArgs),

    /// Check the alert rules (low_usage_1h, low_usage_4h, high_usage_15m,
    /// no_data, the budget rules, and the faults: xid, ecc_uncorrectable,
    /// remap_pending, gpu_lost; thresholds in the config) now. Exit code 1 when any rule fires, 0
    /// when none does, 2 on error, for cron and scripts
    #[command(about = "Check the alert rules now (exit code 1 when any fires)", long_about)]
    Alerts(AlertsArgs),

    /// List GPUs idle (below the idle threshold, minute by minute) for at
    /// least --for in a row, since when, who held memory on them, and
    /// whether they still are: candidates to hand back
    #[command(about = "List GPUs idle long enough in a row to hand back", long_about)]
    Reclaim(ReclaimArgs),

    /// Replay the period as if GPUs had been reclaimed after --reclaim-after
    /// idle and zombies ended after --zombie-after: the GPU-hours and money
    /// that would have been freed, per team, against the idle cost
    #[command(about = "What reclaiming idle GPUs and ending zombies would have freed", long_about)]
    Savings(SavingsArgs),

    /// List processes that held GPU memory while their GPU sat idle for at
    /// least --min-idle in a row: who, which GPU, how much, since when,
    /// and whether they still run. Processes whose GPU moved data over
    /// PCIe meanwhile are starved of data, not zombies (see `starved`).
    /// With --commands, print the commands that stop those still running
    #[command(about = "List processes that held GPU memory while their GPU sat idle", long_about)]
    Zombies(ZombiesArgs),

    /// List processes that held GPU memory while their GPU sat idle for at
    /// least --min-idle in a row but moved data over PCIe meanwhile (at
    /// least --starved-pcie MiB/s): starved of input, not zombies, with
    /// the GPU's mean activity and PCIe traffic over the stretch
    #[command(about = "List processes on idle GPUs starved of data, not zombies", long_about)]
    Starved(StarvedArgs),

    /// List the GPUs' faults over the period (XID errors, ECC errors, GPUs
    /// lost, error counters that moved), each with what it means, the
    /// action it calls for (XIDs by NVIDIA's catalogue) and whether its GPU
    /// should be drained, and the processes that were on the GPU. With
    /// --drain, only the faults that call for draining
    #[command(about = "List the GPUs' faults and the GPUs to drain", long_about)]
    Events(EventsArgs),

    /// One row per job (a Slurm job, else a pod, else a container, else a
    /// process) over the period: its GPUs, GPU-hours, cost and idle cost,
    /// activity, peak memory, an efficiency grade and what is wrong with
    /// it in words, the costliest idle first
    #[command(about = "Every job's GPU time, cost and efficiency, with findings", long_about)]
    Jobs(JobsArgs),

    /// One job's report, as `apron jobs` names it: its row, its findings
    /// one per line, and with --out DIR a PNG timeline per GPU it held
    /// (utilization, memory used, SM and tensor activity)
    #[command(about = "One job's figures, findings and GPU timelines", long_about)]
    Job(JobArgs),

    /// What each team's GPU time cost: GPU-hours busy, idle-held and
    /// idle-empty, energy and cost per team, adding up to the fleet's cost
    #[command(about = "What each team's GPU time cost", long_about)]
    Spend(SpendArgs),

    /// What idle GPU time cost, by team, user, host or GPU, largest first.
    IdleCost(IdleCostArgs),

    /// The fleet's week hour by hour (utilization, idle share, idle cost
    /// per week) and the recurring idle windows it shows, in words
    #[command(about = "The fleet's week hour by hour, and its recurring idle windows", long_about)]
    Windows(WindowsArgs),

    /// Draw one chart as a PNG: fleet-state, idle-cost, team-spend,
    /// hour-of-week, gpu-days or power
    #[command(about = "Draw one chart as a PNG", long_about)]
    Chart(ChartArgs),

    /// Write the monthly report: index.html, summary.md, every chart as a
    /// PNG and every table as a CSV, into --out DIR
    #[command(about = "Write the monthly report: HTML, Markdown, charts and CSVs", long_about)]
    Report(ReportArgs),

    /// Write the configuration's prices and team rules as three small
    /// Parquet tables (apron_settings, apron_gpu_rates, apron_team_rules)
    /// into --out DIR, one folder each, for Spark, Trino or Athena
    #[command(about = "Write the config's prices and team rules as Parquet tables", long_about)]
    ExportConfig(ExportConfigArgs),

    /// Print the statements that create apron's tables (partitioned by date
    /// and host, partitions discovered) and the config tables on Spark,
    /// Trino or Athena, `;`-separated
    #[command(
        about = "Print the statements that create apron's tables on Spark, Trino or Athena",
        long_about
    )]
    Ddl(DdlArgs),

    /// Print one SQL statement computing spend, idle-cost or every priced
    /// GPU-minute on Spark, Trino or Athena, generated from the same
    /// queries/*.sql apron runs, over the tables `apron ddl` creates
    #[command(about = "Print a report's SQL for Spark, Trino or Athena", long_about)]
    ExportSql(ExportSqlArgs),

    /// Import history kept elsewhere into the data folder, through the
    /// recorder's writer (same layout, sorted files, minute rollups; one
    /// file per table, host and UTC day): nvidia-smi CSV logs, the pynvml
    /// logger's CSV, or dcgm-exporter series in Prometheus. Rows already in
    /// the data folder are skipped, so importing twice adds nothing; a bad
    /// row stops the import before anything is written
    #[command(about = "Import history from nvidia-smi or pynvml logs, or from Prometheus", long_about)]
    Import(ImportArgs),

    /// Simulate a month of a realistic fleet into OUT/data, write its report
    /// and config into OUT, and print the headline figures and commands to
    /// explore it: what apron does, in one command, without a GPU
    #[command(about = "Simulate a month of a fleet and write its report, without a GPU", long_about)]
    Demo(DemoArgs),

    /// Print the shell completion script for apron, e.g. `apron completions
    /// bash > ~/.local/share/bash-completion/completions/apron` (zsh: a file
    /// `_apron` in a folder of $fpath; fish: ~/.config/fish/completions/apron.fish)
    #[command(about = "Print the shell completion script for apron", long_about)]
    Completions(CompletionsArgs),

    /// Write apron's manual pages (apron.1 and one per command, apron-spend.1,
    /// …) into --out DIR, e.g. ~/.local/share/man/man1, then `man apron-spend`
    #[command(about = "Write apron's manual pages", long_about)]
    ManPages(ManPagesArgs),
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
    use crate::output::Format;

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
        assert_eq!(args.held.min_mem, Some(1024));
        assert_eq!(args.held.min_idle, Some(std::time::Duration::from_secs(5400)));
        let cli = Cli::try_parse_from(["apron", "spend", "--last", "30d"]).expect("parses");
        let Command::Spend(args) = cli.command else { panic!("spend") };
        assert_eq!(args.period.last, Some(std::time::Duration::from_secs(30 * 86_400)));
    }
}
