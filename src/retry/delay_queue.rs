//! A bounded delay queue: items ordered by due time, taken only once due.
//!
//! A binary min-heap keyed by `(due_ns, seq)`; `seq` is a push counter, so
//! items due at the same instant come out in the order they went in. An
//! item put back with [`DelayQueue::push_front`] (taken, then refused by its
//! consumer) gets a sequence below every pushed one, so it keeps its place.
//! Capacity is fixed at construction and the heap never grows past it: a push
//! into a full queue hands the item back ([`Full`]) and the caller applies
//! its policy (the order path dead-letters the order with
//! `retry_queue_full`; see `docs/src/decisions.md`).
//!
//! Single owner (the timer thread); not shared.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The queue was full; the item is handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full<T>(pub T);

#[derive(Debug)]
struct Entry<T> {
    due_ns: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.due_ns, self.seq) == (other.due_ns, other.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed: the heap's maximum is the earliest due (then the first pushed).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due_ns, other.seq).cmp(&(self.due_ns, self.seq))
    }
}

/// Items waiting for their due time. Invariant: `len() <= capacity()`.
#[derive(Debug)]
pub struct DelayQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    capacity: usize,
    /// Next push sequence; starts in the middle of the range.
    seq: u64,
    /// Next put-back sequence; counts down from the middle.
    front_seq: u64,
}

impl<T> DelayQueue<T> {
    /// An empty queue holding at most `capacity` items (at least 1); the
    /// storage is allocated once, here.
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        DelayQueue {
            heap: BinaryHeap::with_capacity(capacity),
            capacity,
            seq: 1 << 63,
            front_seq: (1 << 63) - 1,
        }
    }

    /// Adds `item`, due at `due_ns`.
    ///
    /// # Errors
    /// [`Full`] with the item when the queue holds `capacity` items.
    pub fn push(&mut self, due_ns: u64, item: T) -> Result<(), Full<T>> {
        if self.heap.len() >= self.capacity {
            return Err(Full(item));
        }
        self.seq += 1;
        self.heap.push(Entry {
            due_ns,
            seq: self.seq,
            item,
        });
        Ok(())
    }

    /// Puts back an item just taken with [`pop_due`](Self::pop_due), ahead
    /// of every other item due at the same instant.
    ///
    /// # Errors
    /// [`Full`] with the item when the queue is full.
    pub fn push_front(&mut self, due_ns: u64, item: T) -> Result<(), Full<T>> {
        if self.heap.len() >= self.capacity {
            return Err(Full(item));
        }
        self.front_seq -= 1;
        self.heap.push(Entry {
            due_ns,
            seq: self.front_seq,
            item,
        });
        Ok(())
    }

    /// Takes the earliest item if it is due at `now_ns` (due ≤ now).
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        if self.heap.peek()?.due_ns > now_ns {
            return None;
        }
        self.heap.pop().map(|e| (e.due_ns, e.item))
    }

    /// Due time of the earliest item.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.due_ns)
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Most items it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Takes every item, due or not, earliest first (shutdown).
    pub fn drain_all(&mut self) -> Vec<(u64, T)> {
        let mut out = Vec::with_capacity(self.heap.len());
        while let Some(e) = self.heap.pop() {
            out.push((e.due_ns, e.item));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn capacity_hands_the_item_back() {
        let mut q = DelayQueue::with_capacity(2);
        q.push(5, 'a').unwrap();
        q.push(1, 'b').unwrap();
        assert_eq!(q.push(0, 'c'), Err(Full('c')));
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_due(1), Some((1, 'b')));
        q.push(0, 'c').unwrap();
        assert_eq!(q.pop_due(0), Some((0, 'c')));
    }

    #[test]
    fn nothing_comes_out_early_and_ties_keep_push_order() {
        let mut q = DelayQueue::with_capacity(8);
        q.push(10, 1).unwrap();
        q.push(10, 2).unwrap();
        q.push(3, 0).unwrap();
        assert_eq!(q.next_due(), Some(3));
        assert_eq!(q.pop_due(2), None);
        assert_eq!(q.pop_due(10), Some((3, 0)));
        assert_eq!(q.pop_due(10), Some((10, 1)));
        assert_eq!(q.pop_due(10), Some((10, 2)));
        assert_eq!(q.pop_due(u64::MAX), None);
    }

    proptest! {
        /// Whatever the pushes and clock steps, items come out in due order,
        /// never before due, and none is lost or duplicated.
        #[test]
        fn linearizable_against_a_sorted_model(
            dues in proptest::collection::vec(0u64..1_000, 0..64),
            steps in proptest::collection::vec(1u64..200, 1..20),
        ) {
            let mut q = DelayQueue::with_capacity(64);
            for (i, d) in dues.iter().enumerate() {
                q.push(*d, i).unwrap();
            }
            let mut now = 0;
            let mut out = Vec::new();
            for s in steps.iter().chain(std::iter::once(&1_000)) {
                now += s;
                while let Some((due, i)) = q.pop_due(now) {
                    prop_assert!(due <= now);
                    out.push((due, i));
                }
            }
            let mut model: Vec<(u64, usize)> = dues.iter().copied().zip(0..).collect();
            model.sort();
            prop_assert_eq!(out, model);
        }
    }
}
