//! A paced reader's way back to unpaced: the re-trial. A reader that keeps
//! up is paced when it pauses (its client thread was not scheduled for a
//! few milliseconds, or stopped for longer) and its trial ran out before it
//! read again; after that only its measured drain rate could free it, and
//! that rate can only rise as fast as the send cap lets it be shown
//! (×1.1 per window): seconds at 6 MB/s, and never when rate × lag stays
//! under the mark (a reader of 1.2 MB/s at 50 ms). Meanwhile it was
//! conflated: 0.6–2 s of freshness p99 for a reader that keeps up.
//!
//! So a paced reader that kept up before it was paced
//! ([`KEPT_UP_BYTES`]) and now *starves* — it took
//! all it was given (nothing held, at most a segment or two in flight or
//! waiting in the engine) while symbols were waiting, for
//! [`STARVED_WINDOWS`] measuring windows in a row — is offered
//! a burst of [`RETRIAL_BYTES`] on top of its budget. If it takes that
//! much within [`RETRIAL_NS`] it reads faster than anything the pacing
//! would allow it, and is unpaced; if not, it stays paced at the rate it had and
//! the next re-trial waits for a backoff that doubles from
//! [`BACKOFF_FIRST_NS`] to [`BACKOFF_MAX_NS`].
//!
//! The burst is larger than what a slow reader can swallow at once (a
//! client reading 64 KiB/s with a 16 KiB burst allowance takes ~19 KiB in
//! the re-trial, and the window hides the first 10–20 KiB it holds): a
//! failed re-trial costs such a reader up to ~20 KiB of backlog, 0.3 s at
//! 64 KiB/s, and cuts its rate estimate. That is why a reader that never
//! showed it keeps up gets none (measured: with re-trials for every paced
//! reader, 50-symbol readers at 64 KiB/s had freshness p99 1.8–1.9 s
//! instead of 0.27 s), and why failures back off.
//!
//! A reader that showed it keeps up also gets one re-trial as soon as the
//! trial of its pacing start runs out ([`Retrial::after_trial`]), whose
//! failure does not back off.
//!
//! ```text
//!   paced ──starved × 2──▶ re-trial: budget + 32 KiB ──32 KiB taken──▶ unpaced
//!     ▲                          │ not within 50 ms
//!     └─── backoff 0.25 s … 8 s ─┘
//! ```
//!
//! Pure (times and byte counts are passed in); single owner: the publisher
//! thread, through [`super::commit_budget::CommitBudget`].

/// Starved measuring windows in a row that start a re-trial.
pub const STARVED_WINDOWS: u32 = 2;
/// The burst a re-trial offers, bytes.
pub const RETRIAL_BYTES: usize = 32 * 1024;
/// How long a re-trial waits for its burst to be taken.
pub const RETRIAL_NS: u64 = 50_000_000;
/// Wait before the next re-trial after a first failed one.
pub const BACKOFF_FIRST_NS: u64 = 250_000_000;
/// Longest wait between re-trials.
pub const BACKOFF_MAX_NS: u64 = 8_000_000_000;

/// Bytes a reader must have taken while unpaced (at least half of what
/// was written to it) to be one that keeps up: a reader slow from its
/// first message is paced by the watch after 20–60 KB written, most of
/// them "taken" by its kernel (its 16 KiB burst allowance and the window's
/// blind zone), and never gets a re-trial, whose burst would cost it
/// ~0.3 s.
pub const KEPT_UP_BYTES: u64 = 64 * 1024;

/// Whether a reader showed it keeps up: while unpaced it took
/// [`KEPT_UP_BYTES`] in all, at least half of what was written to it then,
/// summed over its unpaced stretches (a reader that keeps up may be paced
/// and let go every few tens of KiB at its start). Sticky. Only such a
/// reader gets re-trials and, once blocked, the grace of the lag
/// ([`super::commit_budget::CommitBudget::blocked`]).
#[derive(Debug, Clone, Default)]
pub struct KeptUp {
    /// Bytes written and taken when pacing last ended (0, 0 at first).
    unpaced_at: (u64, u64),
    /// Bytes written and taken while unpaced, over all its stretches.
    sum: (u64, u64),
    proven: bool,
    /// It was paced at least once.
    paced_once: bool,
    /// Its trial let it go from a pacing its whole client caused.
    client_paused: bool,
}

impl KeptUp {
    /// Never paced, nothing shown.
    pub const fn new() -> Self {
        KeptUp {
            unpaced_at: (0, 0),
            sum: (0, 0),
            proven: false,
            paced_once: false,
            client_paused: false,
        }
    }

    /// Pacing starts with `written` bytes written and `took` taken: the
    /// stretch since pacing last ended counts.
    pub fn paced(&mut self, written: u64, took: u64) {
        let (w0, t0) = self.unpaced_at;
        self.sum.0 += written.saturating_sub(w0);
        self.sum.1 += took.saturating_sub(t0);
        let (w, t) = self.sum;
        self.proven |= t >= KEPT_UP_BYTES && 2 * t >= w;
        self.paced_once = true;
    }

    /// Pacing ended with `written` bytes written and `took` taken.
    pub fn unpaced(&mut self, written: u64, took: u64) {
        self.unpaced_at = (written, took);
    }

    /// It showed it keeps up.
    #[inline]
    pub fn proven(&self) -> bool {
        self.proven
    }

    /// It showed it keeps up, counting its unpaced stretch up to now
    /// (`written` bytes written, `took` taken), without recording it.
    pub fn shows(&self, written: u64, took: u64) -> bool {
        let (w0, t0) = self.unpaced_at;
        let w = self.sum.0 + written.saturating_sub(w0);
        let t = self.sum.1 + took.saturating_sub(t0);
        self.proven || (t >= KEPT_UP_BYTES && 2 * t >= w)
    }

    /// Its trial let it go from a pacing that a stall of its whole client
    /// covered: it took what was outstanding as soon as its client was
    /// back, so it only paused.
    pub fn client_paused(&mut self) {
        self.client_paused = true;
    }

    /// Its trial let it go from its client's pause ([`Self::client_paused`]).
    #[inline]
    pub fn was_client_paused(&self) -> bool {
        self.client_paused
    }

    /// It gets the grace of the lag once blocked, `written` bytes written:
    /// it showed it keeps up, took its `first` bytes without ever being
    /// paced, or was let go from its client's pause. (Without the last,
    /// 14 of 100 readers let go as their client came back from 80 ms away
    /// blocked 36 ms later, while the client caught up on every socket at
    /// once, were paced again holding 50 KiB and starved for the rest of
    /// the run: p99 4.8 s, session 20.)
    #[inline]
    pub fn grace(&self, written: u64, first: u64) -> bool {
        self.proven || self.client_paused || (written >= first && !self.paced_once)
    }
}

/// The re-trial state of one paced subscriber.
#[derive(Debug, Clone)]
pub struct Retrial {
    /// Starved measuring windows in a row.
    starved: u32,
    /// No re-trial before this time (ns).
    not_before_ns: u64,
    /// The wait after the next failure.
    backoff_ns: u64,
    /// While a re-trial runs: bytes appended (written + waiting in the
    /// engine buffer) and bytes the reader took when it began, and when it
    /// ends.
    running: Option<Running>,
}

/// A running re-trial.
#[derive(Debug, Clone, Copy)]
struct Running {
    appended: u64,
    drained: u64,
    until_ns: u64,
    /// Begun when a trial ran out ([`Retrial::after_trial`]): a failure
    /// leaves the backoff as it was.
    free: bool,
}

impl Default for Retrial {
    fn default() -> Self {
        Retrial::new()
    }
}

impl Retrial {
    /// No window seen, no re-trial yet.
    pub const fn new() -> Self {
        Retrial {
            starved: 0,
            not_before_ns: 0,
            backoff_ns: BACKOFF_FIRST_NS,
            running: None,
        }
    }

    /// A measuring window ended at `now_ns`, `starved` or not, with
    /// `appended` bytes appended so far and `drained` taken by the reader.
    /// Returns `true` when a re-trial begins (its burst is then allowed by
    /// [`Self::burst_left`]).
    pub fn window(&mut self, now_ns: u64, starved: bool, appended: u64, drained: u64) -> bool {
        self.starved = if starved { self.starved + 1 } else { 0 };
        if self.running.is_some() || self.starved < STARVED_WINDOWS || now_ns < self.not_before_ns {
            return false;
        }
        self.running = Some(Running {
            appended,
            drained,
            until_ns: now_ns + RETRIAL_NS,
            free: false,
        });
        self.starved = 0;
        true
    }

    /// The trial of a pacing start ran out at `now_ns` for a reader that
    /// showed it keeps up (`appended` bytes appended, `drained` taken):
    /// a re-trial begins at once, without waiting for starved windows,
    /// and its failure does not back off. Its client was away for longer
    /// than the trial but is back as a rule within the lag; waiting for
    /// two starved windows, each ending only on news from the reader, kept
    /// such readers paced 0.2 s at 10 readers × 50k ticks/s.
    pub fn after_trial(&mut self, now_ns: u64, appended: u64, drained: u64) {
        if self.running.is_none() {
            self.running = Some(Running {
                appended,
                drained,
                until_ns: now_ns + RETRIAL_NS,
                free: true,
            });
        }
    }

    /// Ends a running re-trial with no verdict (pacing ended otherwise).
    pub fn stop(&mut self) {
        self.running = None;
    }

    /// A re-trial runs.
    #[inline]
    pub fn running(&self) -> bool {
        self.running.is_some()
    }

    /// Bytes that may still be appended for the running re-trial's burst,
    /// `appended` bytes appended so far (0 when none runs).
    #[inline]
    pub fn burst_left(&self, appended: u64) -> usize {
        match self.running {
            Some(r) => RETRIAL_BYTES.saturating_sub(appended.saturating_sub(r.appended) as usize),
            None => 0,
        }
    }

    /// The running re-trial's verdict at `now_ns`, the reader having taken
    /// `drained` bytes so far: `Some(true)` once it took [`RETRIAL_BYTES`]
    /// since the re-trial began, `Some(false)` when its time ran out first
    /// (the next one waits for the backoff), `None` while it runs or when
    /// none does.
    ///
    /// A re-trial begun when the trial ran out passes only while the reader
    /// also holds nothing (`clear`): a stopped reader's held estimate
    /// decays (its window does not move), which reads as bytes taken.
    pub fn verdict(&mut self, now_ns: u64, drained: u64, clear: bool) -> Option<bool> {
        let r = self.running?;
        if drained.saturating_sub(r.drained) >= RETRIAL_BYTES as u64 && (clear || !r.free) {
            *self = Retrial::new();
            return Some(true);
        }
        if now_ns < r.until_ns {
            return None;
        }
        self.running = None;
        if r.free {
            return Some(false);
        }
        self.not_before_ns = now_ns + self.backoff_ns;
        self.backoff_ns = (self.backoff_ns * 2).min(BACKOFF_MAX_NS);
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const BURST: u64 = RETRIAL_BYTES as u64;

    #[test]
    fn a_reader_shows_it_keeps_up_over_its_unpaced_stretches_summed() {
        let mut k = KeptUp::new();
        assert!(
            k.grace(256 * 1024, 256 * 1024),
            "its first bytes taken unpaced"
        );
        assert!(!k.grace(1024, 256 * 1024));
        // Three stretches of 30 KB written, 25 KB taken each: none alone
        // shows it, the sum does.
        let (mut w, mut t) = (0, 0);
        for i in 0..3 {
            w += 30_000;
            t += 25_000;
            k.paced(w, t);
            assert_eq!(k.proven(), i == 2, "stretch {i}");
            k.unpaced(w, t);
        }
        assert!(k.grace(w, 256 * 1024));
    }

    #[test]
    fn a_reader_that_took_less_than_half_is_not_shown_to_keep_up() {
        let mut k = KeptUp::new();
        // A slow reader's kernel took 26 KB of 40 KB, then it held.
        k.paced(40_000, 26_000);
        k.unpaced(40_000, 30_000);
        k.paced(400_000, 120_000);
        assert!(!k.proven());
        assert!(!k.grace(400_000, 256 * 1024), "paced before: no grace");
    }

    #[test]
    fn a_retrial_after_the_trial_needs_no_starved_windows_and_its_failure_does_not_back_off() {
        let mut r = Retrial::new();
        r.after_trial(0, 1000, 900);
        assert!(r.running());
        assert_eq!(r.burst_left(1000), RETRIAL_BYTES);
        assert_eq!(r.verdict(RETRIAL_NS, 900, true), Some(false));
        // No backoff: two starved windows begin the next one at once.
        assert!(!r.window(RETRIAL_NS + 20 * MS, true, 2000, 900));
        assert!(r.window(RETRIAL_NS + 40 * MS, true, 2000, 900));
        assert_eq!(
            r.verdict(RETRIAL_NS + 41 * MS, 900 + BURST, true),
            Some(true)
        );
        // Taken at once: passed.
        let mut r = Retrial::new();
        r.after_trial(0, 0, 0);
        assert_eq!(r.verdict(MS, BURST, false), None, "it still holds bytes");
        assert_eq!(r.verdict(2 * MS, BURST, true), Some(true));
        assert!(!r.running());
    }

    #[test]
    fn two_starved_windows_in_a_row_begin_a_retrial() {
        let mut r = Retrial::new();
        assert!(!r.window(20 * MS, true, 0, 0));
        assert!(!r.window(40 * MS, false, 0, 0), "the row was broken");
        assert!(!r.window(60 * MS, true, 0, 0));
        assert!(r.window(80 * MS, true, 1000, 900));
        assert!(r.running());
        assert_eq!(r.burst_left(1000), RETRIAL_BYTES);
        assert_eq!(r.burst_left(1000 + 1024), RETRIAL_BYTES - 1024);
        assert_eq!(r.burst_left(1000 + 2 * BURST), 0);
        assert!(!r.window(100 * MS, true, 2000, 900), "one at a time");
    }

    #[test]
    fn a_reader_that_takes_the_whole_burst_passes() {
        let mut r = Retrial::new();
        r.window(20 * MS, true, 0, 0);
        r.window(40 * MS, true, 500, 400);
        assert_eq!(r.verdict(41 * MS, 400 + BURST - 1, true), None, "1 B short");
        assert_eq!(r.verdict(42 * MS, 400 + BURST, true), Some(true));
        assert!(!r.running());
        assert_eq!(r.burst_left(1 << 20), 0);
    }

    #[test]
    fn a_reader_that_takes_part_of_the_burst_fails_when_its_time_runs_out() {
        let mut r = Retrial::new();
        r.window(20 * MS, true, 0, 0);
        r.window(40 * MS, true, 0, 0);
        // A 64 KiB/s reader with a 16 KiB allowance: ~19 KiB in 50 ms.
        assert_eq!(r.verdict(40 * MS + RETRIAL_NS - 1, 19 * 1024, true), None);
        assert_eq!(
            r.verdict(40 * MS + RETRIAL_NS, 19 * 1024, true),
            Some(false)
        );
        assert!(!r.running());
        assert_eq!(r.burst_left(0), 0, "no burst after it");
    }

    #[test]
    fn failed_retrials_back_off_doubling_up_to_the_most() {
        let mut r = Retrial::new();
        let mut t = 0;
        let mut begun_at = Vec::new();
        for _ in 0..8 {
            // Starve until a re-trial begins, then let it run out.
            let begun = loop {
                t += 20 * MS;
                if r.window(t, true, 0, 0) {
                    break t;
                }
            };
            begun_at.push(begun);
            t = begun + RETRIAL_NS;
            assert_eq!(r.verdict(t, 10, true), Some(false));
        }
        // Each gap is the re-trial, the backoff and the windows to the next
        // starved pair (at most 40 ms on this 20 ms grid).
        let mut want = BACKOFF_FIRST_NS;
        for g in begun_at.windows(2).map(|w| w[1] - w[0]) {
            assert!(
                g >= want + RETRIAL_NS && g <= want + RETRIAL_NS + 60 * MS,
                "gap {g} ns, backoff {want} ns"
            );
            want = (want * 2).min(BACKOFF_MAX_NS);
        }
        assert_eq!(want, BACKOFF_MAX_NS, "reached the most");
    }

    #[test]
    fn a_pass_resets_the_backoff() {
        let mut r = Retrial::new();
        r.window(20 * MS, true, 0, 0);
        r.window(40 * MS, true, 0, 0);
        assert_eq!(r.verdict(40 * MS + RETRIAL_NS, 0, true), Some(false));
        let mut t = 40 * MS + RETRIAL_NS;
        while !r.window(t, true, 0, 0) {
            t += 20 * MS;
        }
        assert!(t >= 40 * MS + RETRIAL_NS + BACKOFF_FIRST_NS);
        assert_eq!(r.verdict(t + MS, BURST, true), Some(true));
        // The next one needs no wait.
        assert!(!r.window(t + 20 * MS, true, 0, 0));
        assert!(r.window(t + 40 * MS, true, 0, 0));
    }
}
