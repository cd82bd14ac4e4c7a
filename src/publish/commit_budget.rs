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
//!                               − held bytes (the reader's kernel holds
//!                         them unread: its advertised window's shrink)
//! ```
//!
//! - **Paced only once slow.** A subscriber starts unpaced (the budget is
//!   the high-water mark, as before); its first write that would block
//!   with [`UNPACED_LOWAT`] bytes still in its buffer starts pacing ([`CommitBudget::start`]), the caller then sets
//!   `TCP_NOTSENT_LOWAT`. It stops being paced once its measured rate
//!   covers the mark within the lag and nothing waits
//!   ([`CommitBudget::sample`] says so).
//! - **Held bytes** ([`super::peer_window`]): acknowledged bytes the
//!   reader's own kernel holds unread, estimated from the shrink of the
//!   receive window it advertises; 0 when the kernel does not tell. So a
//!   reader with the OS-default (large, auto-tuned) receive buffer is paced
//!   as one with a small buffer is, within what the window shows.
//! - **Drain rate** = bytes the reader took (written − SIOCOUTQ − held) per
//!   second, over windows of at least [`WINDOW_NS`], smoothed (EWMA; the
//!   first window's rate is taken as is, so a fast peer that blocked once
//!   gets its budget back within a window or two). A window in which the
//!   pipe ran empty (nothing in the kernel or held) measured the engine,
//!   not the peer: the estimate is
//!   raised to 1.5 × what the peer took (never compounding on itself), so
//!   a starved estimate recovers.
//! - Pure: times and kernel figures are passed in, so the estimator and the
//!   budget are tested with injected values.
//!
//! Single owner: the publisher thread.

use super::peer_window::PeerWindow;

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
/// Held bytes under this count as none for "the pipe ran empty": the
/// coarsest window step seen on loopback (window scale 10).
const HELD_SLACK: usize = 1024;

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
    /// The reader's held bytes, estimated from its window.
    peer: PeerWindow,
    /// `peer.held()` at the last sample.
    held: usize,
    /// Bytes the reader took by the last sample (never decreases: the
    /// held estimate moves in window units).
    drained: u64,
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
            peer: PeerWindow::new(),
            held: 0,
            drained: 0,
            written_at_sample: 0,
            window_ns: 0,
            window_drained: 0,
            max_excess: 0,
            armed: false,
        }
    }

    /// True once, at the first write (a lag is configured): the caller sets
    /// the socket's `TCP_NOTSENT_LOWAT` to [`UNPACED_LOWAT`] and tells the
    /// peer's window then ([`Self::first_window`]).
    pub fn arm(&mut self) -> bool {
        let first = self.max_lag_ns > 0 && !self.armed;
        self.armed = true;
        first
    }

    /// The peer's window at `now_ns` before anything was written: its
    /// receive buffer is empty, so this is the window the held bytes are
    /// counted from later.
    pub fn first_window(&mut self, now_ns: u64, window: Option<u32>) {
        self.peer.observe(now_ns, window, false);
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

    /// Bytes committed outside the engine: the kernel's at the last sample
    /// plus bytes written since (an upper bound of its unacknowledged bytes
    /// now), plus the reader's held bytes at the last sample.
    #[inline]
    pub fn kernel_bound(&self, written: u64) -> usize {
        self.kernel + self.held + written.saturating_sub(self.written_at_sample) as usize
    }

    /// The reader's held bytes estimated at the last sample (0 unpaced or
    /// when the kernel does not tell its window).
    pub fn held(&self) -> usize {
        self.held
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
    /// written so far, `kernel` bytes unacknowledged and the peer's window
    /// `window` (`None`: unknown). The rate is not known yet: the first
    /// budget is the floor, and windows in which the pipe runs empty raise
    /// it.
    pub fn start(&mut self, now_ns: u64, written: u64, kernel: usize, window: Option<u32>) {
        self.paced = true;
        self.rate = 0.0;
        self.budget = FLOOR.min(self.hwm);
        self.kernel = kernel;
        self.peer.observe(now_ns, window, kernel > 0);
        self.held = self.peer.held();
        self.written_at_sample = written;
        self.window_ns = now_ns;
        self.drained = written.saturating_sub((kernel + self.held) as u64);
        self.window_drained = self.drained;
    }

    /// A sample at `now_ns`: `written` bytes written so far, `kernel` bytes
    /// unacknowledged (SIOCOUTQ), the peer's advertised window `window`
    /// (`None`: unknown), `engine` bytes in the engine buffer, `waiting` =
    /// symbols are pending. Returns `true` when pacing ended (the caller
    /// restores the socket option).
    pub fn sample(
        &mut self,
        now_ns: u64,
        written: u64,
        kernel: usize,
        window: Option<u32>,
        engine: usize,
        waiting: bool,
    ) -> bool {
        if !self.paced {
            return false;
        }
        self.kernel = kernel;
        self.peer.observe(now_ns, window, kernel > 0);
        self.held = self.peer.held();
        self.written_at_sample = written;
        let took = written.saturating_sub((kernel + self.held) as u64);
        self.drained = self.drained.max(took);
        let drained = self.drained;
        let dt = now_ns.saturating_sub(self.window_ns);
        // While the reader holds bytes behind a window that does not move
        // (a closed window stays closed until much of its buffer is free),
        // what it reads is not seen: the measuring window stays open until
        // news comes, so the bytes it read show over the time it took.
        let seen = self.held < HELD_SLACK || self.peer.moved();
        if dt >= WINDOW_NS && seen {
            let inst = drained.saturating_sub(self.window_drained) as f64 * 1e9 / dt as f64;
            if kernel == 0 && engine == 0 && self.held < HELD_SLACK {
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
                self.held = 0;
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
        b.start(0, 100_000, 60_000, None);
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
            b.sample(k * 20 * MS, written, kernel, None, 100, true);
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
        b.start(0, 10_000, 10_000, None);
        // The peer takes 10 bytes/s: the budget settles on the floor.
        for k in 1..=100u64 {
            b.sample(k * 20 * MS, 10_000 + k, 10_000, None, 0, true);
        }
        assert_eq!(b.budget(), FLOOR);
        // An empty pipe at the floor still allows frames.
        b.sample(101 * 20 * MS, 20_000, 0, None, 0, true);
        assert!(b.engine_limit(20_000) >= FLOOR);
    }

    #[test]
    fn a_starved_window_raises_the_estimate_and_a_fast_peer_is_unpaced() {
        let hwm = 64 * 1024;
        let mut b = CommitBudget::new(10 * MS, hwm);
        b.start(0, 0, 0, None);
        b.sample(20 * MS, 1000, 500, None, 0, true);
        let r1 = b.rate();
        // The pipe ran empty: the peer took all; raise.
        b.sample(40 * MS, 2000, 0, None, 0, true);
        assert!(b.rate() > r1);
        // Now the peer is fast: 100 MB/s, nothing waits → unpaced.
        let mut ended = false;
        for k in 3..50u64 {
            ended |= b.sample(k * 20 * MS, k * 2_000_000, 0, None, 0, false);
            if ended {
                break;
            }
        }
        assert!(ended && !b.paced());
        assert_eq!(b.engine_limit(0), hwm);
    }

    /// A reader behind a receive buffer of `cap` bytes (its advertised
    /// window is its free space, as a kernel's is) reading `rate` bytes/s
    /// until `stop_ms`, the engine topping it up to its limit every ms for
    /// `ms` ms. `tell` = the window is reported. Returns (the reader's held
    /// bytes each ms after the first second, bytes it read, bytes written
    /// after the stop, the budget).
    fn reader_behind_a_big_buffer(
        cap: u64,
        rate: u64,
        stop_ms: u64,
        ms: u64,
        tell: bool,
    ) -> (Vec<u64>, u64, u64, CommitBudget) {
        let mut b = CommitBudget::new(50 * MS, 256 * 1024);
        let window = |held: u64| tell.then_some((cap - held) as u32);
        assert!(b.arm());
        b.first_window(0, window(0));
        // Unpaced until its buffer filled and the send queue blocked.
        let (mut written, mut kernel, mut held, mut read) = (cap + 4096, 4096u64, cap, 0u64);
        b.start(0, written, kernel as usize, window(held));
        let (mut seen, mut after_stop) = (Vec::new(), 0u64);
        for t in 1..=ms {
            // The reader takes its bytes; its kernel takes what fits.
            if t < stop_ms {
                let r = (t * rate / 1000 - read).min(held);
                read += r;
                held -= r;
            }
            let moved = kernel.min(cap - held);
            kernel -= moved;
            held += moved;
            b.sample(t * MS, written, kernel as usize, window(held), 0, true);
            // The engine writes what its limit allows (frames of 128 B).
            let top = (b.engine_limit(written) as u64 / 128) * 128;
            written += top;
            kernel += top;
            if t >= stop_ms {
                after_stop += top;
            }
            if t >= 1000 {
                seen.push(held);
            }
        }
        (seen, read, after_stop, b)
    }

    #[test]
    fn a_reader_holding_bytes_in_its_own_buffer_is_paced_as_a_small_buffer_one() {
        let (cap, rate) = (128 * 1024, 64 * 1024);
        // Told the window: once the old bytes are read, the reader's own
        // kernel holds about a budget's worth, and it reads at its rate.
        let (held, read, _, b) = reader_behind_a_big_buffer(cap, rate, u64::MAX, 10_000, true);
        let settled = &held[held.len() / 2..];
        let max = *settled.iter().max().unwrap();
        assert!(max <= 8 * 1024, "held up to {max}");
        assert!(read >= rate * 10 * 95 / 100, "read {read} of {}", rate * 10);
        assert!(b.held() <= 8 * 1024 && b.budget() <= 8 * 1024);
        // Not told (a kernel without tcpi_snd_wnd): it holds its buffer.
        let (held, read, _, _) = reader_behind_a_big_buffer(cap, rate, u64::MAX, 10_000, false);
        let min = *held[held.len() / 2..].iter().min().unwrap();
        assert!(min >= cap - 8 * 1024, "held {min}");
        assert!(read >= rate * 10 * 95 / 100);
    }

    #[test]
    fn the_bytes_read_behind_a_shut_window_show_over_the_time_it_took() {
        let mut b = CommitBudget::new(50 * MS, 256 * 1024);
        assert!(b.arm());
        b.first_window(0, Some(128 * 1024));
        // Paced with its buffer full (window 0) and 4 KiB queued.
        b.start(0, 132 * 1024, 4096, Some(0));
        assert_eq!(b.held(), 128 * 1024);
        // It reads 64 KiB/s; the window stays shut for 2 s (nothing seen).
        for k in 1..100u64 {
            b.sample(k * 20 * MS, 132 * 1024, 4096, Some(0), 0, true);
        }
        assert_eq!(b.rate(), 0.0, "no news: no measurement");
        // Then opens: 128 KiB read over those 2 s, the queue delivered.
        b.sample(2000 * MS, 132 * 1024, 0, Some(124 * 1024), 0, true);
        let r = b.rate();
        assert!(
            (r - 64.0 * 1024.0).abs() < 8.0 * 1024.0,
            "rate {r}, not a burst of the whole buffer in 20 ms"
        );
    }

    #[test]
    fn a_reader_that_stops_gets_little_more_than_its_budget() {
        let (cap, rate) = (128 * 1024, 64 * 1024);
        let (_, _, after, _) = reader_behind_a_big_buffer(cap, rate, 5_000, 6_000, true);
        assert!(
            after <= 16 * 1024,
            "{after} bytes sent in the second after it stopped"
        );
        let (_, _, after, _) = reader_behind_a_big_buffer(cap, rate, 5_000, 6_000, false);
        assert!(
            after <= 8 * 1024,
            "the send queue bounds it without a window too"
        );
    }

    #[test]
    fn a_fast_reader_with_an_open_window_is_unpaced() {
        let hwm = 256 * 1024;
        let mut b = CommitBudget::new(50 * MS, hwm);
        b.start(0, 0, 0, Some(128 * 1024));
        let mut ended = false;
        for k in 1..50u64 {
            // 100 MB/s, its window open: nothing held, nothing waits.
            ended |= b.sample(k * 20 * MS, k * 2_000_000, 0, Some(128 * 1024), 0, false);
            assert_eq!(b.held(), 0);
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
        b.start(0, 0, 0, None);
        b.sample(MS, 100, 1500, None, 0, true);
        assert_eq!(b.engine_limit(100), FLOOR - 1500);
        b.note_commit(700, 100);
        assert_eq!(b.max_excess(), 700 + 1500 - FLOOR as u64);
    }
}
