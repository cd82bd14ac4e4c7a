//! Order workers: take an order (a due retry first, then the main queue),
//! check its deadline, send one attempt to a bridge, and act on the outcome.
//!
//! ```text
//!  main queue ─┐                    ┌─ executed ──▶ FILL… DONE          (events → gateway)
//!              ├─▶ worker ─▶ bridge ┼─ permanent ─▶ DLQ, DEAD           (never retried)
//!  ready ◀─────┘     ▲              └─ transient ─▶ permit? ─▶ delay queue (timer thread)
//!    ▲               └ expired ──▶ REJECT EXPIRED (not sent)   └ none/exhausted ─▶ DLQ, DEAD
//!    └──────────── due retries (timer) ──────────────────────────┘
//! ```
//!
//! Routing: attempt `k` of order number `seq` goes to bridge
//! `(seq + k − 1) mod bridges`, so orders spread over the bridges and a
//! retry goes to the next one (a venue that is down is not hit twice in a row
//! by the same order when there is another).
//!
//! Ownership: a worker owns the order it holds; it owns its histograms and
//! its random generator. Workers share nothing mutable but the channels and
//! the retry permits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use rand::rngs::StdRng;

use crate::bridge::{Bridge, BridgeOrder, Lots, Outcome};
use crate::dlq::{AttemptRecord, DlqSender};
use crate::metrics::{Stage, StageRecorder};
use crate::retry::{Backoff, Permits, SharedClock};
use crate::sys::clock::{wall_ns, MonoClock};

use super::admission::QueueStats;
use super::events::EventSender;
use super::protocol::{DeadReason, DoneStatus};
use super::types::{Event, EventKind, Order};

/// Everything one worker owns or shares.
#[derive(Debug)]
pub struct Worker {
    /// Main queue (consumer side).
    pub main: Receiver<Order>,
    /// Main queue stats (the worker counts what it takes).
    pub main_stats: Arc<QueueStats>,
    /// Due retries from the timer.
    pub ready: Receiver<Order>,
    /// To the timer: `(due_ns, order)`.
    pub retry_tx: Sender<(u64, Order)>,
    /// Bound of the retry stage (delay queue + the channels around it).
    pub permits: Arc<Permits>,
    /// The venues.
    pub bridges: Arc<[Arc<dyn Bridge>]>,
    /// Retry policy.
    pub backoff: Backoff,
    /// Engine clock (deadlines, due times).
    pub clock: SharedClock,
    /// Measurement clock.
    pub mono: MonoClock,
    /// Back to the gateway.
    pub events: EventSender,
    /// Dead letters (blocking hand-off).
    pub dlq: DlqSender,
    /// Set at shutdown: transient failures are dead-lettered (`shutdown`), not parked.
    pub draining: Arc<AtomicBool>,
    /// Set when the shutdown deadline passed: an order taken now is
    /// dead-lettered (`shutdown`) without an attempt.
    pub abandon: Arc<AtomicBool>,
    /// Queue wait and processing histograms.
    pub recorder: StageRecorder,
    /// Jitter.
    pub rng: StdRng,
}

const FLUSH_WAIT: Duration = Duration::from_millis(100);

impl Worker {
    /// Runs until both the main queue and the retry channel are closed and empty.
    pub fn run(mut self) {
        let mut main_open = true;
        let mut ready_open = true;
        loop {
            self.recorder.maybe_flush(self.mono.now_ns());
            // Due retries first: they are the oldest orders.
            match self.ready.try_recv() {
                Ok(o) => {
                    self.take_retry(o);
                    continue;
                }
                Err(TryRecvError::Disconnected) => ready_open = false,
                Err(TryRecvError::Empty) => {}
            }
            match self.main.try_recv() {
                Ok(o) => {
                    self.take_main(o);
                    continue;
                }
                Err(TryRecvError::Disconnected) => main_open = false,
                Err(TryRecvError::Empty) => {}
            }
            if !main_open && !ready_open {
                break;
            }
            let never = crossbeam_channel::never();
            let main = if main_open { &self.main } else { &never };
            let ready = if ready_open { &self.ready } else { &never };
            crossbeam_channel::select! {
                recv(ready) -> r => match r {
                    Ok(o) => self.take_retry(o),
                    Err(_) => ready_open = false,
                },
                recv(main) -> r => match r {
                    Ok(o) => self.take_main(o),
                    Err(_) => main_open = false,
                },
                default(FLUSH_WAIT) => {}
            }
        }
        self.recorder.flush();
    }

    fn take_main(&mut self, o: Order) {
        self.main_stats.on_take();
        let now = self.mono.now_ns();
        self.recorder
            .record(Stage::OrderQueueWait, now.saturating_sub(o.enq_mono_ns));
        self.process(o);
    }

    fn take_retry(&mut self, o: Order) {
        self.permits.release();
        self.process(o);
    }

    /// One attempt of one order.
    fn process(&mut self, mut o: Order) {
        let t0 = self.mono.now_ns();
        if self.abandon.load(Ordering::Acquire) {
            self.dead(o, DeadReason::Shutdown);
            self.events.wake();
            return;
        }
        let now = self.clock.now_ns();
        if o.expired_at(now) {
            let attempts = o.attempts();
            self.emit(&o, EventKind::Expired { attempts });
            self.events.wake();
            return;
        }
        let n = o.attempts() + 1;
        let bridge =
            &self.bridges[((o.seq + u64::from(n) - 1) % self.bridges.len() as u64) as usize];
        let outcome = bridge.execute(
            &BridgeOrder {
                order_id: &o.id,
                symbol: &o.symbol,
                side: o.side,
                qty: o.qty,
                attempt: n,
            },
            now,
        );
        let (delay_ns, ceiling_ns) = o.next_delay;
        let record = |what: String| AttemptRecord {
            n,
            bridge: bridge.name().to_string(),
            outcome: what,
            at_ns: now,
            wall_ns: wall_ns(),
            delay_ns,
            ceiling_ns,
        };
        match outcome {
            Outcome::Executed(fills) => {
                o.history.push(record("executed".into()));
                let (mut cum, mut amount) = (Lots(0), Default::default());
                for f in &fills {
                    cum = f.cum_lots;
                    amount = f.cum_amount;
                    self.emit(
                        &o,
                        EventKind::Fill {
                            n: f.fill_no,
                            cum,
                            amount,
                            left: Lots(o.qty.0.saturating_sub(cum.0)),
                        },
                    );
                }
                self.emit(
                    &o,
                    EventKind::Done {
                        status: DoneStatus::of(cum, o.qty),
                        cum,
                        amount,
                        attempts: n,
                    },
                );
            }
            Outcome::Permanent(why) => {
                o.history.push(record(format!("permanent:{why}")));
                self.dead(o, DeadReason::BridgeRejected);
            }
            Outcome::Transient(why) => {
                o.history.push(record(format!("transient:{why}")));
                self.park(o, now);
            }
        }
        self.events.wake();
        self.recorder
            .record(Stage::OrderProcess, self.mono.now_ns().saturating_sub(t0));
    }

    /// A transient failure: to the delay queue, or to the DLQ when the policy
    /// or the bound says no.
    fn park(&mut self, mut o: Order, now: u64) {
        let retry = o.attempts(); // the retry this would be: 1 after the first attempt
        if self.draining.load(Ordering::Acquire) {
            return self.dead(o, DeadReason::Shutdown);
        }
        if !self.backoff.allows(retry) {
            return self.dead(o, DeadReason::RetriesExhausted);
        }
        if !self.permits.try_acquire() {
            return self.dead(o, DeadReason::RetryQueueFull);
        }
        let delay = self.backoff.delay_ns(retry, o.next_delay.0, &mut self.rng);
        o.next_delay = (delay, self.backoff.ceiling_ns(retry));
        if let Err(e) = self.retry_tx.try_send((now.saturating_add(delay), o)) {
            // The channel holds `permits` orders, so only a stopped timer gets here.
            self.permits.release();
            let (_, o) = e.into_inner();
            self.dead(o, DeadReason::Shutdown);
        }
    }

    fn dead(&mut self, o: Order, reason: DeadReason) {
        dead_letter(&self.dlq, &self.events, o, reason);
    }

    fn emit(&self, o: &Order, kind: EventKind) {
        self.events.send(Event {
            conn: o.conn,
            id: Arc::clone(&o.id),
            recv_mono_ns: o.recv_mono_ns,
            kind,
        });
    }
}

/// Hands `o` to the DLQ (blocking: never dropped), then tells the gateway.
/// Used by the workers and the retry timer.
pub fn dead_letter(dlq: &DlqSender, events: &EventSender, o: Order, reason: DeadReason) {
    let rec = o.dead_letter(reason, wall_ns());
    if dlq.send_order(rec).is_err() {
        log::error!(
            "dead letter of order {} not stored: DLQ thread stopped",
            o.id
        );
    }
    events.send(Event {
        conn: o.conn,
        id: Arc::clone(&o.id),
        recv_mono_ns: o.recv_mono_ns,
        kind: EventKind::Dead {
            reason,
            attempts: o.attempts(),
            last: o.last_outcome().to_string(),
        },
    });
}
