//! The publish path: from the symbol slots to the subscribers' sockets.
//!
//! Module map, in data-flow order (slots → fan-out → sessions → sockets):
//!
//! | step | module | owns |
//! |---|---|---|
//! | loop | [`publisher`] | the event-loop turn and the state the parts share |
//! | slots | [`slot_drain`] | learning symbols, taking dirty updates, the rate cap (on [`crate::rate_limit`]) |
//! | fan-out | [`fanout`], [`routes`] (over the payload encoder [`crate::protocol::encode`] and the pattern matcher [`crate::protocol::glob`]) | one update encoded once and offered to each subscriber (socket-free); who receives what |
//! | sessions | [`session`], [`outbuf`], [`commit_budget`], [`retrial`], [`backlog`], [`peer_window`], [`send_cap`], [`pending_order`], [`slow_revisit`] | one connection's state, its bounded buffer and own conflation, its commit budget (`--sub-max-lag`), its way back to unpaced and the check that an unpaced reader is not seconds behind, the bytes its reader's kernel holds (its advertised window) and its send-rate cap, which pending symbol goes next, the slow-subscriber refill |
//! | commands | [`input`], [`commands`], [`housekeeping`], [`client_cmd`] | reading a subscriber's input and answering it as Redis 7 does |
//! | control | [`sub_control`], [`throttle`], [`history`] | tickfan's own commands: a subscriber's caps (`TICKFAN.THROTTLE`) and catch-up from a sequence (`TICKFAN.SINCE`) over the history ring |
//! | sockets | [`intake`], [`flush`], [`closing`] | admission and auth expiry, writing buffers, closing — over the connection kit ([`crate::net`]: listener, connection slab, auth deadlines, input buffer, flush/attention lists, loop context) |
//! | reports | [`stats`] | per-subscriber figures for reports and the admin endpoint |
//! | stale | [`stale_notice`] | stale/live notices on `__tickfan.stale` (silent sources, an edge's lost backbone) |
//!
//! Single owner of everything here: the publisher thread.

pub mod backlog;
pub(crate) mod client_cmd;
pub(crate) mod closing;
pub(crate) mod commands;
pub mod commit_budget;
pub mod fanout;
pub(crate) mod flush;
pub(crate) mod history;
pub(crate) mod housekeeping;
pub(crate) mod input;
pub(crate) mod intake;
pub mod outbuf;
pub mod peer_window;
pub mod pending_order;
pub(crate) mod publisher;
pub mod retrial;
pub mod routes;
pub mod send_cap;
pub(crate) mod session;
pub(crate) mod slot_drain;
pub(crate) mod slow_revisit;
pub(crate) mod stale_notice;
pub(crate) mod stats;
pub(crate) mod sub_control;
pub mod throttle;
