//! The GPUs' sampling threads ("lanes"), so that an NVML call that blocks in
//! the kernel (after an Xid 45 or 79, or a hung driver) stalls only its own
//! GPU, while a steady tick wakes as few threads as it can. Nothing here
//! knows NVML: each item (a GPU) owns a state, and a lane runs a function
//! on the states of the items it is given, one after another.
//!
//! - **One lane to start with.** Every item begins on one lane, so a tick
//!   costs one wake-up and one answer, not one per GPU (waking eight
//!   threads was most of a tick's CPU).
//! - **A lane that is slow is split.** A lane whose round took more than a
//!   quarter of the time the tick waits gives the second half of its items
//!   to a new lane, so a driver whose calls take milliseconds (the PCIe
//!   throughput call takes 20 ms) ends with as many lanes as it needs, up to
//!   one per item.
//! - **A stuck item costs no other its row.** A quarter of the way to the
//!   deadline, each
//!   item still waiting behind an item that has not returned moves to a new
//!   lane of its own, which samples it in the time left; at the deadline, the item
//!   that has not returned is reported as timed out, then as stalled at
//!   every round until its late answer arrives, and is not asked meanwhile.
//!   The stuck lane keeps that item alone; the others stay on their new
//!   lanes.
//!
//! A stuck lane's thread is never joined: the process exits without
//! waiting for it (SIGTERM still ends the recorder on time).
//!
//! Requests and answers go through one slot per item on a shared board,
//! under one lock; a lane is woken by one message on its bounded channel,
//! and the tick's thread once, by the last answer of the round (or by the
//! time it waits until), so a steady round allocates nothing.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The answer of one item at one round.
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
    /// It was not asked (the caller said so), or no lane could be had for it.
    Idle,
}

/// Items, each with its state, sampled by lanes that answer on one board.
#[derive(Debug)]
pub(super) struct Pool<S, Req, Out> {
    shared: Arc<Shared<S, Req, Out>>,
    /// Per lane, its wake-up channel; `None` once its thread is gone.
    lanes: Vec<Option<SyncSender<u64>>>,
    /// Names the lanes' threads: `<name><lane>`.
    name: String,
    /// Per item, the round of a request it was given and has not answered.
    busy_since: Vec<Option<u64>>,
    /// Per lane, whether this round woke it (kept to allocate nothing).
    woken: Vec<bool>,
}

/// What the lanes and the tick's thread share.
#[derive(Debug)]
struct Shared<S, Req, Out> {
    board: Mutex<Board<Req, Out>>,
    /// Signalled when the round's last awaited answer arrives while the
    /// tick's thread waits.
    all_in: Condvar,
    /// Per item, its state; locked by the lane sampling it.
    states: Vec<Mutex<S>>,
    work: fn(&mut S, Req) -> Out,
}

#[derive(Debug)]
struct Board<Req, Out> {
    /// Per item.
    items: Vec<Slot<Req, Out>>,
    /// Per lane.
    lanes: Vec<LaneState>,
    /// The round being run.
    round: u64,
    /// Answers of `round` asked for and not yet arrived.
    awaited: usize,
    /// Whether the tick's thread waits on `all_in`.
    waiting: bool,
}

#[derive(Debug)]
struct Slot<Req, Out> {
    /// The lane that samples it.
    lane: usize,
    /// A request not yet taken by its lane, with its round.
    request: Option<(u64, Req)>,
    /// An answer not yet collected, with the round it answers.
    answer: Option<(u64, Out)>,
}

#[derive(Debug, Default)]
struct LaneState {
    /// The item it is sampling now.
    running: Option<usize>,
    /// The round it last went through all its requests, and how long that took.
    took: Option<(u64, Duration)>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every change under these locks is a few assignments that a panic
    // cannot leave half made, so a poisoned lock is taken as it is.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<Req, Out> Board<Req, Out> {
    /// The next request for `lane`: the lowest-numbered item that has one.
    fn take_for(&mut self, lane: usize) -> Option<(usize, u64, Req)> {
        let i = self.items.iter().position(|s| s.lane == lane && s.request.is_some())?;
        let (round, req) = self.items[i].request.take()?;
        Some((i, round, req))
    }

    /// Item `i`'s answer to `round`.
    fn answer(&mut self, i: usize, round: u64, out: Out, all_in: &Condvar) {
        self.items[i].answer = Some((round, out));
        if round == self.round && self.awaited > 0 {
            self.awaited -= 1;
            if self.awaited == 0 && self.waiting {
                all_in.notify_one();
            }
        }
    }

    /// The items of lane `from` that `moves` picks, never the one it is in.
    fn pick(&self, from: usize, mut moves: impl FnMut(usize, &Slot<Req, Out>) -> bool) -> Vec<usize> {
        let running = self.lanes[from].running;
        let mine = self.items.iter().enumerate().filter(|(i, s)| s.lane == from && Some(*i) != running);
        mine.filter(|(i, s)| moves(*i, s)).map(|(i, _)| i).collect()
    }
}

/// A lane's thread: for each wake-up, the requests given to it, in item order.
fn lane<S, Req, Out>(shared: &Shared<S, Req, Out>, lane: usize, wake: &Receiver<u64>) {
    while wake.recv().is_ok() {
        let started = Instant::now();
        let mut board = lock(&shared.board);
        let mut last_round = None;
        while let Some((i, round, req)) = board.take_for(lane) {
            board.lanes[lane].running = Some(i);
            drop(board);
            let out = (shared.work)(&mut lock(&shared.states[i]), req);
            board = lock(&shared.board);
            board.lanes[lane].running = None;
            board.answer(i, round, out, &shared.all_in);
            last_round = Some(round);
        }
        if let Some(round) = last_round {
            board.lanes[lane].took = Some((round, started.elapsed()));
        }
    }
}

impl<S: Send + 'static, Req: Send + 'static, Out: Send + 'static> Pool<S, Req, Out> {
    /// Puts every state on one lane, whose thread is named `<name>0`, to
    /// run `work` on a state for each of its requests.
    pub(super) fn spawn(name: &str, states: Vec<S>, work: fn(&mut S, Req) -> Out) -> std::io::Result<Self> {
        let n = states.len();
        let shared = Arc::new(Shared {
            board: Mutex::new(Board {
                items: (0..n).map(|_| Slot { lane: 0, request: None, answer: None }).collect(),
                lanes: Vec::new(),
                round: 0,
                awaited: 0,
                waiting: false,
            }),
            all_in: Condvar::new(),
            states: states.into_iter().map(Mutex::new).collect(),
            work,
        });
        let mut pool = Pool {
            shared,
            lanes: Vec::new(),
            name: name.to_owned(),
            busy_since: vec![None; n],
            woken: Vec::new(),
        };
        if n > 0 {
            pool.new_lane()?;
        }
        Ok(pool)
    }

    /// How many items there are.
    pub(super) fn len(&self) -> usize {
        self.busy_since.len()
    }

    /// How many lanes (sampling threads) there are.
    pub(super) fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Starts a lane with no items yet; its number.
    fn new_lane(&mut self) -> std::io::Result<usize> {
        let index = self.lanes.len();
        let (tx, rx) = mpsc::sync_channel::<u64>(1);
        let shared = Arc::clone(&self.shared);
        // Ends when the pool, and with it the wake-up channel, is dropped.
        std::thread::Builder::new()
            .name(format!("{}{index}", self.name))
            .spawn(move || lane(&shared, index, &rx))?;
        lock(&self.shared.board).lanes.push(LaneState::default());
        self.lanes.push(Some(tx));
        self.woken.push(false);
        Ok(index)
    }

    /// Moves the items of lane `from` that `moves` picks (never the one it
    /// is in) to a new lane; the new lane's number, if any were picked. A
    /// lane that cannot be started leaves them where they are. Only after
    /// faults and on slow drivers: a steady round moves nothing.
    fn split(&mut self, from: usize, moves: impl FnMut(usize, &Slot<Req, Out>) -> bool) -> Option<usize> {
        let picked = lock(&self.shared.board).pick(from, moves);
        if picked.is_empty() {
            return None;
        }
        let to = match self.new_lane() {
            Ok(to) => to,
            Err(error) => {
                tracing::warn!(%error, "cannot start another NVML sampling thread; its GPUs stay where they are");
                return None;
            }
        };
        let mut board = lock(&self.shared.board);
        for i in picked {
            // Taken meanwhile by the lane it leaves, its answer still arrives.
            board.items[i].lane = to;
        }
        Some(to)
    }

    /// Wakes lane `lane`; false if its thread is gone.
    fn wake(&mut self, lane: usize, round: u64) -> bool {
        let sent = self.lanes[lane].as_ref().map(|tx| tx.try_send(round));
        match sent {
            // Full: a wake-up is already waiting, and it takes every request.
            Some(Ok(()) | Err(TrySendError::Full(_))) => true,
            Some(Err(TrySendError::Disconnected(_))) | None => {
                self.lanes[lane] = None;
                false
            }
        }
    }

    /// Runs round `round` (increasing from call to call): gives each free
    /// item `i` for which `request(i)` gives a request to its lane, and
    /// waits until all asked have answered or `deadline` passes; `answers`
    /// (emptied first) then holds one answer per item, in order. Answers
    /// from earlier rounds that arrive now free their item and are dropped:
    /// they are not this round's.
    pub(super) fn round(
        &mut self,
        round: u64,
        mut request: impl FnMut(usize) -> Option<Req>,
        deadline: Instant,
        answers: &mut Vec<Answer<Out>>,
    ) {
        let start = Instant::now();
        let window = deadline.saturating_duration_since(start);
        answers.clear();
        self.collect_late();
        self.leave_stuck_lanes();
        {
            let mut board = lock(&self.shared.board);
            board.round = round;
            board.awaited = 0;
            self.woken.fill(false);
            for i in 0..self.busy_since.len() {
                if let Some(since) = self.busy_since[i] {
                    answers.push(Answer::Stalled { since });
                } else if let Some(req) = request(i) {
                    board.items[i].request = Some((round, req));
                    board.awaited += 1;
                    self.busy_since[i] = Some(round);
                    self.woken[board.items[i].lane] = true;
                    answers.push(Answer::TimedOut);
                } else {
                    answers.push(Answer::Idle);
                }
            }
        }
        for l in 0..self.lanes.len() {
            if self.woken[l] && !self.wake(l, round) {
                // Its thread is gone (a panic in `work`): its items move on.
                if let Some(to) = self.split(l, |_, _| true) {
                    self.wake(to, round);
                }
            }
        }
        // A quarter of the way, each request queued behind an item that has
        // not returned moves to a new lane of its own, which has the three
        // quarters left to answer it (on its own, as the queue's calls may
        // all be slow: the PCIe throughput call takes 20 ms).
        if !self.wait_until(start + window / 4) {
            for l in 0..self.lanes.len() {
                let queued = {
                    let board = lock(&self.shared.board);
                    if board.lanes[l].running.is_some() {
                        board.pick(l, |_, slot| slot.request.is_some())
                    } else {
                        Vec::new()
                    }
                };
                for q in queued {
                    if let Some(to) = self.split(l, |i, _| i == q) {
                        self.wake(to, round);
                    }
                }
            }
            self.wait_until(deadline);
        }
        let mut board = lock(&self.shared.board);
        for (i, slot) in board.items.iter_mut().enumerate() {
            if let Some((r, out)) = slot.answer.take() {
                self.busy_since[i] = None;
                if r == round {
                    answers[i] = Answer::Done(out);
                }
            } else if slot.request.take().is_some() {
                // Never started: timed out, but free for the next round.
                self.busy_since[i] = None;
            }
        }
        // A lane that took over a quarter of the wait gives half its items
        // to a new lane.
        let slow: Vec<usize> = (0..board.lanes.len())
            .filter(|&l| board.lanes[l].took.is_some_and(|(r, took)| r == round && took > window / 4))
            .collect();
        drop(board);
        for l in slow {
            let mine: Vec<usize> = {
                let board = lock(&self.shared.board);
                board.items.iter().enumerate().filter(|(_, s)| s.lane == l).map(|(i, _)| i).collect()
            };
            if mine.len() > 1 {
                let second_half = &mine[mine.len() / 2..];
                self.split(l, |i, _| second_half.contains(&i));
            }
        }
    }

    /// Waits until every awaited answer has arrived (true) or `until` passes.
    fn wait_until(&self, until: Instant) -> bool {
        let mut board = lock(&self.shared.board);
        while board.awaited > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            board.waiting = true;
            board = self.shared.all_in.wait_timeout(board, left).unwrap_or_else(PoisonError::into_inner).0;
            board.waiting = false;
        }
        true
    }

    /// Frees the items whose late answers have arrived, dropping them.
    fn collect_late(&mut self) {
        let mut board = lock(&self.shared.board);
        for (i, slot) in board.items.iter_mut().enumerate() {
            if slot.answer.take().is_some() {
                self.busy_since[i] = None;
            }
        }
    }

    /// Moves the other items of every lane still inside an item (stuck in
    /// an earlier round) to a new lane.
    fn leave_stuck_lanes(&mut self) {
        for l in 0..self.lanes.len() {
            let stuck = lock(&self.shared.board).lanes[l].running.is_some();
            if stuck {
                self.split(l, |_, _| true);
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
        pool: &mut Pool<Gate, u32, u32>,
        round: u64,
        request: impl FnMut(usize) -> Option<u32>,
        deadline: Instant,
    ) -> Vec<Answer<u32>> {
        let mut answers = Vec::new();
        pool.round(round, request, deadline, &mut answers);
        answers
    }

    /// Blocks while its lock is held elsewhere; sleeps `ms` milliseconds.
    #[derive(Clone)]
    struct Gate {
        lock: Arc<Mutex<()>>,
        ms: Arc<Mutex<u64>>,
    }

    /// Doubles its input, after passing the gate.
    fn work(gate: &mut Gate, x: u32) -> u32 {
        drop(gate.lock.lock().expect("not poisoned"));
        std::thread::sleep(Duration::from_millis(*gate.ms.lock().expect("not poisoned")));
        x * 2
    }

    fn gates(n: usize) -> Vec<Gate> {
        (0..n).map(|_| Gate { lock: Arc::new(Mutex::new(())), ms: Arc::new(Mutex::new(0)) }).collect()
    }

    fn done(a: &Answer<u32>) -> Option<u32> {
        match a {
            Answer::Done(v) => Some(*v),
            _ => None,
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn a_steady_round_runs_on_one_lane() {
        let mut pool = Pool::spawn("test-lane", gates(4), work).expect("threads start");
        for r in 1..=3 {
            let answers = round(&mut pool, r, |i| Some(i as u32), soon());
            assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4), Some(6)]);
        }
        assert_eq!(pool.lanes(), 1);
    }

    #[test]
    fn a_blocked_item_stalls_alone_and_recovers() {
        let gates = gates(3);
        let mut pool = Pool::spawn("test-lane", gates.clone(), work).expect("threads start");
        assert_eq!(pool.len(), 3);
        let answers = round(&mut pool, 1, |i| Some(i as u32), soon());
        assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4)]);

        // Item 1 blocks: item 2, queued behind it on the same lane, still
        // answers this round (moved to a new lane halfway), and the round
        // waits for item 1 only until the deadline.
        let held = gates[1].lock.lock().expect("not poisoned");
        let answers =
            round(&mut pool, 2, |i| Some(10 + i as u32), Instant::now() + Duration::from_millis(400));
        assert_eq!(done(&answers[0]), Some(20));
        assert!(matches!(answers[1], Answer::TimedOut), "{:?}", answers[1]);
        assert_eq!(done(&answers[2]), Some(24));
        // Still blocked: not asked again, reported as stalled since round 2;
        // the others answer on their own lanes without waiting.
        let t0 = Instant::now();
        let answers = round(&mut pool, 3, |i| Some(i as u32), Instant::now() + Duration::from_secs(30));
        assert!(t0.elapsed() < Duration::from_secs(15), "waited for the blocked item: {:?}", t0.elapsed());
        assert!(matches!(answers[1], Answer::Stalled { since: 2 }), "{:?}", answers[1]);
        assert_eq!(done(&answers[0]), Some(0));
        assert_eq!(done(&answers[2]), Some(4));

        // Unblocked: its late answer is dropped and it answers again.
        drop(held);
        let t0 = Instant::now();
        while round(&mut pool, 4, |_| None, Instant::now())
            .iter()
            .any(|a| matches!(a, Answer::Stalled { .. }))
        {
            assert!(t0.elapsed() < Duration::from_secs(30), "the item never came back");
            std::thread::sleep(Duration::from_millis(5));
        }
        let answers = round(&mut pool, 5, |i| Some(i as u32), soon());
        assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4)]);
    }

    #[test]
    fn a_slow_lane_is_split_until_its_rounds_fit() {
        let gates = gates(3);
        for gate in &gates {
            *gate.ms.lock().expect("not poisoned") = 200;
        }
        let mut pool = Pool::spawn("test-lane", gates, work).expect("threads start");
        // 3 × 200 ms on one lane: over a quarter of the 2 s waited (500 ms),
        // when the third is already running (none queued to move): split,
        // the second half to a new lane, and 200 + 400 ms fit.
        let mut lanes = Vec::new();
        for r in 1..=3 {
            let answers =
                round(&mut pool, r, |i| Some(i as u32), Instant::now() + Duration::from_millis(2000));
            assert_eq!(answers.iter().map(done).collect::<Vec<_>>(), [Some(0), Some(2), Some(4)], "{r}");
            lanes.push(pool.lanes());
        }
        assert_eq!(lanes, [2, 2, 2]);
    }
}
