//! `apron sql -f queries/NAME.sql --param …` runs every named query on its
//! own, as its header promises, as a real process over the hand-built fleet
//! of `apron_tests::scenario` (written through the recorder's writer).
//!
//! The values come from each file's `Parameters:` block: a parameter's
//! description picks its value from [`VALUES`], so a new query runs here as
//! soon as its header documents its parameters, and a parameter of a kind
//! this test does not know fails it, naming the file and the line. The rows
//! `apron sql` prints are compared with the rows apron's library returns for
//! the same SQL with the values bound as typed `ScalarValue`s written out
//! here by hand, not parsed from text: the binding, not the SQL, is under
//! test.
//!
//! Queries over `minute_costs` get it from `apron sql` for `--from`/`--to`
//! and `--config`; those calling `apron_team` or `apron_gpu_rate` get the
//! functions from the config.

use std::path::{Path, PathBuf};

use apron_analyze::output::{Format, write_batches};
use apron_analyze::report::period::{Period, timestamp};
use apron_analyze::session::memory::MemoryLimit;
use apron_analyze::{Config, Session};
use apron_tests::scenario::{self, END, FROM_TO, Fixture, START, ms};
use datafusion::common::ScalarValue;
use serde_json::Value;

/// A parameter's value, chosen by a phrase of its description: the text
/// given to `--param`, and the value the library binds for comparison.
/// The first phrase the description contains wins.
struct Choice {
    /// Lower-case words the description contains.
    phrase: &'static str,
    /// What `--param N=` gets.
    text: &'static str,
    /// The same value, typed by hand.
    value: fn() -> ScalarValue,
}

/// The scenario's values for every kind of parameter the headers document:
/// its span (10:00–10:10 UTC), its config (idle below 5 %, 0.2 per kWh, PUE
/// 1.3), host h1, the default alert thresholds.
const VALUES: &[Choice] = &[
    Choice { phrase: "period start", text: START, value: || timestamp(ms(START)) },
    Choice { phrase: "span start", text: START, value: || timestamp(ms(START)) },
    Choice { phrase: "window start", text: START, value: || timestamp(ms(START)) },
    Choice { phrase: "period end", text: END, value: || timestamp(ms(END)) },
    Choice { phrase: "slice start", text: START, value: || timestamp(ms(START)) },
    Choice { phrase: "slice end", text: END, value: || timestamp(ms(END)) },
    Choice {
        phrase: "the slice's day",
        text: "2026-11-02",
        value: || {
            ScalarValue::Date32(Some(i32::try_from(ms("2026-11-02T00:00:00Z") / 86_400_000).expect("fits")))
        },
    },
    Choice { phrase: "first host read", text: "", value: || ScalarValue::Utf8(Some(String::new())) },
    Choice { phrase: "host after the last read", text: "zz", value: || ScalarValue::Utf8(Some("zz".into())) },
    Choice { phrase: "span end", text: END, value: || timestamp(ms(END)) },
    Choice { phrase: "now (timestamp", text: END, value: || timestamp(ms(END)) },
    Choice {
        phrase: "no_data cut-off",
        text: "2026-11-02T10:05:00Z",
        value: || timestamp(ms("2026-11-02T10:05:00Z")),
    },
    Choice { phrase: "host name", text: "h1", value: || ScalarValue::Utf8(Some("h1".into())) },
    Choice { phrase: "gpu uuid", text: "GPU-A", value: || ScalarValue::Utf8(Some("GPU-A".into())) },
    Choice { phrase: "grouping", text: "team", value: || ScalarValue::Utf8(Some("team".into())) },
    Choice { phrase: "idle threshold", text: "5", value: || ScalarValue::Float64(Some(5.0)) },
    Choice { phrase: "low_usage_1h threshold", text: "10", value: || ScalarValue::Float64(Some(10.0)) },
    Choice { phrase: "low_usage_4h threshold", text: "10.0", value: || ScalarValue::Float64(Some(10.0)) },
    Choice { phrase: "high_usage_15m threshold", text: "80", value: || ScalarValue::Float64(Some(80.0)) },
    Choice { phrase: "energy price", text: "0.2", value: || ScalarValue::Float64(Some(0.2)) },
    Choice { phrase: "power usage effectiveness", text: "1.3", value: || ScalarValue::Float64(Some(1.3)) },
    Choice { phrase: "bucket length", text: "300", value: || ScalarValue::Int64(Some(300)) },
    Choice { phrase: "(bytes)", text: "536870912", value: || ScalarValue::Int64(Some(512 << 20)) },
    Choice { phrase: "(minutes)", text: "5", value: || ScalarValue::Int64(Some(5)) },
    Choice { phrase: "(mib per second)", text: "100", value: || ScalarValue::Int64(Some(100)) },
];

/// One documented parameter: `$n` and its description.
#[derive(Debug)]
struct Documented {
    number: usize,
    description: String,
}

/// The `$n` lines of the `Parameters:` block of a query file's header (a
/// description may continue on the next lines; they are joined).
fn documented_params(sql: &str) -> Vec<Documented> {
    let header: Vec<&str> = sql.lines().take_while(|l| l.starts_with("--")).map(|l| l[2..].trim()).collect();
    let Some(at) = header.iter().position(|l| l.starts_with("Parameters:")) else { return Vec::new() };
    let mut params: Vec<Documented> = Vec::new();
    for line in header[at + 1..].iter().take_while(|l| !l.is_empty()) {
        let numbered = line.strip_prefix('$').and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Some((digits.parse::<usize>().ok()?, rest[digits.len()..].trim().to_owned()))
        });
        match (numbered, params.last_mut()) {
            (Some((number, description)), _) => params.push(Documented { number, description }),
            (None, Some(last)) => {
                last.description.push(' ');
                last.description.push_str(line);
            }
            (None, None) => {}
        }
    }
    params
}

/// The value for a parameter described as `description`.
fn choose(description: &str) -> Option<&'static Choice> {
    let description = description.to_ascii_lowercase();
    VALUES.iter().find(|c| description.contains(c.phrase))
}

/// The `queries/*.sql` files, by name.
fn query_files() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("queries/ exists")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.strip_suffix(".sql")?.to_owned();
            Some((name, path))
        })
        .collect();
    files.sort();
    files
}

/// `a` and `b` hold the same rows in the same order, numbers to within 1e-9
/// of their size (a sum in another order may differ in the last bit).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The rows in a fixed order, whatever order the query gives them in: by
/// their text with numbers rounded to 1e-6, so that rows differing only in
/// a float's last bit sort alike.
fn sorted(rows: &Value) -> Value {
    let key = |row: &Value| -> String {
        let mut row = row.clone();
        if let Value::Object(m) = &mut row {
            for x in m.values_mut() {
                if let Some(f) = x.as_f64().filter(|_| x.is_f64()) {
                    *x = Value::from((f * 1e6).round() / 1e6);
                }
            }
        }
        row.to_string()
    };
    let mut rows = rows.as_array().cloned().unwrap_or_default();
    rows.sort_by_key(key);
    Value::Array(rows)
}

/// The rows the library returns for `sql` with `params` bound, as JSON.
async fn library_rows(session: &Session, sql: &str, params: Vec<ScalarValue>) -> Value {
    let df = session.sql_with_params(sql, params).await.expect("plans");
    let (schema, batches) = session.collect(df).await.expect("runs");
    let schema = batches.first().map_or(schema, |b| b.schema());
    let json = write_batches(Format::Json, schema, &batches, Vec::new()).expect("JSON");
    serde_json::from_slice(&json).expect("valid JSON")
}

/// A host of its own with a fatal XID and a double-bit ECC error in the
/// scenario's period, so the fault queries have rows to compare.
fn add_faults(data: &Path) {
    use apron_schemas::{DataLayout, GpuEvent, GpuSample};
    use apron_store::source::Tick;
    let mut w = apron_store::writer::RollingWriter::new(
        DataLayout::new(data),
        "faulty",
        std::time::Duration::from_secs(600),
    )
    .expect("host");
    let t0 = ms(START) + 60_000;
    for i in 0..12 {
        let ts = t0 + i * 10_000;
        let event = |kind: &str, xid: Option<i32>| GpuEvent {
            ts,
            gpu_uuid: "GPU-faulty-0".into(),
            kind: kind.into(),
            xid,
            ..GpuEvent::default()
        };
        let events = match i {
            1 => vec![event("xid", Some(79))],
            2 => vec![event("ecc_dbe", None)],
            _ => Vec::new(),
        };
        let gpus = vec![GpuSample {
            ts,
            gpu_uuid: "GPU-faulty-0".into(),
            interval_ms: 10_000,
            gpu_util_pct: Some(if i < 6 { 50 } else { 0 }),
            ..GpuSample::default()
        }];
        w.push(ts, &Tick { gpus, events, ..Tick::default() }).expect("push");
    }
    w.close().expect("close");
}

#[test]
fn every_query_file_runs_through_apron_sql_with_its_documented_params() {
    let fx = Fixture::new();
    add_faults(&fx.data);
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let session =
        rt.block_on(Session::open(&fx.data, MemoryLimit::for_this_machine())).expect("open the data folder");
    let config = Config::from_toml(scenario::CONFIG, Path::new("apron.toml")).expect("the scenario's config");
    let period = Period { start_ms: ms(START), end_ms: ms(END) };
    rt.block_on(apron_analyze::config::pricing::register_minute_costs(&session, &config, &period))
        .expect("register minute_costs");
    // The figures read the ledger's cost_buckets, per minute as under `apron sql`.
    let rules = apron_analyze::report::context::rules(
        config.zombie.min_idle,
        config.zombie.min_mem_mib,
        config.reclaim.idle_for,
    );
    rt.block_on(apron_analyze::ledger::Ledger::compute(&session, &config, &period, 60_000, rules))
        .expect("the ledger")
        .register(&session)
        .expect("register cost_buckets");

    let mut failures = Vec::new();
    let mut with_rows = 0;
    let files = query_files();
    assert!(files.len() >= 17, "the queries are found: {files:?}");
    for (name, path) in &files {
        let sql = std::fs::read_to_string(path).expect("read the query");
        let documented = documented_params(&sql);
        let mut args: Vec<String> = vec!["--format".into(), "json".into(), "sql".into(), "-f".into()];
        args.push(path.display().to_string());
        args.extend(FROM_TO.iter().map(|s| (*s).to_owned()));
        let mut values = Vec::new();
        for (i, param) in documented.iter().enumerate() {
            if param.number != i + 1 {
                failures.push(format!("{name}.sql: parameter {} is documented as ${}", i + 1, param.number));
            }
            let Some(choice) = choose(&param.description) else {
                failures.push(format!(
                    "{name}.sql: no value for ${} \"{}\"; add its kind to VALUES in tests/it/sql_params.rs",
                    param.number, param.description
                ));
                continue;
            };
            args.push("--param".into());
            args.push(format!("{}={}", param.number, choice.text));
            values.push((choice.value)());
        }
        let out = fx.apron(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            failures.push(format!("{name}.sql: apron {} failed: {stderr}", args.join(" ")));
            continue;
        }
        let printed: Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                failures
                    .push(format!("{name}.sql: not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
                continue;
            }
        };
        let expected = rt.block_on(library_rows(&session, &sql, values));
        // Compared as sets: the order is the query's, not the binding's.
        let (printed, expected) = (sorted(&printed), sorted(&expected));
        if !same(&printed, &expected) {
            failures.push(format!("{name}.sql: apron sql printed {printed}, the library gives {expected}"));
        }
        if printed.as_array().is_some_and(|rows| !rows.is_empty()) {
            with_rows += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Equal and empty would prove nothing: most queries have rows here.
    assert!(with_rows * 4 >= files.len() * 3, "only {with_rows} of {} queries returned rows", files.len());
}

#[test]
fn pick_sql_with_params_gives_what_apron_pick_ranks() {
    let fx = Fixture::new();
    // The scenario's h1: GPU-B (index 1) idle throughout, GPU-A (0) at 50 %
    // for 5 of its 10 minutes, so 25 % on average.
    let pick = fx.apron(&[
        "--format",
        "json",
        "sql",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../queries/pick.sql"),
        "--param",
        "1=h1",
        "--param",
        &format!("2={START}"),
    ]);
    assert!(pick.status.success(), "{}", String::from_utf8_lossy(&pick.stderr));
    let rows: Value = serde_json::from_slice(&pick.stdout).expect("JSON");
    let rows = rows.as_array().expect("rows");
    let index: Vec<i64> = rows.iter().map(|r| r["gpu_index"].as_i64().expect("index")).collect();
    assert_eq!(index, [1, 0]);
    let mean: Vec<f64> = rows.iter().map(|r| r["mean_util_pct"].as_f64().expect("mean")).collect();
    assert_eq!(mean, [0.0, 25.0]);
    assert_eq!(rows[0]["samples"], 60);

    // The newest sample of h1 is at 10:09:50, the last of its 60.
    let newest = fx.apron(&[
        "--format",
        "csv",
        "sql",
        "-f",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../queries/newest_sample.sql"),
        "--param",
        "$1=h1",
    ]);
    assert!(newest.status.success(), "{}", String::from_utf8_lossy(&newest.stderr));
    let text = String::from_utf8_lossy(&newest.stdout);
    assert_eq!(text.lines().collect::<Vec<_>>(), ["newest", "2026-11-02T10:09:50Z"], "{text}");
}

#[test]
fn values_are_typed_by_their_form_and_never_pasted_into_the_sql() {
    let fx = Fixture::new();
    let sql = "SELECT arrow_typeof($1) AS a, arrow_typeof($2) AS b, arrow_typeof($3) AS c, \
               arrow_typeof($4) AS d, $4 AS text, $2 + 1 AS next, $ts AS ts";
    let injected = "x' OR '1'='1";
    let out = fx.apron(&[
        "--format",
        "json",
        "sql",
        sql,
        "--param",
        "1=2026-11-01",
        "--param",
        "2=41",
        "--param",
        "3=2.5",
        "--param",
        &format!("4={injected}"),
        "--param",
        "ts=2026-11-02T09:00:00+01:00",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let row = &rows[0];
    assert_eq!(row["a"], "Timestamp(ms, \"UTC\")");
    assert_eq!(
        (row["b"].as_str(), row["c"].as_str(), row["d"].as_str()),
        (Some("Int64"), Some("Float64"), Some("Utf8"))
    );
    assert_eq!(row["text"], injected, "the quote is part of the value, not of the SQL");
    assert_eq!(row["next"], 42);
    assert_eq!(row["ts"], "2026-11-02T08:00:00Z");
}

/// A number past a float's range once became `inf`, which compares above
/// every value: `--param 1=1e309` matched every row of `x < $1`.
#[test]
fn a_number_past_a_floats_range_is_refused_by_name() {
    let fx = Fixture::new();
    for (given, value) in [("1=1e309", "1e309"), ("1=-1e400", "-1e400")] {
        let out = fx.apron(&[
            "sql",
            "SELECT count(*) AS n FROM gpu_samples WHERE gpu_util_pct < $1",
            "--param",
            given,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{given}: {stderr}");
        assert_eq!(out.stdout, b"", "{given}: nothing printed");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: --param 1={value}: the number is out of range")),
            "{stderr}"
        );
    }
    // The largest float is a number still.
    let out = fx.apron(&[
        "--format",
        "csv",
        "sql",
        "SELECT count(*) AS n FROM gpu_samples WHERE gpu_util_pct < $1",
        "--param",
        "1=1.7e308",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n168\n");
}
