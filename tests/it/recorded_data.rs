//! The real recorded quote ticks (`../shared/data/fx-quotes.csv`): every
//! line accounted for, and the last value per symbol is the file's last line
//! for that symbol, digit for digit.

use std::collections::HashMap;

use crate::util::{engine, shared_data, wait_until, Feed, Sub};

#[test]
fn every_recorded_tick_is_accounted_for_and_the_last_value_wins() {
    let Some(path) = shared_data("fx-quotes.csv") else {
        eprintln!("skipped: ../shared/data/fx-quotes.csv is absent");
        return;
    };
    let text = std::fs::read(&path).unwrap();
    let mut last: HashMap<String, (String, u64)> = HashMap::new();
    let mut data_lines = 0u64;
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let line = std::str::from_utf8(line).unwrap().trim_end_matches('\r');
        if line.starts_with("ts_ns,") {
            continue;
        }
        data_lines += 1;
        let sym = line.split(',').nth(1).unwrap().to_string();
        let e = last.entry(sym).or_insert((String::new(), 0));
        e.0 = line.to_string();
        e.1 += 1;
    }

    let e = engine();
    let mut feed = Feed::connect(e.feed_addr());
    feed.send(&text);
    wait_until("every line read", || {
        e.counters().snapshot().ticks_received == data_lines
    });
    let c = e.counters().snapshot();
    // Sent in one go: reads that find more waiting conflate at the feed
    // (superseded lines counted, not parsed); each symbol's sequence still
    // counts every line (checked below).
    assert_eq!(
        c.ticks_received,
        c.feed.ticks_valid + c.poison_total + c.feed.ticks_conflated
    );
    assert_eq!(c.poison_total, 0, "the recorded file is clean");
    assert_eq!(c.feed.lines_skipped, 1, "the header");
    assert!(
        c.feed.crossed_quotes > 0,
        "crossed/locked quotes pass through"
    );
    wait_until("all taken", || {
        let c = e.counters().snapshot();
        c.publish.published + c.publish.conflated == c.feed.ticks_valid + c.feed.ticks_conflated
    });

    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let want: HashMap<String, u64> = last.iter().map(|(k, v)| (k.clone(), v.1)).collect();
    let got = s.until_latest(&want);
    for (sym, (line, count)) in &last {
        let m = &got[sym];
        assert_eq!(
            &m.payload[..line.len()],
            line,
            "{sym}: last value as in the file"
        );
        assert_eq!(m.seq(), *count, "{sym}: update count");
    }
}
