//! The Kubernetes lookups' decisions without a kubelet: allocations from a
//! `List` answer, which source names a process, forgetting, and what the
//! tick fills in.

use super::api::{ContainerDevices, ContainerResources, ListPodResourcesResponse, PodResources};
use super::*;

const UID_A: &str = "7f3c2a10-9b1e-4d2f-8a6b-1c2d3e4f5a6b";
const UID_B: &str = "0d5e8a1c-7b3f-4e2a-8c6d-9f1a2b3c4d5e";
const ID_A: &str = "aaaa0000000000000000000000000000000000000000000000000000000000aa";
const GPU_0: &str = "GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763";
const GPU_1: &str = "GPU-11111111-2222-3333-4444-555555555555";
const MIG: &str = "MIG-1c2d3e4f-5a6b-5c7d-8e9f-0a1b2c3d4e5f";

fn pod(namespace: &str, name: &str) -> PodName {
    PodName { namespace: namespace.into(), name: name.into() }
}

fn list(pods: &[(&str, &str, &str, &[&str])]) -> ListPodResourcesResponse {
    ListPodResourcesResponse {
        pod_resources: pods
            .iter()
            .map(|(namespace, name, container, ids)| PodResources {
                name: (*name).into(),
                namespace: (*namespace).into(),
                containers: vec![ContainerResources {
                    name: (*container).into(),
                    devices: vec![ContainerDevices {
                        resource_name: "nvidia.com/gpu".into(),
                        device_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
                    }],
                }],
            })
            .collect(),
    }
}

#[test]
fn allocations_are_one_per_device_id_with_uuid_and_replica() {
    let shared = format!("{GPU_1}::3");
    let answer =
        list(&[("nlp", "trainer-0", "main", &[GPU_0, &shared]), ("cv", "infer", "srv", &[MIG, "7"])]);
    let got = allocations(&answer);
    let brief: Vec<_> = got
        .iter()
        .map(|a| (a.device_id.as_str(), a.gpu_uuid.as_deref(), a.replica, &*a.namespace, &*a.pod))
        .collect();
    assert_eq!(
        brief,
        [
            (GPU_0, Some(GPU_0), None, "nlp", "trainer-0"),
            (shared.as_str(), Some(GPU_1), Some(3), "nlp", "trainer-0"),
            (MIG, Some(MIG), None, "cv", "infer"),
            ("7", None, None, "cv", "infer"),
        ]
    );
    assert!(got.iter().all(|a| a.resource_name == "nvidia.com/gpu"));
    assert_eq!(&*got[2].container, "srv");
}

#[test]
fn the_log_folders_name_a_pod_by_its_uid_and_a_container_by_its_id() {
    let snapshot = Snapshot {
        pods: HashMap::from([(UID_A.to_owned(), pod("nlp", "trainer-0"))]),
        containers: HashMap::from([(
            ID_A.to_owned(),
            ContainerLog { pod_uid: UID_A.into(), name: "main".into() },
        )]),
        logs_readable: true,
        labels: HashMap::new(),
        // Pod-resources says another pod holds the GPU: the uid's folder wins.
        allocations: allocations(&list(&[("cv", "other", "c", &[GPU_0])])),
    };
    let resolved = snapshot.resolve(UID_A, Some(ID_A), GPU_0, false).expect("named by the log folder");
    assert_eq!(resolved, Resolved { pod: pod("nlp", "trainer-0"), container: Some("main".into()) });
    // A container id of another pod names no container of this one.
    let mut other = snapshot.clone();
    other.containers.insert(ID_A.into(), ContainerLog { pod_uid: UID_B.into(), name: "x".into() });
    assert_eq!(other.resolve(UID_A, Some(ID_A), GPU_0, false).expect("pod").container, None);
    // A uid no folder names is unknown, whatever holds the GPU.
    assert_eq!(snapshot.resolve(UID_B, None, GPU_0, false), None);
}

#[test]
fn without_log_folders_only_the_one_pod_holding_the_gpu_is_taken() {
    let shared = |r: u32| format!("{GPU_1}::{r}");
    let (r0, r1) = (shared(0), shared(1));
    let snapshot = Snapshot {
        logs_readable: false,
        allocations: allocations(&list(&[
            ("nlp", "trainer-0", "main", &[GPU_0]),
            ("nlp", "a", "main", &[&r0]),
            ("cv", "b", "main", &[&r1]),
            ("cv", "mig", "srv", &[MIG]),
        ])),
        ..Snapshot::default()
    };
    assert_eq!(
        snapshot.resolve(UID_A, None, GPU_0, false),
        Some(Resolved { pod: pod("nlp", "trainer-0"), container: Some("main".into()) })
    );
    assert_eq!(
        snapshot.resolve(UID_A, None, MIG, false),
        Some(Resolved { pod: pod("cv", "mig"), container: Some("srv".into()) })
    );
    // Two pods time-sliced on one GPU: never guessed.
    assert_eq!(snapshot.resolve(UID_A, None, GPU_1, false), None);
    // A GPU nobody holds.
    assert_eq!(snapshot.resolve(UID_A, None, "GPU-none", false), None);
}

#[test]
fn one_pod_with_two_containers_on_a_gpu_names_no_container() {
    let mut answer = list(&[("nlp", "trainer-0", "main", &[&format!("{GPU_0}::0")])]);
    let mut second = answer.pod_resources[0].containers[0].clone();
    second.name = "side".into();
    second.devices[0].device_ids = vec![format!("{GPU_0}::1")];
    answer.pod_resources[0].containers.push(second);
    let snapshot = Snapshot { allocations: allocations(&answer), ..Snapshot::default() };
    assert_eq!(
        snapshot.resolve(UID_A, None, GPU_0, false),
        Some(Resolved { pod: pod("nlp", "trainer-0"), container: None })
    );
}

/// A tick side whose latest answer is `snapshot`, taken.
fn kube_with(snapshot: Snapshot) -> Kubernetes {
    let (nudge, _nudges) = mpsc::sync_channel(1);
    let shared = Arc::new(Shared::default());
    *shared.latest.lock().expect("not poisoned") = Arc::new(snapshot);
    let mut kube = Kubernetes {
        shared,
        nudge,
        view: Arc::default(),
        nudged: HashMap::new(),
        pods_on_gpus: Vec::new(),
        labels_on: true,
        wanted_at: HashMap::new(),
    };
    kube.begin_tick();
    kube
}

fn row(gpu: &str, identity: ProcIdentity) -> ProcSample {
    ProcSample { gpu_uuid: gpu.into(), identity, ..ProcSample::default() }
}

#[test]
fn fill_sets_trusted_fields_and_clears_what_no_source_names() {
    let mut kube = kube_with(Snapshot {
        pods: HashMap::from([(UID_A.to_owned(), pod("nlp", "trainer-0"))]),
        logs_readable: true,
        ..Snapshot::default()
    });
    let known = ProcIdentity {
        k8s_pod_uid: Some(UID_A.into()),
        claimed_k8s_namespace: Some("forged".into()),
        ..ProcIdentity::default()
    };
    let unknown = ProcIdentity { k8s_pod_uid: Some(UID_B.into()), ..ProcIdentity::default() };
    let mut rows = [row(GPU_0, known), row(GPU_0, unknown), row(GPU_0, ProcIdentity::default())];
    kube.fill_rows(&mut rows);
    let known = &rows[0].identity;
    assert_eq!(known.k8s_namespace.as_deref(), Some("nlp"));
    assert_eq!(known.k8s_pod_name.as_deref(), Some("trainer-0"));
    assert_eq!(known.k8s_container, None);
    assert_eq!(known.claimed_k8s_namespace.as_deref(), Some("forged"), "the claim is kept apart");
    let unknown = &rows[1].identity;
    assert_eq!((&unknown.k8s_namespace, &unknown.k8s_pod_name), (&None, &None));
    assert_eq!(rows[2].identity, ProcIdentity::default());
    assert_eq!(kube.counters().health().unresolved, 1);
    // The unknown uid nudged the refresh thread once.
    assert!(kube.nudged.contains_key(UID_B));
}

#[test]
fn labels_go_to_the_pod_of_the_api_servers_uid_and_to_its_allocations() {
    // trainer-0's labels at the API server are for uid A; trainer-1 was
    // deleted and made again: the API server's uid is not its processes'.
    let mut kube = kube_with(Snapshot {
        pods: HashMap::from([
            (UID_A.to_owned(), pod("nlp", "trainer-0")),
            (UID_B.to_owned(), pod("nlp", "trainer-1")),
        ]),
        logs_readable: true,
        allocations: allocations(&list(&[("nlp", "trainer-0", "main", &[GPU_0])])),
        labels: HashMap::from([
            (pod("nlp", "trainer-0"), (UID_A.to_owned(), Some("team=nlp".into()))),
            (pod("nlp", "trainer-1"), ("a-later-uid".to_owned(), Some("team=cv".into()))),
        ]),
        ..Snapshot::default()
    });
    let in_pod = |uid: &str| ProcIdentity {
        k8s_pod_uid: Some(uid.into()),
        k8s_labels: Some("stale=1".into()),
        ..ProcIdentity::default()
    };
    let mut rows = [row(GPU_0, in_pod(UID_A)), row(GPU_1, in_pod(UID_B))];
    kube.fill_rows(&mut rows);
    assert_eq!(rows[0].identity.k8s_labels.as_deref(), Some("team=nlp"));
    assert_eq!(rows[1].identity.k8s_labels, None, "another pod's labels are not this one's");
    assert_eq!(rows[1].identity.k8s_pod_name.as_deref(), Some("trainer-1"));
    let mut out = Vec::new();
    let gpus = [GpuSample { gpu_uuid: GPU_0.into(), ..GpuSample::default() }];
    kube.push_allocations(1_000, 1_000, &gpus, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].holder.k8s_labels.as_deref(), Some("team=nlp"));
}

#[test]
fn without_log_folders_two_pods_on_a_gpu_one_pod_holds_are_not_named() {
    // A pod given every GPU without an allocation (NVIDIA_VISIBLE_DEVICES=all)
    // beside the pod holding GPU 0: either could be the holder.
    let mut kube = kube_with(Snapshot {
        logs_readable: false,
        allocations: allocations(&list(&[("nlp", "trainer-0", "main", &[GPU_0])])),
        ..Snapshot::default()
    });
    let in_pod = |uid: &str| ProcIdentity { k8s_pod_uid: Some(uid.into()), ..ProcIdentity::default() };
    let mut rows = [row(GPU_0, in_pod(UID_A)), row(GPU_0, in_pod(UID_B)), row(GPU_0, in_pod(UID_A))];
    kube.fill_rows(&mut rows);
    assert!(rows.iter().all(|r| r.identity.k8s_namespace.is_none()), "{rows:?}");
    // Alone on it, the same process is named.
    let mut alone = [row(GPU_0, in_pod(UID_A)), row(GPU_0, in_pod(UID_A))];
    kube.fill_rows(&mut alone);
    assert!(alone.iter().all(|r| r.identity.k8s_pod_name.as_deref() == Some("trainer-0")), "{alone:?}");
}

#[test]
fn forgotten_only_after_a_while() {
    let mut seen = Seen::new();
    let start = Instant::now();
    seen.update(HashMap::from([("a".to_owned(), 1)]), start);
    seen.update(HashMap::new(), start + FORGET_AFTER - Duration::from_secs(1));
    assert_eq!(seen.current(), HashMap::from([("a".to_owned(), 1)]));
    seen.update(HashMap::new(), start + FORGET_AFTER);
    assert!(seen.current().is_empty());
}

#[test]
fn the_containers_folder_is_beside_the_pod_folder() {
    let sources = KubeSources { pod_logs: "/host/var/log/pods".into(), ..KubeSources::default() };
    assert_eq!(sources.container_logs(), PathBuf::from("/host/var/log/containers"));
    let given = KubeSources { container_logs: Some("/c".into()), ..sources };
    assert_eq!(given.container_logs(), PathBuf::from("/c"));
}

#[test]
fn absent_sources_are_no_failure_and_a_dead_socket_is_counted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let shared = Arc::new(Shared::default());
    let sources = KubeSources {
        kubelet_socket: tmp.path().join("none.sock"),
        pod_logs: tmp.path().join("pods"),
        container_logs: None,
        labels: None,
    };
    let mut refresher = Refresher::new(sources, Arc::clone(&shared));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    refresher.refresh(&runtime);
    let health = || KubeCounters(Arc::clone(&shared)).health();
    assert_eq!((health().refreshes, health().log_errors, health().kubelet_errors), (1, 0, 0));
    assert!(!shared.latest.lock().expect("not poisoned").logs_readable);

    // A socket file nobody listens on any more: refused, counted.
    let dead = tmp.path().join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).expect("bind"));
    refresher.client = PodResourcesClient::new(&dead, CALL_DEADLINE);
    refresher.sources.kubelet_socket = dead;
    refresher.refresh(&runtime);
    refresher.refresh(&runtime);
    assert_eq!((health().refreshes, health().kubelet_errors), (3, 2));
}

#[test]
fn the_tick_records_each_container_holding_a_sampled_gpu_once() {
    // GPU_0 time-sliced: two replicas to trainer-0's main, one to cv's srv;
    // the MIG instance to cv's infer; GPU_1 to a pod, but GPU_1 has no row
    // this tick (it failed); a device id naming no GPU is left out.
    let (r1, r2, r3) = (format!("{GPU_0}::1"), format!("{GPU_0}::2"), format!("{GPU_0}::3"));
    let snapshot = Snapshot {
        allocations: allocations(&list(&[
            ("nlp", "trainer-0", "main", &[&r1, &r2]),
            ("cv", "srv", "srv", &[&r3]),
            ("cv", "infer", "c", &[MIG, "7"]),
            ("ops", "lost", "c", &[GPU_1]),
        ])),
        ..Snapshot::default()
    };
    let kube = kube_with(snapshot);
    let gpu = |uuid: &str, index: i32| GpuSample {
        gpu_uuid: uuid.into(),
        gpu_index: index,
        ..GpuSample::default()
    };
    let gpus = [gpu(GPU_0, 3), gpu(MIG, 5)];
    let mut out = Vec::new();
    kube.push_allocations(1_000, 500, &gpus, &mut out);
    let got: Vec<_> = out
        .iter()
        .map(|a| {
            let h = &a.holder;
            (
                a.ts,
                a.interval_ms,
                &*a.gpu_uuid,
                a.gpu_index,
                h.k8s_namespace.as_deref(),
                h.k8s_pod_name.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1_000, 500, GPU_0, 3, Some("nlp"), Some("trainer-0")),
            (1_000, 500, GPU_0, 3, Some("cv"), Some("srv")),
            (1_000, 500, MIG, 5, Some("cv"), Some("infer")),
        ]
    );
    assert!(out.iter().all(|a| &*a.holder.source == apron_schemas::alloc_minutes::SOURCE_KUBERNETES));
    assert_eq!(out[0].holder.k8s_container.as_deref(), Some("main"));
}
