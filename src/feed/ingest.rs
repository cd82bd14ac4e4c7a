//! The feed thread: a handler over the [`crate::net`] kit that turns each
//! line of each feed connection into a slot write or a dead letter.
//!
//! The kit accepts (limit and refusal line `ERR too many feed connections`),
//! keeps the connections and their ids, the `AUTH` deadlines, the line
//! readers and the ready/turn lists; this file keeps what is the feed's:
//! parse, intern, slot write, poison, the `YIELD_DIRTY` yield and the wake
//! of the publisher.
//!
//! Hot-path discipline: buffers are allocated per connection, once; a tick
//! costs one parse, one hash lookup and one slot write. The clock is read
//! twice per read batch (receive time, then end of parsing), not per tick,
//! and the publisher is woken at most once per read batch.
//!
//! Fairness: a connection is read at most `READS_PER_TURN` times per loop
//! turn, then put back on a ready list, so one flooding feed cannot starve
//! the others. Towards the publisher: after a read that leaves
//! `YIELD_DIRTY` or more symbols waiting, the thread yields its core, so on
//! a shared core the publisher sends values instead of the feed overwriting
//! them (measured in perf/RESULTS.md: max-rate delivery ×1.8 on one core).

use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::time::Duration;

use mio::net::TcpListener;
use mio::{Events, Interest, Token, Waker};

use crate::auth::{LINE_OK, LINE_TIMEOUT};
use crate::dlq::{DeadLetter, DlqSender};
use crate::feed::parse::{parse_line, Line};
use crate::idle::IdleStrategy;
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::model::poison::PoisonReason;
use crate::model::tick::SlotValue;
use crate::net::{
    AuthGate, AuthStep, ConnCounters, Conns, LineEvent, LineReader, Listener, LoopCtx, PortPolicy,
    TurnLists, LISTENER,
};
use crate::slots::SlotWriter;
use crate::symbols::SymbolInterner;
use crate::sys::clock::{wall_ns, MonoClock};
use crate::sys::net::Polled;

/// Token of the waker the runtime uses to stop this loop.
pub(crate) const STOP_WAKER: Token = Token(usize::MAX);
const READS_PER_TURN: usize = 16;
/// After a read, the feed yields its core when this many symbols wait for
/// the publisher (see `serve`).
const YIELD_DIRTY: usize = 256;
const READ_CHUNK: usize = 64 * 1024;
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
    pub stale: Option<Arc<crate::cluster::stale::StaleLink>>,
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
}

/// The feed's part of a connection (the kit keeps socket, id, peer, auth).
#[derive(Debug)]
struct FeedConn {
    reader: LineReader,
}

/// The per-line work, apart from the sockets (so a line reader can be
/// borrowed while it runs).
#[derive(Debug)]
struct Ingest {
    interner: SymbolInterner,
    slots: SlotWriter,
    /// Valid ticks per symbol id so far: the update sequence number.
    seqs: Vec<u64>,
    counters: Arc<Counters>,
    dlq: DlqSender,
    clock: MonoClock,
    publisher: Arc<Waker>,
    /// Per symbol: 1 + the key of the connection that wrote it last (0 = none).
    writer_of: Vec<u32>,
    stale: Option<Arc<crate::cluster::stale::StaleLink>>,
}

/// What one read batch did.
#[derive(Debug, Default, Clone, Copy)]
struct Batch {
    ticks: u64,
    queued: bool,
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
        let max_symbols = slots.capacity();
        let room = settings.max_conns.min(1024);
        Ok(FeedLoop {
            listener,
            conns: Conns::with_capacity(room),
            turns: TurnLists::with_capacity(room),
            auth: AuthGate::new(settings.token.clone(), settings.auth_timeout_ns),
            ingest: Ingest {
                interner,
                slots,
                seqs: vec![0; max_symbols],
                counters: Arc::clone(&ctx.counters),
                dlq,
                clock: ctx.clock,
                publisher,
                writer_of: vec![0; max_symbols],
                stale: settings.stale.clone(),
            },
            ctx,
            settings,
        })
    }

    /// Runs until the stop flag is set (and the stop waker fires).
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        while !self.ctx.stopping() {
            let now = self.ctx.clock.now_ns();
            let max_park =
                Duration::from_nanos(self.ctx.recorder.ns_until_flush(now)).min(MAX_PARK);
            let timeout = if self.turns.has_ready() {
                Some(Duration::ZERO)
            } else {
                self.settings.idle.poll_timeout(work, max_park)
            };
            match self.ctx.wait(&mut events, timeout, "feed") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            self.turns.begin();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    STOP_WAKER => {}
                    Token(key) => self.turns.reported(key),
                }
            }
            while let Some(key) = self.turns.next_in_turn() {
                work += self.serve(key);
            }
            self.turns.end();
            let now = self.ctx.clock.now_ns();
            self.expire_unauthenticated(now);
            self.ctx.recorder.maybe_flush(now);
        }
        let now = self.ctx.clock.now_ns();
        self.ctx.recorder.finish(now);
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
                                log::warn!("feed {}: authentication refused", conn.peer);
                                bump(&self.ingest.counters.feed.auth_failures, 1);
                                self.close(key);
                                return ticks;
                            }
                        }
                    }
                    let b = self
                        .ingest
                        .batch(key, reader, &conn.peer, &mut self.ctx.recorder);
                    ticks += b.ticks as usize;
                    if b.queued {
                        // Once per read batch, not per tick.
                        let _ = self.ingest.publisher.wake();
                    }
                    if self.ingest.slots.dirty_len() >= YIELD_DIRTY {
                        // The publisher is behind. If it shares this core
                        // (pinning degraded, or a `taskset` of one CPU), let
                        // it run now: every tick read meanwhile would only
                        // overwrite a value nobody has been sent yet. On its
                        // own core this costs one cheap syscall per read.
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
                log::warn!("feed {}: no AUTH within the timeout; closing", conn.peer);
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

impl Ingest {
    /// Connection `key` closed: the symbols it wrote last lose their
    /// source (flagged stale when `--stale-after` is on).
    fn orphan(&mut self, key: usize) {
        let Some(link) = &self.stale else {
            return;
        };
        let now = self.clock.now_ns();
        let tag = key as u32 + 1;
        for (id, w) in self.writer_of.iter_mut().enumerate() {
            if *w == tag {
                *w = 0;
                link.source_closed(id as crate::symbols::SymbolId, now);
            }
        }
    }

    /// Processes every complete line buffered in `reader`.
    fn batch(
        &mut self,
        key: usize,
        reader: &mut LineReader,
        peer: &str,
        recorder: &mut StageRecorder,
    ) -> Batch {
        let recv_wall = wall_ns();
        let t0 = self.clock.now_ns();
        let mut b = Batch::default();
        while let Some(ev) = reader.next_line() {
            match ev {
                LineEvent::Line(line) => match parse_line(line) {
                    Ok(Line::Tick { symbol, quote }) => match self.interner.intern(symbol) {
                        Ok(id) => {
                            let seq = &mut self.seqs[id as usize];
                            *seq += 1;
                            let value = SlotValue {
                                quote,
                                seq: *seq,
                                recv_wall_ns: recv_wall,
                                recv_mono_ns: t0,
                            };
                            b.queued |= self.slots.write(id, &value);
                            self.writer_of[id as usize] = key as u32 + 1;
                            b.ticks += 1;
                            if quote.bid.cmp_value(&quote.ask) != std::cmp::Ordering::Less {
                                bump(&self.counters.feed.crossed_quotes, 1);
                            }
                        }
                        Err(_) => {
                            let len = line.len();
                            self.poison(peer, PoisonReason::SymbolLimit, line, len)
                        }
                    },
                    Ok(Line::Skip) => bump(&self.counters.feed.lines_skipped, 1),
                    Err(reason) => {
                        let len = line.len();
                        self.poison(peer, reason, line, len)
                    }
                },
                LineEvent::TooLong { prefix, len_so_far } => {
                    self.poison(peer, PoisonReason::LineTooLong, prefix, len_so_far)
                }
            }
        }
        if b.ticks > 0 {
            let f = &self.counters.feed;
            bump(&f.ticks_valid, b.ticks);
            set(&f.symbols, self.interner.table().len() as u64);
            recorder.record_span_n(Stage::FeedParse, t0, self.clock.now_ns(), b.ticks);
        }
        b
    }

    /// Counts a poison line and hands it to the DLQ (never blocks).
    #[cold]
    fn poison(&mut self, peer: &str, reason: PoisonReason, raw: &[u8], raw_len: usize) {
        let f = &self.counters.feed;
        bump(&f.poison[reason.index()], 1);
        let rec = DeadLetter::refused("feed", peer, reason.as_str(), raw, raw_len, wall_ns());
        if self.dlq.try_send(rec).is_err() {
            bump(&f.dlq_handoff_dropped, 1);
        }
    }
}
