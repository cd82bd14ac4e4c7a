//! The retry timer's hand-off back to the lanes: what happens to an order
//! when its delay is over ([`RetryHandoff`], the [`Fire`] for [`Order`]).
//! It runs on the retry timer's thread.
//!
//! * due and past its deadline → `REJECT … EXPIRED`, not sent;
//! * due → handed to its lane's ready channel (`try_send`; when the lane's
//!   workers are all busy it stays in the delay queue and is offered again
//!   on the next tick, still holding its permit), so a due chunk of a large
//!   order never takes a small-lane worker;
//! * engine stopping → dead-lettered with reason `shutdown` (replayable).
//!
//! Counters written here (single writer: the timer thread): retries fired by
//! retry number, delay-queue depth, time to the next due retry.

use std::sync::Arc;

use crossbeam_channel::{Sender, TrySendError};

use crate::metrics::counters::{bump, set, Counters};
use crate::retry::timer::Fire;
use crate::retry::Permits;

use crate::model::order_reasons::DeadReason;
use crate::order::msg::order::Order;

use super::outlet::Outlet;

/// The timer's handler for orders.
#[derive(Debug)]
pub(crate) struct RetryHandoff {
    /// Due retries, to each lane's workers by [`crate::model::lane::Lane::index`]
    /// (dropped when the timer stops, so the workers see the channels close).
    pub ready: [Option<Sender<Order>>; 2],
    /// Permits of the retry stage (released here for orders that leave it here).
    pub permits: Arc<Permits>,
    /// Replies, fills (a chunk's end), dead letters.
    pub out: Outlet,
    /// Retry counters.
    pub counters: Arc<Counters>,
}

impl Fire<Order> for RetryHandoff {
    fn fire(&mut self, mut o: Order, due_ns: u64, now_ns: u64) -> Result<(), Order> {
        if o.claim.is_cancelled() {
            // Cancelled while it waited: answered already; its permit back.
            self.permits.release();
            return Ok(());
        }
        if o.expired_at(now_ns) {
            if o.chunk.is_none() && !o.claim.take() {
                self.permits.release();
                return Ok(());
            }
            // Counted before the reply goes out, so a client that reads the
            // reply and then the counters sees it.
            bump(&self.counters.retry.expired_when_due, 1);
            self.permits.release();
            self.out.expired(&o);
            self.out.events.wake();
            return Ok(());
        }
        o.retry_due_ns = due_ns;
        let retry = o.attempts() as usize; // retry number: 1 after the first attempt
        let Some(ready) = &self.ready[o.lane.index()] else {
            self.abandon(o, now_ns);
            return Ok(());
        };
        match ready.try_send(o) {
            Ok(()) => {
                let i = retry.clamp(1, crate::metrics::order_counters::RETRY_BUCKETS) - 1;
                bump(&self.counters.retry.fired[i], 1);
                Ok(())
            }
            Err(TrySendError::Full(o)) => Err(o),
            Err(TrySendError::Disconnected(o)) => {
                self.abandon(o, now_ns);
                Ok(())
            }
        }
    }

    fn close(&mut self) {
        self.ready = [None, None];
    }

    fn overflow(&mut self, o: Order, _now_ns: u64) {
        self.permits.release();
        if o.chunk.is_none() && !o.claim.take() {
            return;
        }
        self.out.dead(o, DeadReason::RetryQueueFull);
        self.out.events.wake();
    }

    fn abandon(&mut self, o: Order, _now_ns: u64) {
        self.permits.release();
        if o.chunk.is_none() && !o.claim.take() {
            return;
        }
        self.out.dead(o, DeadReason::Shutdown);
        self.out.events.wake();
    }

    fn observe(&mut self, len: usize, next_due_ns: Option<u64>, now_ns: u64) {
        let r = &self.counters.retry;
        set(&r.depth, len as u64);
        set(
            &r.next_due_in_us,
            next_due_ns.map_or(0, |d| d.saturating_sub(now_ns) / 1_000),
        );
    }
}
