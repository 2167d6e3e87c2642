//! End to end on Apache Spark: a simulated week of three hosts (one of them
//! named `0042`), the tables `apron ddl --engine spark` creates over its
//! folder, the config tables `apron export-config` writes, and the
//! statements `apron export-sql` generates, run by a real Spark in local
//! mode (`tests/spark/run.py`, one session). Spark's spend per team and idle
//! cost per user equal apron's: the unrounded figures (`apron sql` over the
//! ledger's `cost_buckets`) within 1e-6, and rounded by apron's own rule the
//! cents `apron spend` and `apron idle-cost --by user` print.
//!
//! The config exercises every way the definitions are joined: namespace
//! globs with a class and a `?`, a uid rule, users, Slurm accounts, a model
//! priced by an entry and one left to the built-in default.
//!
//! Spark comes from `apron_tests::spark` (installed on first use); the
//! test adds about 40 s to the suite besides that.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use apron_analyze::rounding::cents_keeping_total;
use apron_tests::bin;
use apron_tests::checks::Checks;
use serde_json::Value;

const CONFIG: &str = r#"currency = "USD"

[idle]
threshold_pct = 5

[energy]
price_per_kwh = 0.15
pue = 1.4

[[gpu_cost]]
model = "NVIDIA H100 80GB HBM3"
purchase_price = 30000
lifetime_years = 3
ops_per_gpu_hour = 0.25

[[team]]
name = "vision"
users = ["alice", "bob", "carol"]
k8s_namespaces = ["vision-[st]*", "vision-d?v"]

[[team]]
name = "nlp"
users = ["dmitri", "emma", "farid", "grace"]
k8s_namespaces = ["nlp-serve"]
slurm_accounts = ["nlp"]

[[team]]
name = "speech"
users = ["hana", "ivan"]
slurm_accounts = ["speech"]

[[team]]
name = "recsys"
k8s_namespaces = ["recsys-*"]

[[team]]
name = "ops"
uids = [0]
"#;

fn run(args: &[&str]) -> Output {
    let out = Command::new(bin("apron")).args(args).output().expect("apron runs");
    assert!(
        out.status.success(),
        "apron {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout).expect("JSON rows").as_array().expect("an array").clone()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Renames host `from` to `to` in every table of `data`.
fn rename_host(data: &Path, from: &str, to: &str) {
    for table in ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"] {
        for day in std::fs::read_dir(data.join(table)).expect("table folder") {
            let day = day.expect("entry").path();
            let old = day.join(format!("host={from}"));
            if old.exists() {
                std::fs::rename(&old, day.join(format!("host={to}"))).expect("rename the host folder");
            }
        }
    }
}

/// The rows of `rows` by the text of their column `key`.
fn by_key(rows: &[Value], key: &str) -> BTreeMap<String, Value> {
    rows.iter().map(|r| (r[key].as_str().unwrap_or("(null)").to_owned(), r.clone())).collect()
}

/// Checks that `spark`'s rows equal `apron`'s unrounded rows (same keys,
/// every number within 1e-6) and, rounded by apron's rule in the order
/// apron prints them, `printed`'s `money` column to the cent.
fn compare(
    c: &mut Checks,
    what: &str,
    (spark, spark_key): (&[Value], &str),
    (exact, exact_key): (&[Value], &str),
    (printed, printed_key): (&[Value], &str),
    money: &str,
) {
    let (spark, exact) = (by_key(spark, spark_key), by_key(exact, exact_key));
    c.check(spark.keys().eq(exact.keys()), || {
        format!(
            "{what}: Spark's rows {:?}, apron's {:?}",
            spark.keys().collect::<Vec<_>>(),
            exact.keys().collect::<Vec<_>>()
        )
    });
    for (key, row) in &exact {
        let Some(theirs) = spark.get(key) else { continue };
        for (column, value) in row.as_object().expect("a row") {
            let Some(ours) = value.as_f64() else { continue };
            let theirs = theirs[column].as_f64().unwrap_or(f64::NAN);
            c.near(&format!("{what}: {key} {column} (Spark, apron)"), theirs, ours, 1e-6);
        }
    }
    let order: Vec<String> =
        printed.iter().map(|r| r[printed_key].as_str().unwrap_or("(null)").to_owned()).collect();
    let Some(amounts) =
        order.iter().map(|k| spark.get(k).and_then(|r| r[money].as_f64())).collect::<Option<Vec<f64>>>()
    else {
        c.fail(format!("{what}: Spark lacks some of the rows apron prints: {order:?}"));
        return;
    };
    let cents = cents_keeping_total(&amounts).expect("cents");
    for ((key, row), cents) in order.iter().zip(printed).zip(cents) {
        let shown = row[money].as_f64().expect("a printed amount");
        c.eq(
            &format!("{what}: {key} {money} in cents (apron's print, Spark's rounded)"),
            (shown * 100.0).round() as i64,
            cents,
        );
    }
}

#[test]
fn spark_computes_apron_s_spend_and_idle_cost_from_the_same_queries() {
    let python = apron_tests::spark::python();
    let tmp = tempfile::tempdir().expect("temp dir");
    let (data, config, tables) =
        (tmp.path().join("data"), tmp.path().join("apron.toml"), tmp.path().join("config"));
    let text = |p: &Path| p.to_str().expect("a UTF-8 path").to_owned();
    let (data_s, config_s) = (text(&data), text(&config));
    run(&[
        "demo",
        "--month",
        "2026-11",
        "--days",
        "7",
        "--hosts",
        "3",
        "--interval",
        "60s",
        "--keep-data",
        &data_s,
        "--out",
        &text(&tmp.path().join("report")),
    ]);
    rename_host(&data, "gpu-node03", "0042");
    write(&config, CONFIG.as_bytes());

    run(&["--config", &config_s, "export-config", "--out", &text(&tables)]);
    let ddl = run(&["ddl", "--engine", "spark", "--location", &data_s, "--config-location", &text(&tables)]);
    write(&tmp.path().join("ddl.sql"), &ddl.stdout);
    let month = ["--month", "2026-11"];
    let spend_sql = run(&[&["export-sql", "spend", "--engine", "spark"][..], &month].concat());
    write(&tmp.path().join("spend.sql"), &spend_sql.stdout);
    let idle_sql =
        run(&[&["export-sql", "idle-cost", "--by", "user", "--engine", "spark"][..], &month].concat());
    write(&tmp.path().join("idle.sql"), &idle_sql.stdout);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("spark").join("run.py");
    let out = Command::new(&python)
        .current_dir(tmp.path())
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .arg(&script)
        .args(["spark.json", "ddl.sql", "spend=spend.sql", "idle=idle.sql"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "Spark failed: {}", String::from_utf8_lossy(&out.stderr));
    let spark: Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("spark.json")).expect("Spark's result"))
            .expect("JSON");
    eprintln!("Spark timings (s): {}", spark["timings"]);

    let with = |args: &[&str]| -> Vec<String> {
        [&["--data", &data_s, "--config", &config_s, "--format", "json"][..], args, &month]
            .concat()
            .into_iter()
            .map(str::to_owned)
            .collect()
    };
    let apron = |args: &[&str]| json(&run(&with(args).iter().map(String::as_str).collect::<Vec<_>>()));
    let queries = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    let exact_spend = apron(&["sql", "-f", &text(&queries.join("spend.sql"))]);
    let exact_idle = apron(&["sql", "-f", &text(&queries.join("idle_cost.sql")), "--param", "1=user"]);
    let printed_spend = apron(&["spend"]);
    let printed_idle = apron(&["idle-cost", "--by", "user"]);

    let mut c = Checks::default();
    let hosts = spark["hosts"].as_array().expect("hosts");
    c.check(hosts.iter().any(|h| h[0] == "0042" && h[1] == "string"), || {
        format!("Spark should read host 0042 as the string \"0042\": {hosts:?}")
    });
    let teams: Vec<&str> = exact_spend.iter().filter_map(|r| r["team"].as_str()).collect();
    for team in ["vision", "nlp", "speech", "recsys", "ops", "unassigned", "(unallocated)"] {
        c.check(teams.contains(&team), || format!("the week should have team {team}: {teams:?}"));
    }
    let spark_spend = spark["spend"].as_array().expect("spend rows");
    compare(&mut c, "spend", (spark_spend, "team"), (&exact_spend, "team"), (&printed_spend, "team"), "cost");
    let spark_idle = spark["idle"].as_array().expect("idle rows");
    compare(
        &mut c,
        "idle-cost --by user",
        (spark_idle, "key"),
        (&exact_idle, "key"),
        (&printed_idle, "user"),
        "idle_cost",
    );
    c.finish();
}
