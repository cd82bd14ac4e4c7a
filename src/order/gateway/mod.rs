//! The order gateway: a handler over the [`crate::net`] kit that parses
//! order lines, applies idempotency, offers orders to their lane's bounded
//! queue (full → `SYSTEM_BUSY` at once), and writes every reply.
//!
//! The kit accepts (limit and refusal line `REJECT - SYSTEM_BUSY too many
//! order connections`), keeps the connections and their ids, the `AUTH`
//! deadlines, the line readers, the bounded reply buffers and the
//! ready/turn and flush lists; `conns.rs` keeps the order protocol's use of
//! them: pause on the reply mark, half-close, replies routed by id.
//!
//! Single writer of: the connections and their output buffers, the dedup
//! store, the order counters. Workers and the retry timer never touch a
//! socket: they send [`Event`]s over a bounded channel and ring the waker;
//! the gateway turns them into lines (the per-line work: `ledger.rs`; the
//! connections, their reads and flushes: `conns.rs`; what the journal and
//! the workers hand back: `release.rs`; this file: the state and the turn
//! loop). Because the gateway appends `ACK`
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

use crossbeam_channel::Receiver;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};

use crate::dlq::{DlqSender, DlqStore};
use crate::idle::IdleStrategy;
use crate::metrics::counters::set;
use crate::metrics::Stage;
use crate::net::lines::LineReader;
use crate::net::{
    AuthGate, Conns, KeyList, Listener, LoopCtx, PortPolicy, TlsPort, TurnLists, WriteBuf, LISTENER,
};
use crate::rate_limit::RateLimit;
use crate::retry::SharedClock;
use crate::sys::net::{poll_events, Polled};
use crate::sys::watch::Beat;

use crate::model::lane::Lane;
use crate::order::msg::admission::Admission;
use crate::order::msg::event::Event;
use crate::order::msg::gauges::CallGauges;
use crate::order::msg::halt::Halt;

use dedup::Dedup;

pub(crate) mod acct;
mod cancel;
pub mod codec;
mod conns;
pub mod dedup;
mod ledger;
pub(crate) mod pending_acks;
mod release;
mod restore;
mod send_on;
pub mod status;
use ledger::Ledger;

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
}
