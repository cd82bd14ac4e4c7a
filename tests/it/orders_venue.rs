//! The venue's side of "orders survive a crash": the simulated venue keeps
//! its execution record (`exec_log`) across restarts and never executes an
//! id twice; bridge calls hold a lease, so a hung venue never holds a worker,
//! the order completes on the other bridge, and the late answer is discarded.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tickfan::bridge::exec_log;
use tickfan::bridge::spec::SimSpec;
use tickfan::bridge::Bridge;
use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::DoneStatus;
use tickfan::retry::SimClock;

use crate::util::{
    advance_until, bridges_engine, engine_with, wait_until, OpenOnDrop, OrderClient, ScriptBridge,
};

/// The fills (n, cum, amount) and the terminal reply of `id`.
fn run_order(cl: &mut OrderClient, id: &str) -> (Vec<(u32, u64, u64)>, Reply) {
    cl.new_order(id, "EURUSD", "4");
    let mut r = cl.until_terminal(id);
    let end = r.pop().unwrap();
    let fills = r
        .iter()
        .filter_map(|r| match r {
            Reply::Fill { n, cum, amount, .. } => Some((*n, cum.0, amount.0)),
            _ => None,
        })
        .collect();
    (fills, end)
}

#[test]
fn a_resent_id_gets_the_first_fills_after_a_venue_restart_and_executes_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("venue.log");
    let venue = |seed| SimSpec {
        max_fills: 5,
        seed,
        exec_log: Some(log.clone()),
        ..SimSpec::instant("v")
    };
    let e = engine_with(|c| c.order.bridges = vec![venue(1)]);
    let mut cl = OrderClient::connect(e.order_addr());
    let (first, end) = run_order(&mut cl, "k1");
    assert!(
        matches!(
            end,
            Reply::Done {
                status: DoneStatus::Filled,
                ..
            }
        ),
        "{end:?}"
    );
    drop(cl);
    e.stop();

    // Restarted from the same record, with another seed: an execution now
    // would draw other fills; the record answers with the first ones.
    let e = engine_with(|c| c.order.bridges = vec![venue(99)]);
    let mut cl = OrderClient::connect(e.order_addr());
    let (again, _) = run_order(&mut cl, "k1");
    assert_eq!(again, first, "the re-sent id answered from the record");
    let (other, _) = run_order(&mut cl, "k2");
    assert!(!other.is_empty(), "a new id still executes");
    drop(cl);
    e.stop();

    let record = exec_log::read(&log).unwrap();
    let ids: Vec<&str> = record.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["k1", "k2"], "each id executed once");
}

#[test]
fn a_hung_venue_never_holds_the_worker_every_order_completes_on_the_other_bridge() {
    let hung = SimSpec {
        hang: 1.0,
        hang_for: Duration::from_secs(2),
        ..SimSpec::instant("hung")
    };
    let e = engine_with(|c| {
        c.order.bridges = vec![hung, SimSpec::instant("ok")];
        c.order.workers = 1;
        c.order.bridge_lease = Duration::from_millis(200);
    });
    let mut cl = OrderClient::connect(e.order_addr());
    let n = 12;
    for i in 0..n {
        cl.new_order(&format!("h{i}"), "EURUSD", "1");
    }
    let (mut retried, mut ended) = (0, 0);
    while ended < n {
        match cl.reply() {
            Reply::Done {
                status: DoneStatus::Filled,
                attempts,
                ..
            } => {
                ended += 1;
                retried += u64::from(attempts > 1);
            }
            Reply::Ack { .. } | Reply::Fill { .. } => {}
            other => panic!("{other:?}"),
        }
    }
    let retry = &e.counters().retry;
    assert!(retried > 0, "some orders went to the hung venue first");
    assert_eq!(retry.lease_expired.load(Ordering::Relaxed), retried);
    // Each hung call ends after hang_for; its answer comes with a retired token.
    wait_until("the late answers discarded", || {
        retry.late_answers_discarded.load(Ordering::Relaxed) == retried
    });
    drop(cl);
    e.stop();
}

#[test]
fn a_late_answer_after_the_lease_applies_no_fill() {
    let clock = SimClock::new();
    let stuck = ScriptBridge::new();
    let _open = OpenOnDrop(Arc::clone(&stuck));
    let ok = ScriptBridge::new();
    ok.open_gate();
    let e = bridges_engine(
        &clock,
        vec![
            Arc::clone(&stuck) as Arc<dyn Bridge>,
            Arc::clone(&ok) as Arc<dyn Bridge>,
        ],
        |c| {
            c.order.workers = 1;
            c.order.bridge_lease = Duration::from_secs(5);
        },
    );
    let mut cl = OrderClient::connect(e.order_addr());
    cl.accepted("g1", "GATE", "2");
    cl.accepted("g2", "GATE", "2");
    let counters = e.counters();
    // The simulated clock moves only while the hung call is the only one in
    // flight (one worker: g2 waits behind g1), so no answered call can see
    // its lease expire however slowly this machine schedules it.
    advance_until(&clock, 500, "the hung call's lease to expire", || {
        counters.retry.lease_expired.load(Ordering::Relaxed) == 1
    });
    // With the clock still, g2 goes to the healthy venue and ends.
    wait_until("the first order done", || {
        counters.snapshot().orders.done_total >= 1
    });
    // One step past g1's first retry delay (at most --retry-base, 100 ms,
    // and well inside a lease), then the clock stays: g1 ends on the other
    // bridge.
    clock.advance_ms(1_000);
    wait_until("both orders done", || {
        counters.snapshot().orders.done_total == 2
    });
    let mut attempts = Vec::new();
    let mut replies = Vec::new();
    while replies.iter().filter(|r: &&Reply| r.is_terminal()).count() < 2 {
        replies.push(cl.reply());
    }
    for id in ["g1", "g2"] {
        let r: Vec<&Reply> = replies.iter().filter(|r| r.id() == Some(id)).collect();
        let fills = r.iter().filter(|r| matches!(r, Reply::Fill { .. })).count();
        assert_eq!(fills, 2, "{id}: the other bridge's two fills only: {r:?}");
        match r.last() {
            Some(Reply::Done {
                status: DoneStatus::Filled,
                attempts: a,
                ..
            }) => attempts.push(*a),
            other => panic!("{id}: {other:?}"),
        }
    }
    attempts.sort_unstable();
    assert_eq!(attempts, [1, 2], "one order moved to the other bridge");
    assert_eq!(counters.retry.lease_expired.load(Ordering::Relaxed), 1);
    let applied = counters.fills.applied.load(Ordering::Relaxed);

    // The hung venue answers at last (executed, two fills): discarded.
    stuck.open_gate();
    wait_until("the late answer discarded", || {
        counters
            .retry
            .late_answers_discarded
            .load(Ordering::Relaxed)
            == 1
    });
    assert_eq!(counters.fills.applied.load(Ordering::Relaxed), applied);
    assert_eq!(
        counters.snapshot().orders.gateway.fills,
        4,
        "no FILL from the late answer"
    );
    drop(cl);
    e.stop();
}
