//! Benchmark: the recorder's CPU per tick and memory in steady state, with
//! 8 GPUs and 16 GPU processes, against DESIGN.md's target (≤ 100 µs CPU per
//! tick besides NVML's own calls, ≤ 25 MB RSS).
//!
//! `cargo bench -p apron-recorder --bench recorder` runs the release
//! recorder twice for `APRON_BENCH_SECS` (default 30) seconds each:
//! - through the real nvml-wrapper calls against the fake libnvidia-ml
//!   (8 GPUs, 16 real `sleep` processes holding memory, so process identity
//!   reads real `/proc` entries); the fake answers in nanoseconds, so this
//!   is the recorder's own cost;
//! - with the simulated 8-GPU host;
//! - through the fake again, its `nvmlDeviceGetPcieThroughput` taking 20 ms
//!   per call as the real one does (`pcie_latency_ms=20`), once with the
//!   driver's PCIe byte counters (the recorder does not make that call) and
//!   once without them (the calls every fifth tick, on as many sampling threads as they need).
//!
//! - through the fake with one of the eight GPUs hung after its third
//!   answer (`hang_after=3`): the tick waits for it only until its
//!   deadline, and a thread blocked in NVML does not hold the exit up.
//!   These were wall-clock assertions in `tests/nvml.rs`; the tests now
//!   check the behaviour (the stall counted, the exit clean) and this
//!   measures the times.
//!
//! Each run also reports the longest tick (the source's sampling, wall
//! time) and the ticks missed, from the recorder's health line, and how long
//! the recorder took to exit after SIGTERM.
//!
//! Ticks run at 10 Hz (`--interval 100ms`) so a short run has many ticks;
//! files rotate every minute, so closes and rollups are in the figure. CPU
//! is read from /proc (schedstat, every thread, the WAL's sync thread
//! included) after a warm-up; memory is the peak resident set (VmHWM). These
//! runs give no user and kernel split: the kernel splits a process's CPU
//! by sampling it at its clock tick, and a few tens of milliseconds of CPU
//! over a run are too few samples (getrusage of the child gave the two
//! halves equal).
//!
//! Before those, the same tick (the source's sampling, then the writer's
//! push: WAL frame, rows held, the file closed every 10 minutes of tick
//! time) runs in this process, back to back, for both sources, so that
//! enough CPU is spent to tell apart what one tick costs:
//! - user and kernel time (getrusage, the whole process);
//! - per thread: the tick thread (our code), the NVML sampling threads (the
//!   wrapper's calls into the fake, whose own answers take nanoseconds, and
//!   the hand-offs), the WAL's sync thread (fdatasync);
//! - allocations per tick (a counting global allocator), for the ticks that
//!   close no file and over all ticks.
//!
//! Back to back, the sync thread syncs less often than once per tick, so
//! its cost is given per sync; at 1 Hz with `--sync 1s` there is one per
//! tick. After the NVML run, what `/metrics` costs on its tick: a publish,
//! a scrape in process and over HTTP, and the longest publish while a
//! thread scrapes back to back. `APRON_BENCH_RUNS` (comma-separated: `inproc`, `external`; default
//! both) picks the parts to run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use apron_recorder::source::nvml::NvmlSource;
use apron_schemas::DataLayout;
use apron_store::source::sim::SimHost;
use apron_store::source::{Source, Tick};
use apron_store::writer::RollingWriter;

const INTERVAL_MS: u64 = 100;
const WARMUP: Duration = Duration::from_secs(3);

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

fn main() {
    let secs: u64 = std::env::var("APRON_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let recorder = PathBuf::from(env!("CARGO_BIN_EXE_apron-recorder"));
    let fake = build_fake_nvml();

    let mut sleepers: Vec<Child> =
        (0..16).map(|_| Command::new("sleep").arg("3600").spawn().expect("sleep starts")).collect();
    let pids: Vec<u32> = sleepers.iter().map(Child::id).collect();
    let gpus: Vec<String> = (0..8)
        .map(|g| {
            let (a, b) = (pids[2 * g], pids[2 * g + 1]);
            format!(
                "uuid=GPU-bench-{g},name=NVIDIA H100 80GB HBM3,util=55,mem_util=30,fb_total=85899345920,\
                 fb_used=20000000000,power=350000,power_limit=700000,energy=1000000000,energy_step=35000,\
                 sm_clock=1755,temp=60,pcie_tx=1000,pcie_rx=20000,gpm=1,gpm_sm=50,gpm_occ=30,gpm_tensor=20,\
                 gpm_dram=40,compute={a}:8589934592|{b}:4294967296,putil={a}:40:20|{b}:15:10"
            )
        })
        .collect();

    let runs = std::env::var("APRON_BENCH_RUNS").unwrap_or_else(|_| "inproc,external".into());
    if runs.split(',').any(|r| r == "inproc") {
        let tmp = tempfile::tempdir().expect("tempdir");
        println!(
            "one tick in this process, 8 GPUs, {INPROC_TICKS} ticks back to back at 1 s of tick time \
             (after {INPROC_WARMUP} warm-up ticks), files closed every 10 minutes of tick time"
        );
        let mut sim = SimHost::new("bench", 8, 1, INPROC_START_MS);
        report_in_process("simulated host", &in_process(&mut sim, &tmp.path().join("sim")));
        // SAFETY: no other thread runs yet (the in-process simulated run's
        // threads have ended with its writer), and the fake reads its GPUs
        // from the environment when NVML is initialised below.
        unsafe { std::env::set_var("FAKE_NVML_GPUS", gpus.join(";")) };
        let mut nvml = NvmlSource::open("bench".into(), Some(&fake)).expect("the fake NVML opens");
        report_in_process(
            "NVML path (fake libnvidia-ml, 16 processes)",
            &in_process(&mut nvml, &tmp.path().join("nvml")),
        );
        metrics_costs(&mut nvml);
    }
    if !runs.split(',').any(|r| r == "external") {
        for s in &mut sleepers {
            let _ = s.kill();
            let _ = s.wait();
        }
        return;
    }
    println!(
        "apron-recorder steady state, {secs} s per run at {INTERVAL_MS} ms ticks (after {WARMUP:?} warm-up)"
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let nvml = run(&recorder, &tmp.path().join("nvml"), secs, |cmd| {
        cmd.args(["--source", "nvml", "--nvml-lib"]).arg(&fake).env("FAKE_NVML_GPUS", gpus.join(";"));
    });
    report("NVML path (fake libnvidia-ml, 8 GPUs, 16 processes)", &nvml);
    let sim = run(&recorder, &tmp.path().join("sim"), secs, |cmd| {
        cmd.args(["--source", "sim", "--sim-gpus", "8"]);
    });
    report("simulated host (8 GPUs)", &sim);
    for (what, extra) in [
        ("NVML path, PCIe call 20 ms, byte counters present", ",pcie_latency_ms=20"),
        ("NVML path, PCIe call 20 ms, no byte counters", ",pcie_latency_ms=20,unsupported=pcie_counters"),
    ] {
        let slow: Vec<String> = gpus.iter().map(|g| format!("{g}{extra}")).collect();
        let dir = tmp.path().join(what.replace([' ', ',', '.'], "_"));
        let figures = run(&recorder, &dir, secs, |cmd| {
            cmd.args(["--source", "nvml", "--nvml-lib"]).arg(&fake).env("FAKE_NVML_GPUS", slow.join(";"));
        });
        report(what, &figures);
    }
    let hung: Vec<String> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| if i == 0 { format!("{g},hang_after=3") } else { g.clone() })
        .collect();
    let figures = run(&recorder, &tmp.path().join("hung"), secs, |cmd| {
        cmd.args(["--source", "nvml", "--nvml-lib"]).arg(&fake).env("FAKE_NVML_GPUS", hung.join(";"));
    });
    report("NVML path, one GPU hung after its third answer", &figures);
    for s in &mut sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
}

/// What `/metrics` costs, on a tick of `source` (8 GPUs, 16 processes):
/// the tick's publish (minute states and the copy), a scrape in process
/// (the copy out and the rendering), a scrape over HTTP from another
/// thread, and the longest publish while a thread scrapes back to back.
fn metrics_costs(source: &mut dyn Source) {
    use apron_recorder::metrics::{Health, MetricsServer, Publisher, render};
    let mut tick = Tick::default();
    source.sample(INPROC_START_MS, 1_000, &mut tick);
    let health = Health::default();
    let mut publisher = Publisher::detached("bench", 5.0);
    const PUBLISHES: i64 = 100_000;
    let t0 = Instant::now();
    for i in 0..PUBLISHES {
        publisher.publish(INPROC_START_MS + i * 1_000, &tick, &health);
    }
    let publish_us = t0.elapsed().as_secs_f64() * 1e6 / PUBLISHES as f64;
    let mut text = String::new();
    const RENDERS: u32 = 10_000;
    let t0 = Instant::now();
    for _ in 0..RENDERS {
        let snapshot = publisher.snapshot();
        text.clear();
        render(&snapshot, &mut text);
    }
    let render_us = t0.elapsed().as_secs_f64() * 1e6 / f64::from(RENDERS);

    let (server, mut live) = MetricsServer::start(
        "127.0.0.1:0".parse().expect("an address"),
        "bench",
        Vec::new(),
        std::env::temp_dir(),
        5.0,
    )
    .expect("the metrics server starts");
    live.publish(INPROC_START_MS, &tick, &health);
    let addr = server.addr();
    let get = move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).expect("connects");
        stream.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").expect("sends");
        let mut body = Vec::new();
        stream.read_to_end(&mut body).expect("reads");
        body.len()
    };
    const GETS: u32 = 2_000;
    let mut times: Vec<f64> = (0..GETS)
        .map(|_| {
            let t = Instant::now();
            get();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let bytes = get();
    // Publishing while a thread scrapes back to back: a tick never waits.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let scraping = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                get();
                n += 1;
            }
            n
        })
    };
    let (mut worst_us, mut publishes) = (0.0f64, 0i64);
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let t = Instant::now();
        live.publish(INPROC_START_MS + (publishes + 1) * 1_000, &tick, &health);
        worst_us = worst_us.max(t.elapsed().as_secs_f64() * 1e6);
        publishes += 1;
        sleep(Duration::from_micros(200));
    }
    stop.store(true, Ordering::Relaxed);
    let scrapes = scraping.join().expect("the scraping thread");
    drop(server);
    println!(
        "  /metrics, {} GPUs and {} processes: publish {publish_us:.2} µs per tick; scrape in process (copy out + render) {render_us:.1} µs; over HTTP from another thread {:.0} µs median, {:.0} µs p99 ({bytes} bytes); publishing while scraped back to back ({scrapes} scrapes): longest publish {worst_us:.1} µs of {publishes}",
        tick.gpus.len(),
        tick.procs.len(),
        times[times.len() / 2],
        times[times.len() * 99 / 100],
    );
}

/// Ticks measured in process, after [`INPROC_WARMUP`]: 5 hours of tick
/// time at 1 s, thirty files; enough CPU that the kernel's sampled split of
/// it into user and kernel time has a few hundred samples.
const INPROC_TICKS: u64 = 18_000;

/// Ticks before the measurement: the first file, so the second file's
/// buffers are sized.
const INPROC_WARMUP: u64 = 600;

/// The first tick in process: 2026-12-01T00:00:00Z, on a file boundary.
const INPROC_START_MS: i64 = 1_796_083_200_000;

/// What the ticks in process cost.
struct InProcess {
    ticks: u64,
    /// getrusage(RUSAGE_SELF) over the ticks, µs per tick.
    user_us: f64,
    sys_us: f64,
    /// Per thread group (tick thread, GPU threads, WAL sync): (user + kernel
    /// µs from schedstat, user clock ticks, kernel clock ticks).
    threads: BTreeMap<&'static str, (f64, u64, u64)>,
    syncs: u64,
    gpu_rows_per_tick: f64,
    proc_rows_per_tick: f64,
    /// Allocations per tick of the ticks that closed no file, and of all.
    steady_allocs: f64,
    all_allocs: f64,
    /// Files closed during the measurement.
    closes: u64,
}

/// Runs [`INPROC_WARMUP`] then [`INPROC_TICKS`] ticks of `source` into a
/// writer with a WAL under `data`, as the tick loop does (without its
/// sleep), and measures the latter.
fn in_process(source: &mut dyn Source, data: &Path) -> InProcess {
    let mut writer = RollingWriter::new(DataLayout::new(data), "bench", Duration::from_secs(600))
        .expect("writer")
        .with_wal(Duration::from_secs(1))
        .expect("WAL");
    let mut tick = Tick::default();
    let mut one = |i: u64, writer: &mut RollingWriter, tick: &mut Tick| {
        let ts = INPROC_START_MS + i64::try_from(i).expect("small") * 1_000;
        tick.clear();
        source.sample(ts, 1_000, tick);
        writer.push(ts, tick).expect("the disk takes the rows");
    };
    for i in 0..INPROC_WARMUP {
        one(i, &mut writer, &mut tick);
    }
    let (usage0, threads0) = (rusage(), thread_cpu());
    let (files0, syncs0) = (writer.stats().files, writer.wal_stats().unwrap_or_default().syncs);
    let (mut steady_allocs, mut steady_ticks, mut rows) = (0u64, 0u64, (0usize, 0usize));
    let all0 = ALLOCATIONS.load(Ordering::Relaxed);
    for i in INPROC_WARMUP..INPROC_WARMUP + INPROC_TICKS {
        let (before, files) = (ALLOCATIONS.load(Ordering::Relaxed), writer.stats().files);
        one(i, &mut writer, &mut tick);
        if writer.stats().files == files {
            steady_allocs += ALLOCATIONS.load(Ordering::Relaxed) - before;
            steady_ticks += 1;
        }
        rows = (rows.0 + tick.gpus.len(), rows.1 + tick.procs.len());
    }
    let all = ALLOCATIONS.load(Ordering::Relaxed) - all0;
    let (usage1, threads1) = (rusage(), thread_cpu());
    let closes = (writer.stats().files - files0) / 4;
    let syncs = writer.wal_stats().unwrap_or_default().syncs - syncs0;
    writer.close().expect("close");
    let n = INPROC_TICKS as f64;
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    let mut threads = BTreeMap::new();
    for (group, (ns, ut, st)) in threads1 {
        let (ns0, ut0, st0) = threads0.get(group).copied().unwrap_or_default();
        threads.insert(group, ((ns - ns0) as f64 / 1e3, ut - ut0, st - st0));
    }
    InProcess {
        ticks: INPROC_TICKS,
        user_us: (us(usage1.ru_utime) - us(usage0.ru_utime)) / n,
        sys_us: (us(usage1.ru_stime) - us(usage0.ru_stime)) / n,
        threads,
        syncs,
        gpu_rows_per_tick: rows.0 as f64 / n,
        proc_rows_per_tick: rows.1 as f64 / n,
        steady_allocs: steady_allocs as f64 / steady_ticks.max(1) as f64,
        all_allocs: all as f64 / n,
        closes,
    }
}

fn report_in_process(what: &str, f: &InProcess) {
    let n = f.ticks as f64;
    let per = |group: &str| f.threads.get(group).map_or(0.0, |t| t.0 / n);
    let clock = |group: &str| {
        f.threads
            .get(group)
            .map_or_else(String::new, |t| format!(" ({} user / {} kernel clock ticks)", t.1, t.2))
    };
    let sync_each = f.threads.get("wal-sync").map_or(0.0, |t| t.0 / f.syncs.max(1) as f64);
    println!(
        "  {what}: {:.1} µs CPU per tick ({:.1} µs user + {:.1} µs kernel), {:.1} GPU rows and {:.1} process rows per tick, {} files closed",
        f.user_us + f.sys_us,
        f.user_us,
        f.sys_us,
        f.gpu_rows_per_tick,
        f.proc_rows_per_tick,
        f.closes
    );
    println!(
        "    by thread, per tick: tick thread {:.1} µs{}, NVML sampling threads {:.1} µs{}; WAL sync thread {:.0} µs per sync ({} syncs){}",
        per("tick"),
        clock("tick"),
        per("nvml-lane"),
        clock("nvml-lane"),
        sync_each,
        f.syncs,
        clock("wal-sync")
    );
    println!(
        "    at 1 Hz with --sync 1s (one sync per tick): {:.1} µs CPU per tick; allocations per tick: {:.2} (ticks that close no file), {:.1} (all ticks)",
        per("tick") + per("nvml-lane") + sync_each,
        f.steady_allocs,
        f.all_allocs
    );
}

fn rusage() -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage of this process into a valid pointer.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    usage
}

/// CPU of this process's threads so far, by group: the WAL's sync thread
/// (`wal-sync`), the NVML sampling threads (`nvml-lane`), the rest (`tick`,
/// this thread; the others sleep): (schedstat ns, utime, stime in clock
/// ticks).
fn thread_cpu() -> BTreeMap<&'static str, (u64, u64, u64)> {
    let mut out: BTreeMap<&'static str, (u64, u64, u64)> = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let read = |name: &str| std::fs::read_to_string(task.path().join(name)).unwrap_or_default();
        let comm = read("comm");
        let group = if comm.starts_with("apron-wal-sync") {
            "wal-sync"
        } else if comm.starts_with("nvml-lane") {
            "nvml-lane"
        } else {
            "tick"
        };
        let ns: u64 = read("schedstat").split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let stat = read("stat");
        let fields: Vec<&str> =
            stat.rsplit_once(") ").map(|(_, f)| f.split(' ').collect()).unwrap_or_default();
        let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let e = out.entry(group).or_default();
        *e = (e.0 + ns, e.1 + field(11), e.2 + field(12));
    }
    out
}

struct Figures {
    ticks: f64,
    cpu_us_per_tick: f64,
    peak_rss_kb: u64,
    rss_kb: u64,
    proc_rows_per_tick: f64,
    /// The longest tick's sampling, wall time, from the last health line.
    sample_ms_max: f64,
    /// Ticks missed, from the last health line.
    missed_ticks: f64,
    /// From SIGTERM to the recorder's exit, wall time.
    stop_ms: f64,
}

fn report(what: &str, f: &Figures) {
    println!(
        "  {what}: {:.1} µs CPU per tick over {:.0} ticks, {:.1} process rows per tick; RSS {:.1} MB (peak {:.1} MB); longest tick {:.1} ms wall, {} ticks missed; stopped {:.0} ms after SIGTERM",
        f.cpu_us_per_tick,
        f.ticks,
        f.proc_rows_per_tick,
        f.rss_kb as f64 / 1024.0,
        f.peak_rss_kb as f64 / 1024.0,
        f.sample_ms_max,
        f.missed_ticks,
        f.stop_ms
    );
}

#[expect(clippy::zombie_processes, reason = "the child is reaped by waitpid")]
fn run(recorder: &Path, data: &Path, secs: u64, configure: impl FnOnce(&mut Command)) -> Figures {
    std::fs::create_dir_all(data).expect("data folder");
    let log_path = data.join("recorder.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut cmd = Command::new(recorder);
    cmd.arg("--data")
        .arg(data)
        .args(["--host", "bench", "--interval", &format!("{INTERVAL_MS}ms"), "--rotate", "1m"])
        .args(["--health-every", "1s"])
        .env("APRON_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    configure(&mut cmd);
    let child = cmd.spawn().expect("the recorder starts");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    sleep(WARMUP);
    let (cpu0, t0) = (cpu_ns(child.id()), Instant::now());
    sleep(Duration::from_secs(secs));
    let (cpu1, elapsed) = (cpu_ns(child.id()), t0.elapsed());
    let (rss_kb, peak_rss_kb) = rss(child.id());
    // SAFETY: kill(2) on the child started above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let stopping = Instant::now();
    let mut status = 0;
    // SAFETY: waitpid on our own child, with a valid pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid, "waitpid");
    let stop_ms = stopping.elapsed().as_secs_f64() * 1e3;
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the recorder failed");
    let ticks = elapsed.as_secs_f64() * 1000.0 / INTERVAL_MS as f64;
    let cpu_s = (cpu1 - cpu0) as f64 / 1e9;
    Figures {
        ticks,
        cpu_us_per_tick: cpu_s * 1e6 / ticks,
        peak_rss_kb,
        rss_kb,
        proc_rows_per_tick: proc_rows(data) as f64 / gpu_rows(data).max(1) as f64 * 8.0,
        sample_ms_max: health_field(&log_path, "sample_ms_max"),
        missed_ticks: health_field(&log_path, "missed_ticks"),
        stop_ms,
    }
}

/// A number of the last health line in the recorder's log; NaN if absent.
fn health_field(log: &Path, name: &str) -> f64 {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let Some(line) = text.lines().rfind(|l| l.contains(" health")) else { return f64::NAN };
    let key = format!(" {name}=");
    line.find(&key)
        .and_then(|at| line[at + key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU time of every thread of `pid` so far, in nanoseconds (schedstat:
/// nanosecond resolution, where utime/stime count 10 ms clock ticks).
fn cpu_ns(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task");
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

/// (VmRSS, VmHWM) of `pid`, in kB.
fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
    let get = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (get("VmRSS:"), get("VmHWM:"))
}

fn count_rows(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let file = std::fs::File::open(&p).expect("open");
                let reader = parquet::file::reader::SerializedFileReader::new(file).expect("parquet");
                n += u64::try_from(
                    parquet::file::reader::FileReader::metadata(&reader).file_metadata().num_rows(),
                )
                .unwrap_or(0);
            }
        }
    }
    n
}

fn gpu_rows(data: &Path) -> u64 {
    count_rows(&data.join("gpu_samples"))
}

fn proc_rows(data: &Path) -> u64 {
    count_rows(&data.join("proc_samples"))
}

/// Builds the fake NVML in release next to this benchmark's binaries.
fn build_fake_nvml() -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let profile = exe.parent().and_then(Path::parent).expect("<target>/<profile>/deps").to_path_buf();
    let target = profile.parent().expect("target folder");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "fake-nvml", "--target-dir"]).arg(target);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    assert!(cmd.status().expect("cargo runs").success(), "building the fake NVML failed");
    profile.join("libfake_nvml.so")
}
