//! Reading segments of format 6, written by builds before a frame carried
//! the GPUs' events (`gpu_events`).
//!
//! Format 6's rows are this build's rows; its tick frame ends after the
//! allocations. Its ticks decode with no events: none was recorded then.

use serde::Deserialize;

use apron_schemas::{AllocSample, GpuSample, ProcSample};

/// Format 6's version number.
pub(super) const VERSION: u32 = 6;

/// The row fingerprint of format 6's tables, as its builds wrote it.
pub(super) const FINGERPRINT: u32 = 0x464f_1eb6;

/// One tick frame of format 6.
#[derive(Deserialize)]
struct TickV6 {
    ts: i64,
    gpus: Vec<GpuSample>,
    procs: Vec<ProcSample>,
    allocs: Vec<AllocSample>,
}

/// Decodes one tick frame's payload: its time and rows.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<super::format5::Tick> {
    let tick: TickV6 = postcard::from_bytes(payload)?;
    Ok((tick.ts, tick.gpus, tick.procs, tick.allocs))
}
