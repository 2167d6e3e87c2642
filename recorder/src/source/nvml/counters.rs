//! A GPU's error counters, read every [`COUNTERS_EVERY_MS`] on its sampling
//! lane (so a GPU whose calls hang stalls only its own counters), each
//! reading compared with the one before: a counter that moved is a
//! `gpu_events` row with its reading and its delta
//! ([`apron_schemas::gpu_events`]).
//!
//! Read: ECC errors (corrected and uncorrected, volatile and aggregate),
//! row remapping (Ampere and newer: rows remapped, a remapping pending or
//! failed), retired pages (before Ampere: pages retired for single- and
//! double-bit errors, a retirement pending), the PCIe replay counter, and
//! each active NVLink's error counters. A counter the GPU refuses (not
//! supported, not permitted, not in this driver) is not asked again; one
//! that fails otherwise (a lost GPU) is asked again at the next reading.

use apron_schemas::gpu_events::{
    ECC_CORRECTED, ECC_CORRECTED_AGGREGATE, ECC_UNCORRECTED, ECC_UNCORRECTED_AGGREGATE, NVLINK_ERRORS,
    PCIE_REPLAY, REMAP_FAILURE, REMAP_PENDING, REMAPPED_CORRECTABLE, REMAPPED_UNCORRECTABLE, RETIRED_DBE,
    RETIRED_PENDING, RETIRED_SBE,
};
use apron_schemas::{GpuEvent, Text};
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::raw::{self, is_device_failure};

/// How often a GPU's error counters are read.
pub const COUNTERS_EVERY_MS: i64 = 60_000;

/// Every this many readings, which NVLinks are active is read again.
const LINKS_READ_EVERY: u32 = 10;

/// NVML's most NVLinks per GPU (`NVML_NVLINK_MAX_LINKS`).
const MAX_LINKS: u32 = 18;

/// The NVLink error counters read, with the names `detail` gives them.
const LINK_COUNTERS: [(ErrorCounter, &str); 4] = [
    (ErrorCounter::DlReplay, "replay"),
    (ErrorCounter::DlRecovery, "recovery"),
    (ErrorCounter::DlCrcFlit, "crc_flit"),
    (ErrorCounter::DlCrcData, "crc_data"),
];

/// The groups of counters, each refused or not as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Ecc,
    Remap,
    Retired,
    Replay,
    NvLink,
}

const GROUPS: [Group; 5] = [Group::Ecc, Group::Remap, Group::Retired, Group::Replay, Group::NvLink];

/// One GPU's counters: the last reading of each, and what it refuses.
#[derive(Debug, Default)]
pub struct Counters {
    /// The GPU the readings are of: a new UUID at the same index starts
    /// afresh.
    uuid: Option<Text>,
    /// When they were last read, ms since the epoch.
    read_at: Option<i64>,
    /// Readings so far.
    readings: u32,
    /// (kind, detail) → last reading.
    last: Vec<(&'static str, Option<Text>, i64)>,
    /// Groups the GPU refused.
    refused: Vec<Group>,
    /// The active NVLinks, as last read.
    links: Vec<u32>,
}

impl Counters {
    /// Whether the counters are due at tick `ts_ms`: never read, a period
    /// since the last reading, or a clock that stepped back.
    pub fn due(&self, ts_ms: i64) -> bool {
        self.read_at.is_none_or(|at| ts_ms - at >= COUNTERS_EVERY_MS || ts_ms < at)
    }

    /// Reads the counters of GPU `device` (`uuid`, NVML index `index`) at
    /// `ts_ms`, appends a row to `out` for each that moved (or, at the
    /// first reading, is not 0) and one to `readings` for each read.
    pub fn read(
        &mut self,
        nvml: &Nvml,
        device: &Device<'static>,
        (uuid, index): (&Text, i32),
        ts_ms: i64,
        (out, readings): (&mut Vec<GpuEvent>, &mut Vec<GpuEvent>),
    ) {
        if self.uuid.as_ref() != Some(uuid) {
            *self = Counters { uuid: Some(uuid.clone()), ..Counters::default() };
        }
        self.read_at = Some(ts_ms);
        self.readings += 1;
        let started = std::time::Instant::now();
        let mut seen: Vec<(&'static str, Option<Text>, i64)> = Vec::new();
        for group in GROUPS {
            if self.refused.contains(&group) {
                continue;
            }
            match self.read_group(nvml, device, group, &mut seen) {
                Ok(()) => {}
                Err(e) if !is_device_failure(&e) => self.refused.push(group),
                // Lost, or another failure: asked again next time.
                Err(_) => {}
            }
        }
        if self.readings == 1 {
            let refused: Vec<String> = self.refused.iter().map(|g| format!("{g:?}").to_lowercase()).collect();
            // What a reading costs the GPU's lane, once a minute: the first
            // is the dearest (it also lists the NVLinks).
            let took_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            tracing::info!(gpu_index = index, gpu_uuid = %uuid, counters = seen.len(), refused = %refused.join(","),
                links = self.links.len(), took_us, "GPU error counters read (once a minute from now on)");
        }
        for (kind, detail, value) in seen {
            readings.push(GpuEvent {
                ts: ts_ms,
                gpu_uuid: uuid.clone(),
                gpu_index: index,
                kind: kind.into(),
                value: Some(value),
                detail: detail.clone(),
                ..GpuEvent::default()
            });
            let before = self.last.iter_mut().find(|(k, d, _)| *k == kind && *d == detail);
            let delta = match before {
                Some((_, _, last)) if *last == value => continue,
                Some((_, _, last)) => {
                    let delta = value - *last;
                    *last = value;
                    Some(delta)
                }
                None => {
                    self.last.push((kind, detail.clone(), value));
                    if value == 0 {
                        continue;
                    }
                    None
                }
            };
            out.push(GpuEvent {
                ts: ts_ms,
                gpu_uuid: uuid.clone(),
                gpu_index: index,
                kind: kind.into(),
                value: Some(value),
                delta,
                detail,
                ..GpuEvent::default()
            });
        }
    }

    fn read_group(
        &mut self,
        nvml: &Nvml,
        device: &Device<'static>,
        group: Group,
        seen: &mut Vec<(&'static str, Option<Text>, i64)>,
    ) -> Result<(), NvmlError> {
        let count = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        match group {
            Group::Ecc => {
                for (kind, error, counter) in [
                    (ECC_CORRECTED, MemoryError::Corrected, EccCounter::Volatile),
                    (ECC_UNCORRECTED, MemoryError::Uncorrected, EccCounter::Volatile),
                    (ECC_CORRECTED_AGGREGATE, MemoryError::Corrected, EccCounter::Aggregate),
                    (ECC_UNCORRECTED_AGGREGATE, MemoryError::Uncorrected, EccCounter::Aggregate),
                ] {
                    seen.push((kind, None, count(device.total_ecc_errors(error, counter)?)));
                }
            }
            Group::Remap => {
                let [corr, unc, pending, failure] = raw::remapped_rows(nvml, device)?;
                for (kind, value) in [
                    (REMAPPED_CORRECTABLE, corr),
                    (REMAPPED_UNCORRECTABLE, unc),
                    (REMAP_PENDING, u32::from(pending != 0)),
                    (REMAP_FAILURE, u32::from(failure != 0)),
                ] {
                    seen.push((kind, None, i64::from(value)));
                }
            }
            Group::Retired => {
                let sbe = device.retired_pages(RetirementCause::MultipleSingleBitEccErrors)?.len();
                let dbe = device.retired_pages(RetirementCause::DoubleBitEccError)?.len();
                let pending = device.are_pages_pending_retired()?;
                seen.push((RETIRED_SBE, None, count(sbe as u64)));
                seen.push((RETIRED_DBE, None, count(dbe as u64)));
                seen.push((RETIRED_PENDING, None, i64::from(pending)));
            }
            Group::Replay => seen.push((PCIE_REPLAY, None, i64::from(device.pcie_replay_counter()?))),
            Group::NvLink => {
                if self.readings % LINKS_READ_EVERY == 1 {
                    self.links.clear();
                    for link in 0..MAX_LINKS {
                        match device.link_wrapper_for(link).is_active() {
                            Ok(true) => self.links.push(link),
                            Ok(false) => {}
                            // Past the GPU's last link.
                            Err(NvmlError::InvalidArg) => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
                for &link in &self.links {
                    let wrapper = device.link_wrapper_for(link);
                    for (counter, name) in LINK_COUNTERS {
                        let value = count(wrapper.error_counter(counter)?);
                        seen.push((NVLINK_ERRORS, Some(format!("link {link} {name}").into()), value));
                    }
                }
            }
        }
        Ok(())
    }
}
