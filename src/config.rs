//! The validated engine configuration. Built once from the flags (see
//! [`crate::cli`]); nothing below parses flags again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::Token;
use crate::idle::IdleStrategy;
use crate::order::config::OrderConfig;
use crate::sys::affinity::{FeedThread, PinPlan};

/// Default feed listen address.
pub(crate) const DEFAULT_FEED_ADDR: &str = "127.0.0.1:9101";
/// Default subscriber listen address.
pub(crate) const DEFAULT_SUB_ADDR: &str = "127.0.0.1:9102";
/// Default order listen address.
pub(crate) const DEFAULT_ORDER_ADDR: &str = "127.0.0.1:9103";
/// Default admin listen address (HTTP: `/health`, `/metrics`, `/report`, `/dlq`).
pub(crate) const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9104";

/// Most bytes the history ring (`--history-depth` × `--max-symbols` ×
/// slot) may take.
pub(crate) const HISTORY_MAX_BYTES: u64 = 1 << 30;

/// What a stop has beyond `--shutdown-deadline` (the order path's own
/// deadline) before the process exits regardless: the feed, the
/// publisher's last drain, the backbone (which gives up on an absent NATS
/// server within 2 s), the dead-letter file and the final report.
pub const STOP_MARGIN: Duration = Duration::from_secs(5);

/// Everything the engine needs to start.
///
/// One field per `serve` flag (grouped where flags belong together:
/// `order`, `cluster`, `tls`), so it has as many fields as there are
/// flags: each is validated once here and read where it is used.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Config {
    /// Feed listener.
    pub feed_addr: SocketAddr,
    /// Subscriber listener.
    pub sub_addr: SocketAddr,
    /// Admin listener (HTTP: `/health`, `/metrics`, `/report`, `/dlq`).
    pub admin_addr: SocketAddr,
    /// Order listener.
    pub order_addr: SocketAddr,
    /// The order path.
    pub order: OrderConfig,
    /// Most distinct symbols; a new one past it is poison (`symbol_limit`).
    pub max_symbols: usize,
    /// Longest feed line in bytes, excluding the newline.
    pub max_line_len: usize,
    /// Most simultaneous connections on each listening port.
    pub max_conns_per_port: usize,
    /// Subscriber output buffer high-water mark, bytes.
    pub sub_hwm: usize,
    /// Kernel send buffer of each subscriber socket in bytes (0 = the OS's
    /// auto-tuning). Small keeps a slow subscriber's staleness bounded: data
    /// queued in the kernel cannot be conflated any more.
    pub sub_sndbuf: usize,
    /// A slow subscriber's committed bytes (its buffer + the kernel's send
    /// queue) are kept to about its drain rate × this (zero = only the
    /// high-water mark bounds them).
    pub sub_max_lag: Duration,
    /// The least time between two flushes of the publisher: updates that
    /// come within it of the last flush go out together in the next one
    /// (zero = flush at every turn). Adds at most this much to freshness.
    pub sub_flush_gap: Duration,
    /// Which pending symbol a slow subscriber is sent next.
    pub sub_pending_order: crate::publish::pending_order::PendingOrder,
    /// Most channels + patterns one subscriber may hold.
    pub max_subscriptions: usize,
    /// Most updates per second the publisher takes from the slots (0 = unlimited).
    pub max_publish_rate: u64,
    /// Each subscriber's cap in updates per second per symbol until it
    /// sends `TICKFAN.THROTTLE` (0 = none).
    pub sub_max_rate: f64,
    /// Each subscriber's cap in data bytes per second until it sends
    /// `TICKFAN.THROTTLE … MAXBYTES` (0 = none).
    pub sub_max_bandwidth: u64,
    /// Updates kept per symbol for `TICKFAN.SINCE` (0 = none); the ring
    /// takes about depth × max symbols × 250 bytes, reserved at start.
    pub history_depth: usize,
    /// Thread pinning.
    pub pin: PinPlan,
    /// What idle loops do.
    pub idle: IdleStrategy,
    /// Where the feed's loop runs (`--feed-thread`).
    pub feed_thread: FeedThread,
    /// Run this long, then stop (None = until a signal).
    pub duration: Option<Duration>,
    /// Report interval: also the period of the histogram hand-off and of the
    /// per-subscriber figures (the only periodic work that allocates).
    pub report_interval: Duration,
    /// Print a line every report interval.
    pub print_intervals: bool,
    /// Dead letters kept in memory.
    pub dlq_capacity: usize,
    /// JSON-lines file every dead letter is appended to (default:
    /// `tickfan-data/dlq.jsonl`; none: memory only).
    pub dlq_file: Option<PathBuf>,
    /// The dead-letter file is rotated past this size (`--dlq-max-bytes`).
    pub dlq_max_bytes: u64,
    /// A subscriber this far behind raises the `subscriber_stale` alert.
    pub alert_staleness: Duration,
    /// Dead letters per second that raise the `dlq_growth` alert.
    pub alert_dlq_rate: f64,
    /// The oldest queued order older than this raises `order_queue_old`.
    pub alert_order_age: Duration,
    /// A bridge call in progress longer than this raises `bridge_call_slow`.
    pub alert_bridge_call: Duration,
    /// Shared secret every feed, order, subscriber and admin client must present.
    pub token: Option<Token>,
    /// A connection that has not authenticated by then is closed.
    pub auth_timeout: Duration,
    /// Directory the reporter writes its HdrHistogram interval log to
    /// (`engine.hlog`, one tagged histogram per stage per report interval).
    pub log_dir: Option<PathBuf>,
    /// The node's role on the NATS backbone (`--role`, `--nats`, `--nats-prefix`).
    pub cluster: crate::cluster::role::ClusterConfig,
    /// TLS on the subscriber, order and admin ports (`--tls-*`; none: plaintext).
    pub tls: Option<crate::tls::TlsConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            feed_addr: DEFAULT_FEED_ADDR.parse().expect("static address"),
            sub_addr: DEFAULT_SUB_ADDR.parse().expect("static address"),
            admin_addr: DEFAULT_ADMIN_ADDR.parse().expect("static address"),
            order_addr: DEFAULT_ORDER_ADDR.parse().expect("static address"),
            order: OrderConfig::default(),
            max_symbols: 10_000,
            max_line_len: 256,
            max_conns_per_port: 1_024,
            sub_hwm: 256 * 1024,
            max_subscriptions: 10_000,
            sub_sndbuf: 64 * 1024,
            sub_max_lag: Duration::from_millis(50),
            sub_flush_gap: Duration::from_micros(300),
            sub_pending_order: crate::publish::pending_order::PendingOrder::default(),
            max_publish_rate: 0,
            sub_max_rate: 0.0,
            sub_max_bandwidth: 0,
            history_depth: 0,
            pin: PinPlan::default(),
            idle: IdleStrategy::Park,
            feed_thread: FeedThread::Auto,
            duration: None,
            report_interval: Duration::from_secs(5),
            print_intervals: true,
            dlq_capacity: 10_000,
            // Durable by default, as `serve`'s flags resolve it.
            dlq_file: Some(PathBuf::from("tickfan-data").join(crate::dlq::DLQ_FILE_NAME)),
            dlq_max_bytes: 64 << 20,
            alert_staleness: Duration::from_secs(1),
            alert_dlq_rate: 100.0,
            alert_order_age: Duration::from_secs(1),
            alert_bridge_call: Duration::from_secs(5),
            token: None,
            auth_timeout: Duration::from_secs(5),
            log_dir: None,
            cluster: crate::cluster::role::ClusterConfig::default(),
            tls: None,
        }
    }
}

impl Config {
    /// A configuration for tests and tools: every listener on an ephemeral
    /// loopback port, no interval printing, figures refreshed every 100 ms,
    /// no dead-letter file and no order journal (nothing written into the
    /// working directory; a test of the journal sets `order.journal` and a
    /// temporary `order.data_dir`).
    pub fn ephemeral() -> Self {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("static address");
        Config {
            order: OrderConfig {
                journal: false,
                ..OrderConfig::default()
            },
            feed_addr: any,
            sub_addr: any,
            admin_addr: any,
            order_addr: any,
            print_intervals: false,
            report_interval: Duration::from_millis(100),
            dlq_file: None,
            ..Config::default()
        }
    }

    /// From the first stop signal (or the end of `--duration`), the time by
    /// which the process exits whatever NATS, a venue or a client does:
    /// `--shutdown-deadline` plus [`STOP_MARGIN`], 10 s by default. The
    /// binary enforces it (exit 4, after syncing what the journal holds);
    /// a graceful stop normally ends well before.
    pub fn stop_deadline(&self) -> Duration {
        self.order.shutdown_deadline.saturating_add(STOP_MARGIN)
    }

    /// The data directory this engine writes into, and so holds locked
    /// for its life ([`crate::sys::dir_lock`]): `order.data_dir` when it
    /// journals orders (a role that takes orders, journal on) or the
    /// dead-letter file lies in it (its default where orders are taken).
    /// `None`: nothing of this engine goes there (an edge, or `--no-journal`
    /// with the file elsewhere), so it takes no lock and another engine may
    /// use the directory.
    pub fn data_dir_in_use(&self) -> Option<&std::path::Path> {
        let dir = self.order.data_dir.as_path();
        let journal = self.order.journal && self.cluster.role.takes_orders();
        let dlq_inside = self.dlq_file.as_ref().is_some_and(|f| f.starts_with(dir));
        (journal || dlq_inside).then_some(dir)
    }

    /// Checks every value.
    ///
    /// # Errors
    /// The first invalid value, naming its flag.
    pub fn validate(&self) -> Result<(), crate::error::ConfigError> {
        use crate::error::ConfigError as E;
        let range = E::check_range;
        range("--max-symbols", self.max_symbols as u64, 1, 10_000_000)?;
        range("--max-line-len", self.max_line_len as u64, 64, 1 << 20)?;
        range("--max-conns", self.max_conns_per_port as u64, 1, 1_000_000)?;
        range("--sub-hwm", self.sub_hwm as u64, 1024, 1 << 30)?;
        range(
            "--sub-max-lag",
            self.sub_max_lag.as_millis() as u64,
            0,
            60_000,
        )?;
        range(
            "--sub-flush-gap (in µs)",
            self.sub_flush_gap.as_micros() as u64,
            0,
            100_000,
        )?;
        range(
            "--max-subscriptions",
            self.max_subscriptions as u64,
            1,
            10_000_000,
        )?;
        range("--dlq-capacity", self.dlq_capacity as u64, 1, 10_000_000)?;
        let max_rate = crate::publish::throttle::MAX_RATE;
        if !(self.sub_max_rate.is_finite() && (0.0..=max_rate).contains(&self.sub_max_rate)) {
            return Err(E::Invalid {
                flag: "--sub-max-rate",
                why: format!("must be a number from 0 to {max_rate} (0 = no cap)"),
            });
        }
        range("--history-depth", self.history_depth as u64, 0, 65_536)?;
        let ring = crate::publish::history::bytes_for(self.history_depth, self.max_symbols);
        if ring > HISTORY_MAX_BYTES {
            return Err(E::Invalid {
                flag: "--history-depth",
                why: format!(
                    "{} updates × {} symbols (--max-symbols) need {} MiB of history, over the {} MiB limit; lower one of them",
                    self.history_depth,
                    self.max_symbols,
                    ring >> 20,
                    HISTORY_MAX_BYTES >> 20
                ),
            });
        }
        range("--dlq-max-bytes", self.dlq_max_bytes, 4096, u64::MAX)?;
        if self.report_interval < Duration::from_millis(10) {
            return Err(E::Invalid {
                flag: "--report-interval",
                why: "must be at least 10ms".into(),
            });
        }
        if !(self.alert_dlq_rate.is_finite() && self.alert_dlq_rate >= 0.0) {
            return Err(E::Invalid {
                flag: "--alert-dlq-rate",
                why: "must be a non-negative number".into(),
            });
        }
        if self.alert_bridge_call.is_zero() {
            return Err(E::Invalid {
                flag: "--alert-bridge-call",
                why: "must be positive (every bridge call takes some time)".into(),
            });
        }
        if self.auth_timeout < Duration::from_millis(10) {
            return Err(E::Invalid {
                flag: "--auth-timeout",
                why: "must be at least 10ms".into(),
            });
        }
        if self.duration == Some(Duration::ZERO) {
            return Err(E::Invalid {
                flag: "--duration",
                why: "must be positive".into(),
            });
        }
        self.order.validate()?;
        self.cluster.validate()?;
        // An edge binds no order port, so its address cannot clash.
        if self.cluster.role.takes_orders() {
            let (flag, a) = ("--order-listen", self.order_addr);
            if a.port() != 0 && (a == self.feed_addr || a == self.sub_addr) {
                return Err(E::Invalid {
                    flag,
                    why: "must differ from --feed-listen and --sub-listen".into(),
                });
            }
        }
        if self.feed_addr.port() != 0 && self.feed_addr == self.sub_addr {
            return Err(E::Invalid {
                flag: "--sub-listen",
                why: "must differ from --feed-listen".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_on_loopback() {
        let c = Config::default();
        c.validate().unwrap();
        assert!(c.feed_addr.ip().is_loopback() && c.sub_addr.ip().is_loopback());
        assert_eq!(
            (c.feed_addr.port(), c.sub_addr.port(), c.admin_addr.port()),
            (9101, 9102, 9104)
        );
    }

    #[test]
    fn out_of_range_names_the_flag() {
        let c = Config {
            max_line_len: 3,
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--max-line-len"), "{e}");
        let c = Config {
            alert_bridge_call: Duration::ZERO,
            ..Config::default()
        };
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("--alert-bridge-call"), "{e}");
    }
}
