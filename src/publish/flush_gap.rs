//! The least time between two flushes of the publisher
//! (`--sub-flush-gap`): updates that come within it of the last flush go
//! out together in the next one, as fewer, larger writes.
//!
//! Why: a flush is one `write` per subscriber with output, and each write
//! is a wake-up and a read for that subscriber's client. Flushing at every
//! turn, the publisher's turns follow the feed's packets: at 50,000 ticks/s
//! to 10 readers of one client thread it made 8,700 turns and 84,000
//! writes a second (Redis, at the same job: 4,400 event-loop turns and
//! 48,000 writes), its core was 97 % busy, and the readers' core (which the
//! sender shares) 99 % (Redis: 90 %), so the readers' client, not the
//! engine, set the tail (perf/RESULTS.md, session 16).
//!
//! On by default since a quiet hour's runs of every class (150 µs,
//! session 18); 300 µs since session 20. A wider gap leaves the readers'
//! core less busy (at 50k ticks/s: 60 % at 300 µs, 51–53 % at 600 µs,
//! 93–94 % under Redis), but every update waits up to the gap: in a
//! loaded hour 300 and 600 µs gave the same tail (session 19), in a quiet
//! one 600 µs put the 10 readers' p99 over Redis's and 300 µs under it
//! (session 20, docs/src/decisions.md).
//! The cost is bounded by the gap: an update that comes right after a
//! flush waits at most the gap for the next one; updates further apart
//! than the gap are written at once, as without it. A flush that itself
//! took the gap or longer (hundreds of subscribers) has spaced each
//! subscriber's writes enough: the next flush does not wait. The loop
//! waits by yielding its core until the time (a turn's poller timeout has
//! millisecond resolution, and a sleeping thread on a loaded host woke
//! late: L1 p99 8.44 ms against 3.99 without the gap, where yielding gave
//! 2.50 against 4.02), then takes what came meanwhile before it flushes.
//!
//! ```text
//!  flushes:  |<- gap ->|<- gap ->|         |
//!  updates:  ^  ^ ^    ^ ^       ^         ^ (apart: at once)
//! ```
//!
//! Pure: times are passed in. Single owner: the publisher thread.

/// When the publisher last flushed, and the least time to the next flush.
#[derive(Debug, Clone)]
pub struct FlushGap {
    gap_ns: u64,
    /// When the last flush that wrote something ended, and whether it took
    /// less than the gap.
    last_ns: Option<u64>,
    last_short: bool,
}

impl FlushGap {
    /// Flushes at least `gap_ns` apart (0: at every turn, no wait).
    pub const fn new(gap_ns: u64) -> Self {
        FlushGap {
            gap_ns,
            last_ns: None,
            last_short: false,
        }
    }

    /// How long a flush with output due at `now_ns` waits (0: flush now):
    /// the rest of the gap since the last flush ended, if that flush took
    /// less than the gap. Never more than the gap.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        match self.last_ns {
            Some(last) if self.gap_ns > 0 && self.last_short => {
                (last.saturating_add(self.gap_ns)).saturating_sub(now_ns.max(last))
            }
            _ => 0,
        }
    }

    /// A flush that wrote something ran from `start_ns` to `end_ns`. One
    /// that took the gap or longer (hundreds of subscribers) already spaced
    /// each subscriber's writes by more than the gap: the next one does not
    /// wait (waiting would only take time from a busy publisher: at 500
    /// readers × 2k ticks/s, p99 79.8 ms against 67.9 without the gap).
    pub fn flushed(&mut self, start_ns: u64, end_ns: u64) {
        self.last_ns = Some(end_ns);
        self.last_short = end_ns.saturating_sub(start_ns) < self.gap_ns;
    }

    /// The gap, ns.
    pub fn gap_ns(&self) -> u64 {
        self.gap_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn output_right_after_a_flush_waits_the_rest_of_the_gap_and_never_more() {
        let mut g = FlushGap::new(150 * US);
        assert_eq!(g.wait_ns(1_000 * US), 0, "the first flush goes at once");
        g.flushed(940 * US, 1_000 * US);
        assert_eq!(g.wait_ns(1_000 * US), 150 * US);
        assert_eq!(g.wait_ns(1_040 * US), 110 * US);
        assert_eq!(g.wait_ns(1_149 * US), US);
        // A clock read before the flush's own (another thread's) never
        // makes the wait longer than the gap.
        assert_eq!(g.wait_ns(990 * US), 150 * US);
    }

    #[test]
    fn output_a_gap_or_more_after_the_last_flush_goes_at_once() {
        let mut g = FlushGap::new(150 * US);
        g.flushed(990 * US, 1_000 * US);
        assert_eq!(g.wait_ns(1_150 * US), 0);
        assert_eq!(g.wait_ns(9_000 * US), 0);
        g.flushed(8_990 * US, 9_000 * US);
        assert_eq!(
            g.wait_ns(9_100 * US),
            50 * US,
            "measured from the last flush"
        );
    }

    #[test]
    fn after_a_flush_that_took_the_gap_or_longer_the_next_goes_at_once() {
        let mut g = FlushGap::new(150 * US);
        // 500 subscribers' writes: 1.2 ms.
        g.flushed(1_000 * US, 2_200 * US);
        assert_eq!(g.wait_ns(2_210 * US), 0);
        g.flushed(2_210 * US, 2_360 * US);
        assert_eq!(g.wait_ns(2_370 * US), 0, "exactly the gap: long enough");
        // A short one again: the gap counts.
        g.flushed(2_370 * US, 2_400 * US);
        assert_eq!(g.wait_ns(2_410 * US), 140 * US);
    }

    #[test]
    fn a_zero_gap_never_waits() {
        let mut g = FlushGap::new(0);
        g.flushed(1_000 * US, 1_000 * US);
        assert_eq!(g.wait_ns(1_000 * US), 0);
        assert_eq!(g.gap_ns(), 0);
    }
}
