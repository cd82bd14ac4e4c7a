//! Order control: `CANCEL <id>` (queued or waiting for a retry → `DONE
//! CANCELED`; at a bridge → `REJECT TOO_LATE`; kept cancelled across a
//! restart), the kill switch (`POST /orders/halt|resume`, `?cancel=queued`,
//! `--start-halted`), and the retry quota (`--retry-share`: while new
//! orders wait, due retries take turns with them instead of going first).
//! All on a simulated clock with a venue a test opens by hand (`GATE`):
//! orders are held at the bridge, not timed.

use std::collections::HashMap;
use std::sync::Arc;

use tickfan::client::orders::{OrderState, Reply};
use tickfan::model::order_reasons::{DoneStatus, RejectReason};
use tickfan::retry::SimClock;
use tickfan::runtime::Engine;

use crate::admin::{http, scrape, value};
use crate::util::{advance_until, order_engine, wait_until, OpenOnDrop, OrderClient, ScriptBridge};

/// An engine of one worker whose venue holds order `g1` at its gate, and
/// the client that sent it. Fields drop in order: the gate opens first.
struct Gated {
    _open: OpenOnDrop,
    _clock: SimClock,
    bridge: Arc<ScriptBridge>,
    e: Engine,
    cl: OrderClient,
}

fn gated() -> Gated {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let open = OpenOnDrop(bridge.clone());
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("g1", "GATE", "1");
    wait_until("g1 at the bridge", || bridge.calls_for("g1").len() == 1);
    Gated {
        _open: open,
        _clock: clock,
        bridge,
        e,
        cl,
    }
}

/// The `STATUS` state of `id`.
fn state(cl: &mut OrderClient, id: &str) -> OrderState {
    cl.line(&format!("STATUS {id}"));
    loop {
        if let Reply::Status { id: got, state, .. } = cl.reply() {
            if got == id {
                return state;
            }
        }
    }
}

/// Terminal replies per order id among `replies`.
fn terminals(replies: &[Reply]) -> HashMap<String, usize> {
    let mut n = HashMap::new();
    for r in replies.iter().filter(|r| r.is_terminal()) {
        *n.entry(r.id().unwrap_or("-").to_string()).or_default() += 1;
    }
    n
}

#[test]
fn a_queued_order_is_cancelled_one_at_a_bridge_is_too_late_and_each_ends_once() {
    // `_open` bound last is dropped first: the gate opens before the engine stops.
    let Gated {
        _clock,
        bridge,
        e,
        mut cl,
        _open,
    } = gated(); // one worker, g1 at the gate
    cl.accepted("q1", "EURUSD", "2");
    cl.line("CANCEL q1");
    assert_eq!(
        cl.raw_reply(),
        "DONE q1 CANCELED cum=0.00 amount=0.0000000 attempts=0"
    );
    cl.line("CANCEL g1");
    assert_eq!(cl.raw_reply(), "REJECT g1 TOO_LATE at_bridge");
    assert_eq!(state(&mut cl, "q1"), OrderState::Done(DoneStatus::Canceled));
    // Refused cancels: one line each, the connection keeps going.
    cl.line("CANCEL q1");
    assert!(
        matches!(cl.reply(), Reply::Reject { reason: RejectReason::AlreadyDone, id, .. } if id == "q1")
    );
    cl.line("CANCEL nobody");
    assert!(
        matches!(cl.reply(), Reply::Reject { reason: RejectReason::UnknownOrder, id, .. } if id == "nobody")
    );
    cl.line("CANCEL g1 now");
    let bad = cl.raw_reply();
    assert!(
        bad.starts_with("REJECT g1 INVALID too_many_fields"),
        "{bad}"
    );
    cl.line("CANCEL");
    let bad = cl.raw_reply();
    assert!(bad.starts_with("REJECT - INVALID missing_field"), "{bad}");
    bridge.open_gate();
    let g1 = cl.until_terminal("g1");
    assert!(matches!(
        g1.last(),
        Some(Reply::Done {
            status: DoneStatus::Filled,
            ..
        })
    ));
    // Another order after them: the worker has passed q1's place in the queue.
    cl.accepted("after", "EURUSD", "1");
    cl.until_terminal("after");
    assert!(bridge.calls_for("q1").is_empty(), "never sent");
    let o = e.counters().snapshot().orders;
    assert_eq!(o.gateway.cancelled, 1);
    assert!(o.done.iter().any(|(s, n)| s == "CANCELED" && *n == 1));
    let rejected: HashMap<_, _> = o.rejected.iter().cloned().collect();
    assert_eq!(
        (
            rejected["TOO_LATE"],
            rejected["ALREADY_DONE"],
            rejected["UNKNOWN_ORDER"]
        ),
        (1, 1, 1)
    );
}

#[test]
fn an_order_waiting_for_its_retry_is_cancelled_and_never_sent_again() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let _open = OpenOnDrop(bridge.clone());
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("tx", "TX", "1");
    wait_until("tx waits for its retry", || {
        e.retry_waiting() == 1 && state(&mut cl, "tx") == OrderState::RetryWait
    });
    cl.line("CANCEL tx");
    assert_eq!(
        cl.raw_reply(),
        "DONE tx CANCELED cum=0.00 amount=0.0000000 attempts=1"
    );
    // Its retry comes due: dropped unsent, its place in the retry stage freed.
    advance_until(
        &clock,
        50,
        "the cancelled retry leaves the delay queue",
        || e.retry_waiting() == 0,
    );
    cl.accepted("next", "EURUSD", "1");
    let all = cl.until_terminal("next");
    assert!(
        !terminals(&all).contains_key("tx"),
        "no second end: {all:?}"
    );
    assert_eq!(bridge.calls_for("tx").len(), 1, "the first attempt only");
}

#[test]
fn a_cancel_is_journaled_and_stays_cancelled_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = SimClock::new();
    let journal = |c: &mut tickfan::config::Config| {
        c.order.journal = true;
        c.order.data_dir = dir.path().to_path_buf();
    };
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, journal);
    let _open = OpenOnDrop(bridge.clone());
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("g1", "GATE", "1");
    wait_until("g1 at the bridge", || bridge.calls_for("g1").len() == 1);
    cl.accepted("q1", "EURUSD", "1");
    cl.accepted("q2", "EURUSD", "1");
    cl.line("CANCEL q1");
    assert_eq!(
        cl.raw_reply(),
        "DONE q1 CANCELED cum=0.00 amount=0.0000000 attempts=0"
    );
    bridge.open_gate();
    cl.until_terminal("g1");
    cl.until_terminal("q2");
    drop(cl);
    e.stop();

    let bridge2 = ScriptBridge::new();
    let e2 = order_engine(&clock, &bridge2, journal);
    let mut cl = OrderClient::connect(e2.order_addr());
    assert_eq!(state(&mut cl, "q1"), OrderState::Done(DoneStatus::Canceled));
    cl.new_order("q1", "EURUSD", "1");
    assert!(matches!(
        cl.reply(),
        Reply::Reject {
            reason: RejectReason::Duplicate,
            ..
        }
    ));
    // A recovered order would run before this one (one worker, queue order).
    cl.accepted("after", "EURUSD", "1");
    cl.until_terminal("after");
    assert!(bridge2.calls_for("q1").is_empty(), "not queued again");
}

#[test]
fn halt_refuses_new_orders_holds_the_queue_and_resume_lets_it_go() {
    // `_open` bound last is dropped first: the gate opens before the engine stops.
    let Gated {
        _clock,
        bridge,
        e,
        mut cl,
        _open,
    } = gated();
    let admin = e.admin_addr();
    cl.accepted("q1", "EURUSD", "1");

    assert_eq!(
        http(admin, "POST", "/orders/halt"),
        (200, "halted\n".into())
    );
    let again = http(admin, "POST", "/orders/halt");
    assert_eq!(again.0, 409, "{again:?}");
    assert_eq!(again.1, "already halted: nothing changed\n");
    assert_eq!(http(admin, "GET", "/orders/halt").0, 405);
    let (code, health) = http(admin, "GET", "/health?format=json");
    assert_eq!(code, 200);
    let health: serde_json::Value = serde_json::from_str(&health).unwrap();
    assert_eq!(health["orders_halted"], true, "{health}");
    assert_eq!(
        http(admin, "GET", "/health"),
        (200, "ok\norders: halted\n".into())
    );
    cl.new_order("n1", "EURUSD", "1");
    assert_eq!(cl.raw_reply(), "REJECT n1 SYSTEM_BUSY halted");
    wait_until("the halted gauge", || {
        value(&scrape(admin), "tickfan_orders_halted", None) == 1.0
    });

    // The order at the bridge finishes; the queued one is held.
    bridge.open_gate();
    cl.until_terminal("g1");
    cl.line("PING");
    assert_eq!(cl.reply(), Reply::Pong);
    assert_eq!(state(&mut cl, "q1"), OrderState::Queued);
    assert!(bridge.calls_for("q1").is_empty());

    assert_eq!(
        http(admin, "POST", "/orders/resume"),
        (200, "resumed\n".into())
    );
    assert_eq!(http(admin, "POST", "/orders/resume").0, 409);
    assert_eq!(http(admin, "GET", "/health"), (200, "ok\n".into()));
    let q1 = cl.until_terminal("q1");
    assert!(matches!(
        q1.last(),
        Some(Reply::Done {
            status: DoneStatus::Filled,
            ..
        })
    ));
    cl.accepted("n1", "EURUSD", "1"); // refused, so not a duplicate
    cl.until_terminal("n1");
    let o = e.counters().snapshot().orders;
    assert_eq!((o.gateway.halted_rejects, o.gateway.halted), (1, 0));
}

#[test]
fn halt_with_cancel_queued_cancels_every_order_not_at_a_bridge() {
    // `_open` bound last is dropped first: the gate opens before the engine stops.
    let Gated {
        _clock,
        bridge,
        e,
        mut cl,
        _open,
    } = gated();
    let admin = e.admin_addr();
    for i in 0..5 {
        cl.accepted(&format!("q{i}"), "EURUSD", "1");
    }
    assert_eq!(http(admin, "POST", "/orders/halt?cancel=all").0, 400);
    assert_eq!(http(admin, "POST", "/orders/halt?cancel=queued").0, 200);
    let mut got = Vec::new();
    while got.len() < 5 {
        let r = cl.reply();
        assert!(
            matches!(
                r,
                Reply::Done {
                    status: DoneStatus::Canceled,
                    ..
                }
            ),
            "{r:?}"
        );
        got.push(r);
    }
    bridge.open_gate();
    got.extend(cl.until_terminal("g1"));
    let ends = terminals(&got);
    assert_eq!(ends.len(), 6);
    assert!(ends.values().all(|n| *n == 1), "{ends:?}");
    assert!(bridge.calls().iter().all(|c| c.id == "g1"));
    assert_eq!(e.counters().snapshot().orders.gateway.cancelled, 5);
}

#[test]
fn start_halted_refuses_until_resumed_and_the_switch_needs_the_token() {
    use tickfan::auth::Token;
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.order.start_halted = true;
        c.token = Some(Token::new(b"s3cret-token-long-enough"));
    });
    let admin = e.admin_addr();
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("AUTH s3cret-token-long-enough");
    assert_eq!(cl.raw_reply(), "OK");
    cl.new_order("a", "EURUSD", "1");
    assert_eq!(cl.raw_reply(), "REJECT a SYSTEM_BUSY halted");
    assert_eq!(http(admin, "POST", "/orders/resume").0, 401, "token first");
    let resume = {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(admin).unwrap();
        write!(s, "POST /orders/resume HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token-long-enough\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        raw
    };
    assert!(resume.starts_with("HTTP/1.1 200"), "{resume}");
    cl.accepted("a", "EURUSD", "1");
    cl.until_terminal("a");
}

/// One worker; five retries come due while a gated order holds the worker
/// and five new orders wait behind it; then the gate opens. Which the
/// worker takes first is the quota's choice, read off the venue's calls.
fn order_after_the_gate(share: f64) -> Vec<String> {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.retry_share = share);
    let _open = OpenOnDrop(bridge.clone());
    let mut cl = OrderClient::connect(e.order_addr());
    for i in 0..5 {
        cl.accepted(&format!("r{i}"), "T1", "1");
    }
    wait_until("five first attempts failed", || e.retry_waiting() == 5);
    cl.accepted("g", "GATE", "1");
    wait_until("g at the bridge", || bridge.calls_for("g").len() == 1);
    for i in 0..5 {
        cl.accepted(&format!("n{i}"), "EURUSD", "1");
    }
    // Every retry due and handed to the lane (the retry delay is ≤ 100 ms).
    advance_until(&clock, 50, "five retries fired", || {
        e.counters().snapshot().orders.retries[0] == 5
    });
    bridge.open_gate();
    let mut ends = 0;
    while ends < 11 {
        if cl.reply().is_terminal() {
            ends += 1;
        }
    }
    let calls = bridge.calls();
    let at = calls.iter().position(|c| c.id == "g").unwrap();
    calls[at + 1..].iter().map(|c| c.id.clone()).collect()
}

#[test]
fn under_the_quota_due_retries_and_new_orders_take_turns_without_it_retries_go_first() {
    let kind = |ids: &[String]| -> String {
        ids.iter()
            .map(|id| if id.starts_with('r') { 'R' } else { 'N' })
            .collect()
    };
    assert_eq!(kind(&order_after_the_gate(0.5)), "RNRNRNRNRN");
    assert_eq!(kind(&order_after_the_gate(1.0)), "RRRRRNNNNN");
}

#[test]
fn a_retry_storm_and_a_stream_of_new_orders_both_keep_moving_on_four_workers() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.workers = 4);
    let admin = e.admin_addr();
    let mut storm = OrderClient::connect(e.order_addr());
    for i in 0..40 {
        storm.accepted(&format!("s{i}"), "T3", "1");
    }
    let mut fresh = OrderClient::connect(e.order_addr());
    let mut done_new = 0;
    for round in 0..20 {
        fresh.accepted(&format!("f{round}"), "EURUSD", "1");
        clock.advance_ms(150);
        let r = fresh.until_terminal(&format!("f{round}"));
        assert!(matches!(
            r.last(),
            Some(Reply::Done {
                status: DoneStatus::Filled,
                ..
            })
        ));
        done_new += 1;
    }
    advance_until(&clock, 200, "the storm drains", || {
        e.counters().snapshot().orders.done_total == 60
    });
    let o = e.counters().snapshot().orders;
    assert_eq!(done_new, 20);
    assert_eq!(
        o.retries[..3],
        [40, 40, 40],
        "every storm order retried three times"
    );
    wait_until("retry waits measured", || {
        value(
            &scrape(admin),
            "tickfan_stage_latency_seconds_count",
            Some(("stage", "order_retry_wait")),
        ) >= 120.0
    });
}

#[test]
fn a_stop_while_halted_still_ends_every_queued_order() {
    // `_open` bound last is dropped first: the gate opens before the engine stops.
    let Gated {
        _clock,
        bridge,
        e,
        mut cl,
        _open,
    } = gated();
    cl.accepted("q1", "EURUSD", "1");
    assert_eq!(http(e.admin_addr(), "POST", "/orders/halt").0, 200);
    bridge.open_gate();
    cl.until_terminal("g1");
    e.stop();
    let rest = cl.until_closed();
    assert_eq!(terminals(&rest).get("q1"), Some(&1), "{rest:?}");
}

#[test]
fn a_split_order_cancels_its_unstarted_chunks_and_ends_partial_for_what_executed() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.large_workers = 1);
    let _open = OpenOnDrop(bridge.clone());
    let mut cl = OrderClient::connect(e.order_addr());
    // 300 lots: three chunks of 100; the one large worker blocks on the first.
    cl.accepted("big", "GATE", "300");
    wait_until("the first chunk at the bridge", || {
        bridge.chunk_calls("big").len() == 1 && state(&mut cl, "big") == OrderState::AtBridge
    });
    cl.line("CANCEL big");
    cl.line("CANCEL big");
    // The second is refused at once; the first is answered by the order's end.
    assert!(
        matches!(cl.reply(), Reply::Reject { reason: RejectReason::AlreadyDone, id, .. } if id == "big")
    );
    bridge.open_gate();
    let replies = cl.until_terminal("big");
    let last = replies.last().unwrap();
    assert!(
        matches!(
            last,
            Reply::Done {
                status: DoneStatus::Partial,
                attempts: 1,
                ..
            }
        ),
        "{replies:?}"
    );
    let Reply::Done { cum, .. } = last else {
        unreachable!()
    };
    assert_eq!(cum.to_string(), "100.00", "the first chunk's lots only");
    assert_eq!(
        bridge.chunk_calls("big").len(),
        1,
        "the other two never sent"
    );
    assert_eq!(terminals(&replies).get("big"), Some(&1));
    assert_eq!(state(&mut cl, "big"), OrderState::Done(DoneStatus::Partial));
    cl.line("CANCEL big");
    assert!(matches!(
        cl.reply(),
        Reply::Reject {
            reason: RejectReason::AlreadyDone,
            ..
        }
    ));
    assert_eq!(e.counters().snapshot().orders.gateway.cancelled, 1);
}
