//! Prometheus histogram buckets derived from an HDR histogram.
//!
//! The engine measures every stage into HdrHistogram recorders (nanoseconds,
//! 3 significant digits) and the reporter merges them into cumulative totals
//! since start. `/metrics` shows each stage as a Prometheus *histogram* in
//! seconds: fixed `le` bounds from 1 µs to 10 s (1, 2.5 and 5 per decade),
//! `_sum` and `_count`. The HDR percentiles themselves stay in `/report`.
//!
//! # Invariants
//! - Bucket counts are cumulative (`le` ascending, each ≥ the one before) and
//!   the `+Inf` bucket equals `_count`, as the exposition format requires.
//! - Built from the cumulative totals, every bucket, `_sum` and `_count` only
//!   ever grow between scrapes, so `rate()` and `histogram_quantile()` work.
//!
//! # Implementation notes
//! An HDR value stands for a small range of equivalent values (0.1 % wide at
//! 3 digits). A value is counted in the first bucket whose bound is at least
//! the *lowest* value of its range, so a bound is exact to HDR's precision.
//! `_sum` adds each range's median (what HDR's own mean uses), in integer
//! nanoseconds, so it is monotonic too.

use hdrhistogram::Histogram;

/// Upper bounds of the finite buckets: (nanoseconds, `le` label in seconds).
pub(crate) const BUCKETS: [(u64, &str); 22] = [
    (1_000, "0.000001"),
    (2_500, "0.0000025"),
    (5_000, "0.000005"),
    (10_000, "0.00001"),
    (25_000, "0.000025"),
    (50_000, "0.00005"),
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
];

/// One stage's histogram in Prometheus's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LatencyBuckets {
    /// Values at or below each bound of [`BUCKETS`], cumulative.
    pub cumulative: [u64; BUCKETS.len()],
    /// Every value (the `+Inf` bucket and `_count`).
    pub count: u64,
    /// Sum of the values, nanoseconds (`_sum` is this in seconds).
    pub sum_ns: u128,
}

impl LatencyBuckets {
    /// Buckets of a histogram of nanosecond values.
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        let mut per_bucket = [0u64; BUCKETS.len()];
        let mut count = 0u64;
        let mut sum_ns = 0u128;
        for v in h.iter_recorded() {
            let n = v.count_at_value();
            let at = v.value_iterated_to();
            let low = h.lowest_equivalent(at);
            if let Some(i) = BUCKETS.iter().position(|(le, _)| low <= *le) {
                per_bucket[i] += n;
            }
            count += n;
            sum_ns += u128::from(h.median_equivalent(at)) * u128::from(n);
        }
        let mut cumulative = [0u64; BUCKETS.len()];
        let mut running = 0u64;
        for (c, n) in cumulative.iter_mut().zip(per_bucket) {
            running += n;
            *c = running;
        }
        LatencyBuckets {
            cumulative,
            count,
            sum_ns,
        }
    }

    /// `_sum` in seconds.
    pub(crate) fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stage::new_histogram;

    #[test]
    fn values_land_in_the_first_bucket_at_or_above_them() {
        let mut h = new_histogram();
        h.record(1_000).unwrap(); // exactly 1 µs
        h.record(1_001).unwrap(); // just above: 2.5 µs bucket
        h.record(40_000_000).unwrap(); // 40 ms: 50 ms bucket
        h.record(30_000_000_000).unwrap(); // 30 s: past 10 s, only +Inf
        let b = LatencyBuckets::of(&h);
        assert_eq!(b.count, 4);
        assert_eq!(b.cumulative[0], 1, "le 1 µs");
        assert_eq!(b.cumulative[1], 2, "le 2.5 µs");
        assert_eq!(b.cumulative[13], 2, "le 25 ms");
        assert_eq!(b.cumulative[14], 3, "le 50 ms");
        assert_eq!(b.cumulative[BUCKETS.len() - 1], 3, "le 10 s");
        let want = 1_000.0 + 1_001.0 + 40e6 + 30e9;
        assert!((b.sum_ns as f64 - want).abs() / want < 1e-3, "{}", b.sum_ns);
    }

    #[test]
    fn cumulative_and_monotonic_as_the_totals_grow() {
        let mut h = new_histogram();
        let mut before = LatencyBuckets::of(&h);
        assert_eq!(before, LatencyBuckets::default());
        for round in 1..50u64 {
            for v in [round * 37, round * 7_919, round * 1_000_003] {
                h.record(v).unwrap();
            }
            let now = LatencyBuckets::of(&h);
            assert!(now.cumulative.windows(2).all(|w| w[0] <= w[1]));
            assert!(now.cumulative[BUCKETS.len() - 1] <= now.count);
            assert!(now
                .cumulative
                .iter()
                .zip(before.cumulative)
                .all(|(a, b)| *a >= b));
            assert!(now.count > before.count && now.sum_ns > before.sum_ns);
            before = now;
        }
    }

    #[test]
    fn labels_are_the_bounds_in_seconds() {
        for (ns, label) in BUCKETS {
            let s: f64 = label.parse().unwrap();
            assert!((s * 1e9 - ns as f64).abs() < 1e-3, "{label} vs {ns}");
        }
    }
}
