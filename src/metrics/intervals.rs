//! The reporter's window of open intervals: assembles the recorders'
//! hand-offs ([`Handoff`]) into exact intervals and releases them in order.
//!
//! Pure logic (no thread, no clock read): the reporter feeds it messages and
//! the engine clock's time, so tests drive it deterministically.
//!
//! # Rules
//!
//! - Interval `k` is `[k·I, (k+1)·I)` of the engine clock. A hand-off for
//!   interval `k` is merged into interval `k` and nowhere else.
//! - Interval `k` is released once every live recorder has moved past it
//!   (its latest hand-off's `next > k`, or it said goodbye), or once the
//!   grace period after its end has passed (`now ≥ (k+1)·I + grace`), so a
//!   thread stuck in a long call cannot hold the report back. Released in
//!   order, each exactly once; an interval with no sample is released empty,
//!   not skipped.
//! - **Late data**: a hand-off for an interval already released (its thread
//!   missed the grace period) is not merged into any other interval, so
//!   every released interval holds only its own samples. Its samples are
//!   counted ([`Released::late_samples`] of the next interval released, and
//!   [`IntervalWindow::late_samples`] in total); the reporter still adds
//!   them to the run's totals, so the final report misses nothing.
//! - **Bounded**: at most [`WINDOW`] intervals are open. A hand-off from
//!   further ahead releases the oldest ones first (they are past their
//!   grace period by then in any real run). Histograms are taken from the
//!   hand-offs themselves (the first one of a stage is kept, the others are
//!   added to it) and handed back for recycling after release.
//! - **End**: [`IntervalWindow::finish`] releases every interval up to the
//!   run's end; the last one is *partial* (its length is the time from its
//!   start to the end), so a reader never mistakes a 0.4 s tail for a full
//!   interval.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use super::recorder::{Handoff, StageHists};
#[cfg(test)]
use super::stage::Stage;

/// Most intervals kept open at once.
pub(crate) const WINDOW: usize = 64;

/// One released interval.
#[derive(Debug)]
pub(crate) struct Released {
    /// Its index `k` (the tests check the release order by it).
    #[cfg(test)]
    pub index: u64,
    /// Start (engine clock, ns): `k·I`.
    pub start_ns: u64,
    /// Length (ns): `I`, or less for the partial last interval.
    pub length_ns: u64,
    /// The last interval of the run, cut short by the end.
    pub partial: bool,
    /// Released by the grace deadline while some recorder had not handed it in.
    pub incomplete: bool,
    /// Samples of already-released intervals that arrived since the previous release.
    pub late_samples: u64,
    /// Merged histograms per stage (`None`: no sample).
    pub hists: Box<StageHists>,
}

impl Released {
    /// Samples of one stage in this interval.
    #[cfg(test)]
    pub(crate) fn count(&self, stage: Stage) -> u64 {
        self.hists[stage.index()].as_ref().map_or(0, |h| h.len())
    }
}

/// What the reporter knows of one recorder.
#[derive(Debug, Clone, Copy)]
struct Source {
    /// Every interval before this one is handed in.
    next: u64,
    /// Said goodbye.
    gone: bool,
}

/// The open intervals, oldest first. Single owner: the reporter thread.
#[derive(Debug)]
pub(crate) struct IntervalWindow {
    interval_ns: u64,
    grace_ns: u64,
    /// Index of `open[0]`: the oldest interval not released yet.
    first: u64,
    open: VecDeque<Box<StageHists>>,
    /// Indexed by recorder id (ids are dense; one per recording thread).
    sources: Vec<Option<Source>>,
    late_pending: u64,
    late_total: u64,
    /// Latest `Bye` time seen.
    last_bye_ns: Option<u64>,
    /// Histograms no longer needed, for the recorders' pool.
    recycle: Vec<Histogram<u64>>,
}

impl IntervalWindow {
    /// An empty window; `grace_ns` is how long after an interval's end a
    /// missing recorder is waited for.
    pub(crate) fn new(interval_ns: u64, grace_ns: u64) -> Self {
        IntervalWindow {
            interval_ns: interval_ns.max(1),
            grace_ns,
            first: 0,
            open: VecDeque::with_capacity(WINDOW),
            sources: Vec::new(),
            late_pending: 0,
            late_total: 0,
            last_bye_ns: None,
            recycle: Vec::new(),
        }
    }

    /// The grace period the reporter uses for `interval_ns`: half an
    /// interval, at least 100 ms (a descheduled thread on a busy host), at
    /// most 2 s.
    pub(crate) fn default_grace_ns(interval_ns: u64) -> u64 {
        (interval_ns / 2).clamp(100_000_000, 2_000_000_000)
    }

    /// Samples that arrived after their interval was released, so far.
    pub(crate) fn late_samples(&self) -> u64 {
        self.late_total
    }

    /// The latest time a recorder said it finished at.
    pub(crate) fn last_bye_ns(&self) -> Option<u64> {
        self.last_bye_ns
    }

    /// Index of the next interval to be released.
    #[cfg(test)]
    pub(crate) fn next_release(&self) -> u64 {
        self.first
    }

    /// Histograms to give back to the recorders' pool.
    pub(crate) fn take_recycled(&mut self) -> std::vec::Drain<'_, Histogram<u64>> {
        self.recycle.drain(..)
    }

    /// Takes one message. Returns intervals it forced out of a full window
    /// (empty in any normal run); the caller handles them like [`Self::poll`]'s.
    pub(crate) fn accept(&mut self, msg: Handoff) -> Vec<Released> {
        let mut forced = Vec::new();
        match msg {
            Handoff::Hello { source } => {
                if self.sources.len() <= source {
                    self.sources.resize(source + 1, None);
                }
                // It has nothing before the interval now open.
                self.sources[source] = Some(Source {
                    next: self.first,
                    gone: false,
                });
            }
            Handoff::Bye { source, at_ns } => {
                if let Some(Some(s)) = self.sources.get_mut(source) {
                    s.gone = true;
                }
                if let Some(t) = at_ns {
                    self.last_bye_ns = Some(self.last_bye_ns.map_or(t, |b| b.max(t)));
                }
            }
            Handoff::Interval {
                source,
                index,
                next,
                mut hists,
            } => {
                if let Some(Some(s)) = self.sources.get_mut(source) {
                    s.next = s.next.max(next);
                }
                if index < self.first {
                    let n: u64 = hists.iter().flatten().map(|h| h.len()).sum();
                    self.late_pending += n;
                    self.late_total += n;
                    self.recycle_all(&mut hists);
                    return forced;
                }
                while index >= self.first + WINDOW as u64 {
                    forced.push(self.release(false, self.interval_ns));
                }
                let slot = (index - self.first) as usize;
                while self.open.len() <= slot {
                    self.open.push_back(Box::default());
                }
                let target = &mut self.open[slot];
                for (into, from) in target.iter_mut().zip(hists.iter_mut()) {
                    let Some(h) = from.take() else { continue };
                    if h.is_empty() {
                        self.recycle.push(h);
                        continue;
                    }
                    match into {
                        None => *into = Some(h),
                        Some(t) => {
                            // Same bounds on both sides: cannot fail.
                            let _ = t.add(&h);
                            self.recycle.push(h);
                        }
                    }
                }
            }
        }
        forced
    }

    /// The next interval, if it is complete (every live recorder moved past
    /// it) or its grace period is over at `now_ns`.
    pub(crate) fn poll(&mut self, now_ns: u64) -> Option<Released> {
        let end = (self.first + 1).saturating_mul(self.interval_ns);
        let waiting = self
            .sources
            .iter()
            .flatten()
            .any(|s| !s.gone && s.next <= self.first);
        if now_ns < end {
            // Not over yet, whoever has moved on (a recorder never runs
            // ahead of the clock).
            return None;
        }
        let mut known = self.sources.iter().flatten().peekable();
        if known.peek().is_some() && known.all(|s| s.gone) {
            // Every recorder is gone: the run ended, perhaps inside this
            // interval; `finish` releases it with its true length.
            return None;
        }
        if !waiting {
            return Some(self.release(false, self.interval_ns));
        }
        if now_ns >= end.saturating_add(self.grace_ns) {
            return Some(self.release(true, self.interval_ns));
        }
        None
    }

    /// When [`Self::poll`] may next have something: the end of the oldest
    /// open interval, or its grace deadline once that has passed.
    pub(crate) fn next_deadline_ns(&self, now_ns: u64) -> u64 {
        let end = (self.first + 1).saturating_mul(self.interval_ns);
        if now_ns < end {
            end
        } else {
            end.saturating_add(self.grace_ns)
        }
    }

    /// The run ended at `end_ns`: every interval before it, the last one
    /// partial (none if the end falls exactly on a boundary). Data handed in
    /// for later intervals (clock skew between threads' last reads) is
    /// folded into the last one.
    pub(crate) fn finish(&mut self, end_ns: u64) -> Vec<Released> {
        let mut out = Vec::new();
        let last = end_ns / self.interval_ns;
        while self.first < last {
            out.push(self.release(false, self.interval_ns));
        }
        // Fold anything beyond the end into the partial interval.
        while self.open.len() > 1 {
            let mut extra = self.open.pop_back().expect("len > 1");
            let first = &mut self.open[0];
            for (into, from) in first.iter_mut().zip(extra.iter_mut()) {
                let Some(h) = from.take() else { continue };
                match into {
                    None => *into = Some(h),
                    Some(t) => {
                        let _ = t.add(&h);
                        self.recycle.push(h);
                    }
                }
            }
        }
        let length = end_ns - last * self.interval_ns;
        let has_data = self
            .open
            .front()
            .is_some_and(|h| h.iter().flatten().any(|h| !h.is_empty()));
        if length > 0 || has_data {
            let mut r = self.release(false, length.max(1));
            r.partial = true;
            out.push(r);
        }
        out
    }

    fn release(&mut self, incomplete: bool, length_ns: u64) -> Released {
        let hists = self.open.pop_front().unwrap_or_default();
        let index = self.first;
        self.first += 1;
        Released {
            #[cfg(test)]
            index,
            start_ns: index.saturating_mul(self.interval_ns),
            length_ns,
            partial: false,
            incomplete,
            late_samples: std::mem::take(&mut self.late_pending),
            hists,
        }
    }

    /// Gives a released interval's histograms back for recycling.
    pub(crate) fn recycle(&mut self, mut r: Released) {
        self.recycle_all(&mut r.hists);
    }

    fn recycle_all(&mut self, hists: &mut StageHists) {
        for h in hists.iter_mut().filter_map(Option::take) {
            self.recycle.push(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::recorder::{RecorderLink, StageRecorder};

    const I: u64 = 1_000_000_000; // 1 s

    /// Two recorders (feed, publisher) on a shared injected clock, a window fed from their link.
    struct Rig {
        rx: crossbeam_channel::Receiver<Handoff>,
        win: IntervalWindow,
        out: Vec<Released>,
    }

    impl Rig {
        fn new() -> (Rig, RecorderLink) {
            let (link, rx, _pool) = RecorderLink::new(I, 256);
            (
                Rig {
                    rx,
                    win: IntervalWindow::new(I, IntervalWindow::default_grace_ns(I)),
                    out: Vec::new(),
                },
                link,
            )
        }

        fn pump(&mut self, now: u64) {
            for m in self.rx.try_iter().collect::<Vec<_>>() {
                let forced = self.win.accept(m);
                self.out.extend(forced);
            }
            while let Some(r) = self.win.poll(now) {
                self.out.push(r);
            }
        }

        fn counts(&self, stage: Stage) -> Vec<(u64, u64)> {
            self.out.iter().map(|r| (r.index, r.count(stage))).collect()
        }
    }

    #[test]
    fn samples_at_known_times_land_in_known_intervals() {
        let (mut rig, link) = Rig::new();
        let mut feed = StageRecorder::new(&[Stage::FeedParse], link.clone());
        let mut publ = StageRecorder::new(&[Stage::EngineE2e], link);
        rig.pump(0);
        // 3 samples in 0, 1 in 1 (just after the boundary, before any flush
        // call), 2 at the very end of 2.
        for t in [10, 500_000_000, I - 1] {
            feed.record_span(Stage::FeedParse, t.saturating_sub(5), t);
            publ.record_span(Stage::EngineE2e, t.saturating_sub(5), t);
        }
        rig.pump(I - 1);
        assert!(rig.out.is_empty(), "nothing released before its end");
        feed.record_span(Stage::FeedParse, I - 3, I);
        publ.maybe_flush(I + 2);
        rig.pump(I + 2);
        assert_eq!(rig.counts(Stage::FeedParse), vec![(0, 3)]);
        assert_eq!(rig.counts(Stage::EngineE2e), vec![(0, 3)]);
        assert!(!rig.out[0].incomplete);
        feed.record_span(Stage::FeedParse, 3 * I - 9, 3 * I - 1);
        feed.record_span(Stage::FeedParse, 3 * I - 9, 3 * I - 1);
        feed.maybe_flush(3 * I);
        publ.maybe_flush(3 * I + 5);
        rig.pump(3 * I + 5);
        assert_eq!(
            rig.counts(Stage::FeedParse),
            vec![(0, 3), (1, 1), (2, 2)],
            "each interval once, in order, the empty one included"
        );
        assert_eq!(rig.counts(Stage::EngineE2e), vec![(0, 3), (1, 0), (2, 0)]);
        for (k, r) in rig.out.iter().enumerate() {
            assert_eq!((r.start_ns, r.length_ns), (k as u64 * I, I));
        }
    }

    #[test]
    fn an_idle_thread_that_wakes_late_does_not_shift_intervals() {
        let (mut rig, link) = Rig::new();
        let mut feed = StageRecorder::new(&[Stage::FeedParse], link.clone());
        let mut idle = StageRecorder::new(&[Stage::OrderE2e], link);
        let late = 300_000_000; // within the grace period
        for k in 0..4u64 {
            if k != 2 {
                // Interval 2: no tick at all.
                feed.record_span_n(Stage::FeedParse, k * I + 10, k * I + 20, 10 + k);
            }
            feed.maybe_flush((k + 1) * I);
            rig.pump((k + 1) * I + 1);
            assert_eq!(rig.out.len() as u64, k, "waits for the idle thread");
            idle.maybe_flush((k + 1) * I + late);
            rig.pump((k + 1) * I + late);
        }
        assert_eq!(
            rig.counts(Stage::FeedParse),
            vec![(0, 10), (1, 11), (2, 0), (3, 13)]
        );
        assert!(rig.out.iter().all(|r| !r.incomplete && r.late_samples == 0));
        // A thread that sleeps through intervals declares them in one
        // hand-off: the feed thread parks from 4 to 6.7.
        feed.maybe_flush(6 * I + 700_000_000);
        idle.maybe_flush(7 * I);
        rig.pump(7 * I);
        let idx: Vec<u64> = rig.out.iter().map(|r| r.index).collect();
        assert_eq!(idx, (0..6).collect::<Vec<_>>(), "6 is still the feed's");
        feed.maybe_flush(7 * I + 1);
        rig.pump(7 * I + 1);
        assert_eq!(rig.out.last().map(|r| r.index), Some(6));
        assert!(rig.out.iter().all(|r| !r.incomplete));
    }

    #[test]
    fn a_late_hand_off_is_counted_not_misfiled() {
        let (mut rig, link) = Rig::new();
        let mut feed = StageRecorder::new(&[Stage::FeedParse], link.clone());
        let mut stuck = StageRecorder::new(&[Stage::OrderProcess], link);
        feed.record_span(Stage::FeedParse, 5, 10);
        stuck.record_span(Stage::OrderProcess, 0, 20);
        feed.maybe_flush(I);
        rig.pump(I + 1);
        assert!(rig.out.is_empty(), "waits for the stuck recorder");
        let grace = IntervalWindow::default_grace_ns(I);
        rig.pump(I + grace);
        assert_eq!(rig.out.len(), 1);
        assert!(rig.out[0].incomplete);
        assert_eq!(rig.out[0].count(Stage::OrderProcess), 0);
        // The stuck thread returns in interval 1 with interval 0's sample,
        // and records a sample in interval 1 too.
        stuck.record_span(Stage::OrderProcess, 0, I + 7);
        feed.maybe_flush(2 * I);
        stuck.maybe_flush(2 * I);
        rig.pump(2 * I + 1);
        assert_eq!(rig.out.len(), 2);
        let r1 = &rig.out[1];
        assert_eq!(r1.index, 1);
        assert_eq!(r1.count(Stage::OrderProcess), 1, "only its own sample");
        assert_eq!(r1.late_samples, 1);
        assert_eq!(rig.win.late_samples(), 1);
    }

    #[test]
    fn the_last_interval_is_partial_with_its_real_values() {
        let (mut rig, link) = Rig::new();
        let mut publ = StageRecorder::new(&[Stage::EngineE2e], link);
        publ.record_span(Stage::EngineE2e, I / 2, I / 2 + 1_000);
        publ.record_span(Stage::EngineE2e, 2 * I + 1, 2 * I + 40_000);
        publ.finish(2 * I + 400_000_000);
        drop(publ);
        rig.pump(2 * I + 400_000_001);
        assert!(rig.out.is_empty(), "every recorder gone: finish decides");
        let end = rig.win.last_bye_ns().unwrap();
        assert_eq!(end, 2 * I + 400_000_000);
        let tail = rig.win.finish(end);
        assert_eq!(tail.len(), 3);
        assert_eq!(tail[0].count(Stage::EngineE2e), 1);
        assert!(!tail[0].partial && !tail[1].partial);
        assert_eq!(tail[1].count(Stage::EngineE2e), 0);
        let last = &tail[2];
        assert!(last.partial);
        assert_eq!(
            (last.index, last.start_ns, last.length_ns),
            (2, 2 * I, 400_000_000)
        );
        let h = last.hists[Stage::EngineE2e.index()].as_ref().unwrap();
        assert_eq!(h.len(), 1);
        assert!(h.equivalent(h.max(), 39_999));
    }

    #[test]
    fn the_window_is_bounded() {
        let mut win = IntervalWindow::new(I, 0);
        win.accept(Handoff::Hello { source: 0 });
        let far = WINDOW as u64 + 5;
        let forced = win.accept(Handoff::Interval {
            source: 0,
            index: far,
            next: far + 1,
            hists: Box::default(),
        });
        assert_eq!(forced.len(), 6);
        assert_eq!(forced[0].index, 0);
        assert_eq!(win.next_release(), 6);
        assert!(win.open.len() <= WINDOW);
    }
}
