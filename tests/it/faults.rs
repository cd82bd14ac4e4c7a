//! Fault injection over real sockets: misbehaving peers while a healthy
//! feed, a healthy subscriber and a healthy order client keep working and
//! lose nothing they were promised (the latest value of every symbol they
//! subscribed to; exactly one terminal reply for every order).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use tickfan::model::poison::PoisonReason;

use crate::util::{engine_with, tick, wait_until, Feed, OrderClient, Sub};

/// An order client that sends one order per round and waits for its one
/// terminal reply.
struct HealthyOrders {
    client: OrderClient,
    n: u64,
}

impl HealthyOrders {
    fn connect(addr: std::net::SocketAddr) -> Self {
        HealthyOrders {
            client: OrderClient::connect(addr),
            n: 0,
        }
    }

    fn round(&mut self) {
        self.n += 1;
        let id = format!("healthy{}", self.n);
        self.client.new_order(&id, "EURUSD", "1");
        let replies = self.client.until_terminal(&id);
        assert_eq!(
            replies.iter().filter(|r| r.is_terminal()).count(),
            1,
            "{replies:?}"
        );
    }
}

/// Sends one round of ticks for `syms` and checks the healthy subscriber
/// reaches each symbol's `round`.
fn healthy_round(feed: &mut Feed, healthy: &mut Sub, syms: &[&str], round: u64) {
    let lines: Vec<String> = syms.iter().map(|s| tick(round, s, "1.1", "1.2")).collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    let want: HashMap<String, u64> = syms.iter().map(|s| (s.to_string(), round)).collect();
    healthy.until_latest(&want);
}

#[test]
fn a_ten_megabyte_line_without_newline_is_one_poison_and_memory_does_not_grow() {
    let e = engine_with(|_| {});
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.subscribe(&["OK"]);
    let mut good = Feed::connect(e.feed_addr());
    let mut bad = Feed::connect(e.feed_addr());
    let chunk = vec![b'7'; 1 << 20];
    for i in 0..10u64 {
        bad.send(&chunk);
        // The healthy feed keeps flowing while the monster line streams in.
        healthy_round(&mut good, &mut healthy, &["OK"], i + 1);
    }
    bad.send(b"\n");
    bad.lines(&[&tick(1, "AFTER", "1", "2")]);
    wait_until("the line after the monster is taken", || {
        e.symbols().len() == 2
    });
    assert_eq!(
        e.counters().poison(PoisonReason::LineTooLong),
        1,
        "one poison, not one per read"
    );
    assert_eq!(
        e.dlq().recent(1)[0].raw.len(),
        256,
        "the record keeps only the first max_line_len bytes"
    );
    orders.round();
}

#[test]
fn peers_that_connect_and_never_send_do_not_block_anyone() {
    let e = engine_with(|_| {});
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let _idle_feeds: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(e.feed_addr()).unwrap())
        .collect();
    let _idle_subs: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(e.subscriber_addr()).unwrap())
        .collect();
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    for round in 1..=5 {
        healthy_round(&mut feed, &mut healthy, &["A", "B", "C"], round);
    }
    wait_until("all counted", || {
        e.counters().snapshot().feed.connections_open == 21
    });
    orders.round();
}

#[test]
fn a_connection_flood_past_the_limit_is_refused_clearly_and_counted() {
    let e = engine_with(|c| c.max_conns_per_port = 3);
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.subscribe(&["X"]);
    let mut feed = Feed::connect(e.feed_addr());
    // Two more subscribers fill the port; every further one is refused.
    let _fill: Vec<Sub> = (0..2).map(|_| Sub::connect(e.subscriber_addr())).collect();
    wait_until("three subscribers open", || {
        e.counters().snapshot().publish.subscribers_open == 3
    });
    for _ in 0..10 {
        let mut s = TcpStream::connect(e.subscriber_addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        assert_eq!(reply, b"-ERR max number of clients reached\r\n");
    }
    let _more_feeds: Vec<Feed> = (0..2).map(|_| Feed::connect(e.feed_addr())).collect();
    let mut refused = TcpStream::connect(e.feed_addr()).unwrap();
    let mut reply = String::new();
    refused.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "ERR too many feed connections\n");
    let c = e.counters().snapshot();
    assert_eq!(
        (c.publish.subscribers_refused, c.feed.connections_refused),
        (10, 1)
    );
    healthy_round(&mut feed, &mut healthy, &["X"], 1);
    orders.round();
}

#[test]
fn a_subscriber_that_disconnects_mid_write_is_dropped_cleanly() {
    let e = engine_with(|c| c.sub_hwm = 8 * 1024);
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    let syms: Vec<String> = (0..100).map(|i| format!("S{i:03}")).collect();
    let refs: Vec<&str> = syms.iter().map(|s| s.as_str()).collect();
    let mut feed = Feed::connect(e.feed_addr());
    for cycle in 0..5u64 {
        // A subscriber that reads a little, then vanishes with data in flight.
        let mut quitter = TcpStream::connect(e.subscriber_addr()).unwrap();
        quitter.write_all(b"PSUBSCRIBE *\r\n").unwrap();
        let mut buf = [0u8; 64];
        quitter.read_exact(&mut buf[..10]).unwrap();
        for r in 1..=20u64 {
            healthy_round(&mut feed, &mut healthy, &refs, cycle * 20 + r);
        }
        quitter.shutdown(Shutdown::Both).unwrap();
        drop(quitter);
        healthy_round(&mut feed, &mut healthy, &refs, cycle * 20 + 21);
    }
    wait_until("every quitter closed", || {
        e.counters().snapshot().publish.subscribers_open == 1
    });
    orders.round();
}

#[test]
fn a_subscriber_reading_a_trickle_gets_latest_values_and_delays_no_one() {
    let e = engine_with(|c| c.sub_hwm = 4 * 1024);
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    let mut trickle = TcpStream::connect(e.subscriber_addr()).unwrap();
    trickle.write_all(b"PSUBSCRIBE *\r\n").unwrap();
    let syms: Vec<String> = (0..100).map(|i| format!("T{i:03}")).collect();
    let refs: Vec<&str> = syms.iter().map(|s| s.as_str()).collect();
    let mut feed = Feed::connect(e.feed_addr());
    let mut one = [0u8; 1];
    let mut round = 0;
    // The trickle reads one byte per round while the others run at full speed.
    while round < 20
        || !e
            .subscribers()
            .iter()
            .any(|s| s.id == 2 && s.conflations > 0)
    {
        round += 1;
        assert!(round < 100_000, "the trickle reader never fell behind");
        healthy_round(&mut feed, &mut healthy, &refs, round);
        trickle.read_exact(&mut one).unwrap();
    }
    let st = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    assert!(st.max_buffered_bytes <= 4 * 1024);
    assert!(st.pending_symbols <= 100);
    orders.round();
}

/// Enough replies (7 MB) to fill the kernel's socket buffers on loopback.
const PINGS: usize = 1_000_000;

#[test]
fn a_client_sending_faster_than_it_reads_is_held_back_not_buffered_without_bound() {
    let e = engine_with(|c| c.sub_hwm = 4 * 1024);
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let mut flooder = TcpStream::connect(e.subscriber_addr()).unwrap();
    let pings = b"PING\r\n".repeat(PINGS);
    // Write from a thread: the engine stops reading this client once its
    // replies pass the mark, so this write may block until we read.
    let mut w = flooder.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&pings).unwrap());
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.subscribe(&["H"]);
    let mut feed = Feed::connect(e.feed_addr());
    healthy_round(&mut feed, &mut healthy, &["H"], 1);
    wait_until("flooder held back", || {
        e.subscribers()
            .iter()
            .any(|s| s.id == 1 && s.buffered_bytes > 0)
    });
    let st = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    assert!(
        st.max_buffered_bytes <= 4 * 1024 + 4096,
        "reply buffer {} past the mark plus one read's replies",
        st.max_buffered_bytes
    );
    // Now it reads: every PING is answered, none lost.
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    flooder
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    while got < PINGS * 7 {
        let n = flooder.read(&mut buf).unwrap();
        assert!(n > 0);
        assert!(buf[..n].iter().all(|b| b"+PONG\r\n".contains(b)));
        got += n;
    }
    assert_eq!(got, PINGS * 7);
    writer.join().unwrap();
    healthy_round(&mut feed, &mut healthy, &["H"], 2);
    orders.round();
}

#[test]
fn the_order_port_survives_monster_lines_bad_bytes_idle_peers_and_floods() {
    let e = engine_with(|_| {});
    let mut orders = HealthyOrders::connect(e.order_addr());
    orders.round();
    let _idle: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(e.order_addr()).unwrap())
        .collect();
    // A 10 MB line without a newline, then a newline and a good order.
    let mut big = OrderClient::connect(e.order_addr());
    let chunk = vec![b'N'; 1 << 20];
    for _ in 0..10 {
        big.send(&chunk);
        orders.round();
    }
    big.send(b"\n");
    let refused = big.raw_reply();
    assert!(refused.starts_with("REJECT - INVALID"), "{refused}");
    big.new_order("after-big", "EURUSD", "1");
    assert_eq!(
        big.until_terminal("after-big")
            .iter()
            .filter(|r| r.is_terminal())
            .count(),
        1
    );
    // Invalid UTF-8: one clear refusal, the connection stays usable.
    let mut bad = OrderClient::connect(e.order_addr());
    bad.send(b"NEW \xff\xfe EURUSD BUY 1\n");
    assert!(
        bad.raw_reply().starts_with("REJECT"),
        "invalid UTF-8 refused"
    );
    bad.new_order("after-bad", "EURUSD", "1");
    bad.until_terminal("after-bad");
    // A client that sends 20,000 orders without reading: every one is
    // answered once it reads, and the healthy client is served meanwhile.
    let mut flood = OrderClient::connect(e.order_addr());
    let mut lines = String::new();
    for i in 0..20_000 {
        lines.push_str(&format!("NEW f{i} EURUSD BUY 0.01\n"));
    }
    let mut w = flood.socket().try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(lines.as_bytes()).unwrap());
    orders.round();
    let mut terminal = 0;
    while terminal < 20_000 {
        let r = flood.reply();
        if r.is_terminal() || matches!(r, tickfan::client::orders::Reply::Reject { .. }) {
            terminal += 1;
        }
    }
    writer.join().unwrap();
    orders.round();
}
