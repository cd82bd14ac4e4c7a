//! Closing a subscriber: take it out of the kit's connection slab (which
//! deregisters its socket), remove its subscriptions from the routes, keep
//! its final figures for reports, and update the open count. The socket is closed when the session is dropped.
//!
//! Single owner: the publisher thread.

use crate::metrics::counters::set;
use crate::publish::publisher::Publisher;

impl Publisher {
    /// Closes session `key` (nothing when it is gone already).
    pub(super) fn close(&mut self, key: usize) {
        let Some(conn) = self.sessions.remove(self.ctx.poll.registry(), key) else {
            return;
        };
        let sess = &conn.state;
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
        self.stats
            .closed(sess.stats(&conn.peer, self.ctx.clock.now_ns()));
        set(
            &self.ctx.counters.publish.subscribers_open,
            self.sessions.len() as u64,
        );
    }
}
