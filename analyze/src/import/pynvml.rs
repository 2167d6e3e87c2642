//! The CSV of the first seed guide's pynvml logger (`gpu_monitor.py`):
//! no header; each row is `time.time()` (seconds since the epoch, UTC),
//! then one field per GPU in NVML index order,
//! `util%|mem%|NMiB|W` (`3%|5%|512MiB|38.2W`): `utilization.gpu`,
//! `utilization.memory`, memory used and power draw.
//!
//! The logger records no UUID and no model: each GPU gets the stable
//! synthetic UUID of its host and index ([`super::synthetic_uuid`]), and
//! the model given with `--model` (else none, priced by the config's `"*"`
//! entry).

use std::path::{Path, PathBuf};

use apron_schemas::{GpuSample, Text};

use super::ranges::{self, Range};
use super::stream::{self, At, Emit, Row, Scan};
use super::units::{self, Quantity};
use super::{HostRows, ImportError, csv_error, open_csv, seek_csv, synthetic_uuid};

/// How to read the file.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host the file was logged on.
    pub host: String,
    /// Each row's `interval_ms`, instead of the median spacing of samples.
    pub interval_ms: Option<i64>,
    /// The GPUs' model (`NVIDIA H100 80GB HBM3`), which the log lacks.
    pub model: Option<String>,
    /// The day a log of times of day (`17:26:50`) starts.
    pub date: Option<chrono::NaiveDate>,
    /// The zone of those times of day.
    pub tz: chrono_tz::Tz,
    /// The wall time (ms) of the first row of a log whose time column
    /// counts seconds from an arbitrary start (`time.perf_counter()`).
    pub start_ms: Option<i64>,
}

/// Which logger wrote the file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// The seed guide's: no header, `util%|mem%|MiB|W` per GPU.
    Guide,
    /// One power column per GPU (`Timestamp,GPU_0_power_w,GPU_0_freq_mhz,
    /// GPU_1_power_w,…`, as vLLM's `NvmlPowerMonitor` writes it): each
    /// power column's position and its GPU's index.
    Wide(Vec<(usize, i32)>),
}

/// The index of a `GPU_<i>_power_w` column.
fn power_column(name: &str) -> Option<i32> {
    name.trim().strip_prefix("GPU_")?.strip_suffix("_power_w")?.parse().ok()
}

/// The four parts of a GPU's field, their names in errors, units and
/// ranges.
const PARTS: [(&str, Quantity, Range); 4] = [
    ("utilization.gpu", Quantity::Percent, ranges::GPU_UTIL_PCT),
    ("utilization.memory", Quantity::Percent, ranges::MEM_UTIL_PCT),
    ("memory.used", Quantity::Memory, ranges::FB_USED_BYTES),
    ("power.draw", Quantity::Power, ranges::POWER_MW),
];

/// The log at a path, read from its start by [`Scan::scan`].
#[derive(Debug)]
pub struct File<'a> {
    path: PathBuf,
    opts: &'a Options,
    model: Option<Text>,
    /// Each index's synthetic UUID.
    uuids: Vec<Text>,
    /// The layout the first read found.
    layout: Option<Layout>,
    /// Whether a row's time depended on the rows before it (a time of day,
    /// a counter's first value).
    sequential: bool,
}

/// Opens the log at `path` (checking `--model`).
pub fn open<'a>(path: &Path, opts: &'a Options) -> Result<File<'a>, ImportError> {
    if let Some(model) = &opts.model {
        ranges::GPU_MODEL_TEXT
            .check(model)
            .map_err(|message| ImportError::Input { what: "--model".into(), message })?;
    }
    Ok(File {
        path: path.to_path_buf(),
        opts,
        model: opts.model.as_deref().map(Text::from),
        uuids: Vec::new(),
        layout: None,
        sequential: false,
    })
}

/// Reads the whole file at `path`, with its rows' intervals, as
/// [`super::stream`] reads a batch of every day. On the first row that
/// cannot be imported, returns [`ImportError::Row`] naming its line and
/// field (`gpu1 power.draw`).
pub fn read(path: &Path, opts: &Options, progress: &dyn Fn(u64)) -> Result<HostRows, ImportError> {
    let mut files: Vec<Box<dyn Scan + '_>> = vec![Box::new(open(path, opts)?)];
    let survey = stream::survey(&mut files, progress)?;
    stream::read_batch(&mut files, (i64::MIN, i64::MAX), opts.interval_ms, &survey)
}

/// `17:26:50` (or with a fraction), a time of day.
fn time_of_day(raw: &str) -> Option<chrono::NaiveTime> {
    chrono::NaiveTime::parse_from_str(raw, "%H:%M:%S%.f").ok()
}

impl File<'_> {
    /// The synthetic UUID of GPU `index`, one copy shared by its rows.
    fn uuid(&mut self, index: i32) -> Text {
        let i = usize::try_from(index).unwrap_or(0);
        while self.uuids.len() <= i {
            let next = i32::try_from(self.uuids.len()).unwrap_or(i32::MAX);
            self.uuids.push(synthetic_uuid(&self.opts.host, next));
        }
        self.uuids[i].clone()
    }

    /// A row's time (ms): `time.time()` seconds; a time of day from
    /// `--date` on; or seconds from an arbitrary start (`perf_counter()`,
    /// under 10⁹) counted from `--start`.
    fn time(&mut self, raw: &str, days: &mut units::Days, first: &mut Option<f64>) -> Result<i64, String> {
        if let Some(time) = time_of_day(raw) {
            self.sequential = true;
            let Some(date) = self.opts.date else {
                return Err(format!(
                    "{raw:?} is a time of day without a date: give the day the log starts with --date YYYY-MM-DD"
                ));
            };
            let naive = days.date_of(date, time).and_time(time);
            let tz = self.opts.tz;
            let ts = chrono::TimeZone::from_local_datetime(&tz, &naive)
                .earliest()
                .map(|t| t.timestamp_millis())
                .ok_or_else(|| format!("{raw:?} does not exist in {tz} (a daylight-saving gap)"))?;
            return ranges::check_ts(ts, raw);
        }
        let secs: f64 = raw
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s < 1.0e11)
            .ok_or_else(|| format!("{raw:?} is not a time.time() timestamp"))?;
        if secs >= 1.0e9 {
            return ranges::check_ts((secs * 1_000.0).round() as i64, raw);
        }
        let Some(start) = self.opts.start_ms else {
            return Err(format!(
                "{raw:?} is not a time.time() timestamp but seconds from an arbitrary start (as \
                 time.perf_counter() gives): give the wall time of the first row with --start"
            ));
        };
        self.sequential = true;
        let origin = *first.get_or_insert(secs);
        ranges::check_ts(start + ((secs - origin) * 1_000.0).round() as i64, raw)
    }
}

impl Scan for File<'_> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn seekable(&self) -> bool {
        !self.sequential
    }

    fn scan(
        &mut self,
        from: Option<At>,
        progress: &dyn Fn(u64),
        emit: &mut Emit<'_>,
    ) -> Result<(), ImportError> {
        let path = self.path.clone();
        let mut reader = open_csv(&path)?;
        if let Some(at) = from {
            seek_csv(&mut reader, &path, (at.line, at.byte))?;
        }
        let err = |line: u64, field: String, message: String| ImportError::Row {
            path: path.clone(),
            line,
            field,
            message,
        };
        let mut record = csv::StringRecord::new();
        let mut n = 0u64;
        // A read from a record goes on with the layout the first read found.
        let mut layout: Option<Layout> = if from.is_some() { self.layout.clone() } else { None };
        let mut days = units::Days::default();
        let mut first_count: Option<f64> = None;
        let mut stop = false;
        while !stop && reader.read_record(&mut record).map_err(|e| csv_error(&path, e))? {
            let at = At {
                line: record.position().map_or(0, csv::Position::line),
                byte: record.position().map_or(0, csv::Position::byte),
            };
            let line = at.line;
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(at.byte);
            }
            let raw_ts = record.get(0).unwrap_or("");
            let layout = match &layout {
                Some(l) => l,
                None if raw_ts.parse::<f64>().is_ok() || time_of_day(raw_ts).is_some() => {
                    self.layout = Some(Layout::Guide);
                    layout.insert(Layout::Guide)
                }
                None => {
                    // A header: one power column per GPU, or nothing known.
                    let columns: Vec<(usize, i32)> = record
                        .iter()
                        .enumerate()
                        .filter_map(|(k, c)| power_column(c).map(|i| (k, i)))
                        .collect();
                    if columns.is_empty() {
                        let m = format!(
                            "{:?} is neither the seed guide's logger (no header; a time, then \
                             util%|mem%|MiB|W per GPU) nor a log of one power column per GPU \
                             (Timestamp,GPU_0_power_w,…)",
                            record.iter().collect::<Vec<_>>().join(",")
                        );
                        return Err(err(line, "header".into(), m));
                    }
                    layout = Some(Layout::Wide(columns));
                    self.layout.clone_from(&layout);
                    continue;
                }
            };
            let ts =
                self.time(raw_ts, &mut days, &mut first_count).map_err(|m| err(line, "time".into(), m))?;
            let layout = layout.clone();
            if record.len() < 2 {
                return Err(err(line, "gpu0".into(), "no GPU field after the time".into()));
            }
            let wide = match layout {
                Layout::Guide => None,
                Layout::Wide(columns) => Some(columns),
            };
            if let Some(columns) = wide {
                for (k, index) in columns {
                    let raw = record.get(k).unwrap_or("");
                    let field = format!("GPU_{index}_power_w");
                    let power = units::parse(raw, Quantity::Power, Some("W"))
                        .map_err(|m| err(line, field.clone(), m))?
                        .map(|v| ranges::POWER_MW.i32(v, raw).map_err(|m| err(line, field.clone(), m)))
                        .transpose()?;
                    ranges::GPU_INDEX
                        .check(f64::from(index), &field)
                        .map_err(|m| err(line, field.clone(), m))?;
                    let uuid = self.uuid(index);
                    stop |= !emit(
                        at,
                        Row::Gpu(GpuSample {
                            ts,
                            gpu_uuid: uuid,
                            gpu_index: index,
                            gpu_model: self.model.clone(),
                            power_mw: power,
                            ..GpuSample::default()
                        }),
                    )?;
                }
                continue;
            }
            for (i, field) in record.iter().skip(1).enumerate() {
                let index = i32::try_from(i).unwrap_or(i32::MAX);
                let parts: Vec<&str> = field.split('|').collect();
                if parts.len() != PARTS.len() {
                    return Err(err(
                        line,
                        format!("gpu{i}"),
                        format!("{field:?} is not util%|mem%|MiB|W ({} parts, expected 4)", parts.len()),
                    ));
                }
                if ranges::GPU_INDEX.check(f64::from(index), &format!("gpu{i}")).is_err() {
                    return Err(err(line, format!("gpu{i}"), ranges::GPU_INDEX.out_of_range(&i.to_string())));
                }
                // Each value in the schema's unit, checked against its range
                // (so every one fits its column).
                let mut values = [None; 4];
                for ((value, raw), (name, quantity, range)) in values.iter_mut().zip(&parts).zip(PARTS) {
                    let named = |m| err(line, format!("gpu{i} {name}"), m);
                    *value = units::parse(raw, quantity, None)
                        .map_err(named)?
                        .map(|v| range.check(v, raw).map_err(named))
                        .transpose()?
                        .map(f64::round);
                }
                let [util, mem, used, power] = values;
                let uuid = self.uuid(index);
                stop |= !emit(
                    at,
                    Row::Gpu(GpuSample {
                        ts,
                        gpu_uuid: uuid,
                        gpu_index: index,
                        gpu_model: self.model.clone(),
                        gpu_util_pct: util.map(|v| v as i32),
                        mem_util_pct: mem.map(|v| v as i32),
                        fb_used_bytes: used.map(|v| v as i64),
                        power_mw: power.map(|v| v as i32),
                        ..GpuSample::default()
                    }),
                )?;
            }
        }
        if n == 0 {
            return Err(ImportError::Input {
                what: path.display().to_string(),
                message: "no samples in the file".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> Options {
        Options {
            host: "h".into(),
            interval_ms: None,
            model: None,
            date: None,
            tz: chrono_tz::Tz::UTC,
            start_ms: None,
        }
    }

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("log.csv");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    /// 2026-11-02 09:00 UTC.
    const AT: i64 = 1_793_610_000_000;

    #[test]
    fn one_power_column_per_gpu_counted_from_start() {
        // As vLLM's NvmlPowerMonitor writes it with Python's csv.writer: a
        // header of Timestamp and two columns per GPU, time.perf_counter()
        // seconds, watts as floats, the graphics clock in MHz.
        let (_dir, path) = write(
            "Timestamp,GPU_0_power_w,GPU_0_freq_mhz,GPU_1_power_w,GPU_1_freq_mhz\r\n\
             8123.5,71.25,1410,300.5,1980\r\n\
             8123.6,72.0,1410,301.0,1980\r\n\
             8123.7,73.5,1410,299.5,1980\r\n",
        );
        let error = read(&path, &options(), &|_| {}).expect_err("no --start").to_string();
        assert!(error.contains("--start") && error.contains("perf_counter"), "{error}");
        let rows = read(&path, &Options { start_ms: Some(AT), ..options() }, &|_| {}).expect("reads");
        assert_eq!(rows.gpus.len(), 6);
        let of = |i: i32| -> Vec<(i64, Option<i32>)> {
            rows.gpus.iter().filter(|g| g.gpu_index == i).map(|g| (g.ts, g.power_mw)).collect()
        };
        assert_eq!(of(0), [(AT, Some(71_250)), (AT + 100, Some(72_000)), (AT + 200, Some(73_500))]);
        assert_eq!(of(1)[2], (AT + 200, Some(299_500)));
        assert!(rows.gpus.iter().all(|g| g.interval_ms == 100 && g.gpu_util_pct.is_none()));
        assert_eq!(rows.gpus[1].gpu_uuid, synthetic_uuid("h", 1));
        let (_dir, path) = write("when,watts\n1,2\n");
        let error = read(&path, &options(), &|_| {}).expect_err("unknown").to_string();
        assert!(error.contains("GPU_0_power_w"), "{error}");
    }

    #[test]
    fn the_guides_layout_with_a_time_of_day_takes_date_and_zone() {
        let (_dir, path) = write("23:59:30, 3%|5%|512MiB|38.2W\n00:00:00, 4%|5%|512MiB|40W\n");
        let error = read(&path, &options(), &|_| {}).expect_err("no date").to_string();
        assert!(error.contains("--date"), "{error}");
        let opts = Options {
            date: chrono::NaiveDate::from_ymd_opt(2026, 11, 1),
            tz: chrono_tz::Europe::Berlin,
            ..options()
        };
        let rows = read(&path, &opts, &|_| {}).expect("reads");
        // 00:00 on 2 November in Berlin (UTC+1) is 23:00 UTC on the 1st.
        let midnight = chrono::DateTime::parse_from_rfc3339("2026-11-01T23:00:00Z").expect("a time");
        assert_eq!(rows.gpus[1].ts, midnight.timestamp_millis());
        assert_eq!(rows.gpus[1].ts - rows.gpus[0].ts, 30_000);
        assert_eq!(rows.gpus[0].power_mw, Some(38_200));
    }
}
