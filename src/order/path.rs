//! Wiring of the order path: builds the queues, the bridges and the
//! threads, and stops them in an order that gives every accepted order
//! exactly one terminal reply.
//!
//! ```text
//!  clients ⇄ gateway ──main queue (bounded)──▶ workers ×N ──▶ bridges
//!              ▲  ▲                             │  ▲   │
//!              │  └──── events (bounded) ───────┘  │   └─(due, order)─▶ timer (delay queue)
//!              └──────── events ───────────────────┼──────────────────────┘   │
//!                                                  └──── ready (due retries) ◀┘
//! ```
//!
//! Threads: `tickfan-order-gw` (gateway), `tickfan-order-wN` (workers),
//! `tickfan-retry` (timer). Shutdown order:
//!
//! 1. the gateway stops reading and closes the main queue's producer side
//!    (and its listener: new connections are refused by the OS);
//! 2. workers stop parking retries (a transient failure is dead-lettered
//!    with reason `shutdown`, replayable after a restart); the timer
//!    dead-letters what waits in the delay queue and closes the ready
//!    channel;
//! 3. workers finish the main queue and exit; the timer exits once no
//!    worker can send to it;
//! 4. if the workers have not finished when the shutdown deadline passes
//!    (`--shutdown-deadline`, on the engine clock), no new attempt starts:
//!    the orders still queued (main queue, due retries) are dead-lettered
//!    with reason `shutdown` at once, and an order a worker takes from then
//!    on is too. An attempt already at a bridge is waited for: its outcome
//!    is unknown until the venue answers, and dead-lettering it would
//!    invite a `REPLAY` of an order that may have executed (a second
//!    signal exits at once, see [`crate::sys::signals`]);
//! 5. the gateway writes the last replies and exits once every event sender
//!    has gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use mio::{Poll, Waker};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::auth::Token as AuthToken;
use crate::bridge::sim::SimBridge;
use crate::bridge::Bridge;
use crate::dlq::{DlqSender, DlqStore};
use crate::idle::IdleStrategy;
use crate::metrics::counters::Counters;
use crate::metrics::recorder::RecorderLink;
use crate::metrics::{Stage, StageRecorder};
use crate::retry::timer::TimerLoop;
use crate::retry::{Permits, SharedClock};
use crate::sys::clock::MonoClock;

use super::admission::{admission, QueueStats};
use super::config::OrderConfig;
use super::dedup::Dedup;
use super::events::{EventSender, EVENT_CAPACITY};
use super::gateway::{Gateway, GatewaySettings, WAKER};
use super::parking::Parking;
use super::protocol::DeadReason;
use super::types::Order;
use super::worker::{dead_letter, Worker};

/// How often the retry timer looks at its clock when retries are waiting.
pub const RETRY_TICK: Duration = Duration::from_millis(2);

/// What the order path is built from.
#[derive(Debug)]
pub struct OrderPathInputs {
    /// The bound order listener.
    pub listener: mio::net::TcpListener,
    /// Settings.
    pub config: OrderConfig,
    /// Most connections.
    pub max_conns: usize,
    /// Idle strategy of the gateway loop.
    pub idle: IdleStrategy,
    /// Counters (the order and retry groups are written here).
    pub counters: Arc<Counters>,
    /// The DLQ store (replay index).
    pub dlq_store: Arc<DlqStore>,
    /// Dead-letter hand-off.
    pub dlq: DlqSender,
    /// Histogram hand-off to the reporter.
    pub link: RecorderLink,
    /// Histogram hand-off interval.
    pub interval_ns: u64,
    /// Measurement clock.
    pub mono: MonoClock,
    /// Engine clock (deadlines, retries, dedup retention, outages).
    pub clock: SharedClock,
    /// Bridges to use instead of the simulators of `config.bridges`.
    pub bridges: Option<Vec<Arc<dyn Bridge>>>,
    /// Token every order connection must present first, if any.
    pub token: Option<AuthToken>,
    /// Close a connection that has not authenticated by then.
    pub auth_timeout: Duration,
}

/// What `stop` needs to dead-letter the orders still queued when the
/// shutdown deadline passes. Dropped at the end of `stop` (it holds an
/// event sender, and the gateway runs until every sender has gone).
#[derive(Debug)]
struct Leftovers {
    main: Receiver<Order>,
    main_stats: Arc<QueueStats>,
    ready: Receiver<Order>,
    events: EventSender,
    dlq: DlqSender,
}

impl Leftovers {
    /// Dead-letters every order waiting in the main queue or among the due
    /// retries (`shutdown`); returns how many.
    fn drain(&self, permits: &Permits) -> usize {
        let mut n = 0;
        while let Ok(o) = self.main.try_recv() {
            self.main_stats.on_take();
            dead_letter(&self.dlq, &self.events, o, DeadReason::Shutdown);
            n += 1;
        }
        while let Ok(o) = self.ready.try_recv() {
            permits.release();
            dead_letter(&self.dlq, &self.events, o, DeadReason::Shutdown);
            n += 1;
        }
        self.events.wake();
        n
    }
}

/// The running order path.
#[derive(Debug)]
pub struct OrderPath {
    closing: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
    timer_stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    permits: Arc<Permits>,
    /// Set when the shutdown deadline passed: workers start no new attempt.
    abandon: Arc<AtomicBool>,
    /// Disconnected once every worker thread has ended (each holds a sender).
    workers_done: Receiver<()>,
    leftovers: Option<Leftovers>,
    clock: SharedClock,
    shutdown_deadline: Duration,
    gateway: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
}

impl OrderPath {
    /// Starts the gateway, the workers and the retry timer.
    ///
    /// # Errors
    /// When a poller, waker or thread cannot be created.
    pub fn start(i: OrderPathInputs) -> std::io::Result<OrderPath> {
        let c = &i.config;
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (adm, main_rx, stats) = admission(c.queue_capacity);
        let (ev_tx, ev_rx) = crossbeam_channel::bounded(EVENT_CAPACITY);
        let events = EventSender::new(ev_tx, Arc::clone(&waker));
        let permits = Arc::new(Permits::new(c.retry_queue_capacity));
        // Both channels around the delay queue hold at most `permits` orders.
        let (retry_tx, retry_rx) = crossbeam_channel::bounded(c.retry_queue_capacity);
        let (ready_tx, ready_rx) = crossbeam_channel::bounded(c.retry_queue_capacity);
        let closing = Arc::new(AtomicBool::new(false));
        let draining = Arc::new(AtomicBool::new(false));
        let timer_stop = Arc::new(AtomicBool::new(false));
        let abandon = Arc::new(AtomicBool::new(false));
        let (done_tx, workers_done) = crossbeam_channel::bounded::<()>(0);
        let start_ns = i.clock.now_ns();
        let bridges: Arc<[Arc<dyn Bridge>]> = match i.bridges {
            Some(b) => b.into(),
            None => c
                .bridges
                .iter()
                .map(|s| Arc::new(SimBridge::new(s.clone(), start_ns)) as Arc<dyn Bridge>)
                .collect(),
        };

        let mut workers = Vec::with_capacity(c.workers);
        for n in 0..c.workers {
            let w = Worker {
                main: main_rx.clone(),
                main_stats: Arc::clone(&stats),
                ready: ready_rx.clone(),
                retry_tx: retry_tx.clone(),
                permits: Arc::clone(&permits),
                bridges: Arc::clone(&bridges),
                backoff: c.retry,
                clock: Arc::clone(&i.clock),
                mono: i.mono,
                events: events.clone(),
                dlq: i.dlq.clone(),
                draining: Arc::clone(&draining),
                abandon: Arc::clone(&abandon),
                recorder: StageRecorder::new(
                    &[Stage::OrderQueueWait, Stage::OrderProcess],
                    i.link.clone(),
                    i.interval_ns,
                ),
                rng: StdRng::seed_from_u64(worker_seed(n)),
            };
            let done = done_tx.clone();
            workers.push(
                std::thread::Builder::new()
                    .name(format!("tickfan-order-w{n}"))
                    .spawn(move || {
                        let _done = done; // dropped when the worker ends, even by a panic
                        w.run();
                    })?,
            );
        }
        drop((done_tx, retry_tx));
        let leftovers = Leftovers {
            main: main_rx,
            main_stats: stats,
            ready: ready_rx,
            events: events.clone(),
            dlq: i.dlq.clone(),
        };

        let timer = TimerLoop::new(
            c.retry_queue_capacity,
            retry_rx,
            Arc::clone(&i.clock),
            Parking {
                ready: Some(ready_tx),
                permits: Arc::clone(&permits),
                events: events.clone(),
                dlq: i.dlq.clone(),
                counters: Arc::clone(&i.counters),
            },
            RETRY_TICK,
            Arc::clone(&timer_stop),
        );
        let timer = std::thread::Builder::new()
            .name("tickfan-retry".into())
            .spawn(move || {
                timer.run();
            })?;
        drop(events);

        let gateway = Gateway::new(
            poll,
            i.listener,
            adm,
            ev_rx,
            Dedup::new(c.dedup_retention.as_nanos() as u64, c.dedup_capacity),
            i.dlq_store,
            i.dlq,
            i.counters,
            StageRecorder::new(
                &[Stage::OrderReject, Stage::OrderE2e],
                i.link,
                i.interval_ns,
            ),
            i.mono,
            Arc::clone(&i.clock),
            GatewaySettings {
                max_conns: i.max_conns,
                max_line_len: c.max_line_len,
                idle: i.idle,
                token: i.token,
                auth_timeout_ns: i.auth_timeout.as_nanos() as u64,
                max_order_rate: c.max_order_rate,
            },
            Arc::clone(&closing),
        )?;
        let gateway = std::thread::Builder::new()
            .name("tickfan-order-gw".into())
            .spawn(move || gateway.run())?;
        Ok(OrderPath {
            closing,
            draining,
            timer_stop,
            waker,
            permits,
            abandon,
            workers_done,
            leftovers: Some(leftovers),
            clock: i.clock,
            shutdown_deadline: c.shutdown_deadline,
            gateway: Some(gateway),
            workers,
            timer: Some(timer),
        })
    }

    /// Orders in the retry stage now (delay queue and the channels around it).
    pub fn retry_in_use(&self) -> usize {
        self.permits.in_use()
    }

    /// Stops in order (see the module docs); every accepted order has had
    /// its terminal reply when this returns. Returns once the workers have
    /// finished, or at the shutdown deadline plus the longest bridge call
    /// then in progress.
    pub fn stop(&mut self) {
        self.closing.store(true, Ordering::Release);
        let _ = self.waker.wake();
        self.draining.store(true, Ordering::Release);
        self.timer_stop.store(true, Ordering::Release);
        if !self.workers_finish_by_deadline() {
            self.abandon.store(true, Ordering::Release);
            if let Some(l) = &self.leftovers {
                let n = l.drain(&self.permits);
                log::warn!(
                    "shutdown deadline ({:?}) passed: {n} queued order(s) dead-lettered (shutdown); waiting for attempts at a bridge",
                    self.shutdown_deadline
                );
            }
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        // Late orders (admitted while the gateway saw `closing`) were taken
        // by a worker; nothing is left, but drain once more to be sure.
        if let Some(l) = self.leftovers.take() {
            l.drain(&self.permits);
        }
        let _ = self.waker.wake();
        if let Some(g) = self.gateway.take() {
            let _ = g.join();
        }
    }

    /// Waits for every worker to end, up to the shutdown deadline on the
    /// engine clock (checked every [`RETRY_TICK`], so a simulated clock
    /// drives it). True when they all ended in time.
    fn workers_finish_by_deadline(&self) -> bool {
        let deadline = self
            .clock
            .now_ns()
            .saturating_add(self.shutdown_deadline.as_nanos() as u64);
        loop {
            match self.workers_done.recv_timeout(RETRY_TICK) {
                Err(RecvTimeoutError::Disconnected) => return true,
                Ok(()) | Err(RecvTimeoutError::Timeout) => {
                    if self.clock.now_ns() >= deadline {
                        return false;
                    }
                }
            }
        }
    }

    /// Has it been stopped?
    pub fn is_stopped(&self) -> bool {
        self.gateway.is_none()
    }
}

/// Each worker's jitter generator is seeded from its number: runs repeat.
const fn worker_seed(n: usize) -> u64 {
    0x7469_636b_6661_6e00 ^ n as u64
}
