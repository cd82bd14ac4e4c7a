//! A reader that keeps up is never held back by the slow-reader pacing for
//! long: one that stops reading (its client thread not scheduled) is paced
//! like a slow reader, and once it reads at full speed again the engine
//! lets it go — it then receives every update, none conflated. (That it
//! happens within 100 ms of resuming is unit-tested with injected times in
//! `publish::commit_budget`; this checks the whole path over loopback with
//! the default `--sub-max-lag`.)

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickfan::client::resp::{as_message, command, read_frame};
use tickfan::config::Config;
use tickfan::metrics::report::SubscriberStats;

use crate::util::{engine_with, payload_seq, send_round, wait_until, Feed, DEADLINE};

const SYMBOLS: usize = 500;
/// How long the reader stops reading (the 200 ms stall).
const STALL: Duration = Duration::from_millis(200);

/// A reader at full speed that can be told to stop: the highest sequence
/// number it holds per symbol (`SYMnnn` → index), the messages it read and
/// the updates it never saw (a sequence number that jumps: conflated).
struct Reader {
    hold: Arc<AtomicBool>,
    held: Arc<Vec<AtomicU64>>,
    messages: Arc<AtomicU64>,
    skipped: Arc<AtomicU64>,
}

impl Reader {
    fn spawn(stream: TcpStream) -> Reader {
        let hold = Arc::new(AtomicBool::new(false));
        let held: Arc<Vec<AtomicU64>> = Arc::new((0..SYMBOLS).map(|_| AtomicU64::new(0)).collect());
        let (messages, skipped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (h, v) = (Arc::clone(&hold), Arc::clone(&held));
        let (m, k) = (Arc::clone(&messages), Arc::clone(&skipped));
        std::thread::spawn(move || {
            let mut r = BufReader::with_capacity(64 * 1024, stream);
            loop {
                // Stopped: the client's thread is not reading (it polls its
                // own flag, as a descheduled thread would resume).
                while h.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let Ok(f) = read_frame(&mut r) else { return };
                let Some((ch, payload)) = as_message(&f) else {
                    continue;
                };
                let i: usize = std::str::from_utf8(&ch[3..]).unwrap().parse().unwrap();
                let seq = payload_seq(payload);
                let prev = v[i].swap(seq, Ordering::AcqRel);
                assert!(prev < seq, "an older or repeated value on SYM{i:03}");
                k.fetch_add(seq - prev - 1, Ordering::AcqRel);
                m.fetch_add(1, Ordering::AcqRel);
            }
        });
        Reader {
            hold,
            held,
            messages,
            skipped,
        }
    }

    fn holds_round(&self, round: u64) -> bool {
        self.held.iter().all(|s| s.load(Ordering::Acquire) >= round)
    }
}

fn stats(e: &tickfan::runtime::Engine) -> SubscriberStats {
    e.subscribers()
        .into_iter()
        .next()
        .expect("the reader is listed")
}

#[test]
fn a_reader_that_stops_for_200ms_then_reads_at_full_speed_is_let_go_and_gets_every_update() {
    let e = engine_with(|c| {
        c.report_interval = Duration::from_millis(20);
        c.max_symbols = c.max_symbols.max(SYMBOLS);
    });
    assert_eq!(
        Config::ephemeral().sub_max_lag,
        Duration::from_millis(50),
        "this checks the default pacing"
    );
    let mut s = TcpStream::connect(e.subscriber_addr()).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    s.write_all(&command(&[b"PSUBSCRIBE", b"*"])).unwrap();
    let reader = Reader::spawn(s.try_clone().unwrap());
    wait_until("subscribed", || e.subscribers().len() == 1);
    let mut feed = Feed::connect(e.feed_addr());
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();

    // Keeping up: each round held before the next is sent.
    let mut round = 0;
    for _ in 0..20 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("the reader holds the round", || reader.holds_round(round));
    }

    // It stops reading while the feed goes on; the engine paces it.
    reader.hold.store(true, Ordering::Release);
    let stopped = Instant::now();
    loop {
        round += 1;
        send_round(&mut feed, &names, round);
        if stats(&e).paced && stopped.elapsed() >= STALL {
            break;
        }
        assert!(
            stopped.elapsed() < DEADLINE,
            "never paced while it did not read"
        );
    }

    // It reads at full speed again: the engine lets it go…
    reader.hold.store(false, Ordering::Release);
    let paced_at = stats(&e).bytes_written;
    let end = Instant::now() + DEADLINE;
    let mut rounds_paced = 0;
    while stats(&e).paced {
        assert!(
            Instant::now() < end,
            "still paced {rounds_paced} rounds after it read again: {:?}",
            stats(&e)
        );
        round += 1;
        rounds_paced += 1;
        send_round(&mut feed, &names, round);
        wait_until("the resumed reader holds the round", || {
            reader.holds_round(round)
        });
    }
    let freed = stats(&e);
    assert!(
        freed.bytes_written > paced_at,
        "it was let go after reading again, not before"
    );
    assert!(
        reader.skipped.load(Ordering::Acquire) > 0,
        "it was conflated while it did not read (else this checks nothing)"
    );

    // …and from then on it gets every update of every round, none
    // conflated, and stays unpaced.
    let (messages, skipped) = (
        reader.messages.load(Ordering::Acquire),
        reader.skipped.load(Ordering::Acquire),
    );
    for _ in 0..30 {
        round += 1;
        send_round(&mut feed, &names, round);
        wait_until("the freed reader holds the round", || {
            reader.holds_round(round)
        });
    }
    assert_eq!(
        reader.skipped.load(Ordering::Acquire),
        skipped,
        "updates conflated for a reader that keeps up"
    );
    assert_eq!(
        reader.messages.load(Ordering::Acquire) - messages,
        30 * SYMBOLS as u64,
        "one message per update of the last 30 rounds"
    );
    // The engine's figures as of after the last round (handed off every
    // report interval): still unpaced.
    let want = freed.frames + 30 * SYMBOLS as u64;
    wait_until("the figures of the last round", || stats(&e).frames >= want);
    let after = stats(&e);
    assert!(!after.paced, "paced again: {after:?}");
}
