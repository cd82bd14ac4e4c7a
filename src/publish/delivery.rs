//! From the slots to the subscribers' sockets, the publisher's side of
//! it: learn the symbols the feed interned and take up to a batch of
//! dirty updates (fewer under the rate cap), counting the updates each
//! slot conflated, keeping each taken value in the history ring
//! ([`super::history`]) and handing it to the fan-out step
//! ([`super::fanout`]) with the sessions as its outlets; write every
//! queued buffer ([`super::flush`] writes one session); revisit the
//! sessions on the attention list.
//!
//! Stages recorded here: slot wait (written → picked), publish (one
//! update's take + encode + offers) and, after the turn's flush, the
//! end-to-end stage.
//!
//! **The slow-subscriber revisit.** Sessions on the attention list
//! (symbols pending after a slow episode, or input held back under
//! backpressure) are looked at every turn; once a buffer is under half the
//! mark (a paced session: at every visit, after a sample of its kernel
//! queue, up to its commit budget) it gets the latest value of each symbol
//! it missed ([`super::fanout::Fanout::refill`]) and its commands are read
//! again. The list is the kit's [`crate::net::KeyList`], walked in place
//! (`key(i)`, `swap_remove(i)`), so a session marked again during the walk
//! is revisited in the same walk.
//!
//! Single owner: the publisher thread, the dirty queue's single consumer.

use crate::metrics::counters::{bump, set};
use crate::metrics::Stage;
use crate::publish::flush::{maybe_start_pacing, sample_pacing, write_session, SessionOutlets};
use crate::publish::publisher::{Publisher, MAX_BATCH, MAX_RECV_TIMES};
use crate::publish::session::WriteState;
use crate::rate_limit::RateLimit;
use crate::symbols::SymbolId;

/// The cap on the publish rate (`--max-publish-rate`, 0 = none): `per_sec`
/// updates a second with a burst of a hundredth of a second (at least one
/// update), on the engine's one limiter. Conflation absorbs what the cap
/// holds back: a symbol not taken this turn is taken later at its newest
/// value.
pub(super) fn publish_cap(per_sec: u64) -> Option<RateLimit> {
    (per_sec > 0).then(|| RateLimit::per_second_burst(per_sec, (per_sec as f64 / 100.0).max(1.0)))
}

impl Publisher {
    /// Registers symbols interned by the feed since the last turn.
    pub(super) fn learn_symbols(&mut self) {
        let n = self.table.len();
        while self.routes.known_symbols() < n {
            let id = self.routes.known_symbols() as SymbolId;
            let name = self.table.name(id).expect("published ids have names");
            self.routes.add_symbol(id, name);
            self.fanout.learn(name);
        }
    }

    /// Takes dirty updates and fans them out; returns how many were published.
    pub(super) fn drain_slots(&mut self) -> usize {
        let t_pick = self.ctx.clock.now_ns();
        set(
            &self.ctx.counters.publish.dirty_depth,
            self.slots.dirty_len() as u64,
        );
        let budget = self.rate.as_ref().map_or(MAX_BATCH, |r| {
            usize::try_from(r.available(t_pick)).map_or(MAX_BATCH, |n| n.min(MAX_BATCH))
        });
        let window_now_ns = self.settings.window_clock.now_ns();
        let mut published = 0;
        // Not cleared here: a turn that waits for the flush gap drains
        // twice before its flush, and the first drain's updates are
        // written by that flush too ([`Self::flush`] records and clears).
        // One clock read per update: the end of one update's fan-out is the
        // start of the next one's (the `publish` stage thus also counts the
        // pop and take of the update, a few ns).
        let mut t0 = t_pick;
        while published < budget {
            let Some(id) = self.slots.pop_dirty() else {
                break;
            };
            if id as usize >= self.fanout.known() {
                // Interned after this turn's learn step: learn it now.
                self.learn_symbols();
            }
            let v = self.slots.take(id);
            let Some(skipped) = self.fanout.take(id, v.seq) else {
                continue; // re-queued by a write that raced the take; already published
            };
            self.stale.updated(id, t0, v.recv_mono_ns);
            let p = &self.ctx.counters.publish;
            bump(&p.conflated, skipped);
            bump(&p.published, 1);
            published += 1;
            self.ctx
                .recorder
                .record_span(Stage::SlotWait, v.recv_mono_ns, t_pick);
            self.fanout.encode(id, self.routes.name(id), &v);
            self.history
                .record(id, v.seq, &self.fanout.latest()[id as usize]);
            if let Some(out) = &self.settings.outbox {
                out.offer(id, self.fanout.payload(), v.seq); // ingest: to the backbone
            }
            let mut outlets = SessionOutlets {
                sessions: &mut self.sessions,
                flush_list: &mut self.flush_list,
                attention: &mut self.attention,
                clock: &self.ctx.clock,
                recorder: &mut self.ctx.recorder,
                counters: &self.ctx.counters,
                stall: &mut self.shared_stall,
                window_now_ns,
            };
            let d = self.fanout.offer(id, &self.routes, &mut outlets, t0);
            bump(&p.frames, d.frames);
            if d.throttled > 0 {
                bump(&p.throttled, d.throttled);
            }
            if d.conflations > 0 {
                bump(&p.subscriber_conflations, d.conflations);
                bump(&p.slow_episodes, d.slow_episodes);
            }
            let t1 = self.ctx.clock.now_ns();
            self.ctx.recorder.record_span(Stage::Publish, t0, t1);
            t0 = t1;
            // Bounded (two drains of a turn fit): past it, only at the
            // final drains of a stop, a sample is not taken.
            if self.batch_recv.len() < MAX_RECV_TIMES {
                self.batch_recv.push(v.recv_mono_ns);
            }
        }
        if let Some(r) = &mut self.rate {
            r.take(published as u64, t_pick);
        }
        published
    }

    /// A writable event for `key`: its socket takes bytes again.
    pub(super) fn writable(&mut self, key: usize) {
        if let Some(c) = self.sessions.get_mut(key) {
            if c.stream.pending_tls() {
                // The last TLS record the socket did not take (its
                // session's buffer may be empty: nothing else would send it).
                // An error shows again at the next write, which closes.
                let _ = std::io::Write::flush(&mut c.stream);
            }
            c.state.writable();
            self.flush_list.mark(&mut c.state.on_flush_list, key);
        }
    }

    /// Puts `key` on the flush list (once).
    pub(super) fn queue_flush(&mut self, key: usize) {
        if let Some(c) = self.sessions.get_mut(key) {
            self.flush_list.mark(&mut c.state.on_flush_list, key);
        }
    }

    /// Writes every queued buffer; returns how many sessions wrote something.
    pub(super) fn flush(&mut self) -> usize {
        let mut wrote = 0;
        // Nothing is marked for flush while the list is walked (a close
        // only unlists), so the walk takes the keys out and gives them back.
        let keys = self.flush_list.take();
        for &key in &keys {
            let Some(conn) = self.sessions.get_mut(key) else {
                continue;
            };
            let sess = &mut conn.state;
            sess.on_flush_list = false;
            if sess.state().is_failed() {
                self.close(key);
                continue;
            }
            if sess.write_state() == WriteState::Blocked || sess.buf.buffered() == 0 {
                if sess.state().is_closing()
                    && sess.buf.buffered() == 0
                    && !conn.stream.pending_tls()
                {
                    self.close(key);
                } else {
                    // Blocked while its buffer grows: pace it before the
                    // buffer fills up to the mark.
                    maybe_start_pacing(conn, self.ctx.clock.now_ns(), &mut self.shared_stall);
                }
                continue;
            }
            match write_session(
                conn,
                &self.ctx.clock,
                &mut self.ctx.recorder,
                &self.ctx.counters,
                &mut self.shared_stall,
            ) {
                Ok(n) => {
                    if n > 0 {
                        wrote += 1;
                    }
                    if conn.state.state().is_closing()
                        && conn.state.buf.buffered() == 0
                        && !conn.stream.pending_tls()
                    {
                        self.close(key);
                    }
                }
                Err(e) => {
                    log::debug!("subscriber {}: write failed: {e}; closing", conn.peer);
                    self.close(key);
                }
            }
        }
        self.flush_list.restore(keys);
        if !self.batch_recv.is_empty() {
            let end = self.ctx.clock.now_ns();
            for &r in &self.batch_recv {
                self.ctx.recorder.record_span(Stage::EngineE2e, r, end);
            }
            self.batch_recv.clear();
        }
        wrote
    }

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
            if !maybe_start_pacing(conn, now, &mut self.shared_stall) {
                sample_pacing(conn, now, &mut self.shared_stall);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publish_cap_bursts_a_hundredth_of_a_second_at_least_one_update() {
        assert!(publish_cap(0).is_none(), "0: uncapped");
        let mut cap = publish_cap(1_000).expect("capped");
        assert_eq!(cap.available(0), 10);
        cap.take(10, 0);
        assert_eq!(cap.wait_ns(0), 1_000_000);
        assert_eq!(cap.available(5_000_000), 5);
        assert_eq!(publish_cap(50).expect("capped").available(0), 1);
    }
}
