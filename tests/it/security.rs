//! Tokens on every port (wrong, missing, correct, late) and per-client
//! limits, each refused clearly while other clients keep working.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tickfan::auth::Token;
use tickfan::protocol::client::Frame;

use crate::admin::http;
use crate::util::{engine_with, tick, wait_until, Sub, DEADLINE};

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
    wait_until("tick taken", || e.counters().snapshot().ticks_valid == 1);
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
    assert_eq!(e.counters().snapshot().ticks_valid, 1);
    assert_eq!(e.counters().snapshot().auth_failures.0, 3);
    // The good feed still works.
    good.write_all(format!("{}\n", tick(2, "SEC", "1", "2")).as_bytes())
        .unwrap();
    wait_until("second tick taken", || {
        e.counters().snapshot().ticks_valid == 2
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
    assert_eq!(e.counters().snapshot().auth_failures.1, 2);

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
    assert_eq!(e.counters().snapshot().subscriptions_refused, 2);
    let mut other = Sub::connect(e.subscriber_addr());
    other.subscribe(&["A", "B"]);
}
