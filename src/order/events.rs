//! The link from the workers and the retry timer back to the gateway.
//!
//! A bounded channel of [`Event`]s plus the gateway's mio waker. Senders
//! block when it is full: an event is an answer a client was promised, so it
//! is never dropped; the gateway never waits on a worker, so the wait always
//! ends (no cycle). The waker is rung once per order step, not per event.

use std::sync::Arc;

use crossbeam_channel::Sender;
use mio::Waker;

use super::types::Event;

/// Capacity of the event channel.
pub const EVENT_CAPACITY: usize = 16 * 1024;

/// A sender's handle (cloned per worker and for the timer).
#[derive(Debug, Clone)]
pub struct EventSender {
    tx: Sender<Event>,
    waker: Arc<Waker>,
}

impl EventSender {
    /// Wraps the channel and the gateway's waker.
    pub fn new(tx: Sender<Event>, waker: Arc<Waker>) -> Self {
        EventSender { tx, waker }
    }

    /// Sends one event, waiting for room. Does not wake the gateway.
    pub fn send(&self, ev: Event) {
        if self.tx.send(ev).is_err() {
            // The gateway is gone only after every sender is dropped: unreachable.
            log::error!("order event lost: gateway stopped first");
        }
    }

    /// Wakes the gateway (after a batch of `send`s).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}
