//! The publisher thread's event loop: one turn polls the subscriber sockets
//! and calls the parts of the publish path in data-flow order. The parts
//! live in files named for what they own; this file holds only the loop,
//! the state the parts share, and its construction.
//!
//! One turn:
//! 1. poll (blocking only when the previous turn did nothing, per the idle
//!    strategy, and never past the next rate token, stats refresh or
//!    histogram flush); hand accepts to [`super::intake`], readable sockets
//!    to [`super::input`], writable ones to [`super::flush`];
//! 2. learn symbols the feed interned and take up to `MAX_BATCH` dirty
//!    updates (fewer under a rate cap), each fanned out by
//!    [`super::fanout`] ([`super::slot_drain`]);
//! 3. write every buffer that got data ([`super::flush`]); refill drained
//!    slow subscribers with the latest values they missed
//!    ([`super::slow_revisit`]);
//! 4. close subscribers past their authentication deadline
//!    ([`super::intake`]), flush the histograms, refresh the figures
//!    reports read ([`super::stats`]).
//!
//! Single owner: everything here belongs to the publisher thread; the slot
//! reader is the dirty queue's single consumer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use parking_lot::Mutex;
use slab::Slab;

use crate::auth::Token as AuthToken;
use crate::idle::IdleStrategy;
use crate::metrics::counters::Counters;
use crate::metrics::report::SubscriberStats;
use crate::metrics::StageRecorder;
use crate::publish::fanout::Fanout;
use crate::publish::housekeeping::ServerInfo;
use crate::publish::intake::PendingAuth;
use crate::publish::rate::RateCap;
use crate::publish::routes::Routes;
use crate::publish::session::Session;
use crate::publish::stats::StatsBoard;
use crate::publish::work_list::WorkList;
use crate::slots::SlotReader;
use crate::symbols::{SymbolId, SymbolTable};
use crate::sys::clock::MonoClock;
use crate::sys::net::{poll_events, Polled};

pub(super) const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the waker the feed (new data) and the runtime (stop) use.
pub const WAKER: Token = Token(usize::MAX);
/// Most updates taken per turn, so sockets are served between batches.
pub(super) const MAX_BATCH: usize = 1024;
const MAX_PARK: Duration = Duration::from_millis(100);

/// Settings of the publisher.
#[derive(Debug, Clone)]
pub struct PublisherSettings {
    /// Subscriber output buffer high-water mark, bytes.
    pub hwm: usize,
    /// Most simultaneous subscribers.
    pub max_conns: usize,
    /// Most updates taken per second (0 = unlimited).
    pub max_rate: u64,
    /// What to do when a turn found nothing.
    pub idle: IdleStrategy,
    /// How often per-subscriber figures are published for reports.
    pub stats_interval_ns: u64,
    /// Token subscribers must present with `AUTH`, if any.
    pub token: Option<AuthToken>,
    /// Close a subscriber that has not authenticated by then.
    pub auth_timeout_ns: u64,
    /// Most channels + patterns one subscriber may hold.
    pub max_subscriptions: usize,
    /// Kernel send buffer per subscriber socket (0 = OS auto-tuning).
    pub sndbuf: usize,
}

/// Everything the publisher thread owns.
#[derive(Debug)]
pub struct Publisher {
    pub(super) poll: Poll,
    pub(super) listener: TcpListener,
    pub(super) sessions: Slab<Session>,
    pub(super) routes: Routes,
    pub(super) slots: SlotReader,
    pub(super) table: Arc<SymbolTable>,
    /// Latest encoded value and last taken sequence number per symbol.
    pub(super) fanout: Fanout,
    pub(super) counters: Arc<Counters>,
    pub(super) recorder: StageRecorder,
    pub(super) clock: MonoClock,
    pub(super) settings: PublisherSettings,
    pub(super) rate: RateCap,
    /// Sessions with output to write this turn.
    pub(super) flush_list: WorkList,
    /// Sessions with pending symbols or unhandled input, revisited when they drain.
    pub(super) attention: WorkList,
    /// Receive times of this turn's updates, for the end-to-end stage.
    pub(super) batch_recv: Vec<u64>,
    /// Scratch list of pattern matches for `PSUBSCRIBE` snapshots.
    pub(super) matched: Vec<SymbolId>,
    pub(super) next_session_id: u64,
    /// Figures for reports, and the last closed subscribers'.
    pub(super) stats: StatsBoard,
    /// Subscribers waiting to authenticate, in deadline order.
    pub(super) pending_auth: PendingAuth,
    /// What `HELLO`, `INFO` and `CLIENT INFO` report.
    pub(super) server: ServerInfo,
    stop: Arc<AtomicBool>,
}

impl Publisher {
    /// Builds the loop around a bound listener and the poller whose waker the feed holds.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    #[allow(clippy::too_many_arguments)] // reason: the wiring hands each stage its parts once
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        slots: SlotReader,
        table: Arc<SymbolTable>,
        counters: Arc<Counters>,
        recorder: StageRecorder,
        clock: MonoClock,
        settings: PublisherSettings,
        stats: Arc<Mutex<Vec<SubscriberStats>>>,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let cap = table.capacity();
        let laddr = listener.local_addr()?;
        let server = ServerInfo {
            tcp_port: laddr.port(),
            laddr: laddr.to_string(),
            started_ns: clock.now_ns(),
            max_clients: settings.max_conns,
        };
        Ok(Publisher {
            poll,
            listener,
            sessions: Slab::with_capacity(settings.max_conns.min(1024)),
            routes: Routes::new(),
            slots,
            table,
            fanout: Fanout::new(cap),
            counters,
            recorder,
            clock,
            rate: RateCap::new(settings.max_rate),
            flush_list: WorkList::with_capacity(settings.max_conns.min(1024)),
            attention: WorkList::with_capacity(settings.max_conns.min(1024)),
            batch_recv: Vec::with_capacity(MAX_BATCH),
            matched: Vec::with_capacity(cap),
            next_session_id: 1,
            stats: StatsBoard::new(stats),
            pending_auth: PendingAuth::default(),
            server,
            settings,
            stop,
        })
    }

    /// Runs until the stop flag is set and the waker fires.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        while !self.stop.load(Ordering::Acquire) {
            let now = self.clock.now_ns();
            let mut max_park = Duration::from_nanos(self.recorder.ns_until_flush(now))
                .min(Duration::from_nanos(self.stats.ns_until_due(now)))
                .min(MAX_PARK);
            let rate_wait = self.rate.wait();
            if !rate_wait.is_zero() {
                max_park = max_park.min(rate_wait);
            } else if self.slots.dirty_len() > 0 {
                max_park = Duration::ZERO;
            }
            let timeout = self.settings.idle.poll_timeout(work, max_park);
            match poll_events(&mut self.poll, &mut events, timeout, "publisher") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    Token(key) => {
                        if ev.is_writable() {
                            self.writable(key);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            work += self.serve_input(key);
                        }
                    }
                }
            }
            self.learn_symbols();
            work += self.drain_slots();
            work += self.flush();
            work += self.serve_attention();
            let now = self.clock.now_ns();
            self.expire_unauthenticated(now);
            self.recorder.maybe_flush(now);
            if self.stats.due(now) {
                self.publish_stats(now);
                self.stats.next_due(now, self.settings.stats_interval_ns);
            }
        }
        // Final drain so everything accepted before the stop is published.
        self.learn_symbols();
        while self.drain_slots() > 0 {}
        self.flush();
        let now = self.clock.now_ns();
        self.publish_stats(now);
        self.recorder.finish(self.clock.now_ns());
    }
}
