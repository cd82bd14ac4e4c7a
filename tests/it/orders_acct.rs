//! Per-account ordering (`NEW … acct=<account>`): orders of one (account,
//! symbol) reach the venue in admission order and never two at once, across
//! retries and a restart; other keys and orders without `acct=` pass a
//! blocked key; a parked follower is `QUEUED` and cancellable; a malformed
//! account is `INVALID`; a full key table answers `SYSTEM_BUSY
//! acct_keys_full`. The venue records each call's start and end and holds
//! `GATE` orders until the test opens its gate (no timing).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

use tickfan::bridge::{Bridge, BridgeOrder, Outcome, VenueFill};
use tickfan::client::orders::{OrderState, Reply};
use tickfan::model::order_reasons::{DoneStatus, RejectReason};
use tickfan::model::units::{Amount, Price};
use tickfan::order::journal::recover::recover;
use tickfan::order::msg::record::Record;
use tickfan::retry::SimClock;

use crate::orders_journal::serve_bridges;
use crate::util::{advance_until, bridges_engine, wait_until, OrderClient};

/// A venue that logs `(id, attempt, start?)` around each call; `GATE`
/// blocks until the gate opens; `T1` fails its first attempt transiently.
#[derive(Debug, Default)]
struct LogVenue {
    log: Mutex<Vec<(String, u32, bool)>>,
    open: Mutex<bool>,
    cv: Condvar,
}

impl LogVenue {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }

    fn log(&self) -> Vec<(String, u32, bool)> {
        self.log.lock().unwrap().clone()
    }

    fn started(&self, id: &str) -> bool {
        self.log().iter().any(|(i, _, s)| i == id && *s)
    }

    /// Asserts that the calls of `ids` (one key) ran one at a time, in this order.
    fn assert_one_at_a_time_in_order(&self, ids: &[&str]) {
        let seq: Vec<(String, bool)> = self
            .log()
            .into_iter()
            .filter(|(i, _, _)| ids.contains(&i.as_str()))
            .map(|(i, _, s)| (i, s))
            .collect();
        let mut at = 0;
        for pair in seq.chunks(2) {
            assert!(
                pair.len() == 2 && pair[0].1 && !pair[1].1 && pair[0].0 == pair[1].0,
                "two calls of one key overlap: {seq:?}"
            );
            while ids[at] != pair[0].0 {
                at += 1;
                assert!(at < ids.len(), "out of admission order: {seq:?}");
            }
        }
        assert_eq!(ids[at], *ids.last().unwrap(), "every order ran: {seq:?}");
    }
}

/// Opens the venue's gate when dropped (a failing test leaves no worker blocked).
struct Opener(Arc<LogVenue>);

impl Drop for Opener {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Bridge for LogVenue {
    fn name(&self) -> &str {
        "log"
    }

    fn execute(&self, o: &BridgeOrder<'_>, _now_ns: u64) -> Outcome {
        let id = o.order_id.to_string();
        self.log.lock().unwrap().push((id.clone(), o.attempt, true));
        if o.symbol == "GATE" {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
        }
        let out = if o.symbol == "T1" && o.attempt == 1 {
            Outcome::Transient("unavailable".into())
        } else {
            let price = Price(110_000);
            Outcome::Executed(vec![VenueFill {
                fill_no: 1,
                cum_lots: o.qty,
                cum_amount: Amount::of(o.qty, price),
                price,
            }])
        };
        self.log.lock().unwrap().push((id, o.attempt, false));
        out
    }
}

fn engine(clock: &SimClock, venue: &Arc<LogVenue>, keys: usize) -> tickfan::runtime::Engine {
    bridges_engine(clock, vec![Arc::clone(venue) as Arc<dyn Bridge>], |c| {
        c.order.workers = 4;
        c.order.acct_keys = keys;
    })
}

fn state(cl: &mut OrderClient, id: &str) -> OrderState {
    cl.line(&format!("STATUS {id}"));
    loop {
        if let Reply::Status { id: got, state, .. } = cl.reply() {
            if got == id {
                return state;
            }
        }
    }
}

/// Reads replies until each of `ids` has its terminal one; those, by id.
fn until_all(cl: &mut OrderClient, ids: &[&str]) -> HashMap<String, Reply> {
    let mut ends = HashMap::new();
    while ids.iter().any(|id| !ends.contains_key(*id)) {
        let r = cl.reply();
        if r.is_terminal() {
            ends.insert(r.id().unwrap_or("-").to_string(), r);
        }
    }
    ends
}

fn ack(cl: &mut OrderClient, line: &str) {
    cl.line(line);
    let id = line.split_whitespace().nth(1).unwrap();
    assert_eq!(cl.reply(), Reply::Ack { id: id.into() }, "{line}");
}

#[test]
fn one_keys_orders_reach_the_venue_in_order_one_at_a_time_and_other_keys_pass() {
    let clock = SimClock::new();
    let venue = Arc::new(LogVenue::default());
    let _open = Opener(Arc::clone(&venue));
    let e = engine(&clock, &venue, 16);
    let mut cl = OrderClient::connect(e.order_addr());
    for id in ["a1", "a2", "a3"] {
        ack(&mut cl, &format!("NEW {id} GATE BUY 1 acct=acc-A"));
    }
    wait_until("a1 at the venue", || venue.started("a1"));
    assert_eq!(state(&mut cl, "a2"), OrderState::Queued, "parked: QUEUED");
    // Another account on the symbol, and an order without acct=, pass the
    // blocked key on the other workers.
    ack(&mut cl, "NEW b1 GATE BUY 1 acct=acc-B");
    wait_until("b1 at the venue beside a1", || venue.started("b1"));
    ack(&mut cl, "NEW n1 EURUSD BUY 1");
    assert!(matches!(
        cl.until_terminal("n1").last(),
        Some(Reply::Done { .. })
    ));
    assert!(!venue.started("a2") && !venue.started("a3"), "held back");
    venue.open();
    for (id, end) in until_all(&mut cl, &["a1", "b1", "a2", "a3"]) {
        assert!(matches!(end, Reply::Done { .. }), "{id}: {end:?}");
    }
    venue.assert_one_at_a_time_in_order(&["a1", "a2", "a3"]);
}

#[test]
fn a_retry_of_the_head_keeps_its_followers_waiting_until_it_ends() {
    let clock = SimClock::new();
    let venue = Arc::new(LogVenue::default());
    let _open = Opener(Arc::clone(&venue));
    let e = engine(&clock, &venue, 16);
    let mut cl = OrderClient::connect(e.order_addr());
    for id in ["r1", "r2"] {
        ack(&mut cl, &format!("NEW {id} T1 SELL 1 acct=R"));
    }
    wait_until("r1 waits for its retry", || {
        state(&mut cl, "r1") == OrderState::RetryWait
    });
    assert_eq!(state(&mut cl, "r2"), OrderState::Queued);
    assert!(!venue.started("r2"), "r2 waits behind r1's retry");
    advance_until(&clock, 50, "r1 retried and done", || {
        matches!(state(&mut cl, "r1"), OrderState::Done(_))
    });
    advance_until(&clock, 50, "r2 retried and done", || {
        matches!(state(&mut cl, "r2"), OrderState::Done(_))
    });
    let log = venue.log();
    let last_r1 = log.iter().rposition(|(i, _, _)| i == "r1").unwrap();
    let first_r2 = log.iter().position(|(i, _, _)| i == "r2").unwrap();
    assert!(
        last_r1 < first_r2,
        "r1's retry ended before r2 started: {log:?}"
    );
    venue.assert_one_at_a_time_in_order(&["r1", "r2"]);
}

#[test]
fn a_parked_follower_is_cancelled_and_the_key_goes_on() {
    let clock = SimClock::new();
    let venue = Arc::new(LogVenue::default());
    let _open = Opener(Arc::clone(&venue));
    let e = engine(&clock, &venue, 16);
    let mut cl = OrderClient::connect(e.order_addr());
    for id in ["c1", "c2", "c3"] {
        ack(&mut cl, &format!("NEW {id} GATE BUY 1 acct=C"));
    }
    wait_until("c1 at the venue", || venue.started("c1"));
    cl.line("CANCEL c2");
    assert_eq!(
        cl.raw_reply(),
        "DONE c2 CANCELED cum=0.00 amount=0.0000000 attempts=0"
    );
    venue.open();
    for (id, end) in until_all(&mut cl, &["c1", "c3"]) {
        assert!(
            matches!(
                end,
                Reply::Done {
                    status: DoneStatus::Filled,
                    ..
                }
            ),
            "{id}: {end:?}"
        );
    }
    assert!(!venue.started("c2"), "never sent");
    venue.assert_one_at_a_time_in_order(&["c1", "c3"]);
}

#[test]
fn a_bad_account_is_invalid_and_a_full_key_table_is_system_busy() {
    let clock = SimClock::new();
    let venue = Arc::new(LogVenue::default());
    let _open = Opener(Arc::clone(&venue));
    let e = engine(&clock, &venue, 1);
    let mut cl = OrderClient::connect(e.order_addr());
    cl.line("NEW bad X BUY 1 acct=a.b");
    let r = cl.raw_reply();
    assert!(
        r.starts_with("REJECT bad INVALID bad_acct: acct must be"),
        "{r}"
    );
    ack(&mut cl, "NEW k1 GATE BUY 1 acct=A");
    cl.line("NEW k2 EURUSD BUY 1 acct=B");
    let r = cl.raw_reply();
    assert!(
        r.starts_with("REJECT k2 SYSTEM_BUSY acct_keys_full: 1 account/symbol keys"),
        "{r}"
    );
    ack(&mut cl, "NEW k3 GATE BUY 1 acct=A"); // the key is known
    ack(&mut cl, "NEW k4 EURUSD BUY 1"); // no acct: no key
    venue.open();
    until_all(&mut cl, &["k4", "k1", "k3"]);
    ack(&mut cl, "NEW k5 EURUSD BUY 1 acct=B"); // A's key ended
    cl.until_terminal("k5");
    let o = e.counters().snapshot().orders;
    let invalid: HashMap<_, _> = o.invalid.iter().cloned().collect();
    assert_eq!(invalid["bad_acct"], 1);
    let rejected: HashMap<_, _> = o.rejected.iter().cloned().collect();
    assert_eq!(rejected[RejectReason::SystemBusy.as_str()], 1);
}

#[test]
fn a_restart_with_the_journal_keeps_each_keys_order() {
    let dir = tempfile::tempdir().unwrap();
    let ids = ["j1", "j2", "j3"];
    {
        // j1 at a venue that takes 9 s or more, j2 and j3 parked behind it.
        let slow = "name=slow,latency=uniform:9s..10s,transient=0,permanent=0";
        let (mut engine, addr) = serve_bridges(dir.path(), &[slow], 4);
        let mut cl = OrderClient::connect(addr);
        for id in ids {
            ack(&mut cl, &format!("NEW {id} EURUSD BUY 1 acct=J"));
        }
        wait_until("j1 at the venue", || {
            state(&mut cl, "j1") == OrderState::AtBridge
        });
        assert_eq!(state(&mut cl, "j2"), OrderState::Queued);
        let mut child = engine.0.take().unwrap();
        child.kill().unwrap(); // by pid
        child.wait().unwrap();
    }
    // Four workers and a venue slow enough that parallel calls would overlap.
    let venue = "name=v,latency=uniform:20ms..30ms,transient=0,permanent=0";
    let (mut engine, addr) = serve_bridges(dir.path(), &[venue], 4);
    let mut cl = OrderClient::connect(addr);
    wait_until("the re-queued orders ended", || {
        matches!(state(&mut cl, "j3"), OrderState::Done(_))
    });
    drop(cl);
    let mut child = engine.0.take().unwrap();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    // In the journal, every record of j(i) precedes j(i+1)'s attempts after the restart.
    let mut seq: Vec<(String, bool)> = Vec::new();
    recover(dir.path(), |r| match r {
        Record::AttemptSent { id, .. } if ids.contains(&id.as_str()) => seq.push((id, true)),
        Record::Terminal { id, .. } if ids.contains(&id.as_str()) => seq.push((id, false)),
        _ => {}
    })
    .unwrap();
    let ends: Vec<&str> = seq.iter().filter(|r| !r.1).map(|r| r.0.as_str()).collect();
    assert_eq!(ends, ids, "each ended once, in admission order: {seq:?}");
    for w in ids.windows(2) {
        let last_before = seq.iter().rposition(|r| r.0 == w[0]).unwrap();
        let first_next = seq.iter().position(|r| r.0 == w[1]).unwrap();
        assert!(
            last_before < first_next,
            "{} overlapped {}: {seq:?}",
            w[0],
            w[1]
        );
    }
}
