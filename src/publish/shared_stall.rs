//! Stalls shared by many subscribers at once. When [`CROWD`] or more
//! subscribers would start pacing within [`CROWD_NS`] of each other, what
//! stopped them is their client's one thread (or its host) being away —
//! descheduled, in a GC pause, stopped — not each reader being slow: a
//! slow reader falls behind on its own schedule. Pacing them all would cut
//! every reader of that client to its drain-rate estimate, which a client
//! catching up on hundreds of sockets at once shows as half its stream
//! (issue 25: a 150 ms pause of the 500-reader client held its readers'
//! freshness p99 at ~1 s, where the raw forwarder and Redis were back in
//! 85 and 54 ms, and tickfan with the pacing off in 54 ms).
//!
//! So a subscriber whose pacing would start (or started, in the same
//! span, before the crowd was seen) during a shared stall, and that was
//! keeping up until then ([`was_keeping_up`]), is *spared*: it
//! stays unpaced for [`SPARE_NS`], its buffer conflating past its mark as
//! with no lag. One that then still stalls is paced as any other: a
//! subscriber is spared again only after it has caught up (its reader's
//! kernel and its own back under a few KiB, seen by the unpaced backlog
//! check), so a client too slow for all its readers is paced after one
//! spare, not spared for ever.
//!
//! Keeping up until then matters: a slow reader paced by the watch in its
//! first bytes, a few milliseconds before the other readers of its client
//! hiccuped together, was covered by their stall, spared, and filled its
//! receive buffer and its engine buffer for the spare's second: 6–7 s of
//! freshness for the 64 KiB/s readers (goal 2.4 s; 0.3 s at 50 symbols).
//! Measured when their pacing would start: readers that keep up had taken
//! 43–120 KB, 0.82–0.93 of what they were sent; the slow readers 14–19 KB
//! (their window hides up to ~20 KiB), 0.60–0.65. And a reader paced on
//! its own before is not spared until it shows it keeps up
//! ([`super::retrial::KeptUp::shows`]): let go by its trial on a flat
//! window, a slow reader's held estimate is rebased, and at its next stall
//! it looked as if it had taken 0.8 of its first 44 KB.
//!
//! A subscriber too early in its stream to tell ([`SPARE_TOOK`]) is paced
//! in a shared stall. If its trial then lets it go (its client was back
//! and it took what was outstanding), that pacing was its client's, not
//! its own ([`super::commit_budget::CommitBudget::crowded`]), and is not
//! held against a later spare: 11 of 100 readers of one client, paced so
//! at 23 KB and refused the spare at 71 KB, stayed paced for the rest of
//! the run (freshness p99 8.8 s). One its trial does not let go is as
//! slow as it looks.
//!
//! A paced subscriber let go by its trial from a pacing the stall covered
//! took what was outstanding once its client was back, and is let off the
//! watch and given the grace of the lag
//! ([`super::retrial::KeptUp::client_paused`]) — if it came back *with*
//! its client (not [`apart`]): the readers of a stopped client come back
//! together, one let go within [`BACK_NS`] of the last (or of the last of
//! the stall's spared readers seen to catch up:
//! [`SharedStall::caught_up`]). A slow
//! reader of another client, paced by the watch within [`CROWD_NS`] of
//! them, is let go by its waited trial only once its buffer is nearly
//! empty (its window rises only then), ~150 ms after them; taken for one
//! that only paused, it was not watched again and was paced only when a
//! write blocked with 93 KiB held and 105 KB in the engine: 50-symbol
//! readers' freshness p99 3.7–3.9 s in 2 of 3 runs (session 21). Apart
//! from its crowd, its trial ends and it stays paced, as one paced on its
//! own whose trial ran out: let go unpaced instead, the engine wrote it
//! 104 KB at once before its first blocked write paced it again (1,000
//! symbols: p99 2.35 s, session 22). When every other reader of the stall
//! was spared, none is let go by a trial; their catching up shows when
//! their client was back (a slow reader taken so for the first to come
//! back: 3.4–3.8 s, session 22), and until one of them has, their client
//! is away ([`ClientBack::Away`]): a reader whose window rises meanwhile
//! reads on its own, and is apart (3.4 and 4.0 s, session 26). One of the
//! same client, let go just before its spared readers are seen to catch
//! up, rejoins them when they are seen within [`BACK_NS`] and the
//! backlog check's lag.
//!
//! Apart is judged one reader at a time, so a client that comes back,
//! catches up on some of its readers and goes away again leaves the rest
//! of them to come back long after that first sign: [`CROWD`] readers
//! judged apart within [`BACK_NS`] of each other are a client, not slow
//! readers ([`SharedStall::came_back_apart`]), and they and the rest of
//! them are let go with it. (A client stopped 20 ms and then 100 ms had
//! 25 of its 100 readers let go at the first return and 37 judged apart
//! in the same millisecond 57 ms later; kept paced, their freshness p99
//! was 0.5–1.2 s in 2 of 6 runs, session 23.) Counted whichever stall
//! covered their pacing: its second stop made a new stall (its readers
//! blocked again after the first return), and 17 readers of the first
//! judged apart together stayed paced (1.45 s, session 24). The slow
//! readers this rule is for come back apart one or two at a time.
//!
//! The compromise (the issue lets the reader that keeps up win): a slow
//! reader that took its first [`SPARE_TOOK`] at full speed and then stalls
//! within another client's shared stall is spared once too, and fills up
//! to its kernel's receive buffer for at most [`SPARE_NS`] before it is
//! paced.
//!
//! ```text
//!  would-be starts:   |  |   | |        (CROWD within CROWD_NS)
//!                     ^ paced ^ spared, and the paced ones before it too
//!  a spared subscriber: no pacing for SPARE_NS; spared again only
//!                       once caught up
//! ```
//!
//! Pure: times are passed in. Single owner: the publisher thread.

/// Would-be pacing starts within [`CROWD_NS`] that make a shared stall.
pub const CROWD: usize = 4;
/// The span of a shared stall's would-be starts, and the most time between
/// two of them for the stall to go on.
pub const CROWD_NS: u64 = 50_000_000;
/// How long a spared subscriber is not paced (unless it catches up first):
/// the client's pause and its catch-up on every socket of its thread.
pub const SPARE_NS: u64 = 1_000_000_000;

/// The most time between two signs that a shared stall's client is back
/// (a reader it covered let go by its trial, a reader it spared caught up)
/// for the later one to be its client's too. The readers of a stopped
/// client came back within 2–6 ms of each other (spared ones seen to catch
/// up within the backlog check's lag); slow readers of another client paced
/// in the same stall 49 ms and 140–150 ms after the last of them.
pub const BACK_NS: u64 = 20_000_000;

/// Bytes a subscriber must have taken before its stall to be spared.
pub const SPARE_TOOK: u64 = 32 * 1024;

/// Whether a reader paced at `started_ns` in a shared stall, whose trial
/// would let it go at `now_ns`, comes back apart from its client: more
/// than [`BACK_NS`] after the last sign that the stall's client is back
/// (`back_ns`, [`SharedStall::back_ns`]; none yet: it may be the first),
/// counting signs from [`BACK_NS`] before its pacing on. The readers of a
/// stopped client come back one after another, within a few milliseconds
/// of each other as a rule, while their client catches up on every
/// socket. A sign well before its pacing is of an earlier hiccup (a
/// client starved of CPU stalls again and again, and the stall goes on
/// while its would-be starts keep coming: readers paced 46 ms after the
/// last sign and let go 3 ms later were taken for apart, session 22); one
/// just before it counts: two 64 KiB/s readers paced by the watch 3 ms
/// after the normal readers' client came back from its start-up stall
/// were let go with nothing held 220 ms later, as that client's first,
/// and written 95 KiB at once (p99 3.7–3.9 s, session 25).
///
/// With no sign yet, a reader let go may be the first of its client back,
/// unless the stall spared readers that have not caught up
/// ([`ClientBack::Away`]): their client is still away, and a reader whose
/// window rises meanwhile reads on its own. Two 64 KiB/s readers of
/// another client, paced by the watch 2 ms before the ten normal readers'
/// start-up stall was seen (nine of them spared), were let go 217 ms later
/// as its first back, 470 ms before the spared readers caught up, and
/// written 109 KB at once (p99 3.4 and 4.0 s, session 26).
pub fn apart(back: ClientBack, started_ns: u64, now_ns: u64) -> bool {
    match back {
        ClientBack::Unseen => false,
        ClientBack::Away => true,
        ClientBack::At(back) => {
            back >= started_ns.saturating_sub(BACK_NS) && now_ns.saturating_sub(back) > BACK_NS
        }
    }
}

/// What the last shared stall showed of its client's return, for
/// [`apart`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientBack {
    /// No sign yet, and no reader of it spared.
    Unseen,
    /// No sign yet, and readers it spared have not caught up: its client
    /// is still away.
    Away,
    /// The last sign (a reader let go with it, a spared one caught up), ns.
    At(u64),
}

impl ClientBack {
    /// The last sign, if one came.
    pub fn at(self) -> Option<u64> {
        match self {
            ClientBack::At(ns) => Some(ns),
            _ => None,
        }
    }
}

/// Whether a subscriber that was sent `written` bytes and took `took` of
/// them (written less its kernel's unacknowledged bytes and what its
/// reader holds) was keeping up until its stall: it took at least
/// [`SPARE_TOOK`] and two thirds of what it was sent. (At three quarters,
/// 20 of 100 readers of one client, holding 13 KB of their first 55 KB
/// when it hiccuped, 0.74, were paced and their p99 was 965 ms.)
pub fn was_keeping_up(written: u64, took: u64) -> bool {
    took >= SPARE_TOOK && 3 * u128::from(took) >= 2 * u128::from(written)
}

/// The times of the last [`CROWD`] events of one kind (a ring).
#[derive(Debug, Clone, Default)]
struct LastCrowd {
    times: [u64; CROWD],
    next: usize,
    seen: usize,
}

impl LastCrowd {
    /// An event at `now_ns`. Returns the oldest of the last [`CROWD`]
    /// once that many were seen.
    fn push(&mut self, now_ns: u64) -> Option<u64> {
        self.times[self.next] = now_ns;
        self.next = (self.next + 1) % CROWD;
        self.seen = (self.seen + 1).min(CROWD);
        // Full: `next` is the oldest.
        (self.seen == CROWD).then_some(self.times[self.next])
    }
}

/// The publisher's record of recent would-be pacing starts.
#[derive(Debug, Clone, Default)]
pub struct SharedStall {
    /// The last [`CROWD`] would-be starts.
    recent: LastCrowd,
    /// The last shared stall: its first and its latest would-be start.
    stall: Option<(u64, u64)>,
    /// When the last reader it covered came back with its client
    /// ([`Self::let_go`], [`Self::caught_up`]).
    back_ns: Option<u64>,
    /// It spared a reader ([`Self::spared`]).
    spared: bool,
    /// The last [`CROWD`] readers judged [`apart`], of this stall or an
    /// earlier one, and when the last crowd of them was
    /// ([`Self::came_back_apart`]).
    apart: LastCrowd,
    apart_crowd_ns: Option<u64>,
}

impl SharedStall {
    /// No would-be start seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A subscriber would start pacing at `now_ns`. Returns whether that
    /// is part of a shared stall (the caller spares it, if it may be).
    pub fn would_start(&mut self, now_ns: u64) -> bool {
        let oldest = self.recent.push(now_ns);
        if let Some((_, last)) = &mut self.stall {
            if now_ns.saturating_sub(*last) <= CROWD_NS {
                *last = now_ns;
                return true;
            }
        }
        match oldest {
            Some(oldest) if now_ns.saturating_sub(oldest) <= CROWD_NS => {
                self.stall = Some((oldest, now_ns));
                self.back_ns = None;
                self.spared = false;
                true
            }
            _ => false,
        }
    }

    /// Whether a pacing that started at `started_ns` was part of the last
    /// shared stall (it started before the crowd was seen).
    pub fn covers(&self, started_ns: u64) -> bool {
        self.stall
            .is_some_and(|(first, last)| (first..=last).contains(&started_ns))
    }

    /// What the last shared stall showed of its client's return ([`apart`]
    /// judges the next reader let go by it).
    pub fn back(&self) -> ClientBack {
        match self.back_ns {
            Some(at) => ClientBack::At(at),
            None if self.spared => ClientBack::Away,
            None => ClientBack::Unseen,
        }
    }

    /// A reader whose pacing the last shared stall covered (or would have)
    /// was spared: until one of them catches up, its client is away.
    pub fn spared(&mut self) {
        self.spared = true;
    }

    /// A reader whose pacing the last shared stall covered was let go by
    /// its trial at `now_ns`, with its client (not [`apart`]): its client
    /// is back.
    pub fn let_go(&mut self, now_ns: u64) {
        self.back_ns = Some(self.back_ns.map_or(now_ns, |back| back.max(now_ns)));
    }

    /// A reader whose pacing a shared stall covered (`covered`: the last
    /// one) was judged [`apart`] from its client at `now_ns`. Returns
    /// whether it is the last of [`CROWD`] so judged within [`BACK_NS`]:
    /// then they are a client coming back, not slow readers
    /// ([`Self::apart_crowd_ns`]: they, and the next judged so within
    /// [`BACK_NS`], are let go with it), and if the last stall covered
    /// it, that stall's client is back.
    pub fn came_back_apart(&mut self, now_ns: u64, covered: bool) -> bool {
        let Some(oldest) = self.apart.push(now_ns) else {
            return false;
        };
        if now_ns.saturating_sub(oldest) > BACK_NS {
            return false;
        }
        self.apart_crowd_ns = Some(now_ns);
        if covered {
            self.let_go(now_ns);
        }
        true
    }

    /// When the last [`CROWD`] readers judged [`apart`] within
    /// [`BACK_NS`] of each other were ([`Self::came_back_apart`]).
    pub fn apart_crowd_ns(&self) -> Option<u64> {
        self.apart_crowd_ns
    }

    /// A reader spared at `spared_ns` caught up at `now_ns` (it took what
    /// was outstanding): if the last shared stall covers that spare, its
    /// client is back.
    pub fn caught_up(&mut self, spared_ns: u64, now_ns: u64) {
        if self.covers(spared_ns) {
            self.let_go(now_ns);
        }
    }
}

/// One subscriber's part: whether it is spared now and whether it may be
/// spared (again).
#[derive(Debug, Clone, Default)]
pub struct Spare {
    /// Not paced until this time (ns; 0: not spared).
    until_ns: u64,
    /// When it was last spared (ns).
    taken_ns: u64,
    /// Spared since it last caught up.
    used: bool,
    /// Times spared.
    times: u64,
}

impl Spare {
    /// Never spared.
    pub const fn new() -> Self {
        Spare {
            until_ns: 0,
            taken_ns: 0,
            used: false,
            times: 0,
        }
    }

    /// Spared at `now_ns`: pacing may not start.
    #[inline]
    pub fn holds(&self, now_ns: u64) -> bool {
        now_ns < self.until_ns
    }

    /// It may be spared: never spared, or caught up since.
    pub fn may(&self) -> bool {
        !self.used
    }

    /// Spares it from `now_ns`.
    pub fn take(&mut self, now_ns: u64) {
        self.until_ns = now_ns + SPARE_NS;
        self.taken_ns = now_ns;
        self.used = true;
        self.times += 1;
    }

    /// Its reader caught up: the spare ends, and it may be spared again.
    pub fn caught_up(&mut self) {
        self.until_ns = 0;
        self.used = false;
    }

    /// Times it was spared.
    pub fn times(&self) -> u64 {
        self.times
    }

    /// When it was spared, if it has not caught up since.
    pub fn spared_at(&self) -> Option<u64> {
        self.used.then_some(self.taken_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn fewer_than_a_crowd_within_the_span_is_no_shared_stall() {
        let mut s = SharedStall::new();
        // Three at once, then the fourth just past the span of the first.
        for t in [0, MS, 2 * MS] {
            assert!(!s.would_start(t));
        }
        assert!(!s.would_start(CROWD_NS + MS));
        // Slow readers falling behind on their own schedules, 30 ms apart:
        // never four within 50 ms.
        let mut s = SharedStall::new();
        for i in 0..50 {
            assert!(!s.would_start(i * 30 * MS), "start {i}");
        }
        assert!(!s.covers(0) && !s.covers(30 * MS));
    }

    #[test]
    fn a_crowd_is_a_shared_stall_that_covers_its_first_starts_and_goes_on_while_they_come() {
        let mut s = SharedStall::new();
        assert!(!s.would_start(100 * MS));
        assert!(!s.would_start(110 * MS));
        assert!(!s.would_start(120 * MS));
        assert!(s.would_start(130 * MS), "the fourth within 50 ms");
        // The three paced before it was seen are covered; a start before
        // it is not.
        assert!(s.covers(100 * MS) && s.covers(110 * MS) && s.covers(130 * MS));
        assert!(!s.covers(99 * MS));
        // It goes on while would-be starts come within the span of the last…
        assert!(s.would_start(175 * MS));
        assert!(s.would_start(225 * MS));
        assert!(s.covers(200 * MS));
        // …and ends after a gap: a lone start later is no shared stall.
        assert!(!s.would_start(300 * MS));
        assert!(!s.covers(300 * MS));
        assert!(s.covers(225 * MS), "the last stall is still known");
    }

    #[test]
    fn a_new_crowd_after_a_gap_is_a_new_shared_stall() {
        let mut s = SharedStall::new();
        for t in [0, MS, 2 * MS, 3 * MS] {
            s.would_start(t);
        }
        assert!(s.covers(0));
        let t0 = 1_000 * MS;
        assert!(!s.would_start(t0));
        assert!(!s.would_start(t0 + MS));
        assert!(!s.would_start(t0 + 2 * MS));
        assert!(s.would_start(t0 + 3 * MS));
        assert!(s.covers(t0) && !s.covers(0));
    }

    #[test]
    fn a_reader_let_go_long_after_the_rest_of_its_stall_did_not_come_back_with_them() {
        // Measured (session 21): ten readers of a stopped client and two
        // 64 KiB/s readers of another paced within 8 ms of each other; the
        // ten let go 79–81 ms later, the two 220 ms later.
        let mut s = SharedStall::new();
        for t in [0, 0, 0, 0, 8 * MS, 8 * MS] {
            s.would_start(t);
        }
        assert!(s.covers(8 * MS));
        assert!(!apart(s.back(), 0, 79 * MS), "the first");
        for t in [79 * MS, 80 * MS, 81 * MS] {
            assert!(!apart(s.back(), 0, t), "back with its client at {t}");
            s.let_go(t);
        }
        assert!(apart(s.back(), 0, 228 * MS));
        // A client catching up on its sockets one after another: a chain.
        let mut chain = SharedStall::new();
        for t in [0, MS, 2 * MS, 3 * MS] {
            chain.would_start(t);
        }
        for i in 0..10 {
            let t = 80 * MS + i * 15 * MS;
            assert!(!apart(chain.back(), 0, t), "{i}");
            chain.let_go(t);
        }
        assert!(
            apart(chain.back(), 0, 215 * MS + BACK_NS + 1),
            "past the chain"
        );
        // A new stall starts afresh.
        for t in [2_000 * MS, 2_001 * MS, 2_002 * MS, 2_003 * MS] {
            s.would_start(t);
        }
        assert!(
            !apart(s.back(), 0, 2_300 * MS),
            "the first of the new stall"
        );
        // Paced well after the last sign: that sign was of an earlier
        // hiccup.
        s.let_go(2_300 * MS);
        assert!(!apart(s.back(), 2_346 * MS, 2_349 * MS));
        assert!(!apart(s.back(), 2_300 * MS + BACK_NS + 1, 2_349 * MS));
        assert!(apart(s.back(), 2_299 * MS, 2_349 * MS));
        // Paced just after it (session 25: two slow readers of another
        // client paced by the watch 3 ms after the normal readers' client
        // came back from its start-up stall, their trial over 220 ms
        // later): apart.
        assert!(apart(s.back(), 2_303 * MS, 2_523 * MS));
        assert!(apart(s.back(), 2_300 * MS + BACK_NS, 2_523 * MS));
    }

    #[test]
    fn a_crowd_of_readers_judged_apart_together_is_their_client_coming_back() {
        // Measured (session 23): 100 readers of one client stopped 20 ms,
        // then 100 ms; 62 paced at 0–3 ms, 25 of them let go at 4–6 ms,
        // 37 judged apart at 63 ms.
        let mut s = SharedStall::new();
        for t in [0, 0, 2 * MS, 3 * MS] {
            s.would_start(t);
        }
        s.let_go(6 * MS);
        for _ in 0..CROWD - 1 {
            assert!(apart(s.back(), 0, 63 * MS));
            assert!(!s.came_back_apart(63 * MS, true), "too few to tell");
        }
        assert!(apart(s.back(), 0, 63 * MS));
        assert!(s.came_back_apart(63 * MS, true), "the fourth: their client");
        assert_eq!(s.back(), ClientBack::At(63 * MS));
        assert_eq!(s.apart_crowd_ns(), Some(63 * MS));
        assert!(!apart(s.back(), 0, 63 * MS), "the rest are with it");
        // Two slow readers of another client, let go together 150 ms after
        // their crowd, and again later: never a crowd.
        let mut slow = SharedStall::new();
        for t in [0, 0, 0, 0] {
            slow.would_start(t);
        }
        slow.let_go(80 * MS);
        assert!(!slow.came_back_apart(230 * MS, true));
        assert!(!slow.came_back_apart(231 * MS, true));
        assert!(!slow.came_back_apart(600 * MS, true));
        assert!(
            !slow.came_back_apart(600 * MS + BACK_NS + 1, true),
            "four, but not within BACK_NS"
        );
        assert_eq!(slow.back(), ClientBack::At(80 * MS));
        assert_eq!(slow.apart_crowd_ns(), None);
        // Measured (session 24): the client's second stop made a new
        // stall (its readers let go at the first return blocked again),
        // and 17 readers of the first were judged apart together as it
        // came back: a crowd all the same, but no sign of the new stall.
        let mut s2 = SharedStall::new();
        for t in [0, 0, 0, 0] {
            s2.would_start(t);
        }
        s2.let_go(5 * MS);
        for t in [152 * MS, 152 * MS, 152 * MS, 154 * MS] {
            s2.would_start(t);
        }
        assert!(s2.covers(152 * MS) && !s2.covers(0), "a new stall");
        for _ in 0..CROWD - 1 {
            assert!(!s2.came_back_apart(170 * MS, false));
        }
        assert!(s2.came_back_apart(170 * MS, false));
        assert_eq!(s2.apart_crowd_ns(), Some(170 * MS));
        assert_eq!(
            s2.back(),
            ClientBack::Unseen,
            "the new stall's client: not seen back"
        );
    }

    #[test]
    fn a_stalls_spared_readers_catching_up_show_when_their_client_was_back() {
        // Measured (session 22): ten readers of one client spared in its
        // hiccup, two 64 KiB/s readers of another paced by the watch 3 ms
        // before them; the slow reader's waited trial let it go 214 ms
        // later, the first and only one let go.
        let mut s = SharedStall::new();
        for t in [0, 0, 3 * MS, 3 * MS, 3 * MS, 3 * MS] {
            s.would_start(t);
        }
        s.caught_up(3 * MS, 40 * MS);
        s.caught_up(3 * MS, 55 * MS);
        assert!(
            apart(s.back(), 0, 214 * MS),
            "long after its client was back"
        );
        assert!(!apart(s.back(), 0, 60 * MS), "soon after them: with them");
        // A spare the last stall does not cover says nothing of it.
        let mut s3 = SharedStall::new();
        for t in [100 * MS, 100 * MS, 101 * MS, 101 * MS] {
            s3.would_start(t);
        }
        s3.caught_up(5 * MS, 110 * MS);
        assert!(!apart(s3.back(), 0, 300 * MS), "the first to be let go");
    }

    #[test]
    fn a_stall_whose_spared_readers_have_not_caught_up_has_its_client_away() {
        // Measured (session 26): two 64 KiB/s readers of one client paced
        // by the watch 2 ms before the ten normal readers of another
        // stalled at start-up; nine of those spared, one paced. The slow
        // readers' windows rose 217 ms later, 470 ms before the first
        // spared reader caught up.
        let mut s = SharedStall::new();
        for t in [0, 0, 2 * MS, 2 * MS] {
            s.would_start(t);
        }
        assert_eq!(s.back(), ClientBack::Unseen);
        s.spared();
        assert_eq!(s.back(), ClientBack::Away);
        assert!(apart(s.back(), 0, 219 * MS), "its client is still away");
        // A spared reader caught up: the client is back from then.
        s.caught_up(2 * MS, 690 * MS);
        assert_eq!(s.back(), ClientBack::At(690 * MS));
        assert!(!apart(s.back(), 0, 700 * MS), "with them");
        // A new stall starts unseen again.
        for t in [2_000 * MS, 2_000 * MS, 2_001 * MS, 2_001 * MS] {
            s.would_start(t);
        }
        assert_eq!(s.back(), ClientBack::Unseen);
    }

    #[test]
    fn only_a_reader_that_took_most_of_its_stream_was_keeping_up() {
        // Readers of one client hiccuping together (measured).
        assert!(was_keeping_up(51_972, 51_972 - 9_216));
        assert!(was_keeping_up(76_834, 76_834 - 14_336));
        // The 64 KiB/s readers paced by the watch just before them.
        assert!(!was_keeping_up(23_264, 23_264 - 9_188));
        assert!(!was_keeping_up(29_325, 29_325 - 10_240));
        // 100 readers of one client holding 13 KB of their first 55 KB.
        assert!(was_keeping_up(55_587, 55_587 - 13_312 - 1_232));
        // Too little taken, whatever the share; or too small a share.
        assert!(!was_keeping_up(SPARE_TOOK - 1, SPARE_TOOK - 1));
        assert!(was_keeping_up(3 * SPARE_TOOK, 2 * SPARE_TOOK));
        assert!(!was_keeping_up(3 * SPARE_TOOK, 2 * SPARE_TOOK - 1));
        assert!(was_keeping_up(u64::MAX, u64::MAX), "no overflow");
    }

    #[test]
    fn a_spare_holds_for_its_time_and_is_given_again_only_after_catching_up() {
        let mut p = Spare::new();
        assert!(p.may() && !p.holds(0));
        p.take(10 * MS);
        assert!(p.holds(10 * MS) && p.holds(10 * MS + SPARE_NS - 1));
        assert!(!p.holds(10 * MS + SPARE_NS), "over after SPARE_NS");
        assert!(!p.may(), "not again before it caught up");
        p.caught_up();
        assert!(
            p.may() && !p.holds(20 * MS),
            "caught up: over, and may be again"
        );
        p.take(2_000 * MS);
        assert_eq!(p.times(), 2);
    }
}
