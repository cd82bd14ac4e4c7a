//! The publisher thread: a mio event loop that owns every subscriber socket,
//! drains the dirty symbol ids at its own pace, encodes each update once and
//! appends it to the buffer of every subscriber of that symbol.
//!
//! One turn of the loop:
//! 1. poll (blocking only when the previous turn did nothing, per the idle
//!    strategy) and handle accepts, commands and writable sockets;
//! 2. learn symbols the feed interned since the last turn;
//! 3. take up to `MAX_BATCH` dirty updates (fewer under a rate cap) and fan
//!    each out;
//! 4. write every buffer that got data; refill drained slow subscribers with
//!    the latest values they missed.
//!
//! Conflation accounting is exact: for each symbol the publisher remembers
//! the sequence number it last took, so `published + conflated` equals the
//! valid ticks of that symbol once the slots are drained.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::net::SocketAddr;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use parking_lot::Mutex;
use slab::Slab;

use crate::auth::Token as AuthToken;
use crate::idle::IdleStrategy;
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::report::SubscriberStats;
use crate::metrics::{Stage, StageRecorder};
use crate::protocol::resp;
use crate::publish::commands::{self, CommandCtx};
use crate::publish::encode::{append_payload, max_payload_len};
use crate::publish::housekeeping::ServerInfo;
use crate::publish::outbuf::Offer;
use crate::publish::routes::Routes;
use crate::publish::session::{ReadOutcome, Session};
use crate::slots::SlotReader;
use crate::symbols::{SymbolId, SymbolTable};
use crate::sys::clock::MonoClock;
use crate::sys::net::{accept_one, poll_events, Accepted, Polled};

const LISTENER: Token = Token(usize::MAX - 1);
/// Token of the waker the feed (new data) and the runtime (stop) use.
pub const WAKER: Token = Token(usize::MAX);
/// Most updates taken per turn, so sockets are served between batches.
const MAX_BATCH: usize = 1024;
const MAX_PARK: Duration = Duration::from_millis(100);
/// Closed subscribers kept for the final report.
const CLOSED_STATS_KEPT: usize = 64;

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

/// Token bucket for the optional publish-rate cap.
#[derive(Debug)]
struct RateCap {
    per_sec: u64,
    tokens: f64,
    burst: f64,
    last_ns: u64,
}

impl RateCap {
    fn new(per_sec: u64) -> Self {
        let burst = (per_sec as f64 / 100.0).max(1.0);
        RateCap {
            per_sec,
            tokens: burst,
            burst,
            last_ns: 0,
        }
    }

    /// Updates that may be taken now (MAX_BATCH when uncapped).
    fn available(&mut self, now_ns: u64) -> usize {
        if self.per_sec == 0 {
            return MAX_BATCH;
        }
        let dt = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        self.last_ns = now_ns;
        self.tokens = (self.tokens + dt * self.per_sec as f64).min(self.burst);
        (self.tokens as usize).min(MAX_BATCH)
    }

    fn spend(&mut self, n: usize) {
        if self.per_sec != 0 {
            self.tokens -= n as f64;
        }
    }

    /// How long until one more update may be taken.
    fn wait(&self) -> Duration {
        if self.per_sec == 0 || self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec as f64)
    }
}

/// Everything the publisher thread owns.
#[derive(Debug)]
pub struct Publisher {
    poll: Poll,
    listener: TcpListener,
    sessions: Slab<Session>,
    routes: Routes,
    slots: SlotReader,
    table: Arc<SymbolTable>,
    /// Encoded RESP tail of the latest taken value, per symbol (empty = none yet).
    latest: Vec<Vec<u8>>,
    /// Sequence number last taken, per symbol.
    last_seq: Vec<u64>,
    counters: Arc<Counters>,
    recorder: StageRecorder,
    clock: MonoClock,
    settings: PublisherSettings,
    rate: RateCap,
    /// Sessions with output to write this turn.
    flush_list: Vec<usize>,
    /// Sessions with pending symbols or unhandled input, revisited when they drain.
    attention: Vec<usize>,
    /// Receive times of this turn's updates, for the end-to-end stage.
    batch_recv: Vec<u64>,
    payload: Vec<u8>,
    matched: Vec<SymbolId>,
    next_session_id: u64,
    stats: Arc<Mutex<Vec<SubscriberStats>>>,
    closed_stats: VecDeque<SubscriberStats>,
    next_stats_ns: u64,
    /// Subscribers waiting to authenticate: (deadline, key, session id), in deadline order.
    pending_auth: VecDeque<(u64, usize, u64)>,
    /// What `HELLO`, `INFO` and `CLIENT INFO` report.
    server: ServerInfo,
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
            latest: Vec::with_capacity(cap),
            last_seq: vec![0; cap],
            counters,
            recorder,
            clock,
            rate: RateCap::new(settings.max_rate),
            flush_list: Vec::with_capacity(settings.max_conns.min(1024)),
            attention: Vec::with_capacity(settings.max_conns.min(1024)),
            batch_recv: Vec::with_capacity(MAX_BATCH),
            payload: Vec::with_capacity(1024),
            matched: Vec::with_capacity(cap),
            next_session_id: 1,
            stats,
            closed_stats: VecDeque::with_capacity(CLOSED_STATS_KEPT),
            next_stats_ns: 0,
            pending_auth: VecDeque::new(),
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
                .min(Duration::from_nanos(self.next_stats_ns.saturating_sub(now)))
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
                            if let Some(s) = self.sessions.get_mut(key) {
                                s.write_blocked = false;
                                self.queue_flush(key);
                            }
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
            if now >= self.next_stats_ns {
                self.publish_stats(now);
                self.next_stats_ns = now + self.settings.stats_interval_ns;
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

    fn accept_all(&mut self) {
        loop {
            match accept_one(&self.listener) {
                Accepted::Conn(stream, peer) => self.admit(stream, peer),
                Accepted::Drained => return,
                Accepted::Failed(e) => {
                    log::warn!("subscriber accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        let p = &self.counters.publish;
        if self.sessions.len() >= self.settings.max_conns {
            bump(&p.subscribers_refused, 1);
            let _ = std::io::Write::write(&mut stream, b"-ERR max number of clients reached\r\n");
            log::warn!(
                "subscriber from {peer} refused: limit of {} reached",
                self.settings.max_conns
            );
            return;
        }
        let entry = self.sessions.vacant_entry();
        let key = entry.key();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("subscriber from {peer}: register failed: {e}");
            return;
        }
        let _ = stream.set_nodelay(true);
        if self.settings.sndbuf > 0 {
            // What sits in the kernel can no longer be conflated: keep it small.
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(self.settings.sndbuf);
        }
        let id = self.next_session_id;
        self.next_session_id += 1;
        let authed = self.settings.token.is_none();
        if !authed {
            let deadline = self.clock.now_ns() + self.settings.auth_timeout_ns;
            self.pending_auth.push_back((deadline, key, id));
        }
        entry.insert(Session::new(
            id,
            stream,
            peer.to_string(),
            self.settings.hwm,
            self.table.capacity(),
            authed,
            self.clock.now_ns(),
        ));
        bump(&p.subscribers_accepted, 1);
        set(&p.subscribers_open, self.sessions.len() as u64);
    }

    /// Reads and handles commands of one session while its output buffer is
    /// under the mark; returns the commands handled.
    fn serve_input(&mut self, key: usize) -> usize {
        let mut handled = 0;
        loop {
            let connected_clients = self.sessions.len();
            let Some(sess) = self.sessions.get_mut(key) else {
                return handled;
            };
            if sess.closing {
                return handled;
            }
            // Handle what is buffered first.
            let now = self.clock.now_ns();
            let mut ctx = CommandCtx {
                routes: &mut self.routes,
                latest: &self.latest,
                matched: &mut self.matched,
                counters: &self.counters,
                hwm: self.settings.hwm,
                now_ns: now,
                token: self.settings.token.as_ref(),
                max_subscriptions: self.settings.max_subscriptions,
                server: &self.server,
                connected_clients,
            };
            let outcome = commands::handle_buffered(sess, key, &mut ctx);
            handled += outcome.commands;
            let needs_attention = outcome.backpressure || sess.buf.pending_len() > 0;
            if sess.buf.buffered() > 0 {
                self.queue_flush(key);
            }
            if needs_attention {
                self.mark_attention(key);
            }
            if outcome.backpressure {
                // Output is past the mark: read no more until it drains.
                return handled;
            }
            let Some(sess) = self.sessions.get_mut(key) else {
                return handled;
            };
            if sess.read_eof && !sess.closing {
                // The peer closed its side: like Redis, answer what it sent,
                // then close (an idle closed socket must not hold a slot).
                sess.closing = true;
                self.queue_flush(key);
                return handled;
            }
            if sess.closing {
                return handled;
            }
            match sess.read_some() {
                Ok(ReadOutcome::Data(_)) => continue,
                Ok(ReadOutcome::WouldBlock) => return handled,
                Ok(ReadOutcome::Eof) => {
                    // Handle what is buffered, then close (above).
                    continue;
                }
                Ok(ReadOutcome::BufferFull) => {
                    // A single command larger than the input buffer.
                    let out = sess.out();
                    resp::append_error(
                        out,
                        b"ERR Protocol error: command larger than the 64 KiB input buffer",
                    );
                    bump(&self.counters.publish.command_errors, 1);
                    sess.closing = true;
                    self.queue_flush(key);
                    return handled;
                }
                Err(e) => {
                    log::debug!("subscriber {}: read failed: {e}", sess.peer);
                    self.close(key);
                    return handled;
                }
            }
        }
    }

    /// Registers symbols interned by the feed since the last turn.
    fn learn_symbols(&mut self) {
        let n = self.table.len();
        while self.routes.known_symbols() < n {
            let id = self.routes.known_symbols() as SymbolId;
            let name = self.table.name(id).expect("published ids have names");
            self.routes.add_symbol(id, name);
            self.latest.push(Vec::with_capacity(
                max_payload_len(name.len()) + name.len() + 32,
            ));
        }
    }

    /// Takes dirty updates and fans them out; returns how many were published.
    fn drain_slots(&mut self) -> usize {
        let t_pick = self.clock.now_ns();
        set(
            &self.counters.publish.dirty_depth,
            self.slots.dirty_len() as u64,
        );
        let budget = self.rate.available(t_pick);
        let mut published = 0;
        self.batch_recv.clear();
        // One clock read per update: the end of one update's fan-out is the
        // start of the next one's (the `publish` stage thus also counts the
        // pop and take of the update, a few ns).
        let mut t0 = t_pick;
        while published < budget {
            let Some(id) = self.slots.pop_dirty() else {
                break;
            };
            if id as usize >= self.latest.len() {
                // Interned after this turn's learn step: learn it now.
                self.learn_symbols();
            }
            let v = self.slots.take(id);
            let last = &mut self.last_seq[id as usize];
            if v.seq <= *last {
                continue; // re-queued by a write that raced the take; already published
            }
            let p = &self.counters.publish;
            bump(&p.conflated, v.seq - *last - 1);
            bump(&p.published, 1);
            *last = v.seq;
            published += 1;
            self.recorder
                .record_span(Stage::SlotWait, v.recv_mono_ns, t_pick);
            let name = self.routes.name(id);
            self.payload.clear();
            append_payload(&mut self.payload, name, &v);
            let tail = &mut self.latest[id as usize];
            tail.clear();
            resp::append_message_tail(tail, name, &self.payload);
            let tail = &self.latest[id as usize];
            let mut frames = 0u64;
            let mut conflations = 0u64;
            let mut slow = 0u64;
            for d in self.routes.deliveries(id) {
                let sess = &mut self.sessions[d.sub];
                let frame_len = d.prefix.len() + tail.len();
                if sess.buf.buffered() + frame_len > self.settings.hwm
                    && !sess.write_blocked
                    && !sess.failed
                    && !sess.buf.is_pending(id)
                {
                    // Past the mark in user space: hand what we have to the
                    // kernel first; only a subscriber whose socket is full too
                    // is slow.
                    if write_session(sess, &self.clock, &mut self.recorder, &self.counters).is_err()
                    {
                        sess.failed = true;
                        if !sess.queued_for_flush {
                            sess.queued_for_flush = true;
                            self.flush_list.push(d.sub);
                        }
                    }
                }
                match sess.buf.offer(id, &d.prefix, tail, t0) {
                    Offer::Appended => {
                        frames += 1;
                        if !sess.queued_for_flush {
                            sess.queued_for_flush = true;
                            self.flush_list.push(d.sub);
                        }
                    }
                    Offer::Conflated { entered_slow } => {
                        conflations += 1;
                        if entered_slow {
                            slow += 1;
                            if !sess.on_attention {
                                sess.on_attention = true;
                                self.attention.push(d.sub);
                            }
                        }
                    }
                }
            }
            bump(&p.frames, frames);
            if conflations > 0 {
                bump(&p.subscriber_conflations, conflations);
                bump(&p.slow_episodes, slow);
            }
            let t1 = self.clock.now_ns();
            self.recorder.record_span(Stage::Publish, t0, t1);
            t0 = t1;
            self.batch_recv.push(v.recv_mono_ns);
        }
        self.rate.spend(published);
        published
    }

    /// Closes subscribers whose authentication deadline passed.
    fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(&(deadline, key, id)) = self.pending_auth.front() {
            if deadline > now_ns {
                return;
            }
            self.pending_auth.pop_front();
            let Some(sess) = self.sessions.get_mut(key) else {
                continue;
            };
            if sess.id == id && !sess.authed && !sess.closing {
                resp::append_error(sess.out(), b"ERR authentication timeout");
                sess.closing = true;
                log::warn!(
                    "subscriber {}: no AUTH within the timeout; closing",
                    sess.peer
                );
                bump(&self.counters.publish.auth_failures, 1);
                self.queue_flush(key);
            }
        }
        self.flush();
    }

    fn mark_attention(&mut self, key: usize) {
        if let Some(s) = self.sessions.get_mut(key) {
            if !s.on_attention {
                s.on_attention = true;
                self.attention.push(key);
            }
        }
    }

    fn queue_flush(&mut self, key: usize) {
        if let Some(s) = self.sessions.get_mut(key) {
            if !s.queued_for_flush {
                s.queued_for_flush = true;
                self.flush_list.push(key);
            }
        }
    }

    /// Writes every queued buffer; returns how many sessions wrote something.
    fn flush(&mut self) -> usize {
        let mut wrote = 0;
        let mut i = 0;
        while i < self.flush_list.len() {
            let key = self.flush_list[i];
            i += 1;
            let Some(sess) = self.sessions.get_mut(key) else {
                continue;
            };
            sess.queued_for_flush = false;
            if !sess.failed && (sess.write_blocked || sess.buf.buffered() == 0) {
                if sess.closing && sess.buf.buffered() == 0 {
                    self.close(key);
                }
                continue;
            }
            if sess.failed {
                self.close(key);
                continue;
            }
            match write_session(sess, &self.clock, &mut self.recorder, &self.counters) {
                Ok(n) => {
                    if n > 0 {
                        wrote += 1;
                    }
                    if sess.closing && sess.buf.buffered() == 0 {
                        self.close(key);
                    }
                }
                Err(e) => {
                    log::debug!("subscriber {}: write failed: {e}; closing", sess.peer);
                    self.close(key);
                }
            }
        }
        self.flush_list.clear();
        if !self.batch_recv.is_empty() {
            let end = self.clock.now_ns();
            for &r in &self.batch_recv {
                self.recorder.record_span(Stage::EngineE2e, r, end);
            }
            self.batch_recv.clear();
        }
        wrote
    }

    /// Revisits sessions that were slow or stopped reading: once a buffer is
    /// under half the mark, sends the latest value of each pending symbol and
    /// resumes reading its commands.
    fn serve_attention(&mut self) -> usize {
        let mut work = 0;
        let low_water = self.settings.hwm / 2;
        let mut i = 0;
        while i < self.attention.len() {
            let key = self.attention[i];
            let Some(sess) = self.sessions.get_mut(key) else {
                self.attention.swap_remove(i);
                continue;
            };
            if sess.buf.buffered() > low_water {
                i += 1;
                continue;
            }
            let mut sent = 0u64;
            while let Some(id) = sess.buf.peek_pending() {
                let tail = &self.latest[id as usize];
                let mine = || self.routes.deliveries(id).iter().filter(|d| d.sub == key);
                let need: usize = mine().map(|d| d.prefix.len() + tail.len()).sum();
                if sess.buf.buffered() + need > self.settings.hwm && sess.buf.buffered() > 0 {
                    break;
                }
                sess.buf.pop_pending();
                for d in mine() {
                    sess.buf.append_frame(&d.prefix, tail);
                    sent += 1;
                }
            }
            let done = sess.buf.pending_len() == 0;
            if done {
                sess.on_attention = false;
            }
            bump(&self.counters.publish.frames, sent);
            if sent > 0 {
                self.queue_flush(key);
                work += 1;
            }
            if done {
                self.attention.swap_remove(i);
                // It may have stopped reading commands under backpressure.
                work += self.serve_input(key);
            } else {
                i += 1;
            }
        }
        if work > 0 {
            work += self.flush();
        }
        work
    }

    fn close(&mut self, key: usize) {
        if !self.sessions.contains(key) {
            return;
        }
        let mut sess = self.sessions.remove(key);
        let _ = self.poll.registry().deregister(&mut sess.stream);
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
        let mut st = sess.stats(self.clock.now_ns());
        st.connected = false;
        st.subscriptions = 0;
        st.buffered_bytes = 0;
        st.pending_symbols = 0;
        if self.closed_stats.len() == CLOSED_STATS_KEPT {
            self.closed_stats.pop_front();
        }
        self.closed_stats.push_back(st);
        set(
            &self.counters.publish.subscribers_open,
            self.sessions.len() as u64,
        );
    }

    /// Copies per-subscriber figures where reports can read them.
    fn publish_stats(&mut self, now_ns: u64) {
        let mut all: Vec<SubscriberStats> = self.closed_stats.iter().cloned().collect();
        let mut buffered = 0u64;
        for (_, s) in self.sessions.iter() {
            buffered += s.buf.buffered() as u64;
            all.push(s.stats(now_ns));
        }
        all.sort_by_key(|s| s.id);
        set(&self.counters.publish.buffered_bytes, buffered);
        *self.stats.lock() = all;
    }
}

/// Writes a session's buffer without blocking, recording each `write` call
/// in the socket-write stage. Returns the bytes written.
fn write_session(
    sess: &mut Session,
    clock: &MonoClock,
    recorder: &mut StageRecorder,
    counters: &Counters,
) -> std::io::Result<usize> {
    let mut t = clock.now_ns();
    let (n, blocked) = sess.buf.write_to(&mut sess.stream, |_| {
        let now = clock.now_ns();
        recorder.record_span(Stage::SocketWrite, t, now);
        t = now;
    })?;
    sess.write_blocked = blocked;
    bump(&counters.publish.bytes_written, n as u64);
    Ok(n)
}
