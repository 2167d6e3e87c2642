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
        let mut child = Command::new(bin("apron-recorder"))
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
            .stderr(Stdio::piped())
            .spawn()
            .expect("the recorder starts");
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
