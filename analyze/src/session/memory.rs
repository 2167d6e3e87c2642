//! The memory limit every `apron` command runs under: the size given by
//! `--memory-limit` or `$APRON_MEMORY_LIMIT` (or the default for this
//! machine), the query engine's memory pool and spill folder built from it,
//! and how a query that does not fit under it is recognised.
//!
//! The session ([`crate::session`]) builds its query engine from
//! [`runtime_env`] and [`spill_settings`]; the command line ([`crate::cli`])
//! parses the size with [`MemoryLimit`]'s `FromStr`. Operators that can spill
//! (sorts, aggregations) write their excess to a temporary folder under
//! `$TMPDIR` (else `/tmp`), removed when the command ends; those that cannot
//! (the build side of a hash join) fail with
//! [`DataFusionError::ResourcesExhausted`], which [`is_exhausted`] finds
//! however deeply the engine wrapped it.

use std::fmt;
use std::num::NonZeroUsize;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{FairSpillPool, TrackConsumersPool};
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::prelude::SessionConfig;

/// The environment variable that sets the limit when `--memory-limit` is not
/// given.
pub const MEMORY_LIMIT_ENV: &str = "APRON_MEMORY_LIMIT";

/// One mebibyte, in bytes.
const MIB: u64 = 1 << 20;

/// The largest default limit: 2 GiB.
const DEFAULT_CAP: u64 = 2 << 30;

/// The default when the machine's memory cannot be read: 1 GiB.
const DEFAULT_UNKNOWN: u64 = 1 << 30;

/// The least limit accepted: 1 MiB. Below it no query runs, and a bare
/// `--memory-limit 512` is far likelier a size without its unit than a wish.
const LEAST: u64 = MIB;

/// DataFusion's default `sort_spill_reservation_bytes`, kept as the most a
/// sort holds back for its merge.
const MERGE_RESERVATION_CAP: usize = 10 * 1024 * 1024;

/// How many of the largest memory consumers the engine names when a query
/// does not fit (in the debug log, not in the one-line error).
const TOP_CONSUMERS: usize = 5;

/// The memory the query engine may hold at once, in bytes.
///
/// Parsed from sizes such as `512M`, `2G`, `1.5GiB` or `1073741824` (bytes):
/// a number, then an optional unit `K`, `M`, `G` or `T`, each a power of
/// 1024 whether written `M`, `MB` or `MiB`, in any case. Shown as
/// `64.0 MiB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimit {
    bytes: u64,
}

impl MemoryLimit {
    /// A limit of `bytes`, at least the least accepted (1 MiB).
    pub fn from_bytes(bytes: u64) -> Result<Self, String> {
        if bytes < LEAST {
            return Err(format!(
                "{} is below the least memory limit, 1 MiB (a size needs its unit: 512M, 2G)",
                Self { bytes }
            ));
        }
        Ok(Self { bytes })
    }

    /// The limit in bytes.
    pub fn bytes(self) -> u64 {
        self.bytes
    }

    /// The limit when none is given: the smaller of 2 GiB and half the
    /// memory of this machine (or of the cgroup the command runs in, when
    /// that is less); 1 GiB when neither can be read.
    pub fn for_this_machine() -> Self {
        let total = machine_memory(Path::new("/proc/meminfo"), Path::new("/sys/fs/cgroup/memory.max"));
        Self::default_for(total)
    }

    /// The default limit for a machine with `total` bytes of memory (`None`:
    /// unknown): half of it, at most 2 GiB, at least 1 MiB.
    pub fn default_for(total: Option<u64>) -> Self {
        let bytes = total.map_or(DEFAULT_UNKNOWN, |t| (t / 2).min(DEFAULT_CAP)).max(LEAST);
        Self { bytes }
    }

    /// The limit in bytes as the engine counts them.
    fn pool_size(self) -> usize {
        usize::try_from(self.bytes).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
        if self.bytes < 1024 {
            return write!(f, "{} B", self.bytes);
        }
        // Lossy above 2^53 bytes, which is far beyond any machine's memory.
        let mut value = self.bytes as f64 / 1024.0;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        write!(f, "{value:.1} {}", UNITS[unit])
    }
}

impl FromStr for MemoryLimit {
    type Err = String;

    /// Parses `512M`, `2G`, `1.5GiB`, `64 MiB`, `1073741824`. The error
    /// says what a size looks like; clap puts the flag and the value in
    /// front of it.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "not a size such as 512M, 2G or 1.5GiB (the value of --memory-limit or {MEMORY_LIMIT_ENV})"
            )
        };
        match apron_cli::units::bytes(text, 1) {
            Ok(bytes) => Self::from_bytes(bytes),
            Err(apron_cli::units::SizeError::NotASize) => Err(bad()),
            Err(apron_cli::units::SizeError::TooLarge) => {
                Err(format!("{} is larger than any machine's memory", text.trim()))
            }
        }
    }
}

/// The total memory this process may use, in bytes: `MemTotal` of
/// `meminfo`, or the cgroup v2 limit in `cgroup_max` when that is lower.
/// `None` when `meminfo` cannot be read or parsed.
fn machine_memory(meminfo: &Path, cgroup_max: &Path) -> Option<u64> {
    let meminfo = std::fs::read_to_string(meminfo).ok()?;
    let total = meminfo.lines().find_map(|line| {
        let kib = line.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim();
        kib.parse::<u64>().ok()?.checked_mul(1024)
    })?;
    // "max" (no limit), a missing file (cgroup v1, not Linux) or junk: the
    // machine's memory is the bound.
    let cgroup = std::fs::read_to_string(cgroup_max).ok().and_then(|s| s.trim().parse::<u64>().ok());
    Some(cgroup.map_or(total, |c| c.min(total)))
}

/// The query engine's runtime under `limit`: a memory pool of `limit` bytes
/// shared fairly among the operators that can spill, and a disk manager that
/// spills into a fresh temporary folder under `$TMPDIR` (else `/tmp`), made
/// on the first spill and removed with the session.
/// The Parquet footers the engine keeps between reads of a file (its
/// default is 50 MiB). A report reads each file of its period once (the
/// ledger), so footers kept beyond a day's files only made memory grow with
/// the fleet: a month of 512 GPUs is 3,840 minute files.
const METADATA_CACHE_BYTES: usize = 8 << 20;

/// DataFusion's cache of table listings, off. On a miss it lists the whole
/// table (every day and host) to answer a query for one day; at its default
/// 1 MiB a month of 512 GPUs' files does not fit, so each of the ledger's
/// 720 slice queries listed every table whole again: 6.3 M system calls
/// (`stat` of each partition folder and file, `steady`'s included), 13 s of
/// kernel time in a 31 s `spend`. Without it a query lists the one
/// `date=` folder its filter names (DataFusion's partition prefix), as
/// fresh as the query, so compaction swapping an older day's folder
/// meanwhile cannot leave a listing naming files that are gone.
const LIST_FILES_CACHE_BYTES: usize = 0;

pub fn runtime_env(limit: MemoryLimit) -> Result<Arc<RuntimeEnv>, DataFusionError> {
    // FairSpillPool: each operator that can spill gets its share of what
    // the unspillable ones leave, instead of the first taking it all. (On a
    // 16-GPU month at 1-minute samples, `spend` fails under 128 MiB with
    // the greedy pool as with this one: its hash joins decide there.)
    let pool = TrackConsumersPool::new(
        FairSpillPool::new(limit.pool_size()),
        NonZeroUsize::new(TOP_CONSUMERS).expect("a positive constant"),
    );
    RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(pool))
        .with_metadata_cache_limit(METADATA_CACHE_BYTES)
        // No listing cache: see LIST_FILES_CACHE_BYTES.
        .with_object_list_cache_limit(LIST_FILES_CACHE_BYTES)
        .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(DiskManagerMode::OsTmpDirectory))
        .build_arc()
}

/// `config` with the settings that let a big sort spill under `limit`
/// rather than fail.
///
/// Measured on a day of 8 GPUs at 1 s (691,200 rows), `ORDER BY power_mw,
/// ts, gpu_uuid` over four columns: with DataFusion's defaults it fails at
/// 16 MiB and at 64 MiB (it runs at 128 MiB), because each spill first
/// merges the sorted batches in memory through a reservation
/// (`sort_spill_reservation_bytes`, 10 MB) that does not grow with what is
/// merged. Sorting the buffered rows in place instead
/// (`sort_in_place_threshold_bytes` up to the whole limit) keeps that work
/// inside the sorter's own, spillable, share: the sort then runs at 16 MiB
/// with 1 to 32 target partitions, and is no slower under a 2 GiB limit
/// (1.4 and 1.6 s against 1.9 and 1.6 s, debug build, about 30 MB less
/// peak memory). The merge reservation is kept small (a sixteenth of the
/// limit, at most DataFusion's 10 MB), as every sorting partition holds
/// one from its first row.
///
/// Hash joins are kept: with `prefer_hash_join = false` the sort-merge joins
/// made `spend` over 16 GPUs × 30 days no more able to run under 64 MiB
/// (their spill merges then took the pool) and slower without a limit.
pub fn spill_settings(config: SessionConfig, limit: MemoryLimit) -> SessionConfig {
    let bytes = limit.pool_size();
    config
        .with_sort_in_place_threshold_bytes(bytes)
        .with_sort_spill_reservation_bytes((bytes / 16).min(MERGE_RESERVATION_CAP))
}

/// True when `err` is a failure to write or read the spill folder: an I/O
/// error, in a session whose engine spilled (`spill_dirs` are its spill
/// folders, none when it made none) or naming the temporary folder
/// `tmp` it would spill under (it could not be made).
pub fn is_spill_failure(
    err: &(dyn std::error::Error + 'static),
    spill_dirs: &[std::path::PathBuf],
    tmp: &Path,
) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        let io = e.is::<std::io::Error>()
            || matches!(e.downcast_ref::<DataFusionError>(), Some(DataFusionError::IoError(_)));
        if io {
            return !spill_dirs.is_empty() || err.to_string().contains(&*tmp.to_string_lossy());
        }
        cause = e.source();
    }
    false
}

/// True when `err`, or any error it wraps, is the engine's "resources
/// exhausted": an operator asked the memory pool for more than the limit
/// leaves, and could not spill.
pub fn is_exhausted(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        let df = e
            .downcast_ref::<DataFusionError>()
            .or_else(|| e.downcast_ref::<Arc<DataFusionError>>().map(AsRef::as_ref));
        if matches!(df, Some(DataFusionError::ResourcesExhausted(_))) {
            return true;
        }
        cause = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<u64, String> {
        text.parse::<MemoryLimit>().map(MemoryLimit::bytes)
    }

    #[test]
    fn sizes_parse_in_powers_of_1024() {
        assert_eq!(parse("512M"), Ok(512 << 20));
        assert_eq!(parse("2G"), Ok(2 << 30));
        assert_eq!(parse("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse("1.5gb"), Ok(3 << 29));
        assert_eq!(parse("64 MiB"), Ok(64 << 20));
        assert_eq!(parse("2048k"), Ok(2 << 20));
        assert_eq!(parse("1T"), Ok(1 << 40));
        assert_eq!(parse("1073741824"), Ok(1 << 30));
        assert_eq!(parse(".5G"), Ok(1 << 29));
    }

    #[test]
    fn bad_sizes_are_refused() {
        for bad in ["", "M", "abc", "-1G", "1.2.3M", "1e9", "2 GBs", "1X", ".", "inf", "NaN"] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains("not a size such as 512M"), "{bad}: {err}");
        }
        let err = parse("512").expect_err("512 bytes");
        assert_eq!(err, "512 B is below the least memory limit, 1 MiB (a size needs its unit: 512M, 2G)");
        assert!(parse("0").is_err());
        assert!(parse("99999999999T").expect_err("too big").contains("larger than any machine"));
    }

    #[test]
    fn limits_show_in_binary_units() {
        let show = |bytes| MemoryLimit { bytes }.to_string();
        assert_eq!(show(64 << 20), "64.0 MiB");
        assert_eq!(show(3 << 29), "1.5 GiB");
        assert_eq!(show(1536), "1.5 KiB");
        assert_eq!(show(512), "512 B");
        assert_eq!(show(3 << 40), "3.0 TiB");
    }

    #[test]
    fn the_default_is_half_the_memory_at_most_2_gib() {
        assert_eq!(MemoryLimit::default_for(Some(16 << 30)).bytes(), 2 << 30);
        assert_eq!(MemoryLimit::default_for(Some(2 << 30)).bytes(), 1 << 30);
        assert_eq!(MemoryLimit::default_for(None).bytes(), 1 << 30);
        assert_eq!(MemoryLimit::default_for(Some(1000)).bytes(), LEAST);
    }

    #[test]
    fn machine_memory_reads_meminfo_and_the_cgroup() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let meminfo = dir.path().join("meminfo");
        let cgroup = dir.path().join("memory.max");
        std::fs::write(&meminfo, "MemTotal:       16384000 kB\nMemFree:  1 kB\n").expect("write meminfo");
        assert_eq!(machine_memory(&meminfo, &cgroup), Some(16_384_000 * 1024));
        std::fs::write(&cgroup, "max\n").expect("write memory.max");
        assert_eq!(machine_memory(&meminfo, &cgroup), Some(16_384_000 * 1024));
        std::fs::write(&cgroup, "1073741824\n").expect("write memory.max");
        assert_eq!(machine_memory(&meminfo, &cgroup), Some(1 << 30));
        std::fs::write(&meminfo, "nothing useful\n").expect("write meminfo");
        assert_eq!(machine_memory(&meminfo, &cgroup), None);
    }

    #[test]
    fn exhaustion_is_found_however_wrapped() {
        let exhausted = || DataFusionError::ResourcesExhausted("Failed to allocate".into());
        assert!(is_exhausted(&exhausted()));
        let wrapped = DataFusionError::Context("join".into(), Box::new(exhausted()));
        assert!(is_exhausted(&wrapped));
        let shared = DataFusionError::Shared(Arc::new(exhausted()));
        assert!(is_exhausted(&shared));
        let arrow = DataFusionError::ArrowError(
            Box::new(datafusion::arrow::error::ArrowError::ExternalError(Box::new(exhausted()))),
            None,
        );
        assert!(is_exhausted(&arrow));
        assert!(is_exhausted(&DataFusionError::External(Box::new(arrow))));
        assert!(!is_exhausted(&DataFusionError::Execution("division by zero".into())));
    }

    #[test]
    fn spill_failures_are_io_errors_of_a_spilling_session() {
        let tmp = Path::new("/scratch/tmp");
        let missing = DataFusionError::IoError(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "No such file or directory (os error 2) at path \"/scratch/tmp/.tmpAb12\"",
        ));
        assert!(is_spill_failure(&missing, &[], tmp));
        let full = || DataFusionError::IoError(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!is_spill_failure(&full(), &[], tmp), "no spill folder was made: not a spill");
        let dirs = vec![tmp.join(".tmpAb12")];
        let wrapped = DataFusionError::Context("sort".into(), Box::new(full()));
        assert!(is_spill_failure(&wrapped, &dirs, tmp));
        assert!(!is_spill_failure(&DataFusionError::Execution("bad cast".into()), &dirs, tmp));
    }
}
