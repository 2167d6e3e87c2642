//! `apron-recorder`: parses arguments and calls the library.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use apron_cli::units::Likely;
use apron_recorder::maintenance;
use apron_recorder::record::{RecordOptions, SourceKind, record};
use apron_recorder::retention::RetentionPolicy;
use apron_schemas::DataLayout;
use apron_schemas::time::DAY_SECS;
use apron_store::simulate::{SimulateOptions, simulate};
use chrono::{NaiveDate, Utc};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// Records every GPU and GPU process of this host once per interval into
/// Hive-partitioned Parquet files under the data folder.
#[derive(Debug, Parser)]
#[command(name = "apron-recorder", version, about, long_about = None)]
struct Cli {
    /// Data folder (default: $APRON_DATA, else ./data).
    #[arg(long, global = true, env = "APRON_DATA", default_value = "data")]
    data: PathBuf,
    /// Where samples come from: the real GPUs (nvml) or a simulated host (sim).
    #[arg(long, value_enum, default_value_t = SourceKind::Nvml)]
    source: SourceKind,
    /// Time between samples (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = seconds)]
    interval: Duration,
    /// How long each file spans before it closes (files also close at UTC midnight).
    #[arg(long, default_value = "10m", value_parser = minutes)]
    rotate: Duration,
    /// How often the write-ahead log is synced to disk: a power loss loses at
    /// most about this much (a killed recorder loses nothing already sampled).
    #[arg(long, default_value = "1s", value_parser = seconds)]
    sync: Duration,
    /// Most rows held in memory while the disk refuses writes (full,
    /// read-only); past it the oldest are dropped and counted.
    #[arg(long, default_value_t = apron_store::writer::DEFAULT_MAX_ROWS)]
    buffer_rows: usize,
    /// How often the one-line health summary is logged.
    #[arg(long, default_value = "5m", value_parser = minutes)]
    health_every: Duration,
    /// Host name to record under (default: this machine's host name).
    #[arg(long)]
    host: Option<String>,
    /// GPUs of the simulated host (with --source sim; at least 1).
    #[arg(long, default_value_t = 8, value_parser = parse_gpu_count)]
    sim_gpus: usize,
    /// Seed of the simulated host (with --source sim).
    #[arg(long, default_value_t = 1)]
    sim_seed: u64,
    /// Path of the NVML library (default: the driver's libnvidia-ml.so.1).
    #[arg(long, env = "APRON_NVML_LIB")]
    nvml_lib: Option<PathBuf>,
    /// After each UTC midnight the recorder compacts its closed days and
    /// removes its expired ones (as `apron-recorder compact` does).
    #[command(flatten)]
    retention: RetentionArgs,
    /// Ship this host's closed days to object storage (s3://BUCKET/PREFIX)
    /// as soon as they are compacted, from a thread that never delays a
    /// tick; expired days are then removed only once shipped. Credentials,
    /// region and endpoint come from the AWS environment.
    #[arg(long, value_name = "URL")]
    ship: Option<String>,
    /// How often shipping looks for closed days not shipped yet (failures
    /// back off from twice this, up to 64 times or 15 minutes).
    #[arg(long, default_value = "1m", value_parser = minutes)]
    ship_every: Duration,
    /// Serve the last tick at http://ADDRESS/metrics in the Prometheus text
    /// format, with dcgm-exporter's names and labels, plus each GPU's state
    /// over the last minute, process memory and the recorder's health. A
    /// bare port (9400) listens on 127.0.0.1 only; any other address must
    /// be written out (0.0.0.0:9400).
    #[arg(long, value_name = "ADDRESS", value_parser = apron_recorder::metrics::parse_listen_addr)]
    metrics: Option<std::net::SocketAddr>,
    /// Mean activity (%) below which a minute is idle in /metrics' GPU
    /// state (keep it equal to apron.toml's idle.threshold_pct).
    #[arg(long, value_name = "PCT", default_value_t = apron_recorder::metrics::DEFAULT_IDLE_THRESHOLD_PCT, value_parser = parse_threshold)]
    idle_threshold: f64,
    /// Slurm's scontrol, asked (once per job, off the tick) for the account
    /// of each Slurm job the kernel puts a GPU process in; squeue beside
    /// it lists this node's running jobs every 30s (default: scontrol on
    /// PATH, else Slurm is not asked; '' turns it off).
    #[arg(long, value_name = "PATH")]
    scontrol: Option<std::ffi::OsString>,
    /// Never ask Slurm (as --scontrol '').
    #[arg(long)]
    no_slurm: bool,
    /// This node's name in Slurm (default: this host's short name).
    #[arg(long, value_name = "NAME")]
    slurm_node: Option<String>,
    /// The kubelet's pod-resources socket, read (when it exists) for the
    /// GPUs allocated to each pod; a socket there that does not answer is
    /// warned about and counted, never fatal.
    #[arg(long, value_name = "PATH", default_value = apron_recorder::kubernetes::DEFAULT_KUBELET_SOCKET)]
    kubelet_socket: PathBuf,
    /// The kubelet's pod log folders (NAMESPACE_POD_UID), read for the
    /// namespace and name of each pod uid a process's cgroup gives.
    #[arg(long, value_name = "DIR", default_value = apron_recorder::kubernetes::DEFAULT_POD_LOGS)]
    pod_logs: PathBuf,
    /// The kubelet's container log links, read for container names
    /// (default: the `containers` folder beside --pod-logs).
    #[arg(long, value_name = "DIR")]
    container_logs: Option<PathBuf>,
    /// Record these pod labels (comma-separated keys, e.g. team,cost-center)
    /// from the Kubernetes API server, so team rules can match them. Off by
    /// default; needs the in-cluster service account with `get` on pods.
    #[arg(long, value_name = "KEYS", value_parser = label_keys)]
    k8s_labels: Option<LabelKeys>,
    /// The service account's folder (ca.crt, token) used with --k8s-labels;
    /// the API server is $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
    #[arg(long, value_name = "DIR", default_value = apron_recorder::kubernetes::apiserver::DEFAULT_SERVICE_ACCOUNT)]
    k8s_service_account: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

/// How long data is kept: whole day partitions older than this are removed.
#[derive(Debug, Clone, Copy, Args)]
struct RetentionArgs {
    /// Keep raw samples (gpu_samples, proc_samples) this long, in whole days
    /// before today (UTC); older day partitions are removed.
    #[arg(long, default_value = "90d", value_parser = parse_retention)]
    retain_raw: Duration,
    /// Keep minute rollups (gpu_minutes, proc_minutes) this long (default: 3 years).
    #[arg(long, default_value = "1095d", value_parser = parse_retention)]
    retain_rollups: Duration,
}

impl RetentionArgs {
    fn policy(self) -> RetentionPolicy {
        RetentionPolicy::from_durations(self.retain_raw, self.retain_rollups)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Writes D days of a simulated fleet as fast as the machine allows.
    Simulate {
        /// GPUs in the fleet (8 per host).
        #[arg(long, default_value_t = 32)]
        gpus: usize,
        /// Days to simulate.
        #[arg(long, default_value_t = 7)]
        days: u32,
        /// First day, YYYY-MM-DD in UTC (default: D days before today).
        #[arg(long, value_parser = parse_date)]
        start: Option<NaiveDate>,
        /// Seed: the same seed gives the same data.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Time between simulated samples.
        #[arg(long, default_value = "1s", value_parser = seconds)]
        interval: Duration,
        /// How long each file spans (default: a day, as compaction leaves it).
        #[arg(long, default_value = "24h", value_parser = minutes)]
        rotate: Duration,
    },
    /// Uploads the closed days of the data folder to object storage (backfill).
    ///
    /// Compacts every closed day (before today, UTC) first, then uploads
    /// each day partition (raw and rollup tables, one file per table, day
    /// and host) under the same relative key below URL, so that the bucket
    /// is itself an apron data folder. A file already there with the same
    /// size and MD5 is skipped, so running it again uploads only what is
    /// new. Today's open day is not shipped. Credentials, region and
    /// endpoint come from the AWS environment (AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP).
    /// Prints one line per file uploaded and a summary; exits 2 if anything
    /// could not be shipped.
    Ship {
        /// Where to: s3://BUCKET/PREFIX.
        #[arg(long, value_name = "URL")]
        to: String,
        /// First day to ship, YYYY-MM-DD (default: every closed day).
        #[arg(long, value_parser = parse_date)]
        from: Option<NaiveDate>,
    },
    /// Merges closed days into one file per table, day and host, and removes expired days.
    ///
    /// Merges every closed day (before today, UTC) into one sorted file per
    /// table, day and host, then removes whole day partitions older than
    /// --retain-raw (raw samples) or --retain-rollups (minute rollups): what
    /// the recorder does after each UTC midnight, on demand. Prints what it
    /// merged and removed. Safe while the recorder runs and while queries
    /// read (a query that listed a day's files just before they were merged
    /// lists them again).
    Compact {
        /// Only this host's partitions (default: every host).
        #[arg(long)]
        host: Option<String>,
        /// Only compact: remove no expired day.
        #[arg(long)]
        no_retention: bool,
        #[command(flatten)]
        retention: RetentionArgs,
    },
    /// Whether GPUs of this host are idle now, by the newest data (exit 0: idle, 1: not).
    ///
    /// Exits 0 when GPUs of this host have been idle for the last --for, by
    /// the newest data in the data folder (a running recorder's write-ahead
    /// log included); else 1, saying why. The script `apron zombies
    /// --commands` prints asks this before it stops a process.
    ///
    /// Each GPU asked about (--gpu, and with --pod or --job every GPU where
    /// that Kubernetes pod's or Slurm job's processes held memory in that
    /// time) must have a minute recorded within the last 2 minutes, and
    /// each of its minutes up to that newest one, --for of them, must be
    /// idle: activity (mean utilization, else SM activity) known and below
    /// --threshold. A gap, an unknown minute or a busy one is not idle.
    /// Reads only; safe beside a running recorder.
    IdleNow {
        /// The host whose data is read (default: this machine's host name,
        /// as the recorder names it).
        #[arg(long)]
        host: Option<String>,
        /// A GPU (its UUID, or a MIG instance's); may be repeated.
        #[arg(long = "gpu", value_name = "UUID")]
        gpus: Vec<String>,
        /// A Kubernetes pod's uid: its GPUs are asked about too.
        #[arg(long, value_name = "UID")]
        pod: Option<String>,
        /// A Slurm job's id: its GPUs are asked about too.
        #[arg(long, value_name = "ID")]
        job: Option<String>,
        /// How long each GPU must have been idle, in whole minutes.
        #[arg(long = "for", value_name = "DURATION", default_value = "10m", value_parser = minutes)]
        idle_for: Duration,
        /// Mean activity (%) below which a minute is idle (apron.toml's
        /// idle.threshold_pct).
        #[arg(long, value_name = "PCT", default_value_t = apron_recorder::metrics::DEFAULT_IDLE_THRESHOLD_PCT, value_parser = parse_threshold)]
        threshold: f64,
    },
    /// Prints the shell completion script for apron-recorder, e.g.
    /// `apron-recorder completions bash >
    /// ~/.local/share/bash-completion/completions/apron-recorder`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: apron_cli::docs::Shell,
    },
    /// Writes apron-recorder's manual pages (apron-recorder.1 and one per
    /// command) into --out DIR, e.g. ~/.local/share/man/man1.
    ManPages {
        /// The folder to write the pages into (made if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// A duration of at least 1ms; a bare number is refused with the unit it
/// likely meant.
fn duration(s: &str, likely: Likely) -> Result<Duration, String> {
    apron_cli::units::duration_at_least(s, likely, Duration::from_millis(1), "1ms")
}

/// A duration whose bare number means seconds (`--interval 1`: 1s).
fn seconds(s: &str) -> Result<Duration, String> {
    duration(s, Likely::Seconds)
}

/// A duration whose bare number means minutes (`--rotate 10`: 10m).
fn minutes(s: &str) -> Result<Duration, String> {
    duration(s, Likely::Minutes)
}

fn parse_gpu_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (a host without GPUs records nothing)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
        Ok(_) => Err("must be between 0 and 100 (percent)".into()),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_retention(s: &str) -> Result<Duration, String> {
    apron_cli::units::duration_at_least(s, Likely::Days, Duration::from_secs(DAY_SECS), "1d")
}

fn parse_date(s: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|e| format!("{e} (expected YYYY-MM-DD)"))
}

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return clap_exit(&e),
    };
    if let Some(line) = unused_recording_flag(&matches) {
        eprintln!("{line}");
        return ExitCode::from(2);
    }
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            // object_store logs each retry at info: the ship summary says what failed.
            tracing_subscriber::EnvFilter::try_from_env("APRON_LOG")
                .unwrap_or_else(|_| "info,object_store=warn,reqwest=warn,hyper=warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // A URL's credentials (`--ship`, AWS_ENDPOINT_URL) never reach the
            // log, nor a name's control characters the terminal.
            let line = format!("{e:#}");
            eprintln!("error: {}", apron_cli::printable::printable(&apron_store::redact::userinfo(&line)));
            ExitCode::from(2)
        }
    }
}

/// With a command (`simulate`, `compact`, `ship`), the line refusing a
/// recording flag given on the command line: the command would ignore it
/// (only `--data` is shared). `None` when there is none.
fn unused_recording_flag(matches: &clap::ArgMatches) -> Option<String> {
    let command = matches.subcommand_name()?;
    Cli::command()
        .get_arguments()
        .filter(|a| a.get_id() != "data")
        .find(|a| matches.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine))
        .map(|a| {
            let flag = a.get_long().map_or_else(|| a.get_id().to_string(), |l| format!("--{l}"));
            format!(
                "error: {flag} is a recording option; `apron-recorder {command}` does not use it \
                 (see 'apron-recorder {command} --help')"
            )
        })
}

/// Prints help and version as usual; for a usage mistake, one line naming it.
fn clap_exit(e: &clap::Error) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    apron_cli::errors::exit(e, &Cli::command(), &args)
}

/// Runs what `cli` asks; the exit code of a run that did not fail (only
/// `idle-now` says 1: not idle).
fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    run_command(cli).map(|idle| if idle { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Runs what `cli` asks: `false` only from `idle-now`, when not idle.
fn run_command(cli: Cli) -> anyhow::Result<bool> {
    let layout = DataLayout::new(&cli.data);
    let done = |result: anyhow::Result<()>| result.map(|()| true);
    match cli.command {
        Some(Command::Simulate { gpus, days, start, seed, interval, rotate }) => {
            if gpus == 0 {
                bail!("--gpus must be at least 1");
            }
            let start = start.unwrap_or_else(|| Utc::now().date_naive() - chrono::Days::new(u64::from(days)));
            let opts = SimulateOptions {
                layout,
                gpus,
                days,
                start,
                seed,
                interval,
                rotate,
                threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            };
            done(run_simulate(&opts, &cli.data))
        }
        Some(Command::Compact { host, no_retention, retention }) => {
            if let Some(h) = &host {
                apron_schemas::paths::validate_host(h)?;
            }
            let policy = retention.policy();
            done(run_compact(&layout, host.as_deref(), (!no_retention).then_some(&policy)))
        }
        Some(Command::Ship { to, from }) => done(run_ship(&layout, &to, from)),
        Some(Command::IdleNow { host, gpus, pod, job, idle_for, threshold }) => {
            let question = apron_recorder::idle_now::Question {
                gpus,
                pod,
                job,
                minutes: i64::try_from(idle_for.as_secs().div_ceil(60)).unwrap_or(i64::MAX).max(1),
                threshold_pct: threshold,
            };
            run_idle_now(&cli.data, host.as_deref(), &question)
        }
        Some(Command::Completions { shell }) => {
            let script = apron_cli::docs::completions(&mut Cli::command(), "apron-recorder", shell);
            match std::io::stdout().lock().write_all(&script) {
                // The reader went away (`| head`): it has what it wanted.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(true),
            }
        }
        Some(Command::ManPages { out }) => {
            let pages = apron_cli::docs::man_pages(Cli::command(), &out)
                .with_context(|| format!("cannot write the manual pages to {}", out.display()))?;
            println!("{} manual pages written to {}", pages.len(), out.display());
            Ok(true)
        }
        None => {
            // A bad URL is refused before recording starts.
            let ship = cli.ship.as_deref().map(apron_store::remote::Remote::from_url).transpose()?;
            record(&record_options(&cli)?, ship)?;
            Ok(true)
        }
    }
}

/// `idle-now`: prints one line per GPU asked about and whether all are idle.
fn run_idle_now(
    data: &std::path::Path,
    host: Option<&str>,
    question: &apron_recorder::idle_now::Question,
) -> anyhow::Result<bool> {
    use apron_recorder::idle_now::{FRESH_MS, judge, read_window};
    if question.gpus.is_empty() && question.pod.is_none() && question.job.is_none() {
        bail!("idle-now: name a GPU (--gpu UUID), a pod (--pod UID) or a Slurm job (--job ID)");
    }
    let host = apron_recorder::record::host_name(host)?;
    let layout = DataLayout::new(data);
    if !data.is_dir() {
        bail!("idle-now: no data folder {} (give the recorder's --data)", data.display());
    }
    let now_ms = Utc::now().timestamp_millis();
    let from_ms = now_ms - (question.minutes + 1) * apron_schemas::time::MINUTE_MS - FRESH_MS;
    let window = read_window(&layout, &host, question, from_ms)
        .with_context(|| format!("idle-now: cannot read host {host}'s data in {}", data.display()))?;
    let answers = judge(question, &window, now_ms);
    let mut idle = true;
    for (what, wanted, found) in [
        ("pod", &question.pod, !window.pod_gpus.is_empty()),
        ("Slurm job", &question.job, !window.job_gpus.is_empty()),
    ] {
        if let Some(id) = wanted.as_ref().filter(|_| !found) {
            let id = apron_cli::printable::printable(id);
            println!("{what} {id}: no process of it recorded on {host} in the last minutes: not idle now");
            idle = false;
        }
    }
    for answer in &answers {
        println!("{}", apron_cli::printable::printable(&answer.to_string()));
        idle &= answer.idle();
    }
    Ok(idle)
}

fn run_ship(layout: &DataLayout, to: &str, from: Option<NaiveDate>) -> anyhow::Result<()> {
    let remote = apron_store::remote::Remote::from_url(to)?;
    // Closed days are merged first: a day is shipped as one file per table and host.
    let compacted = maintenance::run_now(layout, None, None)
        .with_context(|| format!("cannot compact {} before shipping", layout.root().display()))?;
    if !compacted.compacted.is_empty() {
        println!("compacted {} partitions first", compacted.compacted.len());
    }
    let today = chrono::Utc::now().date_naive();
    let report = apron_recorder::ship::ship_closed_days(layout, &remote, from, today);
    for (url, bytes) in &report.shipped {
        println!("shipped {url} ({bytes} bytes)");
    }
    for url in &report.removed {
        println!("removed {url} (no longer in its partition)");
    }
    for dir in &report.not_compacted {
        println!("not shipped: {} has several files (not compacted)", dir.display());
    }
    let bytes: u64 = report.shipped.iter().map(|(_, b)| b).sum();
    println!(
        "{} files shipped ({bytes} bytes), {} already there, {} removed, {} failed, to {}",
        report.shipped.len(),
        report.skipped,
        report.removed.len(),
        report.failed.len(),
        remote.url()
    );
    match report.failed.first() {
        None => Ok(()),
        Some(first) => {
            anyhow::bail!(
                "{first} ({} failed, {} more partitions not tried; run it again to ship them)",
                report.failed.len(),
                report.unshipped
            )
        }
    }
}

fn run_compact(
    layout: &DataLayout,
    host: Option<&str>,
    retention: Option<&RetentionPolicy>,
) -> anyhow::Result<()> {
    let report = maintenance::run_now(layout, host, retention)
        .with_context(|| format!("cannot compact {}", layout.root().display()))?;
    for c in &report.compacted {
        println!(
            "compacted {}/date={}/host={}: {} files -> 1 ({} rows) {}",
            c.table,
            c.date,
            c.host,
            c.files,
            c.rows,
            c.path.display()
        );
    }
    for r in &report.removed {
        let kept = retention.map_or(0, |p| p.days(r.table));
        println!("removed {} (expired: kept {kept} days before today)", r.path.display());
    }
    for path in &report.held {
        println!("kept {} (expired, but not shipped yet)", path.display());
    }
    println!(
        "{} partitions compacted, {} expired partitions removed under {}",
        report.compacted.len(),
        report.removed.len(),
        layout.root().display()
    );
    Ok(())
}

fn run_simulate(opts: &SimulateOptions, data: &std::path::Path) -> anyhow::Result<()> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} simulating [{bar:40}] {percent}% {msg} ({elapsed}, ~{eta} left)",
        )
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let stats = simulate(opts, &|done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .with_context(|| format!("cannot simulate into {}", data.display()))?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "simulated {} GPUs on {} hosts for {} days from {}: {} gpu_samples rows, {} proc_samples rows in {} files under {} ({:.1} s, {:.2} M gpu rows/s)",
        opts.gpus,
        stats.hosts,
        opts.days,
        opts.start,
        stats.written.gpu_rows,
        stats.written.proc_rows,
        stats.written.files,
        data.display(),
        secs,
        stats.written.gpu_rows as f64 / secs.max(1e-9) / 1e6,
    );
    Ok(())
}

/// `--k8s-labels`' value: label keys, each checked.
#[derive(Debug, Clone)]
struct LabelKeys(Vec<String>);

fn label_keys(list: &str) -> Result<LabelKeys, String> {
    apron_recorder::kubernetes::apiserver::parse_label_keys(list).map(LabelKeys)
}

/// The recording run's options from the flags.
fn record_options(cli: &Cli) -> anyhow::Result<RecordOptions> {
    let labels = match &cli.k8s_labels {
        Some(LabelKeys(keys)) => {
            let api = apron_recorder::kubernetes::apiserver::ApiServer::in_cluster(
                &cli.k8s_service_account,
                apron_recorder::kubernetes::apiserver::LABELS_DEADLINE,
            )
            .context("--k8s-labels needs the in-cluster API server")?;
            Some(apron_recorder::kubernetes::LabelSource { api, keys: keys.clone() })
        }
        None => None,
    };
    let slurm = apron_recorder::slurm::SlurmOptions::from_flags(
        cli.scontrol.as_deref().map(std::path::Path::new),
        cli.no_slurm,
        cli.slurm_node.as_deref(),
    )?;
    Ok(RecordOptions {
        data: cli.data.clone(),
        source: cli.source,
        interval: cli.interval,
        rotate: cli.rotate,
        sync: cli.sync,
        buffer_rows: cli.buffer_rows,
        health_every: cli.health_every,
        host: cli.host.clone(),
        sim_gpus: cli.sim_gpus,
        sim_seed: cli.sim_seed,
        nvml_lib: cli.nvml_lib.clone(),
        retention: cli.retention.policy(),
        ship_every: cli.ship_every,
        metrics: cli.metrics,
        idle_threshold_pct: cli.idle_threshold,
        slurm,
        kubernetes: apron_recorder::kubernetes::KubeSources {
            kubelet_socket: cli.kubelet_socket.clone(),
            pod_logs: cli.pod_logs.clone(),
            container_logs: cli.container_logs.clone(),
            labels,
        },
    })
}
