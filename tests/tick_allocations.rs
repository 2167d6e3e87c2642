//! Allocations per tick in steady state: once a file's buffers are sized
//! (from the file before it), a tick that closes no file (the source's
//! sampling, the WAL frame, the rows held, the copy `/metrics` serves and
//! the minute states it keeps) allocates nothing on a
//! simulated host (whole GPUs, or GPUs in MIG mode with their instances'
//! rows), and no more than a small fixed number through NVML,
//! which are `nvml-wrapper`'s own (see [`NVML_WRAPPER_ALLOCS_PER_GPU`]).
//!
//! Counting needs a global allocator and a process with nothing else in
//! it, so each case runs in a child: the test re-runs this executable,
//! filtered to [`child`], with the case in the environment, and the child
//! counts and asserts. Counts, not times: a count does not flake on a busy
//! machine. The pids the fake NVML reports are real (this child and a
//! `sleep`), so process identity reads the real `/proc`, once per process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apron_recorder::metrics::{Health, Publisher};
use apron_recorder::source::nvml::NvmlSource;
use apron_schemas::DataLayout;
use apron_store::source::sim::{SimFleet, SimHost};
use apron_store::source::{Source, Tick};
use apron_store::writer::RollingWriter;

/// Names the case a child runs: `sim`, `sim-mig` or `nvml`.
const CASE_ENV: &str = "APRON_TICK_ALLOC_CASE";
/// The fake library's path, handed from parent to child.
const FAKE_ENV: &str = "APRON_TEST_FAKE_NVML";

/// 2026-12-01T00:00:00Z: on a file boundary.
const T0_MS: i64 = 1_796_083_200_000;
/// Files close every minute of tick time, ticks come every second: the
/// first file sizes the buffers, the second is the first sized one, the
/// third is measured, all but its closing tick.
const ROTATE: Duration = Duration::from_secs(60);
const WARMUP_TICKS: u64 = 121;
const MEASURED_TICKS: u64 = 58;

/// What `nvml-wrapper` allocates per GPU per tick, which our code cannot
/// hand it to reuse: `Device::field_values_for` (energy and PCIe counters)
/// builds two `Vec`s, `gpm_metrics_get` one of results. Everything else of
/// a tick (the worker's NVML buffers and answer, the hand-offs, process
/// identity, the rows held, the WAL frame) reuses what the tick before had.
const NVML_WRAPPER_ALLOCS_PER_GPU: u64 = 3;

/// Allocations made in this process so far (alloc, alloc_zeroed, realloc).
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting.
struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs this executable's [`child`] test with `env`, and fails with its
/// output when it fails.
fn run_child(env: &[(&str, String)]) {
    let exe = std::env::current_exe().expect("a test knows its own path");
    let out = Command::new(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("the test executable runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(text.contains("allocations per tick"), "the child ran no case:\n{text}");
}

#[test]
fn a_steady_tick_of_the_simulated_host_allocates_nothing() {
    run_child(&[(CASE_ENV, "sim".into())]);
}

/// The simulated fleet's partitioned host: 8 GPUs, 4 of them in MIG mode
/// with 15 instances, each a row of its own.
#[test]
fn a_steady_tick_of_a_simulated_host_with_mig_allocates_nothing() {
    run_child(&[(CASE_ENV, "sim-mig".into())]);
}

#[test]
fn a_steady_tick_through_nvml_allocates_only_the_wrappers_few() {
    let sleeper = Sleeper::spawn();
    // Eight GPUs, two processes each (this child and the sleep): sixteen
    // process rows per tick, with GPM, every metric answered.
    let gpus: Vec<String> = (0..8)
        .map(|g| {
            format!(
                "uuid=GPU-alloc-{g},name=NVIDIA H100 80GB HBM3,util=55,mem_util=30,fb_total=85899345920,\
                 fb_used=20000000000,power=350000,power_limit=700000,energy=1000000000,energy_step=35000,\
                 sm_clock=1755,temp=60,pcie_tx=1000,pcie_rx=20000,gpm=1,gpm_sm=50,gpm_occ=30,gpm_tensor=20,\
                 gpm_dram=40,compute=self:8589934592|{s}:4294967296,putil=self:40:20|{s}:15:10",
                s = sleeper.pid()
            )
        })
        .collect();
    let fake = apron_tests::fake_nvml().to_string_lossy().into_owned();
    run_child(&[(CASE_ENV, "nvml".into()), (FAKE_ENV, fake), ("FAKE_NVML_GPUS", gpus.join(";"))]);
}

/// The child's part: counts the allocations of the measured ticks of the
/// case named in the environment, and asserts them. Does nothing in the
/// parent.
#[test]
fn child() {
    let Ok(case) = std::env::var(CASE_ENV) else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut source, bound): (Box<dyn Source>, u64) = match case.as_str() {
        "sim" => (Box::new(SimHost::new("alloc", 8, 1, T0_MS)), 0),
        "sim-mig" => (Box::new(SimFleet::host(24, 1, T0_MS, 2)), 0),
        "nvml" => {
            let lib = PathBuf::from(std::env::var(FAKE_ENV).expect("the parent sets the fake's path"));
            let source = NvmlSource::open("alloc".into(), Some(&lib)).expect("the fake NVML opens");
            (Box::new(source), 8 * NVML_WRAPPER_ALLOCS_PER_GPU)
        }
        other => panic!("unknown case {other}"),
    };
    let mut writer = RollingWriter::new(DataLayout::new(tmp.path()), "alloc", ROTATE)
        .expect("writer")
        .with_wal(Duration::from_secs(1))
        .expect("WAL");
    let mut publisher = Publisher::detached("alloc", 5.0);
    let mut tick = Tick::default();
    let mut per_tick = Vec::with_capacity(usize::try_from(MEASURED_TICKS).expect("small"));
    let mut rows = 0;
    for i in 0..WARMUP_TICKS + MEASURED_TICKS {
        let ts = T0_MS + i64::try_from(i).expect("small") * 1_000;
        let (before, files) = (ALLOCATIONS.load(Ordering::Relaxed), writer.stats().files);
        tick.clear();
        source.sample(ts, 1_000, &mut tick);
        writer.push(ts, &tick).expect("the disk takes the rows");
        let health = Health { ticks: i, gpu_rows: writer.stats().gpu_rows, ..Health::default() };
        publisher.publish(ts, &tick, &health);
        if i >= WARMUP_TICKS {
            per_tick.push(ALLOCATIONS.load(Ordering::Relaxed) - before);
            assert_eq!(writer.stats().files, files, "a measured tick closed a file");
            rows += tick.gpus.len() + tick.procs.len();
        }
    }
    assert_eq!(writer.wal_stats().unwrap_or_default().errors, 0, "the WAL took every frame");
    let served = publisher.snapshot();
    assert_eq!(
        served.ts_ms,
        Some(T0_MS + i64::try_from(WARMUP_TICKS + MEASURED_TICKS - 1).expect("small") * 1_000)
    );
    assert_eq!(
        (served.gpus.len(), served.procs.len()),
        (tick.gpus.len(), tick.procs.len()),
        "/metrics has the last tick"
    );
    assert_eq!(served.minutes.len(), tick.gpus.len(), "each GPU has a full minute by now");
    println!("{case}: {rows} rows in {MEASURED_TICKS} ticks; allocations per tick: {per_tick:?}");
    assert!(rows as u64 >= 8 * MEASURED_TICKS, "every GPU answered at every tick");
    if case == "nvml" {
        assert_eq!(rows as u64, 24 * MEASURED_TICKS, "8 GPU rows and 16 process rows per tick");
    }
    if case == "sim-mig" {
        assert_eq!(tick.gpus.len(), 8 + 15, "8 GPU rows and 15 instance rows per tick");
    }
    let worst = per_tick.iter().copied().max().unwrap_or(0);
    assert!(worst <= bound, "a steady tick allocated {worst} times (at most {bound}): {per_tick:?}");
    writer.close().expect("close");
}

/// A `sleep` process, killed and reaped when dropped.
struct Sleeper(Child);

impl Sleeper {
    fn spawn() -> Sleeper {
        let child = Command::new("sleep").arg("120").stdin(Stdio::null()).spawn().expect("`sleep` runs");
        Sleeper(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        // Our own child, by its pid; it may have exited already.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
