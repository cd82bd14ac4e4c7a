//! The order gateway: a mio event loop that owns the client connections,
//! parses order lines, applies idempotency, offers orders to the bounded
//! main queue (full → `SYSTEM_BUSY` at once), and writes every reply.
//!
//! Single writer of: the connections and their output buffers, the dedup
//! store, the order counters. Workers and the retry timer never touch a
//! socket: they send [`Event`]s over a bounded channel and ring the waker;
//! the gateway turns them into lines (the per-line work: `ledger.rs`; this
//! file: sockets, buffers and the loop). Because the gateway appends `ACK`
//! right after a successful offer, before it next drains events, a client
//! always reads `ACK` before any `FILL` or `DONE` of that order.
//!
//! Output bounds: a connection whose unsent replies pass `OUT_HWM` is not
//! read until they drain below half of it, so a client that sends without
//! reading cannot make the engine buffer without bound: its buffer holds at
//! most `OUT_HWM` plus the replies of the orders it already has in flight.
//!
//! A client that half-closes (shuts down its sending side) keeps receiving
//! the replies of its orders; the connection closes once they have all
//! ended and been written. Replies for a client that has gone are counted
//! (`undeliverable`); its orders still run to their end.
//!
//! Security (mirrors the feed): with a token configured, a connection's
//! first line must be `AUTH <token>` (answered `OK`); a wrong or missing
//! token gets one `ERR …` line and a close, and a connection that has not
//! authenticated within the timeout is closed (`ERR authentication
//! timeout`); each counts in `auth_failures`. With `--max-order-rate`, each
//! connection has its own [`RateLimit`]; an order over it gets
//! `REJECT <id> SYSTEM_BUSY rate_limited: …` (one answer, never a drop).
//! Replies go only to the connection the order came in on: events carry
//! their connection's id, which includes a generation so a reused slab slot
//! never receives an earlier client's replies.

use std::collections::VecDeque;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use crate::auth::{check_line, Token as AuthToken, LINE_INVALID, LINE_OK, LINE_TIMEOUT};
use crate::dlq::{DlqSender, DlqStore};
use crate::idle::IdleStrategy;
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::net::lines::{LineEvent, LineReader};
use crate::retry::SharedClock;
use crate::sys::clock::MonoClock;
use crate::sys::net::{poll_events, Polled};

use super::admission::Admission;
use super::bridge_calls::BridgeCalls;
use super::dedup::Dedup;
use super::lanes::Lane;
use super::protocol::InvalidReason;
use super::rate::RateLimit;
use super::types::{ConnId, Event};

mod ledger;
use ledger::Ledger;

const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the waker workers, the timer and the runtime ring.
pub const WAKER: Token = Token(usize::MAX);
const READS_PER_TURN: usize = 4;
const READ_CHUNK: usize = 16 * 1024;
/// Unsent reply bytes past which a connection is not read.
pub const OUT_HWM: usize = 1 << 20;
const MAX_PARK: Duration = Duration::from_millis(10);

/// Settings of the gateway.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Most simultaneous order connections.
    pub max_conns: usize,
    /// Longest order line.
    pub max_line_len: usize,
    /// What idle turns do.
    pub idle: IdleStrategy,
    /// Token every order connection must present first (`AUTH <token>`), if any.
    pub token: Option<AuthToken>,
    /// Close a connection that has not authenticated by then (measurement clock).
    pub auth_timeout_ns: u64,
    /// Orders per second per connection (0 = no limit).
    pub max_order_rate: u32,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    id: ConnId,
    /// Shared with every order of the connection (no copy per order).
    peer: Arc<str>,
    reader: LineReader,
    out: Vec<u8>,
    out_pos: usize,
    /// Orders accepted on this connection without a terminal reply yet.
    live: u64,
    /// Not read until its output drains (over `OUT_HWM`).
    paused: bool,
    /// The peer shut down its sending side.
    read_closed: bool,
    /// Queued for a write this turn.
    dirty: bool,
    /// False until the `AUTH` line passed (true from the start without a token).
    authed: bool,
    /// This connection's order budget (`None`: no limit).
    rate: Option<RateLimit>,
}

impl Conn {
    fn pending(&self) -> usize {
        self.out.len() - self.out_pos
    }
}

/// The gateway loop.
#[derive(Debug)]
pub struct Gateway {
    poll: Poll,
    listener: Option<TcpListener>,
    conns: Slab<Conn>,
    generation: u32,
    ready: Vec<Token>,
    turn: Vec<Token>,
    dirty: Vec<usize>,
    /// Connections waiting to authenticate: (deadline, slab key, connection
    /// id), in deadline order (one timeout for all, so appends stay sorted).
    pending_auth: VecDeque<(u64, usize, ConnId)>,
    ledger: Ledger,
    /// Read every turn for the bridge-call gauges (written by the workers).
    bridge_calls: Arc<BridgeCalls>,
    settings: GatewaySettings,
    closing: Arc<AtomicBool>,
}

impl Gateway {
    /// Builds the loop around a bound listener.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    #[allow(clippy::too_many_arguments)] // reason: the wiring hands each part once
    pub fn new(
        poll: Poll,
        mut listener: TcpListener,
        admission: Admission,
        events: Receiver<Event>,
        dedup: Dedup,
        dlq_store: Arc<DlqStore>,
        dlq: DlqSender,
        counters: Arc<Counters>,
        recorder: StageRecorder,
        mono: MonoClock,
        clock: SharedClock,
        bridge_calls: Arc<BridgeCalls>,
        settings: GatewaySettings,
        closing: Arc<AtomicBool>,
    ) -> std::io::Result<Self> {
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let busy_detail = Lane::ALL.map(|l| {
            format!(
                "queue full ({} orders waiting in the {} lane)",
                admission.capacity_of(l),
                l.as_str()
            )
        });
        Ok(Gateway {
            poll,
            listener: Some(listener),
            conns: Slab::with_capacity(64),
            generation: 0,
            ready: Vec::with_capacity(64),
            turn: Vec::with_capacity(64),
            dirty: Vec::with_capacity(64),
            pending_auth: VecDeque::new(),
            ledger: Ledger {
                admission: Some(admission),
                events,
                dedup,
                dlq_store,
                dlq: Some(dlq),
                counters,
                recorder,
                mono,
                clock,
                next_seq: 0,
                in_flight: 0,
                rejects: 0,
                busy_detail,
                max_order_rate: settings.max_order_rate,
            },
            bridge_calls,
            settings,
            closing,
        })
    }

    /// Runs until the runtime asks it to close and every worker and the
    /// timer have gone (so every accepted order has had its terminal reply).
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        loop {
            if self.closing.load(Ordering::Acquire) && self.ledger.admission.is_some() {
                self.close_intake();
            }
            let now = self.ledger.mono.now_ns();
            let max_park =
                Duration::from_nanos(self.ledger.recorder.ns_until_flush(now)).min(MAX_PARK);
            let timeout = if self.ready.is_empty() {
                self.settings.idle.poll_timeout(work, max_park)
            } else {
                Some(Duration::ZERO)
            };
            match poll_events(&mut self.poll, &mut events, timeout, "order gateway") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            let turn_start = self.ledger.mono.now_ns();
            std::mem::swap(&mut self.ready, &mut self.turn);
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    t => {
                        if ev.is_writable() {
                            self.mark_dirty(t.0);
                        }
                        if (ev.is_readable() || ev.is_read_closed()) && !self.turn.contains(&t) {
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
            self.expire_unauthenticated(self.ledger.mono.now_ns());
            let (applied, workers_gone) = self.drain_events();
            work += applied;
            self.flush_dirty();
            if self.ledger.rejects > 0 {
                let now = self.ledger.mono.now_ns();
                // Each reject of the turn took the whole turn.
                self.ledger.recorder.record_n_at(
                    Stage::OrderReject,
                    now.saturating_sub(turn_start),
                    self.ledger.rejects,
                    now,
                );
                self.ledger.rejects = 0;
            }
            self.update_gauges();
            let now = self.ledger.mono.now_ns();
            self.ledger.recorder.maybe_flush(now);
            if workers_gone && self.ledger.admission.is_none() {
                break;
            }
        }
        self.final_flush();
        let now = self.ledger.mono.now_ns();
        self.ledger.recorder.finish(now);
    }

    /// Stops taking orders: the listener closes, connections are no longer
    /// read, and dropping the queue's producer lets the workers finish.
    fn close_intake(&mut self) {
        self.ledger.admission = None;
        if let Some(mut l) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut l);
        }
        self.ready.clear();
    }

    fn accept_all(&mut self) {
        loop {
            let Some(listener) = self.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    let c = &self.ledger.counters.orders;
                    if self.conns.len() >= self.settings.max_conns {
                        bump(&c.connections_refused, 1);
                        let _ = stream.write(b"REJECT - SYSTEM_BUSY too many order connections\n");
                        continue;
                    }
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    if let Err(e) = self.poll.registry().register(
                        &mut stream,
                        Token(key),
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        log::warn!("order connection from {peer}: register failed: {e}");
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.generation = self.generation.wrapping_add(1);
                    let id = (u64::from(self.generation) << 32) | key as u64;
                    let authed = self.settings.token.is_none();
                    if !authed {
                        let deadline = self.ledger.mono.now_ns() + self.settings.auth_timeout_ns;
                        self.pending_auth.push_back((deadline, key, id));
                    }
                    let rate = self.settings.max_order_rate;
                    entry.insert(Conn {
                        stream,
                        id,
                        peer: Arc::from(peer.to_string()),
                        reader: LineReader::new(self.settings.max_line_len, READ_CHUNK),
                        out: Vec::with_capacity(4096),
                        out_pos: 0,
                        live: 0,
                        paused: false,
                        read_closed: false,
                        dirty: false,
                        authed,
                        rate: (rate > 0).then(|| RateLimit::per_second(rate)),
                    });
                    bump(&c.connections_accepted, 1);
                    self.ready.push(Token(key));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::warn!("order accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Reads one connection for a turn; returns the lines it handled.
    fn serve(&mut self, token: Token) -> usize {
        let key = token.0;
        if self.ledger.admission.is_none() {
            return 0;
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return 0;
        };
        if conn.paused || conn.read_closed {
            return 0;
        }
        let mut lines = 0usize;
        let mut close = false;
        let mut again = true;
        for _ in 0..READS_PER_TURN {
            match conn.reader.read_from(&mut conn.stream) {
                Ok(0) => {
                    // Half-close: keep writing the replies of its orders.
                    conn.read_closed = true;
                    again = false;
                    break;
                }
                Ok(_) => {
                    if !conn.authed {
                        let Some(token) = &self.settings.token else {
                            unreachable!("not authed without a token")
                        };
                        let verdict = match conn.reader.next_line() {
                            None => continue,
                            Some(LineEvent::Line(l)) => check_line(token, l).refusal(),
                            Some(LineEvent::TooLong { .. }) => Some(LINE_INVALID),
                        };
                        lines += 1;
                        if let Some(reply) = verdict {
                            conn.out.extend_from_slice(reply);
                            let _ = write_out(conn);
                            log::warn!("order connection {}: authentication refused", conn.peer);
                            bump(&self.ledger.counters.orders.auth_failures, 1);
                            close = true;
                            again = false;
                            break;
                        }
                        conn.authed = true;
                        conn.out.extend_from_slice(LINE_OK);
                    }
                    let Conn {
                        reader,
                        out,
                        live,
                        id,
                        peer,
                        rate,
                        ..
                    } = &mut *conn;
                    while let Some(ev) = reader.next_line() {
                        lines += 1;
                        match ev {
                            LineEvent::Line(line) => {
                                self.ledger.handle_line(*id, peer, out, live, rate, line);
                            }
                            LineEvent::TooLong { .. } => self.ledger.reject_invalid(
                                out,
                                "-",
                                InvalidReason::LineTooLong,
                                "line over the length limit",
                            ),
                        }
                    }
                    if conn.pending() > 0 && !conn.dirty {
                        conn.dirty = true;
                        self.dirty.push(key);
                    }
                    if conn.pending() > OUT_HWM {
                        conn.paused = true;
                        again = false;
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    again = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::info!("order connection {}: read failed: {e}", conn.peer);
                    close = true;
                    again = false;
                    break;
                }
            }
        }
        if close {
            self.close(key);
        } else if again {
            self.ready.push(token);
        } else {
            self.maybe_close_finished(key);
        }
        lines.max(usize::from(again))
    }

    /// Closes connections whose authentication deadline passed.
    fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(&(deadline, key, id)) = self.pending_auth.front() {
            if deadline > now_ns {
                return;
            }
            self.pending_auth.pop_front();
            let Some(conn) = self.conns.get_mut(key).filter(|c| c.id == id) else {
                continue;
            };
            if !conn.authed {
                conn.out.extend_from_slice(LINE_TIMEOUT);
                let _ = write_out(conn);
                log::warn!(
                    "order connection {}: no AUTH within the timeout; closing",
                    conn.peer
                );
                bump(&self.ledger.counters.orders.auth_failures, 1);
                self.close(key);
            }
        }
    }

    fn mark_dirty(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(key);
            }
        }
    }

    /// Applies every event the workers and the timer sent. Returns how many,
    /// and whether all of them have gone.
    fn drain_events(&mut self) -> (usize, bool) {
        let mut n = 0;
        loop {
            match self.ledger.events.try_recv() {
                Ok(ev) => {
                    n += 1;
                    let key = (ev.conn & 0xffff_ffff) as usize;
                    let conn = self.conns.get_mut(key).filter(|c| c.id == ev.conn);
                    let terminal = ev.kind.is_terminal();
                    match conn {
                        Some(c) => {
                            self.ledger.apply(&ev, &mut c.out);
                            if terminal {
                                c.live = c.live.saturating_sub(1);
                            }
                            if !c.dirty {
                                c.dirty = true;
                                self.dirty.push(key);
                            }
                        }
                        None => {
                            let mut sink = Vec::new();
                            self.ledger.apply(&ev, &mut sink);
                            bump(&self.ledger.counters.orders.undeliverable, 1);
                        }
                    }
                }
                Err(TryRecvError::Empty) => return (n, false),
                Err(TryRecvError::Disconnected) => return (n, true),
            }
        }
    }

    fn flush_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for &key in &dirty {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            conn.dirty = false;
            match write_out(conn) {
                Ok(()) => {
                    if conn.paused && conn.pending() < OUT_HWM / 2 {
                        conn.paused = false;
                        self.ready.push(Token(key));
                    }
                    self.maybe_close_finished(key);
                }
                Err(e) => {
                    log::info!("order connection {}: write failed: {e}", conn.peer);
                    self.close(key);
                }
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    /// Closes a half-closed connection once all its orders ended and their
    /// replies are written.
    fn maybe_close_finished(&mut self, key: usize) {
        if let Some(c) = self.conns.get(key) {
            if c.read_closed && c.live == 0 && c.pending() == 0 {
                self.close(key);
            }
        }
    }

    fn close(&mut self, key: usize) {
        if self.conns.contains(key) {
            let mut c = self.conns.remove(key);
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
    }

    fn update_gauges(&mut self) {
        let o = &self.ledger.counters.orders;
        set(&o.connections_open, self.conns.len() as u64);
        set(&o.in_flight, self.ledger.in_flight);
        set(&o.dedup_ids, self.ledger.dedup.len() as u64);
        match &self.ledger.admission {
            Some(a) => a.publish_gauges(o, self.ledger.mono.now_ns()),
            None => Admission::clear_gauges(o),
        }
        // Also after intake closed: a call stuck at a venue is what holds a
        // shutdown, so its gauges (and `bridge_call_slow`) stay live.
        self.bridge_calls.publish_gauges(o, &*self.ledger.clock);
    }

    /// After the last event: give the clients a bounded time to take their replies.
    fn final_flush(&mut self) {
        let mut events = Events::with_capacity(64);
        for _ in 0..100 {
            let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
            let mut pending = false;
            for key in keys {
                let conn = &mut self.conns[key];
                if write_out(conn).is_err() {
                    self.close(key);
                } else if conn.pending() > 0 {
                    pending = true;
                }
            }
            if !pending {
                return;
            }
            let _ = self.poll.poll(&mut events, Some(Duration::from_millis(10)));
        }
    }
}

fn write_out(conn: &mut Conn) -> std::io::Result<()> {
    while conn.out_pos < conn.out.len() {
        match conn.stream.write(&conn.out[conn.out_pos..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => conn.out_pos += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    conn.out.clear();
    conn.out_pos = 0;
    Ok(())
}
