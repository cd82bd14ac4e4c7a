//! The NATS backbone (issue 15): real `nats-server` processes on free
//! loopback ports (a 3-server full mesh), ingest and edge nodes as real
//! `tickfan serve` processes (so `kill -9` is a real one), subscribers over
//! RESP. Each test skips with a printed reason only when `nats-server` is
//! missing. Recovery times are printed, not asserted (a shared machine);
//! what is asserted: recovery within the generous deadline, the feed's
//! last values at every subscriber, and never an older value after a
//! newer one per symbol (sequence numbers only grow), across reconnects.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::nats_servers::{http_get, nats_server, Cluster, RawNats};
use crate::util::{spawn_until, tick, wait_until, Feed, Msg, Spawned, Sub, DEADLINE};

/// A `tickfan serve --role …` process.
struct Node {
    proc: Spawned,
    feed: SocketAddr,
    sub: SocketAddr,
    admin: SocketAddr,
    _dir: tempfile::TempDir,
}

fn addr_after(line: &str, key: &str) -> SocketAddr {
    let rest = line.split(key).nth(1).expect("banner names the address");
    let a = rest.trim_start().split([' ', ')']).next().unwrap();
    a.trim_start_matches("http://").parse().expect("an address")
}

fn node(role: &str, urls: &str) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_string();
    let mut args = vec![
        "serve",
        "--quiet",
        "--role",
        role,
        "--nats",
        urls,
        "--sub-listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--order-listen",
        "127.0.0.1:0",
        "--data-dir",
        &data,
    ];
    if role != "edge" {
        args.extend(["--feed-listen", "127.0.0.1:0"]);
    }
    let (proc, line) = spawn_until(&args, "tickfan serving");
    Node {
        proc,
        feed: if role == "edge" {
            assert!(line.contains("feed none (edge on"), "{line}");
            "0.0.0.0:0".parse().unwrap()
        } else {
            addr_after(&line, "feed ")
        },
        sub: addr_after(&line, "subscribers "),
        admin: addr_after(&line, "admin "),
        _dir: dir,
    }
}

impl Node {
    fn metric(&self, name: &str) -> u64 {
        let body = http_get(self.admin.port(), "/metrics").unwrap_or_default();
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    }

    fn kill9(&mut self) {
        if let Some(c) = &mut self.proc.0 {
            let _ = std::process::Command::new("kill")
                .args(["-9", &c.id().to_string()])
                .status();
            let _ = c.wait();
        }
        self.proc.0 = None;
    }
}

/// Skips (with the reason printed) when `nats-server` is missing.
macro_rules! need_nats {
    () => {
        match nats_server() {
            Ok(b) => b,
            Err(why) => {
                eprintln!("SKIPPED: {why}");
                return;
            }
        }
    };
}

/// Per symbol, the highest seq a subscriber has seen across all its
/// connections: a lower one later is an older value after a newer.
#[derive(Default)]
struct Monotonic(HashMap<String, u64>);

impl Monotonic {
    fn see(&mut self, m: &Msg) {
        let last = self.0.entry(m.channel.clone()).or_insert(0);
        assert!(
            m.seq() >= *last,
            "older after newer on {}: seq {} after {}",
            m.channel,
            m.seq(),
            last
        );
        *last = m.seq();
    }
}

/// Reads until every symbol of `want` has a message with exactly these
/// bid/ask (the feed's last), checking order; returns the elapsed time.
fn until_values(
    sub: &mut Sub,
    want: &HashMap<String, (String, String)>,
    mono: &mut Monotonic,
) -> Duration {
    let t0 = Instant::now();
    let mut got: HashMap<String, (String, String)> = HashMap::new();
    while want.iter().any(|(s, v)| got.get(s) != Some(v)) {
        assert!(
            t0.elapsed() < DEADLINE,
            "values never arrived: {got:?} vs {want:?}"
        );
        let m = sub.message();
        mono.see(&m);
        got.insert(
            m.channel.clone(),
            (m.field(2).to_string(), m.field(3).to_string()),
        );
    }
    t0.elapsed()
}

fn send(feed: &mut Feed, ts: u64, sym: &str, bid: &str, ask: &str) {
    feed.lines(&[&tick(ts, sym, bid, ask)]);
}

fn last_values(syms: &[&str], round: u64) -> HashMap<String, (String, String)> {
    syms.iter()
        .map(|s| {
            (
                s.to_string(),
                (format!("1.{round:05}"), format!("2.{round:05}")),
            )
        })
        .collect()
}

fn feed_round(feed: &mut Feed, syms: &[&str], round: u64) {
    for s in syms {
        send(
            feed,
            round,
            s,
            &format!("1.{round:05}"),
            &format!("2.{round:05}"),
        );
    }
}

/// Waits until `edge` holds NATS subscriptions for `n` subjects.
fn edge_subscribed(edge: &Node, n: u64) {
    wait_until("the edge subscribed on NATS", || {
        edge.metric("tickfan_cluster_subjects") >= n
    });
}

#[test]
fn two_ingests_two_edges_every_subscriber_ends_with_the_feeds_last_values_and_globs_filter() {
    let bin = need_nats!();
    let cluster = Cluster::start(&bin, 3);
    let (s0, s1, s2) = (
        cluster.servers[0].url(),
        cluster.servers[1].url(),
        cluster.servers[2].url(),
    );
    // Each node talks to its own server first: traffic crosses the routes.
    let ingest_a = node("ingest", &s0);
    let ingest_b = node("ingest", &s1);
    let edges = [node("edge", &s2), node("edge", &s1)];
    let syms_a = ["EURUSD", "EURGBP", "EURJPY"];
    let syms_b = ["USDJPY", "GBPUSD"];
    let mut subs: Vec<(Sub, Monotonic)> = Vec::new();
    for e in &edges {
        let mut s = Sub::connect(e.sub);
        let mut all: Vec<&str> = syms_a.to_vec();
        all.extend(syms_b);
        s.subscribe(&all);
        subs.push((s, Monotonic::default()));
    }
    let mut glob = Sub::connect(edges[0].sub);
    glob.psubscribe(&["EUR*"]);
    for e in &edges {
        edge_subscribed(e, 5);
    }
    let mut fa = Feed::connect(ingest_a.feed);
    let mut fb = Feed::connect(ingest_b.feed);
    for round in 1..=50 {
        feed_round(&mut fa, &syms_a, round);
        feed_round(&mut fb, &syms_b, round);
    }
    let mut want = last_values(&syms_a, 50);
    want.extend(last_values(&syms_b, 50));
    for (s, mono) in &mut subs {
        until_values(s, &want, mono);
    }
    let mut mono = Monotonic::default();
    let eur = last_values(&syms_a, 50);
    until_values(&mut glob, &eur, &mut mono);
    // Only matching symbols reach the glob subscriber: after one more
    // round of everything, the next frames are EUR* only.
    feed_round(&mut fb, &syms_b, 51);
    feed_round(&mut fa, &syms_a, 51);
    let eur = last_values(&syms_a, 51);
    let t = Instant::now();
    let mut got = HashMap::new();
    while eur.iter().any(|(s, v)| got.get(s) != Some(v)) {
        assert!(t.elapsed() < DEADLINE);
        let m = glob.message();
        assert!(m.channel.starts_with("EUR"), "glob got {}", m.channel);
        mono.see(&m);
        got.insert(
            m.channel.clone(),
            (m.field(2).to_string(), m.field(3).to_string()),
        );
    }
    assert!(edges[0].metric("tickfan_cluster_applied_total") > 0);
    assert_eq!(ingest_a.metric("tickfan_cluster_connected"), 1);
    // Every live update an edge applied was timed on the backbone (ingest
    // receipt → edge slot); the ingests time no such stage.
    let backbone = r#"tickfan_stage_latency_seconds_count{stage="backbone"}"#;
    for e in &edges {
        wait_until("backbone samples at the edge", || e.metric(backbone) > 0);
    }
    assert_eq!(ingest_a.metric(backbone), 0);
}

#[test]
fn kill_9_of_one_nats_server_the_edge_fails_over_and_re_seeds() {
    let bin = need_nats!();
    let mut cluster = Cluster::start(&bin, 3);
    let ingest = node("ingest", &cluster.servers[1].url());
    // The edge is given server 0 only (so it is connected there when it
    // dies); it learns the others from the server's INFO (cluster gossip).
    let edge = node("edge", &cluster.servers[0].url());
    let syms = ["EURUSD", "USDJPY"];
    let mut sub = Sub::connect(edge.sub);
    sub.subscribe(&syms);
    edge_subscribed(&edge, 2);
    let mut feed = Feed::connect(ingest.feed);
    let mut mono = Monotonic::default();
    feed_round(&mut feed, &syms, 1);
    until_values(&mut sub, &last_values(&syms, 1), &mut mono);
    cluster.servers[0].kill9();
    let killed = Instant::now();
    wait_until("the edge noticed the loss", || {
        edge.metric("tickfan_cluster_disconnects_total") >= 1
    });
    // New values while and after it reconnects: the subscriber gets the
    // last one (live or by the re-seed), never an older after a newer.
    let mut round = 2;
    let recovered = loop {
        feed_round(&mut feed, &syms, round);
        if edge.metric("tickfan_cluster_connected") == 1
            && edge.metric("tickfan_cluster_reseeds_total") >= 1
        {
            break killed.elapsed();
        }
        assert!(killed.elapsed() < DEADLINE, "the edge never reconnected");
        round += 1;
        std::thread::sleep(Duration::from_millis(20)); // pacing the feed, not a synchronisation
    };
    feed_round(&mut feed, &syms, round + 1);
    until_values(&mut sub, &last_values(&syms, round + 1), &mut mono);
    eprintln!(
        "RECOVERY kill -9 of a NATS server: edge reconnected and re-seeded after {} ms; value at subscriber after {} ms",
        recovered.as_millis(),
        killed.elapsed().as_millis()
    );
    wait_until("stale cleared by the re-seed", || {
        edge.metric("tickfan_symbols_stale") == 0
    });
}

#[test]
fn kill_9_of_an_edge_its_subscribers_reconnect_to_the_other_and_get_snapshots() {
    let bin = need_nats!();
    let cluster = Cluster::start(&bin, 3);
    let ingest = node("ingest", &cluster.urls());
    let mut e1 = node("edge", &cluster.servers[1].url());
    let e2 = node("edge", &cluster.servers[2].url());
    let syms = ["EURUSD", "USDJPY", "GBPUSD"];
    let mut sub = Sub::connect(e1.sub);
    sub.subscribe(&syms);
    edge_subscribed(&e1, 3);
    let mut feed = Feed::connect(ingest.feed);
    let mut mono = Monotonic::default();
    for r in 1..=20 {
        feed_round(&mut feed, &syms, r);
    }
    until_values(&mut sub, &last_values(&syms, 20), &mut mono);
    e1.kill9();
    let killed = Instant::now();
    // The subscriber reconnects to the other edge: its snapshot is the
    // last value, seeded there from the ingest (that edge had no client yet).
    let mut sub = Sub::connect(e2.sub);
    sub.subscribe(&syms);
    until_values(&mut sub, &last_values(&syms, 20), &mut mono);
    eprintln!(
        "RECOVERY kill -9 of an edge: snapshots at the other edge after {} ms",
        killed.elapsed().as_millis()
    );
    feed_round(&mut feed, &syms, 21);
    until_values(&mut sub, &last_values(&syms, 21), &mut mono);
}

#[test]
fn kill_9_of_the_active_ingest_of_an_ab_pair_the_other_takes_over() {
    let bin = need_nats!();
    let cluster = Cluster::start(&bin, 3);
    let mut a = node("ingest", &cluster.servers[0].url());
    let b = node("ingest", &cluster.servers[1].url());
    let edge = node("edge", &cluster.servers[2].url());
    let syms = ["EURUSD", "USDJPY"];
    let mut sub = Sub::connect(edge.sub);
    sub.subscribe(&syms);
    edge_subscribed(&edge, 2);
    let (mut fa, mut fb) = (Feed::connect(a.feed), Feed::connect(b.feed));
    let mut mono = Monotonic::default();
    // Both fed the same ticks: the same sequence numbers per symbol.
    for r in 1..=30 {
        feed_round(&mut fa, &syms, r);
        feed_round(&mut fb, &syms, r);
    }
    until_values(&mut sub, &last_values(&syms, 30), &mut mono);
    wait_until("the pair's copies were dropped as duplicates", || {
        edge.metric("tickfan_cluster_applied_total") > 0
    });
    a.kill9();
    let killed = Instant::now();
    for r in 31..=40 {
        let _ = std::io::Write::write_all(fa.stream(), b""); // A is gone; its feed no longer matters
        feed_round(&mut fb, &syms, r);
    }
    let took = until_values(&mut sub, &last_values(&syms, 40), &mut mono);
    eprintln!(
        "RECOVERY kill -9 of the active ingest of an A/B pair: B's values at the subscriber after {} ms (read {} ms)",
        killed.elapsed().as_millis(),
        took.as_millis()
    );
    assert!(
        mono.0.values().all(|&s| s >= 40),
        "seq continued from B: {:?}",
        mono.0
    );
}

#[test]
fn garbage_from_the_backbone_is_counted_with_its_reason_and_never_reaches_a_subscriber() {
    let bin = need_nats!();
    let cluster = Cluster::start(&bin, 3);
    let ingest = node("ingest", &cluster.servers[0].url());
    let edge = node("edge", &cluster.servers[0].url());
    let mut sub = Sub::connect(edge.sub);
    sub.subscribe(&["EURUSD"]);
    edge_subscribed(&edge, 1);
    let mut feed = Feed::connect(ingest.feed);
    let mut mono = Monotonic::default();
    for r in 1..=5 {
        feed_round(&mut feed, &["EURUSD"], r);
    }
    until_values(&mut sub, &last_values(&["EURUSD"], 5), &mut mono);
    let mut raw = RawNats::connect(cluster.servers[0].port);
    let good = |sym: &str, seq: u64| format!("1,{sym},9.99999,9.99999,1,1,{seq},1");
    raw.publish("tickfan.md.EURUSD", b"this is not a tick");
    raw.publish("tickfan.md.EURUSD", good("EURUSD", 1000).as_bytes()); // no epoch header
    raw.publish_with_header(
        "tickfan.md.EURUSD",
        ("Tickfan-Epoch", "1"),
        good("GBPUSD", 1000).as_bytes(),
    );
    raw.publish_with_header(
        "tickfan.md.EURUSD",
        ("Tickfan-Epoch", "1"),
        good("EURUSD", 2).as_bytes(),
    );
    raw.publish_with_header(
        "tickfan.md.EURUSD",
        ("Tickfan-Epoch", "1"),
        b"1,EURUSD,x,1,1,1,7,1",
    );
    raw.flush();
    let reason = |r: &str| {
        let body = http_get(edge.admin.port(), "/metrics").unwrap_or_default();
        let key = format!("tickfan_cluster_dropped_total{{reason=\"{r}\"}} ");
        body.lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    wait_until("every bad message counted with its reason", || {
        // No header: missing_epoch, whatever the payload (checked first).
        reason("malformed") >= 1
            && reason("missing_epoch") >= 2
            && reason("wrong_symbol") >= 1
            && reason("seq_from_past") >= 1
    });
    // The engine keeps serving, and none of it reached the subscriber.
    feed_round(&mut feed, &["EURUSD"], 6);
    let m = sub.message();
    mono.see(&m);
    assert_eq!(
        m.field(2),
        "1.00006",
        "the next message is the feed's, not the garbage"
    );
}

#[test]
fn bad_role_combinations_exit_non_zero_with_one_line() {
    for (args, needle) in [
        (&["serve", "--role", "edge"][..], "--role edge needs --nats"),
        (
            &["serve", "--role", "ingest"][..],
            "--role ingest needs --nats",
        ),
        (
            &[
                "serve",
                "--role",
                "edge",
                "--nats",
                "nats://127.0.0.1:1",
                "--feed-listen",
                "127.0.0.1:0",
            ][..],
            "an edge has no feed port",
        ),
        (
            &["serve", "--nats", "nats://127.0.0.1:1"][..],
            "needs --role ingest or --role edge",
        ),
        (
            &[
                "serve",
                "--role",
                "ingest",
                "--nats",
                "nats://127.0.0.1:1",
                "--nats-prefix",
                "a.*",
            ][..],
            "--nats-prefix",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickfan"))
            .args(args)
            .envs(crate::util::scratch_env())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
}

/// Reads `__tickfan.stale` notices until one equals `want`.
fn until_notice(sub: &mut Sub, want: &str) {
    let t0 = Instant::now();
    loop {
        assert!(t0.elapsed() < DEADLINE, "no notice {want}");
        let m = sub.message();
        assert_eq!(m.channel, "__tickfan.stale");
        if m.payload == want {
            return;
        }
    }
}

#[test]
fn a_silent_symbol_is_flagged_stale_on_a_single_node_and_live_again_on_its_next_tick() {
    let e = crate::util::engine_with(|c| c.cluster.stale_after = Some(Duration::from_millis(300)));
    let mut notices = Sub::connect(e.subscriber_addr());
    notices.subscribe(&["__tickfan.stale"]);
    let mut feed = Feed::connect(e.feed_addr());
    send(&mut feed, 1, "EURUSD", "1.1", "1.2");
    until_notice(&mut notices, "stale,EURUSD,silent");
    wait_until("gauge and alert", || {
        let c = e.counters().snapshot();
        c.cluster.symbols_silent == 1 && c.cluster.symbols_stale == 1
    });
    let admin = e.admin_addr().port();
    wait_until("alert feed_silent", || {
        http_get(admin, "/metrics")
            .unwrap_or_default()
            .contains("tickfan_alert{name=\"feed_silent\"} 1")
    });
    send(&mut feed, 2, "EURUSD", "1.1", "1.3");
    until_notice(&mut notices, "live,EURUSD,update");
    assert_eq!(e.counters().snapshot().cluster.symbols_stale, 0);
}

#[test]
fn an_edge_that_loses_its_backbone_flags_its_symbols_stale_and_live_after_the_re_seed() {
    let bin = need_nats!();
    let mut cluster = Cluster::start(&bin, 3);
    let ingest = node("ingest", &cluster.servers[1].url());
    let edge = node("edge", &cluster.servers[0].url());
    let mut sub = Sub::connect(edge.sub);
    sub.subscribe(&["EURUSD"]);
    let mut notices = Sub::connect(edge.sub);
    notices.subscribe(&["__tickfan.stale"]);
    edge_subscribed(&edge, 1);
    let mut feed = Feed::connect(ingest.feed);
    let mut mono = Monotonic::default();
    feed_round(&mut feed, &["EURUSD"], 1);
    until_values(&mut sub, &last_values(&["EURUSD"], 1), &mut mono);
    cluster.servers[0].kill9();
    until_notice(&mut notices, "stale,EURUSD,backbone_lost");
    // Nothing changed meanwhile: the re-seed confirms the value held.
    until_notice(&mut notices, "live,EURUSD,confirmed");
    wait_until("the gauge follows", || {
        edge.metric("tickfan_symbols_stale") == 0
    });
}

#[test]
fn demo_cluster_runs_across_a_nats_failover_and_reports_freshness() {
    let _ = need_nats!();
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(["demo", "--cluster", "--rate", "2000", "--duration", "2s"])
        .args([
            "--subscribers",
            "2",
            "--symbols",
            "20",
            "--order-rate",
            "0",
            "--slow",
            "0",
        ])
        .current_dir(dir.path())
        .envs(crate::util::scratch_env())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}\n{err}");
    assert!(err.contains("kill -9 of NATS server 1"), "{err}");
    assert!(
        text.contains("edge 1: freshness (intended send → received) p99"),
        "{text}"
    );
    assert!(text.contains("edge 2: freshness"), "{text}");
    assert!(
        text.contains("edge 1 backbone: disconnects 1, re-seeds 1"),
        "{text}"
    );
}

#[test]
fn a_closed_feed_connection_flags_the_symbols_it_fed_stale_at_once() {
    let e = crate::util::engine_with(|c| c.cluster.stale_after = Some(Duration::from_secs(600)));
    let mut notices = Sub::connect(e.subscriber_addr());
    notices.subscribe(&["__tickfan.stale"]);
    let mut a = Feed::connect(e.feed_addr());
    let mut b = Feed::connect(e.feed_addr());
    send(&mut a, 1, "EURUSD", "1.1", "1.2");
    send(&mut b, 1, "USDJPY", "150.1", "150.2");
    wait_until("both published", || {
        e.counters().snapshot().publish.published >= 2
    });
    drop(a);
    until_notice(&mut notices, "stale,EURUSD,feed_closed");
    // USDJPY's feed is still open: only EURUSD was flagged.
    let mut c = Feed::connect(e.feed_addr());
    send(&mut c, 2, "EURUSD", "1.1", "1.3");
    let m = notices.message();
    assert_eq!(m.payload, "live,EURUSD,update");
    assert_eq!(e.counters().snapshot().cluster.symbols_stale, 0);
    send(&mut b, 2, "USDJPY", "150.1", "150.3");
}
