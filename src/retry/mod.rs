//! Delayed retry: backoff policies with jitter, a bounded delay queue, the
//! timer loop that fires due items from its own clock tick, and the injected
//! clock all of it reads.
//!
//! The order path uses it to take an order that met a transient failure out
//! of its lane and hand it back to the lane's workers when its delay is over,
//! without holding up the orders behind it. Nothing here knows about orders:
//! the timer loop hands due items to a [`timer::Fire`] implementation.

pub(crate) mod backoff;
pub(crate) mod clock;
pub(crate) mod delay_queue;
pub(crate) mod permits;
pub(crate) mod timer;

pub use backoff::{Backoff, Jitter};
pub(crate) use clock::SharedClock;
pub use clock::{Clock, SimClock};
pub use delay_queue::{DelayQueue, Full};
pub(crate) use permits::Permits;
