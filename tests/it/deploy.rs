//! The recorder's deployment files (`recorder/deploy/`), checked offline:
//!
//! - the plain manifests and the Helm chart, rendered by Helm's own engine
//!   with its default values and with a bucket's, validate strictly against
//!   the Kubernetes schemas of two releases, and the ServiceMonitor against
//!   the Prometheus Operator's model (`tests/deploy_check.py`, with the
//!   tools of `apron_tests::k8s`); a misspelt field fails, so the check is
//!   known to look;
//! - the chart's default render is the plain manifests' DaemonSet, Service
//!   and ServiceMonitor, field for field;
//! - the recorder runs with exactly the DaemonSet's arguments, paths
//!   pointed at temp folders and the simulated source for NVML, and serves
//!   `/metrics` under the node's name; with the chart's bucket values and
//!   a Secret's keys as the kubelet passes them, it ships every closed day
//!   to a real S3 server (SeaweedFS), and the bucket holds exactly those;
//! - with no capability (the DaemonSet's uid 0, the image's uid 65532) the
//!   recorder still records another user's process in a pod's cgroup with
//!   its uid, command, pod and container; only the claims in its
//!   environment are out of reach;
//! - the Dockerfile: hadolint finds nothing, the binary it copies is the
//!   one its cargo command builds, its context keeps every workspace
//!   member, and the recorder links nothing the runtime image lacks.
//!
//! No image is built and no cluster is reached here: no registry can be.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use apron_tests::prometheus::{free_port, http_get};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn deploy() -> PathBuf {
    root().join("recorder/deploy")
}

fn chart() -> PathBuf {
    deploy().join("helm/apron-recorder")
}

/// The plain manifests, every YAML file of `recorder/deploy/kubernetes`.
fn plain_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(deploy().join("kubernetes"))
        .expect("recorder/deploy/kubernetes reads")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "the manifests and the ServiceMonitor: {files:?}");
    files
}

/// `tests/deploy_check.py ARGS` with the tools' Python.
fn check(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(apron_tests::k8s::python())
        .arg(root().join("tests/deploy_check.py"))
        .args(args)
        .output()
        .expect("deploy_check.py runs")
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The objects of `files`, each validated; fails on any error.
fn validated(files: &[PathBuf], tmp: &Path) -> Vec<Value> {
    let json = tmp.join("objects.json");
    let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref(), "--json".as_ref(), json.as_os_str()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let out = check(&args);
    assert!(out.status.success(), "the manifests do not validate:\n{}", said(&out));
    serde_json::from_str(&std::fs::read_to_string(&json).expect("the objects' JSON")).expect("JSON")
}

/// The chart rendered as release `apron-recorder` in namespace `apron`,
/// with `values` files over its defaults, into `tmp/NAME.yaml`.
fn render(values: &[PathBuf], name: &str, tmp: &Path) -> PathBuf {
    let out_file = tmp.join(format!("{name}.yaml"));
    let chart = chart();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "render".as_ref(),
        "--chart".as_ref(),
        chart.as_os_str(),
        "--release".as_ref(),
        "apron-recorder".as_ref(),
        "--namespace".as_ref(),
        "apron".as_ref(),
        "--out".as_ref(),
        out_file.as_os_str(),
    ];
    for v in values {
        args.push("--values".as_ref());
        args.push(v.as_os_str());
    }
    let out = check(&args);
    assert!(out.status.success(), "the chart does not render:\n{}", said(&out));
    out_file
}

/// The one object of `kind` in `objects`.
fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let of_kind: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(of_kind.len(), 1, "one {kind} in {objects:#?}");
    of_kind[0]
}

fn kinds(objects: &[Value]) -> Vec<&str> {
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort_unstable();
    kinds
}

/// The recorder's container of a DaemonSet.
fn container(daemonset: &Value) -> &Value {
    let containers = daemonset["spec"]["template"]["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:#?}");
    &containers[0]
}

fn args_of(daemonset: &Value) -> Vec<String> {
    container(daemonset)["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("every argument is a string").to_owned())
        .collect()
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str)
}

#[test]
fn the_plain_manifests_validate_and_ask_for_no_more_than_the_recorder_needs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = validated(&plain_files(), tmp.path());
    assert_eq!(kinds(&objects), ["DaemonSet", "Namespace", "Service", "ServiceAccount", "ServiceMonitor"]);

    // No API access: no token, and nothing that grants any.
    let account = one(&objects, "ServiceAccount");
    assert_eq!(account["automountServiceAccountToken"], false);
    let ds = one(&objects, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["serviceAccountName"], account["metadata"]["name"]);

    // The host's pids, the NVIDIA runtime, GPU nodes only.
    assert_eq!(pod["hostPID"], true);
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert!(pod["tolerations"].as_array().expect("tolerations").iter().any(|t| t["key"] == "nvidia.com/gpu"));
    for absent in ["hostNetwork", "hostIPC"] {
        assert!(pod.get(absent).is_none(), "{absent} is not needed");
    }

    // No capability, no escalation, a read-only root.
    let security = &container(ds)["securityContext"];
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert!(security["capabilities"].get("add").is_none(), "no capability added: {security}");
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["privileged"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);

    // Every host folder read-only but the data folder, which is --data.
    let args = args_of(ds);
    let mounts = container(ds)["volumeMounts"].as_array().expect("mounts");
    let volumes: BTreeMap<&str, &str> = pod["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (v["name"].as_str().expect("name"), v["hostPath"]["path"].as_str().expect("hostPath")))
        .collect();
    for m in mounts {
        let name = m["name"].as_str().expect("name");
        let host = volumes[name];
        assert_eq!(m["mountPath"], host, "mounted where it is on the node: {m}");
        let writable = m["readOnly"] != true;
        assert_eq!(writable, Some(host) == flag(&args, "--data"), "only the data folder is writable: {m}");
    }
    let socket = flag(&args, "--kubelet-socket").expect("--kubelet-socket");
    let pod_logs = flag(&args, "--pod-logs").expect("--pod-logs");
    for (path, what) in [(socket, "the kubelet socket"), (pod_logs, "the pod logs")] {
        assert!(
            volumes.values().any(|h| Path::new(path).starts_with(h)),
            "{what} ({path}) is mounted: {volumes:?}"
        );
    }
    assert!(volumes.values().any(|h| *h == "/var/log/containers"), "the container log links: {volumes:?}");

    // /metrics on the pod IP, the Service's and ServiceMonitor's port.
    let listen = flag(&args, "--metrics").expect("--metrics");
    let port: u64 = listen.strip_prefix("0.0.0.0:").expect("all addresses").parse().expect("a port");
    let ports = container(ds)["ports"].as_array().expect("ports");
    assert_eq!(ports[0]["containerPort"], port);
    let service = one(&objects, "Service");
    assert_eq!(service["spec"]["clusterIP"], "None", "headless");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], ports[0]["name"]);
    let monitor = one(&objects, "ServiceMonitor");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]);
    assert_eq!(service["spec"]["selector"], ds["spec"]["selector"]["matchLabels"]);
}

#[test]
fn a_misspelt_field_or_a_wrong_type_fails_validation() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plain = std::fs::read_to_string(deploy().join("kubernetes/apron-recorder.yaml")).expect("reads");
    let monitor = std::fs::read_to_string(deploy().join("kubernetes/servicemonitor.yaml")).expect("reads");
    let cases = [
        (
            "ds.yaml",
            plain.replace("readOnlyRootFilesystem:", "readOnlyRootFilesytem:"),
            "readOnlyRootFilesytem",
        ),
        ("port.yaml", plain.replace("containerPort: 9400", "containerPort: metrics"), "containerPort"),
        ("sm.yaml", monitor.replace("interval: 15s", "intervall: 15s"), "spec.endpoints[0].intervall"),
        ("sm-type.yaml", monitor.replace("interval: 15s", "interval: fifteen"), "interval"),
    ];
    // One run for all (each run loads the schemas and the models anew).
    let mut files = Vec::new();
    for (name, text, field) in &cases {
        assert!(text.contains(field.rsplit('.').next().unwrap_or(field)), "{name}: the edit took");
        let file = tmp.path().join(name);
        std::fs::write(&file, text).expect("writes");
        files.push(file);
    }
    let mut args: Vec<&std::ffi::OsStr> = vec!["validate".as_ref()];
    args.extend(files.iter().map(|f| f.as_os_str()));
    let out = check(&args);
    let said = said(&out);
    assert!(!out.status.success(), "the edited files passed:\n{said}");
    for ((name, _, field), file) in cases.iter().zip(&files) {
        let prefix = format!("error: {}: ", file.display());
        let errors: Vec<&str> = said.lines().filter(|l| l.starts_with(&prefix)).collect();
        assert!(!errors.is_empty(), "{name} passed:\n{said}");
        assert!(errors.iter().all(|l| l.contains(field)), "{name}: an error not about {field}:\n{said}");
    }
}

#[test]
fn the_chart_renders_and_validates_with_default_and_bucket_values() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let default = validated(&[render(&[], "default", tmp.path())], tmp.path());
    assert_eq!(kinds(&default), ["DaemonSet", "Service", "ServiceAccount"], "no ServiceMonitor by default");
    let ds = one(&default, "DaemonSet");
    let args = args_of(ds);
    assert_eq!(flag(&args, "--ship"), None);
    let env = container(ds)["env"].as_array().expect("env");
    assert!(env.iter().all(|e| !e["name"].as_str().unwrap_or("").starts_with("AWS_")), "{env:?}");

    let bucket_values = chart().join("ci/bucket-values.yaml");
    let bucket = validated(&[render(&[bucket_values], "bucket", tmp.path())], tmp.path());
    assert_eq!(kinds(&bucket), ["DaemonSet", "Service", "ServiceAccount", "ServiceMonitor"]);
    let ds = one(&bucket, "DaemonSet");
    let args = args_of(ds);
    assert_eq!(flag(&args, "--ship"), Some("s3://gpu-fleet/apron"));
    assert_eq!(flag(&args, "--data"), Some("/var/lib/apron"), "closed days are shipped from the data folder");
    assert_eq!(flag(&args, "--retain-raw"), Some("30d"), "extra flags come last");
    let env: BTreeMap<&str, &Value> = container(ds)["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| (e["name"].as_str().expect("name"), e))
        .collect();
    assert_eq!(env["AWS_REGION"]["value"], "eu-west-1");
    assert_eq!(env["AWS_ENDPOINT_URL"]["value"], "https://s3.example.invalid");
    assert!(!env.contains_key("AWS_ALLOW_HTTP"), "TLS unless asked");
    for (name, key) in
        [("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"), ("AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY")]
    {
        let from = &env[name]["valueFrom"]["secretKeyRef"];
        assert_eq!(from["name"], "apron-s3", "{name} from the existing Secret");
        assert_eq!(from["key"], key);
        assert!(env[name].get("value").is_none(), "{name} is never written into the manifest");
    }
    let monitor = one(&bucket, "ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");

    // Container log links not beside the pod logs: named, and mounted.
    let elsewhere = tmp.path().join("elsewhere.yaml");
    std::fs::write(&elsewhere, "kubelet:\n  podLogsDir: /srv/kubelet/pods\n  containerLogsDir: /srv/links\n")
        .expect("writes");
    let moved = validated(&[render(&[elsewhere], "elsewhere", tmp.path())], tmp.path());
    let ds = one(&moved, "DaemonSet");
    let args = args_of(ds);
    assert_eq!(flag(&args, "--pod-logs"), Some("/srv/kubelet/pods"));
    assert_eq!(flag(&args, "--container-logs"), Some("/srv/links"));
    let mounts = container(ds)["volumeMounts"].as_array().expect("mounts");
    assert!(mounts.iter().any(|m| m["mountPath"] == "/srv/links" && m["readOnly"] == true), "{mounts:?}");
    let default_ds = one(&default, "DaemonSet");
    assert_eq!(flag(&args_of(default_ds), "--container-logs"), None, "beside the pod logs by default");

    // Pod labels on: the flag, the token mounted, and a ClusterRole that
    // gets pods and nothing else, bound to the recorder's account alone.
    assert_eq!(flag(&args_of(default_ds), "--k8s-labels"), None, "off by default");
    let labels_values = chart().join("ci/labels-values.yaml");
    let labelled = validated(&[render(&[labels_values], "labels", tmp.path())], tmp.path());
    assert_eq!(
        kinds(&labelled),
        ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service", "ServiceAccount"]
    );
    let ds = one(&labelled, "DaemonSet");
    assert_eq!(flag(&args_of(ds), "--k8s-labels"), Some("team,example.com/cost-center"));
    assert_eq!(ds["spec"]["template"]["spec"]["automountServiceAccountToken"], true);
    assert_eq!(one(&labelled, "ServiceAccount")["automountServiceAccountToken"], true);
    let role = one(&labelled, "ClusterRole");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}])
    );
    let binding = one(&labelled, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "apron-recorder", "namespace": "apron"}])
    );
}

/// `object` without the labels Helm adds to every object's metadata.
fn without_chart_labels(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(labels) = object["metadata"]["labels"].as_object_mut() {
        for key in ["helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"] {
            labels.remove(key);
        }
    }
    object
}

#[test]
fn the_charts_default_render_is_the_plain_manifests() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plain = validated(&plain_files(), tmp.path());
    // The bucket values add a ServiceMonitor to compare; the default render
    // is compared without them.
    let default = validated(&[render(&[], "default", tmp.path())], tmp.path());
    for kind in ["DaemonSet", "Service", "ServiceAccount"] {
        assert_eq!(without_chart_labels(one(&default, kind)), *one(&plain, kind), "the chart's {kind}");
    }
    let monitor_values = tmp.path().join("monitor.yaml");
    std::fs::write(&monitor_values, "metrics:\n  serviceMonitor:\n    enabled: true\n").expect("writes");
    let with_monitor = validated(&[render(&[monitor_values], "monitor", tmp.path())], tmp.path());
    assert_eq!(
        without_chart_labels(one(&with_monitor, "ServiceMonitor")),
        *one(&plain, "ServiceMonitor"),
        "the chart's ServiceMonitor"
    );
}

/// The node this test plays, as the downward API names it.
const NODE: &str = "gpu-node01";

/// The container's environment as the kubelet gives it: plain values,
/// `spec.nodeName` as [`NODE`], and Secret keys from `secrets`
/// ((Secret, key) → value).
fn node_env(daemonset: &Value, secrets: &BTreeMap<(&str, &str), &str>) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for e in container(daemonset)["env"].as_array().expect("env") {
        let name = e["name"].as_str().expect("name").to_owned();
        let value = if let Some(v) = e["value"].as_str() {
            v.to_owned()
        } else if e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName" {
            NODE.to_owned()
        } else if let Some(secret) = e["valueFrom"]["secretKeyRef"].as_object() {
            let key = (secret["name"].as_str().expect("name"), secret["key"].as_str().expect("key"));
            secrets.get(&key).unwrap_or_else(|| panic!("no Secret key {key:?}")).to_string()
        } else {
            panic!("an env entry the test cannot play: {e}")
        };
        env.push((name, value));
    }
    env
}

/// The container's arguments as the kubelet expands them (`$(VAR)` from
/// `env`), each node path replaced by a temp one under `tmp` (folders made,
/// the kubelet's socket left absent), `nvml` by the simulated source and
/// `0.0.0.0:PORT` by `127.0.0.1:port`. Returns them and the paths' map.
fn node_args(
    daemonset: &Value,
    env: &[(String, String)],
    tmp: &Path,
    port: u16,
) -> (Vec<String>, BTreeMap<String, PathBuf>) {
    let mut paths = BTreeMap::new();
    let args = args_of(daemonset)
        .into_iter()
        .map(|a| {
            let a = env.iter().fold(a, |a, (k, v)| a.replace(&format!("$({k})"), v));
            if a.starts_with('/') {
                let n = paths.len();
                let local = paths.entry(a.clone()).or_insert_with(|| tmp.join(format!("node-path-{n}")));
                if !a.ends_with(".sock") {
                    std::fs::create_dir_all(&*local).expect("mkdir");
                }
                local.to_string_lossy().into_owned()
            } else if a == "nvml" {
                "sim".to_owned()
            } else if a.starts_with("0.0.0.0:") {
                format!("127.0.0.1:{port}")
            } else {
                a
            }
        })
        .collect();
    (args, paths)
}

/// The recorder started with `args` and `env` only (no AWS variables of
/// this machine's), two simulated GPUs, its log in `log`.
fn start_recorder(args: &[String], env: &[(String, String)], log: &Path) -> std::process::Child {
    let mut cmd = Command::new(apron_tests::bin("apron-recorder"));
    cmd.args(args)
        .args(["--sim-gpus", "2", "--interval", "200ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.spawn().expect("the recorder starts")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn the_recorder_runs_with_the_daemonsets_arguments() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let objects = validated(&plain_files(), tmp.path());
    let ds = one(&objects, "DaemonSet");
    let env = node_env(ds, &BTreeMap::new());
    let port = free_port();
    let (args, paths) = node_args(ds, &env, tmp.path(), port);
    assert!(args.iter().any(|a| a == "sim") && args.iter().any(|a| a == NODE), "{args:?}");
    let log = tmp.path().join("recorder.log");
    let mut child = start_recorder(&args, &env, &log);
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Ok((200, body)) = http_get(&addr, "/metrics")
            && body.contains("DCGM_FI_DEV_GPU_UTIL{")
        {
            break body;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the recorder refused the DaemonSet's arguments {args:?}: {status}\n{}", read(&log));
        }
        if Instant::now() > deadline {
            apron_tests::signal(&child, libc::SIGKILL);
            panic!("no GPU series at {addr}/metrics within 30 s:\n{}", read(&log));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let gpu_lines = body.lines().filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{")).collect::<Vec<_>>();
    assert_eq!(gpu_lines.len(), 2, "two simulated GPUs: {gpu_lines:?}");
    let hostname = format!("Hostname=\"{NODE}\"");
    assert!(gpu_lines.iter().all(|l| l.contains(&hostname)), "under the node's name: {gpu_lines:?}");
    apron_tests::signal(&child, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "the recorder failed with the DaemonSet's arguments: {}\n{}",
        out.status,
        read(&log)
    );
    let data = &paths[flag(&args_of(ds), "--data").expect("--data")];
    assert!(!apron_tests::files_under(data).is_empty(), "it wrote into --data:\n{}", read(&log));
}

/// The chart's bucket values, the endpoint pointed at a real S3 server
/// (SeaweedFS) and the keys given as the kubelet gives a Secret's: the
/// recorder run with the rendered arguments and environment ships every
/// closed day, and the bucket, listed with a client of the test's own,
/// holds exactly those files under the prefix.
#[test]
fn the_charts_bucket_values_ship_closed_days_to_a_real_s3_server() {
    use apron_tests::s3::{ACCESS_KEY, BUCKET, S3Server, SECRET_KEY};
    use futures::TryStreamExt;
    use object_store::ObjectStore;

    let server = S3Server::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let here = tmp.path().join("here.yaml");
    let values = format!(
        "ship:\n  url: s3://{BUCKET}/fleet\n  region: us-east-1\n  endpoint: {}\n  allowHttp: true\n\
         extraArgs: [--retain-raw, 30d, --ship-every, 200ms]\n",
        server.endpoint()
    );
    std::fs::write(&here, values).expect("writes");
    let rendered = render(&[chart().join("ci/bucket-values.yaml"), here], "bucket-here", tmp.path());
    let objects = validated(&[rendered], tmp.path());
    let ds = one(&objects, "DaemonSet");
    let secrets = BTreeMap::from([
        (("apron-s3", "AWS_ACCESS_KEY_ID"), ACCESS_KEY),
        (("apron-s3", "AWS_SECRET_ACCESS_KEY"), SECRET_KEY),
    ]);
    let env = node_env(ds, &secrets);
    let (args, paths) = node_args(ds, &env, tmp.path(), free_port());
    let data = paths[flag(&args_of(ds), "--data").expect("--data")].clone();

    // Two closed days of this node, as a recorder that ran before left them.
    let out = Command::new(apron_tests::bin("apron-recorder"))
        .args(["simulate", "--gpus", "2", "--days", "2", "--interval", "60s", "--data"])
        .arg(&data)
        .output()
        .expect("simulate runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let closed: std::collections::BTreeSet<String> = apron_tests::files_under(&data)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p| p.strip_prefix(&data).expect("under data").to_string_lossy().into_owned())
        .collect();
    assert!(!closed.is_empty() && closed.iter().all(|p| p.contains(&format!("host={NODE}"))), "{closed:?}");

    let log = tmp.path().join("recorder.log");
    let mut child = start_recorder(&args, &env, &log);
    let t0 = Instant::now();
    while read(&log).lines().filter(|l| l.contains("shipped a closed day's file")).count() < closed.len() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the recorder exited ({status}) with {args:?}:\n{}", read(&log));
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "not every closed day shipped:\n{}", read(&log));
        std::thread::sleep(Duration::from_millis(200));
    }
    apron_tests::signal(&child, libc::SIGTERM);
    let out = apron_tests::wait_with_timeout(child, Duration::from_secs(30));
    assert!(out.status.success(), "{}", read(&log));
    assert!(!read(&log).contains("cannot ship"), "{}", read(&log));

    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_region("us-east-1")
        .with_endpoint(server.endpoint())
        .with_allow_http(true)
        .with_access_key_id(ACCESS_KEY)
        .with_secret_access_key(SECRET_KEY)
        .build()
        .expect("a client");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let prefix = object_store::path::Path::from("fleet");
    let listed: Vec<_> = runtime.block_on(store.list(Some(&prefix)).try_collect()).expect("lists");
    let keys: std::collections::BTreeSet<String> = listed
        .iter()
        .map(|m| m.location.as_ref().strip_prefix("fleet/").expect("under the prefix").to_owned())
        .collect();
    assert_eq!(keys, closed, "the bucket holds exactly the closed days' files");
}

/// A child process, killed and reaped when dropped.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process of another user (uid 1000) in a pod's cgroup, claiming a
/// namespace in its environment and holding a GPU of the fake NVML, seen by
/// the recorder run as the DaemonSet runs it (uid 0, every capability
/// dropped: `setpriv`) and as the image runs it by default (uid 65532): both
/// read its uid, command and cgroup (pod uid, container), which need no
/// privilege, and neither can read its environment (mode 0400, guarded as
/// ptrace is: it needs `CAP_DAC_READ_SEARCH` and `CAP_SYS_PTRACE`), so the
/// claim is not even recorded; with those two, as the systemd unit keeps
/// them, it is.
#[test]
fn without_capabilities_the_recorder_still_knows_whose_process_it_is() {
    use std::os::unix::fs::PermissionsExt;

    const POD: &str = "6f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f";
    let container = "cd".repeat(32);
    let tmp = tempfile::tempdir().expect("tempdir");
    // Others may enter (the uid 65532 run reads the fake NVML from here).
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let sleeper = Command::new("setpriv")
        .args([
            "--reuid",
            "1000",
            "--regid",
            "1000",
            "--clear-groups",
            "--",
            "env",
            "-i",
            "POD_NAMESPACE=prod",
        ])
        .args(["sleep", "600"])
        .stdin(Stdio::null())
        .spawn()
        .expect("setpriv (util-linux) runs");
    // Killed when the test ends, passed or not.
    let sleeper = KilledOnDrop(sleeper);
    let pid = sleeper.0.id();
    // env and sleep replace setpriv in the same process; wait for sleep.
    let t0 = Instant::now();
    while read(Path::new(&format!("/proc/{pid}/comm"))).trim() != "sleep" {
        assert!(t0.elapsed() < Duration::from_secs(5), "the sleeper did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _cgroup =
        apron_tests::cgroup::Cgroup::enter(&format!("/kubepods/besteffort/pod{POD}/{container}"), pid);
    let gib = 1u64 << 30;
    let gpus = format!("uuid=GPU-d0,util=0,fb_total=85899345920,fb_used={gib},compute={pid}:{gib}");

    // The contrast: with the systemd unit's two capabilities (environ is
    // its owner's, mode 0400, and guarded as ptrace is) the same recorder
    // reads the claim, so its absence without them is their doing.
    let cases: [(&str, &[&str], Option<&str>); 3] = [
        ("uid 0 without capabilities", &["--inh-caps=-all", "--bounding-set=-all"], None),
        (
            "uid 65532",
            &[
                "--reuid",
                "65532",
                "--regid",
                "65532",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
            ],
            None,
        ),
        (
            "uid 0 with CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE",
            &["--inh-caps=-all", "--bounding-set=-all,+dac_read_search,+sys_ptrace"],
            Some("prod"),
        ),
    ];
    for (who, privileges, claim) in cases {
        let data = tmp.path().join(format!("data-{}", who.replace(' ', "-")));
        std::fs::create_dir(&data).expect("mkdir");
        if who == "uid 65532" {
            std::os::unix::fs::chown(&data, Some(65532), Some(65532)).expect("chown");
        }
        let log = tmp.path().join("recorder.log");
        let recorder = Command::new("setpriv")
            .args(privileges)
            .arg("--")
            .arg(apron_tests::bin("apron-recorder"))
            .arg("--data")
            .arg(&data)
            .args(["--source", "nvml", "--host", NODE, "--interval", "200ms", "--nvml-lib"])
            .arg(apron_tests::fake_nvml())
            .env("FAKE_NVML_GPUS", &gpus)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("the recorder starts");
        // A few ticks, then the rows are on disk once it has stopped.
        std::thread::sleep(Duration::from_secs(2));
        apron_tests::signal(&recorder, libc::SIGTERM);
        let out = apron_tests::wait_with_timeout(recorder, Duration::from_secs(30));
        assert!(out.status.success(), "{who}: the recorder failed: {}\n{}", out.status, read(&log));
        let query = "SELECT max(comm) AS comm, max(uid) AS uid, max(k8s_pod_uid) AS k8s_pod_uid, \
                     max(container_id) AS container_id, max(claimed_k8s_namespace) AS claimed, count(*) AS n \
                     FROM proc_samples WHERE pid = $1";
        let json =
            apron_tests::stdout_of(Command::new(apron_tests::bin("apron")).arg("--data").arg(&data).args([
                "--format",
                "json",
                "sql",
                query,
                "--param",
                &format!("1={pid}"),
            ]));
        let rows: Vec<Value> = serde_json::from_str(&json).expect("JSON rows");
        let row = &rows[0];
        assert!(
            row["n"].as_i64().is_some_and(|n| n >= 2),
            "{who}: the process is recorded: {row}\n{}",
            read(&log)
        );
        assert_eq!(row["comm"], "sleep", "{who}: {row}");
        assert_eq!(row["uid"], 1000, "{who}: {row}");
        assert_eq!(row["k8s_pod_uid"], POD, "{who}: {row}");
        assert_eq!(row["container_id"].as_str(), Some(container.as_str()), "{who}: {row}");
        assert_eq!(row["claimed"].as_str(), claim, "{who}: another user's environment: {row}");
    }
}

#[test]
fn hadolint_finds_nothing_in_the_dockerfile() {
    let out = Command::new(apron_tests::k8s::hadolint())
        .arg("--failure-threshold")
        .arg("info")
        .arg(deploy().join("Dockerfile"))
        .output()
        .expect("hadolint runs");
    assert!(out.status.success(), "hadolint on recorder/deploy/Dockerfile:\n{}", said(&out));
}

#[test]
fn the_dockerfile_copies_what_its_build_makes_from_a_context_that_has_the_workspace() {
    let text = std::fs::read_to_string(deploy().join("Dockerfile")).expect("the Dockerfile reads");
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    assert!(
        lines.iter().any(|l| l.contains("cargo build --release -p apron-recorder --locked")),
        "the recorder alone, from the lock file: {text}"
    );
    assert!(text.contains("target/release/apron-recorder /out/apron-recorder"), "{text}");
    assert!(text.contains("COPY --from=build /out/apron-recorder /usr/local/bin/apron-recorder"), "{text}");
    assert!(text.contains("ENTRYPOINT [\"/usr/local/bin/apron-recorder\"]"), "{text}");
    for env in ["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=utility"] {
        assert!(text.contains(env), "{env}: {text}");
    }
    assert!(
        lines.iter().any(|l| l.starts_with("USER ") && !l.contains(" 0") && !l.contains("root")),
        "{text}"
    );

    // The context (the repository root, less Dockerfile.dockerignore) keeps
    // every workspace member and the lock file `--locked` needs.
    let ignore = std::fs::read_to_string(deploy().join("Dockerfile.dockerignore")).expect("reads");
    let ignored: Vec<&str> =
        ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members_line = manifest.lines().find(|l| l.starts_with("members")).expect("members");
    let members: Vec<&str> = members_line.split('"').skip(1).step_by(2).collect();
    assert!(members.contains(&"recorder"), "{members:?}");
    for needed in members.iter().copied().chain(["Cargo.lock", "Cargo.toml"]) {
        assert!(root().join(needed).exists(), "{needed} exists");
        let first = needed.split('/').next().unwrap_or(needed);
        assert!(
            !ignored.contains(&first) && !ignored.contains(&needed),
            "{needed} is left out of the context by {ignored:?}"
        );
    }
    assert!(ignored.contains(&"target"), "the build folder stays out of the context");
}

#[test]
fn the_recorder_links_nothing_its_runtime_image_lacks() {
    // gcr.io/distroless/cc-debian12 has glibc and libgcc_s; libnvidia-ml is
    // loaded at run time (dlopen), from what the NVIDIA runtime mounts.
    let runtime = ["linux-vdso.so.1", "libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"];
    let binary = apron_tests::bin("apron-recorder");
    let out = Command::new("ldd").arg(&binary).output().expect("ldd runs");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ldd {}: {}", binary.display(), said(&out));
    let libs: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(|l| l.rsplit('/').next().unwrap_or(l))
        .collect();
    assert!(libs.contains(&"libc.so.6"), "{listed}");
    let missing: Vec<&&str> = libs.iter().filter(|l| !runtime.contains(l)).collect();
    assert!(
        missing.is_empty(),
        "the recorder links {missing:?}, which the runtime image does not have:\n{listed}"
    );
}
