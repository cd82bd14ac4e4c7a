//! The journal at engine start: recover the segments in `--data-dir`,
//! rebuild what the order path needs from them, and start the journal
//! thread.
//!
//! From the records, in journal order: an `Accepted` order with no later
//! `Terminal` is re-queued (in admission order, with a fresh admission
//! number, no connection to answer, its deadline carried over on the wall
//! clock); every id accepted within `--dedup-retention` is remembered by
//! the dedup store with its original age, so a `NEW` with an id accepted
//! before the crash is still a `DUPLICATE`, and with its `STATUS` (the
//! terminal state its `Terminal` record names, or `QUEUED` with its
//! quantity when it is re-queued); a re-queued order carries its last
//! journaled fill (number, cum, amount) so its fill numbers continue
//! without a repeat.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use indexmap::IndexMap;

use crate::net::ConnId;
use crate::order::config::OrderConfig;
use crate::order::msg::order::{Order, Resumed};
use crate::order::msg::restore::Restore;
use crate::retry::SharedClock;
use crate::sys::clock::{wall_ns, MonoClock};
use crate::sys::watch::Watch;

use super::files::{DirFiles, JournalFiles, WrapFiles};
use super::recover::{recover, RecoverError, Recovered};
use super::writer::{Journal, JournalEnv, JournalLimits, JournalTiming, Notify};
use crate::dlq::{AttemptRecord, DeadLetter};
use crate::order::msg::record::{Record, TerminalState};

/// Largest segment; smaller when `--journal-max-bytes` is small, so old
/// segments can be retired one by one.
pub(crate) const SEGMENT_BYTES: u64 = 64 << 20;

/// The connection id of recovered orders: no live connection ever has it
/// (a generation and a slab key of all ones).
pub(crate) fn no_conn() -> ConnId {
    ConnId::from_u64(u64::MAX)
}

/// The journal, started, and what was recovered from it.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The handle.
    pub journal: Journal,
    /// The journal thread.
    pub thread: JoinHandle<()>,
    /// Orders accepted and not terminal, in admission order (seq 1..).
    pub orders: Vec<Order>,
    /// New attempts take fencing tokens above this one
    /// ([`tokens_after`]).
    pub last_fence_token: u64,
}

/// Bits of a fencing token below its epoch.
const TOKEN_EPOCH_SHIFT: u32 = 40;

/// The token this run's tokens start after: the highest journaled, raised
/// to this run's epoch, the number of its first segment (`next_segment`)
/// in the high bits. A first attempt's `AttemptSent` is not synced before
/// its call, so a crash can lose the highest token used; but every earlier
/// run's tokens carry a smaller epoch (its first segment is at most the
/// newest segment on disk, which is never retired, and `next_segment` is
/// above it), so a token is never used twice, across restarts too.
/// 2^40 attempts per run before a token would reach the next epoch.
fn tokens_after(next_segment: u64, last_journaled: u64) -> u64 {
    last_journaled.max(next_segment << TOKEN_EPOCH_SHIFT)
}

/// The parent id and index of a chunk id (`<parent id>.c<index>`).
fn chunk_of(id: &str) -> Option<(&str, u32)> {
    let (parent, i) = id.rsplit_once(".c")?;
    Some((parent, i.parse().ok()?))
}

/// What an outcome the restart left unknown reads as (`DEAD … last=`, the
/// dead letter's history).
const RESTART_OUTCOME: &str = "unknown:restart";

/// One history entry per attempt journaled before the restart, so the
/// retry budget and `attempts=` go on counting from there. Only the last
/// attempt's bridge is kept by recovery; the others read `?`.
fn restored_history(resumed: &Resumed) -> Vec<AttemptRecord> {
    (1..=resumed.attempts)
        .map(|n| AttemptRecord {
            n,
            bridge: match &resumed.bridge {
                Some(b) if n == resumed.attempts => b.to_string(),
                _ => "?".into(),
            },
            outcome: RESTART_OUTCOME.into(),
            at_ns: 0,
            wall_ns: 0,
            delay_ns: 0,
            ceiling_ns: 0,
        })
        .collect()
}

/// What the journal thread is started with besides the config.
#[derive(Debug, Default)]
pub(crate) struct JournalStart {
    /// The engine's watch over the thread (`None`: unit tests).
    pub watch: Option<Arc<Watch>>,
    /// Put around the data directory's files (`None`: used as they are).
    pub wrap_files: Option<WrapFiles>,
    /// The engine clock, for the disk-full probe (`None`: the monotonic clock).
    pub clock: Option<SharedClock>,
    /// Where each commit's duration goes (`None`: not measured).
    pub timing: Option<JournalTiming>,
}

/// Recovers `c.data_dir`, tells `ids` (the gateway's side) every id it
/// keeps, and starts the journal thread.
///
/// `dead_lettered` answers the DLQ's replayable record of an order id. A
/// dead letter is synced before its order's `DEAD` is journaled, so an
/// order the journal holds open while the DLQ holds it dead died in the
/// crash between the two: it is ended `DEAD` here (and the `Terminal`
/// record the crash lost is appended), never re-queued.
///
/// # Errors
/// The journal cannot be read (see [`RecoverError`]) or the first new
/// segment cannot be created.
pub(crate) fn open(
    c: &OrderConfig,
    ids: &mut dyn Restore,
    now_ns: u64,
    mono_ns: u64,
    notify: Notify,
    dead_lettered: &dyn Fn(&str) -> Option<DeadLetter>,
    start: JournalStart,
) -> Result<Opened, RecoverError> {
    let (seen, last_fence_token, r) = read_orders(&c.data_dir)?;
    let (orders, ended_by_dlq) = restore_orders(c, ids, seen, now_ns, mono_ns, dead_lettered);
    if !orders.is_empty() || r.records > 0 {
        log::info!(
            "journal {}: {} records in {} segments, {} orders re-queued",
            c.data_dir.display(),
            r.records,
            r.segments.len(),
            orders.len()
        );
    }
    let next = r.next_segment();
    let (journal, thread) = start_thread(c, next, r.segments, notify, start)?;
    append_dlq_ends(&journal, &ended_by_dlq);
    Ok(Opened {
        journal,
        thread,
        orders,
        last_fence_token: tokens_after(next, last_fence_token),
    })
}

/// Every order the journal holds: id → (its Accepted record, its Terminal
/// record if any, what its client was sent), in acceptance order.
type Seen = IndexMap<String, (Record, Option<Record>, Resumed)>;

/// Reads the journal in `dir`: the orders it holds, the highest fencing
/// token it recorded, and what recovery found on disk.
///
/// # Errors
/// The journal cannot be read (see [`RecoverError`]).
fn read_orders(dir: &Path) -> Result<(Seen, u64, Recovered), RecoverError> {
    let mut seen: Seen = IndexMap::new();
    let mut last_fence_token = 0;
    let r = recover(dir, |rec| match rec {
        Record::Accepted { ref id, .. } => {
            seen.shift_remove(id);
            seen.insert(id.clone(), (rec, None, Resumed::default()));
        }
        Record::Terminal { ref id, .. } => {
            if let Some(e) = seen.get_mut(id) {
                e.1 = Some(rec);
            }
        }
        Record::FillApplied {
            id,
            fill_no,
            cum,
            amount,
        } => {
            if let Some(e) = seen.get_mut(&id) {
                if fill_no > e.2.fills {
                    e.2.fills = fill_no;
                    e.2.cum = cum;
                    e.2.amount = amount;
                }
            }
        }
        Record::AttemptSent {
            id,
            bridge,
            fence_token,
        } => {
            last_fence_token = last_fence_token.max(fence_token);
            if let Some(e) = seen.get_mut(&id) {
                e.2.bridge = Some(bridge.into());
                e.2.attempts += 1;
            } else if let Some((parent, i)) = chunk_of(&id) {
                // A chunk of a large order (`<parent id>.c<index>`).
                if let Some(e) = seen.get_mut(parent) {
                    let cb = &mut e.2.chunk_bridges;
                    cb.retain(|c| c.0 != i);
                    cb.push((i, bridge.into()));
                }
            }
        }
        Record::Replay { .. } => {}
    })?;
    Ok((seen, last_fence_token, r))
}

/// Tells `ids` every id still within the dedup retention, ends `DEAD` the
/// orders the DLQ already holds dead, and returns the orders to re-queue
/// (numbered anew, in acceptance order) and the `Terminal` records of
/// those ended by the DLQ (to be journaled).
fn restore_orders(
    c: &OrderConfig,
    ids: &mut dyn Restore,
    seen: Seen,
    now_ns: u64,
    mono_ns: u64,
    dead_lettered: &dyn Fn(&str) -> Option<DeadLetter>,
) -> (Vec<Order>, Vec<Record>) {
    let wall = wall_ns();
    let retention = c.dedup_retention.as_nanos() as u64;
    let mut orders = Vec::new();
    let mut ended_by_dlq = Vec::new();
    for (id, (rec, mut end, mut resumed)) in seen {
        let Record::Accepted {
            seq,
            symbol,
            side,
            qty,
            deadline_wall_ns,
            recv_wall_ns,
            raw,
            ..
        } = rec
        else {
            continue;
        };
        if end.is_none() {
            if let Some(dead) = dead_lettered(&id) {
                let rec = Record::Terminal {
                    id: id.clone(),
                    state: TerminalState::Dead,
                    reason: dead.reason,
                    cum: resumed.cum,
                    amount: resumed.amount,
                    attempts: dead.attempts,
                };
                ended_by_dlq.push(rec.clone());
                end = Some(rec);
            }
        }
        let age = wall.saturating_sub(recv_wall_ns);
        if age < retention {
            ids.restore_id(&id, now_ns, age, qty, end.as_ref(), &resumed);
        }
        if end.is_some() {
            continue;
        }
        resumed.route = Some(seq);
        orders.push(Order {
            seq: orders.len() as u64 + 1,
            conn: no_conn(),
            id: Arc::from(id.as_str()),
            symbol: symbol.into(),
            side,
            qty,
            // The account survives in the raw `NEW` line.
            acct_key: ids.acct_key(&raw),
            raw: raw.into(),
            peer: Arc::from("recovered"),
            recv_mono_ns: mono_ns,
            enq_mono_ns: mono_ns,
            deadline_ns: deadline_wall_ns.map(|d| now_ns.saturating_add(d.saturating_sub(wall))),
            recv_wall_ns,
            history: restored_history(&resumed),
            next_delay: (0, 0),
            retry_due_ns: 0,
            replay: false,
            lane: c.lanes.lane_of(qty),
            chunk: None,
            resumed,
            claim: Default::default(),
        });
    }
    (orders, ended_by_dlq)
}

/// Starts the journal thread on a new segment `next`, after the segments
/// recovery left on disk.
///
/// # Errors
/// The first new segment cannot be created.
fn start_thread(
    c: &OrderConfig,
    next: u64,
    segments: Vec<(u64, u64)>,
    notify: Notify,
    start: JournalStart,
) -> Result<(Journal, JoinHandle<()>), RecoverError> {
    let limits = JournalLimits {
        max_bytes: c.journal_max_bytes,
        segment_bytes: SEGMENT_BYTES.min(c.journal_max_bytes / 8).max(4096),
        retain_ns: c.dedup_retention.as_nanos() as u64,
    };
    let files: Box<dyn JournalFiles> = Box::new(DirFiles {
        dir: c.data_dir.clone(),
        reserve: limits.segment_bytes,
    });
    let files = match start.wrap_files {
        Some(WrapFiles(wrap)) => wrap(files),
        None => files,
    };
    let env = JournalEnv {
        notify,
        watch: start.watch,
        clock: start.clock.unwrap_or_else(|| Arc::new(MonoClock::new())),
        timing: start.timing,
    };
    Journal::start_in(files, limits, next, segments, env).map_err(|source| RecoverError::Io {
        path: c.data_dir.join(super::segment::file_name(next)),
        source,
    })
}

/// Journals the `Terminal` records of the orders the DLQ ended at start.
fn append_dlq_ends(journal: &Journal, ended_by_dlq: &[Record]) {
    if !ended_by_dlq.is_empty() {
        log::warn!(
            "journal: {} order(s) dead-lettered just before the crash ended DEAD",
            ended_by_dlq.len()
        );
    }
    for rec in ended_by_dlq {
        // Synced with the next commit; lost again, the next start repeats
        // this from the same two files.
        if let Err(e) = journal.append(rec) {
            log::warn!("journal: cannot record a recovered DEAD: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::model::lane::Lane;
    use crate::model::units::{Lots, Side};
    use crate::order::msg::record::tests::dead_k1;

    const SEC: u64 = 1_000_000_000;

    fn config(dir: &Path) -> OrderConfig {
        OrderConfig {
            data_dir: dir.to_path_buf(),
            journal_max_bytes: 1 << 20,
            ..OrderConfig::default()
        }
    }

    /// What recovery told the gateway's side of `k1`: its `Terminal`
    /// record (`None`: re-queued) and what its client was sent. (How the
    /// gateway turns that into a `STATUS` is `gateway/restore.rs`'.)
    #[derive(Debug, Default)]
    struct Restored {
        k1: Option<(Option<Record>, Resumed)>,
    }

    impl Restore for Restored {
        fn restore_id(
            &mut self,
            id: &str,
            _: u64,
            _: u64,
            _: Lots,
            end: Option<&Record>,
            resumed: &Resumed,
        ) {
            if id == "k1" {
                self.k1 = Some((end.cloned(), resumed.clone()));
            }
        }

        fn acct_key(&self, _: &str) -> Option<Arc<str>> {
            None
        }
    }

    /// Opens `dir` as the engine does at start and stops the journal again,
    /// with `dead` as the DLQ's answer; the orders re-queued and what was
    /// restored of `k1`.
    fn restart(
        dir: &Path,
        dead: &dyn Fn(&str) -> Option<DeadLetter>,
        append: Option<Record>,
    ) -> (Vec<Order>, Option<(Option<Record>, Resumed)>) {
        let c = config(dir);
        let mut ids = Restored::default();
        let opened = open(
            &c,
            &mut ids,
            100 * SEC,
            0,
            Box::new(|| {}),
            dead,
            JournalStart::default(),
        )
        .unwrap();
        if let Some(rec) = append {
            let lsn = opened.journal.append(&rec).unwrap();
            assert!(opened.journal.wait_durable(lsn));
        }
        opened.journal.stop();
        opened.thread.join().unwrap();
        (opened.orders, ids.k1)
    }

    /// `NEW k1 EURUSD BUY 1`, accepted now.
    fn accepted_k1() -> Record {
        accepted("k1", 1)
    }

    /// `NEW <id> EURUSD BUY 1`, accepted now with admission number `seq`.
    fn accepted(id: &str, seq: u64) -> Record {
        Record::Accepted {
            seq,
            id: id.into(),
            symbol: "EURUSD".into(),
            side: Side::Buy,
            qty: Lots(100),
            lane: Lane::Small,
            deadline_wall_ns: None,
            recv_wall_ns: wall_ns(),
            raw: "NEW k1 EURUSD BUY 1".into(),
        }
    }

    fn dead_letter(reason: &str, attempts: u32) -> DeadLetter {
        let mut d = DeadLetter::refused("order", "p", reason, b"NEW k1 EURUSD BUY 1", 19, 1);
        d.order_id = Some("k1".into());
        d.attempts = attempts;
        d
    }

    #[test]
    fn an_open_order_the_dlq_holds_dead_ends_dead_at_start_and_stays_ended() {
        let dir = tempfile::tempdir().unwrap();
        let accepted = accepted_k1();
        let none = |_: &str| None;
        let (orders, st) = restart(dir.path(), &none, Some(accepted));
        assert!(orders.is_empty(), "nothing was journaled before");
        assert_eq!(st, None);
        // Open in the journal, not in the DLQ: re-queued.
        let (orders, st) = restart(dir.path(), &none, None);
        assert_eq!(orders.len(), 1);
        assert_eq!(st.map(|s| s.0), Some(None), "restored open (QUEUED)");
        // Open in the journal, dead in the DLQ (the crash came between the
        // dead letter's sync and the journal's `DEAD`): ended, not re-queued.
        let dlq = |id: &str| (id == "k1").then(|| dead_letter("retries_exhausted", 4));
        let (orders, st) = restart(dir.path(), &dlq, None);
        assert!(orders.is_empty());
        assert_eq!(st.map(|s| s.0), Some(Some(dead_k1(4))));
        // The `DEAD` it was given is in the journal now: without the DLQ's
        // answer the next start finds it ended too.
        let (orders, st) = restart(dir.path(), &none, None);
        assert!(orders.is_empty());
        assert_eq!(st.map(|s| s.0), Some(Some(dead_k1(4))));
    }

    #[test]
    fn attempts_journaled_before_a_restart_go_on_counting_and_the_resend_goes_to_the_last_bridge() {
        let dir = tempfile::tempdir().unwrap();
        let none = |_: &str| None;
        let accepted = accepted_k1();
        restart(dir.path(), &none, Some(accepted));
        for (bridge, token) in [("v1", 7), ("v2", 9)] {
            let sent = Record::AttemptSent {
                id: "k1".into(),
                bridge: bridge.into(),
                fence_token: token,
            };
            restart(dir.path(), &none, Some(sent));
        }
        let (orders, st) = restart(dir.path(), &none, None);
        let o = &orders[0];
        assert_eq!(o.attempts(), 2);
        assert_eq!(o.history[1].bridge, "v2");
        assert_eq!(o.history[1].outcome, RESTART_OUTCOME);
        assert_eq!(o.resend_to(), Some("v2"));
        let (end, resumed) = st.unwrap();
        assert_eq!(
            (end, resumed.attempts),
            (None, 2),
            "QUEUED after 2 attempts"
        );
    }

    #[test]
    fn a_recovered_order_routes_from_its_admission_number_before_the_restart() {
        let dir = tempfile::tempdir().unwrap();
        let none = |_: &str| None;
        restart(dir.path(), &none, Some(accepted("k5", 5)));
        restart(dir.path(), &none, Some(accepted("k9", 9)));
        let (orders, _) = restart(dir.path(), &none, None);
        let routes: Vec<_> = orders.iter().map(|o| (o.seq, o.route_seq())).collect();
        assert_eq!(routes, [(1, 5), (2, 9)]);
        assert!(orders.iter().all(|o| o.resend_to().is_none()));
    }

    #[test]
    fn fencing_tokens_of_a_run_are_above_every_earlier_runs_journaled_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let open_at = |dir: &Path| {
            let mut ids = Restored::default();
            let none = |_: &str| None;
            let opened = open(
                &config(dir),
                &mut ids,
                100 * SEC,
                0,
                Box::new(|| {}),
                &none,
                JournalStart::default(),
            )
            .unwrap();
            opened.journal.stop();
            opened.thread.join().unwrap();
            opened.last_fence_token
        };
        let first = open_at(dir.path());
        assert_eq!(first, 1 << TOKEN_EPOCH_SHIFT, "run 1 writes segment 1");
        // Run 2 journals a token far into its epoch; a third run, whose
        // highest token was never journaled, still starts above it.
        let second = open_at(dir.path());
        assert_eq!(second, 2 << TOKEN_EPOCH_SHIFT);
        let used = second + (1 << 39);
        restart(
            dir.path(),
            &|_: &str| None,
            Some(Record::AttemptSent {
                id: "k1".into(),
                bridge: "v1".into(),
                fence_token: used,
            }),
        );
        let fourth = open_at(dir.path());
        assert!(fourth > used, "{fourth} after {used}");
        assert_eq!(
            tokens_after(3, 5 << TOKEN_EPOCH_SHIFT),
            5 << TOKEN_EPOCH_SHIFT
        );
    }
}
