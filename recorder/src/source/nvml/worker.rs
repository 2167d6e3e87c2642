//! One thread per GPU, so that an NVML call that blocks in the kernel (after
//! an Xid 45 or 79, or a hung driver) stalls only its own GPU: each tick
//! asks every free worker for a sample and waits for the answers until a
//! deadline; a worker that has not answered by then is reported as stalled
//! at this tick and at every tick until it answers, and is not asked again
//! meanwhile. Nothing here knows NVML: a worker owns a state and runs a
//! function on it.
//!
//! A stalled worker's thread is never joined: the process exits without
//! waiting for it (SIGTERM still ends the recorder on time).
//!
//! Hand-offs are kept few, as each costs system calls and a wake-up: a
//! worker's request channel is bounded (it is asked only when it has
//! answered its last request, so it holds at most one, and allocates
//! nothing per message); answers go to one slot per worker on a shared
//! board, and the tick's thread is woken once, by the last answer of the
//! round (or by its deadline), not once per answer.

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// The answer of one worker at one round.
#[derive(Debug)]
pub(super) enum Answer<Out> {
    /// It answered in time.
    Done(Out),
    /// It was asked this round and did not answer by the deadline.
    TimedOut,
    /// It was still busy with the request of round `since`, and not asked.
    Stalled {
        /// The round it has been busy since.
        since: u64,
    },
    /// It was not asked (the caller said so), or its thread is gone.
    Idle,
}

/// Workers, each with its own thread and state, answering on one board.
#[derive(Debug)]
pub(super) struct Pool<Req, Out> {
    workers: Vec<Worker<Req>>,
    board: Arc<Board<Out>>,
}

/// Where the workers leave their answers.
#[derive(Debug)]
struct Board<Out> {
    slots: Mutex<Slots<Out>>,
    /// Signalled when the round's last awaited answer arrives while the
    /// tick's thread waits.
    all_in: Condvar,
}

#[derive(Debug)]
struct Slots<Out> {
    /// Per worker, its answer not yet collected, with the round it answers.
    answers: Vec<Option<(u64, Out)>>,
    /// The round being run.
    round: u64,
    /// Answers of `round` asked for and not yet arrived.
    awaited: usize,
    /// Whether the tick's thread waits on `all_in`.
    waiting: bool,
}

impl<Out> Board<Out> {
    /// The slots; a worker that panicked while holding them left them
    /// whole (each change is one assignment), so a poisoned lock is taken.
    fn lock(&self) -> MutexGuard<'_, Slots<Out>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Worker `i`'s answer to `round`.
    fn answer(&self, i: usize, round: u64, out: Out) {
        let mut slots = self.lock();
        slots.answers[i] = Some((round, out));
        if round == slots.round && slots.awaited > 0 {
            slots.awaited -= 1;
            if slots.awaited == 0 && slots.waiting {
                self.all_in.notify_one();
            }
        }
    }
}

#[derive(Debug)]
struct Worker<Req> {
    requests: Option<SyncSender<(u64, Req)>>,
    /// The round of the request it has not answered yet.
    busy_since: Option<u64>,
}

impl<Req: Send + 'static, Out: Send + 'static> Pool<Req, Out> {
    /// Starts one thread per state, named `<name><i>`, each running `work`
    /// on its state for every request.
    pub(super) fn spawn<S: Send + 'static>(
        name: &str,
        states: Vec<S>,
        work: fn(&mut S, Req) -> Out,
    ) -> std::io::Result<Pool<Req, Out>> {
        let board = Arc::new(Board {
            slots: Mutex::new(Slots {
                answers: (0..states.len()).map(|_| None).collect(),
                round: 0,
                awaited: 0,
                waiting: false,
            }),
            all_in: Condvar::new(),
        });
        let mut workers = Vec::with_capacity(states.len());
        for (i, mut state) in states.into_iter().enumerate() {
            let (tx, rx) = mpsc::sync_channel::<(u64, Req)>(1);
            let board = Arc::clone(&board);
            // Ends when the pool, and with it the request channel, is dropped.
            std::thread::Builder::new().name(format!("{name}{i}")).spawn(move || {
                while let Ok((round, req)) = rx.recv() {
                    let out = work(&mut state, req);
                    board.answer(i, round, out);
                }
            })?;
            workers.push(Worker { requests: Some(tx), busy_since: None });
        }
        Ok(Pool { workers, board })
    }

    /// How many workers there are.
    pub(super) fn len(&self) -> usize {
        self.workers.len()
    }

    /// Runs round `round` (increasing from call to call): asks each free
    /// worker `i` for which `request(i)` gives a request, and waits until
    /// all asked have answered or `deadline` passes; `answers` (emptied
    /// first) then holds one answer per worker, in order. Answers from
    /// earlier rounds that arrive now free their worker and are dropped:
    /// they are not this round's.
    pub(super) fn round(
        &mut self,
        round: u64,
        mut request: impl FnMut(usize) -> Option<Req>,
        deadline: Instant,
        answers: &mut Vec<Answer<Out>>,
    ) {
        self.collect_late();
        answers.clear();
        {
            let mut slots = self.board.lock();
            slots.round = round;
            slots.awaited = 0;
        }
        for (i, worker) in self.workers.iter_mut().enumerate() {
            if let Some(since) = worker.busy_since {
                answers.push(Answer::Stalled { since });
                continue;
            }
            let Some(req) = request(i) else {
                answers.push(Answer::Idle);
                continue;
            };
            // Awaited before it is sent, so that an answer cannot come first.
            self.board.lock().awaited += 1;
            let sent = worker.requests.as_ref().map(|tx| tx.try_send((round, req)));
            if let Some(Ok(())) = sent {
                worker.busy_since = Some(round);
                answers.push(Answer::TimedOut);
                continue;
            }
            self.board.lock().awaited -= 1;
            // `Full` cannot be: a free worker has taken its last request.
            if !matches!(sent, Some(Err(TrySendError::Full(_)))) {
                worker.requests = None;
            }
            answers.push(Answer::Idle);
        }
        let mut slots = self.board.lock();
        while slots.awaited > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            slots.waiting = true;
            slots = self.board.all_in.wait_timeout(slots, left).unwrap_or_else(PoisonError::into_inner).0;
            slots.waiting = false;
        }
        // What has arrived; the rest are late, collected at the next round.
        for (i, slot) in slots.answers.iter_mut().enumerate() {
            if let Some((r, out)) = slot.take() {
                self.workers[i].busy_since = None;
                if r == round {
                    answers[i] = Answer::Done(out);
                }
            }
        }
    }

    /// Frees the workers whose late answers have arrived, dropping them.
    fn collect_late(&mut self) {
        let mut slots = self.board.lock();
        for (i, slot) in slots.answers.iter_mut().enumerate() {
            if slot.take().is_some() {
                self.workers[i].busy_since = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// One round's answers.
    fn round(
        pool: &mut Pool<u32, u32>,
        round: u64,
        request: impl FnMut(usize) -> Option<u32>,
        deadline: Instant,
    ) -> Vec<Answer<u32>> {
        let mut answers = Vec::new();
        pool.round(round, request, deadline, &mut answers);
        answers
    }

    /// Doubles its input; a worker whose gate is locked blocks until it opens.
    fn work(gate: &mut Arc<Mutex<()>>, x: u32) -> u32 {
        drop(gate.lock().expect("not poisoned"));
        x * 2
    }

    #[test]
    fn a_blocked_worker_stalls_alone_and_recovers() {
        let gates: Vec<_> = (0..3).map(|_| Arc::new(Mutex::new(()))).collect();
        let mut pool = Pool::spawn("test-worker", gates.clone(), work).expect("threads start");
        assert_eq!(pool.len(), 3);
        let soon = || Instant::now() + Duration::from_secs(30);
        let done = |a: &Answer<u32>| match a {
            Answer::Done(v) => Some(*v),
            _ => None,
        };
        let answers = round(&mut pool, 1, |i| Some(i as u32), soon());
        assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4)]);

        // Worker 1 blocks: round 2 waits for it only until the deadline.
        let held = gates[1].lock().expect("not poisoned");
        let answers =
            round(&mut pool, 2, |i| Some(10 + i as u32), Instant::now() + Duration::from_millis(50));
        assert_eq!(done(&answers[0]), Some(20));
        assert!(matches!(answers[1], Answer::TimedOut), "{:?}", answers[1]);
        assert_eq!(done(&answers[2]), Some(24));
        // Still blocked: not asked again, reported as stalled since round 2.
        let answers = round(&mut pool, 3, |i| Some(i as u32), Instant::now() + Duration::from_millis(50));
        assert!(matches!(answers[1], Answer::Stalled { since: 2 }), "{:?}", answers[1]);
        assert_eq!(done(&answers[2]), Some(4));

        // Unblocked: its late answer is dropped and it answers again.
        drop(held);
        let t0 = Instant::now();
        while round(&mut pool, 4, |_| None, Instant::now())
            .iter()
            .any(|a| matches!(a, Answer::Stalled { .. }))
        {
            assert!(t0.elapsed() < Duration::from_secs(30), "the worker never came back");
            std::thread::sleep(Duration::from_millis(5));
        }
        let answers = round(&mut pool, 5, |i| Some(i as u32), soon());
        assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4)]);
    }
}
