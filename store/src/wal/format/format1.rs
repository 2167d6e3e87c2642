//! Reading segments of format 1, written by builds before `gpu_samples`
//! gained `gr_engine_active_pct` and the MIG columns.
//!
//! A recorder killed by a crash leaves segments for the next start; when
//! that start is an upgraded build, it must still turn them into Parquet.
//! postcard stores fields by position, so format 1's rows are decoded with
//! the row struct as it was and converted, the new columns null.

use serde::Deserialize;

use super::format2::ProcSampleV2;
use apron_schemas::{GpuSample, ProcSample, Text};

/// Format 1's version number.
pub(super) const VERSION: u32 = 1;

/// The row fingerprint of format 1's tables, as its builds wrote it.
pub(super) const FINGERPRINT: u32 = 0x1cf3_9817;

/// `gpu_samples`' row in format 1: the fields of [`GpuSample`] up to
/// `dram_active_pct`, in the same order.
#[derive(Deserialize)]
struct GpuSampleV1 {
    ts: i64,
    gpu_uuid: Text,
    gpu_index: i32,
    gpu_model: Option<Text>,
    interval_ms: i32,
    gpu_util_pct: Option<i32>,
    mem_util_pct: Option<i32>,
    fb_used_bytes: Option<i64>,
    fb_total_bytes: Option<i64>,
    power_mw: Option<i32>,
    power_limit_mw: Option<i32>,
    energy_mj: Option<i64>,
    sm_clock_mhz: Option<i32>,
    temp_c: Option<i32>,
    enc_util_pct: Option<i32>,
    dec_util_pct: Option<i32>,
    pcie_tx_bytes_per_s: Option<i64>,
    pcie_rx_bytes_per_s: Option<i64>,
    clock_event_reasons: Option<i64>,
    sm_active_pct: Option<f32>,
    sm_occupancy_pct: Option<f32>,
    tensor_active_pct: Option<f32>,
    dram_active_pct: Option<f32>,
}

impl From<GpuSampleV1> for GpuSample {
    fn from(r: GpuSampleV1) -> Self {
        GpuSample {
            ts: r.ts,
            gpu_uuid: r.gpu_uuid,
            gpu_index: r.gpu_index,
            gpu_model: r.gpu_model,
            interval_ms: r.interval_ms,
            gpu_util_pct: r.gpu_util_pct,
            mem_util_pct: r.mem_util_pct,
            fb_used_bytes: r.fb_used_bytes,
            fb_total_bytes: r.fb_total_bytes,
            power_mw: r.power_mw,
            power_limit_mw: r.power_limit_mw,
            energy_mj: r.energy_mj,
            sm_clock_mhz: r.sm_clock_mhz,
            temp_c: r.temp_c,
            enc_util_pct: r.enc_util_pct,
            dec_util_pct: r.dec_util_pct,
            pcie_tx_bytes_per_s: r.pcie_tx_bytes_per_s,
            pcie_rx_bytes_per_s: r.pcie_rx_bytes_per_s,
            clock_event_reasons: r.clock_event_reasons,
            sm_active_pct: r.sm_active_pct,
            sm_occupancy_pct: r.sm_occupancy_pct,
            tensor_active_pct: r.tensor_active_pct,
            dram_active_pct: r.dram_active_pct,
            gr_engine_active_pct: None,
            parent_gpu_uuid: None,
            mig_profile: None,
            mig_slices: None,
            mig_total_slices: None,
        }
    }
}

/// One tick frame of format 1 (`proc_samples`' row is format 2's).
#[derive(Deserialize)]
struct TickV1 {
    ts: i64,
    gpus: Vec<GpuSampleV1>,
    procs: Vec<ProcSampleV2>,
}

/// Decodes one tick frame's payload: its time and rows.
pub(super) fn decode_tick(payload: &[u8]) -> postcard::Result<(i64, Vec<GpuSample>, Vec<ProcSample>)> {
    let tick: TickV1 = postcard::from_bytes(payload)?;
    Ok((
        tick.ts,
        tick.gpus.into_iter().map(GpuSample::from).collect(),
        tick.procs.into_iter().map(ProcSample::from).collect(),
    ))
}
