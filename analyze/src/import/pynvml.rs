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

use std::path::Path;

use apron_schemas::{GpuSample, Text};

use super::ranges::{self, Range};
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

/// Reads the file at `path`. `progress(bytes)` is called with the bytes
/// read so far now and then. On the first row that cannot be imported,
/// returns [`ImportError::Row`] naming its line and field (`gpu1
/// power.draw`).
pub fn read(path: &Path, opts: &Options, progress: &dyn Fn(u64)) -> Result<HostRows, ImportError> {
    let mut reader = open_csv(path)?;
    let err = |line: u64, field: String, message: String| ImportError::Row {
        path: path.to_path_buf(),
        line,
        field,
        message,
    };
    if let Some(model) = &opts.model {
        ranges::GPU_MODEL_TEXT
            .check(model)
            .map_err(|message| ImportError::Input { what: "--model".into(), message })?;
    }
    let model = opts.model.as_deref().map(Text::from);
    let mut uuids: Vec<Text> = Vec::new();
    let mut rows = HostRows::default();
    let mut record = csv::StringRecord::new();
    let mut n = 0u64;
    while reader.read_record(&mut record).map_err(|e| csv_error(path, e))? {
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
            while uuids.len() <= i {
                let next = i32::try_from(uuids.len()).unwrap_or(i32::MAX);
                uuids.push(synthetic_uuid(&opts.host, next));
            }
            let [util, mem, used, power] = values;
            rows.gpus.push(GpuSample {
                ts,
                gpu_uuid: uuids[i].clone(),
                gpu_index: index,
                gpu_model: model.clone(),
                gpu_util_pct: util.map(|v| v as i32),
                mem_util_pct: mem.map(|v| v as i32),
                fb_used_bytes: used.map(|v| v as i64),
                power_mw: power.map(|v| v as i32),
                ..GpuSample::default()
            });
        }
    }
    if rows.gpus.is_empty() {
        return Err(ImportError::Input {
            what: path.display().to_string(),
            message: "no samples in the file".into(),
        });
    }
    super::interval::set_intervals(path, &mut rows, opts.interval_ms)?;
    Ok(rows)
}
