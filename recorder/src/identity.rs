//! Who a GPU process is: its [`ProcIdentity`] read from `/proc`, once per
//! process rather than once per tick.
//!
//! This module owns reading `/proc/PID/{stat,status,cgroup,environ}`, the
//! pure parsers of cgroup paths and environment variables, and the cache
//! ([`IdentityCache`]) keyed by (pid, start time) that keeps a steady
//! process from costing any `/proc` read after its first tick. Which pids to
//! look at is the NVML source's business; which team a process belongs to is
//! apron's config's.
//!
//! `/proc/PID/cmdline` is never read: command lines carry secrets. Of the
//! environment, only the few variables named in [`parse_environ`] are kept;
//! the rest is dropped as it is read.
//!
//! Fields from the cgroup path (container, pod, Slurm job) are set by the
//! kernel on behalf of the container runtime, the kubelet or Slurm, and the
//! process cannot change them, as long as the path is under the root those
//! create ([`parse_cgroup_path`]): a user can make cgroups of any name in
//! its own tree. The uid is the kernel's. Fields from the environment
//! (namespace, Slurm job and account) are what the process was started
//! with, which its owner controls: they are kept as claims
//! (`claimed_*`), never as its identity. Every field is decoded lossily and
//! capped ([`field_text`]), so one odd byte or a huge value costs that
//! field's characters, never the identity or the recorder's memory.
//!
//! NVML names processes by their host pid, whatever PID namespace the
//! recorder is in (nvidia-docker #1483). A recorder in a container without
//! the host's PID namespace would read other processes' `/proc` entries
//! under those numbers, or none: the cache detects that (its own PID
//! namespace is not the host's, or most pids it is asked about have no
//! `/proc` entry), warns once, and from then on answers every identity as
//! unknown rather than wrong. Run such a container with `hostPID: true`
//! (Kubernetes) or `--pid=host` (docker).

use std::collections::HashMap;

use apron_schemas::ProcIdentity;

/// A process unseen for this many ticks is forgotten; seeing its pid again
/// after that reads `/proc` again.
const FORGET_AFTER_TICKS: u64 = 60;

/// The inode of the kernel's initial PID namespace (`PROC_PID_INIT_INO`),
/// the host's: `/proc/self/ns/pid` reads `pid:[4026531836]` there, and
/// something else in any container without the host's PID namespace.
pub const HOST_PID_NAMESPACE_INODE: u64 = 0xEFFF_FFFC;

/// Distinct pids looked up before "most are absent from `/proc`" may be
/// concluded: one process that exits between NVML's list and the `/proc`
/// read is not evidence.
const ABSENT_EVIDENCE_MIN: u32 = 4;

/// Why NVML's pids cannot be looked up in this `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignPids {
    /// The recorder's PID namespace is not the host's.
    OwnNamespace {
        /// The inode of the recorder's PID namespace.
        inode: u64,
    },
    /// Most pids NVML listed have no entry in this `/proc`.
    MostlyAbsent {
        /// Distinct pids looked up.
        seen: u32,
        /// Of which absent.
        absent: u32,
    },
}

/// The inode in a `/proc/PID/ns/pid` link's target (`pid:[4026531836]`).
pub fn namespace_inode(link: &str) -> Option<u64> {
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The inode of this process's PID namespace; `None` when it cannot be
/// read (no `/proc`, a kernel before 3.8).
pub fn own_pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    namespace_inode(link.to_str()?)
}

/// Whether pids from NVML (host pids) can be looked up here, judged from
/// the recorder's own PID namespace inode (`None`: unknown, so no verdict)
/// and from how many of the distinct pids looked up so far had no `/proc`
/// entry. `None` means they can.
pub fn foreign_pids(own_namespace: Option<u64>, seen: u32, absent: u32) -> Option<ForeignPids> {
    if let Some(inode) = own_namespace.filter(|i| *i != HOST_PID_NAMESPACE_INODE) {
        return Some(ForeignPids::OwnNamespace { inode });
    }
    (seen >= ABSENT_EVIDENCE_MIN && absent * 2 > seen).then_some(ForeignPids::MostlyAbsent { seen, absent })
}

/// Process identities, read from `/proc` once per process.
///
/// A pid listed at one tick and again at the next is taken to be the same
/// process without touching `/proc`: for the pid to be reused in between,
/// the process would have to exit and the kernel's pid counter wrap around
/// to hand the same pid to a new process that opened a GPU context, all
/// within one tick. A pid that appears, or reappears after a gap, has its
/// start time read from `/proc/PID/stat` and compared with the cached one, so
/// a reused pid is a new process with a new identity.
#[derive(Debug)]
pub struct IdentityCache {
    /// System boot time, seconds since the epoch (`btime` of `/proc/stat`),
    /// read once: it is stable for the life of the recorder, so a process's
    /// `proc_start` is the same on every tick and across recorder restarts.
    boot_time_secs: Option<u64>,
    /// Kernel clock ticks per second, the unit of a process's start time.
    ticks_per_second: u64,
    /// Counts [`IdentityCache::next_tick`] calls.
    tick: u64,
    entries: HashMap<i32, Entry>,
    /// User names by uid, `None` for a uid without a name; the user
    /// database may be remote (LDAP, sssd), so each uid is looked up once.
    users: HashMap<u32, Option<String>>,
    /// The recorder's own PID namespace inode, read once.
    own_namespace: Option<u64>,
    /// Distinct pids whose `/proc` was read, and of those, absent ones.
    pids_seen: u32,
    pids_absent: u32,
    /// Set, for good, once NVML's pids turn out not to be this `/proc`'s.
    foreign: Option<ForeignPids>,
    /// What every process is once `foreign` is set: unknown.
    unknown: ProcIdentity,
}

#[derive(Debug)]
struct Entry {
    /// Start time in clock ticks since boot, `None` when it could not be read.
    start_ticks: Option<u64>,
    identity: ProcIdentity,
    /// The last tick this pid was looked up at.
    last_tick: u64,
}

impl Default for IdentityCache {
    fn default() -> Self {
        IdentityCache::new()
    }
}

impl IdentityCache {
    /// An empty cache. Reads the boot time once.
    pub fn new() -> IdentityCache {
        IdentityCache::with_namespace(own_pid_namespace())
    }

    /// An empty cache for a recorder whose PID namespace has inode
    /// `own_namespace` (`None`: unknown).
    pub fn with_namespace(own_namespace: Option<u64>) -> IdentityCache {
        let mut cache = IdentityCache {
            boot_time_secs: procfs::boot_time_secs().ok(),
            ticks_per_second: procfs::ticks_per_second(),
            tick: 1,
            entries: HashMap::new(),
            users: HashMap::new(),
            own_namespace,
            pids_seen: 0,
            pids_absent: 0,
            foreign: None,
            unknown: ProcIdentity::default(),
        };
        cache.judge();
        cache
    }

    /// Why process identities are recorded as unknown, if they are.
    pub fn foreign(&self) -> Option<ForeignPids> {
        self.foreign
    }

    /// Looks `pids` up (as [`IdentityCache::identity`] would), so that the
    /// verdict on foreign pids takes a whole tick's list into account
    /// before any of its identities is handed out.
    pub fn observe(&mut self, pids: impl IntoIterator<Item = i32>) {
        for pid in pids {
            self.identity(pid);
        }
    }

    /// Updates the verdict on foreign pids, warning once when it is reached.
    fn judge(&mut self) {
        if self.foreign.is_some() {
            return;
        }
        self.foreign = foreign_pids(self.own_namespace, self.pids_seen, self.pids_absent);
        match self.foreign {
            Some(ForeignPids::OwnNamespace { inode }) => tracing::warn!(
                pid_namespace = inode,
                "the recorder is not in the host's PID namespace, and NVML names processes by host pid: \
                 process identities are recorded as unknown. Run its container with `hostPID: true` \
                 (Kubernetes) or `--pid=host` (docker)"
            ),
            Some(ForeignPids::MostlyAbsent { seen, absent }) => tracing::warn!(
                seen,
                absent,
                "most GPU processes NVML lists have no /proc entry here: the recorder does not see the \
                 host's pids, so process identities are recorded as unknown. Run its container with \
                 `hostPID: true` (Kubernetes) or `--pid=host` (docker)"
            ),
            None => {}
        }
    }

    /// Starts a new tick: call once per tick, before that tick's
    /// [`IdentityCache::identity`] calls. Forgets processes unseen for a
    /// while.
    pub fn next_tick(&mut self) {
        self.tick += 1;
        let tick = self.tick;
        self.entries.retain(|_, e| tick - e.last_tick <= FORGET_AFTER_TICKS);
    }

    /// The identity of process `pid` (a host pid). Reads `/proc` only for a
    /// pid not seen at the previous tick. A process that vanished or whose
    /// `/proc` files cannot be read is not an error: the fields that could
    /// not be read are `None`.
    ///
    /// Once NVML's pids are known not to be this `/proc`'s
    /// ([`IdentityCache::foreign`]), every identity is unknown (all `None`)
    /// and `/proc` is not read.
    pub fn identity(&mut self, pid: i32) -> &ProcIdentity {
        if self.foreign.is_some() {
            return &self.unknown;
        }
        let tick = self.tick;
        let stat = match self.entries.get(&pid) {
            // Seen this tick or the previous one: the same process.
            Some(e) if e.last_tick + 1 >= tick => None,
            Some(e) => {
                let stat = read_stat(pid);
                if stat.as_ref().map(|s| s.start_ticks) == e.start_ticks { None } else { Some(stat) }
            }
            None => Some(read_stat(pid)),
        };
        if let Some(stat) = &stat
            && !self.entries.contains_key(&pid)
        {
            self.pids_seen = self.pids_seen.saturating_add(1);
            self.pids_absent = self.pids_absent.saturating_add(u32::from(stat.is_none()));
            self.judge();
            if self.foreign.is_some() {
                return &self.unknown;
            }
        }
        if let Some(stat) = stat {
            let identity = self.read(pid, stat.as_ref());
            let start_ticks = stat.map(|s| s.start_ticks);
            self.entries.insert(pid, Entry { start_ticks, identity, last_tick: tick });
        }
        let entry = self.entries.get_mut(&pid).expect("the entry was found or inserted above");
        entry.last_tick = tick;
        &entry.identity
    }

    /// Reads everything but the start time and comm, which `stat` holds.
    fn read(&mut self, pid: i32, stat: Option<&Stat>) -> ProcIdentity {
        let mut identity = ProcIdentity::default();
        if let Some(stat) = stat {
            identity.comm = Some(stat.comm.as_str().into());
            identity.proc_start =
                self.boot_time_secs.and_then(|boot| start_ms(boot, stat.start_ticks, self.ticks_per_second));
        }
        if let Some(uid) = std::fs::read(format!("/proc/{pid}/status")).ok().and_then(|s| real_uid(&s)) {
            identity.uid = Some(i64::from(uid));
            identity.user =
                self.users.entry(uid).or_insert_with(|| user_name(uid)).as_deref().map(Into::into);
        }
        if let Ok(bytes) = std::fs::read(format!("/proc/{pid}/cgroup")) {
            let ids = parse_cgroup_file(&String::from_utf8_lossy(&bytes));
            identity.container_id = ids.container_id.map(Into::into);
            identity.k8s_pod_uid = ids.k8s_pod_uid.map(Into::into);
            identity.slurm_job_id = ids.slurm_job_id.map(Into::into);
        }
        // Readable only by the process's owner and root; without it, these
        // fields stay None. The process wrote them itself: claims, kept
        // apart from the identity above.
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) {
            let env = parse_environ(&environ);
            identity.claimed_k8s_namespace = env.k8s_namespace.map(Into::into);
            identity.claimed_slurm_job_id = env.slurm_job_id.map(Into::into);
            identity.claimed_slurm_account = env.slurm_account.map(Into::into);
        }
        identity
    }
}

/// What `/proc/PID/stat` says that the cache needs.
#[derive(Debug)]
pub struct Stat {
    /// Start time, clock ticks since boot.
    pub start_ticks: u64,
    /// Command name, decoded lossily.
    pub comm: String,
}

fn read_stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read(format!("/proc/{pid}/stat")).ok()?)
}

/// The longest text kept of any identity field, in bytes: Kubernetes
/// names are at most 253 characters, Linux command names 15 bytes. A
/// longer value (from a process's environment, a user database) is cut at
/// a character boundary, so a process cannot grow every row it is in.
pub const MAX_FIELD_BYTES: usize = 253;

/// `bytes` as text: invalid UTF-8 replaced (U+FFFD), cut to
/// [`MAX_FIELD_BYTES`]. One bad byte costs that character, not the field.
pub fn field_text(bytes: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if text.len() > MAX_FIELD_BYTES {
        let mut end = MAX_FIELD_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Parses the contents of `/proc/PID/stat`: the command name (field 2, in
/// parentheses, any bytes but NUL, decoded lossily) and the start time
/// (field 22, clock ticks since boot). `None` when the start time is not
/// there.
pub fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    let open = bytes.iter().position(|b| *b == b'(')?;
    // The name may hold ')' itself: it ends at the last one.
    let close = bytes.iter().rposition(|b| *b == b')')?;
    let comm = field_text(bytes.get(open + 1..close)?);
    let rest = std::str::from_utf8(bytes.get(close + 1..)?).ok()?;
    // Field 3 (the state) is the first after the name; field 22 the 20th.
    let start_ticks = rest.split_ascii_whitespace().nth(19)?.parse().ok()?;
    Some(Stat { start_ticks, comm })
}

/// The real uid in the contents of `/proc/PID/status` (the first number of
/// its `Uid:` line); the rest of the file (the name, which may hold any
/// bytes) is not read.
pub fn real_uid(status: &[u8]) -> Option<u32> {
    let line = status.split(|b| *b == b'\n').find_map(|l| l.strip_prefix(b"Uid:"))?;
    std::str::from_utf8(line).ok()?.split_ascii_whitespace().next()?.parse().ok()
}

/// The user name of `uid` from the host's user database, `None` when it
/// has none or the lookup fails.
fn user_name(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok().flatten()?;
    Some(field_text(user.name.as_bytes()))
}

/// A process's start time in milliseconds since the Unix epoch, from the
/// boot time (seconds since the epoch) and the start time in clock ticks
/// since boot. `None` when `ticks_per_second` is 0 or the result overflows.
pub fn start_ms(boot_time_secs: u64, start_ticks: u64, ticks_per_second: u64) -> Option<i64> {
    if ticks_per_second == 0 {
        return None;
    }
    let since_boot_ms = u128::from(start_ticks) * 1000 / u128::from(ticks_per_second);
    let ms = u128::from(boot_time_secs) * 1000 + since_boot_ms;
    i64::try_from(ms).ok()
}

/// Identifiers found in a process's cgroup path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupIds {
    /// Container id (64 hex digits for docker, containerd, cri-o, podman).
    pub container_id: Option<String>,
    /// Kubernetes pod uid, with dashes (`8d1c…-…`).
    pub k8s_pod_uid: Option<String>,
    /// Slurm job id (digits).
    pub slurm_job_id: Option<String>,
}

/// Parses the whole of `/proc/PID/cgroup` (cgroup v1, v2 or hybrid: lines
/// `hierarchy:controllers:path`); each field comes from the first line that
/// has it.
pub fn parse_cgroup_file(text: &str) -> CgroupIds {
    let mut ids = CgroupIds::default();
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else { continue };
        let found = parse_cgroup_path(path);
        ids.container_id = ids.container_id.or(found.container_id);
        ids.k8s_pod_uid = ids.k8s_pod_uid.or(found.k8s_pod_uid);
        ids.slurm_job_id = ids.slurm_job_id.or(found.slurm_job_id);
    }
    ids
}

/// Parses one cgroup path, as the host's cgroup hierarchy names it. Only
/// paths under the roots that the kubelet, a container runtime run by root
/// or Slurm create are read, as those alone name them (any user on a
/// systemd host can make `…/user@1000.service/slurm.slice/job_777.scope` or
/// `…/kubepods-besteffort-pod<uid>.slice` in its own tree):
///
/// - Kubernetes pods, at the kubelet's default cgroup root:
///   `/kubepods[/burstable|/besteffort]/pod<uid>/<container>` (cgroupfs
///   driver) and `/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid_with_underscores>.slice/<runtime>-<id>.scope`
///   (systemd driver), the container the folder below the pod's
///   (containerd, cri-o, docker);
/// - docker: `/docker/<id>`, `/system.slice/docker-<id>.scope`;
/// - podman run by root: `/machine.slice/libpod-<id>.scope`,
///   `/libpod_parent/libpod-<id>`;
/// - Slurm: its cgroup v1 layout `/slurm[_<node>]/uid_<uid>/job_<id>/…` and
///   its cgroup v2 layout `/system.slice/[<node>_]slurmstepd.scope/job_<id>/…`.
///
/// A path with `..` (seen from another cgroup namespace) is not anchored,
/// so it names nothing. With nested containers the outermost id is kept:
/// that is the one the host's runtime knows.
pub fn parse_cgroup_path(path: &str) -> CgroupIds {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut ids = CgroupIds::default();
    if !path.starts_with('/') || parts.contains(&"..") {
        return ids;
    }
    match parts.as_slice() {
        ["kubepods" | "kubepods.slice", ..] => {
            if let Some((uid, container)) = kubernetes_pod(&parts) {
                ids.k8s_pod_uid = Some(uid);
                ids.container_id = container.and_then(container_id);
            }
        }
        ["docker", id, ..] => ids.container_id = container_id(id),
        ["system.slice", unit, rest @ ..] => {
            if let Some(id) = unit.strip_prefix("docker-").and_then(|u| u.strip_suffix(".scope")) {
                ids.container_id = container_id(id);
            } else if *unit == "slurmstepd.scope" || unit.ends_with("_slurmstepd.scope") {
                ids.slurm_job_id = rest.first().and_then(|job| slurm_job(job));
            }
        }
        ["machine.slice", unit, ..] => {
            ids.container_id =
                unit.strip_prefix("libpod-").and_then(|u| u.strip_suffix(".scope")).and_then(container_id);
        }
        ["libpod_parent", unit, ..] => ids.container_id = unit.strip_prefix("libpod-").and_then(container_id),
        [root, uid, job, ..]
            if (*root == "slurm" || root.starts_with("slurm_")) && digits_after(uid, "uid_") =>
        {
            ids.slurm_job_id = slurm_job(job);
        }
        _ => {}
    }
    ids
}

/// Whether `s` is `prefix` followed by one or more ASCII digits.
fn digits_after(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// The job id of a Slurm cgroup folder `job_<digits>`.
fn slurm_job(name: &str) -> Option<String> {
    digits_after(name, "job_").then(|| name["job_".len()..].to_owned())
}

/// The pod uid, and the folder of the container below it, in a path under
/// the kubelet's root (`parts[0]` is `kubepods` or `kubepods.slice`): the
/// pod's folder is the first or, under a QoS class's folder, the second
/// below the root, and nowhere else.
fn kubernetes_pod<'a>(parts: &[&'a str]) -> Option<(String, Option<&'a str>)> {
    let systemd = parts[0] == "kubepods.slice";
    let qos_folder = |name: &str| match systemd {
        true => ["kubepods-burstable.slice", "kubepods-besteffort.slice"].contains(&name),
        false => ["burstable", "besteffort"].contains(&name),
    };
    let at = if parts.get(1).is_some_and(|p| qos_folder(p)) { 2 } else { 1 };
    let pod = parts.get(at)?;
    let uid = if systemd {
        let prefix = match at {
            2 => parts[1].strip_suffix(".slice")?,
            _ => "kubepods",
        };
        pod.strip_prefix(prefix)?.strip_prefix("-pod")?.strip_suffix(".slice")?.replace('_', "-")
    } else {
        pod.strip_prefix("pod")?.to_owned()
    };
    // A UUID, or the 32 hex digits of a static pod's config hash.
    let plausible = matches!(uid.len(), 32 | 36) && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    plausible.then(|| (uid, parts.get(at + 1).copied()))
}

/// The container id in the folder a runtime made for it: `<runtime>-<id>`
/// (`.scope` for the systemd driver) of a known runtime, or a bare
/// 64-hex-digit id.
fn container_id(name: &str) -> Option<String> {
    const PREFIXES: [&str; 4] = ["docker-", "cri-containerd-", "crio-", "libpod-"];
    let name = name.strip_suffix(".scope").unwrap_or(name);
    let id = PREFIXES.iter().find_map(|p| name.strip_prefix(p)).unwrap_or(name);
    // Container ids are 64 hex digits; requiring exactly that keeps other
    // units (`docker.service`, `crio-conmon-<id>`) from looking like one.
    let plausible = id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
    plausible.then(|| id.to_owned())
}

/// Identity fields found in a process's environment: what the process
/// claims, as its owner can set any of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvIds {
    /// `POD_NAMESPACE`, `K8S_POD_NAMESPACE`, `KUBERNETES_NAMESPACE` or
    /// `K8S_NAMESPACE`, the first set in that order (set by the pod spec
    /// through the downward API).
    pub k8s_namespace: Option<String>,
    /// `SLURM_JOB_ID`.
    pub slurm_job_id: Option<String>,
    /// `SLURM_JOB_ACCOUNT`.
    pub slurm_account: Option<String>,
}

/// Picks the identity variables out of the contents of `/proc/PID/environ`
/// (`KEY=value` entries separated by NUL bytes). Every other variable is
/// ignored; empty values count as unset; values are decoded lossily and
/// cut to [`MAX_FIELD_BYTES`] ([`field_text`]).
pub fn parse_environ(environ: &[u8]) -> EnvIds {
    const NAMESPACE_KEYS: [&str; 4] =
        ["POD_NAMESPACE", "K8S_POD_NAMESPACE", "KUBERNETES_NAMESPACE", "K8S_NAMESPACE"];
    let mut ids = EnvIds::default();
    let mut namespace_rank = NAMESPACE_KEYS.len();
    for entry in environ.split(|b| *b == 0) {
        let Some(eq) = entry.iter().position(|b| *b == b'=') else { continue };
        let (key, value) = (&entry[..eq], &entry[eq + 1..]);
        if value.is_empty() {
            continue;
        }
        match key {
            b"SLURM_JOB_ID" => ids.slurm_job_id = Some(field_text(value)),
            b"SLURM_JOB_ACCOUNT" => ids.slurm_account = Some(field_text(value)),
            _ => {
                if let Some(rank) = NAMESPACE_KEYS.iter().position(|k| k.as_bytes() == key)
                    && rank < namespace_rank
                {
                    namespace_rank = rank;
                    ids.k8s_namespace = Some(field_text(value));
                }
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4d6c9d2a0f3be1a8c7e5b2d9f0a1c3e4b5d6f7a8091a2b3c4d5e6f708192a3b4";
    const POD: &str = "8d1c5b9e-2f3a-4b6c-9d0e-1f2a3b4c5d6e";

    fn ids(container: Option<&str>, pod: Option<&str>, job: Option<&str>) -> CgroupIds {
        CgroupIds {
            container_id: container.map(str::to_owned),
            k8s_pod_uid: pod.map(str::to_owned),
            slurm_job_id: job.map(str::to_owned),
        }
    }

    #[test]
    fn docker_paths() {
        assert_eq!(parse_cgroup_path(&format!("/docker/{ID}")), ids(Some(ID), None, None));
        assert_eq!(parse_cgroup_path(&format!("/system.slice/docker-{ID}.scope")), ids(Some(ID), None, None));
        assert_eq!(parse_cgroup_path("/system.slice/docker.service"), ids(None, None, None));
    }

    #[test]
    fn nested_containers_keep_the_outermost_id() {
        let inner = ID.replace('4', "5");
        assert_eq!(parse_cgroup_path(&format!("/docker/{ID}/docker/{inner}")), ids(Some(ID), None, None));
    }

    #[test]
    fn kubernetes_systemd_driver() {
        let uid = POD.replace('-', "_");
        let containerd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(parse_cgroup_path(&containerd), ids(Some(ID), Some(POD), None));
        let crio = format!("/kubepods.slice/kubepods-pod{uid}.slice/crio-{ID}.scope");
        assert_eq!(parse_cgroup_path(&crio), ids(Some(ID), Some(POD), None));
        let besteffort = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{uid}.slice/crio-{ID}.scope"
        );
        assert_eq!(parse_cgroup_path(&besteffort), ids(Some(ID), Some(POD), None));
        // conmon runs beside the container, not in it.
        let conmon = format!("/kubepods.slice/kubepods-pod{uid}.slice/crio-conmon-{ID}.scope");
        assert_eq!(parse_cgroup_path(&conmon), ids(None, Some(POD), None));
    }

    #[test]
    fn kubernetes_cgroupfs_driver() {
        assert_eq!(
            parse_cgroup_path(&format!("/kubepods/burstable/pod{POD}/{ID}")),
            ids(Some(ID), Some(POD), None)
        );
        assert_eq!(parse_cgroup_path(&format!("/kubepods/pod{POD}/{ID}")), ids(Some(ID), Some(POD), None));
        // A static pod's uid is the hash of its manifest.
        let hash = "6e7c6e8f0e4a0e6f9b1a2c3d4e5f6a7b";
        assert_eq!(
            parse_cgroup_path(&format!("/kubepods/besteffort/pod{hash}")),
            ids(None, Some(hash), None)
        );
        // `pod…` outside kubepods is someone's folder, not a pod.
        assert_eq!(parse_cgroup_path(&format!("/user.slice/pod{POD}")), ids(None, None, None));
    }

    #[test]
    fn podman_paths() {
        assert_eq!(
            parse_cgroup_path(&format!("/machine.slice/libpod-{ID}.scope")),
            ids(Some(ID), None, None)
        );
        assert_eq!(parse_cgroup_path(&format!("/libpod_parent/libpod-{ID}")), ids(Some(ID), None, None));
    }

    #[test]
    fn slurm_paths() {
        assert_eq!(
            parse_cgroup_path("/slurm/uid_1000/job_1234/step_0/task_0"),
            ids(None, None, Some("1234"))
        );
        assert_eq!(
            parse_cgroup_path("/slurm_node07/uid_1000/job_77/step_batch"),
            ids(None, None, Some("77"))
        );
        assert_eq!(
            parse_cgroup_path("/system.slice/slurmstepd.scope/job_1234/step_0/user/task_0"),
            ids(None, None, Some("1234"))
        );
        // `job_…` outside Slurm's tree is not a Slurm job.
        assert_eq!(parse_cgroup_path("/user.slice/job_1234"), ids(None, None, None));
        assert_eq!(parse_cgroup_path("/slurm/uid_1000/job_x1/step_0"), ids(None, None, None));
    }

    #[test]
    fn names_a_user_can_make_in_its_own_tree_name_nothing() {
        let uid = POD.replace('-', "_");
        let user = "/user.slice/user-1000.slice/user@1000.service";
        for path in [
            // systemd-run --user --scope --slice=slurm.slice --unit=job_777
            format!("{user}/slurm.slice/job_777.scope"),
            format!("{user}/app.slice/slurm/uid_1000/job_4242/step_0"),
            format!("{user}/system.slice/slurmstepd.scope/job_4242"),
            format!("{user}/kubepods-besteffort-pod{uid}.slice"),
            format!("{user}/kubepods/burstable/pod{POD}/{ID}"),
            format!("{user}/docker-{ID}.scope"),
            format!("/user.slice/docker/{ID}"),
            "/user.slice/slurm_x/uid_1/job_4242".to_owned(),
            // Seen from another cgroup namespace: not anchored at the host's root.
            format!("/../../kubepods/pod{POD}/{ID}"),
            "/../slurm/uid_0/job_4242".to_owned(),
            format!("kubepods/pod{POD}"),
        ] {
            assert_eq!(parse_cgroup_path(&path), CgroupIds::default(), "{path}");
        }
    }

    #[test]
    fn only_the_pod_folder_where_the_kubelet_makes_it_counts() {
        // A pod's own sub-folder naming another pod (a container that can
        // write its cgroup tree) keeps the outer pod.
        let other = "0d5e8a1c-7b3f-4e2a-8c6d-9f1a2b3c4d5e";
        assert_eq!(
            parse_cgroup_path(&format!("/kubepods/burstable/pod{POD}/{ID}/pod{other}")),
            ids(Some(ID), Some(POD), None)
        );
        assert_eq!(parse_cgroup_path(&format!("/kubepods/other/pod{POD}")), ids(None, None, None));
        assert_eq!(parse_cgroup_path(&format!("/kubepods/burstable/x/pod{POD}")), ids(None, None, None));
        let uid = POD.replace('-', "_");
        // The QoS in the pod's name must be its folder's.
        assert_eq!(
            parse_cgroup_path(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod{uid}.slice"
            )),
            ids(None, None, None)
        );
        // A Slurm job's folder below another job's names the outer one.
        assert_eq!(
            parse_cgroup_path("/system.slice/slurmstepd.scope/job_1/step_0/user/task_0/job_2"),
            ids(None, None, Some("1"))
        );
        assert_eq!(
            parse_cgroup_path("/system.slice/node07_slurmstepd.scope/job_9/step_0"),
            ids(None, None, Some("9"))
        );
        assert_eq!(parse_cgroup_path("/slurm/uid_x/job_9"), ids(None, None, None));
    }

    #[test]
    fn stat_status_and_environ_decode_lossily_and_are_capped() {
        // Field 22 is the start time; the name holds ") (", a bad byte and an escape.
        let mut stat = b"4242 (py\xff) (\x1b]0;x\x07) S".to_vec();
        stat.extend((4..=21).map(|f| format!(" {f}")).collect::<String>().as_bytes());
        stat.extend(b" 987654 23 24\n");
        let parsed = parse_stat(&stat).expect("parses");
        assert_eq!(parsed.start_ticks, 987_654);
        assert_eq!(parsed.comm, "py\u{fffd}) (\u{1b}]0;x\u{7}");
        assert!(parse_stat(b"1 (x) S 1 2").is_none(), "no start time");

        let status = b"Name:\tpy\xff\xfe\nUmask:\t0022\nState:\tS\nUid:\t1000\t1001\t1001\t1001\n";
        assert_eq!(real_uid(status), Some(1_000));
        assert_eq!(real_uid(b"Name:\tx\n"), None);

        let mut environ = b"POD_NAMESPACE=".to_vec();
        environ.extend(std::iter::repeat_n(b'a', 120_000));
        environ.extend(b"\0SLURM_JOB_ACCOUNT=vi\xffsion\0");
        let env = parse_environ(&environ);
        assert_eq!(env.k8s_namespace.as_deref().map(str::len), Some(MAX_FIELD_BYTES));
        assert_eq!(env.slurm_account.as_deref(), Some("vi\u{fffd}sion"));
        // Cut at a character boundary.
        assert_eq!(field_text("é".repeat(200).as_bytes()).len(), MAX_FIELD_BYTES - 1);
    }

    #[test]
    fn plain_host_processes_have_no_ids() {
        for path in ["/", "/user.slice/user-1000.slice/session-3.scope", "/init.scope", ""] {
            assert_eq!(parse_cgroup_path(path), CgroupIds::default(), "{path}");
        }
    }

    #[test]
    fn cgroup_files_v1_v2_and_hybrid() {
        let v2 = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(parse_cgroup_file(&v2), ids(Some(ID), None, None));
        let v1 = "12:memory:/slurm/uid_1000/job_42/step_0\n11:devices:/slurm/uid_1000/job_42/step_0\n\
                  1:name=systemd:/system.slice/slurmd.service\n0::/system.slice/slurmd.service\n";
        assert_eq!(parse_cgroup_file(v1), ids(None, None, Some("42")));
        let hybrid = format!(
            "5:cpu,cpuacct:/kubepods/burstable/pod{POD}/{ID}\n1:name=systemd:/kubepods/burstable/pod{POD}/{ID}\n0::/\n"
        );
        assert_eq!(parse_cgroup_file(&hybrid), ids(Some(ID), Some(POD), None));
        assert_eq!(parse_cgroup_file(""), CgroupIds::default());
    }

    #[test]
    fn environ_keeps_only_identity_variables() {
        let environ = b"PATH=/usr/bin\0AWS_SECRET_ACCESS_KEY=hunter2\0SLURM_JOB_ID=991\0\
SLURM_JOB_ACCOUNT=vision\0KUBERNETES_NAMESPACE=later\0POD_NAMESPACE=team-a\0EMPTY=\0NOEQUALS\0";
        let env = parse_environ(environ);
        assert_eq!(
            env,
            EnvIds {
                k8s_namespace: Some("team-a".into()),
                slurm_job_id: Some("991".into()),
                slurm_account: Some("vision".into()),
            }
        );
        assert_eq!(parse_environ(b"SLURM_JOB_ACCOUNT=\0"), EnvIds::default());
        assert_eq!(parse_environ(b""), EnvIds::default());
    }

    #[test]
    fn start_time_from_boot_time_and_ticks() {
        assert_eq!(start_ms(1_700_000_000, 250, 100), Some(1_700_000_002_500));
        assert_eq!(start_ms(1_700_000_000, 1, 3), Some(1_700_000_000_333));
        assert_eq!(start_ms(1_700_000_000, 5, 0), None);
    }

    #[test]
    fn own_process_identity() {
        let mut cache = IdentityCache::new();
        let pid = i32::try_from(std::process::id()).expect("pids fit i32");
        let me = cache.identity(pid).clone();
        assert_eq!(me.uid, Some(i64::from(nix::unistd::getuid().as_raw())));
        let comm = std::fs::read_to_string("/proc/self/comm").expect("own comm is readable");
        assert_eq!(me.comm.as_deref(), Some(comm.trim_end()));
        let start = me.proc_start.expect("own start time is readable");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as i64;
        // Started within the last hour, and not in the future (boot time
        // has one-second precision).
        assert!(start <= now + 1_000 && start > now - 3_600_000, "start {start}, now {now}");
        // Cached: the same identity at the next tick.
        cache.next_tick();
        assert_eq!(cache.identity(pid), &me);
    }

    #[test]
    fn vanished_process_has_empty_identity() {
        let mut cache = IdentityCache::new();
        // Above the kernel's pid_max limit (4194304), so never a live pid.
        assert_eq!(cache.identity(i32::MAX), &ProcIdentity::default());
    }

    #[test]
    fn pid_namespace_links_parse() {
        assert_eq!(namespace_inode("pid:[4026531836]"), Some(HOST_PID_NAMESPACE_INODE));
        assert_eq!(namespace_inode("pid:[4026532179]"), Some(4_026_532_179));
        assert_eq!(namespace_inode("net:[4026531836]"), None);
        assert_eq!(namespace_inode("pid:[x]"), None);
    }

    #[test]
    fn foreign_pids_from_the_namespace_or_from_absent_pids() {
        assert_eq!(foreign_pids(Some(HOST_PID_NAMESPACE_INODE), 0, 0), None);
        assert_eq!(foreign_pids(None, 0, 0), None);
        assert_eq!(
            foreign_pids(Some(4_026_532_179), 0, 0),
            Some(ForeignPids::OwnNamespace { inode: 4_026_532_179 })
        );
        // A process that exits before its /proc read is no evidence.
        assert_eq!(foreign_pids(None, 1, 1), None);
        assert_eq!(foreign_pids(None, 3, 3), None);
        assert_eq!(foreign_pids(None, 4, 2), None);
        assert_eq!(foreign_pids(None, 4, 3), Some(ForeignPids::MostlyAbsent { seen: 4, absent: 3 }));
        assert_eq!(foreign_pids(None, 10, 6), Some(ForeignPids::MostlyAbsent { seen: 10, absent: 6 }));
    }

    #[test]
    fn identities_are_unknown_once_most_pids_are_absent() {
        let mut cache = IdentityCache::with_namespace(Some(HOST_PID_NAMESPACE_INODE));
        let me = i32::try_from(std::process::id()).expect("pids fit i32");
        assert!(cache.identity(me).comm.is_some());
        // Above PID_MAX_LIMIT (2^22): never a live pid.
        cache.observe((1..=4).map(|i| 4_194_304 + i));
        // Decided as soon as most of four are absent, and for good.
        assert_eq!(cache.foreign(), Some(ForeignPids::MostlyAbsent { seen: 4, absent: 3 }));
        // Unknown, not the cached identity of a process that may not be it.
        assert_eq!(cache.identity(me), &ProcIdentity::default());
    }

    #[test]
    fn identities_are_unknown_outside_the_host_pid_namespace() {
        let mut cache = IdentityCache::with_namespace(Some(4_026_532_179));
        let me = i32::try_from(std::process::id()).expect("pids fit i32");
        assert_eq!(cache.identity(me), &ProcIdentity::default());
    }

    #[test]
    fn forgets_processes_after_a_while() {
        let mut cache = IdentityCache::new();
        cache.identity(i32::MAX);
        for _ in 0..FORGET_AFTER_TICKS {
            cache.next_tick();
        }
        assert_eq!(cache.entries.len(), 1);
        cache.next_tick();
        assert!(cache.entries.is_empty());
    }
}
