//! Per-thread latency recorders.
//!
//! After HdrHistogram's recorder pattern: each thread owns the histograms of
//! the stages it measures and records into them with no lock and no
//! allocation. At each interval boundary the owning thread itself hands the
//! filled histograms to the reporter over a bounded channel and continues
//! with empty ones taken from a recycling pool, so the reporter never touches
//! a histogram while it is written.
//!
//! Bounded: the hand-off channel has a fixed capacity; when it is full the
//! thread keeps accumulating into the same histogram (nothing is lost, the
//! interval just gets longer).

use crossbeam_channel::{Receiver, Sender, TrySendError};
use hdrhistogram::Histogram;

use super::stage::{new_histogram, Stage};

/// One interval's worth of one stage, from one thread.
#[derive(Debug)]
pub struct IntervalSample {
    /// Which stage.
    pub stage: Stage,
    /// Values recorded since the previous hand-off.
    pub hist: Histogram<u64>,
}

/// The channels between recorders and the reporter.
#[derive(Debug, Clone)]
pub struct RecorderLink {
    /// Filled histograms, to the reporter.
    pub samples: Sender<IntervalSample>,
    /// Emptied histograms, back from the reporter.
    pub pool: Receiver<Histogram<u64>>,
}

/// A thread's own histograms. Single owner; not `Sync` by design of use.
#[derive(Debug)]
pub struct StageRecorder {
    hists: [Option<Histogram<u64>>; Stage::COUNT],
    link: RecorderLink,
    interval_ns: u64,
    next_flush_ns: u64,
}

impl StageRecorder {
    /// A recorder for `stages`, handing off every `interval_ns` of the owner's clock.
    pub fn new(stages: &[Stage], link: RecorderLink, interval_ns: u64) -> Self {
        let mut hists: [Option<Histogram<u64>>; Stage::COUNT] = Default::default();
        for s in stages {
            hists[s.index()] = Some(new_histogram());
        }
        StageRecorder {
            hists,
            link,
            interval_ns: interval_ns.max(1),
            next_flush_ns: interval_ns.max(1),
        }
    }

    /// Records one value (ns). A stage this recorder was not built for is ignored.
    #[inline]
    pub fn record(&mut self, stage: Stage, ns: u64) {
        if let Some(h) = &mut self.hists[stage.index()] {
            h.saturating_record(ns.max(1));
        }
    }

    /// Records `count` occurrences of one value (ns).
    #[inline]
    pub fn record_n(&mut self, stage: Stage, ns: u64, count: u64) {
        if let Some(h) = &mut self.hists[stage.index()] {
            h.saturating_record_n(ns.max(1), count);
        }
    }

    /// Nanoseconds (owner's clock) until the next hand-off is due; loops use
    /// it to bound how long they park.
    pub fn ns_until_flush(&self, now_ns: u64) -> u64 {
        self.next_flush_ns.saturating_sub(now_ns)
    }

    /// Hands off the histograms if the interval has elapsed. Returns true if it did.
    #[inline]
    pub fn maybe_flush(&mut self, now_ns: u64) -> bool {
        if now_ns < self.next_flush_ns {
            return false;
        }
        self.flush();
        self.next_flush_ns = now_ns + self.interval_ns;
        true
    }

    /// Hands off every non-empty histogram now (also called on thread exit).
    pub fn flush(&mut self) {
        for (i, slot) in self.hists.iter_mut().enumerate() {
            let Some(h) = slot else { continue };
            if h.is_empty() {
                continue;
            }
            let fresh = self
                .link
                .pool
                .try_recv()
                .unwrap_or_else(|_| new_histogram());
            let full = std::mem::replace(h, fresh);
            let sample = IntervalSample {
                stage: Stage::ALL[i],
                hist: full,
            };
            match self.link.samples.try_send(sample) {
                Ok(()) => {}
                Err(TrySendError::Full(s)) | Err(TrySendError::Disconnected(s)) => {
                    // Keep the values: merge them back (same bounds, cannot fail).
                    let _ = h.add(&s.hist);
                }
            }
        }
    }
}

impl Drop for StageRecorder {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(
        cap: usize,
    ) -> (
        RecorderLink,
        Receiver<IntervalSample>,
        Sender<Histogram<u64>>,
    ) {
        let (tx, rx) = crossbeam_channel::bounded(cap);
        let (ptx, prx) = crossbeam_channel::bounded(cap);
        (
            RecorderLink {
                samples: tx,
                pool: prx,
            },
            rx,
            ptx,
        )
    }

    #[test]
    fn hands_off_at_interval_and_on_drop() {
        let (l, rx, _ptx) = link(8);
        let mut r = StageRecorder::new(&[Stage::Publish], l, 1_000);
        r.record(Stage::Publish, 500);
        r.record(Stage::SlotWait, 500); // not this recorder's stage
        assert!(!r.maybe_flush(999));
        assert!(rx.try_recv().is_err());
        assert!(r.maybe_flush(1_000));
        let s = rx.try_recv().unwrap();
        assert_eq!((s.stage, s.hist.len()), (Stage::Publish, 1));
        r.record_n(Stage::Publish, 7, 3);
        drop(r);
        assert_eq!(rx.try_recv().unwrap().hist.len(), 3);
    }

    #[test]
    fn full_channel_keeps_values() {
        let (l, rx, _ptx) = link(1);
        let mut r = StageRecorder::new(&[Stage::Publish], l, 1);
        r.record(Stage::Publish, 1);
        r.flush();
        r.record(Stage::Publish, 2);
        r.flush(); // channel full: kept
        r.record(Stage::Publish, 3);
        assert_eq!(rx.try_recv().unwrap().hist.len(), 1);
        r.flush();
        assert_eq!(rx.try_recv().unwrap().hist.len(), 2);
    }
}
