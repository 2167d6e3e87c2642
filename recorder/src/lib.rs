//! apron's node agent, as a library: sources (NVML, simulated fleet), the
//! tick loop, the rolling Parquet writer and the bulk simulator.
//!
//! `main.rs` only parses arguments and calls into here. This crate never
//! links DataFusion or plotters: it stays a lean agent.

pub mod identity;
pub mod rotate;
pub mod simulate;
pub mod source;
pub mod tick;
pub mod writer;
