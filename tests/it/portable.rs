//! apron's reports on other engines, end to end, on a simulated week of
//! three hosts (one of them named `0042`).
//!
//! On Apache Spark: the tables `apron ddl --engine spark` creates over the
//! data folder, the config tables `apron export-config` writes, and the
//! statements `apron export-sql` generates, run by a real Spark in local
//! mode (`tests/spark/run.py`, one session). Spark's spend per team and idle
//! cost per user equal apron's: the unrounded figures (`apron sql` over the
//! ledger's `cost_buckets`) within 1e-6, and rounded by apron's own rule the
//! cents `apron spend` and `apron idle-cost --by user` print.
//!
//! The Trino and Athena statements (no Trino here) run in DataFusion over
//! the same folder, with the config tables registered and the schema
//! `apron` an alias of apron's tables, and give the same figures: what
//! they compute is apron's, whatever their engines' parsers make of them.
//!
//! The config exercises every way the definitions are joined: pod labels
//! (two of them, and one), namespace globs with a class and a `?`, a uid
//! rule, users, Slurm accounts, a model priced by an entry and one left to
//! the built-in default.
//!
//! Spark comes from `apron_tests::spark` (installed on first use); the
//! Spark test adds about 40 s to the suite besides that.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use apron_analyze::commands::portable::engines::Engine;
use apron_analyze::commands::portable::engines::PortableQuery;
use apron_analyze::output::{Format, write_batches};
use apron_analyze::report::figures::idle_cost::IdleBy;
use apron_analyze::report::period::Period;
use apron_analyze::report::rounding::cents_keeping_total;
use apron_analyze::{Config, Session};
use apron_tests::bin;
use apron_tests::checks::Checks;
use apron_tests::scenario::ms;
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
name = "recsys-dev"
k8s_labels = { team = "recsys", tier = "dev" }

[[team]]
name = "serving"
k8s_labels = { tier = "serve" }

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

/// The simulated week: its folder, data folder and config.
struct Week {
    tmp: tempfile::TempDir,
    data: String,
    config: String,
}

fn text(p: &Path) -> String {
    p.to_str().expect("a UTF-8 path").to_owned()
}

const MONTH: [&str; 2] = ["--month", "2026-11"];

fn week() -> Week {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (data, config) = (tmp.path().join("data"), tmp.path().join("apron.toml"));
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
        &text(&data),
        "--out",
        &text(&tmp.path().join("report")),
    ]);
    rename_host(&data, "gpu-node03", "0042");
    write(&config, CONFIG.as_bytes());
    Week { data: text(&data), config: text(&config), tmp }
}

/// apron's figures on `week`: spend and idle cost by user, unrounded
/// (`apron sql -f queries/….sql`) and as printed.
struct Figures {
    exact_spend: Vec<Value>,
    exact_idle: Vec<Value>,
    printed_spend: Vec<Value>,
    printed_idle: Vec<Value>,
}

fn figures(week: &Week) -> Figures {
    let apron = |args: &[&str]| {
        let common = ["--data", week.data.as_str(), "--config", week.config.as_str(), "--format", "json"];
        json(&run(&[&common[..], args, &MONTH].concat()))
    };
    let queries = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    Figures {
        exact_spend: apron(&["sql", "-f", &text(&queries.join("spend.sql"))]),
        exact_idle: apron(&["sql", "-f", &text(&queries.join("idle_cost.sql")), "--param", "1=user"]),
        printed_spend: apron(&["spend"]),
        printed_idle: apron(&["idle-cost", "--by", "user"]),
    }
}

/// Checks another engine's spend and idle cost by user against apron's.
fn compare_both(c: &mut Checks, engine: &str, spend: &[Value], idle: &[Value], f: &Figures) {
    let teams: Vec<&str> = f.exact_spend.iter().filter_map(|r| r["team"].as_str()).collect();
    for team in
        ["recsys-dev", "serving", "vision", "nlp", "speech", "recsys", "ops", "unassigned", "(unallocated)"]
    {
        c.check(teams.contains(&team), || format!("the week should have team {team}: {teams:?}"));
    }
    let what = format!("{engine}: spend");
    compare(c, &what, (spend, "team"), (&f.exact_spend, "team"), (&f.printed_spend, "team"), "cost");
    let what = format!("{engine}: idle-cost --by user");
    compare(c, &what, (idle, "key"), (&f.exact_idle, "key"), (&f.printed_idle, "user"), "idle_cost");
}

#[test]
fn spark_computes_apron_s_spend_and_idle_cost_from_the_same_queries() {
    let python = apron_tests::spark::python();
    let week = week();
    let dir = week.tmp.path();
    let tables = text(&dir.join("config"));
    run(&["--config", &week.config, "export-config", "--out", &tables]);
    let ddl = run(&["ddl", "--engine", "spark", "--location", &week.data, "--config-location", &tables]);
    write(&dir.join("ddl.sql"), &ddl.stdout);
    let spend_sql = run(&[&["export-sql", "spend", "--engine", "spark"][..], &MONTH].concat());
    write(&dir.join("spend.sql"), &spend_sql.stdout);
    let idle_sql =
        run(&[&["export-sql", "idle-cost", "--by", "user", "--engine", "spark"][..], &MONTH].concat());
    write(&dir.join("idle.sql"), &idle_sql.stdout);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("spark").join("run.py");
    let out = Command::new(&python)
        .current_dir(dir)
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .arg(&script)
        .args(["spark.json", "ddl.sql", "spend=spend.sql", "idle=idle.sql"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "Spark failed: {}", String::from_utf8_lossy(&out.stderr));
    let spark: Value =
        serde_json::from_slice(&std::fs::read(dir.join("spark.json")).expect("Spark's result"))
            .expect("JSON");
    eprintln!("Spark timings (s): {}", spark["timings"]);

    let mut c = Checks::default();
    let hosts = spark["hosts"].as_array().expect("hosts");
    c.check(hosts.iter().any(|h| h[0] == "0042" && h[1] == "string"), || {
        format!("Spark should read host 0042 as the string \"0042\": {hosts:?}")
    });
    let (spend, idle) =
        (spark["spend"].as_array().expect("spend rows"), spark["idle"].as_array().expect("idle rows"));
    compare_both(&mut c, "Spark", spend, idle, &figures(&week));
    c.finish();
}

#[test]
fn the_trino_and_athena_statements_compute_apron_s_figures() {
    let week = week();
    let figures = figures(&week);
    let config = Config::from_toml(CONFIG, Path::new("apron.toml")).expect("the config");
    let period = Period { start_ms: ms("2026-11-01T00:00:00Z"), end_ms: ms("2026-12-01T00:00:00Z") };
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let session = rt
        .block_on(Session::open(
            Path::new(&week.data),
            apron_analyze::session::memory::MemoryLimit::for_this_machine(),
        ))
        .expect("open the data folder");
    apron_analyze::config::tables::register(&session, &config).expect("the config tables");
    // The statements read `apron.TABLE`: the schema apron's tables are in, under that name too.
    let catalog = session.context().catalog("datafusion").expect("the default catalog");
    let tables = catalog.schema("public").expect("the default schema");
    catalog.register_schema("apron", tables).expect("the alias");
    let rows = |report, engine| -> Vec<Value> {
        let sql = apron_analyze::commands::portable::engines::statement(report, engine, "apron", &period)
            .expect("the statement");
        let batches = rt
            .block_on(async {
                session.context().sql(sql.trim_end().trim_end_matches(';')).await?.collect().await
            })
            .unwrap_or_else(|e| panic!("{engine:?}: {e}\n{sql}"));
        let schema = batches.first().expect("a batch").schema();
        let json = write_batches(Format::Json, schema, &batches, Vec::new()).expect("JSON");
        serde_json::from_slice::<Value>(&json).expect("rows").as_array().expect("an array").clone()
    };
    let mut c = Checks::default();
    for engine in [Engine::Trino, Engine::Athena] {
        let spend = rows(PortableQuery::Spend, engine);
        let idle = rows(PortableQuery::IdleCost(IdleBy::User), engine);
        compare_both(&mut c, &format!("{engine:?}"), &spend, &idle, &figures);
    }
    c.finish();
}
