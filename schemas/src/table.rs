//! The list of tables apron writes, with their names and schemas.

use std::fmt;

use arrow::datatypes::SchemaRef;

use crate::{gpu_samples, proc_samples};

/// One of apron's tables. Its name is its folder under the data folder and
/// its SQL table name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per GPU per tick.
    GpuSamples,
    /// One row per (GPU, process) per tick.
    ProcSamples,
}

impl Table {
    /// Every table, in the order they are written.
    pub const ALL: [Table; 2] = [Table::GpuSamples, Table::ProcSamples];

    /// The table's name: its folder and its SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::GpuSamples => "gpu_samples",
            Table::ProcSamples => "proc_samples",
        }
    }

    /// The table's Arrow schema (without the partition columns `date` and
    /// `host`, which are both in the rows and in the path).
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::GpuSamples => gpu_samples::schema(),
            Table::ProcSamples => proc_samples::schema(),
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
