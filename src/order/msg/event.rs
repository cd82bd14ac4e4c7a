//! The link from the workers, the retry timer and the fill thread back to
//! the gateway: the [`Event`]s they send and the [`EventSender`] they send
//! them through.
//!
//! A bounded channel of [`Event`]s plus the gateway's mio waker. Senders
//! block when it is full: an event is an answer a client was promised, so it
//! is never dropped; the gateway never waits on a worker, so the wait always
//! ends (no cycle). The waker is rung once per order step, not per event.

use std::sync::Arc;

use crossbeam_channel::Sender;
use mio::Waker;

use crate::metrics::Stage;
use crate::model::lane::Lane;
use crate::model::order_reasons::{DeadReason, DoneStatus};
use crate::model::units::{Amount, Lots};

use crate::net::ConnId;

/// Capacity of the event channel.
pub(crate) const EVENT_CAPACITY: usize = 16 * 1024;

/// A sender's handle (cloned per worker and for the timer).
#[derive(Debug, Clone)]
pub(crate) struct EventSender {
    tx: Sender<Event>,
    waker: Arc<Waker>,
}

impl EventSender {
    /// Wraps the channel and the gateway's waker.
    pub(crate) fn new(tx: Sender<Event>, waker: Arc<Waker>) -> Self {
        EventSender { tx, waker }
    }

    /// Sends one event, waiting for room. Does not wake the gateway.
    pub(crate) fn send(&self, ev: Event) {
        if self.tx.send(ev).is_err() {
            // The gateway is gone only after every sender is dropped: unreachable.
            log::error!("order event lost: gateway stopped first");
        }
    }

    /// Wakes the gateway (after a batch of `send`s).
    pub(crate) fn wake(&self) {
        let _ = self.waker.wake();
    }
}

/// What a worker (or the retry timer) tells the gateway about an order.
#[derive(Debug)]
pub(crate) struct Event {
    /// Whose order.
    pub conn: ConnId,
    /// Which order.
    pub id: Arc<str>,
    /// Received, measurement clock ns (end-to-end latency of terminal events).
    pub recv_mono_ns: u64,
    /// The order's lane (per-lane end-to-end latency).
    pub lane: Lane,
    /// What happened.
    pub kind: EventKind,
}

/// The kinds of [`Event`]. `Attempt` and `Parked` have no reply line: they
/// move the order's `STATUS` only (one each per bridge attempt, never per
/// tick).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// A worker took the order (or a chunk of it) and sends an attempt to a bridge.
    Attempt,
    /// A transient failure parked it until its retry is due.
    Parked,
    /// A fill, absolute values.
    Fill {
        /// Fill number.
        n: u32,
        /// Cumulative lots.
        cum: Lots,
        /// Cumulative amount.
        amount: Amount,
        /// Remaining lots.
        left: Lots,
    },
    /// Executed (terminal).
    Done {
        /// How it ended.
        status: DoneStatus,
        /// Filled lots.
        cum: Lots,
        /// Cumulative amount.
        amount: Amount,
        /// Attempts made.
        attempts: u32,
    },
    /// Dead-lettered (terminal); the DLQ thread already has the record.
    Dead {
        /// Why.
        reason: DeadReason,
        /// Attempts made.
        attempts: u32,
        /// What the last attempt got back.
        last: String,
    },
    /// Past its TTL before it could be sent (terminal).
    Expired {
        /// Attempts made before it expired.
        attempts: u32,
    },
}

impl EventKind {
    /// Does this event end the order?
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::Done { .. } | EventKind::Dead { .. } | EventKind::Expired { .. }
        )
    }

    /// Does this event write a reply line to the order's client?
    pub(crate) fn has_reply(&self) -> bool {
        !matches!(self, EventKind::Attempt | EventKind::Parked)
    }
}

/// The end-to-end stage of a lane.
pub(crate) const fn e2e_stage(lane: Lane) -> Stage {
    match lane {
        Lane::Small => Stage::OrderE2eSmall,
        Lane::Large => Stage::OrderE2eLarge,
    }
}
