//! The admin endpoint: Prometheus metrics that parse and move with traffic,
//! JSON report, health, dead letters; stalled clients cannot freeze it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::util::{engine, tick, wait_until, Feed, Sub, DEADLINE};

/// A plain HTTP/1.1 request; returns (status, body), or the I/O error when
/// no answer came within `within`.
pub fn http_within(
    addr: SocketAddr,
    method: &str,
    path: &str,
    within: Duration,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(within))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let status = raw
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {raw:?}")))?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// A plain HTTP/1.1 request; returns (status, body).
pub fn http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    http_within(addr, method, path, DEADLINE).unwrap()
}

pub fn scrape(addr: SocketAddr) -> prometheus_parse::Scrape {
    let (status, body) = http(addr, "GET", "/metrics");
    assert_eq!(status, 200);
    let lines = body.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text")
}

pub fn value(s: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    s.samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
        .unwrap_or_else(|| panic!("{name} {label:?} missing"))
}

#[test]
fn metrics_parse_and_counters_move_with_traffic() {
    let e = engine();
    let admin = e.admin_addr();
    let before = scrape(admin);
    assert_eq!(value(&before, "tickfan_ticks_received_total", None), 0.0);
    assert!(
        before.docs.contains_key("tickfan_ticks_received_total"),
        "HELP lines present"
    );

    let mut s = Sub::connect(e.subscriber_addr());
    s.subscribe(&["M"]);
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(1, "M", "1", "2"), "bad line", &tick(2, "M", "1", "2")]);
    s.until_latest(&[("M".to_string(), 2)].into());
    wait_until("figures refreshed", || {
        let sc = scrape(admin);
        value(&sc, "tickfan_subscribers", None) == 1.0
            && value(&sc, "tickfan_dlq_size", None) == 1.0
            && sc.samples.iter().any(|x| {
                x.metric == "tickfan_stage_latency_seconds_count"
                    && x.labels.get("stage") == Some("engine_e2e")
                    && matches!(x.value, prometheus_parse::Value::Untyped(v) if v > 0.0)
            })
    });
    let after = scrape(admin);
    assert_eq!(value(&after, "tickfan_ticks_received_total", None), 3.0);
    assert_eq!(value(&after, "tickfan_ticks_valid_total", None), 2.0);
    assert_eq!(
        value(
            &after,
            "tickfan_poison_total",
            Some(("reason", "wrong_field_count"))
        ),
        1.0
    );
    assert!(value(&after, "tickfan_subscriber_bytes_total", None) > 0.0);
    let e2e = after
        .samples
        .iter()
        .find(|x| {
            x.metric == "tickfan_stage_latency_seconds"
                && x.labels.get("stage") == Some("engine_e2e")
        })
        .expect("engine_e2e histogram");
    let count = value(
        &after,
        "tickfan_stage_latency_seconds_count",
        Some(("stage", "engine_e2e")),
    );
    assert!(count >= 1.0, "{count}");
    match &e2e.value {
        prometheus_parse::Value::Histogram(buckets) => {
            assert_eq!(buckets.len(), 23, "1 µs to 10 s, 3 a decade, and +Inf");
            assert_eq!(buckets[0].less_than, 1e-6);
            assert_eq!(buckets[21].less_than, 10.0);
            assert!(
                buckets.windows(2).all(|w| w[0].count <= w[1].count),
                "cumulative"
            );
            assert_eq!(buckets[22].count, count, "+Inf is the count");
            assert_eq!(buckets[21].count, count, "nothing slower than 10 s here");
        }
        other => panic!("expected a histogram, got {other:?}"),
    }
    let sum = value(
        &after,
        "tickfan_stage_latency_seconds_sum",
        Some(("stage", "engine_e2e")),
    );
    assert!(sum > 0.0 && sum / count < 10.0, "mean {} s", sum / count);
}

#[test]
fn report_health_and_dlq_pages() {
    let e = engine();
    let admin = e.admin_addr();
    assert_eq!(http(admin, "GET", "/health"), (200, "ok\n".to_string()));
    let mut feed = Feed::connect(e.feed_addr());
    let bad: Vec<String> = (0..5).map(|i| format!("bad {i}")).collect();
    let refs: Vec<&str> = bad.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    wait_until("dead letters stored", || e.dlq().len() == 5);
    let (status, body) = http(admin, "GET", "/dlq?offset=1&limit=2");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total_in_memory"], 5);
    assert_eq!(v["counts_by_reason"]["wrong_field_count"], 5);
    let recs = v["records"].as_array().unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["raw"], "bad 1");
    let (status, body) = http(admin, "GET", "/report");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["counters"]["poison_total"], 5);
    assert_eq!(http(admin, "GET", "/nope").0, 404);
    assert_eq!(http(admin, "POST", "/metrics").0, 405);
}

fn alert(addr: SocketAddr, name: &str) -> f64 {
    value(&scrape(addr), "tickfan_alert", Some(("name", name)))
}

/// Times alert `name` started, from a live `/metrics` scrape.
fn starts(addr: SocketAddr, name: &str) -> f64 {
    value(
        &scrape(addr),
        "tickfan_alert_starts_total",
        Some(("name", name)),
    )
}

#[test]
fn alerts_start_before_a_bound_and_clear() {
    use crate::util::engine_with;
    let e = engine_with(|c| {
        c.max_symbols = 10;
        c.alert_dlq_rate = 20.0;
        c.alert_staleness = std::time::Duration::from_millis(1);
        c.sub_hwm = 4096;
    });
    let admin = e.admin_addr();
    assert_eq!(alert(admin, "symbols_near_limit"), 0.0);
    assert_eq!(starts(admin, "dlq_growth"), 0.0);
    let mut feed = Feed::connect(e.feed_addr());
    // 8 of 10 symbols: 80 % of the bound, before any is refused.
    let lines: Vec<String> = (0..8)
        .map(|i| tick(1, &format!("S{i}"), "1", "2"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
    feed.lines(&refs);
    wait_until("symbols_near_limit starts", || {
        alert(admin, "symbols_near_limit") == 1.0
    });
    assert_eq!(
        e.counters()
            .poison(tickfan::model::poison::PoisonReason::SymbolLimit),
        0
    );

    // A burst of poison raises dlq_growth; a quiet interval clears it.
    let bad = vec!["poison"; 500];
    feed.lines(&bad);
    // Active for one report interval (100 ms here), which a scrape on a
    // loaded machine can miss: its start is counted.
    wait_until("dlq_growth starts", || starts(admin, "dlq_growth") == 1.0);
    wait_until("dlq_growth clears", || alert(admin, "dlq_growth") == 0.0);

    // A subscriber that stops reading goes stale; when it drains it clears.
    let mut slow = Sub::connect(e.subscriber_addr());
    slow.psubscribe(&["*"]);
    let mut round = 1u64;
    while alert(admin, "subscriber_stale") == 0.0 {
        assert!(round < 10_000_000, "never went stale");
        // Enough per check to fill the kernel's socket buffers quickly.
        let mut lines = Vec::new();
        for _ in 0..2_000 {
            round += 1;
            for i in 0..8 {
                lines.push(tick(round, &format!("S{i}"), &format!("1.{round:07}"), "2"));
            }
        }
        let refs: Vec<&str> = lines.iter().map(|s| s.as_str()).collect();
        feed.lines(&refs);
    }
    let want = (0..8).map(|i| (format!("S{i}"), round)).collect();
    slow.until_latest(&want);
    wait_until("subscriber_stale clears", || {
        alert(admin, "subscriber_stale") == 0.0
    });
}

#[test]
fn order_and_connection_alerts_start_and_clear() {
    use crate::util::{advance_until, order_engine, OrderClient, ScriptBridge};
    use tickfan::retry::SimClock;
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.order.queue_capacity = 10;
        c.max_conns_per_port = 5;
        c.alert_order_age = std::time::Duration::from_secs(1);
        // The clock jumps below; the gated call must outlive it (no lease expiry).
        c.order.bridge_lease = std::time::Duration::from_secs(3600);
    });
    let admin = e.admin_addr();
    // Connections: 4 of 5 subscribers is 80 %.
    let subs: Vec<Sub> = (0..4).map(|_| Sub::connect(e.subscriber_addr())).collect();
    wait_until("connections_near_limit starts", || {
        alert(admin, "connections_near_limit") == 1.0
    });
    drop(subs);
    wait_until("connections_near_limit clears", || {
        alert(admin, "connections_near_limit") == 0.0
    });

    // Orders: the one worker blocks on a gated order; 8 more wait in a
    // queue of 10 (80 %). Queue ages are measured on the monotonic
    // (measurement) clock, not the engine clock, and the reporter evaluates
    // alerts every real report interval: `order_queue_old` (1 s) starts
    // once a real second has passed, well within the generous deadline.
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("g0", "GATE", "1");
    for i in 1..=8 {
        cl.new_order(&format!("g{i}"), "EURUSD", "1");
    }
    wait_until("order_queue_high starts", || {
        alert(admin, "order_queue_high") == 1.0
    });
    let m = scrape(admin);
    assert_eq!(
        value(&m, "tickfan_order_lane_depth", Some(("lane", "small"))),
        8.0
    );
    assert_eq!(
        value(&m, "tickfan_order_lane_depth", Some(("lane", "large"))),
        0.0
    );
    assert_eq!(alert(admin, "order_queue_old"), 0.0);
    advance_until(&clock, 500, "order_queue_old starts", || {
        alert(admin, "order_queue_old") == 1.0
    });
    bridge.open_gate();
    for i in 0..=8 {
        cl.until_terminal(&format!("g{i}"));
    }
    wait_until("both clear", || {
        alert(admin, "order_queue_high") == 0.0 && alert(admin, "order_queue_old") == 0.0
    });
}

#[test]
fn a_bridge_call_that_does_not_return_raises_bridge_call_slow_until_it_does() {
    use crate::util::{advance_until, order_engine, OpenOnDrop, OrderClient, ScriptBridge};
    use std::sync::Arc;
    use tickfan::client::orders::Reply;
    use tickfan::model::order_reasons::DoneStatus;
    use tickfan::retry::{Clock, SimClock};
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.alert_bridge_call = std::time::Duration::from_secs(5);
    });
    // Declared after the engine, so dropped before it: a failed assertion
    // opens the gate instead of leaving the engine's stop waiting on the call.
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let admin = e.admin_addr();
    let gauges = || {
        let m = scrape(admin);
        (
            value(&m, "tickfan_bridge_calls_in_progress", None),
            value(&m, "tickfan_bridge_call_oldest_age_seconds", None),
            value(&m, "tickfan_alert", Some(("name", "bridge_call_slow"))),
        )
    };
    assert_eq!(gauges(), (0.0, 0.0, 0.0), "no call yet");

    // The one worker enters the bridge and stays there: the venue is silent.
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("stuck", "GATE", "1");
    wait_until("the worker is in the bridge call", || gauges().0 == 1.0);
    assert_eq!(bridge.calls_for("stuck").len(), 1);
    let (_, age, slow) = gauges();
    assert_eq!(
        (age, slow),
        (0.0, 0.0),
        "no engine time has passed: age 0, no alert"
    );

    // Engine time passes; the call ages on the engine clock.
    advance_until(&clock, 500, "bridge_call_slow starts", || {
        alert(admin, "bridge_call_slow") == 1.0
    });
    // The call started at engine time 0 and the clock stands still now, so
    // the age settles at exactly the clock's reading (not real time).
    let engine_s = (clock.now_ns() / 1_000) as f64 / 1e6;
    wait_until("the age is the engine clock's", || gauges().1 == engine_s);
    let (calls, age, _) = gauges();
    assert_eq!(calls, 1.0);
    assert!(age >= 5.0, "alert raised at {age} s, threshold 5 s");
    let (status, body) = http(admin, "GET", "/report");
    assert_eq!(status, 200);
    let r: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        r["counters"]["orders"]["gateway"]["bridge_calls_in_progress"],
        1
    );
    assert!(
        r["counters"]["orders"]["gateway"]["bridge_call_oldest_age_us"].as_u64() >= Some(5_000_000)
    );
    assert!(
        r["alerts"]
            .as_array()
            .unwrap()
            .contains(&"bridge_call_slow".into()),
        "{}",
        r["alerts"]
    );

    // The venue answers: the order ends, the gauges return to 0, the alert clears.
    bridge.open_gate();
    let replies = cl.until_terminal("stuck");
    assert!(
        matches!(
            replies.last(),
            Some(Reply::Done {
                status: DoneStatus::Filled,
                ..
            })
        ),
        "{replies:?}"
    );
    wait_until("bridge_call_slow clears and the gauges return to 0", || {
        gauges() == (0.0, 0.0, 0.0)
    });
    assert_eq!(bridge.calls_for("stuck").len(), 1, "one attempt, no retry");
}

/// A client that sends `bytes` and then nothing more, holding its connection.
fn stalled(addr: SocketAddr, bytes: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes.as_bytes()).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s
}

/// Everything the server sends until it closes (or resets) the connection.
fn until_closed(mut s: TcpStream) -> String {
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

#[test]
fn stalled_clients_do_not_freeze_health_or_metrics() {
    let e = engine();
    let admin = e.admin_addr();
    let workers = tickfan::admin::Limits::default().workers;
    // More stalled clients of each kind than there are workers.
    let huge: Vec<TcpStream> = (0..workers + 2)
        .map(|_| {
            stalled(
                admin,
                "POST /dlq/replay HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
            )
        })
        .collect();
    let half_line: Vec<TcpStream> = (0..workers + 2)
        .map(|_| stalled(admin, "GET /metr"))
        .collect();
    let half_body: Vec<TcpStream> = (0..workers + 2)
        .map(|_| {
            stalled(
                admin,
                "POST /dlq/replay HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789",
            )
        })
        .collect();
    let silent: Vec<TcpStream> = (0..workers + 2)
        .map(|_| TcpStream::connect(admin).unwrap())
        .collect();

    // Probes keep being answered, each well within a generous deadline.
    for _ in 0..5 {
        let probe = Duration::from_secs(10);
        let (status, body) = http_within(admin, "GET", "/health", probe).expect("/health answers");
        assert_eq!((status, body.as_str()), (200, "ok\n"));
        let (status, body) =
            http_within(admin, "GET", "/metrics", probe).expect("/metrics answers");
        assert_eq!(status, 200);
        assert!(body.contains("tickfan_ticks_received_total"));
    }

    // A body larger than any route takes is refused at once; the others
    // get 408 when their time to send the request is up.
    for s in huge {
        let got = until_closed(s);
        assert!(got.starts_with("HTTP/1.1 413 "), "{got:?}");
    }
    for s in half_line.into_iter().chain(half_body).chain(silent) {
        let got = until_closed(s);
        assert!(got.starts_with("HTTP/1.1 408 "), "{got:?}");
    }
    let sc = scrape(admin);
    let n = (workers + 2) as f64;
    assert_eq!(
        value(&sc, "tickfan_admin_responses_total", Some(("code", "413"))),
        n
    );
    assert_eq!(
        value(&sc, "tickfan_admin_responses_total", Some(("code", "408"))),
        3.0 * n
    );
}

#[test]
fn connections_past_the_bound_are_refused_then_served_again() {
    let e = engine();
    let admin = e.admin_addr();
    let max = tickfan::admin::Limits::default().max_connections;
    let held: Vec<TcpStream> = (0..max)
        .map(|_| TcpStream::connect(admin).unwrap())
        .collect();
    // Accepted in order: the next one is past the bound.
    let over = stalled(admin, "");
    let got = until_closed(over);
    assert!(
        got.is_empty() || got.starts_with("HTTP/1.1 503 "),
        "refused with 503 or closed: {got:?}"
    );
    // The held ones time out (408), and the endpoint answers again.
    for s in held {
        assert!(until_closed(s).starts_with("HTTP/1.1 408 "));
    }
    wait_until("served again", || {
        http_within(admin, "GET", "/health", DEADLINE).is_ok_and(|(st, _)| st == 200)
    });
    let sc = scrape(admin);
    assert!(value(&sc, "tickfan_admin_connections_refused_total", None) >= 1.0);
}

#[test]
fn oversized_and_malformed_requests_get_their_status_and_the_endpoint_goes_on() {
    let e = engine();
    let admin = e.admin_addr();
    let long_head = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(10_000));
    let many: String = (0..40).map(|i| format!("X-{i}: y\r\n")).collect();
    for (req, code) in [
        (long_head.as_str(), "431"),
        (&format!("GET /health HTTP/1.1\r\n{many}\r\n"), "431"),
        (
            "GET /health HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "411",
        ),
        ("\x16\x03\x01\x02\x00\x01\x00\r\n\r\n", "400"),
    ] {
        let got = until_closed(stalled(admin, req));
        assert!(
            got.starts_with(&format!("HTTP/1.1 {code} ")),
            "{req:.40?}: {got:?}"
        );
    }
    assert_eq!(http(admin, "GET", "/health"), (200, "ok\n".to_string()));
}

#[test]
fn a_replay_stuck_on_the_order_port_does_not_hold_up_probes() {
    use std::io::{BufRead, BufReader};
    use std::sync::Arc;
    use tickfan::admin::{AdminServer, AdminState};

    let e = engine();
    // An "order port" that accepts and answers only when told to.
    let order_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    order_port.set_nonblocking(true).unwrap();
    let state = AdminState {
        counters: Arc::clone(e.counters()),
        totals: Arc::clone(e.totals()),
        subscribers: Arc::default(),
        dlq: Arc::clone(e.dlq()),
        alerts: Arc::default(),
        token: None,
        order_addr: Some(order_port.local_addr().unwrap()),
        started: std::time::Instant::now(),
        watch: Arc::default(),
        orders: None,
        tls: None,
    };
    let server = AdminServer::start("127.0.0.1:0".parse().unwrap(), state).unwrap();
    let admin = server.addr();
    let replay_request = "POST /dlq/replay?id=o1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    let accept = || {
        let mut got = None;
        wait_until("the replay connects to the order port", || {
            got = order_port.accept().ok();
            got.is_some()
        });
        let (s, _) = got.unwrap();
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        assert_eq!(line, "REPLAY o1\n");
        s
    };

    let first = stalled(admin, replay_request);
    let mut venue = accept();
    // The replay waits for the order port's answer: probes are answered.
    for _ in 0..3 {
        let probe = Duration::from_secs(10);
        assert_eq!(
            http_within(admin, "GET", "/health", probe).expect("/health answers"),
            (200, "ok\n".to_string())
        );
        assert_eq!(
            http_within(admin, "GET", "/metrics", probe)
                .expect("/metrics answers")
                .0,
            200
        );
    }
    // One more replay waits its turn; a third is refused as busy.
    let second = stalled(admin, replay_request);
    let third = stalled(admin, replay_request);
    wait_until("a replay refused as busy", || {
        value(
            &scrape(admin),
            "tickfan_admin_responses_total",
            Some(("code", "503")),
        ) == 1.0
    });
    venue.write_all(b"ACK o1\n").unwrap();
    let mut venue = accept();
    venue.write_all(b"ACK o1\n").unwrap();
    let answers: Vec<String> = [first, second, third]
        .into_iter()
        .map(until_closed)
        .collect();
    assert!(
        answers[0].starts_with("HTTP/1.1 200 ") && answers[0].contains("\"replayed\":1"),
        "{}",
        answers[0]
    );
    let busy = answers[1..]
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 503 "))
        .count();
    let done = answers[1..]
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 200 "))
        .count();
    assert_eq!((busy, done), (1, 1), "{answers:?}");
    server.stop();
}
