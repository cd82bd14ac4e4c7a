//! Raw flags of `tickfan serve` and their conversion into a validated
//! [`Config`]. The binary's other subcommands (the client-side tools) keep
//! their flags beside their code in `tools/`.
//!
//! Where a value comes from, strongest first: the command line, then the
//! environment (`TICKFAN_<FLAG>`, see [`with_env`]), then the `--config`
//! file (see [`config_file`]), then the flag's default.
//!
//! `--help` groups the flags under headings (listeners, connections, market
//! data, subscribers, orders, retry, lanes, fills, alerts, dead letters,
//! reporting); the book's flag table (docs/src/flags.md) is checked against it by a test.

pub(crate) mod config_file;
pub(crate) mod order_args;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::auth::Token;
use crate::cluster::role::{ClusterConfig, Role};
use crate::config::{Config, DEFAULT_ADMIN_ADDR, DEFAULT_FEED_ADDR, DEFAULT_SUB_ADDR};
use crate::error::ConfigError;
use crate::idle::IdleStrategy;
use crate::logging::LogFormat;
use crate::sys::affinity::{FeedThread, PinPlan};

pub use config_file::expand_config_file;

/// Prefix of the environment variable of every `serve` flag:
/// `--max-symbols` is `TICKFAN_MAX_SYMBOLS`.
pub(crate) const ENV_PREFIX: &str = "TICKFAN_";

/// Flags of `tickfan serve`.
///
/// One field per flag (clap's derive), hence over 15 fields.
///
/// Fields are declared in help order: `--help` shows the headings in the
/// order their first flag appears (the flattened order flags add theirs
/// after "Subscribers").
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Read flags from this TOML file (keys are flag names: `max-symbols = 20000`); the environment and the command line win over it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address feeds connect to (CSV tick lines); 127.0.0.1:9101 when not given; an edge has no feed port (giving one is an error).
    #[arg(long, value_name = "ADDR", help_heading = "Listeners")]
    pub feed_listen: Option<SocketAddr>,
    /// Address subscribers connect to (Redis pub/sub).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_SUB_ADDR, help_heading = "Listeners")]
    pub sub_listen: SocketAddr,
    /// Address of the admin HTTP endpoint: /health, /metrics (Prometheus), /report, /dlq, POST /dlq/replay.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_ADMIN_ADDR, help_heading = "Listeners")]
    pub admin_listen: SocketAddr,
    /// Most simultaneous connections on each port; more are refused with an error.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1_024,
        help_heading = "Connections"
    )]
    pub max_conns: usize,
    /// File holding the shared-secret token feeds and order clients (first line `AUTH <token>`), subscribers (RESP AUTH) and the admin endpoint (Bearer) must present.
    #[arg(long, value_name = "PATH", help_heading = "Connections")]
    pub token_file: Option<PathBuf>,
    /// Close connections that have not authenticated within this time.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s", help_heading = "Connections")]
    pub auth_timeout: Duration,
    /// Certificate chain (PEM, leaf first) of the TLS ports; with --tls-key, those ports speak TLS only.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM): clients must present a certificate signed by one (mutual TLS).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub tls_client_ca: Option<PathBuf>,
    /// Ports that speak TLS when --tls-cert is given: subscribers, orders, admin (comma-separated; default all three; the feed port stays plaintext).
    #[arg(long, value_enum, value_delimiter = ',', help_heading = "TLS")]
    pub tls_ports: Vec<crate::tls::TlsPortName>,
    /// Most distinct symbols; a new symbol past it is dead-lettered (`symbol_limit`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Market data"
    )]
    pub max_symbols: usize,
    /// Longest feed line in bytes, excluding the newline; longer lines are dead-lettered.
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 256,
        help_heading = "Market data"
    )]
    pub max_line_len: usize,
    /// Most updates per second the publisher sends (0 = unlimited); conflation absorbs the rest.
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 0,
        help_heading = "Market data"
    )]
    pub max_publish_rate: u64,
    /// Pin threads to cores, e.g. `feed=0,publish=1`, or `auto` (own cores on a host with at least 4); a missing core logs one line and runs unpinned.
    #[arg(long, value_name = "THREAD=CORE,...|auto", value_parser = parse_pin, help_heading = "Market data")]
    pub pin: Option<PinPlan>,
    /// What idle event loops do: spin, yield or park (block in the poller).
    #[arg(long, value_enum, default_value_t = IdleStrategy::Park, help_heading = "Market data")]
    pub idle: IdleStrategy,
    /// Where the feed's loop runs: its own thread, or shared (turns inside the publisher's thread, no wake-up between them); auto shares when the engine may use one core only.
    #[arg(long, value_enum, default_value_t = FeedThread::Auto, help_heading = "Market data")]
    pub feed_thread: FeedThread,
    /// Subscriber output buffer high-water mark in bytes; past it the subscriber is conflated on its own.
    #[arg(long, value_name = "BYTES", default_value_t = 256 * 1024, help_heading = "Subscribers")]
    pub sub_hwm: usize,
    /// Kernel send buffer per subscriber socket in bytes (0 = OS auto-tuning); small bounds a slow subscriber's staleness.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024, help_heading = "Subscribers")]
    pub sub_sndbuf: usize,
    /// A slow subscriber's committed bytes (buffer + kernel send queue) are kept to about its drain rate × this; the rest is conflated (0 = off).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "50ms", help_heading = "Subscribers")]
    pub sub_max_lag: std::time::Duration,
    /// Least time between two flushes to the subscribers: updates that come within it of the last flush are written together in the next (fewer, larger writes for their clients to read); after a flush that took it or longer (a hundred subscribers or more) the next waits twice that flush's length, up to 2 ms; adds at most that to freshness (0 = flush at every turn).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "300us", help_heading = "Subscribers")]
    pub sub_flush_gap: std::time::Duration,
    /// Which pending symbol a slow subscriber is sent next: oldest mark first, or by age × √(update count).
    #[arg(long, value_enum, value_name = "ORDER", default_value_t = crate::publish::pending_order::PendingOrder::Fifo, help_heading = "Subscribers")]
    pub sub_pending_order: crate::publish::pending_order::PendingOrder,
    /// Most channels + patterns one subscriber may hold; more are refused with an error.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Subscribers"
    )]
    pub max_subscriptions: usize,
    /// Each subscriber's cap in updates per second per symbol (0 = none; a client changes its own with TICKFAN.THROTTLE); the latest value goes when the window opens.
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 0.0,
        help_heading = "Subscribers"
    )]
    pub sub_max_rate: f64,
    /// Each subscriber's cap in data bytes per second (0 = none; a client changes its own with TICKFAN.THROTTLE … MAXBYTES).
    #[arg(
        long,
        value_name = "BYTES_PER_SEC",
        default_value_t = 0,
        help_heading = "Subscribers"
    )]
    pub sub_max_bandwidth: u64,
    /// Updates kept per symbol for TICKFAN.SINCE catch-up (0 = none); memory about N × --max-symbols × 250 bytes, reserved at start.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Subscribers"
    )]
    pub history_depth: usize,
    /// The order path (headings Orders, Retry, Lanes, Fills; `--order-listen` under Listeners).
    #[command(flatten)]
    pub order: order_args::OrderArgs,
    /// Raise the `subscriber_stale` alert when a subscriber is this far behind.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s", help_heading = "Alerts")]
    pub alert_staleness: Duration,
    /// Raise the `dlq_growth` alert above this many dead letters per second.
    #[arg(
        long,
        value_name = "PER_SEC",
        default_value_t = 100.0,
        help_heading = "Alerts"
    )]
    pub alert_dlq_rate: f64,
    /// Raise the `order_queue_old` alert when the oldest queued order waited this long.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s", help_heading = "Alerts")]
    pub alert_order_age: Duration,
    /// Raise the `bridge_call_slow` alert when a bridge call has been in progress this long (a venue not answering).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s", help_heading = "Alerts")]
    pub alert_bridge_call: Duration,
    /// Dead letters kept in memory (the newest).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        help_heading = "Dead letters"
    )]
    pub dlq_capacity: usize,
    /// Append every dead letter to this JSON-lines file, synced per batch (without it: `<data-dir>/dlq.jsonl`).
    #[arg(long, value_name = "PATH", help_heading = "Dead letters")]
    pub dlq_file: Option<PathBuf>,
    /// Rotate the dead-letter file past this size (renamed to `dlq.1`, the older ones shifted; 3 rotations kept).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 64 << 20,
        help_heading = "Dead letters"
    )]
    pub dlq_max_bytes: u64,
    /// Run this long, then stop and print the final report (e.g. `30s`, `5m`); without it, until a signal.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, help_heading = "Reporting")]
    pub duration: Option<Duration>,
    /// Print a short line this often (e.g. `5s`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s", help_heading = "Reporting")]
    pub report_interval: Duration,
    /// Do not print the interval lines (the final report is still printed).
    #[arg(long, help_heading = "Reporting")]
    pub quiet: bool,
    /// Also write the final report as JSON to this file.
    #[arg(long, value_name = "PATH", help_heading = "Reporting")]
    pub report_json: Option<PathBuf>,
    /// Write stage histograms (HdrHistogram interval log `engine.hlog`) and the final report into this directory.
    #[arg(long, value_name = "DIR", help_heading = "Reporting")]
    pub log_dir: Option<PathBuf>,
    /// Log lines on stderr: `text`, or `json` (one object per line: time, level, target, message); RUST_LOG sets the level.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, help_heading = "Reporting")]
    pub log_format: LogFormat,
    /// This node's role: `single` (no backbone), `ingest` (feeds in, updates out to NATS) or `edge` (updates in from NATS, subscribers out; no feed port, no orders).
    #[arg(long, value_enum, default_value_t = Role::Single, help_heading = "Backbone")]
    pub role: Role,
    /// NATS servers of the backbone, comma-separated (`nats://127.0.0.1:4222,nats://…`); needed by ingest and edge.
    #[arg(
        long,
        value_name = "URL[,URL…]",
        value_delimiter = ',',
        help_heading = "Backbone"
    )]
    pub nats: Vec<String>,
    /// First token(s) of every backbone subject: `<prefix>.md.<symbol>`, `<prefix>.snap.<symbol>`.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "tickfan",
        help_heading = "Backbone"
    )]
    pub nats_prefix: String,
    /// Flag a symbol stale when nothing new came for it this long, or at once when its feed connection closes (every role): a notice on channel `__tickfan.stale`, `tickfan_symbols_silent`, alert `feed_silent`; off without it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, help_heading = "Backbone")]
    pub stale_after: Option<Duration>,
}

/// The environment variable of the flag `--long`: `TICKFAN_` and the name
/// in upper case with `_` for `-`.
pub fn env_name(long: &str) -> String {
    format!(
        "{ENV_PREFIX}{}",
        long.to_ascii_uppercase().replace('-', "_")
    )
}

/// Gives every long flag of `cmd` (but `--help` and `--version`) its
/// environment variable ([`env_name`]). Done on the built command rather
/// than per field so that a flag added later cannot miss its variable.
///
/// clap reads a variable only when its flag is absent from the command
/// line, so the command line wins. A switch (`--quiet`) takes `true` or
/// `false`; a repeatable flag (`--bridge`) takes one value.
pub fn with_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| match a.get_long() {
        Some(long) if long != "help" && long != "version" => {
            let name = env_name(long);
            a.env(name)
        }
        _ => a,
    })
}

/// The `serve` subcommand as the binary parses it: the flags of
/// [`ServeArgs`], their environment variables, a later flag overriding an
/// earlier one. For the `--config` expansion, and for tests that walk the
/// flags.
pub fn serve_command() -> clap::Command {
    with_env(<ServeArgs as Args>::augment_args(
        clap::Command::new("serve").args_override_self(true),
    ))
}

/// Parses `feed=0,publish=1`, or `auto`.
///
/// # Errors
/// An unknown thread name, a core that is not a number, or a thread named twice.
pub fn parse_pin(s: &str) -> Result<PinPlan, String> {
    let mut plan = PinPlan::default();
    if s.trim() == "auto" {
        plan.auto = true;
        return Ok(plan);
    }
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
        // Durable by default: in the data directory unless named. An edge
        // has no producer of dead letters (no feed port, no orders), so no
        // file by default: it leaves the data directory to an ingest.
        let dlq_file = self.dlq_file.clone().or_else(|| {
            self.role
                .takes_orders()
                .then(|| order.data_dir.join(crate::dlq::DLQ_FILE_NAME))
        });
        let c = Config {
            order_addr,
            order,
            feed_addr: match (self.role, self.feed_listen) {
                (Role::Edge, Some(_)) => {
                    return Err(ConfigError::Invalid {
                        flag: "--feed-listen",
                        why: "an edge has no feed port (it takes market data from --nats)".into(),
                    })
                }
                (_, a) => a.unwrap_or_else(|| DEFAULT_FEED_ADDR.parse().expect("static address")),
            },
            sub_addr: self.sub_listen,
            admin_addr: self.admin_listen,
            max_symbols: self.max_symbols,
            max_line_len: self.max_line_len,
            max_conns_per_port: self.max_conns,
            sub_hwm: self.sub_hwm,
            max_subscriptions: self.max_subscriptions,
            sub_sndbuf: self.sub_sndbuf,
            sub_max_lag: self.sub_max_lag,
            sub_flush_gap: self.sub_flush_gap,
            sub_pending_order: self.sub_pending_order,
            max_publish_rate: self.max_publish_rate,
            sub_max_rate: self.sub_max_rate,
            sub_max_bandwidth: self.sub_max_bandwidth,
            history_depth: self.history_depth,
            pin: self.pin.unwrap_or_default(),
            idle: self.idle,
            feed_thread: self.feed_thread,
            duration: self.duration,
            report_interval: self.report_interval,
            print_intervals: !self.quiet,
            dlq_capacity: self.dlq_capacity,
            dlq_file,
            dlq_max_bytes: self.dlq_max_bytes,
            alert_staleness: self.alert_staleness,
            alert_dlq_rate: self.alert_dlq_rate,
            alert_order_age: self.alert_order_age,
            alert_bridge_call: self.alert_bridge_call,
            token: match &self.token_file {
                Some(p) => Some(Token::from_file(p).map_err(|e| ConfigError::Invalid {
                    flag: "--token-file",
                    why: e.to_string(),
                })?),
                None => None,
            },
            auth_timeout: self.auth_timeout,
            log_dir: self.log_dir.clone(),
            cluster: ClusterConfig {
                role: self.role,
                nats: self.nats.clone(),
                prefix: self.nats_prefix.clone(),
                stale_after: self.stale_after,
            },
            tls: self.tls()?,
        };
        c.validate()?;
        Ok(c)
    }

    /// The TLS settings, the files read and checked (`None`: no `--tls-cert`).
    ///
    /// # Errors
    /// A flag without the ones it needs, or a file refused ([`TlsError`](crate::tls::TlsError)).
    fn tls(&self) -> Result<Option<crate::tls::TlsConfig>, ConfigError> {
        let invalid = |flag, why: &str| ConfigError::Invalid {
            flag,
            why: why.to_owned(),
        };
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => (c, k),
            (Some(_), None) => {
                return Err(invalid(
                    "--tls-cert",
                    "needs --tls-key (the certificate's private key)",
                ))
            }
            (None, Some(_)) => return Err(invalid("--tls-key", "needs --tls-cert")),
            (None, None) => {
                if self.tls_client_ca.is_some() {
                    return Err(invalid("--tls-client-ca", "needs --tls-cert and --tls-key"));
                }
                if !self.tls_ports.is_empty() {
                    return Err(invalid("--tls-ports", "needs --tls-cert and --tls-key"));
                }
                return Ok(None);
            }
        };
        crate::tls::TlsConfig::load(cert, key, self.tls_client_ca.as_deref(), &self.tls_ports)
            .map(Some)
            .map_err(|e| ConfigError::Invalid {
                flag: e.flag(),
                why: e.to_string(),
            })
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
                publish: Some(1),
                auto: false,
            })
        );
        assert!(parse_pin("feed=x").unwrap_err().contains("not a number"));
        assert!(parse_pin("gpu=1").unwrap_err().contains("unknown thread"));
        assert!(parse_pin("feed=1,feed=2").unwrap_err().contains("twice"));
        assert!(parse_pin("feed").unwrap_err().contains("THREAD=CORE"));
        assert_eq!(
            parse_pin("auto"),
            Ok(PinPlan {
                auto: true,
                ..PinPlan::default()
            })
        );
    }

    fn config_of(args: &[&str]) -> Config {
        use clap::FromArgMatches;
        let m = serve_command()
            .try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))
            .unwrap();
        ServeArgs::from_arg_matches(&m)
            .unwrap()
            .to_config()
            .unwrap()
    }

    #[test]
    fn the_dlq_file_is_in_the_data_dir_unless_named() {
        let c = config_of(&[]);
        assert_eq!(c.dlq_file, Some(PathBuf::from("tickfan-data/dlq.jsonl")));
        assert_eq!(c.dlq_max_bytes, 64 << 20);
        let c = config_of(&["--data-dir", "/var/lib/tickfan"]);
        assert_eq!(c.order.data_dir, PathBuf::from("/var/lib/tickfan"));
        assert_eq!(
            c.dlq_file,
            Some(PathBuf::from("/var/lib/tickfan/dlq.jsonl"))
        );
        let c = config_of(&["--data-dir", "d", "--dlq-file", "elsewhere.jsonl"]);
        assert_eq!(c.dlq_file, Some(PathBuf::from("elsewhere.jsonl")));
        assert!(config_of(&["--dlq-max-bytes", "4096"]).dlq_max_bytes == 4096);
    }

    #[test]
    fn only_a_role_that_takes_orders_uses_the_data_dir() {
        use std::path::Path;
        let nats = ["--nats", "nats://127.0.0.1:4222"];
        let single = config_of(&[]);
        assert_eq!(single.data_dir_in_use(), Some(Path::new("tickfan-data")));
        let ingest = config_of(&[&["--role", "ingest"][..], &nats].concat());
        assert_eq!(ingest.data_dir_in_use(), Some(Path::new("tickfan-data")));
        // The one-host pair of docs/src/scale-out.md: the edge writes nothing there.
        let edge = config_of(&[&["--role", "edge"][..], &nats].concat());
        assert_eq!(
            (edge.dlq_file.as_deref(), edge.data_dir_in_use()),
            (None, None)
        );
        // Unless told to put its (empty) dead-letter file there.
        let edge = config_of(
            &[
                &["--role", "edge", "--dlq-file", "tickfan-data/d.jsonl"][..],
                &nats,
            ]
            .concat(),
        );
        assert_eq!(edge.data_dir_in_use(), Some(Path::new("tickfan-data")));
        // Nothing journaled and the file elsewhere: no lock either.
        let memory = config_of(&["--no-journal", "--dlq-file", "/tmp/x.jsonl"]);
        assert_eq!(memory.data_dir_in_use(), None);
    }
}
