//! The configuration as three small tables, so that SQL, apron's own and
//! another engine's, can apply the prices and team rules by joining them
//! instead of calling functions only apron has:
//!
//! - `apron_settings`, one row: `currency`, `price_per_kwh`, `pue`,
//!   `idle_threshold_pct`;
//! - `apron_gpu_rates`, one row per `[[gpu_cost]]` entry in file order
//!   (`position` from 1), then the built-in default as a last `"*"` entry:
//!   `model` (a `gpu_model`, or `"*"` for any), the entry's numbers and
//!   `rate_per_second` ([`crate::config::rate_per_second`]). A GPU's price is
//!   the entry of lowest `position` whose model is the GPU's or `"*"`;
//! - `apron_team_rules`, one row per rule of each `[[team]]`:
//!   `team_order` (the team's place in the file, from 1), `team`, `kind`
//!   (`user`, `uid`, `k8s_namespace`, `k8s_labels` or `slurm_account`),
//!   `value` (as the file writes it; for `k8s_labels`, the team's labels as
//!   sorted `key=value` pairs joined by `,`), `uid` (for `uid` rules) and
//!   `regex` (for `k8s_namespace` rules: the glob as an anchored regular
//!   expression; for `k8s_labels`, one that matches a recorded
//!   `k8s_labels` text holding every one of the team's labels). A
//!   process belongs to the team of lowest `team_order` with a rule that
//!   matches it; to `unassigned` when none does.
//!
//! `queries/proc_minute_states.sql` and `queries/minute_costs.sql` read
//! them; apron registers them from the config wherever those run
//! ([`register`]) and `apron export-config` writes them as Parquet
//! (`write`) for Spark, Trino or Athena. They state exactly what
//! [`crate::config::team_of`] and [`crate::config::gpu_cost_for`] decide,
//! which the ledger applies in Rust: `analyze/src/ledger/tests.rs` holds the
//! two to the same figures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use apron_files::replace::Replacement;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::datasource::MemTable;
use datafusion::parquet::arrow::ArrowWriter;

use crate::config::{Config, DEFAULT_GPU_COST, rate_per_second};
use crate::error::{Error, OutputError, SessionError};
use crate::session::Session;

/// The tables' names, in the order [`batches`] returns them.
pub const NAMES: [&str; 3] = ["apron_settings", "apron_gpu_rates", "apron_team_rules"];

/// The three tables of `config`, named.
pub fn batches(config: &Config) -> Vec<(&'static str, RecordBatch)> {
    vec![(NAMES[0], settings(config)), (NAMES[1], gpu_rates(config)), (NAMES[2], team_rules(config))]
}

/// Registers the three tables of `config` with `session` (replacing any
/// registered before).
pub fn register(session: &Session, config: &Config) -> Result<(), Error> {
    let ctx = session.context();
    for (name, batch) in batches(config) {
        let table = MemTable::try_new(batch.schema(), vec![vec![batch]])
            .map_err(|source| SessionError::Execute { source })?;
        ctx.deregister_table(name).map_err(|source| SessionError::Execute { source })?;
        ctx.register_table(name, Arc::new(table)).map_err(|source| SessionError::Execute { source })?;
    }
    Ok(())
}

/// Writes the three tables of `config` under `dir`, one folder each
/// (`DIR/apron_settings/apron_settings.parquet`, …) so that an engine's
/// table can point at the folder. Each file replaces its final name
/// ([`apron_files::replace`]: a new hidden temporary file, which an engine
/// listing the folder meanwhile skips, renamed over it; never written
/// through a symbolic link). Returns the files written.
pub fn write(config: &Config, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for (name, batch) in batches(config) {
        let folder = dir.join(name);
        let path = folder.join(format!("{name}.parquet"));
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| {
            Error::from(OutputError::ConfigTables { path: path.clone(), source })
        };
        std::fs::create_dir_all(&folder)
            .map_err(|e| Error::from(OutputError::ConfigTables { path: folder.clone(), source: e.into() }))?;
        let file = Replacement::begin(&path).map_err(|e| failed(e.into()))?;
        let mut writer = ArrowWriter::try_new(file, batch.schema(), None).map_err(|e| failed(e.into()))?;
        writer.write(&batch).map_err(|e| failed(e.into()))?;
        let file = writer.into_inner().map_err(|e| failed(e.into()))?;
        file.commit().map_err(|e| failed(e.into()))?;
        written.push(path);
    }
    Ok(written)
}

fn batch(fields: Vec<Field>, columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("columns match their fields")
}

fn settings(config: &Config) -> RecordBatch {
    batch(
        vec![
            Field::new("currency", DataType::Utf8, false),
            Field::new("price_per_kwh", DataType::Float64, false),
            Field::new("pue", DataType::Float64, false),
            Field::new("idle_threshold_pct", DataType::Float64, false),
        ],
        vec![
            Arc::new(StringArray::from(vec![config.currency.as_str()])),
            Arc::new(Float64Array::from(vec![config.energy.price_per_kwh])),
            Arc::new(Float64Array::from(vec![config.energy.pue])),
            Arc::new(Float64Array::from(vec![config.idle.threshold_pct])),
        ],
    )
}

fn gpu_rates(config: &Config) -> RecordBatch {
    // The default prices what no entry does: last, so any entry comes first.
    let entries: Vec<_> = config.gpu_cost.iter().chain(std::iter::once(&*DEFAULT_GPU_COST)).collect();
    let positions = (1..).take(entries.len()).collect::<Vec<i32>>();
    let f64s = |f: fn(&crate::config::GpuCost) -> f64| -> ArrayRef {
        Arc::new(entries.iter().map(|e| f(e)).collect::<Float64Array>())
    };
    batch(
        vec![
            Field::new("position", DataType::Int32, false),
            Field::new("model", DataType::Utf8, false),
            Field::new("purchase_price", DataType::Float64, false),
            Field::new("lifetime_years", DataType::Float64, false),
            Field::new("ops_per_gpu_hour", DataType::Float64, false),
            Field::new("rate_per_second", DataType::Float64, false),
        ],
        vec![
            Arc::new(Int32Array::from(positions)),
            Arc::new(entries.iter().map(|e| Some(e.model.as_str())).collect::<StringArray>()),
            f64s(|e| e.purchase_price),
            f64s(|e| e.lifetime_years),
            f64s(|e| e.ops_per_gpu_hour),
            f64s(rate_per_second),
        ],
    )
}

/// One row of `apron_team_rules`.
struct Rule {
    team_order: i32,
    team: String,
    kind: &'static str,
    value: String,
    uid: Option<i64>,
    regex: Option<String>,
}

fn team_rules(config: &Config) -> RecordBatch {
    let mut rules = Vec::new();
    for (team, order) in config.team.iter().zip(1..) {
        let rule = |kind, value: String| Rule {
            team_order: order,
            team: team.name.clone(),
            kind,
            value,
            uid: None,
            regex: None,
        };
        rules.extend(team.users.iter().map(|u| rule("user", u.clone())));
        rules.extend(team.uids.iter().map(|&uid| Rule { uid: Some(uid), ..rule("uid", uid.to_string()) }));
        rules.extend(team.k8s_namespaces.iter().map(|p| Rule {
            regex: Some(glob_regex(p.as_str())),
            ..rule("k8s_namespace", p.as_str().to_owned())
        }));
        if !team.k8s_labels.is_empty() {
            let labels = &team.k8s_labels.0;
            let value = labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
            rules.push(Rule {
                regex: Some(apron_schemas::k8s_labels::selector_regex(labels)),
                ..rule("k8s_labels", value)
            });
        }
        rules.extend(team.slurm_accounts.iter().map(|a| rule("slurm_account", a.clone())));
    }
    batch(
        vec![
            Field::new("team_order", DataType::Int32, false),
            Field::new("team", DataType::Utf8, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, false),
            Field::new("uid", DataType::Int64, true),
            Field::new("regex", DataType::Utf8, true),
        ],
        vec![
            Arc::new(rules.iter().map(|r| r.team_order).collect::<Int32Array>()),
            Arc::new(rules.iter().map(|r| Some(r.team.as_str())).collect::<StringArray>()),
            Arc::new(rules.iter().map(|r| Some(r.kind)).collect::<StringArray>()),
            Arc::new(rules.iter().map(|r| Some(r.value.as_str())).collect::<StringArray>()),
            Arc::new(rules.iter().map(|r| r.uid).collect::<Int64Array>()),
            Arc::new(rules.iter().map(|r| r.regex.as_deref()).collect::<StringArray>()),
        ],
    )
}

/// A glob pattern of the `glob` crate's syntax (what the config's
/// `k8s_namespaces` are: `*`, `?`, `[a-z]`, `[!a-z]`, `[]]`) as an anchored
/// regular expression that matches the same names in Rust's, Java's
/// (Spark) and Trino's regular expressions: `^vision-.*$`. Anything but a
/// letter, digit or `_` is escaped outside brackets; inside, only what the
/// regex dialects treat specially.
pub fn glob_regex(glob: &str) -> String {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::from("^");
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => {
                // `**` is one wildcard for a name without `/`.
                while chars.get(i + 1) == Some(&'*') {
                    i += 1;
                }
                out.push_str(".*");
            }
            '?' => out.push('.'),
            '[' => match class_end(&chars, i) {
                Some(end) => {
                    let (negated, first) = match chars.get(i + 1) {
                        Some('!') => (true, i + 2),
                        _ => (false, i + 1),
                    };
                    out.push('[');
                    if negated {
                        out.push('^');
                    }
                    for (k, &c) in chars.iter().enumerate().take(end).skip(first) {
                        // A `-` between two characters is a range; any other
                        // special character is itself.
                        let range = c == '-' && k > first && k + 1 < end;
                        if !range && matches!(c, '\\' | '[' | ']' | '^' | '-' | '&' | '~') {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push(']');
                    i = end;
                }
                None => out.push_str("\\["),
            },
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            c if c.is_ascii() => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
        i += 1;
    }
    out.push('$');
    out
}

/// The index of the `]` closing the class opened at `chars[open]`, as the
/// glob crate reads it: a `]` right after `[` or `[!` belongs to the class.
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut k = open + 1;
    if chars.get(k) == Some(&'!') {
        k += 1;
    }
    // The first character of the class is itself, `]` included.
    k += 1;
    while k < chars.len() {
        if chars[k] == ']' {
            return Some(k);
        }
        k += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_glob_and_its_regex_match_the_same_names() {
        let globs = [
            "vision-*",
            "*-prod",
            "team?",
            "ns-[a-c]*",
            "ns-[!a-c]",
            "a[]]b",
            "[-a]x",
            "x.y+z",
            "*",
            "**",
            "a*b*c",
            "ml_[0-9][0-9]",
        ];
        let names = [
            "vision-",
            "vision-a",
            "vision",
            "xvision-a",
            "a-prod",
            "-prod",
            "prod",
            "team1",
            "team",
            "team12",
            "ns-a",
            "ns-bz",
            "ns-d",
            "ns-c",
            "a]b",
            "ab",
            "-x",
            "ax",
            "bx",
            "x.y+z",
            "xay+z",
            "",
            "abc",
            "aXbYc",
            "acb",
            "ml_07",
            "ml_7",
            "ml-07",
        ];
        for glob in globs {
            let pattern = glob::Pattern::new(glob).expect("a valid glob");
            let regex = regex::Regex::new(&glob_regex(glob)).expect("a valid regex");
            for name in names {
                assert_eq!(
                    regex.is_match(name),
                    pattern.matches(name),
                    "glob {glob:?} as {:?} on {name:?}",
                    glob_regex(glob)
                );
            }
        }
    }

    #[test]
    fn the_default_price_comes_after_every_entry() {
        let config = Config::from_toml(
            "[[gpu_cost]]\nmodel = \"NVIDIA H100\"\npurchase_price = 30000\nlifetime_years = 5\nops_per_gpu_hour = 0.3\n",
            Path::new("apron.toml"),
        )
        .expect("config");
        let rates = gpu_rates(&config);
        let models = rates.column(1).as_any().downcast_ref::<StringArray>().expect("text");
        assert_eq!(models.iter().collect::<Vec<_>>(), [Some("NVIDIA H100"), Some("*")]);
        let rate = rates.column(5).as_any().downcast_ref::<Float64Array>().expect("f64");
        assert_eq!(rate.value(0), rate_per_second(&config.gpu_cost[0]));
        assert_eq!(rate.value(1), rate_per_second(&DEFAULT_GPU_COST));
    }
}
