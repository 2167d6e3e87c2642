//! The shell script `apron zombies --commands` prints: for each zombie still
//! running, host by host, what an operator runs on that host to stop it.
//! apron itself never signals a process; it writes text, from the rows
//! [`crate::figures::zombies::running`] gives, and this module is pure.
//!
//! Per zombie (in the list's order, most memory-minutes first; hosts in the
//! order of their first zombie): a check that its pid is still the process
//! recorded (start time and command name, read from `/proc` as the
//! recorder reads them: a pid may have been reused since), a notice to the
//! owner (the host's log, and mail where the host sends it), then
//!
//! - a plain process: `kill -TERM`, a wait, `kill -KILL` only if it is
//!   still there;
//! - a process in a Kubernetes pod: the pod deleted (its name found from
//!   its uid with kubectl, as only the uid is recorded), with the wait as
//!   its grace period: the kubelet sends TERM, then KILL;
//! - a process in a Slurm job: `scancel` of the job (Slurm sends TERM,
//!   then KILL after the cluster's KillWait).
//!
//! Processes of one pod or job share one deletion or cancellation. Every
//! value from the data is single-quoted, and text in comments has its
//! control characters replaced, so no recorded name can run as a command.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::figures::zombies::Running;

/// What the script is made with besides its zombies.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Seconds a process gets between TERM and KILL (at least 1).
    pub wait_s: u64,
    /// The report's header lines (period, data, config), shown as comments.
    pub header: &'a [String],
}

/// The highest pid Linux hands out (`pid_max` can be at most 2^22).
const PID_MAX: i32 = 1 << 22;

/// The helper functions every host's part calls.
const FUNCTIONS: &str = r#"# Whether pid $1 is still the process apron recorded: started at $2 ms
# since the epoch (boot time + /proc/PID/stat field 22, as apron-recorder
# reads it; to within a second, as the kernel's boot time can move by one),
# with command name $3 (/proc/PID/comm). An empty value is not compared. A
# process that has exited but not yet been reaped counts as gone.
same() {
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  pid=$1 start=$2 comm=$3
  # The command name, field 2, is in parentheses and may hold spaces:
  # count the fields after it, from field 3 (the state) on.
  set -- ${stat##*) }
  case $1 in Z|X|x) return 1 ;; esac
  if [ -n "$start" ]; then
    boot=$(awk '$1 == "btime" { print $2 }' /proc/stat)
    hz=$(getconf CLK_TCK)
    [ -n "$boot" ] && [ -n "$hz" ] && [ -n "${20}" ] || return 1
    now=$(( boot * 1000 + ${20} * 1000 / hz ))
    [ $(( now - start )) -le 1000 ] && [ $(( start - now )) -le 1000 ] || return 1
  fi
  [ -z "$comm" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ]
}

# Waits up to $1 seconds for pid $2 (started $3, command $4) to exit;
# fails if it is still there.
gone_within() {
  waited=0
  while same "$2" "$3" "$4"; do
    [ "$waited" -lt "$1" ] || return 1
    sleep 1
    waited=$((waited + 1))
  done
}

# Says what is stopped and why ($2) here, in the host's log, and by mail to
# user $1 (empty: nobody) where this host has a mail command.
notify() {
  echo "$2"
  logger -t apron -p user.notice "$2" 2>/dev/null
  if [ -n "$1" ] && command -v mail >/dev/null 2>&1; then
    printf '%s\n' "$2" | mail -s 'apron: your process on an idle GPU is being stopped' "$1"
  fi
}

# Deletes the Kubernetes pod whose uid is $1, in namespace $2 (empty: the
# pod is looked for in every namespace), with a grace period of $3 seconds
# between TERM and KILL. Only the uid is recorded: kubectl finds the name.
delete_pod() {
  if ! command -v kubectl >/dev/null 2>&1; then
    echo "apron: no kubectl on $here: delete the pod with uid $1 where kubectl works" >&2
    return 1
  fi
  if [ -n "$2" ]; then scope="--namespace=$2"; else scope=--all-namespaces; fi
  found=$(kubectl get pods "$scope" --no-headers \
    -o custom-columns=UID:.metadata.uid,NAMESPACE:.metadata.namespace,NAME:.metadata.name </dev/null \
    | awk -v uid="$1" '$1 == uid { print $2, $3; exit }')
  if [ -z "$found" ]; then
    echo "apron: no pod has uid $1 any more: nothing deleted" >&2
    return 0
  fi
  kubectl delete pod --namespace="${found%% *}" --grace-period="$3" "${found#* }" </dev/null
}
"#;

/// The script stopping `running` (the zombies still running, in the
/// list's order).
pub fn script(running: &[Running], options: &Options<'_>) -> String {
    let mut out = String::new();
    let hosts = by_host(running);
    let processes = running.len();
    let _ = writeln!(out, "#!/bin/sh");
    let _ = writeln!(
        out,
        "# apron zombies --commands: {} still running on {}, most memory-minutes first.",
        plural(processes, "zombie", "zombies"),
        plural(hosts.len(), "host", "hosts"),
    );
    for line in options.header {
        let _ = writeln!(out, "# {}", comment(line));
    }
    out.push_str(
        "#\n\
         # apron sends no signal itself. Read this, then run it on each host below,\n\
         # as root (or the processes' owner), e.g.  ssh HOST sudo sh -s < THIS_FILE\n\
         # Each host runs its own part only: the one named as `uname -n` names it\n\
         # (set APRON_HOST=NAME where the recorder was given another name).\n\
         # A process is stopped only while /proc/PID still shows the start time and\n\
         # command name recorded: a pid reused since is left alone. A plain process\n\
         # gets TERM, then KILL if it is still there wait_s seconds later (below); a\n\
         # Kubernetes pod is deleted with that grace period (kubectl must work here);\n\
         # a Slurm job is cancelled with scancel (TERM, then KILL after KillWait).\n\n",
    );
    let _ = writeln!(out, "wait_s={}", options.wait_s.max(1));
    out.push_str("here=${APRON_HOST:-$(uname -n)}\n\n");
    if hosts.is_empty() {
        out.push_str("echo 'apron: no zombie is still running: nothing to stop'\n");
        return out;
    }
    out.push_str(FUNCTIONS);
    for (host, targets) in &hosts {
        let count: usize = targets.iter().map(|t| t.processes.len()).sum();
        let _ = writeln!(out, "\n# {}: {}", comment(host), plural(count, "zombie", "zombies"));
        let _ = writeln!(out, "if [ \"$here\" = {} ]; then", quote(host));
        for target in targets {
            target.write(host, &mut out);
        }
        out.push_str("fi\n");
    }
    let names: Vec<String> = hosts.iter().map(|(h, _)| quote(h)).collect();
    let _ = write!(
        out,
        "\ncase $here in\n  {}) ;;\n  *) echo \"apron: no zombie of this list runs on $here\" >&2 ;;\nesac\n",
        names.join("|")
    );
    out
}

/// What one command stops: a pod, a Slurm job, or one process.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Kind {
    Pod { uid: String, namespace: Option<String> },
    Job { id: String },
    Process,
}

/// One thing to stop on a host, and the zombies it stops.
#[derive(Debug)]
struct Target<'a> {
    kind: Kind,
    processes: Vec<&'a Running>,
}

/// The hosts of `running` in order of their first zombie, each with its
/// targets in order of their first zombie.
fn by_host(running: &[Running]) -> Vec<(String, Vec<Target<'_>>)> {
    let mut hosts: Vec<(String, Vec<Target<'_>>)> = Vec::new();
    let mut shared: HashMap<(String, Kind), (usize, usize)> = HashMap::new();
    for r in running {
        let host = r.zombie.host.clone();
        let h = match hosts.iter().position(|(name, _)| *name == host) {
            Some(h) => h,
            None => {
                hosts.push((host.clone(), Vec::new()));
                hosts.len() - 1
            }
        };
        let kind = kind_of(r);
        let targets = &mut hosts[h].1;
        if kind == Kind::Process {
            targets.push(Target { kind, processes: vec![r] });
            continue;
        }
        match shared.get(&(host.clone(), kind.clone())) {
            Some(&(h, t)) => hosts[h].1[t].processes.push(r),
            None => {
                shared.insert((host, kind.clone()), (h, targets.len()));
                targets.push(Target { kind, processes: vec![r] });
            }
        }
    }
    hosts
}

/// How `r` is stopped: by its pod, its Slurm job, or itself. An id that
/// could not be a pod uid or a job id (from data written by another tool)
/// is not used.
fn kind_of(r: &Running) -> Kind {
    let pod = r.k8s_pod_uid.as_deref().filter(|u| is_id(u, &['-', '_']));
    let job = r.slurm_job_id.as_deref().filter(|j| is_id(j, &['_', '.']));
    match (pod, job) {
        (Some(uid), _) => Kind::Pod { uid: uid.to_owned(), namespace: r.k8s_namespace.clone() },
        (None, Some(id)) => Kind::Job { id: id.to_owned() },
        (None, None) => Kind::Process,
    }
}

/// Whether `s` is 1 to 128 ASCII letters, digits or `extra` characters.
fn is_id(s: &str, extra: &[char]) -> bool {
    !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
}

/// The arguments of `same` that tell this process from one that reused
/// its pid (pid, start time, command name); an error saying why when
/// nothing can (a pid no process of its own has, or neither start time nor
/// command name recorded).
fn guard(r: &Running) -> Result<String, &'static str> {
    let z = &r.zombie;
    if z.pid <= 1 || z.pid >= PID_MAX {
        return Err("its pid cannot be a process to stop");
    }
    if z.proc_start.is_none() && z.comm.is_none() {
        return Err("neither its start time nor its command name was recorded, so nothing tells it from \
                    a process that reused its pid: check by hand (ps -o lstart,comm -p PID)");
    }
    let start = z.proc_start.map_or_else(|| "''".to_owned(), |s| s.to_string());
    let comm = quote(z.comm.as_deref().unwrap_or(""));
    Ok(format!("{} {start} {comm}", z.pid))
}

impl Target<'_> {
    /// Appends this target's lines, inside its host's `if`.
    fn write(&self, host: &str, out: &mut String) {
        out.push('\n');
        for r in &self.processes {
            describe(r, out);
        }
        let guards: Vec<(&Running, String)> =
            self.processes.iter().filter_map(|r| guard(r).ok().map(|g| (*r, g))).collect();
        for r in &self.processes {
            if let Err(why) = guard(r) {
                let _ = writeln!(out, "  # pid {} left out: {}.", r.zombie.pid, comment(why));
            }
        }
        let Some((first, _)) = guards.first() else { return };
        let z = &first.zombie;
        let tests: Vec<String> = guards.iter().map(|(_, g)| format!("same {g}")).collect();
        let _ = writeln!(out, "  if {}; then", tests.join(" || "));
        match &self.kind {
            Kind::Process => {
                let message = format!(
                    "apron: stopping pid {} ({}) on {host}: {}; TERM, then KILL after {{wait}} s",
                    z.pid,
                    z.comm.as_deref().unwrap_or("command not recorded"),
                    why(first),
                );
                let (g, pid) = (&guards[0].1, z.pid);
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let _ = writeln!(out, "    kill -TERM {pid}");
                let _ = writeln!(out, "    gone_within \"$wait_s\" {g} || kill -KILL {pid}");
            }
            Kind::Pod { uid, namespace } => {
                let message = format!(
                    "apron: deleting pod {uid}{} on {host} (grace period {{wait}} s): its pid {} ({}) {}",
                    namespace.as_deref().map(|n| format!(" in namespace {n}")).unwrap_or_default(),
                    z.pid,
                    z.comm.as_deref().unwrap_or("command not recorded"),
                    why(first),
                );
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let ns = quote(namespace.as_deref().unwrap_or(""));
                let _ = writeln!(out, "    delete_pod {} {ns} \"$wait_s\"", quote(uid));
            }
            Kind::Job { id } => {
                let message = format!(
                    "apron: cancelling Slurm job {id} on {host}: its pid {} ({}) {}",
                    z.pid,
                    z.comm.as_deref().unwrap_or("command not recorded"),
                    why(first),
                );
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let _ = writeln!(out, "    scancel {} </dev/null", quote(id));
            }
        }
        let pids: Vec<String> = guards.iter().map(|(r, _)| r.zombie.pid.to_string()).collect();
        let gone = match pids.as_slice() {
            [pid] => format!("apron: pid {pid} on {host} is gone or is another process now: left alone"),
            _ => format!(
                "apron: pids {} on {host} are gone or are other processes now: left alone",
                pids.join(", ")
            ),
        };
        let _ = writeln!(out, "  else\n    echo {}\n  fi", quote(&comment(&gone)));
    }
}

/// The comment lines naming one zombie.
fn describe(r: &Running, out: &mut String) {
    let z = &r.zombie;
    let _ = writeln!(
        out,
        "  # pid {} ({}), user {}, team {}, GPU {}: {}",
        z.pid,
        comment(z.comm.as_deref().unwrap_or("command not recorded")),
        comment(z.user.as_deref().unwrap_or("not recorded")),
        comment(&z.team),
        comment(&z.gpu_uuid),
        comment(&why(r)),
    );
    let _ = match (&r.k8s_pod_uid, &r.slurm_job_id) {
        (Some(uid), _) => writeln!(
            out,
            "  #   in Kubernetes pod {}{}",
            comment(uid),
            r.k8s_namespace.as_deref().map(|n| format!(", namespace {}", comment(n))).unwrap_or_default()
        ),
        (None, Some(job)) => writeln!(out, "  #   in Slurm job {}", comment(job)),
        (None, None) => Ok(()),
    };
}

/// Why a zombie is stopped: what it held, for how long, since when.
fn why(r: &Running) -> String {
    let z = &r.zombie;
    let held = match z.used_mem_bytes {
        Some(bytes) => memory(bytes),
        None => "an unknown amount of memory".to_owned(),
    };
    let since = chrono::DateTime::from_timestamp_millis(z.idle_since)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| z.idle_since.to_string());
    // A MIG instance is a GPU of its own, known by its parent's index.
    let gpu = match z.gpu_uuid.starts_with("MIG-") {
        true => format!("a MIG instance of GPU {}", z.gpu_index),
        false => format!("GPU {}", z.gpu_index),
    };
    let mut why = format!("held {held} of {gpu} while it sat idle for {} from {since}", span(z.idle_minutes));
    let others: Vec<String> = r.gpu_indexes.iter().skip(1).map(i32::to_string).collect();
    if !others.is_empty() {
        let _ = write!(why, " (and memory of idle GPU {})", others.join(", "));
    }
    why
}

/// Bytes as GiB to a tenth, or MiB under 1 GiB.
fn memory(bytes: i64) -> String {
    const MIB: f64 = (1u64 << 20) as f64;
    let mib = bytes as f64 / MIB;
    if mib >= 1024.0 { format!("{:.1} GiB", mib / 1024.0) } else { format!("{mib:.0} MiB") }
}

/// Minutes as `2d 3h 5m`, `16h 5m` or `45m`.
fn span(minutes: i64) -> String {
    let (days, hours, mins) = (minutes / 1440, minutes % 1440 / 60, minutes % 60);
    let mut parts = Vec::new();
    if days > 0 {
        parts.push(format!("{days}d"));
    }
    if hours > 0 {
        parts.push(format!("{hours}h"));
    }
    if mins > 0 || parts.is_empty() {
        parts.push(format!("{mins}m"));
    }
    parts.join(" ")
}

/// Whom `notify` mails: the zombie's user when it reads as a login name
/// other than root (a Kubernetes pod's user is mostly root, "uid N" has no
/// mailbox); else nobody.
fn mail_to(r: &Running) -> String {
    let user = r.zombie.user.as_deref().unwrap_or("");
    let login = user.len() <= 32
        && user.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && user.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.-".contains(c));
    if login && user != "root" { user.to_owned() } else { String::new() }
}

/// `message` on one line as one shell word, single-quoted, where `{wait}`
/// becomes the script's `"$wait_s"`.
fn message_arg(message: &str) -> String {
    let parts: Vec<String> = comment(message).split("{wait}").map(quote).collect();
    parts.join("\"$wait_s\"")
}

/// `s` in single quotes: the shell takes every character literally (a NUL,
/// which no shell word can hold, becomes `?`).
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\0', "?").replace('\'', r"'\''"))
}

/// `s` for a comment or a message: control characters (a newline would end
/// the comment) become `?`.
fn comment(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// `n` and the noun, singular or plural.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests;
