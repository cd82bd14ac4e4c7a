//! Orders across crashes: after a `kill -9` and a restart on the same
//! `--data-dir`, `STATUS` answers for every journaled order as before the
//! crash (terminal ones with their outcome, re-queued ones `QUEUED`).
//!
//! The crash test: orders streaming to two slow, flaky venues with
//! execution records; `kill -9` by pid after a seeded pseudo-random number
//! of ACKs, five times in a row on the same data directory; then every
//! ACKed id reaches exactly one terminal `STATUS`, stays `DUPLICATE`, and
//! no venue record holds an id twice (over both venues); a SIGTERM in the
//! same flow exits 0 and loses nothing. The journal holds no fill number
//! twice for an order and no fencing token twice.
//!
//! And, deterministically (a journal cut between an order's fills): the
//! recovered order goes back to the venue of its journaled attempt, its
//! fill numbers continue without a repeat, its new token is above the
//! journaled ones; a recovered large order's chunks go back to theirs; an
//! order whose first attempt was not journaled goes back to the venue its
//! admission number chose.

use std::process::Command;

use tickfan::bridge::exec_log;
use tickfan::order::journal::recover::recover;
use tickfan::order::msg::record::Record;

use crate::orders_journal::{serve, serve_bridges};
use crate::util::{OrderClient, Spawned, DEADLINE};

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

/// Sends `NEW id` and reads until its answer: `true` for its `ACK`, `false`
/// for a `REJECT` (other orders' replies on the way are skipped).
fn send_new(cl: &mut OrderClient, id: &str) -> bool {
    cl.new_order(id, "EURUSD", "1");
    loop {
        let l = cl.raw_reply();
        let mut w = l.split_whitespace();
        match (w.next(), w.next()) {
            (Some("ACK"), Some(got)) if got == id => return true,
            (Some("REJECT"), Some(got)) if got == id => return false,
            _ => {}
        }
    }
}

/// The state word of every id's `STATUS`, asked on a fresh connection.
fn states(addr: std::net::SocketAddr, ids: &[String]) -> Vec<String> {
    let mut cl = OrderClient::connect(addr);
    let mut all = String::new();
    for id in ids {
        all.push_str(&format!("STATUS {id}\n"));
    }
    cl.send(all.as_bytes());
    ids.iter()
        .map(|id| {
            let l = cl.raw_reply();
            let mut w = l.split_whitespace();
            assert_eq!((w.next(), w.next()), (Some("STATUS"), Some(id.as_str())));
            w.next().unwrap().to_string()
        })
        .collect()
}

fn terminal(state: &str) -> bool {
    matches!(state, "DONE" | "DEAD" | "EXPIRED")
}

/// Waits until every id in `acked` has a terminal `STATUS` (polled like
/// [`crate::util::wait_until`]; the failure names the orders still open).
fn all_terminal(addr: std::net::SocketAddr, acked: &[String]) {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let s = states(addr, acked);
        let open: Vec<_> = acked
            .iter()
            .zip(&s)
            .filter(|(_, st)| !terminal(st))
            .map(|(id, st)| format!("{id} {st}"))
            .collect();
        if open.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "not terminal by STATUS: {open:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A small seeded generator (xorshift): the kill moments are the same on
/// every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn five_kill_9s_in_a_row_lose_no_acked_order_and_execute_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (l1, l2) = (dir.path().join("v1.log"), dir.path().join("v2.log"));
    // Two slow, flaky venues (transient failures retried on the other one,
    // a few permanent refusals, partial fills), each with its record.
    let bridges = format!(
        "name=v1,latency=uniform:2ms..20ms,transient=0.2,permanent=0.02,partial=0.2,exec_log={}",
        l1.display()
    );
    let bridges2 = format!(
        "name=v2,latency=uniform:2ms..20ms,transient=0.2,permanent=0.02,partial=0.2,exec_log={}",
        l2.display()
    );
    let start = || serve_bridges(&data, &[&bridges, &bridges2], 8);
    let mut rng = Rng(0x13c0_ffee_d00d_f00d);
    let mut acked: Vec<String> = Vec::new();
    let mut next = 0u32;
    let mut new_id = || {
        next += 1;
        format!("c{next}")
    };
    for _round in 0..5 {
        let (engine, addr) = start();
        let mut cl = OrderClient::connect(addr);
        // Killed after a pseudo-random number of ACKs read (10 to 69),
        // with orders queued, at a venue and retrying.
        let kill_after = 10 + rng.below(60);
        let mut n = 0;
        while n < kill_after {
            let id = new_id();
            if send_new(&mut cl, &id) {
                acked.push(id);
                n += 1;
            }
        }
        crash(engine);
    }
    let (engine, addr) = start();
    let mut cl = OrderClient::connect(addr);
    for _ in 0..10 {
        let id = new_id();
        if send_new(&mut cl, &id) {
            acked.push(id);
        }
    }
    all_terminal(addr, &acked);
    // Every ACKed id is still taken.
    let mut dup = OrderClient::connect(addr);
    let mut all = String::new();
    for id in &acked {
        all.push_str(&format!("NEW {id} EURUSD BUY 1\n"));
    }
    dup.send(all.as_bytes());
    for id in &acked {
        let l = dup.raw_reply();
        assert!(
            l.starts_with(&format!("REJECT {id} DUPLICATE")),
            "{id} again: {l}"
        );
    }

    // SIGTERM in the same flow: orders in flight, exit 0, nothing lost.
    for _ in 0..15 {
        let id = new_id();
        if send_new(&mut cl, &id) {
            acked.push(id);
        }
    }
    terminate(engine);
    let (engine, addr) = start();
    all_terminal(addr, &acked);
    terminate(engine);

    // The venues' records: each id executed at most once, over both.
    let mut executed: std::collections::HashMap<String, usize> = Default::default();
    for log in [&l1, &l2] {
        for (id, _) in exec_log::read(log).unwrap() {
            *executed.entry(id).or_default() += 1;
        }
    }
    let twice: Vec<_> = executed.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "executed more than once: {twice:?}");
    assert!(!executed.is_empty());
    // The journal: no fill number twice for an order, no fencing token twice.
    let mut fills: std::collections::HashMap<String, Vec<u32>> = Default::default();
    let mut tokens = std::collections::HashSet::new();
    recover(&data, |r| match r {
        Record::FillApplied { id, fill_no, .. } => fills.entry(id).or_default().push(fill_no),
        Record::AttemptSent { fence_token, .. } => {
            assert!(tokens.insert(fence_token), "token {fence_token} twice");
        }
        _ => {}
    })
    .unwrap();
    for (id, ns) in &fills {
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{id}: fills {ns:?}");
    }
}

/// The journal is cut as if the process had died between an order's first
/// journaled `FILL` and the rest (its later `FillApplied` and `Terminal`
/// records are dropped); at the restart the order goes back to the venue of
/// its journaled attempt (not the one the new admission number would pick),
/// which returns the first execution's fills: the journal then holds each
/// fill number once, the venues hold the id once, and tokens go on above
/// the journaled ones.
#[test]
fn a_recovered_order_goes_back_to_its_venue_and_its_fill_numbers_continue() {
    use std::collections::HashMap;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (l1, l2) = (dir.path().join("v1.log"), dir.path().join("v2.log"));
    let v1 = format!(
        "name=v1,latency=uniform:100us..200us,transient=0,permanent=0,exec_log={}",
        l1.display()
    );
    let v2 = format!(
        "name=v2,latency=uniform:100us..200us,transient=0,permanent=0,exec_log={}",
        l2.display()
    );
    let (engine, addr) = serve_bridges(&data, &[&v1, &v2], 1);
    let mut cl = OrderClient::connect(addr);
    let ids: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    for id in &ids {
        cl.accepted(id, "EURUSD", "2");
        cl.until_terminal(id);
    }
    terminate(engine);

    let mut records = Vec::new();
    recover(&data, |r| records.push(r)).unwrap();
    // An order at v1 with two fills or more.
    let mut at: HashMap<String, (String, u64)> = HashMap::new();
    let mut fills: HashMap<String, u32> = HashMap::new();
    for r in &records {
        match r {
            Record::AttemptSent {
                id,
                bridge,
                fence_token,
            } => {
                at.insert(id.clone(), (bridge.clone(), *fence_token));
            }
            Record::FillApplied { id, fill_no, .. } => {
                let n = fills.entry(id.clone()).or_default();
                *n = (*n).max(*fill_no);
            }
            _ => {}
        }
    }
    let x = ids
        .iter()
        .find(|id| at[*id].0 == "v1" && fills.get(*id).copied().unwrap_or(0) >= 2)
        .expect("an order at v1 with two fills or more")
        .clone();
    let max_token = at.values().map(|a| a.1).max().unwrap();
    // The cut: x's fills after the first and its end never reached the disk.
    rewrite_journal(&data, &records, |r| match r {
        Record::FillApplied { id, fill_no, .. } => *id == x && *fill_no >= 2,
        Record::Terminal { id, .. } => *id == x,
        _ => false,
    });

    let (engine, addr) = serve_bridges(&data, &[&v1, &v2], 1);
    let mut cl = OrderClient::connect(addr);
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let st = status(&mut cl, &x);
        if st.contains(" DONE FILLED ") {
            break;
        }
        assert!(std::time::Instant::now() < end, "{st}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    terminate(engine);

    let mut ns = Vec::new();
    let mut tokens = Vec::new();
    recover(&data, |r| match r {
        Record::FillApplied { id, fill_no, .. } if id == x => ns.push(fill_no),
        Record::AttemptSent {
            id,
            bridge,
            fence_token,
        } if id == x => tokens.push((bridge, fence_token)),
        _ => {}
    })
    .unwrap();
    let want: Vec<u32> = (1..=fills[&x]).collect();
    assert_eq!(ns, want, "{x}: each fill number once, in order");
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert_eq!(tokens[1].0, "v1", "back to the venue that knows {x}");
    assert!(tokens[1].1 > max_token, "{tokens:?} after {max_token}");
    let executed = [&l1, &l2]
        .iter()
        .flat_map(|l| exec_log::read(l).unwrap())
        .filter(|(id, _)| *id == x)
        .count();
    assert_eq!(executed, 1, "{x} executed once");
}

/// A large order whose end never reached the disk: at the restart each of
/// its chunks goes back to the venue of its journaled attempt (the new
/// admission number would route every chunk to the other venue), so each
/// chunk id is executed once over both venues.
#[test]
fn a_recovered_large_orders_chunks_go_back_to_their_venues() {
    let dir = tempfile::tempdir().unwrap();
    let (data, [l1, l2], [v1, v2]) = two_logged_venues(dir.path());
    // Admission numbers 1 and 2: the large order's chunks route from 2.
    second_order_ended(&data, [&v1, &v2], "big", "300");

    let mut records = Vec::new();
    recover(&data, |r| records.push(r)).unwrap();
    rewrite_journal(&data, &records, |r| match r {
        Record::FillApplied { id, .. } | Record::Terminal { id, .. } => id == "big",
        _ => false,
    });

    restart_until_status(
        &data,
        [&v1, &v2],
        "big",
        "STATUS big DONE FILLED cum=300.00 ",
    );

    let mut executed: std::collections::HashMap<String, usize> = Default::default();
    for log in [&l1, &l2] {
        for (id, _) in exec_log::read(log).unwrap() {
            *executed.entry(id).or_default() += 1;
        }
    }
    let chunks: Vec<_> = executed
        .iter()
        .filter(|(id, _)| id.starts_with("big.c"))
        .collect();
    assert_eq!(chunks.len(), 3, "{executed:?}");
    assert!(chunks.iter().all(|(_, &n)| n == 1), "{executed:?}");
}

/// An order whose first attempt's record never reached the disk (it is
/// not synced before the venue call): at the restart the journal holds
/// only its `Accepted`, and it goes back to the venue its admission number
/// routed it to before the crash (the new number would route it to the
/// other), so the venue that executed it answers with that execution and
/// it is executed once over both venues.
#[test]
fn an_order_whose_first_attempt_was_not_journaled_goes_back_to_the_same_venue() {
    let dir = tempfile::tempdir().unwrap();
    let (data, [l1, l2], [v1, v2]) = two_logged_venues(dir.path());
    // Admission numbers 1 and 2: x routes from 2; recovered alone it is 1.
    second_order_ended(&data, [&v1, &v2], "x", "2");

    let mut records = Vec::new();
    recover(&data, |r| records.push(r)).unwrap();
    let before = [&l1, &l2].map(|l| {
        exec_log::read(l)
            .unwrap()
            .into_iter()
            .any(|(id, _)| id == "x")
    });
    assert_eq!(before.iter().filter(|&&b| b).count(), 1, "{before:?}");
    rewrite_journal(&data, &records, |r| match r {
        Record::AttemptSent { id, .. }
        | Record::FillApplied { id, .. }
        | Record::Terminal { id, .. } => id == "x",
        _ => false,
    });

    restart_until_status(&data, [&v1, &v2], "x", "STATUS x DONE FILLED cum=2.00 ");

    let after = [&l1, &l2].map(|l| {
        exec_log::read(l)
            .unwrap()
            .into_iter()
            .filter(|(id, _)| id == "x")
            .count()
    });
    assert_eq!(after.iter().sum::<usize>(), 1, "executed once: {after:?}");
    assert_eq!(
        after[0] == 1,
        before[0],
        "at the same venue: {after:?} {before:?}"
    );
}

/// Two instant venues `v1` and `v2` with execution records in `dir`: the
/// data directory, their record files and their `--bridge` specs.
fn two_logged_venues(
    dir: &std::path::Path,
) -> (std::path::PathBuf, [std::path::PathBuf; 2], [String; 2]) {
    let logs = [dir.join("v1.log"), dir.join("v2.log")];
    let spec = |name: &str, log: &std::path::Path| {
        format!(
            "name={name},latency=uniform:100us..200us,transient=0,permanent=0,exec_log={}",
            log.display()
        )
    };
    let specs = [spec("v1", &logs[0]), spec("v2", &logs[1])];
    (dir.join("data"), logs, specs)
}

/// On a fresh engine: `s0` (1 lot, admission number 1), then `id` (`qty`
/// lots, number 2), each to its end; then SIGTERM.
fn second_order_ended(data: &std::path::Path, venues: [&str; 2], id: &str, qty: &str) {
    let (engine, addr) = serve_bridges(data, &venues, 1);
    let mut cl = OrderClient::connect(addr);
    cl.accepted("s0", "EURUSD", "1");
    cl.until_terminal("s0");
    cl.accepted(id, "EURUSD", qty);
    cl.until_terminal(id);
    terminate(engine);
}

/// Restarts on `data` and asks `STATUS id` until it starts with `want`
/// (within [`DEADLINE`]); then SIGTERM.
fn restart_until_status(data: &std::path::Path, venues: [&str; 2], id: &str, want: &str) {
    let (engine, addr) = serve_bridges(data, &venues, 1);
    let mut cl = OrderClient::connect(addr);
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let st = status(&mut cl, id);
        if st.starts_with(want) {
            break;
        }
        assert!(std::time::Instant::now() < end, "{st}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    terminate(engine);
}

/// Replaces the journal in `data` with one segment holding `records`
/// except those `dropped` picks: what a crash leaves when their appends
/// had not reached the disk.
fn rewrite_journal(data: &std::path::Path, records: &[Record], dropped: impl Fn(&Record) -> bool) {
    use tickfan::order::journal::segment::{file_name, header, parse_file_name, put_frame};
    let mut seg = header(1).to_vec();
    for r in records.iter().filter(|r| !dropped(r)) {
        put_frame(&mut seg, r);
    }
    for e in std::fs::read_dir(data).unwrap() {
        let p = e.unwrap().path();
        if parse_file_name(p.file_name().unwrap().to_str().unwrap()).is_some() {
            std::fs::remove_file(p).unwrap();
        }
    }
    std::fs::write(data.join(file_name(1)), seg).unwrap();
}
