//! The order gateway: a handler over the [`crate::net`] kit that parses
//! order lines, applies idempotency, offers orders to their lane's bounded
//! queue (full → `SYSTEM_BUSY` at once), and writes every reply.
//!
//! The kit accepts (limit and refusal line `REJECT - SYSTEM_BUSY too many
//! order connections`), keeps the connections and their ids, the `AUTH`
//! deadlines, the line readers, the bounded reply buffers and the
//! ready/turn and flush lists; this file keeps the order protocol's use of
//! them: pause on the reply mark, half-close, replies routed by id.
//!
//! Single writer of: the connections and their output buffers, the dedup
//! store, the order counters. Workers and the retry timer never touch a
//! socket: they send [`Event`]s over a bounded channel and ring the waker;
//! the gateway turns them into lines (the per-line work: `ledger.rs`; this
//! file: sockets, buffers and the loop). Because the gateway appends `ACK`
//! right after a successful offer, before it next drains events, a client
//! always reads `ACK` before any `FILL` or `DONE` of that order. The offer
//! (or parking behind an account key's head) and the `ACK` are written
//! once, in `send_on.rs`, for every way an order is sent on.
//!
//! What it exchanges with the other threads (the lane queues, the events,
//! the journal records and the journal itself, the kill switch, the bridge
//! call gauges) is on the floor, [`crate::order::msg`]; it imports no
//! other thread's folder. At start it takes back the orders recovery found
//! (`restore.rs`, the floor's [`Restore`](crate::order::msg::restore::Restore)).
//!
//! Fairness: a turn hands out at most `LINES_PER_TURN` lines of each
//! connection (one that sent 25,000 orders at once is taken in slices, in
//! turn with the others), writes the answers those lines got, and only
//! then releases the `ACK`s the journal made durable and applies the
//! workers' events, each bounded per turn. An answer that needs neither
//! the journal nor a worker (`PONG`, `REJECT … SYSTEM_BUSY`, `STATUS`)
//! therefore waits for one slice of each other busy connection and the
//! bounded tail of a turn, never for a journal sync or another
//! connection's whole burst.
//!
//! Output bounds: a connection whose unsent replies pass `OUT_HWM` is not
//! read until they drain below half of it, so a client that sends without
//! reading cannot make the engine buffer without bound: its buffer holds at
//! most `OUT_HWM` plus the replies of the orders it already has in flight.
//!
//! A client that half-closes (shuts down its sending side) keeps receiving
//! the replies of its orders; the connection closes once they have all
//! ended and been written. Replies for a client that has gone are counted
//! (`replies_to_closed_connections`); its orders still run to their end,
//! and `STATUS <id>` from any connection tells where each is.
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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, TryRecvError};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use crate::auth::{LINE_OK, LINE_TIMEOUT};
use crate::dlq::{DlqSender, DlqStore};
use crate::idle::IdleStrategy;
use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::{bump, set};
use crate::metrics::Stage;
use crate::model::warning::WarnKind;
use crate::net::lines::{LineEvent, LineReader};
use crate::net::{
    AuthGate, AuthStep, ConnCounters, Conns, KeyList, Listener, LoopCtx, PortPolicy, TlsPort,
    TurnLists, WriteBuf, LISTENER,
};
use crate::rate_limit::RateLimit;
use crate::retry::SharedClock;
use crate::sys::net::{poll_events, Polled};
use crate::sys::watch::Beat;

use crate::model::lane::Lane;
use crate::model::order_reasons::InvalidReason;
use crate::order::msg::admission::Admission;
use crate::order::msg::event::Event;
use crate::order::msg::gauges::CallGauges;
use crate::order::msg::halt::Halt;

use crate::model::order_reasons::RejectReason;
use crate::model::units::{Amount, Lots};
use crate::order::msg::admission::Busy;
use crate::order::msg::journal::Loss;
use crate::order::msg::order::Order;
use crate::order::msg::record::{Record, TerminalState};
use dedup::{Dedup, IdState};
use pending_acks::Released;
use send_on::Owed;

pub(crate) mod acct;
mod cancel;
pub mod codec;
pub mod dedup;
mod ledger;
pub(crate) mod pending_acks;
mod restore;
mod send_on;
pub mod status;
use ledger::{write_event, Ledger};

/// Token of the waker workers, the timer and the runtime ring.
pub(crate) const WAKER: Token = Token(usize::MAX);
/// Lines of one connection handled per turn. A client that writes 25,000
/// orders at once is taken in slices of this many, in turn with the other
/// connections, and each turn's answers are written before the turn's
/// `ACK` releases and worker events: another connection's `PING` or
/// refused order waits for one slice of each busy connection, not for the
/// burst (issue 26; `perf/order_burst.sh`).
const LINES_PER_TURN: usize = 128;
/// Reads of one connection per turn, at most (a slice of short reads).
const READS_PER_TURN: usize = 4;
const READ_CHUNK: usize = 16 * 1024;
/// Held orders released (offered and `ACK`ed) per turn, at least; the rest
/// wait for the next turn, which does not wait in the poller.
const RELEASES_PER_TURN: usize = 2 * LINES_PER_TURN;
/// Worker and timer events turned into replies per turn, at most; the rest
/// wait in their bounded channel for the next turn.
const EVENTS_PER_TURN: usize = 2 * LINES_PER_TURN;
/// Unsent reply bytes past which a connection is not read.
pub(crate) const OUT_HWM: usize = 1 << 20;
/// Room a connection's reply buffer starts with.
const OUT_INITIAL: usize = 4096;
/// Room made in a connection's reply buffer before the replies of one order
/// line or event are written into it: more than a reply line takes in
/// practice (an id is at most 36 bytes, echoed input is cut to 16
/// characters); a longer one still goes in, growing the buffer.
const REPLY_ROOM: usize = 512;
const MAX_PARK: Duration = Duration::from_millis(10);
/// The detail of `REJECT <id> SYSTEM_BUSY` while the journal's disk is full
/// (`journal::disk_full`): a new order, or one whose record the full disk
/// cut off.
pub(crate) const JOURNAL_DISK_FULL: &str = "journal_full: the journal's disk is full";
/// The line an order client over the connection limit reads before its close.
const REFUSAL: &[u8] = b"REJECT - SYSTEM_BUSY too many order connections\n";
/// The line a plaintext client of a TLS order port reads before its close.
const TLS_REFUSAL: &[u8] = b"ERR this port requires TLS\n";

/// Settings of the gateway.
#[derive(Debug, Clone)]
pub(crate) struct GatewaySettings {
    /// Most simultaneous order connections.
    pub max_conns: usize,
    /// Longest order line.
    pub max_line_len: usize,
    /// What idle turns do.
    pub idle: IdleStrategy,
    /// Token every order connection must present first (`AUTH <token>`), if any.
    pub token: Option<crate::auth::Token>,
    /// Close a connection that has not authenticated by then (measurement clock).
    pub auth_timeout_ns: u64,
    /// Orders per second per connection (0 = no limit).
    pub max_order_rate: u32,
    /// Most active (account, symbol) keys (`--acct-keys`, `acct.rs`).
    pub acct_keys: usize,
    /// The port's TLS (`--tls-ports` with `orders`), if any.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// What the gateway works with besides its sockets and its [`LoopCtx`].
#[derive(Debug)]
pub(crate) struct GatewayParts {
    /// The producer side of the lanes (dropped when intake closes).
    pub admission: Admission,
    /// What the workers, the timer and the fill thread report.
    pub events: Receiver<Event>,
    /// The idempotency store.
    pub dedup: Dedup,
    /// Dead letters, for `REPLAY`.
    pub dlq_store: Arc<DlqStore>,
    /// Where refused lines go.
    pub dlq: DlqSender,
    /// The order path's clock (rate limits, bridge-call gauges).
    pub clock: SharedClock,
    /// Read every turn for the bridge-call gauges (written by the workers).
    pub bridge_calls: Arc<dyn CallGauges>,
    /// The journal's hold (`None`: `--no-journal`).
    pub pending: Option<pending_acks::PendingAcks>,
    /// The kill switch: while on, every `NEW` is refused.
    pub halt: Arc<Halt>,
}

/// The gateway's part of a connection (the kit keeps socket, id, peer, auth).
#[derive(Debug)]
struct OrderConn {
    reader: LineReader,
    /// Unsent replies; its mark is `OUT_HWM`.
    out: WriteBuf,
    /// Orders accepted on this connection without a terminal reply yet.
    live: u64,
    /// Not read until its output drains (over `OUT_HWM`).
    paused: bool,
    /// The peer shut down its sending side.
    read_closed: bool,
    /// On the flush list.
    dirty: bool,
    /// This connection's order budget (`None`: no limit).
    rate: Option<RateLimit>,
}

/// The gateway loop.
#[derive(Debug)]
pub(crate) struct Gateway {
    poll: Poll,
    listener: Listener,
    conns: Conns<OrderConn>,
    turns: TurnLists,
    /// Connections with replies to write this turn.
    dirty: KeyList,
    auth: AuthGate,
    ledger: Ledger,
    /// Read every turn for the bridge-call gauges (written by the workers).
    bridge_calls: Arc<dyn CallGauges>,
    settings: GatewaySettings,
    closing: Arc<AtomicBool>,
    /// The gateway's heartbeat (beaten every turn).
    beat: Beat,
}

impl Gateway {
    /// Builds the loop around a bound listener; `ctx` carries the poller
    /// (whose waker is [`WAKER`]), counters, recorder, the measurement clock
    /// and the flag that asks the gateway to close.
    ///
    /// # Errors
    /// When the listener cannot be registered.
    pub(crate) fn new(
        listener: TcpListener,
        ctx: LoopCtx,
        parts: GatewayParts,
        settings: GatewaySettings,
    ) -> std::io::Result<Self> {
        let LoopCtx {
            poll,
            counters,
            recorder,
            clock: mono,
            stop: closing,
            beat,
        } = ctx;
        let policy = PortPolicy {
            max_conns: settings.max_conns,
            refusal: REFUSAL,
            log_refusals: false,
            sndbuf: 0,
            interest: Interest::READABLE | Interest::WRITABLE,
            name: "order",
            peer_label: "order connection",
        };
        let tls = settings.tls.clone().map(|server| {
            let name = crate::tls::TlsPortName::Orders;
            TlsPort::new(
                server,
                name,
                TLS_REFUSAL,
                "order connection",
                Arc::clone(&counters),
            )
        });
        let listener = Listener::register(poll.registry(), listener, policy)?.with_tls(tls);
        let GatewayParts {
            admission,
            events,
            dedup,
            dlq_store,
            dlq,
            clock,
            bridge_calls,
            pending,
            halt,
        } = parts;
        let next_seq = pending.as_ref().map_or(0, |p| p.len() as u64);
        let busy_detail = Lane::ALL.map(|l| {
            format!(
                "queue full ({} orders waiting in the {} lane)",
                admission.capacity_of(l),
                l.as_str()
            )
        });
        Ok(Gateway {
            poll,
            listener,
            conns: Conns::with_capacity(64),
            turns: TurnLists::with_capacity(64),
            dirty: KeyList::with_capacity(64),
            auth: AuthGate::new(settings.token.clone(), settings.auth_timeout_ns),
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
                next_seq,
                in_flight: 0,
                rejects: 0,
                busy_detail,
                max_order_rate: settings.max_order_rate,
                pending,
                halt,
                cancels: cancel::CancelBook::default(),
                acct: acct::AcctKeys::new(settings.acct_keys),
                unjournaled: Vec::new(),
            },
            bridge_calls,
            settings,
            closing,
            beat,
        })
    }

    /// Runs until the runtime asks it to close and every worker and the
    /// timer have gone (so every accepted order has had its terminal reply).
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut work = 0usize;
        loop {
            if self.closing.load(Ordering::Acquire) && self.ledger.admission.is_some() {
                self.close_intake();
            }
            let now = self.ledger.mono.now_ns();
            let max_park =
                Duration::from_nanos(self.ledger.recorder.ns_until_flush(now)).min(MAX_PARK);
            let timeout = if self.turns.has_ready() {
                Some(Duration::ZERO)
            } else {
                self.settings.idle.poll_timeout(work, max_park)
            };
            self.beat.beat();
            match poll_events(&mut self.poll, &mut events, timeout, "order gateway") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            work = 0;
            let turn_start = self.ledger.mono.now_ns();
            self.turns.begin();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept_all(),
                    WAKER => {}
                    Token(key) => {
                        if ev.is_writable() {
                            self.mark_dirty(key);
                        }
                        if ev.is_readable() || ev.is_read_closed() {
                            self.turns.reported(key);
                        }
                    }
                }
            }
            let mut lines = 0;
            while let Some(key) = self.turns.next_in_turn() {
                lines += self.serve(key);
            }
            self.turns.end();
            work += lines;
            // The answers of this turn's lines (`PONG`, `REJECT`, `STATUS`)
            // go out now: they wait neither for the `ACK`s the journal
            // releases nor for the workers' events below.
            self.flush_dirty();
            if self.ledger.rejects > 0 {
                let now = self.ledger.mono.now_ns();
                // Each reject of the turn took the turn's reading part.
                self.ledger.recorder.record_n_at(
                    Stage::OrderReject,
                    now.saturating_sub(turn_start),
                    self.ledger.rejects,
                    now,
                );
                self.ledger.rejects = 0;
            }
            self.expire_unauthenticated(self.ledger.mono.now_ns());
            // Before the events: an order's `ACK` precedes its first `FILL`.
            // At least twice what this turn's lines can have held, so the
            // releases keep up with any number of busy connections.
            work += self.release_durable(RELEASES_PER_TURN.max(2 * lines));
            if self.ledger.halt.take_cancel_request() {
                self.cancel_queued();
            }
            work += self.answer_cancels();
            let (applied, workers_gone) = self.drain_events(EVENTS_PER_TURN);
            work += applied;
            self.ledger.rejournal();
            if self.ledger.acct.parked() > 0 {
                work += self.release_followers();
            }
            self.flush_dirty();
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
    ///
    /// Followers parked behind their key's head (`acct.rs`) were `ACK`ed:
    /// the queues stay open, and no line is read, until the last of them
    /// has been offered (their heads end, by the shutdown deadline at worst).
    fn close_intake(&mut self) {
        // Every durable order is offered before the rest are refused.
        self.release_durable(usize::MAX);
        if self.ledger.acct.parked() > 0 {
            return;
        }
        self.ledger.admission = None;
        self.refuse_held("shutting down");
        self.listener.close(self.poll.registry());
        self.turns.clear_ready();
    }

    fn accept_all(&mut self) {
        let o = &self.ledger.counters.orders;
        let counters = ConnCounters {
            accepted: &o.connections_accepted,
            refused: &o.connections_refused,
            open: None,
        };
        let authed = !self.auth.required();
        let (auth, turns, mono) = (&mut self.auth, &mut self.turns, self.ledger.mono);
        let (max_line_len, rate) = (self.settings.max_line_len, self.settings.max_order_rate);
        self.listener.accept_all(
            self.poll.registry(),
            &mut self.conns,
            counters,
            authed,
            |id| {
                auth.arm(id, mono.now_ns());
                // Read it next turn (its first bytes may have come with the accept).
                turns.again(id.key());
                OrderConn {
                    reader: LineReader::new(max_line_len, READ_CHUNK),
                    out: WriteBuf::new(OUT_INITIAL, OUT_HWM),
                    live: 0,
                    paused: false,
                    read_closed: false,
                    dirty: false,
                    rate: (rate > 0).then(|| RateLimit::per_second(rate)),
                }
            },
        );
    }

    /// Serves one connection for a turn: hands out the lines its reader
    /// holds, reading the socket when they are used up, until
    /// [`LINES_PER_TURN`] lines, [`READS_PER_TURN`] reads, `WouldBlock`, the
    /// reply mark or the peer's half-close. A connection stopped by one of
    /// the first two is put back (it may hold more, in its reader or its
    /// socket, with no new event to say so). Returns the lines it handled.
    fn serve(&mut self, key: usize) -> usize {
        if self.ledger.admission.is_none() || self.closing.load(Ordering::Acquire) {
            return 0;
        }
        let Some(conn) = self.conns.get_mut(key) else {
            return 0;
        };
        if conn.state.paused || conn.state.read_closed {
            return 0;
        }
        let id = conn.id;
        let (mut lines, mut reads, mut close) = (0usize, 0usize, false);
        // Whether to serve it next turn without waiting for an event.
        let again = loop {
            let st = &mut conn.state;
            if conn.authed {
                // The reader is read again only once `next_line` said `None`.
                while lines < LINES_PER_TURN {
                    let Some(ev) = st.reader.next_line() else {
                        break;
                    };
                    lines += 1;
                    match ev {
                        LineEvent::Line(line) => {
                            let (live, rate) = (&mut st.live, &mut st.rate);
                            self.ledger.handle_line(
                                id,
                                &conn.peer,
                                st.out.room_for(REPLY_ROOM),
                                live,
                                rate,
                                line,
                            );
                        }
                        LineEvent::TooLong { .. } => self.ledger.reject_invalid(
                            st.out.room_for(REPLY_ROOM),
                            "-",
                            InvalidReason::LineTooLong,
                            "line over the length limit",
                        ),
                    }
                }
                if st.out.pending() > 0 {
                    self.dirty.mark(&mut st.dirty, key);
                }
                if st.out.over_mark() {
                    st.paused = true;
                    break false;
                }
                if lines == LINES_PER_TURN {
                    break true;
                }
            }
            if reads == READS_PER_TURN {
                break true;
            }
            reads += 1;
            match st.reader.read_from(&mut conn.stream) {
                // Half-close: keep writing the replies of its orders.
                Ok(0) => {
                    st.read_closed = true;
                    break false;
                }
                Ok(_) if conn.authed => {}
                Ok(_) => match self.auth.first_line(&mut st.reader) {
                    AuthStep::NeedMore => {}
                    AuthStep::Passed => {
                        lines += 1;
                        conn.authed = true;
                        st.out.append(LINE_OK);
                    }
                    AuthStep::Refused(reply) => {
                        st.out.append(reply);
                        let _ = st.out.write_to(&mut conn.stream);
                        warn_repeating!(
                            WarnKind::AuthRefused,
                            "order connection {}: authentication refused",
                            conn.peer
                        );
                        bump(&self.ledger.counters.orders.auth_failures, 1);
                        close = true;
                        break false;
                    }
                },
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::info!("order connection {}: read failed: {e}", conn.peer);
                    close = true;
                    break false;
                }
            }
        };
        if close {
            self.close(key);
        } else if again {
            self.turns.again(key);
        } else {
            self.maybe_close_finished(key);
        }
        lines.max(usize::from(again))
    }

    /// Closes connections whose authentication deadline passed.
    fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(id) = self.auth.next_expired(now_ns) {
            let Some(conn) = self.conns.get_live(id) else {
                continue;
            };
            if !conn.authed {
                conn.state.out.append(LINE_TIMEOUT);
                let _ = conn.state.out.write_to(&mut conn.stream);
                warn_repeating!(
                    WarnKind::AuthTimeout,
                    "order connection {}: no AUTH within the timeout; closing",
                    conn.peer
                );
                bump(&self.ledger.counters.orders.auth_failures, 1);
                self.close(id.key());
            }
        }
    }

    fn mark_dirty(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            self.dirty.mark(&mut c.state.dirty, key);
        }
    }

    /// Offers the orders whose journal record is durable, in admission
    /// order, and writes their `ACK`; refuses those whose record never will
    /// be. At most `limit`: the rest stay held for the next turn (still
    /// counted against their lane's room). Returns how many.
    fn release_durable(&mut self, limit: usize) -> usize {
        let mut n = 0;
        while n < limit {
            let Some(p) = &mut self.ledger.pending else {
                return n;
            };
            let Some(released) = p.next() else {
                return n;
            };
            if self.ledger.admission.is_none() {
                // Closing: `close_intake` refuses what is left.
                match released {
                    Released::Durable { order, lsn, .. } => p.put_back(order, lsn, None),
                    Released::Lost(order, loss) => p.put_back(order, 0, Some(loss)),
                }
                return n;
            }
            match released {
                Released::Durable {
                    order,
                    lsn,
                    recovered,
                } => {
                    let (conn, id) = (order.conn, Arc::clone(&order.id));
                    if let (Some(k), true) = (&order.acct_key, recovered) {
                        let _ = self.ledger.acct.reserve(&id, k, true);
                    }
                    // Behind its key's head it is parked (ACKed all the
                    // same); its place in the lane was counted when held.
                    let mut client = if recovered {
                        None
                    } else {
                        self.conns.get_live(conn)
                    };
                    let owed = if recovered {
                        Owed::Recovered
                    } else {
                        Owed::Ack(client.as_mut().map(|c| c.state.out.room_for(REPLY_ROOM)))
                    };
                    match self.ledger.send_on(order, owed, false) {
                        Ok(()) => {
                            n += 1;
                            if let Some(p) = &mut self.ledger.pending {
                                p.started(&id, lsn);
                            }
                            if let Some(c) = client {
                                self.dirty.mark(&mut c.state.dirty, conn.key());
                            }
                        }
                        Err(Busy(back)) => {
                            if let Some(p) = &mut self.ledger.pending {
                                p.put_back(back, lsn, None);
                            }
                            return n;
                        }
                    }
                }
                Released::Lost(order, loss) => {
                    n += 1;
                    let detail = match loss {
                        Loss::DiskFull => {
                            bump(&self.ledger.counters.orders.journal_full_rejects, 1);
                            JOURNAL_DISK_FULL
                        }
                        Loss::Failed => "journal_error: the journal could not be written",
                    };
                    // Never durable, never `ACK`ed: like any `SYSTEM_BUSY`,
                    // its id may be sent again.
                    let id = Arc::clone(&order.id);
                    self.refuse(order, detail);
                    self.ledger.dedup.forget(&id);
                }
            }
        }
        n
    }

    /// Offers the followers whose key's head ended (per-account ordering,
    /// `acct.rs`), each now its key's head; a full lane keeps the rest
    /// parked for a later turn. Returns how many.
    fn release_followers(&mut self) -> usize {
        if self.ledger.admission.is_none() {
            return 0;
        }
        let mut n = 0;
        while let Some(mut order) = self.ledger.acct.next_ready() {
            // Its queue wait (and the lane's oldest age) starts now: the
            // time parked was its key's, not the lane's backlog.
            order.enq_mono_ns = self.ledger.mono.now_ns();
            match self.ledger.send_on(order, Owed::Follower, false) {
                Ok(()) => n += 1,
                Err(Busy(back)) => {
                    self.ledger.acct.put_back(back);
                    break;
                }
            }
        }
        n
    }

    /// Refuses every held order (`SYSTEM_BUSY <detail>`) and journals that
    /// it never ran.
    fn refuse_held(&mut self, detail: &str) {
        let held = match &mut self.ledger.pending {
            Some(p) => p.take_all(),
            None => return,
        };
        for order in held {
            if let Some(p) = &self.ledger.pending {
                let _ = p.journal().append(&Record::Terminal {
                    id: order.id.to_string(),
                    state: TerminalState::Rejected,
                    reason: detail.to_owned(),
                    cum: Lots(0),
                    amount: Amount(0),
                    attempts: 0,
                });
            }
            self.refuse(order, detail);
        }
    }

    /// Writes `REJECT <id> SYSTEM_BUSY <detail>` for a held order.
    fn refuse(&mut self, order: Order, detail: &str) {
        self.ledger.in_flight = self.ledger.in_flight.saturating_sub(1);
        self.ledger.acct.ended(&order.id);
        self.ledger
            .dedup
            .mark(&order.id, IdState::Done, self.ledger.clock.now_ns());
        bump(
            &self.ledger.counters.orders.rejected[RejectReason::SystemBusy.index()],
            1,
        );
        let conn = order.conn;
        match self.conns.get_live(conn) {
            Some(c) => {
                codec::write_reject(
                    c.state.out.room_for(REPLY_ROOM),
                    &order.id,
                    RejectReason::SystemBusy,
                    detail,
                );
                c.state.live = c.state.live.saturating_sub(1);
                self.dirty.mark(&mut c.state.dirty, conn.key());
            }
            None => bump(
                &self.ledger.counters.orders.replies_to_closed_connections,
                1,
            ),
        }
    }

    /// `POST /orders/halt?cancel=queued`: cancels every order no worker holds.
    fn cancel_queued(&mut self) {
        let now = self.ledger.clock.now_ns();
        let l = &mut self.ledger;
        let journal = l.pending.as_ref().map(pending_acks::PendingAcks::journal);
        let dedup = &l.dedup;
        let (whole, split) = l.cancels.cancel_all(|id| dedup.status(id, now), journal);
        bump(&l.counters.orders.cancelled, split as u64);
        log::warn!(
            "orders halted: {whole} orders not yet at a bridge cancelled, and the unstarted chunks of {split} large ones"
        );
    }

    /// Writes the `DONE … CANCELED` of every cancel whose journal record is
    /// durable: to the order's connection and to the one that asked, when
    /// another. Returns how many.
    fn answer_cancels(&mut self) -> usize {
        let mut n = 0;
        loop {
            let journal = self
                .ledger
                .pending
                .as_ref()
                .map(pending_acks::PendingAcks::journal);
            let Some((ev, by)) = self.ledger.cancels.next_answer(journal) else {
                return n;
            };
            n += 1;
            bump(&self.ledger.counters.orders.cancelled, 1);
            self.ledger.apply(&ev, true);
            let owner = ev.conn;
            let mut told = false;
            if let Some(c) = self.conns.get_live(owner) {
                write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                c.state.live = c.state.live.saturating_sub(1);
                self.dirty.mark(&mut c.state.dirty, owner.key());
                told = true;
            }
            if let Some(by) = by.filter(|b| *b != ev.conn) {
                if let Some(c) = self.conns.get_live(by) {
                    write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                    self.dirty.mark(&mut c.state.dirty, by.key());
                    told = true;
                }
            }
            if !told {
                bump(
                    &self.ledger.counters.orders.replies_to_closed_connections,
                    1,
                );
            }
        }
    }

    /// Applies the events the workers and the timer sent, at most `limit`
    /// (the rest wait in their bounded channel for the next turn). Returns
    /// how many, and whether all of them have gone.
    fn drain_events(&mut self, limit: usize) -> (usize, bool) {
        let mut n = 0;
        while n < limit {
            match self.ledger.events.try_recv() {
                Ok(ev) => {
                    n += 1;
                    let id = ev.conn;
                    let terminal = ev.kind.is_terminal();
                    self.ledger.apply(&ev, false);
                    if !ev.kind.has_reply() {
                        continue;
                    }
                    match self.conns.get_live(id) {
                        Some(c) => {
                            write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                            if terminal {
                                c.state.live = c.state.live.saturating_sub(1);
                            }
                            self.dirty.mark(&mut c.state.dirty, id.key());
                        }
                        None => bump(
                            &self.ledger.counters.orders.replies_to_closed_connections,
                            1,
                        ),
                    }
                }
                Err(TryRecvError::Empty) => return (n, false),
                Err(TryRecvError::Disconnected) => return (n, true),
            }
        }
        (n, false)
    }

    fn flush_dirty(&mut self) {
        let dirty = self.dirty.take();
        for &key in &dirty {
            let Some(conn) = self.conns.get_mut(key) else {
                continue;
            };
            let st = &mut conn.state;
            st.dirty = false;
            match st.out.write_to(&mut conn.stream) {
                Ok(_) => {
                    if st.paused && st.out.under_low_water() {
                        st.paused = false;
                        self.turns.again(key);
                    }
                    self.maybe_close_finished(key);
                }
                Err(e) => {
                    log::info!("order connection {}: write failed: {e}", conn.peer);
                    self.close(key);
                }
            }
        }
        self.dirty.restore(dirty);
    }

    /// Closes a half-closed connection once all its orders ended and their
    /// replies are written.
    fn maybe_close_finished(&mut self, key: usize) {
        if let Some(c) = self.conns.get(key) {
            let st = &c.state;
            if st.read_closed && st.live == 0 && st.out.pending() == 0 {
                self.close(key);
            }
        }
    }

    fn close(&mut self, key: usize) {
        self.conns.remove(self.poll.registry(), key);
    }

    fn update_gauges(&mut self) {
        let o = &self.ledger.counters.orders;
        set(&o.connections_open, self.conns.len() as u64);
        set(&o.in_flight, self.ledger.in_flight);
        set(&o.dedup_ids, self.ledger.dedup.len() as u64);
        set(&o.halted, u64::from(self.ledger.halt.is_halted()));
        match &self.ledger.admission {
            Some(a) => a.publish_gauges(o, self.ledger.mono.now_ns()),
            None => Admission::clear_gauges(o),
        }
        // Also after intake closed: a call stuck at a venue is what holds a
        // shutdown, so its gauges (and `bridge_call_slow`) stay live.
        self.bridge_calls.publish_gauges(o, &*self.ledger.clock);
        if let Some(p) = &self.ledger.pending {
            p.publish_oldest_live();
            p.journal().publish_gauges(o);
        }
    }

    /// After the last event: give the clients a bounded time to take their replies.
    fn final_flush(&mut self) {
        let mut events = Events::with_capacity(64);
        for _ in 0..100 {
            let keys: Vec<usize> = self.conns.keys().collect();
            let mut pending = false;
            for key in keys {
                let Some(conn) = self.conns.get_mut(key) else {
                    continue;
                };
                if conn.state.out.write_to(&mut conn.stream).is_err() {
                    self.close(key);
                } else if conn.state.out.pending() > 0 {
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
