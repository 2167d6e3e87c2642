//! The recorder's write-ahead log: one segment per open Parquet file, so the
//! rows held in memory survive a crash.
//!
//! Each tick's rows go to the segment as one frame (the format is
//! [`format`]'s) before they go to memory, written with one
//! `pwrite`: once [`Wal::append`] returns, the tick survives a `kill -9` of
//! the recorder. The segment is synced to the disk (fdatasync) at most every
//! `sync` of tick time, on a thread of its own so a slow disk never delays a
//! tick: after a power loss, at most the last `sync` (plus the sync's own
//! time) of samples is missing. When the open file closes and its Parquet
//! files are durable, the segment is deleted ([`Wal::finish`]).
//!
//! The log never stops the recording: a segment that cannot be created or
//! written is a warning and a counter, and the rows still reach Parquet when
//! the file closes. Turning segments into Parquet after a crash is
//! [`crate::recover`]'s job.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread;
use std::time::Duration;

use apron_schemas::DataLayout;
use tracing::warn;

use crate::wal::format::{SegmentHeader, TickRows, encode_header, encode_tick};
use crate::write_error::WriteError;

pub mod format;

/// What the log has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Segments created.
    pub segments: u64,
    /// Frames written: ticks, and events written as they arrived.
    pub frames: u64,
    /// Bytes written, headers included.
    pub bytes: u64,
    /// Syncs handed to the sync thread.
    pub syncs: u64,
    /// Failures: a segment not created, a frame not written, a sync or a
    /// delete that failed. The rows are still in memory and reach Parquet
    /// when the file closes; only their crash safety suffered.
    pub errors: u64,
}

/// Whether the segment is due a sync at tick `ts_ms`, given the tick of
/// its last sync (`None`: never synced) and the sync period: when the
/// period has passed, or the clock stepped back (else a step back would
/// delay syncing until it caught up).
pub fn sync_due(last_sync_ms: Option<i64>, ts_ms: i64, sync_ms: i64) -> bool {
    last_sync_ms.is_none_or(|last| ts_ms < last || ts_ms - last >= sync_ms)
}

/// The open segment.
#[derive(Debug)]
struct Segment {
    /// Shared with the sync jobs, which name it in their warnings.
    path: Arc<Path>,
    file: Arc<File>,
    /// Bytes of complete frames: where the next frame goes.
    len: u64,
    /// Tick time of the last sync handed to the sync thread.
    last_sync_ms: Option<i64>,
    /// The folder's entry for this segment has been synced (queued with a
    /// sync), so the segment itself survives a power loss.
    dir_synced: bool,
    /// A failure of this segment was logged; later ones are only counted.
    warned: bool,
    /// Tick frames written to it, and the rows in them.
    frames: u64,
    rows: u64,
}

/// A segment ended by [`Wal::seal`]: where it is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSegment {
    /// The segment file.
    pub path: PathBuf,
    /// Tick frames written to it (a tick whose frame failed is not in it).
    pub frames: u64,
    /// Rows (`gpu_samples` and `proc_samples`) in those frames.
    pub rows: u64,
}

/// A sync for the sync thread.
#[derive(Debug)]
struct SyncJob {
    file: Arc<File>,
    path: Arc<Path>,
    /// The folder to sync after the file, the first time.
    dir: Option<Arc<Path>>,
}

/// The write-ahead log of one host.
#[derive(Debug)]
pub struct Wal {
    layout: DataLayout,
    host: String,
    /// The host's segment folder, built once: a tick's sync job shares it.
    dir: Arc<Path>,
    sync_ms: i64,
    segment: Option<Segment>,
    /// The frame being written; kept to reuse its allocation.
    buf: Vec<u8>,
    syncer: SyncSender<SyncJob>,
    sync_errors: Arc<AtomicU64>,
    stats: WalStats,
}

impl Wal {
    /// The log of `host` under `layout`, syncing every `sync` of tick time.
    /// Starts the sync thread, which ends when the log is dropped.
    pub fn new(layout: DataLayout, host: &str, sync: Duration) -> Result<Self, WriteError> {
        let sync_errors = Arc::new(AtomicU64::new(0));
        let syncer = spawn_syncer(Arc::clone(&sync_errors)).map_err(|source| WriteError::Io {
            op: "start the WAL sync thread for",
            path: layout.wal_dir(host),
            source,
        })?;
        Ok(Self {
            dir: layout.wal_dir(host).into(),
            layout,
            host: host.to_owned(),
            sync_ms: i64::try_from(sync.as_millis()).unwrap_or(i64::MAX),
            segment: None,
            buf: Vec::with_capacity(4096),
            syncer,
            sync_errors,
            stats: WalStats::default(),
        })
    }

    /// What the log has done so far.
    pub fn stats(&self) -> WalStats {
        WalStats { errors: self.stats.errors + self.sync_errors.load(Ordering::Relaxed), ..self.stats }
    }

    /// The open segment's path, if one is open.
    pub fn segment_path(&self) -> Option<&Path> {
        self.segment.as_ref().map(|s| &*s.path)
    }

    /// Tick frames, and rows in them, written to the open segment (0, 0
    /// when none is open).
    pub fn open_frames(&self) -> (u64, u64) {
        self.segment.as_ref().map_or((0, 0), |s| (s.frames, s.rows))
    }

    /// Starts the segment of the file (`start_ms`, `seq`), which must not
    /// exist yet: it is created, never replaced. On failure the file is
    /// recorded without a segment (warned and counted).
    pub fn begin(&mut self, start_ms: i64, seq: u64) {
        if let Some(old) = self.segment.take() {
            // The previous file closed without [`Wal::finish`]: its segment
            // stays for recovery.
            warn!(file = %old.path.display(), "WAL segment left in place; it is recovered at the next start");
        }
        let path = self.layout.wal_segment_path(&self.host, start_ms, seq);
        self.buf.clear();
        let header = SegmentHeader { host: self.host.clone(), start_ms, seq };
        let created = encode_header(&header, &mut self.buf)
            .map_err(std::io::Error::other)
            .and_then(|()| create_segment(&path, &self.buf));
        match created {
            Ok(file) => {
                self.stats.segments += 1;
                self.stats.bytes += self.buf.len() as u64;
                self.segment = Some(Segment {
                    path: path.into(),
                    file: Arc::new(file),
                    len: self.buf.len() as u64,
                    last_sync_ms: None,
                    dir_synced: false,
                    warned: false,
                    frames: 0,
                    rows: 0,
                });
            }
            Err(e) => {
                self.stats.errors += 1;
                warn!(file = %path.display(), error = %e, errors = self.stats().errors,
                    "cannot create WAL segment; this file's rows are in memory only until it closes");
            }
        }
    }

    /// Appends the tick at `ts_ms` to the open segment (none open: nothing
    /// to do). When this returns without a warning, the tick survives a
    /// crash of the recorder; once the next sync is done, a crash of the
    /// machine too.
    pub fn append(&mut self, ts_ms: i64, rows: TickRows<'_>) {
        let Some(seg) = self.segment.as_mut() else { return };
        self.buf.clear();
        let (gpus, procs) = (rows.gpus, rows.procs);
        // A frame of events alone is not a tick; it is synced at once (an
        // XID may be the last thing a machine does before it goes down).
        let events_only =
            gpus.is_empty() && procs.is_empty() && rows.allocs.is_empty() && !rows.events.is_empty();
        let written = encode_tick(ts_ms, rows, &mut self.buf)
            .map_err(std::io::Error::other)
            .and_then(|()| seg.file.write_all_at(&self.buf, seg.len));
        if let Err(e) = written {
            // Cut a partial frame off, so the frames after it stay readable
            // (the next one is written at the same offset anyway).
            let _ = seg.file.set_len(seg.len);
            self.stats.errors += 1;
            if !std::mem::replace(&mut seg.warned, true) {
                warn!(file = %seg.path.display(), error = %e, errors = self.stats.errors,
                    "cannot append to WAL segment; rows are held in memory until the file closes");
            }
            return;
        }
        seg.len += self.buf.len() as u64;
        seg.frames += u64::from(!events_only);
        seg.rows += (gpus.len() + procs.len()) as u64;
        self.stats.frames += 1;
        self.stats.bytes += self.buf.len() as u64;
        if events_only || sync_due(seg.last_sync_ms, ts_ms, self.sync_ms) {
            let dir = (!seg.dir_synced).then(|| Arc::clone(&self.dir));
            let job = SyncJob { file: Arc::clone(&seg.file), path: Arc::clone(&seg.path), dir };
            let with_dir = job.dir.is_some();
            match self.syncer.try_send(job) {
                Ok(()) => {
                    self.stats.syncs += 1;
                    seg.last_sync_ms = Some(ts_ms);
                    seg.dir_synced |= with_dir;
                }
                // A sync is still running and another waits: this tick's
                // sync is asked for again at the next tick.
                Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => {
                    self.stats.errors += 1;
                }
            }
        }
    }

    /// Deletes the open segment: call it once the file's Parquet files are
    /// durable, so every row of the segment is in them. A segment that
    /// cannot be deleted is warned about; recovery finds its Parquet files
    /// at the next start and only deletes it.
    pub fn finish(&mut self) {
        if let Some(sealed) = self.seal() {
            self.remove(&sealed.path);
        }
    }

    /// Ends the open segment without deleting it: its file has closed but
    /// is not in Parquet yet (the disk refused it), so the segment keeps its
    /// rows crash-safe until [`Wal::remove`]. Syncs it first, best effort.
    pub fn seal(&mut self) -> Option<SealedSegment> {
        let seg = self.segment.take()?;
        if let Err(e) = seg.file.sync_data() {
            self.stats.errors += 1;
            warn!(file = %seg.path.display(), error = %e, "cannot sync a WAL segment");
        }
        Some(SealedSegment { path: seg.path.to_path_buf(), frames: seg.frames, rows: seg.rows })
    }

    /// Deletes a sealed segment whose rows are now in Parquet.
    pub fn remove(&mut self, path: &Path) {
        if let Err(e) = fs::remove_file(path) {
            self.stats.errors += 1;
            warn!(file = %path.display(), error = %e, "cannot delete a WAL segment whose rows are in Parquet; it is cleared at the next start");
        }
    }
}

fn create_segment(path: &Path, header: &[u8]) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        crate::create::create_dir_all(dir)?;
    }
    let file = crate::create::create_new(path)?;
    if let Err(e) = file.write_all_at(header, 0) {
        drop(file);
        let _ = fs::remove_file(path);
        return Err(e);
    }
    Ok(file)
}

fn spawn_syncer(errors: Arc<AtomicU64>) -> std::io::Result<SyncSender<SyncJob>> {
    // One job waits while one runs: enough to always have the newest
    // frames covered by the next sync.
    let (tx, rx) = mpsc::sync_channel::<SyncJob>(1);
    thread::Builder::new().name("apron-wal-sync".into()).stack_size(64 << 10).spawn(move || {
        for job in rx {
            let synced = job.file.sync_data().and_then(|()| match &job.dir {
                Some(dir) => crate::durable::sync_dir(dir),
                None => Ok(()),
            });
            if let Err(e) = synced {
                let n = errors.fetch_add(1, Ordering::Relaxed) + 1;
                if n == 1 || n.is_multiple_of(60) {
                    warn!(file = %job.path.display(), error = %e, errors = n,
                        "cannot sync WAL segment; a power loss could lose more than the last seconds");
                }
            }
        }
    })?;
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    use apron_schemas::{GpuSample, ProcSample};

    use crate::wal::format::read_segment;

    fn gpu(ts: i64, uuid: &str) -> GpuSample {
        GpuSample { ts, gpu_uuid: uuid.into(), interval_ms: 200, gpu_util_pct: Some(3), ..Default::default() }
    }

    #[test]
    fn syncs_once_per_period_of_tick_time() {
        assert!(sync_due(None, 0, 1_000));
        assert!(!sync_due(Some(0), 800, 1_000));
        assert!(sync_due(Some(0), 1_000, 1_000));
        assert!(sync_due(Some(5_000), 1_000, 1_000), "the clock stepped back");
        let due = (0..=25).map(|i| i * 200).fold((None, 0), |(last, n), ts| {
            if sync_due(last, ts, 1_000) { (Some(ts), n + 1) } else { (last, n) }
        });
        assert_eq!(due, (Some(5_000), 6), "ticks 0, 1000, …, 5000");
    }

    #[test]
    fn appended_ticks_are_readable_at_once_and_gone_after_finish() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let mut wal = Wal::new(layout.clone(), "n1", Duration::from_secs(1)).expect("wal");
        wal.begin(1_000, 2);
        let path = layout.wal_segment_path("n1", 1_000, 2);
        assert_eq!(wal.segment_path(), Some(path.as_path()));
        for i in 0..10 {
            let ts = 1_000 + i * 200;
            let gpus = [gpu(ts, "GPU-a"), gpu(ts, "GPU-b")];
            wal.append(ts, TickRows { gpus: &gpus, ..TickRows::default() });
        }
        // Readable without a sync or a close: what a kill -9 leaves.
        let rows = read_segment(&path).expect("readable");
        assert_eq!((rows.ticks, rows.gpus.len(), rows.torn_bytes), (10, 20, 0));
        assert_eq!(rows.header.map(|h| (h.start_ms, h.seq)), Some((1_000, 2)));
        let stats = wal.stats();
        assert_eq!((stats.segments, stats.frames, stats.errors), (1, 10, 0));
        assert!(stats.syncs >= 1, "the first tick is synced");
        wal.finish();
        assert!(!path.exists());
        assert_eq!(wal.segment_path(), None);
    }

    /// Process CPU time (all threads, user + system) from `/proc/self/stat`.
    fn cpu_time() -> Duration {
        let stat = fs::read_to_string("/proc/self/stat").expect("procfs");
        let fields: Vec<&str> = stat.rsplit_once(") ").expect("comm").1.split(' ').collect();
        let ticks: u64 =
            fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
        Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
    }

    #[test]
    #[ignore = "benchmark: cargo test --release -p apron-recorder --lib wal::tests::append_cost -- --ignored --nocapture"]
    fn append_cost() {
        use apron_schemas::ProcIdentity;
        // The target load: 8 GPUs and 16 processes, every metric present.
        let uuids: Vec<apron_schemas::Text> =
            (0..8).map(|i| format!("GPU-{i:08x}-1234-5678-9abc-def012345678").into()).collect();
        let model: apron_schemas::Text = "NVIDIA H100 80GB HBM3".into();
        let user: apron_schemas::Text = "alice".into();
        let comm: apron_schemas::Text = "python3".into();
        let rows = |ts: i64| {
            let gpus: Vec<GpuSample> = uuids
                .iter()
                .enumerate()
                .map(|(i, u)| GpuSample {
                    ts,
                    gpu_uuid: u.clone(),
                    gpu_index: i as i32,
                    gpu_model: Some(model.clone()),
                    interval_ms: 1_000,
                    gpu_util_pct: Some(87),
                    mem_util_pct: Some(40),
                    fb_used_bytes: Some(61_000_000_000 + ts % 1_000_000),
                    fb_total_bytes: Some(85_520_809_984),
                    power_mw: Some(612_345),
                    power_limit_mw: Some(700_000),
                    energy_mj: Some(123_456_789_012 + ts),
                    sm_clock_mhz: Some(1_980),
                    temp_c: Some(61),
                    enc_util_pct: Some(0),
                    dec_util_pct: Some(0),
                    pcie_tx_bytes_per_s: Some(1_234_567_890),
                    pcie_rx_bytes_per_s: Some(987_654_321),
                    clock_event_reasons: Some(4),
                    sm_active_pct: Some(71.5),
                    sm_occupancy_pct: Some(33.25),
                    tensor_active_pct: Some(45.0),
                    dram_active_pct: Some(52.5),
                    gr_engine_active_pct: Some(80.5),
                    parent_gpu_uuid: None,
                    mig_profile: None,
                    mig_slices: None,
                    mig_total_slices: None,
                })
                .collect();
            let procs: Vec<ProcSample> = (0..16)
                .map(|i| ProcSample {
                    ts,
                    gpu_uuid: uuids[i / 2].clone(),
                    pid: 100_000 + i as i32,
                    interval_ms: 1_000,
                    identity: ProcIdentity {
                        proc_start: Some(1_796_000_000_000),
                        comm: Some(comm.clone()),
                        uid: Some(1_000),
                        user: Some(user.clone()),
                        container_id: Some("3f4e5d6c7b8a".into()),
                        k8s_pod_uid: None,
                        k8s_namespace: Some("vision-train".into()),
                        ..ProcIdentity::default()
                    },
                    used_mem_bytes: Some(30_000_000_000),
                    sm_util_pct: Some(80),
                    mem_util_pct: Some(35),
                })
                .collect();
            (gpus, procs)
        };
        let ticks = 20_000i64;
        let prepared: Vec<_> = (0..ticks).map(|i| rows(1_796_083_200_000 + i * 1_000)).collect();

        let tmp = tempfile::tempdir().expect("tempdir");
        // Syncing once an hour of tick time: this measures the append alone.
        let mut wal =
            Wal::new(DataLayout::new(tmp.path()), "bench", Duration::from_secs(3_600)).expect("wal");
        wal.begin(1_796_083_200_000, 0);
        let (cpu0, t0) = (cpu_time(), std::time::Instant::now());
        for (i, (gpus, procs)) in prepared.iter().enumerate() {
            wal.append(1_796_083_200_000 + i as i64 * 1_000, TickRows { gpus, procs, ..TickRows::default() });
        }
        let (wall, cpu) = (t0.elapsed(), cpu_time() - cpu0);
        let stats = wal.stats();
        assert_eq!((stats.frames, stats.errors), (ticks as u64, 0));
        let per = |d: Duration| d.as_secs_f64() * 1e6 / ticks as f64;
        println!(
            "WAL append, 8 GPUs + 16 processes: {:.1} us wall, {:.1} us CPU per tick, {} bytes per tick",
            per(wall),
            per(cpu),
            stats.bytes / ticks as u64
        );

        // The sync, once per second in the recorder, runs on its own thread.
        let seg = wal.segment.as_ref().expect("open");
        let (cpu0, t0) = (cpu_time(), std::time::Instant::now());
        for _ in 0..200 {
            seg.file.write_all_at(&[0u8; 2_500], seg.len).expect("write");
            seg.file.sync_data().expect("sync");
        }
        let per_sync = |d: Duration| d.as_secs_f64() * 1e6 / 200.0;
        println!(
            "fdatasync after one tick's bytes: {:.0} us wall, {:.1} us CPU each",
            per_sync(t0.elapsed()),
            per_sync(cpu_time() - cpu0)
        );
    }

    #[test]
    fn an_existing_segment_is_never_replaced() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let path = layout.wal_segment_path("n1", 1_000, 0);
        fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        fs::write(&path, b"someone else's").expect("write");
        let mut wal = Wal::new(layout, "n1", Duration::from_secs(1)).expect("wal");
        wal.begin(1_000, 0);
        wal.append(1_000, TickRows { gpus: &[gpu(1_000, "GPU-a")], ..TickRows::default() });
        assert_eq!(fs::read(&path).expect("read"), b"someone else's");
        assert_eq!((wal.stats().segments, wal.stats().errors), (0, 1));
    }
}
