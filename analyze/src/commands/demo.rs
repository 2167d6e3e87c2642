//! `apron demo [--out DIR]`: what apron does, in one command, without a
//! GPU. It simulates a month of a realistic fleet (4 hosts of 8 GPUs, six
//! teams: H100, A100 and L40S hosts, four H100s shared as MIG instances;
//! training, serving, notebooks, zombies, idle nights and weekends) with
//! the store's simulator and writer
//! into OUT/data, writes OUT/apron.toml, a config that prices the GPUs and
//! maps five of the teams (the sixth shows up as `unassigned`), writes the
//! monthly report, and prints its headline figures, where it is, and
//! commands to explore the data with, as they run from here.
//!
//! The month is November 2026 unless `--month` says otherwise: the README's
//! examples run on it as written (`tests/readme.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use apron_schemas::DataLayout;
use apron_schemas::time::DAY_SECS;
use apron_store::simulate::{SimulateOptions, simulate};
use apron_store::source::sim::teams;
use chrono::NaiveDate;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::ReportWriteArgs;
use crate::commands::report::{assets, write_report};
use crate::error::{Error, InputError, OutputError};
use crate::report::period;

/// `apron demo [--out DIR]`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// The folder to write the report into: a new or empty folder, or an
    /// earlier report's (whose files are replaced).
    #[arg(long, value_name = "DIR", default_value = "apron-demo")]
    pub out: PathBuf,

    /// Whether to replace other files, and whether to embed the charts.
    #[command(flatten)]
    pub write: ReportWriteArgs,

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

/// The simulated team left out of the demo config, to show `unassigned`.
const UNMAPPED_TEAM: &str = "platform";

/// Simulates, reports, and prints the headline.
pub async fn run<W: Write>(global: &GlobalArgs, args: &DemoArgs, mut out: W) -> Result<(), Error> {
    let started = Instant::now();
    let month = args.month.unwrap_or_else(demo_month);
    let days = days_in_month(month);
    let days = args.days.map_or(days, |d| d.clamp(1, days));
    if args.hosts == 0 {
        return Err(InputError::Usage { message: "--hosts must be at least 1".into() }.into());
    }
    let report_err = |path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| OutputError::ReportContext { path, source: Box::new(e) }
    };
    crate::commands::report::check_out_dir(&args.out, args.write.force)?;
    // Marked first, so a demo that fails halfway can be run again into it.
    apron_reports::mark_out_dir(&args.out)
        .map_err(|e| OutputError::ReportContext { path: args.out.clone(), source: Box::new(e) })?;
    let config_path = args.out.join("apron.toml");
    apron_files::replace::write(&config_path, demo_config().as_bytes()).map_err(report_err(&config_path))?;
    let data = match &args.keep_data {
        Some(dir) => dir.clone(),
        None => fresh_data_folder(&args.out.join(DATA_FOLDER))?,
    };

    let gpus = args.hosts * 8;
    simulate_fleet(&data, gpus, month, days, args.interval)?;
    let global = GlobalArgs { data: data.clone(), config: Some(config_path.clone()), ..global.clone() };
    let headline = write_report(&global, month, &args.out, assets(args.write.self_contained)).await?;

    let mut text = format!(
        "Simulated {gpus} GPUs on {} hosts for {days} days of {} ({} s).\n",
        args.hosts,
        month.format("%B %Y"),
        started.elapsed().as_secs()
    );
    for line in headline.lines() {
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&format!("Config: {} (prices and team rules used)\n", config_path.display()));
    text.push_str(&format!("Data:   {}\n", data.display()));
    text.push_str(&explore(&args.out, &data, month));
    out.write_all(text.as_bytes()).map_err(|source| Error::from(OutputError::Write { source }))
}

fn simulate_fleet(
    data: &Path,
    gpus: usize,
    month: NaiveDate,
    days: u32,
    interval: Duration,
) -> Result<(), Error> {
    let total = u64::from(days) * DAY_SECS * gpus as u64;
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{spinner} simulating [{bar:20}] {percent}% {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(format!("{gpus} GPUs, {days} days"));
    let options = SimulateOptions {
        layout: DataLayout::new(data),
        gpus,
        days,
        start: month,
        seed: 2026,
        interval,
        // One file per host and day, as compaction leaves closed days.
        rotate: Duration::from_secs(DAY_SECS),
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
    };
    let progress = |done: u64, _total: u64| bar.set_position(done);
    simulate(&options, &progress)
        .map_err(|e| Error::Simulate { data: data.to_path_buf(), source: Box::new(e) })?;
    bar.finish_and_clear();
    Ok(())
}

/// The demo's `apron.toml`: list prices of the simulated models, and rules
/// for every simulated team but `UNMAPPED_TEAM`.
pub fn demo_config() -> String {
    let mut text = String::from(
        "# apron demo configuration: prices of the simulated GPUs and the simulated teams.\n\
         currency = \"USD\"\n\n\
         [idle]\nthreshold_pct = 5\n\n\
         [energy]\nprice_per_kwh = 0.15\npue = 1.4\n\n\
         [[gpu_cost]]\nmodel = \"NVIDIA H100 80GB HBM3\"\npurchase_price = 30000\nlifetime_years = 4\nops_per_gpu_hour = 0.25\n\n\
         [[gpu_cost]]\nmodel = \"NVIDIA A100-SXM4-80GB\"\npurchase_price = 15000\nlifetime_years = 4\nops_per_gpu_hour = 0.20\n\n\
         [[gpu_cost]]\nmodel = \"NVIDIA L40S\"\npurchase_price = 9000\nlifetime_years = 4\nops_per_gpu_hour = 0.15\n",
    );
    let quoted = |items: &mut dyn Iterator<Item = &str>| {
        items.map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
    };
    for team in teams().iter().filter(|t| t.name != UNMAPPED_TEAM) {
        text.push_str(&format!("\n[[team]]\nname = \"{}\"\n", team.name));
        text.push_str(&format!("users = [{}]\n", quoted(&mut team.users.iter().map(|u| u.name))));
        if !team.k8s_namespaces.is_empty() {
            text.push_str(&format!(
                "k8s_namespaces = [{}]\n",
                quoted(&mut team.k8s_namespaces.iter().copied())
            ));
        }
        if let Some(account) = team.slurm_account {
            text.push_str(&format!("slurm_accounts = [\"{account}\"]\n"));
        }
        if let Some((_, budget)) = DEMO_BUDGETS.iter().find(|(name, _)| *name == team.name) {
            text.push_str(&format!("budget_per_month = {budget}\n"));
        }
    }
    text
}

/// The demo teams' monthly budgets (USD): about what a simulated month
/// costs each, so that some teams end it over budget and some within.
const DEMO_BUDGETS: [(&str, u32); 5] =
    [("vision", 2500), ("nlp", 5000), ("speech", 3000), ("research", 2000), ("recsys", 1200)];

/// The month the demo simulates unless told otherwise: the one the
/// README's examples name.
pub const DEMO_MONTH: (i32, u32) = (2026, 11);

/// The first day of [`DEMO_MONTH`].
fn demo_month() -> NaiveDate {
    NaiveDate::from_ymd_opt(DEMO_MONTH.0, DEMO_MONTH.1, 1).unwrap_or(NaiveDate::MIN)
}

/// The demo's data folder inside its report folder.
pub const DATA_FOLDER: &str = "data";

/// The folders apron's tables and write-ahead log live in, at a data
/// folder's top.
const TABLE_FOLDERS: [&str; 6] =
    ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes", "alloc_minutes", "wal"];

/// `dir`, emptied of an earlier demo's data (which the same seed would
/// write again), or refused when it holds anything else.
fn fresh_data_folder(dir: &Path) -> Result<PathBuf, Error> {
    let refuse = |message: String| Error::from(InputError::Usage { message });
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let entry =
                    entry.map_err(|e| Error::Simulate { data: dir.to_path_buf(), source: Box::new(e) })?;
                let name = entry.file_name();
                if !TABLE_FOLDERS.iter().any(|t| name == *t) {
                    return Err(refuse(format!(
                        "{} holds {} besides an earlier demo's data; give the demo another --out",
                        dir.display(),
                        name.to_string_lossy()
                    )));
                }
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| Error::Simulate { data: dir.to_path_buf(), source: Box::new(e) })?;
            }
            Ok(dir.to_path_buf())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir.to_path_buf()),
        Err(e) => Err(Error::Simulate { data: dir.to_path_buf(), source: Box::new(e) }),
    }
}

/// The demo's closing lines: commands over its data that run as printed,
/// from the folder the demo ran in: this very binary (by its path unless
/// it is the `apron` on PATH), in the report folder, where `apron` finds
/// `./data` and `./apron.toml` by itself.
fn explore(out: &Path, data: &Path, month: NaiveDate) -> String {
    let apron = binary_as_typed();
    let month = month.format("%Y-%m");
    let mut text =
        String::from("\nExplore the data (apron reads ./data and ./apron.toml in the demo's folder):\n");
    let flags = if data == out.join(DATA_FOLDER) {
        text.push_str(&format!("  cd {}\n", shell_word(&out.display().to_string())));
        String::new()
    } else {
        format!(
            " --data {} --config {}",
            shell_word(&data.display().to_string()),
            shell_word(&out.join("apron.toml").display().to_string())
        )
    };
    for command in [
        format!("spend --month {month}"),
        format!("zombies --month {month}"),
        format!("windows --month {month} --show windows"),
        "sql \"SELECT host, round(avg(gpu_util_pct_mean), 1) AS util_pct FROM gpu_minutes GROUP BY host ORDER BY host\""
            .to_owned(),
        format!("sql --month {month}    # an interactive SQL shell; .help lists its commands"),
    ] {
        text.push_str(&format!("  {apron}{flags} {command}\n"));
    }
    if apron != "apron" {
        text.push_str(
            "To type `apron` instead: cargo install --path analyze (see the README's Installing)\n",
        );
    }
    text
}

/// How to run this binary from here: `apron` when that is what PATH finds,
/// else its full path.
fn binary_as_typed() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else { return "apron".into() };
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join("apron")).find(|p| p.is_file()));
    match on_path.and_then(|p| std::fs::canonicalize(p).ok()) {
        Some(found) if found == me => "apron".into(),
        _ => shell_word(&me.display().to_string()),
    }
}

/// `word` as one word for a POSIX shell: as is when it needs no quoting.
fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c)) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn days_in_month(first: NaiveDate) -> u32 {
    crate::report::period::Period::next_month(first)
        .map_or(30, |n| u32::try_from((n - first).num_days()).unwrap_or(30))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: &str) -> crate::config::Who<'_> {
        crate::config::Who { user: Some(user), ..Default::default() }
    }

    #[test]
    fn the_demo_config_reads_back_and_maps_five_teams() {
        let config =
            crate::config::Config::from_toml(&demo_config(), Path::new("apron.toml")).expect("valid");
        assert_eq!(config.team.len(), 5);
        assert_eq!(config.gpu_cost.len(), 3);
        assert_eq!(crate::config::team_of(&config, &who("alice")), "vision");
        assert_eq!(crate::config::team_of(&config, &who("priya")), "unassigned");
        let november = NaiveDate::from_ymd_opt(2026, 11, 1).expect("date");
        assert_eq!(days_in_month(november), 30);
        assert_eq!(days_in_month(NaiveDate::from_ymd_opt(2026, 12, 1).expect("date")), 31);
    }
}
