//! The kubelet's log folders, read as a map from a pod's uid to its
//! namespace and name, and from a container's id to its pod and name.
//!
//! The kubelet makes them as root, on the node, before a pod's containers
//! start; a pod cannot write them (unless it mounts them from the host, which
//! takes a privilege a pod is not given). Their names, from the kubelet's
//! source (`pkg/kubelet/kuberuntime/helpers.go` and `legacy.go`):
//!
//! - `BuildPodLogsDirectory`: `/var/log/pods/<namespace>_<pod name>_<pod uid>`,
//!   joined by `_`, which no namespace, pod name or uid holds;
//!   `BuildContainerLogsDirectory` adds `/<container name>`, with
//!   `<restart count>.log` files inside. (Before 1.14 the folder was the uid
//!   alone: it names no namespace, so it is skipped.)
//! - `legacyLogSymlink`: `/var/log/containers/<pod name>_<namespace>_<container
//!   name>-<container id>.log`, a symlink to the container's log file in the
//!   folder above; a name longer than 251 bytes is cut there, so a link name
//!   that long may hold part of an id and is skipped.
//!
//! Reading the folders is [`read_pod_logs`] and [`read_container_logs`];
//! the names are parsed by pure functions. Which source wins over which is
//! [`super`]'s business.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use apron_schemas::Text;

/// The longest file name a kubelet writes in `/var/log/containers`
/// (`ext4MaxFileNameLen`, 255 bytes); one this long may be cut short.
const MAX_LINK_NAME_BYTES: usize = 255;

/// A pod's namespace and name (shared text: handing them to a row costs
/// no allocation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodName {
    /// The pod's namespace.
    pub namespace: Text,
    /// The pod's name.
    pub name: Text,
}

/// A container, as its log symlink names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLog {
    /// The uid of its pod.
    pub pod_uid: String,
    /// Its name in the pod spec.
    pub name: Text,
}

/// Parses a pod log folder's name, `<namespace>_<pod>_<uid>`; `None` for
/// any other name.
pub fn parse_pod_dir(name: &str) -> Option<(String, PodName)> {
    let mut parts = name.split('_');
    let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [namespace, pod, uid].iter().any(|p| p.is_empty()) {
        return None;
    }
    Some((uid.to_owned(), PodName { namespace: namespace.into(), name: pod.into() }))
}

/// Parses a `/var/log/containers` symlink: its name
/// (`<pod>_<namespace>_<container>-<id>.log`) and its target
/// (`…/<namespace>_<pod>_<uid>/<container>/<n>.log`). Both must agree on the
/// namespace, pod and container; the id is the name's, the uid the target's.
/// Returns the container id and what it is.
pub fn parse_container_link(name: &str, target: &Path) -> Option<(String, ContainerLog)> {
    if name.len() >= MAX_LINK_NAME_BYTES {
        return None;
    }
    let stem = name.strip_suffix(".log")?;
    let (prefix, id) = stem.rsplit_once('-')?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let container = target.parent()?;
    let container_name = container.file_name()?.to_str()?;
    let (uid, pod) = parse_pod_dir(container.parent()?.file_name()?.to_str()?)?;
    (prefix == format!("{}_{}_{}", pod.name, pod.namespace, container_name))
        .then(|| (id.to_owned(), ContainerLog { pod_uid: uid, name: container_name.into() }))
}

/// Pods by uid, from the folder names under `dir` (`/var/log/pods`). Names
/// that are not a pod folder's are skipped.
pub fn read_pod_logs(dir: &Path) -> io::Result<HashMap<String, PodName>> {
    let mut pods = HashMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some((uid, pod)) = entry.file_name().to_str().and_then(parse_pod_dir) {
            pods.insert(uid, pod);
        }
    }
    Ok(pods)
}

/// Containers by id, from the symlinks under `dir` (`/var/log/containers`).
/// Links are read, never followed; anything else is skipped.
pub fn read_container_logs(dir: &Path) -> io::Result<HashMap<String, ContainerLog>> {
    let mut containers = HashMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        // A link that vanished meanwhile is a container gone: skipped.
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        if let Some((id, container)) = parse_container_link(&name, &target) {
            containers.insert(id, container);
        }
    }
    Ok(containers)
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "7f3c2a10-9b1e-4d2f-8a6b-1c2d3e4f5a6b";
    const ID: &str = "4bd0cdd4d2e7f6c3a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718";

    fn pod(namespace: &str, name: &str) -> PodName {
        PodName { namespace: namespace.into(), name: name.into() }
    }

    #[test]
    fn pod_folders() {
        assert_eq!(
            parse_pod_dir(&format!("nlp_trainer-0_{UID}")),
            Some((UID.into(), pod("nlp", "trainer-0")))
        );
        assert_eq!(parse_pod_dir(UID), None, "the folder of kubelets before 1.14 names no namespace");
        assert_eq!(parse_pod_dir(&format!("nlp_a_b_{UID}")), None);
        assert_eq!(parse_pod_dir(&format!("_trainer_{UID}")), None);
        assert_eq!(parse_pod_dir("nlp_trainer_"), None);
    }

    #[test]
    fn container_links_join_the_name_and_the_target() {
        let target = format!("/var/log/pods/nlp_trainer-0_{UID}/main-gpu/0.log");
        let name = format!("trainer-0_nlp_main-gpu-{ID}.log");
        assert_eq!(
            parse_container_link(&name, Path::new(&target)),
            Some((ID.into(), ContainerLog { pod_uid: UID.into(), name: "main-gpu".into() }))
        );
        // The name and the target must name the same pod and container.
        let other = format!("trainer-1_nlp_main-gpu-{ID}.log");
        assert_eq!(parse_container_link(&other, Path::new(&target)), None);
        let other = format!("trainer-0_nlp_sidecar-{ID}.log");
        assert_eq!(parse_container_link(&other, Path::new(&target)), None);
        // Not a log, not an id, a target outside a pod folder.
        assert_eq!(parse_container_link(&format!("trainer-0_nlp_main-gpu-{ID}"), Path::new(&target)), None);
        assert_eq!(parse_container_link("trainer-0_nlp_main-gpu-xyz.log", Path::new(&target)), None);
        assert_eq!(parse_container_link(&name, Path::new("/var/log/main-gpu/0.log")), None);
        // A name at the kubelet's length limit may hold a cut id.
        let long_pod = "p".repeat(MAX_LINK_NAME_BYTES);
        let long = format!("{long_pod}_nlp_main-gpu-{ID}.log");
        let long_target = format!("/var/log/pods/nlp_{long_pod}_{UID}/main-gpu/0.log");
        assert_eq!(parse_container_link(&long, Path::new(&long_target)), None);
    }

    #[test]
    fn folders_are_read_and_odd_entries_skipped() {
        let root = tempfile::tempdir().expect("temp dir");
        let pods = root.path().join("pods");
        let containers = root.path().join("containers");
        std::fs::create_dir_all(pods.join(format!("nlp_trainer-0_{UID}/main"))).expect("pod folder");
        std::fs::create_dir_all(pods.join("not-a-pod")).expect("odd folder");
        std::fs::create_dir_all(&containers).expect("containers folder");
        let log = pods.join(format!("nlp_trainer-0_{UID}/main/0.log"));
        std::fs::write(&log, b"").expect("log file");
        std::os::unix::fs::symlink(&log, containers.join(format!("trainer-0_nlp_main-{ID}.log")))
            .expect("link");
        std::fs::write(containers.join("plain.log"), b"").expect("plain file");
        assert_eq!(
            read_pod_logs(&pods).expect("reads"),
            HashMap::from([(UID.to_owned(), pod("nlp", "trainer-0"))])
        );
        assert_eq!(
            read_container_logs(&containers).expect("reads"),
            HashMap::from([(ID.to_owned(), ContainerLog { pod_uid: UID.into(), name: "main".into() })])
        );
        assert!(read_pod_logs(&root.path().join("absent")).is_err());
    }
}
