//! End to end: `apron sql --show NAME` prints the SQL of a named report as
//! the binary embeds it (the `queries/NAME.sql` it was built from), so the
//! README's examples run from the installed binary alone; `--show` alone,
//! or with a name that is none, lists the names.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use apron_tests::bin;

fn apron(args: &[&str]) -> Output {
    Command::new(bin("apron"))
        .args(args)
        .env_remove("APRON_DATA")
        .env_remove("APRON_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs")
}

/// The names of `queries/*.sql`, sorted.
fn query_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("queries/ exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok()?.strip_suffix(".sql").map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[test]
fn show_prints_every_named_query_as_its_file_holds_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../queries");
    let names = query_names();
    assert!(names.len() > 10, "{names:?}");
    for name in &names {
        let out = apron(&["sql", "--show", name]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let file = std::fs::read_to_string(dir.join(format!("{name}.sql"))).expect("read the file");
        assert_eq!(String::from_utf8_lossy(&out.stdout), file, "{name}");
        assert!(out.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // As the command names its report: `idle-cost` for idle_cost.sql.
    let out = apron(&["sql", "--show", "idle-cost"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("-- idle_cost:"));
}

#[test]
fn show_without_a_name_lists_every_name_with_what_it_answers() {
    let out = apron(&["sql", "--show"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let listed: Vec<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(listed, query_names(), "{text}");
    let pick = text.lines().find(|l| l.starts_with("pick ")).expect("pick listed");
    assert!(pick.contains("the least-loaded GPU of one host"), "{pick}");
}

#[test]
fn an_unknown_name_is_one_line_listing_the_names() {
    let out = apron(&["sql", "--show", "pik"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: no named query 'pik'"), "{err}");
    for name in query_names() {
        assert!(err.contains(&name), "{name} not listed: {err}");
    }
}

#[test]
fn a_shown_query_runs_from_standard_input() {
    // What the README does: the SQL from the binary, piped into `sql -f -`,
    // on a data folder the recorder simulated.
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    apron_tests::simulate_two_gpus_a_day(&data, "2026-11-01");
    let sql = apron(&["sql", "--show", "pick"]).stdout;
    let mut child = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .args(["--format", "csv", "sql", "-f", "-", "--param", "2=2026-11-01T00:00:00Z", "--param"])
        .arg(format!("1={}", simulated_host(&data)))
        .env_remove("APRON_DATA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("apron starts");
    child.stdin.take().expect("piped").write_all(&sql).expect("write the query");
    let out = child.wait_with_output().expect("apron ends");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("gpu_index,gpu_uuid,mean_util_pct"), "{text}");
    assert_eq!(text.lines().count(), 3, "a header and the two GPUs: {text}");
}

/// The one host the simulation wrote.
fn simulated_host(data: &Path) -> String {
    let day = data.join("gpu_samples/date=2026-11-01");
    let entry = std::fs::read_dir(&day).expect("a day folder").next().expect("a host folder").expect("entry");
    let name = entry.file_name().into_string().expect("UTF-8 name");
    name.strip_prefix("host=").expect("a host= folder").to_owned()
}
