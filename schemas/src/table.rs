//! The list of tables apron writes, with their names and schemas.

use std::fmt;

use arrow::datatypes::SchemaRef;

use crate::{alloc_minutes, gpu_events, gpu_minutes, gpu_samples, proc_minutes, proc_samples};

/// One of apron's tables. Its name is its folder under the data folder and
/// its SQL table name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per GPU per tick.
    GpuSamples,
    /// One row per (GPU, process) per tick.
    ProcSamples,
    /// Rollup: one row per GPU per UTC minute (per closed file; see
    /// [`crate::gpu_minutes`] for how to aggregate split minutes).
    GpuMinutes,
    /// Rollup: one row per (GPU, process) per UTC minute (per closed file).
    ProcMinutes,
    /// One row per (GPU, holder) per UTC minute (per closed file): the
    /// pod or Slurm job the cluster allocated the GPU to. Written when a
    /// file closes, from the ticks' allocations; kept as long as the rollups.
    AllocMinutes,
    /// One row per event of a GPU: XID errors, ECC errors, a GPU lost and
    /// back, error counters that moved. Written when a file closes, from
    /// the events received while it was open; kept as long as the rollups.
    GpuEvents,
}

impl Table {
    /// Every table, in the order they are written: the raw tables first,
    /// then their rollups.
    pub const ALL: [Table; 6] = [
        Table::GpuSamples,
        Table::ProcSamples,
        Table::GpuMinutes,
        Table::ProcMinutes,
        Table::AllocMinutes,
        Table::GpuEvents,
    ];

    /// The raw tables: what the sources sampled.
    pub const RAW: [Table; 2] = [Table::GpuSamples, Table::ProcSamples];

    /// The minute tables, written when a file closes and kept longer than
    /// the raw tables: the per-minute summaries of the raw tables (an
    /// accelerator, not the truth) and the allocations, which are recorded
    /// only per minute.
    pub const ROLLUPS: [Table; 3] = [Table::GpuMinutes, Table::ProcMinutes, Table::AllocMinutes];

    /// The table's name: its folder and its SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::GpuSamples => "gpu_samples",
            Table::ProcSamples => "proc_samples",
            Table::GpuMinutes => "gpu_minutes",
            Table::ProcMinutes => "proc_minutes",
            Table::AllocMinutes => "alloc_minutes",
            Table::GpuEvents => "gpu_events",
        }
    }

    /// Whether this is a rollup table (kept longer than raw data).
    pub fn is_rollup(self) -> bool {
        matches!(self, Table::GpuMinutes | Table::ProcMinutes | Table::AllocMinutes)
    }

    /// Whether the table is kept as long as the rollups rather than as
    /// long as the raw samples: the rollups, and the events (few rows, and
    /// a fault's history is what they are for).
    pub fn kept_long(self) -> bool {
        self.is_rollup() || self == Table::GpuEvents
    }

    /// The columns every file of the table is sorted by, in order (declared
    /// in each file's metadata as its sorting columns).
    pub fn sort_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples => &["gpu_uuid", "ts"],
            Table::ProcSamples => &["gpu_uuid", "ts", "pid"],
            Table::GpuMinutes => &["gpu_uuid", "minute"],
            Table::ProcMinutes => &["gpu_uuid", "minute", "pid", "proc_start"],
            Table::AllocMinutes => &["gpu_uuid", "minute"],
            Table::GpuEvents => &["gpu_uuid", "ts", "kind"],
        }
    }

    /// The table's Arrow schema as stored in its files. The partition
    /// columns `date` and `host` are not in the files: they come from the
    /// path.
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::GpuSamples => gpu_samples::schema(),
            Table::ProcSamples => proc_samples::schema(),
            Table::GpuMinutes => gpu_minutes::schema(),
            Table::ProcMinutes => proc_minutes::schema(),
            Table::AllocMinutes => alloc_minutes::schema(),
            Table::GpuEvents => gpu_events::schema(),
        }
    }

    /// The table with this name, if any.
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
