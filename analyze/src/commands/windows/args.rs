//! `apron windows`' arguments: what it prints, the idle share and length
//! a window needs, and `--cron`.

use clap::Args;

use crate::cli::flag_groups::{PeriodArgs, parse_wait};
use crate::report::figures::windows::{DEFAULT_MIN_HOURS, DEFAULT_MIN_IDLE_SHARE_PCT};

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
    #[arg(long, value_name = "PCT", default_value_t = DEFAULT_MIN_IDLE_SHARE_PCT, value_parser = parse_percent)]
    pub min_idle_share: f64,

    /// The shortest window reported, in hours.
    // A small constant: the cast cannot truncate.
    #[arg(long, value_name = "HOURS", default_value_t = DEFAULT_MIN_HOURS as u32)]
    pub min_hours: u32,

    /// The period.
    #[command(flatten)]
    pub period: PeriodArgs,
}

/// A `--min-idle-share` value: a percentage from 0 to 100.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err("expected a percentage from 0 to 100".into()),
    }
}
