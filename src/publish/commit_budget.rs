//! A subscriber's commit budget: how many bytes may be *committed* for it
//! (in its engine buffer plus the kernel's send queue), bounded by time at
//! its own measured drain rate (`--sub-max-lag`). What does not fit stays a
//! per-symbol pending mark in its [`super::outbuf::SubscriberBuffer`], sent
//! later as the latest value: conflation can only help for what has not yet
//! been committed.
//!
//! ```text
//!  budget = clamp(drain_rate × max_lag, FLOOR, hwm)
//!  engine bytes allowed = budget − kernel bytes (SIOCOUTQ at the last
//!                         sample + bytes written since: an upper bound)
//! ```
//!
//! - **Paced only once slow.** A subscriber starts unpaced (the budget is
//!   the high-water mark, as before); its first write that would block
//!   with [`UNPACED_LOWAT`] bytes still in its buffer starts pacing ([`CommitBudget::start`]), the caller then sets
//!   `TCP_NOTSENT_LOWAT`. It stops being paced once its measured rate
//!   covers the mark within the lag and nothing waits
//!   ([`CommitBudget::sample`] says so).
//! - **Drain rate** = bytes the peer acknowledged (written − SIOCOUTQ) per
//!   second, over windows of at least [`WINDOW_NS`], smoothed (EWMA; the
//!   first window's rate is taken as is, so a fast peer that blocked once
//!   gets its budget back within a window or two). A window in which the
//!   pipe ran empty measured the engine, not the peer: the estimate is
//!   raised to 1.5 × what the peer took (never compounding on itself), so
//!   a starved estimate recovers.
//! - Pure: times and kernel figures are passed in, so the estimator and the
//!   budget are tested with injected values.
//!
//! Single owner: the publisher thread.

/// Smallest budget, bytes: a few frames, so a paced subscriber always
/// makes progress. Also its socket's `TCP_NOTSENT_LOWAT` while paced.
pub const FLOOR: usize = 2048;
/// `TCP_NOTSENT_LOWAT` of every subscriber socket until it is paced (set
/// at its first write): the kernel keeps at most about this much unsent,
/// so a subscriber that stops reading blocks (and is paced) before tens of
/// KiB more are committed for it; one that reads never gets near it.
pub const UNPACED_LOWAT: usize = 4 * 1024;
/// Shortest measuring window of the drain rate.
pub const WINDOW_NS: u64 = 20_000_000;
/// Weight of a new window in the smoothed rate.
const ALPHA: f64 = 0.3;
/// Raise of the estimate after a window in which the pipe ran empty.
const PROBE: f64 = 1.5;

/// The budget of one subscriber.
#[derive(Debug, Clone)]
pub struct CommitBudget {
    /// `--sub-max-lag` in ns (0 = off: never paced).
    max_lag_ns: u64,
    hwm: usize,
    paced: bool,
    /// Smoothed drain rate, bytes/s.
    rate: f64,
    /// Current budget, bytes (engine + kernel).
    budget: usize,
    /// SIOCOUTQ at the last sample.
    kernel: usize,
    /// Bytes written to the socket at the last sample.
    written_at_sample: u64,
    /// Start of the measuring window: time and bytes drained then.
    window_ns: u64,
    window_drained: u64,
    /// Most bytes committed over the budget seen at a sample.
    max_excess: u64,
    /// The socket's low-water mark was set (at the first write).
    armed: bool,
}

impl CommitBudget {
    /// Unpaced, for lag `max_lag_ns` (0 = off) and high-water mark `hwm`.
    pub fn new(max_lag_ns: u64, hwm: usize) -> Self {
        CommitBudget {
            max_lag_ns,
            hwm,
            paced: false,
            rate: 0.0,
            budget: hwm,
            kernel: 0,
            written_at_sample: 0,
            window_ns: 0,
            window_drained: 0,
            max_excess: 0,
            armed: false,
        }
    }

    /// True once, at the first write (a lag is configured): the caller sets
    /// the socket's `TCP_NOTSENT_LOWAT` to [`UNPACED_LOWAT`].
    pub fn arm(&mut self) -> bool {
        let first = self.max_lag_ns > 0 && !self.armed;
        self.armed = true;
        first
    }

    /// Pacing is on for this subscriber.
    #[inline]
    pub fn paced(&self) -> bool {
        self.paced
    }

    /// Pacing may start (a lag is configured) and has not.
    #[inline]
    pub fn may_start(&self) -> bool {
        self.max_lag_ns > 0 && !self.paced
    }

    /// The budget now, bytes (the mark when unpaced).
    #[inline]
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Smoothed drain rate, bytes/s (0 until measured).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Kernel bytes at the last sample plus bytes written since: an upper
    /// bound of the kernel's unacknowledged bytes now.
    #[inline]
    pub fn kernel_bound(&self, written: u64) -> usize {
        self.kernel + written.saturating_sub(self.written_at_sample) as usize
    }

    /// Bytes the engine buffer may hold now, given `written` bytes so far.
    #[inline]
    pub fn engine_limit(&self, written: u64) -> usize {
        if !self.paced {
            return self.hwm;
        }
        self.budget
            .saturating_sub(self.kernel_bound(written))
            .min(self.hwm)
    }

    /// Most bytes the engine committed over the budget (engine bytes plus
    /// the kernel bound, right after an append while paced).
    pub fn max_excess(&self) -> u64 {
        self.max_excess
    }

    /// A frame was appended: `engine` bytes wait, `written` were written.
    #[inline]
    pub fn note_commit(&mut self, engine: usize, written: u64) {
        if self.paced {
            let committed = (engine + self.kernel_bound(written)) as u64;
            self.max_excess = self
                .max_excess
                .max(committed.saturating_sub(self.budget as u64));
        }
    }

    /// A write would block: start pacing at `now_ns` with `written` bytes
    /// written so far and `kernel` bytes unacknowledged. The rate is not
    /// known yet: the first budget is the floor, and windows in which the
    /// pipe runs empty raise it.
    pub fn start(&mut self, now_ns: u64, written: u64, kernel: usize) {
        self.paced = true;
        self.rate = 0.0;
        self.budget = FLOOR.min(self.hwm);
        self.kernel = kernel;
        self.written_at_sample = written;
        self.window_ns = now_ns;
        self.window_drained = written.saturating_sub(kernel as u64);
    }

    /// A sample at `now_ns`: `written` bytes written so far, `kernel` bytes
    /// unacknowledged (SIOCOUTQ), `engine` bytes in the engine buffer,
    /// `waiting` = symbols are pending. Returns `true` when pacing ended
    /// (the caller restores the socket option).
    pub fn sample(
        &mut self,
        now_ns: u64,
        written: u64,
        kernel: usize,
        engine: usize,
        waiting: bool,
    ) -> bool {
        if !self.paced {
            return false;
        }
        self.kernel = kernel;
        self.written_at_sample = written;
        let drained = written.saturating_sub(kernel as u64);
        let dt = now_ns.saturating_sub(self.window_ns);
        if dt >= WINDOW_NS {
            let inst = drained.saturating_sub(self.window_drained) as f64 * 1e9 / dt as f64;
            if kernel == 0 && engine == 0 {
                // The peer took all it was given: it may take more. Raise
                // from what it took (not from the estimate), so acks of
                // bytes that only filled its receive buffer do not compound.
                self.rate = self.rate.max(inst * PROBE).max(FLOOR as f64);
            } else if self.rate == 0.0 {
                // The first window of a backlogged pipe: the peer's rate.
                self.rate = inst;
            } else {
                self.rate = self.rate * (1.0 - ALPHA) + inst * ALPHA;
            }
            self.window_ns = now_ns;
            self.window_drained = drained;
            let want = self.rate * self.max_lag_ns as f64 / 1e9;
            self.budget = (want as usize).clamp(FLOOR.min(self.hwm), self.hwm);
            if want >= self.hwm as f64 && !waiting && engine == 0 {
                self.paced = false;
                self.budget = self.hwm;
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn unpaced_the_limit_is_the_mark() {
        let b = CommitBudget::new(50 * MS, 256 * 1024);
        assert!(!b.paced() && b.may_start());
        assert_eq!(b.engine_limit(123_456), 256 * 1024);
        assert!(!CommitBudget::new(0, 1024).may_start(), "0 = off");
    }

    #[test]
    fn the_budget_follows_the_drain_rate_times_the_lag() {
        let hwm = 256 * 1024;
        let mut b = CommitBudget::new(50 * MS, hwm);
        // Paced at t=0 with 100 kB written and 60 kB unacknowledged.
        b.start(0, 100_000, 60_000);
        assert_eq!(
            b.engine_limit(100_000),
            0,
            "the kernel holds more than the floor"
        );
        // The peer drains 64 kB/s steadily; the engine keeps it backlogged.
        let mut written = 100_000u64;
        let mut kernel = 60_000usize;
        for k in 1..=200u64 {
            let drained = 64 * 1024 / 50; // per 20 ms
            kernel = kernel.saturating_sub(drained);
            // The engine tops the kernel up to its limit.
            let top = b.engine_limit(written).min(4096);
            written += top as u64;
            kernel += top;
            b.sample(k * 20 * MS, written, kernel, 100, true);
        }
        let want = 64.0 * 1024.0 * 0.05;
        assert!(
            (b.rate() - 64.0 * 1024.0).abs() < 64.0 * 1024.0 * 0.2,
            "rate {}",
            b.rate()
        );
        assert!(
            (b.budget() as f64) < want * 1.3 && b.budget() >= FLOOR,
            "budget {} want ≈{want}",
            b.budget()
        );
        // Written since the sample counts as committed in the kernel.
        let lim = b.engine_limit(written);
        assert_eq!(b.engine_limit(written + lim as u64), 0);
    }

    #[test]
    fn the_floor_keeps_a_very_slow_peer_moving() {
        let mut b = CommitBudget::new(50 * MS, 64 * 1024);
        b.start(0, 10_000, 10_000);
        // The peer takes 10 bytes/s: the budget settles on the floor.
        for k in 1..=100u64 {
            b.sample(k * 20 * MS, 10_000 + k, 10_000, 0, true);
        }
        assert_eq!(b.budget(), FLOOR);
        // An empty pipe at the floor still allows frames.
        b.sample(101 * 20 * MS, 20_000, 0, 0, true);
        assert!(b.engine_limit(20_000) >= FLOOR);
    }

    #[test]
    fn a_starved_window_raises_the_estimate_and_a_fast_peer_is_unpaced() {
        let hwm = 64 * 1024;
        let mut b = CommitBudget::new(10 * MS, hwm);
        b.start(0, 0, 0);
        b.sample(20 * MS, 1000, 500, 0, true);
        let r1 = b.rate();
        // The pipe ran empty: the peer took all; raise.
        b.sample(40 * MS, 2000, 0, 0, true);
        assert!(b.rate() > r1);
        // Now the peer is fast: 100 MB/s, nothing waits → unpaced.
        let mut ended = false;
        for k in 3..50u64 {
            ended |= b.sample(k * 20 * MS, k * 2_000_000, 0, 0, false);
            if ended {
                break;
            }
        }
        assert!(ended && !b.paced());
        assert_eq!(b.engine_limit(0), hwm);
    }

    #[test]
    fn committed_past_the_budget_is_recorded() {
        let mut b = CommitBudget::new(50 * MS, 8192);
        b.note_commit(100_000, 0);
        assert_eq!(b.max_excess(), 0, "unpaced: nothing to record");
        b.start(0, 0, 0);
        b.sample(MS, 100, 1500, 0, true);
        assert_eq!(b.engine_limit(100), FLOOR - 1500);
        b.note_commit(700, 100);
        assert_eq!(b.max_excess(), 700 + 1500 - FLOOR as u64);
    }
}
