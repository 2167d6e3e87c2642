//! Every named query (`queries/*.sql`) runs, through apron's library, on
//! the hand-built fleet of `apron_tests::scenario`, with its rollups and on
//! the raw files alone, binds the parameters its header documents, returns
//! the output columns its header documents, and gives the same rows either
//! way. Where a figure is easy to state by hand it is checked too (the
//! unrounded costs behind `apron spend`, the coverage behind the header),
//! and the recorder's minute rollups are compared with the minutes the SQL
//! computes from raw samples.
//!
//! A `.sql` file this test has no case for fails it: add one below.

use std::collections::BTreeSet;
use std::path::Path;

use apron_analyze::output::{Format, write_batches};
use apron_analyze::report::period::{Period, timestamp};
use apron_analyze::session::memory::MemoryLimit;
use apron_analyze::{Config, Session};
use apron_tests::scenario::{self, END, Fixture, GIB, START, ms};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use serde_json::Value;

/// How one query is run and what it must return.
#[derive(Debug)]
struct Case {
    /// The values bound to `$1`, `$2`, ….
    params: Vec<ScalarValue>,
    /// The output columns, in order.
    columns: &'static [&'static str],
}

fn f64p(x: f64) -> ScalarValue {
    ScalarValue::Float64(Some(x))
}

fn i64p(x: i64) -> ScalarValue {
    ScalarValue::Int64(Some(x))
}

fn text(s: &str) -> ScalarValue {
    ScalarValue::Utf8(Some(s.to_owned()))
}

const GPU_MINUTES: &[&str] = &[
    "minute",
    "gpu_uuid",
    "gpu_index",
    "gpu_model",
    "seconds",
    "samples",
    "gpu_util_pct_mean",
    "gpu_util_pct_max",
    "mem_util_pct_mean",
    "sm_active_pct_mean",
    "fb_used_bytes_max",
    "fb_total_bytes",
    "energy_j",
    "power_mw_mean",
    "pcie_tx_bytes_per_s_mean",
    "pcie_rx_bytes_per_s_mean",
    "proc_held",
    "proc_count",
    "parent_gpu_uuid",
    "mig_profile",
    "mig_slices",
    "mig_total_slices",
    "tensor_active_pct_mean",
    "dram_active_pct_mean",
    "date",
    "host",
];

const PROC_MINUTES: &[&str] = &[
    "minute",
    "gpu_uuid",
    "pid",
    "proc_start",
    "seconds",
    "samples",
    "used_mem_bytes_mean",
    "used_mem_bytes_max",
    "sm_util_pct_mean",
    "mem_util_pct_mean",
    "comm",
    "uid",
    "user",
    "container_id",
    "k8s_pod_uid",
    "k8s_namespace",
    "k8s_pod_name",
    "k8s_container",
    "k8s_labels",
    "slurm_job_id",
    "slurm_account",
    "slurm_partition",
    "claimed_k8s_namespace",
    "claimed_slurm_job_id",
    "claimed_slurm_account",
    "date",
    "host",
];

/// The case of every query, by file name; `None` for a query this test
/// does not know yet (which fails it).
/// The day of the scenario, as a `Date` parameter.
fn day() -> ScalarValue {
    ScalarValue::Date32(Some(i32::try_from(ms(START) / 86_400_000).expect("a day fits")))
}

fn case(name: &str) -> Option<Case> {
    let (start, end) = (timestamp(ms(START)), timestamp(ms(END)));
    let threshold = f64p(5.0);
    let case = match name {
        "alerts" => Case {
            // now = 10:10; thresholds of the default rules; no_data after 5 min.
            params: vec![end, f64p(10.0), f64p(10.0), f64p(80.0), timestamp(ms("2026-11-02T10:05:00Z"))],
            columns: &["rule", "host", "gpu_index", "gpu_uuid", "value", "since"],
        },
        "coverage" => Case {
            params: vec![start, end],
            columns: &["first_minute", "last_minute", "gpus", "recorded_seconds", "models"],
        },
        "down_faults" => Case {
            params: vec![start.clone(), end.clone()],
            columns: &["host", "gpu_index", "gpu_uuid", "ts", "kind", "xid", "value", "delta", "detail"],
        },
        "events" => Case {
            params: vec![start.clone(), end.clone()],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "kind",
                "xid",
                "detail",
                "events",
                "first_at",
                "last_at",
                "increase",
                "last_value",
                "on_gpu",
            ],
        },
        "fault_alerts" => Case {
            params: vec![end.clone(), start.clone()],
            columns: &["rule", "host", "gpu_index", "gpu_uuid", "value", "since"],
        },
        "fleet_state" => Case {
            // Five-minute buckets.
            params: vec![i64p(300)],
            columns: &["bucket", "busy", "idle_held", "idle_empty", "unknown"],
        },
        "gpu_days" => Case {
            params: vec![],
            columns: &["host", "gpu_index", "gpu_uuid", "day", "busy_share_pct", "recorded_hours"],
        },
        "gpu_minutes_from_raw" => Case { params: vec![], columns: GPU_MINUTES },
        "gpu_models" => Case { params: vec![start, end], columns: &["gpu_model", "gpus", "gpu_hours"] },
        "ledger_gpu_minutes" => Case {
            params: vec![start.clone(), end.clone(), day(), text(""), text("\u{10FFFF}")],
            columns: &[
                "gpu_uuid",
                "minute",
                "host",
                "gpu_index",
                "gpu_model",
                "seconds",
                "gpu_util_pct_mean",
                "sm_active_pct_mean",
                "energy_j",
                "power_mw_mean",
                "proc_held",
                "parent_gpu_uuid",
                "mig_profile",
                "mig_slices",
                "mig_total_slices",
                "pcie_tx_bytes_per_s_mean",
                "pcie_rx_bytes_per_s_mean",
                "fb_total_bytes",
                "tensor_active_pct_mean",
                "dram_active_pct_mean",
            ],
        },
        "ledger_proc_minutes" => Case {
            params: vec![start.clone(), end.clone(), day(), text(""), text("\u{10FFFF}")],
            columns: &[
                "gpu_uuid",
                "minute",
                "pid",
                "proc_start",
                "seconds",
                "used_mem_bytes_mean",
                "used_mem_bytes_max",
                "sm_util_pct_mean",
                "comm",
                "user",
                "uid",
                "k8s_namespace",
                "k8s_labels",
                "slurm_account",
                "host",
                "slurm_job_id",
                "k8s_pod_name",
                "container_id",
            ],
        },
        "alloc_minute_states" => Case {
            params: vec![start.clone(), end.clone()],
            columns: &[
                "gpu_uuid",
                "minute",
                "source",
                "holder",
                "k8s_namespace",
                "k8s_pod_name",
                "k8s_container",
                "k8s_labels",
                "slurm_job_id",
                "slurm_account",
                "slurm_partition",
                "user",
                "seconds",
                "team",
            ],
        },
        "ledger_alloc_minutes" => Case {
            params: vec![start.clone(), end.clone(), day(), text(""), text("\u{10FFFF}")],
            columns: &[
                "gpu_uuid",
                "minute",
                "source",
                "k8s_namespace",
                "k8s_pod_name",
                "k8s_container",
                "k8s_labels",
                "slurm_job_id",
                "slurm_account",
                "user",
                "seconds",
                "host",
            ],
        },
        "idle_cost" => Case {
            params: vec![text("team")],
            columns: &[
                "key",
                "host",
                "gpu_index",
                "parent_gpu_uuid",
                "mig_profile",
                "idle_gpu_hours",
                "idle_held_gpu_hours",
                "idle_empty_gpu_hours",
                "idle_cost",
                "unknown_gpu_hours",
                "unknown_cost",
            ],
        },
        "gpu_minute_states" => Case {
            // The period and the config's threshold.
            params: vec![start.clone(), end.clone(), threshold],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "gpu_model",
                "minute",
                "seconds",
                "util_pct",
                "sm_active_pct",
                "activity_pct",
                "energy_j",
                "energy_known",
                "energy_unknown_seconds",
                "held",
                "proc_held",
                "allocated",
                "procs",
                "state",
                "parent_gpu_uuid",
                "mig_profile",
                "capacity_share",
                "partitioned",
                "pcie_tx_bytes_per_s",
                "pcie_rx_bytes_per_s",
            ],
        },
        "proc_minute_states" => Case {
            params: vec![start.clone(), end.clone()],
            columns: &[
                "gpu_uuid",
                "minute",
                "pid",
                "proc_start",
                "seconds",
                "mem_time",
                "sm_time",
                "sm_known",
                "used_mem_bytes",
                "held",
                "comm",
                "user",
                "uid",
                "k8s_namespace",
                "k8s_labels",
                "slurm_account",
                "team",
            ],
        },
        "minute_costs" => Case {
            // The config's energy price and PUE.
            params: vec![f64p(0.2), f64p(1.3)],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "gpu_model",
                "minute",
                "state",
                "util_pct",
                "activity_pct",
                "team",
                "user",
                "pid",
                "holder",
                "share",
                "seconds",
                "energy_j",
                "cost",
                "parent_gpu_uuid",
                "mig_profile",
            ],
        },
        "newest_sample" => Case { params: vec![text("h1")], columns: &["newest"] },
        "job_timeline" => Case {
            params: vec![start.clone(), end.clone(), text("h1"), text("GPU-A")],
            columns: &["minute", "util_pct", "sm_active_pct", "tensor_active_pct", "mem_pct"],
        },
        "pick" => Case {
            params: vec![text("h1"), start],
            columns: &["gpu_index", "gpu_uuid", "mean_util_pct", "free_bytes", "newest", "samples", "device"],
        },
        "power" => Case { params: vec![i64p(300)], columns: &["bucket", "power_kw", "energy_kwh"] },
        "proc_minutes_from_raw" => Case { params: vec![], columns: PROC_MINUTES },
        "reclaim" => Case {
            params: vec![i64p(5)],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "idle_since",
                "idle_minutes",
                "idle_gpu_hours",
                "held_by",
                "allocated_to",
                "allocated_since",
                "still_idle",
            ],
        },
        "samples_between" => Case { params: vec![start, end], columns: &["first_ts", "last_ts"] },
        "budget_hours" => Case { params: vec![], columns: &["team", "hour", "cost"] },
        "spend" => Case {
            params: vec![],
            columns: &[
                "team",
                "gpu_hours",
                "busy_gpu_hours",
                "idle_held_gpu_hours",
                "idle_empty_gpu_hours",
                "unknown_gpu_hours",
                "energy_kwh",
                "cost",
                "busy_cost",
                "idle_cost",
                "unknown_cost",
                "share_pct",
            ],
        },
        "windows" => Case {
            params: vec![],
            columns: &[
                "dow",
                "hour",
                "mean_util_pct",
                "idle_share_pct",
                "idle_gpu_hours_per_week",
                "idle_cost_per_week",
                "gpus",
                "weeks",
            ],
        },
        "window_gpus" => Case {
            params: vec![],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "parent_gpu_uuid",
                "mig_mode",
                "dow",
                "hour",
                "idle_share_pct",
                "idle_cost",
            ],
        },
        "process_jobs" => Case {
            params: vec![start.clone(), end.clone()],
            columns: &["gpu_uuid", "pid", "proc_start", "k8s_pod_uid", "slurm_job_id"],
        },
        "starved" => Case {
            params: vec![i64p(512 << 20), i64p(5), i64p(100)],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "pid",
                "proc_start",
                "comm",
                "user",
                "team",
                "used_mem_bytes",
                "idle_since",
                "idle_minutes",
                "still_running",
                "still_idle",
                "activity_pct",
                "pcie_rx_mib_per_s",
                "pcie_tx_mib_per_s",
            ],
        },
        "zombies" => Case {
            params: vec![i64p(512 << 20), i64p(5), i64p(100)],
            columns: &[
                "host",
                "gpu_index",
                "gpu_uuid",
                "pid",
                "proc_start",
                "comm",
                "user",
                "team",
                "used_mem_bytes",
                "idle_since",
                "idle_minutes",
                "still_running",
                "still_idle",
            ],
        },
        _ => return None,
    };
    Some(case)
}

/// The comment lines a query file opens with.
fn header(text: &str) -> Vec<&str> {
    text.lines().take_while(|l| l.starts_with("--")).map(|l| l.trim_start_matches("--").trim_end()).collect()
}

/// How many parameters (`$1`, `$2`, …) the header's `Parameters:` section
/// lists; 0 when it says "none".
fn documented_params(header: &[&str]) -> usize {
    let Some(at) = header.iter().position(|l| l.trim_start().starts_with("Parameters:")) else { return 0 };
    header[at + 1..]
        .iter()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.trim_start().starts_with('$'))
        .count()
}

/// The header's text from its `Output` section on.
fn documented_output(header: &[&str]) -> String {
    let at = header.iter().position(|l| l.trim_start().starts_with("Output")).unwrap_or(header.len());
    header[at..].join("\n")
}

/// Whether `word` appears in `text` as a whole identifier.
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let before = text[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[i + word.len()..].chars().next().is_none_or(|c| !ident(c));
        before && after
    })
}

/// What a query returned.
#[derive(Debug)]
struct Answer {
    /// The result's column names.
    names: Vec<String>,
    /// Its rows, as JSON objects.
    rows: Vec<Value>,
    /// Its timestamp columns that are not `Timestamp(Millisecond, "UTC")`.
    naive: Vec<String>,
}

/// What `sql` returns with `params` bound.
async fn run(session: &Session, sql: &str, params: Vec<ScalarValue>) -> Result<Answer, String> {
    let df = session.sql_with_params(sql, params).await.map_err(|e| format!("plan: {e:#}"))?;
    let (schema, batches) = session.collect(df).await.map_err(|e| format!("run: {e:#}"))?;
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    // docs/src/recording.md: timestamps are Timestamp(Millisecond, "UTC").
    let naive: Vec<String> = schema
        .fields()
        .iter()
        .filter(|f| {
            matches!(f.data_type(), DataType::Timestamp(unit, tz)
            if *unit != TimeUnit::Millisecond || tz.as_deref() != Some("UTC"))
        })
        .map(|f| format!("{} is {}", f.name(), f.data_type()))
        .collect();

    // The batches' own schema: the engine may choose another string type
    // than the plan's (Utf8View for Utf8).
    let schema = batches.first().map_or(schema, |b| b.schema());
    let json =
        write_batches(Format::Json, schema, &batches, Vec::new()).map_err(|e| format!("JSON: {e:#}"))?;
    let rows: Vec<Value> = serde_json::from_slice(&json).map_err(|e| format!("JSON: {e}"))?;
    Ok(Answer { names, rows, naive })
}

/// `rows` in a fixed order, for queries that do not sort.
fn sorted(rows: &[Value]) -> Vec<Value> {
    let mut rows = rows.to_vec();
    rows.sort_by_key(Value::to_string);
    rows
}

/// `a` and `b` are the same, numbers to within 1e-9 of each other's size
/// (sums in another order may differ in the last bit).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Row lists `a` and `b` hold the same rows, in any order.
fn same_rows(a: &[Value], b: &[Value]) -> bool {
    // Sorting by text puts rows that differ only in a number's last bit
    // next to each other only when the numbers come after the keys; sort
    // by the rows with numbers rounded instead.
    let key = |v: &Value| -> String {
        let mut v = v.clone();
        if let Value::Object(m) = &mut v {
            for x in m.values_mut() {
                if let Some(f) = x.as_f64().filter(|_| x.is_f64()) {
                    *x = Value::from((f * 1e6).round() / 1e6);
                }
            }
        }
        v.to_string()
    };
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_by_key(key);
    b.sort_by_key(key);
    same_value(&Value::Array(a), &Value::Array(b))
}

/// Every query's rows on the data in `data`, by name, after checking its
/// columns. Failures are added to `failures`.
async fn run_all(data: &Path, variant: &str, failures: &mut Vec<String>) -> Vec<(String, Vec<Value>)> {
    let session = Session::open(data, MemoryLimit::for_this_machine()).await.expect("open the data folder");
    let config = Config::from_toml(scenario::CONFIG, Path::new("apron.toml")).expect("the scenario's config");
    let period = Period { start_ms: ms(START), end_ms: ms(END) };
    apron_analyze::config::pricing::register_minute_costs(&session, &config, &period)
        .await
        .expect("register minute_costs");
    // The figures read the ledger's cost_buckets, here per minute.
    let rules = apron_analyze::report::context::rules(
        config.zombie.min_idle,
        config.zombie.min_mem_mib,
        config.reclaim.idle_for,
    );
    apron_analyze::ledger::Ledger::compute(&session, &config, &period, 60_000, rules)
        .await
        .expect("the ledger")
        .register(&session)
        .expect("register cost_buckets");
    let mut out = Vec::new();
    for (name, sql) in apron_analyze::session::queries::ALL {
        let Some(case) = case(name) else {
            failures.push(format!("{name} ({variant}): no case in tests/it/queries.rs"));
            continue;
        };
        match run(&session, sql, case.params).await {
            Ok(Answer { names, rows, naive }) => {
                if names != case.columns {
                    failures.push(format!("{name} ({variant}): columns {names:?}, want {:?}", case.columns));
                }
                if !naive.is_empty() {
                    failures.push(format!(
                        "{name} ({variant}): DESIGN.md has timestamps Timestamp(Millisecond, \"UTC\"), but {}",
                        naive.join(", ")
                    ));
                }
                out.push(((*name).to_owned(), rows));
            }
            Err(e) => failures.push(format!("{name} ({variant}): {e}")),
        }
    }
    out
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

#[test]
fn every_query_file_is_covered_and_documents_its_parameters_and_columns() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("queries/ exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".sql").map(str::to_owned))
        .collect();
    let embedded: BTreeSet<String> =
        apron_analyze::session::queries::ALL.iter().map(|(n, _)| (*n).to_owned()).collect();
    assert_eq!(on_disk, embedded, "every queries/*.sql is embedded in apron (queries::ALL), and only those");
    let mut failures = Vec::new();
    for name in &on_disk {
        let Some(case) = case(name) else {
            failures.push(format!("{name}.sql: no case in tests/it/queries.rs"));
            continue;
        };
        let text = std::fs::read_to_string(dir.join(format!("{name}.sql"))).expect("read the query");
        let header = header(&text);
        let documented = documented_params(&header);
        if documented != case.params.len() {
            failures.push(format!(
                "{name}.sql: its header lists {documented} parameters, the test binds {}",
                case.params.len()
            ));
        }
        let output = documented_output(&header);
        for column in case.columns {
            // The idle_cost query's first column is documented as "key".
            if !mentions(&output, column) {
                failures.push(format!(
                    "{name}.sql: output column {column} is not in its header's Output section"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_query_runs_with_and_without_rollups_and_agrees() {
    let fx = Fixture::new();
    let rt = runtime();
    let mut failures = Vec::new();
    let with_rollups = rt.block_on(run_all(&fx.data, "with rollups", &mut failures));
    // The recorder's rollups, to compare with the SQL's minutes from raw.
    let (gpu_minutes, proc_minutes) = rt.block_on(async {
        let session = Session::open(&fx.data, MemoryLimit::for_this_machine()).await.expect("open");
        let gpu = run(&session, "SELECT * FROM gpu_minutes", vec![]).await.expect("gpu_minutes");
        let proc = run(&session, "SELECT * FROM proc_minutes", vec![]).await.expect("proc_minutes");
        (gpu.rows, proc.rows)
    });
    fx.remove_rollups();
    let raw_only = rt.block_on(run_all(&fx.data, "raw files alone", &mut failures));
    assert_eq!(with_rollups.len(), raw_only.len(), "{failures:?}");
    for ((name, a), (_, b)) in with_rollups.iter().zip(&raw_only) {
        if !same_rows(a, b) {
            failures
                .push(format!("{name}: rows differ on raw files alone:\n  rollups {a:?}\n  raw     {b:?}"));
        }
    }
    let rows =
        |name: &str| with_rollups.iter().find(|(n, _)| n == name).map(|(_, r)| r.clone()).unwrap_or_default();
    let mut check = |what: &str, ok: bool, got: &dyn std::fmt::Debug| {
        if !ok {
            failures.push(format!("{what}: got {got:?}"));
        }
    };
    let near = |v: &Value, x: f64| v.as_f64().is_some_and(|v| (v - x).abs() <= 1e-9);

    // The rollups the recorder wrote are the minutes the SQL computes
    // from raw samples (GPU-A 10 + GPU-B 10 + GPU-C 8 = 28 GPU-minutes;
    // alice 10 + bob 5 + carol 8 = 23 process-minutes).
    let from_raw = sorted(&rows("gpu_minutes_from_raw"));
    check("gpu_minutes_from_raw: 28 rows", from_raw.len() == 28, &from_raw.len());
    check(
        "gpu_minutes_from_raw = the recorder's gpu_minutes",
        same_rows(&from_raw, &gpu_minutes),
        &gpu_minutes.first(),
    );
    let from_raw = sorted(&rows("proc_minutes_from_raw"));
    check("proc_minutes_from_raw: 23 rows", from_raw.len() == 23, &from_raw.len());
    check(
        "proc_minutes_from_raw = the recorder's proc_minutes",
        same_rows(&from_raw, &proc_minutes),
        &proc_minutes.first(),
    );

    // GPU-A 10 minutes and GPU-C 8 of "Test A", GPU-B 10 of "Test B".
    let models = rows("gpu_models");
    let got: Vec<(&str, i64, f64)> = models
        .iter()
        .map(|r| {
            let model = r["gpu_model"].as_str().unwrap_or_default();
            (model, r["gpus"].as_i64().unwrap_or_default(), r["gpu_hours"].as_f64().unwrap_or_default())
        })
        .collect();
    let want_models = [("Test A", 2, 18.0 / 60.0), ("Test B", 1, 10.0 / 60.0)];
    let same = got.len() == 2
        && got.iter().zip(want_models).all(|(g, w)| g.0 == w.0 && g.1 == w.1 && (g.2 - w.2).abs() < 1e-9);
    check("gpu_models: per model", same, &models);
    // Coverage: 28 minutes of 60 s recorded, 3 GPUs, two models.
    let cov = rows("coverage");
    check("coverage: one row", cov.len() == 1, &cov);
    if let Some(c) = cov.first() {
        check("coverage: first_minute", c["first_minute"] == "2026-11-02T10:00:00Z", &c["first_minute"]);
        check("coverage: last_minute", c["last_minute"] == "2026-11-02T10:09:00Z", &c["last_minute"]);
        check("coverage: gpus", c["gpus"] == 3, &c["gpus"]);
        check("coverage: recorded_seconds", near(&c["recorded_seconds"], 1680.0), &c["recorded_seconds"]);
        check("coverage: models", c["models"] == serde_json::json!(["Test A", "Test B"]), &c["models"]);
    }
    let span = rows("samples_between");
    let want = serde_json::json!([{"first_ts": "2026-11-02T10:00:00Z", "last_ts": "2026-11-02T10:09:50Z"}]);
    check("samples_between", Value::Array(span.clone()) == want, &span);

    // minute_costs: GPU-A m 0–4 two owners (10 rows), m 5–9 one (5), GPU-B
    // 10, GPU-C 8: 33 rows; 1680 s, 28 × 18 kJ, 2.7964 in all.
    let mc = rows("minute_costs");
    check("minute_costs: 33 rows", mc.len() == 33, &mc.len());
    let sum = |rows: &[Value], k: &str| rows.iter().filter_map(|r| r[k].as_f64()).sum::<f64>();
    check("minute_costs: Σ seconds", (sum(&mc, "seconds") - 1680.0).abs() < 1e-6, &sum(&mc, "seconds"));
    check("minute_costs: Σ energy_j", (sum(&mc, "energy_j") - 504_000.0).abs() < 1e-6, &sum(&mc, "energy_j"));
    check("minute_costs: Σ cost", (sum(&mc, "cost") - 2.7964).abs() < 1e-9, &sum(&mc, "cost"));

    // spend before rounding (tests/it/reports.rs works these out).
    let spend = rows("spend");
    let costs: Vec<(String, f64, f64, f64)> = spend
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
            (r["team"].as_str().unwrap_or_default().to_owned(), f("cost"), f("busy_cost"), f("idle_cost"))
        })
        .collect();
    let want = [
        ("nlp", 0.9704, 0.9704, 0.0),
        ("vision", 0.758125, 0.151625, 0.6065),
        ("(unallocated)", 0.613, 0.0, 0.613),
        ("unassigned", 0.454875, 0.454875, 0.0),
    ];
    let same = costs.len() == want.len()
        && costs.iter().zip(&want).all(|(g, w)| {
            g.0 == w.0 && (g.1 - w.1).abs() < 1e-9 && (g.2 - w.2).abs() < 1e-9 && (g.3 - w.3).abs() < 1e-9
        });
    check("spend: unrounded (team, cost, busy, idle)", same, &costs);
    let idle = rows("idle_cost");
    let got: Vec<(String, f64)> = idle
        .iter()
        .map(|r| {
            (r["key"].as_str().unwrap_or_default().to_owned(), r["idle_cost"].as_f64().unwrap_or(f64::NAN))
        })
        .collect();
    let same = got.len() == 2
        && got[0].0 == "(unallocated)"
        && (got[0].1 - 0.613).abs() < 1e-9
        && got[1].0 == "vision"
        && (got[1].1 - 0.6065).abs() < 1e-9;
    check("idle_cost by team: unrounded", same, &got);
    let windows = rows("windows");
    let cell = windows.first().cloned().unwrap_or_default();
    let same = windows.len() == 1
        && cell["dow"] == "Mon"
        && cell["hour"] == 10
        && near(&cell["mean_util_pct"], 37.5)
        && near(&cell["idle_share_pct"], 100.0 * 900.0 / 1680.0)
        && near(&cell["idle_cost_per_week"], 1.2195)
        && cell["weeks"] == 1;
    check("windows: the Monday 10:00 cell", same, &windows);
    // Each GPU's idle cost in that hour: GPU-A 5 idle minutes (0.6065),
    // GPU-B 10 (0.613), GPU-C none. The query does not sort.
    let gpus = rows("window_gpus");
    let mut got: Vec<(String, f64)> = gpus
        .iter()
        .map(|r| {
            (
                r["gpu_uuid"].as_str().unwrap_or_default().to_owned(),
                r["idle_cost"].as_f64().unwrap_or(f64::NAN),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    let same = got.len() == 3
        && got
            .iter()
            .zip([("GPU-A", 0.6065), ("GPU-B", 0.613), ("GPU-C", 0.0)])
            .all(|((g, c), (wg, wc))| g == wg && (c - wc).abs() < 1e-9);
    check("window_gpus: each GPU's idle cost in the hour", same, &got);

    // The charts' series, five-minute buckets. 10:00: GPU-A and GPU-C busy
    // (2 GPUs), GPU-B idle-empty; 10:05: GPU-C busy 3 of 5 minutes (0.6),
    // GPU-A idle-held, GPU-B idle-empty.
    let want = serde_json::json!([
        {"bucket": "2026-11-02T10:00:00Z", "busy": 2.0, "idle_held": 0.0, "idle_empty": 1.0, "unknown": 0.0},
        {"bucket": "2026-11-02T10:05:00Z", "busy": 0.6, "idle_held": 1.0, "idle_empty": 1.0, "unknown": 0.0},
    ]);
    // (The bucket's time zone is checked above, with every query's.)
    let utc = |mut rows: Vec<Value>| {
        for r in &mut rows {
            if let Some(b) = r["bucket"].as_str().filter(|b| !b.ends_with('Z')) {
                r["bucket"] = Value::from(format!("{b}Z"));
            }
        }
        Value::Array(rows)
    };
    let got = utc(rows("fleet_state"));
    check("fleet_state", same_value(&got, &want), &got);
    // 300 W a GPU: 3 GPUs = 0.9 kW in the first bucket, 13 GPU-minutes of
    // 5 = 2.6 GPUs = 0.78 kW in the second; 15 × 18 kJ = 0.075 kWh, then
    // 28 × 18 kJ = 0.14 kWh in all.
    let want = serde_json::json!([
        {"bucket": "2026-11-02T10:00:00Z", "power_kw": 0.9, "energy_kwh": 0.075},
        {"bucket": "2026-11-02T10:05:00Z", "power_kw": 0.78, "energy_kwh": 0.14},
    ]);
    let got = utc(rows("power"));
    check("power", same_value(&got, &want), &got);
    // GPU-A busy (50%) for 5 minutes of 10: 50%; 10 minutes recorded. GPU-C 8.
    let want = serde_json::json!([
        {"host": "h1", "gpu_index": 0, "gpu_uuid": "GPU-A", "day": "2026-11-02", "busy_share_pct": 50.0, "recorded_hours": 10.0 / 60.0},
        {"host": "h1", "gpu_index": 1, "gpu_uuid": "GPU-B", "day": "2026-11-02", "busy_share_pct": 0.0, "recorded_hours": 10.0 / 60.0},
        {"host": "h2", "gpu_index": 0, "gpu_uuid": "GPU-C", "day": "2026-11-02", "busy_share_pct": 100.0, "recorded_hours": 8.0 / 60.0},
    ]);
    let got = Value::Array(rows("gpu_days"));
    check("gpu_days", same_value(&got, &want), &got);

    // The other reports' rows (tests/it/reports.rs checks them in full).
    let reclaim = rows("reclaim");
    let gpus: Vec<&str> = reclaim.iter().filter_map(|r| r["gpu_uuid"].as_str()).collect();
    check("reclaim: GPU-B then GPU-A", gpus == ["GPU-B", "GPU-A"], &gpus);
    let zombies = rows("zombies");
    let who: Vec<(&str, i64)> = zombies
        .iter()
        .map(|r| (r["user"].as_str().unwrap_or_default(), r["used_mem_bytes"].as_i64().unwrap_or_default()))
        .collect();
    check("zombies: alice's 1 GiB", who == [("alice", GIB)], &who);
    let pick = rows("pick");
    let order: Vec<i64> = pick.iter().filter_map(|r| r["gpu_index"].as_i64()).collect();
    // GPU-B's mean is 0%, GPU-A's 25%.
    check("pick: h1's GPU 1 before GPU 0", order == [1, 0], &order);
    let alerts = rows("alerts");
    // No window is 90% recorded, and every GPU has a sample after 10:05:
    // nothing fires.
    check("alerts: none", alerts.is_empty(), &alerts);

    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
