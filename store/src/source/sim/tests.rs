//! Tests of the simulated fleet as a whole: determinism, layout, and a
//! simulated week checked row by row for what the personas must produce.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use apron_schemas::{AllocSample, GpuSample, ProcSample};

use super::*;

/// 2026-11-30 00:00 UTC, a Monday.
const MONDAY: i64 = 1_795_996_800_000;
const MIN: i64 = 60_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
const GIB: i64 = 1 << 30;

/// Samples every host at `from, from + step, …` before `to`, handing each
/// tick to `f`.
fn run(hosts: &mut [SimHost], from: i64, to: i64, step: i64, mut f: impl FnMut(&SimHost, &Tick)) {
    let mut tick = Tick::default();
    for ts in (from..to).step_by(step as usize) {
        for host in hosts.iter_mut() {
            tick.clear();
            host.sample(ts, step as i32, &mut tick);
            f(host, &tick);
        }
    }
}

fn collect(gpus: usize, seed: u64, from: i64, to: i64, step: i64) -> (Vec<GpuSample>, Vec<ProcSample>) {
    let mut hosts = SimFleet::new(gpus, seed, from).into_hosts();
    let (mut g, mut p) = (Vec::new(), Vec::new());
    run(&mut hosts, from, to, step, |_, t| {
        g.extend_from_slice(&t.gpus);
        p.extend_from_slice(&t.procs);
    });
    (g, p)
}

#[test]
fn same_seed_gives_the_same_rows() {
    let a = collect(16, 7, MONDAY, MONDAY + DAY, 5 * MIN);
    let b = collect(16, 7, MONDAY, MONDAY + DAY, 5 * MIN);
    assert_eq!(a.0.len(), 16 * 288);
    assert!(!a.1.is_empty());
    assert!(a == b, "same seed, same rows");

    let c = collect(16, 8, MONDAY, MONDAY + DAY, 5 * MIN);
    let uuids = |rows: &[GpuSample]| rows.iter().map(|r| r.gpu_uuid.clone()).collect::<BTreeSet<_>>();
    assert!(uuids(&a.0).is_disjoint(&uuids(&c.0)), "another seed, other GPUs");
    let utils = |rows: &[GpuSample]| rows.iter().map(|r| r.gpu_util_pct).collect::<Vec<_>>();
    assert_ne!(utils(&a.0), utils(&c.0), "another seed, another workload");

    let one = |seed| {
        let mut h = SimHost::new("lab-box", 3, seed, MONDAY);
        let mut tick = Tick::default();
        h.sample(MONDAY + HOUR, 1_000, &mut tick);
        (h.gpu_model().to_owned(), tick.gpus, tick.procs)
    };
    assert_eq!(one(3), one(3));
    assert_eq!(one(3).1.len(), 3);
}

/// The workload is a function of the seed and the time: sampling every 10 s
/// or every 60 s shows the same processes and the same utilization at the
/// shared ticks (only the lagging temperature and the energy counter's
/// start differ).
#[test]
fn rows_do_not_depend_on_which_ticks_were_sampled() {
    // 8 GPUs: one host; 24: three, the third partitioned.
    for gpus in [8, 24] {
        rows_at_shared_ticks_agree(gpus);
    }
}

fn rows_at_shared_ticks_agree(gpus: usize) {
    let fine = collect(gpus, 11, MONDAY, MONDAY + 12 * HOUR, 10_000);
    let coarse = collect(gpus, 11, MONDAY, MONDAY + 12 * HOUR, 60_000);
    assert_eq!(coarse.0.len(), (gpus + if gpus > 16 { 15 } else { 0 }) * 720);
    let index: HashMap<(i64, &str), &GpuSample> = fine.0.iter().map(|r| ((r.ts, &*r.gpu_uuid), r)).collect();
    for r in &coarse.0 {
        let f = index[&(r.ts, &*r.gpu_uuid)];
        let strip = |s: &GpuSample| GpuSample { temp_c: None, energy_mj: None, interval_ms: 0, ..s.clone() };
        assert_eq!(strip(f), strip(r));
    }
    let procs = |rows: &[ProcSample]| {
        rows.iter()
            .filter(|p| p.ts % 60_000 == 0)
            .map(|p| ProcSample { interval_ms: 0, ..p.clone() })
            .collect::<Vec<_>>()
    };
    assert_eq!(procs(&fine.1), procs(&coarse.1));
}

/// Sampling GPU by GPU gives the rows sampling tick by tick gives, in file
/// order, and leaves the host where tick by tick would: the next span, and
/// the next tick after it, are the same both ways (a host of eight GPUs,
/// whose GPUs share one workload: DDP jobs span them, pids are the host's;
/// and the partitioned host, whose GPUs' rows sum their instances' work:
/// 8 GPUs and 15 instances, each a row of its own).
#[test]
fn sampling_gpu_by_gpu_gives_the_rows_of_sampling_tick_by_tick() {
    for (n, rows_per_tick) in [(0, 8), (2, 8 + 15)] {
        gpu_by_gpu_is_tick_by_tick(n, rows_per_tick);
    }
}

fn gpu_by_gpu_is_tick_by_tick(n: usize, rows_per_tick: i64) {
    let step = 20_000;
    let mut by_tick = SimFleet::host(32, 5, MONDAY, n);
    let mut by_gpu = SimFleet::host(32, 5, MONDAY, n);
    let key = |g: &GpuSample| (g.gpu_uuid.clone(), g.ts);
    let pkey = |p: &ProcSample| (p.gpu_uuid.clone(), p.ts, p.pid);
    for (from, to) in [(MONDAY, MONDAY + 10 * HOUR), (MONDAY + 10 * HOUR, MONDAY + DAY)] {
        let (mut want_g, mut want_p, mut want_a) = (Vec::new(), Vec::new(), Vec::new());
        run(std::slice::from_mut(&mut by_tick), from, to, step, |_, t| {
            want_g.extend_from_slice(&t.gpus);
            want_p.extend_from_slice(&t.procs);
            want_a.extend_from_slice(&t.allocations);
        });
        let (mut got_g, mut got_p, mut got_a) = (Vec::new(), Vec::new(), Vec::new());
        let mut emitted = 0;
        let ticks = (from..to).step_by(step as usize);
        by_gpu
            .sample_by_gpu(ticks, step as i32, |t| {
                emitted += 1;
                assert_eq!(t.gpus.len(), 1, "one GPU at a time");
                got_g.append(&mut t.gpus);
                got_p.append(&mut t.procs);
                got_a.append(&mut t.allocations);
                Ok::<(), ()>(())
            })
            .expect("emit never fails here");
        assert_eq!(emitted, rows_per_tick * (to - from) / step);
        assert!(got_g.is_sorted_by_key(key), "GPU rows come in (gpu_uuid, ts) order");
        assert!(got_p.is_sorted_by_key(|p| (p.gpu_uuid.clone(), p.ts)), "so do process rows");
        want_g.sort_by_key(key);
        want_p.sort_by_key(pkey);
        got_p.sort_by_key(pkey);
        assert!(got_g == want_g, "the same GPU rows");
        assert!(got_p == want_p, "the same process rows");
        assert!(!want_p.is_empty(), "processes to compare");
        let akey = |a: &AllocSample| (a.gpu_uuid.clone(), a.ts, a.holder.clone());
        want_a.sort_by_key(akey);
        got_a.sort_by_key(akey);
        assert!(got_a == want_a, "the same allocations");
        assert!(!want_a.is_empty(), "allocations to compare");
    }
    let (mut a, mut b) = (Tick::default(), Tick::default());
    by_tick.sample(MONDAY + DAY, step as i32, &mut a);
    by_gpu.sample(MONDAY + DAY, step as i32, &mut b);
    assert!(
        a.gpus == b.gpus && a.procs == b.procs && a.allocations == b.allocations,
        "the host is left where tick by tick leaves it"
    );
}

#[test]
fn fleet_is_hosts_of_eight_with_real_gpu_names() {
    let mut hosts = SimFleet::new(20, 1, MONDAY).into_hosts();
    let names: Vec<&str> = hosts.iter().map(|h| h.host()).collect();
    assert_eq!(names, ["gpu-node01", "gpu-node02", "gpu-node03"]);
    let models: Vec<&str> = hosts.iter().map(|h| h.gpu_model()).collect();
    assert_eq!(models, ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]);
    let mut uuids = BTreeSet::new();
    let mut per_host = Vec::new();
    run(&mut hosts, MONDAY, MONDAY + 1, 1_000, |host, tick| {
        // The GPUs, not the MIG instances of the third host's (see
        // `a_partitioned_host_gives_a_row_per_gpu_and_per_instance`).
        let gpus: Vec<&GpuSample> = tick.gpus.iter().filter(|g| g.parent_gpu_uuid.is_none()).collect();
        per_host.push(gpus.len());
        for (i, g) in gpus.into_iter().enumerate() {
            assert_eq!(g.gpu_index, i as i32);
            assert_eq!(g.gpu_model.as_deref(), Some(host.gpu_model()));
            let (fb, limit) = match host.gpu_model() {
                "NVIDIA H100 80GB HBM3" => (81_559, 700_000),
                "NVIDIA A100-SXM4-80GB" => (81_920, 400_000),
                _ => (46_068, 350_000),
            };
            assert_eq!(g.fb_total_bytes, Some(fb << 20));
            assert_eq!(g.power_limit_mw, Some(limit));
            let u = &g.gpu_uuid;
            let groups: Vec<usize> = u.trim_start_matches("GPU-").split('-').map(str::len).collect();
            assert!(u.starts_with("GPU-") && groups == [8, 4, 4, 4, 12], "{u}");
            assert!(u[4..].chars().all(|c| c == '-' || c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
            uuids.insert(u.clone());
        }
    });
    assert_eq!(per_host, [8, 8, 4]);
    assert_eq!(uuids.len(), 20);
    // The same GPU keeps its UUID whatever the start.
    let again = SimFleet::new(20, 1, MONDAY - 3 * DAY).into_hosts();
    let mut tick = Tick::default();
    let mut h = again.into_iter().next().expect("a host");
    h.sample(MONDAY, 1_000, &mut tick);
    assert!(tick.gpus.iter().all(|g| uuids.contains(&g.gpu_uuid)));
    assert!(hosts[2].instances.len() == 15 && hosts[0].instances.is_empty());
    assert!(SimFleet::new(0, 1, MONDAY).into_hosts().is_empty());
    assert_eq!(teams().len(), 6);
}

/// What the week test gathers about one process.
#[derive(Default)]
struct ProcLife {
    first: i64,
    last: i64,
    samples: i64,
    max_sm: i32,
    idle_samples: i64,
    min_mem: i64,
    /// Consecutive samples at 0 % up to the last one seen.
    idle_run: i64,
}

/// What a simulated week showed.
#[derive(Debug)]
struct Week {
    /// GPUs with a two-hour stretch above 80 %, and with none for two hours.
    busy_gpus: usize,
    empty_gpus: usize,
    /// Share of samples under 5 % in office hours, weekday nights, weekends,
    /// and overall.
    idle_office: f64,
    idle_night: f64,
    idle_weekend: f64,
    idle_all: f64,
    /// Processes that started, and ended, within the week.
    started: usize,
    ended: usize,
    /// Processes that held ≥ 1 GiB for ≥ 12 h at ≤ 2 % (notebooks), and that
    /// ran > 50 % and then held ≥ 1 GiB at 0 % for ≥ 1 h until the end (zombies).
    notebooks: usize,
    zombies: usize,
    /// (Tick, job) pairs with ranks on several GPUs.
    gang_ticks: usize,
    /// GPU samples under 50 % with PCIe RX above 15 % of the bus.
    starved_rows: usize,
    k8s_rows: usize,
    slurm_rows: usize,
    bare_rows: usize,
}

/// Simulates a week of 16 GPUs at one sample a minute from a Monday,
/// checking every row as it comes, and sums up what it showed.
fn week(seed: u64) -> Week {
    let from = MONDAY;
    let to = MONDAY + 7 * DAY;
    let step = MIN;
    let mut hosts = SimFleet::new(16, seed, from).into_hosts();

    // Per GPU: (ts, util, procs on it) for the stretch checks.
    let mut series: BTreeMap<String, Vec<(i64, i32, usize)>> = BTreeMap::new();
    let mut last_energy: HashMap<String, i64> = HashMap::new();
    let mut lives: HashMap<(i32, i64), ProcLife> = HashMap::new();
    let mut gang_ticks = 0;
    let mut starved_rows = 0;
    let (mut k8s_rows, mut slurm_rows, mut bare_rows) = (0, 0, 0);
    let (mut energy_sum, mut power_sum) = (0i64, 0i64);

    run(&mut hosts, from, to, step, |host, tick| {
        let model = host.model;
        assert_eq!(tick.gpus.len(), 8);
        let mut jobs_on: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for g in &tick.gpus {
            let util = g.gpu_util_pct.expect("util");
            let mem_util = g.mem_util_pct.expect("mem util");
            let power = g.power_mw.expect("power");
            let fb_used = g.fb_used_bytes.expect("fb used");
            let temp = g.temp_c.expect("temp");
            let clock = g.sm_clock_mhz.expect("clock");
            let rx = g.pcie_rx_bytes_per_s.expect("rx");
            let tx = g.pcie_tx_bytes_per_s.expect("tx");
            assert!((0..=100).contains(&util) && (0..=100).contains(&mem_util), "{g:?}");
            assert!(power as f32 >= model.idle_mw * 0.98 && power <= model.power_limit_mw, "{g:?}");
            assert!((0..=g.fb_total_bytes.expect("fb")).contains(&fb_used));
            assert!((20..=90).contains(&temp), "{g:?}");
            assert!((model.sm_clock_idle_mhz - 15..=model.sm_clock_max_mhz).contains(&clock), "{g:?}");
            assert!((0..=50_000_000_000).contains(&rx) && (0..=50_000_000_000).contains(&tx));
            assert_eq!(rx % 1_024, 0, "NVML counts PCIe in KiB/s");
            assert_eq!(g.enc_util_pct, Some(0));
            assert!((0..=100).contains(&g.dec_util_pct.expect("dec")));
            for gpm in [
                g.sm_active_pct,
                g.sm_occupancy_pct,
                g.tensor_active_pct,
                g.dram_active_pct,
                g.gr_engine_active_pct,
            ] {
                assert_eq!(gpm.is_some(), model.gpm);
                assert!(gpm.is_none_or(|v| (0.0..=100.0).contains(&v)));
            }
            if let (Some(gr), Some(sm)) = (g.gr_engine_active_pct, g.sm_active_pct) {
                assert!(gr + 0.1 >= sm, "the engine is busy whenever SMs are: {g:?}");
            }
            if util == 0 {
                assert_eq!(g.clock_event_reasons, Some(1), "idle GPUs say so");
                assert_eq!(clock, model.sm_clock_idle_mhz, "idle GPUs drop their clocks");
            }
            if util < 50 && rx as f32 > 0.15 * model.pcie_max_bytes_per_s {
                starved_rows += 1;
            }

            let energy = g.energy_mj.expect("energy");
            if let Some(prev) = last_energy.insert(g.gpu_uuid.to_string(), energy) {
                let delta = energy - prev;
                let expected = i64::from(power) * step / 1_000;
                assert!(delta > 0, "the energy counter only grows");
                let off = (delta - expected).abs() as f64 / expected as f64;
                assert!(off < 0.025, "energy delta {delta} vs power × interval {expected}");
                energy_sum += delta;
                power_sum += expected;
            }

            let procs: Vec<&ProcSample> = tick.procs.iter().filter(|p| p.gpu_uuid == g.gpu_uuid).collect();
            let held: i64 = procs.iter().map(|p| p.used_mem_bytes.expect("mem")).sum();
            assert!(fb_used >= held, "fb_used {fb_used} < processes' {held}");
            if procs.is_empty() {
                assert!(fb_used < 8 << 20, "no context, (almost) no memory: {fb_used}");
            } else {
                assert!((400 << 20..800 << 20).contains(&(fb_used - held)), "context overhead");
            }
            let sm: i32 = procs.iter().map(|p| p.sm_util_pct.expect("sm")).sum();
            assert!((sm - util).abs() <= procs.len() as i32, "processes' sm {sm} vs GPU {util}");
            series.entry(g.gpu_uuid.to_string()).or_default().push((g.ts, util, procs.len()));
        }
        for p in &tick.procs {
            assert!(tick.gpus.iter().any(|g| g.gpu_uuid == p.gpu_uuid && g.ts == p.ts));
            let id = &p.identity;
            assert!(org::team_of(id).is_some(), "every process belongs to a team: {id:?}");
            match (&id.k8s_namespace, &id.slurm_job_id) {
                (Some(_), _) => k8s_rows += 1,
                (None, Some(_)) => slurm_rows += 1,
                (None, None) => bare_rows += 1,
            }
            if let Some(job) = id.slurm_job_id.as_deref().or(id.k8s_pod_uid.as_deref()) {
                jobs_on.entry(job).or_default().insert(&p.gpu_uuid);
            }
            let start = id.proc_start.expect("proc_start");
            assert!(start <= p.ts);
            let mem = p.used_mem_bytes.expect("mem");
            let sm = p.sm_util_pct.expect("sm");
            let life = lives.entry((p.pid, start)).or_insert(ProcLife {
                first: p.ts,
                min_mem: mem,
                ..Default::default()
            });
            life.last = p.ts;
            life.samples += 1;
            life.max_sm = life.max_sm.max(sm);
            life.min_mem = life.min_mem.min(mem);
            life.idle_samples += i64::from(sm <= 2);
            life.idle_run = if sm == 0 { life.idle_run + 1 } else { 0 };
        }
        gang_ticks += jobs_on.values().filter(|gpus| gpus.len() >= 2).count();
    });

    let (seconds, power_seconds) = (energy_sum as f64, power_sum as f64);
    assert!((seconds / power_seconds - 1.0).abs() < 0.002, "energy matches power × time over the week");

    // Busy: a two-hour stretch above 80 %; empty: no process for two hours.
    let window = (2 * HOUR / step) as usize;
    let busy_gpus = series
        .values()
        .filter(|s| s.windows(window).any(|w| w.iter().map(|x| x.1).sum::<i32>() > 80 * window as i32))
        .count();
    let empty_gpus =
        series.values().filter(|s| s.windows(window).any(|w| w.iter().all(|x| x.2 == 0 && x.1 == 0))).count();
    let idle_share = |pick: &dyn Fn(i64) -> bool| {
        let rows: Vec<i32> = series.values().flatten().filter(|x| pick(x.0)).map(|x| x.1).collect();
        rows.iter().filter(|&&u| u < 5).count() as f64 / rows.len() as f64
    };
    Week {
        busy_gpus,
        empty_gpus,
        idle_office: idle_share(&|t| calendar::weekday(t) < 5 && (10..17).contains(&calendar::hour(t))),
        idle_night: idle_share(&|t| calendar::weekday(t) < 5 && (1..6).contains(&calendar::hour(t))),
        idle_weekend: idle_share(&|t| calendar::weekday(t) >= 5),
        idle_all: idle_share(&|_| true),
        started: lives.values().filter(|l| l.first > from).count(),
        ended: lives.values().filter(|l| l.last < to - step).count(),
        notebooks: lives
            .values()
            .filter(|l| {
                l.last - l.first >= 12 * HOUR && l.idle_samples * 100 >= l.samples * 95 && l.min_mem >= GIB
            })
            .count(),
        zombies: lives.values().filter(|l| l.max_sm > 50 && l.idle_run >= 60 && l.min_mem >= GIB).count(),
        gang_ticks,
        starved_rows,
        k8s_rows,
        slurm_rows,
        bare_rows,
    }
}

fn assert_week(w: &Week) {
    assert!(w.busy_gpus >= 3, "GPUs ran a job at > 80 % for 2 h: {w:?}");
    assert!(w.empty_gpus >= 3, "GPUs sat empty for 2 h: {w:?}");
    assert!(w.idle_office < w.idle_night && w.idle_office < w.idle_weekend, "{w:?}");
    assert!((0.3..0.85).contains(&w.idle_all), "{w:?}");
    assert!(w.started >= 30 && w.ended >= 20, "processes start and end: {w:?}");
    assert!(w.notebooks >= 1, "notebooks: {w:?}");
    assert!(w.zombies >= 1, "zombies: {w:?}");
    assert!(w.gang_ticks > 0, "multi-GPU jobs: {w:?}");
    assert!(w.starved_rows > 30, "data-starved samples: {w:?}");
    assert!(w.k8s_rows > 0 && w.slurm_rows > 0 && w.bare_rows > 0, "{w:?}");
}

#[test]
fn a_week_shows_every_persona() {
    let w = week(42);
    println!("{w:#?}");
    assert_week(&w);
    // Numbers for this seed, so a change to the workload is a visible change.
    assert!(w.busy_gpus >= 4 && w.empty_gpus >= 4 && w.notebooks >= 2, "{w:?}");
    assert!(w.idle_office + 0.2 < w.idle_night && w.idle_office + 0.2 < w.idle_weekend, "{w:?}");
}

/// The week's personas are not an accident of one seed.
#[test]
#[ignore = "slow in debug builds: 20 simulated weeks"]
fn every_seed_shows_every_persona() {
    for seed in 0..20 {
        let w = week(seed);
        println!("seed {seed}: {w:?}");
        assert_week(&w);
    }
}

/// Over a month pids wrap around and get reused, with another start time.
#[test]
fn pids_get_reused_by_new_processes() {
    let mut hosts = vec![SimHost::new("gpu-solo", 8, 5, MONDAY)];
    let mut starts: HashMap<i32, BTreeSet<i64>> = HashMap::new();
    run(&mut hosts, MONDAY, MONDAY + 30 * DAY, 10 * MIN, |_, tick| {
        for p in &tick.procs {
            starts.entry(p.pid).or_default().insert(p.identity.proc_start.expect("start"));
        }
    });
    let reused = starts.values().filter(|s| s.len() > 1).count();
    assert!(reused > 0, "no pid reused among {} pids", starts.len());
}

/// Where the time of a simulated fleet's whole GPUs goes, by persona (run
/// with `--ignored --nocapture` when tuning the workload; the MIG
/// instances' share is in `a_partitioned_host_gives_a_row_per_gpu_and_per_instance`).
#[test]
#[ignore = "prints statistics for tuning"]
fn persona_shares() {
    let mut hosts = SimFleet::new(64, 1, MONDAY).into_hosts();
    let mut time: BTreeMap<String, i64> = BTreeMap::new();
    let mut util_sum = 0i64;
    let mut rows = 0i64;
    let mut tick = Tick::default();
    for ts in (MONDAY..MONDAY + 28 * DAY).step_by(5 * MIN as usize) {
        for h in hosts.iter_mut() {
            tick.clear();
            h.sample(ts, 300_000, &mut tick);
            let whole_rows = tick.gpus.iter().filter(|g| g.mig_total_slices.is_none());
            let whole =
                h.parts.iter().filter_map(|p| if let Part::Whole(slot) = p { Some(*slot) } else { None });
            for (slot, g) in whole.zip(whole_rows) {
                let kinds: BTreeSet<String> =
                    h.schedule.gpus[slot].procs.iter().map(|p| format!("{:?}", p.work.kind)).collect();
                let key = if kinds.is_empty() {
                    "(empty)".to_owned()
                } else {
                    kinds.into_iter().collect::<Vec<_>>().join("+")
                };
                *time.entry(key).or_default() += 1;
                util_sum += i64::from(g.gpu_util_pct.unwrap_or(0));
                rows += 1;
            }
        }
    }
    for (k, n) in &time {
        println!("{k:30} {:5.1} %", *n as f64 * 100.0 / rows as f64);
    }
    println!("mean util {:.1} %", util_sum as f64 / rows as f64);
}

/// Speed of `sample` in a release build: `cargo test -p apron-store
/// --release --lib -- --ignored --nocapture sample_speed`.
#[test]
#[ignore = "a timing, meaningful in release builds only"]
fn sample_speed() {
    let mut hosts = SimFleet::new(64, 1, MONDAY).into_hosts();
    let mut tick = Tick::default();
    let (mut gpu_rows, mut proc_rows) = (0usize, 0usize);
    let started = std::time::Instant::now();
    for ts in (MONDAY..MONDAY + 6 * HOUR).step_by(1_000) {
        for h in hosts.iter_mut() {
            tick.clear();
            h.sample(ts, 1_000, &mut tick);
            gpu_rows += tick.gpus.len();
            proc_rows += tick.procs.len();
        }
    }
    let elapsed = started.elapsed();
    println!(
        "{gpu_rows} gpu rows + {proc_rows} proc rows in {elapsed:.2?}: {:.0} ns per gpu row (with its proc rows), {:.2} M gpu rows/s",
        elapsed.as_nanos() as f64 / gpu_rows as f64,
        gpu_rows as f64 / elapsed.as_secs_f64() / 1e6
    );
}

/// Building a host replays two weeks of its history; the time grows about
/// linearly with its GPUs (a debug build: 1,000 GPUs 0.1 s, 8,000 GPUs
/// about 1 s; the quadratic schedule before took 4.8 s and 307 s).
#[test]
#[ignore = "a timing: cargo test -p apron-store --lib start_up_time -- --ignored --nocapture"]
fn start_up_time() {
    for gpus in [1_000usize, 8_000] {
        let t0 = std::time::Instant::now();
        let host = SimHost::new("speed-box", gpus, 1, MONDAY);
        println!("{gpus} simulated GPUs: {:.2} s to start", t0.elapsed().as_secs_f64());
        assert_eq!(host.sensors.len(), gpus);
    }
}

/// A stable hash of the rows `host` gives at `from, from + step, …` before
/// `to`: every column, through `Debug`. The claims a process makes about
/// itself (`claimed_*`), which the simulator never sets, and the pod names,
/// containers and partitions (named from values drawn already) are left
/// out of the text, so the hashes taken before those columns existed still
/// hold.
fn rows_hash(host: &mut SimHost, from: i64, to: i64, step: i64) -> u64 {
    const CLAIMS: &str =
        ", claimed_k8s_namespace: None, claimed_slurm_job_id: None, claimed_slurm_account: None";
    const LATER: &str = ", k8s_pod_name: None, k8s_container: None";
    const PARTITION: &str = ", slurm_partition: None";
    let mut h = 0u64;
    run(std::slice::from_mut(host), from, to, step, |_, t| {
        // Pod names and containers, which came later, are left out too.
        let procs: Vec<_> = t
            .procs
            .iter()
            .cloned()
            .map(|mut p| {
                p.identity.k8s_pod_name = None;
                p.identity.k8s_container = None;
                p
            })
            .collect();
        // `k8s_labels` came later, made of what was drawn already.
        let text =
            without_labels(&format!("{:?}{:?}", t.gpus, procs).replace(LATER, "").replace(PARTITION, ""));
        assert_eq!(text.matches("claimed_").count(), 3 * text.matches(CLAIMS).count(), "{text}");
        h = noise::mix(h ^ noise::fnv(&text.replace(CLAIMS, "")));
    });
    h
}

/// `text` without its `k8s_labels` fields (`, k8s_labels: None` or
/// `, k8s_labels: Some("…")`).
fn without_labels(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(", k8s_labels: ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + ", k8s_labels: ".len()..];
        rest = match after.strip_prefix("None") {
            Some(r) => r,
            None => after.find("\")").map_or("", |end| &after[end + 2..]),
        };
    }
    out.push_str(rest);
    out
}

/// Only the partitioned host changed when MIG came to the simulator: the
/// other hosts of a fleet, and hosts built alone, give the rows they gave
/// before, to the bit (the hashes were taken before the change). Any
/// change to the workload or the sensors changes these numbers too: then
/// update them on purpose, knowing that every simulated fleet changed.
#[test]
fn hosts_without_mig_give_the_rows_they_gave_before() {
    let fleet = [
        (0, 0x7aa1_b133_bf74_21e9u64),
        (1, 0xd258_0bf9_fb62_2bc7),
        (3, 0xe147_aee0_2baf_96db),
        (4, 0xdbcd_de16_2acf_d270),
    ];
    for (n, want) in fleet {
        let mut host = SimFleet::host(64, 9, MONDAY, n);
        assert!(host.instances.is_empty());
        assert_eq!(rows_hash(&mut host, MONDAY, MONDAY + 2 * DAY, 10 * MIN), want, "host {n}");
    }
    let mut solo = SimHost::new("lab-box", 8, 9, MONDAY);
    assert_eq!(
        rows_hash(&mut solo, MONDAY, MONDAY + 2 * DAY, 10 * MIN),
        0xff92_1c5e_d9ea_5d93,
        "a host alone"
    );
    let mut partitioned = SimFleet::host(64, 9, MONDAY, 2);
    assert_ne!(rows_hash(&mut partitioned, MONDAY, MONDAY + 2 * DAY, 10 * MIN), 0x9cf0_f630_cfee_ccd7);
}

/// The partitioned host's GPUs 0–3, their instances' profiles spelled out
/// (GPUs 4–7 are whole).
const LAYOUT: [&[&str]; 4] = [
    &["1g.10gb"; 7],
    &["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
    &["4g.40gb", "3g.40gb"],
    &["3g.40gb", "3g.40gb"],
];

/// An H100 MIG profile's compute slices and memory (MiB).
fn profile_of(name: &str) -> (i32, i64) {
    match name {
        "1g.10gb" => (1, 9_856),
        "2g.20gb" => (2, 19_968),
        "3g.40gb" => (3, 40_192),
        "4g.40gb" => (4, 40_192),
        _ => panic!("no such profile {name}"),
    }
}

/// The `MIG-`/`GPU-` UUID form: the prefix, then 8-4-4-4-12 lowercase hex.
fn nvml_uuid(u: &str, prefix: &str) -> bool {
    let Some(rest) = u.strip_prefix(prefix) else { return false };
    let groups: Vec<usize> = rest.split('-').map(str::len).collect();
    groups == [8, 4, 4, 4, 12]
        && rest.chars().all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// What a week of the partitioned host showed per instance.
#[derive(Debug, Default, Clone)]
struct InstanceWeek {
    /// The memory a context takes above its processes' (constant).
    overhead: Option<i64>,
    /// Consecutive ticks empty, and the longest such run.
    empty_run: usize,
    longest_empty: usize,
    /// Consecutive ticks held (≥ 1 GiB) with SMs ≤ 2 % active, and the longest.
    idle_held_run: usize,
    longest_idle_held: usize,
}

/// `gpu-node03`, the partitioned host, for a week at a sample every 5
/// minutes, every row checked against what NVML gives for a GPU in MIG
/// mode: per tick a row per GPU (index order), a partitioned GPU's own row
/// followed by one per instance. The GPU's row has the board (power,
/// energy, temperature, clocks, PCIe), memory in use the sum of its
/// instances', 7 total slices and no utilization or activity at all, and
/// no process on it; the power lies between what its instances' activity
/// allows (from their rows: a process's draw is 0.5–1.08 × its kernel
/// time, its SM activity at most its kernel time). Each instance has its
/// stable `MIG-…` UUID, parent, profile, slices and memory, GPM activity
/// only, memory in use its processes' plus a constant context overhead;
/// its processes have memory and no utilization. No job spans two
/// instances. Over the week instances sit empty, notebooks hold them idle,
/// and every persona (zombies too) runs on them.
#[test]
fn a_partitioned_host_gives_a_row_per_gpu_and_per_instance() {
    let step = 5 * MIN;
    let mut hosts = vec![SimFleet::host(32, 42, MONDAY, 2)];
    assert_eq!(hosts[0].host(), "gpu-node03");
    let mut uuids: Vec<apron_schemas::Text> = Vec::new();
    let mut weeks: Vec<InstanceWeek> = vec![InstanceWeek::default(); 15];
    let mut last_energy: HashMap<String, i64> = HashMap::new();
    let mut kinds: BTreeSet<String> = BTreeSet::new();
    let mut power_ticks = [0usize; 2];
    run(&mut hosts, MONDAY, MONDAY + 7 * DAY, step, |host, tick| {
        let model = host.model;
        assert_eq!(tick.gpus.len(), 8 + 15);
        let procs_on = |uuid: &str| tick.procs.iter().filter(|p| &*p.gpu_uuid == uuid).collect::<Vec<_>>();
        let mut tick_uuids = Vec::new();
        let mut at = 0;
        for index in 0..8 {
            let g = &tick.gpus[at];
            at += 1;
            assert_eq!(g.gpu_index, index as i32);
            assert!(nvml_uuid(&g.gpu_uuid, "GPU-"), "{g:?}");
            assert_eq!(g.gpu_model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
            assert_eq!(g.fb_total_bytes, Some(81_559 << 20));
            assert_eq!((&g.parent_gpu_uuid, &g.mig_profile, g.mig_slices), (&None, &None, None));
            let Some(profiles) = LAYOUT.get(index) else {
                assert_eq!(g.mig_total_slices, None, "GPU {index} is whole");
                assert!(g.gpu_util_pct.is_some() && g.sm_active_pct.is_some());
                assert!(procs_on(&g.gpu_uuid).iter().all(|p| p.sm_util_pct.is_some()));
                continue;
            };
            // The GPU in MIG mode.
            assert_eq!(g.mig_total_slices, Some(7));
            let activity = [
                g.sm_active_pct,
                g.sm_occupancy_pct,
                g.tensor_active_pct,
                g.dram_active_pct,
                g.gr_engine_active_pct,
            ];
            assert!(activity.iter().all(Option::is_none), "no activity on a partitioned GPU: {g:?}");
            let util = [g.gpu_util_pct, g.mem_util_pct, g.enc_util_pct, g.dec_util_pct];
            assert!(util.iter().all(Option::is_none), "no utilization on a partitioned GPU: {g:?}");
            assert!(procs_on(&g.gpu_uuid).is_empty(), "no process on a partitioned GPU");
            let power = g.power_mw.expect("power") as f32;
            assert_eq!(g.power_limit_mw, Some(700_000));
            assert!(g.temp_c.is_some() && g.sm_clock_mhz.is_some());
            assert!(g.pcie_rx_bytes_per_s.is_some() && g.pcie_tx_bytes_per_s.is_some());
            let reasons = g.clock_event_reasons.expect("reasons");

            let instances = &tick.gpus[at..at + profiles.len()];
            at += profiles.len();
            let (mut slices, mut fb_used) = (0, 0);
            let (mut draw_lo, mut draw_hi) = (0.0f32, 0.0f32);
            let (mut any_procs, mut any_busy, mut all_idle) = (false, false, true);
            for (m, &profile) in instances.iter().zip(profiles.iter()) {
                let k = tick_uuids.len();
                tick_uuids.push(m.gpu_uuid.clone());
                assert!(nvml_uuid(&m.gpu_uuid, "MIG-"), "{m:?}");
                assert_eq!(m.parent_gpu_uuid.as_ref(), Some(&g.gpu_uuid));
                assert_eq!(
                    (m.gpu_index, &m.gpu_model, m.interval_ms),
                    (g.gpu_index, &g.gpu_model, g.interval_ms)
                );
                let (want_slices, fb_mib) = profile_of(profile);
                assert_eq!(m.mig_profile.as_deref(), Some(profile));
                assert_eq!((m.mig_slices, m.mig_total_slices), (Some(want_slices), Some(7)));
                assert_eq!(m.fb_total_bytes, Some(fb_mib << 20));
                let board = [
                    m.gpu_util_pct,
                    m.mem_util_pct,
                    m.power_mw,
                    m.power_limit_mw,
                    m.sm_clock_mhz,
                    m.temp_c,
                    m.enc_util_pct,
                    m.dec_util_pct,
                ];
                assert!(board.iter().all(Option::is_none), "{m:?}");
                let wide = [m.energy_mj, m.pcie_rx_bytes_per_s, m.pcie_tx_bytes_per_s, m.clock_event_reasons];
                assert!(wide.iter().all(Option::is_none), "{m:?}");
                let gpm = [
                    m.sm_active_pct,
                    m.sm_occupancy_pct,
                    m.tensor_active_pct,
                    m.dram_active_pct,
                    m.gr_engine_active_pct,
                ];
                assert!(gpm.iter().all(|v| v.is_some_and(|v| (0.0..=100.0).contains(&v))), "{m:?}");
                let (sm, gr) = (m.sm_active_pct.expect("sm"), m.gr_engine_active_pct.expect("gr"));
                assert!(gr + 0.1 >= sm, "{m:?}");

                let procs = procs_on(&m.gpu_uuid);
                assert!(
                    procs.iter().all(|p| p.sm_util_pct.is_none() && p.mem_util_pct.is_none()),
                    "{procs:?}"
                );
                let held: i64 = procs.iter().map(|p| p.used_mem_bytes.expect("mem")).sum();
                let used = m.fb_used_bytes.expect("fb used");
                let total = fb_mib << 20;
                let w = &mut weeks[k];
                if procs.is_empty() {
                    assert!(used < 8 << 20 && gpm.iter().all(|v| *v == Some(0.0)), "{m:?}");
                    w.empty_run += 1;
                } else {
                    w.empty_run = 0;
                    if used < total {
                        let overhead = used - held - (procs.len() as i64 - 1) * (8 << 20);
                        assert!((250 << 20..330 << 20).contains(&overhead), "context overhead {overhead}");
                        assert_eq!(
                            *w.overhead.get_or_insert(overhead),
                            overhead,
                            "the same context each tick"
                        );
                    } else {
                        assert_eq!(used, total);
                    }
                }
                w.longest_empty = w.longest_empty.max(w.empty_run);
                w.idle_held_run = if held >= GIB && sm <= 2.0 { w.idle_held_run + 1 } else { 0 };
                w.longest_idle_held = w.longest_idle_held.max(w.idle_held_run);

                slices += want_slices;
                fb_used += used;
                let share = want_slices as f32 / 7.0;
                draw_lo += share * 0.5 * (sm - 0.05).max(0.0);
                draw_hi += share * 1.08 * (gr + 0.05);
                any_procs |= !procs.is_empty();
                any_busy |= gr >= 0.6;
                all_idle &= gr < 0.4;
            }
            assert_eq!(slices, profiles.iter().map(|p| profile_of(p).0).sum::<i32>());
            assert!(slices <= 7);
            assert_eq!(g.fb_used_bytes, Some(fb_used), "the GPU's memory in use is its instances'");

            // The board follows the instances.
            let limit = 700_000.0f32;
            let floor = if any_procs { model.idle_mw + model.context_mw } else { model.idle_mw };
            let level = |draw: f32| floor + (limit - floor) * draw * 0.01;
            let lo = level(draw_lo).min(limit * 0.975) * 0.98 - 1.0;
            let hi = if level(draw_hi) > limit * 0.985 { limit } else { level(draw_hi) * 1.02 + 1.0 };
            assert!((lo..=hi).contains(&power), "power {power} outside {lo}..{hi}: {g:?} {instances:?}");
            power_ticks[usize::from(any_busy)] += 1;
            if any_busy {
                assert_eq!(reasons & 1, 0, "an instance runs kernels: the clocks are up");
            } else if all_idle {
                assert_eq!(reasons & 1, 1, "no instance runs kernels: the GPU says it is idle");
            }
            let energy = g.energy_mj.expect("energy");
            if let Some(prev) = last_energy.insert(g.gpu_uuid.to_string(), energy) {
                let expected = power as f64 * step as f64 / 1_000.0;
                let off = ((energy - prev) as f64 - expected).abs() / expected;
                assert!(off < 0.025, "energy delta {} vs power × interval {expected}", energy - prev);
            }
        }
        assert_eq!(at, tick.gpus.len());

        // Instance UUIDs: distinct, and the same every tick.
        if uuids.is_empty() {
            uuids = tick_uuids;
            assert_eq!(uuids.iter().collect::<BTreeSet<_>>().len(), 15);
        } else {
            assert_eq!(uuids, tick_uuids);
        }
        // No job on an instance is anywhere else.
        let mut jobs: HashMap<&str, BTreeSet<&str>> = HashMap::new();
        for p in &tick.procs {
            if let Some(job) = p.identity.slurm_job_id.as_deref().or(p.identity.k8s_pod_uid.as_deref()) {
                jobs.entry(job).or_default().insert(&p.gpu_uuid);
            }
        }
        for (job, on) in &jobs {
            assert!(on.len() == 1 || on.iter().all(|u| u.starts_with("GPU-")), "job {job} spans {on:?}");
        }
        for &slot in &host.instance_slots {
            kinds.extend(host.schedule.gpus[slot].procs.iter().map(|p| format!("{:?}", p.work.kind)));
        }
    });

    println!("{weeks:#?}\n{kinds:?} {power_ticks:?}");
    let expected: BTreeSet<String> =
        ["Debug", "Inference", "Notebook", "Training", "Zombie"].into_iter().map(str::to_owned).collect();
    assert_eq!(kinds, expected, "every persona on the instances");
    assert!(weeks.iter().filter(|w| w.longest_empty >= 12).count() >= 2, "instances sat empty for an hour");
    assert!(weeks.iter().any(|w| w.longest_idle_held >= 144), "a notebook held an instance idle for 12 h");
    assert!(power_ticks.iter().all(|&n| n > 50), "GPUs with and without busy instances: {power_ticks:?}");

    // The same instances whatever the start and the fleet's size; another
    // seed, other instances.
    let instance_uuids = |gpus, seed, start| {
        let mut tick = Tick::default();
        SimFleet::host(gpus, seed, start, 2).sample(MONDAY, 1_000, &mut tick);
        tick.gpus
            .iter()
            .filter(|g| g.parent_gpu_uuid.is_some())
            .map(|g| g.gpu_uuid.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(instance_uuids(24, 42, MONDAY - 3 * DAY), uuids);
    let other: BTreeSet<_> = instance_uuids(32, 43, MONDAY).into_iter().collect();
    assert!(other.len() == 15 && uuids.iter().all(|u| !other.contains(u)));
}

/// The partitioned host is as deterministic as the rest: the same seed
/// and start give the same rows, instances and their processes included.
#[test]
fn a_partitioned_host_gives_the_same_rows_for_the_same_seed() {
    let a = collect(24, 7, MONDAY, MONDAY + DAY, 5 * MIN);
    let b = collect(24, 7, MONDAY, MONDAY + DAY, 5 * MIN);
    assert_eq!(a.0.len(), (24 + 15) * 288);
    assert!(a.1.iter().any(|p| p.gpu_uuid.starts_with("MIG-")), "processes on instances");
    assert!(a == b, "same seed, same rows");
}

/// The allocations each tick lists are the cluster's books: every live
/// process of a pod or a Slurm job (zombies aside) has its holder allocated
/// on its GPU or instance, each holder once per GPU; never a partitioned
/// GPU's own row; and notebook pods whose kernel ended keep GPUs allocated
/// with no process on them, for hours, and only pods do.
#[test]
fn allocations_follow_the_processes_and_idle_pods_stay_allocated() {
    let mut hosts = SimFleet::new(32, 7, MONDAY).into_hosts();
    let (mut checked, mut idle_minutes, mut idle_gpus) = (0, 0, BTreeSet::new());
    run(&mut hosts, MONDAY, MONDAY + 7 * DAY, MIN, |host, t| {
        let partitioned: BTreeSet<_> =
            t.gpus.iter().filter_map(|g| g.parent_gpu_uuid.as_ref()).map(|p| p.to_string()).collect();
        let mut seen = BTreeSet::new();
        for a in &t.allocations {
            assert_eq!((a.ts, a.interval_ms), (t.gpus[0].ts, MIN as i32));
            assert!(!partitioned.contains(&*a.gpu_uuid), "a MIG GPU is allocated by its instances");
            assert!(seen.insert((a.gpu_uuid.clone(), a.holder.clone())), "each holder once per GPU");
            let row = t.gpus.iter().find(|g| g.gpu_uuid == a.gpu_uuid).expect("an allocated GPU has a row");
            assert_eq!(a.gpu_index, row.gpu_index);
        }
        for p in &t.procs {
            let Some(h) = schedule::holder(&p.identity) else { continue };
            let zombie = !t.allocations.iter().any(|a| a.gpu_uuid == p.gpu_uuid && a.holder == h);
            // A process whose job is gone is a zombie: it computes nothing.
            assert!(!zombie || p.sm_util_pct.unwrap_or(0) == 0, "{}: {p:?}", host.host());
            checked += usize::from(!zombie);
        }
        for a in &t.allocations {
            if !t.procs.iter().any(|p| p.gpu_uuid == a.gpu_uuid) {
                assert_eq!(&*a.holder.source, apron_schemas::alloc_minutes::SOURCE_KUBERNETES);
                idle_minutes += 1;
                idle_gpus.insert(a.gpu_uuid.clone());
            }
        }
    });
    assert!(checked > 10_000, "{checked} process rows of pods and jobs");
    assert!(idle_minutes > 600 && idle_gpus.len() >= 3, "{idle_minutes} idle pod minutes on {idle_gpus:?}");
}
