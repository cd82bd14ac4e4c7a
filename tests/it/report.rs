//! Reports the operator reads: exact intervals in the engine's and the
//! tools' histogram logs during a live run at a steady rate, and
//! `tickfan report`'s page rendered by a real headless browser.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use crate::tools::{ok, text, tickfan};
use crate::util::{engine_with, tick};

/// One interval line of a log: (tag, start s, length s, count).
fn entries(path: &Path) -> Vec<(String, f64, f64, u64)> {
    let bytes = std::fs::read(path).unwrap();
    IntervalLogIterator::new(&bytes)
        .filter_map(|e| match e.unwrap() {
            LogEntry::Interval(i) => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .unwrap();
                let h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut raw.as_slice())
                    .unwrap();
                Some((
                    i.tag().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    i.start_timestamp().as_secs_f64(),
                    i.duration().as_secs_f64(),
                    h.len(),
                ))
            }
            _ => None,
        })
        .collect()
}

/// `tag`'s intervals: starts on the 1 s grid, strictly increasing, full
/// length except a shorter last one. Returns (start, count) per interval.
fn grid(all: &[(String, f64, f64, u64)], tag: &str) -> Vec<(u64, u64)> {
    let mine: Vec<_> = all.iter().filter(|e| e.0 == tag).collect();
    assert!(!mine.is_empty(), "{tag}: no interval");
    let mut out = Vec::new();
    for (n, e) in mine.iter().enumerate() {
        let k = e.1.round();
        assert!(
            (e.1 - k).abs() < 0.0015,
            "{tag}: start {} off the grid",
            e.1
        );
        if n + 1 < mine.len() {
            assert!((e.2 - 1.0).abs() < 0.0015, "{tag}: length {} at {k}", e.2);
        } else {
            assert!(e.2 <= 1.0005, "{tag}: last length {}", e.2);
        }
        if let Some(&(prev, _)) = out.last() {
            assert!(
                k as u64 > prev,
                "{tag}: {k} after {prev}: doubled or shifted"
            );
        }
        out.push((k as u64, e.3));
    }
    out
}

#[test]
fn a_steady_rate_gives_the_same_count_in_every_full_interval() {
    const RATE: u64 = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ticks.csv");
    let body: String = (0..20_000u64)
        .map(|i| {
            tick(
                1_700_000_000_000_000_000 + i,
                &format!("S{}", i % 50),
                "1.1",
                "1.2",
            ) + "\n"
        })
        .collect();
    std::fs::write(&file, body).unwrap();
    let logs = dir.path().join("logs");
    let engine = engine_with(|c| {
        c.report_interval = Duration::from_secs(1);
        c.log_dir = Some(logs.clone());
    });
    let feed = engine.feed_addr().to_string();
    let out = tickfan(&[
        "replay",
        file.to_str().unwrap(),
        "--to",
        &feed,
        "--rate",
        &RATE.to_string(),
        "--duration",
        "6s",
        "--no-progress",
        "--log-dir",
        logs.to_str().unwrap(),
    ]);
    ok(&out);
    crate::util::wait_until("the engine to take every tick", || {
        engine.counters().snapshot().ticks_valid >= 5_000
    });
    let valid = {
        let before = engine.counters().snapshot().ticks_valid;
        let report = engine.stop();
        assert_eq!(report.counters.ticks_valid, before);
        assert_eq!(report.late_samples + report.lost_samples, 0);
        before
    };

    let engine_log = entries(&logs.join("engine.hlog"));
    let feed_parse = grid(&engine_log, "feed_parse");
    let total: u64 = feed_parse.iter().map(|x| x.1).sum();
    assert_eq!(total, valid, "every parsed tick in exactly one interval");
    // The replay started and ended inside an interval each: the first and
    // last intervals with ticks are partly covered, the ones between are
    // full. Each of those holds rate × 1 s, within a few percent.
    let first = feed_parse[0].0;
    let last = feed_parse[feed_parse.len() - 1].0;
    let full: Vec<(u64, u64)> = feed_parse
        .iter()
        .copied()
        .filter(|&(k, _)| k > first && k < last)
        .collect();
    assert!(full.len() >= 3, "{feed_parse:?}");
    for &(k, n) in &full {
        let off = (n as f64 - RATE as f64).abs() / RATE as f64;
        assert!(
            off < 0.05,
            "interval {k}: {n} ticks, want {RATE} ±5%: {feed_parse:?}"
        );
    }
    assert_eq!(
        full.len() as u64,
        last - first - 1,
        "no missing interval in the middle: {feed_parse:?}"
    );

    // The replay's own log: the same rule on its clock.
    let replay = entries(&logs.join("replay.hlog"));
    let lag = grid(&replay, "send_lag");
    let sent: u64 = lag.iter().map(|x| x.1).sum();
    assert_eq!(sent, valid, "one send_lag sample per line sent");
    for &(k, n) in &lag[1..lag.len() - 1] {
        let off = (n as f64 - RATE as f64).abs() / RATE as f64;
        assert!(off < 0.05, "replay interval {k}: {n} lines: {lag:?}");
    }
    let _ = text(&out.stderr);
}
