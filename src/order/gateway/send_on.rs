//! An accepted order's way on, written once: offered to its lane's queue,
//! or parked behind its account key's head (per-account ordering,
//! `acct.rs`), then, when a client is owed one, its `ACK`.
//!
//! ```text
//!  NEW / REPLAY (no journal) ──┐                       ┌─▶ lane queue ─┐
//!  journal hold: durable ──────┼─▶ send_on ─ must park? ┤               ├─▶ ACK (if owed)
//!  recovered at start ─────────┤   (key's head out)     └─▶ parked ─────┘
//!  follower, its head ended ───┘   never parked: offered as the new head
//! ```
//!
//! Callers: [`Ledger::admit`](super::ledger) without the journal, and the
//! gateway's `release_durable` (held orders once their record is durable,
//! recovered ones) and `release_followers`. A full lane comes back as
//! `Err(Busy(order))` with nothing changed: each caller decides (refuse it,
//! or put it back for a later turn).

use std::sync::Arc;

use bytes::BytesMut;

use crate::metrics::counters::bump;
use crate::metrics::Stage;
use crate::order::msg::admission::Busy;
use crate::order::msg::order::Order;

use super::codec::write_ack;
use super::ledger::Ledger;

/// What the order's client is owed once it is on its way.
#[derive(Debug)]
pub(super) enum Owed<'a> {
    /// Its `ACK`, written to `out` (`None`: its connection closed since).
    Ack(Option<&'a mut BytesMut>),
    /// Nothing: recovered at start (`ACK`ed before the restart).
    Recovered,
    /// Nothing: a follower its key's head freed (`ACK`ed when parked). It
    /// is offered as its key's new head, never parked again.
    Follower,
}

impl Ledger {
    /// Sends an accepted order (its account key reserved) on: parked
    /// behind its key's head when one is out or followers wait, else
    /// offered to its lane's queue (then its key's head); then the cancel
    /// book learns it (unless a follower, already there) and, for
    /// [`Owed::Ack`], `accepted` counts it and its `ACK` goes out with its
    /// latency from receipt.
    ///
    /// `park_room`: parking takes a place in its lane, refused when the
    /// lane's queue and the followers parked in it fill it (an order
    /// admitted without the journal, which holds no place yet); an order
    /// released from the journal's hold had its place counted when held.
    ///
    /// # Errors
    /// `Busy(order)`, its lane set: the lane is full (or the intake is
    /// closed); nothing changed.
    #[allow(clippy::result_large_err)] // reason: the order moves back by value; boxing it would allocate on the SYSTEM_BUSY path, which must stay cheap
    pub(super) fn send_on(
        &mut self,
        mut order: Order,
        owed: Owed<'_>,
        park_room: bool,
    ) -> Result<(), Busy<Order>> {
        let Some(admission) = &self.admission else {
            return Err(Busy(order));
        };
        let lane = admission.lane_of(order.qty);
        let (id, conn, recv) = (Arc::clone(&order.id), order.conn, order.recv_mono_ns);
        let claim = Arc::clone(&order.claim);
        let key = order.acct_key.clone();
        let follower = matches!(owed, Owed::Follower);
        let park = !follower && key.as_ref().is_some_and(|k| self.acct.must_park(k));
        if park {
            order.lane = lane;
            if park_room
                && admission.lane_depth(lane) + self.acct.parked_in(lane)
                    >= admission.capacity_of(lane)
            {
                return Err(Busy(order));
            }
            self.acct.park(order);
        } else {
            admission.offer(order)?;
            if let Some(k) = &key {
                self.acct.sent(k, &id);
            }
        }
        if follower {
            return Ok(());
        }
        self.cancels.started(&id, conn, claim, lane, recv);
        let Owed::Ack(out) = owed else {
            return Ok(());
        };
        bump(&self.counters.orders.accepted, 1);
        match out {
            Some(out) => {
                write_ack(out, &id);
                self.recorder
                    .record_span(Stage::OrderAck, recv, self.mono.now_ns());
            }
            None => bump(&self.counters.orders.replies_to_closed_connections, 1),
        }
        Ok(())
    }
}
