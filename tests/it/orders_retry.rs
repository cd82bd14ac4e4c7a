//! Transient failures wait in the delay queue (exponential backoff, full
//! jitter) and fire from the timer's own tick; permanent ones are
//! dead-lettered at once; deadlines are checked before every send. All on a
//! simulated clock: no test waits for real backoff time.

use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::{DoneStatus, RejectReason};
use tickfan::retry::SimClock;

use crate::util::{advance_until, order_engine, wait_until, OpenOnDrop, OrderClient, ScriptBridge};

const MS: u64 = 1_000_000;

#[test]
fn transient_twice_then_filled_on_the_third_attempt() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("k2", "T2", "1");
    advance_until(&clock, 20, "three attempts", || {
        bridge.calls_for("k2").len() == 3
    });
    let replies = cl.until_terminal("k2");
    assert!(matches!(
        replies.last(),
        Some(Reply::Done {
            status: DoneStatus::Filled,
            attempts: 3,
            ..
        })
    ));
    let calls = bridge.calls_for("k2");
    assert_eq!(
        calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // The timer counts a retry as it hands it over; wait for its store.
    wait_until("two retries counted", || {
        let r = e.counters().snapshot().orders;
        (r.retries[0], r.retries[1], r.retries[2]) == (1, 1, 0)
    });
}

#[test]
fn always_transient_is_dead_lettered_after_four_retries_with_delays_in_range() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("x1", "TX", "1");
    advance_until(&clock, 25, "five attempts", || {
        bridge.calls_for("x1").len() == 5
    });
    let last = cl.until_terminal("x1").pop().unwrap();
    assert!(
        matches!(&last, Reply::Dead { reason, attempts: 5, .. } if reason == "retries_exhausted"),
        "{last:?}"
    );
    wait_until("dead letter stored", || e.dlq().replayable("x1").is_some());
    let rec = e.dlq().replayable("x1").unwrap();
    assert_eq!((rec.source.as_str(), rec.attempts), ("order", 5));
    assert_eq!(rec.history.len(), 5);
    assert_eq!(rec.raw, "NEW x1 TX BUY 1");
    let ceilings: Vec<u64> = rec.history[1..].iter().map(|a| a.ceiling_ns / MS).collect();
    assert_eq!(ceilings, [100, 200, 400, 800], "base 100 ms doubling");
    for w in rec.history.windows(2) {
        let (prev, next) = (&w[0], &w[1]);
        assert!(
            next.delay_ns <= next.ceiling_ns,
            "full jitter: random(0, ceiling)"
        );
        assert!(
            next.at_ns >= prev.at_ns + next.delay_ns,
            "never fired early"
        );
        assert!(next.outcome.starts_with("transient"));
    }
    let calls = bridge.calls_for("x1");
    for (c, h) in calls.iter().zip(&rec.history) {
        assert_eq!((c.attempt, c.at_ns), (h.n, h.at_ns));
    }
    wait_until("four retries counted", || {
        e.counters().snapshot().orders.retries[..4] == [1, 1, 1, 1]
    });
}

#[test]
fn a_permanent_failure_is_dead_lettered_after_one_attempt() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("p1", "PERM", "3");
    let replies = cl.until_terminal("p1");
    assert_eq!(replies[0], Reply::Ack { id: "p1".into() });
    assert!(
        matches!(replies.last(), Some(Reply::Dead { reason, attempts: 1, .. }) if reason == "bridge_rejected")
    );
    clock.advance_ms(10_000);
    wait_until("dead letter stored", || e.dlq().replayable("p1").is_some());
    assert_eq!(bridge.calls_for("p1").len(), 1, "never retried");
    assert_eq!(e.retry_waiting(), 0);
    let rec = e.dlq().replayable("p1").unwrap();
    assert_eq!(rec.history[0].outcome, "permanent:unknown_instrument");
}

#[test]
fn a_retried_order_does_not_block_the_orders_behind_it_and_fires_with_no_other_traffic() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {}); // one worker
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("slow", "T1", "1");
    wait_until("the first attempt failed and the order waits", || {
        e.retry_waiting() == 1
    });
    for i in 0..5 {
        cl.new_order(&format!("b{i}"), "EURUSD", "1");
    }
    for i in 0..5 {
        let id = format!("b{i}");
        let r = cl.until_terminal(&id);
        assert!(matches!(r.last(), Some(Reply::Done { .. })), "{id}: {r:?}");
    }
    assert_eq!(
        e.retry_waiting(),
        1,
        "still waiting: its delay has not passed"
    );
    assert_eq!(bridge.calls_for("slow").len(), 1);
    // No more traffic: only the clock moves, and the timer fires on its own tick.
    clock.advance_ms(100);
    let r = cl.until_terminal("slow");
    assert!(
        matches!(r.last(), Some(Reply::Done { attempts: 2, .. })),
        "{r:?}"
    );
    let calls = bridge.calls_for("slow");
    assert!(calls[1].at_ns - calls[0].at_ns <= 100 * MS);
}

#[test]
fn a_full_delay_queue_dead_letters_the_order_at_once() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.retry_queue_capacity = 1);
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("q1", "TX", "1");
    wait_until("q1 waits for a retry", || e.retry_waiting() == 1);
    cl.new_order("q2", "TX", "1");
    let r = cl.until_terminal("q2");
    assert!(
        matches!(r.last(), Some(Reply::Dead { reason, attempts: 1, .. }) if reason == "retry_queue_full"),
        "{r:?}"
    );
    assert_eq!(e.retry_waiting(), 1, "q1 kept its place");
    assert_eq!(
        e.counters().snapshot().orders.dead[2],
        ("retry_queue_full".to_string(), 1)
    );
}

#[test]
fn an_order_past_its_ttl_when_a_worker_reaches_it_is_expired_not_sent() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let _open = OpenOnDrop(std::sync::Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("hold", "GATE", "1");
    wait_until("the worker holds the gate order", || {
        bridge.calls().len() == 1
    });
    cl.line("NEW late EURUSD BUY 1 ttl=500ms");
    cl.line("NEW fine EURUSD BUY 1 ttl=5s");
    let mut acks = 0;
    while acks < 3 {
        assert!(matches!(cl.reply(), Reply::Ack { .. }));
        acks += 1;
    }
    clock.advance_ms(1_000);
    bridge.open_gate();
    let r = cl.until_terminal("late");
    assert!(ends_expired(&r), "{r:?}");
    let r = cl.until_terminal("fine");
    assert!(matches!(r.last(), Some(Reply::Done { .. })), "{r:?}");
    assert!(
        bridge.calls_for("late").is_empty(),
        "an expired order is never sent"
    );
    assert_eq!(e.counters().snapshot().orders.expired, 1);
}

#[test]
fn an_order_past_its_ttl_when_its_retry_is_due_is_expired_not_retried() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("NEW short TX BUY 1 ttl=150ms");
    assert_eq!(cl.reply(), Reply::Ack { id: "short".into() });
    wait_until("waiting for a retry", || e.retry_waiting() == 1);
    clock.advance_ms(1_000);
    let r = cl.until_terminal("short");
    assert!(ends_expired(&r), "{r:?}");
    assert_eq!(bridge.calls_for("short").len(), 1);
    let s = e.counters().snapshot().orders;
    assert_eq!(
        (s.expired, s.retry.expired_when_due, s.gateway.accepted),
        (1, 1, 1)
    );
}

#[test]
fn several_bridges_side_by_side_and_a_retry_goes_to_the_next_one() {
    use std::sync::Arc;
    use tickfan::bridge::Bridge;
    use tickfan::runtime::{Engine, Injected};
    let clock = SimClock::new();
    let (a, b) = (ScriptBridge::new(), ScriptBridge::new());
    let mut c = crate::util::sim_config();
    c.order.workers = 2;
    let e = Engine::start_with(
        &c,
        Injected {
            clock: Some(Arc::new(clock.clone())),
            bridges: Some(vec![
                Arc::clone(&a) as Arc<dyn Bridge>,
                Arc::clone(&b) as Arc<dyn Bridge>,
            ]),
            ..Default::default()
        },
    )
    .unwrap();
    let mut cl = OrderClient::connect(e.order_addr());
    for i in 0..10 {
        cl.new_order(&format!("s{i}"), "EURUSD", "1");
    }
    cl.new_order("r", "T1", "1"); // admission number 11: bridge b first, then a
                                  // Two workers: the s-orders may end in any order, so collect them all
                                  // (waiting for each in turn would skip a terminal that came early).
    let mut ended = std::collections::HashSet::new();
    while ended.len() < 10 {
        let r = cl.reply();
        if r.is_terminal() && r.id().is_some_and(|id| id.starts_with('s')) {
            ended.insert(r.id().unwrap().to_string());
        }
    }
    wait_until("r waits for its retry", || e.retry_waiting() == 1);
    clock.advance_ms(100);
    let r = cl.until_terminal("r");
    assert!(
        matches!(r.last(), Some(Reply::Done { attempts: 2, .. })),
        "{r:?}"
    );
    assert_eq!((a.calls().len(), b.calls().len()), (6, 6), "spread evenly");
    assert_eq!(b.calls_for("r")[0].attempt, 1);
    assert_eq!(
        a.calls_for("r")[0].attempt,
        2,
        "the retry went to the other bridge"
    );
}

/// Did the order end with `REJECT <id> EXPIRED`?
fn ends_expired(r: &[Reply]) -> bool {
    matches!(
        r.last(),
        Some(Reply::Reject {
            reason: RejectReason::Expired,
            ..
        })
    )
}
