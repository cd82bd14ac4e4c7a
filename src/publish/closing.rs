//! Closing a subscriber: deregister its socket, remove its subscriptions
//! from the routes, keep its final figures for reports, and update the open
//! count. The socket is closed when the session is dropped.
//!
//! Single owner: the publisher thread.

use crate::metrics::counters::set;
use crate::publish::publisher::Publisher;

impl Publisher {
    /// Closes session `key` (nothing when it is gone already).
    pub(super) fn close(&mut self, key: usize) {
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
        self.stats.closed(sess.stats(self.clock.now_ns()));
        set(
            &self.counters.publish.subscribers_open,
            self.sessions.len() as u64,
        );
    }
}
