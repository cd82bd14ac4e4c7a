//! `STATUS <id>`: any connection learns where an order is (queued, at a
//! bridge, waiting for a retry, how it ended), also after the connection
//! that sent it has gone; replies for a closed connection are counted; an
//! id never seen, or past the dedup retention, is `UNKNOWN`; a malformed
//! `STATUS` is `INVALID` and counted. The venue is a gated script and the
//! order path runs on a simulated clock, so every state is held while it is
//! looked at.

use std::sync::Arc;
use std::time::Duration;

use tickfan::client::orders::{OrderState, Reply};
use tickfan::model::order_reasons::DoneStatus;
use tickfan::model::units::{Amount, Lots};
use tickfan::retry::SimClock;

use tickfan::bridge::Bridge;

use crate::util::{
    advance_until, bridges_engine, order_engine, wait_until, OpenOnDrop, OrderClient, ScriptBridge,
};

/// Asks `STATUS id` on `cl` and reads its answer.
fn status(cl: &mut OrderClient, id: &str) -> Reply {
    cl.line(&format!("STATUS {id}"));
    let r = cl.reply();
    assert_eq!(r.id(), Some(id), "{r:?}");
    r
}

fn state_of(r: &Reply) -> OrderState {
    match r {
        Reply::Status { state, .. } => state.clone(),
        other => panic!("not a STATUS reply: {other:?}"),
    }
}

/// Asks until `id` is in `want` (the gateway learns a worker's step with
/// the worker's next event or its next turn, not at once).
fn status_until(cl: &mut OrderClient, id: &str, want: &OrderState) -> Reply {
    let mut last = None;
    wait_until(&format!("{id} is {want:?}"), || {
        let r = status(cl, id);
        let hit = &state_of(&r) == want;
        last = Some(r);
        hit
    });
    last.unwrap()
}

#[test]
fn an_order_sent_on_one_connection_is_followed_from_another() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut a = OrderClient::connect(e.order_addr());
    let mut b = OrderClient::connect(e.order_addr());
    // One worker: g1 is held at the venue, q1 waits in the queue behind it.
    a.accepted("g1", "GATE", "2");
    a.accepted("q1", "EURUSD", "1.50");
    let at = status_until(&mut b, "g1", &OrderState::AtBridge);
    assert_eq!(
        at,
        Reply::Status {
            id: "g1".into(),
            state: OrderState::AtBridge,
            cum: Lots(0),
            amount: Amount(0),
            left: Lots(200),
            attempts: 1,
        }
    );
    let q = status(&mut b, "q1");
    assert!(
        matches!(
            &q,
            Reply::Status {
                state: OrderState::Queued,
                left: Lots(150),
                attempts: 0,
                ..
            }
        ),
        "{q:?}"
    );
    // A transient failure waits for its retry (the simulated clock holds it there).
    bridge.open_gate();
    a.until_terminal("g1");
    a.until_terminal("q1");
    a.accepted("t1", "TX", "1");
    let r = status_until(&mut b, "t1", &OrderState::RetryWait);
    assert!(matches!(r, Reply::Status { attempts: 1, .. }), "{r:?}");

    let done = status(&mut b, "g1");
    assert_eq!(
        done,
        Reply::Status {
            id: "g1".into(),
            state: OrderState::Done(DoneStatus::Filled),
            cum: Lots(200),
            amount: Amount::of(Lots(200), tickfan::model::units::Price(110_000)),
            left: Lots(0),
            attempts: 1,
        }
    );
    // Retries run out: dead, with every attempt counted.
    advance_until(&clock, 25, "five attempts", || {
        bridge.calls_for("t1").len() == 5
    });
    a.until_terminal("t1");
    let dead = status(&mut b, "t1");
    assert!(
        matches!(&dead, Reply::Status { state: OrderState::Dead(r), attempts: 5, left: Lots(100), .. } if r == "retries_exhausted"),
        "{dead:?}"
    );
    // The sending connection sees the same answer.
    assert_eq!(status(&mut a, "t1"), dead);
}

#[test]
fn a_split_order_shows_its_chunks_steps_under_its_own_id() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = bridges_engine(&clock, vec![Arc::clone(&bridge) as Arc<dyn Bridge>], |c| {
        c.order.workers = 1;
        c.order.large_workers = 2;
    });
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    // 1,000 lots: ten chunks of 100, two held at the venue at a time.
    cl.accepted("big", "GATE", "1000");
    let r = status_until(&mut cl, "big", &OrderState::AtBridge);
    assert!(
        matches!(
            r,
            Reply::Status {
                cum: Lots(0),
                left: Lots(100_000),
                ..
            }
        ),
        "{r:?}"
    );
    wait_until("two chunks at the venue", || {
        bridge.chunk_calls("big").len() == 2
    });
    assert_eq!(
        state_of(&status(&mut cl, "big.c0")),
        OrderState::Unknown,
        "chunks are not orders"
    );
    bridge.open_gate();
    cl.until_terminal("big");
    let done = status(&mut cl, "big");
    assert_eq!(
        done,
        Reply::Status {
            id: "big".into(),
            state: OrderState::Done(DoneStatus::Filled),
            cum: Lots(100_000),
            amount: Amount::of(Lots(100_000), tickfan::model::units::Price(110_000)),
            left: Lots(0),
            attempts: 10,
        }
    );
}

#[test]
fn a_client_that_closes_early_learns_the_outcome_on_a_new_connection() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut a = OrderClient::connect(e.order_addr());
    a.accepted("gone1", "GATE", "1");
    wait_until("held at the venue", || bridge.calls_for("gone1").len() == 1);
    // Reset, not a half-close: the engine drops the connection at once.
    socket2::SockRef::from(a.socket())
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(a);
    wait_until("the engine closed it", || {
        e.counters().snapshot().orders.gateway.connections_open == 0
    });
    bridge.open_gate();
    // Two FILLs and the DONE had nowhere to go.
    wait_until("three replies counted", || {
        e.counters()
            .snapshot()
            .orders
            .gateway
            .replies_to_closed_connections
            == 3
    });
    let m = crate::admin::scrape(e.admin_addr());
    assert_eq!(
        crate::admin::value(&m, "tickfan_orders_replies_to_closed_total", None),
        3.0
    );
    let mut b = OrderClient::connect(e.order_addr());
    let r = status(&mut b, "gone1");
    assert!(
        matches!(
            &r,
            Reply::Status {
                state: OrderState::Done(DoneStatus::Filled),
                cum: Lots(100),
                left: Lots(0),
                attempts: 1,
                ..
            }
        ),
        "{r:?}"
    );
}

#[test]
fn unknown_ids_and_ids_past_the_retention_are_unknown() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.order.dedup_retention = Duration::from_secs(60);
    });
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("STATUS never-sent");
    assert_eq!(
        cl.raw_reply(),
        "STATUS never-sent UNKNOWN cum=0 amount=0 left=0 attempts=0"
    );
    cl.accepted("r1", "EURUSD", "1");
    cl.until_terminal("r1");
    cl.line("STATUS r1");
    assert_eq!(
        cl.raw_reply(),
        "STATUS r1 DONE FILLED cum=1.00 amount=1.1000000 left=0.00 attempts=1"
    );
    // The dedup retention (engine clock) passes: forgotten with the id.
    clock.advance_ms(60_000);
    assert_eq!(state_of(&status(&mut cl, "r1")), OrderState::Unknown);
}

#[test]
fn a_malformed_status_line_is_invalid_and_counted() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    for (line, reply) in [
        (
            "STATUS",
            "REJECT - INVALID missing_field: usage: STATUS <id>",
        ),
        (
            "STATUS a/b",
            "REJECT - INVALID bad_id: id must be 1-36 bytes of A-Z a-z 0-9 . _ : -",
        ),
        (
            "STATUS o1 o2",
            "REJECT o1 INVALID too_many_fields: usage: STATUS <id>",
        ),
    ] {
        cl.line(line);
        assert_eq!(cl.raw_reply(), reply, "{line}");
    }
    // Still serving, and each one counted by its reason.
    cl.line("PING");
    assert_eq!(cl.reply(), Reply::Pong);
    let o = e.counters().snapshot().orders;
    let invalid = |r: &str| o.invalid.iter().find(|(n, _)| n == r).map_or(0, |x| x.1);
    assert_eq!(
        (
            invalid("missing_field"),
            invalid("bad_id"),
            invalid("too_many_fields")
        ),
        (1, 1, 1)
    );
}
