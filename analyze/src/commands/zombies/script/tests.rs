//! The commands for plain processes, Kubernetes pods and Slurm jobs, what
//! cannot be stopped safely, the quoting of every recorded value (checked
//! by a shell, not by eye), and the script as a whole parsing.

use std::process::Command;

use super::*;
use crate::report::figures::zombies::ZombieRow;

/// 2026-11-30 08:00 UTC.
const SINCE: i64 = 1_796_025_600_000;

fn zombie(host: &str, gpu_index: i32, pid: i32) -> Running {
    Running {
        zombie: ZombieRow {
            host: host.into(),
            gpu_index,
            gpu_uuid: format!("GPU-{gpu_index}"),
            pid,
            proc_start: Some(1_764_400_000_123),
            comm: Some("python".into()),
            user: Some("alice".into()),
            team: "vision".into(),
            used_mem_bytes: Some(40 << 30),
            idle_since: SINCE,
            idle_minutes: 965,
            still_running: true,
            still_idle: true,
            activity_pct: Some(0.0),
            pcie_rx_mib_per_s: Some(0.0),
            pcie_tx_mib_per_s: Some(0.0),
        },
        gpu_indexes: vec![gpu_index],
        gpu_uuids: vec![format!("GPU-{gpu_index}")],
        k8s_pod_uid: None,
        slurm_job_id: None,
    }
}

fn pod(r: Running, uid: &str) -> Running {
    Running { k8s_pod_uid: Some(uid.into()), ..r }
}

fn job(r: Running, id: &str) -> Running {
    Running { slurm_job_id: Some(id.into()), ..r }
}

fn text(running: &[Running]) -> String {
    let header = ["Period: 2026-11-30".to_owned()];
    script(running, &Options { wait_s: 45, min_idle_minutes: 10, threshold_pct: 5.0, header: &header })
}

/// The lines of `script` that are code (not comments), trimmed.
fn code(script: &str) -> Vec<&str> {
    script.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect()
}

/// Whether `shell` is installed here.
fn has(shell: &str) -> bool {
    Command::new(shell).arg("-c").arg("true").status().is_ok_and(|s| s.success())
}

/// `shell -n` accepts `script`.
fn parses(shell: &str, script: &str) {
    let out = Command::new(shell).arg("-n").arg("-c").arg(script).output().expect("the shell runs");
    assert!(out.status.success(), "{shell} -n: {}\n{script}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_plain_process_gets_a_notice_term_a_wait_and_kill_only_if_still_there() {
    let s = text(&[zombie("node07", 3, 4242)]);
    let code = code(&s);
    for line in [
        "wait_s=45",
        "min_idle=10",
        "threshold=5",
        "here=${APRON_HOST:-$(uname -n)}",
        "data=${APRON_RECORDER_DATA:-/var/lib/apron}",
        "if [ \"$here\" = 'node07' ]; then",
        "stop=yes alive=no",
        "if same 4242 1764400000123 'python'; then",
        "if [ \"$stop\" = yes ] && ! idle_now --gpu 'GPU-3'; then",
        "kill -TERM 4242",
        "gone_within \"$wait_s\" 4242 1764400000123 'python' || kill -KILL 4242",
    ] {
        assert!(code.contains(&line), "no line {line:?} in\n{s}");
    }
    let notice = code.iter().find(|l| l.starts_with("notify ")).expect("a notice");
    assert!(notice.starts_with("notify 'alice' 'apron: stopping pid 4242 (python) on node07: "), "{notice}");
    assert!(
        notice.contains("has held 40.0 GiB of GPU 3 while it sat idle for 16h 5m since 2026-11-30 08:00 UTC")
    );
    assert!(notice.ends_with("KILL after '\"$wait_s\"' s'"), "{notice}");
    // The checks come before the notice, which comes before TERM, which
    // comes before the wait.
    let at = |p: &str| code.iter().position(|l| l.starts_with(p)).expect(p);
    let order =
        ["if same 4242", "if [ \"$stop\" = yes ] && ! idle_now", "notify '", "kill -TERM", "gone_within \""]
            .map(at);
    assert!(order.is_sorted(), "{order:?}:\n{s}");
    assert!(s.starts_with("#!/bin/sh\n# apron zombies --commands: 1 zombie idle now on 1 host"), "{s}");
    assert!(s.contains("\n# Period: 2026-11-30\n"));
    assert!(!code.iter().any(|l| l.contains("kubectl delete") && !l.starts_with("kubectl")), "{s}");
}

#[test]
fn a_process_in_a_pod_is_stopped_by_deleting_its_pod_found_by_uid_on_this_node() {
    let uid = "8f1c2a4e-0b7d-4c1e-9a55-2f1d0c3b4a5e";
    let first = pod(zombie("node07", 5, 777), uid);
    let second = pod(zombie("node07", 6, 778), uid);
    let s = text(&[first, second]);
    let code = code(&s);
    let deletes: Vec<&&str> = code.iter().filter(|l| l.starts_with("delete_pod ")).collect();
    assert_eq!(deletes, [&format!("delete_pod '{uid}' \"$wait_s\"")], "{s}");
    // Each process still there must be in the pod by its cgroup; the
    // pod's GPUs (those recorded, and those the recorder finds for the
    // pod) idle now.
    for pid in [777, 778] {
        assert!(code.contains(&format!("if same {pid} 1764400000123 'python'; then").as_str()), "{s}");
        assert!(
            code.iter().any(|l| l.starts_with(&format!(
                "in_pod {pid} '{uid}' || {{ echo 'apron: pid {pid} on node07 is not in pod"
            ))),
            "{s}"
        );
    }
    assert!(
        code_has(
            &s,
            &format!("if [ \"$stop\" = yes ] && ! idle_now --pod '{uid}' --gpu 'GPU-5' --gpu 'GPU-6'; then")
        ),
        "{s}"
    );
    assert!(!code.iter().any(|l| l.starts_with("kill ")), "a pod's process is not killed by pid:\n{s}");
    assert!(s.contains("'apron: pids 777, 778 on node07 are gone or are other processes now: left alone'"));
    // The pod's name comes from kubectl, by uid, among this node's pods;
    // its grace period is the wait.
    assert!(s.contains("--field-selector \"spec.nodeName=$node\""), "{s}");
    assert!(s.contains("custom-columns=UID:.metadata.uid,NAMESPACE:.metadata.namespace,NAME:.metadata.name"));
    assert!(
        s.contains("kubectl delete pod --namespace=\"${found%% *}\" --grace-period=\"$2\" \"${found#* }\"")
    );
    assert!(s.contains(&format!("#   in Kubernetes pod {uid}\n")));
}

fn code_has(s: &str, line: &str) -> bool {
    code(s).contains(&line)
}

#[test]
fn a_process_in_a_slurm_job_is_stopped_by_cancelling_the_job() {
    let s = text(&[job(zombie("gpu-a1", 0, 9001), "123456")]);
    assert!(code_has(&s, "scancel '123456' </dev/null"), "{s}");
    assert!(code_has(&s, "if same 9001 1764400000123 'python'; then"), "{s}");
    assert!(code(&s).iter().any(|l| l.starts_with("in_job 9001 '123456' || {")), "{s}");
    assert!(code_has(&s, "if [ \"$stop\" = yes ] && ! idle_now --job '123456' --gpu 'GPU-0'; then"), "{s}");
    assert!(!code(&s).iter().any(|l| l.starts_with("kill ")), "{s}");
    // A pod wins over a job when a process has both.
    let s = text(&[pod(job(zombie("gpu-a1", 0, 9001), "123456"), "abc-123")]);
    assert!(code_has(&s, "delete_pod 'abc-123' \"$wait_s\"") && !s.contains("scancel '"), "{s}");
}

#[test]
fn an_id_that_cannot_be_a_pod_uid_or_job_id_is_not_used() {
    let s = text(&[pod(zombie("n1", 0, 500), "x'; reboot; '"), job(zombie("n1", 1, 501), "1 2")]);
    assert!(!s.contains("delete_pod 'x") && !s.contains("scancel '1 2'"), "{s}");
    assert!(code_has(&s, "kill -TERM 500") && code_has(&s, "kill -TERM 501"), "{s}");
}

#[test]
fn what_cannot_be_told_from_a_reused_pid_is_left_out() {
    let mut nothing = zombie("n1", 0, 600);
    (nothing.zombie.proc_start, nothing.zombie.comm) = (None, None);
    // A command name without a start time (every nvidia-smi import) is
    // anyone's: never a guard on its own.
    let mut no_start = zombie("n1", 0, 601);
    no_start.zombie.proc_start = None;
    let s = text(&[nothing, no_start, zombie("n1", 1, 1), zombie("n1", 2, 0), zombie("n1", 3, -7)]);
    let code = code(&s);
    assert!(!code.iter().any(|l| l.contains("kill") || l.starts_with("if same")), "{s}");
    for pid in [600, 601] {
        assert!(s.contains(&format!("# pid {pid} left out: its start time was not recorded")), "{s}");
    }
    for pid in [1, 0, -7] {
        assert!(s.contains(&format!("# pid {pid} left out: its pid cannot be a process to stop.")), "{s}");
    }
    // A start time without a command name is compared alone; a command
    // name is compared by its printable ASCII characters.
    let mut no_comm = zombie("n1", 1, 602);
    no_comm.zombie.comm = None;
    let mut odd = zombie("n1", 2, 603);
    odd.zombie.comm = Some("py\u{fffd}th\u{1b}on é".into());
    let s = text(&[no_comm, odd]);
    assert!(code_has(&s, "if same 602 1764400000123 ''; then"), "{s}");
    assert!(code_has(&s, "if same 603 1764400000123 'python '; then"), "{s}");
}

#[test]
fn hosts_come_in_the_order_of_their_first_zombie_each_with_its_own() {
    let s = text(&[zombie("b-host", 0, 10), zombie("a-host", 0, 20), zombie("b-host", 1, 30)]);
    let b = s.find("if [ \"$here\" = 'b-host' ]").expect("b-host's part");
    let a = s.find("if [ \"$here\" = 'a-host' ]").expect("a-host's part");
    assert!(b < a, "{s}");
    let (b_part, a_part) = (&s[b..a], &s[a..]);
    assert!(b_part.contains("kill -TERM 10") && b_part.contains("kill -TERM 30"), "{s}");
    assert!(a_part.contains("kill -TERM 20") && !a_part.contains("kill -TERM 10"), "{s}");
    assert!(s.contains("# b-host: 2 zombies\n") && s.contains("# a-host: 1 zombie\n"), "{s}");
    assert!(code_has(&s, "'b-host'|'a-host') ;;"), "{s}");
}

#[test]
fn without_zombies_the_script_stops_nothing() {
    let s = text(&[]);
    assert!(s.contains("0 zombies idle now on 0 hosts"), "{s}");
    assert!(code_has(&s, "echo 'apron: no zombie is idle now: nothing to stop'"), "{s}");
    assert!(!s.contains("kill") || !code(&s).iter().any(|l| l.contains("kill")), "{s}");
}

#[test]
fn the_owner_is_mailed_only_under_a_login_name_other_than_root() {
    let with_user = |u: Option<&str>| {
        let mut r = zombie("n1", 0, 700);
        r.zombie.user = u.map(Into::into);
        mail_to(&r)
    };
    assert_eq!(with_user(Some("alice")), "alice");
    assert_eq!(with_user(Some("svc_ml-2.x")), "svc_ml-2.x");
    for nobody in [Some("root"), Some("uid 1000"), Some("(unknown)"), Some("-f"), Some("Bob"), None] {
        assert_eq!(with_user(nobody), "", "{nobody:?}");
    }
}

#[test]
fn spans_and_amounts_read_as_an_operator_writes_them() {
    assert_eq!(span(0), "0m");
    assert_eq!(span(45), "45m");
    assert_eq!(span(965), "16h 5m");
    assert_eq!(span(2 * 1440 + 65), "2d 1h 5m");
    assert_eq!(span(1440), "1d");
    assert_eq!(memory(40 << 30), "40.0 GiB");
    assert_eq!(memory(300 << 20), "300 MiB");
    assert_eq!(comment("a\nb\tc\u{7}"), "a?b?c?");
}

/// Values the data could hold, each quoted and read back by a shell.
const NASTY: &[&str] = &[
    "it's",
    "a'b'c",
    "$(touch /tmp/x)",
    "`id`",
    "a\nb",
    "back\\slash",
    "",
    "'",
    "*",
    "--x",
    "~root",
    "!!",
    "\x1b]0;owned\x07\x1b[2J",
    "cr\rlf\n\n",
    "c1\u{9b}31m",
    "tab\there\x7f",
];

#[test]
fn every_value_reads_back_unchanged_through_the_shell() {
    for shell in ["sh", "bash"].into_iter().filter(|s| has(s)) {
        for value in NASTY {
            let quoted = quote(value);
            // What `cat` would show a terminal: no control character.
            assert!(!quoted.chars().any(|c| c.is_control()), "{value:?} as {quoted}");
            let out = Command::new(shell)
                .arg("-c")
                .arg(format!("nl=$(printf '\\nx'); nl=${{nl%x}}; printf '%s' {quoted}"))
                .output()
                .expect("the shell runs");
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                *value,
                "{shell}: {value:?} as {}",
                quote(value)
            );
        }
    }
    assert_eq!(quote("a\0b"), "'a?b'");
}

/// Stand-ins for the script's functions and for what they call: each
/// prints its arguments, so a run shows what the script would do.
const STUBS: &str = r#"same() { return 0; }
gone_within() { return 1; }
in_pod() { return 0; }
in_job() { return 0; }
idle_now() { printf 'idle_now[%s]\n' "$*"; }
notify() { printf 'notify[%s][%s]\n' "$1" "$2"; }
delete_pod() { printf 'delete_pod[%s][%s]\n' "$1" "$2"; }
kill() { printf 'kill[%s][%s]\n' "$1" "$2"; }
scancel() { printf 'scancel[%s]\n' "$1"; }
reboot() { echo REBOOTED; }
"#;

/// What `shell` prints running `script` on `host`, its functions stubbed.
fn dry_run(shell: &str, script: &str, host: &str) -> String {
    assert!(script.contains(FUNCTIONS), "the script defines its functions");
    let out = Command::new(shell)
        .arg("-c")
        .arg(script.replace(FUNCTIONS, STUBS))
        .env("APRON_HOST", host)
        .output()
        .expect("the shell runs");
    assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn recorded_names_cannot_break_out_of_their_quotes_or_comments() {
    let mut r = zombie("node'07", 0, 4242);
    r.zombie.user = Some("o'brien\n$(reboot)".into());
    r.zombie.team = "t\nreboot".into();
    r.zombie.gpu_uuid = "GPU-\nreboot".into();
    r.gpu_uuids = vec![r.zombie.gpu_uuid.clone()];
    r.zombie.comm = Some("{wait}\x1b[2J".into());
    let s = text(&[r, pod(zombie("n2", 0, 5), "uid-1")]);
    assert!(!s.chars().any(|c| c.is_control() && c != '\n'), "safe to cat:\n{s}");
    assert!(code_has(&s, "if [ \"$here\" = 'node'\\''07' ]; then"), "{s}");
    for shell in ["sh", "bash"].into_iter().filter(|s| has(s)) {
        parses(shell, &s);
        // Each host runs its own part; nothing from the data runs.
        let first = dry_run(shell, &s, "node'07");
        assert!(!first.contains("REBOOTED"), "{shell}:\n{first}\n{s}");
        assert!(first.contains("kill[-TERM][4242]\nkill[-KILL][4242]\n"), "{shell}:\n{first}");
        // A process named `{wait}` prints as its name, not as the wait.
        assert!(first.contains("({wait}?[2J) on node'07:"), "{shell}:\n{first}");
        // The GPU reaches idle-now exactly as recorded.
        assert!(first.contains("idle_now[--gpu GPU-\nreboot]"), "{shell}:\n{first}");
        assert!(!first.contains("delete_pod"), "{shell}:\n{first}");
        let second = dry_run(shell, &s, "n2");
        assert!(!second.contains("REBOOTED") && !second.contains("kill["), "{shell}:\n{second}");
        assert!(second.contains("idle_now[--pod uid-1 --gpu GPU-0]\n"), "{shell}:\n{second}");
        assert!(second.contains("delete_pod[uid-1][45]"), "{shell}:\n{second}");
        let elsewhere = dry_run(shell, &s, "n3");
        assert!(!elsewhere.contains('['), "{shell}:\n{elsewhere}");
    }
}

#[test]
fn the_whole_script_parses_in_sh_and_bash() {
    let mut unknown = zombie("n3", 1, 800);
    unknown.zombie.used_mem_bytes = None;
    unknown.gpu_indexes = vec![1, 2];
    let all = [
        zombie("n1", 0, 100),
        pod(zombie("n1", 1, 101), "p-1"),
        pod(zombie("n2", 0, 102), "p-2"),
        job(zombie("n2", 1, 103), "4242_7"),
        unknown,
    ];
    let s = text(&all);
    assert!(s.contains("held an unknown amount of memory of GPU 1 while it sat idle"), "{s}");
    assert!(s.contains("(and memory of idle GPU 2)"), "{s}");
    for shell in ["sh", "bash"].into_iter().filter(|s| has(s)) {
        parses(shell, &s);
        parses(shell, &text(&[]));
    }
}

#[test]
fn a_notice_prints_whole_in_every_shell() {
    // dash's echo reads `\c` as "stop printing here"; the notice is printf'd.
    let message = r"apron: stopping pid 7 (a\cb) on n1: held it; TERM";
    for shell in ["sh", "bash"].into_iter().filter(|s| has(s)) {
        let out = Command::new(shell)
            .arg("-c")
            // Neither logger nor mail: only the printed line.
            .arg(format!("PATH=/nonexistent\n{FUNCTIONS}\nnotify '' {}", quote(message)))
            .output()
            .expect("the shell runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{message}\n"), "{shell}");
    }
}
