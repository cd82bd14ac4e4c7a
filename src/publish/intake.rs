//! Subscribers coming in, over the connection kit ([`crate::net`]): the
//! kit's listener accepts under the port's limit (refusing past it with
//! Redis's `-ERR max number of clients reached` line), this file builds
//! each new [`Session`] with its client id and arms its authentication
//! deadline; at each turn's end the subscribers whose deadline passed
//! without `AUTH` are answered and closed.
//!
//! Single owner: the publisher thread.

use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::bump;
use crate::model::warning::WarnKind;
use crate::net::ConnCounters;
use crate::protocol::resp;
use crate::publish::publisher::Publisher;
use crate::publish::session::Session;

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
}
