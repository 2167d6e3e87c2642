//! `apron import nvidia-smi|pynvml|prometheus …`: reads the input whole
//! ([`crate::import`]'s parsers; a bad row stops here, nothing written;
//! Prometheus one UTC day at a time), writes each host's rows through the
//! recorder's writer ([`crate::import::write_host`]: under the data
//! folder's lock, all of a host's files or none), and prints one line per
//! host: rows written, rows skipped as already there, files, and rows
//! dropped as repeats in the input. A progress bar shows on a terminal
//! (stderr), and nowhere else; notices (waiting for the lock, what was done
//! with an earlier import's leftovers) go to stderr.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use apron_schemas::DataLayout;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::flag_groups::GlobalArgs;
use crate::error::{Error, OutputError};
use crate::import::stream::Scan;
use crate::import::{self, ImportError, Written};
use crate::report::period;

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
    /// The CSV of `nvidia-smi --query-gpu=timestamp,index,uuid,name,… --format=csv`
    /// (with or without nounits; noheader given --columns; GPUs by uuid, index
    /// or pci.bus_id) into gpu_samples, or of
    /// `--query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory`
    /// (told by its pid column) into proc_samples; or the text of
    /// `nvidia-smi dmon -o DT` and `pmon -o DT` (told by its # header). `[N/A]`
    /// and `[Not Supported]` are unknown (null); unknown columns are ignored.
    NvidiaSmi(NvidiaSmiArgs),

    /// The CSV of the seed guide's pynvml logger (`time.time()` or a time of
    /// day, then `util%|mem%|NMiB|W` per GPU in index order), or of a logger of
    /// one power column per GPU (Timestamp,GPU_0_power_w,…), into gpu_samples.
    /// GPUs get a stable synthetic UUID from the host and index.
    Pynvml(PynvmlArgs),

    /// dcgm-exporter series (DCGM_FI_DEV_*, DCGM_FI_PROF_*, and its 1.x
    /// dcgm_* names) and nvidia_gpu_exporter's nvidia_smi_* from a Prometheus
    /// server's HTTP API into gpu_samples, one row per GPU and step, one host
    /// per Hostname label (else node, else instance); Kubernetes pod labels
    /// become proc_samples rows.
    Prometheus(PrometheusArgs),

    /// Scrapes saved to a file (curl -s localhost:9400/metrics >> FILE), one
    /// or many, in the Prometheus text format: the series `prometheus`
    /// imports, one row per GPU and scrape.
    Scrape(ScrapeArgs),
}

/// `apron import scrape FILE… [--host H] [--at TIME --every D]`.
#[derive(Debug, Clone, Args)]
pub struct ScrapeArgs {
    /// The files of scrapes, of one host.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,

    /// The host of every series. Default: the Hostname (else node, else
    /// instance) label of the series, which must all name one host.
    #[arg(long)]
    pub host: Option<String>,

    /// The time of the first scrape, for scrapes whose samples carry no
    /// timestamp: YYYY-MM-DD (midnight UTC) or an RFC 3339 time.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub at: Option<i64>,

    /// The time between scrapes whose samples carry no timestamp.
    #[arg(long, value_name = "D", value_parser = apron_cli::units::positive_seconds)]
    pub every: Option<std::time::Duration>,

    /// The time each row stands for. Default: the median spacing of each
    /// GPU's scrapes (a single scrape needs it).
    #[arg(long, value_parser = apron_cli::units::positive_seconds)]
    pub interval: Option<std::time::Duration>,

    /// The most rows held in memory at once (as for nvidia-smi).
    #[arg(long, value_name = "N", default_value_t = import::stream::BATCH_ROWS, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_rows: u64,
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

    /// The day a log of times of day only (17:26:50, no date) starts,
    /// YYYY-MM-DD; a time more than 12 hours before the one above it is on
    /// the next day.
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub date: Option<chrono::NaiveDate>,

    /// The most rows held in memory at once: the files are read again for
    /// each batch of whole UTC days of at most this many rows (a day of
    /// more is a batch of its own).
    #[arg(long, value_name = "N", default_value_t = import::stream::BATCH_ROWS, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_rows: u64,
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

    /// The day a log whose time column is a time of day (17:26:50) starts,
    /// YYYY-MM-DD.
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub date: Option<chrono::NaiveDate>,

    /// The IANA zone of a log's times of day.
    #[arg(long, value_name = "ZONE", default_value = "UTC", value_parser = parse_zone)]
    pub tz: chrono_tz::Tz,

    /// The wall time of the first row of a log whose time column counts
    /// seconds from an arbitrary start (time.perf_counter(), as vLLM's
    /// NvmlPowerMonitor writes): YYYY-MM-DD or an RFC 3339 time.
    #[arg(long, value_name = "TIME", value_parser = period::parse_time)]
    pub start: Option<i64>,

    /// The most rows held in memory at once (as for nvidia-smi).
    #[arg(long, value_name = "N", default_value_t = import::stream::BATCH_ROWS, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_rows: u64,
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

/// A `--tz` value: an IANA time zone name.
fn parse_zone(s: &str) -> Result<chrono_tz::Tz, String> {
    s.parse()
        .map_err(|_| format!("{s:?} is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)"))
}

/// Imports, then prints what was written.
pub async fn run<W: Write>(global: &GlobalArgs, args: &ImportArgs, mut out: W) -> Result<(), Error> {
    let data = &global.data;
    if data.to_str().is_some_and(|d| d.contains("://")) {
        return Err(ImportError::Input {
            what: apron_store::redact::userinfo(&data.display().to_string()).into_owned(),
            message: "apron import writes a local data folder; import into one, then ship it \
                      (apron-recorder ship --data DIR --to URL)"
                .into(),
        }
        .into());
    }
    let layout = DataLayout::new(data);
    let (what, host, written) = match &args.source {
        ImportSource::NvidiaSmi(a) => {
            let opts = import::nvidia_smi::Options {
                host: a.host.clone(),
                tz: a.tz,
                columns: a.columns.clone(),
                interval_ms: a.interval.map(duration_ms),
                model: a.model.clone(),
                date: a.date,
            };
            // One write for all the files: a minute's rollup is computed
            // from the GPU's rows and the processes' rows together.
            let mut files: Vec<Box<dyn Scan + '_>> = Vec::new();
            for file in &a.files {
                files.push(import::smi_monitor::open_any(file, &opts)?);
            }
            let names: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
            let (host, written) =
                stream_host(&layout, Some(&a.host), &mut files, opts.interval_ms, a.batch_rows)?;
            (names.join(", "), host, written)
        }
        ImportSource::Scrape(a) => {
            let opts = import::scrape::Options {
                host: a.host.clone(),
                at_ms: a.at,
                every_ms: a.every.map(duration_ms),
            };
            let mut files: Vec<Box<dyn Scan + '_>> = Vec::new();
            for file in &a.files {
                files.push(Box::new(import::scrape::open(file, &opts)));
            }
            let names: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
            let interval = a.interval.map(duration_ms);
            let (host, written) =
                stream_host(&layout, a.host.as_deref(), &mut files, interval, a.batch_rows)?;
            (names.join(", "), host, written)
        }
        ImportSource::Pynvml(a) => {
            let opts = import::pynvml::Options {
                host: a.host.clone(),
                interval_ms: a.interval.map(duration_ms),
                model: a.model.clone(),
                date: a.date,
                tz: a.tz,
                start_ms: a.start,
            };
            let mut files: Vec<Box<dyn Scan + '_>> = vec![Box::new(import::pynvml::open(&a.file, &opts)?)];
            let (host, written) =
                stream_host(&layout, Some(&a.host), &mut files, opts.interval_ms, a.batch_rows)?;
            (a.file.display().to_string(), host, written)
        }
        ImportSource::Prometheus(a) => {
            let opts = import::prometheus::Options {
                url: a.url.clone(),
                from_ms: a.from,
                to_ms: a.to,
                step_ms: duration_ms(a.step),
            };
            let lines = prometheus(&layout, &opts).await?;
            return out
                .write_all(lines.as_bytes())
                .map_err(|source| Error::from(OutputError::Write { source }));
        }
    };
    out.write_all(summary(&what, &host, &written).as_bytes())
        .map_err(|source| Error::from(OutputError::Write { source }))
}

/// A host's files imported a few UTC days at a time ([`import::stream`]):
/// read once whole (every row checked, days counted: nothing written on a
/// bad row), then each batch of days read again and written; all of them
/// land together.
fn stream_host(
    layout: &DataLayout,
    host: Option<&str>,
    files: &mut [Box<dyn Scan + '_>],
    interval_ms: Option<i64>,
    batch_rows: u64,
) -> Result<(String, Written), ImportError> {
    let size = files.iter().map(|f| std::fs::metadata(f.path()).map(|m| m.len()).unwrap_or(0)).sum();
    let reading = bar("reading", size);
    let survey = import::stream::survey(files, &|bytes| reading.set_position(bytes));
    reading.finish_and_clear();
    let survey = survey?;
    for line in files.iter().flat_map(|f| f.notices()) {
        eprintln!("apron import: {line}");
    }
    let host = match host.or_else(|| files.iter().find_map(|f| f.host())) {
        Some(h) => h.to_owned(),
        None => {
            return Err(ImportError::Input {
                what: files.first().map(|f| f.path().display().to_string()).unwrap_or_default(),
                message: "no host: the series name none (no Hostname, node or instance label): give --host"
                    .into(),
            });
        }
    };
    let shown = Shown(bar(&format!("writing {host}"), survey.rows()));
    let mut batches = survey.batches(batch_rows).into_iter();
    let written = import::write_host_batches(layout, &host, &shown, &mut || {
        let days = batches.next()?;
        Some(import::stream::read_batch(files, days, interval_ms, &survey))
    });
    shown.0.finish_and_clear();
    Ok((host, written?))
}

/// A Prometheus import, one UTC day at a time (each day queried, then
/// written, then the next: memory holds one day of the fleet's rows), and
/// the lines it prints: per host, what all the days wrote. A day that fails
/// stops the import; the days before it are written, and importing the
/// period again adds only what is missing.
async fn prometheus(layout: &DataLayout, opts: &import::prometheus::Options) -> Result<String, ImportError> {
    let parts = import::prometheus::day_parts(opts);
    if parts.is_empty() {
        return Err(import::prometheus::too_short(opts));
    }
    let mut total: BTreeMap<String, Written> = BTreeMap::new();
    let mut findings = import::prometheus::Findings::default();
    for (k, part) in parts.iter().enumerate() {
        let querying = bar(&format!("querying day {} of {}", k + 1, parts.len()), 0);
        let hosts = import::prometheus::read(part, &|done, n| {
            querying.set_length(n);
            querying.set_position(done);
        })
        .await;
        querying.finish_and_clear();
        let (hosts, found) = hosts?;
        findings.merge(found);
        for (host, rows) in hosts {
            let n = (rows.gpus.len() + rows.procs.len()) as u64;
            let shown = Shown(bar(&format!("writing {host}, day {} of {}", k + 1, parts.len()), n));
            let written = import::write_host(layout, &host, rows, &shown);
            shown.0.finish_and_clear();
            *total.entry(host).or_default() += written?;
        }
    }
    for line in findings.lines() {
        eprintln!("apron import: {line}");
    }
    if total.is_empty() {
        return Err(import::prometheus::nothing_found(opts));
    }
    let shown = import::prometheus::shown_url(opts);
    Ok(total.iter().map(|(host, w)| summary(&shown, host, w)).collect())
}

/// What [`import::write_host`] tells: progress on the bar, notices on
/// stderr (above the bar).
struct Shown(ProgressBar);

impl import::Events for Shown {
    fn progress(&self, n: u64) {
        self.0.inc(n);
    }

    fn notice(&self, line: &str) {
        self.0.suspend(|| eprintln!("apron import: {line}"));
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise.
fn bar(what: &str, len: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()).with_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:20}] {percent}%")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// The line printed for one host.
fn summary(what: &str, host: &str, w: &Written) -> String {
    let repeated = if w.repeated == 0 {
        String::new()
    } else {
        format!(
            ", {} rows repeated in the input dropped ({} of them with other values than the row kept: \
             of the rows of one GPU (and process) and time, the first in the order of the files and \
             lines given is kept)",
            w.repeated, w.conflicting
        )
    };
    format!(
        "imported {what}: host {host}: {} gpu_samples rows, {} proc_samples rows written, \
         {} rows skipped (already in the data folder), {} files{repeated}\n",
        w.gpu_rows, w.proc_rows, w.skipped, w.files
    )
}
