//! The keys of the rows a host's partitions already hold, so an import
//! skips what an earlier import (or the recorder) wrote: (gpu_uuid, ts) of
//! `gpu_samples`, (gpu_uuid, pid, ts) of `proc_samples`.
//!
//! Every data file of the partition is read (the writer's files, compacted
//! files, other tools' files), two or three columns of it; a column of
//! another width or type is cast as the analysis session would. Rows still
//! in a recorder's WAL are not seen, which is why an import refuses a host
//! a live recorder holds ([`super::lock`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::path::Path;

use apron_schemas::paths::is_data_file_name;
use apron_schemas::{DataLayout, Table};
use chrono::DateTime;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type, Int64Type, TimeUnit};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::error::ImportError;

/// The keys already on disk for one host, over the days asked.
#[derive(Debug, Default)]
pub struct Keys {
    gpus: HashMap<String, HashSet<i64>>,
    procs: HashMap<String, HashSet<(i32, i64)>>,
}

impl Keys {
    /// The keys of `host`'s `gpu_samples` and `proc_samples` partitions of
    /// every UTC date of `timestamps` (ms since the epoch).
    pub fn read(
        layout: &DataLayout,
        host: &str,
        timestamps: impl Iterator<Item = i64>,
    ) -> Result<Keys, ImportError> {
        let dates: BTreeSet<_> =
            timestamps.filter_map(|ts| DateTime::from_timestamp_millis(ts).map(|t| t.date_naive())).collect();
        let mut keys = Keys::default();
        for date in dates {
            for table in [Table::GpuSamples, Table::ProcSamples] {
                let dir = layout.partition_dir(table, date, host);
                let Ok(entries) = std::fs::read_dir(&dir) else { continue };
                for entry in entries.filter_map(Result::ok) {
                    let name = entry.file_name();
                    if name.to_str().is_some_and(is_data_file_name) {
                        keys.add_file(table, &entry.path())?;
                    }
                }
            }
        }
        Ok(keys)
    }

    /// Whether a `gpu_samples` row of `uuid` at `ts` is there.
    pub fn has_gpu(&self, uuid: &str, ts: i64) -> bool {
        self.gpus.get(uuid).is_some_and(|s| s.contains(&ts))
    }

    /// Whether a `proc_samples` row of `uuid`, `pid` at `ts` is there.
    pub fn has_proc(&self, uuid: &str, pid: i32, ts: i64) -> bool {
        self.procs.get(uuid).is_some_and(|s| s.contains(&(pid, ts)))
    }

    fn add_file(&mut self, table: Table, path: &Path) -> Result<(), ImportError> {
        let err = |source: Box<dyn std::error::Error + Send + Sync>| ImportError::Existing {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(|e| err(Box::new(e)))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(Box::new(e)))?;
        let columns: &[&str] =
            if table == Table::GpuSamples { &["ts", "gpu_uuid"] } else { &["ts", "gpu_uuid", "pid"] };
        let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
        let reader = builder.with_projection(mask).build().map_err(|e| err(Box::new(e)))?;
        for batch in reader {
            let batch = batch.map_err(|e| err(Box::new(e)))?;
            self.add_batch(table, &batch).map_err(err)?;
        }
        Ok(())
    }

    fn add_batch(
        &mut self,
        table: Table,
        batch: &RecordBatch,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let column = |name: &str, to: &DataType| -> Result<_, Box<dyn std::error::Error + Send + Sync>> {
            let c = batch.column_by_name(name).ok_or_else(|| format!("no column {name}"))?;
            Ok(cast(c, to)?)
        };
        let ts = column("ts", &DataType::Timestamp(TimeUnit::Millisecond, None))?;
        let ts = cast(&ts, &DataType::Int64)?;
        let ts = ts.as_primitive::<Int64Type>();
        let uuid = column("gpu_uuid", &DataType::Utf8)?;
        let uuid = uuid.as_string::<i32>();
        if table == Table::GpuSamples {
            for i in 0..batch.num_rows() {
                if uuid.is_valid(i) && ts.is_valid(i) {
                    self.gpus.entry(uuid.value(i).to_owned()).or_default().insert(ts.value(i));
                }
            }
        } else {
            let pid = column("pid", &DataType::Int32)?;
            let pid = pid.as_primitive::<Int32Type>();
            for i in 0..batch.num_rows() {
                if uuid.is_valid(i) && ts.is_valid(i) && pid.is_valid(i) {
                    let set = self.procs.entry(uuid.value(i).to_owned()).or_default();
                    set.insert((pid.value(i), ts.value(i)));
                }
            }
        }
        Ok(())
    }
}
