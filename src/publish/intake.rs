//! Subscribers coming in, over the connection kit ([`crate::net`]): the
//! kit's listener accepts under the port's limit (refusing past it with
//! Redis's `-ERR max number of clients reached` line), this file builds
//! each new [`Session`] with its client id and arms its authentication
//! deadline; at each turn's end the subscribers whose deadline passed
//! without `AUTH` are answered and closed.
//!
//! A subscriber's input: its socket is read into the session's input
//! buffer ([`crate::net::ReadBuf`]) while its output is under the mark,
//! complete commands go to [`super::commands`], and the end of its input,
//! an oversized command or a read error becomes the session's close.
//! Backpressure: a session whose output passed the mark is not read; it
//! goes on the attention list and the revisit ([`super::delivery`])
//! serves its input again once it drains.
//!
//! Single owner: the publisher thread.

use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::bump;
use crate::model::warning::WarnKind;
use crate::net::ConnCounters;
use crate::net::ReadOutcome;
use crate::protocol::resp;
use crate::publish::commands::{self, CommandCtx};
use crate::publish::publisher::Publisher;
use crate::publish::session::Session;
use std::os::fd::AsRawFd;

impl Publisher {
    /// Accepts every waiting connection.
    pub(super) fn accept_all(&mut self) {
        let p = &self.ctx.counters.publish;
        let counters = ConnCounters {
            accepted: &p.subscribers_accepted,
            refused: &p.subscribers_refused,
            open: Some(&p.subscribers_open),
        };
        let (auth, clock, settings) = (&mut self.auth, self.ctx.clock, &self.settings);
        let (next_id, max_symbols) = (&mut self.next_session_id, self.table.capacity());
        let authed = !auth.required();
        self.listener.accept_all(
            self.ctx.poll.registry(),
            &mut self.sessions,
            counters,
            authed,
            |conn| {
                let now = clock.now_ns();
                auth.arm(conn, now);
                let id = *next_id;
                *next_id += 1;
                let mut s = Session::new(id, settings.hwm, max_symbols, authed, now);
                if settings.sub_max_rate > 0.0 || settings.sub_max_bandwidth > 0 {
                    // The serve-wide caps; TICKFAN.THROTTLE changes them.
                    let now_w = settings.window_clock.now_ns();
                    s.throttle.set_rate(settings.sub_max_rate, now_w);
                    s.throttle.set_bandwidth(settings.sub_max_bandwidth, now_w);
                }
                s.buf.set_max_lag(settings.max_lag_ns);
                s
            },
        );
    }

    /// Closes subscribers whose authentication deadline passed.
    pub(super) fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(id) = self.auth.next_expired(now_ns) {
            let Some(conn) = self.sessions.get_live(id) else {
                continue;
            };
            let sess = &mut conn.state;
            if sess.state().awaits_auth() {
                resp::append_error(sess.out(), b"ERR authentication timeout");
                sess.close_after_flush();
                warn_repeating!(
                    WarnKind::AuthTimeout,
                    "subscriber {}: no AUTH within the timeout; closing",
                    conn.peer
                );
                bump(&self.ctx.counters.publish.auth_failures, 1);
                self.queue_flush(id.key());
            }
        }
        // As the expiry always did: flush once no deadline is left queued (a
        // deadline still ahead ends the walk; the next turn flushes then).
        if self.auth.pending_len() == 0 {
            self.flush();
        }
    }

    /// Reads and handles commands of one session while its output buffer is
    /// under the mark; returns the commands handled.
    pub(super) fn serve_input(&mut self, key: usize) -> usize {
        let mut handled = 0;
        loop {
            let connected_clients = self.sessions.len();
            let Some(conn) = self.sessions.get_mut(key) else {
                return handled;
            };
            if !conn.state.state().serves_commands() {
                return handled;
            }
            // Handle what is buffered first.
            let now = self.ctx.clock.now_ns();
            let mut ctx = CommandCtx {
                routes: &mut self.routes,
                latest: self.fanout.latest(),
                last_seqs: self.fanout.last_seqs(),
                history: &self.history,
                window_now_ns: self.settings.window_clock.now_ns(),
                default_caps: (self.settings.sub_max_rate, self.settings.sub_max_bandwidth),
                matched: &mut self.matched,
                counters: &self.ctx.counters,
                hwm: self.settings.hwm,
                now_ns: now,
                token: self.auth.token(),
                max_subscriptions: self.settings.max_subscriptions,
                server: &self.server,
                connected_clients,
                peer: &conn.peer,
                fd: conn.stream.as_raw_fd(),
            };
            let sess = &mut conn.state;
            let outcome = commands::handle_buffered(sess, key, &mut ctx);
            handled += outcome.commands;
            // The kit's view of the auth step (RESP `AUTH`/`HELLO`/`RESET` ran above).
            conn.authed = sess.state().is_authed();
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
            let Some(conn) = self.sessions.get_mut(key) else {
                return handled;
            };
            let sess = &mut conn.state;
            if sess.state().input_ended() {
                // The peer closed its side: like Redis, answer what it sent,
                // then close (an idle closed socket must not hold a slot).
                sess.close_after_flush();
                self.queue_flush(key);
                return handled;
            }
            if !sess.state().serves_commands() {
                return handled;
            }
            match sess.read_some(&mut conn.stream) {
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
                    bump(&self.ctx.counters.publish.command_errors, 1);
                    sess.close_after_flush();
                    self.queue_flush(key);
                    return handled;
                }
                Err(e) => {
                    log::debug!("subscriber {}: read failed: {e}", conn.peer);
                    self.close(key);
                    return handled;
                }
            }
        }
    }
}
