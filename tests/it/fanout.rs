//! Ticks in → the latest value per symbol out, to every subscriber of it.

use std::collections::HashMap;

use tickfan::client::resp::Frame;

use crate::util::{engine, tick, to_msg, wait_until, Feed, Msg, Sub};

/// Reads frames until the reply to a PING, returning the data messages before it.
fn messages_until_pong(sub: &mut Sub) -> Vec<Msg> {
    sub.cmd(&["PING"]);
    let mut out = Vec::new();
    loop {
        let f = sub.frame();
        if let Some(m) = to_msg(&f) {
            out.push(m);
            continue;
        }
        if let Frame::Array(items) = &f {
            if items.first() == Some(&Frame::Bulk(Some(b"pong".to_vec()))) {
                return out;
            }
        }
        if f == Frame::Simple(b"PONG".to_vec()) {
            return out;
        }
    }
}

#[test]
fn subscribers_receive_the_latest_value_of_each_symbol_exactly_as_sent() {
    let e = engine();
    let mut a = Sub::connect(e.subscriber_addr());
    let mut b = Sub::connect(e.subscriber_addr());
    a.subscribe(&["EURUSD", "GBPUSD"]);
    b.subscribe(&["EURUSD"]);
    let mut feed = Feed::connect(e.feed_addr());
    let mut lines = Vec::new();
    for i in 0..50u64 {
        lines.push(tick(
            1_000 + i,
            "EURUSD",
            &format!("1.085{:02}", i),
            "1.09000",
        ));
        lines.push(tick(2_000 + i, "GBPUSD", "1.26", &format!("1.27{i}0")));
    }
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);

    let want: HashMap<String, u64> = [("EURUSD".into(), 50), ("GBPUSD".into(), 50)].into();
    let got = a.until_latest(&want);
    let eur = &got["EURUSD"];
    assert_eq!(eur.kind, "message");
    // The six tick fields exactly as received (trailing zeros kept).
    assert_eq!(&eur.payload[..lines[98].len()], lines[98]);
    assert_eq!(eur.seq(), 50);
    assert!(
        eur.field(7).parse::<u64>().unwrap() > 1_600_000_000_000_000_000,
        "recv_ns is wall-clock ns"
    );
    assert_eq!(got["GBPUSD"].field(3), "1.27490");

    let got_b = b.until_latest(&[("EURUSD".to_string(), 50)].into());
    assert_eq!(
        got_b["EURUSD"].payload, eur.payload,
        "one encoding shared by all subscribers"
    );
}

#[test]
fn subscribing_to_a_symbol_with_a_value_sends_it_at_once() {
    let e = engine();
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[
        &tick(1, "USDJPY", "150.101", "150.105"),
        &tick(2, "USDJPY", "150.102", "150.106"),
    ]);
    wait_until("both ticks taken by the publisher", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 2 && c.publish.published + c.publish.conflated == 2
    });
    let mut s = Sub::connect(e.subscriber_addr());
    s.subscribe(&["NOSUCH", "USDJPY"]);
    let m = s.message();
    assert_eq!((m.channel.as_str(), m.seq()), ("USDJPY", 2));
    assert!(m
        .payload
        .starts_with("2,USDJPY,150.102,150.106,1000000,1500000,2,"));
    // Nothing for the symbol without a value: the next frame is the PONG.
    assert!(messages_until_pong(&mut s).is_empty());
}

#[test]
fn glob_patterns_select_symbols_like_redis() {
    let e = engine();
    let syms = ["EURUSD", "EURGBP", "GBPUSD", "USDJPY", "USDCHF", "AUDUSD"];
    let cases: [(&str, &[&str]); 4] = [
        ("EUR*", &["EURUSD", "EURGBP"]),
        ("?BPUSD", &["GBPUSD"]),
        ("USD[A-J]*", &["USDJPY", "USDCHF"]),
        ("[^E]*USD", &["GBPUSD", "AUDUSD"]),
    ];
    let mut subs: Vec<Sub> = cases
        .iter()
        .map(|(p, _)| {
            let mut s = Sub::connect(e.subscriber_addr());
            s.psubscribe(&[p]);
            s
        })
        .collect();
    let mut feed = Feed::connect(e.feed_addr());
    let lines: Vec<String> = syms.iter().map(|s| tick(1, s, "1.1", "1.2")).collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    wait_until("all published", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 6 && c.publish.published == 6
    });
    for ((pattern, expected), sub) in cases.iter().zip(&mut subs) {
        let msgs = messages_until_pong(sub);
        let mut got: Vec<&str> = msgs.iter().map(|m| m.channel.as_str()).collect();
        got.sort();
        let mut want = expected.to_vec();
        want.sort();
        assert_eq!(got, want, "pattern {pattern}");
        assert!(msgs
            .iter()
            .all(|m| m.kind == "pmessage" && m.pattern.as_deref() == Some(pattern)));
    }
}

#[test]
fn unsubscribe_stops_delivery() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.subscribe(&["AAA", "BBB"]);
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(1, "AAA", "1", "2"), &tick(1, "BBB", "1", "2")]);
    s.until_latest(&[("AAA".to_string(), 1), ("BBB".to_string(), 1)].into());
    s.cmd(&["UNSUBSCRIBE", "AAA"]);
    match s.frame() {
        Frame::Array(items) => {
            assert_eq!(items[0], Frame::Bulk(Some(b"unsubscribe".to_vec())));
            assert_eq!(items[2], Frame::Integer(1));
        }
        other => panic!("{other:?}"),
    }
    feed.lines(&[&tick(2, "AAA", "1", "2"), &tick(2, "BBB", "1", "2")]);
    wait_until("second round published", || {
        e.counters().snapshot().publish.published == 4
    });
    let msgs = messages_until_pong(&mut s);
    let chans: Vec<&str> = msgs.iter().map(|m| m.channel.as_str()).collect();
    assert_eq!(chans, vec!["BBB"]);
}

#[test]
fn unchanged_symbol_is_never_published_twice() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    for i in 1..=200u64 {
        feed.lines(&[&tick(i, "ONE", "1", "2")]);
    }
    wait_until("all taken", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 200 && c.publish.published + c.publish.conflated == 200
    });
    let msgs = messages_until_pong(&mut s);
    let seqs: Vec<u64> = msgs.iter().map(|m| m.seq()).collect();
    let mut dedup = seqs.clone();
    dedup.dedup();
    assert_eq!(seqs, dedup, "a value was delivered twice");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*seqs.last().unwrap(), 200);
    let c = e.counters().snapshot();
    assert_eq!(c.publish.published as usize, seqs.len());
}

#[test]
fn a_publish_rate_cap_conflates_but_still_delivers_the_latest() {
    use crate::util::engine_with;
    let e = engine_with(|c| c.max_publish_rate = 200);
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["R*"]);
    let mut feed = Feed::connect(e.feed_addr());
    let mut lines = Vec::new();
    for round in 1..=100u64 {
        for sym in 0..10 {
            lines.push(tick(
                round,
                &format!("R{sym}"),
                "1.1",
                &format!("1.{round:03}"),
            ));
        }
    }
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    let want = (0..10).map(|i| (format!("R{i}"), 100)).collect();
    let got = s.until_latest(&want);
    assert!(got.values().all(|m| m.field(3) == "1.100"));
    wait_until("all taken", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 1000 && c.publish.published + c.publish.conflated == 1000
    });
    let c = e.counters().snapshot();
    assert!(
        c.publish.conflated > 0,
        "1000 ticks in one burst under a 200/s cap must conflate"
    );
}

#[test]
fn every_idle_strategy_delivers() {
    use crate::util::engine_with;
    use tickfan::idle::IdleStrategy;
    for idle in [IdleStrategy::Spin, IdleStrategy::Yield, IdleStrategy::Park] {
        let e = engine_with(|c| c.idle = idle);
        let mut s = Sub::connect(e.subscriber_addr());
        s.subscribe(&["IDLE"]);
        let mut feed = Feed::connect(e.feed_addr());
        for i in 1..=20u64 {
            feed.lines(&[&tick(i, "IDLE", "1", "2")]);
        }
        let got = s.until_latest(&[("IDLE".to_string(), 20)].into());
        assert_eq!(got["IDLE"].seq(), 20, "{idle:?}");
        drop(e);
    }
}
