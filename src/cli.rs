//! Raw flags of `tickfan serve` and their conversion into a validated
//! [`Config`]. The binary's other subcommands (the client-side tools) keep
//! their flags beside their code in `tools/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::config::{Config, PinPlan, DEFAULT_ADMIN_ADDR, DEFAULT_FEED_ADDR, DEFAULT_SUB_ADDR};
use crate::error::ConfigError;
use crate::idle::IdleStrategy;

/// Flags of `tickfan serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address feeds connect to (CSV tick lines).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_FEED_ADDR)]
    pub feed_listen: SocketAddr,
    /// Address subscribers connect to (Redis RESP2 pub/sub).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_SUB_ADDR)]
    pub sub_listen: SocketAddr,
    /// Address of the admin endpoint (reserved; not served yet).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADMIN_ADDR)]
    pub admin_listen: SocketAddr,
    /// Most distinct symbols; a new symbol past it is dead-lettered (`symbol_limit`).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_symbols: usize,
    /// Longest feed line in bytes, excluding the newline; longer lines are dead-lettered.
    #[arg(long, value_name = "BYTES", default_value_t = 256)]
    pub max_line_len: usize,
    /// Most simultaneous connections on each port; more are refused with an error.
    #[arg(long, value_name = "N", default_value_t = 1_024)]
    pub max_conns: usize,
    /// Subscriber output buffer high-water mark in bytes; past it the subscriber is conflated on its own.
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024)]
    pub sub_hwm: usize,
    /// Most updates per second the publisher sends (0 = unlimited); conflation absorbs the rest.
    #[arg(long, value_name = "PER_SEC", default_value_t = 0)]
    pub max_publish_rate: u64,
    /// Pin threads to cores, e.g. `feed=0,publish=1`; a missing core logs one line and runs unpinned.
    #[arg(long, value_name = "THREAD=CORE,...", value_parser = parse_pin)]
    pub pin: Option<PinPlan>,
    /// What idle event loops do: spin, yield or park (block in the poller).
    #[arg(long, value_enum, default_value_t = IdleStrategy::Park)]
    pub idle: IdleStrategy,
    /// Run this long, then stop and print the final report (e.g. `30s`, `5m`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Print a short line this often (e.g. `5s`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s")]
    pub report_interval: Duration,
    /// Do not print the interval lines (the final report is still printed).
    #[arg(long)]
    pub quiet: bool,
    /// Dead letters kept in memory (the newest).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub dlq_capacity: usize,
    /// Append every dead letter to this JSON-lines file.
    #[arg(long, value_name = "PATH")]
    pub dlq_file: Option<PathBuf>,
    /// Also write the final report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub report_json: Option<PathBuf>,
    /// The order path.
    #[command(flatten)]
    pub order: crate::order::OrderArgs,
}

/// Parses `feed=0,publish=1`.
///
/// # Errors
/// An unknown thread name, a core that is not a number, or a thread named twice.
pub fn parse_pin(s: &str) -> Result<PinPlan, String> {
    let mut plan = PinPlan::default();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (thread, core) = part
            .split_once('=')
            .ok_or_else(|| format!("expected THREAD=CORE, got '{part}'"))?;
        let core: usize = core
            .trim()
            .parse()
            .map_err(|_| format!("core '{core}' is not a number"))?;
        let slot = match thread.trim() {
            "feed" => &mut plan.feed,
            "publish" | "publisher" => &mut plan.publish,
            other => return Err(format!("unknown thread '{other}' (known: feed, publish)")),
        };
        if slot.replace(core).is_some() {
            return Err(format!("thread '{thread}' pinned twice"));
        }
    }
    Ok(plan)
}

impl ServeArgs {
    /// The validated configuration.
    ///
    /// # Errors
    /// The first invalid value, naming its flag.
    pub fn to_config(&self) -> Result<Config, ConfigError> {
        let (order_addr, order) = self.order.to_config()?;
        let c = Config {
            order_addr,
            order,
            feed_addr: self.feed_listen,
            sub_addr: self.sub_listen,
            admin_addr: self.admin_listen,
            max_symbols: self.max_symbols,
            max_line_len: self.max_line_len,
            max_conns_per_port: self.max_conns,
            sub_hwm: self.sub_hwm,
            max_publish_rate: self.max_publish_rate,
            pin: self.pin.unwrap_or_default(),
            idle: self.idle,
            duration: self.duration,
            report_interval: self.report_interval,
            print_intervals: !self.quiet,
            dlq_capacity: self.dlq_capacity,
            dlq_file: self.dlq_file.clone(),
        };
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_plan_parses_and_refuses_clearly() {
        assert_eq!(
            parse_pin("feed=0,publish=1"),
            Ok(PinPlan {
                feed: Some(0),
                publish: Some(1)
            })
        );
        assert!(parse_pin("feed=x").unwrap_err().contains("not a number"));
        assert!(parse_pin("gpu=1").unwrap_err().contains("unknown thread"));
        assert!(parse_pin("feed=1,feed=2").unwrap_err().contains("twice"));
        assert!(parse_pin("feed").unwrap_err().contains("THREAD=CORE"));
    }
}
