//! dcgm-exporter series from a Prometheus server's HTTP API
//! (`/api/v1/query_range`), into `gpu_samples` rows, and `proc_samples`
//! rows for the Kubernetes pods dcgm-exporter names.
//!
//! Each step of `--step` over `[--from, --to)` becomes one row per GPU,
//! standing for that step (`interval_ms` = the step, `ts` its start):
//! gauges are the mean of the samples Prometheus holds in the step
//! (`avg_over_time(M[step] offset 1ms)` evaluated at the step's end: the
//! samples of [start, end), so no sample counts in two steps), counters
//! and bitmasks the last value (`last_over_time`). A step with no sample of a GPU has no row: it stays
//! unrecorded, never idle. Units become the schema's: MiB to bytes, W to
//! mW, ratios (0–1) to percent; `fb_total_bytes` is FB_USED + FB_FREE (+
//! FB_RESERVED where exported).
//!
//! One host per `Hostname` label (else `instance` without its port), each
//! GPU by its `UUID` label (else the synthetic UUID of host and `gpu`),
//! `gpu` its index, `modelName` its model.
//!
//! Pods: dcgm-exporter with Kubernetes mapping labels a GPU's series with
//! the `pod`, `namespace` and `container` holding it. Each step of such a
//! series becomes one `proc_samples` row on that GPU: `k8s_namespace` the
//! namespace, `comm` the pod's name, `used_mem_bytes` the GPU's FB_USED
//! (the pod holds the whole GPU), and a synthetic `pid` from namespace,
//! pod and container, above Linux's largest pid (2^22) so it never meets
//! a real one. Without pod labels there are no process rows: every GPU-minute
//! is `(unallocated)`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use apron_schemas::paths::validate_host;
use apron_schemas::time::DAY_MS;
use apron_schemas::{GpuSample, ProcIdentity, ProcSample, Text};
use serde_json::Value;

use super::ranges::{self, Range, TextLimit};
use super::{HostRows, ImportError, synthetic_uuid};

/// What to import.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server, e.g. `http://prometheus:9090`.
    pub url: String,
    /// Period start (inclusive), ms since the epoch.
    pub from_ms: i64,
    /// Period end (exclusive), ms since the epoch.
    pub to_ms: i64,
    /// The step: the time each row stands for, ms.
    pub step_ms: i64,
}

/// How a series' value goes into a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    GpuUtil,
    MemUtil,
    FbUsed,
    FbFree,
    FbReserved,
    Power,
    PowerLimit,
    Energy,
    Temp,
    SmClock,
    EncUtil,
    DecUtil,
    SmActive,
    GrEngineActive,
    SmOccupancy,
    TensorActive,
    DramActive,
    PcieTx,
    PcieRx,
    ClockEvents,
    /// nvidia_gpu_exporter's total memory (MiB once scaled).
    FbTotal,
    /// nvidia_gpu_exporter's index, a value rather than a label.
    Index,
    /// nvidia_gpu_exporter's `nvidia_smi_gpu_info`: its labels name the
    /// model (and index); its value (1) is nothing.
    Info,
}

/// A series imported: its name, the aggregation over a step, where it
/// goes, and the factor to dcgm-exporter's unit of that target (MiB, W,
/// %, ratios 0–1 for the profiling fields).
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The series' name.
    pub name: &'static str,
    func: &'static str,
    target: Target,
    scale: f64,
}

const fn m(name: &'static str, func: &'static str, target: Target, scale: f64) -> Metric {
    Metric { name, func, target, scale }
}

const AVG: &str = "avg_over_time";
const LAST: &str = "last_over_time";

/// The series imported: dcgm-exporter's (2.x and later), its 1.x names
/// (`etc/1.x-compatibility-metrics.csv`, which 2.x and 3.x still serve on
/// request), and nvidia_gpu_exporter's `nvidia_smi_*` (bytes, watts and
/// ratios of 0–1).
pub const SERIES: [Metric; 42] = [
    m("DCGM_FI_DEV_GPU_UTIL", AVG, Target::GpuUtil, 1.0),
    m("DCGM_FI_DEV_MEM_COPY_UTIL", AVG, Target::MemUtil, 1.0),
    m("DCGM_FI_DEV_FB_USED", AVG, Target::FbUsed, 1.0),
    m("DCGM_FI_DEV_FB_FREE", AVG, Target::FbFree, 1.0),
    m("DCGM_FI_DEV_FB_RESERVED", AVG, Target::FbReserved, 1.0),
    m("DCGM_FI_DEV_POWER_USAGE", AVG, Target::Power, 1.0),
    m("DCGM_FI_DEV_POWER_MGMT_LIMIT", AVG, Target::PowerLimit, 1.0),
    m("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", LAST, Target::Energy, 1.0),
    m("DCGM_FI_DEV_GPU_TEMP", AVG, Target::Temp, 1.0),
    m("DCGM_FI_DEV_SM_CLOCK", AVG, Target::SmClock, 1.0),
    m("DCGM_FI_DEV_ENC_UTIL", AVG, Target::EncUtil, 1.0),
    m("DCGM_FI_DEV_DEC_UTIL", AVG, Target::DecUtil, 1.0),
    m("DCGM_FI_PROF_SM_ACTIVE", AVG, Target::SmActive, 1.0),
    m("DCGM_FI_PROF_GR_ENGINE_ACTIVE", AVG, Target::GrEngineActive, 1.0),
    m("DCGM_FI_PROF_SM_OCCUPANCY", AVG, Target::SmOccupancy, 1.0),
    m("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", AVG, Target::TensorActive, 1.0),
    m("DCGM_FI_PROF_DRAM_ACTIVE", AVG, Target::DramActive, 1.0),
    m("DCGM_FI_PROF_PCIE_TX_BYTES", AVG, Target::PcieTx, 1.0),
    m("DCGM_FI_PROF_PCIE_RX_BYTES", AVG, Target::PcieRx, 1.0),
    m("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", LAST, Target::ClockEvents, 1.0),
    m("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", LAST, Target::ClockEvents, 1.0),
    // dcgm-exporter 1.x.
    m("dcgm_gpu_utilization", AVG, Target::GpuUtil, 1.0),
    m("dcgm_mem_copy_utilization", AVG, Target::MemUtil, 1.0),
    m("dcgm_enc_utilization", AVG, Target::EncUtil, 1.0),
    m("dcgm_dec_utilization", AVG, Target::DecUtil, 1.0),
    m("dcgm_fb_used", AVG, Target::FbUsed, 1.0),
    m("dcgm_fb_free", AVG, Target::FbFree, 1.0),
    m("dcgm_power_usage", AVG, Target::Power, 1.0),
    m("dcgm_total_energy_consumption", LAST, Target::Energy, 1.0),
    m("dcgm_gpu_temp", AVG, Target::Temp, 1.0),
    m("dcgm_sm_clock", AVG, Target::SmClock, 1.0),
    m("dcgm_fi_prof_gr_engine_active", AVG, Target::GrEngineActive, 1.0),
    m("dcgm_fi_prof_pipe_tensor_active", AVG, Target::TensorActive, 1.0),
    m("dcgm_fi_prof_dram_active", AVG, Target::DramActive, 1.0),
    // nvidia_gpu_exporter.
    m("nvidia_smi_utilization_gpu_ratio", AVG, Target::GpuUtil, 100.0),
    m("nvidia_smi_utilization_memory_ratio", AVG, Target::MemUtil, 100.0),
    m("nvidia_smi_memory_used_bytes", AVG, Target::FbUsed, 1.0 / MIB),
    m("nvidia_smi_memory_total_bytes", AVG, Target::FbTotal, 1.0 / MIB),
    m("nvidia_smi_power_draw_watts", AVG, Target::Power, 1.0),
    m("nvidia_smi_temperature_gpu", AVG, Target::Temp, 1.0),
    m("nvidia_smi_gpu_info", LAST, Target::Info, 1.0),
    m("nvidia_smi_index", LAST, Target::Index, 1.0),
];

/// The metric of series `name`, when apron imports it.
pub fn metric(name: &str) -> Option<&'static Metric> {
    SERIES.iter().find(|m| m.name == name)
}

/// The most steps one query asks for (Prometheus refuses more than 11,000
/// points per series).
const STEPS_PER_QUERY: i64 = 10_000;

const MIB: f64 = 1_048_576.0;

/// One GPU-step being assembled from the series.
#[derive(Debug, Default)]
struct Acc {
    sample: GpuSample,
    fb_free: Option<f64>,
    fb_reserved: Option<f64>,
}

/// Key of a pod's row: (GPU UUID, pid, ts).
type PodKey = (Text, i32, i64);

/// A series' labels, in any order.
pub type Labels = [(String, String)];

/// The rows being assembled from series, per host.
#[derive(Debug, Default)]
pub struct Rows {
    gpus: BTreeMap<(String, Text, i64), Acc>,
    pods: BTreeMap<String, HashMap<PodKey, ProcSample>>,
}

impl Rows {
    /// Whether no series gave a row.
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }

    /// The rows of each host; `what` (the server, the file) names the
    /// input in an error.
    pub fn finish(self, what: &str) -> Result<BTreeMap<String, HostRows>, ImportError> {
        let mut out: BTreeMap<String, HostRows> = BTreeMap::new();
        for ((host, uuid, ts), acc) in self.gpus {
            let mut g = acc.sample;
            if g.fb_total_bytes.is_none()
                && let Some(used) = g.fb_used_bytes
                && let Some(free) = acc.fb_free
            {
                let reserved = acc.fb_reserved.unwrap_or(0.0);
                let total = used as f64 + ((free + reserved) * MIB).round();
                let raw = format!("{total} bytes (used + free + reserved)");
                let total = ranges::FB_TOTAL_BYTES.i64(total, &raw).map_err(|m| ImportError::Input {
                    what: what.to_owned(),
                    message: format!("memory of GPU {uuid} on host {host} at {}: {m}", rfc3339(ts)),
                })?;
                g.fb_total_bytes = Some(total);
            }
            out.entry(host).or_default().gpus.push(g);
        }
        for (host, rows) in self.pods {
            out.entry(host).or_default().procs.extend(rows.into_values());
        }
        Ok(out)
    }
}

/// What an import met that it did something about, said once at its end.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Findings {
    /// Values that were DCGM's "blank" markers (no value, not found, not
    /// supported, not permitted), which dcgm-exporter before 4.4.1 exports
    /// as numbers: dropped.
    pub blanks: u64,
    /// Pods named by the `pod` label that are the exporter's own (scraped
    /// without `honorLabels`): not taken as the GPUs' workloads.
    pub exporter_pods: BTreeSet<String>,
    /// `Hostname` labels that are the exporter pod's name (dcgm-exporter
    /// before 2.x), each with the host taken instead (its `node` label).
    pub pod_hostnames: BTreeMap<String, String>,
}

impl Findings {
    /// The lines saying what was found and done.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.blanks > 0 {
            out.push(format!(
                "dropped {} values that are DCGM's blank markers (no value, not found, not supported, \
                 not permitted; dcgm-exporter before 4.4.1 exports them as numbers such as 2147483632 or \
                 9223372036854775794)",
                self.blanks
            ));
        }
        if !self.exporter_pods.is_empty() {
            let pods: Vec<&str> = self.exporter_pods.iter().map(String::as_str).collect();
            out.push(format!(
                "ignored the pod label {}: it names the exporter's own pod (the series were scraped \
                 without honorLabels, so Prometheus kept the target's pod label), not a workload on the \
                 GPU; set honorLabels: true in the ServiceMonitor to keep dcgm-exporter's pod labels",
                pods.join(", ")
            ));
        }
        for (hostname, node) in &self.pod_hostnames {
            out.push(format!(
                "Hostname {hostname:?} is the exporter pod's name (dcgm-exporter before 2.x): its series \
                 were taken as host {node} (their node label)"
            ));
        }
        out
    }

    /// Both findings together.
    pub fn merge(&mut self, other: Findings) {
        self.blanks += other.blanks;
        self.exporter_pods.extend(other.exporter_pods);
        self.pod_hostnames.extend(other.pod_hostnames);
    }
}

/// Queries the server and returns the rows of each host and what the
/// import found. `progress(done, total)` counts queries.
pub async fn read(
    opts: &Options,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(BTreeMap<String, HostRows>, Findings), ImportError> {
    let base = opts.url.trim_end_matches('/').to_owned();
    let endpoint = format!("{base}/api/v1/query_range");
    // The request sends the URL's credentials (as basic authentication);
    // what is shown hides them.
    let shown = apron_store::redact::userinfo(&endpoint).into_owned();
    let fail = |message: String| ImportError::Prometheus { url: shown.clone(), message };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| fail(crate::one_line(&e)))?;
    let step = opts.step_ms;
    // Evaluation times: the end of each step in [from, to).
    let first_end = opts.from_ms + step;
    let n_steps = if opts.to_ms >= first_end { (opts.to_ms - first_end) / step + 1 } else { 0 };
    if n_steps == 0 {
        return Err(too_short(opts));
    }
    let chunks = (n_steps + STEPS_PER_QUERY - 1) / STEPS_PER_QUERY;
    let total = SERIES.len() as u64 * chunks as u64;
    let mut done = 0;
    let mut rows = Rows::default();
    let mut findings = Findings::default();
    for metric in &SERIES {
        let query = format!("{}({}[{step}ms] offset 1ms)", metric.func, metric.name);
        for chunk in 0..chunks {
            let start = first_end + chunk * STEPS_PER_QUERY * step;
            let end = (start + (STEPS_PER_QUERY - 1) * step).min(first_end + (n_steps - 1) * step);
            let result = query_range(&client, &endpoint, &query, start, end, step).await.map_err(fail)?;
            for series in result {
                let labels: Vec<(String, String)> = series["metric"]
                    .as_object()
                    .map(|o| {
                        o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned())).collect()
                    })
                    .unwrap_or_default();
                let Some(values) = series["values"].as_array() else { continue };
                let mut points = Vec::with_capacity(values.len());
                for point in values {
                    let (Some(t), Some(raw)) = (point[0].as_f64(), point[1].as_str()) else {
                        return Err(fail(format!("{query}: a point is not [time, \"value\"]: {point}")));
                    };
                    let Ok(v) = raw.parse::<f64>() else {
                        return Err(fail(format!("{query}: {raw:?} is not a number")));
                    };
                    // A step's row starts a step before its evaluation time.
                    points.push(((t * 1_000.0).round() as i64 - step, v, raw.to_owned()));
                }
                let series = Series { metric, labels: &labels, host: None, interval_ms: step };
                add_series(&series, &points, &mut rows, &mut findings).map_err(|e| match e {
                    SeriesError::Answer(m) => fail(format!("{query}: {m}")),
                    SeriesError::Value(message) => ImportError::Input { what: base.clone(), message },
                })?;
            }
            done += 1;
            progress(done, total);
        }
    }
    Ok((rows.finish(&base)?, findings))
}

/// The server's URL as messages show it: without a trailing `/`, nor the
/// credentials it may hold.
pub fn shown_url(opts: &Options) -> String {
    apron_store::redact::userinfo(opts.url.trim_end_matches('/')).into_owned()
}

/// The error of an import that found no series in its whole period.
pub fn nothing_found(opts: &Options) -> ImportError {
    ImportError::Input {
        what: shown_url(opts),
        message: "no GPU series in the period (dcgm-exporter's DCGM_FI_DEV_* and DCGM_FI_PROF_*, its 1.x \
                  dcgm_*, nvidia_gpu_exporter's nvidia_smi_*)"
            .into(),
    }
}

/// The error of a period shorter than one step (no row to ask for).
pub fn too_short(opts: &Options) -> ImportError {
    ImportError::Input { what: shown_url(opts), message: "the period is shorter than one --step".into() }
}

/// `[from, to)` cut into parts of at most one UTC day, each read and
/// written before the next is asked for, so an import holds one day of the
/// fleet's rows at a time, not the whole period's. A cut falls on the
/// first step boundary (`from + k × step`) at or after each UTC midnight,
/// so the steps are those of the whole period; a part shorter than one
/// step (the period's tail) is left out, as the whole-period query leaves
/// it.
pub fn day_parts(opts: &Options) -> Vec<Options> {
    let step = opts.step_ms.max(1);
    let mut parts = Vec::new();
    let mut from = opts.from_ms;
    while from < opts.to_ms {
        let midnight = (from.div_euclid(DAY_MS) + 1) * DAY_MS;
        let cut = from + (midnight - from + step - 1) / step * step;
        let to = cut.min(opts.to_ms);
        if to - from >= step {
            parts.push(Options { from_ms: from, to_ms: to, ..opts.clone() });
        }
        from = cut;
    }
    parts
}

/// `GET /api/v1/query_range`: the `result` of a matrix answer.
async fn query_range(
    client: &reqwest::Client,
    endpoint: &str,
    query: &str,
    start_ms: i64,
    end_ms: i64,
    step_ms: i64,
) -> Result<Vec<Value>, String> {
    let secs = |ms: i64| format!("{}.{:03}", ms.div_euclid(1_000), ms.rem_euclid(1_000));
    let url = url::Url::parse_with_params(
        endpoint,
        &[
            ("query", query.to_owned()),
            ("start", secs(start_ms)),
            ("end", secs(end_ms)),
            ("step", secs(step_ms)),
        ],
    )
    .map_err(|e| e.to_string())?;
    let response = client.get(url).send().await.map_err(|e| crate::one_line(&e))?;
    let status = response.status();
    let body = response.text().await.map_err(|e| crate::one_line(&e))?;
    let json: Value = serde_json::from_str(&body).map_err(|_| {
        let head: String = body.chars().take(200).collect();
        format!("HTTP {status}, not a Prometheus answer: {head:?}")
    })?;
    if json["status"] != "success" {
        return Err(format!(
            "{}: {}",
            json["errorType"].as_str().unwrap_or("error"),
            json["error"].as_str().unwrap_or("no message")
        ));
    }
    match json["data"]["result"].as_array() {
        Some(result) => Ok(result.clone()),
        None => Err("the answer has no data.result".into()),
    }
}

/// A label of a series, when set and not empty.
fn label<'a>(labels: &'a Labels, name: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|s| !s.is_empty())
}

/// `{k="v",…}`: a series' labels as messages show them.
fn shown_labels(labels: &Labels) -> String {
    let parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", parts.join(","))
}

/// Whether `name` is a dcgm-exporter pod's name (`dcgm-exporter-6ldbb`,
/// `nvidia-dcgm-exporter-57pvc`): the DaemonSet's name, which holds
/// `exporter`, then `-` and the 5 characters Kubernetes adds.
pub fn is_exporter_pod_name(name: &str) -> bool {
    let Some((base, suffix)) = name.rsplit_once('-') else { return false };
    base.contains("exporter")
        && suffix.len() == 5
        && suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// The host of a series: its `Hostname`, else its `node`, else its
/// `instance` without the port, with any character a partition name
/// cannot hold made `_`. A `Hostname` that is the exporter pod's name
/// (dcgm-exporter before 2.x) gives way to `node`, and is refused without
/// one: a node's history would split each time the pod is made again.
fn host_of(labels: &Labels, findings: &mut Findings) -> Result<String, String> {
    let node = label(labels, "node");
    let raw = match (label(labels, "Hostname"), node, label(labels, "instance")) {
        (Some(h), Some(n), _) if is_exporter_pod_name(h) => {
            findings.pod_hostnames.insert(h.to_owned(), n.to_owned());
            n.to_owned()
        }
        (Some(h), None, _) if is_exporter_pod_name(h) => {
            return Err(format!(
                "Hostname {h:?} is the exporter pod's name (dcgm-exporter before 2.x), not the node's, \
                 and no node label names the node: add one (relabel __meta_kubernetes_pod_node_name to \
                 node), or import a saved scrape with --host"
            ));
        }
        (Some(h), _, _) => h.to_owned(),
        (None, Some(n), _) => n.to_owned(),
        (None, None, Some(i)) => i.rsplit_once(':').map_or(i, |(h, _)| h).to_owned(),
        (None, None, None) => {
            return Err(format!(
                "a series has neither a Hostname, a node nor an instance label: {}",
                shown_labels(labels)
            ));
        }
    };
    let host: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' })
        .collect();
    validate_host(&host).map_err(|e| e.to_string())?;
    Ok(host)
}

/// The workload pod of a series: `exported_pod` (and its namespace and
/// container) where Prometheus renamed dcgm-exporter's labels because
/// the target had its own, else `pod` (1.x: `pod_name`), unless that is
/// the exporter's own pod (scraped without `honorLabels`: it starts with
/// the scrape job's or service's name, or is a dcgm-exporter pod).
fn pod_of<'a>(
    labels: &'a Labels,
    findings: &mut Findings,
) -> Option<(&'a str, Option<&'a str>, Option<&'a str>)> {
    if let Some(pod) = label(labels, "exported_pod") {
        return Some((pod, label(labels, "exported_namespace"), label(labels, "exported_container")));
    }
    let pod = label(labels, "pod").or_else(|| label(labels, "pod_name"))?;
    let own = ["job", "service"]
        .iter()
        .filter_map(|l| label(labels, l))
        .any(|target| pod.strip_prefix(target).is_some_and(|rest| rest.starts_with('-')))
        || (pod.contains("dcgm-exporter") && is_exporter_pod_name(pod));
    if own {
        findings.exporter_pods.insert(pod.to_owned());
        return None;
    }
    let namespace = label(labels, "namespace").or_else(|| label(labels, "pod_namespace"));
    let container = label(labels, "container").or_else(|| label(labels, "container_name"));
    Some((pod, namespace, container))
}

/// Whether `v` is one of DCGM's blank markers: the int32 ones
/// (`DCGM_INT32_BLANK` 2147483632 and the 3 after it, up to `i32::MAX`
/// as exporters print it), the int64 ones (9223372036854775792 and up)
/// and the float ones (`DCGM_FP64_BLANK` 140737488355328.0 and the 3
/// after it). A total energy counter (mJ) passes the int32 ones in its
/// life: its blanks are the int64 ones only.
pub fn is_blank(v: f64, target_is_energy: bool) -> bool {
    (!target_is_energy && (2_147_483_632.0..=2_147_483_647.0).contains(&v))
        || v >= 9_223_372_036_854_775_792.0
        || (140_737_488_355_328.0..=140_737_488_355_331.0).contains(&v)
}

/// Why a series cannot be imported.
#[derive(Debug)]
pub enum SeriesError {
    /// The answer is not one Prometheus gives (a point that is no
    /// `[time, "value"]`, a series without a host label).
    Answer(String),
    /// A label or a value no GPU has, with its series (and time).
    Value(String),
}

/// `ms` since the epoch as an RFC 3339 UTC time.
fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| format!("{ms} ms"), |t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// A series to add: its metric, labels, and the row's host (`None`: from
/// the labels) and interval.
#[derive(Debug)]
pub struct Series<'a> {
    /// The metric the series is of.
    pub metric: &'a Metric,
    /// Its labels.
    pub labels: &'a Labels,
    /// The host its rows go to; `None` for the one its labels say.
    pub host: Option<&'a str>,
    /// The time each row stands for, ms.
    pub interval_ms: i64,
}

/// Adds a series' points (a row's start in ms, the value and its text)
/// to `rows`.
pub fn add_series(
    series: &Series<'_>,
    points: &[(i64, f64, String)],
    rows: &mut Rows,
    findings: &mut Findings,
) -> Result<(), SeriesError> {
    let (metric, labels) = (series.metric, series.labels);
    let name = metric.name;
    // Where a label or value is refused: the series, by name and labels.
    let bad = |m: String| SeriesError::Value(format!("{name}{}: {m}", shown_labels(labels)));
    let host = match series.host {
        Some(h) => h.to_owned(),
        None => host_of(labels, findings).map_err(SeriesError::Answer)?,
    };
    let index = match label(labels, "gpu").or_else(|| label(labels, "index")) {
        Some(g) => {
            let i: f64 = g.parse().map_err(|_| bad(format!("gpu label {g:?} is not a GPU index")))?;
            ranges::GPU_INDEX.i32(i, g).map_err(|m| bad(format!("gpu label: {m}")))?
        }
        None => 0,
    };
    let text = |label_name: &str, limit: TextLimit| -> Result<Option<&str>, SeriesError> {
        let value = label(labels, label_name);
        if let Some(v) = value {
            limit.check(v).map_err(|m| bad(format!("{label_name} label: {m}")))?;
        }
        Ok(value)
    };
    // dcgm-exporter: `UUID`; its 1.x: `uuid`; nvidia_gpu_exporter: `uuid`
    // without nvidia-smi's `GPU-`.
    let uuid: Text = match text("UUID", ranges::GPU_UUID_TEXT)?.or(text("uuid", ranges::GPU_UUID_TEXT)?) {
        Some(u) if u.starts_with("GPU-") || u.starts_with("MIG-") => Text::from(u),
        Some(u) => Text::from(format!("GPU-{u}").as_str()),
        None => synthetic_uuid(&host, index),
    };
    let model: Option<Text> = match metric.target {
        Target::Info => text("name", ranges::GPU_MODEL_TEXT)?,
        _ => text("modelName", ranges::GPU_MODEL_TEXT)?,
    }
    .map(Text::from);
    let pod = match pod_of(labels, findings) {
        Some((pod, namespace, container)) => {
            ranges::COMM_TEXT.check(pod).map_err(|m| bad(format!("pod label: {m}")))?;
            if let Some(ns) = namespace {
                ranges::K8S_NAMESPACE_TEXT.check(ns).map_err(|m| bad(format!("namespace label: {m}")))?;
            }
            if let Some(c) = container {
                ranges::CONTAINER_TEXT.check(c).map_err(|m| bad(format!("container label: {m}")))?;
            }
            Some((
                pod_pid(namespace.unwrap_or(""), pod, container.unwrap_or("")),
                Text::from(pod),
                namespace.map(Text::from),
            ))
        }
        None => None,
    };
    let step = series.interval_ms;
    let interval_ms = ranges::INTERVAL_MS
        .i32(step as f64, &format!("{step} ms"))
        .map_err(|m| bad(format!("interval: {m}")))?;
    for (ts, v, raw) in points {
        let ts = *ts;
        if !v.is_finite() {
            continue;
        }
        if is_blank(*v, metric.target == Target::Energy) {
            findings.blanks += 1;
            continue;
        }
        // Where a value is refused: the series and the row's start.
        let at = |m: String| bad(format!("at {}: {m}", rfc3339(ts)));
        ranges::check_ts(ts, &ts.to_string()).map_err(at)?;
        let acc = rows.gpus.entry((host.clone(), uuid.clone(), ts)).or_insert_with(|| Acc {
            sample: GpuSample {
                ts,
                gpu_uuid: uuid.clone(),
                gpu_index: index,
                interval_ms,
                ..GpuSample::default()
            },
            ..Acc::default()
        });
        if acc.sample.gpu_model.is_none() {
            acc.sample.gpu_model = model.clone();
        }
        set(acc, metric.target, v * metric.scale, raw).map_err(at)?;
        if let Some((pid, pod, namespace)) = &pod {
            let procs = rows.pods.entry(host.clone()).or_default();
            let row = procs.entry((uuid.clone(), *pid, ts)).or_insert_with(|| ProcSample {
                ts,
                gpu_uuid: uuid.clone(),
                pid: *pid,
                interval_ms,
                identity: ProcIdentity {
                    comm: Some(pod.clone()),
                    k8s_namespace: namespace.clone(),
                    ..ProcIdentity::default()
                },
                ..ProcSample::default()
            });
            if metric.target == Target::FbUsed {
                row.used_mem_bytes = acc.sample.fb_used_bytes;
            }
        }
    }
    Ok(())
}

/// Puts `v` (in dcgm-exporter's unit; `raw` as the server wrote it) into
/// the row, in the schema's unit, checked against its column's range
/// ([`ranges`]).
fn set(acc: &mut Acc, target: Target, v: f64, raw: &str) -> Result<(), String> {
    // `raw` is the value as the input wrote it, before any scaling.
    let g = &mut acc.sample;
    // Ratios (0–1) to percent.
    let ratio = |range: Range| range.check(v * 100.0, raw).map(|p| Some(p as f32));
    match target {
        Target::GpuUtil => g.gpu_util_pct = Some(ranges::GPU_UTIL_PCT.i32(v, raw)?),
        Target::MemUtil => g.mem_util_pct = Some(ranges::MEM_UTIL_PCT.i32(v, raw)?),
        Target::EncUtil => g.enc_util_pct = Some(ranges::ENC_UTIL_PCT.i32(v, raw)?),
        Target::DecUtil => g.dec_util_pct = Some(ranges::DEC_UTIL_PCT.i32(v, raw)?),
        Target::FbUsed => g.fb_used_bytes = Some(ranges::FB_USED_BYTES.i64(v * MIB, raw)?),
        Target::FbFree => acc.fb_free = Some(ranges::FB_FREE_BYTES.check(v * MIB, raw)? / MIB),
        Target::FbReserved => acc.fb_reserved = Some(ranges::FB_RESERVED_BYTES.check(v * MIB, raw)? / MIB),
        Target::Power => g.power_mw = Some(ranges::POWER_MW.i32(v * 1_000.0, raw)?),
        Target::PowerLimit => g.power_limit_mw = Some(ranges::POWER_LIMIT_MW.i32(v * 1_000.0, raw)?),
        Target::Energy => g.energy_mj = Some(ranges::ENERGY_MJ.i64(v, raw)?),
        Target::Temp => g.temp_c = Some(ranges::TEMP_C.i32(v, raw)?),
        Target::SmClock => g.sm_clock_mhz = Some(ranges::SM_CLOCK_MHZ.i32(v, raw)?),
        Target::SmActive => g.sm_active_pct = ratio(ranges::SM_ACTIVE_PCT)?,
        Target::GrEngineActive => g.gr_engine_active_pct = ratio(ranges::GR_ENGINE_ACTIVE_PCT)?,
        Target::SmOccupancy => g.sm_occupancy_pct = ratio(ranges::SM_OCCUPANCY_PCT)?,
        Target::TensorActive => g.tensor_active_pct = ratio(ranges::TENSOR_ACTIVE_PCT)?,
        Target::DramActive => g.dram_active_pct = ratio(ranges::DRAM_ACTIVE_PCT)?,
        Target::PcieTx => g.pcie_tx_bytes_per_s = Some(ranges::PCIE_TX_BYTES_PER_S.i64(v, raw)?),
        Target::PcieRx => g.pcie_rx_bytes_per_s = Some(ranges::PCIE_RX_BYTES_PER_S.i64(v, raw)?),
        Target::ClockEvents => g.clock_event_reasons = Some(ranges::CLOCK_EVENT_REASONS.i64(v.trunc(), raw)?),
        Target::FbTotal => g.fb_total_bytes = Some(ranges::FB_TOTAL_BYTES.i64(v * MIB, raw)?),
        Target::Index => g.gpu_index = ranges::GPU_INDEX.i32(v, raw)?,
        Target::Info => {}
    }
    Ok(())
}

/// Linux pids are at most 2^22: synthetic pids start there.
const FIRST_SYNTHETIC_PID: i32 = 1 << 22;

/// The stable synthetic pid of a pod's container: above every real pid,
/// the same for the same namespace, pod and container in every import.
pub fn pod_pid(namespace: &str, pod: &str, container: &str) -> i32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{namespace}/{pod}/{container}").bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let span = (i32::MAX - FIRST_SYNTHETIC_PID) as u64;
    FIRST_SYNTHETIC_PID + (hash % span) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_from_hostname_else_node_else_instance() {
        let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let mut f = Findings::default();
        let host = |labels: &[(&str, &str)], f: &mut Findings| host_of(&l(labels), f);
        assert_eq!(
            host(&[("Hostname", "node-07"), ("instance", "10.0.0.7:9400")], &mut f),
            Ok("node-07".into())
        );
        assert_eq!(host(&[("instance", "10.0.0.7:9400")], &mut f), Ok("10.0.0.7".into()));
        assert_eq!(host(&[("instance", "[::1]:9400")], &mut f), Ok("___1_".into()));
        assert!(host(&[], &mut f).is_err());
        assert_eq!(f, Findings::default());
        // The series gpu-operator's issue 472 shows: Hostname is the
        // exporter's pod, node the node.
        let pod = [
            ("Hostname", "nvidia-dcgm-exporter-57pvc"),
            ("instance", "10.244.1.9:9400"),
            ("node", "aks-gpunp-66230965-vmss000000"),
        ];
        assert_eq!(host(&pod, &mut f), Ok("aks-gpunp-66230965-vmss000000".into()));
        assert_eq!(
            f.pod_hostnames.get("nvidia-dcgm-exporter-57pvc").map(String::as_str),
            Some("aks-gpunp-66230965-vmss000000")
        );
        let error = host(&pod[..2], &mut f).expect_err("no node");
        assert!(error.contains("exporter pod's name") && error.contains("--host"), "{error}");
        assert!(!is_exporter_pod_name("node-1") && is_exporter_pod_name("dcgm-exporter-6ldbb"));
    }

    #[test]
    fn the_exporters_own_pod_is_no_workload_and_blanks_are_dropped() {
        let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let mut f = Findings::default();
        // dcgm-exporter's issue 27: no honorLabels.
        let own = l(&[
            ("job", "somename-gpu-dcgm-exporter"),
            ("namespace", "some-namespace"),
            ("pod", "somename-gpu-dcgm-exporter-vfbhl"),
            ("service", "somename-gpu-dcgm-exporter"),
        ]);
        assert_eq!(pod_of(&own, &mut f), None);
        assert!(f.exporter_pods.contains("somename-gpu-dcgm-exporter-vfbhl"));
        // Renamed by Prometheus: exported_pod is the workload.
        let renamed =
            l(&[("pod", "dcgm-exporter-x7k2p"), ("exported_pod", "train-0"), ("exported_namespace", "ml")]);
        assert_eq!(pod_of(&renamed, &mut f), Some(("train-0", Some("ml"), None)));
        let workload = l(&[("pod", "testest-9sxmd"), ("namespace", "gi-user1-giops-ai")]);
        assert_eq!(pod_of(&workload, &mut f), Some(("testest-9sxmd", Some("gi-user1-giops-ai"), None)));
        // The READMEs' samples: INT64_NOT_SUPPORTED; and the int32 and
        // float markers.
        for v in [9_223_372_036_854_775_794.0, 2_147_483_632.0, 2_147_483_647.0, 140_737_488_355_330.0] {
            assert!(is_blank(v, false), "{v}");
        }
        assert!(!is_blank(2_147_483_640.0, true), "an energy counter passes there");
        assert!(!is_blank(100.0, false) && !is_blank(81_559.0, false));
    }

    #[test]
    fn pod_pids_are_stable_and_above_real_pids() {
        let a = pod_pid("vision", "train-0", "main");
        assert_eq!(a, pod_pid("vision", "train-0", "main"));
        assert_ne!(a, pod_pid("vision", "train-1", "main"));
        assert!(a >= 1 << 22);
    }

    #[test]
    fn a_period_is_imported_a_utc_day_at_a_time_on_its_own_steps() {
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).expect("a time").timestamp_millis();
        let step = 7 * 60_000;
        let opts = Options {
            url: "http://127.0.0.1:9090".into(),
            from_ms: at("2026-11-02T22:00:00Z"),
            to_ms: at("2026-11-04T01:00:00Z"),
            step_ms: step,
        };
        let parts = day_parts(&opts);
        // 22:00 + 18 steps = 00:06; 00:06 + 205 steps = 00:01 two days on;
        // then 00:01 to 01:00, whose last 3 minutes are no whole step.
        let bounds: Vec<(i64, i64)> = parts.iter().map(|p| (p.from_ms, p.to_ms)).collect();
        assert_eq!(
            bounds,
            [
                (opts.from_ms, at("2026-11-03T00:06:00Z")),
                (at("2026-11-03T00:06:00Z"), at("2026-11-04T00:01:00Z")),
                (at("2026-11-04T00:01:00Z"), opts.to_ms),
            ]
        );
        let steps = |o: &Options| (o.to_ms - o.from_ms) / o.step_ms;
        assert_eq!(parts.iter().map(steps).sum::<i64>(), steps(&opts), "every step once: 1620 min / 7");
        assert!(parts.iter().all(|p| (p.from_ms - opts.from_ms) % step == 0 && p.step_ms == step));
        // Shorter than a step: nothing to ask for.
        assert!(day_parts(&Options { to_ms: opts.from_ms + step - 1, ..opts.clone() }).is_empty());
        // A period within a day is one part.
        let day = Options { to_ms: opts.from_ms + 3_600_000, ..opts.clone() };
        assert_eq!(day_parts(&day).len(), 1);
    }
}
