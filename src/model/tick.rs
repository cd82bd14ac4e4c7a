//! The quote tick as the engine holds it: a fixed-size value whose prices
//! and quantities are exact fixed-point [`Decimal`]s (see
//! [`super::decimal`]), never floats.

use super::decimal::Decimal;

/// The numeric fields of one quote, exactly as received (the symbol travels
/// separately as a dense id, interned by `crate::symbols`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quote {
    /// Source time, nanoseconds since the Unix epoch; passed through untouched.
    pub ts_ns: u64,
    /// Best bid price (> 0).
    pub bid: Decimal,
    /// Best ask price (> 0). `bid >= ask` (crossed or locked) is legal.
    pub ask: Decimal,
    /// Quantity at the bid (>= 0).
    pub bid_qty: Decimal,
    /// Quantity at the ask (>= 0).
    pub ask_qty: Decimal,
}

/// A quote as stored in its symbol's slot: the fields as received plus what
/// the engine adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotValue {
    /// The quote as received.
    pub quote: Quote,
    /// Count of valid ticks received for this symbol, this one included
    /// (1-based), plus the tick lines conflated at the feed before it
    /// (superseded in their read, not parsed: `feed::conflate`).
    pub seq: u64,
    /// Engine receive time, wall clock, ns since the Unix epoch (goes on the wire).
    pub recv_wall_ns: u64,
    /// Engine receive time, monotonic ns since engine start (for stage latencies).
    pub recv_mono_ns: u64,
}
