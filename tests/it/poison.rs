//! Poison lines: dead-lettered with a named reason, counted, never retried;
//! the connection stays open and the good lines around them still flow.

use std::io::Write;

use tickfan::model::poison::PoisonReason as R;

use crate::util::{engine, engine_with, tick, wait_until, Feed, Sub};

#[test]
fn each_bad_line_is_dead_lettered_with_its_reason_and_good_lines_flow() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.subscribe(&["GOOD"]);
    let mut feed = Feed::connect(e.feed_addr());
    let long = format!("1,LONG,{},1,1,1", "9".repeat(400));
    let cases: Vec<(String, R)> = vec![
        ("1,GOOD,1.1,1.2,1".into(), R::WrongFieldCount),
        ("1,GOOD,,1.2,1,1".into(), R::EmptyField),
        ("1,GOOD,1.x,1.2,1,1".into(), R::BadNumber),
        ("abc,GOOD,1.1,1.2,1,1".into(), R::BadNumber),
        ("1,GOOD,0,1.2,1,1".into(), R::NonPositivePrice),
        ("1,GOOD,1.1,-1.2,1,1".into(), R::NonPositivePrice),
        ("1,GOOD,1.1,1.2,-5,1".into(), R::NegativeQuantity),
        ("1,BAD SYM,1.1,1.2,1,1".into(), R::BadSymbol),
        (
            "1,ABCDEFGHIJKLMNOPQRSTUVWXY,1.1,1.2,1,1".into(),
            R::BadSymbol,
        ),
        (long.clone(), R::LineTooLong),
    ];
    let mut n_good = 0u64;
    for (bad, _) in &cases {
        n_good += 1;
        feed.lines(&[&tick(n_good, "GOOD", "1.1", "1.2"), bad]);
    }
    // Invalid UTF-8, sent raw.
    feed.send(b"1,GO\xff\xfeOD,1.1,1.2,1,1\n");
    n_good += 1;
    feed.lines(&[
        &tick(n_good, "GOOD", "1.1", "1.2"),
        "ts_ns,symbol,bid,ask,bid_qty,ask_qty",
        "# comment",
    ]);

    let got = s.until_latest(&[("GOOD".to_string(), n_good)].into());
    assert_eq!(
        got["GOOD"].seq(),
        n_good,
        "every good line counted in order"
    );
    wait_until("all poison stored in the DLQ", || {
        e.dlq().len() == cases.len() + 1
    });

    let c = e.counters().snapshot();
    assert_eq!(c.feed.ticks_valid, n_good);
    assert_eq!(c.poison_total, cases.len() as u64 + 1);
    assert_eq!(c.ticks_received, c.feed.ticks_valid + c.poison_total);
    assert_eq!(c.feed.lines_skipped, 2);
    for reason in [
        R::WrongFieldCount,
        R::EmptyField,
        R::NegativeQuantity,
        R::LineTooLong,
        R::InvalidUtf8,
    ] {
        assert_eq!(e.counters().poison(reason), 1, "{reason}");
    }
    assert_eq!(e.counters().poison(R::BadNumber), 2);
    assert_eq!(e.counters().poison(R::NonPositivePrice), 2);
    assert_eq!(e.counters().poison(R::BadSymbol), 2);

    let recs = e.dlq().recent(100);
    let reasons: Vec<&str> = recs.iter().map(|r| r.reason.as_str()).collect();
    let expected: Vec<&str> = cases
        .iter()
        .map(|(_, r)| r.as_str())
        .chain(["invalid_utf8"])
        .collect();
    assert_eq!(
        reasons, expected,
        "in arrival order, each once (never retried)"
    );
    assert_eq!(recs[2].raw, "1,GOOD,1.x,1.2,1,1");
    assert_eq!(recs[2].source, "feed");
    assert!(recs.iter().all(|r| r.attempts == 1));
    let too_long = &recs[9];
    assert_eq!(
        too_long.raw_len as usize,
        256 + 1,
        "counted up to the limit"
    );
    assert!(recs[10].raw_hex.is_some());
}

#[test]
fn lines_split_across_reads_and_crlf_are_reassembled() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.subscribe(&["SPLIT"]);
    let mut feed = Feed::connect(e.feed_addr());
    let line = b"1701388800123456789,SPLIT,1.08512,1.08515,1000000,1500000\r\n";
    // Three writes, each waited for until the engine has read it.
    for (i, part) in [&line[..10], &line[10..30], &line[30..]].iter().enumerate() {
        feed.send(part);
        let want: u64 = [10, 30, line.len() as u64][i];
        wait_until("engine read the part", || {
            e.counters().snapshot().feed.bytes_read >= want
        });
    }
    let m = s.message();
    assert!(m
        .payload
        .starts_with("1701388800123456789,SPLIT,1.08512,1.08515,1000000,1500000,1,"));
    assert_eq!(e.counters().snapshot().poison_total, 0);
}

#[test]
fn a_line_cut_by_disconnect_is_dead_lettered() {
    let e = engine();
    let mut feed = Feed::connect(e.feed_addr());
    feed.send(b"1,CUT,1.1,1.2,1000000,15");
    feed.stream().flush().unwrap();
    drop(feed);
    wait_until("truncated line counted", || {
        e.counters().poison(R::TruncatedAtEof) == 1
    });
    wait_until("and stored", || e.dlq().len() == 1);
    assert_eq!(e.dlq().recent(1)[0].raw, "1,CUT,1.1,1.2,1000000,15");
    assert_eq!(
        e.counters().snapshot().feed.ticks_valid,
        0,
        "a cut line is never taken as valid"
    );
}

#[test]
fn symbol_limit_refuses_new_symbols_only() {
    let e = engine_with(|c| c.max_symbols = 2);
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[
        &tick(1, "A", "1", "2"),
        &tick(1, "B", "1", "2"),
        &tick(1, "C", "1", "2"),
        &tick(2, "A", "1", "2"),
    ]);
    s.until_latest(&[("A".to_string(), 2), ("B".to_string(), 1)].into());
    wait_until("C refused", || e.counters().poison(R::SymbolLimit) == 1);
    assert_eq!(e.symbols().len(), 2);
}

#[test]
fn several_feeds_at_once() {
    let e = engine();
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["F*"]);
    let mut feeds: Vec<Feed> = (0..4).map(|_| Feed::connect(e.feed_addr())).collect();
    for round in 1..=100u64 {
        for (i, f) in feeds.iter_mut().enumerate() {
            f.lines(&[&tick(round, &format!("F{i}"), "1.5", "1.6")]);
        }
    }
    let want = (0..4).map(|i| (format!("F{i}"), 100)).collect();
    s.until_latest(&want);
    wait_until("4 feeds counted", || {
        e.counters().snapshot().feed.connections_accepted == 4
    });
}
