//! `tickfan serve` stopped (`SIGSTOP`) for 5.5 s under load, then
//! continued (`SIGCONT`): ticks and orders sent while it was stopped wait
//! in its sockets; once it runs again every subscriber gets the latest
//! value of every symbol, every order gets exactly one terminal reply, and
//! the engine goes on serving, `/health` ok. The stop is longer than the
//! watch's 5 s stall threshold on purpose, and the engine's clock
//! (monotonic) runs on while it is stopped, so every timer of the engine
//! (retries, leases, heartbeats) sees the whole stop at once when it
//! resumes. Catch-up is asserted by condition; how fast it is is measured
//! by `perf/sigstop.sh`.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use tickfan::client::orders::Reply;

use crate::admin::http;
use crate::one_host::Node;
use crate::util::{send_round, Feed, OrderClient, Sub};

/// How long the engine stays stopped: past the watch's stall threshold.
const STOP: Duration = Duration::from_millis(5_500);

/// A venue answering within 0.2–2 ms that fails 10 % of attempts
/// transiently (so retries wait in the delay queue across the stop).
const VENUE: &str = "name=v1,latency=uniform:200us..2ms,transient=0.1,permanent=0";

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Sends `NEW <prefix><i> …` for `i` in `0..n` in one write.
fn burst(cl: &mut OrderClient, prefix: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    let lines: String = ids
        .iter()
        .map(|id| format!("NEW {id} EURUSD BUY 1\n"))
        .collect();
    cl.send(lines.as_bytes());
    ids
}

#[test]
fn after_sigstop_and_sigcont_subscribers_catch_up_and_every_order_ends_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = crate::util::EPHEMERAL_PORTS.to_vec();
    args.extend(["--quiet", "--bridge", VENUE, "--order-workers", "2"]);
    let node = Node::start(dir.path(), &args);
    let pid = node.pid();
    let names: Vec<String> = (0..50).map(|i| format!("S{i:02}")).collect();
    let mut sub = Sub::connect(node.addr("subscribers"));
    sub.psubscribe(&["S*"]);
    let mut feed = Feed::connect(node.addr("feed"));
    let mut cl = OrderClient::connect(node.addr("orders"));

    // Under load when it stops: ticks flowing, orders in flight.
    for round in 1..=20 {
        send_round(&mut feed, &names, round);
    }
    let mut ids = burst(&mut cl, "before", 200);
    sub.until_round(&names, 1);
    signal(pid, "-STOP");

    // While stopped: more ticks and orders, held in its sockets.
    for round in 21..=40 {
        send_round(&mut feed, &names, round);
    }
    ids.extend(burst(&mut cl, "during", 200));
    // The scenario's stop, not a synchronisation: nothing runs meanwhile.
    std::thread::sleep(STOP);
    signal(pid, "-CONT");

    // The latest value of every symbol, however many were skipped.
    sub.until_round(&names, 40);

    // Exactly one terminal reply per order (an answer from the engine
    // after every one of them: the PING's).
    let mut ends: HashMap<String, usize> = HashMap::new();
    while ends.len() < ids.len() {
        let r = cl.reply();
        if r.is_terminal() {
            *ends.entry(r.id().unwrap().to_string()).or_default() += 1;
        }
    }
    cl.line("PING");
    loop {
        match cl.reply() {
            Reply::Pong => break,
            r if r.is_terminal() => {
                *ends.entry(r.id().unwrap().to_string()).or_default() += 1;
            }
            _ => {}
        }
    }
    for id in &ids {
        assert_eq!(ends.get(id), Some(&1), "{id}");
    }

    // It goes on serving: new ticks, a new subscriber's snapshot, a new
    // order, and /health ok once every loop beats again.
    send_round(&mut feed, &names, 41);
    sub.until_round(&names, 41);
    let mut late = Sub::connect(node.addr("subscribers"));
    late.subscribe(&["S07"]);
    assert_eq!(late.message().seq(), 41);
    cl.accepted("after", "EURUSD", "1");
    assert!(matches!(
        cl.until_terminal("after").last(),
        Some(Reply::Done { .. }) | Some(Reply::Dead { .. })
    ));
    let admin = node.addr("admin");
    crate::util::wait_until("/health ok after the stop", || {
        http(admin, "GET", "/health") == (200, "ok\n".to_string())
    });
    signal(pid, "-TERM");
    let mut child = node.proc;
    let status = child.0.take().unwrap().wait().unwrap();
    assert_eq!(status.code(), Some(0));
}
