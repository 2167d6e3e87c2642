//! The range of every column an import writes: what NVML (and so the
//! recorder) can report, with room for hardware to come. A value outside it
//! is no measurement: an import refuses its row with the file, line and
//! field, as it refuses a value that is no number. This is the one place
//! those ranges are set; each parser turns a value into the schema's unit
//! ([`super::units`]) and checks it here.
//!
//! | column | range (schema unit) | why |
//! | --- | --- | --- |
//! | `ts` | 2000-01-01 to 2100-01-01 (UTC, end excluded) | no NVML log is older; a year 9999 is a broken clock |
//! | `interval_ms` | 1 ms to 1 day | an import's files span a UTC day |
//! | `gpu_index` | 0 to 1,023 | NVML indexes a host's GPUs from 0 |
//! | `gpu_util_pct`, `mem_util_pct`, `enc_util_pct`, `dec_util_pct` | 0 to 100 % | a share of time |
//! | `sm_active_pct`, `sm_occupancy_pct`, `tensor_active_pct`, `dram_active_pct`, `gr_engine_active_pct` | 0 to 100 % | GPM ratios × 100 |
//! | `fb_used_bytes`, `fb_total_bytes`, `used_mem_bytes` (and dcgm's free and reserved memory) | 0 to 64 TiB; used ≤ total | the largest GPU has 288 GB |
//! | `power_mw`, `power_limit_mw` | 0 to 10,000,000 mW (10 kW) | the largest board draws 2.7 kW |
//! | `energy_mj` | 0 to 10^17 mJ | 10 kW for 300 years since the driver loaded |
//! | `sm_clock_mhz` | 0 to 10,000 MHz | clocks run below 3 GHz |
//! | `temp_c` | 0 to 200 °C | NVML reports whole degrees, unsigned; GPUs shut down near 100 °C |
//! | `pcie_tx_bytes_per_s`, `pcie_rx_bytes_per_s` | 0 to 10^12 B/s | PCIe 6 ×16 moves 128 GB/s |
//! | `clock_event_reasons` | 0 to 2^53 | a bitmask; NVML's bits are below 2^16 |
//! | `pid` (nvidia-smi) | 1 to 4,194,304 | Linux's largest pid (2^22) |
//! | `gpu_uuid` | 1 to 128 bytes | NVML's UUIDs have 40 (a MIG one 44) |
//! | `gpu_model` | up to 96 bytes | NVML's name buffer |
//! | `comm` | up to 253 bytes | a pod's name (Kubernetes' longest); a process name is cut to 15 |
//! | `k8s_namespace` | up to 63 bytes | Kubernetes' longest |
//!
//! Text holds no control character (a newline in a GPU's name would forge
//! a line of every table printed). Floating-point values a rounding error
//! past a bound (a mean of ratios of 1 that comes out as 1.000…02) are read
//! as the bound.
//!
//! A line of a CSV log is at most [`MAX_LINE_BYTES`] long, and is refused
//! when it is longer, before more of it is read.

/// Longest line of a CSV log: a `--query-gpu` line with every field
/// nvidia-smi has is some 3 KB.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The values a numeric column can hold, in its schema unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The column (`power_mw`).
    pub column: &'static str,
    /// Least value.
    pub min: f64,
    /// Greatest value.
    pub max: f64,
    /// The schema unit, for messages (`mW`).
    pub unit: &'static str,
}

impl Range {
    /// `value` (in the schema unit) when it is in range (a value a rounding
    /// error past a bound is the bound), else the message saying so, which
    /// quotes `raw`, the value as the input wrote it.
    pub fn check(&self, value: f64, raw: &str) -> Result<f64, String> {
        let slack = (self.max - self.min) * 1e-9;
        if value >= self.min - slack && value <= self.max + slack {
            Ok(value.clamp(self.min, self.max))
        } else {
            Err(self.out_of_range(raw))
        }
    }

    /// The message for `raw`, a value out of this range.
    pub fn out_of_range(&self, raw: &str) -> String {
        format!(
            "{:?} is out of range: {} holds {} to {} {}",
            raw.trim(),
            self.column,
            plain(self.min),
            plain(self.max),
            self.unit
        )
        .trim_end()
        .to_owned()
    }

    /// [`Range::check`], rounded to an `i32` (every `i32` column's range
    /// fits one).
    pub fn i32(&self, value: f64, raw: &str) -> Result<i32, String> {
        Ok(self.check(value, raw)?.round() as i32)
    }

    /// [`Range::check`], rounded to an `i64`.
    pub fn i64(&self, value: f64, raw: &str) -> Result<i64, String> {
        Ok(self.check(value, raw)?.round() as i64)
    }
}

/// A bound as people write it: `10000000`, `0.5`, `1e17`.
fn plain(v: f64) -> String {
    if v.abs() >= 1e15 { format!("{v:e}") } else { format!("{v}") }
}

const fn range(column: &'static str, min: f64, max: f64, unit: &'static str) -> Range {
    Range { column, min, max, unit }
}

/// 2000-01-01T00:00:00Z, ms since the epoch.
const TS_FIRST_MS: f64 = 946_684_800_000.0;
/// 2100-01-01T00:00:00Z, ms since the epoch (excluded).
const TS_END_MS: f64 = 4_102_444_800_000.0;
/// 64 TiB.
const MEMORY_MAX: f64 = 70_368_744_177_664.0;
const PERCENT: f64 = 100.0;

/// `ts`, ms since the epoch (see [`check_ts`] for the end, which is excluded).
pub const TS: Range = range("ts", TS_FIRST_MS, TS_END_MS - 1.0, "ms since 1970");
/// `interval_ms`.
pub const INTERVAL_MS: Range = range("interval_ms", 1.0, 86_400_000.0, "ms");
/// `gpu_index`.
pub const GPU_INDEX: Range = range("gpu_index", 0.0, 1_023.0, "");
/// `gpu_util_pct`.
pub const GPU_UTIL_PCT: Range = range("gpu_util_pct", 0.0, PERCENT, "%");
/// `mem_util_pct`.
pub const MEM_UTIL_PCT: Range = range("mem_util_pct", 0.0, PERCENT, "%");
/// `enc_util_pct`.
pub const ENC_UTIL_PCT: Range = range("enc_util_pct", 0.0, PERCENT, "%");
/// `dec_util_pct`.
pub const DEC_UTIL_PCT: Range = range("dec_util_pct", 0.0, PERCENT, "%");
/// `sm_active_pct`.
pub const SM_ACTIVE_PCT: Range = range("sm_active_pct", 0.0, PERCENT, "%");
/// `sm_occupancy_pct`.
pub const SM_OCCUPANCY_PCT: Range = range("sm_occupancy_pct", 0.0, PERCENT, "%");
/// `tensor_active_pct`.
pub const TENSOR_ACTIVE_PCT: Range = range("tensor_active_pct", 0.0, PERCENT, "%");
/// `dram_active_pct`.
pub const DRAM_ACTIVE_PCT: Range = range("dram_active_pct", 0.0, PERCENT, "%");
/// `gr_engine_active_pct`.
pub const GR_ENGINE_ACTIVE_PCT: Range = range("gr_engine_active_pct", 0.0, PERCENT, "%");
/// `fb_used_bytes`.
pub const FB_USED_BYTES: Range = range("fb_used_bytes", 0.0, MEMORY_MAX, "bytes");
/// `fb_total_bytes`.
pub const FB_TOTAL_BYTES: Range = range("fb_total_bytes", 0.0, MEMORY_MAX, "bytes");
/// dcgm-exporter's free framebuffer memory, which goes into `fb_total_bytes`.
pub const FB_FREE_BYTES: Range = range("free memory", 0.0, MEMORY_MAX, "bytes");
/// dcgm-exporter's reserved framebuffer memory, which goes into `fb_total_bytes`.
pub const FB_RESERVED_BYTES: Range = range("reserved memory", 0.0, MEMORY_MAX, "bytes");
/// `used_mem_bytes` of `proc_samples`.
pub const USED_MEM_BYTES: Range = range("used_mem_bytes", 0.0, MEMORY_MAX, "bytes");
/// `power_mw`.
pub const POWER_MW: Range = range("power_mw", 0.0, 10_000_000.0, "mW");
/// `power_limit_mw`.
pub const POWER_LIMIT_MW: Range = range("power_limit_mw", 0.0, 10_000_000.0, "mW");
/// `energy_mj`.
pub const ENERGY_MJ: Range = range("energy_mj", 0.0, 1e17, "mJ");
/// `sm_clock_mhz`.
pub const SM_CLOCK_MHZ: Range = range("sm_clock_mhz", 0.0, 10_000.0, "MHz");
/// `temp_c`.
pub const TEMP_C: Range = range("temp_c", 0.0, 200.0, "°C");
/// `pcie_tx_bytes_per_s`.
pub const PCIE_TX_BYTES_PER_S: Range = range("pcie_tx_bytes_per_s", 0.0, 1e12, "bytes/s");
/// `pcie_rx_bytes_per_s`.
pub const PCIE_RX_BYTES_PER_S: Range = range("pcie_rx_bytes_per_s", 0.0, 1e12, "bytes/s");
/// `clock_event_reasons`.
pub const CLOCK_EVENT_REASONS: Range = range("clock_event_reasons", 0.0, 9_007_199_254_740_992.0, "");
/// `pid` of a process an nvidia-smi log names.
pub const PID: Range = range("pid", 1.0, 4_194_304.0, "");

/// Every numeric range, for the documentation's table and its test.
pub const ALL: [Range; 26] = [
    TS,
    INTERVAL_MS,
    GPU_INDEX,
    GPU_UTIL_PCT,
    MEM_UTIL_PCT,
    ENC_UTIL_PCT,
    DEC_UTIL_PCT,
    SM_ACTIVE_PCT,
    SM_OCCUPANCY_PCT,
    TENSOR_ACTIVE_PCT,
    DRAM_ACTIVE_PCT,
    GR_ENGINE_ACTIVE_PCT,
    FB_USED_BYTES,
    FB_TOTAL_BYTES,
    FB_FREE_BYTES,
    FB_RESERVED_BYTES,
    USED_MEM_BYTES,
    POWER_MW,
    POWER_LIMIT_MW,
    ENERGY_MJ,
    SM_CLOCK_MHZ,
    TEMP_C,
    PCIE_TX_BYTES_PER_S,
    PCIE_RX_BYTES_PER_S,
    CLOCK_EVENT_REASONS,
    PID,
];

/// `ts` (ms since the epoch) when it is in [`TS`]'s range; the message
/// quotes `raw`, the time as the input wrote it.
pub fn check_ts(ts_ms: i64, raw: &str) -> Result<i64, String> {
    if (TS.min..=TS.max).contains(&(ts_ms as f64)) {
        Ok(ts_ms)
    } else {
        Err(format!("{:?} is out of range: ts is from 2000-01-01 to 2099-12-31 (UTC)", raw.trim()))
    }
}

/// How long a text column can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextLimit {
    /// The column.
    pub column: &'static str,
    /// Most bytes (UTF-8).
    pub max_bytes: usize,
}

impl TextLimit {
    /// `Ok` when `text` fits and holds no control character, else the
    /// message saying what is wrong (quoting at most its first 40
    /// characters, escaped).
    pub fn check(&self, text: &str) -> Result<(), String> {
        if text.len() > self.max_bytes {
            let head: String = text.chars().take(40).collect();
            return Err(format!(
                "{head:?}… is {} bytes long: {} holds at most {}",
                text.len(),
                self.column,
                self.max_bytes
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(format!("{text:?} holds a control character, which {} cannot hold", self.column));
        }
        Ok(())
    }
}

/// `gpu_uuid`.
pub const GPU_UUID_TEXT: TextLimit = TextLimit { column: "gpu_uuid", max_bytes: 128 };
/// `gpu_model`.
pub const GPU_MODEL_TEXT: TextLimit = TextLimit { column: "gpu_model", max_bytes: 96 };
/// `comm`: a process's name (cut to 15 bytes) or a pod's.
pub const COMM_TEXT: TextLimit = TextLimit { column: "comm", max_bytes: 253 };
/// `k8s_namespace`.
pub const K8S_NAMESPACE_TEXT: TextLimit = TextLimit { column: "k8s_namespace", max_bytes: 63 };
/// A pod's container, which goes into its synthetic pid.
pub const CONTAINER_TEXT: TextLimit = TextLimit { column: "container", max_bytes: 253 };

/// `Ok` when a row's memory in use is within its total (either unknown
/// passes), else the message saying so.
pub fn check_memory(used: Option<i64>, total: Option<i64>) -> Result<(), String> {
    match (used, total) {
        (Some(u), Some(t)) if u > t => {
            Err(format!("memory used ({u} bytes) is more than the GPU's memory in all ({t} bytes)"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_in_range_pass_and_others_say_the_range() {
        assert_eq!(POWER_MW.i32(300_000.0, "300 W"), Ok(300_000));
        assert_eq!(
            POWER_MW.i32(-500_000.0, "-500 W"),
            Err("\"-500 W\" is out of range: power_mw holds 0 to 10000000 mW".into())
        );
        assert!(POWER_MW.check(2e9, "2000000 W").is_err());
        assert!(TEMP_C.check(1e12, "1e12").is_err());
        assert!(SM_ACTIVE_PCT.check(5_500.0, "55").is_err());
        assert!(ENERGY_MJ.check(-1e30, "-1e30").is_err());
        assert!(GPU_UTIL_PCT.check(f64::NAN, "NaN").is_err());
        // A mean of ratios of 1 that rounding put a hair above 100.
        assert_eq!(SM_ACTIVE_PCT.check(100.000_000_000_000_03, "1"), Ok(100.0));
        assert_eq!(
            ENERGY_MJ.out_of_range("x"),
            "\"x\" is out of range: energy_mj holds 0 to 1e17 mJ".to_owned()
        );
        assert_eq!(GPU_INDEX.out_of_range("5000"), "\"5000\" is out of range: gpu_index holds 0 to 1023");
    }

    #[test]
    fn every_integer_range_fits_its_column() {
        for r in [
            INTERVAL_MS,
            GPU_INDEX,
            GPU_UTIL_PCT,
            MEM_UTIL_PCT,
            ENC_UTIL_PCT,
            DEC_UTIL_PCT,
            POWER_MW,
            POWER_LIMIT_MW,
            SM_CLOCK_MHZ,
            TEMP_C,
            PID,
        ] {
            assert!(r.min >= f64::from(i32::MIN) && r.max <= f64::from(i32::MAX), "{r:?}");
        }
        for r in ALL {
            assert!(r.min <= r.max && r.max < 9.0e18, "{r:?}");
        }
    }

    #[test]
    fn times_before_2000_and_after_2099_are_refused() {
        assert!(check_ts(1_793_606_400_000, "2026-11-02").is_ok());
        assert!(check_ts(-2_208_988_800_000, "1900-01-01").is_err());
        assert!(check_ts(253_402_300_799_000, "9999-12-31").is_err());
    }

    #[test]
    fn text_is_capped_and_holds_no_control_character() {
        assert!(GPU_MODEL_TEXT.check("NVIDIA H100 80GB HBM3").is_ok());
        let long = "x".repeat(200);
        let err = GPU_MODEL_TEXT.check(&long).expect_err("too long");
        assert!(err.contains("200 bytes long: gpu_model holds at most 96"), "{err}");
        assert!(err.len() < 120, "{err}");
        let err = GPU_UUID_TEXT.check("GPU-a\nb").expect_err("a newline");
        assert!(err.contains("\\n") && !err.contains('\n'), "{err}");
        assert!(check_memory(Some(2), Some(1)).is_err());
        assert!(check_memory(Some(1), None).is_ok());
    }
}
