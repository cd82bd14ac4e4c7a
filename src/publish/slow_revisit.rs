//! The slow-subscriber revisit: sessions on the attention list (symbols
//! pending after a slow episode, or input held back under backpressure)
//! are looked at every turn; once a buffer is under half the mark (a paced
//! session: at every visit, after a sample of its kernel queue, up to its
//! commit budget) it gets the latest value of each symbol it missed
//! ([`super::fanout::Fanout::refill`]) and its commands are read again.
//!
//! The list is the kit's [`crate::net::KeyList`], walked in place
//! (`key(i)`, `swap_remove(i)`), so a session marked again during the walk
//! is revisited in the same walk.
//!
//! Single owner: the publisher thread.

use crate::metrics::counters::bump;
use crate::publish::flush::{maybe_start_pacing, sample_pacing};
use crate::publish::publisher::Publisher;

impl Publisher {
    /// Puts `key` on the attention list (once).
    pub(super) fn mark_attention(&mut self, key: usize) {
        if let Some(c) = self.sessions.get_mut(key) {
            self.attention.mark(&mut c.state.on_attention, key);
        }
    }

    /// Revisits sessions that were slow or stopped reading: once a buffer is
    /// under half the mark, sends the latest value of each pending symbol and
    /// resumes reading its commands.
    pub(super) fn serve_attention(&mut self) -> usize {
        let mut work = 0;
        let low_water = self.settings.hwm / 2;
        let now = self.ctx.clock.now_ns();
        let mut i = 0;
        while i < self.attention.len() {
            let key = self.attention.key(i);
            let Some(conn) = self.sessions.get_mut(key) else {
                self.attention.swap_remove(i);
                continue;
            };
            // A subscriber past its mark whose socket stays blocked may
            // be due for pacing (its grace of the lag over).
            if !maybe_start_pacing(conn, now) {
                sample_pacing(conn, now);
            }
            let sess = &mut conn.state;
            if !sess.buf.budget.paced() && sess.buf.buffered() > low_water {
                i += 1;
                continue;
            }
            let throttle = sess.throttle.is_active().then(|| {
                let now_w = self.settings.window_clock.now_ns();
                (&mut sess.throttle, now_w)
            });
            let order = self.settings.pending_order;
            let sent =
                self.fanout
                    .refill_ordered(key, &mut sess.buf, &self.routes, order, now, throttle);
            // Done once nothing is pending and the buffer is under half the
            // mark (a paced session is refilled above it, but its input is
            // read again only below it, as before — else a client whose
            // replies keep it over the mark would be revisited forever).
            let done = sess.buf.pending_len() == 0 && sess.buf.buffered() <= low_water;
            if done {
                sess.on_attention = false;
            }
            bump(&self.ctx.counters.publish.frames, sent);
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
}
