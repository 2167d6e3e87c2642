//! The lookup thread against stand-in `scontrol` and `squeue` scripts that
//! print real-format records and log each call.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::*;

/// A one-line `scontrol -d -o show job` record (Slurm's field order).
fn record(job: &str, account: &str, gres: &str) -> String {
    format!(
        "JobId={job} JobName=train UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A Priority=1 Nice=0 \
         Account={account} QOS=normal JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 \
         BatchFlag=1 Reboot=0 ExitCode=0:0 DerivedExitCode=0:0 RunTime=00:00:05 TimeLimit=01:00:00 \
         TimeMin=N/A SubmitTime=2026-12-03T10:00:00 EligibleTime=2026-12-03T10:00:00 \
         AccrueTime=2026-12-03T10:00:00 StartTime=2026-12-03T10:00:01 EndTime=2026-12-03T11:00:01 \
         Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-12-03T10:00:01 Scheduler=Main \
         Partition=gpu AllocNode:Sid=login1:1 ReqNodeList=(null) ExcNodeList=(null) NodeList=node07 \
         BatchHost=node07 NumNodes=1 NumCPUs=4 NumTasks=1 CPUs/Task=4 ReqB:S:C:T=0:0:*:* \
         ReqTRES=cpu=4,node=1 AllocTRES=cpu=4,node=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* \
         JOB_GRES=gpu:2 Nodes=node07 CPU_IDs=0-3 Mem=4096 GRES={gres} MinCPUsNode=4 MinMemoryNode=4G \
         MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Exclusive=NO Contiguous=0 \
         Licenses=(null) LicensesAlloc=(null) Network=(null) Command=/bin/true WorkDir=/tmp StdErr=/dev/null \
         StdIn=/dev/null StdOut=/dev/null"
    )
}

/// Writes an executable script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A stand-in scontrol logging to `log`: job 42 is `vision`'s with GPUs 0
/// and 1, job 43 `nlp`'s with GPU 3, job 44 hangs, any other is unknown.
fn stand_in(dir: &Path, log: &Path) -> PathBuf {
    let body = format!(
        "echo \"$*\" >> '{log}'\nfor a; do job=$a; done\ncase $job in\n\
         42) echo '{r42}' ;;\n43) echo '{r43}' ;;\n44) echo \"pid $$\" >> '{log}'; sleep 30 ;;\n\
         *) echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1 ;;\nesac\n",
        log = log.display(),
        r42 = record("42", "vision", "gpu:2(IDX:0-1)"),
        r43 = record("43", "nlp", "gpu:1(IDX:3)"),
    );
    script(dir, "scontrol", &body)
}

fn options(dir: &Path, log: &Path) -> SlurmOptions {
    SlurmOptions {
        scontrol: stand_in(dir, log),
        squeue: None,
        node: "node07".into(),
        timeout: Duration::from_millis(500),
    }
}

/// Polls `f` until it holds (5 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_job_is_asked_about_once_and_cached() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("calls.log");
    let resolver = SlurmResolver::start(options(tmp.path(), &log)).expect("starts");
    let lookups = resolver.lookups();
    // Not known at once: the tick does not wait.
    assert_eq!(lookups.view().job("42"), None);
    eventually("job 42 answered", || lookups.view().job("42").is_some());
    for _ in 0..20 {
        let job = lookups.view().job("42").expect("cached");
        assert_eq!((job.account.as_deref(), job.partition.as_deref()), (Some("vision"), Some("gpu")));
    }
    let calls = std::fs::read_to_string(&log).expect("log");
    assert_eq!(calls, "-d -o show job 42\n");
    assert_eq!(lookups.health(), SlurmHealth { asked: 1, known: 1, ..SlurmHealth::default() });
}

#[test]
fn an_unknown_job_stays_unknown_and_a_hung_scontrol_is_killed_and_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("calls.log");
    let resolver = SlurmResolver::start(options(tmp.path(), &log)).expect("starts");
    let lookups = resolver.lookups();
    assert_eq!(lookups.view().job("999"), None);
    eventually("job 999 asked", || lookups.health().unknown == 1);
    assert_eq!(lookups.view().job("999"), None);
    let t0 = Instant::now();
    assert_eq!(lookups.view().job("44"), None);
    // Reading the cache while scontrol hangs does not wait for it.
    assert_eq!(lookups.view().job("44"), None);
    assert!(t0.elapsed() < Duration::from_millis(100), "{:?}", t0.elapsed());
    eventually("job 44 timed out", || lookups.health().timeouts == 1);
    let health = lookups.health();
    assert_eq!((health.asked, health.unknown, health.failed, health.known), (2, 1, 1, 0));
    // The next question is not held up by the failed one's backoff.
    assert_eq!(lookups.view().job("42"), None);
    eventually("job 42 answered", || lookups.view().job("42").is_some());
}

#[test]
fn stopping_kills_a_command_in_flight() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("calls.log");
    let mut opts = options(tmp.path(), &log);
    opts.timeout = Duration::from_secs(60);
    let resolver = SlurmResolver::start(opts).expect("starts");
    assert_eq!(resolver.lookups().view().job("44"), None);
    let mut pid = None;
    eventually("scontrol for job 44 runs", || {
        pid = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("pid ").map(str::to_owned));
        pid.is_some()
    });
    let pid = pid.expect("found above");
    let t0 = Instant::now();
    drop(resolver);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "scontrol {pid} outlives the resolver");
}

#[test]
fn allocations_of_this_nodes_running_jobs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("calls.log");
    let mut opts = options(tmp.path(), &log);
    let body = format!(
        "echo \"squeue $*\" >> '{}'\ncase \"$*\" in *--nodelist=node07*) printf '42\\n43\\n999\\n' ;; esac\n",
        log.display()
    );
    opts.squeue = Some(script(tmp.path(), "squeue", &body));
    let resolver = SlurmResolver::start(opts).expect("starts");
    let lookups = resolver.lookups();
    eventually("both jobs' records", || lookups.allocations(&[]).len() == 2);
    let allocations = lookups.allocations(&[]);
    assert_eq!(
        allocations
            .iter()
            .map(|a| (&*a.job_id, a.account.as_deref(), a.gpu_indexes.clone()))
            .collect::<Vec<_>>(),
        [("42", Some("vision"), vec![0, 1]), ("43", Some("nlp"), vec![3])]
    );
    assert_eq!(allocations[0].user.as_deref(), Some("alice"));
    assert_eq!(allocations[0].partition.as_deref(), Some("gpu"));
    // Job 999 is asked about after the two that have records: wait for its
    // question too before counting them.
    let shows =
        || std::fs::read_to_string(&log).map_or(0, |c| c.lines().filter(|l| l.contains("show job")).count());
    eventually("every job asked about", || shows() >= 3);
    let calls = std::fs::read_to_string(&log).expect("log");
    assert!(
        calls.starts_with("squeue --noheader --states=RUNNING --nodelist=node07 --format=%A\n"),
        "{calls}"
    );
    // Each job asked about once (999 included, which Slurm does not know).
    for job in ["42", "43", "999"] {
        let asked = calls.lines().filter(|l| *l == format!("-d -o show job {job}")).count();
        assert_eq!(asked, 1, "{calls}");
    }
}

#[test]
fn without_squeue_the_jobs_met_by_the_tick_are_the_allocations() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let log = tmp.path().join("calls.log");
    let resolver = SlurmResolver::start(options(tmp.path(), &log)).expect("starts");
    let lookups = resolver.lookups();
    assert!(lookups.allocations(&["42"]).is_empty(), "no record yet");
    eventually("job 42 answered", || lookups.view().job("42").is_some());
    assert!(lookups.allocations(&[]).is_empty(), "nothing listed, nothing met");
    let met = lookups.allocations(&["42", "42", "999"]);
    assert_eq!(
        met.iter().map(|a| (&*a.job_id, a.gpu_indexes.clone())).collect::<Vec<_>>(),
        [("42", vec![0, 1])],
        "job 42 once; 999 is not known to Slurm"
    );
}

#[test]
fn flags_turn_lookups_off_or_point_them_somewhere() {
    let flags =
        |given: Option<&Path>, off, node| SlurmOptions::from_flags(given, off, node).expect("valid flags");
    assert_eq!(flags(Some(Path::new("/opt/x/scontrol")), true, Some("n1")), None);
    assert_eq!(flags(Some(Path::new("")), false, Some("n1")), None);
    let tmp = tempfile::tempdir().expect("tempdir");
    let scontrol = script(tmp.path(), "scontrol", "exit 0\n");
    let given = flags(Some(&scontrol), false, Some("n1")).expect("on");
    assert_eq!((given.squeue, given.node.as_str()), (None, "n1"));
    let squeue = script(tmp.path(), "squeue", "exit 0\n");
    let given = flags(Some(&scontrol), false, None).expect("on");
    assert_eq!(given.squeue, Some(squeue));
    assert!(!given.node.is_empty() && !given.node.contains('.'), "{}", given.node);
    let error =
        SlurmOptions::from_flags(Some(&tmp.path().join("nothing")), false, None).expect_err("no file");
    assert!(
        error.to_string().starts_with(&format!("--scontrol {}/nothing: ", tmp.path().display())),
        "{error}"
    );
}
