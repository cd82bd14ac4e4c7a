//! The order path: a bounded, honest front door for orders. Its folders
//! follow its threads.
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
//! * [`gateway`] (thread `tickfan-order-gw`): the event loop that owns the
//!   client connections; its ledger (per-line work), the server side of the
//!   text protocol ([`gateway::codec`]), the dedup store
//!   ([`gateway::dedup`]) and the per-connection rate limit
//!   ([`crate::rate_limit`], GCRA, shared with the warning log);
//! * [`lanes`] (threads `tickfan-order-wN`, `tickfan-order-LN`, and the
//!   retry timer's hand-off): small and large orders in separate bounded
//!   queues (fed through [`msg::admission`]), chunking
//!   ([`lanes::routing`]), the workers ([`lanes::worker`]), where their
//!   results go ([`lanes::outlet`]), what the retry timer does with a due
//!   order ([`lanes::retry_handoff`]);
//! * [`venue`]: a worker's bridge call (per-venue `max_inflight`, the
//!   lease and fencing tokens, when each call started), used by the lanes
//!   through its surface;
//! * [`fills`] (thread `tickfan-fills`): the fill book, the sequencer and
//!   the positions: fills back in order per order, positions from absolute
//!   values, chunks folded into their parent, the `FILL`/`DONE` replies;
//! * [`journal`] (thread `tickfan-journal`): the write-ahead journal in
//!   `--data-dir`; an order is `ACK`ed only once its record is synced,
//!   and recovered at the next start;
//! * [`msg`]: the floor under the four thread folders, which import it
//!   and never each other: the accepted [`msg::order::Order`] that travels
//!   between them (owned by one stage at a time), the claim, the events
//!   back to the gateway, the fill messages, the journal records and the
//!   journal as its appenders see it, the lane queues, the kill switch,
//!   and the two hand-offs a trait carries (a restart's ids to the
//!   gateway, the bridge call gauges to it);
//! * [`wiring`]: the one place that connects the threads (it may import
//!   every folder): builds them and the queues between them and stops
//!   them in order (within `--shutdown-deadline`);
//! * [`config`]: the validated settings (the flags are
//!   `crate::cli::order_args`).
//!
//! The vocabulary the path shares with the metrics and the clients (lanes,
//! reasons, lots/price/amount/side) is in `crate::model`; the client side of
//! the protocol is `crate::client::orders`.

pub mod config;
pub(crate) mod fills;
pub mod gateway;
pub mod journal;
pub mod lanes;
pub mod msg;
pub(crate) mod venue;
pub(crate) mod wiring;
