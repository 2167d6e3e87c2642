//! apron's node agent, as a library: sources (NVML, simulated fleet), the
//! tick loop, the write-ahead log and crash recovery, the rolling Parquet
//! writer and the bulk simulator, minute rollups, compaction of closed days
//! and retention.
//!
//! `main.rs` only parses arguments and calls into here. This crate never
//! links DataFusion or plotters: it stays a lean agent.

pub mod compact;
pub mod create;
pub mod identity;
pub mod lock;
pub mod maintenance;
pub mod recover;
pub mod retention;
pub mod rollup;
pub mod rotate;
pub mod simulate;
pub mod source;
pub mod stop_signal;
pub mod tick;
pub mod wal;
pub mod writer;
