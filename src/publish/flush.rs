//! One subscriber's output toward its socket: the non-blocking write of
//! its queued buffer (each `write` call timed in the socket-write stage),
//! closing a session whose last answer is written or whose peer is gone,
//! and the sessions as [`Outlets`] of the fan-out (a session asked to make
//! room writes what it holds, if its socket is not known to be full). The
//! flush list (the kit's [`crate::net::KeyList`]) is walked by
//! [`super::delivery`].
//!
//! Pacing (`--sub-max-lag`, [`crate::publish::commit_budget`]): a
//! subscriber's first write sets its socket's `TCP_NOTSENT_LOWAT` (4 KiB);
//! a write that would block with 4 KiB more still in its buffer (the
//! kernel holds all it will) starts pacing it (the mark drops to 2 KiB) —
//! for a reader that kept up, only once its writes stayed blocked for the
//! lag, so one that only pauses now and then is not paced (the attention
//! list's revisits check it while its buffer conflates past the mark). During a
//! subscriber's first 256 KiB its reader's window is read after each write
//! too, and a reader that holds 8 KiB starts pacing then, before it fills a
//! default-sized receive buffer ([`watch_new_reader`]; a reader that only
//! paused is let go by the pacing's trial). A paced subscriber's every
//! write is followed by a sample of the kernel's queue (`SIOCOUTQ`) and of
//! the window its reader advertises (`TCP_INFO`), which update its drain
//! rate, its reader's held bytes and the bytes its buffer may hold
//! ([`sample_pacing`]).
//!
//! The output buffer is the publisher's conflating [`SubscriberBuffer`]:
//! its bytes live in the kit's `WriteBuf` (the RESP encoders append to its
//! `BytesMut` in place), and past its mark it conflates per symbol instead
//! of only pausing the reads.
//!
//! Single owner: the publisher thread.

use crate::metrics::counters::{bump, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::net::{Conn, Conns, KeyList};
use crate::publish::commit_budget::{CAUGHT_UP_NS, FLOOR, UNPACED_LOWAT};
use crate::publish::fanout::{Outlet, Outlets};
use crate::publish::outbuf::SubscriberBuffer;
use crate::publish::routes::SubKey;
use crate::publish::session::{Session, WriteState};
use crate::publish::shared_stall::SharedStall;
use crate::publish::throttle::Throttle;
use crate::sys::clock::MonoClock;
use crate::sys::tcp_signals;

/// Bytes committed to the connection beyond the engine's buffer: the
/// kernel's send queue (`SIOCOUTQ`; 0 where unknown, see
/// docs/src/decisions.md) plus, under TLS, the ciphertext the socket has not
/// taken yet (it is as committed as the kernel's bytes).
fn queued(conn: &Conn<Session>) -> usize {
    tcp_signals::send_queue_bytes(&conn.stream).unwrap_or(0) + conn.stream.pending_tls_bytes()
}

/// Writes a session's buffer to its socket without blocking, recording each
/// `write` call in the socket-write stage. Returns the bytes written.
pub(super) fn write_session(
    conn: &mut Conn<Session>,
    clock: &MonoClock,
    recorder: &mut StageRecorder,
    counters: &Counters,
    stall: &mut SharedStall,
) -> std::io::Result<usize> {
    let mut t = clock.now_ns();
    if conn.state.buf.budget.arm() {
        if let Err(e) = tcp_signals::set_notsent_lowat(&conn.stream, UNPACED_LOWAT as u32) {
            log::debug!("subscriber {}: TCP_NOTSENT_LOWAT: {e}", conn.peer);
        }
        let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
        conn.state.buf.budget.first_window(t, window);
    }
    let sess = &mut conn.state;
    let (n, blocked) = sess.buf.write_to(&mut conn.stream, |_| {
        let now = clock.now_ns();
        recorder.record_span(Stage::SocketWrite, t, now);
        t = now;
    })?;
    sess.wrote(blocked);
    bump(&counters.publish.bytes_written, n as u64);
    if !maybe_start_pacing(conn, t, stall)
        && !watch_new_reader(conn, t, stall)
        && !check_backlog(conn, t, stall)
    {
        sample_pacing(conn, t, stall);
    }
    Ok(n)
}

/// An unpaced subscriber, at most once per lag: reads its kernel queue and
/// its reader's window and starts pacing it when it holds more than a few
/// lags of its own stream unread ([`crate::publish::backlog`]): a client
/// starved of CPU whose kernel grows its receive buffer never blocks a
/// write. Returns whether it started.
fn check_backlog(conn: &mut Conn<Session>, now_ns: u64, stall: &mut SharedStall) -> bool {
    if !conn.state.buf.budget.backlog_due(now_ns) {
        return false;
    }
    let kernel = queued(conn);
    let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
    let b = &mut conn.state.buf;
    let spared_at = b.budget.spared_at();
    let behind = b
        .budget
        .backlog(now_ns, window, kernel, b.stats.bytes_written);
    if let (Some(at), None) = (spared_at, b.budget.spared_at()) {
        // Spared in a shared stall and caught up: its client is back.
        stall.caught_up(at, now_ns);
        log::debug!("subscriber {}: caught up after its spare", conn.peer);
    }
    if !behind {
        return false;
    }
    if spare_if_shared(conn, now_ns, stall, "backlog") {
        return true;
    }
    start_pacing(conn, now_ns, kernel, window);
    log::debug!(
        "subscriber {}: paced (backlog: its reader holds {} B, {} B in flight, {} B written)",
        conn.peer,
        conn.state.buf.budget.held(),
        kernel,
        conn.state.buf.stats.bytes_written
    );
    true
}

/// Starts pacing `conn` at `now_ns` when its socket has been blocked with
/// [`UNPACED_LOWAT`] bytes more waiting in its buffer (the kernel holds all
/// it will take) for the lag. Returns whether it started.
pub(super) fn maybe_start_pacing(
    conn: &mut Conn<Session>,
    now_ns: u64,
    stall: &mut SharedStall,
) -> bool {
    let s = &mut conn.state;
    let blocked = s.write_state() == WriteState::Blocked && s.buf.buffered() >= UNPACED_LOWAT;
    if !s
        .buf
        .budget
        .blocked(now_ns, blocked, s.buf.stats.bytes_written)
    {
        return false;
    }
    if spare_if_shared(conn, now_ns, stall, "blocked") {
        return true;
    }
    log::debug!("subscriber {}: paced (blocked)", conn.peer);
    let kernel = queued(conn);
    let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
    start_pacing(conn, now_ns, kernel, window);
    true
}

/// A subscriber in its first bytes ([`crate::publish::commit_budget::CommitBudget::watching`]): reads its
/// reader's window and starts pacing it when the reader holds
/// [`crate::publish::commit_budget::WATCH_HELD`] unread, so a reader slow from its first message is paced
/// before it fills its receive buffer. Returns whether it started.
fn watch_new_reader(conn: &mut Conn<Session>, now_ns: u64, stall: &mut SharedStall) -> bool {
    let b = &conn.state.buf;
    if !b.budget.watching(b.stats.bytes_written) {
        return false;
    }
    let kernel = queued(conn);
    let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
    let written = conn.state.buf.stats.bytes_written;
    if !conn.state.buf.budget.watch(now_ns, window, kernel, written) {
        return false;
    }
    if spare_if_shared(conn, now_ns, stall, "its reader holds bytes") {
        return true;
    }
    start_pacing(conn, now_ns, kernel, window);
    log::debug!(
        "subscriber {}: paced (its reader holds {} B, {} B written)",
        conn.peer,
        conn.state.buf.budget.held(),
        conn.state.buf.stats.bytes_written
    );
    true
}

/// `conn` would start pacing at `now_ns` (`why`): when that is part of a
/// stall many subscribers share ([`SharedStall`]: their client away, not
/// each reader slow) and it was keeping up until then, spares it if it may
/// be. Returns whether it did (the caller then does not start pacing).
fn spare_if_shared(
    conn: &mut Conn<Session>,
    now_ns: u64,
    stall: &mut SharedStall,
    why: &str,
) -> bool {
    if !stall.would_start(now_ns) {
        return false;
    }
    let kernel = queued(conn);
    let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
    let b = &mut conn.state.buf;
    let written = b.stats.bytes_written;
    if !b.budget.spare(now_ns, written, kernel, window) {
        return false;
    }
    stall.spared();
    log::debug!(
        "subscriber {}: spared ({why}, in a stall shared with other subscribers; {kernel} B in flight, {written} B written)",
        conn.peer,
    );
    true
}

/// Starts pacing `conn` at `now_ns` from the kernel's figures just read
/// (`kernel` bytes unacknowledged, the peer's `window`); the socket's
/// low-water mark goes down to the floor.
fn start_pacing(conn: &mut Conn<Session>, now_ns: u64, kernel: usize, window: Option<u32>) {
    let b = &mut conn.state.buf;
    b.budget
        .start(now_ns, b.stats.bytes_written, kernel, window);
    if let Err(e) = tcp_signals::set_notsent_lowat(&conn.stream, FLOOR as u32) {
        log::debug!("subscriber {}: TCP_NOTSENT_LOWAT: {e}", conn.peer);
    }
}

/// A paced session's sample at `now_ns`: the kernel's unacknowledged bytes
/// update its drain rate and budget; when pacing ends, the socket's
/// low-water mark goes back to the unpaced one. Nothing for an unpaced
/// session.
pub(super) fn sample_pacing(conn: &mut Conn<Session>, now_ns: u64, stall: &mut SharedStall) {
    if !conn.state.buf.budget.paced() {
        return;
    }
    // Paced in a shared stall (seen then or just after): spared if it may
    // be; if not, its trial decides whether that pacing was its client's.
    let started = conn.state.buf.budget.started_ns();
    if stall.covers(started) {
        if conn.state.buf.budget.spare_paced(now_ns) {
            stall.spared();
            log::debug!(
                "subscriber {}: spared (paced in a stall shared with other subscribers)",
                conn.peer
            );
            let _ = tcp_signals::set_notsent_lowat(&conn.stream, UNPACED_LOWAT as u32);
            return;
        }
        if conn.state.buf.budget.crowded(stall.back()) {
            log::debug!(
                "subscriber {}: its trial waits for it to read again (paced with its client)",
                conn.peer
            );
        }
    }
    if conn.state.buf.budget.trial_apart() {
        conn.state.buf.budget.apart_crowd(stall.apart_crowd_ns());
    }
    // Unknown (not Linux): the kernel counts as empty and the reader as
    // holding nothing, see docs/src/decisions.md.
    let kernel = queued(conn);
    let window = tcp_signals::peer_window(&conn.stream).ok().flatten();
    let b = &mut conn.state.buf;
    let (written, engine, waiting) = (b.stats.bytes_written, b.buffered(), b.pending_len() > 0);
    let (retrial, on_trial) = (b.budget.retrial_running(), b.budget.on_trial());
    let ended = b
        .budget
        .sample(now_ns, written, kernel, window, engine, waiting);
    // Every sample of a paced reader, at `trace` (off unless asked for):
    // the engine's view of it, to set against what the reader holds.
    log::trace!(
        "subscriber {}: sample (window {window:?} B, held {} B, {kernel} B in flight, {engine} B in the engine, rate {:.0} B/s, budget {} B, {written} B written)",
        conn.peer,
        b.budget.held(),
        b.budget.rate(),
        b.budget.budget()
    );
    if on_trial && !b.budget.on_trial() && !ended {
        // Why a paced reader was not let go by its trial: what it still
        // held, what was in flight and waiting when the trial ran out; or
        // that it came back long after the rest of its stall — unless a
        // crowd of them does so together (their client: let go at their
        // next samples).
        let why = if !b.budget.trial_apart() {
            "trial ran out"
        } else if stall.came_back_apart(now_ns, stall.covers(b.budget.started_ns())) {
            "its trial ends apart from the readers paced with it, together with a crowd of them: their client is back"
        } else {
            "its trial ends apart from the readers paced with it: paced on its own"
        };
        log::debug!(
            "subscriber {}: {why} (held {} B, {kernel} B in flight, {engine} B in the engine, rate {:.0} B/s)",
            conn.peer,
            b.budget.held(),
            b.budget.rate()
        );
    }
    if retrial != b.budget.retrial_running() && !ended {
        log::debug!(
            "subscriber {}: {} (rate {:.0} B/s, held {} B)",
            conn.peer,
            if retrial {
                "re-trial failed"
            } else {
                "re-trial"
            },
            b.budget.rate(),
            b.budget.held()
        );
    }
    if ended {
        if b.budget.ended_caught_up() {
            log::debug!(
                "subscriber {}: unpaced (it took all it was offered for {} ms; rate {:.0} B/s)",
                conn.peer,
                CAUGHT_UP_NS / 1_000_000,
                b.budget.rate()
            );
        } else {
            // Let go from a pacing its client's stall covered, with the
            // rest of them: the next are judged by it.
            let how = if b.budget.let_go_from_crowd() {
                stall.let_go(now_ns);
                "back with its client; "
            } else {
                ""
            };
            log::debug!(
                "subscriber {}: unpaced ({how}rate {:.0} B/s)",
                conn.peer,
                b.budget.rate()
            );
        }
        let _ = tcp_signals::set_notsent_lowat(&conn.stream, UNPACED_LOWAT as u32);
    }
}

/// The sessions as the fan-out's outlets, for one update.
#[derive(Debug)]
pub(super) struct SessionOutlets<'a> {
    pub(super) sessions: &'a mut Conns<Session>,
    pub(super) flush_list: &'a mut KeyList,
    pub(super) attention: &'a mut KeyList,
    pub(super) clock: &'a MonoClock,
    pub(super) recorder: &'a mut StageRecorder,
    pub(super) counters: &'a Counters,
    pub(super) stall: &'a mut SharedStall,
    /// Now on the window clock of the subscribers' throttles.
    pub(super) window_now_ns: u64,
}

/// One session as an outlet.
#[derive(Debug)]
pub(super) struct SessionOutlet<'s, 'a> {
    key: SubKey,
    conn: &'s mut Conn<Session>,
    flush_list: &'s mut KeyList,
    attention: &'s mut KeyList,
    clock: &'a MonoClock,
    recorder: &'s mut StageRecorder,
    counters: &'a Counters,
    stall: &'s mut SharedStall,
    window_now_ns: u64,
}

impl<'a> Outlets for SessionOutlets<'a> {
    type Outlet<'s>
        = SessionOutlet<'s, 'a>
    where
        Self: 's;

    #[inline]
    fn outlet(&mut self, sub: SubKey) -> SessionOutlet<'_, 'a> {
        SessionOutlet {
            key: sub,
            conn: self
                .sessions
                .get_mut(sub)
                .expect("routes name open subscribers only"),
            flush_list: self.flush_list,
            attention: self.attention,
            clock: self.clock,
            recorder: self.recorder,
            counters: self.counters,
            stall: self.stall,
            window_now_ns: self.window_now_ns,
        }
    }
}

impl Outlet for SessionOutlet<'_, '_> {
    #[inline]
    fn buffer(&mut self) -> &mut SubscriberBuffer {
        &mut self.conn.state.buf
    }

    fn make_room(&mut self) {
        let s = &self.conn.state;
        // A paced session's room is its budget: writing now would only
        // move committed bytes from its buffer to the kernel.
        if s.write_state() == WriteState::Blocked || s.state().is_failed() || s.buf.budget.paced() {
            return;
        }
        if write_session(
            self.conn,
            self.clock,
            self.recorder,
            self.counters,
            self.stall,
        )
        .is_err()
        {
            let s = &mut self.conn.state;
            s.fail();
            self.flush_list.mark(&mut s.on_flush_list, self.key);
        }
    }

    #[inline]
    fn has_output(&mut self) {
        self.flush_list
            .mark(&mut self.conn.state.on_flush_list, self.key);
    }

    fn became_slow(&mut self) {
        self.attention
            .mark(&mut self.conn.state.on_attention, self.key);
    }

    #[inline]
    fn throttle(&mut self) -> Option<(&mut Throttle, u64)> {
        let t = &mut self.conn.state.throttle;
        t.is_active().then_some((t, self.window_now_ns))
    }
}
