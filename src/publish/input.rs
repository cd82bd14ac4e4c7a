//! A subscriber's input: read its socket into the session's input buffer
//! ([`crate::net::ReadBuf`]) while its output is under the mark, hand
//! complete commands to [`super::commands`], and turn the end of its
//! input, an oversized command or a read error into the session's close.
//!
//! Backpressure: a session whose output passed the mark is not read; it
//! goes on the attention list and [`super::slow_revisit`] serves its input
//! again once it drains.
//!
//! Single owner: the publisher thread.

use std::os::fd::AsRawFd;

use crate::metrics::counters::bump;
use crate::net::ReadOutcome;
use crate::protocol::resp;
use crate::publish::commands::{self, CommandCtx};
use crate::publish::publisher::Publisher;

impl Publisher {
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
