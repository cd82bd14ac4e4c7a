//! Bounded admission: the lane queues and their gauges.
//!
//! One bounded MPMC channel per lane (crossbeam's array flavour, Vyukov's
//! bounded queue) between the gateway (single producer) and that lane's
//! workers (consumers).
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

use crate::metrics::counters::set;
use crate::metrics::order_counters::OrderCounters;

use super::order::Order;
use crate::model::lane::Lane;

use crate::order::config::LaneConfig;

/// The queue was full: the order comes back, not accepted.
#[derive(Debug)]
pub(crate) struct Busy<T>(pub T);

/// Counts and stamps shared by the two sides.
#[derive(Debug)]
pub(crate) struct QueueStats {
    /// Orders taken by consumers (many writers: the workers).
    popped: CachePadded<AtomicU64>,
    /// Orders pushed (single writer: the producer).
    pushed: CachePadded<AtomicU64>,
    /// Enqueue time of order number `k` at `k % cap` (single writer: the producer).
    enq_ns: Box<[AtomicU64]>,
}

impl QueueStats {
    /// Records that a consumer took an order.
    pub(crate) fn on_take(&self) {
        self.popped.fetch_add(1, Ordering::Relaxed);
    }

    /// Orders admitted so far (the capacity view's arrivals).
    pub(crate) fn admitted(&self) -> u64 {
        self.pushed.load(Ordering::Acquire)
    }

    /// Age in ns of the oldest queued order at `now_ns` (0 when empty).
    pub(crate) fn oldest_age_ns(&self, now_ns: u64) -> u64 {
        let pushed = self.pushed.load(Ordering::Acquire);
        let popped = self.popped.load(Ordering::Relaxed);
        if popped >= pushed {
            return 0;
        }
        let slot = (popped % self.enq_ns.len() as u64) as usize;
        now_ns.saturating_sub(self.enq_ns[slot].load(Ordering::Relaxed))
    }
}

/// One lane's queue, producer side.
#[derive(Debug)]
struct LaneTx {
    tx: Sender<Order>,
    stats: Arc<QueueStats>,
    capacity: usize,
}

impl LaneTx {
    #[allow(clippy::result_large_err)] // reason: see `Admission::offer`
    fn offer(&self, order: Order) -> Result<(), Busy<Order>> {
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
}

/// One lane's queue, consumer side (clone the receiver per worker).
#[derive(Debug, Clone)]
pub(crate) struct LaneRx {
    /// The orders.
    pub rx: Receiver<Order>,
    /// Its stats (consumers count what they take).
    pub stats: Arc<QueueStats>,
}

/// The producer side (the gateway): routes each order to its lane's
/// bounded queue (see [`super`]).
#[derive(Debug)]
pub(crate) struct Admission {
    lanes: LaneConfig,
    queues: [LaneTx; 2],
}

fn lane_queue(capacity: usize) -> (LaneTx, LaneRx) {
    let capacity = capacity.max(1);
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let stats = Arc::new(QueueStats {
        popped: CachePadded::new(AtomicU64::new(0)),
        pushed: CachePadded::new(AtomicU64::new(0)),
        enq_ns: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
    });
    (
        LaneTx {
            tx,
            stats: Arc::clone(&stats),
            capacity,
        },
        LaneRx { rx, stats },
    )
}

/// A bounded queue per lane (`capacity[lane.index()]` orders each): the
/// producer side and the consumer sides, by [`Lane::index`]. In
/// [`crate::order::config::LaneMode::Shared`] the large queue exists but stays empty.
pub(crate) fn admission(lanes: LaneConfig, capacity: [usize; 2]) -> (Admission, [LaneRx; 2]) {
    let (small_tx, small_rx) = lane_queue(capacity[0]);
    let (large_tx, large_rx) = lane_queue(capacity[1]);
    (
        Admission {
            lanes,
            queues: [small_tx, large_tx],
        },
        [small_rx, large_rx],
    )
}

impl Admission {
    /// Offers an order to its lane, stamped with `order.enq_mono_ns`; sets
    /// `order.lane`.
    ///
    /// # Errors
    /// `Busy(order)` when its lane's queue is full (or the workers are gone).
    #[allow(clippy::result_large_err)] // reason: the order moves back by value; boxing it would allocate on the SYSTEM_BUSY path, which must stay cheap
    pub(crate) fn offer(&self, mut order: Order) -> Result<(), Busy<Order>> {
        order.lane = self.lanes.lane_of(order.qty);
        self.queues[order.lane.index()].offer(order)
    }

    /// The lane an order of `qty` lots takes.
    pub(crate) fn lane_of(&self, qty: crate::model::units::Lots) -> Lane {
        self.lanes.lane_of(qty)
    }

    /// Orders queued now, both lanes.
    pub(crate) fn depth(&self) -> usize {
        self.queues.iter().map(|q| q.tx.len()).sum()
    }

    /// Orders queued now in `lane`.
    pub(crate) fn lane_depth(&self, lane: Lane) -> usize {
        self.queues[lane.index()].tx.len()
    }

    /// The bound of `lane`'s queue.
    pub(crate) fn capacity_of(&self, lane: Lane) -> usize {
        self.queues[lane.index()].capacity
    }

    /// Age in ns of the oldest order queued in `lane` at `now_ns` (0 when empty).
    pub(crate) fn lane_oldest_age_ns(&self, lane: Lane, now_ns: u64) -> u64 {
        self.queues[lane.index()].stats.oldest_age_ns(now_ns)
    }

    /// Age in ns of the oldest order queued in either lane (0 when both are empty).
    pub(crate) fn oldest_age_ns(&self, now_ns: u64) -> u64 {
        Lane::ALL
            .iter()
            .map(|l| self.lane_oldest_age_ns(*l, now_ns))
            .max()
            .unwrap_or(0)
    }

    /// Writes the queue gauges (total and per lane) at `now_ns`.
    /// Single writer: the gateway thread.
    pub(crate) fn publish_gauges(&self, o: &OrderCounters, now_ns: u64) {
        set(&o.queue_depth, self.depth() as u64);
        set(&o.queue_oldest_age_us, self.oldest_age_ns(now_ns) / 1_000);
        for l in Lane::ALL {
            set(&o.lane_depth[l.index()], self.lane_depth(l) as u64);
            set(
                &o.lane_oldest_age_us[l.index()],
                self.lane_oldest_age_ns(l, now_ns) / 1_000,
            );
        }
    }

    /// Zeroes the queue gauges (intake closed).
    pub(crate) fn clear_gauges(o: &OrderCounters) {
        set(&o.queue_depth, 0);
        set(&o.queue_oldest_age_us, 0);
        for l in Lane::ALL {
            set(&o.lane_depth[l.index()], 0);
            set(&o.lane_oldest_age_us[l.index()], 0);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::units::{Lots, Side};
    use crate::order::config::LaneMode;

    pub(crate) fn order(seq: u64, enq: u64) -> Order {
        Order {
            seq,
            conn: crate::net::ConnId::from_u64(0),
            id: format!("o{seq}").into(),
            symbol: "X".into(),
            side: Side::Buy,
            qty: Lots(1),
            raw: "".into(),
            acct_key: None,
            peer: "".into(),
            recv_mono_ns: enq,
            enq_mono_ns: enq,
            deadline_ns: None,
            recv_wall_ns: 0,
            history: Vec::new(),
            next_delay: (0, 0),
            retry_due_ns: 0,
            replay: false,
            lane: Lane::Small,
            chunk: None,
            resumed: Default::default(),
            claim: Default::default(),
        }
    }

    #[test]
    fn capacity_and_busy_hands_the_order_back() {
        let (a, [small, _]) = admission(LaneConfig::default(), [2, 1]);
        let (rx, stats) = (small.rx, small.stats);
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

    #[test]
    fn each_lane_has_its_own_bound_and_gauges() {
        let (a, [small, large]) = admission(LaneConfig::default(), [1, 1]);
        let big = |seq, enq| Order {
            qty: Lots(100_000),
            ..order(seq, enq)
        };
        a.offer(big(1, 10)).unwrap();
        let Err(Busy(back)) = a.offer(big(2, 20)) else {
            panic!("the large lane holds one")
        };
        assert_eq!(back.lane, Lane::Large);
        a.offer(order(3, 30))
            .expect("a full large lane does not refuse small orders");
        assert_eq!(
            (a.lane_depth(Lane::Small), a.lane_depth(Lane::Large)),
            (1, 1)
        );
        assert_eq!(a.lane_oldest_age_ns(Lane::Large, 100), 90);
        assert_eq!(a.oldest_age_ns(100), 90);
        assert_eq!(large.rx.recv().unwrap().lane, Lane::Large);
        large.stats.on_take();
        assert_eq!(a.oldest_age_ns(100), 70, "now the small one is the oldest");
        assert_eq!(small.rx.recv().unwrap().seq, 3);
        let (shared, [s, _]) = admission(
            LaneConfig {
                mode: LaneMode::Shared,
                ..LaneConfig::default()
            },
            [4, 4],
        );
        shared.offer(big(9, 0)).unwrap();
        assert_eq!(s.rx.recv().unwrap().lane, Lane::Small, "one lane for all");
    }
}
