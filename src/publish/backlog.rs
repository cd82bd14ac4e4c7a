//! The backlog check of an unpaced reader: is it seconds behind in its own
//! kernel?
//!
//! An unpaced reader whose client falls behind for long (its thread
//! starved of CPU) does not block the engine's writes for a long time: its
//! kernel grows its receive buffer (auto-tuning, up to `tcp_rmem`'s 6 MiB)
//! and acknowledges everything. At 352 kB/s per reader (500 readers on one
//! client thread at 2k ticks/s) 6 MiB is 17 s of frames, which the reader
//! then reads, oldest first, before anything newer: freshness p99 climbed
//! to 5 s in one run while nothing was paced. Frames in that buffer cannot
//! be recalled; what can be done is to stop adding to it early.
//!
//! So at most once per lag (`--sub-max-lag`) after a write, an unpaced
//! reader's committed bytes (the kernel's unacknowledged bytes plus what
//! its reader's kernel holds unread, from its window) are compared with
//! what was written to it over that time: more than [`BACKLOG_LAGS`] lags
//! of its own stream, and at least [`BACKLOG_MIN`], and the caller starts
//! pacing it. A reader that keeps up holds a few lags' worth at most (100
//! or 500 readers on one thread fall 20–150 ms behind now and then); a
//! re-trial lets a paced one go once it reads again ([`super::retrial`]).
//!
//! ```text
//!   committed = SIOCOUTQ + held          stream = written since the last check / its time
//!   committed ≥ max(BACKLOG_MIN, stream × BACKLOG_LAGS × lag)  ⇒  pace
//! ```
//!
//! Pure (times and byte counts are passed in); single owner: the publisher
//! thread, through [`super::commit_budget::CommitBudget`].

/// Lags of its own stream an unpaced reader may hold committed before it
/// is paced.
pub const BACKLOG_LAGS: u64 = 8;
/// Committed bytes below which a reader is never seen as backlogged (the
/// window's blind zone and a default receive buffer's worth: at four lags
/// and 64 KiB, one reader of 100 on one client thread, 130 ms behind now
/// and then, was paced six times in 12 s, once for 3.5 s).
pub const BACKLOG_MIN: u64 = 256 * 1024;

/// When an unpaced reader was last checked.
#[derive(Debug, Clone, Copy, Default)]
pub struct BacklogCheck {
    /// Time and bytes written at the last check (`None`: not yet).
    last: Option<(u64, u64)>,
}

impl BacklogCheck {
    /// Not checked yet.
    pub const fn new() -> Self {
        BacklogCheck { last: None }
    }

    /// A check is due at `now_ns` for lag `lag_ns`.
    #[inline]
    pub fn due(&self, now_ns: u64, lag_ns: u64) -> bool {
        self.last
            .is_none_or(|(at, _)| now_ns.saturating_sub(at) >= lag_ns)
    }

    /// Checks at `now_ns`, `written` bytes written so far and `committed`
    /// bytes not yet read by the reader (kernel queue + held), for lag
    /// `lag_ns`. Returns `true` when it is backlogged: the caller paces it.
    /// The first check only takes its reference.
    pub fn check(&mut self, now_ns: u64, written: u64, committed: u64, lag_ns: u64) -> bool {
        let last = self.last.replace((now_ns, written));
        let Some((at, w0)) = last else {
            return false;
        };
        let dt = now_ns.saturating_sub(at).max(1);
        // Bytes of its stream per BACKLOG_LAGS lags, at the rate written
        // since the last check (u128: no overflow at any rate).
        let allowed = u128::from(written.saturating_sub(w0)) * u128::from(BACKLOG_LAGS * lag_ns)
            / u128::from(dt);
        u128::from(committed) >= allowed.max(u128::from(BACKLOG_MIN))
    }

    /// Pacing started or ended: the next check takes a new reference.
    pub fn reset(&mut self) {
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const LAG: u64 = 50 * MS;

    #[test]
    fn a_reader_a_few_lags_behind_is_not_backlogged_one_seconds_behind_is() {
        // 352 kB/s: 17.6 kB per lag.
        let per_lag = 17_600u64;
        let mut b = BacklogCheck::new();
        assert!(b.due(0, LAG));
        assert!(!b.check(0, 0, 0, LAG), "the first check is a reference");
        assert!(!b.due(49 * MS, LAG) && b.due(50 * MS, LAG));
        // 80 ms behind (1.6 lags): fine.
        assert!(!b.check(50 * MS, per_lag, per_lag * 16 / 10, LAG));
        // Its client starved: a second of frames held in its kernel.
        let mut written = per_lag;
        let mut t = 50 * MS;
        let mut committed = per_lag * 16 / 10;
        let mut paced_at = None;
        while paced_at.is_none() && t < 2_000 * MS {
            t += LAG;
            written += per_lag;
            committed += per_lag;
            if b.check(t, written, committed, LAG) {
                paced_at = Some(t);
            }
        }
        // Held past 8 lags (141 kB) and past 256 KiB: paced within 0.8 s.
        let at = paced_at.expect("never seen as backlogged");
        assert!(at <= 800 * MS, "paced only at {} ms", at / MS);
        assert!(committed >= BACKLOG_MIN);
    }

    #[test]
    fn a_slow_stream_needs_the_floor_and_a_reset_takes_a_new_reference() {
        let mut b = BacklogCheck::new();
        assert!(!b.check(0, 0, 0, LAG));
        // 1 kB/s stream: 8 lags is 400 B, but under 256 KiB held is never
        // a backlog.
        assert!(!b.check(LAG, 50, BACKLOG_MIN - 1, LAG));
        assert!(b.check(2 * LAG, 100, BACKLOG_MIN, LAG));
        b.reset();
        assert!(b.due(2 * LAG + 1, LAG));
        assert!(!b.check(2 * LAG + 1, 100, 10 * BACKLOG_MIN, LAG));
    }
}
