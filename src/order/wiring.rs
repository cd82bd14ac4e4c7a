//! Wiring of the order path (its own small runtime, started by
//! `crate::runtime`): builds the queues, the bridges and the threads, and
//! stops them in an order that gives every accepted order exactly one
//! terminal reply.
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
//! workers), `tickfan-order-LN` (large-lane workers), `tickfan-order-scale`
//! (starts and retires each lane's workers between its min and max, and
//! keeps the capacity view: [`super::lanes::pool`]), `tickfan-retry`
//! (timer), `tickfan-fills` (fill thread). Shutdown order:
//!
//! 1. the gateway stops reading and closes the lane queues' producer side
//!    (and its listener: new connections are refused by the OS);
//! 2. workers stop parking retries (a transient failure is dead-lettered
//!    with reason `shutdown`, replayable after a restart); the timer
//!    dead-letters what waits in the delay queue and closes the ready
//!    channels;
//! 3. the scaler ends (no worker starts or retires from here) and drops
//!    its handles; workers finish their lane's queue and the chunk queue
//!    and exit; the timer exits once no worker can send to it;
//! 4. if the workers have not finished when the shutdown deadline passes
//!    (`--shutdown-deadline`, on the engine clock), no new attempt starts:
//!    the orders still queued (both lane queues, due retries of both lanes,
//!    the chunk queue) are dead-lettered with reason `shutdown` at once (a
//!    chunk's end goes to the fill thread, which answers for its parent),
//!    and an order or chunk a worker takes from then on is too (a large
//!    order is then dead-lettered whole, not split). An attempt already at
//!    a bridge is waited for: its outcome is unknown until the venue
//!    answers, and dead-lettering it would invite a `REPLAY` of an order
//!    that may have executed. A call that does not return raises the
//!    `bridge_call_slow` alert ([`super::venue`]: the gateway keeps
//!    refreshing those gauges after closing its intake, and the reporter
//!    logs the alert), and a second signal exits at once (see
//!    [`crate::sys::signals`]);
//! 5. the fill thread, once every worker, the timer and the leftovers
//!    drain have gone (its inbox closes), skips the gaps still open, sends
//!    the last `FILL`/`DONE`s and exits;
//! 6. the gateway writes the last replies and exits once every event sender
//!    has gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use mio::{Poll, Waker};

use crate::auth::Token as AuthToken;
use crate::bridge::sim::SimBridge;
use crate::bridge::Bridge;
use crate::dlq::{DlqSender, DlqStore};
use crate::idle::IdleStrategy;
use crate::metrics::counters::Counters;
use crate::metrics::recorder::RecorderLink;
use crate::metrics::{Stage, StageRecorder};
use crate::net::LoopCtx;
use crate::retry::timer::TimerLoop;
use crate::retry::{Permits, SharedClock};
use crate::sys::clock::MonoClock;
use crate::sys::watch::Watch;

use crate::model::lane::Lane;
use crate::model::order_reasons::DeadReason;

use super::config::LaneMode;
use super::config::OrderConfig;
use super::fills::fill_book::FillBook;
use super::fills::fill_thread::{FillThread, FILL_CAPACITY};
use super::gateway::dedup::Dedup;
use super::gateway::pending_acks::PendingAcks;
use super::gateway::{Gateway, GatewayParts, GatewaySettings, WAKER};
use super::journal::files::WrapFiles;
use super::journal::startup;
use super::journal::writer::{Journal, JournalTiming};
use super::lanes::elastic::{ScalePolicy, UP_WINDOW};
use super::lanes::outlet::Outlet;
use super::lanes::pool::{Pool, ScaleLoop};
use super::lanes::quota::RetryQuota;
use super::lanes::retry_handoff::RetryHandoff;
use super::lanes::worker::WorkerKit;
use super::msg::admission::{admission, LaneRx};
use super::msg::event::e2e_stage;
use super::msg::event::{EventSender, EVENT_CAPACITY};
use super::msg::fill::FillMsg;
use super::msg::halt::Halt;
use super::msg::journal::JournalHandle;
use super::msg::order::Order;
use super::venue::{BridgeCalls, CallPool, FenceTokens, InflightLimit};

/// How often the retry timer looks at its clock when retries are waiting.
pub(crate) const RETRY_TICK: Duration = Duration::from_millis(2);

/// Longest the fatal path waits for the journal to commit what it holds.
const FATAL_SYNC: Duration = Duration::from_secs(2);

/// The journal's handle and its thread.
type JournalThread = (Journal, JoinHandle<()>);

/// What the order path is built from.
///
/// Over 15 fields: one per thing the engine hands the order path (its
/// listener, settings, clocks, shared stores and hand-offs, test hooks),
/// named here instead of passed as a long argument list.
#[derive(Debug)]
pub(crate) struct OrderPathInputs {
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
    /// Measurement clock.
    pub mono: MonoClock,
    /// Engine clock (deadlines, retries, dedup retention, outages).
    pub clock: SharedClock,
    /// Bridges to use instead of the simulators of `config.bridges`.
    pub bridges: Option<Vec<Arc<dyn Bridge>>>,
    /// Put around the journal's segment files (tests).
    pub journal_files: Option<WrapFiles>,
    /// Token every order connection must present first, if any.
    pub token: Option<AuthToken>,
    /// Close a connection that has not authenticated by then.
    pub auth_timeout: Duration,
    /// The engine's thread watch: every order-path thread holds a beat.
    pub watch: Arc<Watch>,
    /// The order kill switch (also held by the admin endpoint).
    pub halt: Arc<Halt>,
    /// The order port's TLS, if it speaks TLS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// What `stop` needs to dead-letter the orders still queued when the
/// shutdown deadline passes. Dropped at the end of `stop`, before the fill
/// thread is joined (it holds a fill sender, and the fill thread runs until
/// every sender has gone; and an event sender, for the gateway likewise).
#[derive(Debug)]
struct Leftovers {
    /// Both lane queues, by [`Lane::index`].
    lanes: [LaneRx; 2],
    /// Due retries of both lanes, by [`Lane::index`].
    ready: [Receiver<Order>; 2],
    /// The large lane's chunk queue (split mode only).
    chunks: Option<Receiver<Order>>,
    out: Outlet,
}

impl Leftovers {
    /// Dead-letters every order waiting in a lane queue, among the due
    /// retries or in the chunk queue (`shutdown`; a chunk's end goes to the
    /// fill thread); returns how many.
    fn drain(&self, permits: &Permits) -> usize {
        let mut n = 0;
        for q in &self.lanes {
            while let Ok(o) = q.rx.try_recv() {
                q.stats.on_take();
                // A cancelled one was answered already.
                if o.claim.take() {
                    self.out.dead(o, DeadReason::Shutdown);
                    n += 1;
                }
            }
        }
        for r in &self.ready {
            while let Ok(o) = r.try_recv() {
                permits.release();
                if o.chunk.is_some() || o.claim.take() {
                    self.out.dead(o, DeadReason::Shutdown);
                    n += 1;
                }
            }
        }
        if let Some(c) = &self.chunks {
            while let Ok(o) = c.try_recv() {
                self.out.dead(o, DeadReason::Shutdown);
                n += 1;
            }
        }
        self.out.events.wake();
        n
    }
}

/// The running order path.
#[derive(Debug)]
pub(crate) struct OrderPath {
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
    /// The scaler thread; it returns the workers' join handles when it ends.
    scaler: Option<JoinHandle<Vec<JoinHandle<()>>>>,
    timer: Option<JoinHandle<()>>,
    fills: Option<JoinHandle<()>>,
    /// The journal and its thread (`None`: `--no-journal`); stopped after
    /// the gateway, which writes the last terminal records.
    journal: Option<JournalThread>,
}

impl OrderPath {
    /// Starts the gateway, the workers and the retry timer.
    ///
    /// # Errors
    /// When a poller, waker or thread cannot be created.
    pub(crate) fn start(mut i: OrderPathInputs) -> std::io::Result<OrderPath> {
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
        let abandon = Arc::new(AtomicBool::new(false));
        let (done_tx, workers_done) = crossbeam_channel::bounded::<()>(0);
        let bridges = open_bridges(c, i.bridges.take(), i.clock.now_ns())?;
        let [small_bounds, large_bounds] = c.lane_workers();
        let seats = [small_bounds.1, large_bounds.1];
        let chunk_cap = seats[1].max(1) * c.lanes.max_chunks as usize;
        let chunks =
            (c.lanes.mode == LaneMode::Split).then(|| crossbeam_channel::bounded(chunk_cap));
        let bridge_calls = Arc::new(BridgeCalls::new(seats[0] + seats[1]));
        let call_pool = Arc::new(
            CallPool::new(c.bridge_lease, seats[0] + seats[1], Arc::clone(&i.counters))
                .watched_by(Arc::clone(&i.watch)),
        );
        let inflight = inflight_limits(c, &bridges);
        // The journal first: recovery tells the workers where fencing
        // tokens continue, and they journal each attempt.
        let mut dedup = Dedup::new(c.dedup_retention.as_nanos() as u64, c.dedup_capacity);
        let (pending, journal, last_token) = open_journal(&mut i, &waker, &mut dedup)?;
        let c = &i.config;
        let tokens = Arc::new(FenceTokens::after(last_token));

        let kit = WorkerKit {
            lanes: lane_rx.clone(),
            ready: [ready_small_rx.clone(), ready_large_rx.clone()],
            chunks: chunks.clone(),
            lane_config: c.lanes,
            retry_tx,
            permits: Arc::clone(&permits),
            bridges: Arc::clone(&bridges),
            inflight,
            bridge_calls: Arc::clone(&bridge_calls),
            call_pool,
            tokens,
            journal: journal
                .as_ref()
                .map(|(j, _)| Arc::new(j.clone()) as JournalHandle),
            backoff: c.retry,
            clock: Arc::clone(&i.clock),
            mono: i.mono,
            out: out.clone(),
            draining: Arc::clone(&draining),
            abandon: Arc::clone(&abandon),
            link: i.link.clone(),
            watch: Arc::clone(&i.watch),
            done: done_tx,
            loads: Default::default(),
            seats,
            halt: Arc::clone(&i.halt),
            quotas: [
                Arc::new(RetryQuota::new(c.retry_share)),
                Arc::new(RetryQuota::new(c.retry_share)),
            ],
        };
        let scaler = start_scaler(Pool::new(kit), [small_bounds, large_bounds], &draining, &i)?;
        let leftovers = Leftovers {
            lanes: lane_rx,
            ready: [ready_small_rx, ready_large_rx],
            chunks: chunks.map(|(_, rx)| rx),
            out: out.clone(),
        };

        let timer = start_timer(
            &i,
            retry_rx,
            RetryHandoff {
                ready: [Some(ready_small_tx), Some(ready_large_tx)],
                permits: Arc::clone(&permits),
                out: out.clone(),
                counters: Arc::clone(&i.counters),
            },
            Arc::clone(&timer_stop),
        )?;
        drop(out);

        let fills = start_fills(&i, fill_rx, events.clone())?;
        drop(events);

        let settings = gateway_settings(&mut i);
        let gateway = Gateway::new(
            i.listener,
            LoopCtx {
                poll,
                counters: i.counters,
                recorder: gateway_recorder(i.link),
                clock: i.mono,
                stop: Arc::clone(&closing),
                beat: i.watch.beat("tickfan-order-gw"),
            },
            GatewayParts {
                admission: adm,
                events: ev_rx,
                dedup,
                dlq_store: i.dlq_store,
                dlq: i.dlq,
                clock: Arc::clone(&i.clock),
                bridge_calls,
                pending,
                halt: Arc::clone(&i.halt),
            },
            settings,
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
            shutdown_deadline: i.config.shutdown_deadline,
            gateway: Some(gateway),
            scaler: Some(scaler),
            timer: Some(timer),
            fills: Some(fills),
            journal,
        })
    }

    /// Orders in the retry stage now (delay queue and the channels around it).
    pub(crate) fn retry_in_use(&self) -> usize {
        self.permits.in_use()
    }

    /// Stops in order (see the module docs); every accepted order has had
    /// its terminal reply when this returns. Returns once the workers have
    /// finished, or at the shutdown deadline plus the longest bridge call
    /// then in progress.
    pub(crate) fn stop(&mut self) {
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
        if let Some(s) = self.scaler.take() {
            for w in s.join().unwrap_or_default() {
                let _ = w.join();
            }
        }
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        // Late orders (admitted while the gateway saw `closing`) were taken
        // by a worker; nothing is left, but drain once more to be sure. Then
        // drop the leftovers: their fill sender is the last one, and the fill
        // thread ends only once it has gone.
        if let Some(l) = self.leftovers.take() {
            l.drain(&self.permits);
        }
        if let Some(f) = self.fills.take() {
            let _ = f.join();
        }
        let _ = self.waker.wake();
        if let Some(g) = self.gateway.take() {
            let _ = g.join();
        }
        if let Some((j, t)) = self.journal.take() {
            j.stop();
            let _ = t.join();
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
}

/// The venues: the ones given (tests), or a simulator per configured spec.
///
/// # Errors
/// When a simulator cannot be opened.
fn open_bridges(
    c: &OrderConfig,
    given: Option<Vec<Arc<dyn Bridge>>>,
    start_ns: u64,
) -> std::io::Result<Arc<[Arc<dyn Bridge>]>> {
    Ok(match given {
        Some(b) => b.into(),
        None => c
            .bridges
            .iter()
            .map(|s| SimBridge::open(s.clone(), start_ns).map(|b| Arc::new(b) as Arc<dyn Bridge>))
            .collect::<std::io::Result<_>>()?,
    })
}

/// Each bridge's `max_inflight`, from the spec of its name.
fn inflight_limits(c: &OrderConfig, bridges: &[Arc<dyn Bridge>]) -> Arc<[Arc<InflightLimit>]> {
    bridges
        .iter()
        .map(|b| {
            let spec = c.bridges.iter().find(|s| s.name == b.name());
            InflightLimit::new(spec.and_then(|s| s.max_inflight))
        })
        .collect()
}

/// The journal and what recovery found (with `--no-journal`: nothing):
/// the gateway's pending `ACK`s holding the recovered orders, the journal
/// and its thread, and the fencing token this run's tokens start after.
/// `dedup` is told every id recovery keeps.
///
/// # Errors
/// When the journal cannot be recovered or started.
fn open_journal(
    i: &mut OrderPathInputs,
    waker: &Arc<Waker>,
    dedup: &mut Dedup,
) -> std::io::Result<(Option<PendingAcks>, Option<JournalThread>, u64)> {
    let c = &i.config;
    let mut last_token = 0;
    let (pending, journal) = if c.journal {
        let w = Arc::clone(waker);
        let opened = startup::open(
            c,
            dedup,
            i.clock.now_ns(),
            i.mono.now_ns(),
            Box::new(move || {
                let _ = w.wake();
            }),
            &|id| i.dlq_store.replayable(id),
            startup::JournalStart {
                watch: Some(Arc::clone(&i.watch)),
                wrap_files: i.journal_files.take(),
                clock: Some(Arc::clone(&i.clock)),
                timing: Some(JournalTiming::new(i.link.clone(), i.mono)),
            },
        )
        .map_err(std::io::Error::other)?;
        last_token = opened.last_fence_token;
        // A thread died: what the journal holds is committed before
        // the exit (bounded: the journal thread may be the dead one).
        let j = opened.journal.clone();
        i.watch.on_fatal(move || {
            if !j.sync_pending(FATAL_SYNC) {
                log::error!("journal: not everything appended is durable at the exit");
            }
        });
        (
            Some(PendingAcks::new(
                Arc::new(opened.journal.clone()),
                opened.orders,
            )),
            Some((opened.journal, opened.thread)),
        )
    } else {
        (None, None)
    };
    Ok((pending, journal, last_token))
}

/// Starts the scaler thread (`tickfan-order-scale`) over `pool`, with each
/// lane's `(min, max)` workers by [`Lane::index`].
///
/// # Errors
/// When a worker or the thread cannot be created.
fn start_scaler(
    pool: Pool,
    bounds: [(usize, usize); 2],
    stop: &Arc<AtomicBool>,
    i: &OrderPathInputs,
) -> std::io::Result<JoinHandle<Vec<JoinHandle<()>>>> {
    let c = &i.config;
    let policy = |(min, max): (usize, usize)| ScalePolicy {
        min,
        max,
        up_age_ns: c.slo.as_nanos() as u64 / 4,
        up_window_ns: UP_WINDOW.as_nanos() as u64,
        idle_ns: c.worker_idle.as_nanos() as u64,
    };
    let scale = ScaleLoop::start(
        pool,
        bounds.map(policy),
        c.slo,
        Arc::clone(&i.counters),
        Arc::clone(stop),
    )?;
    spawn_watched("tickfan-order-scale", &i.watch, move || scale.run())
}

/// Starts the retry timer thread (`tickfan-retry`): due retries from
/// `retry_rx` go back through `handoff` until `stop`.
///
/// # Errors
/// When the thread cannot be created.
fn start_timer(
    i: &OrderPathInputs,
    retry_rx: Receiver<(u64, Order)>,
    handoff: RetryHandoff,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    let timer = TimerLoop::new(
        i.config.retry_queue_capacity,
        retry_rx,
        Arc::clone(&i.clock),
        handoff,
        RETRY_TICK,
        stop,
    );
    spawn_watched("tickfan-retry", &i.watch, move || {
        timer.run();
    })
}

/// Starts the fill thread (`tickfan-fills`) on `inbox`.
///
/// # Errors
/// When the thread cannot be created.
fn start_fills(
    i: &OrderPathInputs,
    inbox: Receiver<FillMsg>,
    events: EventSender,
) -> std::io::Result<JoinHandle<()>> {
    let fills = FillThread {
        inbox,
        book: FillBook::new(i.config.sequencer()),
        clock: Arc::clone(&i.clock),
        events,
        dlq: i.dlq.clone(),
        counters: Arc::clone(&i.counters),
        tick: i.config.gap_tick,
    };
    spawn_watched("tickfan-fills", &i.watch, move || {
        fills.run();
    })
}

/// The gateway's settings (its auth token and TLS are taken from `i`).
fn gateway_settings(i: &mut OrderPathInputs) -> GatewaySettings {
    let c = &i.config;
    GatewaySettings {
        max_conns: i.max_conns,
        max_line_len: c.max_line_len,
        idle: i.idle,
        token: i.token.take(),
        auth_timeout_ns: i.auth_timeout.as_nanos() as u64,
        max_order_rate: c.max_order_rate,
        acct_keys: c.acct_keys,
        tls: i.tls.take(),
    }
}

/// The gateway's histograms: rejects, `ACK`s and their release after a
/// commit, end to end (all and per lane).
fn gateway_recorder(link: RecorderLink) -> StageRecorder {
    StageRecorder::new(
        &[
            Stage::OrderReject,
            Stage::OrderAck,
            Stage::AckRelease,
            Stage::OrderE2e,
            e2e_stage(Lane::Small),
            e2e_stage(Lane::Large),
        ],
        link,
    )
}

/// Spawns thread `name` running `f`, holding a beat of `watch` while it runs.
///
/// # Errors
/// When the thread cannot be created.
fn spawn_watched<T: Send + 'static>(
    name: &str,
    watch: &Arc<Watch>,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    let watch = Arc::clone(watch);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _beat = watch.guard();
            f()
        })
}
