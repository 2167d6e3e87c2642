//! End to end: `apron events` on hand-built data written by the real
//! writer: each GPU's faults grouped, judged (XIDs by NVIDIA's catalogue,
//! read here from `xid.csv` itself), the GPUs to drain, the processes that
//! were on the GPU, and the period's bounds.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use apron_schemas::{DataLayout, GpuEvent, GpuSample, ProcIdentity, ProcSample};
use apron_store::source::Tick;
use apron_store::writer::RollingWriter;
use apron_tests::bin;

const STEP_MS: i64 = 10_000;
const MIN_MS: i64 = 60_000;

/// NVIDIA's meaning and action of XID `code`, from the catalogue file.
fn catalogue(code: u32) -> (String, String) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../schemas/src/xid/xid.csv");
    let mut reader = csv::Reader::from_path(path).expect("xid.csv");
    for record in reader.records() {
        let record = record.expect("a record");
        if record[0] == *code.to_string() {
            return (record[2].to_owned(), record[3].to_owned());
        }
    }
    panic!("XID {code} not in the catalogue")
}

fn event(ts: i64, gpu: i32, kind: &str) -> GpuEvent {
    GpuEvent {
        ts,
        gpu_uuid: format!("GPU-{gpu}").into(),
        gpu_index: gpu,
        kind: kind.into(),
        ..Default::default()
    }
}

#[test]
fn events_groups_judges_and_names_the_gpus_to_drain() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let end = chrono::Utc::now().timestamp_millis() / MIN_MS * MIN_MS;
    let start = end - 30 * MIN_MS;
    let at = |minute: i64, s: i64| start + minute * MIN_MS + s * 1_000;
    // Per tick, the events of that tick.
    let mut events: BTreeMap<i64, Vec<GpuEvent>> = BTreeMap::new();
    let mut add = |e: GpuEvent| events.entry(e.ts / STEP_MS * STEP_MS).or_default().push(e);
    // GPU 0: fell off the bus at minute 10 while alice's job ran, lost,
    // back at minute 20.
    add(GpuEvent { xid: Some(79), ..event(at(10, 0), 0, "xid") });
    add(GpuEvent {
        detail: Some("cannot read utilization: lost".into()),
        ..event(at(10, 10), 0, "gpu_lost")
    });
    add(GpuEvent { value: Some(600), ..event(at(20, 10), 0, "gpu_back") });
    // GPU 1: two contained ECC errors (94), three app errors (13), a row
    // remapping pending.
    for m in [5, 15] {
        add(GpuEvent { xid: Some(94), ..event(at(m, 0), 1, "xid") });
    }
    for m in [3, 4, 25] {
        add(GpuEvent { xid: Some(13), ..event(at(m, 0), 1, "xid") });
    }
    add(GpuEvent { value: Some(1), delta: Some(1), ..event(at(16, 0), 1, "remap_pending") });
    // GPU 2: corrected errors and PCIe replays: nothing to drain for.
    for m in [1, 2, 3] {
        add(event(at(m, 20), 2, "ecc_sbe"));
    }
    add(GpuEvent { value: Some(4), ..event(at(0, 0), 2, "pcie_replay") });
    add(GpuEvent { value: Some(9), delta: Some(5), ..event(at(12, 0), 2, "pcie_replay") });
    // Then a double-bit error (the event and the counter say it alike) and
    // the GPU lost, not back.
    add(event(at(22, 0), 2, "ecc_dbe"));
    add(GpuEvent { value: Some(1), delta: Some(1), ..event(at(23, 0), 2, "ecc_uncorrected") });
    add(GpuEvent { detail: Some("cannot read memory use: lost".into()), ..event(at(28, 0), 2, "gpu_lost") });

    let mut w = RollingWriter::new(DataLayout::new(&data), "h", Duration::from_secs(600)).expect("host");
    let mut ts = start - 60 * MIN_MS;
    while ts < end {
        let gpus = (0..3)
            .map(|g| GpuSample {
                ts,
                gpu_uuid: format!("GPU-{g}").into(),
                gpu_index: g,
                interval_ms: STEP_MS as i32,
                gpu_util_pct: Some(50),
                ..Default::default()
            })
            .collect();
        let procs = vec![ProcSample {
            ts,
            gpu_uuid: "GPU-0".into(),
            pid: 100,
            interval_ms: STEP_MS as i32,
            identity: ProcIdentity {
                user: Some("alice".into()),
                comm: Some("python".into()),
                ..Default::default()
            },
            used_mem_bytes: Some(1 << 30),
            ..Default::default()
        }];
        let mut tick_events = events.remove(&ts).unwrap_or_default();
        // Before the period (and the alerts' hour): left out.
        if ts == start - 45 * MIN_MS {
            tick_events.push(GpuEvent { xid: Some(48), ..event(ts, 2, "xid") });
        }
        w.push(ts, &Tick { gpus, procs, events: tick_events, ..Default::default() }).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");
    assert!(events.is_empty(), "every event on a tick: {events:?}");

    let iso = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).expect("a time").to_rfc3339();
    let run = |extra: &[&str]| {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .args(["--format", "json", "events", "--from", &iso(start), "--to", &iso(end)])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
        (rows, stderr)
    };
    let (rows, header) = run(&[]);
    assert!(header.contains("Faults: 17 events on 3 GPUs; to drain: h/0, h/1, h/2"), "{header}");
    type Key = (i64, String, Option<i64>);
    type Judged = (i64, bool, String, String);
    let got: BTreeMap<Key, Judged> = rows
        .iter()
        .map(|r| {
            (
                (
                    r["gpu_index"].as_i64().expect("index"),
                    r["kind"].as_str().expect("kind").to_owned(),
                    r["xid"].as_i64(),
                ),
                (
                    r["events"].as_i64().expect("events"),
                    r["drain"].as_bool().expect("drain"),
                    r["fault"].as_str().expect("fault").to_owned(),
                    r["action"].as_str().expect("action").to_owned(),
                ),
            )
        })
        .collect();
    let xid = |code: u32, events: i64, drain: bool, action_suffix: &str| {
        let (meaning, action) = catalogue(code);
        (events, drain, format!("XID {code}: {meaning}"), format!("{action}{action_suffix}"))
    };
    let k = |gpu: i64, kind: &str, code: Option<i64>| (gpu, kind.to_owned(), code);
    let s = |events: i64, drain: bool, fault: &str, action: &str| {
        (events, drain, fault.to_owned(), action.to_owned())
    };
    let want = BTreeMap::from([
        (k(0, "xid", Some(79)), xid(79, 1, true, "")),
        (k(0, "gpu_lost", None), s(1, false, "GPU stopped answering; it answered again", "")),
        (k(0, "gpu_back", None), s(1, false, "GPU answered again after it was lost", "")),
        (k(1, "xid", Some(94)), xid(94, 2, true, " (repeated: drain and reset the GPU)")),
        (k(1, "xid", Some(13)), xid(13, 3, false, "")),
        (
            k(1, "remap_pending", None),
            s(1, true, "a row remapping waits for a GPU reset", "drain; reset the GPU when it is idle"),
        ),
        (k(2, "ecc_sbe", None), s(3, false, "single-bit ECC error (corrected)", "")),
        (
            k(2, "pcie_replay", None),
            s(
                2,
                false,
                "PCIe replays (link retransmissions)",
                "check the slot and riser if it keeps growing",
            ),
        ),
        (k(2, "ecc_dbe", None), s(1, true, "double-bit ECC error (uncorrectable)", "drain; reset the GPU")),
        (
            k(2, "ecc_uncorrected", None),
            s(1, true, "uncorrectable ECC errors since the driver loaded", "drain; reset the GPU"),
        ),
        (
            k(2, "gpu_lost", None),
            s(
                1,
                true,
                "GPU stopped answering (lost, or hung in the driver)",
                "drain; reset the GPU or reboot the node",
            ),
        ),
    ]);
    assert_eq!(got, want);
    // The latest first; a counter's growth and newest reading; who was on
    // the GPU when it fell off the bus.
    let row = |gpu: i64, kind: &str| {
        rows.iter().find(|r| r["gpu_index"] == gpu && r["kind"] == kind).unwrap_or_else(|| panic!("{kind}"))
    };
    assert_eq!(rows[0]["kind"], "gpu_lost");
    assert_eq!(rows[1]["kind"], "xid");
    assert_eq!(rows[1]["xid"], 13);
    assert_eq!(
        (row(2, "pcie_replay")["increase"].as_i64(), row(2, "pcie_replay")["last_value"].as_i64()),
        (Some(5), Some(9))
    );
    assert_eq!(row(0, "xid")["on_gpu"], "alice python (100)");
    assert_eq!(row(2, "ecc_sbe")["on_gpu"], "");
    let first = chrono::DateTime::parse_from_rfc3339(row(1, "xid")["first_at"].as_str().expect("first"))
        .expect("RFC 3339")
        .timestamp_millis();
    assert!([at(3, 0), at(5, 0)].contains(&first), "{first}");
    // --drain: only what drains a GPU.
    let (drained, _) = run(&["--drain"]);
    let kinds: Vec<(i64, &str)> = drained
        .iter()
        .map(|r| (r["gpu_index"].as_i64().expect("index"), r["kind"].as_str().expect("kind")))
        .collect();
    assert_eq!(kinds.len(), 6, "{kinds:?}");
    assert!(drained.iter().all(|r| r["drain"] == true));

    // The fault alerts, now: the XIDs of the last hour per GPU and code,
    // GPU 2's one uncorrectable error (told twice), GPU 1's pending remap
    // and GPU 2 lost; GPU 0 answered again, so it is not.
    let minutes_lost = || (chrono::Utc::now().timestamp_millis() - at(28, 0)) / MIN_MS;
    let lost_before = minutes_lost();
    let out = Command::new(bin("apron"))
        .arg("--data")
        .arg(&data)
        .args(["--format", "json", "alerts"])
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    assert_eq!(out.status.code(), Some(1), "rules fire: {}", String::from_utf8_lossy(&out.stderr));
    let alerts: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("json");
    let fired: Vec<(String, i64, i64, String)> = alerts
        .iter()
        .map(|r| {
            (
                r["rule"].as_str().expect("rule").to_owned(),
                r["gpu_index"].as_i64().expect("index"),
                r["value"].as_f64().expect("value") as i64,
                r["unit"].as_str().expect("unit").to_owned(),
            )
        })
        .collect();
    let lost = fired.iter().find(|r| r.0 == "gpu_lost").map_or(-1, |r| r.2);
    assert!((lost_before..=minutes_lost()).contains(&lost), "{lost} minutes since GPU 2 was lost");
    let f = |rule: &str, gpu: i64, value: i64, unit: &str| (rule.to_owned(), gpu, value, unit.to_owned());
    let want = [
        f("ecc_uncorrectable", 2, 1, "errors"),
        f("gpu_lost", 2, lost, "minutes"),
        f("remap_pending", 1, 1, ""),
        f("xid", 0, 79, "xid"),
        f("xid", 1, 13, "xid"),
        f("xid", 1, 94, "xid"),
    ];
    assert_eq!(fired, want, "{alerts:?}");
    let since = |rule: &str, gpu: i64| {
        let r = alerts.iter().find(|r| r["rule"] == rule && r["gpu_index"] == gpu).expect("fired");
        let since = r["since"].as_str().expect("since");
        chrono::DateTime::parse_from_rfc3339(since).expect("RFC 3339").timestamp_millis()
    };
    let got = (since("gpu_lost", 2), since("remap_pending", 1), since("ecc_uncorrectable", 2));
    assert_eq!(got, (at(28, 0), at(16, 0), at(22, 0)));
}

/// GPU-hours a fault took and their money, by hand: a GPU-hour costs 3.60
/// (`ops_per_gpu_hour`, no purchase price, no energy price).
#[test]
fn faults_take_gpu_hours_until_the_gpu_next_works_in_events_and_the_report() {
    bin("apron");
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let config = tmp.path().join("apron.toml");
    std::fs::write(
        &config,
        "[energy]\nprice_per_kwh = 0\n\n[[gpu_cost]]\nmodel = \"*\"\npurchase_price = 0\nlifetime_years = 1\nops_per_gpu_hour = 3.6\n",
    )
    .expect("config");
    let day = apron_tests::scenario::ms("2026-10-05T00:00:00Z");
    let at = |h: i64, m: i64, s: i64| day + h * 3_600_000 + m * MIN_MS + s * 1_000;
    let mut events: BTreeMap<i64, Vec<GpuEvent>> = BTreeMap::new();
    let mut add = |e: GpuEvent| events.entry(e.ts / STEP_MS * STEP_MS).or_default().push(e);
    // GPU 0 falls off the bus at 11:00:30 (and is lost: the same stretch),
    // answers again at 12:00, sits idle, works again at 12:30.
    add(GpuEvent { xid: Some(79), ..event(at(11, 0, 30), 0, "xid") });
    add(GpuEvent { detail: Some("lost".into()), ..event(at(11, 0, 40), 0, "gpu_lost") });
    add(GpuEvent { value: Some(3560), ..event(at(12, 0, 0), 0, "gpu_back") });
    // GPU 1: an application's XID (takes nothing), then a double-bit error
    // at 13:00:05, idle after it to the data's end at 14:00.
    add(GpuEvent { xid: Some(13), ..event(at(10, 30, 0), 1, "xid") });
    add(event(at(13, 0, 5), 1, "ecc_dbe"));
    let util = |gpu: i32, ts: i64| -> Option<Option<i32>> {
        match gpu {
            0 if ts >= at(11, 1, 0) && ts < at(12, 0, 0) => None,
            0 if ts >= at(12, 0, 0) && ts < at(12, 30, 0) => Some(Some(0)),
            1 if ts >= at(13, 1, 0) => Some(Some(0)),
            _ => Some(Some(80)),
        }
    };
    let mut w = RollingWriter::new(DataLayout::new(&data), "h", Duration::from_secs(600)).expect("host");
    let mut ts = at(10, 0, 0);
    while ts < at(14, 0, 0) {
        let gpus = (0..2)
            .filter_map(|g| {
                Some(GpuSample {
                    ts,
                    gpu_uuid: format!("GPU-{g}").into(),
                    gpu_index: g,
                    interval_ms: STEP_MS as i32,
                    gpu_util_pct: util(g, ts)?,
                    ..Default::default()
                })
            })
            .collect();
        let tick_events = events.remove(&ts).unwrap_or_default();
        w.push(ts, &Tick { gpus, events: tick_events, ..Default::default() }).expect("push");
        ts += STEP_MS;
    }
    w.close().expect("close");
    assert!(events.is_empty(), "every event on a tick: {events:?}");

    let apron = |args: &[&str]| {
        let out = Command::new(bin("apron"))
            .arg("--data")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("apron runs");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    };
    // GPU 0: 11:00 to 12:30, 1.5 GPU-hours, of which 31 minutes recorded
    // (the fault's minute and the idle half hour): 59 minutes unrecorded,
    // 3.54 of its 5.40. GPU 1: 13:00 to 14:00, recorded, 3.60, not back.
    let took = "faults took 2.50 GPU-hours ($9.00), 0.98 GPU-hours of it unrecorded ($3.54 at the GPUs' rate, \
                not in the fleet cost); 1 GPU not back at work by the end of the data";
    let (out, header) = apron(&[
        "--format",
        "json",
        "events",
        "--from",
        "2026-10-05T00:00:00Z",
        "--to",
        "2026-10-06T00:00:00Z",
    ]);
    assert!(header.contains(&format!("Faults: 5 events on 2 GPUs; to drain: h/0, h/1; {took}")), "{header}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).expect("json");
    let down = |gpu: i64, kind: &str| {
        let r = rows.iter().find(|r| r["gpu_index"] == gpu && r["kind"] == kind).expect("a row");
        (
            r["down_gpu_hours"].as_f64(),
            r["down_cost"].as_f64().map(|c| (c * 100.0).round() / 100.0),
            r["still_down"].clone(),
        )
    };
    assert_eq!(down(0, "xid"), (Some(1.5), Some(5.4), false.into()));
    assert_eq!(down(0, "gpu_lost"), (None, None, false.into()), "the stretch is the XID's");
    assert_eq!(down(1, "xid"), (None, None, false.into()), "XID 13 takes nothing");
    assert_eq!(down(1, "ecc_dbe"), (Some(1.0), Some(3.6), true.into()));

    // The report: a Health section, its table with the same figures, and
    // the headline's line. The fleet cost is the recorded time only: GPU 0
    // 181 minutes, GPU 1 240, at 3.60 an hour.
    let out_dir = tmp.path().join("report");
    let (headline, _) = apron(&["report", "--month", "2026-10", "--out", out_dir.to_str().expect("utf-8")]);
    assert!(
        headline.contains(&format!("  faults         5 events on 2 GPUs; to drain: h/0, h/1; {took}")),
        "{headline}"
    );
    assert!(headline.contains("fleet cost     $25.26"), "{headline}");
    let summary = std::fs::read_to_string(out_dir.join("summary.md")).expect("summary");
    assert!(summary.contains("## Health"), "{summary}");
    assert!(summary.contains(&format!("Of the GPUs' time, {took}.")), "{summary}");
    let csv = std::fs::read_to_string(out_dir.join("faults.csv")).expect("faults.csv");
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let headers = reader.headers().expect("headers").clone();
    let col =
        |name: &str| headers.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name}: {headers:?}"));
    let records: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("record")).collect();
    let dbe = records
        .iter()
        .find(|r| &r[col("fault")] == "double-bit ECC error (uncorrectable)")
        .expect("the double-bit error's row");
    let hours: f64 = dbe[col("down_gpu_hours")].parse().expect("a number");
    assert_eq!((hours, &dbe[col("still_down")]), (1.0, "true"), "{csv}");
    assert_eq!(records.len(), 5, "one row per GPU and fault: {csv}");
}
