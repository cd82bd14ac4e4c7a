//! One subscriber's own caps (`TICKFAN.THROTTLE`, `--sub-max-rate`,
//! `--sub-max-bandwidth`): at most R updates per second per symbol and at
//! most B data bytes per second, like Lightstreamer's max frequency and
//! max bandwidth. Socket-free; the fan-out asks it before appending a
//! frame ([`super::fanout::Fanout::offer`]) and the refill asks it before
//! sending a held symbol ([`super::fanout::Fanout::refill`]).
//!
//! A frame the throttle refuses is not dropped: its symbol is marked
//! pending in the subscriber's own conflation state
//! ([`super::outbuf::SubscriberBuffer::hold`]), the same marks a slow
//! subscriber uses, so the latest value goes out when the window opens and
//! an older value never follows a newer one.
//!
//! - **Rate: aligned windows.** Time since the cap was set is cut into
//!   windows of 1/R s; a symbol goes out at most once per window. All the
//!   symbols held in one window open together at its end, so the pending
//!   marks (oldest first) never wait behind a later one for long, and the
//!   count of frames of one symbol over T seconds is at most ⌈T·R⌉ + 1.
//!   Windows start when the cap is set (per subscriber), which spreads the
//!   subscribers' window ends over time.
//! - **Bandwidth: byte credit.** Credit refills at B per second up to a
//!   burst of a tenth of a second (at least one byte); a frame goes while
//!   the credit is positive and is charged in full, so the bytes over T
//!   seconds are at most B·(T + 0.1) + one frame. Only data frames are
//!   charged (command replies, snapshots and `TICKFAN.SINCE` replays are
//!   answers to a request and go at once).
//!
//! Memory: 8 bytes per symbol (`--max-symbols`), allocated when a rate cap
//! is set, freed when it is removed; nothing per tick. Time is the
//! publisher's window clock (injectable: [`crate::runtime::Injected`]).
//!
//! Not on the engine's limiter ([`crate::rate_limit`]): the rate is per
//! symbol in aligned windows, not a bucket, and the byte credit charges a
//! frame in full after the check (it may go negative), and over 1 GB/s a
//! byte's share of a second is under the limiter's 1 ns resolution.
//!
//! Single owner: the publisher thread.

use std::fmt;
use std::sync::Arc;

use crate::symbols::SymbolId;

/// The clock of the throttle windows: monotonic ns from any source (the
/// engine's clock, or a simulated one in tests; the wiring adapts it, so
/// the publish path needs no clock type of another stage).
#[derive(Clone)]
pub struct WindowClock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl WindowClock {
    /// A clock reading `now_ns`, which must never go backwards.
    pub fn new(now_ns: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        WindowClock(Arc::new(now_ns))
    }

    /// Now, ns.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        (self.0)()
    }
}

impl fmt::Debug for WindowClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WindowClock")
    }
}

/// Most updates per second per symbol a client may ask for (one per µs).
pub const MAX_RATE: f64 = 1_000_000.0;

/// A subscriber's caps; with none set it admits everything.
#[derive(Debug)]
pub struct Throttle {
    /// Window length in ns (0 = no rate cap).
    window_ns: u64,
    /// Window 0 starts here (window-clock ns when the rate was set).
    origin_ns: u64,
    /// Per symbol: 1 + the window it last went out in (0 = none yet).
    /// Empty without a rate cap, else `max_symbols` long.
    sent_in: Vec<u64>,
    /// The last frame that went: `(symbol, seq)`, so the second delivery
    /// of one update (a channel and a pattern) goes with the first.
    last: Option<(SymbolId, u64)>,
    max_symbols: usize,
    /// Bytes per second (0 = no bandwidth cap).
    bytes_per_sec: u64,
    /// Byte credit; a frame goes while it is positive.
    credit: f64,
    /// Credit cap: a tenth of a second of bandwidth (at least 1).
    burst: f64,
    /// When the credit was last refilled (window-clock ns).
    credit_at_ns: u64,
    /// Frames held back (their symbol marked pending) since the session began.
    pub held: u64,
}

impl Throttle {
    /// No caps, for ids below `max_symbols`.
    pub fn new(max_symbols: usize) -> Self {
        Throttle {
            window_ns: 0,
            origin_ns: 0,
            sent_in: Vec::new(),
            last: None,
            max_symbols,
            bytes_per_sec: 0,
            credit: 0.0,
            burst: 0.0,
            credit_at_ns: 0,
            held: 0,
        }
    }

    /// Some cap is set.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.window_ns != 0 || self.bytes_per_sec != 0
    }

    /// At most `per_sec` updates per second per symbol (0 removes the cap),
    /// windows starting at `now_ns`. `per_sec` is finite, in `0..=MAX_RATE`.
    pub fn set_rate(&mut self, per_sec: f64, now_ns: u64) {
        debug_assert!(per_sec.is_finite() && (0.0..=MAX_RATE).contains(&per_sec));
        if per_sec <= 0.0 {
            self.window_ns = 0;
            self.sent_in = Vec::new();
            return;
        }
        self.window_ns = ((1e9 / per_sec).round() as u64).max(1);
        self.origin_ns = now_ns;
        self.last = None;
        if self.sent_in.is_empty() {
            self.sent_in = vec![0; self.max_symbols];
        } else {
            self.sent_in.fill(0);
        }
    }

    /// At most `bytes_per_sec` data bytes per second (0 removes the cap).
    pub fn set_bandwidth(&mut self, bytes_per_sec: u64, now_ns: u64) {
        self.bytes_per_sec = bytes_per_sec;
        self.burst = (bytes_per_sec as f64 / 10.0).max(1.0);
        self.credit = self.burst;
        self.credit_at_ns = now_ns;
    }

    /// The caps as set: (updates per second per symbol, bytes per second); 0 = none.
    pub fn caps(&self) -> (f64, u64) {
        let rate = if self.window_ns == 0 {
            0.0
        } else {
            1e9 / self.window_ns as f64
        };
        (rate, self.bytes_per_sec)
    }

    fn window(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.origin_ns) / self.window_ns
    }

    fn refill_credit(&mut self, now_ns: u64) {
        if now_ns > self.credit_at_ns {
            let add = (now_ns - self.credit_at_ns) as f64 * self.bytes_per_sec as f64 / 1e9;
            self.credit = (self.credit + add).min(self.burst);
            self.credit_at_ns = now_ns;
        }
    }

    /// Whether a frame of `id` may go at `now_ns`: its window is open and
    /// there is byte credit.
    #[inline]
    pub fn open(&mut self, id: SymbolId, now_ns: u64) -> bool {
        if self.window_ns != 0 {
            let w = self.window(now_ns);
            if self.sent_in.get(id as usize).is_some_and(|&s| s == w + 1) {
                return false;
            }
        }
        if self.bytes_per_sec != 0 {
            self.refill_credit(now_ns);
            if self.credit <= 0.0 {
                return false;
            }
        }
        true
    }

    /// Whether update `seq` of `id` may go: [`open`](Self::open), or this
    /// very update already went (its second delivery to this subscriber).
    #[inline]
    pub fn admits(&mut self, id: SymbolId, seq: u64, now_ns: u64) -> bool {
        self.last == Some((id, seq)) || self.open(id, now_ns)
    }

    /// A frame of `len` bytes of update `seq` of `id` went at `now_ns`.
    #[inline]
    pub fn sent(&mut self, id: SymbolId, seq: u64, len: usize, now_ns: u64) {
        if self.window_ns != 0 {
            let w = self.window(now_ns);
            if let Some(s) = self.sent_in.get_mut(id as usize) {
                *s = w + 1;
            }
        }
        if self.bytes_per_sec != 0 {
            self.credit -= len as f64;
        }
        self.last = Some((id, seq));
    }

    /// The earliest window-clock time after `now_ns` at which a held frame
    /// may go (the next window end, or when the credit turns positive).
    pub fn next_open_ns(&self, now_ns: u64) -> u64 {
        let mut t = u64::MAX;
        if self.window_ns != 0 {
            t = self.origin_ns + (self.window(now_ns) + 1) * self.window_ns;
        }
        if self.bytes_per_sec != 0 && self.credit <= 0.0 {
            let need = (-self.credit + 1.0) * 1e9 / self.bytes_per_sec as f64;
            t = t.min(self.credit_at_ns.saturating_add(need.ceil() as u64));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn no_caps_admit_everything() {
        let mut t = Throttle::new(4);
        assert!(!t.is_active());
        for i in 0..100 {
            assert!(t.admits(1, i, 0));
            t.sent(1, i, 100, 0);
        }
    }

    #[test]
    fn a_symbol_goes_once_per_window_and_others_are_not_held_by_it() {
        let mut t = Throttle::new(4);
        t.set_rate(2.0, 10 * S); // windows of 500 ms from t = 10 s
        assert!(t.admits(0, 1, 10 * S));
        t.sent(0, 1, 50, 10 * S);
        assert!(!t.admits(0, 2, 10 * S + 100));
        assert!(t.admits(1, 7, 10 * S + 100), "windows are per symbol");
        assert_eq!(t.next_open_ns(10 * S + 100), 10 * S + S / 2);
        assert!(!t.open(0, 10 * S + S / 2 - 1));
        assert!(t.open(0, 10 * S + S / 2));
    }

    #[test]
    fn the_second_delivery_of_one_update_goes_with_the_first() {
        let mut t = Throttle::new(4);
        t.set_rate(1.0, 0);
        assert!(t.admits(2, 5, 0));
        t.sent(2, 5, 50, 0);
        assert!(t.admits(2, 5, 1), "same update, pattern delivery");
        assert!(!t.admits(2, 6, 1), "next update waits for the window");
    }

    #[test]
    fn count_per_symbol_is_bounded_by_the_windows() {
        let mut t = Throttle::new(1);
        t.set_rate(10.0, 0);
        let mut sent = 0u64;
        // An update every ms for 3 s.
        for ms in 0..3000u64 {
            let now = ms * 1_000_000;
            if t.admits(0, ms + 1, now) {
                t.sent(0, ms + 1, 10, now);
                sent += 1;
            }
        }
        assert_eq!(sent, 30);
    }

    #[test]
    fn bandwidth_credit_bounds_the_bytes() {
        let mut t = Throttle::new(8);
        t.set_bandwidth(1000, 0); // burst 100 bytes
        let mut bytes = 0u64;
        for ms in 0..2000u64 {
            let now = ms * 1_000_000;
            let id = (ms % 8) as SymbolId;
            if t.admits(id, ms + 1, now) {
                t.sent(id, ms + 1, 120, now);
                bytes += 120;
            }
        }
        // 2 s at 1000 B/s, plus the burst and one frame.
        assert!(bytes <= 2000 + 100 + 120, "{bytes}");
        assert!(bytes >= 1800, "{bytes}");
        assert!(!t.open(0, 2 * S));
        assert!(t.next_open_ns(2 * S) > 2 * S);
    }

    #[test]
    fn zero_removes_a_cap_and_frees_the_windows() {
        let mut t = Throttle::new(1000);
        t.set_rate(5.0, 0);
        assert_eq!(t.sent_in.len(), 1000);
        t.set_bandwidth(64, 0);
        assert_eq!(t.caps(), (5.0, 64));
        t.set_rate(0.0, 0);
        assert!(t.sent_in.is_empty() && t.is_active());
        t.set_bandwidth(0, 0);
        assert!(!t.is_active());
    }
}
