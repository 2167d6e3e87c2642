//! A small hand-built fleet whose every cost figure can be worked out by
//! hand, written through the recorder's real writer (raw files and minute
//! rollups), and the `apron.toml` that prices it. `tests/it/reports.rs` works
//! out the figures; `tests/it/queries.rs` and `tests/it/bad_input.rs` reuse the
//! data.
//!
//! Ten minutes, Monday 2026-11-02 10:00–10:10 UTC, one sample every 10 s
//! (`interval_ms` 10 000, six samples per minute), minute `m` = 0…9:
//!
//! | host | GPU (index, model)  | gpu_util_pct             | processes (used memory)                          |
//! |------|---------------------|--------------------------|--------------------------------------------------|
//! | h1   | GPU-A (0, "Test A") | 50 in m 0–4, 0 in m 5–9  | alice pid 100 (1 GiB) m 0–9; bob pid 200 (3 GiB) m 0–4 |
//! | h1   | GPU-B (1, "Test B") | 0                        | none                                             |
//! | h2   | GPU-C (0, "Test A") | 100, recorded m 0–7 only | carol pid 300 (2 GiB) m 0–7                      |
//!
//! GPU-C has no samples at all in minutes 8 and 9 (unrecorded). Every GPU
//! draws `power_mw` 300 000 and its `energy_mj` counter rises by 3 000 000
//! per sample, so each sample stands for 3 000 J whether energy comes from
//! the counter's delta or from power × interval (the first sample of a
//! GPU has no previous one): 18 000 J = 0.005 kWh per recorded minute.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;

/// The first sample: Monday 2026-11-02 10:00:00 UTC.
pub const START: &str = "2026-11-02T10:00:00Z";

/// The end of the recorded span (exclusive): 10:10:00 UTC.
pub const END: &str = "2026-11-02T10:10:00Z";

/// The period flags of the span.
pub const FROM_TO: [&str; 4] = ["--from", START, "--to", END];

/// Time between samples, and the `interval_ms` of every row.
pub const STEP_MS: i64 = 10_000;

/// One minute.
pub const MINUTE_MS: i64 = 60_000;

/// One GiB.
pub const GIB: i64 = 1 << 30;

/// The config pricing the scenario, with round figures:
///
/// - "Test A": 31 557.6 over one year of 365.25 days (31 557 600 s) is
///   0.001 per second, plus 3.6 per hour = 0.001 per second: 0.002 / s.
/// - "*" (so "Test B"): nothing to write off, 3.6 per hour: 0.001 / s.
/// - energy: 0.005 kWh per minute × 0.2 per kWh × PUE 1.3 = 0.0013 per
///   recorded minute.
/// - teams: alice is vision, carol is nlp; bob matches no rule (unassigned).
pub const CONFIG: &str = r#"currency = "USD"

[idle]
threshold_pct = 5

[energy]
price_per_kwh = 0.2
pue = 1.3

[[gpu_cost]]
model = "Test A"
purchase_price = 31557.6
lifetime_years = 1
ops_per_gpu_hour = 3.6

[[gpu_cost]]
model = "*"
purchase_price = 0
lifetime_years = 1
ops_per_gpu_hour = 3.6

[[team]]
name = "vision"
users = ["alice"]

[[team]]
name = "nlp"
users = ["carol"]
"#;

/// Milliseconds since the epoch of an RFC 3339 instant.
pub fn ms(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339).expect("valid RFC 3339").timestamp_millis()
}

/// A temporary folder holding the scenario's data (`data/`) and config
/// (`apron.toml`), removed when dropped.
#[derive(Debug)]
pub struct Fixture {
    /// Keeps the folder alive.
    pub dir: tempfile::TempDir,
    /// The data folder.
    pub data: PathBuf,
    /// The config file.
    pub config: PathBuf,
}

impl Fixture {
    /// Writes the scenario and its config into a fresh temporary folder.
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        write(&data);
        let config = dir.path().join("apron.toml");
        std::fs::write(&config, CONFIG).expect("write apron.toml");
        Fixture { dir, data, config }
    }

    /// Removes the minute rollups the writer left, so that only raw files
    /// remain.
    pub fn remove_rollups(&self) {
        for table in ["gpu_minutes", "proc_minutes"] {
            let dir = self.data.join(table);
            assert!(dir.is_dir(), "the writer left {}", dir.display());
            std::fs::remove_dir_all(&dir).expect("remove the rollups");
        }
    }

    /// Runs `apron --data DATA --config CONFIG ARGS…` and returns what it did.
    pub fn apron(&self, args: &[&str]) -> Output {
        self.apron_with(&self.config, args)
    }

    /// The rows `apron --format json ARGS…` printed and its stderr lines
    /// (the header), or what went wrong.
    pub fn json(
        &self,
        config: &Path,
        args: &[&str],
    ) -> Result<(Vec<serde_json::Value>, Vec<String>), String> {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = self.apron_with(config, &all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let lines = stderr.lines().map(str::to_owned).collect();
        match serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout) {
            Ok(rows) => Ok((rows, lines)),
            Err(e) => {
                Err(format!("apron {}: {} ({e}), stderr: {}", args.join(" "), out.status, stderr.trim()))
            }
        }
    }

    /// Runs `apron --data DATA --config config ARGS…` and returns what it did.
    pub fn apron_with(&self, config: &Path, args: &[&str]) -> Output {
        Command::new(crate::bin("apron"))
            .arg("--data")
            .arg(&self.data)
            .arg("--config")
            .arg(config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs")
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

/// Writes the scenario under `data` through one `RollingWriter` per host.
pub fn write(data: &Path) {
    write_at(data, ms(START));
}

/// Writes the scenario under `data` as [`write`] does, but starting at
/// `start` (milliseconds since the epoch) instead of [`START`]: the same
/// ten minutes, GPUs, processes and figures, shifted in time. Several
/// copies at different times may share one data folder.
pub fn write_at(data: &Path, start: i64) {
    let layout = DataLayout::new(data);
    let mut h1 = RollingWriter::new(layout.clone(), "h1", Duration::from_secs(3_600)).expect("host h1");
    let mut h2 = RollingWriter::new(layout, "h2", Duration::from_secs(3_600)).expect("host h2");
    for n in 0..60 {
        let ts = start + n * STEP_MS;
        let m = n / 6;
        // Every GPU's counter starts at 1 MJ and gains 3 kJ a sample.
        let gpu = |uuid: &str, index: i32, model: &str, util: i32| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: index,
            gpu_model: Some(model.into()),
            interval_ms: STEP_MS as i32,
            gpu_util_pct: Some(util),
            power_mw: Some(300_000),
            energy_mj: Some(1_000_000_000 + n * 3_000_000),
            // GPM on some samples, varying: the rollup's means over the
            // samples that have them (SQL and recorder alike).
            tensor_active_pct: (n % 2 == 0).then_some((n % 7) as f32),
            dram_active_pct: (n % 3 != 0).then_some(util as f32 / 4.0),
            ..Default::default()
        };
        let proc = |uuid: &str, pid: i32, user: &str, uid: i64, mem: i64| ProcSample {
            ts,
            gpu_uuid: uuid.into(),
            pid,
            interval_ms: STEP_MS as i32,
            identity: ProcIdentity {
                proc_start: Some(start - 3_600_000 + i64::from(pid)),
                comm: Some("python".into()),
                uid: Some(uid),
                user: Some(user.into()),
                ..Default::default()
            },
            used_mem_bytes: Some(mem),
            ..Default::default()
        };
        let mut tick = Tick {
            gpus: vec![gpu("GPU-A", 0, "Test A", if m < 5 { 50 } else { 0 }), gpu("GPU-B", 1, "Test B", 0)],
            procs: vec![proc("GPU-A", 100, "alice", 1001, GIB)],
            ..Default::default()
        };
        if m < 5 {
            tick.procs.push(proc("GPU-A", 200, "bob", 1002, 3 * GIB));
        }
        h1.push(ts, &tick).expect("push h1");
        if m < 8 {
            let tick = Tick {
                gpus: vec![gpu("GPU-C", 0, "Test A", 100)],
                procs: vec![proc("GPU-C", 300, "carol", 1003, 2 * GIB)],
                ..Default::default()
            };
            h2.push(ts, &tick).expect("push h2");
        }
    }
    h1.close().expect("close h1");
    h2.close().expect("close h2");
}
