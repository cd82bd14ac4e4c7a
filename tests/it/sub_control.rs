//! A subscriber's own control over RESP: `TICKFAN.THROTTLE` caps updates
//! per symbol and bytes per second (window clock simulated: time moves only
//! when the test says), never reordering; `TICKFAN.SINCE` fills a gap from
//! the history ring exactly, also while the feed keeps sending, and names
//! the oldest held sequence when the gap is older; bad input gets one
//! error each and the connection stays usable.

use std::sync::Arc;
use std::thread;

use tickfan::client::resp::Frame;
use tickfan::config::Config;
use tickfan::retry::SimClock;
use tickfan::runtime::{Engine, Injected};

use crate::util::{tick, to_msg, wait_until, Feed, Msg, Sub};

/// An engine whose throttle windows run on `clock`.
fn engine_on(clock: &SimClock, f: impl FnOnce(&mut Config)) -> Engine {
    let mut c = Config::ephemeral();
    f(&mut c);
    Engine::start_with(
        &c,
        Injected {
            window_clock: Some(Arc::new(clock.clone())),
            ..Default::default()
        },
    )
    .expect("engine starts")
}

/// Waits until the publisher took every one of `n` valid ticks.
fn all_taken(e: &Engine, n: u64) {
    wait_until("every tick taken by the publisher", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == n && c.publish.published + c.publish.conflated == n
    });
}

/// Sends PING and returns the data messages that arrive before its reply.
fn messages_before_pong(sub: &mut Sub) -> Vec<Msg> {
    sub.cmd(&["PING"]);
    let mut out = Vec::new();
    loop {
        let f = sub.frame();
        if let Some(m) = to_msg(&f) {
            out.push(m);
            continue;
        }
        match &f {
            Frame::Simple(s) if s == b"PONG" => return out,
            Frame::Array(items) | Frame::Push(items)
                if items.first() == Some(&Frame::Bulk(Some(b"pong".to_vec()))) =>
            {
                return out
            }
            _ => {}
        }
    }
}

fn ok(sub: &mut Sub) {
    assert_eq!(sub.frame(), Frame::Simple(b"OK".to_vec()));
}

fn error_text(sub: &mut Sub) -> String {
    match sub.frame() {
        Frame::Error(e) => String::from_utf8(e).unwrap(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Feeds `count` ticks of `sym` numbered from `from` (one write).
fn feed_run(feed: &mut Feed, sym: &str, from: u64, count: u64) {
    let lines: Vec<String> = (from..from + count)
        .map(|i| tick(i, sym, &format!("1.{i:05}"), "2.00000"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
}

#[test]
fn throttle_delivers_at_most_once_per_window_the_latest_value_in_order() {
    let clock = SimClock::new();
    let e = engine_on(&clock, |_| {});
    let mut sub = Sub::connect(e.subscriber_addr());
    // One update per second per symbol; windows start now (t = 0).
    sub.cmd(&["TICKFAN.THROTTLE", "1"]);
    ok(&mut sub);
    sub.subscribe(&["EURUSD", "GBPUSD"]);
    let mut feed = Feed::connect(e.feed_addr());
    let mut fed = 0u64;
    let mut got: Vec<Msg> = Vec::new();
    const WINDOWS: u64 = 5;
    for w in 0..WINDOWS {
        // Many updates of both symbols inside one window…
        for _ in 0..8 {
            feed_run(&mut feed, "EURUSD", w * 100 + 1, 5);
            feed_run(&mut feed, "GBPUSD", w * 100 + 1, 5);
            fed += 10;
            all_taken(&e, fed);
        }
        // …at most one of each is delivered while the window lasts.
        let now = messages_before_pong(&mut sub);
        for sym in ["EURUSD", "GBPUSD"] {
            let n = now.iter().filter(|m| m.channel == sym).count();
            assert!(n <= 1, "window {w}: {n} updates of {sym} in one window");
        }
        got.extend(now);
        clock.advance_ms(1000);
    }
    // After the last window opened, the latest value of each symbol arrives.
    let mut last = std::collections::HashMap::new();
    for m in &got {
        last.insert(m.channel.clone(), m.seq());
    }
    while last.get("EURUSD") != Some(&(WINDOWS * 40)) || last.get("GBPUSD") != Some(&(WINDOWS * 40))
    {
        let m = sub.message();
        last.insert(m.channel.clone(), m.seq());
        got.push(m);
    }
    for sym in ["EURUSD", "GBPUSD"] {
        let seqs: Vec<u64> = got
            .iter()
            .filter(|m| m.channel == sym)
            .map(|m| m.seq())
            .collect();
        assert!(
            seqs.windows(2).all(|p| p[0] < p[1]),
            "{sym}: never an older value after a newer one: {seqs:?}"
        );
        // One per window at most: WINDOWS windows elapsed, plus the one open now.
        assert!(
            seqs.len() as u64 <= WINDOWS + 1,
            "{sym}: {} updates in {WINDOWS} windows",
            seqs.len()
        );
        assert_eq!(
            *seqs.last().unwrap(),
            WINDOWS * 40,
            "{sym}: the last fed is the last delivered"
        );
    }
    let c = e.counters().snapshot();
    // Each symbol was held once per window; the takes after the hold in
    // that window (at least 6 of 8) were conflated.
    assert!(
        c.publish.throttled >= 2 * WINDOWS,
        "holds are counted: {}",
        c.publish.throttled
    );
    assert!(c.publish.subscriber_conflations >= 2 * 6 * WINDOWS, "{c:?}");
    // Removing the cap lets every update through again.
    sub.cmd(&["TICKFAN.THROTTLE", "0"]);
    ok(&mut sub);
    feed_run(&mut feed, "EURUSD", 10_000, 1);
    let m = sub.message();
    assert_eq!((m.channel.as_str(), m.seq()), ("EURUSD", WINDOWS * 40 + 1));
}

#[test]
fn maxbytes_caps_the_bytes_per_second() {
    let clock = SimClock::new();
    let e = engine_on(&clock, |_| {});
    let mut sub = Sub::connect(e.subscriber_addr());
    // 100 bytes per second: a burst of 10 bytes, so one ~80-byte frame
    // empties the credit for most of a second.
    sub.cmd(&["TICKFAN.THROTTLE", "0", "MAXBYTES", "100"]);
    ok(&mut sub);
    let syms: Vec<String> = (0..6).map(|i| format!("S{i}")).collect();
    let refs: Vec<&str> = syms.iter().map(|s| s.as_str()).collect();
    sub.subscribe(&refs);
    let mut feed = Feed::connect(e.feed_addr());
    for s in &syms {
        feed_run(&mut feed, s, 1, 3);
    }
    all_taken(&e, 18);
    let first = messages_before_pong(&mut sub);
    assert_eq!(first.len(), 1, "the credit holds one frame: {first:?}");
    let frame_bytes = |m: &Msg| {
        // *3 $7 message $<n> channel $<m> payload, as on the wire.
        let bulk = |n: usize| 1 + n.to_string().len() + 2 + n + 2;
        4 + bulk(7) + bulk(m.channel.len()) + bulk(m.payload.len())
    };
    let mut bytes = frame_bytes(&first[0]);
    let mut last: std::collections::HashMap<String, u64> =
        first.iter().map(|m| (m.channel.clone(), m.seq())).collect();
    let mut seconds = 0u64;
    while syms.iter().any(|s| last.get(s) != Some(&3)) {
        clock.advance_ms(1000);
        seconds += 1;
        // One frame per second of credit; nothing more until time moves.
        let m = sub.message();
        bytes += frame_bytes(&m);
        if let Some(prev) = last.insert(m.channel.clone(), m.seq()) {
            assert!(prev < m.seq(), "{}: {} after {prev}", m.channel, m.seq());
        }
        assert!(messages_before_pong(&mut sub).is_empty(), "over the credit");
        assert!(
            bytes as u64 <= 100 * seconds + 10 + 100,
            "{bytes} bytes in {seconds} s at 100 B/s"
        );
    }
    assert!(seconds <= syms.len() as u64, "each symbol's latest once");
}

#[test]
fn since_fills_a_gap_exactly_while_the_feed_keeps_sending() {
    let e = crate::util::engine_with(|c| {
        c.max_symbols = 16;
        c.history_depth = 4096;
    });
    const N: u64 = 3000;
    // A reference subscriber that stays connected and keeps reading sees
    // every published update.
    let mut reference = Sub::connect(e.subscriber_addr());
    reference.subscribe(&["EURUSD"]);
    let reference = thread::spawn(move || {
        let mut all: Vec<u64> = Vec::new();
        while all.last() != Some(&N) {
            all.push(reference.message().seq());
        }
        all
    });
    let mut leaver = Sub::connect(e.subscriber_addr());
    leaver.subscribe(&["EURUSD"]);
    let mut feed = Feed::connect(e.feed_addr());
    // One at a time: every update up to 100 is published (and held).
    for i in 1..=100 {
        feed_run(&mut feed, "EURUSD", i, 1);
        all_taken(&e, i);
    }
    // The leaver holds some seq, then goes away.
    let held = loop {
        let m = leaver.message();
        if m.seq() >= 50 {
            break m.seq();
        }
    };
    drop(leaver);
    // The feed keeps sending, batch after batch, while the leaver comes back.
    let counters = Arc::clone(e.counters());
    let feeder = thread::spawn(move || {
        for i in (101..=N).step_by(10) {
            feed_run(&mut feed, "EURUSD", i, 10);
            wait_until("the batch taken", || {
                let c = counters.snapshot();
                c.publish.published + c.publish.conflated == i + 9
            });
        }
    });
    wait_until("the feed under way", || {
        e.counters().snapshot().feed.ticks_valid >= 400
    });
    let mut back = Sub::connect(e.subscriber_addr());
    back.cmd(&["TICKFAN.SINCE", "EURUSD", &held.to_string()]);
    match back.frame() {
        Frame::Array(items) => {
            assert_eq!(items[0], Frame::Bulk(Some(b"subscribe".to_vec())));
            assert_eq!(items[1], Frame::Bulk(Some(b"EURUSD".to_vec())));
        }
        other => panic!("expected the subscribe confirmation, got {other:?}"),
    }
    assert!(
        e.counters().snapshot().feed.ticks_valid < N,
        "SINCE ran while the feed was still sending"
    );
    let mut caught_up: Vec<u64> = Vec::new();
    while caught_up.last() != Some(&N) {
        caught_up.push(back.message().seq());
    }
    let all = reference.join().unwrap();
    feeder.join().unwrap();
    let expected: Vec<u64> = all.into_iter().filter(|&q| q > held).collect();
    assert_eq!(
        caught_up, expected,
        "history then live: every update after {held}, no gap, no duplicate"
    );
    assert!(e.counters().snapshot().publish.since_frames > 0);
}

#[test]
fn since_older_than_the_ring_names_the_oldest_held_seq() {
    let e = crate::util::engine_with(|c| {
        c.max_symbols = 16;
        c.history_depth = 4;
    });
    let mut feed = Feed::connect(e.feed_addr());
    // One tick at a time, each published, so the ring holds 17..=20.
    for i in 1..=20u64 {
        feed_run(&mut feed, "EURUSD", i, 1);
        all_taken(&e, i);
    }
    let mut sub = Sub::connect(e.subscriber_addr());
    sub.cmd(&["TICKFAN.SINCE", "EURUSD", "3"]);
    assert_eq!(
        error_text(&mut sub),
        "ERR TICKFAN gap: oldest held seq is 17; fetch a snapshot"
    );
    // Nothing was subscribed; the connection still works.
    assert!(messages_before_pong(&mut sub).is_empty());
    sub.cmd(&["TICKFAN.SINCE", "EURUSD", "16"]);
    assert!(matches!(sub.frame(), Frame::Array(_)), "confirmation");
    let seqs: Vec<u64> = (0..4).map(|_| sub.message().seq()).collect();
    assert_eq!(seqs, [17, 18, 19, 20]);
    // Up to date: subscribed, nothing to replay.
    let mut fresh = Sub::connect(e.subscriber_addr());
    fresh.cmd(&["TICKFAN.SINCE", "EURUSD", "20"]);
    assert!(matches!(fresh.frame(), Frame::Array(_)), "confirmation");
    assert!(messages_before_pong(&mut fresh).is_empty());
    feed_run(&mut feed, "EURUSD", 21, 1);
    assert_eq!(fresh.message().seq(), 21, "then live");
    assert_eq!(sub.message().seq(), 21);
}

#[test]
fn bad_input_gets_one_error_each_and_the_connection_stays_usable() {
    let e = crate::util::engine_with(|c| c.history_depth = 2);
    let mut feed = Feed::connect(e.feed_addr());
    feed_run(&mut feed, "EURUSD", 1, 1);
    all_taken(&e, 1);
    let mut sub = Sub::connect(e.subscriber_addr());
    let errors_before = e.counters().snapshot().publish.command_errors;
    let cases: &[(&[&str], &str)] = &[
        (
            &["TICKFAN.THROTTLE", "fast"],
            "ERR TICKFAN throttle: max updates per second must be a number",
        ),
        (
            &["TICKFAN.THROTTLE", "-1"],
            "ERR TICKFAN throttle: max updates per second must be a number",
        ),
        (
            &["TICKFAN.THROTTLE", "1", "MAXBYTES", "-5"],
            "ERR TICKFAN throttle: MAXBYTES must be a non-negative integer",
        ),
        (
            &["TICKFAN.THROTTLE", "1", "MAXBYTES", "lots"],
            "ERR TICKFAN throttle: MAXBYTES must be a non-negative integer",
        ),
        (
            &["TICKFAN.THROTTLE", "1", "MAXRATE", "5"],
            "ERR TICKFAN throttle: syntax is",
        ),
        (
            &["TICKFAN.THROTTLE"],
            "ERR wrong number of arguments for 'tickfan.throttle' command",
        ),
        (
            &["TICKFAN.SINCE", "NOPE", "0"],
            "ERR TICKFAN since: unknown symbol 'NOPE'",
        ),
        (
            &["TICKFAN.SINCE", "EURUSD", "99"],
            "ERR TICKFAN since: seq 99 is ahead of the newest update of 'EURUSD' (1)",
        ),
        (
            &["TICKFAN.SINCE", "EURUSD", "-1"],
            "ERR TICKFAN since: seq must be a non-negative integer",
        ),
        (
            &["TICKFAN.SINCE", "EURUSD"],
            "ERR wrong number of arguments for 'tickfan.since' command",
        ),
    ];
    for (cmd, want) in cases {
        sub.cmd(cmd);
        let got = error_text(&mut sub);
        assert!(got.starts_with(want), "{cmd:?}: {got}");
    }
    let errors = e.counters().snapshot().publish.command_errors - errors_before;
    assert_eq!(errors, cases.len() as u64, "each error counted once");
    // Still usable, and nothing was subscribed by the failed SINCEs.
    assert!(messages_before_pong(&mut sub).is_empty());
    // Allowed in the RESP2 subscribed context, answered +OK.
    sub.subscribe(&["EURUSD"]);
    assert_eq!(sub.message().seq(), 1, "snapshot");
    sub.cmd(&["TICKFAN.THROTTLE", "2.5", "MAXBYTES", "0"]);
    ok(&mut sub);
    // And in RESP3.
    let mut r3 = Sub::connect(e.subscriber_addr());
    r3.cmd(&["HELLO", "3"]);
    let _ = r3.frame();
    r3.cmd(&["TICKFAN.THROTTLE", "0"]);
    ok(&mut r3);
    r3.cmd(&["TICKFAN.SINCE", "EURUSD", "0"]);
    match r3.frame() {
        Frame::Push(items) => assert_eq!(items[0], Frame::Bulk(Some(b"subscribe".to_vec()))),
        other => panic!("expected a push confirmation, got {other:?}"),
    }
    assert_eq!(r3.message().seq(), 1);
}

#[test]
fn history_and_caps_are_refused_with_one_line_when_out_of_range() {
    let mut c = Config::ephemeral();
    c.history_depth = 65_536;
    c.max_symbols = 1_000_000;
    let err = Engine::start(&c).unwrap_err().to_string();
    assert!(
        err.contains("--history-depth") && err.contains("MiB"),
        "{err}"
    );
    let mut c = Config::ephemeral();
    c.sub_max_rate = -1.0;
    let err = Engine::start(&c).unwrap_err().to_string();
    assert!(err.contains("--sub-max-rate"), "{err}");
}

#[test]
fn serve_wide_caps_apply_until_lifted_and_reset_restores_them() {
    let clock = SimClock::new();
    let e = engine_on(&clock, |c| c.sub_max_rate = 1.0);
    let mut sub = Sub::connect(e.subscriber_addr());
    sub.subscribe(&["EURUSD"]);
    let mut feed = Feed::connect(e.feed_addr());
    let mut fed = 0;
    let mut three_taken = |feed: &mut Feed| {
        for _ in 0..3 {
            fed += 1;
            feed_run(feed, "EURUSD", fed, 1);
            all_taken(&e, fed);
        }
    };
    three_taken(&mut feed);
    let seqs: Vec<u64> = messages_before_pong(&mut sub)
        .iter()
        .map(|m| m.seq())
        .collect();
    assert_eq!(seqs, [1], "--sub-max-rate 1: one per window");
    // Lifting the cap sends the held latest value.
    sub.cmd(&["TICKFAN.THROTTLE", "0"]);
    ok(&mut sub);
    assert_eq!(sub.message().seq(), 3);
    // RESET brings the serve-wide cap back.
    sub.cmd(&["RESET"]);
    assert_eq!(sub.frame(), Frame::Simple(b"RESET".to_vec()));
    sub.subscribe(&["EURUSD"]);
    assert_eq!(sub.message().seq(), 3, "snapshot");
    three_taken(&mut feed);
    let seqs: Vec<u64> = messages_before_pong(&mut sub)
        .iter()
        .map(|m| m.seq())
        .collect();
    assert_eq!(seqs, [4], "capped again after RESET");
    clock.advance_ms(1000);
    assert_eq!(sub.message().seq(), 6, "the latest once the window opens");
}
