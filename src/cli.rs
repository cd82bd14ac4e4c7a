//! Raw flags of `tickfan serve` and their conversion into a validated
//! [`Config`]. The binary's other subcommands (the client-side tools) keep
//! their flags beside their code in `tools/`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::auth::Token;
use crate::config::{Config, PinPlan, DEFAULT_ADMIN_ADDR, DEFAULT_FEED_ADDR, DEFAULT_SUB_ADDR};
use crate::error::ConfigError;
use crate::idle::IdleStrategy;

/// Flags of `tickfan serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Read flags from this TOML file first (keys are flag names: `max-symbols = 20000`); flags on the command line win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
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
    /// Kernel send buffer per subscriber socket in bytes (0 = OS auto-tuning); small bounds a slow subscriber's staleness.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024)]
    pub sub_sndbuf: usize,
    /// Most channels + patterns one subscriber may hold; more are refused with an error.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub max_subscriptions: usize,
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
    /// Raise the `subscriber_stale` alert when a subscriber is this far behind.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s")]
    pub alert_staleness: Duration,
    /// Raise the `dlq_growth` alert above this many dead letters per second.
    #[arg(long, value_name = "PER_SEC", default_value_t = 100.0)]
    pub alert_dlq_rate: f64,
    /// Raise the `order_queue_old` alert when the oldest queued order waited this long.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s")]
    pub alert_order_age: Duration,
    /// Raise the `bridge_call_slow` alert when a bridge call has been in progress this long (a venue not answering).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s")]
    pub alert_bridge_call: Duration,
    /// File holding the shared-secret token feeds and order clients (first line `AUTH <token>`), subscribers (RESP AUTH) and the admin endpoint (Bearer) must present.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Close connections that have not authenticated within this time.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "5s")]
    pub auth_timeout: Duration,
    /// Also write the final report as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub report_json: Option<PathBuf>,
    /// Write stage histograms (HdrHistogram interval log `engine.hlog`) into this directory.
    #[arg(long, value_name = "DIR")]
    pub log_dir: Option<PathBuf>,
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

/// Why a configuration file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file cannot be read.
    #[error("config file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path}: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message, one line.
        message: String,
    },
    /// A key that is not a flag of `tickfan serve`.
    #[error(
        "config file {path}: unknown key '{key}' (keys are the flag names of `tickfan serve`)"
    )]
    UnknownKey {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },
    /// A value that is not a string, number or boolean.
    #[error("config file {path}: key '{key}' must be a string, a number or a boolean")]
    BadValue {
        /// The file.
        path: String,
        /// The key.
        key: String,
    },
}

/// Turns a TOML file of `flag = value` pairs into command-line arguments
/// (`--flag=value`; `true` → `--flag`, `false` → nothing) for `tickfan
/// serve`. `known` lists the long flag names. Keys may use `-` or `_`.
///
/// # Errors
/// An unreadable file, bad TOML, an unknown key, or a table/array value.
pub fn config_file_args(
    path: &std::path::Path,
    known: &[String],
) -> Result<Vec<String>, ConfigFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: shown.clone(),
        source,
    })?;
    let table: toml::Table =
        text.parse()
            .map_err(|e: toml::de::Error| ConfigFileError::Syntax {
                path: shown.clone(),
                message: e.message().replace('\n', " "),
            })?;
    let mut args = Vec::new();
    for (key, value) in table {
        let flag = key.replace('_', "-");
        if flag == "config" || !known.contains(&flag) {
            return Err(ConfigFileError::UnknownKey { path: shown, key });
        }
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(true) => {
                args.push(format!("--{flag}"));
                continue;
            }
            toml::Value::Boolean(false) => continue,
            _ => return Err(ConfigFileError::BadValue { path: shown, key }),
        };
        args.push(format!("--{flag}={text}"));
    }
    Ok(args)
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
            max_subscriptions: self.max_subscriptions,
            sub_sndbuf: self.sub_sndbuf,
            max_publish_rate: self.max_publish_rate,
            pin: self.pin.unwrap_or_default(),
            idle: self.idle,
            duration: self.duration,
            report_interval: self.report_interval,
            print_intervals: !self.quiet,
            dlq_capacity: self.dlq_capacity,
            dlq_file: self.dlq_file.clone(),
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
        };
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        ["max-symbols", "quiet", "pin", "duration"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn config_file_becomes_flags_and_names_bad_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.toml");
        std::fs::write(
            &p,
            "max_symbols = 20000\nquiet = true\npin = \"feed=0\"\nduration = \"5s\"\n",
        )
        .unwrap();
        let mut args = config_file_args(&p, &known()).unwrap();
        args.sort();
        assert_eq!(
            args,
            [
                "--duration=5s",
                "--max-symbols=20000",
                "--pin=feed=0",
                "--quiet"
            ]
        );
        std::fs::write(&p, "max-symbolz = 1\n").unwrap();
        let e = config_file_args(&p, &known()).unwrap_err().to_string();
        assert!(e.contains("unknown key 'max-symbolz'"), "{e}");
        std::fs::write(&p, "pin = [1, 2]\n").unwrap();
        assert!(config_file_args(&p, &known())
            .unwrap_err()
            .to_string()
            .contains("key 'pin'"));
        std::fs::write(&p, "= nope").unwrap();
        assert!(matches!(
            config_file_args(&p, &known()),
            Err(ConfigFileError::Syntax { .. })
        ));
    }

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
