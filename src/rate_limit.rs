//! A rate limit: a token bucket of one event per interval `T` holding at
//! most `burst` events, implemented as the Generic Cell Rate Algorithm
//! (GCRA, ITU-T I.371; the "virtual scheduling" form), which keeps the
//! bucket in one number, the theoretical arrival time (TAT), instead of a
//! token count and a refill timestamp.
//!
//! An event arriving at `t` conforms when `TAT − t ≤ τ` (τ = (burst − 1) · T);
//! a conforming event moves `TAT` to `max(TAT, t) + T`, a non-conforming one
//! changes nothing (a refused event does not use up the budget). Integer
//! nanoseconds, no allocation, no division per event.
//!
//! Users: the order gateway (`--max-order-rate`: one limiter per
//! connection, [`RateLimit::per_second`]) and the log of repeated warnings
//! (one line per kind per interval, [`RateLimit::one_per`];
//! [`crate::logging::repeat`]). One owner per limiter (`&mut self`); time
//! is passed in, so tests drive it without waiting.

/// One limiter (one connection's orders, one kind of warning).
#[derive(Debug, Clone)]
pub(crate) struct RateLimit {
    /// T: nanoseconds of budget one event uses (for a rate per second,
    /// 1 s / rate rounded down, so the limit is never stricter than asked).
    interval_ns: u64,
    /// τ: how far `tat_ns` may run ahead of now ((burst − 1) · T).
    tolerance_ns: u64,
    /// The theoretical arrival time of the next conforming event (ns on
    /// the caller's clock). Starts at 0: a new limiter has its whole burst.
    tat_ns: u64,
}

impl RateLimit {
    /// A limiter of `per_sec` orders per second with a burst of `per_sec`.
    ///
    /// # Panics
    /// When `per_sec` is 0 (no limit: do not build a limiter).
    pub(crate) fn per_second(per_sec: u32) -> RateLimit {
        assert!(per_sec > 0, "a rate limit of 0 means no limiter");
        let interval_ns = 1_000_000_000 / u64::from(per_sec);
        RateLimit {
            interval_ns,
            tolerance_ns: interval_ns * (u64::from(per_sec) - 1),
            tat_ns: 0,
        }
    }

    /// At most one event per `interval_ns` (a burst of one): the first
    /// event conforms, the next only `interval_ns` after it.
    ///
    /// # Panics
    /// When `interval_ns` is 0.
    pub(crate) fn one_per(interval_ns: u64) -> RateLimit {
        assert!(interval_ns > 0, "an interval of 0 means no limiter");
        RateLimit {
            interval_ns,
            tolerance_ns: 0,
            tat_ns: 0,
        }
    }

    /// Takes one event's budget at `now_ns`; false (and nothing taken) when
    /// over the rate.
    pub(crate) fn try_take(&mut self, now_ns: u64) -> bool {
        let tat = self.tat_ns.max(now_ns);
        if tat - now_ns > self.tolerance_ns {
            return false;
        }
        self.tat_ns = tat + self.interval_ns;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn burst_then_refuse_then_refill_at_the_rate() {
        let mut r = RateLimit::per_second(5);
        let t0 = 10 * SEC;
        assert_eq!((0..8).filter(|_| r.try_take(t0)).count(), 5);
        // One interval later exactly one more conforms.
        assert!(r.try_take(t0 + SEC / 5));
        assert!(!r.try_take(t0 + SEC / 5));
        // A full second later the whole burst is back, not more.
        let t1 = t0 + 2 * SEC;
        assert_eq!((0..8).filter(|_| r.try_take(t1)).count(), 5);
    }

    #[test]
    fn idle_time_does_not_bank_more_than_the_burst() {
        let mut r = RateLimit::per_second(3);
        assert_eq!((0..10).filter(|_| r.try_take(1_000 * SEC)).count(), 3);
    }

    #[test]
    fn a_steady_rate_at_the_limit_always_conforms() {
        let mut r = RateLimit::per_second(1_000);
        for i in 0..10_000u64 {
            assert!(r.try_take(SEC + i * (SEC / 1_000)), "order {i}");
        }
    }

    #[test]
    fn one_per_interval_lets_one_through_per_interval() {
        let mut r = RateLimit::one_per(10 * SEC);
        assert!(r.try_take(3 * SEC), "the first conforms");
        assert_eq!(
            (1..1000)
                .filter(|i| r.try_take(3 * SEC + i * 9_999_999))
                .count(),
            0
        );
        assert!(
            r.try_take(13 * SEC),
            "one interval after the last one taken"
        );
        assert!(!r.try_take(13 * SEC));
    }

    #[test]
    fn rate_one_is_one_per_second() {
        let mut r = RateLimit::per_second(1);
        assert!(r.try_take(SEC));
        assert!(!r.try_take(SEC + SEC / 2));
        assert!(r.try_take(2 * SEC));
    }
}
