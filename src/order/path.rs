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
//! 1. the gateway stops reading and closes the main queue's producer side;
//! 2. workers stop parking retries (a transient failure is dead-lettered
//!    with reason `shutdown`, replayable after a restart); the timer
//!    dead-letters what waits in the delay queue and closes the ready
//!    channel;
//! 3. workers finish the main queue and exit; the timer exits once no
//!    worker can send to it;
//! 4. the gateway writes the last replies and exits once every event sender
//!    has gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use mio::{Poll, Waker};
use rand::rngs::StdRng;
use rand::SeedableRng;

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

use super::admission::admission;
use super::config::OrderConfig;
use super::dedup::Dedup;
use super::events::{EventSender, EVENT_CAPACITY};
use super::gateway::{Gateway, GatewaySettings, WAKER};
use super::parking::Parking;
use super::worker::Worker;

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
}

/// The running order path.
#[derive(Debug)]
pub struct OrderPath {
    closing: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
    timer_stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    permits: Arc<Permits>,
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
                recorder: StageRecorder::new(
                    &[Stage::OrderQueueWait, Stage::OrderProcess],
                    i.link.clone(),
                    i.interval_ns,
                ),
                rng: StdRng::seed_from_u64(worker_seed(n)),
            };
            workers.push(
                std::thread::Builder::new()
                    .name(format!("tickfan-order-w{n}"))
                    .spawn(move || w.run())?,
            );
        }
        drop((main_rx, ready_rx, retry_tx));

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
            i.clock,
            GatewaySettings {
                max_conns: i.max_conns,
                max_line_len: c.max_line_len,
                idle: i.idle,
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
    /// its terminal reply when this returns.
    pub fn stop(&mut self) {
        self.closing.store(true, Ordering::Release);
        let _ = self.waker.wake();
        self.draining.store(true, Ordering::Release);
        self.timer_stop.store(true, Ordering::Release);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        let _ = self.waker.wake();
        if let Some(g) = self.gateway.take() {
            let _ = g.join();
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
