//! tickfan: a single-binary, in-memory market-data fan-out engine.
//!
//! Feeds push quote ticks over TCP; the engine keeps the latest quote per
//! symbol (conflation) and a publisher thread fans those quotes out, at its
//! own pace, to subscribers speaking the Redis pub/sub protocol. Every stage
//! is measured with HDR histograms.
//!
//! The data flows left to right. The stages import the layers below the
//! line; the market-data side and the order side import nothing of each
//! other:
//!
//! ```text
//!  market data:  feed ──▶ slots ──▶ publish ──▶ subscribers
//!                 │ poison  (symbols: the interner both share)
//!                 ▼
//!  orders:       dlq ◀── order: gateway ──▶ lanes ──▶ bridge ──▶ fills ──▶ gateway ──▶ replies
//!                                 transient │ ▲
//!                                           ▼ │
//!                                          retry (backoff, delay queue, timer)
//!  ─────────────────────────────────────────────────────────────────────────────
//!  slots, stale, symbols: the rooms the market-data stages share
//!             (latest values, stale flags, the interner)
//!  net        the connection kit under the three TCP ports (feed, publish, gateway)
//!  protocol   the RESP server codec, the pattern matcher, the message payload;
//!             client: the client side, for tools and tests
//!  metrics, admin, sys: telemetry and the OS, importing no stage
//!  logging    log lines, and the repeated-warning log (one line per kind per interval)
//!  rate_limit the GCRA limiter under the order gateway, the warning log and the publish cap
//!  model      the vocabulary at the bottom: tick, decimal, units, reasons, lanes
//! ```
//!
//! [`cli`] and [`config`] turn flags into validated configs; [`runtime`]
//! wires the stages into threads; only the binary, the tools and the tests
//! use it.
//!
//! # The public surface
//!
//! Only what the binary, the tools (`tools/`), the tests, the benches and
//! the fuzz targets use is `pub`; everything else is `pub(crate)`, and the
//! `unreachable_pub` lint keeps it so.
//!
//! | for | items |
//! |---|---|
//! | running an engine | [`runtime::Engine`] (and [`runtime::Injected`]: a simulated clock or venues for tests), [`config::Config`], [`cli`] (flags, `TICKFAN_*`, `--config`), [`error::Failure`], [`logging`], [`sys::signals`] |
//! | codecs, benchmarked and fuzzed | [`feed::parse`] (tick lines), [`net::lines`] (line framing), [`protocol::resp`] (RESP requests and frames), [`order::gateway::codec`] (order lines), [`publish::fanout`] with its [`publish::routes`], [`publish::outbuf`], [`protocol::encode`], [`protocol::glob`]; [`slots`] and [`symbols`] |
//! | clients | [`client::resp`], [`client::orders`], [`auth::Token`] |
//! | reading what the engine measured | [`metrics::report`], [`metrics::hlog`], [`metrics::alerts`], [`metrics::Stage`], [`admin`]'s server handle |
//! | experiments (`perf/`) | [`bridge`] (the venue trait, the simulator), [`retry`] (backoff, jitter, delay queue, clocks), [`order::gateway::dedup`], [`order::lanes::routing`] |
//! | the vocabulary | [`model`] |
#![deny(missing_docs, missing_debug_implementations)]
// The surface is narrow on purpose (`unreachable_pub`: what no tool, test
// or bench needs is `pub(crate)`); the docs describe the engine to the
// people who work on it, so they link crate-private items freely. Read
// them with `cargo doc --document-private-items`.
#![warn(unreachable_pub)]
#![allow(rustdoc::private_intra_doc_links)]

pub mod admin;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod config;
pub mod dlq;
pub mod error;
pub mod feed;
pub mod idle;
#[cfg(test)]
mod layering;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod net;
pub mod order;
#[cfg(test)]
mod order_round_trips;
pub mod protocol;
pub mod publish;
pub(crate) mod rate_limit;
pub mod retry;
pub mod runtime;
pub mod slots;
pub mod stale;
pub mod symbols;
pub mod sys;
pub mod tls;
