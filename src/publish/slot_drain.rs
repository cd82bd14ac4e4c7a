//! From the slots to the fan-out: learn the symbols the feed interned, take
//! up to a batch of dirty updates (fewer under the rate cap), count the
//! updates each slot conflated, keep each taken value in the history ring
//! ([`super::history`]) and hand it to the fan-out step
//! ([`super::fanout`]) with the sessions as its outlets.
//!
//! Stages recorded here: slot wait (written → picked) and publish (one
//! update's take + encode + offers); the end-to-end stage closes after the
//! turn's flush ([`super::flush`]).
//!
//! Single owner: the publisher thread, the dirty queue's single consumer.

use crate::metrics::counters::{bump, set};
use crate::metrics::Stage;
use crate::publish::flush::SessionOutlets;
use crate::publish::publisher::{Publisher, MAX_BATCH};
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
        self.batch_recv.clear();
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
            self.batch_recv.push(v.recv_mono_ns);
        }
        if let Some(r) = &mut self.rate {
            r.take(published as u64, t_pick);
        }
        published
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
