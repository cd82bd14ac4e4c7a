//! SIGTERM ends every role within its stop deadline whatever NATS, a venue
//! or a client does (issue 26, item 4): an ingest and an edge whose NATS
//! server is gone (`kill -9`, with updates waiting to be published) exit 0;
//! an engine whose venue never answers exits at the deadline (status 4)
//! with every `ACK`ed order in its journal, found again after a restart;
//! one whose venue answers exits 0 with every order ended in its journal.
//!
//! What is asserted is the exit and its status, within a generous bound
//! (a shared machine); how long a stop took is not.

use std::collections::HashSet;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use tickfan::client::orders::Reply;
use tickfan::order::journal::recover::recover;
use tickfan::order::msg::record::Record;

use tickfan::model::order_reasons::RejectReason;

use crate::one_host::{Node, OneHost};
use crate::util::{Feed, OrderClient, Spawned, Sub, EPHEMERAL_PORTS};

/// How long a test waits for an exit: three times the default stop
/// deadline, for a busy machine.
const EXIT_WAIT: Duration = Duration::from_secs(30);

fn sigterm(pid: u32) {
    let ok = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -TERM {pid}");
}

/// Waits for `p` to exit (fails the test after [`EXIT_WAIT`]; `p` is then
/// killed by its pid when dropped).
fn exit_of(p: &mut Spawned, what: &str) -> ExitStatus {
    let child = p.0.as_mut().expect("running");
    let end = Instant::now() + EXIT_WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            p.0 = None;
            return status;
        }
        assert!(
            Instant::now() < end,
            "{what} still running {EXIT_WAIT:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn sigterm_ends_an_ingest_and_an_edge_whose_nats_server_is_gone() {
    let Some(mut host) = OneHost::start() else {
        return;
    };
    // The edge follows a symbol; the ingest publishes it.
    let mut sub = Sub::connect(host.edge.addr("subscribers"));
    sub.subscribe(&["S0"]);
    let mut feed = Feed::connect(host.ingest.addr("feed"));
    feed.lines(&["1,S0,1.1,1.2,1,1"]);
    assert_eq!(sub.message().channel, "S0");

    host.nats.kill9();
    // Updates of 3,000 symbols for the ingest to publish with no server:
    // more than the NATS client buffers (2,048 commands), so its publish
    // blocks.
    let lines: Vec<String> = (0..3000).map(|i| format!("2,S{i},1.1,1.2,1,1")).collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    feed.lines(&refs);
    drop(feed);

    sigterm(host.edge.pid());
    sigterm(host.ingest.pid());
    let edge = exit_of(&mut host.edge.proc, "the edge");
    let ingest = exit_of(&mut host.ingest.proc, "the ingest");
    assert_eq!(
        (edge.code(), ingest.code()),
        (Some(0), Some(0)),
        "edge log: {:#?}\ningest log: {:#?}",
        host.edge.log.lock().unwrap(),
        host.ingest.log.lock().unwrap()
    );
}

/// The ids of the orders whose `Accepted` record is in the journal at `dir`.
fn journaled(dir: &std::path::Path) -> HashSet<String> {
    let mut ids = HashSet::new();
    recover(dir, |r| {
        if let Record::Accepted { id, .. } = r {
            ids.insert(id.to_string());
        }
    })
    .expect("the journal reads back");
    ids
}

/// `tickfan serve` in `dir` (journal in `dir/tickfan-data`) on ephemeral
/// ports with one small-lane worker and `args`.
fn engine_in(dir: &std::path::Path, args: &[&str]) -> Node {
    let mut all = vec!["--quiet", "--order-workers", "1"];
    all.extend_from_slice(&EPHEMERAL_PORTS);
    all.extend_from_slice(args);
    Node::start(dir, &all)
}

#[test]
fn a_venue_that_never_answers_does_not_hold_the_stop_and_acked_orders_survive_it() {
    let dir = tempfile::tempdir().unwrap();
    // Every call hangs for 10 minutes and its lease outlasts the test, so
    // the first order holds its worker at the bridge and the stop cannot
    // end by itself; the others wait in the queue.
    let mut engine = engine_in(
        dir.path(),
        &[
            "--bridge",
            "name=silent,hang=1,hang_for=10m,transient=0,permanent=0",
            "--bridge-lease",
            "1h",
            "--shutdown-deadline",
            "1s",
        ],
    );
    let ids: Vec<String> = (0..5).map(|i| format!("h{i}")).collect();
    let mut cl = OrderClient::connect(engine.addr("orders"));
    for id in &ids {
        cl.accepted(id, "EURUSD", "1");
    }
    sigterm(engine.pid());
    let status = exit_of(&mut engine.proc, "the engine with a hung venue call");
    assert_eq!(
        status.code(),
        Some(4),
        "forced at the stop deadline: {:#?}",
        engine.log.lock().unwrap()
    );
    let journal = dir.path().join("tickfan-data");
    let on_disk = journaled(&journal);
    for id in &ids {
        assert!(on_disk.contains(id), "ACKed {id} not in the journal");
    }

    // After a restart (the lock went with the process) every one is
    // known, and a duplicate.
    let engine = engine_in(
        dir.path(),
        &[
            "--bridge",
            "name=fast,latency=fixed:0ms,transient=0,permanent=0",
        ],
    );
    let mut cl = OrderClient::connect(engine.addr("orders"));
    for id in &ids {
        cl.line(&format!("STATUS {id}"));
        let r = cl.raw_reply();
        assert!(
            r.starts_with(&format!("STATUS {id} ")) && !r.contains(" UNKNOWN "),
            "{r}"
        );
    }
    cl.new_order("h0", "EURUSD", "1");
    match cl.reply() {
        Reply::Reject { reason, .. } => assert_eq!(reason, RejectReason::Duplicate),
        other => panic!("h0 accepted again after the restart: {other:?}"),
    }
}

#[test]
fn sigterm_with_a_venue_that_answers_exits_0_with_every_acked_order_ended_in_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine_in(
        dir.path(),
        &[
            "--bridge",
            "name=fast,latency=fixed:1ms,transient=0,permanent=0",
        ],
    );
    let ids: Vec<String> = (0..20).map(|i| format!("t{i}")).collect();
    let mut cl = OrderClient::connect(engine.addr("orders"));
    for id in &ids {
        cl.new_order(id, "EURUSD", "1");
    }
    // Every one ACKed, then the signal.
    let mut replies = Vec::new();
    while replies
        .iter()
        .filter(|r| matches!(r, Reply::Ack { .. }))
        .count()
        < ids.len()
    {
        replies.push(cl.reply());
    }
    sigterm(engine.pid());
    // Every accepted order gets its end before the engine exits.
    replies.extend(cl.until_closed());
    for id in &ids {
        assert!(
            replies
                .iter()
                .any(|r| matches!(r, Reply::Done { id: d, .. } if d == id)),
            "{id} not done: {replies:?}"
        );
    }
    assert_eq!(exit_of(&mut engine.proc, "the engine").code(), Some(0));
    let mut ended = HashSet::new();
    recover(&dir.path().join("tickfan-data"), |r| {
        if let Record::Terminal { id, .. } = r {
            ended.insert(id.to_string());
        }
    })
    .unwrap();
    for id in &ids {
        assert!(ended.contains(id), "{id}'s end not journaled");
    }
}
