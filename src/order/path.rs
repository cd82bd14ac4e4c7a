//! Wiring of the order path: builds the queues, the bridges and the
//! threads, and stops them in an order that gives every accepted order
//! exactly one terminal reply.
//!
//! ```text
//!  clients ⇄ gateway ──small queue──▶ small workers ×N ──┬──▶ bridges
//!              ▲  ▲  ──large queue──▶ large workers ×M ──┤     (chunks ⟲ chunk queue)
//!              │  │                      ▲   │ fills      └─(due, order)─▶ timer (delay queue)
//!              │  └── FILL/DONE ── fill thread ◀──────────────── chunk ends ──┘   │
//!              └───── DEAD/EXPIRED (events, bounded) ◀── workers, timer         │
//!                           ready (due retries, one channel per lane) ◀──────────┘
//! ```
//!
//! Threads: `tickfan-order-gw` (gateway), `tickfan-order-wN` (small-lane
//! workers), `tickfan-order-LN` (large-lane workers), `tickfan-retry`
//! (timer), `tickfan-fills` (fill thread). Shutdown order:
//!
//! 1. the gateway stops reading and closes the main queue's producer side;
//! 2. workers stop parking retries (a transient failure is dead-lettered
//!    with reason `shutdown`, replayable after a restart); the timer
//!    dead-letters what waits in the delay queue and closes the ready
//!    channel;
//! 3. workers finish the main queue and exit; the timer exits once no
//!    worker can send to it;
//! 4. the fill thread, once every worker and the timer have gone (its inbox
//!    closes), skips the gaps still open, sends the last `FILL`/`DONE`s and
//!    exits;
//! 5. the gateway writes the last replies and exits once every event sender
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
use super::fill_book::FillBook;
use super::fill_thread::{FillThread, FILL_CAPACITY};
use super::gateway::{Gateway, GatewaySettings, WAKER};
use super::lanes::{Lane, LaneMode};
use super::parking::Parking;
use super::worker::{e2e_stage, process_stage, queue_stage, Outlet, Worker};

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
    fills: Option<JoinHandle<()>>,
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
        let (adm, lane_rx) = admission(c.lanes, [c.queue_capacity, c.large_queue_capacity]);
        let (ev_tx, ev_rx) = crossbeam_channel::bounded(EVENT_CAPACITY);
        let events = EventSender::new(ev_tx, Arc::clone(&waker));
        let (fill_tx, fill_rx) = crossbeam_channel::bounded(FILL_CAPACITY);
        let out = Outlet {
            events: events.clone(),
            fills: fill_tx,
            dlq: i.dlq.clone(),
        };
        let permits = Arc::new(Permits::new(c.retry_queue_capacity));
        // The channels around the delay queue hold at most `permits` orders each.
        let (retry_tx, retry_rx) = crossbeam_channel::bounded(c.retry_queue_capacity);
        let (ready_small_tx, ready_small_rx) = crossbeam_channel::bounded(c.retry_queue_capacity);
        let (ready_large_tx, ready_large_rx) = crossbeam_channel::bounded(c.retry_queue_capacity);
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
        let [n_small, n_large] = c.lane_workers();
        let chunk_cap = n_large.max(1) * c.lanes.max_chunks as usize;
        let chunks =
            (c.lanes.mode == LaneMode::Split).then(|| crossbeam_channel::bounded(chunk_cap));

        let mut workers = Vec::with_capacity(n_small + n_large);
        for (lane, count) in [(Lane::Small, n_small), (Lane::Large, n_large)] {
            for n in 0..count {
                let (ready, name) = match lane {
                    Lane::Small => (ready_small_rx.clone(), format!("tickfan-order-w{n}")),
                    Lane::Large => (ready_large_rx.clone(), format!("tickfan-order-L{n}")),
                };
                let w = Worker {
                    lane,
                    own: lane_rx[lane.index()].clone(),
                    chunks: if lane == Lane::Large {
                        chunks.clone()
                    } else {
                        None
                    },
                    lanes: c.lanes,
                    ready,
                    retry_tx: retry_tx.clone(),
                    permits: Arc::clone(&permits),
                    bridges: Arc::clone(&bridges),
                    backoff: c.retry,
                    clock: Arc::clone(&i.clock),
                    mono: i.mono,
                    out: out.clone(),
                    draining: Arc::clone(&draining),
                    recorder: StageRecorder::new(
                        &[
                            Stage::OrderQueueWait,
                            Stage::OrderProcess,
                            queue_stage(lane),
                            process_stage(lane),
                        ],
                        i.link.clone(),
                        i.interval_ns,
                    ),
                    rng: StdRng::seed_from_u64(worker_seed(n + lane.index() * 1_000)),
                };
                workers.push(
                    std::thread::Builder::new()
                        .name(name)
                        .spawn(move || w.run())?,
                );
            }
        }
        drop((lane_rx, ready_small_rx, ready_large_rx, retry_tx, chunks));

        let timer = TimerLoop::new(
            c.retry_queue_capacity,
            retry_rx,
            Arc::clone(&i.clock),
            Parking {
                ready: [Some(ready_small_tx), Some(ready_large_tx)],
                permits: Arc::clone(&permits),
                out: out.clone(),
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
        drop(out);

        let fills = FillThread {
            inbox: fill_rx,
            book: FillBook::new(c.sequencer()),
            clock: Arc::clone(&i.clock),
            events: events.clone(),
            dlq: i.dlq.clone(),
            counters: Arc::clone(&i.counters),
            tick: c.gap_tick,
        };
        let fills = std::thread::Builder::new()
            .name("tickfan-fills".into())
            .spawn(move || fills.run())?;
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
                &[
                    Stage::OrderReject,
                    Stage::OrderE2e,
                    e2e_stage(Lane::Small),
                    e2e_stage(Lane::Large),
                ],
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
            fills: Some(fills),
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
        if let Some(f) = self.fills.take() {
            let _ = f.join();
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
