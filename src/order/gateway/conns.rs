//! The gateway's connections: accepting them (with the limit and the
//! refusal line), serving one for a turn (reading lines up to the turn's
//! budget and the reply mark), the `AUTH` deadlines, the flush list and
//! closing. The per-line work is `ledger.rs`; the loop that calls these is
//! `mod.rs`.
//!
//! Single writer: the gateway thread.

use std::sync::atomic::Ordering;
use std::time::Duration;

use mio::Events;

use crate::auth::{LINE_OK, LINE_TIMEOUT};
use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::bump;
use crate::model::warning::WarnKind;
use crate::net::lines::{LineEvent, LineReader};
use crate::net::{AuthStep, ConnCounters, WriteBuf};
use crate::rate_limit::RateLimit;

use crate::model::order_reasons::InvalidReason;

use super::{
    Gateway, OrderConn, LINES_PER_TURN, OUT_HWM, OUT_INITIAL, READS_PER_TURN, READ_CHUNK,
    REPLY_ROOM,
};

impl Gateway {
    pub(super) fn accept_all(&mut self) {
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
    pub(super) fn serve(&mut self, key: usize) -> usize {
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
    pub(super) fn expire_unauthenticated(&mut self, now_ns: u64) {
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

    pub(super) fn mark_dirty(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            self.dirty.mark(&mut c.state.dirty, key);
        }
    }

    pub(super) fn flush_dirty(&mut self) {
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
    pub(super) fn maybe_close_finished(&mut self, key: usize) {
        if let Some(c) = self.conns.get(key) {
            let st = &c.state;
            if st.read_closed && st.live == 0 && st.out.pending() == 0 {
                self.close(key);
            }
        }
    }

    pub(super) fn close(&mut self, key: usize) {
        self.conns.remove(self.poll.registry(), key);
    }

    /// After the last event: give the clients a bounded time to take their replies.
    pub(super) fn final_flush(&mut self) {
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
