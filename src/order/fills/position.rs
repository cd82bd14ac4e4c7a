//! Positions from absolute fill values, applied idempotently.
//!
//! Every fill carries absolute cumulative values (cumulative lots, cumulative
//! amount, remaining lots), never deltas, so the reported position is simply
//! the last applied fill's values. A fill is applied only if its fill number
//! is greater than the last applied one for that order (an absent last
//! number counts as 0): applying the same fill twice, or an old one after a
//! newer, changes nothing.

use std::collections::HashMap;
use std::hash::Hash;

/// The absolute values a fill carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct FillValues<Q> {
    /// 1-based fill number within the order.
    pub fill_no: u64,
    /// Cumulative quantity filled so far.
    pub cum_qty: Q,
    /// Cumulative amount (price × quantity summed) so far.
    pub cum_amount: Q,
    /// Quantity still open.
    pub remaining: Q,
}

/// What applying a fill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// The position moved to this fill's values.
    Moved,
    /// The fill number was not above the last applied one: nothing changed.
    Unchanged,
}

/// Positions of many orders. Single owner (see the module docs of
/// [`crate::order::fills`]). Bounded by the number of live orders the caller keeps;
/// [`Positions::remove`] forgets a finished order.
#[derive(Debug)]
pub(crate) struct Positions<K, Q> {
    by_order: HashMap<K, FillValues<Q>>,
}

impl<K: Eq + Hash + Clone, Q: Copy + Default> Default for Positions<K, Q> {
    fn default() -> Self {
        Positions {
            by_order: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, Q: Copy + Default> Positions<K, Q> {
    /// No positions.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Applies `fill` to `order` if its fill number is new.
    pub(crate) fn apply(&mut self, order: &K, fill: FillValues<Q>) -> Applied {
        let last = self.by_order.get(order).map_or(0, |p| p.fill_no);
        if fill.fill_no <= last {
            return Applied::Unchanged;
        }
        self.by_order.insert(order.clone(), fill);
        Applied::Moved
    }

    /// The last applied values of `order` (none before its first fill).
    pub(crate) fn get(&self, order: &K) -> Option<&FillValues<Q>> {
        self.by_order.get(order)
    }

    /// Forgets a finished order; returns its final values.
    pub(crate) fn remove(&mut self, order: &K) -> Option<FillValues<Q>> {
        self.by_order.remove(order)
    }

    /// True when no order has a position.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(n: u64, cum: u64) -> FillValues<u64> {
        FillValues {
            fill_no: n,
            cum_qty: cum,
            cum_amount: cum * 10,
            remaining: 100 - cum,
        }
    }

    #[test]
    fn same_fill_twice_or_older_after_newer_changes_nothing() {
        let mut p = Positions::new();
        assert_eq!(p.apply(&"o1", f(1, 10)), Applied::Moved);
        assert_eq!(p.apply(&"o1", f(3, 50)), Applied::Moved);
        assert_eq!(p.apply(&"o1", f(3, 50)), Applied::Unchanged);
        assert_eq!(p.apply(&"o1", f(2, 30)), Applied::Unchanged);
        assert_eq!(p.get(&"o1"), Some(&f(3, 50)));
        assert_eq!(
            p.apply(&"o2", f(0, 5)),
            Applied::Unchanged,
            "absent last counts as 0"
        );
        assert_eq!(p.remove(&"o1"), Some(f(3, 50)));
        assert!(p.is_empty());
    }
}
