//! The binary's command line: `serve` (the library's [`ServeArgs`]) and
//! every tool, as the one clap parser `main` uses. It lives here, beside
//! the tools whose flags it gathers, so the integration tests can build
//! the very same parser without starting a process: `tests/it` includes
//! `tools/` and parses every command line of the README and `docs/` with
//! [`command`] (`tests/it/docs_commands.rs`).

use clap::{CommandFactory, Parser, Subcommand};

use tickfan::cli::ServeArgs;

use super::{demo, forward, gen, orders, replay, report, subscribe};

/// tickfan: in-memory market-data fan-out engine (TCP ticks in, Redis pub/sub out).
#[derive(Debug, Parser)]
#[command(name = "tickfan", version, about, long_about = None, args_override_self = true)]
pub struct Cli {
    // (No doc comment here or on `Command`: clap would show it in `--help`.)
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the engine.
    Serve(Box<ServeArgs>),
    /// Send a tick file to a feed port over TCP.
    Replay(replay::ReplayArgs),
    /// Run the engine, a replay and subscribers in one process, then print a p99 report.
    Demo(demo::DemoArgs),
    /// Write a synthetic tick file (bursts, Zipf symbol popularity, random-walk prices).
    Gen(gen::GenArgs),
    /// Run subscriber connections on one event loop and measure end-to-end latency.
    Subscribe(subscribe::SubscribeArgs),
    /// Render HdrHistogram logs in a directory: percentile table, SVG plots, JSON.
    Report(report::ReportArgs),
    /// Raw loopback floor for benchmarks: forward one publisher's bytes to every subscriber.
    Forward(forward::ForwardArgs),
    /// Send open-loop order flow to an order port and check every order's answers.
    Orders(orders::OrdersArgs),
}

/// The whole parser as the binary runs it: [`Cli`], with `serve`'s flags
/// given their `TICKFAN_<FLAG>` variables (see `tickfan::cli::with_env`).
/// Parse the arguments after `tickfan::cli::expand_config_file`, then
/// `Cli::from_arg_matches`.
pub fn command() -> clap::Command {
    Cli::command().mut_subcommand("serve", tickfan::cli::with_env)
}
