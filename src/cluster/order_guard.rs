//! Never older after newer: the edge's per-symbol order over (source
//! epoch, sequence).
//!
//! Every update and snapshot an edge takes from the backbone passes here
//! before it is written to its slot; only one strictly newer than the
//! symbol's last accepted value passes, so the slot (and every subscriber
//! behind it) sees a symbol's sequence numbers only grow — across NATS
//! reconnects, re-seeds and ingest failover.
//!
//! The rule (docs/src/decisions.md, "Backbone order"): the sequence number
//! decides, whatever the epoch. The two ingests of an A/B pair are fed the
//! same ticks, so they number a symbol's updates alike; the edge takes the
//! highest sequence it has seen from either, so a failover from A to B is
//! seamless and the slower half's copies are dropped as `duplicate` or
//! `seq_from_past`. The epoch (the ingest incarnation: its start time in
//! ns with the node id in the low bits) is recorded so a change of source
//! is counted (`tickfan_cluster_epoch_changes_total`).
//!
//! Single owner: the NATS thread of an edge. Memory: one entry per slot.

use crate::metrics::cluster_counters::BackboneDrop;
use crate::symbols::SymbolId;

/// What passing the guard means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accepted {
    /// The value came from another epoch than the symbol's previous one.
    pub epoch_changed: bool,
}

/// Per symbol, the last accepted (epoch, seq).
#[derive(Debug)]
pub(crate) struct OrderGuard {
    last: Vec<(u64, u64)>,
}

impl OrderGuard {
    /// A guard for `capacity` symbols, none seen.
    pub(crate) fn new(capacity: usize) -> Self {
        OrderGuard {
            last: vec![(0, 0); capacity],
        }
    }

    /// Accepts `(epoch, seq)` for `id` when `seq` is newer than the last
    /// accepted one, and remembers it.
    ///
    /// # Errors
    /// [`BackboneDrop::Duplicate`] for the same seq again,
    /// [`BackboneDrop::SeqFromPast`] for an older one.
    pub(crate) fn admit(
        &mut self,
        id: SymbolId,
        epoch: u64,
        seq: u64,
    ) -> Result<Accepted, BackboneDrop> {
        let last = &mut self.last[id as usize];
        if seq == last.1 {
            return Err(BackboneDrop::Duplicate);
        }
        if seq < last.1 {
            return Err(BackboneDrop::SeqFromPast);
        }
        let epoch_changed = last.1 != 0 && last.0 != epoch;
        *last = (epoch, seq);
        Ok(Accepted { epoch_changed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn newer_passes_older_and_equal_are_dropped_with_a_reason() {
        let mut g = OrderGuard::new(2);
        assert_eq!(
            g.admit(0, 1, 5),
            Ok(Accepted {
                epoch_changed: false
            })
        );
        assert_eq!(g.admit(0, 1, 5), Err(BackboneDrop::Duplicate));
        assert_eq!(g.admit(0, 1, 4), Err(BackboneDrop::SeqFromPast));
        assert_eq!(
            g.admit(0, 2, 6),
            Ok(Accepted {
                epoch_changed: true
            })
        );
        assert_eq!(
            g.admit(0, 2, 7),
            Ok(Accepted {
                epoch_changed: false
            })
        );
        // The other half of an A/B pair, behind: dropped.
        assert_eq!(g.admit(0, 1, 6), Err(BackboneDrop::SeqFromPast));
        assert_eq!(
            g.admit(1, 1, 1),
            Ok(Accepted {
                epoch_changed: false
            })
        );
    }

    proptest! {
        /// Whatever interleaving of two sources' streams arrives (duplicates,
        /// reordering, one source lagging), the accepted sequence strictly grows.
        #[test]
        fn accepted_sequence_numbers_only_grow(
            arrivals in proptest::collection::vec((1u64..3, 1u64..200), 0..300)
        ) {
            let mut g = OrderGuard::new(1);
            let mut last = 0;
            for (epoch, seq) in arrivals {
                if g.admit(0, epoch, seq).is_ok() {
                    prop_assert!(seq > last);
                    last = seq;
                }
            }
        }
    }
}
