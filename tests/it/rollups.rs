//! End to end: the minute rollups the recorder writes next to each closed
//! file agree with the raw rows they summarise (recomputed here, from the
//! raw Parquet files, without the recorder's code); compaction leaves one
//! sorted file per (table, date, host) with the same rows, while a reader
//! listing and reading the partitions never sees a row twice or misses
//! one; retention removes exactly the expired days.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use apron_tests::bin;
use apron_tests::files_under;
use apron_tests::signal;
use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Float64Type, Int32Type, Int64Type, TimestampMillisecondType};
use arrow::util::display::array_value_to_string;
use chrono::{Days, Utc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::errors::ParquetError;

const MINUTE_MS: i64 = 60_000;

// ---------------------------------------------------------------- helpers

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().expect("the binary runs")
}

fn simulate(data: &Path, args: &[&str]) {
    let out = run(Command::new(bin("apron-recorder")).args(["simulate", "--data"]).arg(data).args(args));
    assert!(out.status.success(), "simulate failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn compact(data: &Path, args: &[&str]) -> Output {
    run(Command::new(bin("apron-recorder")).arg("compact").arg("--data").arg(data).args(args))
}

/// The data files a reader reads: `*.parquet`, not hidden.
fn is_data_file(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| !n.starts_with(['.', '_']) && n.ends_with(".parquet"))
}

fn read_batches(path: &Path) -> Result<Vec<RecordBatch>, ParquetError> {
    let file = File::open(path).map_err(|e| ParquetError::External(Box::new(e)))?;
    ParquetRecordBatchReaderBuilder::try_new(file)?
        .build()?
        .map(|b| b.map_err(|e| ParquetError::ArrowError(e.to_string())))
        .collect()
}

fn column<'a>(b: &'a RecordBatch, name: &str) -> &'a ArrayRef {
    b.column_by_name(name).unwrap_or_else(|| panic!("column {name}"))
}

/// An integer or timestamp column as i64 values, nulls as `None`.
fn ints(b: &RecordBatch, name: &str) -> Vec<Option<i64>> {
    let c = column(b, name);
    match c.data_type() {
        DataType::Int32 => c.as_primitive::<Int32Type>().iter().map(|v| v.map(i64::from)).collect(),
        DataType::Int64 => c.as_primitive::<Int64Type>().iter().collect(),
        DataType::Timestamp(..) => c.as_primitive::<TimestampMillisecondType>().iter().collect(),
        other => panic!("{name}: unexpected type {other}"),
    }
}

fn floats(b: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    column(b, name).as_primitive::<Float64Type>().iter().collect()
}

fn strings(b: &RecordBatch, name: &str) -> Vec<Option<String>> {
    column(b, name).as_string::<i32>().iter().map(|v| v.map(str::to_owned)).collect()
}

fn bools(b: &RecordBatch, name: &str) -> Vec<bool> {
    column(b, name).as_boolean().iter().map(|v| v.expect("not null")).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn close_opt(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => close(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn minute(ts: i64) -> i64 {
    ts.div_euclid(MINUTE_MS) * MINUTE_MS
}

/// An interval-weighted mean over the non-null values.
#[derive(Debug, Default, Clone, Copy)]
struct Wmean {
    sum: f64,
    weight: f64,
}

impl Wmean {
    fn add(&mut self, v: Option<i64>, w: i64) {
        if let Some(v) = v {
            self.sum += v as f64 * w as f64;
            self.weight += w as f64;
        }
    }
    fn get(&self) -> Option<f64> {
        (self.weight > 0.0).then(|| self.sum / self.weight)
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

// ------------------------------------------------ raw rows, recomputed

#[derive(Debug, Clone)]
struct RawGpu {
    file: String,
    ts: i64,
    uuid: String,
    index: i64,
    model: Option<String>,
    interval: i64,
    util: Option<i64>,
    mem: Option<i64>,
    fb_used: Option<i64>,
    fb_total: Option<i64>,
    power: Option<i64>,
    energy_mj: Option<i64>,
    tx: Option<i64>,
    rx: Option<i64>,
}

#[derive(Debug, Clone)]
struct RawProc {
    file: String,
    ts: i64,
    uuid: String,
    pid: i64,
    start: Option<i64>,
    interval: i64,
    used: Option<i64>,
    sm: Option<i64>,
    mem: Option<i64>,
    comm: Option<String>,
    user: Option<String>,
}

fn file_name(p: &Path) -> String {
    p.file_name().and_then(|n| n.to_str()).expect("utf-8 name").to_owned()
}

fn raw_gpus(data: &Path) -> Vec<RawGpu> {
    let mut out = Vec::new();
    for f in files_under(&data.join("gpu_samples")).into_iter().filter(|p| is_data_file(p)) {
        for b in read_batches(&f).expect("readable") {
            let (ts, index, interval) = (ints(&b, "ts"), ints(&b, "gpu_index"), ints(&b, "interval_ms"));
            let (uuid, model) = (strings(&b, "gpu_uuid"), strings(&b, "gpu_model"));
            let (util, mem, fb_used, fb_total) = (
                ints(&b, "gpu_util_pct"),
                ints(&b, "mem_util_pct"),
                ints(&b, "fb_used_bytes"),
                ints(&b, "fb_total_bytes"),
            );
            let (power, energy, tx, rx) = (
                ints(&b, "power_mw"),
                ints(&b, "energy_mj"),
                ints(&b, "pcie_tx_bytes_per_s"),
                ints(&b, "pcie_rx_bytes_per_s"),
            );
            for i in 0..b.num_rows() {
                out.push(RawGpu {
                    file: file_name(&f),
                    ts: ts[i].expect("ts"),
                    uuid: uuid[i].clone().expect("uuid"),
                    index: index[i].expect("index"),
                    model: model[i].clone(),
                    interval: interval[i].expect("interval"),
                    util: util[i],
                    mem: mem[i],
                    fb_used: fb_used[i],
                    fb_total: fb_total[i],
                    power: power[i],
                    energy_mj: energy[i],
                    tx: tx[i],
                    rx: rx[i],
                });
            }
        }
    }
    out
}

fn raw_procs(data: &Path) -> Vec<RawProc> {
    let mut out = Vec::new();
    for f in files_under(&data.join("proc_samples")).into_iter().filter(|p| is_data_file(p)) {
        for b in read_batches(&f).expect("readable") {
            let (ts, pid, start, interval) =
                (ints(&b, "ts"), ints(&b, "pid"), ints(&b, "proc_start"), ints(&b, "interval_ms"));
            let (used, sm, mem) =
                (ints(&b, "used_mem_bytes"), ints(&b, "sm_util_pct"), ints(&b, "mem_util_pct"));
            let (uuid, comm, user) = (strings(&b, "gpu_uuid"), strings(&b, "comm"), strings(&b, "user"));
            for i in 0..b.num_rows() {
                out.push(RawProc {
                    file: file_name(&f),
                    ts: ts[i].expect("ts"),
                    uuid: uuid[i].clone().expect("uuid"),
                    pid: pid[i].expect("pid"),
                    start: start[i],
                    interval: interval[i].expect("interval"),
                    used: used[i],
                    sm: sm[i],
                    mem: mem[i],
                    comm: comm[i].clone(),
                    user: user[i].clone(),
                });
            }
        }
    }
    out
}

/// Each sample's energy in joules (docs/src/definitions.md: the counter's delta where it
/// exists, else power × time), by (gpu_uuid, ts): the delta to the GPU's
/// previous sample when that one is exactly one interval earlier and the
/// counter did not go back, else power × interval.
fn sample_energy(gpus: &[RawGpu]) -> HashMap<(String, i64), Option<f64>> {
    let mut by_gpu: BTreeMap<&str, Vec<&RawGpu>> = BTreeMap::new();
    for g in gpus {
        by_gpu.entry(&g.uuid).or_default().push(g);
    }
    let mut out = HashMap::new();
    for rows in by_gpu.values_mut() {
        rows.sort_by_key(|g| g.ts);
        for (i, g) in rows.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| rows[p]);
            let delta = match (prev, g.energy_mj) {
                (Some(p), Some(now)) if g.ts - p.ts == g.interval => {
                    p.energy_mj.filter(|&before| now >= before).map(|before| (now - before) as f64 / 1e3)
                }
                _ => None,
            };
            let e = delta.or_else(|| g.power.map(|p| p as f64 * g.interval as f64 / 1e6));
            out.insert((g.uuid.clone(), g.ts), e);
        }
    }
    out
}

/// What a GPU-minute (or the part of it in one file) should say.
#[derive(Debug, Default, Clone)]
struct GpuExpect {
    interval_ms: i64,
    samples: i64,
    util: Wmean,
    util_max: Option<i64>,
    mem: Wmean,
    fb_used_max: Option<i64>,
    fb_total: Option<i64>,
    energy: Option<f64>,
    power: Wmean,
    tx: Wmean,
    rx: Wmean,
    last_index: i64,
    model: Option<String>,
}

/// Per (pid, proc_start): the highest used_mem_bytes, `None` when unknown.
type ProcsOfMinute = BTreeMap<(i64, Option<i64>), Option<i64>>;

fn expect_gpu(rows: &[&RawGpu], energy: &HashMap<(String, i64), Option<f64>>) -> GpuExpect {
    let mut e = GpuExpect::default();
    let mut rows = rows.to_vec();
    rows.sort_by_key(|g| g.ts);
    for g in rows {
        e.interval_ms += g.interval;
        e.samples += 1;
        e.util.add(g.util, g.interval);
        e.util_max = max_opt(e.util_max, g.util);
        e.mem.add(g.mem, g.interval);
        e.fb_used_max = max_opt(e.fb_used_max, g.fb_used);
        e.fb_total = max_opt(e.fb_total, g.fb_total);
        if let Some(j) = energy[&(g.uuid.clone(), g.ts)] {
            e.energy = Some(e.energy.unwrap_or(0.0) + j);
        }
        e.power.add(g.power, g.interval);
        e.tx.add(g.tx, g.interval);
        e.rx.add(g.rx, g.interval);
        e.last_index = g.index;
        if g.model.is_some() {
            e.model.clone_from(&g.model);
        }
    }
    e
}

/// One `gpu_minutes` row as read back.
#[derive(Debug, Clone)]
struct GpuMinuteRow {
    file: String,
    minute: i64,
    uuid: String,
    index: i64,
    model: Option<String>,
    seconds: f64,
    samples: i64,
    util_mean: Option<f64>,
    util_max: Option<i64>,
    mem_mean: Option<f64>,
    fb_used_max: Option<i64>,
    fb_total: Option<i64>,
    energy_j: Option<f64>,
    power_mean: Option<f64>,
    tx_mean: Option<f64>,
    rx_mean: Option<f64>,
    held: bool,
    count: i64,
}

fn gpu_minute_rows(data: &Path) -> Vec<GpuMinuteRow> {
    let mut out = Vec::new();
    for f in files_under(&data.join("gpu_minutes")).into_iter().filter(|p| is_data_file(p)) {
        for b in read_batches(&f).expect("readable") {
            let (minute, index, samples) = (ints(&b, "minute"), ints(&b, "gpu_index"), ints(&b, "samples"));
            let (uuid, model) = (strings(&b, "gpu_uuid"), strings(&b, "gpu_model"));
            let seconds = floats(&b, "seconds");
            let (util_mean, util_max, mem_mean) = (
                floats(&b, "gpu_util_pct_mean"),
                ints(&b, "gpu_util_pct_max"),
                floats(&b, "mem_util_pct_mean"),
            );
            let (fb_used_max, fb_total) = (ints(&b, "fb_used_bytes_max"), ints(&b, "fb_total_bytes"));
            let (energy, power) = (floats(&b, "energy_j"), floats(&b, "power_mw_mean"));
            let (tx, rx) = (floats(&b, "pcie_tx_bytes_per_s_mean"), floats(&b, "pcie_rx_bytes_per_s_mean"));
            let (held, count) = (bools(&b, "proc_held"), ints(&b, "proc_count"));
            for i in 0..b.num_rows() {
                out.push(GpuMinuteRow {
                    file: file_name(&f),
                    minute: minute[i].expect("minute"),
                    uuid: uuid[i].clone().expect("uuid"),
                    index: index[i].expect("index"),
                    model: model[i].clone(),
                    seconds: seconds[i].expect("seconds"),
                    samples: samples[i].expect("samples"),
                    util_mean: util_mean[i],
                    util_max: util_max[i],
                    mem_mean: mem_mean[i],
                    fb_used_max: fb_used_max[i],
                    fb_total: fb_total[i],
                    energy_j: energy[i],
                    power_mean: power[i],
                    tx_mean: tx[i],
                    rx_mean: rx[i],
                    held: held[i],
                    count: count[i].expect("count"),
                });
            }
        }
    }
    out
}

fn procs_of_minute(rows: &[&RawProc]) -> ProcsOfMinute {
    let mut out: ProcsOfMinute = BTreeMap::new();
    for p in rows {
        let e = out.entry((p.pid, p.start)).or_insert(None);
        *e = max_opt(*e, p.used);
    }
    out
}

/// A GPU-minute is held when some process's highest used_mem_bytes in it is
/// above 0 or unknown.
fn held(procs: &ProcsOfMinute) -> bool {
    procs.values().any(|m| m.is_none_or(|m| m > 0))
}

#[test]
fn every_rollup_row_agrees_with_the_raw_rows_it_came_from() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // A rotation of 5 h 30 s closes files mid-minute at every other
    // boundary, so some GPU-minutes are split across two files.
    simulate(
        &data,
        &[
            "--gpus",
            "3",
            "--days",
            "1",
            "--start",
            "2026-11-01",
            "--seed",
            "11",
            "--interval",
            "10s",
            "--rotate",
            "18030s",
        ],
    );

    let gpus = raw_gpus(&data);
    let procs = raw_procs(&data);
    assert_eq!(gpus.len(), 3 * 8_640);
    assert!(!procs.is_empty(), "processes were simulated");
    let energy = sample_energy(&gpus);

    // Raw rows by (file, gpu, minute) and by (gpu, minute).
    let mut gpu_part: BTreeMap<(String, String, i64), Vec<&RawGpu>> = BTreeMap::new();
    let mut gpu_whole: BTreeMap<(String, i64), Vec<&RawGpu>> = BTreeMap::new();
    for g in &gpus {
        gpu_part.entry((g.file.clone(), g.uuid.clone(), minute(g.ts))).or_default().push(g);
        gpu_whole.entry((g.uuid.clone(), minute(g.ts))).or_default().push(g);
    }
    let mut proc_part: BTreeMap<(String, String, i64), Vec<&RawProc>> = BTreeMap::new();
    let mut proc_whole: BTreeMap<(String, i64), Vec<&RawProc>> = BTreeMap::new();
    for p in &procs {
        proc_part.entry((p.file.clone(), p.uuid.clone(), minute(p.ts))).or_default().push(p);
        proc_whole.entry((p.uuid.clone(), minute(p.ts))).or_default().push(p);
    }

    // 1. Each gpu_minutes row against the rows of the raw file of the same name.
    let rollups = gpu_minute_rows(&data);
    assert_eq!(rollups.len(), gpu_part.len(), "one row per GPU-minute per file");
    for r in &rollups {
        let key = (r.file.clone(), r.uuid.clone(), r.minute);
        let rows = gpu_part.get(&key).unwrap_or_else(|| panic!("no raw rows for {key:?}"));
        let e = expect_gpu(rows, &energy);
        let procs = procs_of_minute(proc_part.get(&key).map(Vec::as_slice).unwrap_or_default());
        let ctx = format!("{key:?}");
        assert_eq!(r.seconds, e.interval_ms as f64 / 1e3, "{ctx}");
        assert_eq!(r.samples, e.samples, "{ctx}");
        assert!(close_opt(r.util_mean, e.util.get()), "{ctx}: {:?} vs {:?}", r.util_mean, e.util.get());
        assert_eq!(r.util_max, e.util_max, "{ctx}");
        assert!(close_opt(r.mem_mean, e.mem.get()), "{ctx}");
        assert_eq!((r.fb_used_max, r.fb_total), (e.fb_used_max, e.fb_total), "{ctx}");
        assert!(close_opt(r.energy_j, e.energy), "{ctx}: {:?} vs {:?}", r.energy_j, e.energy);
        assert!(close_opt(r.power_mean, e.power.get()), "{ctx}");
        assert!(close_opt(r.tx_mean, e.tx.get()) && close_opt(r.rx_mean, e.rx.get()), "{ctx}");
        assert_eq!((r.index, &r.model), (e.last_index, &e.model), "{ctx}");
        assert_eq!((r.held, r.count), (held(&procs), procs.len() as i64), "{ctx}");
    }
    assert!(rollups.iter().any(|r| r.energy_j.is_some()), "energy was measured");
    assert!(rollups.iter().any(|r| r.held) && rollups.iter().any(|r| !r.held), "held and empty minutes");

    // 2. Aggregated by (gpu_uuid, minute) as the schema docs say, the
    //    rollups give what the raw rows give for the whole minute.
    let mut by_minute: BTreeMap<(String, i64), Vec<&GpuMinuteRow>> = BTreeMap::new();
    for r in &rollups {
        by_minute.entry((r.uuid.clone(), r.minute)).or_default().push(r);
    }
    assert_eq!(by_minute.len(), gpu_whole.len());
    let split = by_minute.values().filter(|parts| parts.len() > 1).count();
    assert!(split >= 3, "the test needs minutes split across files ({split})");
    for (key, parts) in &by_minute {
        let e = expect_gpu(&gpu_whole[key], &energy);
        let seconds: f64 = parts.iter().map(|p| p.seconds).sum();
        let weighted = |f: fn(&GpuMinuteRow) -> Option<f64>| {
            let w: Vec<_> = parts.iter().filter_map(|p| f(p).map(|v| (v, p.seconds))).collect();
            let total: f64 = w.iter().map(|(_, s)| s).sum();
            (total > 0.0).then(|| w.iter().map(|(v, s)| v * s).sum::<f64>() / total)
        };
        let energy_sum = parts
            .iter()
            .filter_map(|p| p.energy_j)
            .fold(None, |a: Option<f64>, v| Some(a.unwrap_or(0.0) + v));
        assert_eq!(seconds, e.interval_ms as f64 / 1e3, "{key:?}");
        assert_eq!(parts.iter().map(|p| p.samples).sum::<i64>(), e.samples, "{key:?}");
        assert!(close_opt(weighted(|p| p.util_mean), e.util.get()), "{key:?}");
        assert!(close_opt(weighted(|p| p.power_mean), e.power.get()), "{key:?}");
        assert!(close_opt(energy_sum, e.energy), "{key:?}: {energy_sum:?} vs {:?}", e.energy);
        assert_eq!(parts.iter().map(|p| p.util_max).max().flatten(), e.util_max, "{key:?}");
        let procs = procs_of_minute(proc_whole.get(key).map(Vec::as_slice).unwrap_or_default());
        assert_eq!(parts.iter().any(|p| p.held), held(&procs), "{key:?}");
    }

    // 3. Each proc_minutes row against its raw rows; and the distinct
    //    processes of a whole GPU-minute.
    // Per GPU-minute, the (pid, proc_start) of its proc_minutes rows.
    type Processes = BTreeSet<(i64, Option<i64>)>;
    let mut seen: BTreeMap<(String, i64), Processes> = BTreeMap::new();
    let mut n = 0usize;
    for f in files_under(&data.join("proc_minutes")).into_iter().filter(|p| is_data_file(p)) {
        for b in read_batches(&f).expect("readable") {
            let (m, pid, start, samples) =
                (ints(&b, "minute"), ints(&b, "pid"), ints(&b, "proc_start"), ints(&b, "samples"));
            let (uuid, comm, user) = (strings(&b, "gpu_uuid"), strings(&b, "comm"), strings(&b, "user"));
            let (seconds, used_mean, used_max) =
                (floats(&b, "seconds"), floats(&b, "used_mem_bytes_mean"), ints(&b, "used_mem_bytes_max"));
            let (sm_mean, mem_mean) = (floats(&b, "sm_util_pct_mean"), floats(&b, "mem_util_pct_mean"));
            for i in 0..b.num_rows() {
                n += 1;
                let key = (file_name(&f), uuid[i].clone().expect("uuid"), m[i].expect("minute"));
                let rows: Vec<&&RawProc> = proc_part[&key]
                    .iter()
                    .filter(|p| p.pid == pid[i].expect("pid") && p.start == start[i])
                    .collect();
                assert!(!rows.is_empty(), "{key:?} pid {:?}", pid[i]);
                let (mut used, mut sm, mut mem, mut max, mut ms) =
                    (Wmean::default(), Wmean::default(), Wmean::default(), None, 0);
                for p in &rows {
                    used.add(p.used, p.interval);
                    sm.add(p.sm, p.interval);
                    mem.add(p.mem, p.interval);
                    max = max_opt(max, p.used);
                    ms += p.interval;
                }
                let ctx = format!("{key:?} pid {:?}", pid[i]);
                assert_eq!(seconds[i], Some(ms as f64 / 1e3), "{ctx}");
                assert_eq!(samples[i], Some(rows.len() as i64), "{ctx}");
                assert!(close_opt(used_mean[i], used.get()) && used_max[i] == max, "{ctx}");
                assert!(close_opt(sm_mean[i], sm.get()) && close_opt(mem_mean[i], mem.get()), "{ctx}");
                let last = rows.iter().max_by_key(|p| p.ts).expect("a row");
                assert_eq!((&comm[i], &user[i]), (&last.comm, &last.user), "{ctx}");
                seen.entry((key.1, key.2)).or_default().insert((pid[i].expect("pid"), start[i]));
            }
        }
    }
    assert_eq!(
        n,
        proc_part.values().map(|rows| procs_of_minute(rows).len()).sum::<usize>(),
        "no process-minute missing"
    );
    for (key, rows) in &proc_whole {
        assert_eq!(seen[key].len(), procs_of_minute(rows).len(), "{key:?}");
    }
}

#[test]
fn rollup_files_are_compressed_sorted_and_say_so() {
    use parquet::basic::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(
        &data,
        &["--gpus", "2", "--days", "1", "--start", "2026-11-01", "--interval", "30s", "--rotate", "6h"],
    );
    for (table, keys) in [
        ("gpu_minutes", &["gpu_uuid", "minute"][..]),
        ("proc_minutes", &["gpu_uuid", "minute", "pid", "proc_start"]),
    ] {
        let files = files_under(&data.join(table));
        // One per 6-hour file (proc_minutes: those with processes).
        assert!(!files.is_empty() && files.len() <= 4, "{table}: {files:?}");
        for f in files {
            let reader = SerializedFileReader::new(File::open(&f).expect("open")).expect("parquet");
            let meta = reader.metadata();
            let kv = meta.file_metadata().key_value_metadata().expect("key-value metadata");
            assert!(kv.iter().any(|e| e.key == "apron.table" && e.value.as_deref() == Some(table)));
            for rg in meta.row_groups() {
                let sorting = rg.sorting_columns().expect("sorting columns");
                let names: Vec<String> =
                    sorting.iter().map(|s| rg.column(s.column_idx as usize).column_path().string()).collect();
                assert_eq!(names, keys, "{table}");
                assert!(rg.columns().iter().all(|c| matches!(c.compression(), Compression::ZSTD(_))));
            }
            assert!(is_sorted_by_keys(&f), "{}", f.display());
        }
    }
}

// ------------------------------------------------------------ compaction

/// Every row of `files`, each as one line of text, sorted: a multiset.
fn row_texts(files: &[PathBuf]) -> Result<Vec<String>, ParquetError> {
    let mut out = Vec::new();
    for f in files {
        for b in read_batches(f)? {
            for i in 0..b.num_rows() {
                let cells: Vec<String> = b
                    .columns()
                    .iter()
                    .map(|c| match c.data_type() {
                        _ if c.is_null(i) => "∅".to_owned(),
                        // Displaying a named time zone needs chrono-tz; the
                        // milliseconds say the same.
                        DataType::Timestamp(..) => {
                            c.as_primitive::<TimestampMillisecondType>().value(i).to_string()
                        }
                        _ => array_value_to_string(c, i).expect("displayable"),
                    })
                    .collect();
                out.push(cells.join("|"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The `host=` folders under every table's `date=` folders.
fn partitions(data: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for table in ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"] {
        for date in fs::read_dir(data.join(table)).expect("table folder").flatten() {
            for host in fs::read_dir(date.path()).expect("date folder").flatten() {
                if host.file_name().to_string_lossy().starts_with("host=") {
                    out.push(host.path());
                }
            }
        }
    }
    out.sort();
    out
}

fn listed(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> =
        fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.retain(|p| is_data_file(p));
    files.sort();
    Ok(files)
}

fn is_not_found(e: &ParquetError) -> bool {
    match e {
        ParquetError::External(inner) => {
            inner.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::NotFound)
        }
        _ => false,
    }
}

/// The sort key of a row: (gpu_uuid, ts or minute, pid, proc_start).
type Key = (String, i64, Option<i64>, Option<i64>);

/// The sort keys of every row of `files`, sorted (a multiset), reading
/// only the key columns, as a query that prunes columns does.
fn keys_of(files: &[PathBuf]) -> Result<Vec<Key>, ParquetError> {
    let mut out = Vec::new();
    for f in files {
        let file = File::open(f).map_err(|e| ParquetError::External(Box::new(e)))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
        let names = ["gpu_uuid", "ts", "minute", "pid", "proc_start"];
        let mask = parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), names);
        for b in builder.with_projection(mask).build()? {
            let b = b.map_err(|e| ParquetError::ArrowError(e.to_string()))?;
            let uuid = strings(&b, "gpu_uuid");
            let t = if b.column_by_name("ts").is_some() { ints(&b, "ts") } else { ints(&b, "minute") };
            let pid = b.column_by_name("pid").map(|_| ints(&b, "pid"));
            let start = b.column_by_name("proc_start").map(|_| ints(&b, "proc_start"));
            for i in 0..b.num_rows() {
                out.push((
                    uuid[i].clone().expect("uuid"),
                    t[i].expect("time"),
                    pid.as_ref().and_then(|p| p[i]),
                    start.as_ref().and_then(|s| s[i]),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Which folder on disk (device, inode, birth time) is at `dir` now.
fn folder_id(dir: &Path) -> (u64, u64, Option<std::time::SystemTime>) {
    let meta = fs::metadata(dir).expect("the partition folder is always there");
    (meta.dev(), meta.ino(), meta.created().ok())
}

/// What a reader sees of `dir` now, read as readers must while compaction
/// may swap the folder (as `apron` does): it lists the folder and reads
/// every file, and lists again from scratch when a listed file has gone or
/// when the folder at `dir` is another one after the listing than before
/// (a listing of the replaced folder can come back short: emptied by the
/// time it was read). Returns the row keys and how often it re-listed.
fn read_partition(dir: &Path) -> (Vec<Key>, usize) {
    read_partition_with(dir, || {})
}

/// [`read_partition`], calling `between` each time it has opened the
/// folder and before it reads its entries.
fn read_partition_with(dir: &Path, mut between: impl FnMut()) -> (Vec<Key>, usize) {
    let mut retries = 0;
    loop {
        let before = folder_id(dir);
        let opened = fs::read_dir(dir).expect("the partition folder is always there");
        between();
        // Reading a removed folder may also fail (`ENOENT`) rather than
        // come back empty: the same answer, list again.
        let Ok(mut files) = opened.map(|e| e.map(|e| e.path())).collect::<Result<Vec<_>, _>>() else {
            retries += 1;
            continue;
        };
        files.retain(|p| is_data_file(p));
        files.sort();
        if folder_id(dir) != before {
            retries += 1;
            continue;
        }
        match keys_of(&files) {
            Ok(keys) => return (keys, retries),
            Err(e) if is_not_found(&e) => retries += 1,
            Err(e) => panic!("{}: {e}", dir.display()),
        }
    }
}

fn is_sorted_by_keys(file: &Path) -> bool {
    let batches = read_batches(file).expect("readable");
    let mut prev: Option<(String, i64, i64, bool, i64)> = None;
    for b in &batches {
        let uuid = strings(b, "gpu_uuid");
        let t = if b.column_by_name("ts").is_some() { ints(b, "ts") } else { ints(b, "minute") };
        let pid = b.column_by_name("pid").map(|_| ints(b, "pid"));
        let start = b
            .column_by_name("proc_start")
            .filter(|_| b.column_by_name("minute").is_some())
            .map(|_| ints(b, "proc_start"));
        for i in 0..b.num_rows() {
            let s = start.as_ref().and_then(|s| s[i]);
            let key = (
                uuid[i].clone().expect("uuid"),
                t[i].expect("time"),
                pid.as_ref().and_then(|p| p[i]).unwrap_or(0),
                start.is_some() && s.is_none(), // a null start sorts last
                s.unwrap_or(0),
            );
            if prev.as_ref().is_some_and(|p| p > &key) {
                return false;
            }
            prev = Some(key);
        }
    }
    true
}

#[test]
fn compaction_leaves_one_sorted_file_per_partition_and_readers_never_see_a_row_twice() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    // Hourly files: 24 per (table, day, host); two hosts (8 + 2 GPUs).
    simulate(
        &data,
        &[
            "--gpus",
            "10",
            "--days",
            "2",
            "--start",
            "2026-11-01",
            "--seed",
            "5",
            "--interval",
            "10s",
            "--rotate",
            "1h",
        ],
    );
    let parts = partitions(&data);
    assert_eq!(parts.len(), 4 * 2 * 2);
    // The allocations' partitions of more than one file are compacted too
    // (a host whose GPUs nobody allocated some hours has fewer files).
    let alloc_parts: Vec<PathBuf> = fs::read_dir(data.join("alloc_minutes"))
        .expect("alloc_minutes")
        .flatten()
        .flat_map(|d| fs::read_dir(d.path()).expect("date folder").flatten().map(|h| h.path()))
        .collect();
    let alloc_merged = alloc_parts.iter().filter(|p| listed(p).expect("list").len() >= 2).count();
    assert!(alloc_merged >= 1, "{alloc_parts:?}");
    let before: Vec<Vec<String>> =
        parts.iter().map(|p| row_texts(&listed(p).expect("list")).expect("rows")).collect();
    for p in &parts {
        assert!(listed(p).expect("list").len() >= 2, "{} is not made of small files", p.display());
    }

    // Readers that keep listing and reading the partitions while the
    // compaction runs (each its share, so each partition is read often).
    let keys: Vec<Vec<Key>> =
        parts.iter().map(|p| keys_of(&listed(p).expect("list")).expect("keys")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let passes = Arc::new(AtomicUsize::new(0));
    const READERS: usize = 4;
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (stop, passes) = (stop.clone(), passes.clone());
            let mine: Vec<(PathBuf, Vec<Key>)> = parts
                .iter()
                .zip(&keys)
                .skip(r)
                .step_by(READERS)
                .map(|(p, k)| (p.clone(), k.clone()))
                .collect();
            std::thread::spawn(move || {
                let mut retries = 0;
                while !stop.load(Ordering::Relaxed) {
                    for (p, want) in &mine {
                        let (got, r) = read_partition(p);
                        retries += r;
                        assert!(
                            got == *want,
                            "{}: a reader saw {} rows, not the {} there are",
                            p.display(),
                            got.len(),
                            want.len()
                        );
                    }
                    passes.fetch_add(1, Ordering::Relaxed);
                }
                retries
            })
        })
        .collect();
    while passes.load(Ordering::Relaxed) < READERS {
        sleep(Duration::from_millis(5));
    }
    let passes_before = passes.load(Ordering::Relaxed);
    let out = compact(&data, &["--no-retention"]);
    let passes_during = passes.load(Ordering::Relaxed) - passes_before;
    sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let retries: usize =
        readers.into_iter().map(|r| r.join().expect("the readers saw every row exactly once")).sum();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}{stdout}", String::from_utf8_lossy(&out.stderr));
    eprintln!("readers: {passes_during} passes while compacting, {retries} re-lists after a swap");

    // What it printed: one line per merged partition, then a summary.
    let merged = |l: &&str| l.starts_with("compacted ") && !l.contains("alloc_minutes/");
    assert_eq!(stdout.lines().filter(merged).count(), parts.len(), "{stdout}");
    let summary =
        format!("{} partitions compacted, 0 expired partitions removed", parts.len() + alloc_merged);
    assert!(stdout.contains(&summary), "{stdout}");
    for p in &alloc_parts {
        assert_eq!(listed(p).expect("list").len(), 1, "{} compacted into one file", p.display());
    }

    for (p, want) in parts.iter().zip(&before) {
        let files = listed(p).expect("list");
        assert_eq!(files.len(), 1, "{}: {files:?}", p.display());
        assert_eq!(&row_texts(&files).expect("rows"), want, "{}: the same rows", p.display());
        assert!(is_sorted_by_keys(&files[0]), "{} is sorted", files[0].display());
    }
    // No staging or temporary folder left, and no hidden file beside the data.
    for f in files_under(&data) {
        let rel = f.strip_prefix(&data).expect("under data");
        let hidden = rel.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
        assert!(!hidden || rel == Path::new(".compact.lock"), "leftover {}", rel.display());
    }

    // Again: nothing left to merge.
    let out = compact(&data, &["--no-retention"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 partitions compacted"));
}

/// The race behind a reader that once saw a compacted day as 0 rows: it
/// opened a partition folder, `apron-recorder compact` swapped that folder
/// for the merged one and removed the old one, and only then did the
/// reader read the folder it had opened: it read empty. A reader must see
/// that the folder at the path is another one now, and list again.
#[test]
fn a_reader_that_opened_a_partition_before_compaction_swapped_it_reads_every_row() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    simulate(
        &data,
        &[
            "--gpus",
            "2",
            "--days",
            "1",
            "--start",
            "2026-11-01",
            "--seed",
            "3",
            "--interval",
            "10s",
            "--rotate",
            "2h",
        ],
    );
    let parts = partitions(&data);
    let at = |table: &str| {
        parts.iter().find(|p| p.starts_with(data.join(table))).expect("a partition of the table").clone()
    };
    let (read, other) = (at("gpu_samples"), at("proc_samples"));
    let want = keys_of(&listed(&read).expect("list")).expect("keys");
    assert!(listed(&read).expect("list").len() >= 2, "several files to merge");
    assert!(!want.is_empty());

    // Another partition, opened now and read after the compaction: what a
    // reader that does not look again gets.
    let opened_before = fs::read_dir(&other).expect("open");
    let mut runs = 0;
    let (got, retries) = read_partition_with(&read, || {
        if runs == 0 {
            let out = compact(&data, &["--no-retention"]);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        runs += 1;
    });
    let stale: Vec<_> = opened_before.filter_map(Result::ok).map(|e| e.path()).collect();
    assert!(stale.is_empty(), "the replaced folder, removed, reads empty: {stale:?}");
    assert_eq!(got.len(), want.len(), "{}: every row, once", read.display());
    assert_eq!(got, want);
    assert_eq!((runs, retries), (2, 1), "listed twice: the first listing read the replaced folder");
    assert_eq!(listed(&read).expect("list").len(), 1, "compacted");
}

// ------------------------------------------------------------- retention

fn dates(data: &Path, table: &str, host: &str) -> Vec<i64> {
    let today = Utc::now().date_naive();
    let mut out: Vec<i64> = fs::read_dir(data.join(table))
        .map(|rd| rd.flatten().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.path().join(format!("host={host}")).is_dir())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let d = chrono::NaiveDate::parse_from_str(name.strip_prefix("date=")?, "%Y-%m-%d").ok()?;
            Some((today - d).num_days())
        })
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn retention_removes_whole_expired_days_raw_and_rollups_apart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let today = Utc::now().date_naive();
    let ages = [0u64, 1, 2, 3, 5, 6, 40];
    for table in ["gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"] {
        for age in ages {
            for host in ["a", "b"] {
                let d = today - Days::new(age);
                let dir = data
                    .join(table)
                    .join(format!("date={}", d.format("%Y-%m-%d")))
                    .join(format!("host={host}"));
                fs::create_dir_all(&dir).expect("mkdir");
                fs::write(dir.join("x.parquet"), b"not read by retention").expect("write");
            }
        }
    }
    let all: Vec<i64> = ages.iter().map(|&a| a as i64).collect();

    // Nothing removed without retention.
    let out = compact(&data, &["--no-retention"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(dates(&data, "gpu_samples", "a"), all);

    // Host `a` only: raw data kept 2 days before today, rollups 5.
    let out = compact(&data, &["--host", "a", "--retain-raw", "2d", "--retain-rollups", "5d"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("0 partitions compacted, 12 expired partitions removed"), "{stdout}");
    for table in ["gpu_samples", "proc_samples"] {
        assert_eq!(dates(&data, table, "a"), [0, 1, 2], "{table}");
        assert_eq!(dates(&data, table, "b"), all, "{table}: another host's days stay");
    }
    for table in ["gpu_minutes", "proc_minutes"] {
        assert_eq!(dates(&data, table, "a"), [0, 1, 2, 3, 5], "{table}");
    }

    // Every host, the default retention (90 days raw, 3 years rollups):
    // nothing here is that old but day 40 stays too.
    let out = compact(&data, &[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 expired partitions removed"));
    // Every host with a short retention: whole day folders go.
    let out = compact(&data, &["--retain-raw", "1d", "--retain-rollups", "3d"]);
    assert!(out.status.success());
    for table in ["gpu_samples", "proc_samples"] {
        assert_eq!(dates(&data, table, "b"), [0, 1], "{table}");
        let left = fs::read_dir(data.join(table)).expect("list").count();
        assert_eq!(left, 2, "{table}: expired day folders are gone, not left empty");
    }
    assert_eq!(dates(&data, "gpu_minutes", "b"), [0, 1, 2, 3]);

    // A retention under a day is a usage mistake: one line, exit 2.
    let out = compact(&data, &["--retain-raw", "1h"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("at least 1d"), "{err}");
}

// ------------------------------------------------------ live recorder

#[test]
fn the_live_recorder_compacts_its_closed_days_when_it_starts() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let start = Utc::now().date_naive() - Days::new(3);
    let start = start.format("%Y-%m-%d").to_string();
    // gpu-node01 is the simulated fleet's first host.
    simulate(
        &data,
        &["--gpus", "2", "--days", "2", "--start", &start, "--interval", "30s", "--rotate", "2h"],
    );
    let parts = partitions(&data);
    let before: Vec<Vec<String>> =
        parts.iter().map(|p| row_texts(&listed(p).expect("list")).expect("rows")).collect();

    let mut child = Command::new(bin("apron-recorder"))
        .args(["--source", "sim", "--host", "gpu-node01", "--sim-gpus", "2", "--interval", "200ms", "--data"])
        .arg(&data)
        .env("APRON_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the recorder starts");
    let t0 = Instant::now();
    while parts.iter().any(|p| listed(p).map_or(true, |f| f.len() != 1)) {
        if t0.elapsed() > Duration::from_secs(60) || child.try_wait().expect("try_wait").is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("closed days not compacted: {}", String::from_utf8_lossy(&out.stderr));
        }
        sleep(Duration::from_millis(50));
    }
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().expect("output");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (p, want) in parts.iter().zip(&before) {
        assert_eq!(&row_texts(&listed(p).expect("list")).expect("rows"), want, "{}", p.display());
    }
}
