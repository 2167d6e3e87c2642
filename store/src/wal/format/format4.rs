//! Reading segments of format 4, written by builds before a tick frame
//! carried the cluster's allocations (`alloc_minutes`).
//!
//! Format 4's rows are format 5's ([`super::format5`]); its tick frame
//! ends after the process rows. Its ticks decode with no allocations: the
//! GPUs a cluster allocated in those ticks were not recorded.

use serde::Deserialize;

use apron_schemas::{GpuSample, ProcSample};

use super::format5::ProcSampleV5;

/// Format 4's version number.
pub(super) const VERSION: u32 = 4;

/// The row fingerprint of format 4's tables, as its builds wrote it.
pub(super) const FINGERPRINT: u32 = 0x53f5_a1ea;

/// One tick frame of format 4.
#[derive(Deserialize)]
struct TickV4 {
    ts: i64,
    gpus: Vec<GpuSample>,
    procs: Vec<ProcSampleV5>,
}

/// Decodes one tick frame's payload: its time and rows.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<(i64, Vec<GpuSample>, Vec<ProcSample>)> {
    let tick: TickV4 = postcard::from_bytes(payload)?;
    Ok((tick.ts, tick.gpus, tick.procs.into_iter().map(ProcSample::from).collect()))
}
