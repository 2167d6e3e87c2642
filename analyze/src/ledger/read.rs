//! Reading one day of the rollups for the ledger: the rows of
//! `queries/ledger_gpu_minutes.sql`, `queries/ledger_proc_minutes.sql` and
//! `queries/ledger_alloc_minutes.sql`
//! through the session (so the WAL's newest rows and the minutes derived
//! from raw samples are in, as in every other query), turned into plain
//! rows with their text interned ([`Names`]).

use crate::ledger::map::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArrayType, StringViewArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Float64Type, Int32Type, Int64Type, TimeUnit, TimestampMillisecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::prelude::{DataFrame, col, lit};

use crate::error::{Error, SessionError};
use crate::session::Session;
use crate::session::queries;

/// Every text value the ledger has met, each kept once and named by its
/// number: GPU UUIDs, hosts, models, users, teams, command names.
#[derive(Debug, Default)]
pub struct Names {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    /// The number of `name`, given it on first sight.
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.ids.insert(name.to_owned(), id);
        self.names.push(name.to_owned());
        id
    }

    /// The text numbered `id`.
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }

    /// Every text, in number order (the values of a dictionary column).
    pub fn all(&self) -> &[String] {
        &self.names
    }

    /// Whether `a` sorts after `b` as text.
    pub fn greater(&self, a: u32, b: u32) -> bool {
        self.name(a) > self.name(b)
    }
}

/// One `gpu_minutes` row (a GPU-minute, or the part of one a file holds).
#[derive(Debug, Clone, Copy)]
pub struct GpuPart {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// Its host (`host`), as an interned id in [`Names`].
    pub host: u32,
    /// Its NVML index (`gpu_index`).
    pub gpu_index: i32,
    /// Its model (`gpu_model`), as an interned id in [`Names`]; `None`: unknown.
    pub gpu_model: Option<u32>,
    /// Recorded seconds (`seconds`; s).
    pub seconds: f64,
    /// Mean GPU utilization (`gpu_util_pct_mean`; %; `None`: unknown).
    pub gpu_util_pct_mean: Option<f64>,
    /// Mean SM activity, GPM (`sm_active_pct_mean`; %; `None`: unknown).
    pub sm_active_pct_mean: Option<f64>,
    /// Energy drawn (`energy_j`; J; `None`: unknown).
    pub energy_j: Option<f64>,
    /// Mean power (`power_mw_mean`; mW; `None`: unknown).
    pub power_mw_mean: Option<f64>,
    /// Whether some process held memory on the GPU (`proc_held`; null read as false).
    pub proc_held: bool,
    /// MIG: an instance's parent GPU (`parent_gpu_uuid`), as an interned id in [`Names`]; `None` otherwise.
    pub parent_gpu_uuid: Option<u32>,
    /// MIG: an instance's profile (`mig_profile`), as an interned id in [`Names`]; `None` otherwise.
    pub mig_profile: Option<u32>,
    /// MIG: an instance's slices of its parent's (`mig_slices`); `None` otherwise.
    pub mig_slices: Option<i32>,
    /// MIG: the whole GPU's slices (`mig_total_slices`); `None` for a GPU not partitioned.
    pub mig_total_slices: Option<i32>,
    /// Mean PCIe traffic out of the GPU (`pcie_tx_bytes_per_s_mean`; bytes/s; `None`: unknown).
    pub pcie_tx_bytes_per_s_mean: Option<f64>,
    /// Mean PCIe traffic into the GPU (`pcie_rx_bytes_per_s_mean`; bytes/s; `None`: unknown).
    pub pcie_rx_bytes_per_s_mean: Option<f64>,
    /// The GPU's memory (`fb_total_bytes`; bytes; `None`: unknown).
    pub fb_total_bytes: Option<i64>,
    /// Mean tensor pipe activity, GPM (`tensor_active_pct_mean`; %; `None`: unknown).
    pub tensor_active_pct_mean: Option<f64>,
    /// Mean DRAM activity, GPM (`dram_active_pct_mean`; %; `None`: unknown).
    pub dram_active_pct_mean: Option<f64>,
}

/// One `proc_minutes` row.
#[derive(Debug, Clone, Copy)]
pub struct ProcPart {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// The process id (`pid`).
    pub pid: i32,
    /// The process's start (`proc_start`; ms since the epoch, UTC; `None`: unknown).
    pub proc_start: Option<i64>,
    /// Seconds it was seen (`seconds`; s).
    pub seconds: f64,
    /// Mean used memory (`used_mem_bytes_mean`; bytes; `None`: unknown).
    pub used_mem_bytes_mean: Option<f64>,
    /// Most used memory (`used_mem_bytes_max`; bytes; `None`: unknown).
    pub used_mem_bytes_max: Option<i64>,
    /// Its own SM utilization (%), where NVML gave it.
    pub sm_util_pct_mean: Option<f64>,
    /// Its command name (`comm`), as an interned id in [`Names`]; `None`: unknown.
    pub comm: Option<u32>,
    /// Its user name (`user`), as an interned id in [`Names`]; `None`: unknown.
    pub user: Option<u32>,
    /// Its uid (`uid`; `None`: unknown).
    pub uid: Option<i64>,
    /// Its Kubernetes namespace (`k8s_namespace`), as an interned id in [`Names`]; `None`: none.
    pub k8s_namespace: Option<u32>,
    /// Its pod's labels (`k8s_labels`), as an interned id in [`Names`]; `None`: none.
    pub k8s_labels: Option<u32>,
    /// Its Slurm account (`slurm_account`), as an interned id in [`Names`]; `None`: none.
    pub slurm_account: Option<u32>,
    /// Its host (`host`), as an interned id in [`Names`].
    pub host: u32,
    /// Its Slurm job (`slurm_job_id`), as an interned id in [`Names`]; `None`: none.
    pub slurm_job_id: Option<u32>,
    /// Its pod's name (`k8s_pod_name`), as an interned id in [`Names`]; `None`: none.
    pub k8s_pod_name: Option<u32>,
    /// Its container (`container_id`), as an interned id in [`Names`]; `None`: none.
    pub container_id: Option<u32>,
}

/// One `alloc_minutes` row: a GPU allocated to a pod or a Slurm job.
#[derive(Debug, Clone, Copy)]
pub struct AllocPart {
    /// The GPU (`gpu_uuid`), as its interned id in [`Names`].
    pub gpu_uuid: u32,
    /// Start of the UTC minute (`minute`; ms since the epoch).
    pub minute: i64,
    /// Where the allocation was read (`source`), as an interned id in [`Names`].
    pub source: u32,
    /// The pod's namespace (`k8s_namespace`), as an interned id in [`Names`]; `None`: none.
    pub k8s_namespace: Option<u32>,
    /// The pod's name (`k8s_pod_name`), as an interned id in [`Names`]; `None`: none.
    pub k8s_pod_name: Option<u32>,
    /// The container's name (`k8s_container`), as an interned id in [`Names`]; `None`: none.
    pub k8s_container: Option<u32>,
    /// The pod's labels (`k8s_labels`), as an interned id in [`Names`]; `None`: none.
    pub k8s_labels: Option<u32>,
    /// The Slurm job's id (`slurm_job_id`), as an interned id in [`Names`]; `None`: none.
    pub slurm_job_id: Option<u32>,
    /// The Slurm job's account (`slurm_account`), as an interned id in [`Names`]; `None`: none.
    pub slurm_account: Option<u32>,
    /// The Slurm job's user (`user`), as an interned id in [`Names`]; `None`: none.
    pub user: Option<u32>,
    /// Seconds the allocation was recorded (`seconds`; s).
    pub seconds: f64,
}

/// One day's rows as the session gives them.
#[derive(Debug, Default)]
pub struct Day {
    /// The `gpu_minutes` rows (`queries/ledger_gpu_minutes.sql`), in file order.
    pub gpus: Vec<RecordBatch>,
    /// The `proc_minutes` rows (`queries/ledger_proc_minutes.sql`), in file order.
    pub procs: Vec<RecordBatch>,
    /// The `alloc_minutes` rows (`queries/ledger_alloc_minutes.sql`), in file order.
    pub allocs: Vec<RecordBatch>,
}

/// A stretch of a day and some of its hosts, read at once.
#[derive(Debug, Clone)]
pub struct Slice {
    /// From (inclusive), ms since the epoch, within `date`.
    pub start_ms: i64,
    /// To (exclusive), ms since the epoch.
    pub end_ms: i64,
    /// The day, in days since the epoch.
    pub date: i32,
    /// The hosts read.
    pub hosts: Hosts,
}

/// The hosts a [`Slice`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    /// These hosts, sorted, each read as `host = H`: the engine then lists
    /// the host's folder of the day alone (`date=D/host=H/`), where a range
    /// of hosts has it list every host folder of the day, for every slice
    /// of the day (at 4,096 GPUs, 64 slices a day of 512 folders each).
    Named(Vec<String>),
    /// The hosts from the first (inclusive) to the second (exclusive), read
    /// through one listing of the whole day.
    Range(String, String),
}

impl Hosts {
    /// Whether every one of `hosts` can be read as [`Hosts::Named`]: a name
    /// the recorder writes, which the engine reads as its folder is named
    /// (not one another tool wrote percent-encoded, say).
    pub fn all_nameable<S: AsRef<str>>(hosts: &[S]) -> bool {
        hosts.iter().all(|h| apron_schemas::paths::validate_host(h.as_ref()).is_ok())
    }

    /// `host` alone: by name where it can be, else as the range from it to
    /// the first name after it.
    pub fn one(host: &str) -> Hosts {
        if Hosts::all_nameable(&[host]) {
            Hosts::Named(vec![host.to_owned()])
        } else {
            Hosts::Range(host.to_owned(), name_after(host))
        }
    }

    /// The range of host names the slice's hosts lie in: (first, the first after).
    fn bounds(&self) -> (String, String) {
        match self {
            Hosts::Named(hosts) => match (hosts.first(), hosts.last()) {
                (Some(first), Some(last)) => (first.clone(), name_after(last)),
                _ => (String::new(), String::new()),
            },
            Hosts::Range(first, end) => (first.clone(), end.clone()),
        }
    }
}

/// The first name that sorts after `name`: the end of a range holding
/// `name` and nothing after it.
fn name_after(name: &str) -> String {
    format!("{name}\0")
}

/// Reads one slice's rows.
pub async fn day(session: &Session, slice: &Slice) -> Result<Day, Error> {
    let (first_host, end_host) = slice.hosts.bounds();
    let params = || {
        vec![
            ScalarValue::TimestampMillisecond(Some(slice.start_ms), Some("UTC".into())),
            ScalarValue::TimestampMillisecond(Some(slice.end_ms), Some("UTC".into())),
            ScalarValue::Date32(Some(slice.date)),
            ScalarValue::Utf8(Some(first_host.clone())),
            ScalarValue::Utf8(Some(end_host.clone())),
        ]
    };
    let has = |name: &str| session.tables().iter().any(|t| t.name() == name);
    let read = |table: &'static str, sql: &'static str| {
        let params = params();
        async move {
            if !has(table) || matches!(&slice.hosts, Hosts::Named(h) if h.is_empty()) {
                return Ok(Vec::new());
            }
            let df = session.ledger_sql_with_params(sql, params).await?;
            let df = match &slice.hosts {
                Hosts::Named(hosts) => one_host_each(df, hosts)?,
                Hosts::Range(..) => df,
            };
            // In file order: a gpu_minutes file's rows are already by GPU
            // and minute, as the pass takes them.
            session.collect_in_order(df).await
        }
    };
    // The tables are read at once.
    let (gpus, procs, allocs) = futures::try_join!(
        read("gpu_minutes", queries::LEDGER_GPU_MINUTES),
        read("proc_minutes", queries::LEDGER_PROC_MINUTES),
        read("alloc_minutes", queries::LEDGER_ALLOC_MINUTES)
    )?;
    Ok(Day { gpus, procs, allocs })
}

/// `df`'s rows of `hosts` (at least one), host after host: a branch per
/// host narrowed by `host = H`, so that each lists its own folder.
fn one_host_each(df: DataFrame, hosts: &[String]) -> Result<DataFrame, Error> {
    let branch = |host: &String| df.clone().filter(col("host").eq(lit(host.as_str())));
    let narrowed = hosts.iter().try_fold(None::<DataFrame>, |acc, host| {
        let one = branch(host)?;
        match acc {
            None => Ok::<_, DataFusionError>(Some(one)),
            Some(acc) => Ok(Some(acc.union(one)?)),
        }
    });
    match narrowed {
        Ok(Some(df)) => Ok(df),
        Ok(None) => Ok(df),
        Err(source) => Err(SessionError::Execute { source }.into()),
    }
}

impl Day {
    /// The rows as plain rows into `gpus`, `procs` and `allocs` (emptied
    /// first), their text interned in `names`.
    pub fn parts(
        &self,
        names: &mut Names,
        gpus: &mut Vec<GpuPart>,
        procs: &mut Vec<ProcPart>,
        allocs: &mut Vec<AllocPart>,
    ) -> Result<(), Error> {
        gpus.clear();
        for batch in &self.gpus {
            gpu_rows(batch, names, gpus).map_err(unreadable)?;
        }
        procs.clear();
        for batch in &self.procs {
            proc_rows(batch, names, procs).map_err(unreadable)?;
        }
        allocs.clear();
        for batch in &self.allocs {
            alloc_rows(batch, names, allocs).map_err(unreadable)?;
        }
        Ok(())
    }
}

fn unreadable(source: ArrowError) -> Error {
    SessionError::Execute { source: source.into() }.into()
}

fn column(batch: &RecordBatch, name: &str, to: &DataType) -> Result<ArrayRef, ArrowError> {
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| ArrowError::SchemaError(format!("the ledger's query has no column {name}")))?;
    if column.data_type() == to { Ok(Arc::clone(column)) } else { cast(column, to) }
}

/// A text column, as the engine gives it.
fn text(batch: &RecordBatch, name: &str) -> Result<ArrayRef, ArrowError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| ArrowError::SchemaError(format!("the ledger's query has no column {name}")))
}

fn float(batch: &RecordBatch, name: &str) -> Result<Float64Array, ArrowError> {
    Ok(column(batch, name, &DataType::Float64)?.as_primitive::<Float64Type>().clone())
}

fn int32(batch: &RecordBatch, name: &str) -> Result<Int32Array, ArrowError> {
    Ok(column(batch, name, &DataType::Int32)?.as_primitive::<Int32Type>().clone())
}

fn int64(batch: &RecordBatch, name: &str) -> Result<Int64Array, ArrowError> {
    Ok(column(batch, name, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

fn millis(batch: &RecordBatch, name: &str) -> Result<Int64Array, ArrowError> {
    let ts = column(batch, name, &DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())))?;
    let ts = ts.as_primitive::<TimestampMillisecondType>();
    Ok(Int64Array::new(ts.values().clone(), ts.nulls().cloned()))
}

fn boolean(batch: &RecordBatch, name: &str) -> Result<BooleanArray, ArrowError> {
    Ok(column(batch, name, &DataType::Boolean)?.as_boolean().clone())
}

/// The numbers of a text column's values, read as the engine gives them
/// (plain, view or dictionary: partition columns come as dictionaries):
/// the rows of a file repeat a value run after run, so each run is looked
/// up once, and a dictionary's values once each.
fn ids(a: &ArrayRef, names: &mut Names) -> Result<Vec<Option<u32>>, ArrowError> {
    match a.data_type() {
        DataType::Utf8 => Ok(runs(a.as_string::<i32>(), names)),
        DataType::LargeUtf8 => Ok(runs(a.as_string::<i64>(), names)),
        DataType::Utf8View => Ok(view_runs(a.as_string_view(), names)),
        DataType::Dictionary(_, _) => {
            let dict = a.as_any_dictionary();
            let values = ids(&cast(dict.values(), &DataType::Utf8)?, names)?;
            let keys = cast(dict.keys(), &DataType::Int64)?;
            let keys = keys.as_primitive::<Int64Type>();
            Ok((0..a.len())
                .map(|i| {
                    let key = usize::try_from(keys.value(i)).ok()?;
                    (a.is_valid(i) && keys.is_valid(i)).then(|| values.get(key).copied().flatten()).flatten()
                })
                .collect())
        }
        _ => ids(&cast(a, &DataType::Utf8)?, names),
    }
}

fn runs<'a, A: StringArrayType<'a>>(a: A, names: &mut Names) -> Vec<Option<u32>> {
    let mut out = Vec::with_capacity(a.len());
    let mut last: Option<(&str, u32)> = None;
    for i in 0..a.len() {
        if a.is_null(i) {
            out.push(None);
            continue;
        }
        let value = a.value(i);
        let id = match last {
            Some((v, id)) if v == value => id,
            _ => names.id(value),
        };
        last = Some((value, id));
        out.push(Some(id));
    }
    out
}

/// [`runs`] of a view array: a row whose view equals the row before's
/// (the same short text, or the same place in the same buffer, as the
/// rows decoded from one dictionary page are) takes its number without
/// reading the text.
fn view_runs(a: &StringViewArray, names: &mut Names) -> Vec<Option<u32>> {
    let views = a.views();
    let mut out = Vec::with_capacity(a.len());
    let mut last: Option<(u128, u32)> = None;
    for (i, &view) in views.iter().enumerate() {
        if a.is_null(i) {
            out.push(None);
            continue;
        }
        let id = match last {
            Some((v, id)) if v == view => id,
            _ => names.id(a.value(i)),
        };
        last = Some((view, id));
        out.push(Some(id));
    }
    out
}

fn opt<A: Array, T>(a: &A, i: usize, mut value: impl FnMut(usize) -> T) -> Option<T> {
    a.is_valid(i).then(|| value(i))
}

fn gpu_rows(batch: &RecordBatch, names: &mut Names, out: &mut Vec<GpuPart>) -> Result<(), ArrowError> {
    let (uuid, minute, host) = (text(batch, "gpu_uuid")?, millis(batch, "minute")?, text(batch, "host")?);
    let (index, model, seconds) =
        (int32(batch, "gpu_index")?, text(batch, "gpu_model")?, float(batch, "seconds")?);
    let (util, sm) = (float(batch, "gpu_util_pct_mean")?, float(batch, "sm_active_pct_mean")?);
    let (energy, power) = (float(batch, "energy_j")?, float(batch, "power_mw_mean")?);
    let held = boolean(batch, "proc_held")?;
    let (parent, profile) = (text(batch, "parent_gpu_uuid")?, text(batch, "mig_profile")?);
    let (slices, total_slices) = (int32(batch, "mig_slices")?, int32(batch, "mig_total_slices")?);
    let (pcie_tx, pcie_rx) =
        (float(batch, "pcie_tx_bytes_per_s_mean")?, float(batch, "pcie_rx_bytes_per_s_mean")?);
    let (uuid, host, model) = (ids(&uuid, names)?, ids(&host, names)?, ids(&model, names)?);
    let (parent, profile) = (ids(&parent, names)?, ids(&profile, names)?);
    let fb_total = int64(batch, "fb_total_bytes")?;
    let (tensor, dram) = (float(batch, "tensor_active_pct_mean")?, float(batch, "dram_active_pct_mean")?);
    out.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        out.push(GpuPart {
            gpu_uuid: uuid[i].unwrap_or_default(),
            minute: minute.value(i),
            host: host[i].unwrap_or_default(),
            gpu_index: index.value(i),
            gpu_model: model[i],
            seconds: seconds.value(i),
            gpu_util_pct_mean: opt(&util, i, |i| util.value(i)),
            sm_active_pct_mean: opt(&sm, i, |i| sm.value(i)),
            energy_j: opt(&energy, i, |i| energy.value(i)),
            power_mw_mean: opt(&power, i, |i| power.value(i)),
            proc_held: held.is_valid(i) && held.value(i),
            parent_gpu_uuid: parent[i],
            mig_profile: profile[i],
            mig_slices: opt(&slices, i, |i| slices.value(i)),
            mig_total_slices: opt(&total_slices, i, |i| total_slices.value(i)),
            pcie_tx_bytes_per_s_mean: opt(&pcie_tx, i, |i| pcie_tx.value(i)),
            pcie_rx_bytes_per_s_mean: opt(&pcie_rx, i, |i| pcie_rx.value(i)),
            fb_total_bytes: opt(&fb_total, i, |i| fb_total.value(i)),
            tensor_active_pct_mean: opt(&tensor, i, |i| tensor.value(i)),
            dram_active_pct_mean: opt(&dram, i, |i| dram.value(i)),
        });
    }
    Ok(())
}

fn proc_rows(batch: &RecordBatch, names: &mut Names, out: &mut Vec<ProcPart>) -> Result<(), ArrowError> {
    let (uuid, minute, pid) = (text(batch, "gpu_uuid")?, millis(batch, "minute")?, int32(batch, "pid")?);
    let (start, seconds) = (millis(batch, "proc_start")?, float(batch, "seconds")?);
    let (mem_mean, mem_max) = (float(batch, "used_mem_bytes_mean")?, int64(batch, "used_mem_bytes_max")?);
    let sm_mean = float(batch, "sm_util_pct_mean")?;
    let (comm, user, uid) = (text(batch, "comm")?, text(batch, "user")?, int64(batch, "uid")?);
    let (namespace, account) = (text(batch, "k8s_namespace")?, text(batch, "slurm_account")?);
    let (uuid, comm, user) = (ids(&uuid, names)?, ids(&comm, names)?, ids(&user, names)?);
    let (namespace, account) = (ids(&namespace, names)?, ids(&account, names)?);
    let labels = text(batch, "k8s_labels")?;
    let labels = ids(&labels, names)?;
    let (host, job) = (ids(&text(batch, "host")?, names)?, ids(&text(batch, "slurm_job_id")?, names)?);
    let (pod, container) =
        (ids(&text(batch, "k8s_pod_name")?, names)?, ids(&text(batch, "container_id")?, names)?);
    out.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        out.push(ProcPart {
            gpu_uuid: uuid[i].unwrap_or_default(),
            minute: minute.value(i),
            pid: pid.value(i),
            proc_start: opt(&start, i, |i| start.value(i)),
            seconds: seconds.value(i),
            used_mem_bytes_mean: opt(&mem_mean, i, |i| mem_mean.value(i)),
            used_mem_bytes_max: opt(&mem_max, i, |i| mem_max.value(i)),
            sm_util_pct_mean: opt(&sm_mean, i, |i| sm_mean.value(i)),
            comm: comm[i],
            user: user[i],
            uid: opt(&uid, i, |i| uid.value(i)),
            k8s_namespace: namespace[i],
            k8s_labels: labels[i],
            slurm_account: account[i],
            host: host[i].unwrap_or_default(),
            slurm_job_id: job[i],
            k8s_pod_name: pod[i],
            container_id: container[i],
        });
    }
    Ok(())
}

fn alloc_rows(batch: &RecordBatch, names: &mut Names, out: &mut Vec<AllocPart>) -> Result<(), ArrowError> {
    let (uuid, minute, seconds) =
        (text(batch, "gpu_uuid")?, millis(batch, "minute")?, float(batch, "seconds")?);
    let (source, namespace, pod) =
        (text(batch, "source")?, text(batch, "k8s_namespace")?, text(batch, "k8s_pod_name")?);
    let (container, job) = (text(batch, "k8s_container")?, text(batch, "slurm_job_id")?);
    let (account, user) = (text(batch, "slurm_account")?, text(batch, "user")?);
    let (uuid, source, namespace, pod) =
        (ids(&uuid, names)?, ids(&source, names)?, ids(&namespace, names)?, ids(&pod, names)?);
    let (container, job) = (ids(&container, names)?, ids(&job, names)?);
    let labels = text(batch, "k8s_labels")?;
    let labels = ids(&labels, names)?;
    let (account, user) = (ids(&account, names)?, ids(&user, names)?);
    out.reserve(batch.num_rows());
    for i in 0..batch.num_rows() {
        out.push(AllocPart {
            gpu_uuid: uuid[i].unwrap_or_default(),
            minute: minute.value(i),
            source: source[i].unwrap_or_default(),
            k8s_namespace: namespace[i],
            k8s_pod_name: pod[i],
            k8s_container: container[i],
            k8s_labels: labels[i],
            slurm_job_id: job[i],
            slurm_account: account[i],
            user: user[i],
            seconds: seconds.value(i),
        });
    }
    Ok(())
}
