//! The publisher thread's event loop: one turn polls the subscriber sockets
//! and calls the parts of the publish path in data-flow order. The
//! publisher's methods are in three files: this one (the loop, the state
//! the parts share, its construction and the turn's housekeeping),
//! [`super::intake`] (subscribers and their input in) and
//! [`super::delivery`] (updates out to the sockets); the parts they call
//! live in files named for what they own.
//!
//! One turn:
//! 1. poll (blocking only when the previous turn did nothing, per the idle
//!    strategy, and never past the next rate token, throttle window end
//!    ([`super::sub_control`]), stats refresh or histogram flush); hand accepts to [`super::intake`], readable sockets
//!    to [`super::intake`], writable ones to [`super::delivery`];
//! 2. learn symbols the feed interned and take up to `MAX_BATCH` dirty
//!    updates (fewer under a rate cap), each fanned out by
//!    [`super::fanout`] ([`super::delivery`]);
//! 3. write every buffer that got data ([`super::delivery`], one session
//!    by [`super::flush`]); refill drained
//!    slow subscribers with the latest values they missed
//!    ([`super::delivery`]);
//! 4. close subscribers past their authentication deadline
//!    ([`super::intake`]), flush the histograms, refresh the figures
//!    reports read ([`super::stats`]); send stale/live notices (below).
//!
//! The connection plumbing is the kit's ([`crate::net`]): the listener with
//! the limit and its refusal line, the connection slab whose ids survive
//! reuse, the authentication deadlines, the input buffer, the flush and
//! attention lists, and the loop context. What stays here is the
//! subscriber's: RESP commands, subscriptions, and the conflating output
//! buffer.
//!
//! Single owner: everything here belongs to the publisher thread; the slot
//! reader is the dirty queue's single consumer.

use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Token};
use parking_lot::Mutex;

use crate::auth::Token as AuthToken;
use crate::idle::IdleStrategy;
use crate::metrics::counters::set;
use crate::metrics::report::SubscriberStats;
use crate::net::{
    AuthGate, Conns, GuestLoop, KeyList, Listener, LoopCtx, PortPolicy, TlsPort, LISTENER,
};
use crate::protocol::resp;
use crate::publish::fanout::Fanout;
use crate::publish::flush_gap::FlushGap;
use crate::publish::history::History;
use crate::publish::housekeeping::ServerInfo;
use crate::publish::routes::Routes;
use crate::publish::session::Session;
use crate::publish::shared_stall::SharedStall;
use crate::publish::stats::StatsBoard;
use crate::publish::throttle::WindowClock;
use crate::rate_limit::RateLimit;
use crate::slots::SlotReader;
use crate::stale::{Notice, StaleBoard, STALE_CHANNEL};
use crate::symbols::{SymbolId, SymbolTable};
use crate::sys::net::Polled;
use crate::tls::TlsPortName;

/// Token of the waker the feed (new data) and the runtime (stop) use.
pub(crate) const WAKER: Token = Token(usize::MAX);
/// Token of a guest loop's poller (`net::GuestLoop`: the feed, when the
/// engine has one core).
const GUEST: Token = Token(usize::MAX - 2);
/// Most updates taken per turn, so sockets are served between batches.
pub(super) const MAX_BATCH: usize = 1024;
/// Most receive times kept for one flush's end-to-end samples: a turn
/// that waits for the flush gap drains twice before it flushes.
pub(super) const MAX_RECV_TIMES: usize = 2 * MAX_BATCH;
const MAX_PARK: Duration = Duration::from_millis(100);
/// Longest park while sessions wait on the attention list: a paced
/// session's kernel queue drains without an event, so it is sampled again.
const ATTENTION_PARK: Duration = Duration::from_millis(1);
/// What a subscriber over the limit reads before its socket is closed (Redis's words).
const REFUSAL: &[u8] = b"-ERR max number of clients reached\r\n";
/// What a plaintext client of a TLS subscriber port reads before its close.
const TLS_REFUSAL: &[u8] = b"-ERR this port requires TLS\r\n";

/// Settings of the publisher.
///
/// One field per `serve` flag the publisher reads, plus the backbone's
/// hand-offs: over 15 fields, all set once at start.
#[derive(Debug, Clone)]
pub(crate) struct PublisherSettings {
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
    /// Each new subscriber's cap in updates per second per symbol (0 = none).
    pub sub_max_rate: f64,
    /// Each new subscriber's cap in data bytes per second (0 = none).
    pub sub_max_bandwidth: u64,
    /// Updates kept per symbol for `TICKFAN.SINCE` (0 = none).
    pub history_depth: usize,
    /// The clock of the throttle windows (the engine's monotonic clock, or
    /// a simulated one in tests).
    pub window_clock: WindowClock,
    /// An ingest's hand-off of every conflated update to the NATS backbone.
    pub outbox: Option<Arc<crate::cluster::ingest_out::Outbox>>,
    /// An edge's board of wanted channels and patterns (told by the routes).
    pub interest: Option<Arc<crate::cluster::interest::InterestBoard>>,
    /// `--stale-after` in ns (0 = off).
    pub stale_after_ns: u64,
    /// An edge's lost-link and re-seed events for the stale flags.
    pub stale_link: Option<Arc<crate::stale::StaleLink>>,
    /// `--sub-max-lag` in ns: a slow subscriber's committed bytes are
    /// bounded by this much time at its drain rate (0 = off).
    pub max_lag_ns: u64,
    /// Which pending symbol a slow subscriber is sent next.
    pub pending_order: crate::publish::pending_order::PendingOrder,
    /// `--sub-flush-gap` in ns: the least time between two flushes
    /// ([`super::flush_gap`]; 0 = flush at every turn).
    pub flush_gap_ns: u64,
    /// The port's TLS (`--tls-ports` with `subscribers`), if any.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Everything the publisher thread owns.
///
/// Over 15 fields: the one thread owns the sessions, the routes, the
/// fan-out, the slot reader and the lists its turn walks; its methods
/// (three files: this one, `intake.rs`, `delivery.rs`) each touch a few.
#[derive(Debug)]
pub(crate) struct Publisher {
    /// Poller, counters, recorder, clock and stop flag of this thread.
    pub(super) ctx: LoopCtx,
    /// The subscriber port: limit, refusal line, socket options.
    pub(super) listener: Listener,
    /// Open subscribers: the kit's connection (socket, id, peer) around the session.
    pub(super) sessions: Conns<Session>,
    /// The token and the deadlines of subscribers that have not authenticated.
    pub(super) auth: AuthGate,
    pub(super) routes: Routes,
    pub(super) slots: SlotReader,
    pub(super) table: Arc<SymbolTable>,
    /// Latest encoded value and last taken sequence number per symbol.
    pub(super) fanout: Fanout,
    /// The last updates of each symbol, for `TICKFAN.SINCE`.
    pub(super) history: History,
    pub(super) settings: PublisherSettings,
    /// The publish-rate cap (`--max-publish-rate`; none: uncapped), see
    /// [`publish_cap`](super::delivery::publish_cap).
    pub(super) rate: Option<RateLimit>,
    /// Sessions with output to write this turn.
    pub(super) flush_list: KeyList,
    /// Sessions with pending symbols or unhandled input, revisited when they drain.
    pub(super) attention: KeyList,
    /// Recent would-be pacing starts: stalls many subscribers share are
    /// not paced.
    pub(super) shared_stall: SharedStall,
    /// When the next flush may go (`--sub-flush-gap`).
    pub(super) flush_gap: FlushGap,
    /// Receive times of this turn's updates (both drains, when it waited
    /// for the flush gap; at most [`MAX_RECV_TIMES`]), for the end-to-end stage.
    pub(super) batch_recv: Vec<u64>,
    /// Scratch list of pattern matches for `PSUBSCRIBE` snapshots.
    pub(super) matched: Vec<SymbolId>,
    /// The next subscriber's client id (`CLIENT ID`), from 1.
    pub(super) next_session_id: u64,
    /// Figures for reports, and the last closed subscribers'.
    pub(super) stats: StatsBoard,
    /// What `HELLO`, `INFO` and `CLIENT INFO` report.
    pub(super) server: ServerInfo,
    /// Which symbols may hold old values (the notices: below).
    pub(super) stale: StaleBoard,
    /// A loop that takes its turns in this thread's (the feed's, when the
    /// engine has one core: `net::GuestLoop`).
    guest: Option<Box<dyn GuestLoop>>,
}

impl Publisher {
    /// Builds the loop around a bound listener; `ctx.poll` is the poller
    /// whose waker (under [`WAKER`]) the feed and the runtime hold.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    pub(crate) fn new(
        listener: TcpListener,
        ctx: LoopCtx,
        slots: SlotReader,
        table: Arc<SymbolTable>,
        settings: PublisherSettings,
        stats: Arc<Mutex<Vec<SubscriberStats>>>,
    ) -> std::io::Result<Self> {
        let policy = PortPolicy {
            max_conns: settings.max_conns,
            refusal: REFUSAL,
            log_refusals: true,
            sndbuf: settings.sndbuf,
            interest: Interest::READABLE | Interest::WRITABLE,
            name: "subscriber",
            peer_label: "subscriber",
        };
        let tls = settings.tls.clone().map(|server| {
            TlsPort::new(
                server,
                TlsPortName::Subscribers,
                TLS_REFUSAL,
                "subscriber",
                Arc::clone(&ctx.counters),
            )
        });
        let listener = Listener::register(ctx.registry(), listener, policy)?.with_tls(tls);
        let cap = table.capacity();
        let laddr = listener.local_addr();
        let server = ServerInfo {
            tcp_port: laddr.port(),
            laddr: laddr.to_string(),
            started_ns: ctx.clock.now_ns(),
            max_clients: settings.max_conns,
        };
        let room = settings.max_conns.min(1024);
        Ok(Publisher {
            listener,
            sessions: Conns::with_capacity(room),
            auth: AuthGate::new(settings.token.clone(), settings.auth_timeout_ns),
            routes: Routes::with_interest(settings.interest.clone()),
            slots,
            table,
            fanout: Fanout::new(cap),
            history: History::new(settings.history_depth, cap),
            rate: super::delivery::publish_cap(settings.max_rate),
            flush_list: KeyList::with_capacity(room),
            attention: KeyList::with_capacity(room),
            shared_stall: SharedStall::new(),
            flush_gap: FlushGap::new(settings.flush_gap_ns),
            batch_recv: Vec::with_capacity(MAX_RECV_TIMES),
            matched: Vec::with_capacity(cap),
            next_session_id: 1,
            stats: StatsBoard::new(stats),
            stale: StaleBoard::new(cap, settings.stale_after_ns, settings.stale_link.clone()),
            guest: None,
            server,
            settings,
            ctx,
        })
    }

    /// Takes `guest` into this thread: its poller is registered in this
    /// one's, and it gets a turn in each of this loop's turns, before the
    /// slots are drained (so a tick read is sent in the same turn).
    ///
    /// # Errors
    /// When the guest's poller cannot be registered.
    pub(crate) fn host(&mut self, guest: Box<dyn GuestLoop>) -> std::io::Result<()> {
        guest.register_in(self.ctx.registry(), GUEST)?;
        self.guest = Some(guest);
        Ok(())
    }

    /// The guest's turn (0 when there is none or nothing is due: no event
    /// for it, nothing left ready, no work in its last turn); a guest told
    /// to stop, or whose poller failed, is finished and let go.
    fn guest_turn(&mut self, reported: bool, last: usize) -> usize {
        let Some(g) = &mut self.guest else { return 0 };
        let work = if g.stopping() {
            None
        } else if reported || last > 0 || g.has_ready() {
            g.turn()
        } else {
            g.skipped();
            Some(0)
        };
        match work {
            Some(w) => w,
            None => {
                g.finish();
                self.guest = None;
                0
            }
        }
    }

    /// Waits out the rest of the flush gap when there is output to write
    /// ([`super::flush_gap`]). Returns whether it waited.
    fn wait_for_flush_gap(&self) -> bool {
        if self.flush_gap.gap_ns() == 0 || self.flush_list.is_empty() {
            return false;
        }
        let now = self.ctx.clock.now_ns();
        let wait = self.flush_gap.wait_ns(now);
        if wait == 0 {
            return false;
        }
        // Yielding, not sleeping: the thread stays runnable, so the core
        // is not given up for a wake-up that a loaded host can delay by
        // milliseconds; other threads of that core still run meanwhile.
        let until = now + wait;
        while self.ctx.clock.now_ns() < until {
            std::thread::yield_now();
        }
        true
    }

    /// [`Self::flush`], its span told to the flush gap when one is set
    /// (no clock reads when it is not).
    fn flush_timed(&mut self) -> usize {
        if self.flush_gap.gap_ns() == 0 {
            return self.flush();
        }
        let start = self.ctx.clock.now_ns();
        let wrote = self.flush();
        if wrote > 0 {
            self.flush_gap.flushed(start, self.ctx.clock.now_ns());
        }
        wrote
    }

    /// Runs until the stop flag is set and the waker fires.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        let mut guest_work = 0usize;
        while !self.ctx.stopping() {
            let now = self.ctx.clock.now_ns();
            let mut max_park = Duration::from_nanos(self.ctx.recorder.ns_until_flush(now))
                .min(Duration::from_nanos(self.stats.ns_until_due(now)))
                .min(MAX_PARK);
            if let Some(w) = self.throttle_wait() {
                max_park = max_park.min(w);
            }
            let rate_wait = Duration::from_nanos(self.rate.as_ref().map_or(0, |r| r.wait_ns(now)));
            if !rate_wait.is_zero() {
                max_park = max_park.min(rate_wait);
            } else if self.slots.dirty_len() > 0 {
                max_park = Duration::ZERO;
            }
            if !self.attention.is_empty() {
                max_park = max_park.min(ATTENTION_PARK);
            }
            if let Some(g) = &self.guest {
                max_park = if g.has_ready() {
                    Duration::ZERO
                } else {
                    max_park.min(Duration::from_nanos(g.max_park_ns()))
                };
            }
            let timeout = self.settings.idle.poll_timeout(work, max_park);
            match self.ctx.wait(&mut events, timeout, "publisher") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            let mut guest_event = false;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    GUEST => guest_event = true,
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
            guest_work = self.guest_turn(guest_event, guest_work);
            work += guest_work;
            self.learn_symbols();
            work += self.drain_slots();
            if self.wait_for_flush_gap() {
                // What came meanwhile goes out in the same writes.
                let more = self.guest_turn(true, guest_work);
                guest_work += more;
                work += more;
                self.learn_symbols();
                work += self.drain_slots();
            }
            work += self.flush_timed();
            work += self.serve_attention();
            let now = self.ctx.clock.now_ns();
            work += self.serve_stale(now);
            self.expire_unauthenticated(now);
            self.ctx.recorder.maybe_flush(now);
            if self.stats.due(now) {
                self.publish_stats(now);
                self.stats.next_due(now, self.settings.stats_interval_ns);
            }
        }
        if let Some(mut g) = self.guest.take() {
            g.finish();
        }
        // Final drain so everything accepted before the stop is published.
        self.learn_symbols();
        while self.drain_slots() > 0 {}
        self.flush();
        let now = self.ctx.clock.now_ns();
        self.publish_stats(now);
        self.ctx.recorder.finish(self.ctx.clock.now_ns());
    }
}

/// The turn's housekeeping: closing a subscriber (out of the kit's slab,
/// which deregisters its socket; its subscriptions out of the routes; its
/// final figures kept for reports; the socket closes when the session is
/// dropped), the per-subscriber figures, the throttle's next window, and
/// the stale notices: each change the [`StaleBoard`] found goes, as one
/// message, to the subscribers of the reserved channel `__tickfan.stale`
/// (channel subscribers only: a `*` pattern subscriber expecting ticks is
/// not sent notices), payload `stale,<symbol>,<reason>` or
/// `live,<symbol>,<reason>`; the gauges `tickfan_symbols_stale` and
/// `tickfan_symbols_silent` are set there (the publisher is their only
/// writer). Notices run once per scan period, only when stale flags are
/// on (`--stale-after`, or an edge).
impl Publisher {
    /// Closes session `key` (nothing when it is gone already).
    pub(super) fn close(&mut self, key: usize) {
        let Some(conn) = self.sessions.remove(self.ctx.poll.registry(), key) else {
            return;
        };
        let sess = &conn.state;
        // The key may be reused by the next accept while it is still on the
        // flush or attention list; both tolerate that (a spurious visit finds
        // nothing to do).
        for ch in &sess.channels {
            self.routes.unsubscribe(key, ch);
        }
        for p in &sess.patterns {
            self.routes.punsubscribe(key, p);
        }
        self.routes.forget(key);
        self.stats
            .closed(sess.stats(&conn.peer, self.ctx.clock.now_ns()));
        set(
            &self.ctx.counters.publish.subscribers_open,
            self.sessions.len() as u64,
        );
    }

    /// Copies per-subscriber figures where reports can read them.
    pub(super) fn publish_stats(&mut self, now_ns: u64) {
        let mut all: Vec<SubscriberStats> = self.stats.closed.iter().cloned().collect();
        let mut buffered = 0u64;
        for (_, c) in self.sessions.iter() {
            buffered += c.state.buf.buffered() as u64;
            all.push(c.state.stats(&c.peer, now_ns));
        }
        all.sort_by_key(|s| s.id);
        set(&self.ctx.counters.publish.buffered_bytes, buffered);
        *self.stats.shared.lock() = all;
    }

    /// Scans for stale changes when due and sends the notices; returns
    /// how many were sent.
    pub(super) fn serve_stale(&mut self, now_ns: u64) -> usize {
        if !self.stale.due(now_ns) {
            return 0;
        }
        self.stale.scan(self.routes.known_symbols(), now_ns);
        let (stale, silent) = self.stale.counts();
        set(&self.ctx.counters.cluster.symbols_stale, stale as u64);
        set(&self.ctx.counters.cluster.symbols_silent, silent as u64);
        let notices: Vec<Notice> = self.stale.take_notices().collect();
        if notices.is_empty() {
            return 0;
        }
        let subs = self.routes.channel_subscribers(STALE_CHANNEL);
        let mut payload = Vec::with_capacity(64);
        let mut tail = Vec::with_capacity(96);
        for n in &notices {
            payload.clear();
            payload.extend_from_slice(if n.stale { b"stale," } else { b"live," });
            payload.extend_from_slice(self.routes.name(n.id));
            payload.push(b',');
            payload.extend_from_slice(n.why.as_str().as_bytes());
            tail.clear();
            resp::append_message_tail(&mut tail, STALE_CHANNEL, &payload);
            for (key, prefix) in &subs {
                if let Some(c) = self.sessions.get_mut(*key) {
                    let out = c.state.out();
                    out.extend_from_slice(prefix);
                    out.extend_from_slice(&tail);
                }
            }
        }
        for (key, _) in &subs {
            self.queue_flush(*key);
        }
        notices.len()
    }

    /// How long the loop may park before a throttle window opens for a
    /// subscriber holding symbols back (`None`: no such subscriber).
    pub(super) fn throttle_wait(&self) -> Option<Duration> {
        let mut next = u64::MAX;
        let mut now_w = None;
        for i in 0..self.attention.len() {
            let Some(c) = self.sessions.get(self.attention.key(i)) else {
                continue;
            };
            let s = &c.state;
            if s.throttle.is_active() && s.buf.pending_len() > 0 {
                let now = *now_w.get_or_insert_with(|| self.settings.window_clock.now_ns());
                next = next.min(s.throttle.next_open_ns(now));
            }
        }
        let now = now_w?;
        Some(Duration::from_nanos(next.saturating_sub(now)))
    }
}
