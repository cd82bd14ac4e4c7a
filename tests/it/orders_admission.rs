//! Order admission: a bounded queue that answers SYSTEM_BUSY at once
//! (also while the journal's sync is held), malformed lines rejected with
//! their reason on a connection that stays usable, duplicates never
//! executed twice, the fill/done replies, and a burst of 25,000 orders on
//! one connection that does not hold another connection's `PING`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tickfan::bridge::Bridge;
use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::{DoneStatus, RejectReason};
use tickfan::model::units::Lots;
use tickfan::retry::SimClock;
use tickfan::runtime::{Engine, Injected};

use crate::util::{
    order_engine, wait_until, OpenOnDrop, OrderClient, ReleaseOnDrop, ScriptBridge, TestDisk,
};

#[test]
fn overload_every_order_gets_exactly_one_answer_and_none_is_lost() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.queue_capacity = 100);
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    // The only worker is held by the first order, so the queue fills.
    cl.accepted("hold", "GATE", "1");
    wait_until("the worker holds the gate order", || {
        bridge.calls().len() == 1
    });
    const N: usize = 2_000;
    let mut burst = String::new();
    for i in 0..N {
        burst.push_str(&format!("NEW o{i} EURUSD BUY 1.50\n"));
    }
    cl.send(burst.as_bytes()); // all at once, far more than the capacity
    let mut first: HashMap<String, Reply> = HashMap::new();
    while first.len() < N {
        let r = cl.reply();
        let id = r.id().unwrap().to_string();
        assert!(
            first.insert(id.clone(), r).is_none(),
            "two first answers for {id}"
        );
    }
    let accepted: Vec<String> = first
        .iter()
        .filter(|(_, r)| matches!(r, Reply::Ack { .. }))
        .map(|(id, _)| id.clone())
        .collect();
    for r in first.values() {
        match r {
            Reply::Ack { .. } => {}
            Reply::Reject { reason, detail, .. } => {
                assert_eq!(*reason, RejectReason::SystemBusy, "{detail}");
                assert!(detail.contains("queue full"), "{detail}");
            }
            other => panic!("unexpected first answer {other:?}"),
        }
    }
    assert_eq!(accepted.len(), 100, "exactly the capacity is accepted");
    let snap = e.counters().snapshot().orders;
    assert_eq!(snap.busy, (N - 100) as u64);
    // Gauges are set at the end of the gateway's turn, after the replies went out.
    wait_until("depth and oldest-age gauges", || {
        let s = e.counters().snapshot().orders;
        s.gateway.queue_depth == 100 && s.gateway.queue_oldest_age_us > 0
    });
    // The connection stays usable while rejecting.
    cl.line("PING");
    assert_eq!(cl.reply(), Reply::Pong);

    bridge.open_gate();
    let mut ended: HashMap<String, Reply> = HashMap::new();
    let mut fills: HashMap<String, Lots> = HashMap::new();
    while ended.len() < accepted.len() + 1 {
        let r = cl.reply();
        let id = r.id().unwrap().to_string();
        match &r {
            Reply::Fill { cum, left, .. } => {
                assert!(!ended.contains_key(&id), "fill after the end of {id}");
                assert!(
                    *cum > fills.get(&id).copied().unwrap_or_default(),
                    "absolute, increasing"
                );
                assert_eq!(cum.0 + left.0, if id == "hold" { 100 } else { 150 });
                fills.insert(id, *cum);
            }
            t if t.is_terminal() => {
                assert!(
                    ended.insert(id.clone(), r).is_none(),
                    "two terminal replies for {id}"
                );
                assert!(id == "hold" || first[&id] == Reply::Ack { id: id.clone() });
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(ended.values().all(|r| matches!(
        r,
        Reply::Done {
            status: DoneStatus::Filled,
            ..
        }
    )));
    wait_until("counters settle", || {
        e.counters().snapshot().orders.gateway.in_flight == 0
    });
    let s = e.counters().snapshot().orders;
    assert_eq!(s.gateway.accepted, 101);
    assert_eq!(s.gateway.accepted, s.done_total + s.dead_total + s.expired);
    assert_eq!(
        bridge.calls().len(),
        101,
        "every accepted order executed once, no rejected one"
    );
    let report = e.stop();
    assert!(
        report
            .stage(tickfan::metrics::Stage::OrderReject)
            .unwrap()
            .pct
            .count
            >= 1_900
    );
    assert_eq!(
        report
            .stage(tickfan::metrics::Stage::OrderE2e)
            .unwrap()
            .pct
            .count,
        101
    );
    assert!(report
        .to_string()
        .contains("orders accepted 101 = done 101"));
}

#[test]
fn malformed_lines_are_rejected_with_their_reason_and_the_connection_stays_usable() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    let long = format!("NEW long EURUSD BUY 1 {}", "x".repeat(400));
    let cases: Vec<(&[u8], &str, &str)> = vec![
        (b"HELLO world\n", "-", "unknown_command"),
        (b"NEW\n", "-", "missing_field"),
        (b"NEW a1 EURUSD BUY\n", "a1", "missing_field"),
        (b"NEW a/2 EURUSD BUY 1\n", "-", "bad_id"),
        (b"NEW a3 EUR,USD BUY 1\n", "a3", "bad_symbol"),
        (b"NEW a4 EURUSD HOLD 1\n", "a4", "bad_side"),
        (b"NEW a5 EURUSD BUY 1.x\n", "a5", "bad_quantity"),
        (b"NEW a6 EURUSD BUY 0.001\n", "a6", "bad_quantity"),
        (b"NEW a7 EURUSD BUY 0\n", "a7", "non_positive_quantity"),
        (b"NEW a8 EURUSD SELL -2\n", "a8", "non_positive_quantity"),
        (b"NEW a9 EURUSD BUY 1 ttl=never\n", "a9", "bad_ttl"),
        (
            b"NEW a10 EURUSD BUY 1 ttl=1s more\n",
            "a10",
            "too_many_fields",
        ),
        (b"NEW a11 EUR\xffUSD BUY 1\n", "-", "invalid_utf8"),
        (b"REPLAY nobody\n", "nobody", "not_replayable"),
    ];
    for (line, id, reason) in &cases {
        cl.send(line);
        match cl.reply() {
            Reply::Reject {
                id: got,
                reason: RejectReason::Invalid,
                detail,
            } => {
                assert_eq!(&got, id, "{}", String::from_utf8_lossy(line));
                assert!(
                    detail.starts_with(reason),
                    "{detail} for {}",
                    String::from_utf8_lossy(line)
                );
            }
            other => panic!("{other:?} for {}", String::from_utf8_lossy(line)),
        }
    }
    cl.line(&long);
    assert!(
        matches!(cl.reply(), Reply::Reject { reason: RejectReason::Invalid, detail, .. } if detail.starts_with("line_too_long"))
    );
    cl.line("");
    cl.line("NEW good-1 EURUSD SELL 0.01\r");
    assert_eq!(
        cl.reply(),
        Reply::Ack {
            id: "good-1".into()
        }
    );
    let rest = cl.until_terminal("good-1");
    assert!(matches!(
        rest.last(),
        Some(Reply::Done {
            status: DoneStatus::Filled,
            cum: Lots(1),
            attempts: 1,
            ..
        })
    ));
    assert!(
        bridge.calls().iter().all(|c| c.id == "good-1"),
        "nothing invalid reached the bridge"
    );
    let s = e.counters().snapshot().orders;
    assert_eq!(
        s.invalid.iter().map(|(_, n)| n).sum::<u64>(),
        cases.len() as u64 + 1
    );
    assert_eq!(s.gateway.accepted, 1);
}

#[test]
fn a_repeated_client_order_id_is_a_duplicate_and_runs_once_within_the_retention() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.order.dedup_retention = std::time::Duration::from_secs(60)
    });
    let mut a = OrderClient::connect(e.order_addr());
    let mut b = OrderClient::connect(e.order_addr());
    a.new_order("d1", "EURUSD", "2");
    a.accepted("d1", "EURUSD", "2");
    let mut saw_dup = false;
    let mut saw_done = false;
    while !(saw_dup && saw_done) {
        match a.reply() {
            Reply::Reject {
                reason: RejectReason::Duplicate,
                ..
            } => saw_dup = true,
            Reply::Done { .. } => saw_done = true,
            Reply::Fill { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    // After it ended, from another connection, with a different quantity: still a duplicate.
    b.new_order("d1", "GBPUSD", "5");
    assert!(
        matches!(b.reply(), Reply::Reject { reason: RejectReason::Duplicate, detail, .. } if detail.contains("ended"))
    );
    assert_eq!(bridge.calls_for("d1").len(), 1, "executed once");
    // Past the retention the id may be used again (documented bound).
    clock.advance_ms(60_000);
    b.accepted("d1", "EURUSD", "1");
    b.until_terminal("d1");
    assert_eq!(bridge.calls_for("d1").len(), 2);
    assert_eq!(e.counters().snapshot().orders.duplicates, 2);
}

/// Orders in one burst on one connection (issue 26: a client that writes
/// 25,000 orders at once).
const BURST: usize = 25_000;

/// The queue held full (the only worker held by a `GATE` order, `cap`
/// orders queued behind it), on `cl`.
fn hold_the_queue_full(cl: &mut OrderClient, bridge: &ScriptBridge, cap: usize) {
    cl.accepted("hold", "GATE", "1");
    wait_until("the worker holds the gate order", || {
        bridge.calls().len() == 1
    });
    for i in 0..cap {
        cl.accepted(&format!("q{i}"), "EURUSD", "1");
    }
}

#[test]
fn a_burst_on_one_connection_does_not_hold_another_connections_ping() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.queue_capacity = 10);
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    hold_the_queue_full(&mut cl, &bridge, 10);
    let mut b = OrderClient::connect(e.order_addr());
    b.line("PING");
    assert_eq!(b.reply(), Reply::Pong, "B is open before the burst");

    // A writes the whole burst at once (every order refused: the queue is
    // full), and reads its answers on another thread.
    let a = std::net::TcpStream::connect(e.order_addr()).unwrap();
    a.set_read_timeout(Some(crate::util::DEADLINE)).unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (a, answered) = (a.try_clone().unwrap(), Arc::clone(&answered));
        std::thread::spawn(move || {
            let mut lines = BufReader::new(a).lines();
            for _ in 0..BURST {
                let l = lines.next().expect("an answer").expect("read");
                assert!(
                    matches!(
                        Reply::parse(&l),
                        Some(Reply::Reject {
                            reason: RejectReason::SystemBusy,
                            ..
                        })
                    ),
                    "{l}"
                );
                answered.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let burst: String = (0..BURST)
        .map(|i| format!("NEW a{i} EURUSD BUY 1\n"))
        .collect();
    let writer = std::thread::spawn(move || (&a).write_all(burst.as_bytes()).unwrap());

    // Once the engine is answering the burst, B asks: its PONG comes while
    // the burst is still being taken in, not after all of it.
    wait_until("the first answer to the burst", || {
        answered.load(Ordering::Relaxed) > 0
    });
    b.line("PING");
    assert_eq!(b.reply(), Reply::Pong);
    let taken_in = e.counters().snapshot().orders.busy;
    assert!(
        taken_in < BURST as u64,
        "B's PING waited for the whole burst ({taken_in} of {BURST} orders of A answered first)"
    );

    writer.join().unwrap();
    reader.join().unwrap();
    assert_eq!(e.counters().snapshot().orders.busy, BURST as u64);
    b.line("PING");
    assert_eq!(b.reply(), Reply::Pong);
}

#[test]
fn a_refusal_is_answered_while_the_journal_sync_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let gate = TestDisk::new();
    let mut cfg = crate::util::sim_config();
    cfg.order.workers = 1;
    cfg.order.queue_capacity = 10;
    cfg.order.journal = true;
    cfg.order.data_dir = dir.path().to_path_buf();
    let e = Engine::start_with(
        &cfg,
        Injected {
            clock: Some(Arc::new(clock.clone())),
            bridges: Some(vec![Arc::clone(&bridge) as Arc<dyn Bridge>]),
            journal_files: Some(gate.files()),
            ..Default::default()
        },
    )
    .expect("engine starts");
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let _let_go = ReleaseOnDrop(Arc::clone(&gate));
    let mut cl = OrderClient::connect(e.order_addr());
    hold_the_queue_full(&mut cl, &bridge, 0);

    // The disk stops syncing: A's orders are journaled and held, the
    // lane's room all taken by them, none acknowledged.
    gate.hold_syncs(true);
    let mut a = OrderClient::connect(e.order_addr());
    for i in 0..10 {
        a.new_order(&format!("a{i}"), "EURUSD", "1");
    }
    wait_until("A's orders held, a sync waiting at the gate", || {
        e.counters().snapshot().orders.gateway.in_flight == 11
            && gate.waiting.load(Ordering::SeqCst) > 0
    });

    // C is refused at once, the sync still held.
    let mut c = OrderClient::connect(e.order_addr());
    c.new_order("c1", "EURUSD", "1");
    match c.reply() {
        Reply::Reject {
            id,
            reason: RejectReason::SystemBusy,
            detail,
        } => {
            assert_eq!(id, "c1");
            assert!(detail.contains("queue full"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        gate.waiting.load(Ordering::SeqCst) > 0,
        "the sync is still held"
    );
    // … and A has no ACK: none is written before its order is durable.
    a.socket().set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        a.socket().read(&mut byte).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "an ACK before the sync"
    );
    a.socket().set_nonblocking(false).unwrap();

    gate.hold_syncs(false);
    for i in 0..10 {
        assert_eq!(
            a.reply(),
            Reply::Ack {
                id: format!("a{i}")
            }
        );
    }
}
