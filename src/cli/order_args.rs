//! The order path's flags of `tickfan serve` ([`OrderArgs`], flattened into
//! [`super::ServeArgs`]) and their conversion into the validated
//! [`OrderConfig`].
//!
//! Field order is help order: `--help` lists these flags under the headings
//! Orders, Retry, Lanes and Fills (`--order-listen` under Listeners).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::bridge::spec::SimSpec;
use crate::config::DEFAULT_ORDER_ADDR;
use crate::error::ConfigError;
use crate::model::units::Lots;
use crate::order::config::OrderConfig;
use crate::order::config::{LaneConfig, LaneMode};
use crate::retry::{Backoff, Jitter};

/// Order-path flags of `tickfan serve`.
#[derive(Debug, Clone, Args)]
pub struct OrderArgs {
    /// Address order clients connect to (text lines; see docs/src/protocols.md, "Orders").
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ORDER_ADDR, help_heading = "Listeners")]
    pub order_listen: SocketAddr,
    /// Orders waiting for a worker, at most; more are rejected at once with SYSTEM_BUSY.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Orders"
    )]
    pub order_queue_capacity: usize,
    /// Order worker threads of the small lane (each runs one bridge attempt at a time): a fixed count, the same as --order-workers-min N --order-workers-max N.
    #[arg(long, value_name = "N", default_value_t = 4, help_heading = "Orders")]
    pub order_workers: usize,
    /// Fewest small-lane workers (default --order-workers); the lane grows toward --order-workers-max under a backlog.
    #[arg(long, value_name = "N", help_heading = "Orders")]
    pub order_workers_min: Option<usize>,
    /// Most small-lane workers (default: --order-workers, or the min when larger).
    #[arg(long, value_name = "N", help_heading = "Orders")]
    pub order_workers_max: Option<usize>,
    /// Workers beyond a lane's minimum that stayed idle this long are retired.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "3s", help_heading = "Orders")]
    pub order_worker_idle: Duration,
    /// Completion-time target of an order: the capacity view's drain time is held against it (alert order_drain_over_slo).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s", help_heading = "Orders")]
    pub order_slo: Duration,
    /// Longest order line in bytes.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 256,
        help_heading = "Orders"
    )]
    pub order_max_line_len: usize,
    /// Ceiling of the first retry delay (retry n waits up to min(cap, base·2^(n-1))).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "100ms", help_heading = "Retry")]
    pub retry_base: Duration,
    /// Largest retry delay ceiling.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s", help_heading = "Retry")]
    pub retry_cap: Duration,
    /// Retries after the first attempt before an order is dead-lettered (4: delays up to 100, 200, 400, 800 ms).
    #[arg(long, value_name = "N", default_value_t = 4, help_heading = "Retry")]
    pub retry_attempts: u32,
    /// How a delay is drawn under its ceiling.
    #[arg(long, value_enum, default_value_t = Jitter::Full, help_heading = "Retry")]
    pub retry_jitter: Jitter,
    /// Orders waiting for a retry, at most; a transient failure past it is dead-lettered (retry_queue_full).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Retry"
    )]
    pub retry_queue_capacity: usize,
    /// Share of a lane's workers due retries may hold while new orders wait (0 < share ≤ 1; 1.0: no quota, retries first).
    #[arg(
        long,
        value_name = "SHARE",
        default_value_t = 0.5,
        help_heading = "Retry"
    )]
    pub retry_share: f64,
    /// Most (account, symbol) keys with an order not ended (`NEW … acct=`); past it a new key gets REJECT … SYSTEM_BUSY acct_keys_full.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 65_536,
        help_heading = "Orders"
    )]
    pub acct_keys: usize,
    /// How long a client order id is remembered (duplicates rejected).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5m", help_heading = "Orders")]
    pub dedup_retention: Duration,
    /// Most client order ids remembered; past it new orders get SYSTEM_BUSY.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_000_000,
        help_heading = "Orders"
    )]
    pub dedup_capacity: usize,
    /// A simulated venue (repeat for several), e.g.
    /// `name=lp1,latency=uniform:1ms..5ms,transient=0.01,permanent=0.001,down=10s+5s,fills=3,partial=0.05`.
    /// Default: two venues `sim1`, `sim2` (200µs–1ms, 1% transient, up to 3 fills).
    #[arg(long = "bridge", value_name = "SPEC", help_heading = "Orders")]
    pub bridges: Vec<String>,
    /// `split`: small and large orders in separate lanes, large ones chunked;
    /// `shared`: one lane for all, executed whole (the baseline).
    #[arg(long, value_enum, default_value_t = LaneMode::Split, help_heading = "Lanes")]
    pub order_lanes: LaneMode,
    /// Orders above this many lots take the large-order lane.
    #[arg(long, value_name = "LOTS", value_parser = Lots::parse, default_value = "100", help_heading = "Lanes")]
    pub large_threshold: Lots,
    /// Large-lane worker threads (the small lane has --order-workers): a fixed count, as --large-workers-min N --large-workers-max N.
    #[arg(long, value_name = "N", default_value_t = 2, help_heading = "Lanes")]
    pub large_workers: usize,
    /// Fewest large-lane workers (default --large-workers).
    #[arg(long, value_name = "N", help_heading = "Lanes")]
    pub large_workers_min: Option<usize>,
    /// Most large-lane workers (default: --large-workers, or the min when larger).
    #[arg(long, value_name = "N", help_heading = "Lanes")]
    pub large_workers_max: Option<usize>,
    /// Large orders waiting for a large-lane worker; more get SYSTEM_BUSY.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_000,
        help_heading = "Lanes"
    )]
    pub large_queue_capacity: usize,
    /// Target chunk size of a large order, lots.
    #[arg(long, value_name = "LOTS", value_parser = Lots::parse, default_value = "100", help_heading = "Lanes")]
    pub chunk_lots: Lots,
    /// Most chunks per large order (a bigger order gets bigger chunks).
    #[arg(long, value_name = "N", default_value_t = 16, help_heading = "Lanes")]
    pub max_chunks: u32,
    /// A gap in an order's fill numbers open this long is skipped.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "200ms", help_heading = "Fills")]
    pub gap_timeout: Duration,
    /// Period of the fill gap timer.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "50ms", help_heading = "Fills")]
    pub gap_tick: Duration,
    /// Early fills held per order (per chunk), at most.
    #[arg(long, value_name = "N", default_value_t = 64, help_heading = "Fills")]
    pub fill_hold_per_order: usize,
    /// Early fills held in all, at most.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 65_536,
        help_heading = "Fills"
    )]
    pub fill_hold_total: usize,
    /// Orders per second per order connection, with a burst of as many (0 = no limit); over it REJECT … SYSTEM_BUSY rate_limited.
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 0,
        help_heading = "Orders"
    )]
    pub max_order_rate: u32,
    /// At shutdown, how long accepted orders get to end before those not yet at a bridge are dead-lettered (`shutdown`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s", help_heading = "Orders")]
    pub shutdown_deadline: Duration,
    /// How long one bridge call may go unanswered; then it is abandoned and the order retried on the next bridge with a new fencing token (`lease_expired`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s", help_heading = "Orders")]
    pub bridge_lease: Duration,
    /// Directory for the order journal and the dead-letter file (created when missing); locked while the engine runs: one engine per directory.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "tickfan-data",
        help_heading = "Orders"
    )]
    pub data_dir: PathBuf,
    /// Keep orders in memory only (no journal; orders are lost on a crash).
    #[arg(long, help_heading = "Orders")]
    pub no_journal: bool,
    /// Most bytes of journal segments on disk; past 80 % the `journal_full` alert, at 100 % new orders get SYSTEM_BUSY journal_full.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 1 << 30,
        help_heading = "Orders"
    )]
    pub journal_max_bytes: u64,
    /// Start with the order kill switch on: every NEW gets SYSTEM_BUSY halted until `POST /orders/resume`.
    #[arg(long, help_heading = "Orders")]
    pub start_halted: bool,
}

impl OrderArgs {
    /// The order listen address and the order settings.
    ///
    /// # Errors
    /// A `--bridge` spec that does not parse, or an invalid value, naming its flag.
    pub fn to_config(&self) -> Result<(SocketAddr, OrderConfig), ConfigError> {
        let bridges = if self.bridges.is_empty() {
            OrderConfig::default().bridges
        } else {
            self.bridges
                .iter()
                .enumerate()
                .map(|(i, s)| SimSpec::parse(s, &format!("sim{}", i + 1)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|why| ConfigError::Invalid {
                    flag: "--bridge",
                    why,
                })?
        };
        // (min, max): a fixed count unless -min or -max is given.
        let bounds = |fixed: usize, min: Option<usize>, max: Option<usize>| {
            let lo = min.unwrap_or(fixed);
            let hi = (min.is_some() || max.is_some()).then(|| max.unwrap_or(fixed.max(lo)));
            (lo, hi)
        };
        let (workers, workers_max) = bounds(
            self.order_workers,
            self.order_workers_min,
            self.order_workers_max,
        );
        let (large_workers, large_workers_max) = bounds(
            self.large_workers,
            self.large_workers_min,
            self.large_workers_max,
        );
        let c = OrderConfig {
            queue_capacity: self.order_queue_capacity,
            workers,
            workers_max,
            worker_idle: self.order_worker_idle,
            slo: self.order_slo,
            retry: Backoff {
                base: self.retry_base,
                cap: self.retry_cap,
                retries: self.retry_attempts,
                jitter: self.retry_jitter,
            },
            retry_queue_capacity: self.retry_queue_capacity,
            dedup_retention: self.dedup_retention,
            dedup_capacity: self.dedup_capacity,
            max_line_len: self.order_max_line_len,
            bridges,
            lanes: LaneConfig {
                mode: self.order_lanes,
                threshold: self.large_threshold,
                chunk: self.chunk_lots,
                max_chunks: self.max_chunks,
            },
            large_workers,
            large_workers_max,
            large_queue_capacity: self.large_queue_capacity,
            gap_timeout: self.gap_timeout,
            gap_tick: self.gap_tick,
            hold_per_order: self.fill_hold_per_order,
            hold_total: self.fill_hold_total,
            max_order_rate: self.max_order_rate,
            shutdown_deadline: self.shutdown_deadline,
            bridge_lease: self.bridge_lease,
            data_dir: self.data_dir.clone(),
            journal: !self.no_journal,
            journal_max_bytes: self.journal_max_bytes,
            retry_share: self.retry_share,
            start_halted: self.start_halted,
            acct_keys: self.acct_keys,
        };
        c.validate()?;
        Ok((self.order_listen, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        order: OrderArgs,
    }

    fn parse(args: &[&str]) -> Result<(SocketAddr, OrderConfig), ConfigError> {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        Serve::try_parse_from(argv)
            .expect("flags parse")
            .order
            .to_config()
    }

    #[test]
    fn flag_defaults_are_the_config_defaults() {
        let (addr, c) = parse(&[]).unwrap();
        assert_eq!(addr, DEFAULT_ORDER_ADDR.parse::<SocketAddr>().unwrap());
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::to_value(OrderConfig::default()).unwrap()
        );
    }

    #[test]
    fn flags_reach_their_settings_and_bad_ones_name_their_flag() {
        let (_, c) = parse(&[
            "--order-lanes",
            "shared",
            "--large-threshold",
            "2.5",
            "--retry-attempts",
            "7",
            "--bridge",
            "name=lp1",
        ])
        .unwrap();
        assert_eq!(c.lanes.mode, LaneMode::Shared);
        assert_eq!(c.lanes.threshold, Lots(250));
        assert_eq!(c.retry.retries, 7);
        assert_eq!(c.bridges.len(), 1);
        assert_eq!(c.bridges[0].name, "lp1");
        let e = parse(&["--bridge", "latency=never"]).unwrap_err();
        assert!(e.to_string().contains("--bridge"), "{e}");
        let e = parse(&["--order-workers", "0"]).unwrap_err();
        assert!(e.to_string().contains("--order-workers"), "{e}");
        let (_, c) = parse(&["--order-workers-max", "16", "--large-workers-min", "3"]).unwrap();
        assert_eq!(c.lane_workers(), [(4, 16), (3, 3)]);
        let (_, c) = parse(&["--order-workers-min", "2", "--order-slo", "250ms"]).unwrap();
        assert_eq!(
            (c.lane_workers()[0], c.slo),
            ((2, 4), Duration::from_millis(250))
        );
        let e = parse(&["--order-workers-min", "9", "--order-workers-max", "3"]).unwrap_err();
        assert!(e.to_string().contains("min must not exceed max"), "{e}");
        let e = parse(&["--bridge", "max_inflight=0"]).unwrap_err();
        assert!(e.to_string().contains("max_inflight"), "{e}");
    }
}
