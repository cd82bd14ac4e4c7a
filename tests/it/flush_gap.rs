//! `--sub-flush-gap`: updates that come within the gap of the publisher's
//! last flush go out together in the next one. The bound is by
//! construction (two flushes start at least the gap apart: the loop sleeps
//! the rest of the gap after a short flush, and a long one took the gap
//! itself; a flush carries at most two values of a symbol: the one taken
//! before the wait and the one taken after it), so it holds however slow
//! the machine: a symbol's messages over a span are at most
//! 2 × (span / gap + 1), where flushing at every turn sends close to one
//! per tick. The last value always arrives, and values never go backwards.

use std::time::{Duration, Instant};

use tickfan::sys::affinity::FeedThread;

use crate::util::{engine_with, tick, Feed, Sub};

#[test]
fn updates_within_the_gap_go_out_together_and_the_last_value_always_arrives() {
    const GAP: Duration = Duration::from_millis(40);
    const TICKS: u64 = 400;
    // The feed in the publisher's thread: no other thread writes the slot
    // while a turn takes it (a feed thread of its own can re-queue the
    // symbol during a take, a third value in a flush).
    let e = engine_with(|c| {
        c.sub_flush_gap = GAP;
        c.feed_thread = FeedThread::Shared;
    });
    let mut sub = Sub::connect(e.subscriber_addr());
    sub.subscribe(&["FG"]);
    let mut feed = Feed::connect(e.feed_addr());

    // One tick per write, every 0.5 ms (an open-loop sender's pacing, not
    // a synchronisation): each read of the feed holds one tick, so
    // flushing at every turn would send about one message per tick.
    let start = Instant::now();
    for i in 1..=TICKS {
        feed.lines(&[&tick(i, "FG", &format!("1.{i:05}"), "9.99999")]);
        std::thread::sleep(Duration::from_micros(500));
    }
    let (mut messages, mut last) = (0u64, 0u64);
    while last < TICKS {
        let m = sub.message();
        assert_eq!(m.channel, "FG");
        assert!(
            m.seq() > last,
            "a value went backwards: {} after {last}",
            m.seq()
        );
        last = m.seq();
        messages += 1;
    }
    let span = start.elapsed();
    assert_eq!(last, TICKS, "the last value arrived");
    let bound = 2 * (span.as_nanos() / GAP.as_nanos() + 1) as u64;
    assert!(
        messages <= bound,
        "{messages} messages for {TICKS} ticks in {span:?}: more than two per {GAP:?} gap ({bound})"
    );
}

#[test]
fn an_update_right_after_a_flush_is_not_held_for_a_later_one() {
    // Each tick is sent once the last one arrived, so it comes right after
    // a flush: with the gap on, it waits out the gap and goes (no later
    // update or event is needed to send it); with the gap off, at once.
    for gap in [Duration::ZERO, Duration::from_millis(5)] {
        let e = engine_with(|c| c.sub_flush_gap = gap);
        let mut sub = Sub::connect(e.subscriber_addr());
        sub.subscribe(&["LONE"]);
        let mut feed = Feed::connect(e.feed_addr());
        for i in 1..=20u64 {
            feed.lines(&[&tick(i, "LONE", &format!("1.{i:05}"), "9.99999")]);
            let m = sub.message();
            assert_eq!((m.channel.as_str(), m.seq()), ("LONE", i), "gap {gap:?}");
        }
    }
}
