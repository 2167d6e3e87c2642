//! End to end: a Slurm job's account comes from Slurm. Real processes of
//! this test sit in real cgroups under Slurm's hierarchy
//! (`/slurm/uid_0/job_N/step_M`), are listed by the fake NVML and recorded
//! by the real `apron-recorder`, which asks a stand-in `scontrol` (a shell
//! script printing records in Slurm's own `-d -o` layout for the jobs it
//! knows, Slurm's error for the others, and logging each call); `apron`
//! then reads what was recorded.
//!
//! - The job's account is Slurm's: a process of the job that claims
//!   another account in its environment keeps Slurm's (the claim stays in
//!   `claimed_slurm_account`); a process outside any job that claims a job
//!   and an account has neither; a job Slurm does not know has no account.
//! - scontrol is asked once per job, not once per tick or per process.
//! - `apron spend` bills the job's GPU time to the team of its account,
//!   to the cent of a figure computed from the rows by hand.
//! - A scontrol that hangs is killed at its time limit (with what it
//!   started), delays no tick (every tick of the run is recorded, none
//!   missed) and is counted in the recorder's health line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::cgroup::Cgroup;
use apron_tests::kid::Kid;
use apron_tests::{bin, fake_nvml, stdout_of};
use serde_json::Value;

const GIB: u64 = 1 << 30;

/// The cost of one GPU-second under [`CONFIG`]: 36 per GPU-hour of
/// operations, nothing for the purchase or the energy.
const PER_GPU_SECOND: f64 = 0.01;

const CONFIG: &str = "currency = \"USD\"\n\n[energy]\nprice_per_kwh = 0.0\npue = 1.0\n\n\
[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 3\nops_per_gpu_hour = 36\n\n\
[[team]]\nname = \"finance-team\"\nslurm_accounts = [\"finance\"]\n\n\
[[team]]\nname = \"vision-team\"\nslurm_accounts = [\"vision\"]\n";

/// A record of `scontrol -d -o show job` in Slurm's field order
/// (`slurm_sprint_job_info`, src/scontrol/info_job.c), one line.
fn record(job: &str, account: &str, node: &str) -> String {
    format!(
        "JobId={job} JobName=train UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901758 Nice=0 \
         Account={account} QOS=normal JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 \
         BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:12 TimeLimit=01:00:00 \
         TimeMin=N/A SubmitTime=2026-12-03T10:00:00 EligibleTime=2026-12-03T10:00:00 \
         AccrueTime=2026-12-03T10:00:00 StartTime=2026-12-03T10:00:01 EndTime=2026-12-03T11:00:01 \
         Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-03T10:00:01 Scheduler=Main \
         Partition=gpu AllocNode:Sid=login1:4242 ReqNodeList=(null) ExcNodeList=(null) NodeList={node} \
         BatchHost={node} NumNodes=1 NumCPUs=8 NumTasks=2 CPUs/Task=4 ReqB:S:C:T=0:0:*:* \
         ReqTRES=cpu=8,mem=32G,node=1,billing=8,gres/gpu=2 AllocTRES=cpu=8,mem=32G,node=1,billing=8,gres/gpu=2 \
         Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* JOB_GRES=gpu:2 Nodes={node} CPU_IDs=0-7 Mem=32768 \
         GRES=gpu:2(IDX:0-1) MinCPUsNode=4 MinMemoryNode=32G MinTmpDiskNode=0 Features=(null) \
         DelayBoot=00:00:00 OverSubscribe=OK Exclusive=NO Contiguous=0 Licenses=(null) LicensesAlloc=(null) \
         Network=(null) Command=/root/train.sh WorkDir=/root StdErr=/root/slurm-{job}.out StdIn=/dev/null \
         StdOut=/root/slurm-{job}.out TresPerNode=gres/gpu:2"
    )
}

/// Writes the executable script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write a stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A `sleep 600` child with exactly `env` (and a `PATH` to find `sleep`
/// by), killed when dropped.
fn kid(env: &[(&str, &str)]) -> Kid {
    let mut with_path = vec![("PATH", "/usr/bin:/bin")];
    with_path.extend_from_slice(env);
    Kid::spawn(Path::new("sleep"), &with_path)
}

/// Starts the recorder on the fake NVML with one GPU per pid in `pids`
/// (idle, 1 GiB held by that pid), asking `scontrol`. The GPUs' device
/// files are numbered backwards (GPU-s0 is the highest minor number), so
/// Slurm's `IDX` 0 is the last GPU.
fn recorder(data: &Path, scontrol: &Path, pids: &[u32]) -> Child {
    let gpus: Vec<String> = pids
        .iter()
        .enumerate()
        .map(|(i, pid)| {
            let minor = pids.len() - 1 - i;
            format!(
                "uuid=GPU-s{i},minor={minor},util=0,fb_total=85899345920,fb_used={GIB},compute={pid}:{GIB}"
            )
        })
        .collect();
    Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(data)
        .args([
            "--source",
            "nvml",
            "--host",
            "n1",
            "--slurm-node",
            "n1",
            "--health-every",
            "1s",
            "--scontrol",
        ])
        .arg(scontrol)
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .env("FAKE_NVML_GPUS", gpus.join(";"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts")
}

/// Stops the recorder with SIGTERM; its output once it exited 0.
fn stop(recorder: Child) -> Output {
    apron_tests::signal(&recorder, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(recorder, Duration::from_secs(30));
    assert!(out.status.success(), "the recorder: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Every row of `apron --format json ARGS…` as JSON objects.
fn rows(data: &Path, config: &Path, args: &[&str]) -> Vec<Value> {
    let out = stdout_of(
        Command::new(bin("apron"))
            .arg("--data")
            .arg(data)
            .arg("--config")
            .arg(config)
            .args(["--format", "json"])
            .args(args),
    );
    serde_json::from_str(&out).expect("a JSON array")
}

fn sql(data: &Path, config: &Path, query: &str) -> Vec<Value> {
    rows(data, config, &["sql", query])
}

/// Polls `f` until it holds, at most `limit`.
fn eventually(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The value of `key=` in the last `health` line of the recorder's log.
fn health(log: &str, key: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains(" health "))?;
    let rest = &line[line.find(&format!(" {key}="))? + key.len() + 2..];
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[test]
fn a_jobs_account_comes_from_slurm_asked_once_per_job() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, CONFIG).expect("config");
    let tools = tmp.path().join("bin");
    std::fs::create_dir(&tools).expect("mkdir");
    let log = tmp.path().join("slurm.log");
    // Slurm knows job 4242 (account vision, on n1); not job 555.
    let scontrol = script(
        &tools,
        "scontrol",
        &format!(
            "echo \"scontrol $*\" >> '{log}'\nfor a; do job=$a; done\ncase $job in\n\
             4242) echo '{record}' ;;\n\
             *) echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1 ;;\nesac\n",
            log = log.display(),
            record = record("4242", "vision", "n1"),
        ),
    );
    script(
        &tools,
        "squeue",
        &format!(
            "echo \"squeue $*\" >> '{log}'\ncase \"$*\" in *--nodelist=n1*) echo 4242 ;; esac\n",
            log = log.display()
        ),
    );

    let kids = [
        // 0: in job 4242, claiming account finance.
        kid(&[("SLURM_JOB_ID", "4242"), ("SLURM_JOB_ACCOUNT", "finance")]),
        // 1: in job 4242 too, claiming nothing.
        kid(&[]),
        // 2: in job 555, which Slurm does not know.
        kid(&[]),
        // 3: in no job, claiming job 4242 and account vision.
        kid(&[("SLURM_JOB_ID", "4242"), ("SLURM_JOB_ACCOUNT", "vision")]),
    ];
    let _cgroups = [
        Cgroup::enter("/slurm/uid_0/job_4242/step_0", kids[0].pid()),
        Cgroup::enter("/slurm/uid_0/job_4242/step_1", kids[1].pid()),
        Cgroup::enter("/slurm/uid_0/job_555/step_0", kids[2].pid()),
    ];
    let pids: Vec<u32> = kids.iter().map(Kid::pid).collect();
    let recorder = recorder(&data, &scontrol, &pids);

    // Until both processes of job 4242 are recorded with Slurm's account,
    // then some more ticks.
    // (Before the first tick there is no data at all: apron says so and fails.)
    let vision = "SELECT count(DISTINCT pid) AS n FROM proc_samples WHERE slurm_account = 'vision'";
    eventually("job 4242's account recorded", Duration::from_secs(60), || {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .args(["--format", "csv", "sql", vision])
            .output()
            .expect("apron runs");
        String::from_utf8_lossy(&out.stdout).lines().nth(1) == Some("2")
    });
    std::thread::sleep(Duration::from_secs(4));
    let out = stop(recorder);
    let stderr = String::from_utf8_lossy(&out.stderr);

    let by_pid = sql(
        &data,
        &config,
        "SELECT pid, max(slurm_job_id) AS job, max(slurm_account) AS account, \
         max(claimed_slurm_job_id) AS claimed_job, max(claimed_slurm_account) AS claimed_account, \
         max(slurm_partition) AS partition, \
         count(*) AS n_rows, count(slurm_account) AS with_account, count(DISTINCT slurm_account) AS accounts \
         FROM proc_samples GROUP BY pid",
    );
    let row = |i: usize| {
        by_pid
            .iter()
            .find(|r| r["pid"].as_u64() == Some(u64::from(pids[i])))
            .unwrap_or_else(|| panic!("kid {i}"))
    };
    let fields = |i: usize| {
        let r = row(i);
        [&r["job"], &r["account"], &r["claimed_job"], &r["claimed_account"]]
            .map(|v| v.as_str().map(str::to_owned))
    };
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(fields(0), [some("4242"), some("vision"), some("4242"), some("finance")], "{}", row(0));
    assert_eq!(fields(1), [some("4242"), some("vision"), None, None], "{}", row(1));
    assert_eq!(fields(2), [some("555"), None, None, None], "{}", row(2));
    assert_eq!(fields(3), [None, None, some("4242"), some("vision")], "{}", row(3));
    for i in [0, 1] {
        let r = row(i);
        // Only Slurm's account, ever; missing only at the first ticks,
        // before Slurm answered.
        assert_eq!(r["accounts"].as_i64(), Some(1), "{r}");
        let missing = r["n_rows"].as_i64().unwrap_or(0) - r["with_account"].as_i64().unwrap_or(0);
        assert!((0..=2).contains(&missing), "{missing} rows without the account: {r}");
    }
    assert_eq!(row(2)["with_account"].as_i64(), Some(0), "{}", row(2));
    // The partition is Slurm's too; a process outside any job has none.
    let partition = |i: usize| row(i)["partition"].as_str().map(str::to_owned);
    assert_eq!(
        [partition(0), partition(1), partition(2), partition(3)],
        [some("gpu"), some("gpu"), None, None]
    );

    // Asked once per job: not per tick, not per process, not again for the
    // job squeue lists too.
    let calls = std::fs::read_to_string(&log).expect("the stand-ins ran");
    let asked = |job: &str| calls.lines().filter(|l| *l == format!("scontrol -d -o show job {job}")).count();
    assert_eq!((asked("4242"), asked("555")), (1, 1), "{calls}");
    let listed: Vec<&str> = calls.lines().filter(|l| l.starts_with("squeue")).collect();
    assert_eq!(listed, ["squeue --noheader --states=RUNNING --nodelist=n1 --format=%A"], "{calls}");
    assert_eq!(calls.lines().count(), 3, "{calls}");
    assert_eq!(
        ["slurm_asked", "slurm_known", "slurm_unknown", "slurm_failed", "slurm_listed"]
            .map(|k| health(&stderr, k)),
        [Some(2), Some(1), Some(1), Some(0), Some(1)],
        "{stderr}"
    );

    // The GPUs Slurm allocated to job 4242 (`IDX:0-1`) are recorded as its
    // whatever runs there: IDX 0 and 1 are the two lowest minor numbers,
    // GPU-s3 and GPU-s2; its processes' GPUs (s0, s1) are not Slurm's IDX
    // 0-1 here.
    let held = sql(
        &data,
        &config,
        "SELECT gpu_uuid, source, slurm_job_id, slurm_account, slurm_partition, \"user\", \
         sum(samples) AS samples FROM alloc_minutes \
         GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1",
    );
    let brief: Vec<_> = held
        .iter()
        .map(|r| {
            ["gpu_uuid", "source", "slurm_job_id", "slurm_account", "slurm_partition", "user"]
                .map(|k| r[k].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let want = |gpu: &str| [gpu, "slurm", "4242", "vision", "gpu", "root"].map(str::to_owned);
    assert_eq!(brief, [want("GPU-s2"), want("GPU-s3")], "{held:?}");
    assert!(held.iter().all(|r| r["samples"].as_i64().is_some_and(|n| n >= 3)), "{held:?}");

    // The job's time is billed to its account's team: every row with the
    // account is one GPU-second of a GPU that process holds alone.
    let billed = sql(
        &data,
        &config,
        "SELECT CAST(sum(interval_ms) AS BIGINT) AS ms FROM proc_samples WHERE slurm_account = 'vision'",
    );
    let vision_ms = billed[0]["ms"].as_i64().expect("vision's milliseconds");
    apron_tests::next_whole_second();
    let spend = rows(&data, &config, &["spend", "--last", "1h"]);
    let cost =
        |team: &str| spend.iter().find(|r| r["team"] == team).and_then(|r| r["cost"].as_f64()).unwrap_or(0.0);
    let expected = vision_ms as f64 / 1000.0 * PER_GPU_SECOND;
    assert!(expected > 0.0);
    assert_eq!((cost("vision-team") * 100.0).round(), (expected * 100.0).round(), "{spend:?}");
    assert_eq!(cost("finance-team"), 0.0, "a claimed account bills nothing: {spend:?}");
    // The rest (the unknown job's process and the one outside any job,
    // root's, in no team) is unassigned.
    let rest = sql(
        &data,
        &config,
        "SELECT CAST(sum(interval_ms) AS BIGINT) AS ms FROM proc_samples WHERE slurm_account IS NULL",
    );
    let rest_cost = rest[0]["ms"].as_i64().expect("the rest's milliseconds") as f64 / 1000.0 * PER_GPU_SECOND;
    assert_eq!((cost("unassigned") * 100.0).round(), (rest_cost * 100.0).round(), "{spend:?}");
}

#[test]
fn a_hung_scontrol_delays_no_tick_and_is_counted() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, CONFIG).expect("config");
    let log = tmp.path().join("slurm.log");
    // Hangs, with a child of its own holding its output open.
    let scontrol = script(
        tmp.path(),
        "scontrol",
        &format!(
            "echo \"pid $$\" >> '{log}'\nsleep 60 &\necho \"pid $!\" >> '{log}'\nwait\n",
            log = log.display()
        ),
    );
    let kid = kid(&[]);
    let _cgroup = Cgroup::enter("/slurm/uid_0/job_777/step_0", kid.pid());
    let recorder = recorder(&data, &scontrol, &[kid.pid()]);
    // Past the 5 s limit, and one health line more.
    let t0 = Instant::now();
    eventually("scontrol asked", Duration::from_secs(30), || log.exists());
    std::thread::sleep(Duration::from_secs(8));
    let out = stop(recorder);
    let ran_for = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Every tick of the run recorded, one second apart.
    let ticks = sql(
        &data,
        &config,
        "SELECT count(*) AS n, CAST(max(ts) AS BIGINT) - CAST(min(ts) AS BIGINT) AS span_ms, \
         count(slurm_account) AS with_account FROM proc_samples",
    );
    let (n, span_ms) = (ticks[0]["n"].as_i64().expect("n"), ticks[0]["span_ms"].as_i64().expect("span"));
    assert!(n >= 8 && n as u128 <= ran_for.as_millis() / 1000 + 2, "{n} ticks in {ran_for:?}");
    assert_eq!(span_ms, (n - 1) * 1000, "a tick is missing: {n} rows over {span_ms} ms");
    assert_eq!(ticks[0]["with_account"].as_i64(), Some(0));
    assert_eq!(health(&stderr, "missed_ticks"), Some(0), "{stderr}");
    assert_eq!(health(&stderr, "slurm_timeouts"), Some(1), "{stderr}");
    assert_eq!(health(&stderr, "slurm_failed"), Some(1), "{stderr}");
    assert!(stderr.contains("scontrol did not answer in time and was killed"), "{stderr}");

    // The stand-in and the child it started were killed at the limit, not
    // left to sleep.
    let calls = std::fs::read_to_string(&log).expect("log");
    for pid in calls.lines().filter_map(|l| l.strip_prefix("pid ")) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(!stat.contains("(sleep)") && !stat.contains("(scontrol)"), "{pid} still runs: {stat}");
    }
}

#[test]
fn a_scontrol_that_is_not_there_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("bin/scontrol");
    let out = Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(tmp.path().join("data"))
        .args(["--source", "sim", "--scontrol"])
        .arg(&missing)
        .stdin(Stdio::null())
        .output()
        .expect("the recorder runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [format!(
            "error: --scontrol {}: no executable file there (--scontrol '' or --no-slurm turns Slurm lookups off)",
            missing.display()
        )],
        "{stderr}"
    );
    assert!(!tmp.path().join("data").exists(), "nothing recorded");
}
