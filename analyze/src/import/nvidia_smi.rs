//! The CSV `nvidia-smi --query-gpu=… --format=csv` writes (with or without
//! `nounits`; with `noheader` given the column list), into `gpu_samples`
//! rows; and the CSV of `--query-compute-apps=…`, recognised by its `pid`
//! column, into `proc_samples` rows.
//!
//! Columns are matched by name (`utilization.gpu [%]`: the name before the
//! bracket, any case); columns apron has no place for (`pci.bus_id`,
//! `driver_version`, …) are ignored. Timestamps (`2024/08/27 10:00:00.123`)
//! are the node's local time, read in the zone given (`--tz`, UTC by
//! default); one with an offset (`2025-09-08T17:26:50+08:00`, as wrappers
//! stamp each cycle) or Unix seconds (`1764189075`, as `date +%s` prepends
//! them) is an instant of its own, whatever `--tz` says. A header line repeated in the middle (logs of several runs
//! appended to one file) is skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use apron_schemas::{GpuSample, ProcIdentity, ProcSample, Text};
use chrono::{NaiveDateTime, TimeZone};
use chrono_tz::Tz;

use super::ranges::{self, Range, TextLimit};
use super::stream::{self, At, Emit, Row, Scan};
use super::units::{self, Quantity};
use super::{HostRows, ImportError, csv_error, open_csv, seek_csv, synthetic_uuid, synthetic_uuid_of};

/// How to read the file.
#[derive(Debug, Clone)]
pub struct Options {
    /// The host the file was logged on (the `host` partition).
    pub host: String,
    /// The zone of the file's timestamps.
    pub tz: Tz,
    /// The columns of a file without a header line (`noheader`), as given
    /// to `--query-gpu` or `--query-compute-apps`.
    pub columns: Option<Vec<String>>,
    /// Each row's `interval_ms`, instead of the median spacing of its
    /// GPU's (or process's) samples.
    pub interval_ms: Option<i64>,
    /// The model of GPUs whose rows name none.
    pub model: Option<String>,
    /// The day a log of times of day (`17:26:50`) starts; each time earlier
    /// than the one before it by more than 12 hours is on the next day.
    pub date: Option<chrono::NaiveDate>,
}

/// Which query the file is the output of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// `--query-gpu`: one row per GPU per sample.
    Gpu,
    /// `--query-compute-apps`: one row per process per GPU per sample.
    ComputeApps,
}

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Timestamp,
    Index,
    Uuid,
    BusId,
    Name,
    GpuUtil,
    MemUtil,
    FbUsed,
    FbTotal,
    Power,
    PowerLimit,
    Temp,
    SmClock,
    EncUtil,
    DecUtil,
    ClockEvents,
    Pid,
    ProcessName,
    UsedMemory,
    Ignored,
}

impl Col {
    fn of(name: &str, query: Query) -> Col {
        match (name, query) {
            ("timestamp", _) => Col::Timestamp,
            ("uuid" | "gpu_uuid", _) => Col::Uuid,
            ("index", Query::Gpu) => Col::Index,
            ("pci.bus_id", Query::Gpu) => Col::BusId,
            ("name" | "gpu_name", Query::Gpu) => Col::Name,
            ("utilization.gpu", Query::Gpu) => Col::GpuUtil,
            ("utilization.memory", Query::Gpu) => Col::MemUtil,
            ("memory.used", Query::Gpu) => Col::FbUsed,
            ("memory.total", Query::Gpu) => Col::FbTotal,
            ("power.draw" | "power.draw.instant" | "power.draw.average", Query::Gpu) => Col::Power,
            ("power.limit" | "enforced.power.limit", Query::Gpu) => Col::PowerLimit,
            ("temperature.gpu", Query::Gpu) => Col::Temp,
            ("clocks.sm" | "clocks.current.sm", Query::Gpu) => Col::SmClock,
            ("utilization.encoder", Query::Gpu) => Col::EncUtil,
            ("utilization.decoder", Query::Gpu) => Col::DecUtil,
            ("clocks_event_reasons.active" | "clocks_throttle_reasons.active", Query::Gpu) => {
                Col::ClockEvents
            }
            ("pid", Query::ComputeApps) => Col::Pid,
            ("process_name" | "name", Query::ComputeApps) => Col::ProcessName,
            ("used_memory" | "used_gpu_memory", Query::ComputeApps) => Col::UsedMemory,
            _ => Col::Ignored,
        }
    }

    /// The range of the column's values ([`ranges`]); `None` for a column
    /// that is not a number.
    fn range(self) -> Option<Range> {
        Some(match self {
            Col::Index => ranges::GPU_INDEX,
            Col::GpuUtil => ranges::GPU_UTIL_PCT,
            Col::MemUtil => ranges::MEM_UTIL_PCT,
            Col::EncUtil => ranges::ENC_UTIL_PCT,
            Col::DecUtil => ranges::DEC_UTIL_PCT,
            Col::FbUsed => ranges::FB_USED_BYTES,
            Col::FbTotal => ranges::FB_TOTAL_BYTES,
            Col::UsedMemory => ranges::USED_MEM_BYTES,
            Col::Power => ranges::POWER_MW,
            Col::PowerLimit => ranges::POWER_LIMIT_MW,
            Col::Temp => ranges::TEMP_C,
            Col::SmClock => ranges::SM_CLOCK_MHZ,
            Col::Pid => ranges::PID,
            Col::ClockEvents => ranges::CLOCK_EVENT_REASONS,
            Col::Timestamp | Col::Uuid | Col::BusId | Col::Name | Col::ProcessName | Col::Ignored => {
                return None;
            }
        })
    }

    fn quantity(self) -> Quantity {
        match self {
            Col::GpuUtil | Col::MemUtil | Col::EncUtil | Col::DecUtil => Quantity::Percent,
            Col::FbUsed | Col::FbTotal | Col::UsedMemory => Quantity::Memory,
            Col::Power | Col::PowerLimit => Quantity::Power,
            Col::Temp => Quantity::Temperature,
            Col::SmClock => Quantity::Clock,
            _ => Quantity::Integer,
        }
    }
}

/// One column of the file: what it holds, its header text and its unit.
#[derive(Debug, Clone)]
struct Column {
    col: Col,
    header: String,
    unit: Option<String>,
}

/// `utilization.gpu [%]` → (`utilization.gpu`, `%`).
fn split_header(h: &str) -> (String, Option<String>) {
    let h = h.trim();
    match h.split_once('[') {
        Some((name, rest)) => {
            (name.trim().to_ascii_lowercase(), Some(rest.trim_end_matches(']').trim().to_owned()))
        }
        None => (h.to_ascii_lowercase(), None),
    }
}

fn columns_of(headers: &[String]) -> (Query, Vec<Column>) {
    let names: Vec<_> = headers.iter().map(|h| split_header(h)).collect();
    let query = if names.iter().any(|(n, _)| n == "pid") { Query::ComputeApps } else { Query::Gpu };
    let mut seen = Vec::new();
    let columns = names
        .into_iter()
        .zip(headers)
        .map(|((name, unit), header)| {
            let mut col = Col::of(&name, query);
            // Two columns of one field (power.draw and power.draw.instant):
            // the first counts.
            if col != Col::Ignored && seen.contains(&col) {
                col = Col::Ignored;
            }
            seen.push(col);
            Column { col, header: header.trim().to_owned(), unit }
        })
        .collect();
    (query, columns)
}

/// A log opened: its header read and checked; read from its start by
/// [`Scan::scan`], as often as the import needs.
#[derive(Debug)]
pub struct File<'a> {
    path: PathBuf,
    opts: &'a Options,
    /// The header's fields (or `--columns`).
    headers: Vec<String>,
    query: Query,
    columns: Vec<Column>,
    /// The index of each UUID by first appearance, for files without an
    /// `index` column.
    first_index: HashMap<Text, i32>,
    /// Each PCI bus id's index (its rank among the file's bus ids), known
    /// after the first read; for files whose GPUs only their bus ids name.
    bus_index: HashMap<Text, i32>,
    /// Whether the first read is over.
    surveyed: bool,
    /// Whether a row's time was a time of day (its date counted from the
    /// rows before it: the file is read from its start each time).
    times_of_day: bool,
    /// For a file that names no GPU: the spacing of consecutive rows, to
    /// tell one GPU's log from several GPUs' ([`Bursts`]).
    bursts: Bursts,
    /// One copy of each UUID and model text, shared by the rows naming it
    /// (a day of a host's rows is held at once: ~100 bytes a row less).
    texts: std::collections::HashSet<Text>,
}

impl File<'_> {
    /// The shared copy of `t`.
    fn intern(&mut self, t: Text) -> Text {
        if let Some(known) = self.texts.get(&*t) {
            return known.clone();
        }
        if self.texts.len() < 4_096 {
            self.texts.insert(t.clone());
        }
        t
    }
}

/// Opens the file at `path` and reads its header.
pub fn open<'a>(path: &Path, opts: &'a Options) -> Result<File<'a>, ImportError> {
    let mut reader = open_csv(path)?;
    let mut record = csv::StringRecord::new();
    if let Some(model) = &opts.model {
        ranges::GPU_MODEL_TEXT
            .check(model)
            .map_err(|message| ImportError::Input { what: "--model".into(), message })?;
    }
    let headers: Vec<String> = match &opts.columns {
        Some(c) => c.iter().map(|s| s.trim().to_owned()).collect(),
        None => {
            if !reader.read_record(&mut record).map_err(|e| csv_error(path, e))? {
                return Err(ImportError::Input {
                    what: path.display().to_string(),
                    message: "the file is empty".into(),
                });
            }
            record.iter().map(str::to_owned).collect()
        }
    };
    let (query, columns) = columns_of(&headers);
    let header_line = if opts.columns.is_some() { 0 } else { 1 };
    let missing = |what: &str| ImportError::Row {
        path: path.to_path_buf(),
        line: header_line,
        field: "header".into(),
        message: format!("no {what} column{}", if opts.columns.is_some() { " in --columns" } else { "" }),
    };
    let has = |c: Col| columns.iter().any(|x| x.col == c);
    if !has(Col::Timestamp) {
        // A file written with `noheader`: its first line is data.
        if opts.columns.is_none()
            && headers.first().is_some_and(|h| parse_timestamp(h.trim(), opts.tz).is_ok())
        {
            return Err(ImportError::Row {
                path: path.to_path_buf(),
                line: 1,
                field: "header".into(),
                message: "the first line is data, not a header (a log written with --format=csv,noheader): \
                          give its columns with --columns, as passed to --query-gpu or --query-compute-apps"
                    .into(),
            });
        }
        return Err(missing("timestamp"));
    }
    if query == Query::ComputeApps && !has(Col::Uuid) {
        return Err(missing("gpu_uuid"));
    }
    Ok(File {
        path: path.to_path_buf(),
        opts,
        headers,
        query,
        columns,
        first_index: HashMap::new(),
        bus_index: HashMap::new(),
        surveyed: false,
        times_of_day: false,
        bursts: Bursts::default(),
        texts: std::collections::HashSet::new(),
    })
}

impl File<'_> {
    /// Which query the file is the output of.
    pub fn query(&self) -> Query {
        self.query
    }
}

impl Scan for File<'_> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn scan(
        &mut self,
        from: Option<At>,
        progress: &dyn Fn(u64),
        emit: &mut Emit<'_>,
    ) -> Result<(), ImportError> {
        let path = self.path.clone();
        let mut reader = open_csv(&path)?;
        let mut record = csv::StringRecord::new();
        match from {
            Some(at) => seek_csv(&mut reader, &path, (at.line, at.byte))?,
            None if self.opts.columns.is_none() => {
                reader.read_record(&mut record).map_err(|e| csv_error(&path, e))?;
            }
            None => {}
        }
        let mut parser = RowParser { file: self, days: units::Days::default() };
        let mut n = 0u64;
        while reader.read_record(&mut record).map_err(|e| csv_error(&path, e))? {
            let at = At {
                line: record.position().map_or(0, csv::Position::line),
                byte: record.position().map_or(0, csv::Position::byte),
            };
            let line = at.line;
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(at.byte);
            }
            // A header repeated by a second run appended to the same log.
            if record.iter().zip(&parser.file.headers).all(|(a, b)| a == b.trim()) {
                continue;
            }
            let columns = &parser.file.columns;
            if record.len() != columns.len() {
                let field = columns
                    .get(record.len())
                    .map_or_else(|| "(extra field)".to_owned(), |c| c.header.clone());
                let message = format!("expected {} fields, found {}", columns.len(), record.len());
                return Err(parser.err(line, &field, message));
            }
            let row = match parser.file.query {
                Query::Gpu => Row::Gpu(parser.gpu(line, &record)?),
                Query::ComputeApps => Row::Proc(parser.proc(line, &record)?),
            };
            if !emit(at, row)? {
                break;
            }
        }
        Ok(())
    }

    fn seekable(&self) -> bool {
        !self.times_of_day
    }

    fn finish(&mut self) -> Result<(), ImportError> {
        self.surveyed = true;
        let mut buses: Vec<&Text> = self.bus_index.keys().collect();
        buses.sort();
        let ranks: HashMap<Text, i32> = buses
            .into_iter()
            .enumerate()
            .map(|(i, b)| (b.clone(), i32::try_from(i).unwrap_or(i32::MAX)))
            .collect();
        self.bus_index = ranks;
        self.bursts.verdict(&self.path)
    }
}

/// Reads the whole file at `path` (its rows in any order), with their
/// intervals, as [`super::stream`] does a batch of every day.
pub fn read(path: &Path, opts: &Options, progress: &dyn Fn(u64)) -> Result<(Query, HostRows), ImportError> {
    let file = open(path, opts)?;
    let query = file.query();
    let mut files: Vec<Box<dyn Scan + '_>> = vec![Box::new(file)];
    let survey = stream::survey(&mut files, progress)?;
    let all = (i64::MIN, i64::MAX);
    Ok((query, stream::read_batch(&mut files, all, opts.interval_ms, &survey)?))
}

/// How the rows of a log that names no GPU (no `uuid`, `index` or
/// `pci.bus_id` column) are spaced. nvidia-smi writes one row per GPU per
/// cycle, each with its own time a few ms after the one before (or all
/// with the one time a wrapper script stamped); so a log of several GPUs
/// comes in bursts, most gaps far shorter than the cycle, where one GPU's
/// log has gaps of about its interval. Such a log is refused: which row is
/// which GPU cannot be told (the order of the rows within a cycle changes
/// from cycle to cycle in real logs).
#[derive(Debug, Default)]
struct Bursts {
    /// Gaps between consecutive rows (ms) and the line ending each; at most
    /// [`Bursts::MAX`].
    gaps: Vec<(i64, u64)>,
    last: Option<i64>,
}

impl Bursts {
    const MAX: usize = 10_000;

    fn row(&mut self, line: u64, ts: i64) {
        if let Some(last) = self.last
            && self.gaps.len() < Bursts::MAX
        {
            self.gaps.push(((ts - last).abs(), line));
        }
        self.last = Some(ts);
    }

    fn verdict(&self, path: &Path) -> Result<(), ImportError> {
        if self.gaps.len() < 3 {
            return Ok(());
        }
        let mut sorted: Vec<i64> = self.gaps.iter().map(|g| g.0).collect();
        sorted.sort_unstable();
        let p90 = sorted[sorted.len() * 9 / 10];
        // Two rows 20 ms apart are two GPUs of one cycle, whatever the
        // cycle: nvidia-smi takes longer than that to read a GPU again.
        let short = |g: i64| g * 4 < p90 || g < 20;
        let n_short = sorted.iter().filter(|&&g| short(g)).count();
        if n_short * 4 < sorted.len() {
            return Ok(());
        }
        let (gap, line) = self.gaps.iter().find(|g| short(g.0)).copied().unwrap_or_default();
        Err(ImportError::Row {
            path: path.to_path_buf(),
            line,
            field: "header".into(),
            message: format!(
                "the rows come in bursts ({n_short} of {} gaps between rows are under a quarter of the \
                 cycle of {p90} ms; this line is {gap} ms after the one before): the log holds several \
                 GPUs, and no index, uuid or pci.bus_id column tells them apart. Log with \
                 --query-gpu=timestamp,index,uuid,… (a log of one GPU has no bursts)",
                sorted.len()
            ),
        })
    }
}

/// Reads an nvidia-smi timestamp (`2024/08/27 10:00:00.123`, the
/// fraction optional) in `tz`, to ms since the epoch. A local time that
/// occurs twice (the hour clocks go back) is read as its first
/// occurrence; one that does not exist (the hour they skip) is an error.
pub fn parse_timestamp(raw: &str, tz: Tz) -> Result<i64, String> {
    // An instant of its own: with an offset, or Unix seconds.
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(t.timestamp_millis());
    }
    if let Some(ms) = unix_seconds(raw) {
        return Ok(ms);
    }
    let naive = ["%Y/%m/%d %H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
        .ok_or_else(|| format!("{raw:?} is not a time (expected YYYY/MM/DD HH:MM:SS.mmm)"))?;
    tz.from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp_millis())
        .ok_or_else(|| format!("{raw:?} does not exist in {tz} (a daylight-saving gap)"))
}

/// `1764189075` or `1764189075.25` (Unix seconds, as `date +%s` writes
/// them: 9 to 11 digits, 2001 to 5138) in ms; `None` for anything else.
fn unix_seconds(raw: &str) -> Option<i64> {
    let (whole, fraction) = raw.split_once('.').unwrap_or((raw, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !(9..=11).contains(&whole.len()) || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let ms_part: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    whole.parse::<i64>().ok()?.checked_mul(1000)?.checked_add(ms_part)
}

/// The parts of a row the columns give, checked.
struct RowParser<'f, 'a> {
    file: &'f mut File<'a>,
    /// For a log of times of day: the last time (ms into its day) and the
    /// days since `--date`.
    days: units::Days,
}

impl RowParser<'_, '_> {
    fn err(&self, line: u64, field: &str, message: String) -> ImportError {
        ImportError::Row { path: self.file.path.clone(), line, field: field.to_owned(), message }
    }

    /// The value of column `c` in the schema's unit, checked against its
    /// range; `None` for a "no value" marker.
    fn number(&self, line: u64, c: &Column, raw: &str) -> Result<Option<f64>, ImportError> {
        let value = units::parse(raw, c.col.quantity(), c.unit.as_deref())
            .map_err(|m| self.err(line, &c.header, m))?;
        match (value, c.col.range()) {
            (Some(v), Some(range)) => range.check(v, raw).map(Some).map_err(|m| self.err(line, &c.header, m)),
            (value, _) => Ok(value),
        }
    }

    fn int32(&self, line: u64, c: &Column, raw: &str) -> Result<Option<i32>, ImportError> {
        // In range, so it fits (see `ranges`' test).
        Ok(self.number(line, c, raw)?.map(|v| v.round() as i32))
    }

    fn int64(&self, line: u64, c: &Column, raw: &str) -> Result<Option<i64>, ImportError> {
        Ok(self.number(line, c, raw)?.map(|v| v.round() as i64))
    }

    fn text(&self, line: u64, c: &Column, raw: &str, limit: TextLimit) -> Result<Option<Text>, ImportError> {
        if units::is_null(raw) {
            return Ok(None);
        }
        limit.check(raw).map_err(|m| self.err(line, &c.header, m))?;
        Ok(Some(raw.into()))
    }

    fn timestamp(&mut self, line: u64, c: &Column, raw: &str) -> Result<i64, ImportError> {
        let tz = self.file.opts.tz;
        let ts = match chrono::NaiveTime::parse_from_str(raw, "%H:%M:%S%.f") {
            Ok(time) => {
                self.file.times_of_day = true;
                let Some(date) = self.file.opts.date else {
                    let m = format!(
                        "{raw:?} is a time of day without a date: give the day the log starts with \
                         --date YYYY-MM-DD"
                    );
                    return Err(self.err(line, &c.header, m));
                };
                let naive = self.days.date_of(date, time).and_time(time);
                tz.from_local_datetime(&naive)
                    .earliest()
                    .map(|t| t.timestamp_millis())
                    .ok_or_else(|| format!("{raw:?} does not exist in {tz} (a daylight-saving gap)"))
            }
            Err(_) => parse_timestamp(raw, tz),
        };
        ts.and_then(|ts| ranges::check_ts(ts, raw)).map_err(|m| self.err(line, &c.header, m))
    }

    /// The header of the first column holding `col`, else `fallback`.
    fn header_of(&self, col: Col, fallback: &str) -> String {
        self.file.columns.iter().find(|c| c.col == col).map_or(fallback, |c| c.header.as_str()).to_owned()
    }

    fn gpu(&mut self, line: u64, record: &csv::StringRecord) -> Result<GpuSample, ImportError> {
        let mut g = GpuSample::default();
        let (mut uuid, mut index, mut bus) = (None, None, None);
        let columns = self.file.columns.clone();
        for (c, raw) in columns.iter().zip(record.iter()) {
            match c.col {
                Col::Timestamp => g.ts = self.timestamp(line, c, raw)?,
                Col::Index => {
                    index = Some(
                        self.int32(line, c, raw)?
                            .ok_or_else(|| self.err(line, &c.header, "no index".into()))?,
                    )
                }
                Col::Uuid => uuid = self.text(line, c, raw, ranges::GPU_UUID_TEXT)?,
                Col::BusId => {
                    bus = self
                        .text(line, c, &raw.to_ascii_uppercase(), ranges::GPU_UUID_TEXT)?
                        .ok_or_else(|| self.err(line, &c.header, "no PCI bus id".into()))
                        .map(Some)?
                }
                Col::Name => g.gpu_model = self.text(line, c, raw, ranges::GPU_MODEL_TEXT)?,
                Col::GpuUtil => g.gpu_util_pct = self.int32(line, c, raw)?,
                Col::MemUtil => g.mem_util_pct = self.int32(line, c, raw)?,
                Col::FbUsed => g.fb_used_bytes = self.int64(line, c, raw)?,
                Col::FbTotal => g.fb_total_bytes = self.int64(line, c, raw)?,
                Col::Power => g.power_mw = self.int32(line, c, raw)?,
                Col::PowerLimit => g.power_limit_mw = self.int32(line, c, raw)?,
                Col::Temp => g.temp_c = self.int32(line, c, raw)?,
                Col::SmClock => g.sm_clock_mhz = self.int32(line, c, raw)?,
                Col::EncUtil => g.enc_util_pct = self.int32(line, c, raw)?,
                Col::DecUtil => g.dec_util_pct = self.int32(line, c, raw)?,
                Col::ClockEvents => {
                    g.clock_event_reasons = if units::is_null(raw) {
                        None
                    } else {
                        let hex = raw.trim().trim_start_matches("0x").trim_start_matches("0X");
                        let mask = u64::from_str_radix(hex, 16).map_err(|_| {
                            self.err(line, &c.header, format!("{raw:?} is not a hexadecimal bitmask"))
                        })?;
                        let range = ranges::CLOCK_EVENT_REASONS;
                        Some(range.i64(mask as f64, raw).map_err(|m| self.err(line, &c.header, m))?)
                    }
                }
                _ => {}
            }
        }
        if g.gpu_model.is_none() {
            g.gpu_model = self.file.opts.model.as_deref().map(Text::from);
        }
        g.gpu_model = g.gpu_model.map(|m| self.file.intern(m));
        let uuid = uuid.map(|u| self.file.intern(u));
        ranges::check_memory(g.fb_used_bytes, g.fb_total_bytes)
            .map_err(|m| self.err(line, &self.header_of(Col::FbUsed, "memory.used"), m))?;
        let host = &self.file.opts.host;
        match (uuid, index, bus) {
            (Some(u), Some(i), _) => (g.gpu_uuid, g.gpu_index) = (u, i),
            (Some(u), None, _) => {
                let next = i32::try_from(self.file.first_index.len()).unwrap_or(i32::MAX);
                g.gpu_index = *self.file.first_index.entry(u.clone()).or_insert(next);
                g.gpu_uuid = u;
            }
            (None, Some(i), _) => (g.gpu_uuid, g.gpu_index) = (synthetic_uuid(host, i), i),
            // GPUs named by their PCI bus ids only: numbered in bus order
            // (nvidia-smi's own order) once the whole file is read.
            (None, None, Some(b)) => {
                g.gpu_uuid = synthetic_uuid_of(host, &format!("pci/{b}"));
                g.gpu_index = if self.file.surveyed {
                    self.file.bus_index.get(&b).copied().unwrap_or(0)
                } else {
                    self.file.bus_index.insert(b, 0);
                    0
                };
            }
            // No GPU named: one GPU's log, unless its rows come in bursts.
            (None, None, None) => {
                if !self.file.surveyed {
                    self.file.bursts.row(line, g.ts);
                }
                (g.gpu_uuid, g.gpu_index) = (synthetic_uuid(host, 0), 0);
            }
        }
        g.gpu_uuid = self.file.intern(std::mem::take(&mut g.gpu_uuid));
        Ok(g)
    }

    fn proc(&mut self, line: u64, record: &csv::StringRecord) -> Result<ProcSample, ImportError> {
        let mut p = ProcSample::default();
        let mut uuid = None;
        let mut pid = None;
        let columns = self.file.columns.clone();
        for (c, raw) in columns.iter().zip(record.iter()) {
            match c.col {
                Col::Timestamp => p.ts = self.timestamp(line, c, raw)?,
                Col::Uuid => {
                    uuid = Some(
                        self.text(line, c, raw, ranges::GPU_UUID_TEXT)?
                            .ok_or_else(|| self.err(line, &c.header, "no GPU UUID".into()))?,
                    )
                }
                Col::Pid => {
                    pid = Some(
                        self.int32(line, c, raw)?
                            .ok_or_else(|| self.err(line, &c.header, "no pid".into()))?,
                    )
                }
                Col::ProcessName => {
                    // The whole path is checked, as the name cut from it
                    // must not hide what the line held.
                    if raw.chars().any(char::is_control) {
                        let m = format!("{raw:?} holds a control character, which comm cannot hold");
                        return Err(self.err(line, &c.header, m));
                    }
                    p.identity = ProcIdentity { comm: comm_of(raw), ..ProcIdentity::default() }
                }
                Col::UsedMemory => p.used_mem_bytes = self.int64(line, c, raw)?,
                _ => {}
            }
        }
        let Some(pid) = pid else {
            return Err(self.err(line, "pid", "no pid column".into()));
        };
        p.pid = pid;
        p.gpu_uuid = uuid.unwrap_or_else(|| "".into());
        Ok(p)
    }
}

/// The `comm` of a process nvidia-smi names by its path
/// (`/usr/bin/python3`, or on Windows `C:\Windows\System32\dwm.exe`): the
/// file name, cut to the kernel's 15 bytes, as the recorder reads it from
/// `/proc/PID/comm`.
pub(crate) fn comm_of(raw: &str) -> Option<Text> {
    if units::is_null(raw) {
        return None;
    }
    let name = raw.trim().rsplit(['/', '\\']).next().unwrap_or(raw);
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Some(name[..end].into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_local_time_in_the_zone_given() {
        let utc = parse_timestamp("2026/11/02 08:00:00.250", Tz::UTC).expect("a time");
        assert_eq!(utc, 1_793_606_400_250);
        let berlin = parse_timestamp("2026/11/02 09:00:00.250", chrono_tz::Europe::Berlin).expect("a time");
        assert_eq!(berlin, utc);
        assert_eq!(parse_timestamp("2026/11/02 08:00:00", Tz::UTC), Ok(1_793_606_400_000));
        assert!(parse_timestamp("2026/13/02 08:00:00", Tz::UTC).is_err());
        // 02:30 on the last Sunday of March does not exist in Berlin.
        let gap = parse_timestamp("2026/03/29 02:30:00.000", chrono_tz::Europe::Berlin);
        assert!(gap.expect_err("a gap").contains("daylight-saving"));
    }

    #[test]
    fn headers_map_by_name_and_unit() {
        let h: Vec<String> = [
            "timestamp",
            " index",
            " utilization.gpu [%]",
            " memory.used [MiB]",
            " pci.bus_id",
            " power.draw [W]",
            " power.draw.instant [W]",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let (query, cols) = columns_of(&h);
        assert_eq!(query, Query::Gpu);
        let kinds: Vec<_> = cols.iter().map(|c| c.col).collect();
        assert_eq!(
            kinds,
            [Col::Timestamp, Col::Index, Col::GpuUtil, Col::FbUsed, Col::BusId, Col::Power, Col::Ignored]
        );
        assert_eq!(cols[3].unit.as_deref(), Some("MiB"));
        let apps: Vec<String> = ["timestamp", "gpu_uuid", "pid", "process_name", "used_gpu_memory [MiB]"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(columns_of(&apps).0, Query::ComputeApps);
        assert_eq!(comm_of("/opt/conda/bin/python3.11-something-long").as_deref(), Some("python3.11-some"));
        assert_eq!(comm_of(r"C:\Windows\System32\dwm.exe").as_deref(), Some("dwm.exe"));
    }

    /// A real file (`tests/fixtures/import/`, see its SOURCES.md).
    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import").join(name)
    }

    fn options() -> Options {
        Options { host: "h".into(), tz: Tz::UTC, columns: None, interval_ms: None, model: None, date: None }
    }

    #[test]
    fn windows_process_paths_give_their_file_names() {
        // One sample: its interval given.
        let opts = Options { interval_ms: Some(1_000), ..options() };
        let (query, rows) =
            read(&fixture("nvidia-smi-query-compute-apps-windows-paths.csv"), &opts, &|_| {}).expect("reads");
        assert_eq!(query, Query::ComputeApps);
        let comms: Vec<&str> = rows.procs.iter().filter_map(|p| p.identity.comm.as_deref()).collect();
        // The file's process_name column, cut after its last `\` and to 15
        // bytes by hand.
        assert_eq!(&comms[..4], ["TextInputHost.e", "ShellExperience", "dwm.exe", "explorer.exe"]);
        assert!(comms.iter().all(|c| !c.contains('\\') && c.len() <= 15), "{comms:?}");
        assert_eq!(comms.len(), rows.procs.len());
        assert!(rows.procs.iter().all(|p| p.used_mem_bytes.is_none()), "[N/A] is unknown");
    }

    #[test]
    fn timestamps_with_an_offset_or_in_unix_seconds_are_instants() {
        // 17:26:50 at +08:00 is 09:26:50 UTC, whatever --tz says.
        let at = parse_timestamp("2025-09-08T17:26:50+08:00", chrono_tz::Europe::Berlin).expect("a time");
        assert_eq!(at, parse_timestamp("2025/09/08 09:26:50", Tz::UTC).expect("a time"));
        assert_eq!(parse_timestamp("1764189075", chrono_tz::Asia::Tokyo), Ok(1_764_189_075_000));
        assert_eq!(parse_timestamp("1764189075.25", Tz::UTC), Ok(1_764_189_075_250));
        assert!(parse_timestamp("17641890", Tz::UTC).is_err(), "8 digits: not a time");
        // Real files: a wrapper's ISO stamps (8 GPUs a cycle) and `date +%s`.
        let (_, epoch) =
            read(&fixture("epoch-seconds-prepended-noheader-nounits-1gpu.csv"), &options(), &|_| {})
                .expect("reads");
        // Its first and last lines, and a minute between them.
        assert_eq!(epoch.gpus.len(), 40);
        assert_eq!(epoch.gpus[0].ts, 1_764_189_075_000);
        assert_eq!(epoch.gpus[0].fb_used_bytes, Some(1 << 20));
        assert!(epoch.gpus.iter().all(|g| g.interval_ms == 60_000 && g.gpu_index == 0));
    }

    #[test]
    fn a_file_whose_gpu_key_is_the_same_on_every_gpu_is_refused() {
        // A wrapper's log whose index column is 0 on all 8 GPUs of each
        // cycle (their numbers are in its own `gpu` column): 7 of 8 rows
        // would have been dropped as repeats.
        let path = fixture("nvidia-smi-iso8601-offset-8gpu-constant-index.csv");
        let error = read(&path, &options(), &|_| {}).expect_err("mis-keyed");
        let ImportError::Row { line, field, message, .. } = &error else { panic!("{error}") };
        assert_eq!((*line, field.as_str()), (3, "GPU key"));
        // 5 cycles of 8 rows: 35 of the 40 share their key with the cycle's first.
        assert!(message.contains("35 of the file's 40 rows"), "{message}");
        assert!(
            message.contains("as line 2") && message.contains("does not tell its GPUs apart"),
            "{message}"
        );
    }

    /// The columns OmniOpt's `csv,noheader` GPU logs were written with
    /// (its documentation gives them).
    fn omniopt_columns(bus: &str) -> Vec<String> {
        format!(
            "timestamp, name, {bus}, driver_version, pstate, pcie.link.gen.max, pcie.link.gen.current, \
             temperature.gpu, utilization.gpu [%], utilization.memory [%], memory.total [MiB], \
             memory.free [MiB], memory.used [MiB]"
        )
        .split(',')
        .map(str::to_owned)
        .collect()
    }

    #[test]
    fn gpus_named_by_their_bus_ids_only_are_numbered_in_bus_order() {
        let opts = Options { columns: Some(omniopt_columns("pci.bus_id")), ..options() };
        let path = fixture("nvidia-smi-query-gpu-noheader-units-no-index-pci-bus-id-3gpu.csv");
        let (_, rows) = read(&path, &opts, &|_| {}).expect("reads");
        assert_eq!(rows.gpus.len(), 8);
        let by_bus = |bus: &str| synthetic_uuid_of("h", &format!("pci/{bus}"));
        // Bus order 0B, 3B, 8B: indexes 0, 1, 2, whatever the rows' order.
        for (bus, index) in [("00000000:0B:00.0", 0), ("00000000:3B:00.0", 1), ("00000000:8B:00.0", 2)] {
            let of: Vec<&GpuSample> = rows.gpus.iter().filter(|g| g.gpu_uuid == by_bus(bus)).collect();
            assert!(!of.is_empty() && of.iter().all(|g| g.gpu_index == index), "{bus}");
        }
        // Line 4: 8B at 11:27:15.309, 38803 MiB used, 3 %.
        let g = rows.gpus.iter().find(|g| g.gpu_index == 2 && g.ts % 60_000 == 15_309).expect("line 4");
        assert_eq!((g.fb_used_bytes, g.gpu_util_pct), (Some(38_803 << 20), Some(3)));
        // 3B's samples at .177, 15.311 and 25.376: gaps 10134 and 10065 ms,
        // the upper median taken.
        assert!(rows.gpus.iter().filter(|g| g.gpu_index == 1).all(|g| g.interval_ms == 10_134));
        // The 4 T4s of one cycle, told apart by their PCI domains.
        let (_, t4) = read(
            &fixture("nvidia-smi-query-gpu-no-index-pci-bus-id-4gpu.csv"),
            &Options { interval_ms: Some(1_000), ..options() },
            &|_| {},
        )
        .expect("reads");
        let indexes: Vec<i32> = t4.gpus.iter().map(|g| g.gpu_index).collect();
        assert_eq!(indexes, [0, 1, 2, 3]);
        assert_eq!(t4.gpus[3].gpu_uuid, by_bus("00000004:00:00.0"));
    }

    #[test]
    fn a_log_of_one_gpu_naming_none_imports_and_one_of_several_is_refused() {
        let (_, one) =
            read(&fixture("nvidia-smi-query-gpu-no-index-1gpu-15s.csv"), &options(), &|_| {}).expect("reads");
        assert_eq!(one.gpus.len(), 40);
        assert!(one.gpus.iter().all(|g| g.gpu_uuid == synthetic_uuid("h", 0)));
        assert_eq!((one.gpus[0].fb_used_bytes, one.gpus[0].gpu_util_pct), (Some(17_092 << 20), Some(0)));
        // Its samples are 15.0 s apart, give or take a few ms.
        assert!(one.gpus.iter().all(|g| (15_000..15_010).contains(&g.interval_ms)), "{:?}", one.gpus[0]);
        // OmniOpt's 3 GPUs with their bus ids taken away: bursts.
        let opts = Options { columns: Some(omniopt_columns("bus")), ..options() };
        let path = fixture("nvidia-smi-query-gpu-noheader-units-no-index-pci-bus-id-3gpu.csv");
        let error = read(&path, &opts, &|_| {}).expect_err("several GPUs").to_string();
        assert!(error.contains("bursts") && error.contains("no index, uuid or pci.bus_id column"), "{error}");
    }

    #[test]
    fn times_of_day_take_the_date_given_and_roll_over_midnight() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("tod.csv");
        std::fs::write(
            &path,
            "timestamp, utilization.gpu [%]\n23:59:30.000, 5\n23:59:45.000, 6\n00:00:00.000, 7\n",
        )
        .expect("written");
        let error = read(&path, &options(), &|_| {}).expect_err("no date").to_string();
        assert!(error.contains("--date YYYY-MM-DD"), "{error}");
        let date = chrono::NaiveDate::from_ymd_opt(2026, 1, 31);
        let (_, rows) = read(&path, &Options { date, ..options() }, &|_| {}).expect("reads");
        let ts: Vec<i64> = rows.gpus.iter().map(|g| g.ts).collect();
        let feb1 = parse_timestamp("2026/02/01 00:00:00", Tz::UTC).expect("a time");
        assert_eq!(ts, [feb1 - 30_000, feb1 - 15_000, feb1]);
    }

    #[test]
    fn a_file_without_its_header_points_to_columns() {
        let path = fixture("nvidia-smi-query-gpu-noheader-units-no-index-pci-bus-id-3gpu.csv");
        let error = read(&path, &options(), &|_| {}).expect_err("no header").to_string();
        assert!(error.contains("noheader") && error.contains("--columns"), "{error}");
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;
    use std::cell::Cell;

    /// A file that counts the rows its reads hand over.
    struct Counted<'a, 'c> {
        file: File<'a>,
        rows: &'c Cell<u64>,
    }

    impl Scan for Counted<'_, '_> {
        fn path(&self) -> &Path {
            self.file.path()
        }
        fn scan(
            &mut self,
            from: Option<At>,
            progress: &dyn Fn(u64),
            emit: &mut Emit<'_>,
        ) -> Result<(), ImportError> {
            let rows = self.rows;
            self.file.scan(from, progress, &mut |at, row| {
                rows.set(rows.get() + 1);
                emit(at, row)
            })
        }
        fn seekable(&self) -> bool {
            self.file.seekable()
        }
        fn finish(&mut self) -> Result<(), ImportError> {
            self.file.finish()
        }
    }

    #[test]
    fn a_log_in_time_order_is_read_from_the_batchs_first_day_to_its_last() {
        // 4 days of one GPU, 10 rows a day; then the same rows with day 2
        // moved to the end (out of order).
        let day = |d: u32| -> String {
            (0..10).map(|k| format!("2026/11/0{d} 0{k}:00:00.000, 0, {k} %\n")).collect()
        };
        let header = "timestamp, index, utilization.gpu [%]\n";
        let dir = tempfile::tempdir().expect("a folder");
        for (name, order, reads) in
            [("sorted.csv", [1, 2, 3, 4], [21, 20]), ("unsorted.csv", [1, 3, 4, 2], [40, 40])]
        {
            let path = dir.path().join(name);
            let text: String =
                std::iter::once(header.to_owned()).chain(order.iter().map(|&d| day(d))).collect();
            std::fs::write(&path, text).expect("write");
            let opts = Options { interval_ms: Some(3_600_000), ..options() };
            let count = Cell::new(0);
            let mut files: Vec<Box<dyn Scan + '_>> =
                vec![Box::new(Counted { file: open(&path, &opts).expect("opens"), rows: &count })];
            let survey = stream::survey(&mut files, &|_| {}).expect("surveys");
            assert_eq!(count.get(), 40);
            let batches = survey.batches(20);
            assert_eq!(batches.len(), 2, "{batches:?}");
            for (batch, want_reads) in batches.iter().zip(reads) {
                count.set(0);
                let rows = stream::read_batch(&mut files, *batch, opts.interval_ms, &survey).expect("reads");
                assert_eq!(rows.gpus.len(), 20, "{name} {batch:?}");
                // Sorted: the batch's rows, and the first row after it
                // (none after the last batch); unsorted: the whole file.
                assert_eq!(count.get(), want_reads, "{name} {batch:?}");
            }
        }
    }

    fn options() -> Options {
        Options { host: "h".into(), tz: Tz::UTC, columns: None, interval_ms: None, model: None, date: None }
    }
}
