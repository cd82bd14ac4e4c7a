//! Fault injection over real sockets: misbehaving peers while a healthy
//! feed and a healthy subscriber keep working and lose nothing they were
//! promised (the latest value of every symbol they subscribed to).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use tickfan::feed::poison::PoisonReason;

use crate::util::{engine_with, tick, wait_until, Feed, Sub};

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
}

#[test]
fn peers_that_connect_and_never_send_do_not_block_anyone() {
    let e = engine_with(|_| {});
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
        e.counters().snapshot().feed_connections.2 == 21
    });
}

#[test]
fn a_connection_flood_past_the_limit_is_refused_clearly_and_counted() {
    let e = engine_with(|c| c.max_conns_per_port = 3);
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.subscribe(&["X"]);
    let mut feed = Feed::connect(e.feed_addr());
    // Two more subscribers fill the port; every further one is refused.
    let _fill: Vec<Sub> = (0..2).map(|_| Sub::connect(e.subscriber_addr())).collect();
    wait_until("three subscribers open", || {
        e.counters().snapshot().subscriber_connections.2 == 3
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
    assert_eq!((c.subscriber_connections.1, c.feed_connections.1), (10, 1));
    healthy_round(&mut feed, &mut healthy, &["X"], 1);
}

#[test]
fn a_subscriber_that_disconnects_mid_write_is_dropped_cleanly() {
    let e = engine_with(|c| c.sub_hwm = 8 * 1024);
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
        e.counters().snapshot().subscriber_connections.2 == 1
    });
}

#[test]
fn a_subscriber_reading_a_trickle_gets_latest_values_and_delays_no_one() {
    let e = engine_with(|c| c.sub_hwm = 4 * 1024);
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
}

/// Enough replies (7 MB) to fill the kernel's socket buffers on loopback.
const PINGS: usize = 1_000_000;

#[test]
fn a_client_sending_faster_than_it_reads_is_held_back_not_buffered_without_bound() {
    let e = engine_with(|c| c.sub_hwm = 4 * 1024);
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
}
