//! `/metrics`: the last tick in the Prometheus text format, with
//! dcgm-exporter's names, units and labels (so its Grafana dashboards and
//! alert rules work unchanged), and apron's own: per-process GPU memory,
//! each GPU's state over the last full minute, the recorder's health.
//!
//! A scrape never blocks or delays a tick. The tick loop hands each tick to
//! a [`Publisher`], which keeps the minute states and copies the tick into
//! the shared [`Snapshot`] only when it can take the lock without waiting
//! (`try_lock`); a tick that finds it taken leaves the copy to the next
//! tick. The scrape thread holds the lock only to copy the snapshot out
//! (microseconds), then renders its copy. Both copies reuse their buffers:
//! a steady tick allocates nothing here (`tests/tick_allocations.rs`).
//!
//! The HTTP server, and the limits that keep a hostile client from growing
//! the recorder, holding up other scrapes or delaying its stop, are
//! [`serve`]'s.

pub mod faults;
mod minute;
mod render;
pub mod serve;
mod snapshot;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use apron_store::source::Tick;

pub use minute::{MinuteReport, MinuteStates, State};
pub use render::render;
pub use snapshot::{Health, Snapshot};

/// The default idle threshold (%) of a GPU-minute's state: apron.toml's
/// `idle.threshold_pct` default.
pub const DEFAULT_IDLE_THRESHOLD_PCT: f64 = 5.0;

/// The tick loop's side: keeps the minute states and copies each tick into
/// the shared snapshot without ever waiting for a scrape.
#[derive(Debug)]
pub struct Publisher {
    shared: Arc<Mutex<Snapshot>>,
    minutes: MinuteStates,
    faults: faults::FaultState,
    late_copies: u64,
}

impl Publisher {
    /// A publisher of ticks into `shared`.
    fn new(shared: Arc<Mutex<Snapshot>>, threshold_pct: f64) -> Self {
        Publisher {
            shared,
            minutes: MinuteStates::new(threshold_pct),
            faults: faults::FaultState::default(),
            late_copies: 0,
        }
    }

    /// A publisher with no server, for tests and benchmarks: what it
    /// publishes is read back with [`Publisher::snapshot`].
    pub fn detached(host: &str, threshold_pct: f64) -> Self {
        let snapshot = Snapshot { host: host.to_owned(), ..Snapshot::default() };
        Publisher::new(Arc::new(Mutex::new(snapshot)), threshold_pct)
    }

    /// A copy of what a scrape would serve now.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Publishes the tick at `ts_ms`. Never waits: when a scrape holds the
    /// snapshot, this tick is not copied (the next one is).
    pub fn publish(&mut self, ts_ms: i64, tick: &Tick, health: &Health) {
        self.minutes.add(&tick.gpus, &tick.procs, &tick.allocations);
        self.faults.add(&tick.events, &tick.readings);
        let mut snapshot = match self.shared.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.late_copies += 1;
                return;
            }
        };
        snapshot.ts_ms = Some(ts_ms);
        snapshot.gpus.clone_from(&tick.gpus);
        snapshot.procs.clone_from(&tick.procs);
        self.minutes.reports().clone_into(&mut snapshot.minutes);
        snapshot.health = *health;
        snapshot.late_copies = self.late_copies;
        if snapshot.faults_version != self.faults.version {
            snapshot.faults.clone_from(&self.faults.gpus);
            snapshot.faults_version = self.faults.version;
        }
    }

    /// Takes events that arrived between ticks (an XID): served from the
    /// next tick's copy on.
    pub fn events(&mut self, events: &[apron_schemas::GpuEvent]) {
        self.faults.add(events, &[]);
    }
}

/// `--metrics`: a bare port (`9400`) or `:9400` is on the loopback
/// address; any other address is taken as written (`0.0.0.0:9400`).
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let loopback = |port: &str| {
        port.parse::<u16>()
            .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p))
            .map_err(|e| e.to_string())
    };
    if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
        return loopback(s);
    }
    if let Some(port) = s.strip_prefix(':') {
        return loopback(port);
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let mut resolved = s
        .to_socket_addrs()
        .map_err(|e| format!("{e} (expected PORT, :PORT or ADDRESS:PORT, e.g. 127.0.0.1:9400)"))?;
    resolved.next().ok_or_else(|| "resolves to no address (expected PORT, :PORT or ADDRESS:PORT)".to_owned())
}

/// `/metrics` could not be served.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve /metrics on {addr}: {message}")]
pub struct ServeError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why.
    pub message: String,
}

/// The HTTP server of `/metrics`, on a thread of its own
/// ([`serve`](self::serve) says what it bounds); stopped when dropped.
#[derive(Debug)]
pub struct MetricsServer {
    server: serve::Server,
    addr: SocketAddr,
}

impl MetricsServer {
    /// Listens on `addr` and serves `host`'s snapshot; `pci_bus_ids` by
    /// GPU index; `wal_dir` is the host's WAL folder, whose size each
    /// scrape reads. Returns the server and the tick loop's publisher.
    pub fn start(
        addr: SocketAddr,
        host: &str,
        pci_bus_ids: Vec<Option<String>>,
        wal_dir: PathBuf,
        threshold_pct: f64,
    ) -> Result<(MetricsServer, Publisher), ServeError> {
        let listener = listen(addr).map_err(|e| ServeError { addr, message: e.to_string() })?;
        let addr = listener.local_addr().unwrap_or(addr);
        let snapshot = Snapshot { host: host.to_owned(), pci_bus_ids, ..Snapshot::default() };
        let shared = Arc::new(Mutex::new(snapshot));
        let publisher = Publisher::new(Arc::clone(&shared), threshold_pct);
        let server = serve::start(listener, shared, wal_dir)
            .map_err(|e| ServeError { addr, message: format!("cannot start its thread: {e}") })?;
        Ok((MetricsServer { server, addr }, publisher))
    }

    /// The address it listens on (the port chosen, when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: answers in flight get [`serve::STOP_GRACE`], then
    /// every connection is closed, whatever its client does.
    pub fn stop(&mut self) {
        self.server.stop();
    }
}

/// A listening socket on `addr` whose connections send without delay
/// (TCP_NODELAY, which accepted sockets inherit): a scrape's answer leaves
/// at once instead of waiting for the scraper to acknowledge its headers.
fn listen(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    Ok(socket.into())
}
