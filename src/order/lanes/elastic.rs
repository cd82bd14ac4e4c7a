//! Elastic workers: how many workers a lane should run, decided from its
//! queue (depth, oldest age) and its busy workers, between the lane's
//! `min` and `max` (`--order-workers-min/max`, `--large-workers-min/max`).
//!
//! ```text
//!  every tick (pool's scaler thread):  LaneSample ──▶ Scaler::decide ──▶ Hold | Up | Down(n)
//!     depth > workers, or oldest age > SLO/4,   ─ sustained UP_WINDOW ─▶ Up   (one worker per window)
//!     queue empty and some worker idle          ─ sustained idle period ─▶ Down(workers idle all along)
//! ```
//!
//! The decision is a pure function of the samples and the time they carry
//! (the engine clock, `retry::SimClock` in tests): no thread, no sleep.
//!
//! [`LaneLoad`] is what the lane's workers and the scaler share: how many
//! workers are alive and busy, the retirements asked for, the orders
//! completed. Workers write it (`fetch_add`; many writers), the scaler
//! reads it and asks for retirements; a worker retires only when it found
//! no work (it never drops an order), so a retirement is taken within one
//! idle wait of the worker (≤ 100 ms).
//!
//! Bounds: the scaler adds a worker only while fewer than `max` are alive
//! (a retiring one counts until it has ended), and asks no retirement that
//! would leave fewer than `min`. Thread start and stop follow the load's
//! changes (at most one start per [`UP_WINDOW`], retirements once per idle
//! period), never one per order.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long the pressure must last before a worker is added (and between
/// two additions).
pub(crate) const UP_WINDOW: Duration = Duration::from_millis(20);

/// What the scaler thread and a lane's workers share.
#[derive(Debug, Default)]
pub(crate) struct LaneLoad {
    /// Worker threads of the lane alive now (the pool counts a start, the
    /// worker's thread its end).
    alive: AtomicUsize,
    /// Workers holding an order now (waiting for a bridge permit included).
    busy: AtomicUsize,
    /// Retirements asked for and not yet taken by an idle worker.
    retire: AtomicUsize,
    /// Orders taken from the lane's queue whose processing ended.
    completed: AtomicU64,
}

impl LaneLoad {
    /// Worker threads of the lane alive now.
    pub(crate) fn alive(&self) -> usize {
        self.alive.load(Ordering::Acquire)
    }

    /// A worker thread of the lane started.
    pub(crate) fn started(&self) {
        self.alive.fetch_add(1, Ordering::AcqRel);
    }

    /// A worker thread of the lane ended.
    pub(crate) fn ended(&self) {
        self.alive.fetch_sub(1, Ordering::AcqRel);
    }

    /// A worker took an order (or a retry, or a chunk).
    pub(crate) fn begin(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A worker is done with what it took; `from_queue`: it came from the
    /// lane's queue (counted as a completion).
    pub(crate) fn end(&self, from_queue: bool) {
        self.busy.fetch_sub(1, Ordering::Relaxed);
        if from_queue {
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An idle worker asks whether it should retire; true once per
    /// retirement asked for.
    pub(crate) fn take_retirement(&self) -> bool {
        self.retire
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Asks `n` idle workers to retire.
    pub(crate) fn ask_retire(&self, n: usize) {
        self.retire.fetch_add(n, Ordering::AcqRel);
    }

    /// Workers alive, retirements not yet taken, busy workers, completions.
    pub(crate) fn read(&self) -> (usize, usize, usize, u64) {
        (
            self.alive.load(Ordering::Acquire),
            self.retire.load(Ordering::Acquire),
            self.busy.load(Ordering::Relaxed),
            self.completed.load(Ordering::Relaxed),
        )
    }
}

/// The lane's bounds and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScalePolicy {
    /// Fewest workers.
    pub min: usize,
    /// Most workers.
    pub max: usize,
    /// An oldest queued order older than this is pressure (SLO / 4).
    pub up_age_ns: u64,
    /// Pressure sustained this long adds a worker.
    pub up_window_ns: u64,
    /// Idle workers sustained this long are retired (`--order-worker-idle`).
    pub idle_ns: u64,
}

/// One look at a lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneSample {
    /// Engine clock.
    pub now_ns: u64,
    /// Orders queued.
    pub depth: usize,
    /// Age of the oldest queued order.
    pub oldest_age_ns: u64,
    /// Workers alive and not asked to retire.
    pub workers: usize,
    /// Workers alive, retiring ones included (the bound on starts).
    pub alive: usize,
    /// Workers holding an order.
    pub busy: usize,
}

/// What to do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing.
    Hold,
    /// Start one worker.
    Up,
    /// Retire this many idle workers.
    Down(usize),
}

/// The decision state of one lane.
#[derive(Debug)]
pub(crate) struct Scaler {
    policy: ScalePolicy,
    /// Since when the queue has been under pressure (reset at each addition).
    pressure_since: Option<u64>,
    /// Since when the queue has been empty with a worker idle, and the
    /// fewest idle workers seen since (those were never needed).
    idle_since: Option<(u64, usize)>,
}

impl Scaler {
    /// A lane starting with no pressure and no idle period.
    pub(crate) fn new(policy: ScalePolicy) -> Self {
        Scaler {
            policy,
            pressure_since: None,
            idle_since: None,
        }
    }

    /// The bounds.
    pub(crate) fn policy(&self) -> &ScalePolicy {
        &self.policy
    }

    /// Decides on one sample.
    pub(crate) fn decide(&mut self, s: &LaneSample) -> Step {
        let p = self.policy;
        if s.workers < p.min && s.alive < p.max {
            return Step::Up; // back to the floor (a worker ended)
        }
        let pressure = s.depth > s.workers || (s.depth > 0 && s.oldest_age_ns > p.up_age_ns);
        if pressure {
            self.idle_since = None;
            let since = *self.pressure_since.get_or_insert(s.now_ns);
            if s.now_ns.saturating_sub(since) >= p.up_window_ns && s.alive < p.max {
                self.pressure_since = Some(s.now_ns);
                return Step::Up;
            }
            return Step::Hold;
        }
        self.pressure_since = None;
        let idle = s.workers.saturating_sub(s.busy);
        if s.depth > 0 || idle == 0 || s.workers <= p.min {
            self.idle_since = None;
            return Step::Hold;
        }
        let (since, fewest) = self.idle_since.get_or_insert((s.now_ns, idle));
        *fewest = (*fewest).min(idle);
        if s.now_ns.saturating_sub(*since) < p.idle_ns {
            return Step::Hold;
        }
        let n = (*fewest).min(s.workers - p.min);
        self.idle_since = None;
        Step::Down(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn policy() -> ScalePolicy {
        ScalePolicy {
            min: 2,
            max: 5,
            up_age_ns: 250 * MS,
            up_window_ns: 20 * MS,
            idle_ns: 3_000 * MS,
        }
    }

    fn sample(now_ms: u64, depth: usize, workers: usize, busy: usize) -> LaneSample {
        LaneSample {
            now_ns: now_ms * MS,
            depth,
            oldest_age_ns: 0,
            workers,
            alive: workers,
            busy,
        }
    }

    #[test]
    fn a_sustained_backlog_adds_one_worker_per_window_up_to_max() {
        let mut s = Scaler::new(policy());
        let mut workers = 2;
        let mut steps = Vec::new();
        for t in (0..200).step_by(10) {
            if s.decide(&sample(t, 100, workers, workers)) == Step::Up {
                workers += 1;
                steps.push(t);
            }
        }
        assert_eq!(workers, 5, "never above max");
        assert_eq!(steps, vec![20, 40, 60], "one per window, after the window");
    }

    #[test]
    fn a_short_burst_adds_nothing() {
        let mut s = Scaler::new(policy());
        assert_eq!(s.decide(&sample(0, 10, 2, 2)), Step::Hold);
        assert_eq!(s.decide(&sample(10, 10, 2, 2)), Step::Hold);
        assert_eq!(
            s.decide(&sample(15, 1, 2, 2)),
            Step::Hold,
            "the burst is gone"
        );
        assert_eq!(s.decide(&sample(30, 10, 2, 2)), Step::Hold, "a new window");
    }

    #[test]
    fn an_old_order_is_pressure_even_when_the_queue_is_short() {
        let mut s = Scaler::new(policy());
        let old = |now_ms| LaneSample {
            oldest_age_ns: 300 * MS,
            ..sample(now_ms, 1, 2, 2)
        };
        assert_eq!(s.decide(&old(0)), Step::Hold);
        assert_eq!(s.decide(&old(20)), Step::Up);
    }

    #[test]
    fn workers_idle_for_the_whole_period_are_retired_down_to_min() {
        let mut s = Scaler::new(policy());
        // 5 workers, at least 2 idle all along (3 busy at the peak).
        assert_eq!(s.decide(&sample(0, 0, 5, 1)), Step::Hold);
        assert_eq!(s.decide(&sample(1_000, 0, 5, 3)), Step::Hold);
        assert_eq!(s.decide(&sample(2_999, 0, 5, 0)), Step::Hold);
        assert_eq!(s.decide(&sample(3_000, 0, 5, 0)), Step::Down(2));
        // Then 3, all idle: one more down to min after the next period.
        assert_eq!(s.decide(&sample(3_010, 0, 3, 0)), Step::Hold);
        assert_eq!(s.decide(&sample(6_010, 0, 3, 0)), Step::Down(1));
        assert_eq!(s.decide(&sample(9_100, 0, 2, 0)), Step::Hold, "at min");
    }

    #[test]
    fn a_backlog_or_all_busy_restarts_the_idle_period() {
        let mut s = Scaler::new(policy());
        assert_eq!(s.decide(&sample(0, 0, 4, 0)), Step::Hold);
        assert_eq!(s.decide(&sample(2_000, 0, 4, 4)), Step::Hold, "all busy");
        assert_eq!(s.decide(&sample(4_000, 0, 4, 0)), Step::Hold);
        assert_eq!(s.decide(&sample(6_999, 0, 4, 0)), Step::Hold);
        assert_eq!(s.decide(&sample(7_000, 0, 4, 0)), Step::Down(2));
    }

    #[test]
    fn below_min_starts_at_once_and_a_retiring_worker_still_counts_toward_max() {
        let mut s = Scaler::new(policy());
        assert_eq!(s.decide(&sample(0, 0, 1, 0)), Step::Up);
        let retiring = LaneSample {
            alive: 5,
            ..sample(0, 100, 4, 4)
        };
        assert_eq!(s.decide(&retiring), Step::Hold);
        assert_eq!(
            s.decide(&LaneSample {
                now_ns: 100 * MS,
                ..retiring
            }),
            Step::Hold,
            "5 alive: at max until the retiring one has ended"
        );
    }

    #[test]
    fn retirements_are_taken_once_each() {
        let l = LaneLoad::default();
        assert!(!l.take_retirement());
        l.ask_retire(2);
        assert!(l.take_retirement());
        assert!(l.take_retirement());
        assert!(!l.take_retirement());
        l.started();
        l.begin();
        l.end(true);
        assert_eq!(l.read(), (1, 0, 0, 1));
    }
}
