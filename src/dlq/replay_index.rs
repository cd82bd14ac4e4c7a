//! The replay index: replayable dead-lettered orders by id, the newest
//! `capacity` kept, in O(1) per insert, removal and eviction.
//!
//! A restart streams every record of the dead-letter file through
//! [`ReplayIndex::insert`], so the cost per record must not grow with the
//! capacity (an `IndexMap`'s `shift_remove` is O(capacity): 200,000
//! records into a 10,000-id index took minutes). The arrival order is a
//! queue of `(seq, id)`; removing an id leaves its queue entry behind as a
//! stale one (its `seq` no longer matches the map's), skipped at eviction
//! and dropped by a compaction once the queue holds twice the capacity.
//!
//! Invariants: `by_id.len() <= capacity`; `order.len() <= 2·capacity + 1`
//! (capacity at least 1); every id of `by_id` has exactly one live entry in
//! `order`, and the live entries are in insertion order.

use std::collections::{HashMap, VecDeque};

use super::DeadLetter;

/// Replayable orders by id, oldest first, bounded.
#[derive(Debug, Default)]
pub(crate) struct ReplayIndex {
    capacity: usize,
    by_id: HashMap<String, (u64, DeadLetter)>,
    order: VecDeque<(u64, String)>,
    next_seq: u64,
}

impl ReplayIndex {
    /// An index of at most `capacity` (at least 1) ids.
    pub(crate) fn new(capacity: usize) -> Self {
        ReplayIndex {
            capacity: capacity.max(1),
            ..ReplayIndex::default()
        }
    }

    fn live(&self, seq: u64, id: &str) -> bool {
        self.by_id.get(id).is_some_and(|(s, _)| *s == seq)
    }

    /// Adds (or moves to the newest place) `id`, evicting the oldest id
    /// past the capacity.
    pub(crate) fn insert(&mut self, id: String, rec: DeadLetter) {
        self.next_seq += 1;
        let seq = self.next_seq;
        self.by_id.insert(id.clone(), (seq, rec));
        self.order.push_back((seq, id));
        while self.by_id.len() > self.capacity.max(1) {
            let (s, old) = self.order.pop_front().expect("a live entry per id");
            if self.live(s, &old) {
                self.by_id.remove(&old);
            }
        }
        self.compact();
    }

    /// Takes `id` out.
    pub(crate) fn remove(&mut self, id: &str) -> Option<DeadLetter> {
        let rec = self.by_id.remove(id).map(|(_, r)| r);
        self.compact();
        rec
    }

    /// The record of `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&DeadLetter> {
        self.by_id.get(id).map(|(_, r)| r)
    }

    /// Every id, oldest first.
    pub(crate) fn ids(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|(s, id)| self.live(*s, id))
            .map(|(_, id)| id.clone())
            .collect()
    }

    fn compact(&mut self) {
        if self.order.len() > 2 * self.capacity.max(1) {
            let by_id = &self.by_id;
            self.order
                .retain(|(s, id)| by_id.get(id).is_some_and(|(q, _)| q == s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str) -> DeadLetter {
        let mut r = DeadLetter::refused("order", "p", "x", b"NEW", 3, 1);
        r.order_id = Some(id.into());
        r
    }

    #[test]
    fn newest_capacity_ids_in_insertion_order_and_bounded() {
        let mut ix = ReplayIndex::new(3);
        for i in 0..1000 {
            let id = format!("o{i}");
            ix.insert(id.clone(), rec(&id));
            if i % 3 == 0 {
                ix.remove(&id);
            }
            assert!(ix.by_id.len() <= 3 && ix.order.len() <= 7);
        }
        // o999 evicted o995 when it came, then was removed itself.
        assert_eq!(ix.ids(), ["o997", "o998"]);
        ix.insert("o995".into(), rec("o995"));
        assert_eq!(ix.ids(), ["o997", "o998", "o995"]);
        // Re-inserting moves an id to the newest place.
        ix.insert("o998".into(), rec("o998"));
        assert_eq!(ix.ids(), ["o997", "o995", "o998"]);
        assert_eq!(
            ix.remove("o997").and_then(|r| r.order_id).as_deref(),
            Some("o997")
        );
        assert!(ix.get("o997").is_none() && ix.get("o998").is_some());
        assert_eq!(ix.ids(), ["o995", "o998"]);
    }

    #[test]
    fn many_records_through_a_large_index_take_constant_time_each() {
        // Not a timing assertion: with O(capacity) per record this test
        // would run for many minutes; here it is a second or two.
        let mut ix = ReplayIndex::new(30_000);
        for i in 0..300_000u32 {
            let id = i.to_string();
            ix.insert(id.clone(), rec(&id));
        }
        assert_eq!(ix.ids().len(), 30_000);
        assert_eq!(ix.ids()[0], "270000");
    }
}
