//! SIGTERM and SIGINT as events the tick loop waits for, together with its
//! next deadline, in one system call; and SIGUSR1, which the recorder's
//! own threads send the loop's thread to wake it when a GPU event arrives
//! ([`StopSignals::waker`]), so the event is written at once.
//!
//! The signals are blocked in every thread ([`StopSignals::block`] must run
//! before any thread starts, NVML's included, since threads inherit the
//! mask), and the loop sleeps in `sigtimedwait(2)` until its next tick: it
//! wakes once per tick, and at once on a stop signal. An async runtime's
//! timer wheel woke the process three times per tick for the same sleep.

use std::io;
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal};

/// Why [`StopSignals::sleep`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The time was up.
    Deadline,
    /// A stop signal arrived.
    Stop(Signal),
    /// A waker ([`StopSignals::waker`]) woke the loop: events wait.
    Events,
}

/// SIGTERM and SIGINT, blocked and waited for.
#[derive(Debug)]
pub struct StopSignals {
    set: SigSet,
}

impl StopSignals {
    /// Blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread and every
    /// thread it starts from now on. Call it first thing in `main`.
    pub fn block() -> io::Result<StopSignals> {
        let mut set = SigSet::empty();
        set.add(Signal::SIGTERM);
        set.add(Signal::SIGINT);
        set.add(Signal::SIGUSR1);
        set.thread_block().map_err(io::Error::from)?;
        Ok(StopSignals { set })
    }

    /// A function that ends the calling thread's [`StopSignals::sleep`]
    /// (now, or at its next call) with [`Wake::Events`], from any thread:
    /// it sends SIGUSR1 to this thread alone, where it is blocked and so
    /// waits for the sleep to take it.
    pub fn waker(&self) -> std::sync::Arc<dyn Fn() + Send + Sync> {
        let thread = nix::sys::pthread::pthread_self();
        std::sync::Arc::new(move || {
            // Fails only for a thread that has ended: nothing to wake.
            let _ = nix::sys::pthread::pthread_kill(thread, Signal::SIGUSR1);
        })
    }

    /// Sleeps for `wait`, or until a stop signal arrives.
    pub fn sleep(&self, wait: Duration) -> io::Result<Wake> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                // A signal that arrived meanwhile is still pending and is
                // taken at the next sleep.
                return Ok(Wake::Deadline);
            }
            let timeout = libc::timespec {
                tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(left.subsec_nanos()),
            };
            // SAFETY: the set is a valid, initialised sigset_t; a null info
            // pointer is allowed; the timespec outlives the call.
            let rc = unsafe { libc::sigtimedwait(self.set.as_ref(), std::ptr::null_mut(), &timeout) };
            if rc >= 0 {
                let signal = Signal::try_from(rc).map_err(io::Error::from)?;
                if signal == Signal::SIGUSR1 {
                    return Ok(Wake::Events);
                }
                return Ok(Wake::Stop(signal));
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(Wake::Deadline),
                Some(libc::EINTR) => continue,
                _ => return Err(err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_stop_signal_ends_the_sleep_at_once() {
        let signals = StopSignals::block().expect("block");
        // Sent to this thread only, so other tests' threads are untouched;
        // blocked, it stays pending until the wait takes it.
        nix::sys::pthread::pthread_kill(nix::sys::pthread::pthread_self(), Signal::SIGINT).expect("raise");
        let t0 = std::time::Instant::now();
        assert_eq!(signals.sleep(Duration::from_secs(5)).expect("wait"), Wake::Stop(Signal::SIGINT));
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(signals.sleep(Duration::from_millis(20)).expect("wait"), Wake::Deadline);
    }

    #[test]
    fn a_waker_on_another_thread_ends_the_sleep_with_events() {
        let signals = StopSignals::block().expect("block");
        let wake = signals.waker();
        let t0 = std::time::Instant::now();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            wake();
        });
        assert_eq!(signals.sleep(Duration::from_secs(5)).expect("wait"), Wake::Events);
        assert!(t0.elapsed() < Duration::from_secs(2));
        waker.join().expect("the waker thread");
        assert_eq!(signals.sleep(Duration::from_millis(20)).expect("wait"), Wake::Deadline);
    }
}
