//! Bridge calls in progress: when each worker's current
//! [`Bridge::execute`](crate::bridge::Bridge::execute) started, so the
//! gateway can show how long the oldest one has been at a venue.
//!
//! A worker waits for its call at most the bridge lease
//! ([`super::lease`]); while it waits, the call shows here: the gauges
//! `bridge_calls_in_progress` and `bridge_call_oldest_age_us`, and the
//! `bridge_call_slow` alert (`docs/decisions.md`).
//!
//! ```text
//!  worker i:  enter(i, start) ──▶ bridge.execute(…) ──▶ (guard dropped: slot i = 0)
//!                 │ slot i = start + 1
//!  gateway:   every loop turn: scan the slots ──▶ count, now − oldest start ──▶ gauges
//! ```
//!
//! One slot per worker (small and large lanes), each padded to a cache line
//! so workers entering and leaving calls do not share one. Slot `i` holds 0
//! while worker `i` is not in a bridge call, else the call's start on the
//! engine clock plus one (so a call that starts at time 0 is not "none").
//! Single writer per slot: its worker. Reader: the gateway thread.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::metrics::counters::set;
use crate::metrics::order_counters::OrderCounters;
use crate::order::msg::gauges::CallGauges;
use crate::retry::Clock;

/// Start times of the bridge calls in progress, one slot per worker.
#[derive(Debug)]
pub(crate) struct BridgeCalls {
    /// 0 = not in a bridge call; otherwise start (engine clock, ns) + 1.
    slots: Box<[CachePadded<AtomicU64>]>,
}

/// Worker `i` is in a bridge call while this lives; dropping it (also on
/// unwind, should a bridge panic) clears the slot.
#[derive(Debug)]
#[must_use = "the call counts as in progress only while the guard lives"]
pub(crate) struct InCall<'a> {
    slot: &'a AtomicU64,
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        // Relaxed, as in `enter`.
        self.slot.store(0, Ordering::Relaxed);
    }
}

/// What the slots say at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct InProgress {
    /// Workers in a bridge call.
    pub count: u64,
    /// Start of the oldest of those calls (engine clock, ns); `None` when `count` is 0.
    pub oldest_start_ns: Option<u64>,
}

impl InProgress {
    /// Age in ns of the oldest call at `now_ns` (0 when there is none).
    pub(crate) fn oldest_age_ns(&self, now_ns: u64) -> u64 {
        self.oldest_start_ns
            .map_or(0, |start| now_ns.saturating_sub(start))
    }
}

impl BridgeCalls {
    /// Slots for `workers` workers, all clear.
    pub(crate) fn new(workers: usize) -> Self {
        BridgeCalls {
            slots: (0..workers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        }
    }

    /// Worker `worker` starts a bridge call at `start_ns` (engine clock).
    /// The call counts as in progress until the returned guard is dropped.
    ///
    /// # Panics
    /// When `worker` has no slot.
    pub(crate) fn enter(&self, worker: usize, start_ns: u64) -> InCall<'_> {
        let slot = &*self.slots[worker];
        debug_assert_eq!(
            slot.load(Ordering::Relaxed),
            0,
            "worker {worker} entered a bridge call inside another (single writer per slot)"
        );
        // Relaxed: the slot publishes only its own value (a gauge input);
        // no other memory is read through it. The gateway may see a call a
        // moment late or just after it ended; it looks again every turn.
        slot.store(start_ns.saturating_add(1), Ordering::Relaxed);
        InCall { slot }
    }

    /// Scans every slot: how many workers are in a bridge call, and when the
    /// oldest of those calls started. Lock-free; the slots may change during
    /// the scan, so the result is a close snapshot, not an exact one.
    pub(crate) fn in_progress(&self) -> InProgress {
        let mut p = InProgress::default();
        for s in self.slots.iter() {
            let v = s.load(Ordering::Relaxed);
            if v != 0 {
                p.count += 1;
                let start = v - 1;
                p.oldest_start_ns = Some(p.oldest_start_ns.map_or(start, |o| o.min(start)));
            }
        }
        p
    }
}

impl CallGauges for BridgeCalls {
    /// Writes the gauges `bridge_calls_in_progress` and
    /// `bridge_call_oldest_age_us`, reading `clock` only when a call is in
    /// progress. Single writer of those gauges: the gateway thread.
    fn publish_gauges(&self, o: &OrderCounters, clock: &dyn Clock) {
        let p = self.in_progress();
        let age_ns = if p.count == 0 {
            0
        } else {
            p.oldest_age_ns(clock.now_ns())
        };
        set(&o.bridge_calls_in_progress, p.count);
        set(&o.bridge_call_oldest_age_us, age_ns / 1_000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::SimClock;

    fn gauges(o: &OrderCounters) -> (u64, u64) {
        (
            o.bridge_calls_in_progress.load(Ordering::Relaxed),
            o.bridge_call_oldest_age_us.load(Ordering::Relaxed),
        )
    }

    #[test]
    fn oldest_call_and_count_follow_enter_and_drop() {
        let calls = BridgeCalls::new(3);
        let clock = SimClock::new();
        let o = OrderCounters::default();
        calls.publish_gauges(&o, &clock);
        assert_eq!(gauges(&o), (0, 0), "no call: both gauges 0");

        // A call that starts at time 0 is a call (the slot stores start + 1).
        let a = calls.enter(0, 0);
        clock.advance_ms(2_000);
        let b = calls.enter(2, clock.now_ns());
        clock.advance_ms(1_500);
        calls.publish_gauges(&o, &clock);
        assert_eq!(
            gauges(&o),
            (2, 3_500_000),
            "age of the oldest, not the newest"
        );

        drop(a);
        calls.publish_gauges(&o, &clock);
        assert_eq!(gauges(&o), (1, 1_500_000), "the next oldest takes over");

        drop(b);
        calls.publish_gauges(&o, &clock);
        assert_eq!(gauges(&o), (0, 0), "every call returned");
        assert_eq!(calls.in_progress(), InProgress::default());
    }

    #[test]
    fn a_panicking_call_still_clears_its_slot() {
        let calls = BridgeCalls::new(1);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _in_call = calls.enter(0, 7);
            panic!("bridge broke its contract");
        }));
        assert!(r.is_err());
        assert_eq!(calls.in_progress().count, 0);
    }
}
