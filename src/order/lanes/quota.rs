//! The retry quota of one lane: how many of its workers due retries may
//! hold while new orders wait (`--retry-share`).
//!
//! A worker about to take work asks [`RetryQuota::may_take_retry`] before
//! it looks at the lane's due retries:
//!
//! * no new order (or chunk) waits → yes: retries may take every worker;
//! * new orders wait → yes only while fewer than `limit` workers of the
//!   lane are busy with a retry, `limit = ⌊share × workers⌋` kept within
//!   `1 ..= workers − 1` when `share < 1` (so each class always has a
//!   worker), `= workers` when `share ≥ 1` (no quota: retries first, as
//!   before the quota);
//! * a lane of one worker with `share < 1` alternates: after a retry taken
//!   while new orders waited, the next turn goes to a new order.
//!
//! Neither class starves: while both wait, at least one worker serves each
//! (one turn in two with a single worker).
//!
//! Invariant: `busy` counts the workers between [`RetryQuota::enter`] and
//! the matching [`RetryQuota::leave`] (one retry each); it never exceeds the
//! lane's worker count.

use std::sync::atomic::{AtomicUsize, Ordering};

/// One lane's quota, shared by its workers. The lane's worker count is
/// given at each ask: with elastic workers (`super::elastic`) the limit
/// follows the workers alive now.
#[derive(Debug)]
pub(crate) struct RetryQuota {
    /// Workers busy with a retry now.
    busy: AtomicUsize,
    /// `--retry-share`.
    share: f64,
}

/// A worker's own side of the quota: the alternation turn of a one-worker lane.
#[derive(Debug, Default)]
pub(crate) struct QuotaTurn {
    /// The last work this worker took was a retry taken while new orders waited.
    retry_went_first: bool,
}

impl QuotaTurn {
    /// The worker took a due retry (`new_waiting`: while new orders waited).
    pub(crate) fn took_retry(&mut self, new_waiting: bool) {
        self.retry_went_first = new_waiting;
    }

    /// The worker took a new order or a chunk.
    pub(crate) fn took_new(&mut self) {
        self.retry_went_first = false;
    }
}

impl RetryQuota {
    /// The quota of a lane with `--retry-share` `share` (0 < share ≤ 1).
    pub(crate) fn new(share: f64) -> Self {
        RetryQuota {
            busy: AtomicUsize::new(0),
            share,
        }
    }

    /// Most workers busy with a retry while new orders wait, in a lane of
    /// `workers` workers.
    fn limit(&self, workers: usize) -> usize {
        let workers = workers.max(1);
        if self.share >= 1.0 {
            workers
        } else {
            ((self.share * workers as f64).floor() as usize).clamp(1, (workers - 1).max(1))
        }
    }

    /// May this worker take a due retry now? `new_waiting`: a new order
    /// (or a chunk) waits in the lane. On `true` the worker counts as busy
    /// with a retry until [`RetryQuota::leave`] (also when it then finds
    /// no retry due: it leaves at once).
    pub(crate) fn may_take_retry(
        &self,
        turn: &QuotaTurn,
        new_waiting: bool,
        workers: usize,
    ) -> bool {
        // One worker and `share < 1`: alternate instead of counting.
        let alternate = workers <= 1 && self.share < 1.0;
        if !new_waiting || (alternate && !turn.retry_went_first) {
            self.busy.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        if alternate {
            return false;
        }
        let limit = self.limit(workers);
        self.busy
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                (b < limit).then_some(b + 1)
            })
            .is_ok()
    }

    /// The worker is done with its retry (or found none due).
    pub(crate) fn leave(&self) {
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_leaves_each_class_a_worker() {
        assert_eq!(RetryQuota::new(0.5).limit(4), 2);
        assert_eq!(RetryQuota::new(0.5).limit(3), 1);
        assert_eq!(RetryQuota::new(0.01).limit(4), 1, "retries keep one");
        assert_eq!(RetryQuota::new(0.99).limit(4), 3, "new orders keep one");
        assert_eq!(RetryQuota::new(1.0).limit(4), 4, "1.0: no quota");
    }

    #[test]
    fn retries_take_every_worker_when_no_new_order_waits_and_their_share_otherwise() {
        let (q, n) = (RetryQuota::new(0.5), 4);
        let t = QuotaTurn::default();
        for _ in 0..4 {
            assert!(q.may_take_retry(&t, false, n));
        }
        assert!(!q.may_take_retry(&t, true, n), "4 busy > limit 2");
        q.leave();
        q.leave();
        q.leave();
        assert!(q.may_take_retry(&t, true, n), "1 busy < 2");
        assert!(!q.may_take_retry(&t, true, n), "2 busy = limit");
    }

    #[test]
    fn one_worker_alternates_while_both_classes_wait() {
        let (q, n) = (RetryQuota::new(0.5), 1);
        let mut t = QuotaTurn::default();
        let mut picks = Vec::new();
        for _ in 0..6 {
            let r = q.may_take_retry(&t, true, n);
            if r {
                q.leave();
                t.took_retry(true);
            } else {
                t.took_new();
            }
            picks.push(r);
        }
        assert_eq!(picks, [true, false, true, false, true, false]);
        // Asking without taking (no retry was due) does not use the turn up.
        assert!(q.may_take_retry(&t, true, n));
        q.leave();
        assert!(q.may_take_retry(&t, true, n));
        q.leave();
        let (q, n) = (RetryQuota::new(1.0), 1);
        t.took_retry(true);
        assert!((0..5).all(|_| {
            let r = q.may_take_retry(&t, true, n);
            q.leave();
            r
        }));
    }

    #[test]
    fn the_limit_follows_the_workers_alive_now() {
        let q = RetryQuota::new(0.5);
        let t = QuotaTurn::default();
        assert!(q.may_take_retry(&t, true, 2), "1 of 2");
        assert!(!q.may_take_retry(&t, true, 2), "limit 1 of 2");
        // The lane grew to 8 workers: up to 4 may hold retries.
        assert!(q.may_take_retry(&t, true, 8));
        assert!(q.may_take_retry(&t, true, 8));
        assert!(q.may_take_retry(&t, true, 8));
        assert!(!q.may_take_retry(&t, true, 8), "4 busy = limit 4 of 8");
    }
}
