//! `cost_buckets`: `minute_costs` summed over buckets of a few minutes up to
//! an hour, per GPU, state and owner: every figure the cost reports draw is
//! a sum over `minute_costs` at a bucket or coarser, so it reads the same
//! from these rows, and there are up to 60 times fewer of them.
//!
//! The columns are `minute_costs`' (without `pid` and `share`), `minute`
//! being the bucket's first minute; `seconds`, `energy_j` and `cost` are
//! sums, `util_pct` and `activity_pct` seconds-weighted means (null where
//! not known, and where the row's seconds are 0).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, DictionaryArray, Float64Array, Int32Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef, TimeUnit};

use super::cost_buckets_file::CostBucketsFile;
use super::minutes::State;
use super::read::Names;
use crate::error::SessionError;

/// What a row of `cost_buckets` is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    /// The bucket's first minute (column `minute`; ms since the epoch, UTC).
    pub minute: i64,
    /// The GPU (column `gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Its host (column `host`), as an interned id in [`Names`].
    pub host: u32,
    /// Its NVML index (column `gpu_index`).
    pub gpu_index: i32,
    /// Its model (column `gpu_model`), as an interned id in [`Names`]; `None`: unknown.
    pub gpu_model: Option<u32>,
    /// MIG: an instance's parent GPU (column `parent_gpu_uuid`), as an interned id in [`Names`]; `None`
    /// otherwise.
    pub parent_gpu_uuid: Option<u32>,
    /// MIG: an instance's profile (column `mig_profile`), as an interned id in [`Names`]; `None` otherwise.
    pub mig_profile: Option<u32>,
    /// The GPU-minutes' state (column `state`).
    pub state: State,
    /// The owner's team (column `team`), as an interned id in [`Names`].
    pub team: u32,
    /// The owner's user as shown (column `user`), as an interned id in [`Names`].
    pub user: u32,
}

/// The sums of a row.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sums {
    /// GPU-seconds (column `seconds`; s).
    pub seconds: f64,
    /// Energy (column `energy_j`; J).
    pub energy_j: f64,
    /// Cost (column `cost`; currency).
    pub cost: f64,
    util: f64,
    util_seconds: f64,
    activity: f64,
    activity_seconds: f64,
}

impl Sums {
    /// Adds `seconds` of a minute with these means.
    pub fn add(&mut self, seconds: f64, energy_j: f64, cost: f64, util: Option<f64>, activity: Option<f64>) {
        self.seconds += seconds;
        self.energy_j += energy_j;
        self.cost += cost;
        if let Some(u) = util {
            self.util += u * seconds;
            self.util_seconds += seconds;
        }
        if let Some(a) = activity {
            self.activity += a * seconds;
            self.activity_seconds += seconds;
        }
    }
}

/// The cube's rows so far, kept as columns of numbers.
#[derive(Debug, Default)]
pub struct CostBuckets {
    keys: Vec<Key>,
    sums: Vec<Sums>,
}

impl CostBuckets {
    /// Adds the rows of one GPU's bucket (no other rows have its key).
    pub fn extend(&mut self, rows: impl IntoIterator<Item = (Key, Sums)>) {
        for (k, s) in rows {
            self.keys.push(k);
            self.sums.push(s);
        }
    }

    /// The schema of the `cost_buckets` table: the batches [`CostBuckets::drain_into`] writes.
    pub fn schema() -> SchemaRef {
        let text = || DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        Arc::new(Schema::new(vec![
            Field::new("host", text(), false),
            Field::new("gpu_index", DataType::Int32, false),
            Field::new("gpu_uuid", text(), false),
            Field::new("gpu_model", text(), true),
            Field::new("minute", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
            Field::new("state", text(), false),
            Field::new("util_pct", DataType::Float64, true),
            Field::new("activity_pct", DataType::Float64, true),
            Field::new("team", text(), false),
            Field::new("user", text(), false),
            Field::new("seconds", DataType::Float64, false),
            Field::new("energy_j", DataType::Float64, false),
            Field::new("cost", DataType::Float64, false),
            Field::new("parent_gpu_uuid", text(), true),
            Field::new("mig_profile", text(), true),
        ]))
    }

    /// Writes the rows so far to `file`, in batches of at most `rows` rows,
    /// and empties `cost_buckets` (keeping its room). Text columns are
    /// dictionaries over `names`.
    pub fn drain_into(
        &mut self,
        names: &Names,
        rows: usize,
        file: &mut CostBucketsFile,
    ) -> Result<(), SessionError> {
        if self.keys.is_empty() {
            return Ok(());
        }
        let schema = Self::schema();
        let mut values: Vec<&str> = names.all().iter().map(String::as_str).collect();
        let state_base = values.len() as i32;
        values.extend(State::ALL.map(State::name));
        let values: ArrayRef = Arc::new(StringArray::from(values));
        let dict = |ids: Vec<Option<i32>>| -> Result<ArrayRef, SessionError> {
            let array = DictionaryArray::<Int32Type>::try_new(Int32Array::from(ids), Arc::clone(&values))
                .map_err(|source| SessionError::Execute { source: source.into() })?;
            Ok(Arc::new(array))
        };
        let id = |i: u32| i32::try_from(i).unwrap_or(i32::MAX);
        for (keys, sums) in self.keys.chunks(rows.max(1)).zip(self.sums.chunks(rows.max(1))) {
            let mean = |f: fn(&Sums) -> (f64, f64)| -> ArrayRef {
                Arc::new(Float64Array::from_iter(sums.iter().map(|s| {
                    let (sum, seconds) = f(s);
                    (seconds > 0.0).then(|| sum / seconds)
                })))
            };
            let columns: Vec<ArrayRef> = vec![
                dict(keys.iter().map(|k| Some(id(k.host))).collect())?,
                Arc::new(Int32Array::from_iter_values(keys.iter().map(|k| k.gpu_index))),
                dict(keys.iter().map(|k| Some(id(k.gpu_uuid))).collect())?,
                dict(keys.iter().map(|k| k.gpu_model.map(id)).collect())?,
                Arc::new(
                    TimestampMillisecondArray::from_iter_values(keys.iter().map(|k| k.minute))
                        .with_timezone("UTC"),
                ),
                dict(keys.iter().map(|k| Some(state_base + k.state as i32)).collect())?,
                mean(|s| (s.util, s.util_seconds)),
                mean(|s| (s.activity, s.activity_seconds)),
                dict(keys.iter().map(|k| Some(id(k.team))).collect())?,
                dict(keys.iter().map(|k| Some(id(k.user))).collect())?,
                Arc::new(Float64Array::from_iter_values(sums.iter().map(|s| s.seconds))),
                Arc::new(Float64Array::from_iter_values(sums.iter().map(|s| s.energy_j))),
                Arc::new(Float64Array::from_iter_values(sums.iter().map(|s| s.cost))),
                dict(keys.iter().map(|k| k.parent_gpu_uuid.map(id)).collect())?,
                dict(keys.iter().map(|k| k.mig_profile.map(id)).collect())?,
            ];
            let batch = RecordBatch::try_new(Arc::clone(&schema), columns)
                .map_err(|source| SessionError::Execute { source: source.into() })?;
            file.write(&batch)?;
        }
        self.keys.clear();
        self.sums.clear();
        Ok(())
    }
}
