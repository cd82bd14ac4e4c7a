//! The order journal: an `ACK` is written only once the order is durable,
//! so acknowledged orders survive `kill -9` (re-queued and completed after
//! the restart, their ids still `DUPLICATE`); a full journal refuses new
//! orders with `SYSTEM_BUSY journal_full` (after the `journal_full` alert)
//! and never acknowledges them; segments whose orders ended are retired.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::RejectReason;
use tickfan::order::journal::record::{Record, TerminalState};
use tickfan::order::journal::recover::recover;

use crate::util::{engine_with, OrderClient, Spawned};

/// `tickfan serve` on ephemeral ports with its journal in `dir`, one small
/// worker and the venue `bridge`; returns the child and its order address.
pub(crate) fn serve(dir: &std::path::Path, bridge: &str) -> (Spawned, std::net::SocketAddr) {
    serve_bridges(dir, &[bridge], 1)
}

/// [`serve`] with several `--bridge` specs and `workers` small-order workers.
pub(crate) fn serve_bridges(
    dir: &std::path::Path,
    bridges: &[&str],
    workers: usize,
) -> (Spawned, std::net::SocketAddr) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickfan"))
        .args([
            "serve",
            "--quiet",
            "--order-workers",
            &workers.to_string(),
            "--large-workers",
            "1",
        ])
        .args(crate::util::EPHEMERAL_PORTS)
        .args(["--data-dir", dir.to_str().unwrap()])
        .args(bridges.iter().flat_map(|b| ["--bridge", b]))
        .env_remove("TICKFAN_NO_JOURNAL")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary runs");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("tickfan serving") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "engine ended early");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    assert!(
        line.contains(&format!("journal {}", dir.display())),
        "{line}"
    );
    let addr = line
        .split(" orders ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("orders address in {line:?}"));
    (Spawned(Some(child)), addr)
}

#[test]
fn acked_orders_survive_kill_9_are_completed_after_restart_and_stay_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    {
        // A venue that takes 9 s or more: one order at the bridge, the rest queued.
        let (mut engine, addr) = serve(
            dir.path(),
            "name=slow,latency=uniform:9s..10s,transient=0,permanent=0",
        );
        let mut cl = OrderClient::connect(addr);
        for id in &ids {
            cl.accepted(id, "EURUSD", "1");
        }
        // Crash: SIGKILL by pid, no shutdown at all.
        let mut child = engine.0.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let (mut engine, addr) = serve(
        dir.path(),
        "name=fast,latency=uniform:100us..200us,transient=0,permanent=0",
    );
    let mut cl = OrderClient::connect(addr);
    for id in ["k0", "k39"] {
        cl.new_order(id, "EURUSD", "1");
        match cl.reply() {
            Reply::Reject {
                id: got, reason, ..
            } => {
                assert_eq!((got.as_str(), reason), (id, RejectReason::Duplicate));
            }
            other => panic!("{id} accepted again after the crash: {other:?}"),
        }
    }
    // One worker, one lane, first in first out: once a new order is done,
    // every re-queued one before it has been run.
    cl.accepted("z1", "EURUSD", "1");
    assert!(matches!(
        cl.until_terminal("z1").last(),
        Some(Reply::Done { .. })
    ));
    let mut child = engine.0.take().unwrap();
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));

    // The journal holds every acknowledged order's end, each once, DONE.
    let mut ends: HashMap<String, Vec<TerminalState>> = HashMap::new();
    let mut accepted: HashMap<String, usize> = HashMap::new();
    recover(dir.path(), |r| match r {
        Record::Accepted { id, .. } => *accepted.entry(id).or_default() += 1,
        Record::Terminal { id, state, .. } => ends.entry(id).or_default().push(state),
        _ => {}
    })
    .unwrap();
    for id in &ids {
        assert_eq!(accepted.get(id), Some(&1), "{id} accepted once");
        assert_eq!(ends.get(id), Some(&vec![TerminalState::Done]), "{id}");
    }
}

#[test]
fn a_full_journal_refuses_new_orders_with_journal_full_and_acks_none_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_with(|c| {
        c.order.journal = true;
        c.order.data_dir = dir.path().to_path_buf();
        c.order.journal_max_bytes = 64 * 1024;
        c.order.bridges = vec![tickfan::bridge::spec::SimSpec::instant("fast")];
    });
    let mut cl = OrderClient::connect(e.order_addr());
    let mut acked = 0;
    let detail = loop {
        let id = format!("f{acked}");
        cl.new_order(&id, "EURUSD", "1");
        let replies = cl.until_terminal(&id);
        match &replies[0] {
            Reply::Ack { .. } => acked += 1,
            Reply::Reject {
                reason: RejectReason::SystemBusy,
                detail,
                ..
            } => break detail.clone(),
            other => panic!("{other:?}"),
        }
        assert!(acked < 10_000, "64 KiB never filled");
    };
    assert!(detail.starts_with("journal_full"), "{detail}");
    assert!(acked > 100, "{acked} orders fit in 64 KiB");
    let alert = || {
        let m = crate::admin::scrape(e.admin_addr());
        crate::admin::value(&m, "tickfan_alert", Some(("name", "journal_full")))
    };
    crate::util::wait_until("journal_full starts", || alert() == 1.0);
    let report = e.stop();
    // Each ACK's latency, the sync included, is measured.
    let acks = report.stage(tickfan::metrics::Stage::OrderAck).unwrap();
    assert_eq!(acks.pct.count, acked as u64);
    let mut n = 0;
    recover(dir.path(), |r| {
        if matches!(r, Record::Accepted { .. }) {
            n += 1;
        }
    })
    .unwrap();
    assert_eq!(n, acked, "every ACKed order is in the journal, no other");
}

#[test]
fn ended_orders_segments_are_retired_so_a_small_journal_never_fills() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine_with(|c| {
        c.order.journal = true;
        c.order.data_dir = dir.path().to_path_buf();
        c.order.journal_max_bytes = 64 * 1024;
        c.order.dedup_retention = std::time::Duration::from_millis(1);
        c.order.bridges = vec![tickfan::bridge::spec::SimSpec::instant("fast")];
    });
    let mut cl = OrderClient::connect(e.order_addr());
    // Several times what 64 KiB holds (the test above fills it in far fewer).
    for i in 0..3_000 {
        let id = format!("r{i}");
        cl.new_order(&id, "EURUSD", "1");
        let replies = cl.until_terminal(&id);
        assert!(
            matches!(replies[0], Reply::Ack { .. }),
            "order {i}: {replies:?}"
        );
    }
    e.stop();
    let bytes: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(bytes <= 64 * 1024, "{bytes} bytes on disk");
}
