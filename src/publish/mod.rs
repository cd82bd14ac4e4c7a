//! The publish path: from the symbol slots to the subscribers' sockets.
//!
//! Module map, in data-flow order (slots → fan-out → sessions → sockets):
//!
//! | step | module | owns |
//! |---|---|---|
//! | loop | [`publisher`] | the event-loop turn, the state the parts share, and the turn's housekeeping: closing a subscriber, per-subscriber figures, stale/live notices on `__tickfan.stale` (silent sources, an edge's lost backbone) |
//! | slots | [`delivery`] | learning symbols, taking dirty updates, the rate cap (on [`crate::rate_limit`]); writing queued buffers and the slow-subscriber revisit |
//! | fan-out | [`fanout`], [`routes`] (over the payload encoder [`crate::protocol::encode`] and the pattern matcher [`crate::protocol::glob`]) | one update encoded once and offered to each subscriber (socket-free); who receives what |
//! | sessions | [`session`], [`outbuf`], [`commit_budget`], [`retrial`], [`backlog`], [`peer_window`], [`send_cap`], [`shared_stall`], [`pending_order`] | one connection's state, its bounded buffer and own conflation, its commit budget (`--sub-max-lag`), its way back to unpaced and the check that an unpaced reader is not seconds behind, the bytes its reader's kernel holds (its advertised window) and its send-rate cap, the stalls many subscribers share at once (their client away: not paced), which pending symbol goes next |
//! | commands | [`commands`], [`housekeeping`], [`client_cmd`] | reading a subscriber's input and answering it as Redis 7 does |
//! | control | [`sub_control`], [`throttle`], [`history`] | tickfan's own commands: a subscriber's caps (`TICKFAN.THROTTLE`) and catch-up from a sequence (`TICKFAN.SINCE`) over the history ring |
//! | sockets | [`intake`], [`flush`], [`flush_gap`] | admission, auth expiry and reading a subscriber's input; writing one session's buffer and its pacing hooks; the least time between two flushes (`--sub-flush-gap`: fewer, larger writes) — over the connection kit ([`crate::net`]: listener, connection slab, auth deadlines, input buffer, flush/attention lists, loop context) |
//! | reports | [`stats`] | per-subscriber figures for reports and the admin endpoint |
//!
//! The publisher's methods live in three files: [`publisher`] (the loop
//! and its housekeeping), [`intake`] (subscribers and their input in) and
//! [`delivery`] (updates out to the sockets).
//!
//! Single owner of everything here: the publisher thread.

pub mod backlog;
pub(crate) mod client_cmd;
pub(crate) mod commands;
pub mod commit_budget;
pub(crate) mod delivery;
pub mod fanout;
pub(crate) mod flush;
pub mod flush_gap;
pub(crate) mod history;
pub(crate) mod housekeeping;
pub(crate) mod intake;
pub mod outbuf;
pub mod peer_window;
pub mod pending_order;
pub(crate) mod publisher;
pub mod retrial;
pub mod routes;
pub mod send_cap;
pub(crate) mod session;
pub mod shared_stall;
pub(crate) mod stats;
pub(crate) mod sub_control;
pub mod throttle;
