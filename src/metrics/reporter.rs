//! The reporter thread: merges the interval histograms handed over by every
//! recorder into exact, epoch-aligned intervals ([`IntervalWindow`]), prints
//! a short line per interval, and builds the final report.
//!
//! It is the only reader of the hand-off channel and the only writer of the
//! merged totals; it stops when every recorder has been dropped (the channel
//! disconnects), so the final report includes each thread's last interval.
//! Time is the engine clock ([`MonoClock`], shared with every recorder):
//! interval `k` is `[k·I, (k+1)·I)` since the engine's start.
//!
//! An interval is reported once every recorder has handed it in (within
//! microseconds of its end in a healthy engine) or when its grace period
//! ([`IntervalWindow::default_grace_ns`]) is over; the last interval of the
//! run is marked partial and carries its true, shorter length.
//!
//! With a [`HistogramLog`] (`--log-dir`), it also appends every interval's
//! merged histogram of each stage to a standard HdrHistogram interval log
//! (tag = stage name, start = `k·I` after the log's start time, which is the
//! engine's start). A write failure is logged once and the log is dropped;
//! the engine goes on.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use super::alerts::{AlertInputs, Alerts};
use super::counters::{Counters, CountersSnapshot};
use super::hlog::HistogramLog;
use super::intervals::{IntervalWindow, Released};
use super::recorder::{Handoff, RecorderLink};
use super::report::{FinalReport, StageSummary, SubscriberStats};
use super::stage::{new_histogram, Stage};
use crate::sys::clock::MonoClock;
use crate::sys::watch::Watch;

/// Merged totals, readable while the engine runs.
#[derive(Debug)]
pub struct Totals {
    hists: Mutex<Vec<Histogram<u64>>>,
}

impl Totals {
    fn new() -> Self {
        Totals {
            hists: Mutex::new(Stage::ALL.iter().map(|_| new_histogram()).collect()),
        }
    }

    /// Summary of every stage so far (as of the last hand-off).
    pub fn summaries(&self) -> Vec<StageSummary> {
        let h = self.hists.lock();
        Stage::ALL
            .iter()
            .map(|s| StageSummary::from_histogram(*s, &h[s.index()]))
            .collect()
    }

    /// A copy of one stage's merged histogram.
    pub fn histogram(&self, stage: Stage) -> Histogram<u64> {
        self.hists.lock()[stage.index()].clone()
    }
}

/// Where the reporter reads the live state it prints.
#[derive(Debug)]
pub(crate) struct ReporterInputs {
    /// Alerts evaluated every interval.
    pub alerts: Alerts,
    /// Every counter.
    pub counters: Arc<Counters>,
    /// Per-subscriber figures, refreshed by the publisher.
    pub subscribers: Arc<Mutex<Vec<SubscriberStats>>>,
    /// Print a line every interval (stderr).
    pub print_intervals: bool,
    /// Interval length.
    pub interval: Duration,
    /// Interval log to append each interval's merged histograms to; its
    /// start time should be the wall time of `clock`'s epoch.
    pub log: Option<HistogramLog>,
    /// The engine clock every recorder stamps its samples with.
    pub clock: MonoClock,
    /// The engine's thread watch (the reporter holds a death guard).
    pub watch: Arc<Watch>,
}

/// A running reporter.
#[derive(Debug)]
pub(crate) struct Reporter {
    handle: JoinHandle<FinalReport>,
    totals: Arc<Totals>,
}

/// Capacity of the recorder → reporter hand-off channel (and of the pool).
const HANDOFF_CAPACITY: usize = 256;

impl Reporter {
    /// Starts the reporter thread; returns it and the link every recorder clones.
    ///
    /// The reporter stops once the returned link and all its clones are dropped.
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub(crate) fn spawn(inputs: ReporterInputs) -> std::io::Result<(Reporter, RecorderLink)> {
        let interval_ns = (inputs.interval.as_nanos() as u64).max(1);
        let (link, rx, ptx) = RecorderLink::new(interval_ns, HANDOFF_CAPACITY);
        let totals = Arc::new(Totals::new());
        let t = Arc::clone(&totals);
        let lost = Arc::clone(&link.lost);
        let handle = std::thread::Builder::new()
            .name("tickfan-reporter".into())
            .spawn(move || {
                let _beat = inputs.watch.guard();
                run(rx, ptx, t, lost, inputs)
            })?;
        Ok((Reporter { handle, totals }, link))
    }

    /// Live merged totals.
    pub(crate) fn totals(&self) -> &Arc<Totals> {
        &self.totals
    }

    /// Waits for the reporter to finish (all recorders dropped) and returns the final report.
    pub(crate) fn finish(self) -> FinalReport {
        self.handle.join().unwrap_or_default()
    }
}

fn run(
    rx: Receiver<Handoff>,
    pool: Sender<Histogram<u64>>,
    totals: Arc<Totals>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    mut inputs: ReporterInputs,
) -> FinalReport {
    let clock = inputs.clock;
    let interval_ns = (inputs.interval.as_nanos() as u64).max(1);
    let mut win = IntervalWindow::new(interval_ns, IntervalWindow::default_grace_ns(interval_ns));
    let mut out = Emitter {
        log: inputs.log.take(),
        last: inputs.counters.snapshot(),
        last_at_ns: clock.now_ns(),
    };
    loop {
        let now = clock.now_ns();
        let wait = Duration::from_nanos(win.next_deadline_ns(now).saturating_sub(now));
        let mut next = match rx.recv_timeout(wait) {
            Ok(msg) => Some(msg),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // The time first, then everything already handed in (at most a
        // channel's worth): an interval is judged at `now` with every
        // hand-off sent before `now` taken, so a reporter that was itself
        // descheduled never counts a punctual thread as missing.
        let now = clock.now_ns();
        let mut taken = 0;
        while let Some(msg) = next {
            if let Handoff::Interval { hists, .. } = &msg {
                let mut t = totals.hists.lock();
                for (i, h) in hists.iter().enumerate() {
                    if let Some(h) = h {
                        let _ = t[i].add(h);
                    }
                }
            }
            for r in win.accept(msg) {
                out.emit(&r, &mut inputs, now);
                win.recycle(r);
            }
            taken += 1;
            next = if taken < HANDOFF_CAPACITY {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        while let Some(r) = win.poll(now) {
            out.emit(&r, &mut inputs, now);
            win.recycle(r);
        }
        for mut h in win.take_recycled() {
            h.reset();
            let _ = pool.try_send(h);
        }
    }
    let now = clock.now_ns();
    let end = win.last_bye_ns().unwrap_or(now);
    for r in win.finish(end) {
        out.emit(&r, &mut inputs, now);
    }
    FinalReport {
        elapsed_s: end as f64 / 1e9,
        stages: totals.summaries(),
        counters: inputs.counters.snapshot(),
        subscribers: inputs.subscribers.lock().clone(),
        late_samples: win.late_samples(),
        lost_samples: lost.load(std::sync::atomic::Ordering::Relaxed),
    }
}

/// Writes released intervals: the interval log, the alerts, the line.
struct Emitter {
    log: Option<HistogramLog>,
    /// Counters at the previous release (rates are per elapsed time between releases).
    last: CountersSnapshot,
    last_at_ns: u64,
}

impl Emitter {
    fn emit(&mut self, r: &Released, inputs: &mut ReporterInputs, now_ns: u64) {
        self.write_log(r);
        let snap = inputs.counters.snapshot();
        let secs = (now_ns.saturating_sub(self.last_at_ns) as f64 / 1e9).max(1e-9);
        {
            let subs = inputs.subscribers.lock();
            inputs.alerts.evaluate(&AlertInputs {
                now: &snap,
                before: &self.last,
                secs,
                subscribers: &subs,
            });
        }
        // Counts of repeating warnings held back past their interval.
        crate::logging::repeat::flush_due();
        if inputs.print_intervals {
            eprintln!("{}", interval_line(r, &snap, &self.last, secs));
            if let Some(line) = snap.orders.interval_line(&self.last.orders, secs) {
                eprintln!("{line}");
                // With the order line only: quiet while the order port saw nothing.
                if let Some(line) = snap.capacity.interval_line(&self.last.capacity) {
                    eprintln!("{line}");
                }
            }
        }
        self.last = snap;
        self.last_at_ns = now_ns;
    }

    fn write_log(&mut self, r: &Released) {
        let Some(log) = &mut self.log else { return };
        let since = Duration::from_nanos(r.start_ns);
        let length = Duration::from_nanos(r.length_ns);
        let result = Stage::ALL
            .iter()
            .filter_map(|s| r.hists[s.index()].as_ref().map(|h| (s, h)))
            .try_for_each(|(s, h)| log.append(s.as_str(), since, length, h))
            .and_then(|_| log.flush());
        if let Err(e) = result {
            log::warn!("{e}; no more histogram intervals will be written");
            self.log = None;
        }
    }
}

/// The line printed for one interval: its end on the engine clock (marked
/// `partial` with its length when cut short), rates since the previous
/// line, and the engine's end-to-end percentiles of exactly this interval.
pub(crate) fn interval_line(
    r: &Released,
    now: &CountersSnapshot,
    before: &CountersSnapshot,
    secs: f64,
) -> String {
    let end_s = (r.start_ns + r.length_ns) as f64 / 1e9;
    let when = if r.partial {
        format!("[{end_s:>7.1}s, partial {:.2}s]", r.length_ns as f64 / 1e9)
    } else {
        format!("[{end_s:>7.1}s]")
    };
    let e2e = match &r.hists[Stage::EngineE2e.index()] {
        Some(h) if !h.is_empty() => {
            let s = StageSummary::from_histogram(Stage::EngineE2e, h);
            format!(
                "engine e2e n {} p50 {:.1}µs p99 {:.1}µs max {:.1}µs",
                s.pct.count, s.pct.p50_us, s.pct.p99_us, s.pct.max_us
            )
        }
        _ => "engine e2e: no update".to_string(),
    };
    let mut line =
        format!(
        "{when} ticks {:>9.0}/s poison {} published {:>9.0}/s conflated {} subs {} slow {} | {e2e}",
        now.ticks_received.saturating_sub(before.ticks_received) as f64 / secs,
        now.poison_total.saturating_sub(before.poison_total),
        now.publish.published.saturating_sub(before.publish.published) as f64 / secs,
        now.publish.conflated.saturating_sub(before.publish.conflated),
        now.publish.subscribers_open,
        now.publish.slow_episodes.saturating_sub(before.publish.slow_episodes),
    );
    if r.incomplete {
        line.push_str(" | a thread missed this interval (its samples count as late)");
    }
    if r.late_samples > 0 {
        line.push_str(&format!(" | late samples {}", r.late_samples));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::recorder::StageHists;

    fn released(partial: bool, e2e_ns: &[u64], late: u64) -> Released {
        let mut hists: Box<StageHists> = Box::default();
        if !e2e_ns.is_empty() {
            let mut h = new_histogram();
            for v in e2e_ns {
                h.record(*v).unwrap();
            }
            hists[Stage::EngineE2e.index()] = Some(h);
        }
        Released {
            index: 20,
            start_ns: 20_000_000_000,
            length_ns: if partial { 400_000_000 } else { 1_000_000_000 },
            partial,
            incomplete: false,
            late_samples: late,
            hists,
        }
    }

    #[test]
    fn the_line_of_a_partial_interval_says_so_with_its_real_values() {
        let c = CountersSnapshot::default();
        let line = interval_line(&released(true, &[40_000, 50_000, 60_000], 0), &c, &c, 0.4);
        assert!(line.starts_with("[   20.4s, partial 0.40s]"), "{line}");
        assert!(line.contains("engine e2e n 3 p50 50.0µs"), "{line}");
        assert!(!line.contains("p50 0.0µs"), "{line}");
    }

    #[test]
    fn an_empty_interval_says_no_update_and_late_samples_are_shown() {
        let c = CountersSnapshot::default();
        let line = interval_line(&released(false, &[], 7), &c, &c, 1.0);
        assert!(line.starts_with("[   21.0s]"), "{line}");
        assert!(line.contains("engine e2e: no update"), "{line}");
        assert!(line.ends_with("late samples 7"), "{line}");
    }
}
