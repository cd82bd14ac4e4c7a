//! Bounded admission: the main order queue and its gauges.
//!
//! A bounded MPMC channel (crossbeam's array flavour, Vyukov's bounded
//! queue) between the gateway (single producer) and the workers (consumers).
//! [`Admission::offer`] never blocks and never drops: a full queue hands the
//! order back as `Err(Busy(order))` and the gateway answers `SYSTEM_BUSY`.
//!
//! Gauges: depth is the channel's length; the age of the oldest queued order
//! comes from a ring of enqueue times indexed by admission count modulo the
//! capacity. Slot `pushed % cap` is written only after a successful push,
//! when at most `cap` orders are queued, so it never overwrites the stamp of
//! an order still queued. Consumers count what they took (`popped`, a
//! many-writer `fetch_add`); the oldest queued order is number `popped`. The
//! count may lag a pop by an instant, so the gauge may briefly show the age
//! of an order just taken: an over-estimate, never an under-estimate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use crossbeam_utils::CachePadded;

use super::types::Order;

/// The queue was full: the order comes back, not accepted.
#[derive(Debug)]
pub struct Busy<T>(pub T);

/// Counts and stamps shared by the two sides.
#[derive(Debug)]
pub struct QueueStats {
    /// Orders taken by consumers (many writers: the workers).
    popped: CachePadded<AtomicU64>,
    /// Orders pushed (single writer: the producer).
    pushed: CachePadded<AtomicU64>,
    /// Enqueue time of order number `k` at `k % cap` (single writer: the producer).
    enq_ns: Box<[AtomicU64]>,
}

impl QueueStats {
    /// Records that a consumer took an order.
    pub fn on_take(&self) {
        self.popped.fetch_add(1, Ordering::Relaxed);
    }

    /// Age in ns of the oldest queued order at `now_ns` (0 when empty).
    pub fn oldest_age_ns(&self, now_ns: u64) -> u64 {
        let pushed = self.pushed.load(Ordering::Acquire);
        let popped = self.popped.load(Ordering::Relaxed);
        if popped >= pushed {
            return 0;
        }
        let slot = (popped % self.enq_ns.len() as u64) as usize;
        now_ns.saturating_sub(self.enq_ns[slot].load(Ordering::Relaxed))
    }
}

/// The producer side (the gateway).
#[derive(Debug)]
pub struct Admission {
    tx: Sender<Order>,
    stats: Arc<QueueStats>,
    capacity: usize,
}

/// A bounded queue of `capacity` orders: the producer side, the consumer
/// receiver (clone it per worker) and the shared stats.
pub fn admission(capacity: usize) -> (Admission, Receiver<Order>, Arc<QueueStats>) {
    let capacity = capacity.max(1);
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let stats = Arc::new(QueueStats {
        popped: CachePadded::new(AtomicU64::new(0)),
        pushed: CachePadded::new(AtomicU64::new(0)),
        enq_ns: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
    });
    (
        Admission {
            tx,
            stats: Arc::clone(&stats),
            capacity,
        },
        rx,
        stats,
    )
}

impl Admission {
    /// Offers an order, stamped with `order.enq_mono_ns`.
    ///
    /// # Errors
    /// `Busy(order)` when the queue is full (or the workers are gone).
    #[allow(clippy::result_large_err)] // reason: the order moves back by value; boxing it would allocate on the SYSTEM_BUSY path, which must stay cheap
    pub fn offer(&self, order: Order) -> Result<(), Busy<Order>> {
        let stamp = order.enq_mono_ns;
        match self.tx.try_send(order) {
            Ok(()) => {
                let k = self.stats.pushed.load(Ordering::Relaxed);
                self.stats.enq_ns[(k % self.capacity as u64) as usize]
                    .store(stamp, Ordering::Relaxed);
                // Release: pairs with the Acquire in `oldest_age_ns`, so a
                // reader that sees the count sees the stamp.
                self.stats.pushed.store(k + 1, Ordering::Release);
                Ok(())
            }
            Err(TrySendError::Full(o)) | Err(TrySendError::Disconnected(o)) => Err(Busy(o)),
        }
    }

    /// Orders queued now.
    pub fn depth(&self) -> usize {
        self.tx.len()
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The shared stats.
    pub fn stats(&self) -> &Arc<QueueStats> {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::{Lots, Side};

    pub(crate) fn order(seq: u64, enq: u64) -> Order {
        Order {
            seq,
            conn: 0,
            id: format!("o{seq}").into(),
            symbol: "X".into(),
            side: Side::Buy,
            qty: Lots(1),
            raw: "".into(),
            peer: "".into(),
            recv_mono_ns: enq,
            enq_mono_ns: enq,
            deadline_ns: None,
            recv_wall_ns: 0,
            history: Vec::new(),
            next_delay: (0, 0),
            replay: false,
        }
    }

    #[test]
    fn capacity_and_busy_hands_the_order_back() {
        let (a, rx, stats) = admission(2);
        a.offer(order(1, 10)).unwrap();
        a.offer(order(2, 20)).unwrap();
        let Err(Busy(back)) = a.offer(order(3, 30)) else {
            panic!("third fits in a queue of 2")
        };
        assert_eq!(back.seq, 3);
        assert_eq!(a.depth(), 2);
        assert_eq!(stats.oldest_age_ns(100), 90);
        assert_eq!(rx.recv().unwrap().seq, 1);
        stats.on_take();
        assert_eq!(stats.oldest_age_ns(100), 80);
        a.offer(order(3, 30)).unwrap();
        assert_eq!(
            stats.oldest_age_ns(100),
            80,
            "a failed push left the stamps alone"
        );
        rx.recv().unwrap();
        stats.on_take();
        rx.recv().unwrap();
        stats.on_take();
        assert_eq!(stats.oldest_age_ns(100), 0);
    }
}
