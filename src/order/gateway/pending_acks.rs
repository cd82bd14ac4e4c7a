//! Orders journaled but not yet durable: the gateway holds each accepted
//! order here, in admission order, until the journal reports its LSN
//! durable; only then is it offered to its lane and its `ACK` written. An
//! `ACK` therefore never promises an order the journal could lose.
//!
//! Owned by the gateway thread alone. The journal thread rings the
//! gateway's waker after each commit, so a held order is released within a
//! loop turn of its sync.
//!
//! Room: an order is held only if its lane's queue has room for it and
//! every order held before it in that lane, so a released order normally
//! finds its place; if the lane is full anyway (recovered orders, which are
//! re-queued at start whatever the queue's room), the release stops and
//! waits for a later turn, keeping admission order.
//!
//! Recovered orders (accepted before a restart, not terminal in the
//! journal) enter at the front, already durable, with no connection to
//! answer.
//!
//! It also knows the LSN of every released order not yet ended, so the
//! journal can retire the segments whose orders have all ended
//! ([`PendingAcks::publish_oldest_live`]); bounded by the orders in flight.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crate::model::lane::Lane;
use crate::order::msg::journal::{Durability, JournalHandle, Loss};
use crate::order::msg::order::Order;

/// An order waiting for its LSN to be durable.
#[derive(Debug)]
struct Held {
    /// Its `Accepted` record's LSN (0: recovered, durable already).
    lsn: u64,
    order: Order,
    /// Known lost already (put back while the intake closes).
    lost: Option<Loss>,
}

/// What the front of the hold has become.
#[derive(Debug)]
pub(super) enum Released {
    /// Durable: offer it and `ACK` it (`recovered`: no one to `ACK`).
    Durable {
        /// The order.
        order: Order,
        /// Its `Accepted` record's LSN (0: recovered).
        lsn: u64,
        /// Recovered at start (no `ACK` owed).
        recovered: bool,
    },
    /// Its record will never be durable: `REJECT … journal_full` (the disk
    /// was full: the record was cut off) or `journal_error` (a disk error).
    Lost(Order, Loss),
}

/// The held orders and the journal they wait on.
#[derive(Debug)]
pub(crate) struct PendingAcks {
    journal: JournalHandle,
    held: VecDeque<Held>,
    /// Held orders per lane (by [`Lane::index`]).
    per_lane: [usize; 2],
    /// Released orders not ended: id → its `Accepted` LSN (0: recovered).
    live: HashMap<Arc<str>, u64>,
    /// The same LSNs with their counts (several recovered orders share 0).
    live_lsns: BTreeMap<u64, u32>,
    /// The end of the last commit an `ack_release` was sampled for.
    sampled_commit_ns: u64,
}

impl PendingAcks {
    /// An empty hold on `journal`, with `recovered` orders (lane set) to
    /// re-queue first, in admission order.
    pub(crate) fn new(journal: JournalHandle, recovered: Vec<Order>) -> Self {
        let mut p = PendingAcks {
            journal,
            held: VecDeque::with_capacity(recovered.len().max(64)),
            per_lane: [0; 2],
            live: HashMap::new(),
            live_lsns: BTreeMap::new(),
            sampled_commit_ns: 0,
        };
        for order in recovered {
            p.hold(0, order);
        }
        p
    }

    /// The journal.
    pub(super) fn journal(&self) -> &JournalHandle {
        &self.journal
    }

    /// An `ACK` was just released: the end of the journal's last commit
    /// (measurement clock), once per commit — the start of stage
    /// `ack_release`. `None` for the second `ACK` after the same commit,
    /// or while commits are not measured. The last commit may be later
    /// than the one that made this order durable, when two ended before
    /// the gateway woke: the sample is then short by the gap.
    pub(super) fn commit_to_sample(&mut self) -> Option<u64> {
        let at = self.journal.durable_at_ns();
        if at == 0 || at == self.sampled_commit_ns {
            return None;
        }
        self.sampled_commit_ns = at;
        Some(at)
    }

    /// Orders held in `lane`.
    pub(super) fn held_in(&self, lane: Lane) -> usize {
        self.per_lane[lane.index()]
    }

    /// Orders held in all.
    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    /// Holds `order` (its lane set) until `lsn` is durable.
    pub(super) fn hold(&mut self, lsn: u64, order: Order) {
        self.per_lane[order.lane.index()] += 1;
        self.held.push_back(Held {
            lsn,
            order,
            lost: None,
        });
    }

    /// Puts back a released order (its lane was full, or the intake is
    /// closing), at the front; `lost`: it was released as lost.
    pub(super) fn put_back(&mut self, order: Order, lsn: u64, lost: Option<Loss>) {
        self.per_lane[order.lane.index()] += 1;
        self.held.push_front(Held { lsn, order, lost });
    }

    /// The front order if it is durable or lost, else `None`.
    pub(super) fn next(&mut self) -> Option<Released> {
        let front = self.held.front()?;
        let fate = match front.lost {
            Some(loss) => Durability::Lost(loss),
            None => self.journal.outcome(front.lsn),
        };
        let released = match fate {
            Durability::Pending => return None,
            Durability::Durable => {
                let h = self.held.pop_front()?;
                Released::Durable {
                    order: h.order,
                    lsn: h.lsn,
                    recovered: h.lsn == 0,
                }
            }
            Durability::Lost(loss) => Released::Lost(self.held.pop_front()?.order, loss),
        };
        let o = match &released {
            Released::Durable { order, .. } | Released::Lost(order, _) => order,
        };
        self.per_lane[o.lane.index()] -= 1;
        Some(released)
    }

    /// `id`, accepted at `lsn` (0: recovered), was offered to its lane.
    pub(super) fn started(&mut self, id: &Arc<str>, lsn: u64) {
        if self.live.insert(Arc::clone(id), lsn).is_none() {
            *self.live_lsns.entry(lsn).or_default() += 1;
        }
    }

    /// `id` ended (its terminal reply went out).
    pub(super) fn ended(&mut self, id: &str) {
        let Some(lsn) = self.live.remove(id) else {
            return;
        };
        if let Some(n) = self.live_lsns.get_mut(&lsn) {
            *n -= 1;
            if *n == 0 {
                self.live_lsns.remove(&lsn);
            }
        }
    }

    /// Tells the journal the LSN of the oldest order not ended (held or
    /// released), so it may retire the segments before it.
    pub(super) fn publish_oldest_live(&self) {
        let released = self.live_lsns.keys().next().copied();
        let held = self.held.front().map(|h| h.lsn);
        let oldest = released.into_iter().chain(held).min().unwrap_or(u64::MAX);
        self.journal.set_oldest_live(oldest);
    }

    /// Takes every held order (shutdown: none will be offered).
    pub(super) fn take_all(&mut self) -> Vec<Order> {
        self.per_lane = [0; 2];
        self.held.drain(..).map(|h| h.order).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::metrics::order_counters::OrderCounters;
    use crate::order::msg::journal::{AppendError, JournalLink};
    use crate::order::msg::record::tests::samples;
    use crate::order::msg::record::Record;

    /// A small order with admission number `seq` (the lanes' test order).
    fn order(seq: u64) -> Order {
        crate::order::msg::admission::tests::order(seq, 0)
    }

    /// A journal whose outcomes the test sets: every append is pending
    /// until `settle` says what became of it.
    #[derive(Debug, Default)]
    struct Scripted {
        outcomes: Mutex<Vec<Durability>>,
    }

    impl Scripted {
        fn settle(&self, lsn: u64, d: Durability) {
            self.outcomes.lock().unwrap()[lsn as usize - 1] = d;
        }
    }

    impl JournalLink for Scripted {
        fn append(&self, _: &Record) -> Result<u64, AppendError> {
            let mut o = self.outcomes.lock().unwrap();
            o.push(Durability::Pending);
            Ok(o.len() as u64)
        }
        fn outcome(&self, lsn: u64) -> Durability {
            match lsn.checked_sub(1) {
                // LSN 0 (a recovered order) is durable, as in the journal.
                None => Durability::Durable,
                Some(i) => self.outcomes.lock().unwrap()[i as usize],
            }
        }
        fn wait_durable(&self, lsn: u64) -> bool {
            self.outcome(lsn) == Durability::Durable
        }
        fn set_oldest_live(&self, _: u64) {}
        fn is_disk_full(&self) -> bool {
            false
        }
        fn publish_gauges(&self, _: &OrderCounters) {}
    }

    #[test]
    fn held_orders_leave_in_order_once_durable_and_as_lost_after_a_disk_error() {
        let j = Arc::new(Scripted::default());
        let mut p = PendingAcks::new(Arc::clone(&j) as JournalHandle, vec![order(1)]);
        let rec = samples().remove(0);
        // The recovered order is durable already; nothing else is held.
        assert!(matches!(
            p.next(),
            Some(Released::Durable {
                recovered: true,
                ..
            })
        ));
        let lsn = j.append(&rec).unwrap();
        p.hold(lsn, order(2));
        assert_eq!(p.held_in(Lane::Small), 1);
        assert!(p.next().is_none(), "not durable yet: held");
        j.settle(lsn, Durability::Durable);
        match p.next() {
            Some(Released::Durable {
                order, recovered, ..
            }) => {
                assert_eq!((order.seq, recovered), (2, false));
            }
            other => panic!("{other:?}"),
        }
        // The disk fills: the orders waiting for the failed write are lost,
        // never durable, in order (the journal's side of it, the cut back
        // to the last durable record, is `journal/tests.rs`').
        let a = j.append(&rec).unwrap();
        let b = j.append(&rec).unwrap();
        p.hold(a, order(3));
        p.hold(b, order(4));
        j.settle(b, Durability::Durable);
        assert!(
            p.next().is_none(),
            "the front is not settled: nothing leaves"
        );
        j.settle(a, Durability::Lost(Loss::DiskFull));
        match p.next() {
            Some(Released::Lost(o, Loss::DiskFull)) => assert_eq!(o.seq, 3),
            other => panic!("{other:?}"),
        }
        assert!(matches!(p.next(), Some(Released::Durable { order, .. }) if order.seq == 4));
        assert!(p.next().is_none());
        assert_eq!(p.held_in(Lane::Small), 0);
    }
}
