//! The feed's loop in the publisher's thread (`--feed-thread shared`, and
//! `auto` when the engine may use one core only): every feed is read, its
//! ticks reach the subscribers and its poison the dead-letter store, the
//! process runs no feed thread, and a stop publishes every tick read.

use std::process::{Command, Stdio};

use tickfan::metrics::Stage;
use tickfan::model::poison::PoisonReason;
use tickfan::sys::affinity::FeedThread;

use crate::one_host::Node;
use crate::util::{engine_with, send_round, wait_until, Feed, Spawned, Sub};

/// The names of the threads of process `pid`.
fn threads(pid: u32) -> Vec<String> {
    let mut names = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc") {
        let comm = t.expect("task").path().join("comm");
        if let Ok(n) = std::fs::read_to_string(comm) {
            names.push(n.trim().to_string());
        }
    }
    names
}

fn symbols(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("S{i:02}")).collect()
}

#[test]
fn a_shared_feed_loop_serves_two_feeds_dead_letters_poison_and_runs_no_feed_thread() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = crate::util::EPHEMERAL_PORTS.to_vec();
    args.extend(["--quiet", "--no-journal", "--feed-thread", "shared"]);
    let node = Node::start(dir.path(), &args);
    // A thread names itself once it runs: wait for the publisher's name.
    let pid = node.pid();
    wait_until("the publisher thread is named", || {
        threads(pid).iter().any(|n| n == "tickfan-publish")
    });
    let names = threads(pid);
    assert!(!names.iter().any(|n| n == "tickfan-feed"), "{names:?}");

    let all = symbols(40);
    let (a, b) = all.split_at(20);
    let mut sub = Sub::connect(node.addr("subscribers"));
    sub.psubscribe(&["S*"]);
    let mut fa = Feed::connect(node.addr("feed"));
    let mut fb = Feed::connect(node.addr("feed"));
    for round in 1..=200 {
        send_round(&mut fa, a, round);
        send_round(&mut fb, b, round);
        if round == 100 {
            fa.lines(&["1,S00,not-a-price,1.2,1,1"]);
        }
    }
    let got = sub.until_round(&all, 200);
    assert_eq!(got.len(), 40);
    let admin = node.addr("admin");
    wait_until("the poison line counted", || {
        let (code, body) = crate::admin::http(admin, "GET", "/report");
        code == 200 && body.contains("\"poison_total\":1")
    });
}

#[test]
fn a_stop_publishes_every_tick_the_shared_loop_read_and_reports_its_stage() {
    let e = engine_with(|c| c.feed_thread = FeedThread::Shared);
    let mut sub = Sub::connect(e.subscriber_addr());
    sub.psubscribe(&["S*"]);
    let names = symbols(10);
    let mut feed = Feed::connect(e.feed_addr());
    for round in 1..=50 {
        send_round(&mut feed, &names, round);
    }
    feed.lines(&["1,S00,1.1,1.2"]);
    wait_until("every line read", || {
        let c = e.counters().snapshot();
        c.feed.ticks_valid == 500 && c.poison_total == 1
    });
    assert_eq!(e.counters().poison(PoisonReason::WrongFieldCount), 1);
    let report = e.stop();
    assert_eq!(report.stage(Stage::FeedParse).unwrap().pct.count, 500);
    assert_eq!(report.counters.feed.ticks_valid, 500);
    let got = sub.until_round(&names, 50);
    assert_eq!(got.len(), 10);
}

#[test]
fn on_one_core_the_default_runs_the_feed_in_the_publisher_s_thread() {
    if Command::new("taskset").arg("--version").output().is_err() {
        eprintln!("skipped: taskset (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_tickfan"), "serve"])
        .args(crate::util::EPHEMERAL_PORTS)
        .args(["--quiet", "--no-journal"])
        .current_dir(dir.path())
        .envs(crate::util::scratch_env())
        .env("RUST_LOG", "tickfan=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("taskset runs");
    let pid = child.id();
    let err = crate::util::wait_for_stderr(&mut child, "feed: in the publisher's thread");
    let _proc = Spawned(Some(child));
    std::thread::spawn(move || std::io::copy(&mut { err }, &mut std::io::sink()));
    wait_until("the publisher thread is named", || {
        threads(pid).iter().any(|n| n == "tickfan-publish")
    });
    assert!(!threads(pid).iter().any(|n| n == "tickfan-feed"));
}
