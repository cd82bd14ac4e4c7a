//! What every event loop thread of the engine holds besides its sockets:
//! its poller, the shared counters, its own stage recorder, the clock, the
//! stop flag and its heartbeat.
//!
//! Handed to a stage's constructor as one value, so constructors take the
//! stage's own parts and this (no constructor of more than seven
//! parameters). The recorder is per thread (one writer); the counters are
//! shared atomics; the clock is a copy of the engine's one monotonic clock.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mio::{Events, Poll, Registry};

use crate::metrics::{Counters, StageRecorder};
use crate::sys::clock::MonoClock;
use crate::sys::net::{poll_events, Polled};
use crate::sys::watch::Beat;

/// The context of one event loop thread.
#[derive(Debug)]
pub(crate) struct LoopCtx {
    /// The loop's poller (its waker was made from it by the wiring).
    pub poll: Poll,
    /// The engine's counters (shared, written with relaxed atomics).
    pub counters: Arc<Counters>,
    /// This thread's stage recorder (single writer: this thread).
    pub recorder: StageRecorder,
    /// The engine's monotonic clock.
    pub clock: MonoClock,
    /// Set by the runtime to end the loop (the loop's waker is rung after).
    pub stop: Arc<AtomicBool>,
    /// This loop's heartbeat: beaten every turn ([`wait`](Self::wait)).
    pub beat: Beat,
}

impl LoopCtx {
    /// The poller's registry, for registering sockets.
    #[inline]
    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// True once the runtime asked the loop to stop (pairs with the
    /// runtime's `Release` store).
    #[inline]
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Waits for this turn's events (see [`poll_events`]); `what` names the
    /// loop in the error line.
    pub(crate) fn wait(
        &mut self,
        events: &mut Events,
        timeout: Option<Duration>,
        what: &str,
    ) -> Polled {
        self.beat.beat();
        poll_events(&mut self.poll, events, timeout, what)
    }
}
