//! `CANCEL <id>` and `POST /orders/halt?cancel=queued`: the gateway's book
//! of the orders it may still cancel, and the cancels waiting for their
//! journal record to be durable.
//!
//! An order enters the book when it is offered to its lane (its `ACK` is
//! written then) and leaves it with its terminal reply. A cancel is a race
//! with the workers, settled by the order's [`Claim`]: an order not held
//! by a worker (queued, or waiting for a retry) is cancelled and answered
//! `DONE <id> CANCELED cum=… amount=… attempts=n` (the numbers of its
//! `STATUS`: a recovered order may have fills from before a restart); one a
//! worker holds is at a bridge (or about to be): `REJECT <id> TOO_LATE
//! at_bridge`, and it ends as it would have. A large order counts as at a
//! bridge from its split into chunks on (see README: its chunks are not
//! cancelled one by one).
//!
//! Other answers: `REJECT <id> UNKNOWN_ORDER …` (never accepted, past the
//! dedup retention, or not `ACK`ed yet), `REJECT <id> ALREADY_DONE …`
//! (ended, or a cancel of it is under way).
//!
//! Journal: the cancel is a `Terminal` record (state done, reason
//! `CANCELED`), so recovery does not queue the order again. The reply waits
//! for that record to be durable (like an `ACK`), so a client never reads
//! `CANCELED` for an order a crash could bring back; the order itself is
//! cancelled at once (no worker takes it meanwhile).
//!
//! The `DONE … CANCELED` goes to the order's connection, and also to the
//! connection that sent the `CANCEL` when it is another one (any
//! connection may cancel, as any may ask `STATUS`: after a restart the
//! order's own connection is gone).
//!
//! Bounds: the book holds the orders between `ACK` and their end (no more
//! than the lane queues, the retry stage and the workers hold); the held
//! cancels are a subset of them.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::logging::repeat::warn_repeating;
use crate::model::lane::Lane;
use crate::model::order_reasons::{DoneStatus, RejectReason};
use crate::model::warning::WarnKind;
use crate::net::ConnId;
use crate::order::msg::claim::{CancelRefused, Cancelled, Claim};
use crate::order::msg::event::{Event, EventKind};
use crate::order::msg::journal::{Durability, JournalHandle};
use crate::order::msg::record::{Record, TerminalState};

use super::status::OrderStatus;

/// An order the gateway may still cancel.
#[derive(Debug)]
struct Live {
    conn: ConnId,
    claim: Arc<Claim>,
    lane: Lane,
    recv_mono_ns: u64,
}

/// A cancel whose terminal reply waits for its journal record.
#[derive(Debug)]
struct Held {
    lsn: u64,
    ev: Event,
    by: Option<ConnId>,
}

/// A refused cancel: the reason and its detail.
pub(super) type Refused = (RejectReason, &'static str);

/// The cancellable orders and the cancels not yet answered.
#[derive(Debug, Default)]
pub(super) struct CancelBook {
    live: HashMap<Arc<str>, Live>,
    held: VecDeque<Held>,
}

impl CancelBook {
    /// Order `id` of connection `conn` (received at `recv_mono_ns`) was
    /// offered to `lane` (its `ACK` is written).
    pub(super) fn started(
        &mut self,
        id: &Arc<str>,
        conn: ConnId,
        claim: Arc<Claim>,
        lane: Lane,
        recv_mono_ns: u64,
    ) {
        self.live.insert(
            Arc::clone(id),
            Live {
                conn,
                claim,
                lane,
                recv_mono_ns,
            },
        );
    }

    /// `id` had its terminal reply.
    pub(super) fn ended(&mut self, id: &str) {
        self.live.remove(id);
    }

    /// Orders in the book.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.live.len()
    }

    /// Cancels `id` (its `STATUS` is `status`) for connection `by`,
    /// journaling it; its reply comes from [`CancelBook::next_answer`]
    /// ([`Cancelled::Whole`]), or from the fill thread once every chunk has
    /// ended ([`Cancelled::Chunks`]: the unstarted chunks of a split order).
    ///
    /// # Errors
    /// The `REJECT` to answer.
    pub(super) fn cancel(
        &mut self,
        id: &str,
        status: Option<OrderStatus>,
        by: Option<ConnId>,
        journal: Option<&JournalHandle>,
    ) -> Result<Cancelled, Refused> {
        let Some(st) = status else {
            return Err((
                RejectReason::UnknownOrder,
                "no order with this id (never accepted, or past the dedup retention)",
            ));
        };
        if st.phase().is_terminal() {
            return Err((RejectReason::AlreadyDone, "the order has ended"));
        }
        let Some((key, live)) = self.live.get_key_value(id) else {
            return Err((
                RejectReason::UnknownOrder,
                "not accepted yet: CANCEL after its ACK",
            ));
        };
        match live.claim.cancel() {
            Ok(Cancelled::Whole) => {}
            Ok(Cancelled::Chunks) => return Ok(Cancelled::Chunks),
            Err(CancelRefused::Taken) => return Err((RejectReason::TooLate, "at_bridge")),
            Err(CancelRefused::Cancelled) => {
                return Err((RejectReason::AlreadyDone, "a cancel of it is under way"))
            }
        }
        let ev = Event {
            conn: live.conn,
            id: Arc::clone(key),
            recv_mono_ns: live.recv_mono_ns,
            lane: live.lane,
            kind: EventKind::Done {
                status: DoneStatus::Canceled,
                cum: st.cum(),
                amount: st.amount(),
                attempts: st.attempts(),
            },
        };
        let lsn = match journal.map(|j| {
            j.append(&Record::Terminal {
                id: id.to_owned(),
                state: TerminalState::Done,
                reason: DoneStatus::Canceled.as_str().to_owned(),
                cum: st.cum(),
                amount: st.amount(),
                attempts: st.attempts(),
            })
        }) {
            None => 0,
            Some(Ok(lsn)) => lsn,
            Some(Err(e)) => {
                // Cancelled in memory all the same: a restart may queue it again.
                warn_repeating!(WarnKind::NotJournaled, "cancel of {id} not journaled: {e}");
                0
            }
        };
        self.held.push_back(Held { lsn, ev, by });
        Ok(Cancelled::Whole)
    }

    /// Cancels every order no worker holds, and the unstarted chunks of
    /// split ones (`POST /orders/halt?cancel=queued`); `status` gives each
    /// one's `STATUS`. Returns how many orders, whole and split.
    pub(super) fn cancel_all(
        &mut self,
        status: impl Fn(&str) -> Option<OrderStatus>,
        journal: Option<&JournalHandle>,
    ) -> (usize, usize) {
        let ids: Vec<Arc<str>> = self.live.keys().cloned().collect();
        let (mut whole, mut split) = (0, 0);
        for id in &ids {
            match self.cancel(id, status(id), None, journal) {
                Ok(Cancelled::Whole) => whole += 1,
                Ok(Cancelled::Chunks) => split += 1,
                Err(_) => {}
            }
        }
        (whole, split)
    }

    /// The next cancel to answer (its record durable, or the journal lost
    /// past it, or no journal): the terminal event and the connection that
    /// asked, if any.
    pub(super) fn next_answer(
        &mut self,
        journal: Option<&JournalHandle>,
    ) -> Option<(Event, Option<ConnId>)> {
        let front = self.held.front()?;
        let ready = match journal {
            None => true,
            Some(j) => j.outcome(front.lsn) != Durability::Pending,
        };
        if !ready {
            return None;
        }
        let h = self.held.pop_front()?;
        Some((h.ev, h.by))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::units::Lots;
    use crate::order::msg::admission::tests::order;
    use crate::order::msg::order::Order;

    fn start(book: &mut CancelBook, o: &Order) {
        book.started(&o.id, o.conn, Arc::clone(&o.claim), Lane::Small, 0);
    }

    #[test]
    fn a_free_order_is_cancelled_once_a_taken_one_is_too_late() {
        let mut book = CancelBook::default();
        let (a, b) = (order(1, 0), order(2, 0));
        start(&mut book, &a);
        start(&mut book, &b);
        let queued = Some(OrderStatus::queued(Lots(1)));
        assert!(b.claim.take(), "a worker holds b");
        assert_eq!(
            book.cancel("o2", queued, None, None),
            Err((RejectReason::TooLate, "at_bridge"))
        );
        assert_eq!(
            book.cancel("o1", queued, Some(ConnId::from_u64(7)), None),
            Ok(Cancelled::Whole)
        );
        assert!(!a.claim.take(), "the worker drops it");
        assert_eq!(
            book.cancel("o1", queued, None, None).unwrap_err().0,
            RejectReason::AlreadyDone
        );
        let (ev, by) = book.next_answer(None).expect("answered without a journal");
        assert_eq!((&*ev.id, by), ("o1", Some(ConnId::from_u64(7))));
        assert!(matches!(
            ev.kind,
            EventKind::Done {
                status: DoneStatus::Canceled,
                ..
            }
        ));
        assert!(book.next_answer(None).is_none(), "one answer per cancel");
        book.ended("o1");
        assert_eq!(book.len(), 1);
        assert_eq!(
            book.cancel("o9", None, None, None).unwrap_err().0,
            RejectReason::UnknownOrder
        );
    }

    #[test]
    fn cancel_all_takes_only_the_free_orders() {
        let mut book = CancelBook::default();
        let orders: Vec<Order> = (1..=4).map(|s| order(s, 0)).collect();
        for o in &orders {
            start(&mut book, o);
        }
        assert!(orders[0].claim.take());
        let n = book.cancel_all(|_| Some(OrderStatus::queued(Lots(1))), None);
        assert_eq!(n, (3, 0));
        let mut answered = 0;
        while book.next_answer(None).is_some() {
            answered += 1;
        }
        assert_eq!(answered, 3);
    }
}
