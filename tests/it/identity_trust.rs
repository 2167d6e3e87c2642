//! End to end: who a GPU process is, when the process is hostile. Real
//! processes of this test, with environments and cgroups chosen as a local
//! user would choose them (and some in the cgroups a kubelet and Slurm
//! make), are listed by the fake NVML and recorded by the real
//! `apron-recorder`; then `apron` reads what it wrote, and the script of
//! `apron zombies --commands` runs for real on this host against them.
//!
//! - What a process sets in its environment (`POD_NAMESPACE`,
//!   `SLURM_JOB_ID`, `SLURM_JOB_ACCOUNT`) is kept as a claim (`claimed_*`)
//!   and never becomes its namespace, job or account; a cgroup a user can
//!   make (`…/user@1000.service/slurm.slice/job_777.scope`, `…-pod<uid>.slice`)
//!   names no job and no pod; the cgroups under the kubelet's and Slurm's
//!   roots do.
//! - Teams: a config whose first rules match the namespace and the account
//!   those processes claim bills none of their time to those teams.
//! - A command name with an invalid UTF-8 byte and an escape sequence keeps
//!   the process's uid and user, and reaches no terminal raw; a 120 KB
//!   environment value is cut to 253 bytes.
//! - The script cancels only the Slurm job the kernel puts a process in,
//!   deletes only the pod the kubelet puts one in, and stops the rest as
//!   plain processes: never `scancel 4242` or `scancel 777` on a process's
//!   word.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apron_tests::cgroup::Cgroup;
use apron_tests::kid::Kid;
use apron_tests::{bin, fake_nvml, stdout_of};
use serde_json::Value;

const GIB: u64 = 1 << 30;
const USER_TREE: &str = "/user.slice/user-1000.slice/user@1000.service";
const FORGED_POD: &str = "3c2b1a09-8e7d-4c6b-a594-837261504f3e";
const POD: &str = "0d5e8a1c-7b3f-4e2a-8c6d-9f1a2b3c4d5e";
const POD_NAME: &str = "train-7f9c-x2b";

fn apron(data: &Path, config: &Path, args: &[&str]) -> String {
    stdout_of(Command::new(bin("apron")).arg("--data").arg(data).arg("--config").arg(config).args(args))
}

/// Every row of `apron sql QUERY` as JSON objects.
fn rows(data: &Path, config: &Path, query: &str) -> Vec<Value> {
    serde_json::from_str(&apron(data, config, &["--format", "json", "sql", query])).expect("a JSON array")
}

/// An executable stand-in for `name` in `dir` that logs its arguments to
/// `log`; kubectl also lists this node's pods when asked by node.
fn stand_in(dir: &Path, name: &str, log: &Path) {
    let log = log.display();
    let body = match name {
        "kubectl" => format!(
            "if [ \"$1\" = get ]; then\n  case \"$*\" in *'spec.nodeName=n1 '*) ;; *) exit 0 ;; esac\n  \
             printf '%s\\n' '{POD} ml {POD_NAME}' '{FORGED_POD} prod victim'\n  exit 0\nfi\n\
             echo \"kubectl $*\" >> '{log}'\n"
        ),
        _ => format!("echo \"{name} $*\" >> '{log}'\n"),
    };
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write a stand-in");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn identity_comes_from_the_kernel_and_the_schedulers_never_from_the_process() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let sleep = PathBuf::from(stdout_of(Command::new("sh").args(["-c", "command -v sleep"])).trim());
    // A program whose command name holds a byte that is not UTF-8 and an
    // escape sequence that clears a terminal.
    let odd = tmp.path().join(std::ffi::OsStr::from_bytes(b"py\xff\x1b[2J"));
    std::os::unix::fs::symlink(&sleep, &odd).expect("symlink");
    let huge = "a".repeat(120_000);

    let claims = [("POD_NAMESPACE", "prod"), ("SLURM_JOB_ID", "4242"), ("SLURM_JOB_ACCOUNT", "finance")];
    let mut kids = [
        // 0: claims a namespace, a job and an account, in a cgroup any
        // user can make, named like a Slurm job's.
        Kid::spawn(&sleep, &claims),
        // 1: in a cgroup of its user's own, named like a pod's.
        Kid::spawn(&sleep, &[("POD_NAMESPACE", &huge)]),
        // 2: an odd command name.
        Kid::spawn(&odd, &[]),
        // 3: in Slurm job 555 by its cgroup, claiming job 999.
        Kid::spawn(&sleep, &[("SLURM_JOB_ID", "999")]),
        // 4: in pod POD by its cgroup, claiming namespace prod.
        Kid::spawn(&sleep, &[("POD_NAMESPACE", "prod")]),
    ];
    let container = "ab".repeat(32);
    let _cgroups = [
        Cgroup::enter(&format!("{USER_TREE}/slurm.slice/job_777.scope"), kids[0].pid()),
        Cgroup::enter(
            &format!("{USER_TREE}/app.slice/kubepods-besteffort-pod{}.slice", FORGED_POD.replace('-', "_")),
            kids[1].pid(),
        ),
        Cgroup::enter("/slurm/uid_0/job_555/step_0", kids[3].pid()),
        Cgroup::enter(&format!("/kubepods/burstable/pod{POD}/{container}"), kids[4].pid()),
    ];

    // One idle GPU each, 1 GiB held.
    let gpus: Vec<String> = kids
        .iter()
        .enumerate()
        .map(|(i, k)| {
            format!("uuid=GPU-t{i},util=0,fb_total=85899345920,fb_used={GIB},compute={}:{GIB}", k.pid())
        })
        .collect();
    let recorder = Command::new(bin("apron-recorder"))
        .arg("--data")
        .arg(&data)
        .args(["--source", "nvml", "--host", "n1", "--nvml-lib"])
        .arg(fake_nvml())
        .env("FAKE_NVML_GPUS", gpus.join(";"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    let config = tmp.path().join("apron.toml");
    std::fs::write(
        &config,
        "[[team]]\nname = \"prod-team\"\nk8s_namespaces = [\"prod\"]\n\n\
         [[team]]\nname = \"finance-team\"\nslurm_accounts = [\"finance\"]\n\n\
         [[team]]\nname = \"ops\"\nusers = [\"root\"]\n",
    )
    .expect("config");

    // Until the recorder's rows (in its write-ahead log) hold every
    // process (before its first tick there is no data at all).
    let t0 = Instant::now();
    let count = |data: &Path| {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(data)
            .args(["--format", "csv", "sql", "SELECT count(DISTINCT pid) AS n FROM proc_samples"])
            .output()
            .expect("apron runs");
        String::from_utf8_lossy(&out.stdout).lines().nth(1).and_then(|n| n.parse::<u32>().ok())
    };
    while count(&data) != Some(5) {
        assert!(t0.elapsed() < Duration::from_secs(60), "the recorder does not record all five processes");
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(2));

    let by_pid: BTreeMap<u32, Value> = rows(
        &data,
        &config,
        "SELECT pid, max(comm) AS comm, max(uid) AS uid, max(\"user\") AS \"user\", max(container_id) AS container_id, \
         max(k8s_pod_uid) AS k8s_pod_uid, max(k8s_namespace) AS k8s_namespace, max(slurm_job_id) AS slurm_job_id, \
         max(slurm_account) AS slurm_account, max(claimed_k8s_namespace) AS claimed_k8s_namespace, \
         max(claimed_slurm_job_id) AS claimed_slurm_job_id, max(claimed_slurm_account) AS claimed_slurm_account \
         FROM proc_samples GROUP BY pid",
    )
    .into_iter()
    .map(|r| (u32::try_from(r["pid"].as_i64().expect("pid")).expect("a pid"), r))
    .collect();
    let row = |i: usize| &by_pid[&kids[i].pid()];
    let trusted = ["k8s_pod_uid", "k8s_namespace", "slurm_job_id", "slurm_account"];
    for column in trusted {
        assert_eq!(row(0)[column], Value::Null, "{column} of a process that only claims it: {}", row(0));
    }
    assert_eq!(
        [&row(0)["claimed_k8s_namespace"], &row(0)["claimed_slurm_job_id"], &row(0)["claimed_slurm_account"]],
        ["prod", "4242", "finance"],
        "the claims are kept, as claims: {}",
        row(0)
    );
    assert_eq!(row(1)["k8s_pod_uid"], Value::Null, "{}", row(1));
    assert_eq!(row(1)["claimed_k8s_namespace"].as_str().map(str::len), Some(253), "a huge claim is cut");
    assert_eq!(row(2)["comm"].as_str(), Some("py\u{fffd}\u{1b}[2J"), "{}", row(2));
    assert_eq!((row(2)["uid"].as_i64(), row(2)["user"].as_str()), (Some(0), Some("root")), "{}", row(2));
    assert_eq!(
        (row(3)["slurm_job_id"].as_str(), row(3)["claimed_slurm_job_id"].as_str()),
        (Some("555"), Some("999"))
    );
    assert_eq!(row(4)["k8s_pod_uid"].as_str(), Some(POD), "{}", row(4));
    assert_eq!(row(4)["container_id"].as_str(), Some(container.as_str()));
    assert_eq!(
        (row(4)["k8s_namespace"].as_str(), row(4)["claimed_k8s_namespace"].as_str()),
        (None, Some("prod")),
        "a pod's namespace comes from the node, not the pod's word"
    );

    // Billed by trusted identity only: all root's, so all "ops".
    let teams = rows(&data, &config, "SELECT DISTINCT team FROM proc_minute_states");
    let teams: Vec<&str> = teams.iter().filter_map(|r| r["team"].as_str()).collect();
    assert_eq!(teams, ["ops"], "no time billed to a team a process claims");

    // Names from the data reach the terminal as escapes.
    let table = apron(&data, &config, &["zombies", "--last", "1h", "--min-idle", "1m"]);
    assert!(table.contains("py\u{fffd}\\u{1b}[2J"), "{table}");
    assert!(!table.chars().any(|c| c.is_control() && c != '\n'), "{table:?}");

    // The script, run here with stand-ins for logger, mail, kubectl and
    // scancel, and the real recorder's idle-now reading the live data.
    let script =
        apron(&data, &config, &["zombies", "--commands", "--wait", "1s", "--min-idle", "1m", "--last", "1h"]);
    assert!(!script.chars().any(|c| c.is_control() && c != '\n'), "safe to cat:\n{script}");
    assert!(!script.contains("scancel '4242'") && !script.contains("scancel '777'"), "{script}");
    assert!(!script.contains(FORGED_POD), "{script}");
    let tools = tmp.path().join("bin");
    std::fs::create_dir(&tools).expect("mkdir");
    let log = tmp.path().join("tools.log");
    for name in ["logger", "mail", "kubectl", "scancel"] {
        stand_in(&tools, name, &log);
    }
    let ran = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("APRON_HOST", "n1")
        .env("APRON_RECORDER", bin("apron-recorder"))
        .env("APRON_RECORDER_DATA", &data)
        .env("PATH", format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default()))
        .stdin(Stdio::null())
        .output()
        .expect("sh runs");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(ran.status.success(), "{stdout}\n{}\n{script}", String::from_utf8_lossy(&ran.stderr));
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let cancelled: Vec<&str> = log.lines().filter(|l| l.starts_with("scancel ")).collect();
    assert_eq!(cancelled, ["scancel 555"], "only the job the kernel puts a process in:\n{log}\n{stdout}");
    let deleted: Vec<&str> = log.lines().filter(|l| l.starts_with("kubectl delete")).collect();
    assert_eq!(deleted, [format!("kubectl delete pod --namespace=ml --grace-period=1 {POD_NAME}")], "{log}");
    // The others are plain processes, idle and holding memory: stopped by
    // pid, each its own.
    for i in [0, 1, 2] {
        assert_eq!(kids[i].ended().and_then(|s| s.signal()), Some(libc::SIGTERM), "kid {i}:\n{stdout}");
    }
    // The job's and the pod's are left to Slurm and the kubelet.
    assert_eq!((kids[3].ended(), kids[4].ended()), (None, None));

    apron_tests::signal(&recorder, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(recorder, Duration::from_secs(30));
    assert!(out.status.success(), "the recorder: {}", String::from_utf8_lossy(&out.stderr));
    // Nothing the processes are named reached the recorder's log raw.
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains('\u{1b}'),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
