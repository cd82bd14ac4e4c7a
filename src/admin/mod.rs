//! The admin endpoint (HTTP, default 127.0.0.1:9104): what an operator
//! scrapes and queries while the engine runs.
//!
//! - `GET /metrics`: Prometheus text exposition (counters, gauges, stage
//!   latency summaries);
//! - `GET /report`: the same figures as JSON;
//! - `GET /health`: `ok` while the engine runs;
//! - `GET /dlq?offset=N&limit=M`: dead letters, newest last, with counts by reason.
//!
//! Served by `tiny_http` on its own thread; it only reads shared state
//! (atomics and snapshots taken under short locks), never the hot path's.

pub mod prometheus;
pub mod server;

pub use server::{AdminServer, AdminState};
