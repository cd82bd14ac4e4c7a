//! Lanes: small orders and large orders never share a queue or a worker.
//!
//! ```text
//!                  qty ≤ threshold ─▶ small queue ─▶ small workers ×N ─▶ bridges (whole order)
//!  gateway ─route─┤
//!                  qty > threshold ─▶ large queue ─▶ large workers ×M ─▶ split into chunks
//!                                                        ▲      │       ─▶ chunk queue
//!                                                        └──────┘          ─▶ bridges in parallel
//! ```
//!
//! Head-of-line blocking is what this prevents: a 1,000-lot order that takes
//! seconds at a venue must not sit in front of the 0.5-lot orders behind it.
//! Each lane has its own bounded queue and its own workers; neither lane's
//! workers ever take the other lane's work, so each lane keeps a guaranteed
//! share (`--order-workers` small, `--large-workers` large) whatever the
//! other lane's load: a steady stream of large orders cannot take a small
//! worker, and a flood of small orders cannot take a large one. The price is
//! that an idle lane's workers stay idle (see `docs/decisions.md`).
//!
//! In the large lane a parent order is split into chunks ([`split`]) that
//! the lane's workers execute in parallel, on different bridges; the fill
//! thread ([`super::fill_thread`]) folds the chunks' fills back into the
//! parent's absolute cumulative values.
//!
//! [`LaneMode::Shared`] turns lanes off (one queue, every worker, no
//! chunking): the configuration the lanes are measured against.

use crate::bridge::Lots;

/// Which lane an order travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// At most the threshold: executed whole.
    Small,
    /// Above the threshold: split into chunks.
    Large,
}

impl Lane {
    /// Both lanes, in index order.
    pub const ALL: [Lane; 2] = [Lane::Small, Lane::Large];

    /// Index into per-lane arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable name (reports, labels).
    pub const fn as_str(self) -> &'static str {
        match self {
            Lane::Small => "small",
            Lane::Large => "large",
        }
    }
}

/// One lane or two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LaneMode {
    /// Small and large orders in separate lanes; large ones chunked.
    Split,
    /// One lane for every order, executed whole (the baseline).
    Shared,
}

/// How orders are routed and split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LaneConfig {
    /// Split or shared.
    pub mode: LaneMode,
    /// Orders above this go to the large lane.
    pub threshold: Lots,
    /// Target size of a chunk.
    pub chunk: Lots,
    /// Most chunks per order (a bigger order gets bigger chunks).
    pub max_chunks: u32,
}

impl Default for LaneConfig {
    fn default() -> Self {
        LaneConfig {
            mode: LaneMode::Split,
            threshold: Lots(100 * 100),
            chunk: Lots(100 * 100),
            max_chunks: 16,
        }
    }
}

impl LaneConfig {
    /// The lane of an order of `qty`.
    pub fn lane_of(&self, qty: Lots) -> Lane {
        match self.mode {
            LaneMode::Split if qty > self.threshold => Lane::Large,
            _ => Lane::Small,
        }
    }
}

/// Splits `qty` into chunks of about `chunk` lots, at most `max_chunks` of
/// them: `k = min(⌈qty / chunk⌉, max_chunks)` chunks whose sizes differ by
/// at most 0.01 lot and add up to `qty` exactly (larger ones first).
pub fn split(qty: Lots, chunk: Lots, max_chunks: u32) -> Vec<Lots> {
    let chunk = chunk.0.max(1);
    let k = qty
        .0
        .div_ceil(chunk)
        .clamp(1, u64::from(max_chunks.max(1)))
        .min(qty.0.max(1));
    let (base, extra) = (qty.0 / k, qty.0 % k);
    (0..k).map(|i| Lots(base + u64::from(i < extra))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn routing_is_strictly_above_the_threshold() {
        let c = LaneConfig::default();
        assert_eq!(
            c.lane_of(Lots(10_000)),
            Lane::Small,
            "100 lots is not above 100"
        );
        assert_eq!(c.lane_of(Lots(10_001)), Lane::Large);
        let shared = LaneConfig {
            mode: LaneMode::Shared,
            ..c
        };
        assert_eq!(shared.lane_of(Lots(100_000_000)), Lane::Small);
    }

    #[test]
    fn a_thousand_lots_in_ten_chunks_of_a_hundred() {
        assert_eq!(
            split(Lots(100_000), Lots(10_000), 16),
            vec![Lots(10_000); 10]
        );
        assert_eq!(
            split(Lots(10_050), Lots(10_000), 16),
            vec![Lots(5_025), Lots(5_025)]
        );
        assert_eq!(split(Lots(1_000_000), Lots(10_000), 16).len(), 16, "capped");
    }

    proptest! {
        #[test]
        fn chunks_add_up_are_even_and_bounded(qty in 1u64..100_000_000, chunk in 1u64..1_000_000, max in 1u32..64) {
            let c = split(Lots(qty), Lots(chunk), max);
            prop_assert_eq!(c.iter().map(|l| l.0).sum::<u64>(), qty);
            prop_assert!(c.len() as u32 <= max);
            prop_assert!(c.iter().all(|l| l.0 >= 1));
            let (lo, hi) = (c.iter().min().unwrap().0, c.iter().max().unwrap().0);
            prop_assert!(hi - lo <= 1);
            if (c.len() as u32) < max {
                prop_assert!(hi <= chunk, "chunks no bigger than asked unless capped");
            }
        }
    }
}
