//! End to end: `apron import` of real files (and a real Prometheus) through
//! the real `apron` binary, then every report over what it wrote, with the
//! figures of a small hand-worked case per format.
//!
//! Every case is priced by [`CONFIG`], with round figures:
//!
//! - any model: nothing to write off, 3.6 per GPU-hour = 0.001 per second,
//!   0.06 per GPU-minute;
//! - energy: 0.4 per kWh, PUE 1. A GPU drawing 300 W for a minute uses
//!   18 000 J = 0.005 kWh = 0.002; at 150 W, 0.001.
//!
//! So a GPU-minute at 300 W costs 0.062, at 150 W 0.061. No process maps
//! to a team but the Kubernetes namespace `vision-*` (team vision); other
//! processes are `unassigned`, GPU-minutes without one `(unallocated)`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const CONFIG: &str = r#"currency = "USD"

[idle]
threshold_pct = 5

[energy]
price_per_kwh = 0.4
pue = 1.0

[[gpu_cost]]
model = "*"
purchase_price = 0
lifetime_years = 1
ops_per_gpu_hour = 3.6

[[team]]
name = "vision"
k8s_namespaces = ["vision-*"]
"#;

/// A data folder and a config in a temporary folder.
struct Case {
    dir: tempfile::TempDir,
    data: PathBuf,
    config: PathBuf,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        let config = dir.path().join("apron.toml");
        std::fs::write(&config, CONFIG).expect("write apron.toml");
        Case { dir, data, config }
    }

    /// Writes `text` to the file `name` in the case's folder.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write the input");
        path
    }

    /// `apron --data DATA --config CONFIG ARGS…` (`import` without
    /// `--config`, which it does not use and refuses).
    fn apron(&self, args: &[&str]) -> Output {
        let mut command = Command::new(apron_tests::bin("apron"));
        command.arg("--data").arg(&self.data);
        if args.first() != Some(&"import") {
            command.arg("--config").arg(&self.config);
        }
        command.args(args).stdin(Stdio::null()).output().expect("apron runs")
    }

    /// `apron ARGS…`, which must succeed: its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.apron(args);
        assert!(out.status.success(), "apron {}: {}: {}", args.join(" "), out.status, text(&out.stderr));
        text(&out.stdout)
    }

    /// `apron --format json ARGS…`: its rows.
    fn json(&self, args: &[&str]) -> Vec<Value> {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("apron {}: {e}: {out}", all.join(" ")))
    }

    /// The one number `SELECT …` answers.
    fn number(&self, sql: &str) -> f64 {
        let rows = self.json(&["sql", sql]);
        let row = rows.first().and_then(Value::as_object).expect("one row");
        row.values().next().and_then(Value::as_f64).unwrap_or(0.0)
    }

    /// Every report runs on the data and succeeds (`alerts` may fire:
    /// exit 1), over `period` (`--from`, `--to`); `host` for `pick`.
    fn every_report_runs(&self, period: &[&str], host: &str) {
        for report in [
            &["spend"][..],
            &["idle-cost"],
            &["idle-cost", "--by", "gpu"],
            &["zombies"],
            &["reclaim"],
            &["windows"],
        ] {
            let mut args = report.to_vec();
            args.extend_from_slice(period);
            self.ok(&args);
        }
        let alerts = self.apron(&["alerts"]);
        assert!(matches!(alerts.status.code(), Some(0 | 1)), "alerts: {}", text(&alerts.stderr));
        // The samples lie in the past: pick over a window reaching them.
        self.ok(&["pick", "--host", host, "--window", "100000h"]);
        let out = self.dir.path().join("report");
        self.ok(&["report", "--month", "2026-11", "--out", out.to_str().expect("utf-8")]);
        assert!(out.join("index.html").is_file(), "the report wrote index.html");
    }

    /// The spend row of `team`.
    fn spend(&self, period: &[&str], team: &str) -> Value {
        let mut args = vec!["spend"];
        args.extend_from_slice(period);
        let rows = self.json(&args);
        rows.into_iter().find(|r| r["team"] == team).unwrap_or_else(|| panic!("no spend row of {team}"))
    }

    /// The Parquet files under the data folder.
    fn parquet_files(&self) -> Vec<PathBuf> {
        if !self.data.exists() {
            return Vec::new();
        }
        apron_tests::files_under(&self.data)
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn near(what: &str, got: &Value, want: f64) {
    let got = got.as_f64().unwrap_or_else(|| panic!("{what}: {got} is not a number"));
    assert!((got - want).abs() < 1e-6, "{what}: got {got}, want {want}");
}

/// The nvidia-smi case, Monday 2026-11-02, logged in Berlin (UTC+1):
/// one H100 sampled every 10 s from 10:00:00 to 10:59:50 local time
/// (09:00–10:00 UTC), 360 rows at 300 W; `utilization.gpu` 100 % for the
/// first 30 minutes, 0 % for the last 30. A process (pid 4242, no user:
/// `unassigned`) holds 2048 MiB throughout.
///
/// By hand: 60 GPU-minutes × 0.062 = 3.72, all the process's: busy
/// 30 × 0.062 = 1.86, idle-held 1.86. It is a zombie for the 30 idle
/// minutes, and a reclaim candidate with `--for 20m`.
fn nvidia_smi_files(case: &Case, nounits: bool) -> (PathBuf, PathBuf) {
    // nvidia-smi keeps the units in the header with nounits too.
    let mut gpu = String::from(
        "timestamp, index, name, uuid, utilization.gpu [%], utilization.memory [%], memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu, clocks.sm [MHz], pci.bus_id\n",
    );
    let mut apps = String::from("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n");
    for k in 0..360 {
        let (m, s) = (k / 6, (k % 6) * 10);
        // A few ms late now and then, as nvidia-smi is: the median spacing
        // is still 10 s.
        let ts = format!("2026/11/02 10:{m:02}:{s:02}.{:03}", [100, 100, 103][k % 3]);
        let util = if m < 30 { 100 } else { 0 };
        let temp = if k == 7 { "[N/A]".to_owned() } else { "55".to_owned() };
        if nounits {
            gpu.push_str(&format!("{ts}, 0, NVIDIA H100 80GB HBM3, GPU-11111111-2222-3333-4444-555555555555, {util}, 3, 2100, 81559, 300.00, {temp}, 1980, 00000000:18:00.0\n"));
        } else {
            gpu.push_str(&format!("{ts}, 0, NVIDIA H100 80GB HBM3, GPU-11111111-2222-3333-4444-555555555555, {util} %, 3 %, 2100 MiB, 81559 MiB, 300.00 W, {temp}, 1980 MHz, 00000000:18:00.0\n"));
        }
        apps.push_str(&format!(
            "{ts}, GPU-11111111-2222-3333-4444-555555555555, 4242, /usr/bin/python3, 2048 MiB\n"
        ));
    }
    (case.file("gpus.csv", &gpu), case.file("apps.csv", &apps))
}

const SMI_PERIOD: [&str; 4] = ["--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T10:00:00Z"];

/// Both logs in one import: the minute rollups see the GPU's rows and the
/// process's together (the idle minutes are idle-held).
fn import_smi(case: &Case, gpu: &Path, apps: &Path) -> String {
    case.ok(&[
        "import",
        "nvidia-smi",
        gpu.to_str().expect("utf-8"),
        apps.to_str().expect("utf-8"),
        "--host",
        "smi-node",
        "--tz",
        "Europe/Berlin",
    ])
}

fn check_smi_figures(case: &Case) {
    let row = case.spend(&SMI_PERIOD, "unassigned");
    near("gpu_hours", &row["gpu_hours"], 1.0);
    near("busy_gpu_hours", &row["busy_gpu_hours"], 0.5);
    near("idle_held_gpu_hours", &row["idle_held_gpu_hours"], 0.5);
    near("cost", &row["cost"], 3.72);
    near("busy_cost", &row["busy_cost"], 1.86);
    near("idle_cost", &row["idle_cost"], 1.86);
    let mut zombies = vec!["zombies"];
    zombies.extend_from_slice(&SMI_PERIOD);
    let z = case.json(&zombies);
    assert_eq!(z.len(), 1, "{z:?}");
    assert_eq!((z[0]["pid"].as_i64(), z[0]["comm"].as_str()), (Some(4242), Some("python3")));
    near("zombie idle minutes", &z[0]["idle_minutes"], 30.0);
    let mut reclaim = vec!["reclaim", "--for", "20m"];
    reclaim.extend_from_slice(&SMI_PERIOD);
    assert_eq!(case.json(&reclaim).len(), 1);
    assert_eq!(case.number("SELECT count(*) FROM gpu_samples WHERE temp_c IS NULL"), 1.0, "[N/A] is null");
    assert_eq!(case.number("SELECT min(interval_ms) FROM gpu_samples"), 10_000.0);
    assert_eq!(case.number("SELECT max(fb_total_bytes) FROM gpu_samples"), 81_559.0 * 1_048_576.0);
    assert_eq!(case.number("SELECT max(power_mw) FROM gpu_samples"), 300_000.0);
}

#[test]
fn nvidia_smi_logs_import_once_and_answer_by_hand() {
    for nounits in [false, true] {
        let case = Case::new();
        let (gpu, apps) = nvidia_smi_files(&case, nounits);
        import_smi(&case, &gpu, &apps);
        check_smi_figures(&case);
        case.every_report_runs(&SMI_PERIOD, "smi-node");

        // Again: nothing more is written, and the figures stay.
        let files = case.parquet_files();
        let again = case.ok(&[
            "import",
            "nvidia-smi",
            gpu.to_str().expect("utf-8"),
            "--host",
            "smi-node",
            "--tz",
            "Europe/Berlin",
        ]);
        assert!(again.contains("0 gpu_samples rows") && again.contains("360 rows skipped"), "{again}");
        let both = import_smi(&case, &gpu, &apps);
        assert!(
            both.contains("0 gpu_samples rows, 0 proc_samples rows") && both.contains("720 rows skipped"),
            "{both}"
        );
        assert_eq!(case.parquet_files(), files, "no new file");
        assert_eq!(case.number("SELECT count(*) FROM gpu_samples"), 360.0);
        assert_eq!(case.number("SELECT count(*) FROM proc_samples"), 360.0);
        check_smi_figures(&case);
        // One file per table for the day.
        for table in ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"] {
            let n = files.iter().filter(|f| f.starts_with(case.data.join(table))).count();
            assert_eq!(n, 1, "{table}: {files:?}");
        }
    }
}

/// A log of `days` UTC days from 2026-11-02, two GPUs (index and uuid) a
/// minute apart: GPU 0 at `(minute of the day) % 100` %, GPU 1 at 50 %,
/// both 200 W; a process on GPU 0 the whole time.
fn days_of_logs(case: &Case, days: u32) -> (PathBuf, PathBuf) {
    let mut gpu = String::from("timestamp, index, uuid, utilization.gpu [%], power.draw [W]\n");
    let mut apps = String::from("timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n");
    for day in 0..days {
        for minute in 0..1440 {
            let ts = format!("2026/11/{:02} {:02}:{:02}:00.000", 2 + day, minute / 60, minute % 60);
            gpu.push_str(&format!(
                "{ts}, 0, GPU-00000000-0000-0000-0000-00000000000a, {} %, 200.00 W\n",
                minute % 100
            ));
            gpu.push_str(&format!("{ts}, 1, GPU-00000000-0000-0000-0000-00000000000b, 50 %, 200.00 W\n"));
            apps.push_str(&format!(
                "{ts}, GPU-00000000-0000-0000-0000-00000000000a, 7, /usr/bin/python3, 512 MiB\n"
            ));
        }
    }
    (case.file("days-gpus.csv", &gpu), case.file("days-apps.csv", &apps))
}

#[test]
fn a_log_of_many_days_is_written_a_few_days_at_a_time_with_the_same_figures() {
    // 5 days of 4320 rows (2880 GPU, 1440 process): with at most 5000 rows
    // a batch, each day is a batch of its own; by default, one batch.
    let (batched, whole) = (Case::new(), Case::new());
    for (case, batch) in [(&batched, "5000"), (&whole, "1000000")] {
        let (gpu, apps) = days_of_logs(case, 5);
        let out = case.ok(&[
            "import",
            "nvidia-smi",
            gpu.to_str().expect("utf-8"),
            apps.to_str().expect("utf-8"),
            "--host",
            "days",
            "--batch-rows",
            batch,
        ]);
        assert!(out.contains("14400 gpu_samples rows, 7200 proc_samples rows written"), "{out}");
    }
    // By hand: GPU 0's minutes of a day are 14 runs of 0..99 and 0..39:
    // 14 × 4950 + 780 = 70 080 per day; GPU 1: 1440 × 50 = 72 000.
    let sql = "SELECT sum(gpu_util_pct) FROM gpu_samples";
    assert_eq!(batched.number(sql), 5.0 * (70_080.0 + 72_000.0));
    for sql in [
        "SELECT count(*) FROM gpu_minutes",
        "SELECT sum(seconds) FROM proc_minutes",
        "SELECT count(DISTINCT interval_ms) FROM gpu_samples",
        "SELECT min(interval_ms) FROM proc_samples",
    ] {
        assert_eq!(batched.number(sql), whole.number(sql), "{sql}");
    }
    assert_eq!(batched.number("SELECT min(interval_ms) FROM gpu_samples"), 60_000.0);
    let period = ["--from", "2026-11-02", "--to", "2026-11-07"];
    let (a, b) = (batched.spend(&period, "unassigned"), whole.spend(&period, "unassigned"));
    assert_eq!(a, b);
    near("gpu_hours", &a["gpu_hours"], 5.0 * 24.0);
    // One file per table and day, as the recorder's closed days.
    let n =
        batched.parquet_files().iter().filter(|f| f.starts_with(batched.data.join("gpu_samples"))).count();
    assert_eq!(n, 5);
}

/// The two header lines of a real capture (`tests/fixtures/import`), with
/// the `Date` and `Time` columns `-o DT` puts first.
fn monitor_header(fixture: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import").join(fixture);
    let text = std::fs::read_to_string(path).expect("read the fixture");
    let mut lines = text.lines();
    let (names, units) = (lines.next().expect("names"), lines.next().expect("units"));
    format!("#Date       Time    {}\n#YYYYMMDD   HH:MM:SS{}\n", &names[1..], &units[1..])
}

#[test]
fn dmon_and_pmon_with_their_time_import_and_answer_by_hand() {
    // 10 minutes from 09:00 UTC, a line a second: GPU 0 at 300 W, sm 100 %
    // for 5 minutes then 0 %; pid 4242 (python3) on it throughout; pmon's
    // header printed again every 100 lines, as pmon does.
    let case = Case::new();
    let mut dmon = monitor_header("nvidia-smi-dmon-plain-linux-h100.txt");
    let pmon_header = monitor_header("nvidia-smi-pmon-plain-linux-h100.txt");
    let mut pmon = pmon_header.clone();
    for k in 0..600 {
        let time = format!(" 20261102   09:{:02}:{:02}", k / 60, k % 60);
        let sm = if k < 300 { 100 } else { 0 };
        dmon.push_str(&format!(
            "{time}    0    300     63     57    {sm:>3}     10      0      0      0      0   2619   1980 \n"
        ));
        pmon.push_str(&format!(
            "{time}    0       4242     C    {sm:>3}     10      -      -      -      -    python3         \n"
        ));
        if k % 100 == 99 {
            pmon.push_str(&pmon_header);
        }
    }
    let (d, p) = (case.file("dmon.txt", &dmon), case.file("pmon.txt", &pmon));
    let out = case.ok(&[
        "import",
        "nvidia-smi",
        d.to_str().expect("utf-8"),
        p.to_str().expect("utf-8"),
        "--host",
        "mon",
    ]);
    assert!(out.contains("600 gpu_samples rows, 600 proc_samples rows written"), "{out}");
    // By hand: 10 GPU-minutes at 0.062, half busy, half held idle by the
    // process (unassigned: no team rule names it).
    let period = ["--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T10:00:00Z"];
    let row = case.spend(&period, "unassigned");
    // (spend shows hours to the hundredth: 10/60 is 0.17.)
    near("gpu_hours", &row["gpu_hours"], 0.17);
    near("cost", &row["cost"], 0.62);
    near("busy_cost", &row["busy_cost"], 0.31);
    near("idle_cost", &row["idle_cost"], 0.31);
    assert_eq!(case.number("SELECT count(DISTINCT comm) FROM proc_samples WHERE comm = 'python3'"), 1.0);
    assert_eq!(case.number("SELECT max(interval_ms) FROM gpu_samples"), 1_000.0);
    // Plain dmon (no time): refused, pointing to -o DT, nothing written.
    let plain =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import/nvidia-smi-dmon-plain-linux-h100.txt");
    let fresh = Case::new();
    refused(
        &fresh,
        &["import", "nvidia-smi", plain.to_str().expect("utf-8"), "--host", "mon"],
        &plain,
        1,
        "header",
    );
    let err =
        text(&fresh.apron(&["import", "nvidia-smi", plain.to_str().expect("utf-8"), "--host", "mon"]).stderr);
    assert!(err.contains("nvidia-smi dmon -o DT"), "{err}");
}

#[test]
fn saved_scrapes_import_and_answer_by_hand_saying_what_they_dropped() {
    // 10 scrapes of dcgm-exporter a minute apart (no timestamps: --at and
    // --every), in its README's sample's form. GPU 0: 100 %, 300 W, its
    // temperature DCGM's INT64_NOT_SUPPORTED marker, and the exporter's own
    // pod in its labels (scraped without honorLabels). GPU 1: 0 %, 150 W,
    // held by pod vision-a/train-0 (team vision).
    let case = Case::new();
    let g0 = r#"gpu="0",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",Hostname="gpu-node-1",job="dcgm-exporter",namespace="monitoring",pod="dcgm-exporter-x7k2p""#;
    let g1 = r#"gpu="1",UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e53",Hostname="gpu-node-1",container="main",namespace="vision-a",pod="train-0""#;
    let mut scrapes = String::new();
    for _ in 0..10 {
        scrapes.push_str(
            "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n",
        );
        scrapes.push_str(&format!("DCGM_FI_DEV_GPU_UTIL{{{g0}}} 100\nDCGM_FI_DEV_GPU_UTIL{{{g1}}} 0\n"));
        scrapes.push_str(
            "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n",
        );
        scrapes.push_str(&format!(
            "DCGM_FI_DEV_POWER_USAGE{{{g0}}} 300.000000\nDCGM_FI_DEV_POWER_USAGE{{{g1}}} 150.000000\n"
        ));
        scrapes.push_str(&format!(
            "DCGM_FI_DEV_GPU_TEMP{{{g0}}} 9223372036854775794\nDCGM_FI_DEV_GPU_TEMP{{{g1}}} 41\n"
        ));
    }
    let file = case.file("scrapes.prom", &scrapes);
    let out = case.apron(&[
        "import",
        "scrape",
        file.to_str().expect("utf-8"),
        "--at",
        "2026-11-02T09:00:00Z",
        "--every",
        "60s",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("host gpu-node-1: 20 gpu_samples rows, 10 proc_samples rows written"),
        "{stdout}"
    );
    assert!(stderr.contains("dropped 10 values that are DCGM's blank markers"), "{stderr}");
    assert!(stderr.contains("ignored the pod label dcgm-exporter-x7k2p"), "{stderr}");
    // By hand: GPU 1's 10 minutes at 150 W held idle by vision: 0.61;
    // GPU 0's 10 busy minutes at 300 W held by nothing: 0.62.
    let period = ["--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T10:00:00Z"];
    let vision = case.spend(&period, "vision");
    near("vision cost", &vision["cost"], 0.61);
    near("vision idle cost", &vision["idle_cost"], 0.61);
    let nobody = case.spend(&period, "(unallocated)");
    near("unallocated cost", &nobody["cost"], 0.62);
    assert_eq!(case.number("SELECT count(*) FROM gpu_samples WHERE temp_c IS NULL"), 10.0);
    assert_eq!(case.number("SELECT min(interval_ms) FROM gpu_samples"), 60_000.0);
}

#[test]
fn a_log_naming_its_gpus_by_bus_id_only_imports_and_answers_by_hand() {
    // As `nvidia-smi --query-gpu=timestamp,name,pci.bus_id,utilization.gpu,
    // memory.used,power.draw --format=csv -l 10` writes it for 2 GPUs over
    // 10 minutes: each row its own time a few ms apart, the order within a
    // cycle changing. Bus 3B: 100 %, 300 W; bus 18: 0 %, 150 W.
    let case = Case::new();
    let mut log =
        String::from("timestamp, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], power.draw [W]\n");
    for k in 0..60 {
        let ts = |ms: u32| format!("2026/11/02 09:{:02}:{:02}.{ms:03}", k / 6, (k % 6) * 10);
        let busy =
            format!("{}, NVIDIA H100 80GB HBM3, 00000000:3B:00.0, 100 %, 70000 MiB, 300.00 W\n", ts(111));
        let idle = format!("{}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 0 %, 0 MiB, 150.00 W\n", ts(117));
        if k % 2 == 0 {
            log.push_str(&(busy + &idle));
        } else {
            log.push_str(&(idle + &busy));
        }
    }
    let file = case.file("bus.csv", &log);
    let out = case.ok(&["import", "nvidia-smi", file.to_str().expect("utf-8"), "--host", "bus-node"]);
    assert!(out.contains("120 gpu_samples rows"), "{out}");
    // By hand: 10 GPU-minutes at 0.062 and 10 at 0.061, none held.
    let period = ["--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T10:00:00Z"];
    let row = case.spend(&period, "(unallocated)");
    near("cost", &row["cost"], 1.23);
    near("busy cost", &row["busy_cost"], 0.62);
    // Bus order: 18 is GPU 0, 3B GPU 1.
    let busy_index =
        case.number("SELECT min(gpu_index) FROM gpu_samples WHERE gpu_util_pct = 100 AND power_mw = 300000");
    assert_eq!(busy_index, 1.0);
    assert_eq!(case.number("SELECT count(DISTINCT gpu_uuid) FROM gpu_samples"), 2.0);
    assert_eq!(case.number("SELECT max(interval_ms) FROM gpu_samples"), 10_000.0);
}

#[test]
fn nvidia_smi_without_a_header_takes_columns() {
    let case = Case::new();
    let mut csv = String::new();
    for k in 0..12 {
        csv.push_str(&format!("2026/11/02 09:{:02}:{:02}.000, 1, 40 %, 150.00 W\n", k / 2, (k % 2) * 30));
    }
    let path = case.file("noheader.csv", &csv);
    let p = path.to_str().expect("utf-8");
    case.ok(&[
        "import",
        "nvidia-smi",
        p,
        "--host",
        "n1",
        "--columns",
        "timestamp,index,utilization.gpu,power.draw",
        "--model",
        "NVIDIA L40S",
    ]);
    // 12 samples every 30 s: 6 GPU-minutes × 0.061 = 0.366 → 0.37, all
    // busy and (unallocated).
    let period = ["--from", "2026-11-02T09:00:00Z", "--to", "2026-11-02T10:00:00Z"];
    let row = case.spend(&period, "(unallocated)");
    near("gpu_hours", &row["gpu_hours"], 0.1);
    near("cost", &row["cost"], 0.37);
    let uuid = case.json(&["sql", "SELECT DISTINCT gpu_uuid, gpu_model, gpu_index FROM gpu_samples"]);
    assert_eq!(uuid.len(), 1);
    assert!(uuid[0]["gpu_uuid"].as_str().is_some_and(|u| u.starts_with("GPU-") && u.len() == 40), "{uuid:?}");
    assert_eq!(
        (uuid[0]["gpu_model"].as_str(), uuid[0]["gpu_index"].as_i64()),
        (Some("NVIDIA L40S"), Some(1))
    );
}

/// The pynvml case: two GPUs logged every 30 s for 20 minutes from
/// 2026-11-02 08:00 UTC (40 rows). GPU 0 at 80 % and 300 W, GPU 1 at 3 %
/// (idle) and 150 W; no processes.
///
/// By hand: GPU 0 20 × 0.062 = 1.24 busy, GPU 1 20 × 0.061 = 1.22
/// idle-empty, all `(unallocated)`: 2.46 over 40 GPU-minutes.
#[test]
fn pynvml_logs_import_once_and_answer_by_hand() {
    let case = Case::new();
    let mut csv = String::new();
    for k in 0..40 {
        let t = 1_793_606_400.0 + f64::from(k) * 30.0 + 0.2;
        csv.push_str(&format!("{t}, 80%|60%|70000MiB|300.0W, 3%|0%|512MiB|150.0W\n"));
    }
    let path = case.file("gpu_utilization.csv", &csv);
    let p = path.to_str().expect("utf-8");
    case.ok(&["import", "pynvml", p, "--host", "py-node"]);
    let period = ["--from", "2026-11-02T08:00:00Z", "--to", "2026-11-02T08:20:00Z"];
    let check = || {
        let row = case.spend(&period, "(unallocated)");
        near("gpu_hours", &row["gpu_hours"], 0.67);
        near("busy_gpu_hours", &row["busy_gpu_hours"], 0.33);
        near("idle_empty_gpu_hours", &row["idle_empty_gpu_hours"], 0.33);
        near("cost", &row["cost"], 2.46);
        near("busy_cost", &row["busy_cost"], 1.24);
        near("idle_cost", &row["idle_cost"], 1.22);
        assert_eq!(case.number("SELECT count(*) FROM gpu_samples"), 80.0);
        assert_eq!(case.number("SELECT count(DISTINCT gpu_uuid) FROM gpu_samples"), 2.0);
        assert_eq!(case.number("SELECT min(interval_ms) FROM gpu_samples"), 30_000.0);
    };
    check();
    case.every_report_runs(&period, "py-node");
    let out = case.ok(&["import", "pynvml", p, "--host", "py-node"]);
    assert!(out.contains("0 gpu_samples rows") && out.contains("80 rows skipped"), "{out}");
    check();
}

/// A bad row: exit 2, one line naming file:line and the field, nothing
/// written.
fn refused(case: &Case, args: &[&str], file: &Path, line: u32, field: &str) {
    let out = case.apron(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let want = format!("error: {}:{line}: {field}: ", file.display());
    assert!(err.starts_with(&want), "{err:?} should start with {want:?}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
    assert!(case.parquet_files().is_empty(), "nothing written: {:?}", case.parquet_files());
}

#[test]
fn a_bad_row_names_file_line_and_field_and_writes_nothing() {
    let case = Case::new();
    let head = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n";
    let good = "2026/11/02 09:00:00.000, 0, 5 %, 100 MiB\n2026/11/02 09:00:10.000, 0, 5 %, 100 MiB\n";
    for (name, bad, field) in [
        ("number.csv", "2026/11/02 09:00:20.000, 0, abc %, 100 MiB\n", "utilization.gpu [%]"),
        ("unit.csv", "2026/11/02 09:00:20.000, 0, 5 %, 100 kg\n", "memory.used [MiB]"),
        ("time.csv", "2026/11/32 09:00:20.000, 0, 5 %, 100 MiB\n", "timestamp"),
        ("fields.csv", "2026/11/02 09:00:20.000, 0, 5 %\n", "memory.used [MiB]"),
    ] {
        let path = case.file(name, &format!("{head}{good}{bad}"));
        refused(
            &case,
            &["import", "nvidia-smi", path.to_str().expect("utf-8"), "--host", "n"],
            &path,
            4,
            field,
        );
    }
    let path = case.file("py.csv", "1793606400.0, 3%|5%|512MiB|38.2W\n1793606430.0, 3%|5%|512MiB|38.2X\n");
    refused(
        &case,
        &["import", "pynvml", path.to_str().expect("utf-8"), "--host", "n"],
        &path,
        2,
        "gpu0 power.draw",
    );
    let path = case.file("py2.csv", "1793606400.0, 3%|5%|512MiB|38.2W\nyesterday, 3%|5%|512MiB|38.2W\n");
    refused(&case, &["import", "pynvml", path.to_str().expect("utf-8"), "--host", "n"], &path, 2, "time");
}

/// The Prometheus case: dcgm-exporter series of one H100 on host node-p,
/// scraped every 15 s for 10 minutes from 2026-11-02 07:00 UTC, held by
/// pod train-0 of namespace vision-a (team vision): GPU_UTIL 60 for the
/// first 5 minutes and 2 for the last 5, POWER_USAGE 300 W, the energy
/// counter rising 4 500 J per scrape, FB_USED 1024 MiB and FB_FREE
/// 80 000 MiB, PROF_GR_ENGINE_ACTIVE 0.55 then 0. Imported with --step 1m:
/// one row per minute; `gr_engine_active_pct` 55 for 5 rows and 0 for 5,
/// a mean of 27.5.
///
/// By hand: 10 GPU-minutes × 0.062 = 0.62, all vision's: busy 5 × 0.062 =
/// 0.31, idle-held 0.31. The pod (1 GiB while idle 5 minutes) is a
/// zombie with `--min-idle 5m`.
#[test]
fn prometheus_series_import_once_and_answer_by_hand() {
    let case = Case::new();
    let programs = apron_tests::prometheus::programs();
    let start = 1_793_602_800i64; // 2026-11-02T07:00:00Z
    let labels = r#"gpu="0",UUID="GPU-P0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-p",pod="train-0",namespace="vision-a",container="main""#;
    let mut om = String::new();
    let families: [(&str, &dyn Fn(i64) -> f64); 6] = [
        ("DCGM_FI_DEV_GPU_UTIL", &|k| if k < 20 { 60.0 } else { 2.0 }),
        ("DCGM_FI_DEV_POWER_USAGE", &|_| 300.0),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", &|k| 1.0e9 + 4_500_000.0 * k as f64),
        ("DCGM_FI_DEV_FB_USED", &|_| 1024.0),
        ("DCGM_FI_DEV_FB_FREE", &|_| 80_000.0),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &|k| if k < 20 { 0.55 } else { 0.0 }),
    ];
    for (name, value) in families {
        om.push_str(&format!("# TYPE {name} gauge\n"));
        for k in 0..40 {
            om.push_str(&format!("{name}{{{labels}}} {} {}\n", value(k), start + 15 * k));
        }
    }
    om.push_str("# EOF\n");
    let input = case.file("series.om", &om);
    let storage = case.dir.path().join("tsdb");
    let out = Command::new(&programs.promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&storage)
        .output()
        .expect("promtool runs");
    assert!(out.status.success(), "promtool: {}{}", text(&out.stdout), text(&out.stderr));
    let server = apron_tests::prometheus::Server::start("global:\n  scrape_interval: 15s\n", Some(&storage));
    let url = server.url();
    let import = [
        "import",
        "prometheus",
        "--url",
        &url,
        "--from",
        "2026-11-02T07:00:00Z",
        "--to",
        "2026-11-02T07:10:00Z",
        "--step",
        "1m",
    ];
    let first = case.ok(&import);
    assert!(first.contains("host node-p: 10 gpu_samples rows, 10 proc_samples rows"), "{first}");
    let period = ["--from", "2026-11-02T07:00:00Z", "--to", "2026-11-02T07:10:00Z"];
    let check = || {
        let row = case.spend(&period, "vision");
        near("gpu_hours", &row["gpu_hours"], 0.17);
        near("cost", &row["cost"], 0.62);
        near("busy_cost", &row["busy_cost"], 0.31);
        near("idle_cost", &row["idle_cost"], 0.31);
        assert_eq!(case.number("SELECT count(*) FROM gpu_samples"), 10.0);
        assert_eq!(case.number("SELECT max(fb_total_bytes) FROM gpu_samples"), 81_024.0 * 1_048_576.0);
        assert_eq!(case.number("SELECT max(power_mw) FROM gpu_samples"), 300_000.0);
        assert_eq!(case.number("SELECT avg(gr_engine_active_pct) FROM gpu_samples"), 27.5);
        assert_eq!(
            case.number("SELECT count(sm_active_pct) FROM gpu_samples"),
            0.0,
            "not served, not guessed"
        );
        assert_eq!(case.number("SELECT min(interval_ms) FROM gpu_samples"), 60_000.0);
        assert_eq!(case.number("SELECT min(CAST(ts AS BIGINT)) FROM gpu_samples"), (start * 1_000) as f64);
        assert_eq!(case.number("SELECT max(used_mem_bytes) FROM proc_samples"), 1_073_741_824.0);
    };
    check();
    let mut zombies = vec!["zombies", "--min-idle", "5m"];
    zombies.extend_from_slice(&period);
    let z = case.json(&zombies);
    assert_eq!(z.len(), 1, "{z:?}");
    assert_eq!((z[0]["comm"].as_str(), z[0]["team"].as_str()), (Some("train-0"), Some("vision")));
    case.every_report_runs(&period, "node-p");
    let again = case.ok(&import);
    assert!(
        again.contains("0 gpu_samples rows, 0 proc_samples rows") && again.contains("20 rows skipped"),
        "{again}"
    );
    check();
}

/// Values no GPU has (issue 32): each refused like a malformed row, with
/// its file, line and field, exit 2, nothing written. The ranges are
/// `apron_analyze::import::ranges`'.
#[test]
fn impossible_values_are_refused_with_file_line_and_field() {
    let case = Case::new();
    let head = "timestamp, index, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W], temperature.gpu, clocks_event_reasons.active\n";
    let good = "2026/11/02 09:00:00.000, 0, 5 %, 100 MiB, 81559 MiB, 300.00 W, 50, 0x0\n\
                2026/11/02 09:00:10.000, 0, 5 %, 100 MiB, 81559 MiB, 300.00 W, 50, 0x0\n";
    for (name, bad, field) in [
        (
            "negative.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, -500 W, 50, 0x0\n",
            "power.draw [W]",
        ),
        (
            "minus2mw.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, -2000000 W, 50, 0x0\n",
            "power.draw [W]",
        ),
        (
            "2mw.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, 2000000 W, 50, 0x0\n",
            "power.draw [W]",
        ),
        (
            "hot.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, 300 W, 1e12, 0x0\n",
            "temperature.gpu",
        ),
        (
            "util.csv",
            "2026/11/02 09:00:20.000, 0, 5500 %, 100 MiB, 81559 MiB, 300 W, 50, 0x0\n",
            "utilization.gpu [%]",
        ),
        (
            "mem.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 90000 MiB, 81559 MiB, 300 W, 50, 0x0\n",
            "memory.used [MiB]",
        ),
        (
            "mask.csv",
            "2026/11/02 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, 300 W, 50, -0x1\n",
            "clocks_event_reasons.active",
        ),
        ("index.csv", "2026/11/02 09:00:20.000, -3, 5 %, 100 MiB, 81559 MiB, 300 W, 50, 0x0\n", "index"),
        ("y1900.csv", "1900/01/01 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, 300 W, 50, 0x0\n", "timestamp"),
        ("y9999.csv", "9999/12/31 09:00:20.000, 0, 5 %, 100 MiB, 81559 MiB, 300 W, 50, 0x0\n", "timestamp"),
    ] {
        let path = case.file(name, &format!("{head}{good}{bad}"));
        refused(
            &case,
            &["import", "nvidia-smi", path.to_str().expect("utf-8"), "--host", "n"],
            &path,
            4,
            field,
        );
    }
    let apps = "timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
                2026/11/02 09:00:00.000, GPU-a, 4242, python3, 512 MiB\n\
                2026/11/02 09:00:10.000, GPU-a, -7, python3, 512 MiB\n";
    let path = case.file("pid.csv", apps);
    refused(&case, &["import", "nvidia-smi", path.to_str().expect("utf-8"), "--host", "n"], &path, 3, "pid");
    let path =
        case.file("py.csv", "1793606400.0, 3%|5%|512MiB|38.2W\n1793606430.0, 3%|5%|512MiB|-2000000W\n");
    refused(
        &case,
        &["import", "pynvml", path.to_str().expect("utf-8"), "--host", "n"],
        &path,
        2,
        "gpu0 power.draw",
    );
    let path = case.file("py2.csv", "1793606400.0, 3%|5%|512MiB|38.2W\n9999999999.0, 3%|5%|512MiB|38.2W\n");
    refused(&case, &["import", "pynvml", path.to_str().expect("utf-8"), "--host", "n"], &path, 2, "time");
}

/// Runs `command` to its end: its peak resident memory (KiB, as the
/// kernel counted it for that process alone), exit code and stderr.
#[allow(clippy::zombie_processes, reason = "wait4 reaps the child, for its own rusage")]
fn peak_rss_kib(command: &mut Command) -> (i64, Option<i32>, String) {
    use std::io::Read;
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("apron starts");
    let mut err = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut err).expect("read stderr");
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4(2) on the child just started and not reaped (std's
    // Child is never waited on after this), filling the two out-values.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (usage.ru_maxrss, code, err)
}

/// A 200 MB field (issue 32: 1 GB peak for that one line) is refused with
/// its line as soon as the line is longer than a log line can be, without
/// reading it whole.
#[test]
fn a_200_mb_field_is_refused_without_being_read_whole() {
    let case = Case::new();
    let path = case.dir.path().join("huge.csv");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        f.write_all(b"timestamp, index, utilization.gpu [%], name\n").expect("write");
        f.write_all(b"2026/11/02 09:00:00.000, 0, 5 %, NVIDIA H100\n").expect("write");
        f.write_all(b"2026/11/02 09:00:10.000, 0, 5 %, ").expect("write");
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..200 {
            f.write_all(&chunk).expect("write");
        }
        f.write_all(b"\n").expect("write");
    }
    let mut cmd = Command::new(apron_tests::bin("apron"));
    cmd.arg("--data").arg(&case.data).args(["import", "nvidia-smi"]).arg(&path).args(["--host", "n"]);
    let (peak_kib, code, err) = peak_rss_kib(&mut cmd);
    println!("a 200 MB field: exit {code:?}, peak RSS {} MiB: {err}", peak_kib / 1024);
    assert_eq!(code, Some(2), "{err}");
    let want = format!("error: {}:3: line: longer than 65536 bytes, the most apron reads", path.display());
    assert!(err.starts_with(&want), "{err:?} should start with {want:?}");
    assert!(peak_kib < 150 * 1024, "peak RSS {peak_kib} KiB: the line was read whole");
    assert!(case.parquet_files().is_empty());
}

/// Rows of one GPU and time given twice: the first (in the order of the
/// files and lines) is kept, and the line printed says how many were
/// dropped and how many of them differed.
#[test]
fn repeated_rows_are_counted_and_the_first_kept() {
    let case = Case::new();
    let head = "timestamp, index, utilization.gpu [%], power.draw [W]\n";
    let first = case.file(
        "first.csv",
        &format!(
            "{head}2026/11/02 09:00:00.000, 0, 10 %, 100 W\n2026/11/02 09:00:10.000, 0, 20 %, 100 W\n\
             2026/11/02 09:00:10.000, 0, 20 %, 100 W\n2026/11/02 09:00:20.000, 0, 30 %, 100 W\n"
        ),
    );
    let second = case.file(
        "second.csv",
        &format!("{head}2026/11/02 09:00:20.000, 0, 99 %, 100 W\n2026/11/02 09:00:30.000, 0, 40 %, 100 W\n"),
    );
    let out = case.ok(&[
        "import",
        "nvidia-smi",
        first.to_str().expect("utf-8"),
        second.to_str().expect("utf-8"),
        "--host",
        "n",
    ]);
    assert!(out.contains("4 gpu_samples rows"), "{out}");
    assert!(out.contains("2 rows repeated in the input dropped (1 of them with other values"), "{out}");
    assert!(out.contains("the first in the order of the files and lines given is kept"), "{out}");
    assert_eq!(
        case.number("SELECT sum(gpu_util_pct) FROM gpu_samples"),
        100.0,
        "10 + 20 + 30 + 40: the first 09:00:20 kept"
    );
}

/// dcgm-exporter values no GPU has, each in an hour of its own: SM active
/// 55 (5,500 %), an energy counter of −1e30 mJ, −2 MW and 2 MW of power,
/// 1e12 °C, negative free memory (used above total). Each hour's import
/// is refused in one line naming the series and the time, exit 2, nothing
/// written.
/// Two exporters' series in a real Prometheus, 10 minutes of 15 s scrapes
/// from 2026-11-02 07:00 UTC, imported with --step 1m:
///
/// - dcgm-exporter 1.x names from an old exporter scraped without
///   honorLabels: `Hostname` and `pod` are the exporter's own pod, `node`
///   the node (gpu-node-7); `dcgm_gpu_utilization` 100 then 0 after 5
///   minutes, `dcgm_power_usage` 300 W, `dcgm_gpu_temp` the int32 blank
///   marker 2147483647 throughout.
/// - nvidia_gpu_exporter on 10.0.0.9: utilization ratio 0.5, 300 W, 1 GiB
///   of 8 GiB, the model in `nvidia_smi_gpu_info`.
///
/// By hand: each GPU 10 GPU-minutes × 0.062 = 0.62, no process on either
/// (the exporter's pod is none): (unallocated) 1.24.
/// A series family: its name, labels and value at scrape k.
type Family<'a> = (&'a str, &'a str, &'a dyn Fn(i64) -> f64);

#[test]
fn exporter_names_and_pitfalls_import_from_prometheus() {
    let case = Case::new();
    let programs = apron_tests::prometheus::programs();
    let start = 1_793_602_800i64; // 2026-11-02T07:00:00Z
    let old = r#"gpu="0",uuid="GPU-c1f38265-5e7c-0a81-14a0-240a35ea8160",Hostname="dcgm-exporter-6ldbb",node="gpu-node-7",job="dcgm-exporter",namespace="gpu-operator",pod="dcgm-exporter-6ldbb""#;
    let smi =
        r#"uuid="df6e7a7c-7314-46f8-abc4-b88b36dcf3aa",instance="10.0.0.9:9835",job="nvidia_gpu_exporter""#;
    let families: [Family<'_>; 8] = [
        ("dcgm_gpu_utilization", old, &|k| if k < 20 { 100.0 } else { 0.0 }),
        ("dcgm_power_usage", old, &|_| 300.0),
        ("dcgm_gpu_temp", old, &|_| 2_147_483_647.0),
        ("nvidia_smi_utilization_gpu_ratio", smi, &|_| 0.5),
        ("nvidia_smi_power_draw_watts", smi, &|_| 300.0),
        ("nvidia_smi_memory_used_bytes", smi, &|_| 1_073_741_824.0),
        ("nvidia_smi_memory_total_bytes", smi, &|_| 8_589_934_592.0),
        ("nvidia_smi_gpu_info", "", &|_| 1.0),
    ];
    let mut om = String::new();
    for (name, labels, value) in families {
        let labels = if labels.is_empty() {
            format!(r#"{smi},name="NVIDIA GeForce RTX 2080 SUPER""#)
        } else {
            labels.to_owned()
        };
        om.push_str(&format!("# TYPE {name} gauge\n"));
        for k in 0..40 {
            om.push_str(&format!("{name}{{{labels}}} {} {}\n", value(k), start + 15 * k));
        }
    }
    om.push_str("# EOF\n");
    let input = case.file("exporters.om", &om);
    let storage = case.dir.path().join("tsdb");
    let out = Command::new(&programs.promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&storage)
        .output()
        .expect("promtool runs");
    assert!(out.status.success(), "promtool: {}{}", text(&out.stdout), text(&out.stderr));
    let server = apron_tests::prometheus::Server::start("global:\n  scrape_interval: 15s\n", Some(&storage));
    let url = server.url();
    let out = case.apron(&[
        "import",
        "prometheus",
        "--url",
        &url,
        "--from",
        "2026-11-02T07:00:00Z",
        "--to",
        "2026-11-02T07:10:00Z",
        "--step",
        "1m",
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("host gpu-node-7: 10 gpu_samples rows, 0 proc_samples rows"), "{stdout}");
    assert!(stdout.contains("host 10.0.0.9: 10 gpu_samples rows, 0 proc_samples rows"), "{stdout}");
    assert!(stderr.contains(r#"Hostname "dcgm-exporter-6ldbb" is the exporter pod's name"#), "{stderr}");
    assert!(stderr.contains("ignored the pod label dcgm-exporter-6ldbb"), "{stderr}");
    assert!(stderr.contains("dropped 10 values that are DCGM's blank markers"), "{stderr}");
    let period = ["--from", "2026-11-02T07:00:00Z", "--to", "2026-11-02T07:10:00Z"];
    let row = case.spend(&period, "(unallocated)");
    near("cost", &row["cost"], 1.24);
    assert_eq!(case.number("SELECT count(temp_c) FROM gpu_samples"), 0.0, "blanks are no temperature");
    let smi_gpu = "gpu_uuid = 'GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa'";
    assert_eq!(case.number(&format!("SELECT avg(gpu_util_pct) FROM gpu_samples WHERE {smi_gpu}")), 50.0);
    assert_eq!(
        case.number(&format!("SELECT max(fb_total_bytes) FROM gpu_samples WHERE {smi_gpu}")),
        8_589_934_592.0
    );
    let model = case.json(&["sql", &format!("SELECT DISTINCT gpu_model FROM gpu_samples WHERE {smi_gpu}")]);
    assert_eq!(model[0]["gpu_model"], "NVIDIA GeForce RTX 2080 SUPER");
    assert_eq!(
        case.number("SELECT sum(gpu_util_pct) FROM gpu_samples WHERE host = 'gpu-node-7'"),
        500.0,
        "100 % for 5 of 10 minutes"
    );
}

#[test]
fn impossible_dcgm_values_are_refused_naming_the_series() {
    let case = Case::new();
    let programs = apron_tests::prometheus::programs();
    let start = 1_793_602_800i64; // 2026-11-02T07:00:00Z
    let cases: [(&str, f64, &str); 6] = [
        ("DCGM_FI_PROF_SM_ACTIVE", 55.0, "sm_active_pct"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", -1e30, "energy_mj"),
        ("DCGM_FI_DEV_POWER_USAGE", -2_000_000.0, "power_mw"),
        ("DCGM_FI_DEV_POWER_USAGE", 2_000_000.0, "power_mw"),
        ("DCGM_FI_DEV_GPU_TEMP", 1e12, "temp_c"),
        ("DCGM_FI_DEV_FB_FREE", -100.0, "free memory"),
    ];
    let mut om = String::new();
    let labels = r#"gpu="0",UUID="GPU-P0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-p""#;
    let mut by_name: std::collections::BTreeMap<&str, Vec<(i64, f64)>> = Default::default();
    for (k, (name, value, _)) in cases.iter().enumerate() {
        let hour = start + 3_600 * k as i64;
        for s in 0..4 {
            by_name.entry(name).or_default().push((hour + 15 * s, *value));
        }
        by_name.entry("DCGM_FI_DEV_FB_USED").or_default().push((hour, 1024.0));
    }
    for (name, points) in &by_name {
        om.push_str(&format!("# TYPE {name} gauge\n"));
        for (t, v) in points {
            om.push_str(&format!("{name}{{{labels}}} {v} {t}\n"));
        }
    }
    om.push_str("# EOF\n");
    let input = case.file("bad.om", &om);
    let storage = case.dir.path().join("tsdb");
    let out = Command::new(&programs.promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(&storage)
        .output()
        .expect("promtool runs");
    assert!(out.status.success(), "promtool: {}{}", text(&out.stdout), text(&out.stderr));
    let server = apron_tests::prometheus::Server::start("global:\n  scrape_interval: 15s\n", Some(&storage));
    let url = server.url();
    for (k, (name, _, column)) in cases.iter().enumerate() {
        let from = format!("2026-11-02T{:02}:00:00Z", 7 + k);
        let to = format!("2026-11-02T{:02}:00:00Z", 8 + k);
        let out = case.apron(&[
            "import",
            "prometheus",
            "--url",
            &url,
            "--from",
            &from,
            "--to",
            &to,
            "--step",
            "1m",
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(err.contains(name), "{name}: names the series: {err}");
        assert!(err.contains(&format!("{column} holds")) && err.contains(&from), "{name}: {err}");
        assert!(case.parquet_files().is_empty(), "{name}: nothing written");
    }
}
