//! `apron-recorder --metrics` against hostile clients: a real recorder on
//! the simulated source, attacked over real sockets, watched from outside
//! through `/proc/PID/status` (`VmRSS`, `Threads`) and its own counters.
//!
//! - one connection sending a header of hundreds of MB: refused and
//!   closed after a few KB, memory flat;
//! - one client pipelining 2,000 GETs and never reading: other scrapes
//!   answer as before, and the server gives up on it;
//! - thousands of connections that never finish a request: no thread
//!   each, memory flat, and a scrape still answers;
//! - SIGTERM with all of them connected: the recorder exits at once, every
//!   row written, no tick missed.
//!
//! Each test prints its figures (`figure: …` lines; run with
//! `--nocapture` to see them): RSS before and at its peak, the threads,
//! the well-behaved scrape's latency, the exit time. Bounds are generous
//! (a busy 2-core machine); the figures say what was measured.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use apron_tests::prometheus::free_port;

/// One attack at a time: the figures are each attack's alone.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A recording recorder serving `/metrics`, its log in a file.
struct Recorder {
    child: Option<Child>,
    addr: SocketAddr,
    log: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Recorder {
    /// Starts `apron-recorder --source sim --metrics 127.0.0.1:PORT` (8
    /// GPUs, a tick a second) and waits until a scrape serves a tick.
    fn start() -> Recorder {
        let tmp = tempfile::tempdir().expect("tempdir");
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("an address");
        let log = tmp.path().join("recorder.log");
        let child = Command::new(apron_tests::bin("apron-recorder"))
            .arg("--data")
            .arg(tmp.path().join("data"))
            .args(["--source", "sim", "--sim-gpus", "8", "--host", "hostile", "--interval", "1s"])
            .args(["--metrics", &addr.to_string()])
            .env("APRON_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("the log file"))
            .spawn()
            .expect("the recorder starts");
        let recorder = Recorder { child: Some(child), addr, log, _tmp: tmp };
        let t0 = Instant::now();
        while !scrape(addr, Duration::from_secs(5)).is_ok_and(|s| s.body.contains("DCGM_FI_DEV_GPU_UTIL{")) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "no tick served within 60 s:\n{}",
                recorder.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        recorder
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `field` of `/proc/PID/status` (kB for `VmRSS`, a count for `Threads`).
    fn status(&self, field: &str) -> u64 {
        proc_status(self.pid(), field)
            .unwrap_or_else(|| panic!("no {field} for the recorder:\n{}", self.log()))
    }

    /// The recorder's missed ticks as it serves them now.
    fn missed_ticks(&self) -> u64 {
        let s = scrape(self.addr, Duration::from_secs(20)).expect("a scrape answers");
        let line = s
            .body
            .lines()
            .find(|l| l.starts_with("apron_recorder_missed_ticks_total{"))
            .unwrap_or_else(|| panic!("no missed ticks counter:\n{}", s.body));
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("a count")
    }

    /// Sends SIGTERM and waits at most `limit` for the exit: the time it
    /// took, and the `missed=` of its last line.
    fn stop(&mut self, limit: Duration) -> (Duration, u64) {
        let mut child = self.child.take().expect("running");
        apron_tests::signal(&child, libc::SIGTERM);
        let t0 = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                break status;
            }
            if t0.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the recorder did not exit within {limit:?} of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = t0.elapsed();
        let log = self.log();
        assert!(status.success(), "the recorder failed ({status}):\n{log}");
        let stop = log.lines().find(|l| l.contains("recorder stopped")).expect("a stop line");
        (took, field(stop, "missed").unwrap_or_else(|| panic!("no missed= in {stop}")))
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A field of `/proc/PID/status`, its first number.
fn proc_status(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:")))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The value of `name=N` in a log line.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..].split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Samples a `/proc/PID/status` field every 10 ms until dropped; keeps the
/// largest value.
struct Peak {
    max: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Peak {
    fn watch(pid: u32, field: &'static str) -> Peak {
        let (max, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (m, s) = (Arc::clone(&max), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(v) = proc_status(pid, field) {
                    m.fetch_max(v, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Peak { max, stop, thread: Some(thread) }
    }

    fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One well-behaved scrape's answer.
struct Scrape {
    status: u16,
    body: String,
    took: Duration,
}

/// `GET /metrics` on a connection of its own, as Prometheus does, given
/// at most `limit` to connect and answer.
fn scrape(addr: SocketAddr, limit: Duration) -> std::io::Result<Scrape> {
    let t0 = Instant::now();
    let mut stream = TcpStream::connect_timeout(&addr, limit)?;
    stream.set_read_timeout(Some(limit))?;
    stream.set_write_timeout(Some(limit))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let took = t0.elapsed();
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok(Scrape { status, body: body.to_owned(), took })
}

/// `n` well-behaved scrapes, one after another, each of which must answer
/// 200 with a tick within 20 s: their latencies, sorted.
fn scrapes(addr: SocketAddr, n: usize, log: impl Fn() -> String) -> Vec<Duration> {
    let mut took: Vec<Duration> = (0..n)
        .map(|i| {
            let s = scrape(addr, Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("well-behaved scrape {i} got no answer: {e}\n{}", log()));
            assert_eq!(s.status, 200, "scrape {i}: {}", s.body);
            assert!(s.body.contains("DCGM_FI_DEV_GPU_UTIL{"), "scrape {i} served no tick: {}", s.body);
            std::thread::sleep(Duration::from_millis(50));
            s.took
        })
        .collect();
    took.sort();
    took
}

/// "min … median … max" of sorted latencies, in ms.
fn latencies(took: &[Duration]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "min {:.1} ms, median {:.1} ms, max {:.1} ms ({} scrapes)",
        ms(took[0]),
        ms(took[took.len() / 2]),
        ms(took[took.len() - 1]),
        took.len()
    )
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// The head of a request whose header then never ends.
const ENDLESS_HEADER: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: apron\r\nX-Filler: ";

/// Sends a header of up to `total` bytes on `stream` in 1 MiB pieces until
/// the server stops taking it: the bytes it took.
fn send_huge_header(mut stream: TcpStream, total: u64) -> u64 {
    stream.set_write_timeout(Some(Duration::from_secs(30))).expect("a timeout");
    let piece = vec![b'a'; 1 << 20];
    let mut sent = 0u64;
    if stream.write_all(ENDLESS_HEADER).is_err() {
        return 0;
    }
    while sent < total {
        match stream.write(&piece) {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n as u64,
        }
    }
    sent
}

/// A client that sends `n` GETs of `/metrics` in one go and reads nothing:
/// its socket, kept open by the caller.
fn pipeline_without_reading(addr: SocketAddr, n: usize) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connects");
    let requests: Vec<u8> =
        (0..n).flat_map(|_| format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes()).collect();
    let mut writer = stream.try_clone().expect("a second handle");
    // From a thread: once the server stops reading, the write blocks.
    std::thread::spawn(move || {
        let _ = writer.set_write_timeout(Some(Duration::from_secs(60)));
        let _ = writer.write_all(&requests);
    });
    stream
}

/// `n` connections that start a request and never finish it; those the
/// server refused at once are not counted.
fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else { continue };
        if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: apron\r\n").is_ok() {
            open.push(s);
        }
    }
    open
}

/// Raises this process's open-file limit to its hard limit (a recorder
/// started afterwards inherits it), so thousands of sockets fit.
fn raise_file_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid, initialised rlimit struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    limit.rlim_cur
}

/// 300 MB of header on one connection: the recorder reads a few KB of it,
/// answers 431 and closes; its memory does not grow with what the client
/// sends, it misses no tick, and the next scrape answers.
#[test]
fn a_huge_header_is_cut_off_and_memory_stays_flat() {
    let _serial = serial();
    let recorder = Recorder::start();
    let before = recorder.status("VmRSS");
    let peak = Peak::watch(recorder.pid(), "VmRSS");
    let total = 300u64 << 20;
    let t0 = Instant::now();
    let stream = TcpStream::connect(recorder.addr).expect("connects");
    let sent = send_huge_header(stream, total);
    let took = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let (peak_kb, after) = (peak.max(), recorder.status("VmRSS"));
    drop(peak);
    let took_scrapes = scrapes(recorder.addr, 5, || recorder.log());
    let missed = recorder.missed_ticks();
    println!(
        "figure: huge header: connection closed after {:.1} MB of {} MB sent ({:.2} s); recorder RSS {:.1} MB before, {:.1} MB peak, {:.1} MB after; scrapes after: {}; missed ticks {missed}",
        sent as f64 / 1e6,
        total >> 20,
        took.as_secs_f64(),
        mb(before),
        mb(peak_kb),
        mb(after),
        latencies(&took_scrapes),
    );
    assert!(sent < 64 << 20, "the recorder took {sent} bytes of one header");
    assert!(peak_kb < before + 32 * 1024, "RSS grew from {before} kB to {peak_kb} kB");
    assert_eq!(missed, 0);
}

/// One client pipelines 2,000 GETs and never reads an answer: scrapes by
/// others answer meanwhile as they do without it, no tick is missed, and
/// the server gives up on the client that does not read (it closes the
/// connection after fewer than 2,000 answers).
#[test]
fn a_client_that_pipelines_without_reading_holds_up_no_other_scrape() {
    let _serial = serial();
    let recorder = Recorder::start();
    let quiet = scrapes(recorder.addr, 10, || recorder.log());
    let before = recorder.status("VmRSS");
    let peak = Peak::watch(recorder.pid(), "VmRSS");
    let started = Instant::now();
    let mut greedy = pipeline_without_reading(recorder.addr, 2000);
    // Long enough for its answers to fill both sockets' buffers.
    std::thread::sleep(Duration::from_secs(2));
    let meanwhile = scrapes(recorder.addr, 20, || recorder.log());
    let peak_kb = peak.max();
    drop(peak);
    let missed = recorder.missed_ticks();
    // Past the time the server waits for a client to read (10 s), read
    // what reached the client until the server closes.
    std::thread::sleep(Duration::from_secs(15).saturating_sub(started.elapsed()));
    greedy.set_read_timeout(Some(Duration::from_secs(60))).expect("a timeout");
    let mut got = Vec::new();
    let t0 = Instant::now();
    let end = greedy.read_to_end(&mut got).map(|_| "closed").or_else(|e| match e.kind() {
        ErrorKind::ConnectionReset => Ok("reset"),
        _ => Err(e),
    });
    let answers = String::from_utf8_lossy(&got).matches("HTTP/1.1 200").count();
    println!(
        "figure: pipelining 2000 GETs without reading: scrapes before {}; meanwhile {}; recorder RSS {:.1} MB before, {:.1} MB peak; missed ticks {missed}; the server answered {answers} of 2000 and the connection was {end:?} ({:.1} s to read what was sent)",
        latencies(&quiet),
        latencies(&meanwhile),
        mb(before),
        mb(peak_kb),
        t0.elapsed().as_secs_f64(),
    );
    let end =
        end.unwrap_or_else(|e| panic!("the server never gave up on the client that does not read: {e}"));
    assert!(answers < 2000, "all 2000 answered ({end}): the server waited for the client");
    assert!(peak_kb < before + 32 * 1024, "RSS grew from {before} kB to {peak_kb} kB");
    assert_eq!(missed, 0);
}

/// 3,000 connections that never finish their request: the recorder's
/// threads stay as they were (no thread per connection), its memory flat,
/// and a scrape still answers while they are all open.
#[test]
fn thousands_of_idle_connections_take_no_thread_each_and_scrapes_answer() {
    let _serial = serial();
    let files = raise_file_limit();
    assert!(files > 3100, "the open-file limit ({files}) does not allow 3,000 connections");
    let recorder = Recorder::start();
    let (threads, before) = (recorder.status("Threads"), recorder.status("VmRSS"));
    let peak_threads = Peak::watch(recorder.pid(), "Threads");
    let peak_rss = Peak::watch(recorder.pid(), "VmRSS");
    let t0 = Instant::now();
    let idle = idle_connections(recorder.addr, 3000);
    let opened = t0.elapsed();
    let meanwhile = scrapes(recorder.addr, 10, || recorder.log());
    let (max_threads, peak_kb) = (peak_threads.max(), peak_rss.max());
    drop((peak_threads, peak_rss));
    let missed = recorder.missed_ticks();
    println!(
        "figure: 3000 idle connections ({} connected in {:.1} s): recorder threads {threads} before, {max_threads} at most; RSS {:.1} MB before, {:.1} MB peak; scrapes meanwhile {}; missed ticks {missed}",
        idle.len(),
        opened.as_secs_f64(),
        mb(before),
        mb(peak_kb),
        latencies(&meanwhile),
    );
    assert!(max_threads <= threads + 2, "threads grew from {threads} to {max_threads}");
    assert!(peak_kb < before + 32 * 1024, "RSS grew from {before} kB to {peak_kb} kB");
    assert_eq!(missed, 0);
    drop(idle);
}

/// SIGTERM while a client pipelines without reading, another sends an
/// endless header, and hundreds never finish their request: the recorder
/// exits 0 at once (the requirement is 2 s; the bound here allows a busy
/// machine), having written every row and missed no tick.
#[test]
fn sigterm_with_hostile_clients_connected_exits_at_once() {
    let _serial = serial();
    let files = raise_file_limit();
    assert!(files > 600, "the open-file limit ({files}) does not allow 500 connections");
    let mut recorder = Recorder::start();
    let addr = recorder.addr;
    let _greedy = pipeline_without_reading(addr, 2000);
    let _idle = idle_connections(addr, 500);
    let header = std::thread::spawn(move || {
        // An endless header, a little at a time, for as long as it is taken.
        let mut s = TcpStream::connect(addr).expect("connects");
        let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
        let _ = s.write_all(ENDLESS_HEADER);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) && s.write_all(b"aaaa").is_ok() {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    let (took, missed) = recorder.stop(Duration::from_secs(20));
    println!(
        "figure: SIGTERM with a pipelining client, an endless header and 500 idle connections: exited in {:.3} s; missed ticks {missed}",
        took.as_secs_f64()
    );
    assert!(took < Duration::from_secs(10), "exit took {took:?}");
    assert_eq!(missed, 0);
    drop(header);
}
