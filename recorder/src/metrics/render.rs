//! The Prometheus text format (version 0.0.4) of a [`Snapshot`].
//!
//! dcgm-exporter's default counters, with its names, units, help texts and
//! labels (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`),
//! converted from the recorder's native units (mW → W, bytes → MiB,
//! percent → ratio for the profiling metrics). A value NVML could not give
//! is absent, never 0. `device` is `nvidia<index>` (dcgm-exporter uses the
//! device's minor number, which is the index on an ordinary host).
//!
//! The faults ([`super::faults`]): `DCGM_FI_DEV_XID_ERRORS` (the last XID
//! since the recorder started, 0 when none, labelled `err_code` and
//! `err_msg`; for the GPUs whose faults the recorder reads), and the ECC, retired-page, remapped-row, PCIe-replay and
//! NVLink error counters as last read (once a minute).
//!
//! Not served because the recorder does not read it: `DCGM_FI_DEV_MEM_CLOCK`.
//! `DCGM_FI_DEV_FB_FREE` is total minus used (NVML's reserved memory counts
//! as free).

use std::fmt::Write;

use apron_schemas::GpuSample;

use super::minute::{MinuteReport, State};
use super::snapshot::Snapshot;

/// A metric value: integers print as integers.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(i64),
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v.is_infinite() => f.write_str(if v > 0.0 { "+Inf" } else { "-Inf" }),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

const MIB: i64 = 1 << 20;

/// One dcgm-exporter counter: name, type, help, and its value from a GPU row.
struct Dcgm {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&GpuSample) -> Option<Value>,
}

fn int(v: Option<i32>) -> Option<Value> {
    v.map(|v| Value::Int(i64::from(v)))
}

fn ratio(pct: Option<f32>) -> Option<Value> {
    pct.map(|p| Value::Float(f64::from(p) / 100.0))
}

const DCGM: &[Dcgm] = &[
    Dcgm {
        name: "DCGM_FI_DEV_SM_CLOCK",
        kind: "gauge",
        help: "SM clock frequency (in MHz).",
        value: |g| int(g.sm_clock_mhz),
    },
    Dcgm {
        name: "DCGM_FI_DEV_GPU_TEMP",
        kind: "gauge",
        help: "GPU temperature (in C).",
        value: |g| int(g.temp_c),
    },
    Dcgm {
        name: "DCGM_FI_DEV_POWER_USAGE",
        kind: "gauge",
        help: "Power draw (in W).",
        value: |g| g.power_mw.map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    },
    Dcgm {
        name: "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        kind: "gauge",
        help: "Power management limit (in W).",
        value: |g| g.power_limit_mw.map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    },
    Dcgm {
        name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        kind: "counter",
        help: "Total energy consumption since boot (in mJ).",
        value: |g| g.energy_mj.map(Value::Int),
    },
    Dcgm {
        name: "DCGM_FI_DEV_GPU_UTIL",
        kind: "gauge",
        help: "GPU utilization (in %).",
        value: |g| int(g.gpu_util_pct),
    },
    Dcgm {
        name: "DCGM_FI_DEV_MEM_COPY_UTIL",
        kind: "gauge",
        help: "Memory utilization (in %).",
        value: |g| int(g.mem_util_pct),
    },
    Dcgm {
        name: "DCGM_FI_DEV_ENC_UTIL",
        kind: "gauge",
        help: "Encoder utilization (in %).",
        value: |g| int(g.enc_util_pct),
    },
    Dcgm {
        name: "DCGM_FI_DEV_DEC_UTIL",
        kind: "gauge",
        help: "Decoder utilization (in %).",
        value: |g| int(g.dec_util_pct),
    },
    Dcgm {
        name: "DCGM_FI_DEV_FB_FREE",
        kind: "gauge",
        help: "Framebuffer memory free (in MiB).",
        value: |g| match (g.fb_total_bytes, g.fb_used_bytes) {
            (Some(total), Some(used)) => Some(Value::Int((total - used).max(0) / MIB)),
            _ => None,
        },
    },
    Dcgm {
        name: "DCGM_FI_DEV_FB_USED",
        kind: "gauge",
        help: "Framebuffer memory used (in MiB).",
        value: |g| g.fb_used_bytes.map(|b| Value::Int(b / MIB)),
    },
    Dcgm {
        name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        kind: "gauge",
        help: "Ratio of time the graphics engine is active.",
        value: |g| ratio(g.gr_engine_active_pct),
    },
    Dcgm {
        name: "DCGM_FI_PROF_SM_ACTIVE",
        kind: "gauge",
        help: "The ratio of cycles an SM has at least 1 warp assigned.",
        value: |g| ratio(g.sm_active_pct),
    },
    Dcgm {
        name: "DCGM_FI_PROF_SM_OCCUPANCY",
        kind: "gauge",
        help: "The ratio of number of warps resident on an SM.",
        value: |g| ratio(g.sm_occupancy_pct),
    },
    Dcgm {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the tensor (HMMA) pipe is active.",
        value: |g| ratio(g.tensor_active_pct),
    },
    Dcgm {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        kind: "gauge",
        help: "Ratio of cycles the device memory interface is active sending or receiving data.",
        value: |g| ratio(g.dram_active_pct),
    },
    Dcgm {
        name: "DCGM_FI_PROF_PCIE_TX_BYTES",
        kind: "gauge",
        help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        value: |g| g.pcie_tx_bytes_per_s.map(Value::Int),
    },
    Dcgm {
        name: "DCGM_FI_PROF_PCIE_RX_BYTES",
        kind: "gauge",
        help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
        value: |g| g.pcie_rx_bytes_per_s.map(Value::Int),
    },
];

/// Writes `value` as a label value: backslash, double quote and line feed escaped.
fn label(out: &mut String, name: &str, value: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    out.push_str(name);
    out.push_str("=\"");
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            // A process, pod or model name's escape sequence would reach
            // whoever reads the endpoint on a terminal: the text format has
            // no escape for it, so it is replaced.
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// dcgm-exporter's labels of the GPU at `index` with `uuid` and `model`.
fn gpu_labels(out: &mut String, s: &Snapshot, index: i32, uuid: &str, model: Option<&str>) {
    let _ = write!(out, "gpu=\"{index}\"");
    label(out, "UUID", uuid);
    if let Some(pci) =
        usize::try_from(index).ok().and_then(|i| s.pci_bus_ids.get(i)).and_then(Option::as_deref)
    {
        label(out, "pci_bus_id", pci);
    }
    let _ = write!(out, ",device=\"nvidia{index}\"");
    if let Some(m) = model {
        label(out, "modelName", m);
    }
    label(out, "Hostname", &s.host);
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: impl FnOnce(&mut String), value: Value) {
    out.push_str(name);
    out.push('{');
    labels(out);
    let _ = writeln!(out, "}} {value}");
}

/// Appends the Prometheus text of `s` to `out`.
pub fn render(s: &Snapshot, out: &mut String) {
    for m in DCGM {
        let mut first = true;
        for g in &s.gpus {
            let Some(v) = (m.value)(g) else { continue };
            if std::mem::take(&mut first) {
                family(out, m.name, m.kind, m.help);
            }
            sample(out, m.name, |o| gpu_labels(o, s, g.gpu_index, &g.gpu_uuid, g.gpu_model.as_deref()), v);
        }
    }
    faults(s, out);
    processes(s, out);
    minutes(s, out);
    health(s, out);
}

/// The last XID and the error counters of each GPU of the last tick.
fn faults(s: &Snapshot, out: &mut String) {
    let of = |uuid: &str| s.faults.iter().find(|f| &*f.gpu_uuid == uuid);
    let mut first = true;
    // A GPU the recorder watches (its counters were read, or it had an
    // XID): 0 until its first XID. The simulated fleet's GPUs have none.
    for (g, f) in s.gpus.iter().filter_map(|g| Some((g, of(&g.gpu_uuid)?))) {
        let name = "DCGM_FI_DEV_XID_ERRORS";
        if std::mem::take(&mut first) {
            family(out, name, "gauge", "Value of the last XID error encountered.");
        }
        let code = f.last_xid.unwrap_or(0);
        let labels = |o: &mut String| {
            gpu_labels(o, s, g.gpu_index, &g.gpu_uuid, g.gpu_model.as_deref());
            label(o, "err_code", &code.to_string());
            label(o, "err_msg", super::faults::err_msg(code));
        };
        sample(out, name, labels, Value::Int(i64::from(code)));
    }
    for (at, (_, name, kind, help)) in super::faults::COUNTERS.iter().enumerate() {
        let mut first = true;
        for g in &s.gpus {
            let Some(v) = of(&g.gpu_uuid).and_then(|f| f.counters[at]) else { continue };
            if std::mem::take(&mut first) {
                family(out, name, kind, help);
            }
            sample(
                out,
                name,
                |o| gpu_labels(o, s, g.gpu_index, &g.gpu_uuid, g.gpu_model.as_deref()),
                Value::Int(v),
            );
        }
    }
}

/// A process metric's value from its row.
type ProcValue = fn(&apron_schemas::ProcSample) -> Option<Value>;

/// Per-process GPU memory and SM utilization, labelled with who runs it.
fn processes(s: &Snapshot, out: &mut String) {
    let index_of = |uuid: &str| s.gpus.iter().find(|g| &*g.gpu_uuid == uuid).map(|g| g.gpu_index);
    let metrics: [(&str, &str, ProcValue); 2] = [
        (
            "apron_gpu_process_memory_bytes",
            "GPU memory the process holds on the GPU at the last tick (bytes).",
            |p| p.used_mem_bytes.map(Value::Int),
        ),
        (
            "apron_gpu_process_sm_util_percent",
            "The process's SM utilization on the GPU at the last tick (%).",
            |p| p.sm_util_pct.map(|v| Value::Int(i64::from(v))),
        ),
    ];
    for (name, help, value) in metrics {
        let mut first = true;
        for p in &s.procs {
            let Some(v) = value(p) else { continue };
            if std::mem::take(&mut first) {
                family(out, name, "gauge", help);
            }
            sample(
                out,
                name,
                |o| {
                    if let Some(i) = index_of(&p.gpu_uuid) {
                        let _ = write!(o, "gpu=\"{i}\"");
                    }
                    label(o, "UUID", &p.gpu_uuid);
                    label(o, "Hostname", &s.host);
                    let _ = write!(o, ",pid=\"{}\"", p.pid);
                    let id = &p.identity;
                    let texts = [
                        ("comm", &id.comm),
                        ("user", &id.user),
                        ("container_id", &id.container_id),
                        ("k8s_namespace", &id.k8s_namespace),
                        ("k8s_pod_uid", &id.k8s_pod_uid),
                        ("k8s_pod_name", &id.k8s_pod_name),
                        ("k8s_container", &id.k8s_container),
                        ("slurm_job_id", &id.slurm_job_id),
                        ("slurm_account", &id.slurm_account),
                    ];
                    if let Some(uid) = id.uid {
                        let _ = write!(o, ",uid=\"{uid}\"");
                    }
                    for (k, v) in texts {
                        if let Some(v) = v {
                            label(o, k, v);
                        }
                    }
                },
                v,
            );
        }
    }
}

/// Each GPU's state over its last full minute.
fn minutes(s: &Snapshot, out: &mut String) {
    if s.minutes.is_empty() {
        return;
    }
    let labels = |o: &mut String, m: &MinuteReport| {
        gpu_labels(o, s, m.gpu_index, &m.gpu_uuid, m.gpu_model.as_deref());
    };
    family(
        out,
        "apron_gpu_minute_state",
        "gauge",
        "The GPU's state over its last full UTC minute, as apron's reports define it: 1 for its state, 0 for the others.",
    );
    for m in &s.minutes {
        for state in State::ALL {
            sample(
                out,
                "apron_gpu_minute_state",
                |o| {
                    labels(o, m);
                    label(o, "state", state.name());
                },
                Value::Int(i64::from(m.state == state)),
            );
        }
    }
    family(
        out,
        "apron_gpu_minute_activity_percent",
        "gauge",
        "The GPU's activity over its last full minute: mean utilization, else mean SM activity (%); absent when unknown.",
    );
    for m in &s.minutes {
        if let Some(a) = m.activity_pct {
            sample(out, "apron_gpu_minute_activity_percent", |o| labels(o, m), Value::Float(a));
        }
    }
    family(
        out,
        "apron_gpu_minute_start_timestamp_seconds",
        "gauge",
        "Start of that minute (Unix time, UTC).",
    );
    for m in &s.minutes {
        sample(
            out,
            "apron_gpu_minute_start_timestamp_seconds",
            |o| labels(o, m),
            Value::Int(m.minute_ms / 1000),
        );
    }
    family(out, "apron_gpu_minute_recorded_seconds", "gauge", "Seconds recorded in that minute.");
    for m in &s.minutes {
        sample(out, "apron_gpu_minute_recorded_seconds", |o| labels(o, m), Value::Float(m.seconds));
    }
    family(out, "apron_gpu_minute_processes", "gauge", "Processes seen on the GPU in that minute.");
    for m in &s.minutes {
        let n = i64::try_from(m.procs).unwrap_or(i64::MAX);
        sample(out, "apron_gpu_minute_processes", |o| labels(o, m), Value::Int(n));
    }
}

/// The recorder's own counters.
fn health(s: &Snapshot, out: &mut String) {
    let h = &s.health;
    let host = |o: &mut String| label(o, "Hostname", &s.host);
    let to_i = |v: u64| Value::Int(i64::try_from(v).unwrap_or(i64::MAX));
    if let Some(ts) = s.ts_ms {
        family(
            out,
            "apron_recorder_last_tick_timestamp_seconds",
            "gauge",
            "Time of the tick served (Unix time, UTC).",
        );
        sample(out, "apron_recorder_last_tick_timestamp_seconds", host, Value::Float(ts as f64 / 1000.0));
    }
    let counters: [(&str, &str, u64); 10] = [
        ("apron_recorder_ticks_total", "Ticks sampled.", h.ticks),
        (
            "apron_recorder_missed_ticks_total",
            "Ticks skipped because the recorder woke too late (their time is unrecorded).",
            h.missed_ticks,
        ),
        ("apron_recorder_gpu_errors_total", "Per-GPU sampling failures (one GPU at one tick).", h.gpu_errors),
        ("apron_recorder_gpu_stalls_total", "Of those, GPUs that did not answer in time.", h.gpu_stalls),
        (
            "apron_recorder_refused_queries_total",
            "NVML queries refused (not supported, not permitted); their values are unknown.",
            h.refused_queries,
        ),
        ("apron_recorder_files_written_total", "Parquet files written.", h.files),
        (
            "apron_recorder_rows_dropped_total",
            "Rows dropped from memory while the disk refused writes (those in the WAL reach Parquet at the next start).",
            h.dropped_rows,
        ),
        (
            "apron_recorder_rows_lost_total",
            "Of the rows dropped, those no WAL segment holds: lost.",
            h.lost_rows,
        ),
        ("apron_recorder_write_errors_total", "Writes the disk refused (each retried).", h.write_errors),
        ("apron_recorder_wal_errors_total", "Failures of the write-ahead log.", h.wal_errors),
    ];
    for (name, help, v) in counters {
        family(out, name, "counter", help);
        sample(out, name, host, to_i(v));
    }
    family(out, "apron_recorder_rows_written_total", "counter", "Rows written to Parquet, by table.");
    for (table, v) in [("gpu_samples", h.gpu_rows), ("proc_samples", h.proc_rows)] {
        sample(
            out,
            "apron_recorder_rows_written_total",
            |o| {
                host(o);
                label(o, "table", table);
            },
            to_i(v),
        );
    }
    let others: [(&str, &str, &str, Value); 4] = [
        ("apron_recorder_rows_held", "gauge", "Rows held in memory, not yet in Parquet.", to_i(h.held_rows)),
        (
            "apron_recorder_wal_bytes",
            "gauge",
            "Bytes of the write-ahead log's segments on disk.",
            to_i(s.wal_bytes),
        ),
        (
            "apron_recorder_sample_seconds",
            "gauge",
            "How long the last tick's sampling took (s).",
            Value::Float(h.sample_us as f64 / 1e6),
        ),
        (
            "apron_recorder_metrics_late_copies_total",
            "counter",
            "Ticks not copied for /metrics because a scrape was reading (the next tick was).",
            to_i(s.late_copies),
        ),
    ];
    for (name, kind, help, value) in others {
        family(out, name, kind, help);
        sample(out, name, host, value);
    }
    if let Some(ship) = h.ship {
        let ship_metrics: [(&str, &str, &str, u64); 4] = [
            (
                "apron_recorder_ship_files_total",
                "counter",
                "Files shipped to object storage and confirmed.",
                ship.shipped,
            ),
            (
                "apron_recorder_ship_pending_partitions",
                "gauge",
                "Closed partitions of this host not shipped yet (the shipping backlog).",
                ship.pending,
            ),
            (
                "apron_recorder_ship_failures_total",
                "counter",
                "Uploads, look-ups or removals that failed (each retried).",
                ship.failed,
            ),
            (
                "apron_recorder_ship_expired_pending_partitions",
                "gauge",
                "Of the backlog, partitions past their retention, kept on disk only until shipped.",
                ship.expired_pending,
            ),
        ];
        for (name, kind, help, v) in ship_metrics {
            family(out, name, kind, help);
            sample(out, name, host, to_i(v));
        }
    }
    if let Some(k8s) = h.k8s {
        let k8s_metrics: [(&str, &str, &str, u64); 7] = [
            ("apron_recorder_k8s_pods", "gauge", "Pods the kubelet's log folders name, by uid.", k8s.pods),
            (
                "apron_recorder_k8s_allocated_devices",
                "gauge",
                "Devices allocated to containers at the kubelet's last good pod-resources answer.",
                k8s.allocated_devices,
            ),
            (
                "apron_recorder_k8s_unresolved_rows_total",
                "counter",
                "Process rows in a pod that no kubelet source named (recorded without namespace).",
                k8s.unresolved,
            ),
            (
                "apron_recorder_k8s_log_errors_total",
                "counter",
                "Failed reads of the kubelet's log folders.",
                k8s.log_errors,
            ),
            (
                "apron_recorder_k8s_kubelet_errors_total",
                "counter",
                "Failed calls to the kubelet's pod-resources API.",
                k8s.kubelet_errors,
            ),
            (
                "apron_recorder_k8s_labelled_pods",
                "gauge",
                "Pods whose labels the API server gave (--k8s-labels).",
                k8s.labelled_pods,
            ),
            (
                "apron_recorder_k8s_label_errors_total",
                "counter",
                "Failed pod label lookups at the API server (--k8s-labels).",
                k8s.label_errors,
            ),
        ];
        for (name, kind, help, v) in k8s_metrics {
            family(out, name, kind, help);
            sample(out, name, host, to_i(v));
        }
    }
}
