//! End to end: `apron zombies --commands` and `apron starved` as real
//! processes over an hour of two hosts written by the recorder's writer.
//!
//! - The script names exactly the zombies still running that
//!   `queries/zombies.sql` finds through `apron sql` (the views, not the
//!   ledger), host by host, and parses in `sh` and `bash`.
//! - Run for real on the host whose zombies are this test's own child
//!   processes (their start times and command names read as the recorder
//!   reads them, each in a real cgroup where it matters), with `logger`,
//!   `mail`, `kubectl` and `scancel` stood in for and the real
//!   `apron-recorder idle-now` reading the host's data: a plain process
//!   dies of TERM, one that ignores TERM of KILL, one whose recorded start
//!   time is another process's is left alone, a pod is deleted by the name
//!   kubectl gives for its uid on this node, a Slurm job is cancelled, and
//!   each owner gets the notice. A process the data puts in a pod or a job
//!   whose cgroup it is not in (a user's own `…/slurm.slice/job_4242.scope`
//!   or `…kubepods-…-pod<uid>.slice`) is left alone, and so is one whose
//!   GPU the recorder's newest rows (its write-ahead log, written after
//!   the list) show busy; a process idle earlier and busy now is not even
//!   listed.
//! - A process whose idle GPU moved data over PCIe is `apron starved`'s,
//!   with the traffic computed by hand, and not a zombie; `--starved-pcie`
//!   moves it back.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_recorder::identity::IdentityCache;
use apron_schemas::{DataLayout, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::cgroup::Cgroup;
use apron_tests::{bin, files_under};
use serde_json::Value;

const STEP_MS: i64 = 10_000;
const MIN_MS: i64 = 60_000;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;
/// The hour recorded.
const MINUTES: i64 = 60;

/// The pod uid and Slurm job of host h1's (made-up) processes.
const POD_H1: &str = "8f1c2a4e-0b7d-4c1e-9a55-2f1d0c3b4a5e";
/// The pod of host h2's child process, and the name kubectl gives it.
const POD_H2: &str = "0d5e8a1c-7b3f-4e2a-8c6d-9f1a2b3c4d5e";
const POD_H2_NAME: &str = "train-7f9c-x2b";

/// One process of the fixture.
struct Proc {
    host: &'static str,
    gpu: i32,
    pid: i32,
    identity: ProcIdentity,
    mem: i64,
    /// Recorded for the first this many minutes.
    minutes: i64,
}

fn who(comm: &str, user: &str, proc_start: i64) -> ProcIdentity {
    ProcIdentity {
        proc_start: Some(proc_start),
        comm: Some(comm.into()),
        user: Some(user.into()),
        ..Default::default()
    }
}

/// The GPU-minute of `gpu` on `host` at minute `m`: utilization (%), PCIe
/// received and sent (bytes/s).
fn gpu_load(host: &str, gpu: i32, m: i64) -> (i32, i64, i64) {
    match (host, gpu) {
        // Data-starved: 200 and 600 MiB/s received in turn, 50 sent, at 1 %.
        ("h1", 3) => (1, if m % 2 == 0 { 200 * MIB } else { 600 * MIB }, 50 * MIB),
        // A zombie's GPU moving a little: 10 MiB/s, under the threshold.
        ("h1", 4) => (0, 10 * MIB, 0),
        // Busy.
        ("h1", 5) => (90, 2_000 * MIB, 100 * MIB),
        // Idle for 40 minutes, then busy.
        ("h2", 7) if m >= 40 => (90, 0, 0),
        _ => (0, 0, 0),
    }
}

/// Writes the hour ending at `end` (ms) of `procs` on hosts h1 (GPUs 0-5)
/// and h2 (GPUs 0-8) into `data`.
fn write(data: &Path, end: i64, procs: &[Proc]) {
    let start = end - MINUTES * MIN_MS;
    for (host, gpus) in [("h1", 6), ("h2", 9)] {
        let mut w =
            RollingWriter::new(DataLayout::new(data), host, Duration::from_secs(3_600)).expect("host");
        push(&mut w, host, gpus, start, start..end, procs, gpu_load);
        w.close().expect("close");
    }
}

/// Pushes the ticks of `host` in `span` (ms), each GPU's load by
/// `load(host, gpu, minutes since start)`.
fn push(
    w: &mut RollingWriter,
    host: &str,
    gpus: i32,
    start: i64,
    span: std::ops::Range<i64>,
    procs: &[Proc],
    load: fn(&str, i32, i64) -> (i32, i64, i64),
) {
    let mut ts = span.start;
    {
        while ts < span.end {
            let m = (ts - start) / MIN_MS;
            let gpus = (0..gpus)
                .map(|index| {
                    let (util, rx, tx) = load(host, index, m);
                    GpuSample {
                        ts,
                        gpu_uuid: format!("GPU-{host}-{index}").into(),
                        gpu_index: index,
                        interval_ms: STEP_MS as i32,
                        gpu_util_pct: Some(util),
                        pcie_rx_bytes_per_s: Some(rx),
                        pcie_tx_bytes_per_s: Some(tx),
                        ..Default::default()
                    }
                })
                .collect();
            let procs = procs
                .iter()
                .filter(|p| p.host == host && m < p.minutes)
                .map(|p| ProcSample {
                    ts,
                    gpu_uuid: format!("GPU-{host}-{}", p.gpu).into(),
                    pid: p.pid,
                    interval_ms: STEP_MS as i32,
                    identity: p.identity.clone(),
                    used_mem_bytes: Some(p.mem),
                    sm_util_pct: Some(0),
                    ..Default::default()
                })
                .collect();
            w.push(ts, &Tick { gpus, procs, ..Default::default() }).expect("push");
            ts += STEP_MS;
        }
    }
}

/// A child process of this test, killed when dropped if still running.
struct Kid(Child);

impl Kid {
    fn spawn(program: &str, args: &[&str]) -> Kid {
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn a child");
        Kid(child)
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.0.id()).expect("a pid")
    }

    /// Its start time and command name, read as the recorder reads them.
    fn identity(&self, user: &str) -> ProcIdentity {
        let read = IdentityCache::with_namespace(None).identity(self.pid()).clone();
        assert!(read.proc_start.is_some() && read.comm.is_some(), "{read:?}");
        ProcIdentity { user: Some(user.into()), ..read }
    }

    /// How it ended: `None` while it runs.
    fn ended(&mut self) -> Option<std::process::ExitStatus> {
        self.0.try_wait().expect("try_wait")
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `apron` over `data` with `config`, failing the test on failure.
fn apron(data: &Path, args: &[&str]) -> Output {
    let out = Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .args(args)
        .env_remove("APRON_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert!(out.status.success(), "apron {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn json(data: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_slice(&apron(data, &all).stdout).expect("one JSON array")
}

/// The (host, pid) of rows.
fn processes(rows: &[Value]) -> BTreeSet<(String, i64)> {
    rows.iter()
        .map(|r| (r["host"].as_str().expect("host").to_owned(), r["pid"].as_i64().expect("pid")))
        .collect()
}

/// The (host, pid) each host's part of `script` guards with `same`.
fn named(script: &str) -> BTreeSet<(String, i64)> {
    let mut host = None;
    let mut out = BTreeSet::new();
    for line in script.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("if [ \"$here\" = '") {
            host = rest.strip_suffix("' ]; then").map(str::to_owned);
        } else if let Some(tests) = line.strip_prefix("if same ").map(|t| format!("same {t}")) {
            let host = host.clone().expect("a guard inside a host's part");
            for test in tests.split(" || ") {
                let pid = test.split_whitespace().nth(1).expect("a pid").parse().expect("a number");
                out.insert((host.clone(), pid));
            }
        }
    }
    out
}

/// Writes an executable `name` into `dir` that logs its arguments to `log`
/// (and, for `kubectl get`, lists pods; for `mail`, its body).
fn stand_in(dir: &Path, name: &str, log: &Path) {
    let log = log.display();
    let body = match name {
        // This node's pods, when asked for them by node (the forged pod's
        // uid among them), else none.
        "kubectl" => format!(
            "if [ \"$1\" = get ]; then\n  case \"$*\" in *'spec.nodeName=h2 '*) ;; *) exit 0 ;; esac\n  \
             printf '%s\\n' 'ffff-0000 other-ns someone-else' '{POD_H2} ml {POD_H2_NAME}' \
             '3c2b1a09-8e7d-4c6b-a594-837261504f3e ml forged'\n  exit 0\nfi\necho \"kubectl $*\" >> '{log}'\n"
        ),
        "mail" => format!("for to; do :; done\necho \"mail to $to: $(cat)\" >> '{log}'\n"),
        _ => format!("echo \"{name} $*\" >> '{log}'\n"),
    };
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write a stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// What the recorder's newest rows say after the list was made: two more
/// minutes, h2's GPU 8 busy in them.
fn later_load(host: &str, gpu: i32, m: i64) -> (i32, i64, i64) {
    match (host, gpu) {
        ("h2", 8) => (90, 0, 0),
        _ => gpu_load(host, gpu, m),
    }
}

#[test]
fn the_commands_stop_exactly_the_zombies_idle_now_and_the_starved_are_apart() {
    bin("apron"); // built before the clock is read
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // The hour ends a few minutes from now, so that its newest minutes are
    // "now" when the script runs, however slow the machine.
    let end = chrono::Utc::now().timestamp_millis() / MIN_MS * MIN_MS + 3 * MIN_MS;
    let start = end - MINUTES * MIN_MS;
    let (from, to) = (ms_text(start), ms_text(end));
    let period = ["--from", from.as_str(), "--to", to.as_str()];

    // h2's zombies are children of this test: a plain process, one whose
    // pid the recorder saw with another start time (a reused pid), one
    // that ignores TERM, one in a pod, one in a Slurm job (both in their
    // cgroups where the kubelet and Slurm make them), one the data puts in
    // a pod and one in a job that a user's own cgroup only mimics, one
    // idle for 40 minutes and busy since, and one whose GPU turns busy
    // after the list is made.
    let mut kids: Vec<Kid> = (0..9)
        .map(|i| match i {
            2 => Kid::spawn("sh", &["-c", "trap '' TERM; while :; do sleep 1; done"]),
            _ => Kid::spawn("sleep", &["600"]),
        })
        .collect();
    let pid = |i: usize| u32::try_from(kids[i].pid()).expect("a pid");
    let forged_pod = "3c2b1a09-8e7d-4c6b-a594-837261504f3e";
    let user_tree = "/user.slice/user-1000.slice/user@1000.service";
    let _cgroups = [
        Cgroup::enter(&format!("/kubepods/besteffort/pod{POD_H2}/{}", "ab".repeat(32)), pid(3)),
        Cgroup::enter("/slurm/uid_1000/job_888/step_0", pid(4)),
        Cgroup::enter(
            &format!("{user_tree}/app.slice/kubepods-besteffort-pod{}.slice", forged_pod.replace('-', "_")),
            pid(5),
        ),
        Cgroup::enter(&format!("{user_tree}/slurm.slice/job_4242.scope"), pid(6)),
    ];
    let mut reused_id = kids[1].identity("bob");
    reused_id.proc_start = reused_id.proc_start.map(|s| s - 3_600_000);
    // What the data says of them (as an older build, or another tool,
    // could have written it).
    let pod_id = ProcIdentity { k8s_pod_uid: Some(POD_H2.into()), ..kids[3].identity("root") };
    let job_id = ProcIdentity { slurm_job_id: Some("888".into()), ..kids[4].identity("erin") };
    let forged_pod_id = ProcIdentity { k8s_pod_uid: Some(forged_pod.into()), ..kids[5].identity("mallory") };
    let forged_job_id = ProcIdentity { slurm_job_id: Some("4242".into()), ..kids[6].identity("mallory") };
    let h2 = |gpu: i32, kid: &Kid, identity: ProcIdentity| Proc {
        host: "h2",
        gpu,
        pid: kid.pid(),
        identity,
        mem: GIB,
        minutes: i64::MAX,
    };
    let t0 = start - 86_400_000;
    let h1 = |gpu: i32, pid: i32, identity: ProcIdentity, mem: i64, minutes: i64| Proc {
        host: "h1",
        gpu,
        pid,
        identity,
        mem,
        minutes,
    };
    let procs = [
        h1(
            0,
            2001,
            ProcIdentity { k8s_pod_uid: Some(POD_H1.into()), ..who("python", "root", t0) },
            4 * GIB,
            MINUTES,
        ),
        h1(
            1,
            2002,
            ProcIdentity {
                slurm_job_id: Some("777001".into()),
                slurm_account: Some("nlp".into()),
                ..who("python", "bob", t0)
            },
            3 * GIB,
            MINUTES,
        ),
        // Gone after half an hour: a zombie, no longer running.
        h1(2, 2003, who("python", "carol", t0), GIB, 30),
        // Data-starved.
        h1(3, 2004, who("python", "dave", t0), 8 * GIB, MINUTES),
        h1(4, 2005, who("it's", "o'brien", t0), 2 * GIB, MINUTES),
        // On a busy GPU.
        h1(5, 2006, who("python", "frank", t0), 10 * GIB, MINUTES),
        h2(0, &kids[0], kids[0].identity("alice")),
        h2(1, &kids[1], reused_id),
        h2(2, &kids[2], kids[2].identity("carol")),
        h2(3, &kids[3], pod_id),
        h2(4, &kids[4], job_id),
        h2(5, &kids[5], forged_pod_id),
        h2(6, &kids[6], forged_job_id),
        h2(7, &kids[7], kids[7].identity("grace")),
        h2(8, &kids[8], kids[8].identity("heidi")),
    ];
    write(&data, end, &procs);

    // The zombies by the views (`apron sql`), not the ledger: still
    // running, and of those idle now.
    let sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries/zombies.sql");
    let mut args = vec!["sql", "-f", sql.to_str().expect("utf-8 path")];
    args.extend(["--param", "1=268435456", "--param", "2=10", "--param", "3=100"]);
    args.extend(period);
    let by_views = json(&data, &args);
    let where_ =
        |column: &str| processes(&by_views.iter().filter(|r| r[column] == true).cloned().collect::<Vec<_>>());
    let (running, idle) = (where_("still_running"), where_("still_idle"));
    let kid = |i: usize| ("h2".to_owned(), i64::from(kids[i].pid()));
    let h1 = |pid: i64| ("h1".to_owned(), pid);
    let idle_now: BTreeSet<_> =
        [h1(2001), h1(2002), h1(2005), kid(0), kid(1), kid(2), kid(3), kid(4), kid(5), kid(6), kid(8)].into();
    let mut expected = idle_now.clone();
    expected.insert(kid(7));
    assert_eq!(running, expected, "the views' zombies still running");
    assert_eq!(idle, idle_now, "the views' zombies idle now: not the one busy since minute 40");

    // The script names exactly those idle now, host by host, and parses.
    let mut args = vec!["zombies", "--commands", "--wait", "1s", "--min-idle", "2m"];
    args.extend(period);
    let script = String::from_utf8(apron(&data, &args).stdout).expect("utf-8");
    assert_eq!(named(&script), idle_now, "{script}");
    for shell in ["sh", "bash"] {
        let out = Command::new(shell).arg("-n").arg("-c").arg(&script).output().expect("the shell runs");
        assert!(out.status.success(), "{shell} -n: {}\n{script}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(script.contains(&format!("delete_pod '{POD_H1}' \"$wait_s\"")), "{script}");
    assert!(script.contains("scancel '777001' </dev/null"), "{script}");
    assert!(script.contains("if same 2005 ") && script.contains(" 'it'\\''s'; then"), "{script}");
    assert!(!script.contains("2003") && !script.contains("2004") && !script.contains("2006"), "{script}");
    assert!(script.contains("\nmin_idle=2\n"), "{script}");
    // Most memory-minutes first: h1's 4 GiB pod before its 3 GiB job.
    assert!(script.find(POD_H1) < script.find("777001"), "{script}");

    // After the list: two more minutes in h2's write-ahead log, as a
    // running recorder leaves them, GPU 8 busy.
    let mut w = RollingWriter::new(DataLayout::new(&data), "h2", Duration::from_secs(3_600))
        .expect("host")
        .with_wal(Duration::from_millis(1))
        .expect("a WAL");
    push(&mut w, "h2", 9, start, end..end + 2 * MIN_MS, &procs, later_load);
    drop(w);
    let wal = files_under(&data.join("wal"));
    assert!(wal.iter().any(|p| p.extension().is_some_and(|e| e == "wal")), "{wal:?}");

    // Run h2's part for real, with stand-ins for the tools around it and
    // the real recorder binary reading the host's data.
    let tools = tmp.path().join("bin");
    std::fs::create_dir(&tools).expect("mkdir");
    let log = tmp.path().join("tools.log");
    for name in ["logger", "mail", "kubectl", "scancel"] {
        stand_in(&tools, name, &log);
    }
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    let began = Instant::now();
    let ran = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("APRON_HOST", "h2")
        .env("APRON_RECORDER", bin("apron-recorder"))
        .env("APRON_RECORDER_DATA", &data)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&ran.stderr));
    assert!(began.elapsed() < Duration::from_secs(60), "the waits are bounded: {:?}", began.elapsed());
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let signal = |k: &mut Kid| k.ended().and_then(|s| s.signal());
    assert_eq!(signal(&mut kids[0]), Some(libc::SIGTERM), "the plain process gets TERM:\n{stdout}");
    assert_eq!(kids[1].ended(), None, "a reused pid is left alone:\n{stdout}");
    assert!(
        stdout.contains(&format!("apron: pid {} on h2 is gone or is another process now", kids[1].pid()))
    );
    assert_eq!(signal(&mut kids[2]), Some(libc::SIGKILL), "one that ignores TERM gets KILL:\n{stdout}");
    assert!(
        log.contains(&format!("kubectl delete pod --namespace=ml --grace-period=1 {POD_H2_NAME}")),
        "{log}"
    );
    assert!(log.lines().any(|l| l == "scancel 888"), "{log}");
    // The pod's and the job's processes are theirs to stop, not apron's.
    assert_eq!((kids[3].ended(), kids[4].ended()), (None, None));
    // Named in the data, not by the kernel: nothing is deleted or
    // cancelled, though kubectl lists that pod on this node.
    assert!(!log.contains(forged_pod) && !log.contains("forged") && !log.contains("4242"), "{log}");
    assert!(
        stdout.contains(&format!(
            "apron: pid {} on h2 is not in pod {forged_pod} by its cgroup",
            kids[5].pid()
        )),
        "{stdout}"
    );
    assert!(
        stdout
            .contains(&format!("apron: pid {} on h2 is not in Slurm job 4242 by its cgroup", kids[6].pid())),
        "{stdout}"
    );
    // Busy now by the newest rows: left alone, and told why.
    assert!(stdout.contains("GPU GPU-h2-8 busy at"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "apron: pid {} on h2: not every GPU of it has been idle for 2 minutes now",
            kids[8].pid()
        )),
        "{stdout}"
    );
    for i in [5, 6, 7, 8] {
        assert_eq!(kids[i].ended(), None, "kid {i} left alone:\n{stdout}");
    }
    // Each owner is told, in the log and by mail (not root, nor bob, whose
    // process was not stopped).
    let notices: Vec<&str> =
        log.lines().filter(|l| l.starts_with("logger -t apron -p user.notice ")).collect();
    assert_eq!(notices.len(), 4, "{log}");
    let mailed: BTreeSet<&str> =
        log.lines().filter_map(|l| l.strip_prefix("mail to ")?.split(": ").next()).collect();
    assert_eq!(mailed, ["alice", "carol", "erin"].into(), "{log}");
    assert!(!log.contains("h1") && !stdout.contains("h1:"), "h1's part did not run on h2:\n{log}\n{stdout}");

    // The data-starved process: `starved` lists it with its traffic, and
    // it is no zombie.
    let mut args = vec!["starved"];
    args.extend(period);
    let starved = json(&data, &args);
    assert_eq!(starved.len(), 1, "{starved:?}");
    let s = &starved[0];
    assert_eq!((s["host"].as_str(), s["pid"].as_i64()), (Some("h1"), Some(2004)));
    // 30 minutes at 200 MiB/s and 30 at 600 received, 50 sent, at 1 %.
    assert_eq!(s["pcie_rx_mib_per_s"].as_f64(), Some(400.0), "{s}");
    assert_eq!(s["pcie_tx_mib_per_s"].as_f64(), Some(50.0), "{s}");
    assert_eq!(s["activity_pct"].as_f64(), Some(1.0), "{s}");
    assert_eq!((s["idle_minutes"].as_i64(), s["still_running"].as_bool()), (Some(60), Some(true)));
    let mut args = vec!["zombies"];
    args.extend(period);
    let zombies = processes(&json(&data, &args));
    assert!(!zombies.contains(&h1(2004)) && zombies.contains(&h1(2003)), "{zombies:?}");
    assert_eq!(zombies, processes(&by_views), "the ledger's zombies are the views'");
    let mut sql = vec!["sql", "-f"];
    let starved_sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries/starved.sql");
    sql.push(starved_sql.to_str().expect("utf-8 path"));
    sql.extend(["--param", "1=268435456", "--param", "2=10", "--param", "3=100"]);
    sql.extend(period);
    let by_views = json(&data, &sql);
    assert_eq!(processes(&by_views), [h1(2004)].into());
    assert_eq!(by_views[0]["pcie_rx_mib_per_s"].as_f64(), Some(400.0));

    // The threshold decides: at 450 MiB/s (its traffic) it is starved, above
    // it or at 0 (off) it is a zombie again.
    let with = |threshold: &str| {
        let mut args = vec!["zombies", "--starved-pcie", threshold];
        args.extend(period);
        let zombies = processes(&json(&data, &args));
        let mut args = vec!["starved", "--starved-pcie", threshold];
        args.extend(period);
        (zombies.contains(&h1(2004)), processes(&json(&data, &args)).contains(&h1(2004)))
    };
    assert_eq!(with("450"), (false, true));
    assert_eq!(with("451"), (true, false));
    assert_eq!(with("0"), (true, false));
}

fn ms_text(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("a time")
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A bad flag is one line on stderr and exit code 2, before any data is read.
#[test]
fn bad_flags_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (args, says) in [
        (&["zombies", "--wait", "30s"][..], "--commands"),
        (&["zombies", "--commands", "--wait", "2h"], "must be at most 1h"),
        (&["zombies", "--commands", "--wait", "0s"], "must be longer than zero"),
        (&["zombies", "--commands", "--wait", "soon"], "--wait"),
        (&["zombies", "--starved-pcie", "-1"], "'-1'"),
        (&["zombies", "--starved-pcie=-1"], "from 0 to 1048576"),
        (&["starved", "--starved-pcie", "1048577"], "from 0 to 1048576"),
        (&["starved", "--starved-pcie", "fast"], "--starved-pcie"),
        (&["starved", "--commands"], "--commands"),
    ] {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(tmp.path().join("none"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
