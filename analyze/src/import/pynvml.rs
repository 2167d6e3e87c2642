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

use super::units::{self, Quantity};
use super::{HostRows, ImportError, open_csv, synthetic_uuid};

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

/// The four parts of a GPU's field, their names in errors, and units.
const PARTS: [(&str, Quantity); 4] = [
    ("utilization.gpu", Quantity::Percent),
    ("utilization.memory", Quantity::Percent),
    ("memory.used", Quantity::Memory),
    ("power.draw", Quantity::Power),
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
    let model = opts.model.as_deref().map(Text::from);
    let mut uuids: Vec<Text> = Vec::new();
    let mut rows = HostRows::default();
    let mut record = csv::StringRecord::new();
    let mut n = 0u64;
    while reader
        .read_record(&mut record)
        .map_err(|e| ImportError::Read { path: path.to_path_buf(), source: Box::new(e) })?
    {
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
        let ts = (secs * 1_000.0).round() as i64;
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
            let mut values = [None; 4];
            for ((value, raw), (name, quantity)) in values.iter_mut().zip(&parts).zip(PARTS) {
                *value =
                    units::parse(raw, quantity, None).map_err(|m| err(line, format!("gpu{i} {name}"), m))?;
            }
            while uuids.len() <= i {
                let next = i32::try_from(uuids.len()).unwrap_or(i32::MAX);
                uuids.push(synthetic_uuid(&opts.host, next));
            }
            let int = |v: Option<f64>, name: &str| -> Result<Option<i64>, ImportError> {
                v.map(|v| units::to_i64(v, field).map_err(|m| err(line, format!("gpu{i} {name}"), m)))
                    .transpose()
            };
            let [util, mem, used, power] = values;
            rows.gpus.push(GpuSample {
                ts,
                gpu_uuid: uuids[i].clone(),
                gpu_index: index,
                gpu_model: model.clone(),
                gpu_util_pct: int(util, PARTS[0].0)?.map(|v| v as i32),
                mem_util_pct: int(mem, PARTS[1].0)?.map(|v| v as i32),
                fb_used_bytes: int(used, PARTS[2].0)?,
                power_mw: int(power, PARTS[3].0)?
                    .map(|v| {
                        i32::try_from(v)
                            .map_err(|_| err(line, format!("gpu{i} power.draw"), "too large".into()))
                    })
                    .transpose()?,
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
