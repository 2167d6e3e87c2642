//! The stretches the ledger finds, as the reports show them: a GPU idle
//! long enough to reclaim, a process holding memory on an idle GPU (the
//! rows of `queries/reclaim.sql`, and of `queries/zombies.sql` and
//! `queries/starved.sql`, which the GPU's PCIe traffic tells apart).

/// One idle stretch of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ReclaimRow {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// GPU UUID.
    pub gpu_uuid: String,
    /// First minute of the stretch, milliseconds since the epoch (UTC).
    pub idle_since: i64,
    /// Length of the stretch (minutes).
    pub idle_minutes: i64,
    /// GPU time in the stretch (GPU-hours): a MIG instance's minutes
    /// counted by its share of its GPU's slices.
    pub idle_gpu_hours: f64,
    /// Users whose processes held memory during it, comma-separated; empty
    /// when none did.
    pub held_by: String,
    /// The pods ("pod NAMESPACE/POD") and Slurm jobs ("job N") the GPU
    /// was allocated to during it, sorted, comma-separated; empty if none.
    pub allocated_to: String,
    /// The first minute of the period one of them held the GPU (ms since
    /// the epoch, UTC); `None` if none.
    pub allocated_since: Option<i64>,
    /// Whether the stretch runs up to the GPU's newest recorded minute.
    pub still_idle: bool,
}

/// One process's idle stretch on one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ZombieRow {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// GPU UUID.
    pub gpu_uuid: String,
    /// Process id.
    pub pid: i32,
    /// When the process started, milliseconds since the epoch (UTC); `None`
    /// when it was not recorded.
    pub proc_start: Option<i64>,
    /// Its command name, when recorded.
    pub comm: Option<String>,
    /// Its user: the name, else "uid N", else "(unknown)".
    pub user: Option<String>,
    /// Its team, by the config's rules.
    pub team: String,
    /// Most memory it held during the stretch (bytes); `None` when NVML
    /// gave no figure all along (a process on a GPU holds a context).
    pub used_mem_bytes: Option<i64>,
    /// First minute of the stretch, milliseconds since the epoch (UTC).
    pub idle_since: i64,
    /// Length of the stretch (minutes).
    pub idle_minutes: i64,
    /// Whether the process is in its GPU's newest recorded minute: it
    /// still exists.
    pub still_running: bool,
    /// Whether the stretch runs up to its GPU's newest recorded minute:
    /// the process holds memory on an idle GPU now.
    pub still_idle: bool,
    /// The GPU's mean activity over the stretch (%: utilization, else SM
    /// activity); `None` only where not computed (a row read back from
    /// `queries/zombies.sql`, which does not give it).
    pub activity_pct: Option<f64>,
    /// The GPU's mean PCIe traffic in over the stretch (MiB/s,
    /// each over the minutes where it is known); `None` when unknown
    /// throughout (a MIG instance's traffic is its parent's).
    pub pcie_rx_mib_per_s: Option<f64>,
    /// The GPU's mean PCIe traffic out over the stretch (MiB/s); `None` as for `pcie_rx_mib_per_s`.
    pub pcie_tx_mib_per_s: Option<f64>,
}

/// The MIG slices of one partitioned GPU that no instance held, over the
/// period: capacity the partitioning leaves unused, which no one holds and
/// so no one can hand back (not a reclaim candidate).
#[derive(Debug, Clone, PartialEq)]
pub struct Unpartitioned {
    /// Host name.
    pub host: String,
    /// NVML index.
    pub gpu_index: i32,
    /// The partitioned GPU's UUID.
    pub gpu_uuid: String,
    /// GPU time in slices no instance held (GPU-hours: each minute counted
    /// by the share of the GPU's slices free then).
    pub gpu_hours: f64,
    /// Its exact cost (currency).
    pub cost: f64,
}
