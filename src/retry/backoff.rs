//! Backoff policies: how long to wait before retry number `n`.
//!
//! The ceiling of retry `n` (1-based) is `min(cap, base · 2^(n−1))`; the
//! jitter mode turns the ceiling into the actual delay (after Marc Brooker,
//! "Exponential Backoff And Jitter", AWS Architecture Blog, 2015):
//!
//! | mode | delay of retry `n` |
//! |---|---|
//! | `none` | `ceiling(n)` |
//! | `full` | `random(0, ceiling(n))` (default) |
//! | `equal` | `ceiling(n)/2 + random(0, ceiling(n)/2)` |
//! | `decorrelated` | `min(cap, random(base, 3 · previous delay))`, previous starting at `base` |
//!
//! `random(a, b)` is uniform over the closed range, in nanoseconds. Full
//! jitter spreads retries that failed together over the whole window, so a
//! thousand orders failing at the same instant do not come back at the same
//! instant (the thundering herd).
//!
//! A fixed delay is `base = cap` with jitter `none`; immediate requeue is
//! `base = 0`.

use std::time::Duration;

use rand::{Rng, RngExt};

/// How the ceiling becomes a delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// Exactly the ceiling (synchronised retries: the thundering herd).
    None,
    /// Uniform in `[0, ceiling]`.
    #[default]
    Full,
    /// Half the ceiling plus uniform in `[0, ceiling/2]`.
    Equal,
    /// Uniform in `[base, 3 · previous]`, capped.
    Decorrelated,
}

impl Jitter {
    /// Stable lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Jitter::None => "none",
            Jitter::Full => "full",
            Jitter::Equal => "equal",
            Jitter::Decorrelated => "decorrelated",
        }
    }
}

/// A retry policy: base, cap, how many retries, jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Backoff {
    /// Ceiling of the first retry.
    pub base: Duration,
    /// Largest ceiling.
    pub cap: Duration,
    /// Retries after the first attempt (so at most `retries + 1` attempts in
    /// all); `u32::MAX` means no limit.
    pub retries: u32,
    /// Jitter mode.
    pub jitter: Jitter,
}

impl Default for Backoff {
    /// base 100 ms, cap 10 s, 4 retries (ceilings 100, 200, 400, 800 ms), full jitter.
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(10),
            retries: 4,
            jitter: Jitter::Full,
        }
    }
}

impl Backoff {
    /// `min(cap, base · 2^(n−1))` in ns, for retry `n ≥ 1` (`n = 0` is treated as 1).
    pub fn ceiling_ns(&self, n: u32) -> u64 {
        let base = self.base.as_nanos().min(u64::MAX as u128) as u64;
        let cap = self.cap.as_nanos().min(u64::MAX as u128) as u64;
        let shift = n.max(1) - 1;
        // base · 2^shift, saturating; a zero base stays zero for every
        // retry (immediate requeue), however many there are.
        let raw = match base {
            0 => 0,
            _ if shift >= 64 || base > u64::MAX >> shift => u64::MAX,
            _ => base << shift,
        };
        raw.min(cap)
    }

    /// May retry number `n` (1-based) be made?
    pub fn allows(&self, n: u32) -> bool {
        self.retries == u32::MAX || n <= self.retries
    }

    /// The delay before retry `n` (1-based), in ns. `prev_ns` is the delay
    /// before the previous retry (0 for the first); only the decorrelated
    /// mode uses it.
    pub fn delay_ns<R: Rng + ?Sized>(&self, n: u32, prev_ns: u64, rng: &mut R) -> u64 {
        let c = self.ceiling_ns(n);
        match self.jitter {
            Jitter::None => c,
            Jitter::Full => rng.random_range(0..=c),
            Jitter::Equal => c / 2 + rng.random_range(0..=c - c / 2),
            Jitter::Decorrelated => {
                let base = self.ceiling_ns(1);
                let cap = self.cap.as_nanos().min(u64::MAX as u128) as u64;
                let hi = prev_ns.max(base).saturating_mul(3).max(base);
                rng.random_range(base..=hi).min(cap)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn defaults_are_100_200_400_800_ms() {
        let b = Backoff::default();
        let ms: Vec<u64> = (1..=4).map(|n| b.ceiling_ns(n) / 1_000_000).collect();
        assert_eq!(ms, [100, 200, 400, 800]);
        assert!(b.allows(4) && !b.allows(5));
    }

    #[test]
    fn a_zero_base_is_immediate_for_every_retry() {
        // Found by the proptest: shifts of 63+ used to saturate a zero base
        // to the cap, so the 64th retry of an immediate policy waited `cap`.
        let b = Backoff {
            base: Duration::ZERO,
            cap: Duration::from_millis(1),
            retries: u32::MAX,
            jitter: Jitter::None,
        };
        for n in [1, 63, 64, 65, 1_000, u32::MAX] {
            assert_eq!(b.ceiling_ns(n), 0, "retry {n}");
        }
    }

    #[test]
    fn cap_and_overflow() {
        let b = Backoff {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(60),
            retries: u32::MAX,
            jitter: Jitter::None,
        };
        let s: Vec<u64> = (1..=6).map(|n| b.ceiling_ns(n) / 1_000_000_000).collect();
        assert_eq!(s, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.ceiling_ns(200), 60_000_000_000);
        assert!(b.allows(1_000_000));
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(b.delay_ns(3, 0, &mut rng), 20_000_000_000);
    }
}

#[cfg(test)]
mod proptests {
    //! Property tests: every jitter mode stays inside its documented range.
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn jitter() -> impl Strategy<Value = Jitter> {
        prop_oneof![
            Just(Jitter::None),
            Just(Jitter::Full),
            Just(Jitter::Equal),
            Just(Jitter::Decorrelated)
        ]
    }

    proptest! {
        #[test]
        fn delay_within_documented_range(
            base_ms in 0u64..10_000, cap_ms in 0u64..120_000, n in 1u32..80,
            prev_ms in 0u64..200_000, seed in any::<u64>(), j in jitter(),
        ) {
            let b = Backoff {
                base: Duration::from_millis(base_ms),
                cap: Duration::from_millis(cap_ms),
                retries: 4,
                jitter: j,
            };
            let c = b.ceiling_ns(n);
            let exact = (base_ms as u128 * 1_000_000) << (n - 1).min(100);
            prop_assert_eq!(c as u128, exact.min(cap_ms as u128 * 1_000_000));
            let mut rng = StdRng::seed_from_u64(seed);
            let d = b.delay_ns(n, prev_ms * 1_000_000, &mut rng);
            match j {
                Jitter::None => prop_assert_eq!(d, c),
                Jitter::Full => prop_assert!(d <= c),
                Jitter::Equal => prop_assert!(d >= c / 2 && d <= c),
                Jitter::Decorrelated => {
                    let cap = cap_ms * 1_000_000;
                    let base = b.ceiling_ns(1);
                    prop_assert!(d <= cap);
                    prop_assert!(d >= base.min(cap));
                    prop_assert!(d <= (prev_ms * 1_000_000).max(base) * 3);
                }
            }
        }

        #[test]
        fn ceilings_never_decrease(base_ms in 1u64..10_000, cap_ms in 1u64..120_000, n in 1u32..70) {
            let b = Backoff {
                base: Duration::from_millis(base_ms),
                cap: Duration::from_millis(cap_ms),
                retries: u32::MAX,
                jitter: Jitter::Full,
            };
            prop_assert!(b.ceiling_ns(n + 1) >= b.ceiling_ns(n));
        }

        #[test]
        fn full_jitter_spreads_over_the_window(seed in any::<u64>()) {
            // 1,000 retries of the same number: not all in one tenth of the window.
            let b = Backoff::default();
            let mut rng = StdRng::seed_from_u64(seed);
            let c = b.ceiling_ns(3);
            let mut buckets = [0u32; 10];
            for _ in 0..1_000 {
                let d = b.delay_ns(3, 0, &mut rng);
                buckets[((d * 10) / (c + 1)) as usize] += 1;
            }
            prop_assert!(buckets.iter().all(|&k| k < 200), "{:?}", buckets);
        }
    }
}
