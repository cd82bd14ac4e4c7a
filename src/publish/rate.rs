//! The optional cap on the publish rate: a token bucket refilled at
//! `per_sec` with a burst of a hundredth of a second (at least one update).
//! Conflation absorbs what the cap holds back: a symbol not taken this turn
//! is taken later at its newest value.
//!
//! Single owner: the publisher thread.

use std::time::Duration;

use crate::publish::publisher::MAX_BATCH;

/// Token bucket for the optional publish-rate cap.
#[derive(Debug)]
pub(crate) struct RateCap {
    per_sec: u64,
    tokens: f64,
    burst: f64,
    last_ns: u64,
}

impl RateCap {
    /// A cap of `per_sec` updates per second (0 = unlimited).
    pub(crate) fn new(per_sec: u64) -> Self {
        let burst = (per_sec as f64 / 100.0).max(1.0);
        RateCap {
            per_sec,
            tokens: burst,
            burst,
            last_ns: 0,
        }
    }

    /// Updates that may be taken now (MAX_BATCH when uncapped).
    pub(crate) fn available(&mut self, now_ns: u64) -> usize {
        if self.per_sec == 0 {
            return MAX_BATCH;
        }
        let dt = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        self.last_ns = now_ns;
        self.tokens = (self.tokens + dt * self.per_sec as f64).min(self.burst);
        (self.tokens as usize).min(MAX_BATCH)
    }

    /// `n` updates were taken.
    pub(crate) fn spend(&mut self, n: usize) {
        if self.per_sec != 0 {
            self.tokens -= n as f64;
        }
    }

    /// How long until one more update may be taken.
    pub(crate) fn wait(&self) -> Duration {
        if self.per_sec == 0 || self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.per_sec as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncapped_takes_a_batch_and_never_waits() {
        let mut r = RateCap::new(0);
        assert_eq!(r.available(0), MAX_BATCH);
        r.spend(MAX_BATCH);
        assert_eq!(r.wait(), Duration::ZERO);
    }

    #[test]
    fn capped_refills_at_the_rate_up_to_the_burst() {
        let mut r = RateCap::new(1000); // burst 10
        assert_eq!(r.available(0), 10);
        r.spend(10);
        assert!((r.wait().as_secs_f64() - 0.001).abs() < 1e-9);
        assert_eq!(r.available(5_000_000), 5);
        assert_eq!(r.available(1_000_000_000), 10, "never past the burst");
    }
}
