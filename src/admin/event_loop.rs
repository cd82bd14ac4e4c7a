//! The admin endpoint's I/O thread: a mio event loop that owns the listener
//! and every connection, reads requests under their bounds, hands complete
//! ones to the workers and writes their answers back.
//!
//! ```text
//!   clients ─▶ event loop (accept ≤ max_connections, read, time out, write)
//!                 │ Job (bounded)            ▲ Answer (bounded) + Waker
//!                 ▼                          │
//!              workers (fixed) ──────────────┤   /health /metrics /report /dlq
//!                 │ replay Job (bounded; full → 503)
//!                 ▼                          │
//!              replay thread ────────────────┘   POST /dlq/replay
//! ```
//!
//! No socket is ever read or written blocking, so one client, however slow
//! or silent, holds only its own connection slot until its deadline, and
//! the workers only compute answers. The two channels cannot fill: each
//! connection has at most one job or answer in flight and there are at most
//! `max_connections` connections, the channels' capacity.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use mio::net::{TcpListener, TcpStream};

use crate::net::{Stream, TlsPort};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

use super::conn::{Conn, Next};
use super::counters::AdminCounters;
use super::http::{Limits, Request, Response};
use crate::logging::repeat::warn_repeating;
use crate::model::warning::WarnKind;
use crate::sys::net::{accept_one, poll_events, Accepted, Polled};

/// The listener's token.
pub(crate) const LISTENER: Token = Token(0);
/// The waker's token (answers are ready, or stop).
pub(crate) const WAKER: Token = Token(1);
/// Connection `k` of the slab has token `k + FIRST_CONN`.
const FIRST_CONN: usize = 2;
/// Longest wait between deadline checks.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// A complete request for a worker.
#[derive(Debug)]
pub(crate) struct Job {
    /// Slab key of its connection.
    pub conn: usize,
    /// The connection's id (see [`Conn::id`]).
    pub id: u64,
    /// The request.
    pub request: Request,
}

/// A worker's answer to a [`Job`].
#[derive(Debug)]
pub(crate) struct Answer {
    /// Slab key of its connection.
    pub conn: usize,
    /// The connection's id: an answer to a connection since closed is dropped.
    pub id: u64,
    /// The answer.
    pub response: Response,
}

/// The loop's state (single owner: the admin I/O thread).
#[derive(Debug)]
pub(crate) struct EventLoop {
    /// The poller (the waker is registered on it).
    pub poll: Poll,
    /// The listener, registered as [`LISTENER`].
    pub listener: TcpListener,
    /// Jobs for the workers.
    pub jobs: Sender<Job>,
    /// Answers from the workers and the replay thread.
    pub answers: Receiver<Answer>,
    /// Set (then the waker woken) to stop.
    pub stop: Arc<AtomicBool>,
    /// Bounds.
    pub limits: Limits,
    /// The endpoint's counters.
    pub counters: Arc<AdminCounters>,
    /// The endpoint's TLS (`--tls-ports` with `admin`), if any.
    pub tls: Option<Arc<TlsPort>>,
}

impl EventLoop {
    /// Runs until `stop` is set or the poller fails.
    pub(crate) fn run(self) {
        let EventLoop {
            mut poll,
            listener,
            jobs,
            answers,
            stop,
            limits,
            counters,
            tls,
        } = self;
        let mut conns: Slab<Conn<Stream>> = Slab::with_capacity(limits.max_connections);
        let mut state = LoopState {
            next_id: 0,
            limits,
            counters,
            jobs,
            tls,
        };
        let mut events = Events::with_capacity(256);
        // Acquire pairs with the Release store in `AdminServer::shutdown`.
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            let wait = conns
                .iter()
                .filter_map(|(_, c)| c.deadline())
                .min()
                .map_or(MAX_WAIT, |d| d.saturating_duration_since(now).min(MAX_WAIT));
            match poll_events(&mut poll, &mut events, Some(wait), "admin endpoint") {
                Polled::Ready => {}
                Polled::Interrupted => continue,
                Polled::Failed => break,
            }
            let now = Instant::now();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => state.accept_all(&listener, &poll, &mut conns, now),
                    WAKER => {}
                    Token(t) => {
                        let key = t - FIRST_CONN;
                        if ev.is_writable() {
                            if let Some(c) = conns.get_mut(key) {
                                let next = c.writable();
                                state.handle(&poll, &mut conns, key, next, now);
                            }
                        }
                        if ev.is_readable() || ev.is_read_closed() {
                            if let Some(c) = conns.get_mut(key) {
                                let next = c.readable(&state.limits);
                                state.handle(&poll, &mut conns, key, next, now);
                            }
                        }
                    }
                }
            }
            while let Ok(a) = answers.try_recv() {
                if conns.get(a.conn).is_some_and(|c| c.id() == a.id) {
                    state.answer(&poll, &mut conns, a.conn, &a.response, now);
                }
            }
            let keys: Vec<usize> = conns.iter().map(|(k, _)| k).collect();
            for key in keys {
                let next = conns[key].expire(now, &state.limits);
                state.handle(&poll, &mut conns, key, next, now);
            }
        }
    }
}

/// What the loop's steps share besides the connections.
struct LoopState {
    next_id: u64,
    limits: Limits,
    counters: Arc<AdminCounters>,
    jobs: Sender<Job>,
    tls: Option<Arc<TlsPort>>,
}

impl LoopState {
    fn accept_all(
        &mut self,
        listener: &TcpListener,
        poll: &Poll,
        conns: &mut Slab<Conn<Stream>>,
        now: Instant,
    ) {
        loop {
            match accept_one(listener) {
                Accepted::Conn(stream, _) if conns.len() >= self.limits.max_connections => {
                    refuse(stream, self.tls.is_some());
                    self.counters.refused();
                }
                Accepted::Conn(stream, peer) => {
                    let _ = stream.set_nodelay(true);
                    let Some(mut stream) =
                        Stream::accepted(stream, self.tls.as_ref(), "admin connection", peer)
                    else {
                        continue;
                    };
                    let entry = conns.vacant_entry();
                    let token = Token(entry.key() + FIRST_CONN);
                    if let Err(e) = poll.registry().register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        warn_repeating!(
                            WarnKind::RegisterFailed,
                            "admin endpoint: cannot register a connection: {e}"
                        );
                        continue;
                    }
                    self.next_id += 1;
                    entry.insert(Conn::new(stream, self.next_id, now, &self.limits));
                    self.counters.set_open(conns.len());
                }
                Accepted::Drained => return,
                Accepted::Failed(e) => {
                    warn_repeating!(WarnKind::AcceptFailed, "admin endpoint: accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Acts on what a connection asked for, until it asks for nothing.
    fn handle(
        &mut self,
        poll: &Poll,
        conns: &mut Slab<Conn<Stream>>,
        key: usize,
        mut next: Next,
        now: Instant,
    ) {
        loop {
            let Some(c) = conns.get_mut(key) else { return };
            next = match next {
                Next::Idle => return,
                Next::Dispatch(request) => {
                    let job = Job {
                        conn: key,
                        id: c.id(),
                        request,
                    };
                    match self.jobs.try_send(job) {
                        Ok(()) => return,
                        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                            let busy = Response::text(503, "admin endpoint busy\n")
                                .and_header("Retry-After", "1");
                            self.counters.answered(busy.status);
                            c.answer(busy.encode(), now, &self.limits)
                        }
                    }
                }
                Next::Refuse(response) => {
                    self.counters.answered(response.status);
                    c.answer(response.encode(), now, &self.limits)
                }
                Next::Flushed => {
                    c.stream_mut().shutdown_write();
                    c.readable(&self.limits)
                }
                Next::Close => {
                    let mut stream = conns.remove(key).into_stream();
                    let _ = poll.registry().deregister(&mut stream);
                    self.counters.set_open(conns.len());
                    return;
                }
            };
        }
    }

    fn answer(
        &mut self,
        poll: &Poll,
        conns: &mut Slab<Conn<Stream>>,
        key: usize,
        response: &Response,
        now: Instant,
    ) {
        self.counters.answered(response.status);
        let next = conns[key].answer(response.encode(), now, &self.limits);
        self.handle(poll, conns, key, next, now);
    }
}

/// Closes a connection over the bound, with a `503` if the socket takes it
/// at once (one non-blocking write; no waiting on the client). A TLS
/// client could not read a plaintext answer: it sees the close.
fn refuse(stream: TcpStream, tls: bool) {
    use std::io::Write;
    if !tls {
        let busy =
            Response::text(503, "too many admin connections\n").and_header("Retry-After", "1");
        let _ = (&stream).write(&busy.encode());
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}
