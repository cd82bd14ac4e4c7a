//! The order path: a bounded, honest front door for orders.
//!
//! ```text
//!  clients ─lines─▶ gateway ─(lane full? SYSTEM_BUSY)─▶ small queue ─▶ small workers ─┐
//!                      ▲                            └─▶ large queue ─▶ large workers ─┼─▶ bridges
//!                      │                                    (split into chunks ◀─┘)   │ fills (any order)
//!                      ├──── FILL / DONE ◀── fill thread (sequencer, gap timer) ◀─────┤
//!                      └──── DEAD / EXPIRED ◀────────────────────────────────────────┤ transient
//!                                 ready (per lane) ◀── delay queue (retry timer) ◀───┘
//! ```
//!
//! * [`protocol`]: the text protocol (requests, replies, reasons);
//! * [`gateway`]: the event loop that owns the client connections, the
//!   dedup store ([`dedup`]) and the producer side of the queue ([`admission`]);
//! * [`lanes`]: small and large orders in separate lanes, large ones split
//!   into chunks; [`admission`]: the lanes' bounded queues;
//! * [`worker`]: one attempt of one order (or chunk) against a bridge;
//!   [`parking`]: what the retry timer does with a due order;
//!   [`bridge_calls`]: when each worker's bridge call started (how long
//!   the oldest has been at a venue);
//! * [`fill_thread`] owns the [`fill_book`]: fills back in order per order
//!   (sequencer + gap timer), positions from absolute values, chunks folded
//!   into their parent, and the `FILL`/`DONE` replies of executed orders;
//! * [`path`]: builds the threads and stops them in order (within
//!   `--shutdown-deadline`);
//! * [`rate`]: the per-connection order rate limit (GCRA);
//! * [`config`]: settings and flags.

pub mod admission;
pub mod bridge_calls;
pub mod config;
pub mod dedup;
pub mod events;
pub mod fill_book;
pub mod fill_thread;
pub mod gateway;
pub mod lanes;
pub mod parking;
pub mod path;
pub mod protocol;
pub mod rate;
pub mod types;
pub mod worker;

pub use config::{OrderArgs, OrderConfig};
