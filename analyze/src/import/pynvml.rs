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
use super::stream::{self, Emit, Row, Scan};
use super::units::{self, Quantity};
use super::{HostRows, ImportError, csv_error, open_csv, synthetic_uuid};

/// How to read the file.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host the file was logged on.
    pub host: String,
    /// Each row's `interval_ms`, instead of the median spacing of samples.
    pub interval_ms: Option<i64>,
    /// The GPUs' model (`NVIDIA H100 80GB HBM3`), which the log lacks.
    pub model: Option<String>,
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

impl Scan for File<'_> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn scan(&mut self, progress: &dyn Fn(u64), emit: &mut Emit<'_>) -> Result<(), ImportError> {
        let path = self.path.clone();
        let mut reader = open_csv(&path)?;
        let err = |line: u64, field: String, message: String| ImportError::Row {
            path: path.clone(),
            line,
            field,
            message,
        };
        let mut record = csv::StringRecord::new();
        let mut n = 0u64;
        while reader.read_record(&mut record).map_err(|e| csv_error(&path, e))? {
            let line = record.position().map_or(0, csv::Position::line);
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(record.position().map_or(0, csv::Position::byte));
            }
            let raw_ts = record.get(0).unwrap_or("");
            let secs: f64 =
                raw_ts.parse().ok().filter(|s: &f64| s.is_finite() && *s > 0.0 && *s < 1.0e11).ok_or_else(
                    || err(line, "time".into(), format!("{raw_ts:?} is not a time.time() timestamp")),
                )?;
            let ts = ranges::check_ts((secs * 1_000.0).round() as i64, raw_ts)
                .map_err(|m| err(line, "time".into(), m))?;
            if record.len() < 2 {
                return Err(err(line, "gpu0".into(), "no GPU field after the time".into()));
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
                while self.uuids.len() <= i {
                    let next = i32::try_from(self.uuids.len()).unwrap_or(i32::MAX);
                    self.uuids.push(synthetic_uuid(&self.opts.host, next));
                }
                let [util, mem, used, power] = values;
                emit(
                    line,
                    Row::Gpu(GpuSample {
                        ts,
                        gpu_uuid: self.uuids[i].clone(),
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
