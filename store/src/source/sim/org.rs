//! The simulated organisation: its teams, their users, and how each team
//! launches work (Kubernetes pods, Slurm jobs or bare processes), which
//! decides the identity columns of its processes. What a process does on
//! the GPU is `workload`'s business; when it runs is `schedule`'s.

use apron_schemas::ProcIdentity;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::workload::Kind;

/// A user of the simulated fleet, as the hosts' user database knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimUser {
    /// Login name (the `user` column).
    pub name: &'static str,
    /// Unix uid (the `uid` column).
    pub uid: i64,
}

/// A team of the simulated organisation: what a config needs to attribute
/// its processes. Bare processes and Slurm jobs run as one of `users`;
/// Kubernetes pods run as `root` (uid 0) or, for recsys, as uid 1000, which
/// the hosts know as `ubuntu`: pods are attributed by namespace, not user.
#[derive(Debug)]
pub struct SimTeam {
    /// Team name (`vision`, `nlp`, …).
    pub name: &'static str,
    /// Its members.
    pub users: &'static [SimUser],
    /// The Kubernetes namespaces its pods run in (may be empty).
    pub k8s_namespaces: &'static [&'static str],
    /// Its Slurm account, when it uses Slurm.
    pub slurm_account: Option<&'static str>,
    launch: Launch,
}

/// How a team launches one kind of work.
#[derive(Debug, Clone, Copy)]
enum Via {
    /// A pod in this namespace.
    K8s(&'static str),
    /// A Slurm job (batch or `srun --pty`).
    Slurm,
    /// A process started by hand on the host.
    Bare,
    /// Half Slurm, half bare.
    SlurmOrBare,
    /// Half a pod in this namespace, half bare.
    K8sOrBare(&'static str),
}

#[derive(Debug)]
struct Launch {
    train: Via,
    serve: Via,
    notebook: Via,
    debug: Via,
    /// The uid its pods run as.
    pod_user: SimUser,
    /// Its share of the work started, relative to the others.
    weight: f32,
}

const ROOT: SimUser = SimUser { name: "root", uid: 0 };
const UBUNTU: SimUser = SimUser { name: "ubuntu", uid: 1000 };

const fn user(name: &'static str, uid: i64) -> SimUser {
    SimUser { name, uid }
}

static TEAMS: [SimTeam; 6] = [
    SimTeam {
        name: "vision",
        users: &[user("alice", 1001), user("bob", 1002), user("carol", 1003)],
        k8s_namespaces: &["vision-train", "vision-serve", "vision-dev"],
        slurm_account: None,
        launch: Launch {
            train: Via::K8s("vision-train"),
            serve: Via::K8s("vision-serve"),
            notebook: Via::K8s("vision-dev"),
            debug: Via::K8sOrBare("vision-dev"),
            pod_user: ROOT,
            weight: 1.0,
        },
    },
    SimTeam {
        name: "nlp",
        users: &[user("dmitri", 1011), user("emma", 1012), user("farid", 1013), user("grace", 1014)],
        k8s_namespaces: &["nlp-serve"],
        slurm_account: Some("nlp"),
        launch: Launch {
            train: Via::Slurm,
            serve: Via::K8s("nlp-serve"),
            notebook: Via::Bare,
            debug: Via::SlurmOrBare,
            pod_user: ROOT,
            weight: 1.3,
        },
    },
    SimTeam {
        name: "speech",
        users: &[user("hana", 1021), user("ivan", 1022)],
        k8s_namespaces: &["speech-serve"],
        slurm_account: Some("speech"),
        launch: Launch {
            train: Via::Slurm,
            serve: Via::K8s("speech-serve"),
            notebook: Via::Bare,
            debug: Via::SlurmOrBare,
            pod_user: ROOT,
            weight: 0.6,
        },
    },
    SimTeam {
        name: "recsys",
        users: &[user("jamal", 1031), user("kira", 1032), user("liam", 1033)],
        k8s_namespaces: &["recsys-train", "recsys-serve", "recsys-dev"],
        slurm_account: None,
        launch: Launch {
            train: Via::K8s("recsys-train"),
            serve: Via::K8s("recsys-serve"),
            notebook: Via::K8s("recsys-dev"),
            debug: Via::K8sOrBare("recsys-dev"),
            pod_user: UBUNTU,
            weight: 0.8,
        },
    },
    SimTeam {
        name: "research",
        users: &[user("maya", 1041), user("nils", 1042), user("oscar", 1043)],
        k8s_namespaces: &[],
        slurm_account: Some("research"),
        launch: Launch {
            train: Via::Slurm,
            serve: Via::Bare,
            notebook: Via::Bare,
            debug: Via::Bare,
            pod_user: ROOT,
            weight: 1.0,
        },
    },
    SimTeam {
        name: "platform",
        users: &[user("priya", 1051), user("quentin", 1052)],
        k8s_namespaces: &["platform-batch", "platform-serve"],
        slurm_account: None,
        launch: Launch {
            train: Via::K8s("platform-batch"),
            serve: Via::K8s("platform-serve"),
            notebook: Via::Bare,
            debug: Via::Bare,
            pod_user: ROOT,
            weight: 0.35,
        },
    },
];

/// The teams of the simulated organisation, the same for every seed, so a
/// test or a demo config can attribute the simulated processes: every
/// process matches exactly one team by user, Kubernetes namespace or Slurm
/// account.
pub fn teams() -> &'static [SimTeam] {
    &TEAMS
}

/// Picks the team that starts the next piece of work; `home` (an index into
/// [`teams`]) is the team that owns the host and starts most work there.
pub(super) fn pick_team(rng: &mut ChaCha8Rng, home: usize) -> usize {
    let weight = |i: usize, t: &SimTeam| t.launch.weight * if i == home { 4.0 } else { 1.0 };
    let total: f32 = TEAMS.iter().enumerate().map(|(i, t)| weight(i, t)).sum();
    let mut x = rng.random::<f32>() * total;
    for (i, t) in TEAMS.iter().enumerate() {
        x -= weight(i, t);
        if x < 0.0 {
            return i;
        }
    }
    TEAMS.len() - 1
}

fn pick<T: Copy>(rng: &mut ChaCha8Rng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

fn hex(rng: &mut ChaCha8Rng, words: usize) -> String {
    (0..words).map(|_| format!("{:016x}", rng.random::<u64>())).collect()
}

/// A random version-4 UUID, as Kubernetes gives pods.
fn pod_uid(rng: &mut ChaCha8Rng) -> String {
    let a: u64 = rng.random();
    let b: u64 = rng.random();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xFFFF,
        a & 0xFFF,
        0x8000 | ((b >> 48) & 0x3FFF),
        b & 0xFFFF_FFFF_FFFF
    )
}

/// The identity of a new process of `kind` started by team `team` (an
/// index into [`teams`]), without its start time. `next_job` is the host's
/// Slurm job counter; a Slurm launch takes the next id.
pub(super) fn identity(team: usize, kind: Kind, rng: &mut ChaCha8Rng, next_job: &mut u64) -> ProcIdentity {
    let t = &TEAMS[team];
    let (via, comms): (Via, &[&str]) = match kind {
        Kind::Training => (t.launch.train, &["python", "python3", "pt_main_thread", "torchrun"]),
        Kind::Inference => (t.launch.serve, &["tritonserver", "python3", "python"]),
        Kind::Notebook => (t.launch.notebook, &["python3", "python3", "jupyter-lab"]),
        Kind::Debug | Kind::Zombie => (t.launch.debug, &["python", "python3", "ipython"]),
    };
    let via = match via {
        Via::SlurmOrBare if rng.random::<bool>() => Via::Slurm,
        Via::K8sOrBare(ns) if rng.random::<bool>() => Via::K8s(ns),
        Via::SlurmOrBare | Via::K8sOrBare(_) => Via::Bare,
        v => v,
    };
    let comm = Some(pick(rng, comms).into());
    let member = pick(rng, t.users);
    match via {
        Via::K8s(ns) => {
            // In the order they were always drawn.
            let container_id = hex(rng, 4);
            let uid = pod_uid(rng);
            // Named from what is drawn already, so the draws (and every
            // other row) stay as they were: a Deployment-style name, and a
            // container named for the program.
            let pod_name = format!("{}-{}", ns, uid.get(..5).unwrap_or(&uid));
            let container =
                comm.as_deref().map(|c: &str| c.trim_end_matches(|ch: char| ch.is_ascii_digit()).into());
            ProcIdentity {
                proc_start: None,
                comm,
                uid: Some(t.launch.pod_user.uid),
                user: Some(t.launch.pod_user.name.into()),
                container_id: Some(container_id.into()),
                k8s_pod_uid: Some(uid.into()),
                k8s_namespace: Some(ns.into()),
                k8s_pod_name: Some(pod_name.into()),
                k8s_container: container,
                // The labels a recorder run with `--k8s-labels team,tier`
                // keeps: the team, and the namespace's last word.
                k8s_labels: Some(
                    format!("team={},tier={}", t.name, ns.rsplit('-').next().unwrap_or(ns)).into(),
                ),
                ..ProcIdentity::default()
            }
        }
        Via::Slurm => {
            *next_job += rng.random_range(1..40);
            ProcIdentity {
                proc_start: None,
                comm,
                uid: Some(member.uid),
                user: Some(member.name.into()),
                slurm_job_id: Some(next_job.to_string().into()),
                slurm_account: t.slurm_account.map(Into::into),
                ..ProcIdentity::default()
            }
        }
        Via::Bare | Via::SlurmOrBare | Via::K8sOrBare(_) => ProcIdentity {
            proc_start: None,
            comm,
            uid: Some(member.uid),
            user: Some(member.name.into()),
            ..ProcIdentity::default()
        },
    }
}

/// The team a process identity belongs to by the documented rules (user,
/// namespace, Slurm account), for tests.
#[cfg(test)]
pub(super) fn team_of(id: &ProcIdentity) -> Option<&'static str> {
    TEAMS
        .iter()
        .find(|t| {
            t.users.iter().any(|u| id.user.as_deref() == Some(u.name) && id.uid == Some(u.uid))
                || id.k8s_namespace.as_deref().is_some_and(|ns| t.k8s_namespaces.contains(&ns))
                || (id.slurm_account.is_some() && id.slurm_account.as_deref() == t.slurm_account)
        })
        .map(|t| t.name)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn teams_are_disjoint() {
        let mut uids: Vec<i64> = teams().iter().flat_map(|t| t.users.iter().map(|u| u.uid)).collect();
        let n = uids.len();
        uids.sort_unstable();
        uids.dedup();
        assert_eq!(uids.len(), n, "uids are unique");
        assert!(!uids.contains(&ROOT.uid) && !uids.contains(&UBUNTU.uid));
        assert_eq!(teams().len(), 6);
        assert!(teams().iter().all(|t| (2..=4).contains(&t.users.len())));
    }

    #[test]
    fn every_identity_has_one_team() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut job = 1_000;
        for (i, team) in TEAMS.iter().enumerate() {
            for kind in [Kind::Training, Kind::Inference, Kind::Notebook, Kind::Debug] {
                for _ in 0..20 {
                    let id = identity(i, kind, &mut rng, &mut job);
                    assert_eq!(team_of(&id), Some(team.name), "{id:?}");
                    if let Some(c) = &id.container_id {
                        assert_eq!(c.len(), 64);
                        assert_eq!(id.k8s_pod_uid.as_deref().map(str::len), Some(36));
                    }
                    assert!(id.comm.as_ref().is_some_and(|c| c.len() <= 15), "comm fits TASK_COMM_LEN");
                }
            }
        }
        assert!(job > 1_000, "some work went through Slurm");
    }
}
