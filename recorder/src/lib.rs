//! apron's node agent, as a library: a recording run ([`record`]), the NVML
//! source and process identity, Slurm's word on jobs ([`slurm`]), the tick
//! loop, stop signals, the recorder's lock, and the data folder's
//! maintenance (compaction of closed days, then retention).
//!
//! What the writer and the readers share (the source trait, the simulated
//! fleet, the rolling writer, the WAL, rollups, recovery, bulk simulation)
//! is the `apron_store` crate's. `main.rs` only parses arguments and calls
//! into here. This crate never links DataFusion or plotters: it stays a
//! lean agent.

pub mod compact;
pub mod data_lock;
pub mod identity;
pub mod idle_now;
pub mod kubernetes;
pub mod lock;
pub mod maintenance;
pub mod maintenance_error;
pub mod metrics;
pub mod record;
pub mod retention;
pub mod ship;
pub mod slurm;
pub mod source;
pub mod stop_signal;
pub mod tick;
