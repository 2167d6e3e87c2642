//! apron's tables: the Arrow schema of every table, its columns and units, the
//! Parquet writer settings, the schema version stored in each file, the
//! on-disk layout (its paths, [`folders`] walking its partitions, the
//! [`time`] units). The write-ahead log's format is `apron_store::wal::format`'s,
//! beside its writer and its reader.
//!
//! This crate owns *what* is stored and *where*; the recorder owns *when*
//! (ticks, rotation) and the analysis crate owns *how it is read*.
//!
//! Conventions, shared by every table:
//! - a column name carries its unit (`power_mw`, `fb_used_bytes`);
//! - a metric the source could not give is null, never 0 (null = unknown,
//!   0 = measured zero), so every metric field is an `Option`;
//! - timestamps are milliseconds since the Unix epoch, stored as
//!   `Timestamp(Millisecond, "UTC")`;
//! - integers are signed (`Int32`/`Int64`) so every engine reads them alike.

pub mod alloc_minutes;
pub mod folders;
pub mod gpu_events;
pub mod gpu_minutes;
pub mod gpu_samples;
pub mod k8s_labels;
pub mod minute_state;
pub mod parquet_props;
pub mod paths;
pub mod proc_minutes;
pub mod proc_samples;
pub mod table;
pub mod test_pause;
pub mod time;
pub mod xid;

pub use alloc_minutes::{AllocMinute, AllocSample, Holder};
pub use gpu_events::GpuEvent;
pub use gpu_minutes::GpuMinute;
pub use gpu_samples::{GpuSample, Text};
pub use paths::{DataLayout, PathError};
pub use proc_minutes::ProcMinute;
pub use proc_samples::{ProcIdentity, ProcSample};
pub use table::Table;

/// The version of the table layouts, stored in every file's key-value
/// metadata under [`SCHEMA_VERSION_KEY`]. Bump it when a column changes
/// meaning or type; adding a nullable column does not need a bump.
pub const SCHEMA_VERSION: &str = "1";

/// Key-value metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "apron.schema_version";

/// Key-value metadata key holding the table name.
pub const TABLE_KEY: &str = "apron.table";

/// The Arrow type of every timestamp column: milliseconds, UTC.
pub fn ts_type() -> arrow::datatypes::DataType {
    arrow::datatypes::DataType::Timestamp(arrow::datatypes::TimeUnit::Millisecond, Some("UTC".into()))
}
