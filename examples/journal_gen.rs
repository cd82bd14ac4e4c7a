//! `journal_gen`: writes an order journal of N accepted orders into a
//! directory, through the journal's own writer (the real format: segment
//! headers, framed and checksummed records, group commit with
//! `fdatasync`), so the engine's start-up recovery can be timed on it
//! (`perf/journal_recovery.sh`).
//!
//! Each order is what the engine journals for an order that ran once to a
//! fill: `Accepted`, `AttemptSent`, `FillApplied`, `Terminal` (`DONE
//! FILLED`); the last `--queued` orders have only their `Accepted` record
//! (they were waiting for a worker at the crash and are re-queued at
//! start). Received "now" on the wall clock, so every id is within the
//! dedup retention and goes back into the dedup store.
//!
//! Usage: `cargo run --release --example journal_gen -- DIR N QUEUED`

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use tickfan::model::lane::Lane;
use tickfan::model::units::{Amount, Lots, Side};
use tickfan::order::journal::start_unbounded;
use tickfan::order::msg::record::{Record, TerminalState};

/// Records appended before waiting for them to be durable (one group).
const GROUP: u64 = 1_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: journal_gen DIR N QUEUED";
    let dir = PathBuf::from(args.next().expect(usage));
    let n: u64 = args.next().expect(usage).parse().expect("N: a number");
    let queued: u64 = args.next().expect(usage).parse().expect("QUEUED: a number");
    assert!(queued <= n, "QUEUED must be at most N");
    std::fs::create_dir_all(&dir).expect("create DIR");
    let (j, thread) = start_unbounded(&dir).expect("journal starts");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos() as u64;
    let mut last = 0;
    for i in 0..n {
        let id = format!("g-{i:09}");
        let qty = Lots(100);
        let append = |r: &Record| j.append(r).expect("journal has room");
        last = append(&Record::Accepted {
            seq: i + 1,
            id: id.clone(),
            symbol: "EURUSD".into(),
            side: Side::Buy,
            qty,
            lane: Lane::Small,
            deadline_wall_ns: None,
            recv_wall_ns: now,
            raw: format!("NEW {id} EURUSD BUY 1"),
        });
        if i < n - queued {
            append(&Record::AttemptSent {
                id: id.clone(),
                bridge: "sim1".into(),
                fence_token: i + 1,
            });
            append(&Record::FillApplied {
                id: id.clone(),
                fill_no: 1,
                cum: qty,
                amount: Amount(108_000),
            });
            last = append(&Record::Terminal {
                id,
                state: TerminalState::Done,
                reason: "FILLED".into(),
                cum: qty,
                amount: Amount(108_000),
                attempts: 1,
            });
        }
        if (i + 1) % GROUP == 0 {
            assert!(j.wait_durable(last), "journal write failed");
        }
    }
    assert!(j.wait_durable(last), "journal write failed");
    j.stop();
    thread.join().expect("journal thread");
    println!(
        "journal_gen: {n} orders ({queued} left queued) in {}",
        dir.display()
    );
}
