//! The HTTP side of `/metrics`: one thread, one single-threaded async
//! runtime, HTTP/1.1 by `hyper`, and limits on everything a client
//! controls, so that no client can grow the recorder, hold up another
//! scrape, or keep the recorder from stopping.
//!
//! - **One thread.** Every connection is a task on the `metrics` thread's
//!   runtime, never a thread of its own: thousands of connections cost no
//!   thread, and no thread is started after [`start`].
//! - **Bounded connections.** At most [`MAX_CONNECTIONS`] are open; a new
//!   one past that closes the oldest that has not finished a request yet
//!   (else the oldest), so idle or slow clients cannot lock a scraper out.
//! - **Bounded requests.** A request's head may hold [`MAX_HEADERS`]
//!   headers in [`MAX_HEAD_BYTES`] bytes and must arrive within
//!   [`HEAD_TIMEOUT`] (a connection idle between requests too); past that
//!   the connection is answered 431 or closed. A body is never read.
//! - **Bounded writes.** A client that does not read its answers (one that
//!   pipelines requests and never reads) is dropped once a write has made
//!   no progress for [`WRITE_STALL_TIMEOUT`]; it holds up only itself
//!   meanwhile.
//! - **Bounded stop.** Once told to stop, the server stops accepting,
//!   lets answers in flight finish for at most [`STOP_GRACE`], then closes
//!   every connection.
//! - **Behind the tick.** The thread runs at a lower priority than the
//!   tick loop (nice +10), so a client that makes it busy takes its CPU
//!   time from nobody else.
//!
//! What is served is [`super::render`]'s; this module only answers.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;
use tracing::{debug, warn};

use super::render;
use super::snapshot::Snapshot;

/// Connections open at once; past it the oldest is closed (see the module
/// doc). A scraper needs one; Prometheus and Grafana agents a few.
pub const MAX_CONNECTIONS: usize = 64;

/// Headers one request may carry.
pub const MAX_HEADERS: usize = 32;

/// Bytes of one request's head: request line and headers. A scrape's is
/// under 1 KB; a proxy's bearer token fits.
pub const MAX_HEAD_BYTES: usize = 8 << 10;

/// The most a connection buffers of what it reads or writes, besides the
/// answer's body (hyper's smallest allowed value is 8 KiB).
const MAX_BUFFER_BYTES: usize = 16 << 10;

/// How long a request's head may take to arrive, counted from when the
/// connection waits for it (so also how long a connection may sit idle
/// between requests).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a write may wait for a client to read before the connection is
/// dropped.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopping server lets answers in flight finish.
pub const STOP_GRACE: Duration = Duration::from_millis(500);

/// How long [`Server::stop`] waits for the thread; the process is about to
/// exit then, and a thread still running does not keep it.
const JOIN_WAIT: Duration = Duration::from_secs(1);

/// How long to wait before accepting again after `accept` failed (out of
/// file descriptors): the failing connection waits in the queue, and
/// accepting at once would spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The running server: its thread, and how to stop it.
#[derive(Debug)]
pub(super) struct Server {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Stops accepting, gives answers in flight [`STOP_GRACE`], closes
    /// every connection, and waits for the thread (at most about a second
    /// past the grace; it is left to end by itself after that).
    pub(super) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.take() else { return };
        let deadline = Instant::now() + STOP_GRACE + JOIN_WAIT;
        while !thread.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if thread.is_finished() {
            let _ = thread.join();
        } else {
            warn!("the /metrics thread did not stop in time; leaving it");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What a scrape reads and the buffers it renders into, reused from one
/// scrape to the next.
struct Renderer {
    shared: Arc<Mutex<Snapshot>>,
    wal_dir: PathBuf,
    copy: Snapshot,
    text: String,
}

impl Renderer {
    /// The answer to `method` on `path`.
    fn answer(&mut self, method: &Method, path: &str) -> Response<Full<Bytes>> {
        let get = matches!(*method, Method::GET | Method::HEAD);
        let (status, body) = match (get, path) {
            (true, "/metrics") => {
                self.copy.copy_from(&self.shared.lock().unwrap_or_else(PoisonError::into_inner));
                self.copy.wal_bytes = apron_store::writer::wal_bytes_in(&self.wal_dir);
                self.text.clear();
                render(&self.copy, &mut self.text);
                let mut response = Response::new(Full::new(Bytes::copy_from_slice(self.text.as_bytes())));
                response.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                return response;
            }
            (true, "/") => (
                StatusCode::OK,
                &b"apron-recorder: the last tick is at /metrics (Prometheus text format)\n"[..],
            ),
            (true, _) => (StatusCode::NOT_FOUND, &b"not found: the metrics are at /metrics\n"[..]),
            (false, _) => (StatusCode::METHOD_NOT_ALLOWED, &b"only GET\n"[..]),
        };
        let mut response = Response::new(Full::new(Bytes::from_static(body)));
        *response.status_mut() = status;
        response
    }
}

/// Starts serving on `listener` from a thread of its own.
pub(super) fn start(
    listener: std::net::TcpListener,
    shared: Arc<Mutex<Snapshot>>,
    wal_dir: PathBuf,
) -> io::Result<Server> {
    listener.set_nonblocking(true)?;
    // Built here, so that a failure is the caller's error, not the thread's.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let renderer = Renderer { shared, wal_dir, copy: Snapshot::default(), text: String::new() };
    let thread = std::thread::Builder::new().name("metrics".into()).spawn(move || {
        lower_priority();
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => serve(listener, renderer, stop_rx).await,
                Err(e) => warn!(error = %e, "cannot serve /metrics"),
            }
        });
    })?;
    Ok(Server { stop: Some(stop_tx), thread: Some(thread) })
}

/// Lowers the calling thread's priority by 10 (on Linux, nice is per
/// thread). Raising nice needs no privilege; a failure only leaves it as
/// it was.
fn lower_priority() {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let Ok(who) = libc::id_t::try_from(tid) else { return };
    // SAFETY: getpriority/setpriority on this thread's own id; -1 is a valid
    // nice value, so errno is not consulted and a failure is only logged.
    unsafe {
        let nice = libc::getpriority(libc::PRIO_PROCESS, who);
        if libc::setpriority(libc::PRIO_PROCESS, who, (nice + 10).min(19)) != 0 {
            debug!(error = %io::Error::last_os_error(), "cannot lower the /metrics thread's priority");
        }
    }
}

/// Accepts and serves connections until `stop` fires (or its sender is
/// dropped), then shuts down within [`STOP_GRACE`].
async fn serve(listener: TcpListener, renderer: Renderer, mut stop: oneshot::Receiver<()>) {
    let renderer = Rc::new(RefCell::new(renderer));
    let open = Rc::new(RefCell::new(Open::default()));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_BUFFER_BYTES)
        .keep_alive(true);
    let mut last_warning: Option<Instant> = None;
    loop {
        let accepted = match until(&mut stop, std::future::poll_fn(|cx| listener.poll_accept(cx))).await {
            Some(accepted) => accepted,
            None => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely; say so once a minute.
                if last_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                    warn!(error = %e, "cannot accept a /metrics connection; trying again");
                    last_warning = Some(Instant::now());
                }
                if until(&mut stop, tokio::time::sleep(ACCEPT_RETRY)).await.is_none() {
                    break;
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let answered = Rc::new(Cell::new(false));
        let service = {
            let (renderer, answered) = (Rc::clone(&renderer), Rc::clone(&answered));
            hyper::service::service_fn(move |request: Request<Incoming>| {
                answered.set(true);
                let response = renderer.borrow_mut().answer(request.method(), request.uri().path());
                std::future::ready(Ok::<_, Infallible>(response))
            })
        };
        let connection =
            graceful.watch(http.serve_connection(TokioIo::new(WriteStall::new(stream)), service));
        let id = open.borrow_mut().next_id();
        let closed = Deregister { open: Rc::clone(&open), id };
        let task = tokio::task::spawn_local(async move {
            let _closed = closed;
            if let Err(e) = connection.await {
                debug!(error = %e, "a /metrics connection ended");
            }
        });
        let evicted = open.borrow_mut().add(id, task.abort_handle(), answered);
        if let Some(evicted) = evicted {
            evicted.abort();
        }
    }
    drop(listener);
    // Answers in flight finish; idle connections close now; the rest are
    // dropped with the runtime when the grace is over.
    if tokio::time::timeout(STOP_GRACE, graceful.shutdown()).await.is_err() {
        debug!(left = open.borrow().conns.len(), "closing /metrics connections still busy at the stop");
    }
}

/// `fut`'s output, or `None` once `stop` fires first.
async fn until<F: Future>(stop: &mut oneshot::Receiver<()>, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if Pin::new(&mut *stop).poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

/// The open connections, oldest first.
#[derive(Default)]
struct Open {
    conns: VecDeque<Conn>,
    ids: u64,
}

/// An open connection.
struct Conn {
    id: u64,
    task: AbortHandle,
    /// Whether it sent a whole request yet.
    answered: Rc<Cell<bool>>,
}

impl Open {
    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    /// Adds a connection; when that makes more than [`MAX_CONNECTIONS`],
    /// takes out the one to close and returns its task.
    fn add(&mut self, id: u64, task: AbortHandle, answered: Rc<Cell<bool>>) -> Option<AbortHandle> {
        self.conns.push_back(Conn { id, task, answered });
        if self.conns.len() <= MAX_CONNECTIONS {
            return None;
        }
        let answered: Vec<bool> = self.conns.iter().map(|c| c.answered.get()).collect();
        let at = to_close(&answered);
        self.conns.remove(at).map(|c| c.task)
    }

    fn remove(&mut self, id: u64) {
        if let Some(at) = self.conns.iter().position(|c| c.id == id) {
            self.conns.remove(at);
        }
    }
}

/// Which connection to close when too many are open, given for each,
/// oldest first, whether it sent a whole request yet: the oldest that has
/// not (a client that connects and sends nothing, or sends slowly), else
/// the oldest. The newest is never chosen while another is open, so a
/// scraper that just connected gets its chance.
fn to_close(answered: &[bool]) -> usize {
    let older = answered.len().saturating_sub(1);
    answered[..older].iter().position(|a| !a).unwrap_or(0)
}

/// Takes a connection out of [`Open`] when its task ends or is dropped.
struct Deregister {
    open: Rc<RefCell<Open>>,
    id: u64,
}

impl Drop for Deregister {
    fn drop(&mut self) {
        // A task aborted while `Open` is borrowed (being added) is dropped
        // later, by the runtime, so the borrow is free here; be safe anyway.
        if let Ok(mut open) = self.open.try_borrow_mut() {
            open.remove(self.id);
        }
    }
}

/// A connection whose writes fail with `TimedOut` once one has waited
/// [`WRITE_STALL_TIMEOUT`] for the client to read.
struct WriteStall {
    stream: TcpStream,
    /// When the write waiting now gives up; `None` when none waits.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl WriteStall {
    fn new(stream: TcpStream) -> Self {
        WriteStall { stream, stalled: None }
    }

    /// `polled` (a write's outcome), or `TimedOut` once the write has
    /// waited too long.
    fn limit<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_STALL_TIMEOUT)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of its answer for 10 s",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteStall {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteStall {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.limit(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.limit(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_flush(cx);
        self.limit(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.limit(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_connection_without_a_request_is_closed_first() {
        assert_eq!(to_close(&[true, true, false, true, false]), 2);
        assert_eq!(to_close(&[false, false]), 0);
        // Every older one has had its answer: the oldest goes.
        assert_eq!(to_close(&[true, true, false]), 0, "never the newest");
        assert_eq!(to_close(&[true, true, true]), 0);
        assert_eq!(to_close(&[false]), 0);
    }
}
