//! Scrapes saved to a file: what `curl -s :9400/metrics >> scrapes.prom`
//! (dcgm-exporter) or `:9835/metrics` (nvidia_gpu_exporter) leaves, one
//! scrape or many appended, in the Prometheus text format
//! ([`super::exposition`]); the series are those a Prometheus import
//! reads ([`super::prometheus::SERIES`]), with the same labels, units,
//! blank markers and pod rules.
//!
//! - **Scrapes.** A new scrape starts where a series (a name and its
//!   labels) comes again, or a metric's `# HELP` line does.
//! - **Time.** A scrape's time is its samples' own timestamp where they
//!   carry one (the first of the scrape), else `--at` for the first scrape
//!   and `--every` after it for each one after. Each row stands for the
//!   spacing of its GPU's scrapes (the median), or `--interval`.
//! - **Host.** `--host`, else the series' `Hostname`, `node` or `instance`
//!   as a Prometheus import takes it; a file whose series name several
//!   hosts is refused (import one host a file, or give `--host`).
//!
//! Each scrape is one row per GPU (and one per pod on it), emitted when
//! the scrape ends, so a file of many scrapes streams as the logs do.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::exposition::{self, Line, Sample};
use super::prometheus::{self, Findings, Rows, Series, SeriesError};
use super::stream::{At, Emit, Row, Scan};
use super::{ImportError, csv_error, open_lines};

/// How to read the files.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The host of every series, whatever their labels say.
    pub host: Option<String>,
    /// The first scrape's time (ms), for scrapes whose samples carry none.
    pub at_ms: Option<i64>,
    /// The time between scrapes (ms), for those whose samples carry none.
    pub every_ms: Option<i64>,
}

/// A file of scrapes.
#[derive(Debug)]
pub struct File<'a> {
    path: PathBuf,
    opts: &'a Options,
    /// The host its series name (or `--host`), once a scrape has been read.
    host: Option<String>,
    /// What the first read found.
    findings: Findings,
    surveyed: bool,
}

/// Opens the file at `path`.
pub fn open<'a>(path: &Path, opts: &'a Options) -> File<'a> {
    File {
        path: path.to_path_buf(),
        opts,
        host: opts.host.clone(),
        findings: Findings::default(),
        surveyed: false,
    }
}

impl File<'_> {
    fn err(&self, line: u64, field: &str, message: String) -> ImportError {
        ImportError::Row { path: self.path.clone(), line, field: field.to_owned(), message }
    }

    /// The rows of scrape `k` (its samples with their lines), handed to
    /// `emit`.
    fn flush(&mut self, k: i64, samples: &[(At, Sample)], emit: &mut Emit<'_>) -> Result<(), ImportError> {
        let Some((first_at, first)) = samples.first() else { return Ok(()) };
        let first_line = &first_at.line;
        let ts = match (first.timestamp_ms, self.opts.at_ms, self.opts.every_ms) {
            (Some(t), ..) => t,
            (None, Some(at), _) if k == 0 => at,
            (None, Some(at), Some(every)) => at + k * every,
            (None, None, _) => {
                let m = "the scrapes' samples carry no time: give the first scrape's with --at".to_owned();
                return Err(self.err(*first_line, &first.name, m));
            }
            (None, Some(_), None) => {
                let m = "the file holds more than one scrape and its samples carry no time: give the time \
                         between scrapes with --every"
                    .to_owned();
                return Err(self.err(*first_line, &first.name, m));
            }
        };
        let mut rows = Rows::default();
        let mut findings = Findings::default();
        for (at, sample) in samples {
            let line = &at.line;
            let Some(metric) = prometheus::metric(&sample.name) else { continue };
            let labels: Vec<(String, String)> = sample.labels.clone();
            // The interval is set once the rows are all read (the spacing
            // of the GPU's scrapes); 1 ms stands in.
            let series = Series { metric, labels: &labels, host: self.opts.host.as_deref(), interval_ms: 1 };
            let point = [(ts, sample.value, sample.raw.clone())];
            prometheus::add_series(&series, &point, &mut rows, &mut findings).map_err(|e| match e {
                SeriesError::Answer(m) if self.opts.host.is_none() => {
                    self.err(*line, &sample.name, format!("{m}; give the host with --host"))
                }
                SeriesError::Answer(m) | SeriesError::Value(m) => self.err(*line, &sample.name, m),
            })?;
        }
        if !self.surveyed {
            self.findings.merge(findings);
        }
        let what = self.path.display().to_string();
        for (host, rows) in rows.finish(&what)? {
            match &self.host {
                Some(h) if *h != host => {
                    let m = format!(
                        "the file's series name hosts {h} and {host}: import one host's scrapes a file, or \
                         give --host"
                    );
                    return Err(self.err(*first_line, "host", m));
                }
                Some(_) => {}
                None => self.host = Some(host),
            }
            // (Not seekable: every read is whole, and never stopped.)
            for g in rows.gpus {
                emit(*first_at, Row::Gpu(g))?;
            }
            for p in rows.procs {
                emit(*first_at, Row::Proc(p))?;
            }
        }
        Ok(())
    }
}

impl Scan for File<'_> {
    fn path(&self) -> &Path {
        &self.path
    }

    fn scan(
        &mut self,
        _: Option<At>,
        progress: &dyn Fn(u64),
        emit: &mut Emit<'_>,
    ) -> Result<(), ImportError> {
        let path = self.path.clone();
        let mut reader = open_lines(&path)?;
        let mut record = csv::StringRecord::new();
        let mut scrape: Vec<(At, Sample)> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut helped: HashSet<String> = HashSet::new();
        let mut k = 0i64;
        let mut n = 0u64;
        while reader.read_record(&mut record).map_err(|e| csv_error(&path, e))? {
            let at = At {
                line: record.position().map_or(0, csv::Position::line),
                byte: record.position().map_or(0, csv::Position::byte),
            };
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(at.byte);
            }
            let parsed =
                exposition::parse(record.get(0).unwrap_or("")).map_err(|m| self.err(at.line, "line", m))?;
            let new_scrape = match &parsed {
                Line::Help(name) => !helped.insert(name.clone()),
                Line::Sample(s) => {
                    let mut labels = s.labels.clone();
                    labels.sort();
                    !seen.insert(format!("{}{labels:?}", s.name))
                }
                Line::Other => false,
            };
            if new_scrape && !scrape.is_empty() {
                self.flush(k, &scrape, emit)?;
                k += 1;
                scrape.clear();
                seen.clear();
                helped.clear();
                match &parsed {
                    Line::Help(name) => {
                        helped.insert(name.clone());
                    }
                    Line::Sample(s) => {
                        let mut labels = s.labels.clone();
                        labels.sort();
                        seen.insert(format!("{}{labels:?}", s.name));
                    }
                    Line::Other => {}
                }
            }
            if let Line::Sample(s) = parsed {
                scrape.push((at, s));
            }
        }
        self.flush(k, &scrape, emit)?;
        if k == 0 && scrape.is_empty() {
            return Err(ImportError::Input {
                what: path.display().to_string(),
                message: "no samples in the file".into(),
            });
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), ImportError> {
        self.surveyed = true;
        Ok(())
    }

    fn notices(&self) -> Vec<String> {
        self.findings.lines()
    }

    /// `--host`, else the one host the file's series name.
    fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::stream::{self, Scan};
    use crate::import::{HostRows, synthetic_uuid};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/import").join(name)
    }

    /// 2026-11-02 09:00 UTC.
    const AT: i64 = 1_793_610_000_000;

    fn read(
        paths: &[PathBuf],
        opts: &Options,
        interval_ms: Option<i64>,
    ) -> Result<(HostRows, Vec<String>, Option<String>), ImportError> {
        let mut files: Vec<Box<dyn Scan + '_>> =
            paths.iter().map(|p| Box::new(open(p, opts)) as Box<dyn Scan + '_>).collect();
        let survey = stream::survey(&mut files, &|_| {})?;
        let notices = files.iter().flat_map(|f| f.notices()).collect();
        let host = files.iter().find_map(|f| f.host().map(str::to_owned));
        let rows = stream::read_batch(&mut files, (i64::MIN, i64::MAX), interval_ms, &survey)?;
        Ok((rows, notices, host))
    }

    fn one_scrape(host: Option<&str>) -> Options {
        Options { host: host.map(str::to_owned), at_ms: Some(AT), every_ms: None }
    }

    #[test]
    fn dcgm_exporter_1x_names_map_as_their_2x_fields() {
        let path = fixture("dcgm-exporter-1x-node-exporter-textfile.prom");
        let (rows, notices, host) = read(&[path], &one_scrape(Some("n1")), Some(60_000)).expect("reads");
        assert_eq!((rows.gpus.len(), host.as_deref()), (1, Some("n1")));
        let g = &rows.gpus[0];
        // The file's values: 34 C, 0 %, 31.737 W, 135 MHz, 7.824041e+06 mJ.
        assert_eq!((g.ts, g.interval_ms, g.gpu_index), (AT, 60_000, 0));
        assert_eq!(&*g.gpu_uuid, "GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323");
        assert_eq!(
            (g.temp_c, g.gpu_util_pct, g.power_mw, g.sm_clock_mhz),
            (Some(34), Some(0), Some(31_737), Some(135))
        );
        assert_eq!(g.energy_mj, Some(7_824_041));
        assert!(notices.is_empty(), "{notices:?}");
        // 1.x pod labels (pod_name, pod_namespace, container_name): the pod
        // holds both GPUs.
        let path = fixture("dcgm-exporter-1x-pod-gpu-metrics-exporter-2gpu.prom");
        let (rows, ..) = read(&[path], &one_scrape(Some("n1")), Some(60_000)).expect("reads");
        assert_eq!((rows.gpus.len(), rows.procs.len()), (2, 2));
        let pid = prometheus::pod_pid("default", "pod1", "pod1-ctr");
        assert!(
            rows.procs.iter().all(|p| p.pid == pid && p.identity.k8s_namespace.as_deref() == Some("default"))
        );
        assert_eq!(rows.gpus.iter().map(|g| g.temp_c).collect::<Vec<_>>(), [Some(33), Some(34)]);
    }

    #[test]
    fn nvidia_gpu_exporter_series_take_bytes_ratios_and_the_info_model() {
        let path = fixture("nvidia-gpu-exporter-testdata-h200-load.prom");
        let (rows, ..) = read(&[path], &one_scrape(Some("n1")), Some(15_000)).expect("reads");
        assert_eq!(rows.gpus.len(), 1);
        let g = &rows.gpus[0];
        assert_eq!(&*g.gpu_uuid, "GPU-00000000-0000-0000-0000-000000000000");
        assert_eq!(g.gpu_model.as_deref(), Some("NVIDIA H200"));
        // utilization ratio 1 and 0.07; 627.4 W; 3.3934016512e+10 of
        // 1.50754820096e+11 bytes; 52 C.
        assert_eq!(
            (g.gpu_util_pct, g.mem_util_pct, g.power_mw, g.temp_c),
            (Some(100), Some(7), Some(627_400), Some(52))
        );
        assert_eq!((g.fb_used_bytes, g.fb_total_bytes), (Some(33_934_016_512), Some(150_754_820_096)));
        // 2021's exporter on Windows: the model from nvidia_smi_gpu_info's
        // name, not nvidia_smi_name's number.
        let path = fixture("nvidia-gpu-exporter-readme-2021-windows-rtx2080s.prom");
        let (rows, ..) = read(&[path], &one_scrape(Some("pc")), Some(15_000)).expect("reads");
        assert_eq!(rows.gpus[0].gpu_model.as_deref(), Some("NVIDIA GeForce RTX 2080 SUPER"));
        assert_eq!(rows.gpus[0].fb_used_bytes, Some(706_740_224));
    }

    #[test]
    fn many_scrapes_are_told_apart_and_timed_by_at_and_every() {
        let path = fixture("nvidia-gpu-exporter-testdata-h200-load.prom");
        let dir = tempfile::tempdir().expect("a folder");
        let three = dir.path().join("three.prom");
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&three, text.repeat(3)).expect("write");
        let opts = Options { every_ms: Some(15_000), ..one_scrape(Some("n1")) };
        let (rows, ..) = read(std::slice::from_ref(&three), &opts, None).expect("reads");
        let ts: Vec<i64> = rows.gpus.iter().map(|g| g.ts).collect();
        assert_eq!(ts, [AT, AT + 15_000, AT + 30_000]);
        assert!(rows.gpus.iter().all(|g| g.interval_ms == 15_000));
        // Without --every: refused, saying so.
        let error = read(&[three], &one_scrape(Some("n1")), None).expect_err("no --every").to_string();
        assert!(error.contains("--every"), "{error}");
        let error = read(&[path], &Options::default(), Some(1_000)).expect_err("no --at").to_string();
        assert!(error.contains("--at"), "{error}");
    }

    #[test]
    fn blanks_are_dropped_and_a_pod_hostname_needs_a_host() {
        // The README's sample, its INT64_NOT_SUPPORTED put on a field apron
        // reads (GPU_TEMP rather than MEMORY_TEMP).
        let text =
            std::fs::read_to_string(fixture("dcgm-exporter-readme-k8s-empty-pod-labels-sentinel.prom"))
                .expect("read")
                .replace("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP");
        let dir = tempfile::tempdir().expect("a folder");
        let path = dir.path().join("blank.prom");
        std::fs::write(&path, text).expect("write");
        let (rows, notices, _) = read(&[path], &one_scrape(Some("n1")), Some(30_000)).expect("reads");
        assert_eq!((rows.gpus[0].temp_c, rows.gpus[0].sm_clock_mhz), (None, Some(139)));
        assert!(rows.procs.is_empty(), "empty pod labels: no workload");
        assert_eq!(notices.len(), 1);
        assert!(notices[0].starts_with("dropped 1 values that are DCGM's blank markers"), "{notices:?}");
        // Hostname is the exporter's pod and no node label: refused unless
        // --host names the node.
        let path = fixture("dcgm-exporter-1x-compat-names-hostname-is-pod-name.prom");
        let error = read(std::slice::from_ref(&path), &one_scrape(None), Some(30_000))
            .expect_err("pod name")
            .to_string();
        assert!(error.contains("exporter pod's name") && error.contains("--host"), "{error}");
        let (rows, ..) = read(&[path], &one_scrape(Some("gpu-node-3")), Some(30_000)).expect("reads");
        // GPU c1f38265 (1.x names) and 603a8873 (a MIG workload's series).
        assert_eq!(rows.gpus.len(), 2);
        assert_eq!(rows.procs.len(), 1);
        assert_eq!(rows.procs[0].identity.comm.as_deref(), Some("testest-9sxmd"));
        assert!(rows.gpus.iter().all(|g| g.gpu_uuid != synthetic_uuid("gpu-node-3", 0)));
    }
}
