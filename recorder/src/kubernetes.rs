//! Kubernetes identity from the node itself: which namespace, pod and
//! container a GPU process belongs to, and which pod each GPU is allocated
//! to, from sources on the node that pods cannot write.
//!
//! A process's pod uid and container id come from its cgroup
//! ([`crate::identity`]). Neither the pod-resources API nor anything else
//! on the node that a pod cannot write maps a uid to a name on its own, so
//! the answer is a join, refreshed on a thread of its own ([`Kubernetes`]):
//!
//! - the kubelet's log folders ([`logs`]): `/var/log/pods/<ns>_<pod>_<uid>`
//!   maps the cgroup's pod uid to its namespace and pod name, and the
//!   `/var/log/containers/<pod>_<ns>_<container>-<id>.log` links map the
//!   cgroup's container id to its container name;
//! - the kubelet's pod-resources API ([`api`], `List`): each container's
//!   allocated devices ([`devices`]). It names pods by namespace and name
//!   only (no uid, no container id).
//!
//! Which wins: the log folders decide a process's namespace, pod and
//! container, being keyed by the very uid and id its cgroup gives.
//! Pod-resources decides the allocations ([`Kubernetes::allocations`]),
//! which the tick records for every GPU it sampled
//! ([`Kubernetes::push_allocations`], the `alloc_minutes` table): a GPU
//! allocated to a pod with no process on it is held by that pod.
//! Only where the log folders cannot be read at all (not mounted) is a
//! process in pod uid U on GPU G given the pod that pod-resources says holds
//! G, and only when exactly one pod holds it and no process of another pod
//! uid runs on G at that tick (a pod can reach a GPU it was not allocated,
//! `NVIDIA_VISIBLE_DEVICES=all`): under time-slicing or any other sharing
//! nothing is guessed. A uid no source names stays unknown (`None`), never
//! a guess.
//!
//! Optionally (`--k8s-labels KEYS`, off by default), the pods' labels of
//! those keys come from the API server ([`apiserver`], `get` with the
//! in-cluster service account), for the pods that matter only: those
//! pod-resources says hold a device and those a tick met on a GPU (the
//! tick asks for them, [`Kubernetes::fill_rows`]), not every pod of the
//! node; cached per pod and read again every [`LABELS_REFRESH`]; a pod's labels are given to a
//! process only when the API server's uid of the pod is the uid its cgroup
//! gives (a pod deleted and made again under the same name is another pod).
//! A label is what whoever may create pods in that namespace wrote: it can
//! split a namespace's bill among teams, never move it out of the reach of
//! the namespace's own rules (`[[team]]` order decides).
//!
//! The tick never waits on any of it: [`Kubernetes::begin_tick`] takes the
//! latest published answer if its lock is free (else keeps the one it
//! has), and [`Kubernetes::fill_rows`] looks the tick's processes up in it; a pod uid that
//! answer does not know nudges the thread to refresh at once, without
//! waiting. A source that fails keeps its last good answer; a pod missing
//! from the sources is forgotten after [`FORGET_AFTER`]. Failures are
//! warned about once per source and counted ([`KubeHealth`]) for the
//! health line; they never stop the recorder.

pub mod api;
pub mod apiserver;
pub mod devices;
pub mod logs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apron_schemas::{AllocSample, GpuSample, Holder, ProcIdentity, ProcSample, Text};

use self::api::PodResourcesClient;
use self::apiserver::ApiServer;
use self::devices::parse_device_id;
use self::logs::{ContainerLog, PodName};

/// The kubelet's pod-resources socket, where kubelets put it.
pub const DEFAULT_KUBELET_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The kubelet's pod log folders.
pub const DEFAULT_POD_LOGS: &str = "/var/log/pods";
/// How often the sources are read again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(10);
/// The least time between two refreshes, however often the tick nudges.
const MIN_REFRESH_GAP: Duration = Duration::from_millis(500);
/// The deadline of each pod-resources call.
pub const CALL_DEADLINE: Duration = Duration::from_secs(2);
/// A pod or allocation no source has listed for this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(300);
/// How often a pod's labels are read again from the API server.
pub const LABELS_REFRESH: Duration = Duration::from_secs(300);
/// How long after a failed lookup a pod's labels are asked for again.
const LABELS_RETRY: Duration = Duration::from_secs(30);
/// The most label lookups in one refresh (the rest wait for the next), so
/// that a node starting with many pods does not hold up its allocations.
const LABELS_PER_REFRESH: usize = 32;

/// A pod's uid at the API server and its labels kept (`None`: none of the
/// keys asked for).
pub type PodLabels = (String, Option<Text>);

/// Pod labels from the API server (`--k8s-labels`).
#[derive(Debug, Clone)]
pub struct LabelSource {
    /// The client, with the in-cluster service account.
    pub api: ApiServer,
    /// The label keys kept (the rest are never recorded).
    pub keys: Vec<String>,
}

/// Where the Kubernetes sources are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeSources {
    /// The kubelet's pod-resources socket; used when it exists.
    pub kubelet_socket: PathBuf,
    /// The kubelet's pod log folders (`/var/log/pods`).
    pub pod_logs: PathBuf,
    /// The container log links (`/var/log/containers`); `None`: the
    /// `containers` folder beside `pod_logs`.
    pub container_logs: Option<PathBuf>,
    /// Pod labels from the API server; `None` (the default): not read.
    pub labels: Option<LabelSource>,
}

impl PartialEq for LabelSource {
    fn eq(&self, other: &Self) -> bool {
        self.keys == other.keys
    }
}

impl Eq for LabelSource {}

impl Default for KubeSources {
    fn default() -> Self {
        KubeSources {
            kubelet_socket: DEFAULT_KUBELET_SOCKET.into(),
            pod_logs: DEFAULT_POD_LOGS.into(),
            container_logs: None,
            labels: None,
        }
    }
}

impl KubeSources {
    /// The container log links' folder.
    pub fn container_logs(&self) -> PathBuf {
        self.container_logs.clone().unwrap_or_else(|| {
            self.pod_logs.parent().map_or_else(|| PathBuf::from("containers"), |p| p.join("containers"))
        })
    }
}

/// One device allocated to one container, as pod-resources lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The device plugin's id of the device.
    pub device_id: String,
    /// The GPU's or MIG instance's UUID the id names, `None` when it names none.
    pub gpu_uuid: Option<String>,
    /// The replica of a shared GPU, `None` when not shared.
    pub replica: Option<u32>,
    /// The pod's namespace.
    pub namespace: Text,
    /// The pod's name.
    pub pod: Text,
    /// The container's name.
    pub container: Text,
    /// The extended resource (`nvidia.com/gpu`).
    pub resource_name: String,
}

/// Who a process is in Kubernetes, from trusted sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The pod's namespace and name.
    pub pod: PodName,
    /// The container's name, `None` when no source names it.
    pub container: Option<Text>,
}

/// What the sources said at one refresh: the tick's read-only view.
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// Pods by uid, from the log folders.
    pub pods: HashMap<String, PodName>,
    /// Containers by id, from the log links.
    pub containers: HashMap<String, ContainerLog>,
    /// Whether the pod log folder could be read (is mounted).
    pub logs_readable: bool,
    /// Every device allocated to a container, from pod-resources.
    pub allocations: Vec<Allocation>,
    /// Pods' labels from the API server (`--k8s-labels`): the pod's uid
    /// there and its labels kept (`None`: none of the keys).
    pub labels: HashMap<PodName, PodLabels>,
}

impl Snapshot {
    /// The namespace, pod and container of a process in pod `pod_uid` and
    /// container `container_id` (both from its cgroup) on GPU `gpu_uuid`,
    /// by the rules in the module's documentation; `None` when no source
    /// names it. `other_pods_on_gpu`: processes of other pod uids are on
    /// the same GPU at this tick (then at most one of them can be the pod
    /// holding it, and the GPU names none of them).
    pub fn resolve(
        &self,
        pod_uid: &str,
        container_id: Option<&str>,
        gpu_uuid: &str,
        other_pods_on_gpu: bool,
    ) -> Option<Resolved> {
        if let Some(pod) = self.pods.get(pod_uid) {
            let container = container_id
                .and_then(|id| self.containers.get(id))
                .filter(|c| c.pod_uid == pod_uid)
                .map(|c| c.name.clone());
            return Some(Resolved { pod: pod.clone(), container });
        }
        if self.logs_readable || other_pods_on_gpu {
            return None;
        }
        // No log folders: the one pod holding this GPU, if exactly one does.
        let mut holders = self.allocations.iter().filter(|a| a.gpu_uuid.as_deref() == Some(gpu_uuid));
        let first = holders.next()?;
        let mut containers = vec![&*first.container];
        for a in holders {
            if a.namespace != first.namespace || a.pod != first.pod {
                return None;
            }
            if !containers.contains(&&*a.container) {
                containers.push(&a.container);
            }
        }
        Some(Resolved {
            pod: PodName { namespace: first.namespace.clone(), name: first.pod.clone() },
            container: (containers.len() == 1).then(|| first.container.clone()),
        })
    }
}

/// The allocations in a pod-resources `List` answer, one per device id.
pub fn allocations(list: &api::ListPodResourcesResponse) -> Vec<Allocation> {
    let mut out = Vec::new();
    for pod in &list.pod_resources {
        // Each name once, shared by its devices' entries (and by the
        // tick's allocations: no text is made per tick).
        let (namespace, name): (Text, Text) = (pod.namespace.as_str().into(), pod.name.as_str().into());
        for container in &pod.containers {
            let container_name: Text = container.name.as_str().into();
            for devices in &container.devices {
                for id in &devices.device_ids {
                    let parsed = parse_device_id(id);
                    out.push(Allocation {
                        device_id: id.clone(),
                        gpu_uuid: parsed.uuid,
                        replica: parsed.replica,
                        namespace: namespace.clone(),
                        pod: name.clone(),
                        container: container_name.clone(),
                        resource_name: devices.resource_name.clone(),
                    });
                }
            }
        }
    }
    out
}

/// The Kubernetes sources' counters, for the health line and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeHealth {
    /// Refreshes done.
    pub refreshes: u64,
    /// Pods known (by uid, from the log folders) at the last refresh.
    pub pods: u64,
    /// Devices allocated to containers at the last good `List`.
    pub allocated_devices: u64,
    /// Failed reads of the log folders (a folder there but unreadable).
    pub log_errors: u64,
    /// Failed pod-resources calls (a socket there, or there before, that
    /// does not answer).
    pub kubelet_errors: u64,
    /// Pods whose labels the API server gave (`--k8s-labels`).
    pub labelled_pods: u64,
    /// Failed label lookups at the API server (refused, unreachable, late).
    pub label_errors: u64,
    /// Process rows in a pod (uid from the cgroup) that no source named.
    pub unresolved: u64,
}

#[derive(Debug, Default)]
struct Counters {
    refreshes: AtomicU64,
    pods: AtomicU64,
    allocated_devices: AtomicU64,
    log_errors: AtomicU64,
    kubelet_errors: AtomicU64,
    labelled_pods: AtomicU64,
    label_errors: AtomicU64,
    unresolved: AtomicU64,
}

/// What the refresh thread and the tick share.
#[derive(Debug, Default)]
struct Shared {
    /// The latest answer; held only to swap or clone the pointer.
    latest: Mutex<Arc<Snapshot>>,
    counters: Counters,
    /// Pods the tick met on a GPU whose labels the answer lacks.
    wanted: Mutex<Vec<PodName>>,
}

/// A cheap handle on the Kubernetes sources' counters.
#[derive(Debug, Clone)]
pub struct KubeCounters(Arc<Shared>);

impl KubeCounters {
    /// The counters now.
    pub fn health(&self) -> KubeHealth {
        let c = &self.0.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        KubeHealth {
            refreshes: get(&c.refreshes),
            pods: get(&c.pods),
            allocated_devices: get(&c.allocated_devices),
            log_errors: get(&c.log_errors),
            kubelet_errors: get(&c.kubelet_errors),
            labelled_pods: get(&c.labelled_pods),
            label_errors: get(&c.label_errors),
            unresolved: get(&c.unresolved),
        }
    }
}

/// The Kubernetes identity of GPU processes, refreshed on a thread of its
/// own; the tick side of it (see the module's documentation).
#[derive(Debug)]
pub struct Kubernetes {
    shared: Arc<Shared>,
    nudge: SyncSender<()>,
    view: Arc<Snapshot>,
    /// Unknown pod uids and when they last nudged a refresh.
    nudged: HashMap<String, Instant>,
    /// (GPU, pod uid) pairs of a tick's rows, reused from tick to tick.
    pods_on_gpus: Vec<(Text, Text)>,
    /// Whether pod labels are read (`--k8s-labels`).
    labels_on: bool,
    /// Pods whose labels the tick asked for, and when.
    wanted_at: HashMap<PodName, Instant>,
}

impl Kubernetes {
    /// Starts the refresh thread on `sources`. The first answer comes
    /// within a refresh; until then every lookup is unknown.
    pub fn start(sources: KubeSources) -> std::io::Result<Kubernetes> {
        let labels_on = sources.labels.is_some();
        let shared = Arc::new(Shared::default());
        let (nudge, nudges) = mpsc::sync_channel(1);
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("kubernetes".into())
            .spawn(move || Refresher::new(sources, thread_shared).run(&nudges))?;
        Ok(Kubernetes {
            shared,
            nudge,
            view: Arc::default(),
            nudged: HashMap::new(),
            pods_on_gpus: Vec::new(),
            labels_on,
            wanted_at: HashMap::new(),
        })
    }

    /// A handle on the counters, for the health line.
    pub fn counters(&self) -> KubeCounters {
        KubeCounters(Arc::clone(&self.shared))
    }

    /// Takes the latest answer, if the refresh thread is not swapping it
    /// this very moment (then the previous one serves this tick).
    pub fn begin_tick(&mut self) {
        if let Ok(latest) = self.shared.latest.try_lock()
            && !Arc::ptr_eq(&latest, &self.view)
        {
            self.view = Arc::clone(&latest);
        }
    }

    /// Fills the trusted Kubernetes fields (`k8s_namespace`,
    /// `k8s_pod_name`, `k8s_container`) of one tick's process rows, from
    /// the answer taken at [`Kubernetes::begin_tick`]. A process with no
    /// pod uid is left as it is; one whose uid no source names keeps them
    /// `None`, is counted, and nudges a refresh.
    pub fn fill_rows(&mut self, rows: &mut [ProcSample]) {
        // Which pods run on which GPU: the join by GPU (without log
        // folders) names nobody on a GPU where two pods' processes run.
        self.pods_on_gpus.clear();
        if !self.view.logs_readable {
            for r in rows.iter() {
                if let Some(uid) = &r.identity.k8s_pod_uid
                    && !self.pods_on_gpus.iter().any(|(g, u)| *g == r.gpu_uuid && u == uid)
                {
                    self.pods_on_gpus.push((r.gpu_uuid.clone(), uid.clone()));
                }
            }
        }
        for r in rows {
            let others = self.pods_on_gpus.iter().filter(|(g, _)| *g == r.gpu_uuid).count() > 1;
            self.fill(&mut r.identity, &r.gpu_uuid, others);
        }
    }

    fn fill(&mut self, identity: &mut ProcIdentity, gpu_uuid: &str, other_pods_on_gpu: bool) {
        let Some(uid) = identity.k8s_pod_uid.as_deref() else { return };
        match self.view.resolve(uid, identity.container_id.as_deref(), gpu_uuid, other_pods_on_gpu) {
            // Shared text: no allocation per row.
            Some(resolved) => {
                // The labels of this very pod: the API server's uid is the cgroup's.
                identity.k8s_labels = match self.view.labels.get(&resolved.pod) {
                    Some((api_uid, labels)) if api_uid == uid => labels.clone(),
                    Some(_) => None,
                    None => {
                        if self.labels_on {
                            self.want_labels(&resolved.pod);
                        }
                        None
                    }
                };
                identity.k8s_namespace = Some(resolved.pod.namespace);
                identity.k8s_pod_name = Some(resolved.pod.name);
                identity.k8s_container = resolved.container;
            }
            None => {
                identity.k8s_namespace = None;
                identity.k8s_pod_name = None;
                identity.k8s_container = None;
                identity.k8s_labels = None;
                self.shared.counters.unresolved.fetch_add(1, Ordering::Relaxed);
                let now = Instant::now();
                let due = self.nudged.get(uid).is_none_or(|at| now.duration_since(*at) >= REFRESH_EVERY);
                if due {
                    if self.nudged.len() > 4096 {
                        self.nudged.retain(|_, at| now.duration_since(*at) < REFRESH_EVERY);
                    }
                    self.nudged.insert(uid.to_owned(), now);
                    // Full: a refresh is already asked for. Disconnected:
                    // the thread is gone; lookups keep the last answer.
                    match self.nudge.try_send(()) {
                        Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
                    }
                }
            }
        }
    }

    /// Asks the refresh thread for `pod`'s labels, at most once every
    /// [`LABELS_RETRY`], never waiting for its lock (busy: the next tick asks).
    fn want_labels(&mut self, pod: &PodName) {
        let now = Instant::now();
        if self.wanted_at.get(pod).is_some_and(|at| now.duration_since(*at) < LABELS_RETRY) {
            return;
        }
        let Ok(mut wanted) = self.shared.wanted.try_lock() else { return };
        wanted.push(pod.clone());
        drop(wanted);
        if self.wanted_at.len() > 4096 {
            self.wanted_at.retain(|_, at| now.duration_since(*at) < LABELS_RETRY);
        }
        self.wanted_at.insert(pod.clone(), now);
        match self.nudge.try_send(()) {
            Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
        }
    }

    /// Every device allocated to a container at the latest answer taken,
    /// with the GPU or MIG UUID and replica its id names.
    pub fn allocations(&self) -> &[Allocation] {
        &self.view.allocations
    }

    /// Appends the tick's allocations to `out`: for each GPU or MIG
    /// instance with a row in `gpus`, the containers pod-resources says it
    /// is allocated to at the answer taken at [`Kubernetes::begin_tick`],
    /// each container once (however many time-sliced replicas it holds).
    /// A device id that names no GPU with a row this tick is left out.
    pub fn push_allocations(
        &self,
        ts_ms: i64,
        interval_ms: i32,
        gpus: &[GpuSample],
        out: &mut Vec<AllocSample>,
    ) {
        let from = out.len();
        for a in &self.view.allocations {
            let Some(uuid) = a.gpu_uuid.as_deref() else { continue };
            let Some(row) = gpus.iter().find(|g| &*g.gpu_uuid == uuid) else { continue };
            let taken = out[from..].iter().any(|o| {
                *o.gpu_uuid == *uuid
                    && o.holder.k8s_namespace.as_ref() == Some(&a.namespace)
                    && o.holder.k8s_pod_name.as_ref() == Some(&a.pod)
                    && o.holder.k8s_container.as_ref() == Some(&a.container)
            });
            if taken {
                continue;
            }
            let mut holder =
                Holder::kubernetes(Some(a.namespace.clone()), Some(a.pod.clone()), Some(a.container.clone()));
            if !self.view.labels.is_empty() {
                let pod = PodName { namespace: a.namespace.clone(), name: a.pod.clone() };
                holder.k8s_labels = self.view.labels.get(&pod).and_then(|(_, labels)| labels.clone());
            }
            out.push(AllocSample {
                ts: ts_ms,
                interval_ms,
                gpu_uuid: row.gpu_uuid.clone(),
                gpu_index: row.gpu_index,
                // Shared text: no allocation per tick.
                holder,
            });
        }
    }
}

/// A source's last good answer and when each of its entries was last seen.
#[derive(Debug)]
struct Seen<K, V> {
    entries: HashMap<K, (V, Instant)>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Seen<K, V> {
    fn new() -> Self {
        Seen { entries: HashMap::new() }
    }

    /// Takes a fresh answer: its entries are seen now; the others are kept
    /// until [`FORGET_AFTER`].
    fn update(&mut self, fresh: HashMap<K, V>, now: Instant) {
        for (k, v) in fresh {
            self.entries.insert(k, (v, now));
        }
        self.entries.retain(|_, (_, at)| now.duration_since(*at) < FORGET_AFTER);
    }

    fn current(&self) -> HashMap<K, V> {
        self.entries.iter().map(|(k, (v, _))| (k.clone(), v.clone())).collect()
    }
}

/// The refresh thread's state.
#[derive(Debug)]
struct Refresher {
    sources: KubeSources,
    shared: Arc<Shared>,
    pods: Seen<String, PodName>,
    containers: Seen<String, ContainerLog>,
    allocations: Vec<Allocation>,
    allocations_at: Option<Instant>,
    client: PodResourcesClient,
    /// Whether the socket ever answered or existed: from then on its
    /// absence is a failure.
    socket_seen: bool,
    warned_logs: bool,
    warned_kubelet: bool,
    /// Pod labels, when asked for.
    labels: Option<Labels>,
}

/// The API server's answers about pods' labels, cached per pod.
#[derive(Debug)]
struct Labels {
    source: LabelSource,
    /// Pods the tick met on a GPU and asked about, kept while the log
    /// folders name them.
    wanted: Vec<PodName>,
    /// Per pod: its uid at the API server and its labels kept (the last
    /// good answer), and when it is due to be asked again.
    pods: HashMap<PodName, (Option<PodLabels>, Instant)>,
    warned: bool,
}

impl Labels {
    /// Asks the API server about the pods in `names` that are due (new,
    /// or last asked [`LABELS_REFRESH`] ago, or failed [`LABELS_RETRY`]
    /// ago), at most [`LABELS_PER_REFRESH`] of them, and forgets pods no
    /// longer named (`names` is sorted: each lookup a binary search, so a
    /// node of many pods costs n log n, not n²). Stops at the first failure
    /// that is not about one pod (the server unreachable or late): the rest
    /// wait for the next refresh.
    fn refresh(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        names: &[PodName],
        counters: &Counters,
        now: Instant,
    ) {
        // `names` is sorted (the caller sorts and dedups it).
        self.pods.retain(|pod, _| names.binary_search(pod).is_ok());
        let mut asked = 0;
        for pod in names {
            if asked == LABELS_PER_REFRESH {
                break;
            }
            if self.pods.get(pod).is_some_and(|(_, due)| *due > now) {
                continue;
            }
            asked += 1;
            match runtime.block_on(self.source.api.pod(&pod.namespace, &pod.name)) {
                Ok(meta) => {
                    let kept = apiserver::render_labels(&meta.labels, &self.source.keys).map(Text::from);
                    self.pods.insert(pod.clone(), (Some((meta.uid, kept)), now + LABELS_REFRESH));
                    self.warned = false;
                }
                Err(error) => {
                    counters.label_errors.fetch_add(1, Ordering::Relaxed);
                    let gone = error.status() == Some(reqwest::StatusCode::NOT_FOUND);
                    if !self.warned && !gone {
                        self.warned = true;
                        tracing::warn!(error = %apron_store::error_chain::format_chain(&error),
                            "cannot read a pod's labels from the API server; its last answer stands (this warning \
                             is not repeated until a lookup succeeds; the health line counts failures)");
                    }
                    // A pod the API server no longer has has no labels; any
                    // other failure keeps the last good answer until retried.
                    let entry = self.pods.entry(pod.clone()).or_insert((None, now));
                    if gone {
                        entry.0 = None;
                    }
                    entry.1 = now + LABELS_RETRY;
                    if error.status().is_none() {
                        break;
                    }
                }
            }
        }
    }

    /// The answers to hand to the tick.
    fn current(&self) -> HashMap<PodName, PodLabels> {
        self.pods.iter().filter_map(|(pod, (answer, _))| Some((pod.clone(), answer.clone()?))).collect()
    }
}

impl Refresher {
    fn new(sources: KubeSources, shared: Arc<Shared>) -> Refresher {
        let labels = sources.labels.clone().map(|source| Labels {
            source,
            wanted: Vec::new(),
            pods: HashMap::new(),
            warned: false,
        });
        let client = PodResourcesClient::new(&sources.kubelet_socket, CALL_DEADLINE);
        Refresher {
            sources,
            shared,
            pods: Seen::new(),
            containers: Seen::new(),
            allocations: Vec::new(),
            allocations_at: None,
            client,
            socket_seen: false,
            warned_logs: false,
            warned_kubelet: false,
            labels,
        }
    }

    fn run(mut self, nudges: &mpsc::Receiver<()>) {
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(error) => {
                tracing::warn!(%error, "cannot start the runtime that asks the kubelet; Kubernetes names are not recorded");
                return;
            }
        };
        loop {
            let started = Instant::now();
            self.refresh(&runtime);
            match nudges.recv_timeout(REFRESH_EVERY) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            // However often nudged, not more often than this.
            std::thread::sleep(MIN_REFRESH_GAP.saturating_sub(started.elapsed()));
        }
    }

    fn refresh(&mut self, runtime: &tokio::runtime::Runtime) {
        let now = Instant::now();
        let shared = Arc::clone(&self.shared);
        let counters = &shared.counters;
        let container_logs = self.sources.container_logs();
        let logs_readable = match logs::read_pod_logs(&self.sources.pod_logs) {
            Ok(pods) => {
                self.pods.update(pods, now);
                match logs::read_container_logs(&container_logs) {
                    Ok(containers) => self.containers.update(containers, now),
                    // Not mounted: pods are named, containers are not.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => self.log_failure(&container_logs, &e),
                }
                true
            }
            // Not mounted: not a failure, the log folders are simply not a source.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                let dir = self.sources.pod_logs.clone();
                self.log_failure(&dir, &e);
                // The last good answer stands.
                !self.pods.entries.is_empty()
            }
        };
        let socket = self.sources.kubelet_socket.clone();
        if socket.exists() || self.socket_seen {
            self.socket_seen = true;
            match runtime.block_on(self.client.list()) {
                Ok(list) => {
                    self.allocations = allocations(&list);
                    self.allocations_at = Some(now);
                    self.warned_kubelet = false;
                }
                Err(error) => {
                    counters.kubelet_errors.fetch_add(1, Ordering::Relaxed);
                    if !self.warned_kubelet {
                        self.warned_kubelet = true;
                        tracing::warn!(error = %apron_store::error_chain::format_chain(&error), socket = %socket.display(),
                            "cannot list the kubelet's pod resources; the last answer stands (this warning is not \
                             repeated until it answers again; the health line counts failures)");
                    }
                    if self.allocations_at.is_some_and(|at| now.duration_since(at) >= FORGET_AFTER) {
                        self.allocations.clear();
                        self.allocations_at = None;
                    }
                }
            }
        }
        let pods = self.pods.current();
        let labels = match &mut self.labels {
            Some(labels) => {
                // The pods that matter: those the tick met on a GPU (while
                // the log folders still name them) and those holding a
                // device (pod-resources).
                let asked = match self.shared.wanted.lock() {
                    Ok(mut wanted) => std::mem::take(&mut *wanted),
                    Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
                };
                labels.wanted.extend(asked);
                labels.wanted.sort();
                labels.wanted.dedup();
                let running: std::collections::HashSet<&PodName> = pods.values().collect();
                labels.wanted.retain(|pod| running.contains(pod));
                let mut names: Vec<PodName> = labels.wanted.clone();
                names.extend(
                    self.allocations
                        .iter()
                        .map(|a| PodName { namespace: a.namespace.clone(), name: a.pod.clone() }),
                );
                names.sort();
                names.dedup();
                labels.refresh(runtime, &names, counters, now);
                let current = labels.current();
                counters.labelled_pods.store(current.len() as u64, Ordering::Relaxed);
                current
            }
            None => HashMap::new(),
        };
        let snapshot = Snapshot {
            pods,
            containers: self.containers.current(),
            logs_readable,
            allocations: self.allocations.clone(),
            labels,
        };
        counters.refreshes.fetch_add(1, Ordering::Relaxed);
        counters.pods.store(snapshot.pods.len() as u64, Ordering::Relaxed);
        counters.allocated_devices.store(snapshot.allocations.len() as u64, Ordering::Relaxed);
        let snapshot = Arc::new(snapshot);
        match self.shared.latest.lock() {
            Ok(mut latest) => *latest = snapshot,
            Err(poisoned) => *poisoned.into_inner() = snapshot,
        }
    }

    fn log_failure(&mut self, dir: &Path, error: &std::io::Error) {
        self.shared.counters.log_errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned_logs {
            self.warned_logs = true;
            tracing::warn!(%error, dir = %dir.display(),
                "cannot read the kubelet's log folders; the last answer stands (this warning is not repeated; \
                 the health line counts failures)");
        }
    }
}

#[cfg(test)]
mod tests;
