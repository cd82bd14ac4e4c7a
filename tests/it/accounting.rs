//! Accounting that balances after mixed traffic (good and poison ticks, a
//! healthy and a stalled subscriber, orders that fill, fail, retry, are
//! malformed or duplicated): every input is accounted for exactly once.

use std::collections::HashMap;

use tickfan::client::orders::Reply;
use tickfan::retry::SimClock;

use crate::util::{
    advance_until, order_engine, tick, wait_until, Feed, OrderClient, ScriptBridge, Sub,
};

const SYMBOLS: usize = 30;
/// Rounds of ticks sent before the healthy subscriber reads them all.
const ROUNDS_PER_BATCH: u64 = 10;

#[test]
fn every_tick_update_and_order_is_accounted_for() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    // No pacing: the healthy subscriber reads each batch only once it is
    // sent, which the watch would pace (and conflate) for a few ms at its
    // first batches (docs/src/decisions.md, "the watch"); here every update must
    // reach it.
    let e = order_engine(&clock, &bridge, |c| {
        c.sub_hwm = 4096;
        c.sub_max_lag = std::time::Duration::ZERO;
    });
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    let mut stalled = Sub::connect(e.subscriber_addr());
    stalled.psubscribe(&["*"]);
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("ACC{i:02}")).collect();

    // Ticks: rounds of one tick per symbol with poison in between, until the
    // stalled subscriber is behind; the healthy one reads everything. A
    // batch is small (~30 KB of messages) and the healthy subscriber reads
    // all of it before the next, so its socket never fills and the engine
    // never conflates for it: what it receives is exactly what was published.
    let mut feed = Feed::connect(e.feed_addr());
    let mut sent_valid: HashMap<String, u64> = HashMap::new();
    let mut poison = 0u64;
    let mut seen: HashMap<String, (u64, u64)> = HashMap::new(); // symbol → (messages, last seq)
    let mut round = 0u64;
    let mut read_healthy = |want: &HashMap<String, u64>, seen: &mut HashMap<String, (u64, u64)>| {
        while want
            .iter()
            .any(|(s, q)| seen.get(s).is_none_or(|x| x.1 < *q))
        {
            let m = healthy.message();
            let e = seen.entry(m.channel.clone()).or_insert((0, 0));
            assert!(
                m.seq() > e.1,
                "a value twice or out of order on {}",
                m.channel
            );
            *e = (e.0 + 1, m.seq());
        }
    };
    while round < 20
        || !e
            .subscribers()
            .iter()
            .any(|s| s.id == 2 && s.pending_symbols > 0)
    {
        assert!(
            round < 1_000_000,
            "the stalled subscriber never fell behind"
        );
        let mut lines = Vec::new();
        for _ in 0..ROUNDS_PER_BATCH {
            round += 1;
            for s in &names {
                lines.push(tick(round, s, &format!("1.{round:07}"), "9.9"));
                *sent_valid.entry(s.clone()).or_default() += 1;
            }
            lines.push(format!("{round},BAD,x,1,1,1"));
            poison += 1;
        }
        let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        feed.lines(&refs);
        read_healthy(&sent_valid, &mut seen);
    }

    // Orders: fills, permanent failures, one retry each, malformed, duplicates.
    let mut oc = OrderClient::connect(e.order_addr());
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(format!("ok{i}"));
        oc.new_order(&format!("ok{i}"), "EURUSD", "1");
    }
    for i in 0..5 {
        ids.push(format!("perm{i}"));
        oc.new_order(&format!("perm{i}"), "PERM", "1");
    }
    for i in 0..3 {
        ids.push(format!("t{i}"));
        oc.new_order(&format!("t{i}"), "T1", "1");
    }
    let malformed = ["NEW", "NEW x EURUSD HOLD 1", "NEW y EURUSD BUY -1", "FROB"];
    for l in malformed {
        oc.line(l);
    }
    oc.new_order("ok0", "EURUSD", "1");
    oc.new_order("perm0", "EURUSD", "1");
    let order_lines = ids.len() as u64 + malformed.len() as u64 + 2;
    // Retries wait on the simulated clock: move it until every order ended.
    // Counted by terminal outcomes, not by the `in_flight` gauge alone: the
    // gauge is published at the end of a gateway turn, so right after the
    // turn that accepted the orders it can still read 0.
    advance_until(&clock, 100, "every accepted order ended", || {
        let o = e.counters().snapshot().orders;
        o.gateway.accepted == 28 && o.done_total + o.dead_total + o.expired == 28
    });
    let mut terminal = 0;
    let mut replies = 0;
    while terminal < ids.len() + malformed.len() + 2 {
        let r = oc.reply();
        replies += 1;
        if r.is_terminal() || matches!(r, Reply::Reject { .. }) {
            terminal += 1;
        }
    }
    assert!(replies >= terminal);

    // Everything the feed took is taken by the publisher.
    let valid_total: u64 = sent_valid.values().sum();
    wait_until("publisher drained", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == valid_total
            && c.publish.published + c.publish.conflated == c.feed.ticks_valid
    });
    let c = e.counters().snapshot();

    // Ticks: received = valid + poison, and both as sent. No read filled
    // its chunk (a batch is ~10 KB and read before the next is sent), so
    // nothing was conflated at the feed.
    assert_eq!(c.feed.ticks_conflated, 0);
    assert_eq!(c.ticks_received, c.feed.ticks_valid + c.poison_total);
    assert_eq!((c.feed.ticks_valid, c.poison_total), (valid_total, poison));
    // Per symbol: valid = published + conflated, from the healthy
    // subscriber's own count (messages, and the gaps between sequence numbers).
    let healthy_stats = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    assert_eq!(
        healthy_stats.conflations, 0,
        "the healthy subscriber was never behind"
    );
    let mut published = 0;
    for (s, n) in &sent_valid {
        let (messages, last_seq) = seen[s];
        assert_eq!(last_seq, *n, "{s}: the last value is the last tick");
        published += messages;
    }
    assert_eq!(
        published, c.publish.published,
        "engine and subscriber agree on published"
    );
    assert_eq!(valid_total - published, c.publish.conflated);

    // Every subscriber has each symbol's latest value or is counted behind:
    // the stalled one is behind now…
    let behind = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    assert!(behind.pending_symbols > 0);
    // …and once it reads, it receives the latest value of every symbol.
    let mut latest: HashMap<String, u64> = HashMap::new();
    while sent_valid.iter().any(|(s, n)| latest.get(s) != Some(n)) {
        let m = stalled.message();
        let prev = latest.insert(m.channel.clone(), m.seq());
        assert!(prev.is_none_or(|p| p < m.seq()), "older after newer");
    }
    wait_until("no longer behind", || {
        e.subscribers()
            .iter()
            .any(|s| s.id == 2 && s.pending_symbols == 0)
    });

    // Orders: received = accepted + rejected; accepted = done + dead + expired.
    let o = e.counters().snapshot().orders;
    let rejected: u64 = o.rejected.iter().map(|(_, n)| n).sum();
    assert_eq!(order_lines, o.gateway.accepted + rejected);
    assert_eq!((o.gateway.accepted, o.duplicates), (28, 2));
    assert_eq!(o.gateway.accepted, o.done_total + o.dead_total + o.expired);
    assert_eq!(o.dead_total, 5);
    assert_eq!(o.gateway.in_flight, 0);
}
