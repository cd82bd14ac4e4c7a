//! A subscriber that never reads: it does not delay the others, its memory
//! stays under its bound, and when it reads again it gets the latest value
//! of every symbol it missed, never an older one after a newer.

use crate::util::{engine_with, send_round, wait_until, Feed, Sub};

const HWM: usize = 4 * 1024;
const SYMBOLS: usize = 200;

#[test]
fn never_reading_subscriber_is_conflated_on_its_own() {
    // No pacing: this is about the buffer's own conflation. (The healthy
    // subscriber reads each 20 KiB round only once it is sent; with
    // pacing on, the watch would pace it for a few ms at its first rounds
    // and conflate it meanwhile: docs/src/decisions.md, "the watch".)
    let e = engine_with(|c| {
        c.sub_hwm = HWM;
        c.sub_max_lag = std::time::Duration::ZERO;
        c.report_interval = std::time::Duration::from_millis(20);
    });
    let mut stalled = Sub::connect(e.subscriber_addr());
    stalled.psubscribe(&["*"]);
    let mut healthy = Sub::connect(e.subscriber_addr());
    healthy.psubscribe(&["*"]);
    let mut feed = Feed::connect(e.feed_addr());
    let names: Vec<String> = (0..SYMBOLS).map(|i| format!("SYM{i:03}")).collect();

    // Rounds of one tick per symbol. After each round the healthy subscriber
    // must have every symbol's value of that round, whatever the stalled one does.
    let mut round = 0u64;
    let mut rounds_after_stall = 0;
    while rounds_after_stall < 20 {
        round += 1;
        assert!(round < 100_000, "the stalled subscriber never became slow");
        send_round(&mut feed, &names, round);
        let got = healthy.until_round(&names, round);
        assert!(got.values().all(|m| m.field(2) == format!("1.{round:05}")));
        let stalled_stats = e.subscribers().into_iter().find(|s| s.id == 1);
        if stalled_stats.is_some_and(|s| s.conflations > 0) {
            rounds_after_stall += 1;
        }
    }

    wait_until("stats refreshed", || {
        e.subscribers()
            .iter()
            .any(|s| s.id == 1 && s.pending_symbols > 0)
    });
    let st = e.subscribers().into_iter().find(|s| s.id == 1).unwrap();
    assert!(st.slow_episodes >= 1);
    // Bounded: the buffer never passed the mark by more than one frame.
    assert!(
        st.max_buffered_bytes as usize <= HWM,
        "buffered {} > hwm {HWM}",
        st.max_buffered_bytes
    );
    assert!(st.pending_symbols as usize <= SYMBOLS);
    let healthy_stats = e.subscribers().into_iter().find(|s| s.id == 2).unwrap();
    assert_eq!(
        healthy_stats.conflations, 0,
        "the healthy subscriber was never conflated"
    );

    // The stalled subscriber wakes up: it reaches the latest value of every
    // symbol, and per symbol its sequence numbers only go up.
    let got = stalled.until_round(&names, round);
    assert_eq!(got.len(), SYMBOLS);
}
