//! The simulated GPU models: the names NVML gives them and the envelopes
//! (memory, power, clocks, heat, PCIe) their sensors move within; the MIG
//! profiles a partitioned H100 is carved into, and which GPUs of a fleet
//! are partitioned how. What runs on the GPUs and instances is left to
//! `schedule` and `workload`.

use super::noise;

/// One GPU product as the simulator models it.
#[derive(Debug)]
pub(super) struct GpuModel {
    /// Product name exactly as NVML reports it.
    pub(super) name: &'static str,
    /// Framebuffer size as NVML reports it, bytes.
    pub(super) fb_total_bytes: i64,
    /// Default enforced power limit, milliwatts.
    pub(super) power_limit_mw: i32,
    /// Board draw with no process and idle clocks, milliwatts.
    pub(super) idle_mw: f32,
    /// Extra draw while a CUDA context is open but no kernel runs (the GPU
    /// leaves its deepest idle state), milliwatts.
    pub(super) context_mw: f32,
    /// SM clock at idle, MHz.
    pub(super) sm_clock_idle_mhz: i32,
    /// Highest SM boost clock, MHz.
    pub(super) sm_clock_max_mhz: i32,
    /// Temperature rise above the inlet at the power limit, °C.
    pub(super) temp_rise_c: f32,
    /// Practical PCIe throughput per direction, bytes per second.
    pub(super) pcie_max_bytes_per_s: f32,
    /// Whether the GPU has GPM metrics (Hopper and newer).
    pub(super) gpm: bool,
    /// How much more often than on other models training starts on it.
    pub(super) training_bias: f32,
    /// How much more often than on other models an inference server starts
    /// on it.
    pub(super) serving_bias: f32,
}

const MIB: i64 = 1 << 20;

/// Hopper SXM: NVML says 81559 MiB, 700 W, 345–1980 MHz, PCIe Gen5.
pub(super) static H100: GpuModel = GpuModel {
    name: "NVIDIA H100 80GB HBM3",
    fb_total_bytes: 81_559 * MIB,
    power_limit_mw: 700_000,
    idle_mw: 70_000.0,
    context_mw: 22_000.0,
    sm_clock_idle_mhz: 345,
    sm_clock_max_mhz: 1_980,
    temp_rise_c: 42.0,
    pcie_max_bytes_per_s: 50e9,
    gpm: true,
    training_bias: 1.0,
    serving_bias: 1.0,
};

/// Ampere SXM4: 81920 MiB, 400 W, 210–1410 MHz, PCIe Gen4.
pub(super) static A100: GpuModel = GpuModel {
    name: "NVIDIA A100-SXM4-80GB",
    fb_total_bytes: 81_920 * MIB,
    power_limit_mw: 400_000,
    idle_mw: 55_000.0,
    context_mw: 18_000.0,
    sm_clock_idle_mhz: 210,
    sm_clock_max_mhz: 1_410,
    temp_rise_c: 38.0,
    pcie_max_bytes_per_s: 25e9,
    gpm: false,
    training_bias: 1.0,
    serving_bias: 1.5,
};

/// Ada PCIe card: 46068 MiB, 350 W, 210–2520 MHz, PCIe Gen4, air-cooled
/// (runs hotter, and leaves its idle state for a context more visibly).
pub(super) static L40S: GpuModel = GpuModel {
    name: "NVIDIA L40S",
    fb_total_bytes: 46_068 * MIB,
    power_limit_mw: 350_000,
    idle_mw: 35_000.0,
    context_mw: 26_000.0,
    sm_clock_idle_mhz: 210,
    sm_clock_max_mhz: 2_520,
    temp_rise_c: 46.0,
    pcie_max_bytes_per_s: 25e9,
    gpm: false,
    training_bias: 0.4,
    serving_bias: 3.0,
};

/// The model of the `host_no`-th host of a fleet (0-based): a fleet bought
/// in waves, mostly H100, some A100 and a few L40S inference boxes. It does
/// not depend on the seed, as a real fleet's hardware would not.
pub(super) fn for_fleet_host(host_no: usize) -> &'static GpuModel {
    const PATTERN: [&GpuModel; 8] = [&H100, &A100, &H100, &L40S, &H100, &A100, &H100, &L40S];
    PATTERN[host_no % PATTERN.len()]
}

/// The model of a stand-alone host, picked by `hash` (half H100, 30% A100,
/// 20% L40S).
pub(super) fn for_hash(hash: u64) -> &'static GpuModel {
    match hash % 10 {
        0..5 => &H100,
        5..8 => &A100,
        _ => &L40S,
    }
}

/// The compute slices of an H100 (and an A100): a MIG instance of a
/// `Ng` profile holds N of them.
pub(super) const MIG_TOTAL_SLICES: i32 = 7;

/// A MIG profile: the share of a GPU one instance of it holds.
#[derive(Debug)]
pub(super) struct MigProfile {
    /// The profile's name as NVML gives it (`1g.10gb`).
    pub(super) name: &'static str,
    /// Compute slices, of [`MIG_TOTAL_SLICES`].
    pub(super) slices: i32,
    /// The instance's framebuffer as NVML reports it, bytes.
    pub(super) fb_total_bytes: i64,
}

/// H100 80GB profiles; NVML reports these memory sizes for them.
pub(super) static H100_1G: MigProfile =
    MigProfile { name: "1g.10gb", slices: 1, fb_total_bytes: 9_856 * MIB };
pub(super) static H100_2G: MigProfile =
    MigProfile { name: "2g.20gb", slices: 2, fb_total_bytes: 19_968 * MIB };
pub(super) static H100_3G: MigProfile =
    MigProfile { name: "3g.40gb", slices: 3, fb_total_bytes: 40_192 * MIB };
pub(super) static H100_4G: MigProfile =
    MigProfile { name: "4g.40gb", slices: 4, fb_total_bytes: 40_192 * MIB };

/// The instances of each GPU of a host, by GPU index: an empty list (or no
/// entry) is a whole GPU, not in MIG mode.
pub(super) type MigLayout = &'static [&'static [&'static MigProfile]];

/// How the GPUs of the `host_no`-th host of a fleet (0-based) are
/// partitioned. One host, the third (an H100 host), is the fleet's shared
/// box: GPUs 0–3 in MIG mode, each laid out differently, 4–7 whole. GPU 0
/// is seven 1g.10gb (notebooks, small inference), GPU 1 a mix of
/// 3g.40gb + 2g.20gb + 1g.10gb + 1g.10gb, GPU 2 4g.40gb + 3g.40gb, GPU 3
/// two 3g.40gb with one slice no instance holds (idle capacity). Every
/// other host is whole GPUs only. Like the models, it does not depend on
/// the seed.
pub(super) fn mig_layout_for_fleet_host(host_no: usize) -> MigLayout {
    static SHARED: [&[&MigProfile]; 4] = [
        &[&H100_1G, &H100_1G, &H100_1G, &H100_1G, &H100_1G, &H100_1G, &H100_1G],
        &[&H100_3G, &H100_2G, &H100_1G, &H100_1G],
        &[&H100_4G, &H100_3G],
        &[&H100_3G, &H100_3G],
    ];
    if host_no == 2 { &SHARED } else { &[] }
}

/// A stable GPU UUID in NVML's form, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`,
/// derived from the fleet seed, the host and the GPU's index.
pub(super) fn uuid(seed: u64, host: &str, index: usize) -> String {
    let a = noise::mix(seed ^ noise::fnv(host) ^ (index as u64).wrapping_mul(0xA076_1D64_78BD_642F));
    nvml_uuid("GPU", a, noise::mix(a ^ 0xE703_7ED1_A0B4_28DB))
}

/// A stable MIG instance UUID in NVML's form,
/// `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, derived from the fleet seed,
/// the host, its GPU's index and the instance's place on that GPU.
pub(super) fn mig_uuid(seed: u64, host: &str, index: usize, instance: usize) -> String {
    let gpu = uuid(seed, host, index);
    let a = noise::mix(noise::fnv(&gpu) ^ (instance as u64 + 1).wrapping_mul(0x8EBC_6AF0_9C88_C6E3));
    nvml_uuid("MIG", a, noise::mix(a ^ 0x589_65CC_2BCE_1279))
}

/// `PREFIX-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from 128 bits.
fn nvml_uuid(prefix: &str, a: u64, b: u64) -> String {
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFFF,
        b >> 48,
        b & 0xFFFF_FFFF_FFFF
    )
}
