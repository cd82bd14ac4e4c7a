//! The capacity view of a lane: arrival rate, service rate, utilisation and
//! the projected time to drain its backlog, to hold against `--order-slo`.
//!
//! ```text
//!  every tick: (now, admitted, completed, busy, workers, depth) ──▶ Estimator::update ──▶ Estimate
//!    arrival  λ = EWMA(admitted / s)
//!    service  μ = EWMA(completed / s) ÷ EWMA(busy workers) × workers   (completions per busy
//!                 worker-second, times the workers: what the lane completes with all of them busy)
//!    util     = EWMA(busy workers) ÷ workers
//!    drain    = depth ÷ (μ − λ)   when μ > λ;   0 when nothing is queued;   "not draining" otherwise
//! ```
//!
//! Why μ is not simply the completion rate: below capacity the lane
//! completes exactly what arrives, so μ − λ would be ~0 and any momentary
//! backlog would look like it never drains. Completions per *busy*
//! worker-second measure how fast a worker serves (a wait for a bridge's
//! `max_inflight` permit counts as busy, so a venue at its limit slows μ
//! down as it should), and × workers is the lane's rate with every worker
//! busy. With `max_inflight` below the worker count the figure is exact
//! once the venues are saturated (the case a backlog is in); below that it
//! over-states μ, with nothing queued to drain.
//!
//! The per-worker speed is kept while the lane idles (below [`MIN_BUSY`]
//! busy workers on average there is too little to measure it by), so an
//! order arriving at an idle lane does not look like it never drains.
//!
//! Rates are exponentially weighted with time constant [`TAU`] over samples
//! on the engine clock (weight `1 − e^(−Δt/τ)` per sample), so the view
//! follows a load step within a few τ. Pure: no thread, no clock of its
//! own (tested on simulated time).

use std::time::Duration;

/// Time constant of the moving averages.
pub(crate) const TAU: Duration = Duration::from_millis(200);

/// Below this average of busy workers the per-worker speed is not
/// re-measured (too few completions to divide by).
const MIN_BUSY: f64 = 0.05;

/// One estimate.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Estimate {
    /// Orders admitted per second.
    pub arrival: f64,
    /// Orders completed per second with every worker busy.
    pub service: f64,
    /// Busy workers ÷ workers, 0..1.
    pub utilisation: f64,
    /// Seconds to drain the backlog; `None`: not draining.
    pub drain_s: Option<f64>,
}

/// The moving averages of one lane.
#[derive(Debug)]
pub(crate) struct Estimator {
    tau_s: f64,
    /// The previous sample: (now, admitted, completed).
    last: Option<(u64, u64, u64)>,
    arrival: f64,
    completion: f64,
    busy: f64,
    utilisation: f64,
    /// Completions per busy worker-second, as last measured (kept while
    /// the lane idles: an idle lane has not lost its speed); 0 until the
    /// first completions.
    per_worker: f64,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator::new(TAU)
    }
}

impl Estimator {
    /// An estimator with time constant `tau`.
    pub(crate) fn new(tau: Duration) -> Self {
        Estimator {
            tau_s: tau.as_secs_f64().max(1e-6),
            last: None,
            arrival: 0.0,
            completion: 0.0,
            busy: 0.0,
            utilisation: 0.0,
            per_worker: 0.0,
        }
    }

    /// Takes one sample: `admitted` and `completed` are running totals,
    /// `busy` and `workers` counts now, `depth` the orders queued now.
    pub(crate) fn update(
        &mut self,
        now_ns: u64,
        (admitted, completed): (u64, u64),
        (busy, workers): (usize, usize),
        depth: usize,
    ) -> Estimate {
        if let Some((t, a, c)) = self.last {
            let dt = now_ns.saturating_sub(t) as f64 / 1e9;
            if dt > 0.0 {
                let w = 1.0 - (-dt / self.tau_s).exp();
                let ewma = |avg: &mut f64, v: f64| *avg += w * (v - *avg);
                ewma(&mut self.arrival, admitted.saturating_sub(a) as f64 / dt);
                ewma(
                    &mut self.completion,
                    completed.saturating_sub(c) as f64 / dt,
                );
                ewma(&mut self.busy, busy as f64);
                ewma(
                    &mut self.utilisation,
                    if workers == 0 {
                        0.0
                    } else {
                        (busy as f64 / workers as f64).min(1.0)
                    },
                );
                if self.busy > MIN_BUSY {
                    self.per_worker = self.completion / self.busy;
                }
            } else {
                return self.estimate(workers, depth);
            }
        }
        self.last = Some((now_ns, admitted, completed));
        self.estimate(workers, depth)
    }

    fn estimate(&self, workers: usize, depth: usize) -> Estimate {
        let service = self.per_worker * workers as f64;
        let drain_s = if depth == 0 {
            Some(0.0)
        } else if service > self.arrival {
            Some(depth as f64 / (service - self.arrival))
        } else {
            None
        };
        Estimate {
            arrival: self.arrival,
            service,
            utilisation: self.utilisation,
            drain_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane of `workers` workers, each order taking `service_ms`, fed
    /// `rate(t)` orders per second, simulated in 1 ms steps and sampled
    /// every 10 ms. Returns the estimate at `probe_ms`, the time the
    /// backlog that stood then took to drain (first empty queue after it;
    /// `None`: not by `end_ms`), and the backlog at the probe.
    fn simulate(
        workers: usize,
        service_ms: f64,
        rate: impl Fn(u64) -> f64,
        probe_ms: u64,
        end_ms: u64,
    ) -> (Estimate, Option<f64>, f64) {
        let mut est = Estimator::default();
        let (mut queue, mut admitted, mut completed) = (0.0f64, 0.0f64, 0.0f64);
        let per_ms = workers as f64 / service_ms; // orders a full lane completes per ms
        let (mut at_probe, mut drained_at, mut depth_at_probe) = (None, None, 0.0);
        for t in 0..end_ms {
            let arrivals = rate(t) / 1_000.0;
            queue += arrivals;
            admitted += arrivals;
            let served = queue.min(per_ms);
            queue -= served;
            completed += served;
            let busy = ((served * service_ms).ceil() as usize).min(workers);
            if t % 10 == 0 {
                let e = est.update(
                    t * 1_000_000,
                    (admitted as u64, completed as u64),
                    (busy, workers),
                    queue as usize,
                );
                if t == probe_ms {
                    at_probe = Some(e);
                    depth_at_probe = queue;
                }
            }
            if t > probe_ms && drained_at.is_none() && queue < 1.0 {
                drained_at = Some(t);
            }
        }
        let drained = drained_at.map(|t| (t - probe_ms) as f64 / 1e3);
        (at_probe.expect("probed"), drained, depth_at_probe)
    }

    #[test]
    fn after_a_load_step_the_drain_estimate_is_within_20_percent_of_the_drain() {
        // 8 workers × 2 ms: 4,000 orders/s. 1k/s for 5 s, 5k/s for 5 s
        // (a backlog of ~5,000), then 1k/s: it drains at ~3,000/s.
        let rate = |t: u64| {
            if (5_000..10_000).contains(&t) {
                5_000.0
            } else {
                1_000.0
            }
        };
        // Probed 0.5 s after the step down (2.5 τ: the arrival average has
        // mostly followed the step).
        let (e, drained, depth) = simulate(8, 2.0, rate, 10_500, 20_000);
        let drained = drained.expect("the backlog drained");
        let est = e.drain_s.expect("draining after the step down");
        assert!(depth > 3_000.0, "a real backlog: {depth}");
        assert!(
            (est - drained).abs() <= 0.2 * drained,
            "estimate {est:.3}s vs drained in {drained:.3}s (arrival {:.0}/s, service {:.0}/s)",
            e.arrival,
            e.service
        );
        assert!((e.service - 4_000.0).abs() < 200.0, "service {}", e.service);
        assert!(e.utilisation > 0.95, "every worker busy: {}", e.utilisation);
    }

    #[test]
    fn over_capacity_is_not_draining_and_below_it_the_lane_drains_at_once() {
        let rate = |t: u64| if t >= 5_000 { 5_000.0 } else { 1_000.0 };
        let (e, _, _) = simulate(8, 2.0, rate, 7_000, 7_010);
        assert_eq!(e.drain_s, None, "5k/s into a 4k/s lane");
        assert!(e.arrival > 4_900.0, "{}", e.arrival);
        let mut est = Estimator::default();
        let calm = est.update(0, (0, 0), (0, 8), 0);
        assert_eq!(calm.drain_s, Some(0.0), "nothing queued: nothing to drain");
        // Below capacity: 1k/s served by 8 workers, 2 busy on average;
        // the service rate is the full lane's, not the completions.
        let mut e = Estimate::default();
        for i in 1..=300u64 {
            e = est.update(i * 10_000_000, (i * 10, i * 10), (2, 8), 3);
        }
        assert!((e.service - 4_000.0).abs() < 100.0, "{}", e.service);
        assert!((e.utilisation - 0.25).abs() < 0.01, "{}", e.utilisation);
        let d = e.drain_s.expect("draining");
        assert!((d - 3.0 / 3_000.0).abs() < 1e-3, "{d}");
        // Idle for a long while: the speed is remembered, so one order
        // arriving drains at once rather than "not draining".
        for i in 301..=1_300u64 {
            est.update(i * 10_000_000, (3_000, 3_000), (0, 8), 0);
        }
        let e = est.update(1_301 * 10_000_000, (3_001, 3_000), (0, 8), 1);
        assert!((e.service - 4_000.0).abs() < 100.0, "{}", e.service);
        assert!(e.drain_s.is_some_and(|d| d < 0.01), "{:?}", e.drain_s);
    }
}
