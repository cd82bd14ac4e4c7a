//! The feed thread: a mio event loop that accepts feed connections, reads
//! their bytes into per-connection line readers, and turns each line into a
//! slot write or a dead letter.
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

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

use crate::auth::{
    check_line, LineAuth, Token as AuthToken, LINE_INVALID, LINE_OK, LINE_REQUIRED, LINE_TIMEOUT,
};
use crate::dlq::{DeadLetter, DlqSender};
use crate::feed::lines::{LineEvent, LineReader};
use crate::feed::parse::{parse_line, Line};
use crate::idle::IdleStrategy;
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::model::poison::PoisonReason;
use crate::model::tick::SlotValue;
use crate::slots::SlotWriter;
use crate::symbols::SymbolInterner;
use crate::sys::clock::{wall_ns, MonoClock};
use crate::sys::net::{accept_one, poll_events, Accepted, Polled};

const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the waker the runtime uses to stop this loop.
pub const STOP_WAKER: Token = Token(usize::MAX);
const READS_PER_TURN: usize = 16;
/// After a read, the feed yields its core when this many symbols wait for
/// the publisher (see `serve`).
const YIELD_DIRTY: usize = 256;
const READ_CHUNK: usize = 64 * 1024;
const MAX_PARK: Duration = Duration::from_millis(100);

/// Settings of the feed loop.
#[derive(Debug, Clone)]
pub struct FeedSettings {
    /// Longest line, excluding the newline.
    pub max_line_len: usize,
    /// Most simultaneous feed connections.
    pub max_conns: usize,
    /// What to do when a turn found nothing.
    pub idle: IdleStrategy,
    /// Token every feed must present first (`AUTH <token>` line), if any.
    pub token: Option<AuthToken>,
    /// Close a feed that has not authenticated by then.
    pub auth_timeout_ns: u64,
}

/// Everything the feed thread owns.
#[derive(Debug)]
pub struct FeedLoop {
    poll: Poll,
    listener: TcpListener,
    conns: Slab<FeedConn>,
    /// Connections to read next turn without waiting for an event.
    ready: Vec<Token>,
    /// This turn's connections (swapped with `ready`; both keep their capacity).
    turn: Vec<Token>,
    /// Connections waiting to authenticate: (deadline, key, serial), in deadline order.
    pending_auth: VecDeque<(u64, Token, u64)>,
    next_serial: u64,
    ingest: Ingest,
    settings: FeedSettings,
    stop: Arc<AtomicBool>,
}

#[derive(Debug)]
struct FeedConn {
    stream: TcpStream,
    peer: String,
    reader: LineReader,
    /// Never reused: tells a connection from a later one on the same slab key.
    serial: u64,
    /// False until the `AUTH` line passed (true from the start without a token).
    authed: bool,
}

/// The first line of a feed when a token is required.
enum AuthStep {
    /// No complete line yet.
    NeedMore,
    /// The token matched.
    Passed,
    /// Refused: send this line and close.
    Refused(&'static [u8]),
}

fn authenticate(reader: &mut LineReader, token: &AuthToken) -> AuthStep {
    match reader.next_line() {
        None => AuthStep::NeedMore,
        Some(LineEvent::Line(line)) => match check_line(token, line) {
            LineAuth::Passed => AuthStep::Passed,
            LineAuth::Wrong => AuthStep::Refused(LINE_INVALID),
            LineAuth::Missing => AuthStep::Refused(LINE_REQUIRED),
        },
        Some(LineEvent::TooLong { .. }) => AuthStep::Refused(LINE_INVALID),
    }
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
    recorder: StageRecorder,
    clock: MonoClock,
    publisher: Arc<Waker>,
}

/// What one read batch did.
#[derive(Debug, Default, Clone, Copy)]
struct Batch {
    ticks: u64,
    queued: bool,
}

impl FeedLoop {
    /// Builds the loop around an already bound listener.
    ///
    /// # Errors
    /// When the poller cannot be created or the listener registered.
    #[allow(clippy::too_many_arguments)] // reason: the wiring hands each stage its parts once
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        interner: SymbolInterner,
        slots: SlotWriter,
        counters: Arc<Counters>,
        dlq: DlqSender,
        recorder: StageRecorder,
        clock: MonoClock,
        publisher: Arc<Waker>,
        settings: FeedSettings,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let max_symbols = slots.capacity();
        Ok(FeedLoop {
            poll,
            listener,
            conns: Slab::with_capacity(settings.max_conns.min(1024)),
            ready: Vec::with_capacity(settings.max_conns.min(1024)),
            turn: Vec::with_capacity(settings.max_conns.min(1024)),
            pending_auth: VecDeque::new(),
            next_serial: 1,
            ingest: Ingest {
                interner,
                slots,
                seqs: vec![0; max_symbols],
                counters,
                dlq,
                recorder,
                clock,
                publisher,
            },
            settings,
            stop,
        })
    }

    /// Runs until the stop flag is set (and the stop waker fires).
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        while !self.stop.load(Ordering::Acquire) {
            let now = self.ingest.clock.now_ns();
            let max_park =
                Duration::from_nanos(self.ingest.recorder.ns_until_flush(now)).min(MAX_PARK);
            let timeout = if self.ready.is_empty() {
                self.settings.idle.poll_timeout(work, max_park)
            } else {
                Some(Duration::ZERO)
            };
            match poll_events(&mut self.poll, &mut events, timeout, "feed") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            std::mem::swap(&mut self.ready, &mut self.turn);
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    STOP_WAKER => {}
                    t => {
                        if !self.turn.contains(&t) {
                            self.turn.push(t);
                        }
                    }
                }
            }
            for i in 0..self.turn.len() {
                let t = self.turn[i];
                work += self.serve(t);
            }
            self.turn.clear();
            let now = self.ingest.clock.now_ns();
            self.expire_unauthenticated(now);
            self.ingest.recorder.maybe_flush(now);
        }
        let now = self.ingest.clock.now_ns();
        self.ingest.recorder.finish(now);
    }

    fn accept_all(&mut self) {
        loop {
            match accept_one(&self.listener) {
                Accepted::Conn(stream, peer) => self.admit(stream, peer),
                Accepted::Drained => return,
                Accepted::Failed(e) => {
                    log::warn!("feed accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        let c = &self.ingest.counters.feed;
        if self.conns.len() >= self.settings.max_conns {
            bump(&c.connections_refused, 1);
            let _ = stream.write(b"ERR too many feed connections\n");
            log::warn!(
                "feed connection from {peer} refused: limit of {} reached",
                self.settings.max_conns
            );
            return;
        }
        let entry = self.conns.vacant_entry();
        let token = Token(entry.key());
        if let Err(e) = self
            .poll
            .registry()
            .register(&mut stream, token, Interest::READABLE)
        {
            log::warn!("feed connection from {peer}: register failed: {e}");
            return;
        }
        let _ = stream.set_nodelay(true);
        let serial = self.next_serial;
        self.next_serial += 1;
        let authed = self.settings.token.is_none();
        if !authed {
            let deadline = self.ingest.clock.now_ns() + self.settings.auth_timeout_ns;
            self.pending_auth.push_back((deadline, token, serial));
        }
        entry.insert(FeedConn {
            stream,
            peer: peer.to_string(),
            reader: LineReader::new(self.settings.max_line_len, READ_CHUNK),
            serial,
            authed,
        });
        bump(&c.connections_accepted, 1);
        set(&c.connections_open, self.conns.len() as u64);
    }

    /// Reads one connection for a turn; returns the ticks it produced.
    fn serve(&mut self, token: Token) -> usize {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return 0;
        };
        let mut ticks = 0usize;
        for _ in 0..READS_PER_TURN {
            match conn.reader.read_from(&mut conn.stream) {
                Ok(0) => {
                    if let Some(partial) = conn.reader.take_partial() {
                        let len = partial.len();
                        self.ingest
                            .poison(&conn.peer, PoisonReason::TruncatedAtEof, partial, len);
                    }
                    self.close(token);
                    return ticks;
                }
                Ok(n) => {
                    bump(&self.ingest.counters.feed.bytes_read, n as u64);
                    if !conn.authed {
                        let Some(t) = &self.settings.token else {
                            unreachable!("authed without a token")
                        };
                        match authenticate(&mut conn.reader, t) {
                            AuthStep::NeedMore => continue,
                            AuthStep::Passed => {
                                conn.authed = true;
                                let _ = conn.stream.write(LINE_OK);
                            }
                            AuthStep::Refused(reply) => {
                                let _ = conn.stream.write(reply);
                                log::warn!("feed {}: authentication refused", conn.peer);
                                bump(&self.ingest.counters.feed.auth_failures, 1);
                                self.close(token);
                                return ticks;
                            }
                        }
                    }
                    let b = self.ingest.batch(&mut conn.reader, &conn.peer);
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
                    self.close(token);
                    return ticks;
                }
            }
        }
        // Still readable: come back next turn without waiting for an event.
        self.ready.push(token);
        ticks.max(1)
    }

    /// Closes feeds whose authentication deadline passed.
    fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(&(deadline, token, serial)) = self.pending_auth.front() {
            if deadline > now_ns {
                return;
            }
            self.pending_auth.pop_front();
            let Some(conn) = self.conns.get_mut(token.0) else {
                continue;
            };
            if conn.serial == serial && !conn.authed {
                let _ = conn.stream.write(LINE_TIMEOUT);
                log::warn!("feed {}: no AUTH within the timeout; closing", conn.peer);
                bump(&self.ingest.counters.feed.auth_failures, 1);
                self.close(token);
            }
        }
    }

    fn close(&mut self, token: Token) {
        if self.conns.contains(token.0) {
            let mut conn = self.conns.remove(token.0);
            let _ = self.poll.registry().deregister(&mut conn.stream);
            set(
                &self.ingest.counters.feed.connections_open,
                self.conns.len() as u64,
            );
        }
    }
}

impl Ingest {
    /// Processes every complete line buffered in `reader`.
    fn batch(&mut self, reader: &mut LineReader, peer: &str) -> Batch {
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
            self.recorder
                .record_span_n(Stage::FeedParse, t0, self.clock.now_ns(), b.ticks);
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
