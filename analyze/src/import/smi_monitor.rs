//! The text `nvidia-smi dmon -o DT` (into `gpu_samples`) and `nvidia-smi
//! pmon -o DT` (into `proc_samples`) print: two `#` header lines (the
//! columns' names, then their units), then one line per GPU (dmon) or per
//! process and GPU (pmon) per cycle, fields separated by spaces, `-` for a
//! value the GPU does not give.
//!
//! - The time is the `Date` (`YYYYMMDD`) and `Time` (`HH:MM:SS`) columns
//!   `-o DT` (or `-o TD`) adds, the node's local time read in `--tz`; with
//!   `-o T` alone, times of day from `--date` on. Without them (plain
//!   `dmon`/`pmon`) the file is refused: its lines carry no time.
//! - GPUs are named by their index only (`gpu`): each gets the stable
//!   synthetic UUID of its host and index, as an `--query-gpu` log with an
//!   index and no uuid does, so the two meet.
//! - dmon: `sm` is the GPU's utilization (`utilization.gpu`), `mem` the
//!   memory controller's, `pwr` W, `gtemp` °C, `fb` MB (nvidia-smi's MB are
//!   MiB, as its other outputs print them), `rxpci`/`txpci` MB/s (likewise
//!   MiB/s, from NVML's KiB/s), `enc`/`dec` %; other columns ignored.
//! - pmon: `pid`, `sm` and `mem` (the process's share of the GPU), `fb` MB
//!   (with `-s m`), `command` (cut to 16 characters by nvidia-smi, spaces
//!   allowed: it is the rest of the line; kept as its first 15 bytes, as the
//!   recorder keeps `comm`). A line whose pid is `-` (a GPU without
//!   processes) is no row.
//! - The header is printed again now and then, in the middle of a cycle
//!   too: every `#` line after the first two is skipped, as are blank
//!   lines.
//!
//! Each unit in the header is checked against what the column must hold:
//! a file whose `pwr` is not in W is refused, not read as W.

use std::path::{Path, PathBuf};

use apron_schemas::{GpuSample, ProcIdentity, ProcSample};
use chrono::{NaiveDate, NaiveDateTime, NaiveTime, TimeZone};

use super::nvidia_smi::{Options, comm_of};
use super::ranges::{self, Range};
use super::stream::{At, Emit, Row, Scan};
use super::{ImportError, csv_error, synthetic_uuid};

/// Which monitor printed the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Monitor {
    /// `nvidia-smi dmon`: one line per GPU per cycle.
    Dmon,
    /// `nvidia-smi pmon`: one line per process (and GPU) per cycle.
    Pmon,
}

/// What a column holds, with the unit its header must say and the factor
/// to the schema's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Date,
    Time,
    Gpu,
    Pid,
    Power,
    Temp,
    Util,
    MemUtil,
    Enc,
    Dec,
    Fb,
    RxPci,
    TxPci,
    Command,
    Ignored,
}

impl Col {
    fn of(name: &str, monitor: Monitor) -> Col {
        match (name, monitor) {
            ("Date", _) => Col::Date,
            ("Time", _) => Col::Time,
            ("gpu", _) => Col::Gpu,
            ("pid", Monitor::Pmon) => Col::Pid,
            ("command", Monitor::Pmon) => Col::Command,
            ("sm", _) => Col::Util,
            ("mem", _) => Col::MemUtil,
            ("fb", _) => Col::Fb,
            ("pwr", Monitor::Dmon) => Col::Power,
            ("gtemp", Monitor::Dmon) => Col::Temp,
            ("enc", Monitor::Dmon) => Col::Enc,
            ("dec", Monitor::Dmon) => Col::Dec,
            ("rxpci", Monitor::Dmon) => Col::RxPci,
            ("txpci", Monitor::Dmon) => Col::TxPci,
            _ => Col::Ignored,
        }
    }

    /// The units nvidia-smi prints under the column, its factor to the
    /// schema's unit and its range; `None` for a column that is no number.
    fn unit(self, monitor: Monitor) -> Option<(&'static [&'static str], f64, Range)> {
        const MIB: f64 = 1_048_576.0;
        Some(match (self, monitor) {
            (Col::Gpu, _) => (&["Idx"], 1.0, ranges::GPU_INDEX),
            (Col::Pid, _) => (&["#"], 1.0, ranges::PID),
            (Col::Power, _) => (&["W"], 1_000.0, ranges::POWER_MW),
            (Col::Temp, _) => (&["C"], 1.0, ranges::TEMP_C),
            (Col::Util, Monitor::Dmon) => (&["%"], 1.0, ranges::GPU_UTIL_PCT),
            (Col::Util, Monitor::Pmon) => (&["%"], 1.0, ranges::GPU_UTIL_PCT),
            (Col::MemUtil, _) => (&["%"], 1.0, ranges::MEM_UTIL_PCT),
            (Col::Enc, _) => (&["%"], 1.0, ranges::ENC_UTIL_PCT),
            (Col::Dec, _) => (&["%"], 1.0, ranges::DEC_UTIL_PCT),
            (Col::Fb, Monitor::Dmon) => (&["MB"], MIB, ranges::FB_USED_BYTES),
            (Col::Fb, Monitor::Pmon) => (&["MB"], MIB, ranges::USED_MEM_BYTES),
            (Col::RxPci, _) => (&["MB/s"], MIB, ranges::PCIE_RX_BYTES_PER_S),
            (Col::TxPci, _) => (&["MB/s"], MIB, ranges::PCIE_TX_BYTES_PER_S),
            _ => return None,
        })
    }
}

/// The monitor a file's first line says printed it (`# gpu …`, `#Date …`
/// or `#Time …`); `None` for anything else.
pub fn monitor_of(first_line: &str) -> Option<Monitor> {
    let names: Vec<&str> = first_line.strip_prefix('#')?.split_whitespace().collect();
    if !names.iter().take(3).any(|n| *n == "gpu") {
        return None;
    }
    Some(if names.contains(&"pid") { Monitor::Pmon } else { Monitor::Dmon })
}

/// Opens a file nvidia-smi wrote: the text of `dmon` or `pmon` when its
/// first line is their header (this module), else the CSV of a query
/// ([`super::nvidia_smi`]).
pub fn open_any<'a>(path: &Path, opts: &'a Options) -> Result<Box<dyn Scan + 'a>, ImportError> {
    let mut head = Vec::with_capacity(4096);
    let file = std::fs::File::open(path)
        .map_err(|e| ImportError::Read { path: path.to_path_buf(), source: Box::new(e) })?;
    std::io::Read::read_to_end(&mut std::io::Read::take(file, 4096), &mut head)
        .map_err(|e| ImportError::Read { path: path.to_path_buf(), source: Box::new(e) })?;
    let text = String::from_utf8_lossy(&head);
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    Ok(match monitor_of(first) {
        Some(monitor) => Box::new(open(path, opts, monitor)?),
        None => Box::new(super::nvidia_smi::open(path, opts)?),
    })
}

/// A dmon or pmon capture, its header read and checked.
#[derive(Debug)]
pub struct File<'a> {
    path: PathBuf,
    opts: &'a Options,
    monitor: Monitor,
    /// Each column: what it holds and its header name.
    columns: Vec<(Col, String)>,
}

/// Opens the capture at `path` printed by `monitor`.
pub fn open<'a>(path: &Path, opts: &'a Options, monitor: Monitor) -> Result<File<'a>, ImportError> {
    let mut lines = Lines::open(path)?;
    let header = |line: u64, message: String| ImportError::Row {
        path: path.to_path_buf(),
        line,
        field: "header".into(),
        message,
    };
    let (Some((at1, names)), Some((at2, units))) = (lines.next()?, lines.next()?) else {
        return Err(header(1, "the two # header lines of nvidia-smi's dmon or pmon are not there".into()));
    };
    let (l1, l2) = (at1.line, at2.line);
    let names: Vec<String> = names.trim_start_matches('#').split_whitespace().map(str::to_owned).collect();
    let units: Vec<String> = units.trim_start_matches('#').split_whitespace().map(str::to_owned).collect();
    if !units.is_empty() && units.len() != names.len() {
        let m = format!("{} units for {} columns", units.len(), names.len());
        return Err(header(l2, m));
    }
    let columns: Vec<(Col, String)> = names.iter().map(|n| (Col::of(n, monitor), n.clone())).collect();
    let tool = match monitor {
        Monitor::Dmon => "dmon",
        Monitor::Pmon => "pmon",
    };
    if !columns.iter().any(|c| c.0 == Col::Time) {
        return Err(header(
            l1,
            format!(
                "nvidia-smi {tool} printed without its time: its lines carry none. Capture with \
                 nvidia-smi {tool} -o DT (date and time columns)"
            ),
        ));
    }
    for (k, (col, name)) in columns.iter().enumerate() {
        let Some((want, ..)) = col.unit(monitor) else { continue };
        let unit = units.get(k).map_or("", String::as_str);
        if !want.contains(&unit) {
            let m = format!("column {name} is in {unit:?}, where nvidia-smi {tool} prints {}", want[0]);
            return Err(header(l2, m));
        }
    }
    if !columns.iter().any(|c| c.0 == Col::Gpu) {
        return Err(header(l1, "no gpu column".into()));
    }
    if monitor == Monitor::Pmon && !columns.iter().any(|c| c.0 == Col::Pid) {
        return Err(header(l1, "no pid column".into()));
    }
    Ok(File { path: path.to_path_buf(), opts, monitor, columns })
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
        let mut lines = Lines::open(&self.path)?;
        match from {
            Some(at) => super::seek_csv(&mut lines.reader, &self.path, (at.line, at.byte))?,
            None => {
                // The two header lines.
                lines.next()?;
                lines.next()?;
            }
        }
        let mut days = super::units::Days::default();
        let mut n = 0u64;
        while let Some((at, text)) = lines.next()? {
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(at.byte);
            }
            if text.starts_with('#') {
                continue;
            }
            if let Some(row) = self.row(at.line, &text, &mut days)?
                && !emit(at, row)?
            {
                break;
            }
        }
        Ok(())
    }

    /// A capture with its `Date` column: each line's time is its own.
    fn seekable(&self) -> bool {
        self.columns.iter().any(|c| c.0 == Col::Date)
    }
}

impl File<'_> {
    fn err(&self, line: u64, field: &str, message: String) -> ImportError {
        ImportError::Row { path: self.path.clone(), line, field: field.to_owned(), message }
    }

    /// The row of one line; `None` for a pmon line without a process.
    fn row(&self, line: u64, text: &str, days: &mut super::units::Days) -> Result<Option<Row>, ImportError> {
        let n = self.columns.len();
        // The command (pmon's last column) may hold spaces: the rest of
        // the line is its value.
        let mut fields: Vec<&str> = Vec::with_capacity(n);
        let mut rest = text.trim();
        while fields.len() + 1 < n {
            let Some((field, after)) = rest.split_once(char::is_whitespace) else { break };
            fields.push(field);
            rest = after.trim_start();
        }
        if !rest.is_empty() {
            fields.push(rest);
        }
        if fields.len() != n {
            let m = format!("expected {n} fields, found {}", fields.len());
            return Err(self.err(line, self.columns.get(fields.len()).map_or("line", |c| c.1.as_str()), m));
        }
        let (mut date, mut time) = (None, None);
        let mut g = GpuSample::default();
        let mut p = ProcSample::default();
        let mut index = None;
        for ((col, name), raw) in self.columns.iter().zip(&fields) {
            let value = self.number(line, *col, name, raw)?;
            match col {
                Col::Date => {
                    date = Some(
                        NaiveDate::parse_from_str(raw, "%Y%m%d")
                            .map_err(|_| self.err(line, name, format!("{raw:?} is not a date (YYYYMMDD)")))?,
                    )
                }
                Col::Time => {
                    time = Some(
                        NaiveTime::parse_from_str(raw, "%H:%M:%S")
                            .map_err(|_| self.err(line, name, format!("{raw:?} is not a time (HH:MM:SS)")))?,
                    )
                }
                Col::Gpu => index = value.map(|v| v as i32),
                Col::Pid => match value {
                    Some(v) => p.pid = v as i32,
                    None => return Ok(None),
                },
                Col::Power => g.power_mw = value.map(|v| v as i32),
                Col::Temp => g.temp_c = value.map(|v| v as i32),
                Col::Util => {
                    g.gpu_util_pct = value.map(|v| v as i32);
                    p.sm_util_pct = g.gpu_util_pct;
                }
                Col::MemUtil => {
                    g.mem_util_pct = value.map(|v| v as i32);
                    p.mem_util_pct = g.mem_util_pct;
                }
                Col::Enc => g.enc_util_pct = value.map(|v| v as i32),
                Col::Dec => g.dec_util_pct = value.map(|v| v as i32),
                Col::Fb => {
                    g.fb_used_bytes = value.map(|v| v as i64);
                    p.used_mem_bytes = g.fb_used_bytes;
                }
                Col::RxPci => g.pcie_rx_bytes_per_s = value.map(|v| v as i64),
                Col::TxPci => g.pcie_tx_bytes_per_s = value.map(|v| v as i64),
                Col::Command => {
                    if raw.chars().any(char::is_control) {
                        let m = format!("{raw:?} holds a control character, which comm cannot hold");
                        return Err(self.err(line, name, m));
                    }
                    p.identity =
                        ProcIdentity { comm: comm_of(raw).filter(|c| &**c != "-"), ..Default::default() };
                }
                Col::Ignored => {}
            }
        }
        let Some(index) = index else {
            return Err(self.err(line, "gpu", "no GPU index".into()));
        };
        let ts = self.timestamp(line, date, time, days)?;
        let uuid = synthetic_uuid(&self.opts.host, index);
        Ok(Some(match self.monitor {
            Monitor::Dmon => {
                g.ts = ts;
                g.gpu_uuid = uuid;
                g.gpu_index = index;
                g.gpu_model = self.opts.model.as_deref().map(Into::into);
                Row::Gpu(g)
            }
            Monitor::Pmon => {
                p.ts = ts;
                p.gpu_uuid = uuid;
                Row::Proc(p)
            }
        }))
    }

    /// A numeric column's value in the schema's unit, range-checked;
    /// `None` for `-` and for a column that is no number.
    fn number(&self, line: u64, col: Col, name: &str, raw: &str) -> Result<Option<f64>, ImportError> {
        let Some((_, factor, range)) = col.unit(self.monitor) else { return Ok(None) };
        if raw == "-" {
            return Ok(None);
        }
        let v: f64 = raw
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| self.err(line, name, format!("{raw:?} is not a number")))?;
        range.check(v * factor, raw).map(|v| Some(v.round())).map_err(|m| self.err(line, name, m))
    }

    /// The line's time: its date and time in `--tz`; a time of day alone
    /// counts days from `--date`, a time earlier than the last by over 12
    /// hours being on the next day.
    fn timestamp(
        &self,
        line: u64,
        date: Option<NaiveDate>,
        time: Option<NaiveTime>,
        days: &mut super::units::Days,
    ) -> Result<i64, ImportError> {
        let Some(time) = time else { return Err(self.err(line, "Time", "no time".into())) };
        let date = match (date, self.opts.date) {
            (Some(d), _) => d,
            (None, Some(start)) => days.date_of(start, time),
            (None, None) => {
                let m = "a time of day without a date (captured with -o T): give the day the capture \
                         starts with --date YYYY-MM-DD, or capture with -o DT"
                    .to_owned();
                return Err(self.err(line, "Time", m));
            }
        };
        let tz = self.opts.tz;
        let naive = NaiveDateTime::new(date, time);
        tz.from_local_datetime(&naive)
            .earliest()
            .map(|t| t.timestamp_millis())
            .ok_or_else(|| format!("{naive} does not exist in {tz} (a daylight-saving gap)"))
            .and_then(|ts| ranges::check_ts(ts, &naive.to_string()))
            .map_err(|m| self.err(line, "Time", m))
    }
}

/// The lines of a file, with their numbers, through the CSV reader's line
/// cap ([`super::open_csv`]'s): blank lines skipped, ends trimmed.
struct Lines {
    path: PathBuf,
    reader: super::CsvReader,
    record: csv::StringRecord,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines, ImportError> {
        Ok(Lines {
            path: path.to_path_buf(),
            reader: super::open_lines(path)?,
            record: csv::StringRecord::new(),
        })
    }

    fn next(&mut self) -> Result<Option<(At, String)>, ImportError> {
        loop {
            if !self.reader.read_record(&mut self.record).map_err(|e| csv_error(&self.path, e))? {
                return Ok(None);
            }
            let text = self.record.get(0).unwrap_or("").trim();
            if !text.is_empty() {
                let at = At {
                    line: self.record.position().map_or(0, csv::Position::line),
                    byte: self.record.position().map_or(0, csv::Position::byte),
                };
                return Ok(Some((at, text.to_owned())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono_tz::Tz;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import").join(name)
    }

    fn options() -> Options {
        Options { host: "h".into(), tz: Tz::UTC, columns: None, interval_ms: None, model: None, date: None }
    }

    fn rows(path: &Path, opts: &Options) -> Result<Vec<Row>, ImportError> {
        let first = std::fs::read_to_string(path).expect("read");
        let monitor = monitor_of(first.lines().next().unwrap_or("")).expect("a monitor's header");
        let mut file = open(path, opts, monitor)?;
        let mut out = Vec::new();
        file.scan(None, &|_| {}, &mut |_, row| {
            out.push(row);
            Ok(true)
        })?;
        Ok(out)
    }

    #[test]
    fn dmon_with_date_and_time_columns_reads_every_line() {
        let got = rows(&fixture("nvidia-smi-dmon-o-TD-1gpu-blank-line.txt"), &options()).expect("reads");
        // 6 lines of GPU 0, a blank line skipped.
        assert_eq!(got.len(), 6);
        let Row::Gpu(first) = &got[0] else { panic!("a GPU row") };
        // ` 20240104 13:54:35 0 239 3 0 6 1 0 0 0 0 5 10 6250 1695`: fb 239
        // MiB, sm 6 %, mem 1 %, rxpci 5 and txpci 10 MiB/s.
        let at = NaiveDate::from_ymd_opt(2024, 1, 4).and_then(|d| d.and_hms_opt(13, 54, 35)).expect("a time");
        assert_eq!(first.ts, at.and_utc().timestamp_millis());
        assert_eq!((first.gpu_index, first.gpu_uuid.clone()), (0, synthetic_uuid("h", 0)));
        assert_eq!((first.gpu_util_pct, first.mem_util_pct), (Some(6), Some(1)));
        assert_eq!(first.fb_used_bytes, Some(239 * 1_048_576));
        assert_eq!((first.pcie_rx_bytes_per_s, first.pcie_tx_bytes_per_s), (Some(5 << 20), Some(10 << 20)));
        let Row::Gpu(last) = &got[5] else { panic!("a GPU row") };
        assert_eq!(last.ts - first.ts, 5_000);
    }

    #[test]
    fn plain_dmon_and_pmon_are_refused_pointing_to_o_dt() {
        for (name, tool) in [
            ("nvidia-smi-dmon-plain-linux-h100.txt", "dmon"),
            ("nvidia-smi-dmon-plain-windows.txt", "dmon"),
            ("nvidia-smi-dmon-plain-s-m-8gpu.txt", "dmon"),
            ("nvidia-smi-pmon-plain-linux-h100.txt", "pmon"),
            ("nvidia-smi-pmon-plain-windows.txt", "pmon"),
        ] {
            let error = rows(&fixture(name), &options()).expect_err("no time").to_string();
            assert!(error.contains(&format!("nvidia-smi {tool} -o DT")), "{name}: {error}");
        }
    }

    /// A real capture with the `Date` and `Time` columns `-o DT` puts
    /// first: each data line prefixed with a date and a time, the two
    /// header lines with their names and units, as dmon's own `-o DT`
    /// header gives them.
    fn with_time(name: &str, dir: &Path) -> PathBuf {
        let text = std::fs::read_to_string(fixture(name)).expect("read");
        let mut out = String::new();
        let (mut headers, mut cycle_line) = (0, 0);
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix('#') {
                let first = if headers % 2 == 0 { "#Date       Time    " } else { "#YYYYMMDD   HH:MM:SS" };
                out.push_str(&format!("{first}{rest}\n"));
                headers += 1;
            } else {
                // Three processes a cycle, a second apart.
                let second = cycle_line / 3;
                out.push_str(&format!(" 20260105   10:00:{second:02}{line}\n"));
                cycle_line += 1;
            }
        }
        let path = dir.join(name);
        std::fs::write(&path, out).expect("write");
        path
    }

    #[test]
    fn pmon_lines_are_processes_with_their_command_names_and_repeated_headers_skipped() {
        let dir = tempfile::tempdir().expect("a folder");
        let path = with_time("nvidia-smi-pmon-plain-linux-h100.txt", dir.path());
        let got = rows(&path, &options()).expect("reads");
        assert_eq!(got.len(), 15);
        let procs: Vec<&ProcSample> =
            got.iter().filter_map(|r| if let Row::Proc(p) = r { Some(p) } else { None }).collect();
        // `0 11345 C 99 10 - - - - gpu_burn`, the third line of each cycle.
        assert_eq!(procs[2].pid, 11_345);
        assert_eq!((procs[2].sm_util_pct, procs[2].mem_util_pct), (Some(99), Some(10)));
        assert_eq!(procs[2].identity.comm.as_deref(), Some("gpu_burn"));
        assert_eq!(procs[0].sm_util_pct, None, "- is no value");
        assert!(procs.iter().all(|p| p.gpu_uuid == synthetic_uuid("h", 0)));
        // Windows: names with spaces, cut to 16 by nvidia-smi and to 15 here,
        // and the header printed again after 12 lines.
        let path = with_time("nvidia-smi-pmon-plain-windows.txt", dir.path());
        let got = rows(&path, &options()).expect("reads");
        let comms: Vec<String> = got
            .iter()
            .filter_map(|r| {
                if let Row::Proc(p) = r { p.identity.comm.as_deref().map(str::to_owned) } else { None }
            })
            .collect();
        assert!(
            comms.contains(&"NVIDIA Share.ex".to_owned()) && comms.contains(&"NZXT CAM.exe".to_owned()),
            "{comms:?}"
        );
        let lines = std::fs::read_to_string(fixture("nvidia-smi-pmon-plain-windows.txt")).expect("read");
        assert_eq!(got.len(), lines.lines().filter(|l| !l.starts_with('#')).count());
    }

    #[test]
    fn a_unit_other_than_the_columns_is_refused_and_times_of_day_take_a_date() {
        let dir = tempfile::tempdir().expect("a folder");
        let text =
            std::fs::read_to_string(fixture("nvidia-smi-dmon-o-TD-1gpu-blank-line.txt")).expect("read");
        let path = dir.path().join("kb.txt");
        std::fs::write(&path, text.replacen("MB/s   MB/s", "KB/s   KB/s", 1)).expect("write");
        let error = rows(&path, &options()).expect_err("KB/s").to_string();
        assert!(error.contains("rxpci") && error.contains("MB/s"), "{error}");
        // -o T: the Date column taken away.
        let no_date: String = text
            .lines()
            .map(|l| match l.strip_prefix('#') {
                Some(h) => format!("#{}\n", h.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")),
                None => format!("{}\n", l.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")),
            })
            .collect();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, no_date).expect("write");
        let error = rows(&path, &options()).expect_err("no date").to_string();
        assert!(error.contains("--date YYYY-MM-DD"), "{error}");
        let opts = Options { date: NaiveDate::from_ymd_opt(2024, 1, 4), ..options() };
        let got = rows(&path, &opts).expect("reads");
        let with_date =
            rows(&fixture("nvidia-smi-dmon-o-TD-1gpu-blank-line.txt"), &options()).expect("reads");
        assert_eq!(got, with_date);
    }
}
