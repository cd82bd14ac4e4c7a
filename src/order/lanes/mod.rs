//! The lanes and their worker threads: small orders and large orders never
//! share a queue or a worker.
//!
//! ```text
//!                  qty ≤ threshold ─▶ small queue ─▶ small workers ×N ─▶ bridges (whole order)
//!  gateway ─route─┤
//!                  qty > threshold ─▶ large queue ─▶ large workers ×M ─▶ split into chunks
//!                                                        ▲      │       ─▶ chunk queue
//!                                                        └──────┘          ─▶ bridges in parallel
//! ```
//!
//! Head-of-line blocking is what this prevents: a 1,000-lot order that takes
//! seconds at a venue must not sit in front of the 0.5-lot orders behind it.
//! Each lane has its own bounded queue and its own workers; neither lane's
//! workers ever take the other lane's work, so each lane keeps a guaranteed
//! share (`--order-workers[-min]` small, `--large-workers[-min]` large; each
//! lane grows up to its `-max` under a backlog) whatever the
//! other lane's load: a steady stream of large orders cannot take a small
//! worker, and a flood of small orders cannot take a large one. The price is
//! that an idle lane's workers stay idle (see `docs/decisions.md`).
//!
//! In the large lane a parent order is split into chunks
//! ([`routing::split`]) that the lane's workers execute in parallel, on
//! different bridges; the fill thread ([`super::fills`]) folds the chunks'
//! fills back into the parent's absolute cumulative values.
//!
//! [`routing::LaneMode::Shared`] turns lanes off (one queue, every worker,
//! no chunking): the configuration the lanes are measured against.
//!
//! * [`routing`]: which lane an order takes; chunking of large orders;
//! * [`admission`]: the lanes' bounded queues (producer: the gateway);
//! * [`worker`]: a worker thread, one attempt of one order (or chunk)
//!   against a bridge at a time;
//! * [`outlet`]: where an attempt's results go (gateway, fill thread, DLQ);
//! * [`retry_handoff`]: the retry timer thread's hand-off of a due order
//!   back to its lane;
//! * [`quota`]: how many of a lane's workers due retries may hold while
//!   new orders wait (`--retry-share`);
//! * [`claim`]: the per-order atomic a worker and a `CANCEL` race on;
//! * [`bridge_calls`]: when each worker's bridge call started (how long the
//!   oldest has been at a venue);
//! * [`lease`]: bridge calls on abandonable call threads under a lease,
//!   fencing tokens, late answers discarded;
//! * [`inflight`]: each bridge's `max_inflight` (calls at a venue at once);
//! * [`elastic`]: how many workers a lane runs, between its min and max;
//! * [`capacity`]: arrival and service rates, utilisation, drain time;
//! * [`pool`]: starts the workers; the scaler thread that applies
//!   [`elastic`] and publishes [`capacity`];
//! * [`events`]: the link back to the gateway ([`events::Event`],
//!   [`events::EventSender`]).

pub(crate) mod admission;
pub(crate) mod bridge_calls;
pub(crate) mod capacity;
pub(crate) mod elastic;

pub(crate) mod claim;
pub(crate) mod events;
pub(crate) mod inflight;
pub(crate) mod lease;
pub(crate) mod outlet;
pub(crate) mod pool;

pub(crate) mod quota;
pub(crate) mod retry_handoff;
pub mod routing;
pub(crate) mod worker;
