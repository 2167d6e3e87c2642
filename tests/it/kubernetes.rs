//! End to end: Kubernetes names from the node itself. Real processes of
//! this test sit in real cgroups under the kubelet's `kubepods` hierarchy
//! and are listed by the fake NVML; a fake kubelet serves the pod-resources
//! API of `recorder/proto/podresources_v1.proto` (compiled and served by
//! grpcio) on a unix socket; a log-folder tree laid out as the kubelet lays
//! out `/var/log/pods` and `/var/log/containers` sits in a temporary
//! folder. The real `apron-recorder` records them and `apron sql` reads
//! back what it wrote.
//!
//! - With the log folders: a process in a pod gets its namespace, pod name
//!   and container from them; its environment's namespace stays a claim; a
//!   pod uid no folder names stays NULL, even though pod-resources says one
//!   pod alone holds its GPU. The kubelet killed mid-run: ticks go on and
//!   the health line counts the failed calls.
//! - Without them (not mounted): a process is given the one pod that
//!   pod-resources says holds its GPU, and nothing where two pods share a
//!   GPU (time-slicing replicas `::0`, `::1`). Every container's GPUs are
//!   recorded as allocated (`alloc_minutes`), with or without a process.
//! - GPUs allocated with no process on them (a whole GPU, one time-sliced
//!   between two pods, a MIG instance) are idle-held and paid for by the
//!   pods' namespaces' teams, to the figures worked out by hand.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apron_tests::cgroup::Cgroup;
use apron_tests::kid::Kid;
use apron_tests::{bin, fake_nvml, stdout_of};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const UID_A: &str = "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const UID_B: &str = "7b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e";
// The second test's pods: cgroups of their own, as the tests run at once.
const UID_C: &str = "9d4e5f6a-7b8c-4d9e-8f0a-2b3c4d5e6f7a";
const UID_D: &str = "ae5f6a7b-8c9d-4e0f-9a1b-3c4d5e6f7a8b";
const GPU_0: &str = "GPU-0a0a0a0a-0000-4000-8000-00000000000a";
const GPU_1: &str = "GPU-1b1b1b1b-0000-4000-8000-00000000000b";
const GPU_2: &str = "GPU-2c2c2c2c-0000-4000-8000-00000000000c";

/// A `sleep 600` child with exactly `env`, killed when dropped.
fn sleeper(env: &[(&str, &str)]) -> Kid {
    let sleep = stdout_of(Command::new("sh").args(["-c", "command -v sleep"]));
    Kid::spawn(Path::new(sleep.trim()), env)
}

/// The fake kubelet: grpcio serving the vendored proto on `socket`, its
/// pods read from `pods` at every call.
struct Kubelet(Child);

impl Kubelet {
    fn start(dir: &Path, socket: &Path, pods: &Value) -> Kubelet {
        let pods_json = dir.join("pods.json");
        std::fs::write(&pods_json, pods.to_string()).expect("pods");
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut child = Command::new(apron_tests::grpc::python())
            .arg(here.join("fake-kubelet/fake_kubelet.py"))
            .arg(here.join("../recorder/proto/podresources_v1.proto"))
            .arg(dir)
            .arg(socket)
            .arg(&pods_json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the fake kubelet starts");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped")).read_line(&mut line).expect("reads");
        assert_eq!(line.trim(), "serving", "the fake kubelet did not start");
        Kubelet(child)
    }

    /// Kills it (SIGKILL): its socket file stays, refusing connections.
    fn kill(&mut self) {
        self.0.kill().expect("kill the fake kubelet");
        self.0.wait().expect("reap it");
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A pod with one container holding `devices`.
fn pod(namespace: &str, name: &str, container: &str, devices: &[&str]) -> Value {
    json!({"namespace": namespace, "name": name, "containers": [
        {"name": container, "devices": [{"resource_name": "nvidia.com/gpu", "device_ids": devices}]}
    ]})
}

/// A pod's log folder and its container's log link, as a kubelet makes them.
fn kubelet_logs(root: &Path, namespace: &str, pod: &str, uid: &str, container: &str, container_id: &str) {
    let log_dir = root.join("pods").join(format!("{namespace}_{pod}_{uid}")).join(container);
    std::fs::create_dir_all(&log_dir).expect("pod log folder");
    std::fs::write(log_dir.join("0.log"), b"").expect("log file");
    let links = root.join("containers");
    std::fs::create_dir_all(&links).expect("containers folder");
    std::os::unix::fs::symlink(
        log_dir.join("0.log"),
        links.join(format!("{pod}_{namespace}_{container}-{container_id}.log")),
    )
    .expect("log link");
}

/// The recorder on the fake NVML, its log lines gathered as they come.
struct Recorder {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn start(data: &Path, gpus: &[String], kubelet_socket: &Path, pod_logs: &Path) -> Recorder {
        Recorder::start_with(data, gpus, kubelet_socket, pod_logs, |_| {})
    }

    /// As [`Recorder::start`], with `more` flags or environment.
    fn start_with(
        data: &Path,
        gpus: &[String],
        kubelet_socket: &Path,
        pod_logs: &Path,
        more: impl FnOnce(&mut Command),
    ) -> Recorder {
        let mut command = Command::new(bin("apron-recorder"));
        command
            .arg("--data")
            .arg(data)
            .args(["--source", "nvml", "--host", "k1", "--interval", "500ms", "--health-every", "1s"])
            .arg("--nvml-lib")
            .arg(fake_nvml())
            .arg("--kubelet-socket")
            .arg(kubelet_socket)
            .arg("--pod-logs")
            .arg(pod_logs)
            .env("FAKE_NVML_GPUS", gpus.join(";"))
            .env("APRON_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        more(&mut command);
        let mut child = command.spawn().expect("the recorder starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped");
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().expect("not poisoned").push(line);
            }
        });
        Recorder { child, lines }
    }

    fn log(&self) -> String {
        self.lines.lock().expect("not poisoned").join("\n")
    }

    /// Waits for a line that `found` accepts, and returns it.
    fn wait_for(&self, what: &str, limit: Duration, found: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(l) = self.lines.lock().expect("not poisoned").iter().find(|l| found(l)) {
                return l.clone();
            }
            assert!(t0.elapsed() < limit, "no {what} within {limit:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM, then waits for a clean exit.
    fn stop(mut self) {
        apron_tests::signal(&self.child, libc::SIGTERM);
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                assert!(status.success(), "{status}: {}", self.log());
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "the recorder does not stop: {}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `key=N` in a tracing line.
fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Every row of `apron sql QUERY`; none until the recorder's first rows
/// reach its data folder.
fn rows(data: &Path, query: &str) -> Vec<Value> {
    // Looked at before `apron` runs: the recorder may create the folder
    // while `apron` is refusing its absence.
    if !data.exists() {
        return Vec::new();
    }
    let out = Command::new(bin("apron"))
        .arg("--data")
        .arg(data)
        .args(["--format", "json", "sql", query])
        .output()
        .expect("apron runs");
    if !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("no apron data") {
        return Vec::new();
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("a JSON array")
}

/// Per pid: the number of rows, and of each trusted name the distinct
/// non-null values and the rows that have one.
fn names(data: &Path) -> Vec<Value> {
    rows(
        data,
        "SELECT pid, count(*) AS n, \
         count(k8s_namespace) AS with_namespace, min(k8s_namespace) AS namespace, max(k8s_namespace) AS namespace_max, \
         min(k8s_pod_name) AS pod, max(k8s_pod_name) AS pod_max, \
         min(k8s_container) AS container, max(k8s_container) AS container_max, \
         max(claimed_k8s_namespace) AS claimed, max(k8s_pod_uid) AS pod_uid, max(ts) AS last_ts \
         FROM proc_samples GROUP BY pid ORDER BY pid",
    )
}

fn row_of(rows: &[Value], pid: u32) -> &Value {
    rows.iter()
        .find(|r| r["pid"].as_u64() == Some(u64::from(pid)))
        .unwrap_or_else(|| panic!("pid {pid}: {rows:?}"))
}

/// Waits until `pid` has at least one row with a namespace and `total`
/// rows in all.
fn wait_rows(data: &Path, recorder: &Recorder, pid: u32, total: u64) -> Vec<Value> {
    let t0 = Instant::now();
    loop {
        let got = names(data);
        let named = got
            .iter()
            .any(|r| r["pid"].as_u64() == Some(u64::from(pid)) && r["with_namespace"].as_u64() > Some(0));
        let n: u64 = got.iter().filter_map(|r| r["n"].as_u64()).sum();
        if named && n >= total {
            return got;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no named rows for pid {pid}: {got:?}\n{}",
            recorder.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn gpus(kids: &[(&str, &Kid)]) -> Vec<String> {
    kids.iter()
        .map(|(uuid, k)| {
            format!("uuid={uuid},util=0,fb_total=85899345920,fb_used={GIB},compute={}:{GIB}", k.pid())
        })
        .collect()
}

#[test]
fn pods_are_named_by_the_kubelet_never_by_the_process() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (id_a, id_b) = ("a1".repeat(32), "b2".repeat(32));
    // A: in pod UID_A, claiming namespace prod. B: in pod UID_B, which no
    // log folder names.
    let kid_a = sleeper(&[("POD_NAMESPACE", "prod")]);
    let kid_b = sleeper(&[]);
    let _cgroups = [
        Cgroup::enter(&format!("/kubepods/burstable/pod{UID_A}/{id_a}"), kid_a.pid()),
        Cgroup::enter(&format!("/kubepods/besteffort/pod{UID_B}/{id_b}"), kid_b.pid()),
    ];
    let logs = tmp.path().join("log");
    kubelet_logs(&logs, "nlp", "trainer-0", UID_A, "main", &id_a);
    // Another pod's folder, with no process: names nobody.
    kubelet_logs(&logs, "cv", "holder", "8c3d4e5f-6a7b-4c8d-8e9f-1a2b3c4d5e6f", "srv", &"c3".repeat(32));
    let socket = tmp.path().join("kubelet.sock");
    let mut kubelet = Kubelet::start(
        tmp.path(),
        &socket,
        &json!([pod("nlp", "trainer-0", "main", &[GPU_0]), pod("cv", "holder", "srv", &[GPU_1])]),
    );

    let data = tmp.path().join("data");
    let recorder =
        Recorder::start(&data, &gpus(&[(GPU_0, &kid_a), (GPU_1, &kid_b)]), &socket, &logs.join("pods"));
    let got = wait_rows(&data, &recorder, kid_a.pid(), 8);
    let (a, b) = (row_of(&got, kid_a.pid()), row_of(&got, kid_b.pid()));
    // Every named row names the same pod: nothing else was ever filled in.
    assert_eq!(
        [
            &a["namespace"],
            &a["namespace_max"],
            &a["pod"],
            &a["pod_max"],
            &a["container"],
            &a["container_max"]
        ],
        ["nlp", "nlp", "trainer-0", "trainer-0", "main", "main"],
        "{a}"
    );
    assert_eq!((a["pod_uid"].as_str(), a["claimed"].as_str()), (Some(UID_A), Some("prod")), "{a}");
    assert_eq!(b["pod_uid"].as_str(), Some(UID_B), "{b}");
    assert_eq!(
        [&b["with_namespace"], &b["pod"], &b["container"]],
        [&json!(0), &Value::Null, &Value::Null],
        "a uid no log folder names is never guessed, though one pod alone holds its GPU: {b}"
    );
    let calls = std::fs::read_to_string(tmp.path().join("calls.log")).expect("the kubelet was called");
    assert!(calls.lines().any(|l| l == "List"), "{calls}");

    // The kubelet dies; the recorder goes on and counts the failed calls.
    kubelet.kill();
    let last_ts = got.iter().map(|r| r["last_ts"].to_string()).max().expect("rows");
    let health = recorder.wait_for("health line counting kubelet errors", Duration::from_secs(40), |l| {
        l.contains(" health") && field(l, "k8s_kubelet_errors").is_some_and(|n| n > 0)
    });
    assert!(recorder.log().contains("cannot list the kubelet's pod resources"), "{}", recorder.log());
    assert_eq!(
        recorder.log().matches("cannot list the kubelet's pod resources").count(),
        1,
        "warned once: {}",
        recorder.log()
    );
    println!("{health}");
    assert_eq!(field(&health, "k8s_pods"), Some(2), "{health}");
    assert!(field(&health, "k8s_unresolved").is_some_and(|n| n > 0), "B's rows are counted: {health}");
    std::thread::sleep(Duration::from_secs(2));
    let after = names(&data);
    let newest = after.iter().map(|r| r["last_ts"].to_string()).max().expect("rows");
    assert!(newest > last_ts, "ticks go on after the kubelet died: {newest} after {last_ts}");
    // The last good answer stands: A keeps its names.
    let a = row_of(&after, kid_a.pid());
    assert_eq!([&a["namespace_max"], &a["pod_max"]], ["nlp", "trainer-0"], "{a}");
    recorder.stop();
}

#[test]
fn without_log_folders_only_a_gpu_held_by_one_pod_names_it() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (id_a, id_b) = ("d4".repeat(32), "e5".repeat(32));
    let kid_a = sleeper(&[]);
    let kid_b = sleeper(&[]);
    let _cgroups = [
        Cgroup::enter(&format!("/kubepods/burstable/pod{UID_C}/{id_a}"), kid_a.pid()),
        Cgroup::enter(&format!("/kubepods/burstable/pod{UID_D}/{id_b}"), kid_b.pid()),
    ];
    let socket = tmp.path().join("kubelet.sock");
    let (r0, r1, r2) = (format!("{GPU_1}::0"), format!("{GPU_1}::1"), format!("{GPU_1}::2"));
    let _kubelet = Kubelet::start(
        tmp.path(),
        &socket,
        &json!([
            pod("nlp", "trainer-0", "main", &[GPU_0]),
            pod("nlp", "a", "main", &[&r0, &r2]),
            pod("cv", "b", "main", &[&r1]),
            // A notebook pod holding GPU 2, running nothing on it.
            pod("ml", "idle-nb", "lab", &[GPU_2]),
        ]),
    );
    let data = tmp.path().join("data");
    let no_logs = tmp.path().join("not-mounted/pods");
    let mut fleet = gpus(&[(GPU_0, &kid_a), (GPU_1, &kid_b)]);
    fleet.push(format!("uuid={GPU_2},util=0,fb_total=85899345920,fb_used=0"));
    let recorder = Recorder::start(&data, &fleet, &socket, &no_logs);
    let got = wait_rows(&data, &recorder, kid_a.pid(), 8);
    let (a, b) = (row_of(&got, kid_a.pid()), row_of(&got, kid_b.pid()));
    assert_eq!(
        [&a["namespace"], &a["namespace_max"], &a["pod"], &a["pod_max"], &a["container"]],
        ["nlp", "nlp", "trainer-0", "trainer-0", "main"],
        "the one pod holding GPU 0: {a}"
    );
    assert_eq!(b["with_namespace"], json!(0), "two pods time-slice GPU 1: never guessed: {b}");
    assert_eq!(b["pod"], Value::Null, "{b}");
    recorder.stop();
    // The allocations, recorded whatever runs on the GPUs: each container
    // once per GPU and tick (pod a holds two replicas of GPU 1), the idle
    // notebook's GPU too.
    let held = rows(
        &data,
        "SELECT gpu_uuid, k8s_namespace AS ns, k8s_pod_name AS pod, k8s_container AS container, \
         max(samples) AS most FROM alloc_minutes WHERE source = 'kubernetes' GROUP BY 1, 2, 3, 4 ORDER BY 1, 2",
    );
    let brief: Vec<[&str; 4]> = held
        .iter()
        .map(|r| ["gpu_uuid", "ns", "pod", "container"].map(|k| r[k].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        brief,
        [
            [GPU_0, "nlp", "trainer-0", "main"],
            [GPU_1, "cv", "b", "main"],
            [GPU_1, "nlp", "a", "main"],
            [GPU_2, "ml", "idle-nb", "lab"]
        ],
        "{held:?}"
    );
    // At most one row per tick (two a second at --interval 500ms).
    assert!(held.iter().all(|r| r["most"].as_i64().is_some_and(|n| (1..=120).contains(&n))), "{held:?}");
}

/// The vendored proto compiles with gRPC's own compiler (what the fake
/// kubelet serves is what the recorder reads).
#[test]
fn the_vendored_proto_compiles() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let proto: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/proto");
    let status = Command::new(apron_tests::grpc::python())
        .args(["-m", "grpc_tools.protoc"])
        .arg(format!("-I{}", proto.display()))
        .arg(format!("--python_out={}", tmp.path().display()))
        .arg("podresources_v1.proto")
        .status()
        .expect("protoc runs");
    assert!(status.success());
    assert!(tmp.path().join("podresources_v1_pb2.py").exists());
}

/// The config of the allocation test: a GPU-second costs 0.01 (36 an hour,
/// nothing to write off, no energy price), teams by namespace.
const TEAMS_BY_NAMESPACE: &str = "currency = \"USD\"\n\n[energy]\nprice_per_kwh = 0.0\npue = 1.0\n\n\
[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 3\nops_per_gpu_hour = 36\n\n\
[[team]]\nname = \"ml-team\"\nk8s_namespaces = [\"ml\"]\n\n\
[[team]]\nname = \"nlp-team\"\nk8s_namespaces = [\"nlp\"]\n\n\
[[team]]\nname = \"cv-team\"\nk8s_namespaces = [\"cv\"]\n";

const MIG_A: &str = "MIG-3d3d3d3d-0000-4000-8000-00000000000d";

/// Every row of `apron --format json --config CONFIG ARGS…`.
fn apron_json(data: &Path, config: &Path, args: &[&str]) -> Vec<Value> {
    let out = stdout_of(
        Command::new(bin("apron"))
            .arg("--data")
            .arg(data)
            .arg("--config")
            .arg(config)
            .args(["--format", "json"])
            .args(args),
    );
    serde_json::from_str(&out).expect("a JSON array")
}

/// GPUs the kubelet allocated and nothing runs on are held by their pods
/// and paid for by the pods' namespaces' teams: a notebook pod's whole GPU
/// (ml), a GPU time-sliced between two pods (nlp and cv, half each), a MIG
/// instance (nlp, 3 of the GPU's 7 slices). Each team's cost from `apron
/// spend` equals the figure worked out here from the recorded minutes and
/// allocations: per GPU-minute an allocation row names, its seconds × 0.01
/// × the instance's share of its GPU × each holder's share of the
/// allocated seconds.
#[test]
fn gpus_allocated_with_no_process_are_held_and_paid_for_by_their_pods_namespaces() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let socket = tmp.path().join("kubelet.sock");
    let (r0, r1) = (format!("{GPU_1}::0"), format!("{GPU_1}::1"));
    let _kubelet = Kubelet::start(
        tmp.path(),
        &socket,
        &json!([
            pod("ml", "idle-nb", "lab", &[GPU_0]),
            pod("nlp", "a", "main", &[&r0]),
            pod("cv", "b", "main", &[&r1]),
            pod("nlp", "serve", "srv", &[MIG_A]),
        ]),
    );
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, TEAMS_BY_NAMESPACE).expect("config");
    let gpus = [
        format!("uuid={GPU_0},util=0,fb_total=85899345920,fb_used=0"),
        format!("uuid={GPU_1},util=0,fb_total=85899345920,fb_used=0"),
        format!(
            "uuid={GPU_2},name=NVIDIA H100 80GB HBM3,mig=1,gpm=1,gpm_sm=0,gpm_occ=0,gpm_tensor=0,gpm_dram=0,\
             gpm_gr=0,fb_total=85899345920,fb_used=0"
        ),
    ];
    let mig = format!(
        "parent=2,uuid={MIG_A},name=NVIDIA H100 80GB HBM3 MIG 3g.40gb,gi=1,ci=0,slices=3,fb_total=42949672960,\
         fb_used=0,gpm_sm=0,gpm_occ=0,gpm_tensor=0,gpm_dram=0,gpm_gr=0"
    );
    let mut recorder = Command::new(bin("apron-recorder"));
    recorder
        .arg("--data")
        .arg(&data)
        .args(["--source", "nvml", "--host", "k1", "--interval", "500ms"])
        .arg("--nvml-lib")
        .arg(fake_nvml())
        .arg("--kubelet-socket")
        .arg(&socket)
        .arg("--pod-logs")
        .arg(tmp.path().join("not-mounted/pods"))
        .env("FAKE_NVML_GPUS", gpus.join(";"))
        .env("FAKE_NVML_MIG", mig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = recorder.spawn().expect("the recorder starts");
    let held = "SELECT count(DISTINCT gpu_uuid) AS n FROM alloc_minutes";
    let t0 = Instant::now();
    while rows(&data, held).first().and_then(|r| r["n"].as_i64()) != Some(3) {
        assert!(t0.elapsed() < Duration::from_secs(60), "allocations of three GPUs not recorded in time");
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(3));
    apron_tests::signal(&child, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "the recorder: {}", String::from_utf8_lossy(&out.stderr));
    apron_tests::next_whole_second();

    // By hand, from what was recorded.
    let minutes = rows(
        &data,
        "SELECT gpu_uuid, CAST(minute AS VARCHAR) AS minute, sum(seconds) AS seconds, \
         max(mig_slices) AS slices, max(mig_total_slices) AS total FROM gpu_minutes GROUP BY 1, 2",
    );
    let allocs = rows(
        &data,
        "SELECT gpu_uuid, CAST(minute AS VARCHAR) AS minute, k8s_namespace AS ns, sum(seconds) AS seconds \
         FROM alloc_minutes GROUP BY 1, 2, 3",
    );
    let text = |r: &Value, k: &str| r[k].as_str().unwrap_or_default().to_owned();
    let num = |r: &Value, k: &str| r[k].as_f64().unwrap_or(0.0);
    let mut want: std::collections::BTreeMap<String, f64> = Default::default();
    for m in &minutes {
        let (gpu, minute) = (text(m, "gpu_uuid"), text(m, "minute"));
        let here: Vec<&Value> =
            allocs.iter().filter(|a| text(a, "gpu_uuid") == gpu && text(a, "minute") == minute).collect();
        let held: f64 = here.iter().map(|a| num(a, "seconds")).sum();
        let capacity = if m["slices"].is_null() { 1.0 } else { num(m, "slices") / num(m, "total") };
        for a in here {
            let team = format!("{}-team", text(a, "ns"));
            *want.entry(team).or_default() += num(m, "seconds") * 0.01 * capacity * num(a, "seconds") / held;
        }
    }
    println!("by hand: {want:?}");
    assert_eq!(want.keys().collect::<Vec<_>>(), ["cv-team", "ml-team", "nlp-team"]);
    // The ledger's spend, to the cent.
    let spend = apron_json(&data, &config, &["spend", "--last", "1h"]);
    println!("spend: {spend:#?}");
    for (team, cost) in &want {
        let row =
            spend.iter().find(|r| r["team"] == team.as_str()).unwrap_or_else(|| panic!("{team}: {spend:?}"));
        let got = num(row, "cost");
        assert!((got - cost).abs() <= 0.011, "{team}: {got} against {cost} by hand");
        assert_eq!(num(row, "busy_cost"), 0.0, "{row}");
    }
    // The views' minute_costs, exactly, and in which states.
    let query = "SELECT team, state, sum(cost) AS cost FROM minute_costs GROUP BY 1, 2 ORDER BY 1, 2";
    let by_state = apron_json(&data, &config, &["sql", query, "--last", "1h"]);
    println!("minute_costs: {by_state:#?}");
    for (team, cost) in &want {
        let rows: Vec<&Value> = by_state.iter().filter(|r| r["team"] == team.as_str()).collect();
        let sum: f64 = rows.iter().map(|r| num(r, "cost")).sum();
        assert!((sum - cost).abs() < 1e-9, "{team}: {sum} against {cost} by hand");
        // Held, never idle-empty; unknown only where GPM had no activity yet.
        assert!(rows.iter().all(|r| r["state"] == "idle_held" || r["state"] == "unknown"), "{rows:?}");
        assert!(rows.iter().any(|r| r["state"] == "idle_held"), "{rows:?}");
    }
    // The MIG GPU's own row (its 4 slices no instance holds) is nobody's.
    assert!(
        by_state.iter().any(|r| r["team"] == "(unallocated)" && r["state"] == "idle_empty"),
        "the unheld slices: {by_state:?}"
    );
}

// The label test's pods: cgroups of their own.
const UID_E: &str = "bf6a7b8c-9d0e-4f1a-8b2c-4d5e6f7a8b9c";
const UID_F: &str = "c07b8c9d-0e1f-4a2b-9c3d-5e6f7a8b9c0d";
const UID_G: &str = "d18c9d0e-1f2a-4b3c-8d4e-6f7a8b9c0d1e";
const UID_H: &str = "e29d0e1f-2a3b-4c4d-9e5f-7a8b9c0d1e2f";
/// The service account's token the stand-in expects.
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.apron-recorder";

/// A throwaway CA and a server certificate it signed for 127.0.0.1.
fn pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl").args(args).current_dir(dir).stdin(Stdio::null()).output();
        let out = out.expect("openssl runs");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"];
    openssl(
        &[&["req", "-x509"][..], &ec, &["-subj", "/CN=apron-test-ca", "-keyout", "ca.key", "-out", "ca.crt"]]
            .concat(),
    );
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
            &["-addext", "basicConstraints=critical,CA:FALSE", "-CA", "ca.crt", "-CAkey", "ca.key"],
            &["-keyout", "server.key", "-out", "server.crt"],
        ]
        .concat(),
    );
    (dir.join("ca.crt"), dir.join("server.crt"), dir.join("server.key"))
}

/// `tests/fake-apiserver/fake_apiserver.py` over TLS, killed when dropped.
struct ApiServer {
    child: Child,
    port: u16,
}

impl ApiServer {
    fn start(dir: &Path, pods: &Value, forbid: &str) -> ApiServer {
        let (_, cert, key) = pki(dir);
        let pods_json = dir.join("api-pods.json");
        std::fs::write(&pods_json, pods.to_string()).expect("pods");
        let port_file = dir.join("api.port");
        let child = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("fake-apiserver/fake_apiserver.py"))
            .arg("--port-file")
            .arg(&port_file)
            .arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(key)
            .args(["--token", TOKEN, "--forbid", forbid])
            .arg("--pods")
            .arg(&pods_json)
            .arg("--log")
            .arg(dir.join("api.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the stand-in starts");
        let t0 = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Ok(port) = text.trim().parse()
            {
                break port;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the API server stand-in did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        ApiServer { child, port }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Team rules by label first, then by namespace.
const TEAMS_BY_LABEL: &str = "currency = \"USD\"\n\n[energy]\nprice_per_kwh = 0.0\npue = 1.0\n\n\
[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 3\nops_per_gpu_hour = 36\n\n\
[[team]]\nname = \"nlp-serving\"\nk8s_labels = { team = \"nlp\", tier = \"prod\" }\n\n\
[[team]]\nname = \"nlp\"\nk8s_labels = { team = \"nlp\" }\n\n\
[[team]]\nname = \"cv\"\nk8s_labels = { team = \"cv\" }\n\n\
[[team]]\nname = \"shared-ns\"\nk8s_namespaces = [\"shared\"]\n";

/// Pod labels from the API server: only the keys asked for are recorded;
/// a pod deleted and made again under the same name (the API server's uid
/// is not its processes') gets none; a namespace the service account may
/// not read is counted in the health line, warned about once, and its
/// pod keeps its namespace; team rules by label split a namespace's bill,
/// the views' and the ledger's alike, and an idle pod's allocated GPU is
/// billed to its label's team.
#[test]
fn pod_labels_from_the_api_server_split_a_namespace_between_teams() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let ids = ["e6".repeat(32), "f7".repeat(32), "a8".repeat(32), "b9".repeat(32)];
    let kids = [sleeper(&[]), sleeper(&[]), sleeper(&[]), sleeper(&[])];
    let uids = [UID_E, UID_F, UID_G, UID_H];
    let _cgroups: Vec<Cgroup> = (0..4)
        .map(|i| Cgroup::enter(&format!("/kubepods/burstable/pod{}/{}", uids[i], ids[i]), kids[i].pid()))
        .collect();
    let logs = tmp.path().join("log");
    let named = [("shared", "train-a"), ("shared", "train-b"), ("shared", "old"), ("locked", "db-0")];
    for (i, (ns, name)) in named.iter().enumerate() {
        kubelet_logs(&logs, ns, name, uids[i], "main", &ids[i]);
    }
    // A pod of the node with no GPU and no process on one: never asked about.
    kubelet_logs(
        &logs,
        "shared",
        "bystander",
        "f3ae1f2a-3b4c-4d5e-8f6a-8b9c0d1e2f3a",
        "main",
        &"c4".repeat(32),
    );
    const GPU_3: &str = "GPU-3d3d3d3d-0000-4000-8000-00000000000e";
    let socket = tmp.path().join("kubelet.sock");
    let _kubelet = Kubelet::start(
        tmp.path(),
        &socket,
        &json!([
            pod("shared", "train-a", "main", &[GPU_0]),
            pod("shared", "train-b", "main", &[GPU_1]),
            pod("shared", "idle-nb", "lab", &[GPU_3]),
        ]),
    );
    let api = ApiServer::start(
        tmp.path(),
        &json!([
            {"namespace": "shared", "name": "train-a", "uid": UID_E,
             "labels": {"team": "nlp", "tier": "prod", "owner": "alice"}},
            {"namespace": "shared", "name": "train-b", "uid": UID_F, "labels": {"team": "cv"}},
            // Made again: another uid than the processes' cgroup gives.
            {"namespace": "shared", "name": "old", "uid": "00000000-0000-4000-8000-000000000000",
             "labels": {"team": "nlp"}},
            {"namespace": "shared", "name": "idle-nb", "uid": "11111111-0000-4000-8000-000000000000",
             "labels": {"team": "nlp"}},
            {"namespace": "locked", "name": "db-0", "uid": UID_H, "labels": {"team": "nlp"}},
            {"namespace": "shared", "name": "bystander", "uid": "f3ae1f2a-3b4c-4d5e-8f6a-8b9c0d1e2f3a",
             "labels": {"team": "cv"}},
        ]),
        "locked",
    );
    let account = tmp.path().join("serviceaccount");
    std::fs::create_dir_all(&account).expect("folder");
    std::fs::copy(tmp.path().join("ca.crt"), account.join("ca.crt")).expect("ca");
    std::fs::write(account.join("token"), TOKEN).expect("token");

    let data = tmp.path().join("data");
    let mut fleet = gpus(&[(GPU_0, &kids[0]), (GPU_1, &kids[1]), (GPU_2, &kids[2])]);
    // db-0 shares GPU 2 with old.
    fleet[2] = format!(
        "uuid={GPU_2},util=0,fb_total=85899345920,fb_used={},compute={}:{GIB}|{}:{GIB}",
        2 * GIB,
        kids[2].pid(),
        kids[3].pid()
    );
    fleet.push(format!("uuid={GPU_3},util=0,fb_total=85899345920,fb_used=0"));
    let recorder = Recorder::start_with(&data, &fleet, &socket, &logs.join("pods"), |c| {
        c.args(["--k8s-labels", "team,tier"])
            .arg("--k8s-service-account")
            .arg(&account)
            .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
            .env("KUBERNETES_SERVICE_PORT", api.port.to_string());
    });
    let labelled = "SELECT count(DISTINCT pid) AS n FROM proc_samples WHERE k8s_labels IS NOT NULL";
    let t0 = Instant::now();
    while rows(&data, labelled).first().and_then(|r| r["n"].as_i64()) != Some(2) {
        assert!(t0.elapsed() < Duration::from_secs(60), "labels not recorded in time:\n{}", recorder.log());
        std::thread::sleep(Duration::from_millis(300));
    }
    // The pods' labels are asked for one after another: the health line
    // that counts the refusal may come before the last answer is in.
    let health = recorder.wait_for("a health line counting label errors", Duration::from_secs(30), |l| {
        l.contains(" health")
            && field(l, "k8s_label_errors").is_some_and(|n| n > 0)
            && field(l, "k8s_labelled_pods").is_some_and(|n| n >= 4)
    });
    assert_eq!(field(&health, "k8s_labelled_pods"), Some(4), "{health}");
    assert_eq!(
        recorder.log().matches("cannot read a pod's labels").count(),
        1,
        "warned once: {}",
        recorder.log()
    );
    std::thread::sleep(Duration::from_secs(2));
    recorder.stop();
    apron_tests::next_whole_second();

    // What was recorded: the keys asked for only, the processes' own pod's.
    let got = rows(
        &data,
        "SELECT pid, k8s_pod_name AS pod, count(*) AS n, count(k8s_labels) AS labelled, \
         min(k8s_labels) AS first, max(k8s_labels) AS last FROM proc_samples GROUP BY 1, 2 ORDER BY 2",
    );
    println!("{got:#?}");
    let by_pod =
        |name: &str| got.iter().find(|r| r["pod"] == name).unwrap_or_else(|| panic!("{name}: {got:?}"));
    let (a, b, old, db) = (by_pod("train-a"), by_pod("train-b"), by_pod("old"), by_pod("db-0"));
    assert_eq!([&a["last"], &b["last"]], ["team=nlp,tier=prod", "team=cv"], "no owner=: not asked for");
    assert_eq!([&a["first"], &b["first"]], [&a["last"], &b["last"]], "one label set each");
    assert_eq!(old["labelled"], json!(0), "another pod's labels under the same name: {old}");
    assert_eq!(db["labelled"], json!(0), "forbidden: {db}");
    let alloc = rows(
        &data,
        "SELECT k8s_pod_name AS pod, max(k8s_labels) AS labels FROM alloc_minutes GROUP BY 1 ORDER BY 1",
    );
    let labels_of = |name: &str| alloc.iter().find(|r| r["pod"] == name).map(|r| r["labels"].clone());
    assert_eq!(labels_of("idle-nb"), Some(json!("team=nlp")), "{alloc:?}");
    assert_eq!(labels_of("train-a"), Some(json!("team=nlp,tier=prod")), "{alloc:?}");
    let log = std::fs::read_to_string(tmp.path().join("api.log")).expect("the API server was asked");
    assert!(log.lines().all(|l| l.starts_with("GET /api/v1/namespaces/")), "{log}");
    assert!(log.contains("/namespaces/locked/pods/db-0?resourceVersion=0 403"), "{log}");
    assert!(!log.contains("bystander"), "only pods on a GPU or holding one are asked about: {log}");

    // Teams: by label, first match in file order; a pod without labels
    // falls to its namespace's rule.
    let config = tmp.path().join("apron.toml");
    std::fs::write(&config, TEAMS_BY_LABEL).expect("config");
    let teams = apron_json(
        &data,
        &config,
        &[
            "sql",
            "SELECT pid, max(team) AS team FROM proc_minute_states GROUP BY pid ORDER BY pid",
            "--last",
            "1h",
        ],
    );
    let team_of = |pid: u32| {
        teams.iter().find(|r| r["pid"].as_u64() == Some(u64::from(pid))).map(|r| r["team"].clone())
    };
    assert_eq!(team_of(kids[0].pid()), Some(json!("nlp-serving")), "{teams:?}");
    assert_eq!(team_of(kids[1].pid()), Some(json!("cv")), "{teams:?}");
    assert_eq!(team_of(kids[2].pid()), Some(json!("shared-ns")), "{teams:?}");
    assert_eq!(team_of(kids[3].pid()), Some(json!("unassigned")), "{teams:?}");
    // The ledger's spend and the views' minute_costs: the same teams, to the cent.
    let spend = apron_json(&data, &config, &["spend", "--last", "1h"]);
    let costs = apron_json(
        &data,
        &config,
        &[
            "sql",
            "SELECT team, sum(cost) AS cost FROM minute_costs GROUP BY team ORDER BY team",
            "--last",
            "1h",
        ],
    );
    println!("spend: {spend:#?}\nminute_costs: {costs:#?}");
    for team in ["nlp-serving", "nlp", "cv", "shared-ns", "unassigned"] {
        let ledger = spend.iter().find(|r| r["team"] == team).and_then(|r| r["cost"].as_f64());
        let views = costs.iter().find(|r| r["team"] == team).and_then(|r| r["cost"].as_f64());
        let (ledger, views) = (ledger.unwrap_or_default(), views.unwrap_or_default());
        assert!(views > 0.0, "{team} pays something: {costs:?}");
        assert!((ledger - views).abs() <= 0.011, "{team}: ledger {ledger}, views {views}");
    }
    // The idle notebook's GPU is idle-held by nlp (its label), not shared-ns.
    let held = apron_json(
        &data,
        &config,
        &[
            "sql",
            "SELECT DISTINCT team FROM minute_costs WHERE holder = 'pod shared/idle-nb'",
            "--last",
            "1h",
        ],
    );
    assert_eq!(held, [json!({"team": "nlp"})]);
}
