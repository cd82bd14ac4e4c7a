//! What the publisher keeps per subscriber connection (the handler state
//! of a [`crate::net::Conn`], whose socket, id and peer the connection kit
//! keeps): its input buffer, its subscriptions, its bounded output buffer
//! (see [`super::outbuf`]) and where it is in its life ([`SessionState`],
//! [`WriteState`]).
//!
//! ```text
//!   Open(Pending) ──AUTH ok──▶ Open(Passed)        (no token: starts Passed;
//!        ▲                          │               RESET with a token: back to Pending)
//!        └──────────RESET───────────┘
//!   Open(a) ── peer EOF ──▶ InputEnded(a) ── its input answered ──┐
//!   Open / InputEnded ── QUIT, wrong token, auth timeout,          ▼
//!                        oversized command ─────────────────▶ Closing ── written ──▶ closed
//!   any state ── a write failed ──▶ Failed ── next flush ──▶ closed
//! ```
//!
//! The state changes only through the methods below, so a session can not be,
//! say, closing and awaiting its input at once. Whether the session is on the
//! publisher's flush or attention list is the lists' flag
//! ([`crate::net::KeyList`]), set only by their `mark`.
//!
//! Single owner: the publisher thread.

use std::ops::Range;

use bytes::BytesMut;
use indexmap::IndexSet;

use crate::metrics::report::SubscriberStats;
use crate::net::{ReadBuf, ReadOutcome};
use crate::protocol::resp::framing::Proto;

use crate::publish::outbuf::SubscriberBuffer;
use crate::publish::throttle::Throttle;

/// Bytes of the input buffer: one command must fit in it.
pub(crate) const INBUF_LEN: usize = 64 * 1024;

/// Whether the client has authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// A token is configured and the client has not presented it: only
    /// `AUTH`, `HELLO … AUTH` and `QUIT` run.
    Pending,
    /// Authenticated, or no token is configured.
    Passed,
}

/// Where a session is in its life (the read side and the close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionState {
    /// Reading and answering commands.
    Open(Auth),
    /// The peer will send nothing more: like Redis, answer what it sent,
    /// then close (an idle closed socket must not hold a slot).
    InputEnded(Auth),
    /// It was answered for the last time (`QUIT`, a fatal protocol error, a
    /// wrong token, the auth timeout, end of input): nothing more is read;
    /// close once the output buffer is written.
    Closing,
    /// A write failed: the peer is gone; close at the next flush.
    Failed,
}

impl SessionState {
    /// Accepted and, when `authed`, already authenticated.
    pub(crate) fn new(authed: bool) -> Self {
        SessionState::Open(if authed { Auth::Passed } else { Auth::Pending })
    }

    /// Commands may still be read and answered.
    pub(crate) fn serves_commands(self) -> bool {
        matches!(self, SessionState::Open(_) | SessionState::InputEnded(_))
    }

    /// Passed `AUTH` (or needs none) and still serving commands.
    pub(crate) fn is_authed(self) -> bool {
        matches!(
            self,
            SessionState::Open(Auth::Passed) | SessionState::InputEnded(Auth::Passed)
        )
    }

    /// Still serving commands without having authenticated.
    pub(crate) fn awaits_auth(self) -> bool {
        matches!(
            self,
            SessionState::Open(Auth::Pending) | SessionState::InputEnded(Auth::Pending)
        )
    }

    /// The peer sent EOF and the session has not started closing yet.
    pub(crate) fn input_ended(self) -> bool {
        matches!(self, SessionState::InputEnded(_))
    }

    /// Closes once the buffer is written.
    pub(crate) fn is_closing(self) -> bool {
        self == SessionState::Closing
    }

    /// A write failed.
    pub(crate) fn is_failed(self) -> bool {
        self == SessionState::Failed
    }

    /// `AUTH` passed (a closing or failed session stays so).
    pub(crate) fn authenticate(&mut self) {
        self.set_auth(Auth::Passed);
    }

    /// `RESET` with a token configured: authenticate again first.
    pub(crate) fn require_auth(&mut self) {
        self.set_auth(Auth::Pending);
    }

    fn set_auth(&mut self, auth: Auth) {
        match self {
            SessionState::Open(a) | SessionState::InputEnded(a) => *a = auth,
            SessionState::Closing | SessionState::Failed => {}
        }
    }

    /// The peer closed its sending side (a closing or failed session stays so).
    pub(crate) fn end_input(&mut self) {
        if let SessionState::Open(auth) = *self {
            *self = SessionState::InputEnded(auth);
        }
    }

    /// Answered for the last time: close once the buffer is written (a
    /// failed session stays failed).
    pub(crate) fn close_after_flush(&mut self) {
        if !self.is_failed() {
            *self = SessionState::Closing;
        }
    }

    /// A write failed: the peer is gone.
    pub(crate) fn fail(&mut self) {
        *self = SessionState::Failed;
    }
}

/// The socket's write side as last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteState {
    /// The socket took everything offered, or has not been written yet.
    Ready,
    /// The last write hit `WouldBlock`: wait for a writable event.
    Blocked,
}

/// A subscriber connection.
///
/// Over 15 fields: the Redis client state a subscriber has (protocol,
/// name, database, subscriptions, auth), its conflating buffer and its
/// caps; the fan-out's hot path reads only the buffer.
#[derive(Debug)]
pub(crate) struct Session {
    /// The client id `CLIENT ID` and `HELLO` report (1-based, counted per
    /// accepted subscriber, never reused).
    pub id: u64,
    /// Input bytes not handled yet (one command must fit).
    pub(crate) input: ReadBuf,
    /// Argument ranges of the command being handled (reused).
    pub args: Vec<Range<usize>>,
    /// Output buffer and slow-subscriber state.
    pub buf: SubscriberBuffer,
    /// Its own caps (`TICKFAN.THROTTLE`, `--sub-max-rate`, `--sub-max-bandwidth`).
    pub throttle: Throttle,
    /// Subscribed channels, in subscription order.
    pub channels: IndexSet<Box<[u8]>>,
    /// Subscribed patterns, in subscription order.
    pub patterns: IndexSet<Box<[u8]>>,
    /// Where it is in its life; changed only through the transition methods.
    state: SessionState,
    /// The socket's write side.
    write: WriteState,
    /// On the publisher's flush list (the list's flag).
    pub(crate) on_flush_list: bool,
    /// On the publisher's attention list (pending symbols or held-back input).
    pub(crate) on_attention: bool,
    /// The protocol it speaks: RESP2 until `HELLO 3`, again after `HELLO 2` or `RESET`.
    pub proto: Proto,
    /// `CLIENT SETNAME` / `HELLO … SETNAME` (validated: printable, no spaces).
    pub name: Option<Box<[u8]>>,
    /// `CLIENT SETINFO LIB-NAME` / `LIB-VER` (validated like the name).
    pub lib_name: Option<Box<[u8]>>,
    /// See [`Session::lib_name`].
    pub lib_ver: Option<Box<[u8]>>,
    /// `SELECT`ed database (0–15): accepted and shown, pub/sub ignores it as Redis does.
    pub db: u8,
    /// When it was accepted, monotonic ns (for `CLIENT INFO age=`).
    pub created_ns: u64,
    /// When its last command ran, monotonic ns (for `CLIENT INFO idle=`).
    pub last_cmd_ns: u64,
}

impl Session {
    /// A session for a freshly accepted socket.
    pub(crate) fn new(id: u64, hwm: usize, max_symbols: usize, authed: bool, now_ns: u64) -> Self {
        Session {
            id,
            input: ReadBuf::new(INBUF_LEN),
            args: Vec::with_capacity(16),
            buf: SubscriberBuffer::new(hwm, max_symbols),
            throttle: Throttle::new(max_symbols),
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            state: SessionState::new(authed),
            write: WriteState::Ready,
            on_flush_list: false,
            on_attention: false,
            proto: Proto::Resp2,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            created_ns: now_ns,
            last_cmd_ns: now_ns,
        }
    }

    /// Where it is in its life.
    pub(crate) fn state(&self) -> SessionState {
        self.state
    }

    /// `AUTH` (or `HELLO … AUTH`) passed; see [`SessionState::authenticate`].
    pub(crate) fn authenticate(&mut self) {
        self.state.authenticate();
    }

    /// See [`SessionState::require_auth`].
    pub(crate) fn require_auth(&mut self) {
        self.state.require_auth();
    }

    /// See [`SessionState::end_input`].
    pub(crate) fn end_input(&mut self) {
        self.state.end_input();
    }

    /// See [`SessionState::close_after_flush`].
    pub(crate) fn close_after_flush(&mut self) {
        self.state.close_after_flush();
    }

    /// See [`SessionState::fail`].
    pub(crate) fn fail(&mut self) {
        self.state.fail();
    }

    /// The socket's write side.
    pub(crate) fn write_state(&self) -> WriteState {
        self.write
    }

    /// A write ended with (`blocked`) or without `WouldBlock`.
    pub(crate) fn wrote(&mut self, blocked: bool) {
        self.write = if blocked {
            WriteState::Blocked
        } else {
            WriteState::Ready
        };
    }

    /// A writable event arrived.
    pub(crate) fn writable(&mut self) {
        self.write = WriteState::Ready;
    }

    /// Channels plus patterns: the count Redis reports in subscribe replies.
    pub(crate) fn subscription_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Where command replies are appended.
    pub(crate) fn out(&mut self) -> &mut BytesMut {
        self.buf.replies()
    }

    /// Reads once from the socket (plaintext or TLS) into the input buffer; notes the end of
    /// the peer's input ([`SessionState::InputEnded`]).
    ///
    /// # Errors
    /// A socket error other than `WouldBlock`/`Interrupted`.
    pub(crate) fn read_some<R: std::io::Read>(
        &mut self,
        stream: &mut R,
    ) -> std::io::Result<ReadOutcome> {
        let outcome = self.input.read_from(stream)?;
        if outcome == ReadOutcome::Eof {
            self.end_input();
        }
        Ok(outcome)
    }

    /// The figures reports show, as of `now_ns`, for the peer at `peer`.
    pub(crate) fn stats(&self, peer: &str, now_ns: u64) -> SubscriberStats {
        let b = &self.buf.stats;
        SubscriberStats {
            id: self.id,
            peer: peer.to_string(),
            client_name: self
                .name
                .as_deref()
                .map(|n| String::from_utf8_lossy(n).into_owned()),
            connected: true,
            subscriptions: self.subscription_count() as u64,
            frames: b.frames,
            bytes_written: b.bytes_written,
            conflations: b.conflations,
            slow_episodes: b.slow_episodes,
            buffered_bytes: self.buf.buffered() as u64,
            max_buffered_bytes: b.max_buffered,
            pending_symbols: self.buf.pending_len() as u64,
            staleness_us: self
                .buf
                .oldest_pending_ns()
                .map_or(0, |t| now_ns.saturating_sub(t) / 1_000),
            paced: self.buf.budget.paced(),
            spared: self.buf.budget.spared(),
            commit_budget_bytes: self.buf.budget.budget() as u64,
            drain_rate_bytes_per_s: self.buf.budget.rate() as u64,
            max_commit_excess_bytes: self.buf.budget.max_excess(),
            reader_held_bytes: self.buf.budget.held() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_is_kept_across_the_end_of_input_and_lost_on_close() {
        let mut s = SessionState::new(false);
        assert!(s.awaits_auth() && s.serves_commands() && !s.is_authed());
        s.end_input();
        assert_eq!(s, SessionState::InputEnded(Auth::Pending));
        s.authenticate();
        assert!(s.is_authed() && s.input_ended() && s.serves_commands());
        s.close_after_flush();
        assert!(s.is_closing() && !s.serves_commands() && !s.is_authed());
        // Closing is final for the read side: neither auth nor EOF reopen it.
        s.authenticate();
        s.end_input();
        assert_eq!(s, SessionState::Closing);
    }

    #[test]
    fn reset_requires_auth_again_and_a_failed_session_stays_failed() {
        let mut s = SessionState::new(true);
        assert_eq!(s, SessionState::Open(Auth::Passed));
        s.require_auth();
        assert!(s.awaits_auth());
        s.fail();
        s.close_after_flush();
        s.end_input();
        s.authenticate();
        assert_eq!(s, SessionState::Failed);
        assert!(!s.serves_commands() && !s.is_closing());
    }
}
