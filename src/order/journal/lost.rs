//! The LSNs whose records will never be durable because the disk was full
//! when their batch was written: a short list of ranges, one per disk-full
//! episode.
//!
//! Why a list and not one mark: after a disk-full episode the journal goes
//! on (once a probe finds room), so the durable LSN passes the lost ones.
//! "Durable" is then "at or below the durable LSN *and* in no lost range".
//!
//! ```text
//!  LSN:   1 … 40 | 41 … 57 | 58 … 90 | 91 … 93 | 94 …
//!         durable| lost    | durable | lost    | pending
//!                 (40, 57]            (90, 93]
//! ```
//!
//! Bound: a range is added per episode (failures with no successful commit
//! between them merge into one), and dropped once every LSN in it is below
//! the oldest LSN anyone may still ask about ([`LostRanges::prune_below`],
//! from the gateway's oldest order not ended). At most [`MAX_LOST_RANGES`]
//! are kept; one more is refused, and the journal then stops for good
//! (`journal_error`) rather than forget a loss.
//!
//! Single writer: the journal thread adds, the gateway prunes, both under
//! the journal's state mutex.

use std::collections::VecDeque;

/// Most lost ranges kept (16 bytes each).
pub const MAX_LOST_RANGES: usize = 1024;

/// More than [`MAX_LOST_RANGES`] separate disk-full episodes with an order
/// from before the first still open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("more than {MAX_LOST_RANGES} disk-full episodes with orders from before them still open")]
pub struct TooManyLosses;

/// Ranges `(after, through]` of lost LSNs, oldest first, disjoint, each
/// above the previous one.
#[derive(Debug, Default)]
pub struct LostRanges {
    ranges: VecDeque<(u64, u64)>,
}

impl LostRanges {
    /// Records that the LSNs in `(after, through]` will never be durable.
    /// A range that meets the last one (no commit succeeded between the two
    /// failures) extends it.
    ///
    /// # Errors
    /// [`TooManyLosses`] when [`MAX_LOST_RANGES`] are kept already; nothing
    /// is recorded.
    pub fn add(&mut self, after: u64, through: u64) -> Result<(), TooManyLosses> {
        if through <= after {
            return Ok(());
        }
        if let Some(last) = self.ranges.back_mut() {
            if after <= last.1 {
                last.0 = last.0.min(after);
                last.1 = last.1.max(through);
                return Ok(());
            }
        }
        if self.ranges.len() >= MAX_LOST_RANGES {
            return Err(TooManyLosses);
        }
        self.ranges.push_back((after, through));
        Ok(())
    }

    /// Whether `lsn` is lost.
    pub fn contains(&self, lsn: u64) -> bool {
        // Newest first: the waiters of the latest episode ask most.
        self.ranges
            .iter()
            .rev()
            .any(|&(after, through)| lsn > after && lsn <= through)
    }

    /// Forgets the ranges wholly below `lsn`: no one will ask about them.
    pub fn prune_below(&mut self, lsn: u64) {
        while self.ranges.front().is_some_and(|r| r.1 < lsn) {
            self.ranges.pop_front();
        }
    }

    /// Ranges kept.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// True when no LSN is known lost.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_lsns_stay_lost_after_later_ones_are_durable() {
        let mut l = LostRanges::default();
        l.add(40, 57).unwrap();
        l.add(90, 93).unwrap();
        for lsn in [41, 57, 91, 93] {
            assert!(l.contains(lsn), "{lsn}");
        }
        for lsn in [1, 40, 58, 90, 94] {
            assert!(!l.contains(lsn), "{lsn}");
        }
    }

    #[test]
    fn failures_without_a_commit_between_them_merge() {
        let mut l = LostRanges::default();
        l.add(40, 57).unwrap();
        // The probe's failure: the durable LSN did not move.
        l.add(40, 60).unwrap();
        l.add(57, 58).unwrap();
        assert_eq!(l.len(), 1);
        assert!(l.contains(60) && !l.contains(61));
        // Nothing lost: nothing recorded.
        l.add(70, 70).unwrap();
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn ranges_below_the_oldest_open_order_are_pruned() {
        let mut l = LostRanges::default();
        l.add(10, 20).unwrap();
        l.add(30, 40).unwrap();
        l.prune_below(20);
        assert_eq!(l.len(), 2, "20 may still be asked about");
        l.prune_below(21);
        assert_eq!(l.len(), 1);
        assert!(!l.contains(15) && l.contains(35));
        l.prune_below(u64::MAX);
        assert!(l.is_empty());
    }

    #[test]
    fn capacity() {
        let mut l = LostRanges::default();
        for i in 0..MAX_LOST_RANGES as u64 {
            l.add(10 * i, 10 * i + 5).unwrap();
        }
        assert_eq!(l.add(1 << 40, (1 << 40) + 1), Err(TooManyLosses));
        assert_eq!(l.len(), MAX_LOST_RANGES);
        // Extending the last one needs no room.
        l.add(10 * (MAX_LOST_RANGES as u64 - 1), 1 << 41).unwrap();
        assert!(l.contains(1 << 41));
    }
}
