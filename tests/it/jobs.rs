//! End to end: `apron jobs` on a hand-built hour written by the real
//! writer, every figure worked out by hand: a Slurm job of 4 GPUs that
//! uses one, a notebook pod idle most of the hour on a sliver of its GPU's
//! memory, a plain process that works, a process idle on a 1g MIG instance
//! (1/7 of its GPU, the other 6/7 nobody's), and an empty GPU. carol's
//! process keeps its SMs 62 % active with the tensor pipes idle, and the
//! Slurm job's GPUs log XIDs while it holds them. A GPU-hour costs
//! 3.60 (`ops_per_gpu_hour`, no purchase price, no energy price), and the
//! jobs' costs add up to their teams' in `apron spend`, to the cent.

use std::collections::BTreeMap;

use std::time::Duration;

use apron_schemas::{DataLayout, GpuEvent, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::{apron_over, bin};
use serde_json::Value;

const STEP_MS: i64 = 10_000;
const MIN_MS: i64 = 60_000;
const GIB: i64 = 1 << 30;

#[test]
fn jobs_are_priced_judged_and_add_up_to_their_teams() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(
        &config,
        "[energy]\nprice_per_kwh = 0\n\n[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 1\n\
         ops_per_gpu_hour = 3.6\n\n[[team]]\nname = \"nlp\"\nusers = [\"alice\"]\n\n[[team]]\nname = \"vision\"\n\
         k8s_namespaces = [\"lab\"]\n",
    )
    .expect("config");
    let start = apron_tests::scenario::ms("2026-10-05T10:00:00Z");
    let end = start + 60 * MIN_MS;
    let who = |user: &str| ProcIdentity {
        user: Some(user.into()),
        comm: Some("python".into()),
        proc_start: Some(start - 5 * MIN_MS),
        ..Default::default()
    };
    let mut w = RollingWriter::new(DataLayout::new(&data), "h", Duration::from_secs(600)).expect("host");
    let mut ts = start;
    while ts < end {
        let minute = (ts - start) / MIN_MS;
        // GPU 0 works for the Slurm job, 1–3 sit idle under it; GPU 4 is the
        // notebook's, busy for the first 10 minutes only; GPU 5 works for
        // carol's process; GPU 6 is empty.
        let util = |g: i32| match g {
            0 | 5 => 90,
            4 if minute < 10 => 50,
            _ => 0,
        };
        let mut gpus: Vec<GpuSample> = (0..7)
            .map(|g| GpuSample {
                ts,
                gpu_uuid: format!("GPU-{g}").into(),
                gpu_index: g,
                interval_ms: STEP_MS as i32,
                gpu_util_pct: Some(util(g)),
                fb_total_bytes: Some(80 * GIB),
                // GPM on carol's GPU: SMs busy, tensor pipes idle (FP32).
                sm_active_pct: (g == 5).then_some(62.0),
                tensor_active_pct: (g == 5).then_some(0.0),
                dram_active_pct: (g == 5).then_some(35.0),
                ..Default::default()
            })
            .collect();
        // GPU 7, partitioned: one 1g instance, its SM idle.
        gpus.push(GpuSample {
            ts,
            gpu_uuid: "GPU-7".into(),
            gpu_index: 7,
            interval_ms: STEP_MS as i32,
            mig_total_slices: Some(7),
            ..Default::default()
        });
        gpus.push(GpuSample {
            ts,
            gpu_uuid: "MIG-7a".into(),
            gpu_index: 7,
            interval_ms: STEP_MS as i32,
            sm_active_pct: Some(0.0),
            fb_total_bytes: Some(10 * GIB),
            parent_gpu_uuid: Some("GPU-7".into()),
            mig_profile: Some("1g.10gb".into()),
            mig_slices: Some(1),
            mig_total_slices: Some(7),
            ..Default::default()
        });
        let proc = |g: i32, pid: i32, identity: ProcIdentity, mem: i64| ProcSample {
            ts,
            gpu_uuid: format!("GPU-{g}").into(),
            pid,
            interval_ms: STEP_MS as i32,
            identity,
            used_mem_bytes: Some(mem),
            ..Default::default()
        };
        let mut procs: Vec<ProcSample> = (0..4)
            .map(|g| {
                proc(g, 100 + g, ProcIdentity { slurm_job_id: Some("77".into()), ..who("alice") }, 10 * GIB)
            })
            .collect();
        let pod = ProcIdentity {
            k8s_namespace: Some("lab".into()),
            k8s_pod_name: Some("nb-1".into()),
            ..who("bob")
        };
        procs.push(proc(4, 200, pod, 2 * GIB));
        procs.push(proc(5, 300, who("carol"), 40 * GIB));
        procs.push(ProcSample { gpu_uuid: "MIG-7a".into(), ..proc(0, 400, who("dave"), GIB / 2) });
        // XIDs on the Slurm job's GPUs while it holds them: 13 twice on GPU
        // 0 (an application's fault), 79 on GPU 1 (fallen off the bus, which
        // takes it down); and two on the empty GPU 6, which are no job's.
        let xid = |gpu: i32, code: i32| GpuEvent {
            ts,
            gpu_uuid: format!("GPU-{gpu}").into(),
            gpu_index: gpu,
            kind: "xid".into(),
            xid: Some(code),
            ..Default::default()
        };
        let events: Vec<GpuEvent> = match ts - start {
            t if t == 20 * MIN_MS || t == 21 * MIN_MS => vec![xid(0, 13), xid(6, 79)],
            t if t == 30 * MIN_MS => vec![xid(1, 79)],
            _ => vec![],
        };
        w.push(ts, &Tick { gpus, procs, events, ..Default::default() }).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");

    let apron = |args: &[&str]| {
        let out =
            apron_over(&data, &config).args(["--format", "json"]).args(args).output().expect("apron runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
        (rows, stderr)
    };
    let (rows, header) = apron(&["jobs", "--month", "2026-10"]);
    // 4 jobs: 6 GPU-hours and the MIG instance's 1/7, 21.60 + 0.51, of
    // which idle 3 GPU-hours of the Slurm job (10.80), 50 minutes of the
    // notebook (3.00) and the instance's 1/7 GPU-hour (0.51).
    assert!(header.contains("Jobs: 4, costing $22.11, of which $14.31 idle"), "{header}");
    let round = |v: &Value| v.as_f64().map(|x| (x * 1e4).round() / 1e4);
    /// Job, kind, team, GPUs, GPU-hours, cost, idle cost, activity, grade.
    type Row = (String, String, String, i64, Option<f64>, Option<f64>, Option<f64>, Option<f64>, String);
    let jobs: Vec<Row> = rows
        .iter()
        .map(|r| {
            (
                r["job"].as_str().expect("job").to_owned(),
                r["kind"].as_str().expect("kind").to_owned(),
                r["team"].as_str().expect("team").to_owned(),
                r["gpu_count"].as_i64().expect("gpus"),
                round(&r["gpu_hours"]),
                round(&r["cost"]),
                round(&r["idle_cost"]),
                round(&r["activity_pct"]),
                r["grade"].as_str().expect("grade").to_owned(),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    assert_eq!(
        jobs,
        [
            (s("job 77"), s("slurm"), s("nlp"), 4, Some(4.0), Some(14.4), Some(10.8), Some(22.5), s("D")),
            (
                s("pod lab/nb-1"),
                s("pod"),
                s("vision"),
                1,
                Some(1.0),
                Some(3.6),
                Some(3.0),
                Some(8.3333),
                s("F")
            ),
            (
                s("process 400 on h since 2026-10-05T09:55:00Z"),
                s("process"),
                s("unassigned"),
                1,
                Some(0.1429),
                Some(0.5143),
                Some(0.5143),
                Some(0.0),
                s("F")
            ),
            (
                s("process 300 on h since 2026-10-05T09:55:00Z"),
                s("process"),
                s("unassigned"),
                1,
                Some(1.0),
                Some(3.6),
                Some(0.0),
                Some(90.0),
                s("A")
            ),
        ]
    );
    let findings = |job: &str| {
        rows.iter().find(|r| r["job"] == job).expect("the job")["findings"].as_str().expect("text").to_owned()
    };
    assert_eq!(
        findings("job 77"),
        "3 of 4 GPUs never used (never busy while the job held them); \
         idle 75% of its time: interactive (a notebook server?), or waiting on something; \
         ran on GPUs with faults: XID 13 ×2 on h/0, XID 79 ×1 on h/1 (took the GPU down); see apron events"
    );
    assert_eq!(
        findings("pod lab/nb-1"),
        "idle 83% of its time: interactive (a notebook server?), or waiting on something; \
         memory under 10% of the GPU (peak 2.0 GiB, 2.5%): a smaller GPU or a MIG slice would do"
    );
    assert_eq!(
        findings("process 300 on h since 2026-10-05T09:55:00Z"),
        "tensor cores unused (tensor active 0.0% while SM active 62%): check the precision (FP32 math runs on \
         no tensor core: bf16 or fp16 mixed precision, or TF32)"
    );
    let carol = rows.iter().find(|r| r["user"] == "carol").expect("carol's");
    assert_eq!(
        (
            round(&carol["sm_active_pct"]),
            round(&carol["tensor_active_pct"]),
            round(&carol["dram_active_pct"])
        ),
        (Some(62.0), Some(0.0), Some(35.0))
    );
    let job77 = rows.iter().find(|r| r["job"] == "job 77").expect("job 77");
    assert!(job77["tensor_active_pct"].is_null(), "no GPM on its GPUs: unknown, not 0");
    // On a MIG instance: idle, but its memory is not "a smaller GPU" (it is one).
    assert_eq!(
        findings("process 400 on h since 2026-10-05T09:55:00Z"),
        "idle 100% of its time: interactive (a notebook server?), or waiting on something"
    );
    let pod = rows.iter().find(|r| r["job"] == "pod lab/nb-1").expect("pod");
    assert_eq!((pod["user"].as_str(), pod["still_running"].as_bool()), (Some("bob"), Some(true)));
    assert_eq!(
        (pod["start"].as_str(), pod["end"].as_str()),
        (Some("2026-10-05T10:00:00Z"), Some("2026-10-05T11:00:00Z"))
    );
    // --user and --team.
    assert_eq!(apron(&["jobs", "--month", "2026-10", "--user", "bob"]).0.len(), 1);
    assert_eq!(apron(&["jobs", "--month", "2026-10", "--team", "nlp"]).0[0]["job"], "job 77");

    // Each team's jobs add up to its spend, to the cent; the empty GPU is
    // nobody's.
    let (spend, _) = apron(&["spend", "--month", "2026-10"]);
    let mut by_team: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in &rows {
        let e = by_team.entry(r["team"].as_str().expect("team").to_owned()).or_default();
        e.0 += r["cost"].as_f64().expect("cost");
        e.1 += r["idle_cost"].as_f64().expect("idle");
    }
    let cents = |x: f64| (x * 100.0).round() as i64;
    for s in &spend {
        let team = s["team"].as_str().expect("team");
        let (cost, idle) = by_team.get(team).copied().unwrap_or_default();
        if team == "(unallocated)" {
            assert_eq!(
                cents(s["cost"].as_f64().expect("cost")),
                669,
                "the empty GPU's hour and 6/7 of GPU 7's"
            );
            continue;
        }
        assert_eq!(cents(cost), cents(s["cost"].as_f64().expect("cost")), "{team}: {spend:?}");
        assert_eq!(cents(idle), cents(s["idle_cost"].as_f64().expect("idle")), "{team}: {spend:?}");
    }
    assert_eq!(spend.len(), 4, "nlp, vision, unassigned, (unallocated): {spend:?}");

    // The report's Jobs section: the same jobs, findings counted by kind.
    let out_dir = tmp.path().join("report");
    let out = apron_over(&data, &config)
        .args(["report", "--month", "2026-10", "--out"])
        .arg(&out_dir)
        .output()
        .expect("apron runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = std::fs::read_to_string(out_dir.join("summary.md")).expect("summary");
    assert!(
        summary.contains(
            "4 jobs held GPUs this month (a Slurm job, else a pod, else a container, else a process); their idle \
             time cost $14.31, of which the 4 below $14.31. Jobs by finding: GPUs never used: 1, mostly idle: 3, \
             memory a smaller GPU would hold: 1, starved of data: 0, tensor cores unused: 1, faults on its GPUs: 1."
        ),
        "{summary}"
    );
    let csv = std::fs::read_to_string(out_dir.join("jobs.csv")).expect("jobs.csv");
    assert_eq!(csv.lines().count(), 5, "a header and the four jobs: {csv}");
    assert!(csv.lines().nth(1).is_some_and(|l| l.starts_with("job 77,alice,nlp,4,")), "{csv}");

    // Notices: to alice, bob and dave, whose jobs idled; carol's did not.
    let notices = tmp.path().join("notices");
    let out = apron_over(&data, &config)
        .args(["jobs", "--month", "2026-10", "--notices"])
        .arg(&notices)
        .output()
        .expect("apron runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut files: Vec<String> = std::fs::read_dir(&notices)
        .expect("the folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["alice.txt", "bob.txt", "dave.txt"]);
    let bob = std::fs::read_to_string(notices.join("bob.txt")).expect("bob's");
    let want = [
        "To: bob",
        "Subject: your GPU jobs, 2026-10-01 00:00 – 2026-11-01 00:00 UTC (31 days): $3.00 of $3.60 while the GPUs sat idle",
        "In the period 2026-10-01 00:00 – 2026-11-01 00:00 UTC (31 days), your 1 job held GPUs for 1.00 GPU-hours, \
         costing $3.60; $3.00 of it (83%) paid for GPUs that sat idle.",
        "1. pod lab/nb-1 (1 GPU: h/4), 2026-10-05 10:00 to 2026-10-05 11:00 UTC, still running",
        "   1.00 GPU-hours, $3.60, of which idle $3.00 (83%); activity 8.3% (grade F), peak memory 2.5% of a GPU",
        "   - idle 83% of its time: interactive (a notebook server?), or waiting on something",
        "- mostly idle: end interactive sessions and notebook kernels when done: an idle one holds its GPU, and its cost",
        "- memory a smaller GPU would hold: ask for a smaller GPU or a MIG slice where the cluster has them",
        "Your jobs are billed to team vision, whose jobs' GPU time cost $3.60 in the period, $3.00 of it idle.",
    ];
    for line in want {
        assert!(bob.lines().any(|l| l == line), "no line {line:?} in:\n{bob}");
    }
    let alice = std::fs::read_to_string(notices.join("alice.txt")).expect("alice's");
    assert!(alice.contains("   - 3 of 4 GPUs never used (never busy while the job held them)\n"), "{alice}");
    assert!(
        alice.contains("team nlp, whose jobs' GPU time cost $14.40 in the period, $10.80 of it idle."),
        "{alice}"
    );

    // apron job: one job's row (the same as apron jobs'), its findings a
    // line each, and a timeline per GPU.
    job_report(&data, &config, &rows, &tmp.path().join("timelines"));

    // job_idle at 11:00 over the last 30 minutes: the notebook, idle since
    // 10:10, and dave's instance fire (the Slurm job's mean is 22.5 %,
    // carol's 90 %).
    let mut text = std::fs::read_to_string(&config).expect("config");
    text = text.replacen("[[gpu_cost]]", "[alerts]\njob_idle_for = \"30m\"\n\n[[gpu_cost]]", 1);
    std::fs::write(&config, text).expect("config");
    let out = apron_over(&data, &config)
        .args(["--format", "json", "alerts", "--at", "2026-10-05T11:00:00Z"])
        .output()
        .expect("apron runs");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let alerts: Vec<Value> = serde_json::from_slice(&out.stdout).expect("json");
    let idle: Vec<(&str, &str, f64, &str)> = alerts
        .iter()
        .filter(|a| a["rule"] == "job_idle")
        .map(|a| {
            (
                a["job"].as_str().expect("job"),
                a["team"].as_str().expect("team"),
                a["value"].as_f64().expect("value"),
                a["since"].as_str().expect("since"),
            )
        })
        .collect();
    assert_eq!(
        idle,
        [
            ("pod lab/nb-1", "vision", 0.0, "2026-10-05T10:30:00Z"),
            ("process 400 on h since 2026-10-05T09:55:00Z", "unassigned", 0.0, "2026-10-05T10:30:00Z")
        ],
        "{alerts:?}"
    );
}

/// `apron job` on the hand-built hour: job 77's row equals `apron jobs`' row,
/// each finding is a header line, and the four timelines show what the GPUs
/// did: GPU 0's utilization line runs high, GPU 1's along the bottom, and
/// no GPM line where GPM measured nothing; carol's shows SM and tensor
/// activity.
fn job_report(data: &std::path::Path, config: &std::path::Path, rows: &[Value], out: &std::path::Path) {
    let apron = |args: &[&str]| {
        apron_over(data, config).args(["--format", "json"]).args(args).output().expect("apron runs")
    };
    let run = apron(&["job", "77", "--month", "2026-10", "--out", out.to_str().expect("utf-8")]);
    let header = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{header}");
    let got: Vec<Value> = serde_json::from_slice(&run.stdout).expect("json");
    let want = rows.iter().find(|r| r["job"] == "job 77").expect("job 77");
    assert_eq!(got, std::slice::from_ref(want), "the row of apron jobs");
    assert!(
        header.contains(
            "Job: job 77 (slurm), alice of nlp, on h/0 h/1 h/2 h/3; 4.0 GPU-hours costing $14.40, of which $10.80 \
             idle; grade D"
        ),
        "{header}"
    );
    assert!(
        header.contains("Finding: 3 of 4 GPUs never used (never busy while the job held them)"),
        "{header}"
    );
    assert!(header.contains("Finding: ran on GPUs with faults: XID 13 ×2 on h/0, XID 79 ×1"), "{header}");
    let files: Vec<std::path::PathBuf> = (0..4).map(|g| out.join(format!("job_77-h-{g}.png"))).collect();
    for f in &files {
        assert!(header.contains(&f.display().to_string()), "{} named: {header}", f.display());
    }
    // The row of the picture where most of a colour's pixels are, and how many.
    let line = |path: &std::path::Path, rgb: [u8; 3]| {
        let img = image::open(path).expect("a PNG").to_rgb8();
        assert_eq!(img.dimensions(), (1600, 900));
        let mut by_row = vec![0u32; 900];
        for (_, y, p) in img.enumerate_pixels() {
            if p.0 == rgb {
                by_row[y as usize] += 1;
            }
        }
        let (row, n) = by_row.iter().enumerate().max_by_key(|(_, n)| **n).expect("rows");
        (row, *n)
    };
    const UTIL: [u8; 3] = [0x00, 0x72, 0xB2];
    const SM: [u8; 3] = [0x00, 0x9E, 0x73];
    const TENSOR: [u8; 3] = [0xE6, 0x9F, 0x00];
    let (busy, n0) = line(&files[0], UTIL);
    let (idle, n1) = line(&files[1], UTIL);
    assert!(n0 > 500 && n1 > 500, "each draws its utilization across the plot: {n0}, {n1}");
    assert!(idle > busy + 400, "90% is far above 0%: rows {busy} and {idle}");
    assert_eq!(line(&files[0], SM).1, 0, "no GPM on GPU 0: no SM line, no legend swatch");

    let run = apron(&["job", "process 300", "--month", "2026-10", "--out", out.to_str().expect("utf-8")]);
    let header = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{header}");
    assert!(
        header.contains("Finding: tensor cores unused (tensor active 0.0% while SM active 62%)"),
        "{header}"
    );
    let carol = out.join("process_300_on_h_since_2026-10-05T09_55_00Z-h-5.png");
    let (sm_row, sm_n) = line(&carol, SM);
    let (tensor_row, tensor_n) = line(&carol, TENSOR);
    assert!(sm_n > 500 && tensor_n > 500, "{sm_n} {tensor_n}");
    assert!(tensor_row > sm_row + 200, "0% below 62%: rows {sm_row} and {tensor_row}");

    // A job that is not there: one line, exit 2.
    let run = apron(&["job", "78", "--month", "2026-10"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(err.contains("no job '78' held a GPU in"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}
