//! The driver's events, as they happen: a thread of its own waits in NVML's
//! event set (`nvmlEventSetWait`, asleep in the driver until an event
//! comes, so a tick pays nothing for it) for every GPU's critical XID
//! errors, single- and double-bit ECC errors, power-source changes and MIG
//! reconfigurations, and hands each event to the tick loop at once (it
//! writes it to the WAL without waiting for the next tick).
//!
//! Performance-state and clock changes are not registered: a GPU changes
//! them whenever its load does, and each tick records the clocks and the
//! reasons they were held back anyway.
//!
//! The thread never calls a GPU's own queries while it waits: an event
//! names its GPU by the handle registered for it, looked up here, so a GPU
//! whose calls hang (after an XID 79) cannot keep the others' events
//! waiting. When NVML is re-initialised (a driver reload: the event set
//! and handles are the old driver's and answer nothing more), the thread
//! registers every GPU again in a new set.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apron_schemas::gpu_events::{ECC_DBE, ECC_SBE, MIG_CONFIG, POWER_SOURCE, XID};
use apron_schemas::{GpuEvent, Text};
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, EventSet, Nvml};

/// How long one wait in the driver lasts before the thread looks whether
/// it should stop.
const WAIT_MS: u32 = 1_000;

/// How long the thread pauses after a wait that failed (a GPU lost: NVML
/// answers at once), so it does not spin.
const PAUSE_AFTER_ERROR: Duration = Duration::from_millis(500);

/// The event types asked for, where a GPU supports them.
fn wanted() -> EventTypes {
    EventTypes::CRITICAL_XID_ERROR
        | EventTypes::SINGLE_BIT_ECC_ERROR
        | EventTypes::DOUBLE_BIT_ECC_ERROR
        | EventTypes::POWER_SOURCE_CHANGE
        | EventTypes::MIG_CONFIG_CHANGE
}

/// What the event thread registered, per GPU: for the log, and for a
/// device check to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// NVML index.
    pub gpu_index: u32,
    /// The kinds registered (`xid`, `ecc_sbe`, …); empty when none could be.
    pub kinds: Vec<&'static str>,
    /// Why not, when not all wanted were: NVML's words, or the types the GPU
    /// does not support.
    pub note: Option<String>,
}

/// Called by the event thread after it queued an event: wakes the tick
/// loop so the event is written at once.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// Events received and not yet taken by the tick loop, and who to wake.
#[derive(Default)]
pub struct Inbox {
    events: Mutex<Vec<GpuEvent>>,
    wake: Mutex<Option<Wake>>,
    /// How many times NVML was re-initialised: the event thread registers
    /// again when it changes.
    reopened: AtomicU64,
    /// Held by the event thread while it is in NVML, and by
    /// [`Inbox::outside_nvml`]: NVML is never shut down under a wait.
    in_nvml: Mutex<()>,
    /// Set while [`Inbox::outside_nvml`] waits for the lock, so the event
    /// thread does not take it again first.
    wanted_out: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("events", &self.events).finish_non_exhaustive()
    }
}

impl Inbox {
    /// Moves the events received so far to `out`.
    pub fn take(&self, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.events.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// Runs `f` (NVML's shutdown and init) while the event thread is out of
    /// NVML: it waits for the thread's current wait to end (at most
    /// [`WAIT_MS`]).
    pub fn outside_nvml<T>(&self, f: impl FnOnce() -> T) -> T {
        self.wanted_out.store(true, Ordering::SeqCst);
        let held = self.in_nvml.lock().unwrap_or_else(PoisonError::into_inner);
        let out = f();
        drop(held);
        self.wanted_out.store(false, Ordering::SeqCst);
        out
    }

    /// Tells the event thread NVML was re-initialised: its set and handles
    /// are stale, it registers again.
    pub fn nvml_reopened(&self) {
        self.reopened.fetch_add(1, Ordering::SeqCst);
    }

    fn reopens(&self) -> u64 {
        self.reopened.load(Ordering::SeqCst)
    }

    /// Sets who to wake when an event arrives.
    pub fn set_wake(&self, wake: Wake) {
        *self.wake.lock().unwrap_or_else(PoisonError::into_inner) = Some(wake);
    }

    fn push(&self, event: GpuEvent) {
        self.events.lock().unwrap_or_else(PoisonError::into_inner).push(event);
        let wake = self.wake.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(wake) = wake {
            wake();
        }
    }
}

/// The kinds of `types`, in `gpu_events`' words.
pub fn kinds_of(types: EventTypes) -> Vec<&'static str> {
    [
        (EventTypes::CRITICAL_XID_ERROR, XID),
        (EventTypes::SINGLE_BIT_ECC_ERROR, ECC_SBE),
        (EventTypes::DOUBLE_BIT_ECC_ERROR, ECC_DBE),
        (EventTypes::POWER_SOURCE_CHANGE, POWER_SOURCE),
        (EventTypes::MIG_CONFIG_CHANGE, MIG_CONFIG),
    ]
    .into_iter()
    .filter(|(t, _)| types.contains(*t))
    .map(|(_, k)| k)
    .collect()
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Per registered GPU: its handle's address, NVML index and UUID.
type Registered = Vec<(usize, i32, Text)>;

/// Starts the event thread for the GPUs `devices` (by NVML index, each
/// handle or why there is none): registers each GPU's event
/// types (those of [`wanted`] it supports) in one event set, then waits
/// for events until the process ends, putting each into `inbox`, and
/// registers again in a new set after NVML is re-initialised
/// ([`Inbox::nvml_reopened`]). Returns what was registered; a GPU that
/// cannot register is a note, not an error (the samples go on without its
/// events).
pub fn spawn(
    nvml: &'static Nvml,
    devices: Vec<Result<Device<'static>, NvmlError>>,
    inbox: Arc<Inbox>,
) -> Vec<Registration> {
    let count = u32::try_from(devices.len()).unwrap_or(u32::MAX);
    let (mut set, mut gpus, registrations) = register(nvml, devices);
    log(&registrations, "NVML events registered");
    if count == 0 {
        return registrations;
    }
    let started = std::thread::Builder::new().name("nvml-events".into()).spawn(move || {
        let mut warned = false;
        let mut reopens = inbox.reopens();
        loop {
            if inbox.wanted_out.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            let held = inbox.in_nvml.lock().unwrap_or_else(PoisonError::into_inner);
            if inbox.reopens() != reopens {
                // NVML was re-initialised: the old set and handles answer
                // nothing more. Free the set, register afresh.
                reopens = inbox.reopens();
                drop(set.take());
                let devices = (0..count).map(|index| nvml.device_by_index(index)).collect();
                let registrations;
                (set, gpus, registrations) = register(nvml, devices);
                log(&registrations, "NVML events registered again after NVML was re-initialised");
                warned = false;
            }
            let Some(waiting) = &set else {
                // Nothing registered: only a re-initialisation can change that.
                drop(held);
                std::thread::sleep(Duration::from_millis(u64::from(WAIT_MS)));
                continue;
            };
            let waited = waiting.wait(WAIT_MS);
            drop(held);
            match waited {
                Ok(event) => {
                    // SAFETY: compared with the registered handles only.
                    let handle = unsafe { event.device.handle() } as usize;
                    let Some((_, index, uuid)) = gpus.iter().find(|(h, _, _)| *h == handle) else { continue };
                    for kind in kinds_of(event.event_type) {
                        let xid = match event.event_data {
                            Some(XidError::Value(v)) if kind == XID => i32::try_from(v).ok(),
                            _ => None,
                        };
                        let detail = match event.event_data {
                            Some(XidError::Unknown) if kind == XID => {
                                Some("XID unknown to the driver (999)".into())
                            }
                            _ => None,
                        };
                        inbox.push(GpuEvent {
                            ts: now_ms(),
                            gpu_uuid: uuid.clone(),
                            gpu_index: *index,
                            kind: kind.into(),
                            xid,
                            detail,
                            ..GpuEvent::default()
                        });
                    }
                }
                Err(NvmlError::Timeout) => {}
                Err(e) => {
                    // A lost GPU (its samples say so), or the driver going
                    // away: keep waiting, without spinning.
                    if !std::mem::replace(&mut warned, true) {
                        tracing::warn!(error = %e, "waiting for NVML events failed; waiting on");
                    }
                    std::thread::sleep(PAUSE_AFTER_ERROR);
                }
            }
        }
    });
    if let Err(e) = started {
        tracing::warn!(error = %e, "cannot start the NVML event thread: XID and ECC events are not recorded");
    }
    registrations
}

/// Registers each of `devices` (by NVML index) for the event types of
/// [`wanted`] it supports, in one new event set: the set (`None` when no
/// GPU could register), the GPUs registered and what each registered.
fn register(
    nvml: &'static Nvml,
    devices: Vec<Result<Device<'static>, NvmlError>>,
) -> (Option<EventSet<'static>>, Registered, Vec<Registration>) {
    let count = u32::try_from(devices.len()).unwrap_or(u32::MAX);
    let set = match nvml.create_event_set() {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "NVML cannot make an event set: XID and ECC events are not recorded \
                (error counters and lost GPUs still are)");
            let registrations = (0..count)
                .map(|gpu_index| Registration { gpu_index, kinds: Vec::new(), note: Some(e.to_string()) })
                .collect();
            return (None, Vec::new(), registrations);
        }
    };
    let mut set = Some(set);
    let mut registrations = Vec::new();
    let mut gpus: Registered = Vec::new();
    for (gpu_index, device) in (0..).zip(devices) {
        let mut reg = Registration { gpu_index, kinds: Vec::new(), note: None };
        let device = match device {
            Ok(d) => d,
            Err(e) => {
                reg.note = Some(format!("no handle: {e}"));
                registrations.push(reg);
                continue;
            }
        };
        let uuid: Text = device.uuid().map_or_else(|_| format!("index-{gpu_index}").into(), Into::into);
        let types = match device.supported_event_types() {
            Ok(t) => t & wanted(),
            Err(e) => {
                reg.note = Some(format!("no events: {e}"));
                registrations.push(reg);
                continue;
            }
        };
        if types.is_empty() {
            reg.note = Some("supports none of the events asked for".into());
            registrations.push(reg);
            continue;
        }
        let Some(s) = set.take() else { break };
        // SAFETY: the handle is only compared with events' handles.
        let handle = unsafe { device.handle() } as usize;
        match device.register_events(types, s) {
            Ok(s) => {
                set = Some(s);
                reg.kinds = kinds_of(types);
                let missing = kinds_of(wanted() - types);
                if !missing.is_empty() {
                    reg.note = Some(format!("not supported: {}", missing.join(", ")));
                }
                gpus.push((handle, i32::try_from(gpu_index).unwrap_or(i32::MAX), uuid));
            }
            Err(e) => {
                // NVML frees the set on a failed registration: start afresh
                // with the GPUs registered so far lost. Rare enough (an
                // unknown error) to take a new set for the rest.
                reg.note = Some(format!("cannot register: {e}"));
                set = nvml.create_event_set().ok();
                gpus.clear();
                for r in &mut registrations {
                    r.kinds.clear();
                    r.note.get_or_insert_with(|| "lost with another GPU's failed registration".into());
                }
            }
        }
        registrations.push(reg);
    }
    let set = set.filter(|_| !gpus.is_empty());
    (set, gpus, registrations)
}

/// Logs what each GPU registered, with `message`.
fn log(registrations: &[Registration], message: &str) {
    for r in registrations {
        tracing::info!(gpu_index = r.gpu_index, events = %r.kinds.join(","), note = r.note.as_deref().unwrap_or(""),
            "{message}");
    }
}
