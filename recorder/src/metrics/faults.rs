//! Each GPU's faults as `/metrics` serves them, under dcgm-exporter's names
//! (`etc/default-counters.csv` and the DCGM fields it comments out): the
//! last XID (`DCGM_FI_DEV_XID_ERRORS`, labelled `err_code` and `err_msg` as
//! dcgm-exporter labels it), and the error counters as last read (ECC,
//! retired pages, remapped rows, PCIe replays, NVLink errors summed over the
//! links). A counter the recorder has not read (not supported, or not yet)
//! is absent, never 0.

use apron_schemas::gpu_events as kinds;
use apron_schemas::{GpuEvent, Text};

/// The dcgm-exporter name, type and help of each counter kind; NVLink's are
/// by the counter's name in `detail` (`link 1 crc_flit`).
pub const COUNTERS: [(&str, &str, &str, &str); 16] = [
    (
        kinds::ECC_CORRECTED,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "counter",
        "Total number of single-bit volatile ECC errors.",
    ),
    (
        kinds::ECC_UNCORRECTED,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
    ),
    (
        kinds::ECC_CORRECTED_AGGREGATE,
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "counter",
        "Total number of single-bit persistent ECC errors.",
    ),
    (
        kinds::ECC_UNCORRECTED_AGGREGATE,
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "counter",
        "Total number of double-bit persistent ECC errors.",
    ),
    (
        kinds::RETIRED_SBE,
        "DCGM_FI_DEV_RETIRED_SBE",
        "counter",
        "Total number of retired pages due to single-bit errors.",
    ),
    (
        kinds::RETIRED_DBE,
        "DCGM_FI_DEV_RETIRED_DBE",
        "counter",
        "Total number of retired pages due to double-bit errors.",
    ),
    (
        kinds::RETIRED_PENDING,
        "DCGM_FI_DEV_RETIRED_PENDING",
        "counter",
        "Total number of pages pending retirement.",
    ),
    (
        kinds::REMAPPED_UNCORRECTABLE,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    (
        kinds::REMAPPED_CORRECTABLE,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for correctable errors",
    ),
    (kinds::REMAP_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    (kinds::REMAP_PENDING, "DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending"),
    (kinds::PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    (
        "crc_flit",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    (
        "crc_data",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink data CRC errors.",
    ),
    ("replay", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries."),
    (
        "recovery",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink recovery errors.",
    ),
];

/// One GPU's faults as last seen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuFaults {
    /// Its UUID.
    pub gpu_uuid: Text,
    /// The last XID the driver reported since the recorder started.
    pub last_xid: Option<i32>,
    /// Per [`COUNTERS`] entry, its value as last read (`None`: not read).
    pub counters: [Option<i64>; COUNTERS.len()],
}

/// Every GPU's faults, and a version that changes when they do (so a tick
/// copies them into the snapshot only then).
#[derive(Debug, Clone, Default)]
pub struct FaultState {
    /// By GPU, in the order first seen.
    pub gpus: Vec<GpuFaults>,
    /// Bumped at each change.
    pub version: u64,
}

impl FaultState {
    fn gpu(&mut self, uuid: &Text) -> &mut GpuFaults {
        let i = match self.gpus.iter().position(|g| g.gpu_uuid == *uuid) {
            Some(i) => i,
            None => {
                self.gpus.push(GpuFaults { gpu_uuid: uuid.clone(), ..GpuFaults::default() });
                self.gpus.len() - 1
            }
        };
        &mut self.gpus[i]
    }

    /// Takes a tick's XIDs and counter readings.
    pub fn add(&mut self, events: &[GpuEvent], readings: &[GpuEvent]) {
        let mut changed = false;
        for e in events.iter().filter(|e| &*e.kind == kinds::XID) {
            if let Some(xid) = e.xid {
                self.gpu(&e.gpu_uuid).last_xid = Some(xid);
                changed = true;
            }
        }
        // A GPU's readings of one tick are all of its counters: its sums
        // over the NVLinks start afresh.
        let mut fresh: Vec<&Text> = Vec::new();
        for r in readings {
            let Some(value) = r.value else { continue };
            let key = match (&*r.kind, r.detail.as_deref()) {
                (kinds::NVLINK_ERRORS, Some(detail)) => detail.rsplit(' ').next().unwrap_or_default(),
                (kind, _) => kind,
            };
            let Some(at) = COUNTERS.iter().position(|(k, ..)| *k == key) else { continue };
            let is_link = &*r.kind == kinds::NVLINK_ERRORS;
            let first = !fresh.contains(&&r.gpu_uuid);
            let gpu = self.gpu(&r.gpu_uuid);
            if first {
                for (slot, (k, ..)) in gpu.counters.iter_mut().zip(COUNTERS) {
                    if ["crc_flit", "crc_data", "replay", "recovery"].contains(&k) {
                        *slot = None;
                    }
                }
            }
            let slot = &mut gpu.counters[at];
            *slot = Some(if is_link { slot.unwrap_or(0).saturating_add(value) } else { value });
            if first {
                fresh.push(&r.gpu_uuid);
            }
            changed = true;
        }
        if changed {
            self.version += 1;
        }
    }
}

/// dcgm-exporter's `err_msg` of XID `code` (its text for 0, "No Error";
/// else NVIDIA's catalogue's meaning, or "Unknown Error").
pub fn err_msg(code: i32) -> &'static str {
    if code == 0 {
        return "No Error";
    }
    u32::try_from(code).ok().and_then(apron_schemas::xid::xid).map_or("Unknown Error", |x| x.meaning.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(uuid: &str, kind: &str, detail: Option<&str>, value: i64) -> GpuEvent {
        GpuEvent {
            gpu_uuid: uuid.into(),
            kind: kind.into(),
            detail: detail.map(Into::into),
            value: Some(value),
            ..GpuEvent::default()
        }
    }

    #[test]
    fn xids_and_readings_make_each_gpus_state_and_links_are_summed() {
        let mut state = FaultState::default();
        let xid =
            GpuEvent { gpu_uuid: "GPU-a".into(), kind: "xid".into(), xid: Some(79), ..GpuEvent::default() };
        state.add(&[xid], &[]);
        assert_eq!((state.gpus[0].last_xid, state.version), (Some(79), 1));
        let readings = [
            reading("GPU-a", "ecc_uncorrected", None, 3),
            reading("GPU-a", "nvlink_errors", Some("link 0 crc_flit"), 2),
            reading("GPU-a", "nvlink_errors", Some("link 3 crc_flit"), 5),
            reading("GPU-b", "remap_pending", None, 1),
        ];
        state.add(&[], &readings);
        let at = |name: &str| COUNTERS.iter().position(|c| c.1 == name).expect("a counter");
        let a = &state.gpus[0];
        assert_eq!(a.counters[at("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")], Some(3));
        assert_eq!(a.counters[at("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")], Some(7));
        assert_eq!(a.counters[at("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")], None, "not read: absent");
        assert_eq!(state.gpus[1].counters[at("DCGM_FI_DEV_ROW_REMAP_PENDING")], Some(1));
        // The next reading replaces the sums, not adds to them.
        state.add(&[], &[reading("GPU-a", "nvlink_errors", Some("link 0 crc_flit"), 4)]);
        assert_eq!(state.gpus[0].counters[at("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")], Some(4));
        assert_eq!(state.version, 3);
        state.add(&[], &[]);
        assert_eq!(state.version, 3, "nothing new, nothing to copy");
        assert_eq!(
            (err_msg(0), err_msg(79), err_msg(100_000)),
            ("No Error", "GPU has fallen off the bus", "Unknown Error")
        );
    }
}
