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
//! connection, [`RateLimit::per_second`]), the log of repeated warnings
//! (one line per kind per interval, [`RateLimit::one_per`];
//! [`crate::logging::repeat`]) and the publisher's cap on the publish rate
//! (`--max-publish-rate`, a burst of a hundredth of a second,
//! [`RateLimit::per_second_burst`]; it asks how many updates conform
//! ([`RateLimit::available`]), takes what it published ([`RateLimit::take`])
//! and parks until the next one ([`RateLimit::wait_ns`])). One owner per
//! limiter (`&mut self`); time is passed in, so tests drive it without
//! waiting.

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

    /// `per_sec` events per second with a bucket `burst` events deep. A
    /// fractional burst keeps its fraction as budget (τ = (burst − 1) · T
    /// in ns), as a token bucket with a fractional depth would. Over 10⁹
    /// a second T rounds to 0: every event conforms.
    ///
    /// # Panics
    /// When `per_sec` is 0, or `burst` is below 1 or not finite.
    pub(crate) fn per_second_burst(per_sec: u64, burst: f64) -> RateLimit {
        assert!(per_sec > 0, "a rate limit of 0 means no limiter");
        assert!(
            burst.is_finite() && burst >= 1.0,
            "a burst holds one event at least"
        );
        let interval_ns = 1_000_000_000 / per_sec;
        RateLimit {
            interval_ns,
            tolerance_ns: ((burst - 1.0) * interval_ns as f64) as u64,
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

    /// How many events taken back to back at `now_ns` would conform (the
    /// bucket's whole tokens); `u64::MAX` when T is 0. Takes nothing.
    pub(crate) fn available(&self, now_ns: u64) -> u64 {
        let ahead = self.tat_ns.max(now_ns) - now_ns;
        if ahead > self.tolerance_ns {
            return 0;
        }
        if self.interval_ns == 0 {
            return u64::MAX;
        }
        (self.tolerance_ns - ahead) / self.interval_ns + 1
    }

    /// Takes `n` events' budget at `now_ns`; `n` at most what
    /// [`Self::available`] said at `now_ns`, so each of them conformed.
    pub(crate) fn take(&mut self, n: u64, now_ns: u64) {
        debug_assert!(n <= self.available(now_ns), "took more than conformed");
        self.tat_ns = self
            .tat_ns
            .max(now_ns)
            .saturating_add(n.saturating_mul(self.interval_ns));
    }

    /// Nanoseconds from `now_ns` until one more event conforms (0: now).
    pub(crate) fn wait_ns(&self, now_ns: u64) -> u64 {
        (self.tat_ns.max(now_ns) - now_ns).saturating_sub(self.tolerance_ns)
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
    fn a_batch_takes_what_is_available_and_refills_at_the_rate_up_to_the_burst() {
        // The publish cap: 1000 a second, a burst of 10.
        let mut r = RateLimit::per_second_burst(1_000, 10.0);
        assert_eq!(r.available(0), 10);
        assert_eq!(r.wait_ns(0), 0);
        r.take(10, 0);
        assert_eq!(r.available(0), 0);
        assert_eq!(r.wait_ns(0), 1_000_000, "one interval to the next");
        assert_eq!(r.available(5_000_000), 5);
        assert_eq!(r.available(SEC), 10, "never past the burst");
        // Taking part of it leaves the rest, and waits nothing.
        r.take(3, SEC);
        assert_eq!((r.available(SEC), r.wait_ns(SEC)), (7, 0));
    }

    #[test]
    fn a_fractional_burst_carries_its_fraction() {
        // 150 a second, a burst of 1.5: one at a time, the next one half an
        // interval after it (the half token left over), then one a 1/150 s.
        let t = SEC / 150;
        let mut r = RateLimit::per_second_burst(150, 1.5);
        assert_eq!(r.available(0), 1);
        r.take(1, 0);
        assert_eq!(r.wait_ns(0), t - t / 2);
        assert_eq!(r.available(t / 2 - 1), 0);
        assert_eq!(r.available(t - t / 2), 1);
        r.take(1, t - t / 2);
        assert_eq!(r.wait_ns(t - t / 2), t);
        // Idle for long: still one at a time.
        assert_eq!(r.available(100 * SEC), 1);
    }

    #[test]
    fn batches_agree_with_one_at_a_time() {
        let mut batch = RateLimit::per_second_burst(1_000, 10.0);
        let mut single = RateLimit::per_second(1_000);
        single.tolerance_ns = batch.tolerance_ns;
        for step in 0..2_000u64 {
            let now = SEC + step * 333_333;
            let n = batch.available(now).min(4);
            batch.take(n, now);
            let m = (0..4).filter(|_| single.try_take(now)).count() as u64;
            assert_eq!(n, m, "step {step}");
        }
    }

    #[test]
    fn over_a_billion_a_second_is_no_limit() {
        let mut r = RateLimit::per_second_burst(2_000_000_000, 20_000_000.0);
        assert_eq!(r.available(0), u64::MAX);
        r.take(1_000_000, 0);
        assert_eq!((r.available(0), r.wait_ns(0)), (u64::MAX, 0));
    }

    #[test]
    fn rate_one_is_one_per_second() {
        let mut r = RateLimit::per_second(1);
        assert!(r.try_take(SEC));
        assert!(!r.try_take(SEC + SEC / 2));
        assert!(r.try_take(2 * SEC));
    }
}
