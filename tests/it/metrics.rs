//! `/metrics` in Prometheus's own terms: `promtool check metrics` accepts a
//! live scrape (lint warnings included), the standard `process_*` families
//! and `tickfan_build_info` are there, and reconnect loops cannot grow the
//! number of series.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::admin::{http, scrape, value};
use crate::util::{
    advance_until, engine, order_engine, tick, wait_until, Feed, OrderClient, ScriptBridge, Sub,
};
use tickfan::admin::subscriber_series::SUBSCRIBER_SERIES_MAX;
use tickfan::retry::SimClock;

/// Runs `promtool check metrics` on `text`; returns its exit status and
/// everything it printed.
fn promtool_check(text: &str) -> (std::process::ExitStatus, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run promtool ({e}): install Debian's `prometheus` package \
                 (.ci/run does); this test needs it"
            )
        });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status, printed)
}

#[test]
fn promtool_accepts_a_live_scrape_with_traffic() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let admin = e.admin_addr();

    // Market data: a subscriber, good ticks and a poison line.
    let mut s = Sub::connect(e.subscriber_addr());
    s.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    let lines: Vec<String> = (1..=50)
        .map(|i| tick(i, &format!("S{}", i % 5), "1.0", "1.1"))
        .chain(["not a tick".to_string()])
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    feed.lines(&refs);
    s.until_latest(&(0..5).map(|k| (format!("S{k}"), 10)).collect());

    // Orders: fills, a permanent failure, a malformed line.
    let mut oc = OrderClient::connect(e.order_addr());
    for i in 0..5 {
        oc.new_order(&format!("ok{i}"), "EURUSD", "1");
    }
    oc.new_order("perm", "PERM", "1");
    oc.line("FROB");
    advance_until(&clock, 100, "every order ended", || {
        let o = e.counters().snapshot().orders;
        o.gateway.accepted == 6 && o.done_total + o.dead_total == 6
    });
    wait_until("the stages are merged", || {
        let sc = scrape(admin);
        ["engine_e2e", "order_e2e"].iter().all(|st| {
            value(
                &sc,
                "tickfan_stage_latency_seconds_count",
                Some(("stage", st)),
            ) > 0.0
        })
    });

    let (status, body) = http(admin, "GET", "/metrics");
    assert_eq!(status, 200);
    let (exit, printed) = promtool_check(&body);
    assert!(
        exit.success() && printed.trim().is_empty(),
        "promtool check metrics: {exit}\n{printed}"
    );

    // And it checks: a counter without `_total` is a lint problem.
    let (exit, printed) =
        promtool_check("# HELP tickfan_bad Bad.\n# TYPE tickfan_bad counter\ntickfan_bad 1\n");
    assert!(
        !exit.success(),
        "promtool must flag a bad counter: {printed}"
    );

    // The standard process families and the build, as client libraries name them.
    let sc = scrape(admin);
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
        "process_threads",
    ] {
        assert!(value(&sc, name, None) > 0.0, "{name}");
    }
    assert_eq!(
        value(
            &sc,
            "tickfan_build_info",
            Some(("version", env!("CARGO_PKG_VERSION")))
        ),
        1.0
    );
    // The engine runs its threads in this process: at least the admin's 4.
    assert!(value(&sc, "process_threads", None) >= 4.0);
}

/// Every series of a scrape: its name and labels.
fn series(addr: std::net::SocketAddr) -> BTreeSet<String> {
    let (status, body) = http(addr, "GET", "/metrics");
    assert_eq!(status, 200);
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.rsplit_once(' ').expect("name value").0.to_string())
        .collect()
}

#[test]
fn reconnect_loops_do_not_grow_the_series() {
    let e = engine();
    let admin = e.admin_addr();
    let mut feed = Feed::connect(e.feed_addr());
    feed.lines(&[&tick(1, "M", "1", "2")]);
    // More subscribers than get series of their own, held open.
    let held: Vec<Sub> = (0..SUBSCRIBER_SERIES_MAX + 2)
        .map(|_| {
            let mut s = Sub::connect(e.subscriber_addr());
            s.subscribe(&["M"]);
            s
        })
        .collect();
    let held_n = held.len() as f64;
    let per_rank = |set: &BTreeSet<String>| {
        set.iter()
            .filter(|s| s.starts_with("tickfan_subscriber_backlog_bytes{"))
            .count()
    };
    // The per-subscriber figures are refreshed by the publisher's turns.
    wait_until("held subscribers visible", || {
        value(&scrape(admin), "tickfan_subscribers", None) == held_n
            && per_rank(&series(admin)) == SUBSCRIBER_SERIES_MAX
    });
    let before = series(admin);

    // A client in a reconnect loop: 300 connect, subscribe, disconnect.
    for round in 0..300u64 {
        let mut s = Sub::connect(e.subscriber_addr());
        s.subscribe(&["M"]);
        if round % 50 == 0 {
            let after_connect = series(admin);
            assert!(
                after_connect.len() <= before.len(),
                "{} series with a reconnecting client, {} before",
                after_connect.len(),
                before.len()
            );
        }
    }
    wait_until("reconnecting clients gone", || {
        value(&scrape(admin), "tickfan_subscribers", None) == held_n
    });
    let after = series(admin);
    assert_eq!(
        after,
        before,
        "the same series after 300 reconnects (added: {:?}, gone: {:?})",
        after.difference(&before).collect::<Vec<_>>(),
        before.difference(&after).collect::<Vec<_>>()
    );
    drop(held);
}

/// Issue 26, item 5: a warning that repeats under load (here, connections
/// refused at `--max-conns`, one warning each) is written at most once per
/// 10 s, and every occurrence is counted in `tickfan_warnings_total{kind}`.
#[test]
fn a_repeating_warning_is_logged_once_per_interval_and_each_is_counted_by_kind() {
    use std::io::{BufRead, BufReader, Read};
    use std::time::Instant;

    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(["serve", "--quiet", "--max-conns", "1"])
        .args(crate::util::EPHEMERAL_PORTS)
        .envs(crate::util::scratch_env())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let pid = child.id();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("tickfan serving") {
        banner.clear();
        assert!(err.read_line(&mut banner).unwrap() > 0, "ended early");
    }
    let mut child = crate::util::Spawned(Some(child));
    let reader =
        std::thread::spawn(move || err.lines().map_while(Result::ok).collect::<Vec<String>>());
    let after = |key: &str| -> std::net::SocketAddr {
        let rest = banner.split(&format!(" {key} ")).nth(1).unwrap();
        let a = rest.split([' ', ')']).next().unwrap();
        a.trim_start_matches("http://").parse().unwrap()
    };
    let (feed, admin) = (after("feed"), after("admin"));

    // The one feed connection the port allows, then 200 refused ones.
    let _held = Feed::connect(feed);
    wait_until("the held feed connection is open", || {
        value(&scrape(admin), "tickfan_feed_connections", None) == 1.0
    });
    for _ in 0..200 {
        let mut s = std::net::TcpStream::connect(feed).unwrap();
        s.set_read_timeout(Some(crate::util::DEADLINE)).unwrap();
        let mut refusal = String::new();
        let _ = s.read_to_string(&mut refusal);
    }
    let refused = Some(("kind", "connection_refused"));
    wait_until("every refusal counted", || {
        value(&scrape(admin), "tickfan_warnings_total", refused) == 200.0
    });
    let other = Some(("kind", "auth_refused"));
    assert_eq!(value(&scrape(admin), "tickfan_warnings_total", other), 0.0);

    // Stop it, and read everything it wrote.
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let status = child.0.take().unwrap().wait().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(status.code(), Some(0));
    let lines = reader.join().unwrap();
    let of_kind: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains("refused: limit of 1 reached") || l.contains("more connection_refused")
        })
        .collect();
    // One line per 10 s at most (the first at once), however fast they came.
    let most = 1 + elapsed.as_secs() / 10;
    assert!(
        !of_kind.is_empty() && of_kind.len() as u64 <= most,
        "{} lines for 200 refusals in {elapsed:?}: {of_kind:#?}",
        of_kind.len()
    );
}
