//! Thread failure is loud: a thread that panics or stops heart-beating
//! turns `/health` into a 503 naming it, and the binary exits 3 with one
//! line naming the thread (faults injected with `Injected::fault` or
//! `TICKFAN_FAULT`, see `tickfan::sys::watch`).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tickfan::bridge::{Bridge, BridgeOrder, Outcome};
use tickfan::config::Config;
use tickfan::runtime::{Engine, Injected};
use tickfan::sys::watch::Fault;

use crate::admin::http;
use crate::util::{wait_until, OrderClient, Spawned};

/// A venue whose every call panics (the worker's call thread that makes
/// it dies).
#[derive(Debug)]
struct PanickingVenue;

impl Bridge for PanickingVenue {
    fn name(&self) -> &str {
        "panicking"
    }
    fn execute(&self, order: &BridgeOrder<'_>, _now_ns: u64) -> Outcome {
        panic!("venue adapter bug on order {}", order.order_id);
    }
}

#[test]
fn a_venue_that_panics_kills_its_call_thread_and_health_names_it() {
    let mut c = Config::ephemeral();
    c.order.workers = 1;
    let e = Engine::start_with(
        &c,
        Injected {
            bridges: Some(vec![Arc::new(PanickingVenue) as Arc<dyn Bridge>]),
            ..Default::default()
        },
    )
    .expect("engine starts");
    let admin = e.admin_addr();
    assert_eq!(http(admin, "GET", "/health"), (200, "ok\n".to_string()));
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("p-1", "EURUSD", "1");
    wait_until("/health reports the dead worker", || {
        http(admin, "GET", "/health").0 == 503
    });
    let (_, body) = http(admin, "GET", "/health");
    assert_eq!(body, "unhealthy: tickfan-order-w0-call died\n");
    assert_eq!(
        e.watch().fatal().as_deref(),
        Some("thread tickfan-order-w0-call died (panicked)")
    );
}

/// Starts an engine on `config` whose loop `thread` stalls at its first
/// beat; waits until `/health` answers 503 and returns its body, then lets
/// the thread go and waits until it is healthy again.
fn health_while_stalled(config: &Config, thread: &str) -> String {
    let release = Arc::new(AtomicBool::new(false));
    let e = Engine::start_with(
        config,
        Injected {
            fault: Some(Fault::Stall {
                thread: thread.into(),
                release: Arc::clone(&release),
            }),
            ..Default::default()
        },
    )
    .expect("engine starts");
    let admin = e.admin_addr();
    // Past the 5 s threshold the probe names the stalled loop.
    wait_until("/health reports the stalled loop", || {
        http(admin, "GET", "/health").0 == 503
    });
    let (_, body) = http(admin, "GET", "/health");
    assert_eq!(e.watch().fatal(), None, "a stall is not a death");
    release.store(true, Ordering::Release);
    wait_until("healthy again", || http(admin, "GET", "/health").0 == 200);
    body
}

#[test]
fn a_loop_that_stops_beating_makes_health_503_until_it_beats_again() {
    let body = health_while_stalled(&Config::ephemeral(), "tickfan-publish");
    assert!(
        body.starts_with("unhealthy: tickfan-publish stalled (no heartbeat for "),
        "{body}"
    );
    // The other loops still beat.
    assert!(!body.contains("tickfan-feed"), "{body}");
}

#[test]
fn an_idle_feed_in_the_publisher_s_thread_keeps_beating() {
    let mut config = Config::ephemeral();
    config.feed_thread = tickfan::sys::affinity::FeedThread::Shared;
    // No tick is sent: only the stalled gateway is named, not the feed
    // whose turns the publisher skips while it idles.
    let body = health_while_stalled(&config, "tickfan-order-gw");
    assert!(
        body.starts_with("unhealthy: tickfan-order-gw stalled"),
        "{body}"
    );
    assert!(!body.contains("tickfan-feed"), "{body}");
    assert!(!body.contains("tickfan-publish"), "{body}");
}

/// `tickfan serve` on ephemeral ports with `TICKFAN_FAULT=fault`.
fn serve_with_fault(fault: &str) -> Spawned {
    let child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args(["serve", "--quiet"])
        .args(crate::util::EPHEMERAL_PORTS)
        .env("TICKFAN_FAULT", fault)
        .envs(crate::util::scratch_env())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    Spawned(Some(child))
}

#[test]
fn a_thread_that_panics_stops_the_binary_with_exit_3_and_one_line_naming_it() {
    let mut child = serve_with_fault("panic:tickfan-order-gw");
    let (_, line) = {
        let c = child.0.as_mut().unwrap();
        let mut err = std::io::BufReader::new(c.stderr.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
            assert!(n > 0, "the process ended without the fatal line");
            if line.starts_with("tickfan: thread ") {
                break (err, line);
            }
        }
    };
    assert_eq!(
        line.trim_end(),
        "tickfan: thread tickfan-order-gw died (panicked); engine stopped"
    );
    let status = child.0.take().unwrap().wait().unwrap();
    assert_eq!(status.code(), Some(3));
}

#[test]
fn a_stalled_thread_in_the_binary_is_named_by_health() {
    let mut child = serve_with_fault("stall:tickfan-feed");
    let mut err = std::io::BufReader::new(child.0.as_mut().unwrap().stderr.take().unwrap());
    let mut banner = String::new();
    while !banner.contains("tickfan serving") {
        banner.clear();
        assert!(std::io::BufRead::read_line(&mut err, &mut banner).unwrap() > 0);
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let admin: std::net::SocketAddr = banner
        .split("admin http://")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("admin address in the banner");
    wait_until("/health names the stalled feed", || {
        http(admin, "GET", "/health").0 == 503
    });
    let (_, body) = http(admin, "GET", "/health");
    assert!(
        body.starts_with("unhealthy: tickfan-feed stalled"),
        "{body}"
    );
    // `child` is killed by its pid when dropped.
}
