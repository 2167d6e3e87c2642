//! `apron sql`'s arguments: the query, its file, its output, its
//! parameters, `--show`.

use std::path::PathBuf;

use clap::{ArgGroup, Args};

use crate::cli::flag_groups::PeriodArgs;

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
