//! The venue side of a worker: everything between "this attempt goes to
//! that bridge" and the bridge's answer. The lane workers (`order/lanes/`)
//! call it through this surface only; no other thread folder imports it.
//!
//! ```text
//!  worker ── InflightLimit::acquire ──▶ Permit ──▶ Caller::call (lease, fencing token) ──▶ bridge.execute
//!    └── BridgeCalls::enter (slot: when this call started) ◀──────── gateway reads the gauges
//! ```
//!
//! * `inflight`: each bridge's `max_inflight` (calls at a venue at once),
//!   [`InflightLimit`];
//! * `lease`: bridge calls on abandonable call threads under a lease,
//!   fencing tokens, late answers discarded ([`Caller`], [`CallPool`],
//!   [`FenceTokens`]);
//! * `bridge_calls`: when each worker's bridge call started (how long the
//!   oldest has been at a venue), [`BridgeCalls`]; the gateway publishes
//!   its gauges through the floor's
//!   [`CallGauges`](crate::order::msg::gauges::CallGauges).

mod bridge_calls;
mod inflight;
mod lease;

pub(crate) use bridge_calls::BridgeCalls;
pub(crate) use inflight::InflightLimit;
pub(crate) use lease::{CallPool, CallResult, Caller, FenceTokens};
