//! Conflation at the feed: a feed that sends faster than the engine parses
//! fills its reads; then only the newest line per known symbol of each read
//! is parsed, the rest counted as conflated. Every line is still accounted
//! for, each symbol ends on its last line with a sequence number counting
//! all its lines, and lines without a symbol field are still poison.

use std::collections::HashMap;

use crate::util::{engine, tick, wait_until, Feed, Sub};

const SYMBOLS: [&str; 4] = ["FCA", "FCB", "FCC", "FCD"];

#[test]
fn a_flood_is_conflated_at_the_feed_and_every_line_is_accounted_for() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    // Known symbols first: only lines of interned symbols are conflated.
    let first: Vec<String> = SYMBOLS.iter().map(|s| tick(1, s, "1.1", "1.2")).collect();
    feed.lines(&first.iter().map(String::as_str).collect::<Vec<_>>());
    wait_until("symbols interned", || {
        e.counters().snapshot().feed.ticks_valid == 4
    });

    // ~10 MB in one write: far more than the engine parses before the next
    // read, so its reads come back full.
    let mut blob = Vec::new();
    let mut count: HashMap<&str, u64> = SYMBOLS.iter().map(|s| (*s, 1)).collect();
    let mut last: HashMap<&str, String> = HashMap::new();
    let mut garbage = 0u64;
    for i in 0..200_000u64 {
        if i % 1_000 == 500 {
            blob.extend_from_slice(b"garbage\n");
            garbage += 1;
            continue;
        }
        let sym = SYMBOLS[(i % 4) as usize];
        let line = tick(2 + i, sym, &format!("1.{i:06}"), "9.9");
        blob.extend_from_slice(line.as_bytes());
        blob.push(b'\n');
        *count.get_mut(sym).unwrap() += 1;
        last.insert(sym, line);
    }
    feed.send(&blob);
    let lines = 4 + 200_000;
    wait_until("every line taken", || {
        e.counters().snapshot().ticks_received == lines
    });

    let c = e.counters().snapshot();
    assert_eq!(
        c.ticks_received,
        c.feed.ticks_valid + c.poison_total + c.feed.ticks_conflated
    );
    assert_eq!(
        c.poison_total, garbage,
        "no symbol field: poison, as before"
    );
    assert!(
        c.feed.ticks_conflated > 0,
        "10 MB in one write fills reads: {c:?}"
    );
    wait_until("the publisher took every applied tick", || {
        let c = e.counters().snapshot();
        c.publish.published + c.publish.conflated == c.feed.ticks_valid + c.feed.ticks_conflated
    });
    // Each symbol ends on its last line, its sequence counting every line
    // (applied or conflated at the feed); never an older value after a newer.
    let want: HashMap<String, u64> = count.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    let got = s.until_latest(&want);
    for sym in SYMBOLS {
        let m = &got[sym];
        assert_eq!(m.seq(), count[sym], "{sym}");
        assert!(m.payload.starts_with(&last[sym]), "{sym}: {}", m.payload);
    }
}
