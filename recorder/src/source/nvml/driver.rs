//! What the driver's version says about its NVML: which process-list call
//! and entry layout it has. Pure, so each version's answer is unit-tested
//! without a driver.
//!
//! The story (nvml.h at the 535 tags; nvitop PRs #79 and #89; go-nvml #75):
//! 535.43 to 535.86 fill 32-byte entries (an extra
//! `usedGpuCcProtectedMemory`) from `nvmlDevice*RunningProcesses_v3`, under
//! the same names as the 24-byte calls of every other version; 535.98
//! removed the `_v3` calls (the `_v2` ones, 24 bytes, remain); 535.104
//! restored `_v3` with 24-byte entries.

/// How the process lists of this driver are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessCall {
    /// `_v3`, 24-byte `nvmlProcessInfo_t` entries: every driver but the
    /// ones below.
    V3,
    /// `_v3` filling 32-byte entries: 535.43 to 535.86.
    V3Wide,
    /// `_v2`, 24-byte entries: 535.98, which has no `_v3` process calls.
    V2,
}

impl ProcessCall {
    /// The call for driver `version` (`"535.54.03"`). A version that does
    /// not parse gets the standard call.
    pub fn for_driver(version: &str) -> ProcessCall {
        let mut parts = version.trim().split('.').map(|p| p.parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(535), Some(minor)) if (43..=86).contains(&minor) => ProcessCall::V3Wide,
            (Some(535), Some(minor)) if (87..104).contains(&minor) => ProcessCall::V2,
            _ => ProcessCall::V3,
        }
    }

    /// The bytes of one entry this call fills.
    pub fn entry_size(self) -> usize {
        match self {
            ProcessCall::V3 | ProcessCall::V2 => 24,
            ProcessCall::V3Wide => 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r535_versions_pick_their_layout() {
        for v in ["535.43.02", "535.54.03", "535.86.05", "535.86.10"] {
            assert_eq!(ProcessCall::for_driver(v), ProcessCall::V3Wide, "{v}");
        }
        for v in ["535.98", "535.98.01"] {
            assert_eq!(ProcessCall::for_driver(v), ProcessCall::V2, "{v}");
        }
        for v in ["535.104.05", "535.183.01", "535.42.00", "530.30.02", "550.54.15", "580.82.07", "", "x"] {
            assert_eq!(ProcessCall::for_driver(v), ProcessCall::V3, "{v}");
        }
        assert_eq!(ProcessCall::V3Wide.entry_size(), 32);
        assert_eq!(ProcessCall::V2.entry_size(), 24);
    }
}
