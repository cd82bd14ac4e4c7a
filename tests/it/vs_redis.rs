//! The benchmark's tool modes (`perf/vs_redis.sh`), each checked end to end:
//! `replay --send-as redis-publish` against a real `redis-server` and
//! `replay --send-as pmessage` through the raw forwarder, both measured by
//! `subscribe`, which must count every message (neither conflates) with no
//! sequence gap.

use std::process::Command;

use serde_json::Value;

use crate::protocol::RedisServer;
use crate::util::{spawn_until, tick};

/// A tick file: 2,000 ticks over 40 symbols, then the sentinel `ZZEND`.
fn ticks(dir: &std::path::Path) -> std::path::PathBuf {
    let mut lines = vec!["ts_ns,symbol,bid,ask,bid_qty,ask_qty".to_string()];
    for i in 0..2_000u64 {
        lines.push(tick(1_000 + i, &format!("S{}", i % 40), "1.10", "1.20"));
    }
    lines.push(tick(9_999, "ZZEND", "1", "2"));
    let p = dir.join("t.csv");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// Runs `subscribe` against `sub_addr` while `replay` sends the file in
/// `format` to `pub_addr`; returns subscribe's JSON report and replay's stderr.
fn measure(sub_addr: &str, pub_addr: &str, format: &str) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = ticks(dir.path());
    let json = dir.path().join("sub.json");
    let (sub, _) = spawn_until(
        &[
            "subscribe",
            "--to",
            sub_addr,
            "-k",
            "2",
            "--until",
            "ZZEND",
            "--duration",
            "60s", // a safety net: the sentinel ends the run
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ],
        "subscribed to",
    );
    let replay = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args([
            "replay",
            file.to_str().unwrap(),
            "--to",
            pub_addr,
            "--send-as",
            format,
            "--stamp",
            "--rate",
            "20000",
        ])
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(0), "{replay:?}");
    let mut sub = sub;
    let status = sub.0.take().unwrap().wait().unwrap();
    assert!(status.success());
    let report = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (report, String::from_utf8_lossy(&replay.stderr).into_owned())
}

fn assert_every_message_counted(report: &Value) {
    let normal = &report["classes"][0];
    assert_eq!(normal["messages"], 2 * 2_001, "{report}");
    assert_eq!(normal["gaps"], 0, "{report}");
    assert_eq!(normal["repeats"], 0, "{report}");
    assert_eq!(normal["untimed"], 0, "stamped: every message timed");
}

#[test]
fn redis_publish_mode_is_measured_like_tickfan() {
    let redis = RedisServer::start();
    let addr = format!("127.0.0.1:{}", redis.port);
    let (report, replay_err) = measure(&addr, &addr, "redis-publish");
    assert_every_message_counted(&report);
    assert!(
        replay_err.contains("sent 2001 lines") && replay_err.contains("1 non-tick lines not sent"),
        "{replay_err}"
    );
    assert!(replay_err.contains("2001 replies"), "{replay_err}");
}

#[test]
fn raw_forwarder_floor_is_measured_the_same_way() {
    let (_fwd, line) = spawn_until(
        &[
            "forward",
            "--feed-listen",
            "127.0.0.1:0",
            "--sub-listen",
            "127.0.0.1:0",
        ],
        "forward: publisher",
    );
    // "forward: publisher ADDR · subscribers ADDR"
    let words: Vec<&str> = line.split_whitespace().collect();
    let (pub_addr, sub_addr) = (words[2], words[5]);
    let (report, _) = measure(sub_addr, pub_addr, "pmessage");
    assert_every_message_counted(&report);
}
