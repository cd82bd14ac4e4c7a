//! Tokens on every port (wrong, missing, correct, late) and per-client
//! limits, each refused clearly while other clients keep working; a client
//! sees replies for its own orders only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tickfan::auth::Token;
use tickfan::client::resp::Frame;

use std::collections::HashMap;

use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::RejectReason;
use tickfan::retry::SimClock;

use crate::admin::http;
use crate::util::{
    engine_with, order_engine, tick, wait_until, OrderClient, ScriptBridge, Sub, DEADLINE,
};

const TOKEN: &[u8] = b"s3cret-t0ken";

fn secured() -> tickfan::runtime::Engine {
    engine_with(|c| {
        c.token = Some(Token::new(TOKEN));
        c.auth_timeout = Duration::from_millis(300);
    })
}

fn read_all(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn feeds_must_present_the_token_first() {
    let e = secured();
    // Correct: acknowledged, and its ticks flow.
    let mut good = TcpStream::connect(e.feed_addr()).unwrap();
    good.write_all(b"AUTH s3cret-t0ken\n").unwrap();
    good.write_all(format!("{}\n", tick(1, "SEC", "1", "2")).as_bytes())
        .unwrap();
    let mut ack = String::new();
    BufReader::new(good.try_clone().unwrap())
        .read_line(&mut ack)
        .unwrap();
    assert_eq!(ack, "OK\n");
    wait_until("tick taken", || {
        e.counters().snapshot().feed.ticks_valid == 1
    });
    // Wrong, missing, late: one error line, then closed; nothing taken.
    let mut wrong = TcpStream::connect(e.feed_addr()).unwrap();
    wrong.write_all(b"AUTH nope\n1,X,1,2,3,4\n").unwrap();
    assert_eq!(read_all(wrong), "ERR invalid token\n");
    let mut missing = TcpStream::connect(e.feed_addr()).unwrap();
    missing
        .write_all(format!("{}\n", tick(1, "X", "1", "2")).as_bytes())
        .unwrap();
    assert!(read_all(missing).starts_with("ERR authentication required"));
    let silent = TcpStream::connect(e.feed_addr()).unwrap();
    assert_eq!(read_all(silent), "ERR authentication timeout\n");
    assert_eq!(e.counters().snapshot().feed.ticks_valid, 1);
    assert_eq!(e.counters().snapshot().feed.auth_failures, 3);
    let m = {
        // /metrics needs the bearer token here.
        let mut s = TcpStream::connect(e.admin_addr()).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-t0ken\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        raw
    };
    assert!(
        m.contains("tickfan_auth_failures_total{port=\"feed\"} 3"),
        "{m}"
    );
    // The good feed still works.
    good.write_all(format!("{}\n", tick(2, "SEC", "1", "2")).as_bytes())
        .unwrap();
    wait_until("second tick taken", || {
        e.counters().snapshot().feed.ticks_valid == 2
    });
}

#[test]
fn subscribers_authenticate_like_redis() {
    let e = secured();
    let mut s = Sub::connect(e.subscriber_addr());
    s.cmd(&["SUBSCRIBE", "A"]);
    assert_eq!(
        s.frame(),
        Frame::Error(b"NOAUTH Authentication required.".to_vec())
    );
    s.cmd(&["AUTH", "default", "s3cret-t0ken"]);
    assert_eq!(s.frame(), Frame::Simple(b"OK".to_vec()));
    s.subscribe(&["A"]);

    let mut wrong = TcpStream::connect(e.subscriber_addr()).unwrap();
    wrong.write_all(b"AUTH nope\r\nPING\r\n").unwrap();
    assert_eq!(
        read_all(wrong),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
        "one error, then closed"
    );
    let silent = TcpStream::connect(e.subscriber_addr()).unwrap();
    assert_eq!(read_all(silent), "-ERR authentication timeout\r\n");
    assert_eq!(e.counters().snapshot().publish.auth_failures, 2);

    let mut feed = TcpStream::connect(e.feed_addr()).unwrap();
    feed.write_all(format!("AUTH s3cret-t0ken\n{}\n", tick(1, "A", "1", "2")).as_bytes())
        .unwrap();
    assert_eq!(
        s.message().seq(),
        1,
        "the authenticated subscriber keeps working"
    );
}

#[test]
fn the_admin_endpoint_takes_a_bearer_token() {
    let e = secured();
    let admin = e.admin_addr();
    assert_eq!(
        http(admin, "GET", "/health").0,
        200,
        "health stays open for probes"
    );
    assert_eq!(http(admin, "GET", "/metrics").0, 401);
    let with = |token: &str| {
        let mut s = TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        raw[9..12].to_string()
    };
    assert_eq!(with("nope"), "401");
    assert_eq!(with("s3cret-t0ken"), "200");
}

#[test]
fn subscriptions_per_client_are_limited_clearly() {
    let e = engine_with(|c| c.max_subscriptions = 2);
    let mut s = Sub::connect(e.subscriber_addr());
    s.cmd(&["SUBSCRIBE", "A", "B", "C"]);
    assert!(matches!(s.frame(), Frame::Array(_)));
    assert!(matches!(s.frame(), Frame::Array(_)));
    assert_eq!(
        s.frame(),
        Frame::Error(b"ERR max subscriptions per client (2) reached".to_vec())
    );
    s.cmd(&["PSUBSCRIBE", "X*"]);
    assert!(matches!(s.frame(), Frame::Error(_)));
    s.cmd(&["UNSUBSCRIBE", "A"]);
    assert!(matches!(s.frame(), Frame::Array(_)));
    s.psubscribe(&["X*"]);
    assert_eq!(e.counters().snapshot().publish.subscriptions_refused, 2);
    let mut other = Sub::connect(e.subscriber_addr());
    other.subscribe(&["A", "B"]);
}

/// Reads replies until every id in `ids` has had its first one; returns
/// them (later replies of those orders stay unread).
fn first_replies(cl: &mut OrderClient, ids: &[String]) -> HashMap<String, Reply> {
    let mut got = HashMap::new();
    while got.len() < ids.len() {
        let r = cl.reply();
        let id = r.id().expect("an order reply").to_string();
        assert!(ids.contains(&id), "reply for a foreign id: {r:?}");
        got.entry(id).or_insert(r);
    }
    got
}

#[test]
fn order_clients_must_present_the_token_first() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.token = Some(Token::new(TOKEN));
        c.auth_timeout = Duration::from_millis(300);
    });
    // Correct, pipelined with an order: OK, then the order's replies.
    let mut good = OrderClient::connect(e.order_addr());
    good.send(b"AUTH s3cret-t0ken\nNEW a1 EURUSD BUY 1\n");
    assert_eq!(good.raw_reply(), "OK");
    good.until_terminal("a1");
    // Wrong, missing, late: one error line, then closed; no order taken.
    let mut wrong = TcpStream::connect(e.order_addr()).unwrap();
    wrong
        .write_all(b"AUTH nope\nNEW x1 EURUSD BUY 1\n")
        .unwrap();
    assert_eq!(read_all(wrong), "ERR invalid token\n");
    let mut missing = TcpStream::connect(e.order_addr()).unwrap();
    missing.write_all(b"NEW x2 EURUSD BUY 1\n").unwrap();
    assert_eq!(
        read_all(missing),
        "ERR authentication required: send AUTH <token> first\n"
    );
    let silent = TcpStream::connect(e.order_addr()).unwrap();
    assert_eq!(read_all(silent), "ERR authentication timeout\n");
    let o = e.counters().snapshot().orders;
    assert_eq!(o.gateway.auth_failures, 3);
    assert_eq!(o.gateway.accepted, 1);
    assert_eq!(bridge.calls().len(), 1, "only the authenticated order ran");
    // The good client still works.
    good.new_order("a2", "EURUSD", "2");
    assert!(matches!(
        good.until_terminal("a2").last(),
        Some(Reply::Done { .. })
    ));
}

#[test]
fn order_rate_is_limited_per_connection_with_one_answer_per_order() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.max_order_rate = 5);
    let ids = |p: &str, n: usize| (1..=n).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
    let send_all = |cl: &mut OrderClient, ids: &[String]| {
        let lines: String = ids
            .iter()
            .map(|id| format!("NEW {id} EURUSD BUY 1\n"))
            .collect();
        cl.send(lines.as_bytes());
    };
    // A burst of 8 at one instant of the engine clock: 5 fit, 3 are refused.
    let mut a = OrderClient::connect(e.order_addr());
    let a_ids = ids("a", 8);
    send_all(&mut a, &a_ids);
    let got = first_replies(&mut a, &a_ids);
    for id in &a_ids[..5] {
        assert_eq!(got[id], Reply::Ack { id: id.clone() });
    }
    for id in &a_ids[5..] {
        match &got[id] {
            Reply::Reject {
                reason: RejectReason::SystemBusy,
                detail,
                ..
            } => assert_eq!(detail, "rate_limited: over 5 orders/s on this connection"),
            other => panic!("{id}: expected a rate-limit refusal, got {other:?}"),
        }
    }
    // Another connection has its own budget.
    let mut b = OrderClient::connect(e.order_addr());
    let b_ids = ids("b", 5);
    send_all(&mut b, &b_ids);
    let got = first_replies(&mut b, &b_ids);
    assert!(got.values().all(|r| matches!(r, Reply::Ack { .. })));
    // A second later the refused ids are accepted as they are (never seen).
    clock.advance_ms(1_000);
    a.new_order("a6", "EURUSD", "1");
    assert!(matches!(
        a.until_terminal("a6").last(),
        Some(Reply::Done { .. })
    ));
    let o = e.counters().snapshot().orders;
    assert_eq!(o.gateway.rate_limited, 3);
    assert_eq!(o.busy, 3);
    assert_eq!(o.gateway.accepted, 11);
}

#[test]
fn order_connections_over_the_limit_are_refused_clearly() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.max_conns_per_port = 1);
    let mut first = OrderClient::connect(e.order_addr());
    first.line("PING");
    assert_eq!(first.reply(), Reply::Pong);
    let second = TcpStream::connect(e.order_addr()).unwrap();
    assert_eq!(
        read_all(second),
        "REJECT - SYSTEM_BUSY too many order connections\n"
    );
    assert_eq!(
        e.counters().snapshot().orders.gateway.connections_refused,
        1
    );
    first.new_order("f1", "EURUSD", "1");
    assert!(matches!(
        first.until_terminal("f1").last(),
        Some(Reply::Done { .. })
    ));
}

/// Reads replies until `done` holds for what was read so far.
fn read_until(cl: &mut OrderClient, done: impl Fn(&[Reply]) -> bool) -> Vec<Reply> {
    let mut lines = Vec::new();
    while !done(&lines) {
        lines.push(cl.reply());
    }
    lines
}

/// Terminal replies per id; fails on an id `mine` does not accept.
fn terminals(lines: &[Reply], mine: impl Fn(&str) -> bool) -> HashMap<String, usize> {
    let mut t: HashMap<String, usize> = HashMap::new();
    for r in lines {
        let id = r.id().expect("an order reply");
        assert!(mine(id), "a foreign reply: {r:?}");
        if r.is_terminal() {
            *t.entry(id.to_string()).or_default() += 1;
        }
    }
    t
}

/// PING, and every line before its PONG (nothing more may be pending).
fn until_pong(cl: &mut OrderClient) -> Vec<Reply> {
    cl.line("PING");
    let mut extra = Vec::new();
    loop {
        match cl.reply() {
            Reply::Pong => return extra,
            r => extra.push(r),
        }
    }
}

#[test]
fn a_client_sees_replies_for_its_own_orders_only() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.order.workers = 2);
    let mut a = OrderClient::connect(e.order_addr());
    let mut b = OrderClient::connect(e.order_addr());
    // An order of A held at the venue, so its id stays in flight.
    a.line("NEW g1 GATE BUY 1");
    assert_eq!(a.reply(), Reply::Ack { id: "g1".into() });
    let n = 20;
    for i in 0..n {
        a.new_order(&format!("a{i}"), "EURUSD", "1.5");
        b.new_order(&format!("b{i}"), "EURUSD", "2.5");
    }
    let is_a = |id: &str| id == "g1" || id.starts_with('a');
    let ended = |p: char| {
        move |l: &[Reply]| {
            l.iter()
                .filter(|r| r.is_terminal() && r.id().is_some_and(|id| id.starts_with(p)))
                .count()
                == n
        }
    };
    let mut a_lines = read_until(&mut a, ended('a'));
    // B reuses A's ids: one in flight (g1), one ended (a0).
    b.new_order("g1", "GATE", "1");
    b.new_order("a0", "EURUSD", "1");
    let is_dup = |r: &Reply| {
        matches!(
            r,
            Reply::Reject {
                reason: RejectReason::Duplicate,
                ..
            }
        ) && r.id().is_some_and(|id| !id.starts_with('b'))
    };
    let mut b_lines = read_until(&mut b, |l| {
        ended('b')(l) && l.iter().filter(|r| is_dup(r)).count() == 2
    });
    bridge.open_gate();
    a_lines.extend(a.until_terminal("g1"));
    a_lines.extend(until_pong(&mut a));
    b_lines.extend(until_pong(&mut b));

    let a_terminal = terminals(&a_lines, is_a);
    assert_eq!(a_terminal.len(), n + 1);
    assert!(a_terminal.values().all(|&k| k == 1), "{a_terminal:?}");
    assert!(
        !a_lines.iter().any(|r| matches!(r, Reply::Reject { .. })),
        "nothing of B's duplicates reached A"
    );
    let (dups, b_own): (Vec<Reply>, Vec<Reply>) = b_lines.into_iter().partition(is_dup);
    assert_eq!(dups.len(), 2, "{dups:?}");
    let b_terminal = terminals(&b_own, |id| id.starts_with('b'));
    assert_eq!(b_terminal.len(), n);
    assert!(b_terminal.values().all(|&k| k == 1), "{b_terminal:?}");
    assert_eq!(bridge.calls_for("g1").len(), 1, "the duplicate never ran");
    assert_eq!(bridge.calls_for("a0").len(), 1);
}

#[test]
fn admin_replay_authenticates_on_the_order_port_itself() {
    use crate::util::{order_engine, OrderClient, ScriptBridge};
    use std::sync::atomic::Ordering;
    use tickfan::retry::SimClock;
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.token = Some(Token::new(TOKEN)));
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("AUTH s3cret-t0ken");
    assert_eq!(cl.raw_reply(), "OK");
    cl.new_order("z1", "PERM", "1");
    cl.until_terminal("z1");
    wait_until("indexed", || e.dlq().replayable("z1").is_some());
    bridge.accept_all.store(true, Ordering::Relaxed);
    let mut s = TcpStream::connect(e.admin_addr()).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(
        s,
        "POST /dlq/replay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-t0ken\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("\"replayed\":1"), "{raw}");
}

#[test]
fn a_subscribers_auth_deadline_never_closes_a_later_one_on_its_slot() {
    // The first subscriber leaves before authenticating; the next one takes
    // its slot and authenticates. The first one's deadline must find no
    // connection (connection ids outlive slab reuse), not close the newcomer.
    let e = secured();
    let open = || e.counters().snapshot().publish.subscribers_open;
    let first = TcpStream::connect(e.subscriber_addr()).unwrap();
    wait_until("first subscriber open", || open() == 1);
    drop(first);
    wait_until("first subscriber closed", || open() == 0);
    let mut later = Sub::connect(e.subscriber_addr());
    later.cmd(&["AUTH", "s3cret-t0ken"]);
    assert_eq!(later.frame(), Frame::Simple(b"OK".to_vec()));
    // A silent subscriber accepted after `later`: its deadline comes after
    // the first one's, so once it is closed the first deadline was handled.
    let silent = TcpStream::connect(e.subscriber_addr()).unwrap();
    assert_eq!(read_all(silent), "-ERR authentication timeout\r\n");
    later.cmd(&["PING"]);
    assert_eq!(later.frame(), Frame::Simple(b"PONG".to_vec()));
    assert_eq!(e.counters().snapshot().publish.auth_failures, 1);
}
