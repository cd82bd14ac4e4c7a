//! The order lanes' capacity view and worker counts, as gauges and counters.
//!
//! Single writer: the order path's scaler thread (`tickfan-order-scale`,
//! `order::lanes::pool`), which samples the lanes, decides scale steps and
//! estimates rates. Readers: the reporter (interval line, alerts), the admin
//! endpoint (`/metrics`, `/report`). Rates are stored as `f64` bits; a drain
//! time of [`NOT_DRAINING`] means the backlog is not shrinking (service ≤
//! arrival), which no finite time can say.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::model::lane::Lane;

use super::counters::set;

/// Drain time meaning "not draining" (service rate ≤ arrival rate with a backlog).
pub(crate) const NOT_DRAINING: u64 = u64::MAX;

/// Written by the scaler thread only; by [`Lane::index`].
#[derive(Debug, Default)]
pub struct CapacityCounters {
    /// Gauge: worker threads of the lane alive now.
    pub workers: [AtomicU64; 2],
    /// Gauge: workers of the lane holding an order now (sampled).
    pub busy: [AtomicU64; 2],
    /// Workers added (scale steps up).
    pub scale_up: [AtomicU64; 2],
    /// Workers retired (scale steps down).
    pub scale_down: [AtomicU64; 2],
    /// Gauge: orders admitted per second (EWMA), `f64` bits.
    pub arrival_rate: [AtomicU64; 2],
    /// Gauge: orders the lane's workers complete per second when all are
    /// busy (EWMA), `f64` bits.
    pub service_rate: [AtomicU64; 2],
    /// Gauge: busy workers ÷ workers (EWMA), `f64` bits.
    pub utilisation: [AtomicU64; 2],
    /// Gauge: projected time to drain the lane's backlog, µs; [`NOT_DRAINING`].
    pub drain_us: [AtomicU64; 2],
    /// Gauge: `--order-slo`, µs (0 until the order path starts).
    pub slo_us: AtomicU64,
}

impl CapacityCounters {
    /// Sets an `f64` gauge.
    pub(crate) fn set_f64(g: &AtomicU64, v: f64) {
        set(g, v.to_bits());
    }
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

fn get_f64(c: &AtomicU64) -> f64 {
    f64::from_bits(get(c))
}

/// One lane's capacity figures at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LaneCapacity {
    /// Worker threads alive.
    pub workers: u64,
    /// Workers holding an order (sampled).
    pub busy: u64,
    /// Scale steps up / down since start.
    pub scale_steps: (u64, u64),
    /// Orders admitted per second (EWMA).
    pub arrival_per_s: f64,
    /// Orders completed per second with every worker busy (EWMA).
    pub service_per_s: f64,
    /// Busy workers ÷ workers (EWMA), 0..1.
    pub utilisation: f64,
    /// Projected drain time of the backlog, seconds; `None`: not draining.
    pub drain_s: Option<f64>,
}

impl LaneCapacity {
    /// "0.12s" or "not draining".
    pub fn drain_text(&self) -> String {
        match self.drain_s {
            Some(s) => format!("{s:.2}s"),
            None => "not draining".to_string(),
        }
    }
}

/// A copy of the capacity group, for reports (`/report`, the final report).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CapacitySnapshot {
    /// By [`Lane::index`]: small, large.
    pub lanes: [LaneCapacity; 2],
    /// `--order-slo`, seconds (0 when the order path has not started).
    pub slo_s: f64,
}

impl Eq for CapacitySnapshot {}

impl CapacitySnapshot {
    /// Copies the group.
    pub fn take(c: &CapacityCounters) -> Self {
        let lane = |l: Lane| {
            let i = l.index();
            let drain = get(&c.drain_us[i]);
            LaneCapacity {
                workers: get(&c.workers[i]),
                busy: get(&c.busy[i]),
                scale_steps: (get(&c.scale_up[i]), get(&c.scale_down[i])),
                arrival_per_s: get_f64(&c.arrival_rate[i]),
                service_per_s: get_f64(&c.service_rate[i]),
                utilisation: get_f64(&c.utilisation[i]),
                drain_s: (drain != NOT_DRAINING).then(|| drain as f64 / 1e6),
            }
        };
        CapacitySnapshot {
            lanes: [lane(Lane::Small), lane(Lane::Large)],
            slo_s: get(&c.slo_us) as f64 / 1e6,
        }
    }

    /// Lanes whose projected drain time passes the SLO, with the figure.
    pub fn over_slo(&self) -> Vec<(Lane, String)> {
        if self.slo_s <= 0.0 {
            return Vec::new();
        }
        Lane::ALL
            .iter()
            .map(|l| (*l, self.lanes[l.index()]))
            .filter(|(_, c)| c.drain_s.is_none_or(|s| s > self.slo_s))
            .map(|(l, c)| (l, c.drain_text()))
            .collect()
    }

    /// The capacity line of one interval, or `None` before the order path started.
    pub fn interval_line(&self, last: &CapacitySnapshot) -> Option<String> {
        if self.slo_s <= 0.0 {
            return None;
        }
        let lane = |l: Lane| {
            let (c, b) = (self.lanes[l.index()], last.lanes[l.index()]);
            format!(
                "{} workers {} (+{} -{}) arrival {:.0}/s service {:.0}/s util {:.0}% drain {}",
                l.as_str(),
                c.workers,
                c.scale_steps.0 - b.scale_steps.0,
                c.scale_steps.1 - b.scale_steps.1,
                c.arrival_per_s,
                c.service_per_s,
                c.utilisation * 100.0,
                c.drain_text()
            )
        };
        Some(format!(
            "          capacity {} | {} | slo {:.2}s",
            lane(Lane::Small),
            lane(Lane::Large),
            self.slo_s
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_draining_survives_the_snapshot_and_passes_the_slo() {
        let c = CapacityCounters::default();
        set(&c.slo_us, 1_000_000);
        set(&c.workers[0], 3);
        set(&c.scale_up[0], 2);
        set(&c.drain_us[0], NOT_DRAINING);
        set(&c.drain_us[1], 250_000);
        CapacityCounters::set_f64(&c.arrival_rate[0], 1_500.0);
        let s = CapacitySnapshot::take(&c);
        assert_eq!(s.lanes[0].drain_s, None);
        assert_eq!(s.lanes[1].drain_s, Some(0.25));
        assert_eq!(s.over_slo(), vec![(Lane::Small, "not draining".into())]);
        let line = s.interval_line(&CapacitySnapshot::default()).unwrap();
        for part in [
            "small workers 3 (+2 -0) arrival 1500/s",
            "drain not draining",
            "large workers 0",
            "drain 0.25s",
            "slo 1.00s",
        ] {
            assert!(line.contains(part), "{part:?} in {line}");
        }
        assert_eq!(
            CapacitySnapshot::default().interval_line(&s),
            None,
            "no line before the order path"
        );
    }
}
