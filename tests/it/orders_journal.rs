//! The order journal: an `ACK` is written only once the order is durable,
//! so acknowledged orders survive `kill -9` (re-queued and completed after
//! the restart, their ids still `DUPLICATE`); a full journal refuses new
//! orders with `SYSTEM_BUSY journal_full` (after the `journal_full` alert)
//! and never acknowledges them; segments whose orders ended are retired; a
//! journal torn at any byte of its last two records recovers to the last
//! whole record, says how many bytes it cut, and no id is acknowledged
//! twice across the restart.

use std::collections::HashMap;
use std::process::{Command, Stdio};

use tickfan::client::orders::Reply;
use tickfan::model::order_reasons::RejectReason;
use tickfan::order::journal::recover::recover;
use tickfan::order::msg::record::{Record, TerminalState};

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
    let (child, addr, _) = serve_logged(dir, bridges, workers);
    (child, addr)
}

/// [`serve_bridges`], also returning the lines the engine wrote before its
/// banner (the journal's recovery speaks there).
fn serve_logged(
    dir: &std::path::Path,
    bridges: &[&str],
    workers: usize,
) -> (Spawned, std::net::SocketAddr, Vec<String>) {
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
    let mut early = Vec::new();
    while !line.contains("tickfan serving") {
        if !line.is_empty() {
            early.push(line.clone());
        }
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "engine ended early: {early:?}"
        );
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
    (Spawned(Some(child)), addr, early)
}

/// A venue that takes 9 s or more: orders sent to it stay accepted, not ended.
const SLOW_VENUE: &str = "name=slow,latency=uniform:9s..10s,transient=0,permanent=0";
/// A venue that answers within 0.2 ms.
const FAST_VENUE: &str = "name=fast,latency=uniform:100us..200us,transient=0,permanent=0";

/// An engine on `dir` in front of [`SLOW_VENUE`] acknowledges `ids`, then
/// crashes: SIGKILL by pid, no shutdown at all.
fn acknowledge_then_kill_9(dir: &std::path::Path, ids: &[String]) {
    let (mut engine, addr) = serve(dir, SLOW_VENUE);
    let mut cl = OrderClient::connect(addr);
    for id in ids {
        cl.accepted(id, "EURUSD", "1");
    }
    let mut child = engine.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Sends `id` again on `cl`: it must be refused as a duplicate (`why` says
/// where, in a failure).
fn assert_duplicate(cl: &mut OrderClient, id: &str, why: &str) {
    cl.new_order(id, "EURUSD", "1");
    match cl.reply() {
        Reply::Reject {
            id: got, reason, ..
        } => assert_eq!(
            (got.as_str(), reason),
            (id, RejectReason::Duplicate),
            "{why}"
        ),
        other => panic!("{why}: {id} acknowledged again: {other:?}"),
    }
}

#[test]
fn acked_orders_survive_kill_9_are_completed_after_restart_and_stay_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    // One order at the bridge, the rest queued, when it crashes.
    acknowledge_then_kill_9(dir.path(), &ids);
    let (mut engine, addr) = serve(dir.path(), FAST_VENUE);
    let mut cl = OrderClient::connect(addr);
    for id in ["k0", "k39"] {
        assert_duplicate(&mut cl, id, "after the crash");
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
    let mut records = 0u64;
    recover(dir.path(), |r| {
        records += 1;
        if matches!(r, Record::Accepted { .. }) {
            n += 1;
        }
    })
    .unwrap();
    assert_eq!(n, acked, "every ACKed order is in the journal, no other");
    // Each commit's write + fdatasync is measured: one client waiting for
    // each order's end, so every ACK had a commit of its own, and no
    // commit holds less than one record.
    let syncs = report
        .stage(tickfan::metrics::Stage::JournalSync)
        .expect("journal_sync in the report")
        .pct
        .count;
    assert!(
        (acked as u64..=records).contains(&syncs),
        "{syncs} commits for {acked} ACKs and {records} records"
    );
    // And the rest of each ACK's wait: before its commit (one sample per
    // commit holding an urgent record: each ACK's own), and after it, to
    // the ACK's release (one per commit that released an ACK).
    let count = |stage| report.stage(stage).map_or(0, |s| s.pct.count);
    assert_eq!(count(tickfan::metrics::Stage::JournalWait), acked as u64);
    assert_eq!(count(tickfan::metrics::Stage::AckRelease), acked as u64);
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

/// The journal's files in `dir`: its segments by number, newest last.
fn segments(dir: &std::path::Path) -> Vec<(u64, std::path::PathBuf)> {
    use tickfan::order::journal::segment::parse_file_name;
    let mut out: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let n = parse_file_name(e.file_name().to_str()?)?;
            Some((n, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Copies the journal's segments of `from` into a fresh directory, the
/// last one replaced by `last`.
fn journal_copy(from: &std::path::Path, last: &[u8]) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    let segs = segments(from);
    let n_last = segs.last().unwrap().0;
    for (n, path) in &segs {
        let dest = to.path().join(path.file_name().unwrap());
        if *n == n_last {
            std::fs::write(dest, last).unwrap();
        } else {
            std::fs::copy(path, dest).unwrap();
        }
    }
    to
}

#[test]
fn a_journal_torn_at_every_offset_of_its_last_two_records_recovers_and_never_acks_an_id_twice() {
    use tickfan::order::journal::segment::{put_frame, scan};
    let dir = tempfile::tempdir().unwrap();
    let acked: Vec<String> = (0..5).map(|i| format!("a{i}")).collect();
    acknowledge_then_kill_9(dir.path(), &acked);
    // The last segment's whole records, and two more written after them
    // that were never acknowledged (in flight at the crash): t0 and t1.
    let (n_last, last_path) = segments(dir.path()).pop().expect("a segment");
    let bytes = std::fs::read(&last_path).unwrap();
    let mut base = Vec::new();
    let s = scan(&bytes, n_last, |r| base.push(r)).unwrap();
    assert_eq!(s.torn, None);
    let template = base
        .iter()
        .rev()
        .find(|r| matches!(r, Record::Accepted { .. }))
        .expect("an accepted record")
        .clone();
    let torn_ids = ["t0", "t1"];
    let mut extra = Vec::new();
    for (k, tid) in torn_ids.iter().enumerate() {
        let mut r = template.clone();
        if let Record::Accepted { seq, id, .. } = &mut r {
            *seq += 1 + k as u64;
            *id = tid.to_string();
        }
        extra.push(r);
    }
    let mut full = bytes[..s.valid_len].to_vec();
    let mut ends = vec![full.len()];
    for r in &extra {
        put_frame(&mut full, r);
        ends.push(full.len());
    }
    let whole_before = |cut: usize| ends.iter().filter(|&&e| e <= cut).count() - 1;

    // Every offset of the last two records, cut there (plain) or followed
    // by the zeros of space reserved ahead: recovery keeps the whole
    // records, reports the bytes it drops and leaves the file clean.
    for cut in ends[0]..=full.len() {
        for zeros in [0usize, 4096] {
            let mut file = full[..cut].to_vec();
            file.resize(cut + zeros, 0);
            let copy = journal_copy(dir.path(), &file);
            let mut ids = Vec::new();
            let r = recover(copy.path(), |rec| {
                if let Record::Accepted { id, .. } = rec {
                    ids.push(id);
                }
            })
            .unwrap_or_else(|e| panic!("cut at {cut} (+{zeros} zeros): {e}"));
            let whole = whole_before(cut);
            let boundary = ends[whole];
            for id in &acked {
                assert!(ids.contains(id), "{id} lost at cut {cut}");
            }
            let torn_seen: Vec<&str> = torn_ids
                .iter()
                .copied()
                .filter(|t| ids.iter().any(|i| i == t))
                .collect();
            // A cut that loses only zero bytes of a frame leaves it whole.
            let rest_zero = full[cut..ends[(whole + 1).min(2)]].iter().all(|&b| b == 0);
            let expect = if zeros > 0 && rest_zero {
                (whole + 1).min(2)
            } else {
                whole
            };
            assert_eq!(
                torn_seen,
                torn_ids[..expect],
                "cut at {cut} (+{zeros} zeros)"
            );
            if zeros == 0 {
                assert_eq!(r.torn_bytes, (cut - boundary) as u64, "cut at {cut}");
            } else if expect == whole && cut > boundary {
                assert_eq!(
                    r.torn_bytes,
                    (cut + zeros - boundary) as u64,
                    "cut at {cut} + zeros"
                );
            }
            // Cut for good: a second recovery finds nothing torn.
            let again = recover(copy.path(), |_| {}).unwrap();
            assert_eq!(again.torn_bytes, 0, "cut at {cut}: torn again");
        }
    }

    // The engine on such journals: before the two records, inside the
    // first, at its end, inside the second, whole. Acknowledged ids stay
    // duplicates; a torn id was never acknowledged, so it is taken now,
    // once; a whole one is known. Nothing is acknowledged twice.
    let mid = |a: usize, b: usize| a + (b - a) / 2;
    let cuts = [
        ends[0],
        ends[0] + 3,
        mid(ends[0], ends[1]),
        ends[1],
        mid(ends[1], ends[2]),
        ends[2],
    ];
    for cut in cuts {
        let copy = journal_copy(dir.path(), &full[..cut]);
        let (mut engine, addr, early) = serve_logged(copy.path(), &[FAST_VENUE], 1);
        let whole = whole_before(cut);
        let dropped = cut - ends[whole];
        if dropped > 0 {
            let said = format!("cut a torn tail of {dropped} bytes");
            assert!(
                early.iter().any(|l| l.contains(&said)),
                "cut at {cut}: {said:?} not in {early:?}"
            );
        }
        let mut cl = OrderClient::connect(addr);
        let known: Vec<&str> = acked
            .iter()
            .map(String::as_str)
            .chain(torn_ids[..whole].iter().copied())
            .collect();
        let why = format!("cut at {cut}");
        for id in &known {
            assert_duplicate(&mut cl, id, &why);
        }
        // A torn id taken now runs at the fast venue: its FILLs and DONE
        // come on this connection, so it is followed to its end before
        // it is sent again (a reply of it never stands in for another's).
        for id in &torn_ids[whole..] {
            cl.accepted(id, "EURUSD", "1");
            let replies = cl.until_terminal(id);
            assert!(
                matches!(replies.last(), Some(Reply::Done { .. })),
                "{why}: {id} ended {replies:?}"
            );
            assert_duplicate(&mut cl, id, &why);
        }
        let mut child = engine.0.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
