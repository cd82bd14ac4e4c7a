//! The bytes a paced subscriber's own kernel holds for it, acknowledged
//! but not yet read, estimated from the receive window its peer advertises
//! (`TCP_INFO`'s `tcpi_snd_wnd`, [`crate::sys::tcp_signals::peer_window`]).
//! `SIOCOUTQ` stops counting a byte once the peer acknowledges it, so a
//! reader with a large receive buffer (the OS default, auto-tuned) can
//! hold a second or more of old frames the sender no longer sees; the
//! commit budget counts this estimate with the kernel's bytes
//! ([`super::commit_budget`]).
//!
//! ```text
//!  peak  = max(window, peak)             kept while the window moves or
//!                                        bytes are in flight; while it stays
//!                                        put with nothing in flight, the gap
//!                                        above it shrinks by
//!                                        e^(−dt / PEAK_DECAY_NS)
//!  held  = peak − window                 (0 when the window is unknown)
//! ```
//!
//! - **Why a peak.** The receiver's window is its free space, so as a
//!   reader falls behind, its window shrinks by what it holds; an empty
//!   buffer shows the largest window. The first one is seen at the
//!   subscriber's first write, while its buffer is still empty, so the
//!   buffer a reader fills before it is paced is counted.
//! - **Why it decays while the window stays put.** A window that moved is
//!   fresh news (an acknowledgement or a window update), and bytes in
//!   flight bring news (their acknowledgement, or the window opening for a
//!   reader that stopped): the peak is kept, so a reader falling behind
//!   slowly is seen and one that stopped stays counted. But the window of an
//!   *empty* buffer is not a constant:
//!   the receiver caps it by its `rcv_ssthresh` and scales it by its
//!   payload-to-memory ratio, both of which move with segment sizes and
//!   auto-tuning (measured on loopback: 72–127 KiB for the same empty 128 KiB
//!   buffer). A peak kept forever would count phantom held bytes and starve
//!   a reader that has caught up. And a receiver sends a window update on
//!   its own only when its window doubles: a reader that read everything
//!   while nothing was sent can keep showing its last, small window. Both
//!   show as a window that stays put, nothing in flight, while the engine
//!   holds back; with the
//!   decay the estimate falls to 0 within a few [`PEAK_DECAY_NS`], the
//!   budget lets a few frames out, and their acknowledgement brings a fresh
//!   window.
//! - **Limits** (docs/src/decisions.md): the estimate resolves held bytes only
//!   above the receiver's own cap of the window (the window of a buffer
//!   holding a few KiB can equal that of an empty one); window units are
//!   the receiver's scaled memory, not exactly payload bytes; the
//!   granularity is the window scale (1 KiB on loopback with the default
//!   buffers). A reader that stops reading closes its window to 0: the bytes
//!   sent then stay in the sender's queue (`SIOCOUTQ`), which the budget
//!   counts, so the held estimate decaying does not let more out.
//!
//! Pure (times and windows are passed in), single owner: the publisher
//! thread, through the subscriber's [`super::commit_budget::CommitBudget`].

/// Time constant of the peak's decay toward a window that stays put.
pub const PEAK_DECAY_NS: u64 = 100_000_000;

/// The estimator of one subscriber.
#[derive(Debug, Clone, Default)]
pub struct PeerWindow {
    /// Largest window, decayed while the window stays put, bytes; ≥
    /// `window` after every observation.
    peak: f64,
    /// The last window seen; `None` until seen, or when unknown.
    window: Option<u32>,
    /// Time of the last observation.
    at_ns: u64,
    /// The last observation brought news: the window moved (or was unknown
    /// before).
    moved: bool,
}

impl PeerWindow {
    /// Nothing seen: holds nothing.
    pub const fn new() -> Self {
        PeerWindow {
            peak: 0.0,
            window: None,
            at_ns: 0,
            moved: false,
        }
    }

    /// The window `window` (`None`: unknown) seen at `now_ns`, with
    /// `in_flight` = bytes are unacknowledged.
    pub fn observe(&mut self, now_ns: u64, window: Option<u32>, in_flight: bool) {
        let Some(w) = window else {
            *self = PeerWindow::new();
            return;
        };
        self.moved = self.window != Some(w);
        let stayed = !self.moved && !in_flight;
        let w = f64::from(w);
        if self.window.is_none() || self.peak <= w {
            self.peak = w;
        } else if stayed {
            let dt = now_ns.saturating_sub(self.at_ns) as f64;
            self.peak = w + (self.peak - w) * (-dt / PEAK_DECAY_NS as f64).exp();
        }
        self.window = window;
        self.at_ns = now_ns;
    }

    /// The last observation saw the window move: the held estimate is as
    /// fresh as the peer's last acknowledgement.
    #[inline]
    pub fn moved(&self) -> bool {
        self.moved
    }

    /// Bytes sent since were acknowledged and the window did not shrink:
    /// it is at the receiver's cap, which an empty buffer shows too, so
    /// nothing the window can show is held: the last window becomes the
    /// reference.
    pub fn rebase(&mut self) {
        if let Some(w) = self.window {
            self.peak = f64::from(w);
        }
    }

    /// Estimated bytes the peer holds unread (0 when the window is unknown).
    #[inline]
    pub fn held(&self) -> usize {
        self.window
            .map_or(0, |w| (self.peak - f64::from(w)).max(0.0).round() as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_rebase_makes_the_last_window_the_empty_one() {
        let mut p = PeerWindow::new();
        p.observe(0, Some(105 * 1024), true);
        p.observe(MS, Some(97 * 1024), true);
        assert_eq!(p.held(), 8 * 1024);
        p.rebase();
        assert_eq!(p.held(), 0);
        // What it shows after counts from there.
        p.observe(2 * MS, Some(90 * 1024), true);
        assert_eq!(p.held(), 7 * 1024);
    }

    #[test]
    fn unknown_holds_nothing() {
        let mut p = PeerWindow::new();
        assert_eq!(p.held(), 0);
        p.observe(0, Some(100_000), false);
        p.observe(MS, Some(40_000), false);
        assert!(p.held() > 50_000);
        p.observe(2 * MS, None, false);
        assert_eq!(p.held(), 0, "a kernel that stops reporting: unknown");
    }

    #[test]
    fn a_shrinking_window_is_held_bytes_and_a_reopened_one_releases_them() {
        let mut p = PeerWindow::new();
        p.observe(0, Some(128 * 1024), false);
        assert_eq!(p.held(), 0, "an empty buffer");
        // The reader falls behind: 1 ms later its window is 100 KiB less.
        p.observe(MS, Some(28 * 1024), false);
        let h = p.held();
        assert!(h > 95 * 1024 && h <= 100 * 1024, "held {h}");
        // It reads; the next acknowledgement shows the window open again.
        p.observe(2 * MS, Some(128 * 1024), false);
        assert_eq!(p.held(), 0);
    }

    #[test]
    fn a_reader_falling_behind_slowly_is_seen() {
        let mut p = PeerWindow::new();
        p.observe(0, Some(128 * 1024), false);
        // Each acknowledgement shows 100 bytes less free, for 10 s.
        for k in 1..=1000u32 {
            p.observe(u64::from(k) * 10 * MS, Some(128 * 1024 - 100 * k), false);
        }
        assert_eq!(p.held(), 100_000);
    }

    #[test]
    fn autotuning_growth_is_not_held_bytes() {
        let mut p = PeerWindow::new();
        p.observe(0, Some(64 * 1024), false);
        // The receiver grows its window while the reader keeps up.
        for k in 1..=10u64 {
            p.observe(k * MS, Some((64 + 8 * k as u32) * 1024), false);
            assert_eq!(p.held(), 0);
        }
    }

    #[test]
    fn a_window_that_stays_put_is_forgotten_within_a_few_time_constants() {
        let mut p = PeerWindow::new();
        p.observe(0, Some(120 * 1024), false);
        p.observe(MS, Some(90 * 1024), false);
        let first = p.held();
        assert!(first > 25 * 1024, "held {first}");
        // No fresh acknowledgement: the same window, sample after sample.
        let mut t = MS;
        while t < 5 * PEAK_DECAY_NS {
            t += 10 * MS;
            p.observe(t, Some(90 * 1024), false);
        }
        assert!(p.held() < first / 100, "held {} after 5 τ", p.held());
    }

    #[test]
    fn the_estimate_is_granular_to_the_window_it_is_given() {
        // Window scale 10 (loopback, default buffers): 1 KiB steps.
        let mut p = PeerWindow::new();
        p.observe(0, Some(100 * 1024), false);
        p.observe(1, Some(99 * 1024), false);
        assert_eq!(p.held(), 1024);
        p.observe(2, Some(0), true);
        assert!(p.held() > 99 * 1024, "a closed window: all of it held");
        // Bytes wait in the sender's queue: the closed window stays news.
        p.observe(10 * PEAK_DECAY_NS, Some(0), true);
        assert!(p.held() > 99 * 1024, "a reader that stopped stays counted");
    }
}
