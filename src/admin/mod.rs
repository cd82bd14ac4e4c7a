//! The admin endpoint (HTTP, default 127.0.0.1:9104): what an operator
//! scrapes and queries while the engine runs.
//!
//! - `GET /metrics`: Prometheus text exposition (counters, gauges, stage
//!   latency histograms, `process_*`, `tickfan_build_info`);
//! - `GET /report`: the same figures as JSON, with the HDR percentiles;
//! - `GET /health`: `ok` while the engine runs;
//! - `GET /dlq?offset=N&limit=M`: dead letters, newest last, with counts by reason;
//! - `POST /dlq/replay[?id=ID]`: dead-lettered orders sent again;
//! - `POST /orders/halt[?cancel=queued]`, `POST /orders/resume`: the order
//!   kill switch ([`orders_switch`]); `GET /health?format=json` shows it.
//!
//! It cannot be frozen by one client: a non-blocking event loop owns every
//! socket and reads each request under a size and time bound, a fixed pool
//! of workers builds the answers, and replays run on a thread of their own
//! (see [`event_loop`]). HTTP is hand-rolled on mio with `httparse` for the
//! parsing, so every read has a size bound and a deadline and no thread is
//! spawned per connection (why no HTTP server crate: `docs/src/decisions.md`).

pub(crate) mod cluster_series;
pub(crate) mod conn;
pub(crate) mod counters;
pub(crate) mod event_loop;
pub(crate) mod exposition;
pub(crate) mod http;
pub(crate) mod latency_buckets;
pub mod orders_switch;
pub(crate) mod prometheus;
pub(crate) mod replay;
pub(crate) mod routes;
pub(crate) mod server;
pub mod subscriber_series;
pub(crate) mod warning_series;

pub use http::Limits;
pub use server::{AdminServer, AdminState};
