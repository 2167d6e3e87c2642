//! What apron's writer and readers share, as a library: the [`source::Source`]
//! trait and the simulated fleet ([`source::sim`]), the rolling Parquet
//! writer ([`writer`], its rotation rule [`rotate`] and file creation
//! [`create`]), the write-ahead log ([`wal`], its format [`wal::format`]) and crash recovery
//! ([`recover`]), the minute rollups ([`rollup`]) and bulk simulation
//! ([`simulate`], which writes each file as a stream, [`file_stream`]),
//! and how both binaries keep credentials in URLs out of what they show
//! ([`redact`]).
//!
//! The recorder (NVML, the tick loop, signals, locks, maintenance) and the
//! analysis CLI (`apron`: the rollups of rows still in the WAL, `apron demo`)
//! both build on this crate; it links neither NVML, procfs and nix nor
//! DataFusion and plotters, so dependencies point one way:
//! `schemas` ← `store` ← `recorder`, `analyze`.

pub mod create;
pub mod durable;
pub mod error_chain;
pub mod file_stream;
pub mod recover;
pub mod redact;
pub mod remote;
pub mod rollup;
pub mod rotate;
pub mod simulate;
pub mod source;
pub mod wal;
pub mod write_error;
pub mod writer;
