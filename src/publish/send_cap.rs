//! A paced subscriber's send-rate cap: a token bucket over the bytes
//! appended to it (written + waiting in its engine buffer), refilled at a
//! rate the caller passes in, at most one burst deep.
//!
//! The commit budget ([`super::commit_budget`]) bounds what is
//! *outstanding* for a reader; this bounds how fast it may be refilled.
//! Both are needed because a reader's kernel acknowledges bytes as soon as
//! they land, and while what it holds stays under the cap of its
//! advertised window (its `rcv_ssthresh`), its window does not move: every
//! byte then looks taken at once, and a budget alone would let the reader
//! be streamed at the offered rate until its buffer shows full.
//!
//! The bucket may go below 0: the fan-out lets one whole frame out
//! whenever the limit is above 0 and the buffer is empty, so a frame can
//! overdraw it, and the debt is paid before anything more goes. (Forgiving
//! it at each refill let one frame out per write: ~2 MB/s to a reader
//! capped at 58 kB/s in a traced run.)
//!
//! Not on the engine's limiter ([`crate::rate_limit`]): this is a pacing
//! allowance (the rate is the reader's measured drain rate, passed in at
//! each refill, and bytes appended are counted against bytes written), not
//! a fixed limit on a count of events.
//!
//! Pure (times and counts are passed in); no allocation.

/// The bucket of one subscriber.
#[derive(Debug, Clone)]
pub struct SendCap {
    /// Bytes appended may reach this total (`u64::MAX`: no cap).
    allow_total: u64,
    /// Tokens left at the last refill, bytes; negative is a debt: the
    /// engine always lets one whole frame out when its buffer is empty and
    /// the limit is above 0, so a frame may overdraw the bucket, and the
    /// overdraft is paid back before anything more goes.
    tokens: f64,
    /// Time and appended total of the last refill.
    at_ns: u64,
    appended_at: u64,
}

impl Default for SendCap {
    fn default() -> Self {
        SendCap::new()
    }
}

impl SendCap {
    /// No cap.
    pub const fn new() -> Self {
        SendCap {
            allow_total: u64::MAX,
            tokens: 0.0,
            at_ns: 0,
            appended_at: 0,
        }
    }

    /// Lifts the cap (a rate not known yet, or the subscriber unpaced).
    pub fn off(&mut self) {
        self.allow_total = u64::MAX;
    }

    /// Refills at `now_ns` with `appended` bytes appended so far, at
    /// `rate` bytes/s, at most `burst` bytes deep. The first refill after
    /// [`Self::off`] starts with a full bucket.
    pub fn refill(&mut self, now_ns: u64, appended: u64, rate: f64, burst: usize) {
        let burst = burst as f64;
        if self.allow_total == u64::MAX {
            self.tokens = burst;
        } else {
            let used = appended.saturating_sub(self.appended_at) as f64;
            let dt = now_ns.saturating_sub(self.at_ns) as f64 / 1e9;
            self.tokens = (self.tokens - used + rate * dt).min(burst);
        }
        self.allow_total = appended + self.tokens.max(0.0) as u64;
        self.at_ns = now_ns;
        self.appended_at = appended;
    }

    /// Bytes the engine buffer may hold now, `written` bytes having been
    /// written (everything appended beyond `written` waits in it).
    #[inline]
    pub fn allows(&self, written: u64) -> usize {
        if self.allow_total == u64::MAX {
            return usize::MAX;
        }
        usize::try_from(self.allow_total.saturating_sub(written)).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn off_allows_anything_and_the_first_refill_gives_a_full_burst() {
        let mut c = SendCap::new();
        assert_eq!(c.allows(123), usize::MAX);
        c.refill(0, 1000, 10_000.0, 4096);
        assert_eq!(c.allows(1000), 4096);
        c.off();
        assert_eq!(c.allows(1_000_000), usize::MAX);
    }

    #[test]
    fn over_a_second_the_bytes_let_through_are_the_rate_plus_one_burst() {
        let mut c = SendCap::new();
        let (rate, burst) = (64_000.0, 4096);
        let mut written = 0u64;
        c.refill(0, written, rate, burst);
        // A sender that takes all it is allowed, every 100 µs for 1 s.
        for k in 1..=10_000u64 {
            written += c.allows(written) as u64;
            c.refill(k * MS / 10, written, rate, burst);
        }
        let want = rate as u64 + burst as u64;
        assert!(
            written <= want && written >= want - 2048,
            "{written} bytes in 1 s, want ≈ {want}"
        );
    }

    #[test]
    fn a_frame_that_overdraws_the_bucket_is_paid_back_before_the_next() {
        // The fan-out lets one whole frame out whenever the limit is above
        // 0 and the buffer is empty, and the publisher refills after every
        // write: a frame per write would pass if each overdraft were
        // forgiven (measured: 118-byte frames every 50 µs, ~2 MB/s, to a
        // reader capped at 58 kB/s).
        let mut c = SendCap::new();
        let (rate, burst, frame) = (58_000.0, 2048, 118u64);
        let mut written = 0u64;
        c.refill(0, written, rate, burst);
        for k in 1..=20_000u64 {
            if c.allows(written) > 0 {
                written += frame;
            }
            c.refill(k * MS / 20, written, rate, burst);
        }
        let want = rate as u64 + burst as u64 + frame;
        assert!(written <= want, "{written} bytes in 1 s, want ≤ {want}");
        assert!(written >= rate as u64 - 2 * frame, "{written} bytes in 1 s");
    }

    #[test]
    fn unused_tokens_do_not_pile_up_beyond_one_burst() {
        let mut c = SendCap::new();
        c.refill(0, 0, 64_000.0, 4096);
        // 10 s idle: still one burst.
        c.refill(10_000 * MS, 0, 64_000.0, 4096);
        assert_eq!(c.allows(0), 4096);
        // Bytes waiting in the engine count against it.
        c.refill(10_000 * MS, 3000, 64_000.0, 4096);
        assert_eq!(c.allows(0), 4096, "3000 waiting + 1096 more");
    }
}
