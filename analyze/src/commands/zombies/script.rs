//! The shell script `apron zombies --commands` prints: for each zombie idle
//! now, host by host, what an operator runs on that host to stop it.
//! apron itself never signals a process; it writes text, from the rows
//! [`crate::report::figures::zombies::running`] gives, and this module is pure.
//!
//! The script acts on the world as it is when it runs, not as apron saw
//! it. Per target (in the list's order, most memory-minutes first; hosts in
//! the order of their first zombie), before anything is stopped:
//!
//! - each process is still the one recorded: its pid shows the recorded
//!   start time (and command name) in `/proc`, as the recorder reads them;
//!   a process whose start time was not recorded is never stopped;
//! - a process stopped through its Kubernetes pod or Slurm job is inside
//!   that pod or job by its cgroup under the kubelet's or Slurm's own
//!   hierarchy (`/proc/PID/cgroup`, which the process cannot choose), and
//!   the pod runs on this node;
//! - its GPUs (and, for a pod or job, every GPU where the pod or job holds
//!   memory) have been idle for at least the zombie threshold by the
//!   recorder's newest data on this host, its write-ahead log included
//!   (`apron-recorder idle-now`).
//!
//! Then a notice to the owner (the host's log, and mail where the host
//! sends it), and
//!
//! - a plain process: `kill -TERM`, a wait, `kill -KILL` only if it is
//!   still there;
//! - a process in a Kubernetes pod: the pod deleted (its namespace and name
//!   found from its uid with kubectl, among this node's pods), with the wait
//!   as its grace period: the kubelet sends TERM, then KILL;
//! - a process in a Slurm job: `scancel` of the job (Slurm sends TERM,
//!   then KILL after the cluster's KillWait).
//!
//! Processes of one pod or job share one deletion or cancellation. Every
//! value from the data is single-quoted, with its control characters
//! written as `printf` escapes so that the script is safe to `cat`, and
//! text in comments and messages has its control characters replaced: no
//! recorded name can run as a command or reach the terminal raw.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::report::figures::zombies::Running;

/// What the script is made with besides its zombies.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// Seconds a process gets between TERM and KILL (at least 1).
    pub wait_s: u64,
    /// The zombie threshold in whole minutes (at least 1): how long a GPU
    /// must have been idle, by the newest data, when the script runs.
    pub min_idle_minutes: u64,
    /// The config's idle threshold (`idle.threshold_pct`), percent.
    pub threshold_pct: f64,
    /// The report's header lines (period, data, config), shown as comments.
    pub header: &'a [String],
}

/// The highest pid Linux hands out (`pid_max` can be at most 2^22).
const PID_MAX: i32 = 1 << 22;

/// The helper functions every host's part calls.
const FUNCTIONS: &str = r#"# Whether pid $1 is still the process apron recorded: started at $2 ms
# since the epoch (boot time + /proc/PID/stat field 22, as apron-recorder
# reads it; to within a second, as the kernel's boot time can move by one),
# with command name $3 (/proc/PID/comm; its printable ASCII characters,
# the others left out on both sides). Without a start time nothing is the
# process recorded. A process that has exited but not yet been reaped
# counts as gone.
same() {
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  same_pid=$1 same_start=$2 same_comm=$3
  # The command name, field 2, is in parentheses and may hold anything:
  # count the fields after its last parenthesis, from field 3 (the state).
  set -- ${stat##*) }
  case $1 in Z|X|x) return 1 ;; esac
  boot=$(awk '$1 == "btime" { print $2 }' /proc/stat)
  hz=$(getconf CLK_TCK)
  [ -n "$same_start" ] && [ -n "$boot" ] && [ -n "$hz" ] && [ -n "${20}" ] || return 1
  now=$(( boot * 1000 + ${20} * 1000 / hz ))
  [ $(( now - same_start )) -le 1000 ] && [ $(( same_start - now )) -le 1000 ] || return 1
  [ "$(LC_ALL=C tr -cd ' -~' < "/proc/$same_pid/comm" 2>/dev/null)" = "$same_comm" ]
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

# Whether pid $1 runs in the Kubernetes pod with uid $2, by its cgroup
# under the kubelet's own hierarchy (cgroupfs or systemd driver), which no
# process can choose.
in_pod() {
  u=$(printf '%s' "$2" | tr - _)
  while IFS= read -r line; do
    path=${line#*:}
    path=${path#*:}
    case $path in
      /kubepods/pod"$2"|/kubepods/pod"$2"/*) return 0 ;;
      /kubepods/burstable/pod"$2"|/kubepods/burstable/pod"$2"/*) return 0 ;;
      /kubepods/besteffort/pod"$2"|/kubepods/besteffort/pod"$2"/*) return 0 ;;
      /kubepods.slice/kubepods-pod"$u".slice|/kubepods.slice/kubepods-pod"$u".slice/*) return 0 ;;
      /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"$u".slice) return 0 ;;
      /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"$u".slice/*) return 0 ;;
      /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"$u".slice) return 0 ;;
      /kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"$u".slice/*) return 0 ;;
    esac
  done < "/proc/$1/cgroup"
  return 1
}

# Whether pid $1 runs in Slurm job $2, by its cgroup under Slurm's own
# hierarchy: /slurm[_NODE]/uid_N/job_ID/... (cgroup v1) or
# /system.slice/[NODE_]slurmstepd.scope/job_ID/... (cgroup v2).
in_job() {
  while IFS= read -r line; do
    path=${line#*:}
    path=${path#*:}
    IFS=/ read -r root a b c rest <<EOF
$path
EOF
    [ -z "$root" ] || continue
    case $a/$b in
      slurm/uid_[0-9]*|slurm_*/uid_[0-9]*|system.slice/slurmstepd.scope|system.slice/*_slurmstepd.scope)
        [ "$c" = "job_$2" ] && return 0 ;;
    esac
  done < "/proc/$1/cgroup"
  return 1
}

# Whether the GPUs apron-recorder idle-now is asked about ($@: --gpu UUID,
# --pod UID, --job ID) have been idle for the last $min_idle minutes by the
# recorder's newest data on this host (its write-ahead log included), at
# the idle threshold apron used. It says why not.
idle_now() {
  if ! command -v "$recorder" >/dev/null 2>&1; then
    echo "apron: no $recorder on $here: cannot check that the GPU is idle now (set APRON_RECORDER)" >&2
    return 1
  fi
  "$recorder" idle-now --data "$data" --host "$here" --for "${min_idle}m" \
    --threshold "$threshold" "$@" </dev/null
}

# Says what is stopped and why ($2) here, in the host's log, and by mail to
# user $1 (empty: nobody) where this host has a mail command.
notify() {
  printf '%s\n' "$2"
  logger -t apron -p user.notice -- "$2" 2>/dev/null
  if [ -n "$1" ] && command -v mail >/dev/null 2>&1; then
    printf '%s\n' "$2" | mail -s 'apron: your process on an idle GPU is being stopped' "$1"
  fi
}

# Deletes the Kubernetes pod whose uid is $1, if it runs on this node
# ($node), with a grace period of $2 seconds between TERM and KILL. Only
# the uid is recorded (from the cgroup): kubectl finds the pod's namespace
# and name among this node's pods.
delete_pod() {
  if ! command -v kubectl >/dev/null 2>&1; then
    echo "apron: no kubectl on $here: delete the pod with uid $1 where kubectl works" >&2
    return 1
  fi
  found=$(kubectl get pods --all-namespaces --field-selector "spec.nodeName=$node" --no-headers \
    -o custom-columns=UID:.metadata.uid,NAMESPACE:.metadata.namespace,NAME:.metadata.name </dev/null \
    | awk -v uid="$1" '$1 == uid { print $2, $3; exit }')
  if [ -z "$found" ]; then
    echo "apron: no pod with uid $1 runs on node $node: nothing deleted" >&2
    return 1
  fi
  kubectl delete pod --namespace="${found%% *}" --grace-period="$2" "${found#* }" </dev/null
}
"#;

/// The script stopping `running` (the zombies idle now, in the list's
/// order).
pub fn script(running: &[Running], options: &Options<'_>) -> String {
    let mut out = String::new();
    let hosts = by_host(running);
    let processes = running.len();
    let _ = writeln!(out, "#!/bin/sh");
    let _ = writeln!(
        out,
        "# apron zombies --commands: {} idle now on {}, most memory-minutes first.",
        plural(processes, "zombie", "zombies"),
        plural(hosts.len(), "host", "hosts"),
    );
    for line in options.header {
        let _ = writeln!(out, "# {}", comment(line));
    }
    out.push_str(
        "#\n\
         # apron sends no signal itself. Read this, then run it on each host below,\n\
         # as root, e.g.  ssh HOST sudo sh -s < THIS_FILE\n\
         # Each host runs its own part only: the one named as `uname -n` names it\n\
         # (set APRON_HOST=NAME where the recorder was given another name).\n\
         # Nothing is stopped unless, when this runs:\n\
         # - /proc/PID still shows the start time and command name recorded (a pid\n\
         #   reused since is left alone; a process without a recorded start time is\n\
         #   never stopped);\n\
         # - a pod's or job's process is inside that pod or job by its cgroup under\n\
         #   the kubelet's or Slurm's own hierarchy, and the pod runs on this node;\n\
         # - its GPUs have been idle for the last min_idle minutes by the recorder's\n\
         #   newest data on this host (apron-recorder idle-now reads data, below;\n\
         #   set APRON_RECORDER_DATA where the recorder writes elsewhere).\n\
         # A plain process gets TERM, then KILL if it is still there wait_s seconds\n\
         # later; a Kubernetes pod is deleted with that grace period (kubectl must\n\
         # work here; set APRON_K8S_NODE where the node's name is not the host's);\n\
         # a Slurm job is cancelled with scancel (TERM, then KILL after KillWait).\n\n",
    );
    let _ = writeln!(out, "wait_s={}", options.wait_s.max(1));
    let _ = writeln!(out, "min_idle={}", options.min_idle_minutes.max(1));
    let _ = writeln!(out, "threshold={}", options.threshold_pct);
    out.push_str(
        "here=${APRON_HOST:-$(uname -n)}\n\
         node=${APRON_K8S_NODE:-$here}\n\
         data=${APRON_RECORDER_DATA:-/var/lib/apron}\n\
         recorder=${APRON_RECORDER:-apron-recorder}\n\
         nl=$(printf '\\nx')\n\
         nl=${nl%x}\n\n",
    );
    if hosts.is_empty() {
        out.push_str("echo 'apron: no zombie is idle now: nothing to stop'\n");
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
    Pod { uid: String },
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
        (Some(uid), _) => Kind::Pod { uid: uid.to_owned() },
        (None, Some(id)) => Kind::Job { id: id.to_owned() },
        (None, None) => Kind::Process,
    }
}

/// Whether `s` is 1 to 128 ASCII letters, digits or `extra` characters.
fn is_id(s: &str, extra: &[char]) -> bool {
    !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
}

/// The arguments of `same` that tell this process from one that reused
/// its pid (pid, start time, command name's printable ASCII); an error
/// saying why when nothing can (a pid no process of its own has, or no
/// start time recorded: a command name alone is anyone's).
fn guard(r: &Running) -> Result<String, &'static str> {
    let z = &r.zombie;
    if z.pid <= 1 || z.pid >= PID_MAX {
        return Err("its pid cannot be a process to stop");
    }
    let Some(start) = z.proc_start else {
        return Err("its start time was not recorded (data imported from nvidia-smi has none), so \
                    nothing tells it from a process that reused its pid: check by hand \
                    (ps -o lstart,comm -p PID)");
    };
    let comm: String = z.comm.as_deref().unwrap_or("").chars().filter(|c| matches!(c, ' '..='~')).collect();
    Ok(format!("{} {start} {}", z.pid, quote(&comm)))
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
        let what = match &self.kind {
            Kind::Process => format!("pid {}", z.pid),
            Kind::Pod { uid } => format!("pod {uid}"),
            Kind::Job { id } => format!("Slurm job {id}"),
        };
        // Every check first, each saying why it stops nothing.
        out.push_str("  stop=yes alive=no\n");
        for (r, g) in &guards {
            let pid = r.zombie.pid;
            let inside = match &self.kind {
                Kind::Process => String::new(),
                Kind::Pod { uid } => format!(
                    "\n    in_pod {pid} {} || {{ echo {}; stop=no; }}",
                    quote(uid),
                    quote(&comment(&format!(
                        "apron: pid {pid} on {host} is not in pod {uid} by its cgroup: left alone"
                    )))
                ),
                Kind::Job { id } => format!(
                    "\n    in_job {pid} {} || {{ echo {}; stop=no; }}",
                    quote(id),
                    quote(&comment(&format!(
                        "apron: pid {pid} on {host} is not in Slurm job {id} by its cgroup: left alone"
                    )))
                ),
            };
            let _ = writeln!(out, "  if same {g}; then\n    alive=yes{inside}\n  fi");
        }
        let pids: Vec<String> = guards.iter().map(|(r, _)| r.zombie.pid.to_string()).collect();
        let gone = match pids.as_slice() {
            [pid] => format!("apron: pid {pid} on {host} is gone or is another process now: left alone"),
            _ => format!(
                "apron: pids {} on {host} are gone or are other processes now: left alone",
                pids.join(", ")
            ),
        };
        let _ = writeln!(out, "  [ \"$alive\" = yes ] || {{ echo {}; stop=no; }}", quote(&comment(&gone)));
        let mut flags: Vec<String> = match &self.kind {
            Kind::Process => Vec::new(),
            Kind::Pod { uid } => vec![format!("--pod {}", quote(uid))],
            Kind::Job { id } => vec![format!("--job {}", quote(id))],
        };
        let mut uuids: Vec<&str> = Vec::new();
        for (r, _) in &guards {
            for uuid in &r.gpu_uuids {
                if !uuids.contains(&uuid.as_str()) {
                    uuids.push(uuid);
                }
            }
        }
        flags.extend(uuids.iter().map(|u| format!("--gpu {}", quote(u))));
        let busy = [
            Part::Text(&format!("apron: {what} on {host}: not every GPU of it has been idle for ")),
            Part::MinIdle,
            Part::Text(" minutes now, by the recorder's newest data: left alone"),
        ];
        let _ = writeln!(
            out,
            "  if [ \"$stop\" = yes ] && ! idle_now {}; then\n    echo {}\n    stop=no\n  fi",
            flags.join(" "),
            message_arg(&busy),
        );
        out.push_str("  if [ \"$stop\" = yes ]; then\n");
        let comm = z.comm.as_deref().unwrap_or("command not recorded");
        match &self.kind {
            Kind::Process => {
                let text = format!(
                    "apron: stopping pid {} ({comm}) on {host}: {}; TERM, then KILL after ",
                    z.pid,
                    why(first)
                );
                let message = [Part::Text(&text), Part::Wait, Part::Text(" s")];
                let (g, pid) = (&guards[0].1, z.pid);
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let _ = writeln!(out, "    kill -TERM {pid}");
                let _ = writeln!(out, "    gone_within \"$wait_s\" {g} || kill -KILL {pid}");
            }
            Kind::Pod { uid } => {
                let text = format!(" s): its pid {} ({comm}) {}", z.pid, why(first));
                let head = format!("apron: deleting pod {uid} on {host} (grace period ");
                let message = [Part::Text(&head), Part::Wait, Part::Text(&text)];
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let _ = writeln!(out, "    delete_pod {} \"$wait_s\"", quote(uid));
            }
            Kind::Job { id } => {
                let text = format!(
                    "apron: cancelling Slurm job {id} on {host}: its pid {} ({comm}) {}",
                    z.pid,
                    why(first)
                );
                let message = [Part::Text(&text)];
                let _ = writeln!(out, "    notify {} {}", quote(&mail_to(first)), message_arg(&message));
                let _ = writeln!(out, "    scancel {} </dev/null", quote(id));
            }
        }
        out.push_str("  fi\n");
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
        (Some(uid), _) => writeln!(out, "  #   in Kubernetes pod {}", comment(uid)),
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
    let mut why =
        format!("has held {held} of {gpu} while it sat idle for {} since {since}", span(z.idle_minutes));
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

/// A piece of a message: text (recorded names among it), or one of the
/// script's variables.
#[derive(Debug, Clone, Copy)]
enum Part<'a> {
    Text(&'a str),
    /// `"$wait_s"`.
    Wait,
    /// `"$min_idle"`.
    MinIdle,
}

/// A message on one line as one shell word: its text single-quoted with
/// control characters replaced, its variables expanded by the shell. A
/// process named `$wait_s` or `{wait}` prints as its name.
fn message_arg(parts: &[Part<'_>]) -> String {
    parts
        .iter()
        .map(|part| match part {
            Part::Text(text) => quote(&comment(text)),
            Part::Wait => "\"$wait_s\"".to_owned(),
            Part::MinIdle => "\"$min_idle\"".to_owned(),
        })
        .collect()
}

/// `s` as one shell word that the shell takes literally, in single quotes;
/// a control character (which `cat` would hand to the terminal) is written
/// as a `printf` escape outside them, a newline as the script's `$nl`. A
/// NUL, which no shell word can hold, becomes `?`.
pub fn quote(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str(r"'\''"),
            '\0' => out.push('?'),
            '\n' => out.push_str("'\"$nl\"'"),
            c if c.is_control() => {
                let mut bytes = [0; 4];
                out.push_str("'\"$(printf '");
                for b in c.encode_utf8(&mut bytes).bytes() {
                    let _ = write!(out, "\\{b:03o}");
                }
                out.push_str("')\"'");
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
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
