//! Hand-computed rollups: interval weighting, nulls, partial and split
//! minutes, the energy counter and its fallbacks, process grouping.

use super::*;

fn gpu(ts: i64, interval_ms: i32) -> GpuSample {
    GpuSample {
        ts,
        gpu_uuid: "GPU-a".into(),
        gpu_index: 0,
        gpu_model: Some("H100".into()),
        interval_ms,
        ..Default::default()
    }
}

fn proc(ts: i64, pid: i32, start: Option<i64>, mem: Option<i64>) -> ProcSample {
    ProcSample {
        ts,
        gpu_uuid: "GPU-a".into(),
        pid,
        interval_ms: 1_000,
        identity: ProcIdentity { proc_start: start, ..Default::default() },
        used_mem_bytes: mem,
        ..Default::default()
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

#[test]
fn means_are_interval_weighted_and_skip_nulls() {
    let rows = vec![
        GpuSample {
            gpu_util_pct: Some(10),
            power_mw: Some(100_000),
            fb_used_bytes: Some(5),
            fb_total_bytes: Some(100),
            pcie_tx_bytes_per_s: Some(1_000),
            ..gpu(10_000, 1_000)
        },
        GpuSample { gpu_util_pct: Some(50), fb_used_bytes: Some(7), ..gpu(20_000, 3_000) },
        GpuSample { power_mw: Some(200_000), gpu_model: None, ..gpu(59_999, 2_000) },
        // The next minute: a measured zero stays a zero, not a null.
        GpuSample { gpu_util_pct: Some(0), gpu_index: 3, ..gpu(60_000, 1_000) },
    ];
    let r = rollup(&rows, &[], &EnergyCarry::new());
    assert_eq!(r.gpu_minutes.len(), 2);
    let m0 = &r.gpu_minutes[0];
    assert_eq!((m0.minute, &*m0.gpu_uuid, m0.samples), (0, "GPU-a", 3));
    assert_eq!(m0.seconds, 6.0);
    // (10 × 1 s + 50 × 3 s) / 4 s: the null sample weighs nothing.
    assert_eq!(m0.gpu_util_pct_mean, Some(40.0));
    assert_eq!(m0.gpu_util_pct_max, Some(50));
    assert_eq!(m0.mem_util_pct_mean, None, "no sample had it: unknown, not 0");
    assert_eq!(m0.fb_used_bytes_max, Some(7));
    assert_eq!(m0.fb_total_bytes, Some(100));
    assert_eq!(m0.pcie_tx_bytes_per_s_mean, Some(1_000.0));
    assert_eq!(m0.pcie_rx_bytes_per_s_mean, None);
    // (100 W × 1 s + 200 W × 2 s) / 3 s.
    assert!(close(m0.power_mw_mean.expect("power"), 500_000.0 / 3.0));
    // No counter: power × interval, 100 J + 400 J; the sample without power adds nothing.
    assert_eq!(m0.energy_j, Some(500.0));
    assert_eq!(m0.gpu_model.as_deref(), Some("H100"), "the last known model");
    assert!(!m0.proc_held);
    assert_eq!(m0.proc_count, 0);

    let m1 = &r.gpu_minutes[1];
    assert_eq!((m1.minute, m1.samples, m1.seconds, m1.gpu_index), (60_000, 1, 1.0, 3));
    assert_eq!(m1.gpu_util_pct_mean, Some(0.0));
    assert_eq!(m1.energy_j, None, "neither counter nor power: unknown");
}

#[test]
fn sm_active_is_averaged_like_the_other_means() {
    // A MIG instance: no gpu_util_pct, sm_active_pct from GPM on some samples.
    let rows = vec![
        GpuSample { sm_active_pct: Some(10.5), tensor_active_pct: Some(4.0), ..gpu(0, 1_000) },
        GpuSample { sm_active_pct: Some(2.5), dram_active_pct: Some(30.0), ..gpu(1_000, 3_000) },
        GpuSample { ..gpu(4_000, 2_000) },
        GpuSample { ..gpu(60_000, 1_000) },
    ];
    let r = rollup(&rows, &[], &EnergyCarry::new());
    // (10.5 × 1 s + 2.5 × 3 s) / 4 s; the sample without it weighs nothing.
    assert_eq!(r.gpu_minutes[0].sm_active_pct_mean, Some(4.5));
    // Tensor and DRAM activity alike, each over the samples that had it.
    assert_eq!(r.gpu_minutes[0].tensor_active_pct_mean, Some(4.0));
    assert_eq!(r.gpu_minutes[0].dram_active_pct_mean, Some(30.0));
    assert_eq!(r.gpu_minutes[1].tensor_active_pct_mean, None);
    assert_eq!(r.gpu_minutes[0].gpu_util_pct_mean, None);
    assert_eq!(r.gpu_minutes[1].sm_active_pct_mean, None, "no sample had it: unknown, not 0");
}

#[test]
fn energy_comes_from_the_counter_delta_when_the_previous_sample_is_adjacent() {
    let carry = EnergyCarry {
        last: HashMap::from([("GPU-a".into(), LastSample { ts: -1_000, energy_mj: Some(1_000) })]),
    };
    let rows = vec![
        // Delta to the carried sample one interval earlier: 500 mJ.
        GpuSample { energy_mj: Some(1_500), power_mw: Some(999_000), ..gpu(0, 1_000) },
        // The counter went back (driver reload): power × interval, 50 W × 1 s.
        GpuSample { energy_mj: Some(1_400), power_mw: Some(50_000), ..gpu(1_000, 1_000) },
        // A missed tick before this one: not adjacent, and no power: unknown.
        GpuSample { energy_mj: Some(1_600), ..gpu(3_000, 1_000) },
        // Adjacent again: 100 mJ.
        GpuSample { energy_mj: Some(1_700), ..gpu(4_000, 1_000) },
    ];
    let r = rollup(&rows, &[], &carry);
    assert_eq!(r.gpu_minutes.len(), 1);
    assert!(close(r.gpu_minutes[0].energy_j.expect("energy"), 0.5 + 50.0 + 0.1));
    assert_eq!(r.carry.last.get("GPU-a"), Some(&LastSample { ts: 4_000, energy_mj: Some(1_700) }));

    // Without the carried sample the first one falls back to power × interval.
    let fresh = rollup(&rows, &[], &EnergyCarry::new());
    assert!(close(fresh.gpu_minutes[0].energy_j.expect("energy"), 999.0 + 50.0 + 0.1));
}

#[test]
fn a_minute_split_across_files_sums_back_to_the_whole() {
    let rows: Vec<GpuSample> = (0..60)
        .map(|s| GpuSample {
            gpu_util_pct: Some(s as i32),
            power_mw: Some(100_000 + s as i32 * 1_000),
            energy_mj: Some(1_000_000 + s * (s + 1) * 50),
            ..gpu(120_000 + s * 1_000, 1_000)
        })
        .collect();
    let whole = rollup(&rows, &[], &EnergyCarry::new());
    let first = rollup(&rows[..25], &[], &EnergyCarry::new());
    let second = rollup(&rows[25..], &[], &first.carry);
    let (w, a, b) = (&whole.gpu_minutes[0], &first.gpu_minutes[0], &second.gpu_minutes[0]);
    assert_eq!((a.minute, b.minute), (w.minute, w.minute), "two rows for one GPU-minute");
    assert_eq!(a.seconds + b.seconds, w.seconds);
    assert_eq!(a.samples + b.samples, 60);
    assert!(close(a.energy_j.expect("a") + b.energy_j.expect("b"), w.energy_j.expect("w")));
    let weighted = (a.gpu_util_pct_mean.expect("a") * a.seconds
        + b.gpu_util_pct_mean.expect("b") * b.seconds)
        / (a.seconds + b.seconds);
    assert!(close(weighted, w.gpu_util_pct_mean.expect("w")));
    assert_eq!(w.gpu_util_pct_mean, Some(29.5));
    assert_eq!(a.gpu_util_pct_max.max(b.gpu_util_pct_max), w.gpu_util_pct_max);
}

#[test]
fn gpus_are_rolled_up_apart_and_carried_apart() {
    let b = |ts: i64, e: i64| GpuSample { gpu_uuid: "GPU-b".into(), energy_mj: Some(e), ..gpu(ts, 1_000) };
    let a = |ts: i64, e: i64| GpuSample { energy_mj: Some(e), ..gpu(ts, 1_000) };
    let first = rollup(&[a(0, 10), a(1_000, 20), b(0, 500), b(1_000, 600)], &[], &EnergyCarry::new());
    assert_eq!(first.gpu_minutes.len(), 2);
    // GPU-b's first sample must not take GPU-a's last one as its previous.
    assert_eq!(first.gpu_minutes[1].energy_j, Some(0.1));
    let second = rollup(&[a(2_000, 25), b(2_000, 700)], &[], &first.carry);
    assert_eq!(second.gpu_minutes[0].energy_j, Some(0.005));
    assert_eq!(second.gpu_minutes[1].energy_j, Some(0.1));
}

#[test]
fn processes_are_grouped_by_pid_and_start_and_mark_the_gpu_minute() {
    let procs = vec![
        proc(0, 7, Some(100), Some(1 << 20)),
        proc(0, 9, None, Some(0)),
        // pid 7 reused by a new process within the minute.
        proc(1_000, 7, Some(900), None),
        proc(1_000, 7, Some(100), Some(3 << 20)),
        proc(1_000, 9, None, Some(0)),
        // The next minute: only a process holding nothing (a measured 0).
        proc(60_000, 9, None, Some(0)),
        // And one whose amount NVML hides.
        ProcSample { gpu_uuid: "GPU-b".into(), ..proc(60_000, 4, Some(5), None) },
    ];
    let mut procs_sorted = procs.clone();
    apron_schemas::proc_samples::sort(&mut procs_sorted);
    let gpus = vec![
        gpu(0, 1_000),
        gpu(1_000, 1_000),
        gpu(60_000, 1_000),
        GpuSample { gpu_uuid: "GPU-b".into(), ..gpu(60_000, 1_000) },
    ];
    let r = rollup(&gpus, &procs_sorted, &EnergyCarry::new());
    let keys: Vec<_> =
        r.proc_minutes.iter().map(|p| (&*p.gpu_uuid, p.minute, p.pid, p.identity.proc_start)).collect();
    assert_eq!(
        keys,
        [
            ("GPU-a", 0, 7, Some(100)),
            ("GPU-a", 0, 7, Some(900)),
            ("GPU-a", 0, 9, None),
            ("GPU-a", 60_000, 9, None),
            ("GPU-b", 60_000, 4, Some(5)),
        ]
    );
    let p7 = &r.proc_minutes[0];
    assert_eq!((p7.samples, p7.seconds), (2, 2.0));
    assert_eq!(p7.used_mem_bytes_mean, Some(f64::from(2 << 20)));
    assert_eq!(p7.used_mem_bytes_max, Some(3 << 20));
    assert_eq!(p7.sm_util_pct_mean, None);
    assert_eq!(r.proc_minutes[1].used_mem_bytes_mean, None, "only a hidden amount: unknown");

    let held: Vec<_> =
        r.gpu_minutes.iter().map(|g| (&*g.gpu_uuid, g.minute, g.proc_held, g.proc_count)).collect();
    assert_eq!(
        held,
        [("GPU-a", 0, true, 3), ("GPU-a", 60_000, false, 1), ("GPU-b", 60_000, true, 1)],
        "a measured 0 holds nothing; an unknown amount counts as held"
    );
}

#[test]
fn identity_is_the_minutes_last_known_value() {
    let mut a = proc(0, 7, Some(1), Some(1));
    a.identity.user = Some("alice".into());
    a.identity.comm = Some("python".into());
    let mut b = proc(1_000, 7, Some(1), Some(1));
    b.identity.comm = Some("pt_main_thread".into());
    let rows = proc_minutes(&[a, b]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].identity.user.as_deref(), Some("alice"));
    assert_eq!(rows[0].identity.comm.as_deref(), Some("pt_main_thread"));
}

#[test]
fn minutes_are_utc_minute_starts_even_before_the_epoch() {
    assert_eq!(minute_of(0), 0);
    assert_eq!(minute_of(59_999), 0);
    assert_eq!(minute_of(60_000), 60_000);
    assert_eq!(minute_of(-1), -60_000);
}

#[test]
#[ignore = "a timing, meaningful in release builds only"]
fn rollup_speed() {
    // A day of 8 GPUs at 1 Hz with two processes each, in file order.
    let mut gpus = Vec::new();
    let mut procs = Vec::new();
    for g in 0..8 {
        let uuid: Text = format!("GPU-{g}").into();
        for s in 0..86_400i64 {
            let ts = s * 1_000;
            gpus.push(GpuSample {
                gpu_util_pct: Some((s % 100) as i32),
                mem_util_pct: Some(3),
                fb_used_bytes: Some(1 << 33),
                power_mw: Some(300_000),
                energy_mj: Some(s * 300),
                pcie_tx_bytes_per_s: Some(1 << 20),
                pcie_rx_bytes_per_s: Some(1 << 21),
                gpu_uuid: uuid.clone(),
                ..gpu(ts, 1_000)
            });
            for pid in [100, 200] {
                procs.push(ProcSample {
                    gpu_uuid: uuid.clone(),
                    sm_util_pct: Some(5),
                    ..proc(ts, pid, Some(1), Some(1 << 30))
                });
            }
        }
    }
    let t0 = std::time::Instant::now();
    let r = rollup(&gpus, &procs, &EnergyCarry::new());
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(r.gpu_minutes.len(), 8 * 1_440);
    eprintln!(
        "rollup: {} gpu rows + {} proc rows in {:.3} s ({:.1} M gpu rows/s)",
        gpus.len(),
        procs.len(),
        secs,
        gpus.len() as f64 / secs / 1e6
    );
}

fn alloc(ts: i64, interval_ms: i32, uuid: &str, index: i32, holder: &Holder) -> AllocSample {
    AllocSample { ts, interval_ms, gpu_uuid: uuid.into(), gpu_index: index, holder: holder.clone() }
}

#[test]
fn allocations_roll_up_per_gpu_minute_and_holder() {
    let pod = Holder::kubernetes(Some("nlp".into()), Some("nb-0".into()), Some("lab".into()));
    let job = Holder::slurm("901".into(), Some("research".into()), Some("gpu".into()), Some("dev".into()));
    let m = 1_796_083_200_000; // a minute's start
    let mut rows = Vec::new();
    // GPU-b: the pod for the whole minute at 10 s ticks (6 ticks, one
    // listed twice: two processes of the pod), then 2 ticks of the next
    // minute, where the GPU's index changed.
    for k in 0..6 {
        rows.push(alloc(m + k * 10_000, 10_000, "GPU-b", 1, &pod));
        if k == 3 {
            rows.push(alloc(m + k * 10_000, 10_000, "GPU-b", 1, &pod));
        }
    }
    rows.push(alloc(m + 60_000, 10_000, "GPU-b", 1, &pod));
    rows.push(alloc(m + 70_000, 10_000, "GPU-b", 3, &pod));
    // GPU-a, listed after: the Slurm job for 3 ticks of 1 s and a 500 ms
    // one, and the pod sharing it (time-sliced) for one tick.
    for k in 0..3 {
        rows.push(alloc(m + 1_000 * k, 1_000, "GPU-a", 0, &job));
    }
    rows.push(alloc(m + 3_000, 500, "GPU-a", 0, &job));
    rows.push(alloc(m + 3_000, 500, "GPU-a", 0, &pod));
    let out = alloc_minutes(&rows);
    let got: Vec<_> = out
        .iter()
        .map(|r| (&*r.gpu_uuid, r.minute - m, r.holder.source.as_ref(), r.gpu_index, r.seconds, r.samples))
        .collect();
    // Holders sort by source: "kubernetes" before "slurm".
    assert_eq!(
        got,
        [
            ("GPU-a", 0, "kubernetes", 0, 0.5, 1),
            ("GPU-a", 0, "slurm", 0, 3.5, 4),
            ("GPU-b", 0, "kubernetes", 1, 60.0, 6),
            ("GPU-b", 60_000, "kubernetes", 3, 20.0, 2),
        ]
    );
    assert_eq!(out[1].holder, job);
    assert!(alloc_minutes(&[]).is_empty());
}
