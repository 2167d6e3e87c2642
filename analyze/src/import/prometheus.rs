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

use std::collections::{BTreeMap, HashMap};
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
}

/// The series imported: name, aggregation over a step, where it goes.
const SERIES: [(&str, &str, Target); 21] = [
    ("DCGM_FI_DEV_GPU_UTIL", "avg_over_time", Target::GpuUtil),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "avg_over_time", Target::MemUtil),
    ("DCGM_FI_DEV_FB_USED", "avg_over_time", Target::FbUsed),
    ("DCGM_FI_DEV_FB_FREE", "avg_over_time", Target::FbFree),
    ("DCGM_FI_DEV_FB_RESERVED", "avg_over_time", Target::FbReserved),
    ("DCGM_FI_DEV_POWER_USAGE", "avg_over_time", Target::Power),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "avg_over_time", Target::PowerLimit),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "last_over_time", Target::Energy),
    ("DCGM_FI_DEV_GPU_TEMP", "avg_over_time", Target::Temp),
    ("DCGM_FI_DEV_SM_CLOCK", "avg_over_time", Target::SmClock),
    ("DCGM_FI_DEV_ENC_UTIL", "avg_over_time", Target::EncUtil),
    ("DCGM_FI_DEV_DEC_UTIL", "avg_over_time", Target::DecUtil),
    ("DCGM_FI_PROF_SM_ACTIVE", "avg_over_time", Target::SmActive),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "avg_over_time", Target::GrEngineActive),
    ("DCGM_FI_PROF_SM_OCCUPANCY", "avg_over_time", Target::SmOccupancy),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "avg_over_time", Target::TensorActive),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "avg_over_time", Target::DramActive),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "avg_over_time", Target::PcieTx),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "avg_over_time", Target::PcieRx),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "last_over_time", Target::ClockEvents),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "last_over_time", Target::ClockEvents),
];

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

/// Queries the server and returns the rows of each host. `progress(done,
/// total)` counts queries.
pub async fn read(
    opts: &Options,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<BTreeMap<String, HostRows>, ImportError> {
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
    let mut gpus: BTreeMap<(String, Text, i64), Acc> = BTreeMap::new();
    let mut pods: BTreeMap<String, HashMap<PodKey, ProcSample>> = BTreeMap::new();
    for (name, func, target) in SERIES {
        let query = format!("{func}({name}[{step}ms] offset 1ms)");
        for chunk in 0..chunks {
            let start = first_end + chunk * STEPS_PER_QUERY * step;
            let end = (start + (STEPS_PER_QUERY - 1) * step).min(first_end + (n_steps - 1) * step);
            let result = query_range(&client, &endpoint, &query, start, end, step).await.map_err(fail)?;
            for series in result {
                add_series(name, &series, target, step, &mut gpus, &mut pods).map_err(|e| match e {
                    SeriesError::Answer(m) => fail(format!("{query}: {m}")),
                    SeriesError::Value(message) => ImportError::Input { what: base.clone(), message },
                })?;
            }
            done += 1;
            progress(done, total);
        }
    }
    let mut out: BTreeMap<String, HostRows> = BTreeMap::new();
    for ((host, uuid, ts), acc) in gpus {
        let mut g = acc.sample;
        if let Some(used) = g.fb_used_bytes
            && let Some(free) = acc.fb_free
        {
            let reserved = acc.fb_reserved.unwrap_or(0.0);
            let total = used as f64 + ((free + reserved) * MIB).round();
            let raw = format!("{total} bytes (used + free + reserved)");
            let total = ranges::FB_TOTAL_BYTES.i64(total, &raw).map_err(|m| ImportError::Input {
                what: base.clone(),
                message: format!("memory of GPU {uuid} on host {host} at {}: {m}", rfc3339(ts)),
            })?;
            g.fb_total_bytes = Some(total);
        }
        out.entry(host).or_default().gpus.push(g);
    }
    for (host, rows) in pods {
        out.entry(host).or_default().procs.extend(rows.into_values());
    }
    Ok(out)
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
        message: "no dcgm-exporter series (DCGM_FI_DEV_*, DCGM_FI_PROF_*) in the period".into(),
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
fn label<'a>(series: &'a Value, name: &str) -> Option<&'a str> {
    series["metric"][name].as_str().filter(|s| !s.is_empty())
}

/// The host of a series: its `Hostname`, else its `instance` without the
/// port, with any character a partition name cannot hold made `_`.
fn host_of(series: &Value) -> Result<String, String> {
    let raw = match (label(series, "Hostname"), label(series, "instance")) {
        (Some(h), _) => h.to_owned(),
        (None, Some(i)) => i.rsplit_once(':').map_or(i, |(h, _)| h).to_owned(),
        (None, None) => {
            return Err(format!(
                "a series has neither a Hostname nor an instance label: {}",
                series["metric"]
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

/// Why a series cannot be imported.
#[derive(Debug)]
enum SeriesError {
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

fn add_series(
    name: &str,
    series: &Value,
    target: Target,
    step: i64,
    gpus: &mut BTreeMap<(String, Text, i64), Acc>,
    pods: &mut BTreeMap<String, HashMap<PodKey, ProcSample>>,
) -> Result<(), SeriesError> {
    // Where a label or value is refused: the series, by name and labels.
    let bad = |m: String| SeriesError::Value(format!("{name}{}: {m}", series["metric"]));
    let host = host_of(series).map_err(SeriesError::Answer)?;
    let index = match label(series, "gpu") {
        Some(g) => {
            let i: f64 = g.parse().map_err(|_| bad(format!("gpu label {g:?} is not a GPU index")))?;
            ranges::GPU_INDEX.i32(i, g).map_err(|m| bad(format!("gpu label: {m}")))?
        }
        None => 0,
    };
    let text = |label_name: &str, limit: TextLimit| -> Result<Option<&str>, SeriesError> {
        let value = label(series, label_name);
        if let Some(v) = value {
            limit.check(v).map_err(|m| bad(format!("{label_name} label: {m}")))?;
        }
        Ok(value)
    };
    let uuid: Text =
        text("UUID", ranges::GPU_UUID_TEXT)?.map_or_else(|| synthetic_uuid(&host, index), Text::from);
    let model: Option<Text> = text("modelName", ranges::GPU_MODEL_TEXT)?.map(Text::from);
    let pod = match text("pod", ranges::COMM_TEXT)? {
        Some(pod) => {
            let namespace = text("namespace", ranges::K8S_NAMESPACE_TEXT)?;
            let container = text("container", ranges::CONTAINER_TEXT)?;
            Some((
                pod_pid(namespace.unwrap_or(""), pod, container.unwrap_or("")),
                Text::from(pod),
                namespace.map(Text::from),
            ))
        }
        None => None,
    };
    let interval_ms = ranges::INTERVAL_MS
        .i32(step as f64, &format!("{step} ms"))
        .map_err(|m| bad(format!("--step: {m}")))?;
    let Some(values) = series["values"].as_array() else { return Ok(()) };
    for point in values {
        let (Some(t), Some(raw)) = (point[0].as_f64(), point[1].as_str()) else {
            return Err(SeriesError::Answer(format!("a point is not [time, \"value\"]: {point}")));
        };
        let Ok(v) = raw.parse::<f64>() else {
            return Err(SeriesError::Answer(format!("{raw:?} is not a number")));
        };
        if !v.is_finite() {
            continue;
        }
        let ts = (t * 1_000.0).round() as i64 - step;
        // Where a value is refused: the series and the step's start.
        let at = |m: String| bad(format!("at {}: {m}", rfc3339(ts)));
        ranges::check_ts(ts, &t.to_string()).map_err(at)?;
        let acc = gpus.entry((host.clone(), uuid.clone(), ts)).or_insert_with(|| Acc {
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
        set(acc, target, v, raw).map_err(at)?;
        if let Some((pid, pod, namespace)) = &pod {
            let rows = pods.entry(host.clone()).or_default();
            let row = rows.entry((uuid.clone(), *pid, ts)).or_insert_with(|| ProcSample {
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
            if target == Target::FbUsed {
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
    fn hosts_come_from_hostname_else_instance() {
        let s: Value = serde_json::json!({"metric": {"Hostname": "node-07", "instance": "10.0.0.7:9400"}});
        assert_eq!(host_of(&s), Ok("node-07".into()));
        let s: Value = serde_json::json!({"metric": {"instance": "10.0.0.7:9400"}});
        assert_eq!(host_of(&s), Ok("10.0.0.7".into()));
        let s: Value = serde_json::json!({"metric": {"instance": "[::1]:9400"}});
        assert_eq!(host_of(&s), Ok("___1_".into()));
        assert!(host_of(&serde_json::json!({"metric": {}})).is_err());
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
