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
//! The cost is bounded: an update that comes right after a flush waits at
//! most the gap for the next one (or, after a long flush, below, at most
//! [`LONGEST_WAIT_NS`]); updates further apart than that are written at
//! once, as without it.
//!
//! **After a long flush, twice its length** ([`FLUSH_SHARE`]): flushing
//! takes at most a third of the publisher's time. A flush of the gap or
//! longer is a load that fills the readers' client: every write is a
//! read there, and every frame a parse. At 500 readers × 2k ticks/s
//! (a flush ~1.1 ms) going straight into the next flush kept both cores
//! saturated: 450,000 writes a second to a client thread that made
//! 245,000 reads (Redis: 393,000 and 211,000), p99 0.92–1.04 × Redis's;
//! waiting twice the flush's length left the server's core 69 % busy and
//! the readers' 86 %, p99 0.82 × Redis's (perf/RESULTS.md, session 25).
//! At 100 readers × 10k ticks/s on a slower host (AMD EPYC, session 26)
//! a flush took one to two gaps, and going straight on kept the readers'
//! core 100 % busy with p99 18–27 ms (Redis 16–27); waiting twice its
//! length: 3.3–3.4 ms, the core 85 % busy. On the faster host of session
//! 25 the same wait cost that class ~1–2.5 ms of p99 (3.7–5.4 against
//! 2.8–3.0, Redis 38–43): a small price where the readers keep up, for
//! a factor of five where they do not. A short flush (tens of
//! subscribers) still waits only the gap. The loop
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

/// After a long flush, the next waits this many times its length (up to
/// [`LONGEST_WAIT_NS`]): the publisher then flushes at most 1 / (1 +
/// this) of its time.
pub const FLUSH_SHARE: u64 = 2;

/// The longest wait after a long flush (one preempted midway must not
/// hold the next for long); a gap set above it is waited in full.
pub const LONGEST_WAIT_NS: u64 = 2_000_000;

/// When the publisher last flushed, and the least time to the next flush.
#[derive(Debug, Clone)]
pub struct FlushGap {
    gap_ns: u64,
    /// When the last flush that wrote something ended, and how long after
    /// it the next one waits.
    last_ns: Option<u64>,
    next_wait_ns: u64,
}

impl FlushGap {
    /// Flushes at least `gap_ns` apart (0: at every turn, no wait).
    pub const fn new(gap_ns: u64) -> Self {
        FlushGap {
            gap_ns,
            last_ns: None,
            next_wait_ns: gap_ns,
        }
    }

    /// How long a flush with output due at `now_ns` waits (0: flush now):
    /// the rest of the wait since the last flush ended (the gap; after a
    /// flush of the gap or longer, twice its length up to
    /// [`LONGEST_WAIT_NS`], [`Self::flushed`]).
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        match self.last_ns {
            Some(last) if self.gap_ns > 0 => {
                (last.saturating_add(self.next_wait_ns)).saturating_sub(now_ns.max(last))
            }
            _ => 0,
        }
    }

    /// A flush that wrote something ran from `start_ns` to `end_ns`. After
    /// one shorter than the gap the next waits the gap; after one of the
    /// gap or longer (a hundred subscribers or more) it waits
    /// [`FLUSH_SHARE`] times its length, up to [`LONGEST_WAIT_NS`] (never
    /// less than the gap).
    pub fn flushed(&mut self, start_ns: u64, end_ns: u64) {
        self.last_ns = Some(end_ns);
        let took = end_ns.saturating_sub(start_ns);
        self.next_wait_ns = if took < self.gap_ns {
            self.gap_ns
        } else {
            let share = took.saturating_mul(FLUSH_SHARE).min(LONGEST_WAIT_NS);
            self.gap_ns.max(share)
        };
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
    fn after_a_flush_of_the_gap_or_longer_the_next_waits_twice_its_length_up_to_the_cap() {
        let mut g = FlushGap::new(300 * US);
        // Tens of subscribers' writes: 250 µs, shorter than the gap: the gap.
        g.flushed(1_000 * US, 1_250 * US);
        assert_eq!(g.wait_ns(1_250 * US), 300 * US);
        // A hundred subscribers' writes, the gap or longer: twice its length.
        g.flushed(1_600 * US, 1_900 * US);
        assert_eq!(g.wait_ns(1_900 * US), 600 * US);
        g.flushed(3_000 * US, 3_450 * US);
        assert_eq!(g.wait_ns(3_450 * US), 900 * US);
        assert_eq!(g.wait_ns(4_300 * US), 50 * US);
        assert_eq!(g.wait_ns(4_350 * US), 0);
        // Hundreds: half the cap or longer waits the cap.
        g.flushed(5_000 * US, 5_000 * US + LONGEST_WAIT_NS / 2 + 100 * US);
        assert_eq!(
            g.wait_ns(5_000 * US + LONGEST_WAIT_NS / 2 + 100 * US),
            LONGEST_WAIT_NS
        );
        // One preempted for 30 ms: still at most the cap.
        g.flushed(8_100 * US, 38_100 * US);
        assert_eq!(g.wait_ns(38_100 * US), LONGEST_WAIT_NS);
        // A short one again: the gap counts.
        g.flushed(40_000 * US, 40_030 * US);
        assert_eq!(g.wait_ns(40_040 * US), 290 * US);
        // A gap set above the cap is waited in full after a long flush.
        let mut wide = FlushGap::new(LONGEST_WAIT_NS + 1_000 * US);
        wide.flushed(0, 11_000 * US);
        assert_eq!(wide.wait_ns(11_000 * US), LONGEST_WAIT_NS + 1_000 * US);
    }

    #[test]
    fn a_zero_gap_never_waits() {
        let mut g = FlushGap::new(0);
        g.flushed(1_000 * US, 1_000 * US);
        assert_eq!(g.wait_ns(1_000 * US), 0);
        assert_eq!(g.gap_ns(), 0);
    }
}
