//! The errors of the analysis library, and how the `apron` binary prints them.
//!
//! Every command returns [`Error`], one variant per boundary the failure
//! crossed, each an enum of its own: [`SessionError`] (the data folder, a
//! file in it, a query), [`ConfigError`], [`PeriodError`], [`OutputError`]
//! (the result, the report folder) and [`InputError`] (the query file and
//! `--param` of `apron sql`, other option values). Their messages name the
//! operation and the object ("cannot read query file q.sql", "table foo not
//! found"); the cause (a DataFusion, Parquet or I/O error) is the `source`.
//! [`one_line`] turns such a chain into the single line the binary prints on
//! stderr.

use std::error::Error as StdError;
use std::io;
use std::path::PathBuf;

use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;

/// What went wrong in an `apron` command, by the boundary it crossed: the
/// data folder and its queries ([`SessionError`]), the configuration file
/// ([`ConfigError`]), the period flags ([`PeriodError`]), the output
/// ([`OutputError`]), the command line's other values ([`InputError`]), the
/// demo's simulated fleet, and the few that belong to none.
///
/// Each boundary's message is the whole of this error's own line
/// (`#[error(transparent)]`), so the one-line form names the object at
/// fault exactly as the inner error does.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or reading the data folder, a file in it, or a query over it.
    #[error(transparent)]
    Session(#[from] SessionError),

    /// Reading, checking or printing the configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The period flags.
    #[error(transparent)]
    Period(#[from] PeriodError),

    /// Writing the result, a chart or the report folder.
    #[error(transparent)]
    Output(#[from] OutputError),

    /// A command-line value clap accepts but the command cannot use, or the
    /// query file or parameters of `apron sql`.
    #[error(transparent)]
    Input(#[from] InputError),

    /// `apron demo` could not simulate its fleet into its data folder.
    #[error("cannot simulate a fleet into {}", data.display())]
    Simulate {
        /// The data folder the simulated recorder writes (a temporary one
        /// unless `--keep-data DIR`).
        data: PathBuf,
        /// The simulator's or the file system's reason.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// `apron import` could not read its input or write the rows; the
    /// message names the file and line, or the URL.
    #[error(transparent)]
    Import(#[from] crate::import::ImportError),

    /// An amount of money too large to count in cents: a price in the
    /// config far beyond any real one.
    #[error(transparent)]
    Money(#[from] crate::report::rounding::MoneyOverflow),

    /// A chart could not be drawn or written; the message names the file.
    #[error(transparent)]
    Chart(#[from] apron_reports::ChartError),

    /// A statement or dot command of a script `apron sql` read from its
    /// standard input failed, and the script stopped there.
    #[error("statement {number} (line {line}: {excerpt})")]
    Statement {
        /// Its place among the script's statements and dot commands, from 1.
        number: usize,
        /// The line it starts on, from 1.
        line: usize,
        /// Its first words.
        excerpt: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },

    /// The async runtime the queries run on could not start.
    #[error("cannot start the query runtime")]
    Runtime {
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },

    /// Something panicked outside the guarded query paths: a bug.
    #[error("internal error: {message}; this is a bug in apron or a library it uses")]
    Panic {
        /// The panic's message and location.
        message: String,
    },

    /// A command used a part of the report context it did not prepare: a
    /// bug.
    #[error("internal error: {message}; this is a bug in apron")]
    Internal {
        /// What was missing.
        message: &'static str,
    },
}

/// The data folder, a file in it, or a query over it.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The data folder does not exist or cannot be read.
    #[error("cannot open data folder {} (choose it with --data DIR or $APRON_DATA)", path.display())]
    DataDir {
        /// The folder given by `--data`, `$APRON_DATA` or the default.
        path: PathBuf,
        /// Why it cannot be opened.
        #[source]
        source: io::Error,
    },

    /// A bucket given as the data folder (`--data s3://BUCKET/PREFIX`)
    /// cannot be read: missing, refusing the credentials, out of reach, or
    /// no S3 server.
    #[error("cannot read {url}: {cause} (the bucket is reached as the AWS_* environment says)")]
    Bucket {
        /// The URL at fault.
        url: String,
        /// The store's reason, on one line.
        cause: String,
    },

    /// A bucket given as the data folder holds none of apron's tables.
    #[error(
        "no apron data in {url}: none of the table folders {tables} is there; \
         ship closed days there with `apron-recorder --ship {url}` (while recording) \
         or `apron-recorder ship --to {url}` (once)"
    )]
    EmptyBucket {
        /// The bucket's URL.
        url: String,
        /// The table folders looked for, comma separated.
        tables: String,
    },

    /// The data folder exists but is not a folder.
    #[error("data folder {} is not a folder", path.display())]
    NotADir {
        /// The path given as the data folder.
        path: PathBuf,
    },

    /// The data folder holds none of apron's tables.
    #[error(
        "no apron data in {}: none of the table folders {tables} is there; \
         record some with `apron-recorder`, or simulate a fleet with \
         `apron-recorder simulate --data {} --gpus 8 --days 7`",
        path.display(),
        path.display()
    )]
    NoData {
        /// The data folder.
        path: PathBuf,
        /// The table folders looked for, comma separated.
        tables: String,
    },

    /// A table folder could not be registered with the query engine.
    #[error("cannot register table {table} from {}", path.display())]
    Register {
        /// The table name.
        table: String,
        /// Its folder.
        path: PathBuf,
        /// DataFusion's reason.
        #[source]
        source: DataFusionError,
    },

    /// The statement would change something; `apron sql` only reads.
    #[error("apron sql is read-only: {statement} is not allowed")]
    ReadOnly {
        /// The statement's leading keywords (`INSERT`, `CREATE TABLE`, `SET`).
        statement: String,
    },

    /// The query names a table the data folder does not hold.
    #[error("table {name} not found in {}; {}", data.display(), present_list(present))]
    UnknownTable {
        /// The table as the query names it.
        name: String,
        /// The data folder.
        data: PathBuf,
        /// The tables that are registered.
        present: Vec<String>,
    },

    /// The query names a file in place of a table (`FROM 'x.parquet'`)
    /// that is not there.
    #[error("cannot read {name} as a table: no such file (a path is read from {})", cwd.display())]
    NoFileTable {
        /// The path as the query names it.
        name: String,
        /// The working folder a relative path is read from.
        cwd: PathBuf,
    },

    /// The query names a file in place of a table whose extension says no
    /// format the engine reads.
    #[error(
        "cannot read {name} as a table: a file named as a table is read by its extension (.parquet, .csv, or .json with one object per line); read_parquet('{name}') or read_csv('{name}') name its format"
    )]
    FileTableFormat {
        /// The path as the query names it.
        name: String,
    },

    /// `read_parquet('x')` or `read_csv('x')` cannot open its file.
    #[error("cannot read {path} ({function})")]
    FileTable {
        /// The function: `read_parquet` or `read_csv`.
        function: &'static str,
        /// The path as the query names it.
        path: String,
        /// Why it cannot.
        #[source]
        source: datafusion::error::DataFusionError,
    },

    /// The query does not parse or does not plan (bad SQL, unknown column,
    /// wrong types); DataFusion's reason names the token or the column.
    #[error("invalid query")]
    Query {
        /// DataFusion's reason.
        #[source]
        source: DataFusionError,
    },

    /// The query engine could not be set up under the memory limit (its
    /// spill folder or caches).
    #[error("cannot set up the query engine under the memory limit of {limit}")]
    Engine {
        /// The limit asked for.
        limit: crate::session::memory::MemoryLimit,
        /// DataFusion's reason.
        #[source]
        source: DataFusionError,
    },

    /// The query needed more memory than the limit, in an operator that
    /// cannot spill to disk (the build side of a hash join) or after
    /// spilling all it could. The engine's account of which operators held
    /// what is in the debug log (`APRON_LOG=debug`), not in this line.
    #[error(
        "the query needs more than the memory limit of {limit} (--memory-limit or {} raises it)",
        crate::session::memory::MEMORY_LIMIT_ENV
    )]
    MemoryLimit {
        /// The limit the query ran under.
        limit: crate::session::memory::MemoryLimit,
    },

    /// A query past the memory limit could not spill: the temporary folder
    /// is missing, not writable or full.
    #[error(
        "cannot spill the query to disk under {} (TMPDIR chooses the folder; --memory-limit or {} \
         raises the limit of {limit})",
        dir.display(),
        crate::session::memory::MEMORY_LIMIT_ENV
    )]
    Spill {
        /// The temporary folder the spill folder is made in.
        dir: PathBuf,
        /// The limit the query ran under.
        limit: crate::session::memory::MemoryLimit,
        /// The operating system's reason, as DataFusion reports it.
        #[source]
        source: DataFusionError,
    },

    /// The cost ledger's rows could not be written to their working file
    /// (the temporary folder is missing, not writable or full).
    #[error("cannot write the cost ledger's working file under {} (TMPDIR chooses the folder)", dir.display())]
    LedgerFile {
        /// The temporary folder the working file is made in.
        dir: PathBuf,
        /// The reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The query failed while it ran, and no file of the data folder is at
    /// fault (a bad file is one of the variants below).
    #[error("query failed")]
    Execute {
        /// DataFusion's reason.
        #[source]
        source: DataFusionError,
    },

    /// A Parquet file under the data folder is truncated or not Parquet.
    #[error("cannot read {}: corrupt or truncated Parquet file", path.display())]
    CorruptFile {
        /// The offending file.
        path: PathBuf,
        /// The Parquet reader's reason.
        #[source]
        source: ParquetError,
    },

    /// A data file under the data folder is empty: zero bytes are not
    /// Parquet (and would otherwise read as no rows).
    #[error("cannot read {}: the file is empty (0 bytes), not Parquet", path.display())]
    EmptyFile {
        /// The offending file.
        path: PathBuf,
    },

    /// A Parquet file under the data folder lacks a column every row must
    /// have.
    #[error("cannot read {}: required column {column} is missing", path.display())]
    MissingColumn {
        /// The offending file.
        path: PathBuf,
        /// The column.
        column: String,
    },

    /// A Parquet file under the data folder has a column of a type that does
    /// not convert to the table's.
    #[error("cannot read {}: column {column} is {found}, which does not convert to {wanted}", path.display())]
    ColumnType {
        /// The offending file.
        path: PathBuf,
        /// The column.
        column: String,
        /// Its type in the file.
        found: String,
        /// Its type in the table.
        wanted: String,
    },

    /// A partition folder's value does not parse as its column's type.
    #[error("cannot read partition folder {}: {column}={value} is not a {wanted}", path.display())]
    BadPartition {
        /// The folder.
        path: PathBuf,
        /// The partition column (`date`, `host`).
        column: String,
        /// The value in the folder name.
        value: String,
        /// The column's type.
        wanted: String,
    },

    /// The period holds no GPU samples.
    #[error("no GPU samples between {period} in {}{covers}", data.display())]
    NoDataInPeriod {
        /// The period, as [`crate::report::period::Period::label`] shows it.
        period: String,
        /// The data folder.
        data: PathBuf,
        /// What the data does cover (`; the data covers …`), or empty.
        covers: String,
    },

    /// `apron pick` found no recent samples of the host: an error, not a
    /// guess, so a script never starts a job on a GPU nobody has looked at.
    #[error("no samples from host {host} in the last {window} under {}{newest}; is apron-recorder running there?", data.display())]
    NoRecentData {
        /// The host asked for.
        host: String,
        /// The window, as given (`5m`).
        window: String,
        /// The data folder.
        data: PathBuf,
        /// ", newest sample at …" when the host has older data, else empty.
        newest: String,
    },

    /// `apron pick` without `--host` found no samples at all of this
    /// machine: it is not the host the data is about.
    #[error("no samples from this host ({host}) under {}; pass --host HOST to pick a GPU of a host the data holds", data.display())]
    NoDataForThisHost {
        /// This machine's host name, as the recorder names it.
        host: String,
        /// The data folder.
        data: PathBuf,
    },

    /// `apron pick` without `--host`, on a machine whose host name cannot
    /// be read or used.
    #[error("cannot tell which host to pick for; pass --host HOST")]
    ThisHost(#[source] crate::commands::pick::this_host::ThisHostError),
}

/// The configuration file (`--config FILE` or `./apron.toml`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: io::Error,
    },

    /// The file is not a valid `apron.toml`:
    /// `apron.toml:7: unknown key `prise_per_kwh` in [energy]`.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line the mistake is on, from 1; `None` when the parser did
        /// not say.
        line: Option<usize>,
        /// What is wrong, naming the key.
        message: String,
    },

    /// The configuration could not be printed (a bug: every configuration
    /// has a TOML and a JSON form).
    #[error("cannot print the configuration as {format}")]
    Show {
        /// `toml` or `json`.
        format: &'static str,
        /// The serializer's reason.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

/// The period flags (`--month`, `--from`/`--to`, `--last`) name no valid
/// period. Their values' syntax is clap's to refuse; these are the periods
/// that parse but cannot be.
#[derive(Debug, thiserror::Error)]
pub enum PeriodError {
    /// `--month` is a month whose end is past the last date chrono knows.
    #[error("month {month} is out of range")]
    MonthOutOfRange {
        /// The month's first day, as given.
        month: chrono::NaiveDate,
    },

    /// The start is not before the end.
    #[error("--from {from} is not before --to {to}")]
    Empty {
        /// The start, as the period shows it (`2026-11-02 00:00`).
        from: String,
        /// The end, likewise.
        to: String,
    },
}

/// Writing the result, or the report folder.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The result could not be written to standard output.
    #[error("cannot write the result")]
    Write {
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },

    /// The terminal of `apron sql`'s shell could not be read or set up.
    #[error("cannot read the terminal")]
    Terminal {
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },

    /// The result could not be formatted.
    #[error("cannot format the result as {format}")]
    Format {
        /// The output format.
        format: &'static str,
        /// Arrow's reason.
        #[source]
        source: datafusion::arrow::error::ArrowError,
    },

    /// `apron sql --out FILE` could not write FILE (or the temporary file
    /// beside it); FILE is as it was.
    #[error("cannot write {}", path.display())]
    File {
        /// The file as given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// Ctrl-C stopped `apron sql --out FILE` before FILE was complete; FILE
    /// is as it was.
    #[error("interrupted (Ctrl-C): {} was not written", path.display())]
    Interrupted {
        /// The file as given.
        path: PathBuf,
    },

    /// `--out` of `report` or `demo` holds files of its own and no earlier
    /// report: nothing is written there without `--force`.
    #[error(
        "will not write the report into {}: it holds other files and no earlier apron report \
         (no {marker} file); choose a new or empty folder, or pass --force to write into it anyway",
        path.display()
    )]
    OutDirNotEmpty {
        /// The folder.
        path: PathBuf,
        /// The marker file an earlier report leaves.
        marker: &'static str,
    },

    /// `apron chart --out FILE` names a file that exists: nothing is
    /// replaced without `--force`.
    #[error("will not replace {}: it exists; choose another file, or pass --force to replace it", path.display())]
    FileExists {
        /// The file.
        path: PathBuf,
    },

    /// `apron export-config` could not write a table's file or folder.
    #[error("cannot write the config tables to {}", path.display())]
    ConfigTables {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },

    /// `apron man-pages` could not write a page or make the folder.
    #[error("cannot write the manual pages to {}", path.display())]
    ManPages {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    /// A report file (page, table) or the report folder could not be
    /// written.
    #[error("cannot write the report to {}", path.display())]
    ReportContext {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

/// A command-line value the command cannot use: the query file or the
/// parameters of `apron sql`, or an option clap accepts as text.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// A `sql -f FILE` query file could not be read.
    #[error("cannot read query file {}", path.display())]
    ReadQuery {
        /// The file (`-` for standard input).
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: io::Error,
    },

    /// `sql --show NAME` with a name no query has.
    #[error("no named query '{name}'; the named queries: {known} (apron sql --show lists them)")]
    UnknownQuery {
        /// The name as given.
        name: String,
        /// Every name, comma-separated.
        known: String,
    },

    /// A `--param` without `=`, or with an empty name.
    #[error("--param {given:?} is not NAME=VALUE (e.g. --param 1=2026-11-01)")]
    ParamSyntax {
        /// The argument as given.
        given: String,
    },

    /// A `--param` number beyond what a 64-bit float holds.
    #[error("--param {name}={value}: the number is out of range (a float holds up to ±1.8e308)")]
    ParamOutOfRange {
        /// The parameter's name, without `$`.
        name: String,
        /// The value as given.
        value: String,
    },

    /// The same parameter given twice.
    #[error("--param {name} is given twice")]
    ParamTwice {
        /// The parameter's name, without `$`.
        name: String,
    },

    /// A `--param` the query has no placeholder for.
    #[error("--param {name}: the query has no ${name}; {}", param_list("its parameters are", known))]
    UnknownParam {
        /// The parameter's name, without `$`.
        name: String,
        /// The query's placeholders, `$1`, `$start`, in order.
        known: Vec<String>,
    },

    /// A placeholder of the query that no `--param` gives a value.
    #[error("the query needs {}: give {}", missing.join(", "), missing.iter().map(|m| format!("--param {}=VALUE", m.trim_start_matches('$'))).collect::<Vec<_>>().join(" "))]
    MissingParam {
        /// The placeholders without a value, `$2`, in order.
        missing: Vec<String>,
    },

    /// `apron sql --out FILE` with an extension that names no format.
    #[error("--out {}: {}; it takes {accepted}", path.display(), extension_text(extension.as_deref()))]
    OutExtension {
        /// The file as given.
        path: PathBuf,
        /// Its extension, without the dot; `None` when it has none.
        extension: Option<String>,
        /// The extensions taken, in words.
        accepted: &'static str,
    },

    /// An option's value the command cannot use.
    #[error("{message}")]
    Usage {
        /// What is wrong, naming the option.
        message: String,
    },
}

fn param_list(lead: &str, names: &[String]) -> String {
    if names.is_empty() {
        "it takes no parameters".to_owned()
    } else {
        format!("{lead} {}", names.join(", "))
    }
}

fn extension_text(extension: Option<&str>) -> String {
    match extension {
        Some(extension) => format!("unknown extension .{extension}"),
        None => "no extension".to_owned(),
    }
}

fn present_list(present: &[String]) -> String {
    if present.is_empty() {
        "no tables are present".to_owned()
    } else {
        format!("tables present: {}", present.join(", "))
    }
}

impl Error {
    /// True when the error is a closed output pipe (`apron sql … | head`):
    /// the reader has what it wanted, so the binary exits quietly.
    pub fn is_broken_pipe(&self) -> bool {
        let mut cause: Option<&(dyn StdError + 'static)> = Some(self);
        while let Some(err) = cause {
            if let Some(io) = err.downcast_ref::<io::Error>()
                && io.kind() == io::ErrorKind::BrokenPipe
            {
                return true;
            }
            cause = err.source();
        }
        false
    }
}

/// The error and its causes on one line, outermost first, joined by `": "`.
///
/// A DataFusion error already spells out its own causes, so the chain stops
/// at the first one, shown as its root cause (the SQL parser's message, not
/// the `SQL error: ParserError("…")` debug form). A cause whose text the line
/// already holds is skipped, and line breaks inside messages become spaces,
/// so the result never spans lines. The credentials of a URL in it are
/// hidden ([`apron_store::redact`]): `--data s3://KEY:SECRET@…`, a
/// Prometheus URL with a password, an `AWS_ENDPOINT_URL` with either.
pub fn one_line(err: &(dyn StdError + 'static)) -> String {
    let mut line = String::new();
    let mut cause = Some(err);
    while let Some(err) = cause {
        let (text, stop) = match err.downcast_ref::<DataFusionError>() {
            // DataFusion's message already holds the messages of its causes.
            Some(df) => (datafusion_message(df), true),
            None => (err.to_string(), false),
        };
        let text = flatten(&text);
        if !text.is_empty() && !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        if stop {
            break;
        }
        cause = err.source();
    }
    apron_store::redact::userinfo(&line).into_owned()
}

/// The message of the innermost DataFusion error of `err`'s chain, without
/// DataFusion's debug quoting of parser errors.
fn datafusion_message(err: &DataFusionError) -> String {
    match err.find_root() {
        DataFusionError::SQL(parser, _) => format!("SQL error: {parser}"),
        // The Parquet error's own text starts with "Parquet error:" already.
        DataFusionError::ParquetError(parquet) => parquet.to_string(),
        root => root.strip_backtrace(),
    }
}

/// Collapses every run of whitespace (line breaks included) into one space.
fn flatten(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_the_chain_and_skips_repeats() {
        let err = Error::from(InputError::ReadQuery {
            path: "q.sql".into(),
            source: io::Error::new(io::ErrorKind::NotFound, "No such file\nor directory"),
        });
        assert_eq!(one_line(&err), "cannot read query file q.sql: No such file or directory");
    }

    #[test]
    fn one_line_shows_parser_errors_plainly() {
        let ctx = datafusion::prelude::SessionContext::new();
        let state = ctx.state();
        let df_err = state.create_logical_plan("SELEC 1");
        let rt =
            tokio::runtime::Builder::new_current_thread().build().expect("a current-thread runtime starts");
        let df_err = rt.block_on(df_err).expect_err("SELEC is not SQL");
        let line = one_line(&Error::from(SessionError::Query { source: df_err }));
        assert!(line.starts_with("invalid query: SQL error: sql parser error: "), "{line}");
        assert!(line.contains("SELEC"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn one_line_says_parquet_error_once() {
        let err = DataFusionError::ParquetError(Box::new(ParquetError::General("bad page".into())));
        let line = one_line(&Error::from(SessionError::Execute { source: err }));
        assert_eq!(line, "query failed: Parquet error: bad page");
    }

    #[test]
    fn a_failed_simulation_names_its_data_folder_not_a_report() {
        let err = Error::Simulate {
            data: "/tmp/apron-demo-data-x".into(),
            source: Box::new(io::Error::from(io::ErrorKind::PermissionDenied)),
        };
        assert_eq!(one_line(&err), "cannot simulate a fleet into /tmp/apron-demo-data-x: permission denied");
    }

    #[test]
    fn each_boundary_keeps_its_own_line() {
        let period = Error::from(PeriodError::Empty {
            from: "2026-11-05 00:00".into(),
            to: "2026-11-02 00:00".into(),
        });
        assert_eq!(one_line(&period), "--from 2026-11-05 00:00 is not before --to 2026-11-02 00:00");
        let config = Error::from(ConfigError::Invalid {
            path: "apron.toml".into(),
            line: Some(7),
            message: "unknown key `prise_per_kwh` in [energy]".into(),
        });
        assert_eq!(one_line(&config), "apron.toml:7: unknown key `prise_per_kwh` in [energy]");
        let missing = Error::from(InputError::MissingParam { missing: vec!["$2".into()] });
        assert_eq!(one_line(&missing), "the query needs $2: give --param 2=VALUE");
    }

    #[test]
    fn broken_pipe_is_recognised_through_the_chain() {
        let err = Error::from(OutputError::Write { source: io::Error::from(io::ErrorKind::BrokenPipe) });
        assert!(err.is_broken_pipe());
        let err =
            Error::from(OutputError::Write { source: io::Error::from(io::ErrorKind::PermissionDenied) });
        assert!(!err.is_broken_pipe());
    }
}
