//! The reporter thread: merges the interval histograms handed over by every
//! recorder, prints a short line each interval, and builds the final report.
//!
//! It is the only reader of the hand-off channel and the only writer of the
//! merged totals; it stops when every recorder has been dropped (the channel
//! disconnects), so the final report includes each thread's last interval.
//!
//! With a [`HistogramLog`] (`--log-dir`), it also appends every interval's
//! merged histogram of each stage to a standard HdrHistogram interval log
//! (tag = stage name), the last partial interval included. A write failure
//! is logged once and the log is dropped; the engine goes on.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use parking_lot::Mutex;

use super::alerts::{AlertInputs, Alerts};
use super::counters::Counters;
use super::hlog::HistogramLog;
use super::recorder::{IntervalSample, RecorderLink};
use super::report::{FinalReport, StageSummary, SubscriberStats};
use super::stage::{new_histogram, Stage};

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
pub struct ReporterInputs {
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
    /// Interval log to append each interval's merged histograms to.
    pub log: Option<HistogramLog>,
}

/// A running reporter.
#[derive(Debug)]
pub struct Reporter {
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
    pub fn spawn(inputs: ReporterInputs) -> std::io::Result<(Reporter, RecorderLink)> {
        let (tx, rx) = crossbeam_channel::bounded(HANDOFF_CAPACITY);
        let (ptx, prx) = crossbeam_channel::bounded(HANDOFF_CAPACITY);
        let totals = Arc::new(Totals::new());
        let t = Arc::clone(&totals);
        let handle = std::thread::Builder::new()
            .name("tickfan-reporter".into())
            .spawn(move || run(rx, ptx, t, inputs))?;
        Ok((
            Reporter { handle, totals },
            RecorderLink {
                samples: tx,
                pool: prx,
            },
        ))
    }

    /// Live merged totals.
    pub fn totals(&self) -> &Arc<Totals> {
        &self.totals
    }

    /// Waits for the reporter to finish (all recorders dropped) and returns the final report.
    pub fn finish(self) -> FinalReport {
        self.handle.join().unwrap_or_default()
    }
}

fn run(
    rx: Receiver<IntervalSample>,
    pool: Sender<Histogram<u64>>,
    totals: Arc<Totals>,
    mut inputs: ReporterInputs,
) -> FinalReport {
    let start = Instant::now();
    let mut log = inputs.log.take().map(|l| IntervalWriter::new(l, start));
    let mut interval: Vec<Histogram<u64>> = Stage::ALL.iter().map(|_| new_histogram()).collect();
    let mut next_tick = start + inputs.interval;
    let mut last = inputs.counters.snapshot();
    let mut last_at = start;
    loop {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(mut s) => {
                let i = s.stage.index();
                let _ = interval[i].add(&s.hist);
                let _ = totals.hists.lock()[i].add(&s.hist);
                s.hist.reset();
                let _ = pool.try_send(s.hist);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(l) = &mut log {
                    l.write(&interval, Instant::now());
                }
                break;
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            if let Some(l) = &mut log {
                l.write(&interval, now);
            }
            let snap = inputs.counters.snapshot();
            let secs = now.duration_since(last_at).as_secs_f64().max(1e-9);
            {
                let subs = inputs.subscribers.lock();
                inputs.alerts.evaluate(&AlertInputs {
                    now: &snap,
                    before: &last,
                    secs,
                    subscribers: &subs,
                });
            }
            if inputs.print_intervals {
                let e2e = StageSummary::from_histogram(
                    Stage::EngineE2e,
                    &interval[Stage::EngineE2e.index()],
                );
                eprintln!(
                    "[{:>7.1}s] ticks {:>9.0}/s poison {} published {:>9.0}/s conflated {} subs {} slow {} | engine e2e p50 {:.1}µs p99 {:.1}µs max {:.1}µs",
                    now.duration_since(start).as_secs_f64(),
                    (snap.ticks_received - last.ticks_received) as f64 / secs,
                    snap.poison_total - last.poison_total,
                    (snap.published - last.published) as f64 / secs,
                    snap.conflated - last.conflated,
                    snap.subscriber_connections.2,
                    snap.slow_episodes - last.slow_episodes,
                    e2e.pct.p50_us,
                    e2e.pct.p99_us,
                    e2e.pct.max_us,
                );
                if let Some(line) = snap.orders.interval_line(&last.orders, secs) {
                    eprintln!("{line}");
                }
            }
            last = snap;
            last_at = now;
            for h in &mut interval {
                h.reset();
            }
            while next_tick <= now {
                next_tick += inputs.interval;
            }
        }
    }
    FinalReport {
        elapsed_s: start.elapsed().as_secs_f64(),
        stages: totals.summaries(),
        counters: inputs.counters.snapshot(),
        subscribers: inputs.subscribers.lock().clone(),
    }
}

/// Appends merged interval histograms to the interval log; gives up (one
/// warning) at the first failure.
struct IntervalWriter {
    log: Option<HistogramLog>,
    /// The reporter's start, which is the log's time zero.
    start: Instant,
    /// End of the previous interval written (the next one starts there).
    from: Instant,
}

impl IntervalWriter {
    fn new(log: HistogramLog, start: Instant) -> Self {
        IntervalWriter {
            log: Some(log),
            start,
            from: start,
        }
    }

    fn write(&mut self, interval: &[Histogram<u64>], now: Instant) {
        let Some(log) = &mut self.log else { return };
        let since = self.from.duration_since(self.start);
        let length = now.duration_since(self.from);
        self.from = now;
        let result = Stage::ALL
            .iter()
            .try_for_each(|s| log.append(s.as_str(), since, length, &interval[s.index()]))
            .and_then(|_| log.flush());
        if let Err(e) = result {
            log::warn!("{e}; no more histogram intervals will be written");
            self.log = None;
        }
    }
}
