//! The client-side tools, subcommands of the one `tickfan` binary. They use
//! only the engine's public library API.
//!
//! - `gen`: synthetic tick files (bursts, Zipf popularity, random walks); `gen_dbn`: the same as Databento DBN (`--dbn`)
//! - `replay`: open-loop sender of a tick file: tickfan CSV, Databento DBN or Tardis CSV, plain or compressed (to the feed, Redis `PUBLISH`, raw frames)
//! - `subscribe`: subscriber load on one event loop, end-to-end latency per class
//! - `forward`: the raw loopback floor (a byte forwarder) for the benchmark
//! - `report`: percentile tables, SVG charts, an HTML page and JSON from HdrHistogram logs
//!   (`report_charts` draws, `report_html` lays out the page)
//! - `demo`: all of the above around an in-process engine (`demo_cluster`: `--cluster`, across the NATS backbone)
//! - `orders`: open-loop order flow against an order port, every answer checked
//!   (`orders_status`: `--status`, every id's `STATUS` at the end)
//! - `auth`: the client side of `--token-file` (replay, subscribe, orders)
//! - `cli`: the binary's whole command line (`serve` and every tool), one clap parser
//!   that `main` and the tests (`tests/it/docs_commands.rs`) share

pub mod auth;
pub mod cli;
pub mod demo;
pub mod demo_cluster;
pub mod flags;
pub mod forward;
pub mod freshness;
pub mod gen;
pub mod gen_dbn;
pub mod orders;
pub mod orders_status;
pub mod replay;
pub mod report;
pub mod report_charts;
pub mod report_html;
pub mod subscribe;
