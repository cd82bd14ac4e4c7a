//! The order journal under disk faults, over real loopback sockets, the
//! disk injected under the real segment files (`util::TestDisk`):
//!
//! * a full disk (`ENOSPC` on a write, which leaves half a record behind,
//!   or on the sync, which leaves whole records whose sync failed): the
//!   orders waiting for that write and every new one get `REJECT <id>
//!   SYSTEM_BUSY journal_full`, never an `ACK`; `/health` says degraded,
//!   the `journal_disk_full` alert starts, the counters count it; an order
//!   acknowledged before runs to its end; once the disk has room the probe
//!   (every 1 s on the engine clock) finds it and orders are taken again
//!   without a restart; after a restart every acknowledged order is known
//!   with its outcome and nothing cut off is read back;
//! * a stalled `fdatasync`: the orders held for it stay within the lane's
//!   bound (`SYSTEM_BUSY` past it, at once), ticks keep reaching a
//!   subscriber, and once the sync returns every order has exactly one
//!   terminal reply;
//! * the same with a real kernel: `tickfan serve` on an 8 MiB tmpfs that
//!   another writer fills (root only; skipped elsewhere): refused, degraded,
//!   taken again once the file is removed, and after a `kill -9` every
//!   acknowledged id known, the refused one not;
//! * the binary's fault injection `TICKFAN_FAULT_FSYNC_MS` (every sync
//!   slower, for `perf/stalled_fsync.sh`): said at start, a bad value
//!   refused with exit 2.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tickfan::bridge::Bridge;
use tickfan::client::orders::{OrderState, Reply};
use tickfan::model::order_reasons::{DoneStatus, RejectReason};
use tickfan::order::journal::disk_full::PROBE_EVERY;
use tickfan::order::journal::recover::recover;
use tickfan::order::msg::record::Record;
use tickfan::retry::SimClock;
use tickfan::runtime::{Engine, Injected};

use crate::admin::{http, scrape, value};
use crate::util::{
    send_round, sim_config, wait_until, DiskMode, Feed, OpenOnDrop, OrderClient, ReleaseOnDrop,
    ScriptBridge, Sub, TestDisk,
};

/// An engine on `clock` journaling into `dir` through `disk` (`None`: the
/// directory's files as they are), one worker, `bridge` its venue.
fn journaled(
    dir: &Path,
    clock: &SimClock,
    bridge: &Arc<ScriptBridge>,
    disk: Option<&Arc<TestDisk>>,
    queue_capacity: usize,
) -> Engine {
    let mut c = sim_config();
    c.order.workers = 1;
    c.order.queue_capacity = queue_capacity;
    c.order.journal = true;
    c.order.data_dir = dir.to_path_buf();
    Engine::start_with(
        &c,
        Injected {
            clock: Some(Arc::new(clock.clone())),
            bridges: Some(vec![Arc::clone(bridge) as Arc<dyn Bridge>]),
            journal_files: disk.map(TestDisk::files),
            ..Default::default()
        },
    )
    .expect("engine starts")
}

/// The ids of the `Accepted` records in the segment files of `dir` now,
/// read without changing them (the engine is running).
fn accepted_on_disk(dir: &Path) -> Vec<String> {
    use tickfan::order::journal::segment::{parse_file_name, scan};
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let Some(n) = entry.file_name().to_str().and_then(parse_file_name) else {
            continue;
        };
        let bytes = std::fs::read(entry.path()).unwrap();
        scan(&bytes, n, |rec| {
            if let Record::Accepted { id, .. } = rec {
                ids.push(id);
            }
        })
        .unwrap();
    }
    ids
}

/// `reply` is `REJECT <id> SYSTEM_BUSY journal_full…`.
fn assert_journal_full(reply: Reply, id: &str) {
    match reply {
        Reply::Reject {
            id: got,
            reason: RejectReason::SystemBusy,
            detail,
        } => {
            assert_eq!(got, id);
            assert!(detail.starts_with("journal_full"), "{id}: {detail}");
        }
        other => panic!("{id}: {other:?}"),
    }
}

/// Sends `id` and reads its whole life: it must end `DONE`.
fn done(cl: &mut OrderClient, id: &str, symbol: &str) {
    cl.accepted(id, symbol, "1");
    let end = cl.until_terminal(id).pop();
    assert!(matches!(end, Some(Reply::Done { .. })), "{id}: {end:?}");
}

fn alert(admin: std::net::SocketAddr) -> f64 {
    value(
        &scrape(admin),
        "tickfan_alert",
        Some(("name", "journal_disk_full")),
    )
}

#[test]
fn a_full_disk_refuses_orders_with_journal_full_until_it_has_room_and_loses_nothing_acked() {
    for mode in [DiskMode::FullOnSync, DiskMode::FullOnWrite] {
        let dir = tempfile::tempdir().unwrap();
        full_disk_round(dir.path(), mode);
        after_the_restart(dir.path(), mode);
    }
}

/// One engine's life through a full disk (`mode`) and back.
fn full_disk_round(dir: &Path, mode: DiskMode) {
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let disk = TestDisk::new();
    let e = journaled(dir, &clock, &bridge, Some(&disk), 100);
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let _free = ReleaseOnDrop(Arc::clone(&disk));
    let admin = e.admin_addr();
    let mut cl = OrderClient::connect(e.order_addr());

    // Acknowledged before the disk fills: four ended, one at the venue.
    for i in 1..5 {
        done(&mut cl, &format!("a{i}"), "EURUSD");
    }
    cl.accepted("a0", "GATE", "1");
    wait_until("a0 at the venue", || !bridge.calls_for("a0").is_empty());

    // The disk fills under the batch that holds b0's record.
    match mode {
        DiskMode::FullOnSync => {
            // b0 held for its sync, the sync held; then it fails: b0's
            // record is whole in the file, its sync failed.
            disk.hold_syncs(true);
            cl.new_order("b0", "EURUSD", "1");
            wait_until("b0 held for a sync that is held", || {
                e.counters().snapshot().orders.gateway.in_flight == 2
                    && disk.waiting.load(Ordering::SeqCst) > 0
            });
            disk.set_mode(mode);
            disk.hold_syncs(false);
        }
        _ => {
            disk.set_mode(mode);
            cl.new_order("b0", "EURUSD", "1");
        }
    }
    assert_journal_full(cl.reply(), "b0");
    assert!(
        disk.failures.load(Ordering::SeqCst) > 0,
        "the disk was met full"
    );
    // While full: refused at once.
    cl.new_order("b1", "EURUSD", "1");
    assert_journal_full(cl.reply(), "b1");
    // Cut off at once, not at the next start: a crash now would not bring
    // the refused b0 back.
    let ids = accepted_on_disk(dir);
    assert!(ids.contains(&"a0".to_string()), "{ids:?}");
    assert!(!ids.contains(&"b0".to_string()), "{mode:?}: {ids:?}");

    wait_until("/health says degraded", || {
        let (code, body) = http(admin, "GET", "/health");
        code == 200 && body.starts_with("degraded: journal_full: ")
    });
    let (_, json) = http(admin, "GET", "/health?format=json");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["status"], "degraded", "{json}");
    wait_until("journal_disk_full starts", || alert(admin) == 1.0);
    let m = scrape(admin);
    assert_eq!(value(&m, "tickfan_journal_disk_full", None), 1.0);
    assert!(value(&m, "tickfan_journal_disk_full_episodes_total", None) >= 1.0);
    assert!(value(&m, "tickfan_orders_journal_full_total", None) >= 2.0);
    assert_eq!(value(&m, "tickfan_journal_failed", None), 0.0);

    // Acknowledged before: it still runs to its end.
    bridge.open_gate();
    let end = cl.until_terminal("a0").pop();
    assert!(matches!(end, Some(Reply::Done { .. })), "{end:?}");

    // Room again: refused until the probe, due 1 s later on the engine clock.
    disk.set_mode(DiskMode::Room);
    cl.new_order("c0", "EURUSD", "1");
    assert_journal_full(cl.reply(), "c0");
    clock.advance(PROBE_EVERY.as_nanos() as u64);
    wait_until("orders taken again", || {
        http(admin, "GET", "/health") == (200, "ok\n".to_string())
    });
    // b0 was never acknowledged: its id is free.
    done(&mut cl, "b0", "EURUSD");
    done(&mut cl, "c1", "EURUSD");
    wait_until("journal_disk_full clears", || alert(admin) == 0.0);
    let o = e.counters().snapshot().orders;
    assert_eq!(
        (o.gateway.journal_disk_full, o.gateway.journal_failed),
        (0, 0),
        "{mode:?}"
    );
    drop(cl);
    e.stop();
}

/// The journal `full_disk_round` left, read back and served again.
fn after_the_restart(dir: &Path, mode: DiskMode) {
    let acked = ["a0", "a1", "a2", "a3", "a4", "b0", "c1"];
    let mut accepted: HashMap<String, usize> = HashMap::new();
    let mut ended: HashMap<String, usize> = HashMap::new();
    let r = recover(dir, |rec| match rec {
        Record::Accepted { id, .. } => *accepted.entry(id).or_default() += 1,
        Record::Terminal { id, .. } => *ended.entry(id).or_default() += 1,
        _ => {}
    })
    .unwrap();
    // The failed batch was cut off by the engine, not by the recovery.
    assert_eq!(r.torn_bytes, 0, "{mode:?}");
    for id in acked {
        assert_eq!(accepted.get(id), Some(&1), "{mode:?}: {id} accepted once");
        assert_eq!(ended.get(id), Some(&1), "{mode:?}: {id} ended once");
    }
    for id in ["b1", "c0"] {
        assert_eq!(accepted.get(id), None, "{mode:?}: {id} was refused");
    }

    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let e = journaled(dir, &clock, &bridge, None, 100);
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let mut cl = OrderClient::connect(e.order_addr());
    for id in acked {
        cl.new_order(id, "EURUSD", "1");
        match cl.reply() {
            Reply::Reject {
                reason: RejectReason::Duplicate,
                ..
            } => {}
            other => panic!("{mode:?}: {id} after the restart: {other:?}"),
        }
    }
    // a0 ended while the disk was full: its end was journaled once there
    // was room, so it is not run again.
    cl.line("STATUS a0");
    match cl.reply() {
        Reply::Status { state, .. } => {
            assert_eq!(state, OrderState::Done(DoneStatus::Filled), "{mode:?}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        bridge.calls().is_empty(),
        "nothing re-run: {:?}",
        bridge.calls()
    );
    // b1 was never acknowledged: unknown, taken now.
    done(&mut cl, "b1", "EURUSD");
    drop(cl);
    e.stop();
}

#[test]
fn a_stalled_sync_keeps_the_order_queue_bounded_ticks_flowing_and_gives_every_order_one_answer() {
    const CAP: usize = 20;
    const SENT: usize = 3 * CAP;
    let dir = tempfile::tempdir().unwrap();
    let clock = SimClock::new();
    let bridge = ScriptBridge::new();
    let disk = TestDisk::new();
    let e = journaled(dir.path(), &clock, &bridge, Some(&disk), CAP);
    let _open = OpenOnDrop(Arc::clone(&bridge));
    let _free = ReleaseOnDrop(Arc::clone(&disk));
    let names: Vec<String> = (0..20).map(|i| format!("S{i:02}")).collect();
    let mut sub = Sub::connect(e.subscriber_addr());
    sub.psubscribe(&["S*"]);
    let mut feed = Feed::connect(e.feed_addr());

    // The disk stalls; a burst of three times the queue's room arrives.
    disk.hold_syncs(true);
    let mut cl = OrderClient::connect(e.order_addr());
    let mut burst = String::new();
    for i in 0..SENT {
        burst.push_str(&format!("NEW o{i} EURUSD BUY 1\n"));
    }
    cl.send(burst.as_bytes());

    // What is past the room is refused at once, the sync still held: the
    // held orders never pass the lane's capacity, none is acknowledged.
    let mut terminal: HashMap<String, usize> = HashMap::new();
    for _ in 0..SENT - CAP {
        match cl.reply() {
            Reply::Reject {
                id,
                reason: RejectReason::SystemBusy,
                detail,
            } => {
                assert!(detail.contains("queue full"), "{detail}");
                *terminal.entry(id).or_default() += 1;
            }
            other => panic!("no ACK while the sync is held: {other:?}"),
        }
    }
    wait_until("the journal's sync reached the gate", || {
        disk.waiting.load(Ordering::SeqCst) > 0
    });
    // The in-flight gauge is set at the end of the gateway's turn, after
    // the refusals were written: wait for it, then it must be the room.
    wait_until("the in-flight gauge published", || {
        e.counters().snapshot().orders.gateway.in_flight >= CAP as u64
    });
    let o = e.counters().snapshot().orders;
    assert_eq!(
        o.gateway.in_flight, CAP as u64,
        "held orders = the lane's room"
    );
    assert_eq!(o.busy, (SENT - CAP) as u64);

    // The market-data path does not wait for the disk.
    for round in 1..=5 {
        send_round(&mut feed, &names, round);
        sub.until_round(&names, round);
    }
    let mut other = OrderClient::connect(e.order_addr());
    other.line("PING");
    assert_eq!(other.reply(), Reply::Pong);
    assert!(disk.waiting.load(Ordering::SeqCst) > 0, "still held");

    // The sync returns: each held order is acknowledged and ends, once.
    disk.hold_syncs(false);
    let mut acked = 0;
    while terminal.len() < SENT {
        let r = cl.reply();
        if matches!(r, Reply::Ack { .. }) {
            acked += 1;
        }
        if r.is_terminal() {
            let id = r.id().unwrap().to_string();
            *terminal.entry(id).or_default() += 1;
        }
    }
    assert_eq!(acked, CAP);
    // Nothing more for any of them: a PING's answer comes next.
    cl.line("PING");
    assert_eq!(cl.reply(), Reply::Pong);
    assert!(terminal.values().all(|&n| n == 1), "{terminal:?}");
    assert_eq!(e.counters().snapshot().orders.gateway.in_flight, 0);
}

#[test]
fn the_binary_takes_a_slow_sync_fault_from_the_environment_says_so_and_refuses_a_bad_value() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let serve = |dir: &Path, value: &str| {
        Command::new(env!("CARGO_BIN_EXE_tickfan"))
            .args(["serve", "--quiet"])
            .args(crate::util::EPHEMERAL_PORTS)
            .args(["--data-dir", dir.to_str().unwrap()])
            .env_remove("TICKFAN_NO_JOURNAL")
            .env("TICKFAN_FAULT_FSYNC_MS", value)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("binary runs")
    };
    let dir = tempfile::tempdir().unwrap();
    let out = serve(dir.path(), "2s").wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("TICKFAN_FAULT_FSYNC_MS=\"2s\""), "{err}");

    let mut child = serve(dir.path(), "50");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut early = Vec::new();
    let mut line = String::new();
    while !line.contains("tickfan serving") {
        early.push(std::mem::take(&mut line));
        assert!(err.read_line(&mut line).unwrap() > 0, "{early:?}");
    }
    let child = crate::util::Spawned(Some(child));
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    assert!(
        early
            .iter()
            .any(|l| l.contains("fault injection: every order journal sync takes 50ms longer")),
        "{early:?}"
    );
    let orders: std::net::SocketAddr = line
        .split(" orders ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .expect("orders address in the banner");
    // Slower, still correct: an ACK after its (slow) sync, then the end.
    let mut cl = OrderClient::connect(orders);
    cl.accepted("slow1", "EURUSD", "1");
    let end = cl.until_terminal("slow1").pop();
    assert!(
        matches!(end, Some(Reply::Done { .. }) | Some(Reply::Dead { .. })),
        "{end:?}"
    );
    drop(child);
}

/// A small tmpfs mounted for one test (root only), unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("cannot mount a tmpfs (not root?)".into());
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Writes zeros into `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let zeros = [0u8; 4096];
    loop {
        match f.write_all(&zeros) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => return,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

/// `tickfan serve` journaling into `data`, one instant venue; returns the
/// process and its order and admin addresses.
fn serve_on(
    data: &Path,
) -> (
    crate::util::Spawned,
    std::net::SocketAddr,
    std::net::SocketAddr,
) {
    let mut args = crate::util::EPHEMERAL_PORTS.to_vec();
    let data = data.to_str().unwrap();
    args.extend([
        "--quiet",
        "--data-dir",
        data,
        "--bridge",
        "name=v1,latency=0ms,transient=0,permanent=0,partial=0",
    ]);
    let cwd = data.rsplit_once('/').map_or(".", |(p, _)| p).to_string();
    let node = crate::one_host::Node::start(Path::new(&cwd), &args);
    let (orders, admin) = (node.addr("orders"), node.addr("admin"));
    (node.proc, orders, admin)
}

#[test]
fn a_real_tmpfs_that_fills_refuses_orders_then_takes_them_again_once_freed_and_a_kill_9_loses_no_ack(
) {
    let fs = match Tmpfs::mount("8m") {
        Ok(fs) => fs,
        Err(why) => return eprintln!("SKIPPED tmpfs test: {why}"),
    };
    let data = fs.path().join("data");
    let (mut engine, orders, admin) = serve_on(&data);
    let mut cl = OrderClient::connect(orders);
    done(&mut cl, "before", "EURUSD");

    // The file system fills (another writer): orders are acknowledged while
    // the journal's last page has room, then refused.
    let filler = fs.path().join("filler");
    fill(&filler);
    let mut acked = vec!["before".to_string()];
    let mut refused = Vec::new();
    for i in 0..2_000 {
        let id = format!("f{i}");
        cl.new_order(&id, "EURUSD", "1");
        match cl.reply() {
            Reply::Ack { .. } => {
                let end = cl.until_terminal(&id).pop();
                assert!(matches!(end, Some(Reply::Done { .. })), "{end:?}");
                acked.push(id);
            }
            r => {
                assert_journal_full(r, &id);
                refused.push(id);
                break;
            }
        }
    }
    assert_eq!(refused.len(), 1, "the disk never filled up");
    wait_until("/health degraded", || {
        http(admin, "GET", "/health")
            .1
            .starts_with("degraded: journal_full")
    });

    // Room again: within a probe (1 s) orders are taken, no restart.
    std::fs::remove_file(&filler).unwrap();
    wait_until("/health ok", || {
        http(admin, "GET", "/health") == (200, "ok\n".to_string())
    });
    done(&mut cl, "after", "EURUSD");
    acked.push("after".into());

    // A crash, and a start on the same file system: every acknowledged id
    // is known, the refused one never was.
    let mut child = engine.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    drop(cl);
    let (_engine, orders, _) = serve_on(&data);
    let mut cl = OrderClient::connect(orders);
    for id in &acked {
        cl.new_order(id, "EURUSD", "1");
        match cl.reply() {
            Reply::Reject {
                reason: RejectReason::Duplicate,
                ..
            } => {}
            other => panic!("{id} after the restart: {other:?}"),
        }
    }
    done(&mut cl, &refused[0], "EURUSD");
}
