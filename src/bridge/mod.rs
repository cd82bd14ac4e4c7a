//! Bridges: the adapters between the order workers and the venues.
//!
//! Every venue sits behind one trait, [`Bridge`]: a worker hands it one
//! attempt of one order and gets back an [`Outcome`]: executed (with the
//! fills, as absolute cumulative values), a transient failure (the 503-like
//! case: retry later) or a permanent one (the 400-like case: never retry).
//! A configurable simulator ([`sim::SimBridge`]) ships and is the default;
//! several bridges run side by side (see `order::lanes::worker` for the routing).
//!
//! Contract for implementors: `execute` may block for the venue's latency
//! and is called from several worker threads at once (`Send + Sync`); it must
//! not panic on any order the gateway accepted. It bounds its own wait (I/O
//! timeouts); the engine also holds each call to a lease (`--bridge-lease`):
//! a call not answered within it is abandoned and its late answer discarded
//! (`order::venue (the lease)`), and it raises `bridge_call_slow` while it lasts. Every attempt of an order carries the same
//! `order_id`: send it as the venue's idempotency key, so a retry after a
//! lost answer cannot execute twice. A venue that cannot deduplicate must
//! answer a timed-out send `Permanent` (an operator reconciles it), never
//! `Transient` (which is retried).

pub mod exec_log;
pub mod sim;
pub mod spec;

use std::fmt;

use crate::model::units::{Amount, Lots, Price, Side};

/// One attempt of one order, as a bridge sees it.
#[derive(Debug, Clone, Copy)]
pub struct BridgeOrder<'a> {
    /// The client order id (unique within the dedup retention).
    pub order_id: &'a str,
    /// Symbol.
    pub symbol: &'a str,
    /// Side.
    pub side: Side,
    /// Quantity.
    pub qty: Lots,
    /// Attempt number, 1 for the first send.
    pub attempt: u32,
    /// Fencing token of this attempt: fresh for every attempt, increasing
    /// within an engine. An answer is applied only while its attempt's token
    /// is the order's current one (`order::venue (the lease)`); a venue may
    /// ignore it (the order id stays the idempotency key).
    pub fence_token: u64,
}

/// One fill, with absolute cumulative values (never deltas), so a fill that
/// arrives twice or late cannot make a total wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VenueFill {
    /// 1, 2, 3… within the order.
    pub fill_no: u32,
    /// Lots filled so far, this fill included.
    pub cum_lots: Lots,
    /// Σ lots × price so far, this fill included.
    pub cum_amount: Amount,
    /// Price of this fill.
    pub price: Price,
}

/// What a bridge did with one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The venue took the order; `fills` as delivered: possibly out of
    /// fill-number order, some twice, some missing (the engine's fill
    /// sequencer restores the order), possibly empty (nothing was filled).
    /// Filled quantity is the `cum_lots` of the highest fill number.
    Executed(Vec<VenueFill>),
    /// Try again later (venue unavailable, throttled, timed out).
    Transient(String),
    /// The venue refuses this order; retrying cannot help.
    Permanent(String),
}

/// A venue adapter.
pub trait Bridge: Send + Sync + fmt::Debug {
    /// A short name for reports and dead letters.
    fn name(&self) -> &str;

    /// Sends one attempt and waits for the venue's answer. `now_ns` is the
    /// engine clock (for scheduled outages).
    fn execute(&self, order: &BridgeOrder<'_>, now_ns: u64) -> Outcome;
}
