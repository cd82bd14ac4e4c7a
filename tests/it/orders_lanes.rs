//! Lanes: small orders never wait behind a large one (asserted on what
//! completes while the large order is held at the venue, not on time),
//! neither lane starves the other, large orders are chunked across the
//! bridges and their fills folded into the parent's absolute values, and
//! each lane has its own metrics.

use std::sync::Arc;

use tickfan::bridge::Bridge;
use tickfan::client::orders::Reply;
use tickfan::metrics::Stage;
use tickfan::model::order_reasons::DoneStatus;
use tickfan::model::units::Lots;
use tickfan::order::config::LaneMode;
use tickfan::retry::SimClock;

use crate::util::{
    advance_until, bridges_engine, wait_until, OpenOnDrop, OrderClient, ScriptBridge,
};

fn two_bridges() -> (Arc<ScriptBridge>, Arc<ScriptBridge>, Vec<Arc<dyn Bridge>>) {
    let (a, b) = (ScriptBridge::new(), ScriptBridge::new());
    let v: Vec<Arc<dyn Bridge>> = vec![Arc::clone(&a) as _, Arc::clone(&b) as _];
    (a, b, v)
}

/// Reads replies until `n` terminal ones have come; returns their ids in
/// order of arrival and every reply read.
fn terminals(cl: &mut OrderClient, n: usize) -> (Vec<String>, Vec<Reply>) {
    let (mut ids, mut all) = (Vec::new(), Vec::new());
    while ids.len() < n {
        let r = cl.reply();
        if r.is_terminal() {
            ids.push(r.id().unwrap().to_string());
        }
        all.push(r);
    }
    (ids, all)
}

#[test]
fn small_orders_complete_while_a_large_one_is_held_at_the_venue() {
    let clock = SimClock::new();
    let (a, b, bridges) = two_bridges();
    let e = bridges_engine(&clock, bridges, |c| {
        c.order.workers = 1;
        c.order.large_workers = 2;
    });
    // A failing assertion must not leave workers held at the venue while
    // the engine shuts down (dropped first: declared after the engine).
    let _open_a = OpenOnDrop(Arc::clone(&a));
    let _open_b = OpenOnDrop(Arc::clone(&b));
    let mut cl = OrderClient::connect(e.order_addr());
    // 1,000 lots: ten chunks of 100; GATE holds every chunk at the venue.
    cl.accepted("big", "GATE", "1000");
    wait_until("both large workers hold a chunk", || {
        a.chunk_calls("big").len() + b.chunk_calls("big").len() == 2
    });
    // A second large order queues in the large lane: its gauges move.
    cl.accepted("big2", "EURUSD", "150");
    wait_until("the large lane's gauges show it", || {
        let o = e.counters().snapshot().orders;
        o.lane_depth == (0, 1) && o.lane_oldest_age_us.1 > 0
    });
    for i in 0..20 {
        cl.new_order(&format!("s{i}"), "EURUSD", "1.50");
    }
    // Every small order ends while the large ones cannot.
    let (done, _) = terminals(&mut cl, 20);
    assert!(done.iter().all(|id| id.starts_with('s')), "{done:?}");
    a.open_gate();
    b.open_gate();
    let (mut rest, replies) = terminals(&mut cl, 2);
    rest.sort();
    assert_eq!(
        rest,
        ["big", "big2"],
        "the large ones end after every small one"
    );

    // The parent's fills: absolute, increasing, folded from the chunks.
    let mut last = Lots(0);
    let mut n_fills = 0;
    for r in replies.iter().filter(|r| r.id() == Some("big")) {
        match r {
            Reply::Fill { n, cum, left, .. } => {
                n_fills += 1;
                assert_eq!(*n, n_fills, "engine fill numbers 1, 2, 3…");
                assert!(*cum > last, "absolute and increasing");
                assert_eq!(cum.0 + left.0, 100_000);
                last = *cum;
            }
            Reply::Done {
                status,
                cum,
                attempts,
                ..
            } => {
                assert_eq!(*status, DoneStatus::Filled);
                assert_eq!(*cum, Lots(100_000));
                assert_eq!(*attempts, 10, "one attempt per chunk");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(n_fills, 20, "two venue fills per chunk");
    // Ten chunks of 100 lots, spread over both venues.
    let mut chunks = a.chunk_calls("big");
    chunks.extend(b.chunk_calls("big"));
    chunks.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(chunks.len(), 10);
    assert_eq!(
        (a.chunk_calls("big").len(), b.chunk_calls("big").len()),
        (5, 5)
    );
    assert!(
        a.calls_for("big").is_empty() && b.calls_for("big").is_empty(),
        "never sent whole"
    );

    wait_until("counters settle", || {
        e.counters().snapshot().orders.gateway.in_flight == 0
    });
    let s = e.counters().snapshot().orders;
    assert_eq!((s.sequencing.large_orders, s.sequencing.chunks), (2, 12));
    let report = e.stop();
    let count = |st| report.stage(st).map_or(0, |x| x.pct.count);
    assert_eq!(count(Stage::OrderE2eSmall), 20);
    assert_eq!(count(Stage::OrderE2eLarge), 2);
    assert_eq!(count(Stage::OrderQueueWaitLarge), 2);
    assert_eq!(count(Stage::OrderProcessLarge), 12, "one per chunk attempt");
    assert_eq!(count(Stage::OrderProcessSmall), 20);
}

#[test]
fn in_one_shared_lane_the_same_small_orders_wait_behind_the_large_ones() {
    // The counter-experiment: what the lanes prevent.
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = bridges_engine(&clock, vec![Arc::clone(&bridge) as _], |c| {
        c.order.workers = 1;
        c.order.large_workers = 1;
        c.order.lanes.mode = LaneMode::Shared;
    });
    // A failing assertion must not leave workers held at the venue while
    // the engine shuts down (dropped first: declared after the engine).
    let _open_bridge = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("big1", "GATE", "1000");
    cl.new_order("big2", "GATE", "1000");
    wait_until("both workers hold a whole large order", || {
        bridge.calls().len() == 2
    });
    for i in 0..20 {
        cl.new_order(&format!("s{i}"), "EURUSD", "1.50");
    }
    wait_until("every small order queued behind them", || {
        e.counters().snapshot().orders.lane_depth.0 == 20
    });
    assert_eq!(e.counters().snapshot().orders.done_total, 0);
    bridge.open_gate();
    let (done, _) = terminals(&mut cl, 22);
    assert_eq!(done.len(), 22);
    e.stop();
}

#[test]
fn a_steady_stream_of_large_orders_does_not_starve_the_small_lane() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = bridges_engine(&clock, vec![Arc::clone(&bridge) as _], |c| {
        c.order.workers = 1;
        c.order.large_workers = 2;
        c.order.large_queue_capacity = 5;
    });
    // A failing assertion must not leave workers held at the venue while
    // the engine shuts down (dropped first: declared after the engine).
    let _open_bridge = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    // Large orders keep coming (held at the venue, the lane saturated and
    // refusing the excess) while small orders arrive in between.
    let mut small_done = 0;
    let mut large_acked = 0;
    for i in 0..30 {
        cl.new_order(&format!("L{i}"), "GATE", "500");
        cl.new_order(&format!("s{i}"), "EURUSD", "0.10");
        // This small order's DONE arrives while every large one is held.
        loop {
            let r = cl.reply();
            match &r {
                Reply::Ack { id } if id.starts_with('L') => large_acked += 1,
                Reply::Done { id, status, .. } if id == &format!("s{i}") => {
                    assert_eq!(*status, DoneStatus::Filled);
                    small_done += 1;
                    break;
                }
                Reply::Done { id, .. } | Reply::Dead { id, .. } if id.starts_with('L') => {
                    panic!("large order {id} ended with the gate closed")
                }
                _ => {}
            }
        }
    }
    assert_eq!(small_done, 30);
    assert!(large_acked > 0);
    // The last large ACKs may still be on their way when the last small
    // DONE arrives: count acceptances on the engine instead.
    wait_until("the large lane filled its own queue", || {
        e.counters().snapshot().orders.gateway.accepted >= 30 + 5
    });
    assert!(
        e.counters().snapshot().orders.busy > 0,
        "and refused the excess"
    );
    bridge.open_gate();
    wait_until("the large ones end too", || {
        e.counters().snapshot().orders.gateway.in_flight == 0
    });
    e.stop();
}

#[test]
fn a_flood_of_held_small_orders_does_not_starve_the_large_lane() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = bridges_engine(&clock, vec![Arc::clone(&bridge) as _], |c| {
        c.order.workers = 2;
        c.order.large_workers = 1;
        c.order.queue_capacity = 50;
    });
    // A failing assertion must not leave workers held at the venue while
    // the engine shuts down (dropped first: declared after the engine).
    let _open_bridge = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    for i in 0..60 {
        cl.new_order(&format!("s{i}"), "GATE", "1");
    }
    wait_until("the small lane is full and its workers held", || {
        let o = e.counters().snapshot().orders;
        // 48 or 50 queued: the workers may take their two before or after
        // the queue first fills (the rest is refused SYSTEM_BUSY either way).
        bridge.calls().len() == 2 && o.lane_depth.0 >= 48
    });
    cl.new_order("big", "EURUSD", "250");
    let replies = cl.until_terminal("big");
    assert!(matches!(
        replies.last(),
        Some(Reply::Done {
            status: DoneStatus::Filled,
            cum: Lots(25_000),
            ..
        })
    ));
    assert_eq!(
        bridge.chunk_calls("big").len(),
        3,
        "250 lots: chunks of 83.34, 83.33, 83.33"
    );
    bridge.open_gate();
    wait_until("the small ones end too", || {
        e.counters().snapshot().orders.gateway.in_flight == 0
    });
    e.stop();
}

#[test]
fn a_chunk_that_fails_transiently_is_retried_in_the_large_lane() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = bridges_engine(&clock, vec![Arc::clone(&bridge) as _], |c| {
        c.order.workers = 1;
        c.order.large_workers = 1;
    });
    let mut cl = OrderClient::connect(e.order_addr());
    // T1: every chunk fails once, then fills.
    cl.accepted("big", "T1", "300");
    advance_until(&clock, 20, "every chunk's retry", || {
        bridge.chunk_calls("big").len() == 6
    });
    let replies = cl.until_terminal("big");
    assert!(
        matches!(
            replies.last(),
            Some(Reply::Done {
                status: DoneStatus::Filled,
                cum: Lots(30_000),
                attempts: 6,
                ..
            })
        ),
        "{replies:?}"
    );
    let mut attempts: Vec<(String, u32)> = bridge
        .chunk_calls("big")
        .into_iter()
        .map(|c| (c.id, c.attempt))
        .collect();
    attempts.sort();
    assert_eq!(
        attempts,
        [
            ("big.c0".into(), 1),
            ("big.c0".into(), 2),
            ("big.c1".into(), 1),
            ("big.c1".into(), 2),
            ("big.c2".into(), 1),
            ("big.c2".into(), 2)
        ]
    );
    e.stop();
}
