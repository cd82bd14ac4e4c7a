//! Per-order fill sequencer with a gap timer.
//!
//! Fills of one order may arrive out of order (#3, #1, #2) or twice. The
//! sequencer applies them strictly in fill-number order:
//! - the expected fill is applied at once, then every held fill behind it;
//! - an early fill is held (bounded per order and in total; past a bound it
//!   is refused and counted — fills carry absolute values, so a later fill
//!   still brings the position up to date);
//! - a fill below the next expected number (already applied or skipped) is
//!   ignored and does not move the sequence;
//! - a gap that stays open longer than `gap_timeout` is skipped by
//!   [`Sequencers::tick`], called from the owner's own timer (default every
//!   50 ms), so it fires even when no fill arrives at all: the missing fill
//!   numbers are counted and logged, the sequence moves to the lowest held
//!   fill, and what follows is applied.
//!
//! Time is a parameter (`now_ns`), never read here: tests drive it.
//! Single owner: see [`crate::order::fills`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;

use crate::logging::repeat::warn_repeating;
use crate::model::warning::WarnKind;
use crate::order::config::SequencerConfig;

/// What an arriving fill became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// It was the expected fill: applied, with `count - 1` held fills behind it.
    Applied {
        /// Fills applied by this arrival.
        count: usize,
    },
    /// Early: held until the gap before it closes or is skipped.
    Held,
    /// Already applied, skipped, or held: ignored.
    Stale,
    /// Early, but a hold bound was reached: refused.
    Refused,
}

/// Counts since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SequencerStats {
    /// Fills applied.
    pub applied: u64,
    /// Fills held (at arrival).
    pub held: u64,
    /// Fills ignored as stale or duplicate.
    pub stale: u64,
    /// Early fills refused at a hold bound.
    pub refused: u64,
    /// Gaps skipped by the timer.
    pub gaps_skipped: u64,
    /// Fill numbers never received (skipped over).
    pub fills_missing: u64,
}

#[derive(Debug)]
struct OrderSeq<T> {
    /// The fill number applied next (1-based).
    next: u64,
    /// Early fills by number; every key is > `next`.
    held: BTreeMap<u64, T>,
    /// When the current gap (before `next`) was first seen; `Some` iff `held` is not empty.
    gap_since_ns: Option<u64>,
}

/// The sequencers of every live order.
#[derive(Debug)]
pub(crate) struct Sequencers<K, T> {
    orders: HashMap<K, OrderSeq<T>>,
    held_total: usize,
    config: SequencerConfig,
    /// Counts.
    pub stats: SequencerStats,
}

impl<K: Eq + Hash + Clone + Debug, T> Sequencers<K, T> {
    /// Empty, with `config`.
    pub(crate) fn new(config: SequencerConfig) -> Self {
        Sequencers {
            orders: HashMap::new(),
            held_total: 0,
            config,
            stats: SequencerStats::default(),
        }
    }

    /// Early fills held now, over all orders.
    pub(crate) fn held_total(&self) -> usize {
        self.held_total
    }

    /// The next fill number expected for `order` (1 before any fill).
    pub(crate) fn next_expected(&self, order: &K) -> u64 {
        self.orders.get(order).map_or(1, |s| s.next)
    }

    /// Offers fill `fill_no` of `order`; calls `apply` for every fill that
    /// becomes applicable, in fill-number order.
    pub(crate) fn arrive(
        &mut self,
        order: &K,
        fill_no: u64,
        value: T,
        now_ns: u64,
        mut apply: impl FnMut(&K, u64, T),
    ) -> Arrival {
        let seq = self
            .orders
            .entry(order.clone())
            .or_insert_with(|| OrderSeq {
                next: 1,
                held: BTreeMap::new(),
                gap_since_ns: None,
            });
        if fill_no < seq.next || seq.held.contains_key(&fill_no) {
            self.stats.stale += 1;
            return Arrival::Stale;
        }
        if fill_no > seq.next {
            if seq.held.len() >= self.config.max_held_per_order
                || self.held_total >= self.config.max_held_total
            {
                self.stats.refused += 1;
                return Arrival::Refused;
            }
            seq.held.insert(fill_no, value);
            seq.gap_since_ns.get_or_insert(now_ns);
            self.held_total += 1;
            self.stats.held += 1;
            return Arrival::Held;
        }
        apply(order, fill_no, value);
        seq.next += 1;
        let released = release(order, seq, now_ns, &mut apply);
        self.held_total -= released;
        let count = 1 + released;
        self.stats.applied += count as u64;
        Arrival::Applied { count }
    }

    /// The gap timer: skips every gap open at least `gap_timeout` at
    /// `now_ns`. Returns the number of gaps skipped.
    pub(crate) fn tick(&mut self, now_ns: u64, mut apply: impl FnMut(&K, u64, T)) -> usize {
        let timeout = self.config.gap_timeout_ns;
        let mut skipped = 0;
        for (order, seq) in self.orders.iter_mut() {
            let Some(since) = seq.gap_since_ns else {
                continue;
            };
            if now_ns.saturating_sub(since) < timeout {
                continue;
            }
            let lowest = *seq.held.keys().next().expect("a gap implies a held fill");
            let missing = lowest - seq.next;
            warn_repeating!(
                WarnKind::FillsSkipped,
                "order {order:?}: fill(s) {}..{} missing for {} ms; skipped",
                seq.next,
                lowest - 1,
                now_ns.saturating_sub(since) / 1_000_000
            );
            self.stats.gaps_skipped += 1;
            self.stats.fills_missing += missing;
            seq.next = lowest;
            let released = release(order, seq, now_ns, &mut apply);
            self.held_total -= released;
            self.stats.applied += released as u64;
            skipped += 1;
        }
        skipped
    }

    /// Early fills held now for `order`.
    pub(crate) fn held(&self, order: &K) -> usize {
        self.orders.get(order).map_or(0, |s| s.held.len())
    }

    /// Forgets a finished order and anything still held for it.
    pub(crate) fn finish(&mut self, order: &K) {
        if let Some(seq) = self.orders.remove(order) {
            self.held_total -= seq.held.len();
        }
    }
}

/// Applies held fills from `seq.next` on while they are consecutive; returns
/// how many. Restarts the gap clock when a gap remains.
fn release<K, T>(
    order: &K,
    seq: &mut OrderSeq<T>,
    now_ns: u64,
    apply: &mut impl FnMut(&K, u64, T),
) -> usize {
    let mut n = 0;
    while let Some(v) = seq.held.remove(&seq.next) {
        apply(order, seq.next, v);
        seq.next += 1;
        n += 1;
    }
    seq.gap_since_ns = if seq.held.is_empty() {
        None
    } else {
        Some(now_ns)
    };
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::fills::position::{FillValues, Positions};

    fn cfg() -> SequencerConfig {
        SequencerConfig {
            max_held_per_order: 8,
            max_held_total: 10,
            gap_timeout_ns: 200,
        }
    }

    fn run(
        seq: &mut Sequencers<u32, u64>,
        log: &mut Vec<u64>,
        order: u32,
        fill: u64,
        now: u64,
    ) -> Arrival {
        seq.arrive(&order, fill, fill * 10, now, |_, n, v| {
            assert_eq!(v, n * 10);
            log.push(n)
        })
    }

    #[test]
    fn three_one_two_applies_in_order() {
        let mut s = Sequencers::new(cfg());
        let mut log = Vec::new();
        assert_eq!(run(&mut s, &mut log, 7, 3, 0), Arrival::Held);
        assert_eq!(
            run(&mut s, &mut log, 7, 1, 0),
            Arrival::Applied { count: 1 }
        );
        assert_eq!(
            run(&mut s, &mut log, 7, 2, 0),
            Arrival::Applied { count: 2 }
        );
        assert_eq!(log, vec![1, 2, 3]);
        assert_eq!(run(&mut s, &mut log, 7, 2, 0), Arrival::Stale);
        assert_eq!(s.next_expected(&7), 4);
        assert_eq!(s.held_total(), 0);
    }

    #[test]
    fn the_timer_skips_a_gap_only_after_the_timeout() {
        let mut s = Sequencers::new(cfg());
        let mut log = Vec::new();
        run(&mut s, &mut log, 1, 1, 0);
        run(&mut s, &mut log, 1, 3, 100);
        run(&mut s, &mut log, 1, 4, 150);
        run(&mut s, &mut log, 1, 6, 150);
        assert_eq!(s.tick(299, |_, n, _| log.push(n)), 0, "open 199 ns < 200");
        assert_eq!(s.tick(300, |_, n, _| log.push(n)), 1);
        assert_eq!(log, vec![1, 3, 4], "2 skipped; 5 still missing");
        assert_eq!(
            s.tick(499, |_, n, _| log.push(n)),
            0,
            "the new gap's clock restarted at 300"
        );
        assert_eq!(s.tick(500, |_, n, _| log.push(n)), 1);
        assert_eq!(log, vec![1, 3, 4, 6]);
        assert_eq!(
            run(&mut s, &mut log, 1, 2, 600),
            Arrival::Stale,
            "a skipped fill arriving late is ignored"
        );
        assert_eq!((s.stats.gaps_skipped, s.stats.fills_missing), (2, 2));
    }

    #[test]
    fn holds_are_bounded_per_order_and_in_total() {
        let mut s = Sequencers::new(cfg());
        let mut log = Vec::new();
        for f in 2..10 {
            assert_eq!(run(&mut s, &mut log, 1, f, 0), Arrival::Held);
        }
        assert_eq!(
            run(&mut s, &mut log, 1, 10, 0),
            Arrival::Refused,
            "per order"
        );
        assert_eq!(run(&mut s, &mut log, 2, 2, 0), Arrival::Held);
        assert_eq!(run(&mut s, &mut log, 2, 3, 0), Arrival::Held);
        assert_eq!(run(&mut s, &mut log, 3, 2, 0), Arrival::Refused, "in total");
        s.finish(&1);
        assert_eq!(s.held_total(), 2);
        assert_eq!(run(&mut s, &mut log, 3, 2, 0), Arrival::Held);
    }

    mod proptests {
        use super::*;
        use proptest::prelude::*;

        fn fill(n: u64) -> FillValues<u64> {
            FillValues {
                fill_no: n,
                cum_qty: n * 100,
                cum_amount: n * 10_000 + 7,
                remaining: 10_000 - n * 100,
            }
        }

        /// Feeds `arrivals` (fill numbers of one order) and returns the fill
        /// numbers applied and the final position.
        fn feed(arrivals: &[u64], tick_at_end: bool) -> (Vec<u64>, Option<FillValues<u64>>) {
            let mut s = Sequencers::new(SequencerConfig {
                max_held_per_order: 1_000,
                max_held_total: 1_000,
                gap_timeout_ns: 200_000_000,
            });
            let mut pos = Positions::new();
            let mut applied = Vec::new();
            let mut on_apply = |o: &u32, n: u64, v: FillValues<u64>| {
                applied.push(n);
                pos.apply(o, v);
            };
            for &n in arrivals {
                s.arrive(&1, n, fill(n), 0, &mut on_apply);
            }
            if tick_at_end {
                // No traffic at all after the last fill: only the timer moves.
                let mut t = 0;
                while s.held_total() > 0 {
                    t += 50_000_000;
                    s.tick(t, &mut on_apply);
                }
            }
            (applied, pos.get(&1).copied())
        }

        proptest! {
            /// Any permutation of fills 1..=n with duplicates ends in the same
            /// position as the ordered sequence, each fill applied once, in order.
            #[test]
            fn any_order_with_duplicates_ends_in_the_ordered_position(
                (arrivals, n) in (1u64..40).prop_flat_map(|n| {
                    let dups = proptest::collection::vec(1..=n, 0..20);
                    (dups, Just(n)).prop_flat_map(move |(d, n)| {
                        let mut all: Vec<u64> = (1..=n).collect();
                        all.extend(d);
                        (Just(all).prop_shuffle(), Just(n))
                    })
                })
            ) {
                let (applied, pos) = feed(&arrivals, false);
                prop_assert_eq!(applied, (1..=n).collect::<Vec<_>>());
                prop_assert_eq!(pos, Some(fill(n)));
            }

            /// With fills missing and no more traffic, the gap timer skips the
            /// gaps; the final state is the last cumulative value received,
            /// and no fill is applied twice or out of order.
            #[test]
            fn missing_fills_are_skipped_by_the_timer(
                (arrivals, max) in (2u64..40).prop_flat_map(|n| {
                    proptest::collection::vec(proptest::bool::weighted(0.7), n as usize).prop_flat_map(move |keep| {
                        let mut got: Vec<u64> = (1..=n).filter(|i| keep[*i as usize - 1]).collect();
                        if got.is_empty() {
                            got.push(n);
                        }
                        let max = *got.iter().max().unwrap();
                        (Just(got).prop_shuffle(), Just(max))
                    })
                })
            ) {
                let (applied, pos) = feed(&arrivals, true);
                prop_assert!(applied.windows(2).all(|w| w[0] < w[1]), "{applied:?}");
                prop_assert_eq!(applied.last().copied(), Some(max));
                prop_assert_eq!(pos, Some(fill(max)));
            }
        }
    }
}
