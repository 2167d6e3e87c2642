//! The configuration `apron.toml`: prices, idle and report thresholds, and the
//! rules that map a process to a team.
//!
//! This module owns reading and checking the file ([`Config::load`]), its
//! documented defaults ([`Config::default`]), printing the effective
//! configuration ([`Config::to_toml`], [`Config::to_json`]) and the two
//! decisions the reports take from it: which team owns a process
//! ([`team_of`]) and what a GPU costs ([`gpu_cost_for`]). The reports
//! themselves, and the SQL that applies the numbers, live elsewhere.
//!
//! The file, with every key at its default (`[[team]]` has no default; a
//! process no rule claims belongs to `unassigned`):
//!
//! ```toml
//! currency = "USD"
//!
//! [idle]
//! threshold_pct = 5      # a GPU-minute under this mean activity is idle; 0–100
//!                        # (activity: gpu_util_pct, else sm_active_pct; with
//!                        # neither the minute is unknown, never idle)
//!
//! [energy]
//! price_per_kwh = 0.15   # in `currency`; 0–100,000
//! pue = 1.4              # power usage effectiveness; 1–3
//!
//! [zombie]
//! min_mem_mib = 256      # GPU memory a zombie holds, MiB; 0–1,048,576 (1 TiB)
//! min_idle = "10m"       # unbroken idle time on its GPU; up to 366 days
//! starved_pcie_mib_per_s = 100  # a process whose idle GPU moved at least this
//!                        # over PCIe meanwhile (MiB/s, in and out) is starved
//!                        # of data, not a zombie; 0–1,048,576, 0: none is
//!
//! [reclaim]
//! for = "2h"             # unbroken idle time of a reclaim candidate; up to 366 days
//!
//! [alerts]               # mean utilization, percent, 0–100
//! low_usage_1h = 10      # fires below this over the last hour
//! low_usage_4h = 10      # fires below this over the last 4 hours
//! high_usage_15m = 80    # fires above this over the last 15 minutes
//! no_data = "5m"         # fires when a host or GPU seen in the last 7 days
//!                        # has had no sample for this long; under 7 days
//! faults = "1h"          # xid and ecc_uncorrectable fire for a fault this
//!                        # recent; under 7 days
//! job_idle_pct = 5       # job_idle fires for a job still running whose mean
//! job_idle_for = "2h"    # activity over this long was below it; under 7 days
//!
//! [jobs]                 # apron jobs' findings
//! idle_share_pct = 70    # idle this share of its GPU time: mostly idle; 0–100
//! small_memory_pct = 10  # peak memory under this share of its GPU's: a smaller
//!                        # GPU or a MIG slice would do; 0–100
//! starved_pcie_mib_per_s = 100  # PCIe traffic (MiB/s, mean) with activity under
//!                        # 10%: starved of data; 0–1,048,576, 0: none is
//! tensor_unused_sm_active_pct = 30  # SM activity (GPM) at least this with tensor
//!                        # activity under 1%: tensor cores unused; 0–100, 100: never
//!
//! [[gpu_cost]]           # first match on gpu_model wins; "*" matches any
//! model = "*"
//! purchase_price = 25000 # in `currency`; 0–10,000,000,000
//! lifetime_years = 4     # 0.1–50
//! ops_per_gpu_hour = 0.2 # in `currency`; 0–1,000,000
//! ops_avoidable = false  # true: a GPU-hour not used does not cost its
//!                        # operating cost (hired by the hour), so freeing it
//!                        # saves that cash; false: it is paid either way
//!
//! [[team]]               # first matching team wins; any one rule matches
//! name = "vision"
//! users = ["alice", "bob"]
//! uids = [1001]
//! k8s_namespaces = ["vision-*"]   # glob patterns
//! k8s_labels = { team = "vision" } # a pod with every one of these labels
//!                                  # (recorded with `apron-recorder --k8s-labels team`)
//! slurm_accounts = ["vision"]
//! budget_per_month = 5000         # in `currency` a calendar month (UTC); 0–10,000,000,000
//! ```
//!
//! Every number must be finite and within the range shown, which is wide
//! enough for any real fleet in any currency (prices in yen or rupiah
//! included) and narrow enough that no month of any fleet overflows the
//! cent arithmetic of the reports ([`crate::report::rounding`]): a price of `1e308`
//! is a typo, refused with the line and the key.
//!
//! The default `[[gpu_cost]]` entry applies only when the file has none;
//! a file whose entries leave a model unmatched (no `"*"` entry) prices it
//! with [`DEFAULT_GPU_COST`] too. A bad file is refused with its path, the
//! line and the key: `apron.toml:7: unknown key `prise_per_kwh` in [energy]`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use apron_schemas::time::{DAY_SECS, HOUR_SECS};
use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::{ConfigError, Error};

/// The file looked for in the current folder without `--config FILE`.
pub const FILE_NAME: &str = "apron.toml";

/// The team of a process that no `[[team]]` rule claims.
pub const UNASSIGNED: &str = "unassigned";

/// The price of a GPU whose model no `[[gpu_cost]]` entry matches, and the
/// one entry of a file that gives none: a data-centre GPU bought for 25 000,
/// written off over 4 years, costing 0.20 an hour to operate (space,
/// network, staff), all in `currency`.
pub static DEFAULT_GPU_COST: LazyLock<GpuCost> = LazyLock::new(|| GpuCost {
    model: "*".to_owned(),
    purchase_price: 25_000.0,
    lifetime_years: 4.0,
    ops_per_gpu_hour: 0.20,
    ops_avoidable: false,
});

/// Where the effective configuration came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Source {
    /// No `--config FILE` and no `./apron.toml`: the documented defaults.
    #[default]
    Defaults,
    /// This file, as it was named (`--config` or `apron.toml`).
    File(PathBuf),
}

impl fmt::Display for Source {
    /// `defaults`, or the file's path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Defaults => f.write_str("defaults"),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The effective configuration: the file's values, the defaults for what
/// it leaves out. Field names are the file's keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a table of apron settings")]
pub struct Config {
    /// Where these values came from; every report names it.
    #[serde(skip)]
    pub source: Source,
    /// The currency of every price, as printed in reports (default `USD`).
    #[serde(deserialize_with = "non_empty_string")]
    pub currency: String,
    /// `[idle]`: when a GPU-minute is idle.
    pub idle: Idle,
    /// `[energy]`: the price of the energy a GPU draws.
    pub energy: Energy,
    /// `[zombie]`: what makes a process a zombie.
    pub zombie: Zombie,
    /// `[reclaim]`: what makes a GPU a reclaim candidate.
    pub reclaim: Reclaim,
    /// `[alerts]`: the default alert rules' thresholds.
    pub alerts: Alerts,
    /// `[jobs]`: the thresholds of `apron jobs`' findings.
    pub jobs: Jobs,
    /// `[[gpu_cost]]`: the price of a GPU by model, first match wins. Never
    /// empty: a file that gives none gets the `"*"` entry
    /// [`DEFAULT_GPU_COST`].
    pub gpu_cost: Vec<GpuCost>,
    /// `[[team]]`: who owns a process, first match wins. Empty by default:
    /// every process is [`UNASSIGNED`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub team: Vec<Team>,
}

/// `[idle]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "an [idle] table")]
pub struct Idle {
    /// A GPU-minute whose activity (its interval-weighted mean
    /// `gpu_util_pct`, else its mean `sm_active_pct`) is below this is idle,
    /// at or above it busy; percent 0–100 (default 5). A minute with
    /// neither is unknown, never idle (`queries/gpu_minute_states.sql`).
    #[serde(deserialize_with = "percent")]
    pub threshold_pct: f64,
}

/// `[energy]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "an [energy] table")]
pub struct Energy {
    /// Price of one kWh in `currency` (default 0.15), 0 to
    /// [`MAX_PRICE_PER_KWH`].
    #[serde(deserialize_with = "price_per_kwh")]
    pub price_per_kwh: f64,
    /// Power usage effectiveness: facility energy per GPU energy, 1 to
    /// [`MAX_PUE`] (default 1.4).
    #[serde(deserialize_with = "pue")]
    pub pue: f64,
}

/// One `[[gpu_cost]]` entry; every key but `ops_avoidable` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[gpu_cost]] table")]
pub struct GpuCost {
    /// The `gpu_model` this entry prices, exactly as NVML names it, or `"*"`
    /// for any model.
    #[serde(deserialize_with = "non_empty_string")]
    pub model: String,
    /// Purchase price of one GPU in `currency`, 0 to [`MAX_PURCHASE_PRICE`].
    #[serde(deserialize_with = "purchase_price")]
    pub purchase_price: f64,
    /// Years over which the purchase price is written off,
    /// [`LIFETIME_YEARS`].
    #[serde(deserialize_with = "lifetime_years")]
    pub lifetime_years: f64,
    /// Operating cost of one GPU-hour besides energy, in `currency`, 0 to
    /// [`MAX_OPS_PER_GPU_HOUR`].
    #[serde(deserialize_with = "ops_per_gpu_hour")]
    pub ops_per_gpu_hour: f64,
    /// Whether a GPU-hour left unused does not cost its `ops_per_gpu_hour`
    /// (a GPU hired by the hour, power and cooling billed by use): then
    /// freeing it saves that cash. `false` (the default): the operating
    /// cost is paid whether the GPU is used or not, and freeing capacity
    /// saves only its energy.
    #[serde(default)]
    pub ops_avoidable: bool,
}

/// One `[[team]]` entry: a name and the rules that claim a process for it.
/// A process matches when any one rule does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[team]] table")]
pub struct Team {
    /// The team's name in reports; required.
    #[serde(deserialize_with = "non_empty_string")]
    pub name: String,
    /// Unix user names, exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Unix user ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uids: Vec<i64>,
    /// Kubernetes namespaces, as glob patterns (`vision-*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub k8s_namespaces: Vec<NamespacePattern>,
    /// Pod labels, each exactly: a pod with every one of them matches (a
    /// Kubernetes `matchLabels`). Labels are recorded only for the keys
    /// the recorder was given (`--k8s-labels`).
    #[serde(default, skip_serializing_if = "LabelSelector::is_empty")]
    pub k8s_labels: LabelSelector,
    /// Slurm accounts, exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slurm_accounts: Vec<String>,
    /// What the team may spend in a calendar month (UTC), in `currency`, up
    /// to [`MAX_BUDGET_PER_MONTH`]; none when absent.
    #[serde(default, deserialize_with = "budget_per_month", skip_serializing_if = "Option::is_none")]
    pub budget_per_month: Option<f64>,
}

/// A glob pattern over Kubernetes namespace names (`*`, `?`, `[a-z]`),
/// checked when the file is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacePattern(glob::Pattern);

impl NamespacePattern {
    /// The pattern as the file wrote it.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether `namespace` matches the pattern, case-sensitively.
    pub fn matches(&self, namespace: &str) -> bool {
        self.0.matches(namespace)
    }
}

impl Serialize for NamespacePattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NamespacePattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        glob::Pattern::new(&text)
            .map(NamespacePattern)
            .map_err(|e| de::Error::custom(format!("has an invalid pattern {text:?}: {}", e.msg)))
    }
}

/// A `[[team]]`'s `k8s_labels`: label keys and values, each checked
/// against Kubernetes' rules when the file is read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LabelSelector(pub BTreeMap<String, String>);

impl LabelSelector {
    /// Whether it names no label (then it matches nothing).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a `k8s_labels` text has every label of the selector.
    pub fn matches(&self, labels: &str) -> bool {
        apron_schemas::k8s_labels::matches(labels, &self.0)
    }
}

impl<'de> Deserialize<'de> for LabelSelector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, String>::deserialize(deserializer)?;
        for (key, value) in &map {
            if !apron_schemas::k8s_labels::valid_key(key) {
                return Err(de::Error::custom(format!(
                    "has an invalid label key {key:?} (a name of up to 63 letters, digits, `.`, `_` or `-`, \
                     with an optional DNS prefix and `/`)"
                )));
            }
            if !apron_schemas::k8s_labels::valid_value(value) {
                return Err(de::Error::custom(format!(
                    "has an invalid value {value:?} for label {key:?} (up to 63 letters, digits, `.`, `_` or `-`)"
                )));
            }
        }
        Ok(LabelSelector(map))
    }
}

/// `[zombie]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [zombie] table")]
pub struct Zombie {
    /// GPU memory a process must hold, MiB, up to [`MAX_MIN_MEM_MIB`]
    /// (default 256).
    #[serde(deserialize_with = "min_mem_mib")]
    pub min_mem_mib: u64,
    /// How long its GPU must be idle without a break (default 10 minutes;
    /// written `"10m"`).
    #[serde(deserialize_with = "duration", serialize_with = "show_duration")]
    pub min_idle: Duration,
    /// PCIe traffic (MiB/s, received and sent together, the GPU's mean over
    /// the idle stretch) at or above which a process holding memory on an
    /// idle GPU is starved of data, not a zombie, up to
    /// [`MAX_STARVED_PCIE_MIB_PER_S`] (default 100; 0: none is).
    #[serde(deserialize_with = "starved_pcie_mib_per_s")]
    pub starved_pcie_mib_per_s: u64,
}

/// `[jobs]`: when `apron jobs` says a job is mostly idle, would fit a
/// smaller GPU, or is starved of data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [jobs] table")]
pub struct Jobs {
    /// A job idle at least this share of its GPU time is mostly idle
    /// (interactive?); percent 0–100 (default 70).
    #[serde(deserialize_with = "percent")]
    pub idle_share_pct: f64,
    /// A job whose peak memory is under this share of its GPU's would fit a
    /// smaller GPU or a MIG slice; percent 0–100 (default 10).
    #[serde(deserialize_with = "percent")]
    pub small_memory_pct: f64,
    /// A job whose GPUs moved at least this much over PCIe (MiB/s, in and
    /// out, its mean) while their activity stayed under 10 % is starved of
    /// data, up to [`MAX_STARVED_PCIE_MIB_PER_S`] (default 100; 0: none is).
    #[serde(deserialize_with = "starved_pcie_mib_per_s")]
    pub starved_pcie_mib_per_s: u64,
    /// A job whose mean SM activity (GPM) is at least this while its tensor
    /// pipes were active under 1 % of the time leaves its tensor cores
    /// unused; percent 0–100 (default 30; 100: only a job at 100 %).
    #[serde(deserialize_with = "percent")]
    pub tensor_unused_sm_active_pct: f64,
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs {
            idle_share_pct: 70.0,
            small_memory_pct: 10.0,
            starved_pcie_mib_per_s: 100,
            tensor_unused_sm_active_pct: 30.0,
        }
    }
}

/// `[reclaim]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a [reclaim] table")]
pub struct Reclaim {
    /// How long a GPU must be idle in a row to be a candidate (key `for`;
    /// default 2 hours, written `"2h"`).
    #[serde(rename = "for", deserialize_with = "duration", serialize_with = "show_duration")]
    pub idle_for: Duration,
}

/// `[alerts]`: thresholds of the default alert rules, each a mean
/// `gpu_util_pct` over the rule's window, percent 0–100.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "an [alerts] table")]
pub struct Alerts {
    /// `low_usage_1h` fires below this over the last hour (default 10).
    #[serde(deserialize_with = "percent")]
    pub low_usage_1h: f64,
    /// `low_usage_4h` fires below this over the last 4 hours (default 10).
    #[serde(deserialize_with = "percent")]
    pub low_usage_4h: f64,
    /// `high_usage_15m` fires above this over the last 15 minutes
    /// (default 80).
    #[serde(deserialize_with = "percent")]
    pub high_usage_15m: f64,
    /// `no_data` fires when a host or GPU seen in the last 7 days has had
    /// no sample for this long (default 5 minutes, written `"5m"`; less
    /// than [`NO_DATA_LOOKBACK`], the rule's look-back).
    #[serde(deserialize_with = "no_data", serialize_with = "show_duration")]
    pub no_data: Duration,
    /// `xid` and `ecc_uncorrectable` fire for a fault this recent (default
    /// 1 hour, written `"1h"`; less than [`NO_DATA_LOOKBACK`], the look-back
    /// of `remap_pending` and `gpu_lost`).
    #[serde(deserialize_with = "no_data", serialize_with = "show_duration")]
    pub faults: Duration,
    /// `job_idle` fires for a job that held GPUs through the last
    /// `job_idle_for` and still does, its mean activity over it below this
    /// (default 5).
    #[serde(deserialize_with = "percent")]
    pub job_idle_pct: f64,
    /// The window of `job_idle` (default 2 hours, written `"2h"`; less than
    /// [`NO_DATA_LOOKBACK`]).
    #[serde(deserialize_with = "no_data", serialize_with = "show_duration")]
    pub job_idle_for: Duration,
}

/// How far back `no_data` looks for hosts and GPUs: one seen longer ago is
/// taken as retired, not as silent.
pub const NO_DATA_LOOKBACK: Duration = Duration::from_secs(7 * DAY_SECS);

impl Default for Config {
    /// The documented defaults, with [`Source::Defaults`].
    fn default() -> Self {
        Config {
            source: Source::Defaults,
            currency: "USD".to_owned(),
            idle: Idle::default(),
            energy: Energy::default(),
            zombie: Zombie::default(),
            reclaim: Reclaim::default(),
            alerts: Alerts::default(),
            jobs: Jobs::default(),
            gpu_cost: vec![DEFAULT_GPU_COST.clone()],
            team: Vec::new(),
        }
    }
}

impl Default for Idle {
    fn default() -> Self {
        Idle { threshold_pct: 5.0 }
    }
}

impl Default for Energy {
    fn default() -> Self {
        Energy { price_per_kwh: 0.15, pue: 1.4 }
    }
}

impl Default for Zombie {
    fn default() -> Self {
        Zombie { min_mem_mib: 256, min_idle: Duration::from_mins(10), starved_pcie_mib_per_s: 100 }
    }
}

impl Default for Reclaim {
    fn default() -> Self {
        Reclaim { idle_for: Duration::from_hours(2) }
    }
}

impl Default for Alerts {
    fn default() -> Self {
        Alerts {
            low_usage_1h: 10.0,
            low_usage_4h: 10.0,
            high_usage_15m: 80.0,
            no_data: Duration::from_mins(5),
            faults: Duration::from_hours(1),
            job_idle_pct: 5.0,
            job_idle_for: Duration::from_hours(2),
        }
    }
}

impl Config {
    /// Whether any team has a budget (`[[team]] budget_per_month`).
    pub fn any_budget(&self) -> bool {
        self.team.iter().any(|t| t.budget_per_month.is_some())
    }

    /// The configuration `apron` runs with: `explicit` (`--config FILE`)
    /// when given, else `./apron.toml` when the current folder has one, else
    /// the defaults. The result records which in [`Config::source`].
    ///
    /// A file that cannot be read (including a missing `explicit` one) is
    /// [`ConfigError::Read`]; one that is not a valid configuration is
    /// [`ConfigError::Invalid`], naming the file, the line and the key.
    pub fn load(explicit: Option<&Path>) -> Result<Config, Error> {
        if let Some(path) = explicit {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
            return Config::from_toml(&text, path);
        }
        let path = Path::new(FILE_NAME);
        match std::fs::read_to_string(path) {
            Ok(text) => Config::from_toml(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }.into()),
        }
    }

    /// Parses and checks `text`, the contents of the file `path` (used in
    /// [`Config::source`] and in error messages only).
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, Error> {
        let mut config: Config = toml::from_str(text).map_err(|e| config_error(&e, text, path))?;
        if config.gpu_cost.is_empty() {
            config.gpu_cost = Config::default().gpu_cost;
        }
        config.source = Source::File(path.to_path_buf());
        tracing::debug!(config = %config.source, teams = config.team.len(), "read the configuration");
        Ok(config)
    }

    /// The configuration as an `apron.toml` that reads back to the same
    /// values, after a first comment line naming its source.
    pub fn to_toml(&self) -> Result<String, Error> {
        let body =
            toml::to_string(self).map_err(|e| ConfigError::Show { format: "toml", source: Box::new(e) })?;
        let header = match &self.source {
            Source::Defaults => {
                format!("# apron configuration: defaults (no --config FILE, no ./{FILE_NAME})")
            }
            Source::File(path) => format!("# apron configuration: {}", path.display()),
        };
        let mut text = format!("{header}\n{body}");
        if self.team.is_empty() {
            text.push_str("\n# no [[team]] rules: every process is `unassigned`\n");
        }
        Ok(text)
    }

    /// The configuration as one JSON object: its keys, and `source` naming
    /// where it came from (`"defaults"` or the file's path).
    pub fn to_json(&self) -> Result<String, Error> {
        let show = |e: serde_json::Error| ConfigError::Show { format: "json", source: Box::new(e) };
        let mut text = serde_json::to_string(&self.to_json_value()?).map_err(show)?;
        text.push('\n');
        Ok(text)
    }

    /// [`Config::to_json`] as a value, for a caller that adds keys.
    pub fn to_json_value(&self) -> Result<serde_json::Value, Error> {
        let mut value = serde_json::to_value(self)
            .map_err(|e| ConfigError::Show { format: "json", source: Box::new(e) })?;
        if let serde_json::Value::Object(map) = &mut value {
            map.insert("source".to_owned(), self.source.to_string().into());
        }
        Ok(value)
    }
}

/// The team that owns a process: the first `[[team]]` in file order with a
/// rule that matches any of the process's user name, unix uid, Kubernetes
/// namespace (glob), pod labels (all of the team's) or Slurm account;
/// [`UNASSIGNED`] when none does. `None` means the process has no such
/// attribute, which matches no rule.
pub fn team_of<'c>(config: &'c Config, who: &Who<'_>) -> &'c str {
    let Who { user, uid, k8s_namespace, k8s_labels, slurm_account } = *who;
    config
        .team
        .iter()
        .find(|team| {
            user.is_some_and(|u| team.users.iter().any(|x| x == u))
                || uid.is_some_and(|u| team.uids.contains(&u))
                || k8s_namespace.is_some_and(|ns| team.k8s_namespaces.iter().any(|p| p.matches(ns)))
                || k8s_labels.is_some_and(|l| team.k8s_labels.matches(l))
                || slurm_account.is_some_and(|a| team.slurm_accounts.iter().any(|x| x == a))
        })
        .map_or(UNASSIGNED, |team| team.name.as_str())
}

/// What the team rules look at of a process or an allocation's holder;
/// `None`: it has no such attribute.
#[derive(Debug, Clone, Copy, Default)]
pub struct Who<'a> {
    /// Unix user name.
    pub user: Option<&'a str>,
    /// Unix uid.
    pub uid: Option<i64>,
    /// Kubernetes namespace.
    pub k8s_namespace: Option<&'a str>,
    /// Pod labels, as `k8s_labels` holds them.
    pub k8s_labels: Option<&'a str>,
    /// Slurm account.
    pub slurm_account: Option<&'a str>,
}

/// Seconds in a year of the write-off: 365.25 days.
pub const SECONDS_PER_YEAR: f64 = 365.25 * DAY_SECS as f64;

/// What one second of a GPU priced by `cost` costs besides energy, in the
/// config's currency: `purchase_price / (lifetime_years × 365.25 days) +
/// ops_per_gpu_hour / 3600`.
pub fn rate_per_second(cost: &GpuCost) -> f64 {
    cost.purchase_price / (cost.lifetime_years * SECONDS_PER_YEAR) + cost.ops_per_gpu_hour / HOUR_SECS as f64
}

/// What one second of a GPU priced by `cost` costs that using it less
/// would not spend: its operating cost where `ops_avoidable`, else 0 (the
/// energy is apart: it is measured).
pub fn avoidable_rate_per_second(cost: &GpuCost) -> f64 {
    if cost.ops_avoidable { cost.ops_per_gpu_hour / HOUR_SECS as f64 } else { 0.0 }
}

/// The price of a GPU of `model` (its `gpu_model`): the first `[[gpu_cost]]`
/// entry whose `model` is `model` exactly or `"*"`; [`DEFAULT_GPU_COST`]
/// when none is.
pub fn gpu_cost_for<'c>(config: &'c Config, model: &str) -> &'c GpuCost {
    config.gpu_cost.iter().find(|c| c.model == "*" || c.model == model).unwrap_or(&*DEFAULT_GPU_COST)
}

/// The one-line [`ConfigError::Invalid`] for `err`, a failure to read `text` (the
/// contents of `path`) as a [`Config`]: the line its span starts on, and a
/// message that names the key.
fn config_error(err: &toml::de::Error, text: &str, path: &Path) -> Error {
    let line = err.span().map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    let keys = error_keys(err);
    ConfigError::Invalid { path: path.to_path_buf(), line, message: describe(err.message(), &keys) }.into()
}

/// The key path toml's error records (`["energy", "pue"]`), which it only
/// shows in its text when it has no input to quote.
fn error_keys(err: &toml::de::Error) -> Vec<String> {
    let mut bare = err.clone();
    bare.set_input(None);
    let shown = bare.to_string();
    shown
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("in `").and_then(|l| l.strip_suffix('`')))
        .map(|path| path.split('.').map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The table a key path lies in, as the file writes its header.
fn section(keys: &[String]) -> String {
    match keys {
        [] => "at the top level".to_owned(),
        [table] if table == "gpu_cost" || table == "team" => format!("in [[{table}]]"),
        _ => format!("in [{}]", keys.join(".")),
    }
}

/// A message naming the key, from serde's or toml's `message` about the
/// value at `keys` (or about a key of the table at `keys`).
fn describe(message: &str, keys: &[String]) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (key, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let expected = expected.trim_start_matches(", ");
        let hint = if expected.is_empty() { String::new() } else { format!(" ({})", plain(expected)) };
        return format!("unknown key `{key}` {}{hint}", section(keys));
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or(rest);
        return match keys.first().map(String::as_str) {
            Some("team") => format!("team rule without a `{key}`"),
            Some("gpu_cost") => format!("gpu_cost entry without a `{key}`"),
            _ => format!("`{key}` is missing {}", section(keys)),
        };
    }
    let Some(key) = keys.last() else {
        return format!("invalid TOML: {message}");
    };
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix)
            && let Some((found, expected)) = rest.rsplit_once(", expected ")
        {
            return format!("`{key}`: expected {}, found {found}", plain(expected));
        }
    }
    format!("`{key}` {message}")
}

/// serde's names for expected types, in the file's words.
fn plain(expected: &str) -> String {
    expected
        .replace("a sequence", "an array")
        .replace("i64", "a whole number")
        .replace("u64", "a whole number")
        .replace("f64", "a number")
}

/// Deserializes a number (integer or float) that is finite.
struct Number;

impl Visitor<'_> for Number {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        if v.is_finite() { Ok(v) } else { Err(E::custom("must be a finite number")) }
    }
}

/// A number from 0 to 100.
fn percent<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    let v = deserializer.deserialize_any(Number)?;
    if (0.0..=100.0).contains(&v) { Ok(v) } else { Err(de::Error::custom("must be between 0 and 100")) }
}

/// The highest `[energy] price_per_kwh`, in `currency`: above any
/// electricity tariff in any currency.
pub const MAX_PRICE_PER_KWH: f64 = 100_000.0;

/// The highest `[energy] pue`: the least efficient data centres report
/// about 2.5.
pub const MAX_PUE: f64 = 3.0;

/// The highest `[[gpu_cost]] purchase_price`, in `currency`: ten billion,
/// above any GPU's price in any currency.
pub const MAX_PURCHASE_PRICE: f64 = 10_000_000_000.0;

/// The range of `[[gpu_cost]] lifetime_years`: from five weeks to 50 years.
pub const LIFETIME_YEARS: std::ops::RangeInclusive<f64> = 0.1..=50.0;

/// The highest `[[team]] budget_per_month`, in `currency`: as the highest
/// purchase price, above any team's month in any currency.
pub const MAX_BUDGET_PER_MONTH: f64 = 10_000_000_000.0;

/// The highest `[[gpu_cost]] ops_per_gpu_hour`, in `currency`.
pub const MAX_OPS_PER_GPU_HOUR: f64 = 1_000_000.0;

/// The highest `[zombie] min_mem_mib`: 1 TiB, more than any GPU holds.
pub const MAX_MIN_MEM_MIB: u64 = 1 << 20;

/// The highest `[zombie] starved_pcie_mib_per_s`: 1 TiB/s, past any PCIe
/// link.
pub const MAX_STARVED_PCIE_MIB_PER_S: u64 = 1 << 20;

/// The longest duration the file may give (`min_idle`, `for`): 366 days.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * DAY_SECS);

/// A finite number from `min` to `max`, refused with a message that names
/// the bound it breaks.
fn within<'de, D: Deserializer<'de>>(deserializer: D, min: f64, max: f64) -> Result<f64, D::Error> {
    let v = deserializer.deserialize_any(Number)?;
    if v < min {
        Err(de::Error::custom(if min == 0.0 {
            "must not be negative".to_owned()
        } else {
            format!("must be at least {min}")
        }))
    } else if v > max {
        Err(de::Error::custom(format!("must be at most {}", apron_reports::grouped(max, 0))))
    } else {
        Ok(v)
    }
}

fn price_per_kwh<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    within(deserializer, 0.0, MAX_PRICE_PER_KWH)
}

fn pue<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    within(deserializer, 1.0, MAX_PUE)
}

fn purchase_price<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    within(deserializer, 0.0, MAX_PURCHASE_PRICE)
}

fn lifetime_years<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    within(deserializer, *LIFETIME_YEARS.start(), *LIFETIME_YEARS.end())
}

fn budget_per_month<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    within(deserializer, 0.0, MAX_BUDGET_PER_MONTH).map(Some)
}

fn ops_per_gpu_hour<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    within(deserializer, 0.0, MAX_OPS_PER_GPU_HOUR)
}

/// Deserializes an integer at or above zero.
struct WholeNumber;

impl Visitor<'_> for WholeNumber {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom("must not be negative"))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
}

/// An integer from zero to [`MAX_MIN_MEM_MIB`].
fn min_mem_mib<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let v = deserializer.deserialize_any(WholeNumber)?;
    if v <= MAX_MIN_MEM_MIB {
        Ok(v)
    } else {
        Err(de::Error::custom(format!(
            "must be at most {} (1 TiB)",
            apron_reports::grouped(MAX_MIN_MEM_MIB as f64, 0)
        )))
    }
}

/// An integer from zero to [`MAX_STARVED_PCIE_MIB_PER_S`].
fn starved_pcie_mib_per_s<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let v = deserializer.deserialize_any(WholeNumber)?;
    if v <= MAX_STARVED_PCIE_MIB_PER_S {
        Ok(v)
    } else {
        Err(de::Error::custom(format!(
            "must be at most {} (1 TiB/s)",
            apron_reports::grouped(MAX_STARVED_PCIE_MIB_PER_S as f64, 0)
        )))
    }
}

/// A string that is not empty.
fn non_empty_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let s = String::deserialize(deserializer)?;
    if s.trim().is_empty() { Err(de::Error::custom("must not be empty")) } else { Ok(s) }
}

/// Deserializes a duration written as a string (`"10m"`, `"2h"`,
/// `"1h 30m"`).
struct DurationText;

impl Visitor<'_> for DurationText {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"10m\" or \"2h\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        match humantime::parse_duration(v) {
            Ok(d) if d.is_zero() => Err(E::custom("must be longer than zero")),
            Ok(d) if d > MAX_DURATION => Err(E::custom("must be at most 366 days")),
            Ok(d) => Ok(d),
            Err(_) => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

/// A duration above zero and at most [`MAX_DURATION`], written as a string.
fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationText)
}

/// A duration above zero and shorter than [`NO_DATA_LOOKBACK`].
fn no_data<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let d = duration(deserializer)?;
    if d < NO_DATA_LOOKBACK {
        Ok(d)
    } else {
        Err(de::Error::custom("must be shorter than 7 days, the rule's look-back"))
    }
}

/// Writes a duration the way the file does (`"10m"`, `"2h"`).
fn show_duration<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&humantime::format_duration(*d).to_string())
}

pub mod pricing;
pub mod tables;

#[cfg(test)]
mod tests;
