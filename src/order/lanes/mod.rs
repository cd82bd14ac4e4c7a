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
//! [`LaneMode::Shared`](crate::order::config::LaneMode::Shared) turns
//! lanes off (one queue, every worker, no chunking): the configuration the
//! lanes are measured against.
//!
//! * [`routing`]: chunking of large orders (which lane an order takes is
//!   its settings':
//!   [`LaneConfig::lane_of`](crate::order::config::LaneConfig::lane_of));
//! * the lanes' bounded queues are on the floor
//!   ([`crate::order::msg::admission`]: producer the gateway, consumers
//!   these workers);
//! * [`worker`]: a worker thread, one attempt of one order (or chunk)
//!   against a bridge at a time;
//! * [`outlet`]: where an attempt's results go (gateway, fill thread, DLQ);
//! * [`retry_handoff`]: the retry timer thread's hand-off of a due order
//!   back to its lane;
//! * [`quota`]: how many of a lane's workers due retries may hold while
//!   new orders wait (`--retry-share`);
//! * a bridge call itself (its `max_inflight` permit, its lease and
//!   fencing token, the slot that says when it started) is
//!   [`crate::order::venue`]'s, used through its surface;
//! * [`elastic`]: how many workers a lane runs, between its min and max;
//! * [`capacity`]: arrival and service rates, utilisation, drain time;
//! * [`pool`]: starts the workers; the scaler thread that applies
//!   [`elastic`] and publishes [`capacity`].
//!
//! What they exchange with the other threads (the order, its claim, the
//! events back to the gateway, the fill messages, the journal records) is
//! on the floor, [`crate::order::msg`].

pub(crate) mod capacity;
pub(crate) mod elastic;
pub(crate) mod outlet;
pub(crate) mod pool;
pub(crate) mod quota;
pub(crate) mod retry_handoff;
pub mod routing;
pub(crate) mod worker;
