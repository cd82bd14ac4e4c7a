//! The feed thread: a handler over the [`crate::net`] kit that turns each
//! line of each feed connection into a slot write or a dead letter.
//!
//! The kit accepts (limit and refusal line `ERR too many feed connections`),
//! keeps the connections and their ids, the `AUTH` deadlines, the line
//! readers and the ready/turn lists; this file keeps what is the feed's
//! loop: reads, the `YIELD_DIRTY` yield and the wake of the publisher. The
//! per-read work (parse, intern, slot write, poison) is `batch.rs`.
//!
//! Hot-path discipline: buffers are allocated per connection, once; a tick
//! costs one parse, one hash lookup and one slot write. The clock is read
//! twice per read batch (receive time, then end of parsing), not per tick,
//! and the publisher is woken at most once per read batch.
//!
//! Behind: a read that fills its whole chunk (`READ_CHUNK`) means more is
//! waiting in the socket, so that batch is conflated at the feed: only the
//! newest line per known symbol is parsed (`conflate.rs`; measured in
//! perf/RESULTS.md).
//!
//! Fairness: a connection is read at most `READS_PER_TURN` times per loop
//! turn, then put back on a ready list, so one flooding feed cannot starve
//! the others. Towards the publisher: after a read that leaves
//! `YIELD_DIRTY` or more symbols waiting, the thread yields its core, so on
//! a shared core the publisher sends values instead of the feed overwriting
//! them (measured in perf/RESULTS.md: max-rate delivery ×1.8 on one core).

use std::io::{ErrorKind, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Registry, Token, Waker};

use crate::auth::{LINE_OK, LINE_TIMEOUT};
use crate::dlq::DlqSender;
use crate::feed::batch::Ingest;
use crate::idle::IdleStrategy;
use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::{bump, set};
use crate::model::poison::PoisonReason;
use crate::model::warning::WarnKind;
use crate::net::{
    AuthGate, AuthStep, ConnCounters, Conns, GuestLoop, LineReader, Listener, LoopCtx, PortPolicy,
    TurnLists, LISTENER,
};
use crate::slots::SlotWriter;
use crate::symbols::SymbolInterner;
use crate::sys::net::Polled;

/// Token of the waker the runtime uses to stop this loop.
pub(crate) const STOP_WAKER: Token = Token(usize::MAX);
const READS_PER_TURN: usize = 16;
/// After a read, the feed yields its core when this many symbols wait for
/// the publisher (see `serve`).
const YIELD_DIRTY: usize = 256;
/// Bytes asked for by one read. Large, so that a feed that got ahead is
/// drained (and conflated, see `conflate.rs`) in few syscalls: measured in
/// perf/RESULTS.md against 64 and 256 KiB. A reader's buffer
/// is this plus `--max-line-len`, per connection, allocated zeroed at
/// accept (pages are touched only as bursts reach them).
const READ_CHUNK: usize = 1024 * 1024;
const MAX_PARK: Duration = Duration::from_millis(100);
/// The line a feed over the connection limit reads before its close.
const REFUSAL: &[u8] = b"ERR too many feed connections\n";

/// Settings of the feed loop.
#[derive(Debug, Clone)]
pub(crate) struct FeedSettings {
    /// Longest line, excluding the newline.
    pub max_line_len: usize,
    /// Most simultaneous feed connections.
    pub max_conns: usize,
    /// What to do when a turn found nothing.
    pub idle: IdleStrategy,
    /// Token every feed must present first (`AUTH <token>` line), if any.
    pub token: Option<crate::auth::Token>,
    /// Close a feed that has not authenticated by then.
    pub auth_timeout_ns: u64,
    /// With `--stale-after`: where a closed connection's symbols are told
    /// (those it wrote last), to be flagged stale at once.
    pub stale: Option<Arc<crate::stale::StaleLink>>,
}

/// Everything the feed thread owns.
#[derive(Debug)]
pub(crate) struct FeedLoop {
    ctx: LoopCtx,
    listener: Listener,
    conns: Conns<FeedConn>,
    turns: TurnLists,
    auth: AuthGate,
    ingest: Ingest,
    settings: FeedSettings,
    /// The events of one wait, allocated once.
    events: Events,
    /// As a guest: told when the loop has finished.
    done: Option<Sender<()>>,
}

/// The feed's part of a connection (the kit keeps socket, id, peer, auth).
#[derive(Debug)]
struct FeedConn {
    reader: LineReader,
}

impl FeedLoop {
    /// Builds the loop around an already bound listener; `ctx` carries the
    /// feed's poller (whose waker is [`STOP_WAKER`]), counters, recorder,
    /// clock and stop flag; `publisher` is rung once per read batch that
    /// queued an update.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    pub(crate) fn new(
        listener: TcpListener,
        ctx: LoopCtx,
        interner: SymbolInterner,
        slots: SlotWriter,
        dlq: DlqSender,
        publisher: Arc<Waker>,
        settings: FeedSettings,
    ) -> std::io::Result<Self> {
        let policy = PortPolicy {
            max_conns: settings.max_conns,
            refusal: REFUSAL,
            log_refusals: true,
            sndbuf: 0,
            interest: Interest::READABLE,
            name: "feed",
            peer_label: "feed connection",
        };
        let listener = Listener::register(ctx.registry(), listener, policy)?;
        let room = settings.max_conns.min(1024);
        Ok(FeedLoop {
            listener,
            conns: Conns::with_capacity(room),
            turns: TurnLists::with_capacity(room),
            auth: AuthGate::new(settings.token.clone(), settings.auth_timeout_ns),
            ingest: Ingest::new(
                &ctx,
                interner,
                slots,
                dlq,
                publisher,
                settings.stale.clone(),
                settings.max_line_len + READ_CHUNK,
            ),
            ctx,
            settings,
            events: Events::with_capacity(1024),
            done: None,
        })
    }

    /// Runs until the stop flag is set (and the stop waker fires).
    pub(crate) fn run(mut self) {
        let mut work = 0usize;
        while !self.ctx.stopping() {
            let max_park = Duration::from_nanos(self.max_park_ns());
            let timeout = if self.turns.has_ready() {
                Some(Duration::ZERO)
            } else {
                self.settings.idle.poll_timeout(work, max_park)
            };
            match self.step(timeout) {
                Some(w) => work = w,
                None => break,
            }
        }
        self.finish();
    }

    /// Runs as a guest of another loop's thread ([`GuestLoop`]): the
    /// publisher is not woken (its own thread reads the slots after this
    /// loop's turn), and `done` is told when the guest has finished.
    pub(crate) fn into_guest(mut self, done: Sender<()>) -> Self {
        self.ingest.publisher = None;
        self.done = Some(done);
        self
    }

    /// One turn: waits up to `timeout` for events, accepts, reads each
    /// ready connection (fairly), expires authentications and flushes the
    /// recorder. Returns the ticks read, or `None` when the poller failed.
    fn step(&mut self, timeout: Option<Duration>) -> Option<usize> {
        match self.ctx.wait(&mut self.events, timeout, "feed") {
            Polled::Ready => {}
            Polled::Interrupted => return Some(0),
            Polled::Failed => return None,
        }
        let mut work = 0usize;
        let mut accept = false;
        self.turns.begin();
        for ev in self.events.iter() {
            match ev.token() {
                LISTENER => accept = true,
                STOP_WAKER => {}
                Token(key) => self.turns.reported(key),
            }
        }
        if accept {
            self.accept_all();
        }
        while let Some(key) = self.turns.next_in_turn() {
            work += self.serve(key);
        }
        self.turns.end();
        let now = self.ctx.clock.now_ns();
        self.expire_unauthenticated(now);
        self.ctx.recorder.maybe_flush(now);
        Some(work)
    }

    fn accept_all(&mut self) {
        let f = &self.ctx.counters.feed;
        let counters = ConnCounters {
            accepted: &f.connections_accepted,
            refused: &f.connections_refused,
            open: Some(&f.connections_open),
        };
        let (auth, clock, max_line_len) =
            (&mut self.auth, self.ctx.clock, self.settings.max_line_len);
        let authed = !auth.required();
        self.listener.accept_all(
            self.ctx.poll.registry(),
            &mut self.conns,
            counters,
            authed,
            |id| {
                auth.arm(id, clock.now_ns());
                FeedConn {
                    reader: LineReader::new(max_line_len, READ_CHUNK),
                }
            },
        );
    }

    /// Reads one connection for a turn; returns the ticks it produced.
    fn serve(&mut self, key: usize) -> usize {
        let Some(conn) = self.conns.get_mut(key) else {
            return 0;
        };
        let reader = &mut conn.state.reader;
        let mut ticks = 0usize;
        for _ in 0..READS_PER_TURN {
            match reader.read_from(&mut conn.stream) {
                Ok(0) => {
                    if let Some(partial) = reader.take_partial() {
                        let len = partial.len();
                        self.ingest
                            .poison(&conn.peer, PoisonReason::TruncatedAtEof, partial, len);
                    }
                    self.close(key);
                    return ticks;
                }
                Ok(n) => {
                    bump(&self.ingest.counters.feed.bytes_read, n as u64);
                    if !conn.authed {
                        match self.auth.first_line(reader) {
                            AuthStep::NeedMore => continue,
                            AuthStep::Passed => {
                                conn.authed = true;
                                let _ = conn.stream.write(LINE_OK);
                            }
                            AuthStep::Refused(reply) => {
                                let _ = conn.stream.write(reply);
                                warn_repeating!(
                                    WarnKind::AuthRefused,
                                    "feed {}: authentication refused",
                                    conn.peer
                                );
                                bump(&self.ingest.counters.feed.auth_failures, 1);
                                self.close(key);
                                return ticks;
                            }
                        }
                    }
                    // A read that filled its chunk left more in the socket:
                    // the feed is behind, so conflate this batch.
                    let behind = n == reader.read_chunk();
                    let b =
                        self.ingest
                            .batch(key, reader, behind, &conn.peer, &mut self.ctx.recorder);
                    ticks += b.ticks as usize;
                    if b.queued {
                        // Once per read batch, not per tick (none as a
                        // guest: the host drains the slots after this turn).
                        if let Some(p) = &self.ingest.publisher {
                            let _ = p.wake();
                        }
                    }
                    if self.ingest.publisher.is_some()
                        && self.ingest.slots.dirty_len() >= YIELD_DIRTY
                    {
                        // The publisher is behind. If it shares this core
                        // (pinning degraded, or a `taskset` of one CPU), let
                        // it run now: every tick read meanwhile would only
                        // overwrite a value nobody has been sent yet. On its
                        // own core this costs one cheap syscall per read.
                        // (As the publisher's guest it runs next anyway.)
                        std::thread::yield_now();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return ticks,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::info!("feed {}: read failed: {e}; closing", conn.peer);
                    self.close(key);
                    return ticks;
                }
            }
        }
        // Still readable: come back next turn without waiting for an event.
        self.turns.again(key);
        ticks.max(1)
    }

    /// Closes feeds whose authentication deadline passed.
    fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(id) = self.auth.next_expired(now_ns) {
            let Some(conn) = self.conns.get_live(id) else {
                continue;
            };
            if !conn.authed {
                let _ = conn.stream.write(LINE_TIMEOUT);
                warn_repeating!(
                    WarnKind::AuthTimeout,
                    "feed {}: no AUTH within the timeout; closing",
                    conn.peer
                );
                bump(&self.ingest.counters.feed.auth_failures, 1);
                self.close(id.key());
            }
        }
    }

    fn close(&mut self, key: usize) {
        if self.conns.remove(self.ctx.registry(), key).is_some() {
            set(
                &self.ingest.counters.feed.connections_open,
                self.conns.len() as u64,
            );
            self.ingest.orphan(key);
        }
    }
}

impl FeedLoop {
    /// The longest this loop may wait: until its recorder's interval
    /// boundary, at most `MAX_PARK` (which bounds how late an
    /// authentication deadline is seen).
    fn max_park_ns(&self) -> u64 {
        let now = self.ctx.clock.now_ns();
        self.ctx
            .recorder
            .ns_until_flush(now)
            .min(MAX_PARK.as_nanos() as u64)
    }

    /// The final figures of the feed's stage, then whoever waits is told.
    fn finish(&mut self) {
        let now = self.ctx.clock.now_ns();
        self.ctx.recorder.finish(now);
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
    }
}

impl GuestLoop for FeedLoop {
    fn register_in(&self, host: &Registry, token: Token) -> std::io::Result<()> {
        let fd = self.ctx.poll.as_raw_fd();
        host.register(&mut SourceFd(&fd), token, Interest::READABLE)
    }

    fn turn(&mut self) -> Option<usize> {
        self.step(Some(Duration::ZERO))
    }

    fn skipped(&self) {
        self.ctx.beat.beat();
    }

    fn has_ready(&self) -> bool {
        self.turns.has_ready()
    }

    fn stopping(&self) -> bool {
        self.ctx.stopping()
    }

    fn max_park_ns(&self) -> u64 {
        FeedLoop::max_park_ns(self)
    }

    fn finish(&mut self) {
        FeedLoop::finish(self);
    }
}
