//! `apron config`: prints the effective configuration and where it came
//! from, and, when there is a data folder, the GPU models recorded in the
//! period that no `[[gpu_cost]]` entry prices (they are priced at the
//! built-in default). Reading and checking the file is [`crate::config`]'s
//! job; which models are unpriced is [`crate::report::header::unpriced`]'s.

use std::io::Write;
use std::path::Path;

use clap::Args;

use crate::cli::flag_groups::GlobalArgs;
use crate::cli::flag_groups::PeriodArgs;
use crate::config::Config;
use crate::error::{ConfigError, Error, OutputError, SessionError};
use crate::output::Format;
use crate::report::header::{Coverage, Unpriced, price, unpriced};
use crate::report::period::Period;
use crate::session::Session;

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

/// The data folder `--data` names when it is not given.
const DEFAULT_DATA: &str = "./data";

/// What the data folder says about the config's prices.
enum DataCheck {
    /// No data folder: `--data` not given and `./data` missing.
    NoFolder,
    /// The folder holds no GPU samples in the period (or no tables).
    NoSamples { data: String, period: String },
    /// The models of the period no entry prices (maybe none).
    Checked { data: String, period: String, unpriced: Vec<Unpriced> },
}

/// Loads the configuration `global.config` names (else `./apron.toml`,
/// else the defaults) and prints it to `out`: as `apron.toml` text after a
/// comment line naming its source for `--format table` and `csv`, as one
/// JSON object with a `source` key for `--format json`. With a data folder,
/// the unpriced GPU models follow as comments (`unpriced` in JSON).
pub async fn run<W: Write>(global: &GlobalArgs, args: &ConfigArgs, mut out: W) -> Result<(), Error> {
    let config = Config::load(global.config.as_deref())?;
    let check = check_data(global, args, &config).await?;
    let text = match global.format {
        Format::Json => json(&config, &check)?,
        Format::Table | Format::Csv => toml(&config, &check)?,
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| Error::from(OutputError::Write { source }))
}

/// Which GPU models of the period in `global.data` no entry of `config`
/// prices. A missing default data folder is no error: the config needs none.
async fn check_data(global: &GlobalArgs, args: &ConfigArgs, config: &Config) -> Result<DataCheck, Error> {
    if global.data == Path::new(DEFAULT_DATA) && !global.data.exists() {
        return Ok(DataCheck::NoFolder);
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let period = Period::choose(&args.period.choice(), now_ms)?;
    let data = apron_store::redact::userinfo(&global.data.display().to_string()).into_owned();
    let days = crate::session::Days::of_range(period.start_ms, period.end_ms);
    let session = match Session::open_within(&global.data, global.memory_limit(), days).await {
        Ok(session) => session,
        Err(Error::Session(SessionError::NoData { .. } | SessionError::EmptyBucket { .. })) => {
            return Ok(DataCheck::NoSamples { data, period: period.label() });
        }
        Err(e) => return Err(e),
    };
    match Coverage::of(&session, &period, now_ms).await {
        Ok(coverage) => {
            Ok(DataCheck::Checked { data, period: period.label(), unpriced: unpriced(config, &coverage) })
        }
        Err(Error::Session(SessionError::NoDataInPeriod { .. })) => {
            Ok(DataCheck::NoSamples { data, period: period.label() })
        }
        Err(e) => Err(e),
    }
}

fn toml(config: &Config, check: &DataCheck) -> Result<String, Error> {
    let mut text = config.to_toml()?;
    match check {
        DataCheck::NoFolder => {}
        DataCheck::NoSamples { data, period } => {
            text.push_str(&format!(
                "\n# no GPU samples in {data} over {period} to check the prices against\n"
            ));
        }
        DataCheck::Checked { data, period, unpriced } if unpriced.is_empty() => {
            text.push_str(&format!(
                "\n# every GPU model in {data} over {period} is priced by a [[gpu_cost]] entry\n"
            ));
        }
        DataCheck::Checked { data, period, unpriced } => {
            text.push_str(&format!(
                "\n# GPU models in {data} over {period} that no [[gpu_cost]] entry prices:\n"
            ));
            for u in unpriced {
                text.push_str(&format!("# {}\n", u.line(config)));
            }
        }
    }
    Ok(text)
}

fn json(config: &Config, check: &DataCheck) -> Result<String, Error> {
    let mut value = config.to_json_value()?;
    if let (serde_json::Value::Object(map), DataCheck::Checked { data, period, unpriced }) =
        (&mut value, check)
    {
        let models: Vec<serde_json::Value> = unpriced
            .iter()
            .map(|u| {
                serde_json::json!({
                    "gpu_model": u.hours.model,
                    "gpus": u.hours.gpus,
                    "gpu_hours": u.hours.gpu_hours,
                    "priced_at": price(&u.cost, &config.currency),
                })
            })
            .collect();
        map.insert(
            "unpriced".to_owned(),
            serde_json::json!({"data": data, "period": period, "models": models}),
        );
    }
    let mut text = serde_json::to_string(&value)
        .map_err(|e| ConfigError::Show { format: "json", source: Box::new(e) })?;
    text.push('\n');
    Ok(text)
}
