//! Dead-lettered orders: kept in the DLQ file across a restart with their
//! attempt history, replayed on command once the cause is fixed, replayed
//! once only; and at shutdown every accepted order still gets its answer
//! (within the shutdown deadline, or `DEAD shutdown`). The file is in the
//! data directory by default and survives `kill -9`; a replay's record is
//! on disk before the order reaches a venue again.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tickfan::client::orders::Reply;
use tickfan::dlq::read_file;
use tickfan::model::order_reasons::{DeadReason, DoneStatus, RejectReason};
use tickfan::model::units::Lots;
use tickfan::retry::SimClock;

use crate::util::{advance_until, order_engine, wait_until, OrderClient, ScriptBridge};

#[test]
fn the_dlq_file_survives_a_restart_and_replay_re_runs_the_order_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dlq.jsonl");
    let clock = SimClock::new();
    {
        let bridge = ScriptBridge::new();
        let e = order_engine(&clock, &bridge, |c| c.dlq_file = Some(path.clone()));
        let mut cl = OrderClient::connect(e.order_addr());
        cl.new_order("r1", "PERM", "2.5");
        let r = cl.until_terminal("r1");
        assert!(
            matches!(r.last(), Some(Reply::Dead { reason, .. }) if reason == "bridge_rejected")
        );
        e.stop();
    }
    let recs = read_file(&path).unwrap();
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(
        (
            rec.source.as_str(),
            rec.reason.as_str(),
            rec.order_id.as_deref(),
            rec.attempts
        ),
        ("order", "bridge_rejected", Some("r1"), 1)
    );
    assert_eq!(rec.raw, "NEW r1 PERM BUY 2.5");
    assert_eq!(rec.history[0].bridge, "script");

    // Restart with the cause fixed: the order is replayable from the file.
    {
        let bridge = ScriptBridge::new();
        bridge.accept_all.store(true, Ordering::Relaxed);
        let e = order_engine(&clock, &bridge, |c| c.dlq_file = Some(path.clone()));
        assert!(
            e.dlq().replayable("r1").is_some(),
            "index rebuilt from the file"
        );
        let mut cl = OrderClient::connect(e.order_addr());
        cl.line("REPLAY r1");
        let r = cl.until_terminal("r1");
        assert_eq!(r[0], Reply::Ack { id: "r1".into() });
        assert!(
            matches!(r.last(), Some(Reply::Done { status: DoneStatus::Filled, cum, .. }) if cum.0 == 250),
            "{r:?}"
        );
        cl.line("REPLAY r1");
        assert!(
            matches!(cl.reply(), Reply::Reject { reason: RejectReason::Invalid, detail, .. } if detail.starts_with("not_replayable"))
        );
        cl.new_order("r1", "EURUSD", "1");
        assert!(matches!(
            cl.reply(),
            Reply::Reject {
                reason: RejectReason::Duplicate,
                ..
            }
        ));
        assert_eq!(bridge.calls_for("r1").len(), 1);
        assert_eq!(e.counters().snapshot().orders.gateway.replays, 1);
        e.stop();
    }
    // The replay marker is in the file: no second replay after another restart.
    let recs = read_file(&path).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(recs[1].replayed_ns.is_some());
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| c.dlq_file = Some(path.clone()));
    assert!(e.dlq().replayable("r1").is_none());
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("REPLAY r1");
    assert!(matches!(
        cl.reply(),
        Reply::Reject {
            reason: RejectReason::Invalid,
            ..
        }
    ));
    assert!(bridge.calls().is_empty());
}

#[test]
fn at_shutdown_waiting_retries_are_dead_lettered_and_answered() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("w1", "TX", "1");
    cl.new_order("ok", "EURUSD", "1");
    assert_eq!(cl.reply(), Reply::Ack { id: "w1".into() });
    cl.until_terminal("ok");
    wait_until("w1 waits for a retry", || e.retry_waiting() == 1);
    let report = e.stop();
    let r = cl.until_terminal("w1");
    assert!(
        matches!(r.last(), Some(Reply::Dead { reason, attempts: 1, .. }) if reason == "shutdown"),
        "{r:?}"
    );
    let o = &report.counters.orders;
    assert_eq!(o.gateway.accepted, o.done_total + o.dead_total + o.expired);
    assert_eq!(o.gateway.in_flight, 0);
}

#[test]
fn admin_post_dlq_replay_re_admits_dead_lettered_orders() {
    use crate::admin::http;
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |_| {});
    let mut cl = OrderClient::connect(e.order_addr());
    for id in ["a1", "a2"] {
        cl.new_order(id, "PERM", "1");
        cl.until_terminal(id);
    }
    wait_until("both dead letters indexed", || {
        e.dlq().replayable_ids() == ["a1", "a2"]
    });
    // The cause is fixed; the operator replays everything.
    bridge.accept_all.store(true, Ordering::Relaxed);
    let (status, body) = http(e.admin_addr(), "POST", "/dlq/replay");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["requested"], 2);
    assert_eq!(v["replayed"], 2, "{body}");
    wait_until("both replays filled", || {
        bridge.calls_for("a1").len() == 2 && bridge.calls_for("a2").len() == 2
    });
    assert!(e.dlq().replayable_ids().is_empty());
    // Nothing left: a second call replays nothing; an unknown id is refused.
    let (_, body) = http(e.admin_addr(), "POST", "/dlq/replay");
    assert!(body.contains("\"requested\":0"), "{body}");
    let (_, body) = http(e.admin_addr(), "POST", "/dlq/replay?id=nope");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            v["replayed"].as_u64(),
            v["refused"].as_array().map(Vec::len)
        ),
        (Some(0), Some(1))
    );
    assert_eq!(e.counters().snapshot().orders.gateway.replays, 2);
    let m = crate::admin::scrape(e.admin_addr());
    assert_eq!(
        crate::admin::value(&m, "tickfan_order_replays_total", None),
        2.0
    );
    assert_eq!(
        crate::admin::value(
            &m,
            "tickfan_orders_dead_lettered_total",
            Some(("reason", "bridge_rejected"))
        ),
        2.0
    );
    assert_eq!(
        crate::admin::value(&m, "tickfan_alert", Some(("name", "order_queue_high"))),
        0.0
    );
}

#[test]
fn shutdown_deadline_covers_both_lanes_and_the_chunks_of_a_large_order() {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.order.large_workers = 1;
        c.order.shutdown_deadline = Duration::from_secs(5);
    });
    let mut cl = OrderClient::connect(e.order_addr());
    // The small worker is held by `g`; the large worker splits `G` (1,000
    // lots: ten chunks of 100) and is held by its first chunk, the other
    // nine wait in the chunk queue. q1..q3 wait in the small queue, Q1, Q2
    // in the large one.
    cl.new_order("g", "GATE", "1");
    cl.new_order("G", "GATE", "1000");
    wait_until("g and G's first chunk at the venue", || {
        bridge.calls_for("g").len() == 1 && bridge.chunk_calls("G").len() == 1
    });
    let small: Vec<String> = (1..=3).map(|i| format!("q{i}")).collect();
    let large: Vec<String> = (1..=2).map(|i| format!("Q{i}")).collect();
    for id in &small {
        cl.new_order(id, "EURUSD", "1");
    }
    for id in &large {
        cl.new_order(id, "EURUSD", "500");
    }
    for _ in 0..small.len() + large.len() + 2 {
        assert!(matches!(cl.reply(), Reply::Ack { .. }));
    }
    let counters = Arc::clone(e.counters());
    let stopping = std::thread::spawn(move || e.stop());
    let dead_shutdown =
        || counters.orders.dead[DeadReason::Shutdown.index()].load(Ordering::Relaxed);
    advance_until(
        &clock,
        100,
        "queued orders of both lanes dead-lettered",
        || dead_shutdown() == 5,
    );
    assert_eq!(
        bridge.calls().len(),
        2,
        "no attempt starts after the deadline, not even a queued chunk"
    );
    bridge.open_gate();
    let report = stopping.join().unwrap();

    // Every accepted order got exactly one terminal reply.
    let mut terminal: HashMap<String, Reply> = HashMap::new();
    for r in cl.until_closed() {
        if r.is_terminal() {
            let id = r.id().unwrap().to_string();
            assert!(
                terminal.insert(id, r.clone()).is_none(),
                "two terminal replies: {r:?}"
            );
        }
    }
    assert_eq!(terminal.len(), 7, "{terminal:?}");
    assert!(
        matches!(
            terminal["g"],
            Reply::Done {
                status: DoneStatus::Filled,
                ..
            }
        ),
        "{:?}",
        terminal["g"]
    );
    // G: its first chunk executed at the venue, the nine queued ones were
    // dead-lettered `shutdown` inside the engine: one PARTIAL for the parent.
    assert!(
        matches!(
            terminal["G"],
            Reply::Done {
                status: DoneStatus::Partial,
                cum: Lots(10_000),
                ..
            }
        ),
        "{:?}",
        terminal["G"]
    );
    for id in small.iter().chain(&large) {
        assert!(
            matches!(&terminal[id], Reply::Dead { reason, attempts: 0, .. } if reason == "shutdown"),
            "{id}: {:?}",
            terminal[id]
        );
    }
    assert_eq!(bridge.calls().len(), 2);
    let o = &report.counters.orders;
    assert_eq!(
        (
            o.gateway.accepted,
            o.done_total,
            o.dead_total,
            o.gateway.in_flight
        ),
        (7, 2, 5, 0)
    );
    assert_eq!(o.sequencing.chunks_failed, 9);
}

#[test]
fn shutdown_deadline_dead_letters_what_is_still_queued_and_flushes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dlq.jsonl");
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = order_engine(&clock, &bridge, |c| {
        c.dlq_file = Some(path.clone());
        c.order.shutdown_deadline = Duration::from_secs(5);
    });
    let mut cl = OrderClient::connect(e.order_addr());
    // One worker: `g` holds it at a slow venue, q1..q5 wait in the main queue.
    cl.line("NEW g GATE BUY 1");
    let queued: Vec<String> = (1..=5).map(|i| format!("q{i}")).collect();
    for id in &queued {
        cl.new_order(id, "EURUSD", "1");
    }
    wait_until("g at the venue", || bridge.calls_for("g").len() == 1);
    // All six must be accepted before the stop begins: an order still
    // unread in the socket when the gateway closes is never accepted.
    for _ in 0..=queued.len() {
        assert!(matches!(cl.reply(), Reply::Ack { .. }));
    }
    let counters = Arc::clone(e.counters());
    let stopping = std::thread::spawn(move || e.stop());
    // The deadline runs on the engine clock: move it until the queued
    // orders have been dead-lettered while `g` is still at the venue.
    let dead_shutdown =
        || counters.orders.dead[DeadReason::Shutdown.index()].load(Ordering::Relaxed);
    advance_until(&clock, 100, "queued orders dead-lettered", || {
        dead_shutdown() == 5
    });
    assert_eq!(
        bridge.calls().len(),
        1,
        "no attempt starts after the deadline"
    );
    bridge.open_gate();
    let report = stopping.join().unwrap();

    // Every accepted order got exactly one terminal reply.
    let mut terminal: HashMap<String, Reply> = HashMap::new();
    let mut acks = queued.len() + 1;
    for r in cl.until_closed() {
        if r == (Reply::Ack {
            id: r.id().unwrap().into(),
        }) {
            acks += 1;
        } else if r.is_terminal() {
            let id = r.id().unwrap().to_string();
            assert!(
                terminal.insert(id, r.clone()).is_none(),
                "two terminal replies: {r:?}"
            );
        }
    }
    assert_eq!(acks, 6);
    assert!(
        matches!(terminal["g"], Reply::Done { .. }),
        "{:?}",
        terminal["g"]
    );
    for id in &queued {
        assert!(
            matches!(&terminal[id], Reply::Dead { reason, attempts: 0, .. } if reason == "shutdown"),
            "{id}: {:?}",
            terminal[id]
        );
    }
    let o = &report.counters.orders;
    assert_eq!(
        (
            o.gateway.accepted,
            o.done_total,
            o.dead_total,
            o.gateway.in_flight
        ),
        (6, 1, 5, 0)
    );
    // The DLQ file is complete and readable after the stop.
    let recs = read_file(&path).unwrap();
    let mut ids: Vec<String> = recs
        .iter()
        .filter(|r| r.reason == "shutdown")
        .filter_map(|r| r.order_id.clone())
        .collect();
    ids.sort();
    assert_eq!(ids, queued);
}

/// A venue that, before each call, reads the DLQ file from disk and notes
/// whether it already holds the replay marker of the order it is sent.
#[derive(Debug)]
struct MarkerObserver {
    inner: Arc<ScriptBridge>,
    path: std::path::PathBuf,
    seen: parking_lot::Mutex<Vec<(String, bool)>>,
}

impl tickfan::bridge::Bridge for MarkerObserver {
    fn name(&self) -> &str {
        "observer"
    }
    fn execute(
        &self,
        o: &tickfan::bridge::BridgeOrder<'_>,
        now_ns: u64,
    ) -> tickfan::bridge::Outcome {
        let marked = read_file(&self.path).is_ok_and(|recs| {
            recs.iter()
                .any(|r| r.order_id.as_deref() == Some(o.order_id) && r.replayed_ns.is_some())
        });
        self.seen.lock().push((o.order_id.to_string(), marked));
        self.inner.execute(o, now_ns)
    }
}

#[test]
fn the_replay_record_is_on_disk_before_the_order_is_admitted_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("dlq.jsonl");
    let clock = SimClock::new();
    let observer = Arc::new(MarkerObserver {
        inner: ScriptBridge::new(),
        path: path.clone(),
        seen: Default::default(),
    });
    let e = crate::util::bridges_engine(
        &clock,
        vec![Arc::clone(&observer) as Arc<dyn tickfan::bridge::Bridge>],
        |c| {
            c.order.workers = 1;
            c.dlq_file = Some(path.clone());
        },
    );
    assert!(!path.exists(), "created with the first record, not before");
    let mut cl = OrderClient::connect(e.order_addr());
    cl.new_order("m1", "PERM", "1");
    let r = cl.until_terminal("m1");
    assert!(matches!(r.last(), Some(Reply::Dead { .. })), "{r:?}");
    // The dead letter is synced by the time it is indexed (per batch).
    wait_until("dead letter indexed", || e.dlq().replayable("m1").is_some());
    observer.inner.accept_all.store(true, Ordering::Relaxed);
    cl.line("REPLAY m1");
    let r = cl.until_terminal("m1");
    assert_eq!(r[0], Reply::Ack { id: "m1".into() });
    assert_eq!(
        *observer.seen.lock(),
        [("m1".to_string(), false), ("m1".to_string(), true)],
        "the second call (the replay) found the marker already in the file"
    );
    e.stop();
    let recs = read_file(&path).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(recs[0].replayed_ns.is_none() && recs[1].replayed_ns.is_some());
}

/// `tickfan serve` with `args` on ephemeral ports; returns the child
/// (killed by pid when dropped) and its order port.
fn serve_binary(args: &[&str]) -> (crate::util::Spawned, std::net::SocketAddr) {
    let mut all = vec!["serve", "--quiet"];
    for what in [
        "--feed-listen",
        "--sub-listen",
        "--admin-listen",
        "--order-listen",
    ] {
        all.extend_from_slice(&[what, "127.0.0.1:0"]);
    }
    all.extend_from_slice(args);
    let (child, banner) = crate::util::spawn_until(&all, "tickfan serving");
    let orders = banner
        .split(" orders ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("order address in the banner");
    (child, orders)
}

#[test]
fn the_binary_keeps_dead_letters_in_the_data_dir_by_default_across_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let refusing = "name=refusing,permanent=1,transient=0";
    let path = data.join("dlq.jsonl");
    {
        let (_child, orders) = serve_binary(&["--data-dir", data_arg, "--bridge", refusing]);
        // The directory is there from the start (the engine holds it
        // locked); the file only from the first dead letter.
        assert!(data.join("tickfan.lock").exists() && !path.exists());
        let mut cl = OrderClient::connect(orders);
        cl.new_order("k1", "EURUSD", "1");
        let r = cl.until_terminal("k1");
        assert!(matches!(r.last(), Some(Reply::Dead { .. })), "{r:?}");
        wait_until("the dead letter is in the data directory", || {
            read_file(&path).is_ok_and(|recs| recs.len() == 1)
        });
        // `_child` is killed (SIGKILL, by pid) here: no graceful stop.
    }
    let (_child, orders) = serve_binary(&["--data-dir", data_arg, "--bridge", refusing]);
    let mut cl = OrderClient::connect(orders);
    cl.line("REPLAY k1");
    let r = cl.until_terminal("k1");
    assert_eq!(
        r[0],
        Reply::Ack { id: "k1".into() },
        "replayable after the kill"
    );
    let recs = read_file(&path).unwrap();
    assert!(recs[1].replayed_ns.is_some(), "{recs:?}");
}
