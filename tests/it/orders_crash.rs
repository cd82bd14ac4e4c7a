//! Orders across crashes: after a `kill -9` and a restart on the same
//! `--data-dir`, `STATUS` answers for every journaled order as before the
//! crash (terminal ones with their outcome, re-queued ones `QUEUED`).

use std::process::Command;

use crate::orders_journal::serve;
use crate::util::{OrderClient, Spawned};

const FAST: &str = "name=fast,latency=uniform:100us..200us,transient=0,permanent=0";
const REFUSING: &str = "name=refusing,latency=uniform:100us..200us,transient=0,permanent=1";
const SLOW: &str = "name=slow,latency=uniform:9s..10s,transient=0,permanent=0";

/// Asks `STATUS id` and returns the raw answer line.
fn status(cl: &mut OrderClient, id: &str) -> String {
    cl.line(&format!("STATUS {id}"));
    let l = cl.raw_reply();
    assert!(l.starts_with(&format!("STATUS {id} ")), "{l}");
    l
}

/// Stops `engine` with SIGTERM (by its pid) and asserts exit 0.
fn terminate(mut engine: Spawned) {
    let mut child = engine.0.take().unwrap();
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// Kills `engine` with SIGKILL (by its pid): no shutdown at all.
fn crash(mut engine: Spawned) {
    let mut child = engine.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn status_after_a_kill_9_restart_is_the_outcome_or_queued() {
    let dir = tempfile::tempdir().unwrap();
    // A filled order and a dead one, each on its own run.
    let (engine, addr) = serve(dir.path(), FAST);
    let mut cl = OrderClient::connect(addr);
    cl.accepted("f1", "EURUSD", "1.5");
    cl.until_terminal("f1");
    let filled = status(&mut cl, "f1");
    assert!(
        filled.starts_with("STATUS f1 DONE FILLED cum=1.50 ") && filled.ends_with(" attempts=1"),
        "{filled}"
    );
    terminate(engine);
    let (engine, addr) = serve(dir.path(), REFUSING);
    let mut cl = OrderClient::connect(addr);
    cl.accepted("d1", "EURUSD", "2");
    cl.until_terminal("d1");
    let dead = status(&mut cl, "d1");
    assert_eq!(
        dead,
        "STATUS d1 DEAD bridge_rejected cum=0.00 amount=0.0000000 left=2.00 attempts=1"
    );
    terminate(engine);
    // A venue that takes 9 s or more: the orders stay queued; then kill -9.
    let (engine, addr) = serve(dir.path(), SLOW);
    let mut cl = OrderClient::connect(addr);
    for id in ["q0", "q1", "q2", "q3"] {
        cl.accepted(id, "EURUSD", "3");
    }
    crash(engine);

    let (_engine, addr) = serve(dir.path(), SLOW);
    // Any connection, after the restart: the same answers as before it.
    let mut cl = OrderClient::connect(addr);
    assert_eq!(status(&mut cl, "f1"), filled);
    assert_eq!(status(&mut cl, "d1"), dead);
    // Re-queued behind the one at the (9 s) bridge: queued, quantity left.
    assert_eq!(
        status(&mut cl, "q3"),
        "STATUS q3 QUEUED cum=0.00 amount=0.0000000 left=3.00 attempts=0"
    );
    assert_eq!(
        status(&mut cl, "never"),
        "STATUS never UNKNOWN cum=0 amount=0 left=0 attempts=0"
    );
}
