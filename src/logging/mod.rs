//! Log lines on stderr: env_logger's text lines for a person at a
//! terminal, or one JSON object per line for a log shipper (journald,
//! Loki, Elasticsearch) that should not have to parse free text.
//!
//! The JSON form has exactly four fields, always present:
//! `time` (RFC 3339, UTC, microseconds, `Z`), `level` (`ERROR` … `TRACE`),
//! `target` (the module path) and `message`. `RUST_LOG` sets the level in
//! both forms (default `warn`). Logging is rare by design (transitions, not
//! events), so a line may allocate.
//!
//! A line that can repeat under load (one per refused connection, per
//! update the backbone would not take, …) goes through [`repeat`]: at most
//! one line per kind per 10 s, every occurrence counted in
//! `tickfan_warnings_total{kind}`.

pub(crate) mod repeat;

use std::io::Write;
use std::time::SystemTime;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
pub enum LogFormat {
    /// `[2026-12-01T14:00:00.123Z WARN  tickfan::runtime] message`.
    #[default]
    Text,
    /// `{"time":"…","level":"WARN","target":"tickfan::runtime","message":"…"}`.
    Json,
}

/// One JSON log line (without the newline).
#[derive(Debug, serde::Serialize)]
struct Line<'a> {
    time: String,
    level: &'a str,
    target: &'a str,
    message: String,
}

/// The JSON object for one record.
pub(crate) fn json_line(
    time: SystemTime,
    level: log::Level,
    target: &str,
    message: &std::fmt::Arguments<'_>,
) -> String {
    let line = Line {
        time: humantime::format_rfc3339_micros(time).to_string(),
        level: level.as_str(),
        target,
        message: message.to_string(),
    };
    serde_json::to_string(&line).expect("a struct of strings serialises")
}

/// Installs the global logger.
///
/// # Panics
/// If a logger is already installed (call once, from `main`).
pub fn init(format: LogFormat) {
    let mut b = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    match format {
        LogFormat::Text => {
            b.format_timestamp_millis();
        }
        LogFormat::Json => {
            b.format(|buf, r| {
                let line = json_line(SystemTime::now(), r.level(), r.target(), r.args());
                writeln!(buf, "{line}")
            });
        }
    }
    b.init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_line_is_one_object_with_the_four_fields() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_764_600_000_123_456);
        let line = json_line(
            t,
            log::Level::Warn,
            "tickfan::runtime",
            &format_args!("core \"7\" not available\nnext"),
        );
        assert!(!line.contains('\n'), "{line}");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["time"], "2025-12-01T14:40:00.123456Z");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["target"], "tickfan::runtime");
        assert_eq!(v["message"], "core \"7\" not available\nnext");
        assert_eq!(v.as_object().unwrap().len(), 4);
    }
}
