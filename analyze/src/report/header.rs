//! What every report prints before its rows: the period, what the data
//! holds in it (GPUs, first and last sample, recorded and unrecorded
//! GPU-hours), which config priced it, and each GPU model of the period no
//! `[[gpu_cost]]` entry of that config prices ([`unpriced`]), with its
//! GPU-hours and the default price it was given instead; and, above rows
//! that say what is "still" running or idle, when the data ends long
//! before now ([`data_end_line`]).
//!
//! With `--format table` the header goes to stdout above the table; with
//! `csv` or `json` it goes to stderr, so stdout stays pure data for scripts.

use std::io::Write;

use apron_schemas::Table;
use apron_schemas::time::{DAY_MS, HOUR_SECS, MINUTE_MS};
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, TimestampMillisecondType};

use crate::config::{Config, GpuCost, gpu_cost_for};
use crate::error::{Error, OutputError, SessionError};
use crate::ledger::coverage::{CoverageRow, ModelHours};
use crate::output::Format;
use crate::report::period::{Period, midnight_ms, show_ms, timestamp};
use crate::session::Session;
use crate::session::queries;

/// What the data holds in a period (`queries/coverage.sql`).
#[derive(Debug, Clone, PartialEq)]
pub struct Coverage {
    /// First and last recorded sample, milliseconds since the epoch.
    pub first_ms: i64,
    /// Last recorded sample.
    pub last_ms: i64,
    /// GPUs recorded.
    pub gpus: i64,
    /// Recorded GPU-hours.
    pub recorded_hours: f64,
    /// GPU-hours of the period, for the GPUs recorded, with no samples
    /// (never counted as idle).
    pub unrecorded_hours: f64,
    /// The GPU models seen, sorted.
    pub models: Vec<String>,
    /// The recorded GPU-hours of each model (`queries/gpu_models.sql`), by
    /// model; a GPU whose model was not recorded last, as `None`.
    pub model_hours: Vec<ModelHours>,
}

impl Coverage {
    /// What `session` holds in `period`, `now_ms` being the current time (a
    /// period reaching past now cannot have been recorded past now). Fails
    /// with [`SessionError::NoDataInPeriod`] when the period holds nothing.
    pub async fn of(session: &Session, period: &Period, now_ms: i64) -> Result<Coverage, Error> {
        let Some(raw) = coverage_row(session, period).await? else {
            let covers = match data_span(session).await? {
                Some((first, last)) => {
                    format!("; the data covers {} – {} UTC", show_ms(first), show_ms(last + MINUTE_MS))
                }
                None => String::new(),
            };
            return Err(SessionError::NoDataInPeriod {
                period: period.label(),
                data: session.layout().root().to_path_buf(),
                covers,
            }
            .into());
        };
        let model_hours = model_hours(session, period).await?;
        Self::from_row(session, period, now_ms, raw, model_hours).await
    }

    /// The coverage of `period` from what was found in its rollups (`raw`,
    /// `model_hours`: the rows of `queries/coverage.sql` and
    /// `queries/gpu_models.sql`, or the same figures from the ledger's pass).
    pub async fn from_row(
        session: &Session,
        period: &Period,
        now_ms: i64,
        raw: CoverageRow,
        model_hours: Vec<ModelHours>,
    ) -> Result<Coverage, Error> {
        let first_ms = sample_in(session, raw.first_minute, true).await?.unwrap_or(raw.first_minute);
        let last_ms = sample_in(session, raw.last_minute, false).await?.unwrap_or(raw.last_minute);
        let recorded_hours = raw.recorded_seconds / HOUR_SECS as f64;
        let possible = raw.gpus as f64 * period.elapsed_hours(now_ms);
        Ok(Coverage {
            first_ms,
            last_ms,
            gpus: raw.gpus,
            recorded_hours,
            unrecorded_hours: (possible - recorded_hours).max(0.0),
            models: raw.models,
            model_hours,
        })
    }
}

/// The GPU-hours per model of `period`.
async fn model_hours(session: &Session, period: &Period) -> Result<Vec<ModelHours>, Error> {
    let df = session.sql_with_params(queries::GPU_MODELS, period.params().to_vec()).await?;
    let (_, batches) = session.collect(df).await?;
    let mut out = Vec::new();
    for b in &batches {
        let models = crate::report::columns::text_column(b, "gpu_model");
        let gpus = b.column(1).as_primitive::<Int64Type>();
        let hours = b.column(2).as_primitive::<Float64Type>();
        for (i, model) in models.into_iter().enumerate() {
            out.push(ModelHours { model, gpus: gpus.value(i), gpu_hours: hours.value(i) });
        }
    }
    Ok(out)
}

/// A GPU model of the period that no `[[gpu_cost]]` entry of the config
/// matches, so it was priced with [`crate::config::DEFAULT_GPU_COST`].
#[derive(Debug, Clone, PartialEq)]
pub struct Unpriced {
    /// The model and its GPU-hours.
    pub hours: ModelHours,
    /// The price it was given.
    pub cost: GpuCost,
}

impl Unpriced {
    /// The model as the header names it (`(model not recorded)` for none).
    pub fn model_name(&self) -> &str {
        self.hours.model.as_deref().unwrap_or("(model not recorded)")
    }

    /// One line saying so: `Unpriced: 1,440.0 GPU-hours of NVIDIA L40S (8
    /// GPUs) priced at the default 25,000 USD over 4 years + 0.20 USD/h: no
    /// [[gpu_cost]] entry of apron.toml matches it`.
    pub fn line(&self, config: &Config) -> String {
        format!(
            "Unpriced: {} GPU-hours of {} ({} GPU{}) priced at the default {}: no [[gpu_cost]] entry of {} matches it",
            hours(self.hours.gpu_hours),
            self.model_name(),
            self.hours.gpus,
            if self.hours.gpus == 1 { "" } else { "s" },
            price(&self.cost, &config.currency),
            config.source
        )
    }
}

/// A GPU price in words: `25,000 USD over 4 years + 0.20 USD/h`.
pub fn price(cost: &GpuCost, currency: &str) -> String {
    format!(
        "{} {currency} over {} years + {:.2} {currency}/h",
        apron_reports::grouped(cost.purchase_price, 0),
        cost.lifetime_years,
        cost.ops_per_gpu_hour
    )
}

/// The models of `coverage` that no `[[gpu_cost]]` entry of `config`
/// matches (none does `"*"`), each with the price it was given.
pub fn unpriced(config: &Config, coverage: &Coverage) -> Vec<Unpriced> {
    coverage
        .model_hours
        .iter()
        .filter(|m| {
            let model = m.model.as_deref().unwrap_or("");
            !config.gpu_cost.iter().any(|c| c.model == "*" || c.model == model)
        })
        .map(|m| Unpriced {
            hours: m.clone(),
            cost: gpu_cost_for(config, m.model.as_deref().unwrap_or("")).clone(),
        })
        .collect()
}

async fn coverage_row(session: &Session, period: &Period) -> Result<Option<CoverageRow>, Error> {
    let df = session.sql_with_params(queries::COVERAGE, period.params().to_vec()).await?;
    let (_, batches) = session.collect(df).await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else { return Ok(None) };
    let first = b.column(0).as_primitive::<TimestampMillisecondType>();
    if first.is_null(0) {
        return Ok(None);
    }
    let models = b.column(4).as_list::<i32>();
    let models = if models.is_null(0) {
        Vec::new()
    } else {
        crate::report::columns::strings(models.value(0).as_ref())
    };
    Ok(Some(CoverageRow {
        first_minute: first.value(0),
        last_minute: b.column(1).as_primitive::<TimestampMillisecondType>().value(0),
        gpus: b.column(2).as_primitive::<Int64Type>().value(0),
        recorded_seconds: b.column(3).as_primitive::<Float64Type>().value(0),
        models,
    }))
}

/// The first and last recorded minute of all the data, for the error of
/// a period that holds none. Only the first and last days with a folder
/// (or rows in the write-ahead log) are read, not every file; should
/// either hold no GPU-minute (a folder of other rows alone), every day is.
async fn data_span(session: &Session) -> Result<Option<(i64, i64)>, Error> {
    if let Some((first, last)) = session.day_span(&[Table::GpuMinutes, Table::GpuSamples]) {
        let day = |d| Period { start_ms: midnight_ms(d), end_ms: midnight_ms(d) + DAY_MS };
        let first_row = coverage_row(session, &day(first)).await?;
        let last_row =
            if last == first { first_row.clone() } else { coverage_row(session, &day(last)).await? };
        if let (Some(a), Some(b)) = (first_row, last_row) {
            return Ok(Some((a.first_minute, b.last_minute)));
        }
    }
    let all = Period { start_ms: 0, end_ms: 7_258_118_400_000 }; // 1970 to 2200
    Ok(coverage_row(session, &all).await?.map(|c| (c.first_minute, c.last_minute)))
}

/// The first (or last) raw sample in the minute starting at `minute_ms`;
/// `None` when the raw rows are gone (retention keeps rollups longer, and
/// data may come as rollups alone). A raw file that cannot be read is an
/// error: the header never hides a broken file.
async fn sample_in(session: &Session, minute_ms: i64, first: bool) -> Result<Option<i64>, Error> {
    let params = vec![timestamp(minute_ms), timestamp(minute_ms + MINUTE_MS)];
    let df = match session.sql_with_params(queries::SAMPLES_BETWEEN, params).await {
        Ok(df) => df,
        Err(Error::Session(SessionError::UnknownTable { .. })) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (_, batches) = session.collect(df).await?;
    let Some(b) = batches.iter().find(|b| b.num_rows() > 0) else { return Ok(None) };
    let column = b.column(if first { 0 } else { 1 }).as_primitive::<TimestampMillisecondType>();
    Ok(column.is_valid(0).then(|| column.value(0)))
}

/// The header line of a cost report when some energy was not measured:
/// `Energy:   energy unknown for 0.05 GPU-hours …`; `None` when all was.
pub fn energy_unknown_line(unknown_hours: f64) -> Option<String> {
    (unknown_hours > 0.0).then(|| {
        format!(
            "Energy:   energy unknown for {} GPU-hours (no energy counter or power reading): priced at 0",
            hours(unknown_hours)
        )
    })
}

/// The header line of a report with a row `(unallocated)`, which says what
/// that key means: `Who:      (unallocated) is no one: …`.
pub fn unallocated_line() -> String {
    format!(
        "Who:      {} is no one: GPU time no process or allocation held (an empty GPU), not a team's",
        apron_reports::UNALLOCATED
    )
}

/// The lines a report prints first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    lines: Vec<String>,
    /// The `Still:` line ([`data_end_line`]), held apart: it explains the
    /// columns `still_running` and `still_idle`, so only a report with them
    /// prints it ([`Header::keep_still`]).
    still: Option<String>,
}

impl Header {
    /// The common lines: period, data, config, recorded time, and a line
    /// for each model the config does not price.
    pub fn new(period: &Period, coverage: &Coverage, session: &Session, config: &Config) -> Header {
        let mut lines = vec![
            format!("Period:   {}", period.label()),
            format!(
                "Data:     {}: {} GPUs, first sample {}, last {} UTC",
                session.layout().root().display(),
                coverage.gpus,
                show_ms(coverage.first_ms),
                show_ms(coverage.last_ms)
            ),
            format!("Config:   {}", config.source),
            format!(
                "Recorded: {} GPU-hours; unrecorded: {} GPU-hours (not counted as idle)",
                hours(coverage.recorded_hours),
                hours(coverage.unrecorded_hours)
            ),
        ];
        let still = data_end_line(coverage, chrono::Utc::now().timestamp_millis());
        lines.extend(unpriced(config, coverage).iter().map(|u| u.line(config)));
        Header { lines, still }
    }

    /// Keeps the `Still:` line, if the data ends long before now, after the
    /// `Recorded:` line: for a report whose rows have `still_running` or
    /// `still_idle` (`zombies`, `starved`, `reclaim`). Without it a header
    /// has no such line.
    pub fn keep_still(&mut self) {
        if let Some(line) = self.still.take() {
            let at = self
                .lines
                .iter()
                .position(|l| l.starts_with("Recorded:"))
                .map_or(self.lines.len(), |i| i + 1);
            self.lines.insert(at, line);
        }
    }

    /// Adds a line.
    pub fn push(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    /// The lines, in order.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Prints the header for a result in `format`: to `out` followed by a
    /// blank line for a table, to stderr otherwise.
    pub fn print<W: Write>(&self, format: Format, out: &mut W) -> Result<(), Error> {
        // A header names hosts, models and the data folder: data, shown
        // safe for a terminal.
        let text: String =
            self.lines.iter().map(|l| format!("{}\n", apron_cli::printable::printable(l))).collect();
        if format == Format::Table {
            out.write_all(text.as_bytes()).and_then(|()| out.write_all(b"\n"))
        } else {
            std::io::stderr().lock().write_all(text.as_bytes())
        }
        .map_err(|source| OutputError::Write { source }.into())
    }
}

/// How long before the period's end the data may stop without a word: the
/// recorder's newest rows are seconds old (the WAL is read too), a shipped
/// bucket's up to a day.
const DATA_END_SLACK_MS: i64 = 10 * MINUTE_MS;

/// When the period's last sample is well before `now_ms` (a finished
/// month, a copy of old data, a node that stopped recording): that a
/// stretch "still" running or idle (`still_running`, `still_idle`) is so at
/// that sample, not now. The line names the time, not how long ago, so that
/// two runs print the same.
pub fn data_end_line(coverage: &Coverage, now_ms: i64) -> Option<String> {
    (now_ms - coverage.last_ms > DATA_END_SLACK_MS).then(|| {
        format!(
            "Still:    still running or idle (still_running, still_idle) means at the period's last sample, \
             {} UTC, not now",
            show_ms(coverage.last_ms)
        )
    })
}

/// Warnings about `config` against what the data holds: a `[[gpu_cost]]`
/// entry for a model the period has no GPU of (a typo prices nothing).
pub fn config_warnings(config: &Config, coverage: &Coverage) -> Vec<String> {
    config
        .gpu_cost
        .iter()
        .filter(|c| c.model != "*" && !coverage.models.contains(&c.model))
        .map(|c| {
            format!(
                "warning: {}: [[gpu_cost]] model \"{}\" matches no GPU in this period (models here: {})",
                config.source,
                c.model,
                if coverage.models.is_empty() { "none".to_owned() } else { coverage.models.join(", ") }
            )
        })
        .collect()
}

/// GPU-hours for the header: one decimal, two under ten hours (so a few
/// minutes do not read as 0.0).
pub fn hours(h: f64) -> String {
    apron_reports::grouped(h, if h.abs() < 10.0 { 2 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_that_ends_long_before_now_says_what_still_means() {
        // The last sample 2026-11-28 12:00:00.
        let last = 1_793_491_200_000 + 27 * apron_schemas::time::DAY_MS + 12 * HOUR_SECS as i64 * 1_000;
        let coverage = Coverage {
            first_ms: 0,
            last_ms: last,
            gpus: 1,
            recorded_hours: 0.0,
            unrecorded_hours: 0.0,
            models: Vec::new(),
            model_hours: Vec::new(),
        };
        assert_eq!(
            data_end_line(&coverage, last + 3 * apron_schemas::time::DAY_MS).as_deref(),
            Some(
                "Still:    still running or idle (still_running, still_idle) means at the period's last \
                 sample, 2026-11-28 12:00 UTC, not now"
            )
        );
        // Data a few minutes old says nothing.
        assert_eq!(data_end_line(&coverage, last + 5 * MINUTE_MS), None);
        assert_eq!(data_end_line(&coverage, last + 11 * MINUTE_MS).map(|_| ()), Some(()));
    }

    #[test]
    fn unpriced_models_are_the_ones_no_entry_matches() {
        let config = Config::from_toml(
            "currency = \"EUR\"\n[[gpu_cost]]\nmodel = \"H100\"\npurchase_price = 30000\nlifetime_years = 3\nops_per_gpu_hour = 0.25\n",
            std::path::Path::new("fleet.toml"),
        )
        .expect("valid");
        let hours = |model: Option<&str>, gpus, gpu_hours| ModelHours {
            model: model.map(str::to_owned),
            gpus,
            gpu_hours,
        };
        let coverage = Coverage {
            first_ms: 0,
            last_ms: 0,
            gpus: 17,
            recorded_hours: 0.0,
            unrecorded_hours: 0.0,
            models: vec!["A100".into(), "H100".into(), "L40S".into()],
            model_hours: vec![
                hours(Some("A100"), 8, 5_760.0),
                hours(Some("H100"), 8, 5_760.0),
                hours(Some("L40S"), 1, 12.5),
                hours(None, 1, 0.25),
            ],
        };
        let found = unpriced(&config, &coverage);
        let names: Vec<&str> = found.iter().map(Unpriced::model_name).collect();
        assert_eq!(names, ["A100", "L40S", "(model not recorded)"]);
        assert_eq!(found[0].cost, *crate::config::DEFAULT_GPU_COST);
        assert_eq!(
            found[1].line(&config),
            "Unpriced: 12.5 GPU-hours of L40S (1 GPU) priced at the default 25,000 EUR over 4 years + 0.20 EUR/h: \
             no [[gpu_cost]] entry of fleet.toml matches it"
        );
        // A "*" entry prices every model.
        let mut all = config.clone();
        all.gpu_cost.push(GpuCost { model: "*".into(), ..all.gpu_cost[0].clone() });
        assert!(unpriced(&all, &coverage).is_empty());
        assert!(unpriced(&Config::default(), &coverage).is_empty());
    }

    /// What the data covers, found from its first and last days, is what
    /// the coverage query finds over every file: on three simulated days,
    /// then with a later day whose folder holds no GPU-minute (the
    /// whole-range query answers), then with nothing at all.
    #[test]
    fn the_data_span_read_from_its_first_and_last_days_is_the_whole_ranges() {
        use apron_schemas::DataLayout;
        use apron_store::simulate::{SimulateOptions, simulate};

        let dir = tempfile::tempdir().expect("tempdir");
        let options = SimulateOptions {
            layout: DataLayout::new(dir.path()),
            gpus: 9,
            days: 3,
            start: chrono::NaiveDate::from_ymd_opt(2026, 10, 4).expect("date"),
            seed: 3,
            interval: std::time::Duration::from_secs(30),
            rotate: std::time::Duration::from_secs(7 * 3_600),
            threads: 2,
        };
        simulate(&options, &|_, _| {}).expect("simulates");
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt");
        let memory = crate::session::memory::MemoryLimit::for_this_machine();
        let whole = |session: &Session| {
            let all = Period { start_ms: 0, end_ms: 7_258_118_400_000 };
            rt.block_on(coverage_row(session, &all)).expect("query").map(|c| (c.first_minute, c.last_minute))
        };
        let session = rt.block_on(Session::open(dir.path(), memory)).expect("open");
        let span = rt.block_on(data_span(&session)).expect("span");
        let first = 1_791_072_000_000; // 2026-10-04 00:00 UTC
        assert_eq!(span, Some((first, first + 3 * DAY_MS - MINUTE_MS)));
        assert_eq!(span, whole(&session));

        // A later day with a folder of process rows alone.
        let later = chrono::NaiveDate::from_ymd_opt(2026, 10, 9).expect("date");
        let layout = DataLayout::new(dir.path());
        std::fs::create_dir_all(layout.date_dir(Table::GpuSamples, later).join("host=sim-000"))
            .expect("mkdir");
        let session = rt.block_on(Session::open(dir.path(), memory)).expect("open");
        let tables = [Table::GpuMinutes, Table::GpuSamples];
        assert_eq!(session.day_span(&tables), Some((options.start, later)));
        assert_eq!(rt.block_on(data_span(&session)).expect("span"), span);

        let empty = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(empty.path().join("gpu_minutes")).expect("mkdir");
        let session = rt.block_on(Session::open(empty.path(), memory)).expect("open");
        assert_eq!(rt.block_on(data_span(&session)).expect("span"), None);
    }

    #[test]
    fn hours_keep_a_few_minutes_visible() {
        assert_eq!(hours(46_080.0), "46,080.0");
        assert_eq!(hours(28.0 / 60.0), "0.47");
        assert_eq!(hours(2.0 / 60.0), "0.03");
    }
}
