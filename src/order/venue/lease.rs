//! Leases and fencing tokens for bridge calls: a venue that does not answer
//! never holds a worker hostage.
//!
//! ```text
//!  worker ──Call{token}──▶ its call thread ──▶ bridge.execute(…)
//!    │  waits ≤ lease (engine clock)                │ answer
//!    │◀──────────── Answer{token} ──────────────────┘ (only while token is current)
//!    └ lease expired: token retired, call thread abandoned (it ends when
//!      execute returns; its answer is then discarded: late_answers_discarded),
//!      a fresh call thread for the next attempt; the order is retried on the
//!      next bridge with a new token (lease_expired)
//! ```
//!
//! Tokens: [`FenceTokens`] hands out one per attempt, increasing within an
//! engine (shared by every worker). A worker's current token is published in
//! an atomic; an answer whose token is not current is discarded and counted,
//! so a late answer never applies a fill.
//!
//! Where a call runs: each worker has one call thread ([`Caller`]); an
//! abandoned one keeps running until the venue's `execute` returns (it
//! cannot be interrupted), then sees its channel closed and ends. Bound:
//! call threads alive engine-wide ≤ workers + [`MAX_ABANDONED`]
//! ([`CallPool`]). When the bound is reached, a worker that needs
//! a new call thread waits until an abandoned call ends (a venue that hangs
//! for good then holds workers again, but never more threads than that).
//!
//! The lease is measured on the engine clock (`retry::SimClock` in tests);
//! the worker looks at it at least every [`POLL`] of real time while a call
//! is out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::bridge::{Bridge, BridgeOrder, Outcome};
use crate::logging::repeat::error_repeating;
use crate::metrics::counters::Counters;
use crate::model::units::{Lots, Side};
use crate::model::warning::WarnKind;
use crate::retry::Clock;
use crate::sys::watch::Watch;

use super::inflight::Permit;

/// Abandoned call threads alive at once, engine-wide, at most. A hung
/// thread sleeps in the venue's call: it costs the pages of its stack it
/// touched (tens of KiB), so 256 of them cost a few MiB.
pub(crate) const MAX_ABANDONED: usize = 256;

/// Longest real-time wait between two looks at the lease.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Fencing tokens, one per attempt, increasing within an engine (the first is 1).
#[derive(Debug, Default)]
pub(crate) struct FenceTokens(AtomicU64);

impl FenceTokens {
    /// Tokens that continue after `last` (the highest journaled before a
    /// restart: an attempt after it never reuses a token).
    pub(crate) fn after(last: u64) -> Self {
        FenceTokens(AtomicU64::new(last))
    }

    /// A fresh token.
    pub(crate) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Shared by every worker: the lease, the bound on call threads, the counters.
#[derive(Debug)]
pub(crate) struct CallPool {
    lease_ns: u64,
    max_threads: usize,
    alive: Mutex<usize>,
    freed: Condvar,
    counters: Arc<Counters>,
    /// The engine's thread watch: a call thread that panics (a venue
    /// adapter's bug) is an engine thread that died.
    watch: Option<Arc<Watch>>,
}

impl CallPool {
    /// A pool for `workers` workers whose calls hold a `lease`.
    pub(crate) fn new(lease: Duration, workers: usize, counters: Arc<Counters>) -> Self {
        CallPool::bounded(lease, workers + MAX_ABANDONED, counters)
    }

    /// A pool allowing `max_threads` call threads alive at once.
    fn bounded(lease: Duration, max_threads: usize, counters: Arc<Counters>) -> Self {
        CallPool {
            lease_ns: lease.as_nanos().min(u128::from(u64::MAX)) as u64,
            max_threads,
            alive: Mutex::new(0),
            freed: Condvar::new(),
            counters,
            watch: None,
        }
    }

    /// Call threads hold a guard of `watch`, so a panic in one is loud.
    pub(crate) fn watched_by(mut self, watch: Arc<Watch>) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Waits for room for one more call thread and counts it.
    fn acquire(&self) {
        let mut alive = self.alive.lock().unwrap_or_else(|p| p.into_inner());
        while *alive >= self.max_threads {
            alive = self.freed.wait(alive).unwrap_or_else(|p| p.into_inner());
        }
        *alive += 1;
    }

    fn release(&self) {
        *self.alive.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.freed.notify_one();
    }
}

/// A call thread's place in the bound: released when dropped.
struct Alive(Arc<CallPool>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// One attempt, owned, for the call thread.
struct Call {
    bridge: Arc<dyn Bridge>,
    id: Arc<str>,
    symbol: Box<str>,
    side: Side,
    qty: Lots,
    attempt: u32,
    token: u64,
    now_ns: u64,
    /// The call's place under its bridge's `max_inflight`
    /// ([`super::inflight`]): dropped when `execute` returns, so an
    /// abandoned call counts against the limit until the venue answers.
    permit: Option<Permit>,
}

/// A call thread's answer, with the token of its attempt.
struct Answer {
    token: u64,
    outcome: Outcome,
}

/// What became of one call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CallResult {
    /// The venue answered within the lease.
    Answered(Outcome),
    /// No answer within the lease: abandoned.
    LeaseExpired,
}

/// One worker's side of the calls: its call thread and the answers.
#[derive(Debug)]
pub(crate) struct Caller {
    pool: Arc<CallPool>,
    thread: Option<Sender<Call>>,
    /// Every call thread of this worker (current or abandoned) answers here;
    /// each holds at most one answer, so at most `max_threads` are queued.
    answers_tx: Sender<Answer>,
    answers: Receiver<Answer>,
    /// The token of the attempt this worker waits for; 0 when none.
    current: Arc<AtomicU64>,
    name: String,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Call({} #{} token {})",
            self.id, self.attempt, self.token
        )
    }
}

impl Caller {
    /// A caller for the worker named `name` (its call threads are `name` + `-call`).
    pub(crate) fn new(pool: Arc<CallPool>, name: &str) -> Self {
        let (answers_tx, answers) = crossbeam_channel::unbounded();
        Caller {
            pool,
            thread: None,
            answers_tx,
            answers,
            current: Arc::new(AtomicU64::new(0)),
            name: format!("{name}-call"),
        }
    }

    fn spawn(&mut self) -> Option<Sender<Call>> {
        self.pool.acquire();
        let (tx, rx) = crossbeam_channel::bounded::<Call>(1);
        let pool = Arc::clone(&self.pool);
        let answers = self.answers_tx.clone();
        let current = Arc::clone(&self.current);
        let spawned = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || {
                // A panicking bridge kills this thread: the watch says so.
                let _guard = pool.watch.as_ref().map(|w| w.guard());
                // Counted out when the thread ends, by a panicking bridge too.
                let _alive = Alive(Arc::clone(&pool));
                for c in rx.iter() {
                    let outcome = c.bridge.execute(
                        &BridgeOrder {
                            order_id: &c.id,
                            symbol: &c.symbol,
                            side: c.side,
                            qty: c.qty,
                            attempt: c.attempt,
                            fence_token: c.token,
                        },
                        c.now_ns,
                    );
                    drop(c.permit);
                    if current.load(Ordering::Acquire) == c.token {
                        let _ = answers.send(Answer {
                            token: c.token,
                            outcome,
                        });
                    } else {
                        pool.counters
                            .retry
                            .late_answers_discarded
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        match spawned {
            Ok(_) => Some(tx),
            Err(e) => {
                self.pool.release();
                error_repeating!(
                    WarnKind::CallThreadFailed,
                    "bridge call thread not started: {e}"
                );
                None
            }
        }
    }

    /// Sends one attempt (`order`, whose `fence_token` must be fresh) to
    /// `bridge` on the call thread and waits for the answer until the lease,
    /// started at `now_ns` on `clock`, expires. `permit` (the call's place
    /// under the bridge's `max_inflight`) is released when the venue's
    /// `execute` returns, also after the lease abandoned the call.
    pub(crate) fn call(
        &mut self,
        bridge: &Arc<dyn Bridge>,
        order: &BridgeOrder<'_>,
        id: &Arc<str>,
        now_ns: u64,
        clock: &dyn Clock,
        permit: Option<Permit>,
    ) -> CallResult {
        let token = order.fence_token;
        let tx = match self.thread.take() {
            Some(tx) => tx,
            None => match self.spawn() {
                Some(tx) => tx,
                // No thread to be had: call from here, without a lease.
                None => {
                    let outcome = bridge.execute(order, now_ns);
                    drop(permit);
                    return CallResult::Answered(outcome);
                }
            },
        };
        self.current.store(token, Ordering::Release);
        let call = Call {
            bridge: Arc::clone(bridge),
            id: Arc::clone(id),
            symbol: order.symbol.into(),
            side: order.side,
            qty: order.qty,
            attempt: order.attempt,
            token,
            now_ns,
            permit,
        };
        if tx.send(call).is_err() {
            // The thread ended (a panicking bridge): a transient failure, a new thread next time.
            self.current.store(0, Ordering::Release);
            return CallResult::Answered(Outcome::Transient("call_thread_gone".into()));
        }
        let deadline = now_ns.saturating_add(self.pool.lease_ns);
        loop {
            let left = deadline.saturating_sub(clock.now_ns());
            if left == 0 {
                break;
            }
            match self
                .answers
                .recv_timeout(POLL.min(Duration::from_nanos(left)))
            {
                Ok(a) if a.token == token => {
                    self.current.store(0, Ordering::Release);
                    self.thread = Some(tx);
                    return CallResult::Answered(a.outcome);
                }
                Ok(_) => {
                    self.pool
                        .counters
                        .retry
                        .late_answers_discarded
                        .fetch_add(1, Ordering::Relaxed);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break, // cannot happen: we hold a sender
            }
        }
        // Abandoned: retire the token (the thread discards its answer) and
        // drop the thread's sender (it ends after `execute` returns).
        self.current.store(0, Ordering::Release);
        drop(tx);
        self.pool
            .counters
            .retry
            .lease_expired
            .fetch_add(1, Ordering::Relaxed);
        CallResult::LeaseExpired
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::VenueFill;
    use crate::model::units::{Amount, Price};
    use crate::retry::SimClock;

    /// Blocks every call until released; answers executed with one fill.
    #[derive(Debug, Default)]
    struct Gate {
        open: Mutex<bool>,
        cv: Condvar,
        calls: AtomicU64,
    }

    impl Gate {
        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.cv.notify_all();
        }
    }

    impl Bridge for Gate {
        fn name(&self) -> &str {
            "gate"
        }
        fn execute(&self, _: &BridgeOrder<'_>, _: u64) -> Outcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
            Outcome::Executed(vec![VenueFill {
                fill_no: 1,
                cum_lots: Lots(1),
                cum_amount: Amount(1),
                price: Price(1),
            }])
        }
    }

    fn order(token: u64) -> BridgeOrder<'static> {
        BridgeOrder {
            order_id: "o1",
            symbol: "EURUSD",
            side: Side::Buy,
            qty: Lots(1),
            attempt: 1,
            fence_token: token,
        }
    }

    #[test]
    fn tokens_are_fresh_and_increasing() {
        let t = FenceTokens::default();
        let (a, b) = (t.next(), t.next());
        assert!(a >= 1 && b > a);
    }

    #[test]
    fn an_expired_lease_frees_the_worker_and_the_late_answer_is_discarded() {
        let counters = Arc::new(Counters::default());
        let pool = Arc::new(CallPool::new(
            Duration::from_secs(10),
            1,
            Arc::clone(&counters),
        ));
        let mut caller = Caller::new(Arc::clone(&pool), "w");
        let clock = SimClock::new();
        let gate_ref = Arc::new(Gate::default());
        let bridge: Arc<dyn Bridge> = gate_ref.clone();
        let id: Arc<str> = "o1".into();
        let ticker = {
            let clock = clock.clone();
            let gate = Arc::clone(&gate_ref);
            std::thread::spawn(move || {
                // Advance the engine clock past the lease once the call is out.
                while gate.calls.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
                clock.advance_ms(10_001);
            })
        };
        let r = caller.call(&bridge, &order(1), &id, clock.now_ns(), &clock, None);
        ticker.join().unwrap();
        assert_eq!(r, CallResult::LeaseExpired);
        assert_eq!(counters.retry.lease_expired.load(Ordering::SeqCst), 1);
        // The hung call still runs on its abandoned thread; the next attempt
        // gets a thread of its own and its answer (the gate opens for both).
        gate_ref.open();
        let r = caller.call(&bridge, &order(2), &id, clock.now_ns(), &clock, None);
        assert!(matches!(r, CallResult::Answered(Outcome::Executed(_))));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while counters.retry.late_answers_discarded.load(Ordering::SeqCst) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "late answer not discarded"
            );
            std::thread::yield_now();
        }
        // Both call threads end: the abandoned one by itself, the current one with the caller.
        drop(caller);
        while *pool.alive.lock().unwrap() != 0 {
            assert!(std::time::Instant::now() < deadline, "call threads leaked");
            std::thread::yield_now();
        }
    }

    #[test]
    fn an_abandoned_call_keeps_its_max_inflight_place_until_the_venue_returns() {
        use super::super::inflight::InflightLimit;
        use std::sync::atomic::AtomicBool;
        let counters = Arc::new(Counters::default());
        let pool = Arc::new(CallPool::new(Duration::from_secs(1), 1, counters));
        let mut caller = Caller::new(Arc::clone(&pool), "w");
        let clock = SimClock::new();
        let gate = Arc::new(Gate::default());
        let bridge: Arc<dyn Bridge> = gate.clone();
        let id: Arc<str> = "o1".into();
        let limit = InflightLimit::new(Some(1));
        let permit = limit.acquire(&AtomicBool::new(false)).unwrap();
        let t = expire_after(&clock, &gate, 1);
        let r = caller.call(&bridge, &order(1), &id, clock.now_ns(), &clock, permit);
        t.join().unwrap();
        assert_eq!(r, CallResult::LeaseExpired);
        assert_eq!(
            limit.in_use(),
            1,
            "the venue still works on the abandoned call"
        );
        gate.open();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while limit.in_use() != 0 {
            assert!(std::time::Instant::now() < deadline, "place never freed");
            std::thread::yield_now();
        }
    }

    /// Advances `clock` past `lease` once `gate` has seen `calls` calls.
    fn expire_after(clock: &SimClock, gate: &Arc<Gate>, calls: u64) -> std::thread::JoinHandle<()> {
        let (clock, gate) = (clock.clone(), Arc::clone(gate));
        std::thread::spawn(move || {
            while gate.calls.load(Ordering::SeqCst) < calls {
                std::thread::yield_now();
            }
            clock.advance_ms(1_001);
        })
    }

    #[test]
    fn at_the_thread_bound_a_new_call_waits_for_an_abandoned_one_to_end() {
        let counters = Arc::new(Counters::default());
        let pool = Arc::new(CallPool::bounded(
            Duration::from_secs(1),
            2,
            Arc::clone(&counters),
        ));
        let mut caller = Caller::new(Arc::clone(&pool), "w");
        let clock = SimClock::new();
        let gate = Arc::new(Gate::default());
        let bridge: Arc<dyn Bridge> = gate.clone();
        let id: Arc<str> = "o1".into();
        for n in 1..=2 {
            let t = expire_after(&clock, &gate, n);
            let r = caller.call(&bridge, &order(n), &id, clock.now_ns(), &clock, None);
            t.join().unwrap();
            assert_eq!(r, CallResult::LeaseExpired);
        }
        assert_eq!(
            *pool.alive.lock().unwrap(),
            2,
            "two hung threads: the bound"
        );
        // The third call needs a thread: it gets one once a hung call ends.
        let third = std::thread::spawn(move || {
            let r = caller.call(&bridge, &order(3), &id, clock.now_ns(), &clock, None);
            (r, caller)
        });
        gate.open();
        let (r, caller) = third.join().unwrap();
        assert!(matches!(r, CallResult::Answered(Outcome::Executed(_))));
        assert_eq!(gate.calls.load(Ordering::SeqCst), 3);
        drop(caller);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while counters.retry.late_answers_discarded.load(Ordering::SeqCst) != 2
            || *pool.alive.lock().unwrap() != 0
        {
            assert!(
                std::time::Instant::now() < deadline,
                "hung calls never ended"
            );
            std::thread::yield_now();
        }
    }
}
