//! A counting bound shared by several threads: a stage that holds at most
//! `capacity` items across its queues takes a permit before accepting one
//! and gives it back when the item leaves.
//!
//! Many writers by design (workers take, a worker gives back), so this is a
//! compare-and-swap counter, not a single-writer one. Used for the retry
//! stage: an order holds a permit from the moment a worker parks it until a
//! worker takes it back, so the delay queue and the hand-off channels around
//! it can never hold more than `capacity` orders in all.

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;

/// At most `capacity` permits out at once.
#[derive(Debug)]
pub(crate) struct Permits {
    used: CachePadded<AtomicUsize>,
    capacity: usize,
}

impl Permits {
    /// `capacity` permits (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        Permits {
            used: CachePadded::new(AtomicUsize::new(0)),
            capacity: capacity.max(1),
        }
    }

    /// Takes a permit; false when all are out.
    pub(crate) fn try_acquire(&self) -> bool {
        // Relaxed: the permit guards a count, not data; the item itself
        // travels through a channel that synchronises.
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                (u < self.capacity).then_some(u + 1)
            })
            .is_ok()
    }

    /// Gives a permit back.
    pub(crate) fn release(&self) {
        let prev = self.used.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(prev > 0, "permit released twice");
    }

    /// Permits out now.
    pub(crate) fn in_use(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity() {
        let p = Permits::new(2);
        assert!(p.try_acquire() && p.try_acquire());
        assert!(!p.try_acquire());
        p.release();
        assert_eq!(p.in_use(), 1);
        assert!(p.try_acquire());
    }

    #[test]
    fn mpmc_never_exceeds_capacity() {
        let p = std::sync::Arc::new(Permits::new(3));
        let max = std::sync::Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let (p, max) = (p.clone(), max.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        if p.try_acquire() {
                            max.fetch_max(p.in_use(), Ordering::Relaxed);
                            p.release();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(max.load(Ordering::Relaxed) <= 3);
        assert_eq!(p.in_use(), 0);
    }
}
