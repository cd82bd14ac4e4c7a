//! Chunking: how a large order is split into chunks ([`split`]). Which
//! lane an order of a given quantity takes is its settings'
//! ([`LaneConfig::lane_of`], strictly above the threshold → large), read by
//! the gateway's admission and by recovery too.
//!
//! [`LaneMode::Shared`] turns lanes off (one queue, every worker, no
//! chunking): the configuration the lanes are measured against.

use crate::model::units::Lots;
#[cfg(doc)]
use crate::order::config::{LaneConfig, LaneMode};

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
    use crate::model::lane::Lane;
    use crate::order::config::{LaneConfig, LaneMode};
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
