//! The ledger against the SQL views it follows: on a simulated fleet whose
//! files split minutes (a file every 97 s), every figure query gives the
//! same numbers over `cost_buckets` as over `minute_costs`, and the
//! stretches are those of `queries/zombies.sql` and `queries/reclaim.sql`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use apron_schemas::DataLayout;
use apron_schemas::time::{HOUR_MS, MINUTE_MS};
use apron_store::simulate::{SimulateOptions, simulate};
use chrono::NaiveDate;
use datafusion::arrow::array::{Array, RecordBatch};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::ScalarValue;

use super::*;
use crate::report::columns::Columns;
use crate::report::period::{Period, PeriodChoice};
use crate::session::queries;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// 24 GPUs (3 hosts) over two days, a file every 997 s (minutes split across files).
fn fleet(dir: &Path) {
    let options = SimulateOptions {
        layout: DataLayout::new(dir),
        gpus: 24,
        days: 2,
        start: NaiveDate::from_ymd_opt(2026, 10, 1).expect("date"),
        seed: 7,
        interval: Duration::from_secs(1),
        rotate: Duration::from_secs(997),
        threads: 2,
    };
    simulate(&options, &|_, _| {}).expect("simulates");
    mig_host(dir);
}

/// A host with one H100 partitioned into MIG instances, 04:00–10:00 of the
/// first day, a sample every 10 s, files every 997 s (minutes split across
/// files): MIG-a (3 slices) busy, then idle and held, then empty; MIG-b (2
/// slices) with no activity known for the first hour, then two processes
/// time-slicing it; MIG-c (1 slice) made at 07:00, held idle. The GPU's own
/// row keeps the unassigned slices (2, then 1) and carries the power, its
/// energy counter missing for a while. Allocations: MIG-a to pod
/// nlp-serve/nb-0 from 08:00 (idle, no process: held by the pod) and to
/// pod vision-dev/nb-1 too from 09:00 (time-sliced: half each); MIG-b to
/// Slurm job 902 throughout (its processes pay, not the job); the GPU
/// itself to Slurm job 901 06:00–08:00 (a partitioned GPU's own row stays
/// idle-empty: nobody can use those slices).
fn mig_host(dir: &Path) {
    use apron_schemas::{AllocSample, GpuSample, Holder, ProcIdentity, ProcSample};
    use apron_store::source::Tick;
    use apron_store::writer::RollingWriter;

    let start = NaiveDate::from_ymd_opt(2026, 10, 1)
        .expect("date")
        .and_hms_opt(4, 0, 0)
        .expect("time")
        .and_utc()
        .timestamp_millis();
    let mut writer =
        RollingWriter::new(DataLayout::new(dir), "gpu-mig01", Duration::from_secs(997)).expect("host");
    let mut energy = 5_000_000_000i64;
    for n in 0..2_160i64 {
        let ts = start + n * 10_000;
        let hour = n / 360;
        let power = 150_000 + ((n * 7_919) % 250_000) as i32;
        energy += i64::from(power) * 10;
        let instance = |uuid: &str, profile: &str, slices: i32, sm: Option<f32>| GpuSample {
            ts,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
            interval_ms: 10_000,
            sm_active_pct: sm,
            fb_total_bytes: Some((i64::from(slices) * 10) << 30),
            parent_gpu_uuid: Some("GPU-mig-0".into()),
            mig_profile: Some(profile.into()),
            mig_slices: Some(slices),
            mig_total_slices: Some(7),
            ..Default::default()
        };
        let proc = |uuid: &str, pid: i32, user: &str, mem: i64, sm: Option<i32>| ProcSample {
            ts,
            gpu_uuid: uuid.into(),
            pid,
            interval_ms: 10_000,
            identity: ProcIdentity {
                proc_start: Some(start - 60_000 + i64::from(pid)),
                comm: Some("python".into()),
                user: Some(user.into()),
                ..Default::default()
            },
            used_mem_bytes: Some(mem),
            sm_util_pct: sm,
            ..Default::default()
        };
        let mut tick = Tick::default();
        tick.gpus.push(GpuSample {
            ts,
            gpu_uuid: "GPU-mig-0".into(),
            gpu_index: 0,
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
            interval_ms: 10_000,
            power_mw: Some(power),
            energy_mj: (!(200..260).contains(&n)).then_some(energy),
            mig_total_slices: Some(7),
            ..Default::default()
        });
        let a_sm = if hour < 2 { 60.0 } else { 1.0 };
        tick.gpus.push(instance("MIG-a", "3g.40gb", 3, Some(a_sm + (n % 5) as f32)));
        if hour < 4 {
            tick.procs.push(proc("MIG-a", 4_100, "ana", 20 << 30, Some(50)));
        }
        tick.gpus.push(instance("MIG-b", "2g.20gb", 2, (hour >= 1).then_some(20.0 + (n % 30) as f32)));
        tick.procs.push(proc("MIG-b", 4_200, "ben", 4 << 30, Some(10 + (n % 3) as i32)));
        tick.procs.push(proc("MIG-b", 4_201, "cho", 12 << 30, Some(30)));
        if hour >= 3 {
            tick.gpus.push(instance("MIG-c", "1g.10gb", 1, Some(0.0)));
            tick.procs.push(proc("MIG-c", 4_300, "dev", 2 << 30, Some(0)));
        }
        let pod = |uuid: &str, namespace: &str, name: &str| AllocSample {
            ts,
            interval_ms: 10_000,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            holder: Holder::kubernetes(Some(namespace.into()), Some(name.into()), Some("lab".into())),
        };
        let job = |uuid: &str, id: &str, account: &str, user: &str| AllocSample {
            ts,
            interval_ms: 10_000,
            gpu_uuid: uuid.into(),
            gpu_index: 0,
            holder: Holder::slurm(id.into(), Some(account.into()), Some("gpu".into()), Some(user.into())),
        };
        if hour >= 4 {
            tick.allocations.push(pod("MIG-a", "nlp-serve", "nb-0"));
        }
        if hour >= 5 {
            tick.allocations.push(pod("MIG-a", "vision-dev", "nb-1"));
        }
        tick.allocations.push(job("MIG-b", "902", "speech", "ben"));
        if (2..4).contains(&hour) {
            tick.allocations.push(job("GPU-mig-0", "901", "research", "dev"));
        }
        writer.push(ts, &tick).expect("push");
    }
    writer.close().expect("close");
}

fn config() -> Config {
    let text = crate::commands::demo::demo_config();
    Config::from_toml(&text, Path::new("apron.toml")).expect("the demo config parses")
}

/// The period: from 05:13 on the first day to 19:47 on the second, so the
/// ends cut days and buckets.
fn period() -> Period {
    let start = NaiveDate::from_ymd_opt(2026, 10, 1).expect("date").and_hms_opt(5, 13, 0).expect("time");
    let start_ms = start.and_utc().timestamp_millis();
    let choice = PeriodChoice {
        month: None,
        from: Some(start_ms),
        to: Some(start_ms + 38 * HOUR_MS + 34 * MINUTE_MS),
        last: None,
    };
    Period::choose(&choice, start_ms + 10 * 24 * HOUR_MS).expect("period")
}

async fn rows(session: &Session, sql: &str, params: Vec<ScalarValue>) -> Vec<RecordBatch> {
    let df = session.sql_with_params(sql, params).await.expect("plans");
    session.collect(df).await.expect("runs").1
}

/// Rows keyed by their text columns, with their numbers.
fn keyed(batches: &[RecordBatch]) -> BTreeMap<Vec<String>, Vec<Option<f64>>> {
    let mut out = BTreeMap::new();
    for batch in batches {
        let mut texts = Vec::new();
        let mut numbers = Vec::new();
        for column in batch.columns() {
            if matches!(column.data_type(), DataType::Float64) {
                let c =
                    column.as_any().downcast_ref::<datafusion::arrow::array::Float64Array>().expect("f64");
                numbers.push((0..c.len()).map(|i| c.is_valid(i).then(|| c.value(i))).collect::<Vec<_>>());
            } else {
                let f = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default()).expect("formats");
                texts.push((0..column.len()).map(|i| f.value(i).to_string()).collect::<Vec<_>>());
            }
        }
        for i in 0..batch.num_rows() {
            let key: Vec<String> = texts.iter().map(|t| t[i].clone()).collect();
            let values: Vec<Option<f64>> = numbers.iter().map(|n| n[i]).collect();
            assert!(out.insert(key.clone(), values).is_none(), "one row per key: {key:?}");
        }
    }
    out
}

fn assert_same(what: &str, ledger: &[RecordBatch], views: &[RecordBatch]) {
    let (a, b) = (keyed(ledger), keyed(views));
    assert!(!b.is_empty(), "{what}: the views give rows");
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{what}: the same rows");
    for (key, (x, y)) in a.iter().map(|(k, v)| (k, (v, &b[k]))) {
        for (p, q) in x.iter().zip(y) {
            match (p, q) {
                (Some(p), Some(q)) => {
                    assert!(
                        (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
                        "{what} {key:?}: {p} vs {q}"
                    )
                }
                (p, q) => assert_eq!(p, q, "{what} {key:?}"),
            }
        }
    }
}

#[test]
fn every_figure_reads_the_same_from_the_ledger_as_from_the_views() {
    let dir = tempfile::tempdir().expect("tempdir");
    fleet(dir.path());
    let (config, period) = (config(), period());
    runtime().block_on(async {
        let session = Session::open(dir.path(), crate::session::memory::MemoryLimit::for_this_machine())
            .await
            .expect("opens");
        crate::config::pricing::register_minute_costs(&session, &config, &period).await.expect("views");
        let rules = Rules { zombie_min_mem_bytes: 1 << 20, zombie_min_minutes: 5, reclaim_min_minutes: 5 };
        // Hourly buckets reading every host at once; five-minute buckets
        // reading one host at a time.
        for (bucket_ms, hosts) in [(HOUR_MS, 16), (5 * MINUTE_MS, 1)] {
            let ledger = Ledger::compute_sliced(&session, &config, &period, bucket_ms, rules, hosts)
                .await
                .expect("ledger");
            ledger.register(&session).expect("registers");
            let bucket = ScalarValue::Int64(Some(bucket_ms / 1000));
            let by = |k: &str| vec![ScalarValue::Utf8(Some(k.to_owned()))];
            let cases: Vec<(&str, &str, Vec<ScalarValue>)> = vec![
                ("spend", queries::SPEND, vec![]),
                ("idle-cost by team", queries::IDLE_COST, by("team")),
                ("idle-cost by user", queries::IDLE_COST, by("user")),
                ("idle-cost by host", queries::IDLE_COST, by("host")),
                ("idle-cost by gpu", queries::IDLE_COST, by("gpu")),
                ("windows", queries::WINDOWS, vec![]),
                ("gpu_days", queries::GPU_DAYS, vec![]),
                ("fleet_state", queries::FLEET_STATE, vec![bucket.clone()]),
                ("power", queries::POWER, vec![bucket.clone()]),
            ];
            for (what, sql, params) in cases {
                let from_ledger = rows(&session, sql, params.clone()).await;
                let from_views =
                    rows(&session, &sql.replace("FROM cost_buckets", "FROM minute_costs"), params).await;
                assert_same(&format!("{what} ({bucket_ms} ms buckets)"), &from_ledger, &from_views);
            }
            let unknown =
                rows(&session, "SELECT sum(energy_unknown_seconds) AS s FROM gpu_minute_states", vec![])
                    .await;
            let c = Columns::of(&unknown[0]);
            let s = c.f64_opt("s").expect("number")[0].unwrap_or(0.0);
            assert!(
                (s - ledger.energy_unknown_seconds).abs() < 1e-6,
                "{s} vs {}",
                ledger.energy_unknown_seconds
            );
        }
        let ledger =
            Ledger::compute_sliced(&session, &config, &period, HOUR_MS, rules, 2).await.expect("ledger");
        // The header's coverage, from the ledger's pass and from its two queries.
        let now = period.end_ms + HOUR_MS;
        let views = crate::report::header::Coverage::of(&session, &period, now).await.expect("coverage");
        let coverage = ledger.coverage.clone().expect("the ledger saw the rollups");
        let seen = &coverage.row;
        assert_eq!((seen.gpus, &seen.models), (views.gpus, &views.models));
        assert!((seen.recorded_seconds / 3600.0 - views.recorded_hours).abs() < 1e-9);
        assert_eq!(coverage.model_hours.len(), views.model_hours.len());
        for (a, b) in coverage.model_hours.iter().zip(&views.model_hours) {
            assert_eq!((&a.model, a.gpus), (&b.model, b.gpus));
            assert!((a.gpu_hours - b.gpu_hours).abs() < 1e-9, "{a:?} vs {b:?}");
        }
        let row = seen.clone();
        let from_ledger =
            crate::report::header::Coverage::from_row(&session, &period, now, row, views.model_hours.clone())
                .await
                .expect("coverage");
        assert_eq!((from_ledger.first_ms, from_ledger.last_ms), (views.first_ms, views.last_ms));
        // The zombies and the data-starved, told apart by their traffic at
        // a threshold that splits this fleet's stretches, and at none.
        let traffic = |r: &ZombieRow| r.pcie_rx_mib_per_s.unwrap_or(0.0) + r.pcie_tx_mib_per_s.unwrap_or(0.0);
        let mut split: Vec<f64> = ledger.zombies.iter().map(traffic).collect();
        split.sort_by(f64::total_cmp);
        let threshold = split[split.len() / 2].ceil().max(1.0) as u64;
        for threshold in [threshold, 0] {
            let params = vec![
                ScalarValue::Int64(Some(rules.zombie_min_mem_bytes)),
                ScalarValue::Int64(Some(rules.zombie_min_minutes)),
                ScalarValue::Int64(Some(threshold as i64)),
            ];
            let (starved, zombies): (Vec<ZombieRow>, Vec<ZombieRow>) = ledger
                .zombies
                .iter()
                .cloned()
                .partition(|r| crate::report::figures::zombies::is_starved(r, threshold));
            let from_views = zombie_rows(&rows(&session, queries::ZOMBIES, params.clone()).await);
            assert!(!from_views.is_empty(), "the fleet has zombies");
            assert_eq!(zombies.into_iter().map(untrafficked).collect::<Vec<_>>(), from_views);
            let from_views = zombie_rows(&rows(&session, queries::STARVED, params).await);
            assert_eq!(starved.len(), from_views.len(), "starved at {threshold} MiB/s");
            assert!(threshold == 0 || !starved.is_empty(), "the fleet has stretches with traffic");
            for (a, b) in starved.iter().zip(&from_views) {
                assert_eq!(untrafficked(a.clone()), untrafficked(b.clone()));
                for (x, y) in [
                    (a.activity_pct, b.activity_pct),
                    (a.pcie_rx_mib_per_s, b.pcie_rx_mib_per_s),
                    (a.pcie_tx_mib_per_s, b.pcie_tx_mib_per_s),
                ] {
                    let (x, y) = (x.expect("known"), y.expect("known"));
                    assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "{a:?} vs {b:?}");
                }
            }
        }
        let reclaim =
            rows(&session, queries::RECLAIM, vec![ScalarValue::Int64(Some(rules.reclaim_min_minutes))]).await;
        let from_views = reclaim_rows(&reclaim);
        assert!(!from_views.is_empty(), "the fleet has idle stretches");
        // The GPU-hours are sums of shares, in another order.
        let rounded = |rows: &[ReclaimRow]| -> Vec<ReclaimRow> {
            rows.iter()
                .map(|r| ReclaimRow { idle_gpu_hours: (r.idle_gpu_hours * 1e9).round() / 1e9, ..r.clone() })
                .collect()
        };
        assert_eq!(rounded(&ledger.reclaim), rounded(&from_views));
        // MIG-a, idle from 06:00 (held by ana's process until 08:00, then
        // allocated to two pods, the second from 09:00): one stretch.
        let mig_a: Vec<_> = ledger.reclaim.iter().filter(|r| r.gpu_uuid == "MIG-a").collect();
        assert_eq!(mig_a.len(), 1, "{mig_a:?}");
        assert_eq!(mig_a[0].allocated_to, "pod nlp-serve/nb-0,pod vision-dev/nb-1");
        assert_eq!(mig_a[0].held_by, "ana");
        let eight = NaiveDate::from_ymd_opt(2026, 10, 1).and_then(|d| d.and_hms_opt(8, 0, 0)).expect("time");
        assert_eq!(mig_a[0].allocated_since, Some(eight.and_utc().timestamp_millis()));
        // No stretch of a partitioned GPU's unheld slices; an instance's
        // hours are its share of its minutes.
        assert!(ledger.reclaim.iter().all(|r| r.gpu_uuid != "GPU-mig-0"), "{:?}", ledger.reclaim);
        assert!(!ledger.unpartitioned.is_empty(), "the MIG host has unheld slices");
        let sum: f64 = ledger.reclaim.iter().map(|r| r.idle_gpu_hours).sum();
        assert!((sum - ledger.reclaim_sum.gpu_hours).abs() < 1e-9, "{sum} vs {:?}", ledger.reclaim_sum);
    });
}

fn zombie_rows(batches: &[RecordBatch]) -> Vec<ZombieRow> {
    let mut out = Vec::new();
    for batch in batches {
        let c = Columns::of(batch);
        let (host, gpu_index, gpu_uuid, pid) = (
            c.text("host").unwrap(),
            c.i32("gpu_index").unwrap(),
            c.text("gpu_uuid").unwrap(),
            c.i32("pid").unwrap(),
        );
        let (proc_start, comm, user) = (
            c.timestamp_ms_opt("proc_start").unwrap(),
            c.text_opt("comm").unwrap(),
            c.text_opt("user").unwrap(),
        );
        let (team, used) = (c.text("team").unwrap(), c.i64_opt("used_mem_bytes").unwrap());
        let (since, minutes, running, idle) = (
            c.timestamp_ms("idle_since").unwrap(),
            c.i64("idle_minutes").unwrap(),
            c.bool("still_running").unwrap(),
            c.bool("still_idle").unwrap(),
        );
        for i in 0..c.len() {
            out.push(ZombieRow {
                host: host[i].clone(),
                gpu_index: gpu_index[i],
                gpu_uuid: gpu_uuid[i].clone(),
                pid: pid[i],
                proc_start: proc_start[i],
                comm: comm[i].clone(),
                user: user[i].clone(),
                team: team[i].clone(),
                used_mem_bytes: used[i],
                idle_since: since[i],
                idle_minutes: minutes[i],
                still_running: running[i],
                still_idle: idle[i],
                activity_pct: c.f64_opt("activity_pct").ok().and_then(|v| v[i]),
                pcie_rx_mib_per_s: c.f64_opt("pcie_rx_mib_per_s").ok().and_then(|v| v[i]),
                pcie_tx_mib_per_s: c.f64_opt("pcie_tx_mib_per_s").ok().and_then(|v| v[i]),
            });
        }
    }
    out
}

/// `row` without what `queries/zombies.sql` does not give: the traffic.
fn untrafficked(row: ZombieRow) -> ZombieRow {
    ZombieRow { activity_pct: None, pcie_rx_mib_per_s: None, pcie_tx_mib_per_s: None, ..row }
}

fn reclaim_rows(batches: &[RecordBatch]) -> Vec<ReclaimRow> {
    let mut out = Vec::new();
    for batch in batches {
        let c = Columns::of(batch);
        let (host, gpu_index, gpu_uuid) =
            (c.text("host").unwrap(), c.i32("gpu_index").unwrap(), c.text("gpu_uuid").unwrap());
        let (since, minutes) = (c.timestamp_ms("idle_since").unwrap(), c.i64("idle_minutes").unwrap());
        let (held_by, still) = (c.text("held_by").unwrap(), c.bool("still_idle").unwrap());
        let (allocated_to, allocated_since) =
            (c.text("allocated_to").unwrap(), c.timestamp_ms_opt("allocated_since").unwrap());
        let gpu_hours = c.f64("idle_gpu_hours").unwrap();
        for i in 0..c.len() {
            out.push(ReclaimRow {
                host: host[i].clone(),
                gpu_index: gpu_index[i],
                gpu_uuid: gpu_uuid[i].clone(),
                idle_since: since[i],
                idle_minutes: minutes[i],
                idle_gpu_hours: gpu_hours[i],
                held_by: held_by[i].clone(),
                allocated_to: allocated_to[i].clone(),
                allocated_since: allocated_since[i],
                still_idle: still[i],
            });
        }
    }
    out
}

/// The bucket rows are in a file under the temporary folder while the
/// table lives, the same rows the table reads, and the folder goes with the
/// table (replaced by another ledger's, or dropped with the session).
#[test]
fn the_buckets_file_lives_as_long_as_its_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    fleet(dir.path());
    let (config, period) = (config(), period());
    runtime().block_on(async {
        let session = Session::open(dir.path(), crate::session::memory::MemoryLimit::for_this_machine())
            .await
            .expect("opens");
        let rules = crate::report::context::rules(
            config.zombie.min_idle,
            config.zombie.min_mem_mib,
            config.reclaim.idle_for,
        );
        let ledger = Ledger::compute(&session, &config, &period, HOUR_MS, rules).await.expect("ledger");
        let first = ledger.buckets.dir();
        assert!(first.starts_with(std::env::temp_dir()), "{}", first.display());
        assert!(first.join("cost_buckets.parquet").is_file());
        ledger.register(&session).expect("registers");
        let held = ledger.buckets.rows();
        drop(ledger);
        // Read after the ledger is gone: the table keeps its file.
        let counted = rows(&session, "SELECT count(*) AS n FROM cost_buckets", vec![]).await;
        let n = counted[0]
            .column(0)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::Int64Array>()
            .expect("i64");
        assert!(held > 24, "{held}");
        assert_eq!(usize::try_from(n.value(0)).expect("a count"), held);
        assert!(first.is_dir());

        let again = Ledger::compute(&session, &config, &period, HOUR_MS, rules).await.expect("ledger");
        again.register(&session).expect("registers");
        let second = again.buckets.dir();
        drop(again);
        assert!(!first.exists(), "{} stays after its table was replaced", first.display());
        assert!(second.is_dir());
        drop(session);
        assert!(!second.exists(), "{} stays after the session", second.display());
    });
}
