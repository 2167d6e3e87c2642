//! What the rollups hold in the period, gathered on the ledger's pass so a
//! cost report need not read them again for its header: the figures of
//! `queries/coverage.sql` (first and last minute, GPUs, recorded seconds,
//! models) and `queries/gpu_models.sql` (GPUs and hours per model), from
//! the same rows.

use apron_schemas::time::HOUR_SECS;

use super::map::HashMap;
use super::read::{GpuPart, Names};

/// The row of `queries/coverage.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct CoverageRow {
    /// First and last minute with a rollup row, milliseconds since the epoch.
    pub first_minute: i64,
    /// Last minute.
    pub last_minute: i64,
    /// GPUs recorded.
    pub gpus: i64,
    /// Recorded seconds.
    pub recorded_seconds: f64,
    /// The models recorded, sorted.
    pub models: Vec<String>,
}

/// The recorded GPU-hours of one GPU model in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelHours {
    /// The model as NVML names it; `None` when it was not recorded.
    pub model: Option<String>,
    /// GPUs of it recorded.
    pub gpus: i64,
    /// Their recorded GPU-hours.
    pub gpu_hours: f64,
}

/// What the rollups hold in a period: the row of `queries/coverage.sql`
/// and the rows of `queries/gpu_models.sql`, as the ledger's pass finds
/// them ([`CoverageTally`]) or the queries give them (`report::header`).
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerCoverage {
    /// First and last minute, GPUs, recorded seconds, models.
    pub row: CoverageRow,
    /// GPUs and hours per model, by model, the unrecorded model last.
    pub model_hours: Vec<ModelHours>,
}

/// What the rollups hold, so far.
#[derive(Debug, Default)]
pub struct CoverageTally {
    /// The first minute recorded (ms since the epoch, UTC); `None`: none yet.
    pub first_minute: Option<i64>,
    /// The last minute recorded (ms since the epoch, UTC); `None`: none yet.
    pub last_minute: Option<i64>,
    /// Recorded seconds summed over every GPU (s).
    pub recorded_seconds: f64,
    gpus: HashMap<u32, ()>,
    /// Recorded seconds per model (few: a list).
    model_seconds: Vec<(Option<u32>, f64)>,
    /// The GPUs seen with each model.
    model_gpus: HashMap<(Option<u32>, u32), ()>,
}

impl CoverageTally {
    /// Notes a day's rows (in any order).
    pub fn parts(&mut self, parts: &[GpuPart]) {
        let mut last: Option<(Option<u32>, u32)> = None;
        // A MIG instance is part of its parent, which is counted: GPUs and
        // GPU-hours are the hardware's.
        for p in parts.iter().filter(|p| p.parent_gpu_uuid.is_none()) {
            self.first_minute = Some(self.first_minute.map_or(p.minute, |m| m.min(p.minute)));
            self.last_minute = Some(self.last_minute.map_or(p.minute, |m| m.max(p.minute)));
            self.recorded_seconds += p.seconds;
            match self.model_seconds.iter_mut().find(|(m, _)| *m == p.gpu_model) {
                Some((_, s)) => *s += p.seconds,
                None => self.model_seconds.push((p.gpu_model, p.seconds)),
            }
            // A GPU's rows come together: look it up once a run.
            if last != Some((p.gpu_model, p.gpu_uuid)) {
                self.gpus.insert(p.gpu_uuid, ());
                self.model_gpus.insert((p.gpu_model, p.gpu_uuid), ());
                last = Some((p.gpu_model, p.gpu_uuid));
            }
        }
    }

    /// GPUs seen.
    pub fn gpus(&self) -> i64 {
        i64::try_from(self.gpus.len()).unwrap_or(i64::MAX)
    }

    /// The models seen, sorted, as `coverage.sql`'s `models` (without the unrecorded one).
    pub fn models(&self, names: &Names) -> Vec<String> {
        let mut models: Vec<String> =
            self.model_seconds.iter().filter_map(|(m, _)| m.map(|m| names.name(m).to_owned())).collect();
        models.sort();
        models
    }

    /// GPUs and hours per model, by model, the unrecorded model last.
    pub fn model_hours(&self, names: &Names) -> Vec<ModelHours> {
        let mut out: Vec<ModelHours> = self
            .model_seconds
            .iter()
            .map(|&(model, seconds)| ModelHours {
                model: model.map(|m| names.name(m).to_owned()),
                gpus: i64::try_from(self.model_gpus.keys().filter(|(m, _)| *m == model).count())
                    .unwrap_or(i64::MAX),
                gpu_hours: seconds / HOUR_SECS as f64,
            })
            .collect();
        out.sort_by(|a, b| match (&a.model, &b.model) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        out
    }
}
