//! What the gateway hands on once another thread has answered: the orders
//! whose journal record is durable (offered, then `ACK`ed), the followers
//! whose account key's head has ended, the cancels, and the workers'
//! events; and, at shutdown, the closing of intake and the refusal of what
//! is still held. Each step is bounded per turn (the fairness rule in
//! `mod.rs`).
//!
//! Single writer: the gateway thread.

use std::sync::Arc;

use crossbeam_channel::TryRecvError;

use crate::metrics::counters::bump;
use crate::metrics::Stage;

use super::dedup::IdState;
use super::pending_acks::Released;
use super::send_on::Owed;
use crate::model::order_reasons::RejectReason;
use crate::model::units::{Amount, Lots};
use crate::order::msg::admission::Busy;
use crate::order::msg::journal::Loss;
use crate::order::msg::order::Order;
use crate::order::msg::record::{Record, TerminalState};

use super::ledger::write_event;
use super::{codec, pending_acks, Gateway, JOURNAL_DISK_FULL, REPLY_ROOM};

impl Gateway {
    /// Stops taking orders: the listener closes, connections are no longer
    /// read, and dropping the queue's producer lets the workers finish.
    ///
    /// Followers parked behind their key's head (`acct.rs`) were `ACK`ed:
    /// the queues stay open, and no line is read, until the last of them
    /// has been offered (their heads end, by the shutdown deadline at worst).
    pub(super) fn close_intake(&mut self) {
        // Every durable order is offered before the rest are refused.
        self.release_durable(usize::MAX);
        if self.ledger.acct.parked() > 0 {
            return;
        }
        self.ledger.admission = None;
        self.refuse_held("shutting down");
        self.listener.close(self.poll.registry());
        self.turns.clear_ready();
    }

    /// Offers the orders whose journal record is durable, in admission
    /// order, and writes their `ACK`; refuses those whose record never will
    /// be. At most `limit`: the rest stay held for the next turn (still
    /// counted against their lane's room). Returns how many.
    pub(super) fn release_durable(&mut self, limit: usize) -> usize {
        let mut n = 0;
        while n < limit {
            let Some(p) = &mut self.ledger.pending else {
                return n;
            };
            let Some(released) = p.next() else {
                return n;
            };
            if self.ledger.admission.is_none() {
                // Closing: `close_intake` refuses what is left.
                match released {
                    Released::Durable { order, lsn, .. } => p.put_back(order, lsn, None),
                    Released::Lost(order, loss) => p.put_back(order, 0, Some(loss)),
                }
                return n;
            }
            match released {
                Released::Durable {
                    order,
                    lsn,
                    recovered,
                } => {
                    let (conn, id) = (order.conn, Arc::clone(&order.id));
                    if let (Some(k), true) = (&order.acct_key, recovered) {
                        let _ = self.ledger.acct.reserve(&id, k, true);
                    }
                    // Behind its key's head it is parked (ACKed all the
                    // same); its place in the lane was counted when held.
                    let mut client = if recovered {
                        None
                    } else {
                        self.conns.get_live(conn)
                    };
                    let owed = if recovered {
                        Owed::Recovered
                    } else {
                        Owed::Ack(client.as_mut().map(|c| c.state.out.room_for(REPLY_ROOM)))
                    };
                    match self.ledger.send_on(order, owed, false) {
                        Ok(()) => {
                            n += 1;
                            if let Some(p) = &mut self.ledger.pending {
                                p.started(&id, lsn);
                                let acked = !recovered && client.is_some();
                                if let Some(at) = acked.then(|| p.commit_to_sample()).flatten() {
                                    let now = self.ledger.mono.now_ns();
                                    self.ledger.recorder.record_span(Stage::AckRelease, at, now);
                                }
                            }
                            if let Some(c) = client {
                                self.dirty.mark(&mut c.state.dirty, conn.key());
                            }
                        }
                        Err(Busy(back)) => {
                            if let Some(p) = &mut self.ledger.pending {
                                p.put_back(back, lsn, None);
                            }
                            return n;
                        }
                    }
                }
                Released::Lost(order, loss) => {
                    n += 1;
                    let detail = match loss {
                        Loss::DiskFull => {
                            bump(&self.ledger.counters.orders.journal_full_rejects, 1);
                            JOURNAL_DISK_FULL
                        }
                        Loss::Failed => "journal_error: the journal could not be written",
                    };
                    // Never durable, never `ACK`ed: like any `SYSTEM_BUSY`,
                    // its id may be sent again.
                    let id = Arc::clone(&order.id);
                    self.refuse(order, detail);
                    self.ledger.dedup.forget(&id);
                }
            }
        }
        n
    }

    /// Offers the followers whose key's head ended (per-account ordering,
    /// `acct.rs`), each now its key's head; a full lane keeps the rest
    /// parked for a later turn. Returns how many.
    pub(super) fn release_followers(&mut self) -> usize {
        if self.ledger.admission.is_none() {
            return 0;
        }
        let mut n = 0;
        while let Some(mut order) = self.ledger.acct.next_ready() {
            // Its queue wait (and the lane's oldest age) starts now: the
            // time parked was its key's, not the lane's backlog.
            order.enq_mono_ns = self.ledger.mono.now_ns();
            match self.ledger.send_on(order, Owed::Follower, false) {
                Ok(()) => n += 1,
                Err(Busy(back)) => {
                    self.ledger.acct.put_back(back);
                    break;
                }
            }
        }
        n
    }

    /// Refuses every held order (`SYSTEM_BUSY <detail>`) and journals that
    /// it never ran.
    pub(super) fn refuse_held(&mut self, detail: &str) {
        let held = match &mut self.ledger.pending {
            Some(p) => p.take_all(),
            None => return,
        };
        for order in held {
            if let Some(p) = &self.ledger.pending {
                let _ = p.journal().append(&Record::Terminal {
                    id: order.id.to_string(),
                    state: TerminalState::Rejected,
                    reason: detail.to_owned(),
                    cum: Lots(0),
                    amount: Amount(0),
                    attempts: 0,
                });
            }
            self.refuse(order, detail);
        }
    }

    /// Writes `REJECT <id> SYSTEM_BUSY <detail>` for a held order.
    pub(super) fn refuse(&mut self, order: Order, detail: &str) {
        self.ledger.in_flight = self.ledger.in_flight.saturating_sub(1);
        self.ledger.acct.ended(&order.id);
        self.ledger
            .dedup
            .mark(&order.id, IdState::Done, self.ledger.clock.now_ns());
        bump(
            &self.ledger.counters.orders.rejected[RejectReason::SystemBusy.index()],
            1,
        );
        let conn = order.conn;
        match self.conns.get_live(conn) {
            Some(c) => {
                codec::write_reject(
                    c.state.out.room_for(REPLY_ROOM),
                    &order.id,
                    RejectReason::SystemBusy,
                    detail,
                );
                c.state.live = c.state.live.saturating_sub(1);
                self.dirty.mark(&mut c.state.dirty, conn.key());
            }
            None => bump(
                &self.ledger.counters.orders.replies_to_closed_connections,
                1,
            ),
        }
    }

    /// `POST /orders/halt?cancel=queued`: cancels every order no worker holds.
    pub(super) fn cancel_queued(&mut self) {
        let now = self.ledger.clock.now_ns();
        let l = &mut self.ledger;
        let journal = l.pending.as_ref().map(pending_acks::PendingAcks::journal);
        let dedup = &l.dedup;
        let (whole, split) = l.cancels.cancel_all(|id| dedup.status(id, now), journal);
        bump(&l.counters.orders.cancelled, split as u64);
        log::warn!(
            "orders halted: {whole} orders not yet at a bridge cancelled, and the unstarted chunks of {split} large ones"
        );
    }

    /// Writes the `DONE … CANCELED` of every cancel whose journal record is
    /// durable: to the order's connection and to the one that asked, when
    /// another. Returns how many.
    pub(super) fn answer_cancels(&mut self) -> usize {
        let mut n = 0;
        loop {
            let journal = self
                .ledger
                .pending
                .as_ref()
                .map(pending_acks::PendingAcks::journal);
            let Some((ev, by)) = self.ledger.cancels.next_answer(journal) else {
                return n;
            };
            n += 1;
            bump(&self.ledger.counters.orders.cancelled, 1);
            self.ledger.apply(&ev, true);
            let owner = ev.conn;
            let mut told = false;
            if let Some(c) = self.conns.get_live(owner) {
                write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                c.state.live = c.state.live.saturating_sub(1);
                self.dirty.mark(&mut c.state.dirty, owner.key());
                told = true;
            }
            if let Some(by) = by.filter(|b| *b != ev.conn) {
                if let Some(c) = self.conns.get_live(by) {
                    write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                    self.dirty.mark(&mut c.state.dirty, by.key());
                    told = true;
                }
            }
            if !told {
                bump(
                    &self.ledger.counters.orders.replies_to_closed_connections,
                    1,
                );
            }
        }
    }

    /// Applies the events the workers and the timer sent, at most `limit`
    /// (the rest wait in their bounded channel for the next turn). Returns
    /// how many, and whether all of them have gone.
    pub(super) fn drain_events(&mut self, limit: usize) -> (usize, bool) {
        let mut n = 0;
        while n < limit {
            match self.ledger.events.try_recv() {
                Ok(ev) => {
                    n += 1;
                    let id = ev.conn;
                    let terminal = ev.kind.is_terminal();
                    self.ledger.apply(&ev, false);
                    if !ev.kind.has_reply() {
                        continue;
                    }
                    match self.conns.get_live(id) {
                        Some(c) => {
                            write_event(c.state.out.room_for(REPLY_ROOM), &ev);
                            if terminal {
                                c.state.live = c.state.live.saturating_sub(1);
                            }
                            self.dirty.mark(&mut c.state.dirty, id.key());
                        }
                        None => bump(
                            &self.ledger.counters.orders.replies_to_closed_connections,
                            1,
                        ),
                    }
                }
                Err(TryRecvError::Empty) => return (n, false),
                Err(TryRecvError::Disconnected) => return (n, true),
            }
        }
        (n, false)
    }
}
