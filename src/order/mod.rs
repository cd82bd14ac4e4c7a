//! The order path: a bounded, honest front door for orders.
//!
//! ```text
//!  clients ─lines─▶ gateway ─(full? SYSTEM_BUSY)─▶ main queue ─▶ workers ─▶ bridges
//!                      ▲ replies                         ▲          │ transient
//!                      └────────── events ───────────────┼──────────┤
//!                                                        └─ ready ◀─ delay queue (retry timer)
//! ```
//!
//! * [`protocol`]: the text protocol (requests, replies, reasons);
//! * [`gateway`]: the event loop that owns the client connections, the
//!   dedup store ([`dedup`]) and the producer side of the queue ([`admission`]);
//! * [`worker`]: one attempt of one order against a bridge; [`parking`]: what
//!   the retry timer does with a due order;
//! * [`path`]: builds the threads and stops them in order (within
//!   `--shutdown-deadline`);
//! * [`rate`]: the per-connection order rate limit (GCRA);
//! * [`config`]: settings and flags.
//!
//! Lanes (issue 5) slot in at [`admission`]: the gateway routes an order to
//! one of several [`admission::Admission`] queues and workers take from the
//! lanes they serve; [`types::EventKind::Fill`] already carries absolute
//! cumulative values for a sequencer to order.

pub mod admission;
pub mod config;
pub mod dedup;
pub mod events;
pub mod gateway;
pub mod parking;
pub mod path;
pub mod protocol;
pub mod rate;
pub mod types;
pub mod worker;

pub use config::{OrderArgs, OrderConfig};
