//! tickfan: a single-binary, in-memory market-data fan-out engine.
//!
//! Feeds push quote ticks over TCP; the engine keeps the latest quote per
//! symbol (conflation) and a publisher thread fans those quotes out, at its
//! own pace, to subscribers speaking the Redis pub/sub protocol. Every stage
//! is measured with HDR histograms.
//!
//! Data flow (and module dependencies) run one way:
//!
//! ```text
//! feed (ingest loop, parser) ──▶ slots (conflation) ──▶ publish (publisher, sessions)
//!        │ poison                     ▲ symbols
//!        ▼
//!       dlq ◀── order (gateway, queue, workers) ──▶ bridge (venues)
//!                      │ transient ▲
//!                      ▼           │
//!                      retry (backoff, delay queue, timer, clock)
//!
//!   net (connection kit), metrics, protocol, config, sys: shared leaves
//! ```
//!
//! [`runtime`] wires the stages into threads; only the binary, the tools and
//! the tests use it.
#![deny(missing_docs, missing_debug_implementations)]

pub mod admin;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod config;
pub mod dlq;
pub mod error;
pub mod feed;
pub mod fills;
pub mod idle;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod order;
pub mod protocol;
pub mod publish;
pub mod retry;
pub mod runtime;
pub mod slots;
pub mod symbols;
pub mod sys;
pub mod tick;
