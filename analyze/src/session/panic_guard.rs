//! Keeps a panic inside a library from reaching the user as a panic.
//!
//! Some readers panic on damaged input instead of returning an error (the
//! Parquet footer decoder of arrow-rs 59 overflows on a footer whose length
//! field is garbage). apron treats such a panic like the error it should
//! have been: [`contain`] turns it into `Err(message)` so the caller can
//! name the file at fault, and [`install_quiet_hook`] stops the default hook
//! from printing a multi-line panic report and backtrace note on stderr.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Mutex;

use futures::FutureExt;

/// The last panic's message and location, as the hook saw it.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the panic hook with one that records the message and location
/// for [`contain`] and prints nothing (set `APRON_LOG=debug` to log it).
pub fn install_quiet_hook() {
    std::panic::set_hook(Box::new(|info: &PanicHookInfo<'_>| {
        let message = info.payload_as_str().unwrap_or("unknown panic");
        let text = match info.location() {
            Some(at) => format!("{message} (at {}:{})", at.file(), at.line()),
            None => message.to_owned(),
        };
        tracing::debug!(panic = %text, "a panic was caught");
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(text);
        }
    }));
}

/// Runs `fut`; a panic inside it becomes `Err` with its message.
pub async fn contain<F: Future>(fut: F) -> Result<F::Output, String> {
    AssertUnwindSafe(fut).catch_unwind().await.map_err(|payload| panic_message(payload.as_ref()))
}

/// The message of a caught panic: the hook's record when there is one (it
/// has the location), else the payload's text.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    let recorded = LAST_PANIC.lock().ok().and_then(|mut last| last.take());
    recorded.unwrap_or_else(|| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message() {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime starts");
        let caught = rt.block_on(contain(async { panic!("footer length {} overflows", 7) }));
        let message: String = caught.expect_err("the future panicked");
        assert!(message.contains("footer length 7 overflows"), "{message}");
        assert_eq!(rt.block_on(contain(async { 3 })), Ok(3));
    }
}
