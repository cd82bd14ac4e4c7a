//! Order capacity: a lane's workers grow under a backlog up to their max and
//! shrink back to their min after the idle period (scale decisions on the
//! simulated engine clock, counts read from `/metrics`); a venue's
//! `max_inflight` is never exceeded (a gated venue counting its concurrent
//! calls); the capacity gauges are there and sane; the binary logs each
//! scale step and prints the capacity interval line; bad flags get one line.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tickfan::bridge::spec::SimSpec;
use tickfan::bridge::{Bridge, BridgeOrder, Outcome, VenueFill};
use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::DoneStatus;
use tickfan::model::units::{Amount, Price};
use tickfan::retry::SimClock;

use crate::admin::http;
use crate::util::{
    advance_until, bridges_engine, order_engine, wait_until, OpenOnDrop, OrderClient, ScriptBridge,
};

/// The value of the sample `series` (name with its labels, as exposed) in
/// a `/metrics` body.
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in /metrics"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{series}: {e}"))
}

fn scrape(engine: &tickfan::runtime::Engine) -> String {
    let (status, body) = http(engine.admin_addr(), "GET", "/metrics");
    assert_eq!(status, 200);
    body
}

const SMALL_WORKERS: &str = "tickfan_order_workers{lane=\"small\"}";

#[test]
fn workers_scale_up_under_a_backlog_and_back_down_after_idle() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let engine = order_engine(&clock, &bridge, |c| {
        c.order.workers = 1;
        c.order.workers_max = Some(4);
        c.order.worker_idle = Duration::from_secs(2);
    });
    assert_eq!(
        sample(&scrape(&engine), SMALL_WORKERS),
        1.0,
        "starts at min"
    );
    let mut cl = OrderClient::connect(engine.order_addr());
    // Every order blocks at the venue: the queue stays deeper than the workers.
    for i in 0..10 {
        cl.accepted(&format!("g{i}"), "GATE", "1");
    }
    advance_until(&clock, 10, "the small lane grows to its max", || {
        let w = sample(&scrape(&engine), SMALL_WORKERS);
        assert!(w <= 4.0, "above --order-workers-max: {w}");
        w == 4.0
    });
    let body = scrape(&engine);
    assert_eq!(
        sample(
            &body,
            "tickfan_order_worker_scale_total{lane=\"small\",direction=\"up\"}"
        ),
        3.0
    );
    // Four workers at the gate, six orders queued, nothing completing.
    wait_until("four workers busy, six queued", || {
        let b = scrape(&engine);
        sample(&b, "tickfan_order_workers_busy{lane=\"small\"}") == 4.0
            && sample(&b, "tickfan_order_lane_depth{lane=\"small\"}") == 6.0
    });
    for _ in 0..20 {
        clock.advance_ms(10);
        assert!(
            sample(&scrape(&engine), SMALL_WORKERS) <= 4.0,
            "never above max"
        );
    }
    let body = scrape(&engine);
    assert!(
        body.contains("tickfan_order_lane_drain_seconds{lane=\"small\"} +Inf"),
        "nothing completes: not draining"
    );
    assert!(sample(&body, "tickfan_order_lane_arrival_rate{lane=\"small\"}") > 0.0);
    let util = sample(
        &body,
        "tickfan_order_lane_utilisation_ratio{lane=\"small\"}",
    );
    assert!(util > 0.0 && util <= 1.0, "utilisation {util}");
    assert_eq!(sample(&body, "tickfan_order_slo_seconds"), 1.0);

    bridge.open_gate();
    let mut done = 0;
    while done < 10 {
        done += usize::from(cl.reply().is_terminal());
    }
    // Idle on the engine clock: back to the minimum, never below it.
    advance_until(&clock, 50, "the small lane shrinks to its min", || {
        let w = sample(&scrape(&engine), SMALL_WORKERS);
        assert!(w >= 1.0, "below --order-workers-min: {w}");
        w == 1.0
    });
    let body = scrape(&engine);
    assert_eq!(
        sample(
            &body,
            "tickfan_order_worker_scale_total{lane=\"small\",direction=\"down\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(&body, "tickfan_order_lane_drain_seconds{lane=\"small\"}"),
        0.0,
        "nothing queued"
    );
    // The one worker left still serves.
    cl.accepted("after", "EURUSD", "1");
    cl.until_terminal("after");
    drop(engine.stop());
}

/// A venue that counts the calls it is in at once and holds each until opened.
#[derive(Debug, Default)]
struct CountingVenue {
    now: AtomicUsize,
    most: AtomicUsize,
    calls: AtomicUsize,
    open: Mutex<bool>,
    cv: Condvar,
}

impl CountingVenue {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

impl Bridge for CountingVenue {
    fn name(&self) -> &str {
        "counted"
    }

    fn execute(&self, o: &BridgeOrder<'_>, _: u64) -> Outcome {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(n, Ordering::SeqCst);
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        drop(open);
        self.now.fetch_sub(1, Ordering::SeqCst);
        let price = Price(110_000);
        Outcome::Executed(vec![VenueFill {
            fill_no: 1,
            cum_lots: o.qty,
            cum_amount: Amount::of(o.qty, price),
            price,
        }])
    }
}

struct OpenVenue(Arc<CountingVenue>);

impl Drop for OpenVenue {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[test]
fn max_inflight_is_never_exceeded_and_the_other_workers_wait() {
    let clock = SimClock::new();
    let venue = Arc::new(CountingVenue::default());
    let _open = OpenVenue(Arc::clone(&venue));
    let engine = bridges_engine(&clock, vec![Arc::clone(&venue) as Arc<dyn Bridge>], |c| {
        c.order.workers = 6;
        c.order.bridges = vec![SimSpec {
            max_inflight: Some(2),
            ..SimSpec::named("counted")
        }];
    });
    let mut cl = OrderClient::connect(engine.order_addr());
    for i in 0..6 {
        cl.accepted(&format!("o{i}"), "EURUSD", "1");
    }
    // All six workers hold an order; two are at the venue, four wait for a place.
    wait_until("two calls at the venue, six workers busy", || {
        let b = scrape(&engine);
        venue.now.load(Ordering::SeqCst) == 2
            && sample(&b, "tickfan_order_workers_busy{lane=\"small\"}") == 6.0
            && sample(&b, "tickfan_bridge_calls_in_progress") == 2.0
    });
    assert_eq!(venue.calls.load(Ordering::SeqCst), 2, "the others wait");
    venue.open();
    let mut done = 0;
    while done < 6 {
        let r = cl.reply();
        if r.is_terminal() {
            assert!(
                matches!(
                    r,
                    Reply::Done {
                        status: DoneStatus::Filled,
                        ..
                    }
                ),
                "{r:?}"
            );
            done += 1;
        }
    }
    assert_eq!(venue.calls.load(Ordering::SeqCst), 6);
    assert_eq!(
        venue.most.load(Ordering::SeqCst),
        2,
        "max_inflight=2 held at every instant"
    );
    drop(engine.stop());
}

#[test]
fn bad_worker_bounds_and_max_inflight_exit_2_with_one_line() {
    for (args, names) in [
        (
            &["--order-workers-min", "9", "--order-workers-max", "3"][..],
            "--order-workers-max",
        ),
        (
            &["--large-workers-min", "5", "--large-workers-max", "2"],
            "--large-workers-max",
        ),
        (&["--bridge", "max_inflight=0"], "max_inflight"),
        (&["--bridge", "max_inflight=lots"], "max_inflight"),
        (&["--order-slo", "0s"], "--order-slo"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tickfan"))
            .arg("serve")
            .args(args)
            .envs(crate::util::scratch_env())
            .output()
            .expect("binary runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("tickfan: ") && err.contains(names),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn the_binary_logs_each_scale_step_and_prints_the_capacity_line() {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .arg("serve")
        .args(crate::util::EPHEMERAL_PORTS)
        .args([
            "--order-workers-min",
            "1",
            "--order-workers-max",
            "3",
            "--bridge",
            "name=slow,latency=fixed:200ms,transient=0,max_inflight=8",
            "--report-interval",
            "500ms",
        ])
        .env("RUST_LOG", "info")
        .envs(crate::util::scratch_env())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let err = child.stderr.take().unwrap();
    let _child = crate::util::Spawned(Some(child));
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let until = |what: &str| -> String {
        let end = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = end.saturating_duration_since(std::time::Instant::now());
            let l = lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no stderr line with {what:?}"));
            if l.contains(what) {
                return l;
            }
        }
    };
    let banner = until("tickfan serving");
    let orders = banner
        .split(" orders ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("order address in the banner");
    let mut cl = OrderClient::connect(orders);
    for i in 0..20 {
        cl.accepted(&format!("s{i}"), "EURUSD", "1");
    }
    // One log line per step, up to the max.
    until("order workers: small lane 1 → 2");
    until("order workers: small lane 2 → 3");
    let line = until("capacity small workers");
    assert!(line.contains("slo 1.00s"), "{line}");
}
