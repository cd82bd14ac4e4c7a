//! Per-thread latency recorders with exact, epoch-aligned intervals.
//!
//! After HdrHistogram's recorder pattern: each thread owns the histograms of
//! the stages it measures and records into them with no lock and no
//! allocation. The owning thread itself hands filled histograms to the
//! reporter over a bounded channel and continues with empty ones taken from
//! a recycling pool, so the reporter never touches a histogram while it is
//! written.
//!
//! # Intervals
//!
//! Time is the engine's monotonic clock (nanoseconds since the engine's
//! start, shared by every thread). Interval `k` is `[k·I, (k+1)·I)`. Every
//! sample is recorded with the time it was taken (the end of the span it
//! measures, [`StageRecorder::record_span`]), and the recorder switches
//! histograms *before* recording a sample at or past the cached boundary:
//! one comparison on the hot path. So a sample taken during interval `k`
//! lands in interval `k`'s histogram even when the thread only gets round to
//! the hand-off later, and a thread that wakes late (parked, descheduled)
//! hands off the interval it had open with its true index and declares the
//! intervals it slept through empty.
//!
//! Each hand-off ([`Handoff::Interval`]) carries the interval index `k` and
//! the index of the interval the recorder moved to, so the reporter knows
//! that this recorder has nothing more for any interval before it.
//!
//! Timestamps given to one recorder must not go backwards (they are reads of
//! one monotonic clock by one thread); a sample stamped before the open
//! interval is counted into the open interval.
//!
//! # Bounds
//!
//! The hand-off channel has a fixed capacity. When it is full, the closed
//! interval waits in the recorder's own backlog (at most [`HELD`] intervals,
//! retried at each boundary check) so it keeps its index; past that, the
//! oldest held interval is dropped and its samples are counted in
//! [`RecorderLink::lost`] (reported in the final report), never silently.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use hdrhistogram::Histogram;

use super::stage::{new_histogram, Stage};

/// Histograms of one interval, one slot per stage (`None`: no sample).
pub(crate) type StageHists = [Option<Histogram<u64>>; Stage::COUNT];

/// Intervals a recorder keeps while the hand-off channel is full.
pub(crate) const HELD: usize = 16;

/// How long a starting or finishing recorder waits for room in the channel
/// (the reporter drains it continuously; this only bounds a stuck one).
const RETIRE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A message from a recorder to the reporter. Per recorder, messages arrive
/// in the order they were sent (one channel, one sender per recorder).
#[derive(Debug)]
pub(crate) enum Handoff {
    /// A recorder exists (sent by its constructor, before any sample): the
    /// reporter waits for it from now on.
    Hello {
        /// The recorder's id.
        source: usize,
    },
    /// Interval `index` of one recorder.
    Interval {
        /// The recorder's id.
        source: usize,
        /// Which interval (`[index·I, (index+1)·I)` of the engine clock).
        index: u64,
        /// The recorder now records into interval `next` (> `index`): it has
        /// nothing for `index+1 .. next`.
        next: u64,
        /// Samples of the interval, per stage.
        hists: Box<StageHists>,
    },
    /// The recorder is gone (after its last interval): stop waiting for it.
    Bye {
        /// The recorder's id.
        source: usize,
        /// Its clock when it finished, if known (the end of its last,
        /// partial interval).
        at_ns: Option<u64>,
    },
}

/// The channels between recorders and the reporter, and what they share.
#[derive(Debug, Clone)]
pub(crate) struct RecorderLink {
    /// Hand-offs, to the reporter.
    pub samples: Sender<Handoff>,
    /// Emptied histograms, back from the reporter.
    pub pool: Receiver<Histogram<u64>>,
    /// Interval length (ns), the reporter's.
    pub interval_ns: u64,
    /// Next recorder id.
    pub ids: Arc<AtomicUsize>,
    /// Samples dropped because a recorder's backlog overflowed.
    pub lost: Arc<AtomicU64>,
}

impl RecorderLink {
    /// A link and the reporter's ends of it: the hand-off receiver and the
    /// pool sender. Both channels hold `capacity` messages.
    pub(crate) fn new(
        interval_ns: u64,
        capacity: usize,
    ) -> (RecorderLink, Receiver<Handoff>, Sender<Histogram<u64>>) {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let (ptx, prx) = crossbeam_channel::bounded(capacity);
        (
            RecorderLink {
                samples: tx,
                pool: prx,
                interval_ns: interval_ns.max(1),
                ids: Arc::new(AtomicUsize::new(0)),
                lost: Arc::new(AtomicU64::new(0)),
            },
            rx,
            ptx,
        )
    }
}

/// A thread's own histograms. Single owner (the recording thread).
#[derive(Debug)]
pub(crate) struct StageRecorder {
    hists: Box<StageHists>,
    /// Which stages this recorder measures (others are ignored).
    stages: [bool; Stage::COUNT],
    link: RecorderLink,
    id: usize,
    interval_ns: u64,
    /// Index of the open interval.
    index: u64,
    /// `(index + 1) · interval_ns`: the first time that belongs to the next interval.
    next_boundary_ns: u64,
    /// Closed intervals the full channel did not take yet (≤ [`HELD`]).
    held: VecDeque<Handoff>,
    finished: bool,
}

impl StageRecorder {
    /// A recorder for `stages`; interval length and epoch are the link's.
    /// Announces itself to the reporter (waits for room in the channel, at
    /// most a bounded time: this runs once per thread at start).
    pub(crate) fn new(stages: &[Stage], link: RecorderLink) -> Self {
        let mut on = [false; Stage::COUNT];
        for s in stages {
            on[s.index()] = true;
        }
        let id = link.ids.fetch_add(1, Ordering::Relaxed);
        let _ = link
            .samples
            .send_timeout(Handoff::Hello { source: id }, RETIRE_WAIT);
        let interval_ns = link.interval_ns;
        StageRecorder {
            hists: Box::default(),
            stages: on,
            link,
            id,
            interval_ns,
            index: 0,
            next_boundary_ns: interval_ns,
            held: VecDeque::with_capacity(HELD),
            finished: false,
        }
    }

    /// Records one span `start_ns → end_ns` (engine clock) of `stage`, as a
    /// sample taken at `end_ns`. A stage this recorder was not built for is
    /// ignored.
    #[inline]
    pub(crate) fn record_span(&mut self, stage: Stage, start_ns: u64, end_ns: u64) {
        self.record_span_n(stage, start_ns, end_ns, 1);
    }

    /// Records `count` samples of `(end_ns − start_ns) / count` each, taken
    /// at `end_ns` (a batch of `count` items processed in one span).
    #[inline]
    pub(crate) fn record_span_n(&mut self, stage: Stage, start_ns: u64, end_ns: u64, count: u64) {
        let ns = end_ns.saturating_sub(start_ns) / count.max(1);
        self.record_n_at(stage, ns, count, end_ns);
    }

    /// Records `count` samples of `ns` each, taken at `at_ns` (engine clock).
    #[inline]
    pub(crate) fn record_n_at(&mut self, stage: Stage, ns: u64, count: u64, at_ns: u64) {
        if at_ns >= self.next_boundary_ns {
            self.roll(at_ns);
        }
        if count == 0 || !self.stages[stage.index()] {
            return;
        }
        let h = self.hists[stage.index()].get_or_insert_with(|| {
            self.link
                .pool
                .try_recv()
                .unwrap_or_else(|_| new_histogram())
        });
        h.saturating_record_n(ns.max(1), count);
    }

    /// Nanoseconds until the next interval boundary (shorter while closed
    /// intervals wait to be handed off); loops use it to bound how long
    /// they park, so an idle thread still hands off at the boundary.
    pub(crate) fn ns_until_flush(&self, now_ns: u64) -> u64 {
        let until = self.next_boundary_ns.saturating_sub(now_ns);
        if self.held.is_empty() {
            until
        } else {
            until.min(10_000_000)
        }
    }

    /// Hands off the open interval if `now_ns` is past its end (and retries
    /// held ones). Returns true if an interval was closed.
    #[inline]
    pub(crate) fn maybe_flush(&mut self, now_ns: u64) -> bool {
        if now_ns >= self.next_boundary_ns {
            self.roll(now_ns);
            return true;
        }
        if !self.held.is_empty() {
            self.send_held();
        }
        false
    }

    /// The index of the interval samples go to now.
    #[cfg(test)]
    pub(crate) fn open_interval(&self) -> u64 {
        self.index
    }

    /// Closes the open interval, moving to the one holding `now_ns`.
    #[cold]
    fn roll(&mut self, now_ns: u64) {
        let next = now_ns / self.interval_ns;
        let msg = Handoff::Interval {
            source: self.id,
            index: self.index,
            next,
            hists: std::mem::take(&mut self.hists),
        };
        self.index = next;
        self.next_boundary_ns = (next + 1).saturating_mul(self.interval_ns);
        self.send_held();
        if self.held.is_empty() {
            match self.link.samples.try_send(msg) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(m)) => self.hold(m),
            }
        } else {
            self.hold(msg);
        }
    }

    fn hold(&mut self, msg: Handoff) {
        if self.held.len() == HELD {
            if let Some(Handoff::Interval { hists, .. }) = self.held.pop_front() {
                let n: u64 = hists.iter().flatten().map(|h| h.len()).sum();
                self.link.lost.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.held.push_back(msg);
    }

    fn send_held(&mut self) {
        while let Some(m) = self.held.pop_front() {
            match self.link.samples.try_send(m) {
                Ok(()) => {}
                Err(TrySendError::Disconnected(_)) => self.held.clear(),
                Err(TrySendError::Full(m)) => {
                    self.held.push_front(m);
                    return;
                }
            }
        }
    }

    /// The thread is done: hands off the open interval (partial, ending at
    /// `now_ns`) and retires. Waits (bounded) for room in the channel:
    /// the reporter drains until every recorder is gone. Later samples are
    /// ignored.
    pub(crate) fn finish(&mut self, now_ns: u64) {
        self.retire(Some(now_ns));
    }

    fn retire(&mut self, at_ns: Option<u64>) {
        if self.finished {
            return;
        }
        self.finished = true;
        if let Some(now) = at_ns {
            if now >= self.next_boundary_ns {
                self.roll(now);
            }
        }
        let last = Handoff::Interval {
            source: self.id,
            index: self.index,
            next: self.index + 1,
            hists: std::mem::take(&mut self.hists),
        };
        self.stages = [false; Stage::COUNT];
        self.next_boundary_ns = u64::MAX;
        let mut msgs = self.held.drain(..).chain([
            last,
            Handoff::Bye {
                source: self.id,
                at_ns,
            },
        ]);
        for m in msgs.by_ref() {
            if let Err(e) = self.link.samples.send_timeout(m, RETIRE_WAIT) {
                // The reporter is gone or stuck: count what cannot be delivered.
                let undelivered = std::iter::once(e.into_inner()).chain(msgs);
                let n: u64 = undelivered
                    .map(|m| match m {
                        Handoff::Interval { hists, .. } => {
                            hists.iter().flatten().map(|h| h.len()).sum()
                        }
                        _ => 0,
                    })
                    .sum();
                self.link.lost.fetch_add(n, Ordering::Relaxed);
                break;
            }
        }
    }
}

impl Drop for StageRecorder {
    fn drop(&mut self) {
        self.retire(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intervals(rx: &Receiver<Handoff>) -> Vec<(u64, u64, u64)> {
        rx.try_iter()
            .filter_map(|m| match m {
                Handoff::Interval {
                    index, next, hists, ..
                } => Some((
                    index,
                    next,
                    hists.iter().flatten().map(|h| h.len()).sum::<u64>(),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_sample_lands_in_the_interval_of_its_timestamp() {
        let (l, rx, _ptx) = RecorderLink::new(1_000, 64);
        let mut r = StageRecorder::new(&[Stage::Publish], l);
        assert!(matches!(rx.try_recv(), Ok(Handoff::Hello { source: 0 })));
        r.record_span(Stage::Publish, 100, 500);
        r.record_span(Stage::SlotWait, 100, 500); // not this recorder's stage
        r.record_span(Stage::Publish, 900, 999);
        assert!(!r.maybe_flush(999));
        assert!(rx.try_recv().is_err());
        // Recorded after the boundary, before any flush call: interval 1.
        r.record_span(Stage::Publish, 990, 1_001);
        assert_eq!(intervals(&rx), vec![(0, 1, 2)]);
        assert!(!r.maybe_flush(1_500));
        assert!(r.maybe_flush(2_000));
        assert_eq!(intervals(&rx), vec![(1, 2, 1)]);
    }

    #[test]
    fn a_late_wake_hands_off_with_the_true_index_and_skips_empties() {
        let (l, rx, _ptx) = RecorderLink::new(1_000, 64);
        let mut r = StageRecorder::new(&[Stage::FeedParse], l);
        r.record_span_n(Stage::FeedParse, 2_000, 2_300, 3);
        assert_eq!(r.ns_until_flush(2_300), 700);
        // Parked until 5.5 intervals: one message closes 2 and declares 3, 4 empty.
        assert!(r.maybe_flush(5_500));
        assert_eq!(intervals(&rx), vec![(0, 2, 0), (2, 5, 3)]);
        assert_eq!(r.open_interval(), 5);
    }

    #[test]
    fn finish_hands_off_the_partial_interval_and_says_bye() {
        let (l, rx, _ptx) = RecorderLink::new(1_000, 64);
        let mut r = StageRecorder::new(&[Stage::Publish], l);
        r.record_span(Stage::Publish, 1_000, 1_200);
        r.finish(1_400);
        r.record_span(Stage::Publish, 1_000, 1_500); // ignored
        drop(r);
        let msgs: Vec<Handoff> = rx.try_iter().collect();
        assert!(matches!(msgs[0], Handoff::Hello { .. }));
        assert!(matches!(
            msgs[1],
            Handoff::Interval {
                index: 0,
                next: 1,
                ..
            }
        ));
        match &msgs[2] {
            Handoff::Interval {
                index: 1,
                next: 2,
                hists,
                ..
            } => assert_eq!(hists[Stage::Publish.index()].as_ref().unwrap().len(), 1),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            msgs[3],
            Handoff::Bye {
                at_ns: Some(1_400),
                ..
            }
        ));
        assert_eq!(msgs.len(), 4, "drop after finish sends nothing more");
    }

    #[test]
    fn a_full_channel_holds_intervals_in_order_then_counts_losses() {
        let (l, rx, _ptx) = RecorderLink::new(10, 1);
        let lost = Arc::clone(&l.lost);
        let mut r = StageRecorder::new(&[Stage::Publish], l);
        assert!(matches!(rx.try_recv(), Ok(Handoff::Hello { .. })));
        // Interval k holds k+1 samples; the channel takes one message.
        for k in 0..(HELD as u64 + 3) {
            r.record_span_n(Stage::Publish, k * 10, k * 10 + 1, k + 1);
        }
        assert!(r.ns_until_flush(0) <= 10_000_000);
        let first = intervals(&rx); // the one message the channel held
        assert_eq!(first.len(), 1);
        // Drain one at a time: the held intervals come in order.
        let mut seen = first;
        while r.maybe_flush(0) || !rx.is_empty() {
            seen.extend(intervals(&rx));
        }
        let idx: Vec<u64> = seen.iter().map(|x| x.0).collect();
        assert!(idx.windows(2).all(|w| w[0] < w[1]), "{idx:?}");
        let dropped: u64 = (0..(HELD as u64 + 2))
            .filter(|k| !idx.contains(k))
            .map(|k| k + 1)
            .sum();
        assert!(dropped > 0);
        assert_eq!(lost.load(Ordering::Relaxed), dropped);
    }
}
