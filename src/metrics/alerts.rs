//! Alerts: warnings raised *before* a bound is reached.
//!
//! Evaluated by the reporter once per report interval from the counters and
//! the per-subscriber figures. Each alert is logged once when it starts and
//! once when it clears (never once per event), and its state is a gauge
//! (1 = active) that `/metrics` exports as `tickfan_alert{name="…"}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::counters::CountersSnapshot;
use super::report::SubscriberStats;

/// The alerts the engine raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Alert {
    /// Symbols interned reached `pct`% of `--max-symbols` (new symbols will be dead-lettered soon).
    SymbolsNearLimit,
    /// The publisher's dirty queue holds `pct`% of its capacity (the publisher is falling behind).
    DirtyQueueHigh,
    /// Feed or subscriber connections reached `pct`% of `--max-conns`.
    ConnectionsNearLimit,
    /// A subscriber's oldest missed symbol is older than the staleness threshold.
    SubscriberStale,
    /// Dead letters arrive faster than the rate threshold.
    DlqGrowth,
    /// The order queue holds `pct`% of its capacity (SYSTEM_BUSY rejects come next).
    OrderQueueHigh,
    /// The oldest queued order waited longer than the age threshold.
    OrderQueueOld,
    /// A bridge call has been in progress longer than the threshold (a
    /// venue that does not answer holds its worker; see `order::venue (bridge calls)`).
    BridgeCallSlow,
    /// The order journal holds `pct`% of `--journal-max-bytes` (SYSTEM_BUSY journal_full comes next).
    JournalFull,
    /// A lane's projected backlog drain time passes `--order-slo`, or its
    /// backlog is not draining (`order::lanes::capacity`).
    OrderDrainOverSlo,

    /// A symbol's source sent nothing for `--stale-after` (its value is flagged stale).
    FeedSilent,
    /// The order journal's disk is full, or was found full since the last
    /// evaluation: new orders get SYSTEM_BUSY journal_full until a probe
    /// finds room (`order::journal::disk_full`).
    JournalDiskFull,
}

impl Alert {
    /// Number of alerts.
    pub const COUNT: usize = 12;
    /// Every alert, in gauge-index order.
    pub const ALL: [Alert; Alert::COUNT] = [
        Alert::SymbolsNearLimit,
        Alert::DirtyQueueHigh,
        Alert::ConnectionsNearLimit,
        Alert::SubscriberStale,
        Alert::DlqGrowth,
        Alert::OrderQueueHigh,
        Alert::OrderQueueOld,
        Alert::BridgeCallSlow,
        Alert::JournalFull,
        Alert::OrderDrainOverSlo,
        Alert::FeedSilent,
        Alert::JournalDiskFull,
    ];

    /// Stable snake-case name (log lines, metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Alert::SymbolsNearLimit => "symbols_near_limit",
            Alert::DirtyQueueHigh => "dirty_queue_high",
            Alert::ConnectionsNearLimit => "connections_near_limit",
            Alert::SubscriberStale => "subscriber_stale",
            Alert::DlqGrowth => "dlq_growth",
            Alert::OrderQueueHigh => "order_queue_high",
            Alert::OrderQueueOld => "order_queue_old",
            Alert::BridgeCallSlow => "bridge_call_slow",
            Alert::JournalFull => "journal_full",
            Alert::OrderDrainOverSlo => "order_drain_over_slo",

            Alert::FeedSilent => "feed_silent",
            Alert::JournalDiskFull => "journal_disk_full",
        }
    }
}

/// Thresholds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlertLimits {
    /// Fraction of a bound that raises its alert (default 0.8).
    pub fill_ratio: f64,
    /// Configured maximum symbols.
    pub max_symbols: u64,
    /// Configured maximum connections per port.
    pub max_conns: u64,
    /// Subscriber staleness that raises `subscriber_stale`.
    pub staleness: Duration,
    /// Dead letters per second that raise `dlq_growth`.
    pub dlq_per_sec: f64,
    /// Order queue capacity per lane (small, large): `order_queue_high`
    /// starts when either lane's queue is near its bound.
    pub order_queue_capacity: [u64; 2],
    /// Oldest queued order age that raises `order_queue_old`.
    pub order_age: Duration,
    /// Age of the oldest bridge call in progress that raises `bridge_call_slow`.
    pub bridge_call: Duration,
}

/// Alert gauges, written by the reporter (single writer), read by `/metrics`.
#[derive(Debug, Default)]
pub struct AlertGauges {
    active: [AtomicU64; Alert::COUNT],
    /// Times each alert started: an alert that started and cleared between
    /// two scrapes still shows (`tickfan_alert_starts_total`).
    starts: [AtomicU64; Alert::COUNT],
}

impl AlertGauges {
    /// Whether `a` is active now.
    pub fn is_active(&self, a: Alert) -> bool {
        self.active[a as usize].load(Ordering::Relaxed) == 1
    }

    /// How many times `a` has started.
    pub fn starts(&self, a: Alert) -> u64 {
        self.starts[a as usize].load(Ordering::Relaxed)
    }
}

/// What one evaluation reads.
#[derive(Debug, Clone, Copy)]
pub struct AlertInputs<'a> {
    /// Counters now.
    pub now: &'a CountersSnapshot,
    /// Counters at the previous evaluation.
    pub before: &'a CountersSnapshot,
    /// Seconds between the two.
    pub secs: f64,
    /// Subscriber figures now.
    pub subscribers: &'a [SubscriberStats],
}

/// A start or a clear.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// Which alert.
    pub alert: Alert,
    /// True when it started, false when it cleared.
    pub active: bool,
    /// The figure that decided, for the log line.
    pub detail: String,
}

/// The evaluator: remembers which alerts are active.
#[derive(Debug)]
pub struct Alerts {
    limits: AlertLimits,
    gauges: Arc<AlertGauges>,
}

impl Alerts {
    /// An evaluator with every alert clear.
    pub fn new(limits: AlertLimits) -> Self {
        Alerts {
            limits,
            gauges: Arc::new(AlertGauges::default()),
        }
    }

    /// The gauges, for `/metrics`.
    pub fn gauges(&self) -> &Arc<AlertGauges> {
        &self.gauges
    }

    /// Evaluates every alert; logs and returns the transitions.
    pub fn evaluate(&mut self, i: &AlertInputs<'_>) -> Vec<Transition> {
        let l = &self.limits;
        let n = i.now;
        let near = |v: u64, bound: u64| bound > 0 && v as f64 >= l.fill_ratio * bound as f64;
        let stalest = i
            .subscribers
            .iter()
            .filter(|s| s.connected)
            .map(|s| s.staleness_us)
            .max()
            .unwrap_or(0);
        let dlq_rate = (n.dlq.stored + n.feed.dlq_handoff_dropped)
            .saturating_sub(i.before.dlq.stored + i.before.feed.dlq_handoff_dropped)
            as f64
            / i.secs.max(1e-9);
        let conns = n.feed.connections_open.max(n.publish.subscribers_open);
        let in_bridge = n.orders.gateway.bridge_calls_in_progress;
        let over_slo = n.capacity.over_slo();
        let checks: [(Alert, bool, String); Alert::COUNT] = [
            (
                Alert::SymbolsNearLimit,
                near(n.feed.symbols, l.max_symbols),
                format!("{} of {} symbols", n.feed.symbols, l.max_symbols),
            ),
            (
                Alert::DirtyQueueHigh,
                near(n.publish.dirty_depth, l.max_symbols),
                format!(
                    "{} of {} symbols waiting for the publisher",
                    n.publish.dirty_depth, l.max_symbols
                ),
            ),
            (
                Alert::ConnectionsNearLimit,
                near(conns, l.max_conns),
                format!("{conns} of {} connections on one port", l.max_conns),
            ),
            (
                Alert::SubscriberStale,
                stalest > micros(l.staleness),
                format!("stalest subscriber {:.3} s behind", stalest as f64 / 1e6),
            ),
            (
                Alert::DlqGrowth,
                dlq_rate > l.dlq_per_sec,
                format!("{dlq_rate:.0} dead letters/s"),
            ),
            (
                Alert::OrderQueueHigh,
                near(n.orders.lane_depth.0, l.order_queue_capacity[0])
                    || near(n.orders.lane_depth.1, l.order_queue_capacity[1]),
                format!(
                    "{} of {} small and {} of {} large orders queued",
                    n.orders.lane_depth.0,
                    l.order_queue_capacity[0],
                    n.orders.lane_depth.1,
                    l.order_queue_capacity[1]
                ),
            ),
            (
                Alert::OrderQueueOld,
                n.orders.gateway.queue_oldest_age_us > micros(l.order_age),
                format!(
                    "oldest queued order {:.3} s old",
                    n.orders.gateway.queue_oldest_age_us as f64 / 1e6
                ),
            ),
            (
                Alert::BridgeCallSlow,
                n.orders.gateway.bridge_call_oldest_age_us > micros(l.bridge_call),
                if in_bridge == 0 {
                    "no bridge call in progress".to_string()
                } else {
                    format!(
                        "a bridge call has been in progress {:.1} s ({in_bridge} {})",
                        n.orders.gateway.bridge_call_oldest_age_us as f64 / 1e6,
                        if in_bridge == 1 {
                            "worker in a bridge call"
                        } else {
                            "workers in bridge calls"
                        }
                    )
                },
            ),
            (
                Alert::JournalFull,
                near(
                    n.orders.gateway.journal_bytes,
                    n.orders.gateway.journal_max_bytes,
                ),
                format!(
                    "journal {} of {} bytes",
                    n.orders.gateway.journal_bytes, n.orders.gateway.journal_max_bytes
                ),
            ),
            (
                Alert::OrderDrainOverSlo,
                !over_slo.is_empty(),
                if over_slo.is_empty() {
                    format!(
                        "every lane drains within the SLO ({:.2} s)",
                        n.capacity.slo_s
                    )
                } else {
                    let lanes: Vec<String> = over_slo
                        .iter()
                        .map(|(l, d)| format!("{} lane drain {d}", l.as_str()))
                        .collect();
                    format!("{} (SLO {:.2} s)", lanes.join(", "), n.capacity.slo_s)
                },
            ),
            (
                Alert::FeedSilent,
                n.cluster.symbols_silent > 0,
                format!(
                    "{} symbols silent for --stale-after",
                    n.cluster.symbols_silent
                ),
            ),
            (
                Alert::JournalDiskFull,
                // An episode shorter than the interval still raises it once.
                n.orders.gateway.journal_disk_full == 1
                    || n.orders.gateway.journal_disk_full_episodes
                        > i.before.orders.gateway.journal_disk_full_episodes,
                if n.orders.gateway.journal_disk_full == 1 {
                    "the order journal's disk is full: new orders get SYSTEM_BUSY journal_full"
                        .to_string()
                } else {
                    format!(
                        "the order journal's disk has room ({} times full since start)",
                        n.orders.gateway.journal_disk_full_episodes
                    )
                },
            ),
        ];
        let mut out = Vec::new();
        for (alert, on, detail) in checks {
            if self.gauges.is_active(alert) != on {
                self.gauges.active[alert as usize].store(u64::from(on), Ordering::Relaxed);
                if on {
                    self.gauges.starts[alert as usize].fetch_add(1, Ordering::Relaxed);
                    log::warn!("alert {} started: {detail}", alert.as_str());
                } else {
                    log::info!("alert {} cleared: {detail}", alert.as_str());
                }
                out.push(Transition {
                    alert,
                    active: on,
                    detail,
                });
            }
        }
        out
    }
}

/// `d` in whole µs, saturating (a threshold of years does not wrap to a small one).
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> AlertLimits {
        AlertLimits {
            fill_ratio: 0.8,
            max_symbols: 10,
            max_conns: 100,
            staleness: Duration::from_secs(1),
            dlq_per_sec: 10.0,
            order_queue_capacity: [100, 10],
            order_age: Duration::from_millis(500),
            bridge_call: Duration::from_secs(5),
        }
    }

    #[test]
    fn each_alert_starts_once_and_clears_once() {
        let mut a = Alerts::new(limits());
        let quiet = CountersSnapshot::default();
        let mut busy = CountersSnapshot::default();
        busy.dlq.stored = 50;
        busy.feed.symbols = 8;
        busy.publish.dirty_depth = 9;
        busy.publish.subscribers_accepted = 80;
        busy.publish.subscribers_open = 80;
        busy.orders.gateway.queue_depth = 80;
        busy.orders.lane_depth = (80, 0);
        busy.orders.gateway.queue_oldest_age_us = 600_000;
        busy.orders.gateway.bridge_calls_in_progress = 1;
        busy.orders.gateway.bridge_call_oldest_age_us = 6_000_000;
        busy.orders.gateway.journal_bytes = 800;
        busy.orders.gateway.journal_max_bytes = 1_000;
        busy.capacity.slo_s = 1.0;
        busy.capacity.lanes[0].drain_s = None; // not draining
        busy.cluster.symbols_silent = 1;
        busy.orders.gateway.journal_disk_full = 1;
        busy.orders.gateway.journal_disk_full_episodes = 1;
        let stale = [SubscriberStats {
            connected: true,
            staleness_us: 2_000_000,
            ..SubscriberStats::default()
        }];
        let on = AlertInputs {
            now: &busy,
            before: &quiet,
            secs: 1.0,
            subscribers: &stale,
        };
        let t = a.evaluate(&on);
        assert_eq!(t.len(), Alert::COUNT);
        assert!(t.iter().all(|t| t.active));
        assert!(Alert::ALL.iter().all(|x| a.gauges().is_active(*x)));
        assert!(
            a.evaluate(&on).is_empty(),
            "still active: logged once, not again"
        );
        assert!(
            Alert::ALL.iter().all(|x| a.gauges().starts(*x) == 1),
            "each started once"
        );
        let mut calm = busy.clone();
        calm.orders.gateway.queue_depth = 0;
        calm.orders.lane_depth = (0, 0);
        calm.orders.gateway.queue_oldest_age_us = 0;
        calm.orders.gateway.bridge_calls_in_progress = 0;
        calm.orders.gateway.bridge_call_oldest_age_us = 0;
        calm.capacity.lanes[0].drain_s = Some(0.4);
        calm.capacity.lanes[1].drain_s = Some(0.0);
        calm.orders.gateway.journal_disk_full = 0;
        let off = AlertInputs {
            now: &calm,
            before: &busy,
            secs: 1.0,
            subscribers: &[],
        };
        let t = a.evaluate(&off);
        let cleared: Vec<Alert> = t.iter().filter(|t| !t.active).map(|t| t.alert).collect();
        assert_eq!(
            cleared,
            vec![
                Alert::SubscriberStale,
                Alert::DlqGrowth,
                Alert::OrderQueueHigh,
                Alert::OrderQueueOld,
                Alert::BridgeCallSlow,
                Alert::OrderDrainOverSlo,
                Alert::JournalDiskFull
            ]
        );
        let mut slow_drain = calm.clone();
        slow_drain.capacity.lanes[1].drain_s = Some(2.5);
        let t = a.evaluate(&AlertInputs {
            now: &slow_drain,
            before: &calm,
            secs: 1.0,
            subscribers: &[],
        });
        assert_eq!(
            t.iter().map(|t| t.detail.as_str()).collect::<Vec<_>>(),
            vec!["large lane drain 2.50s (SLO 1.00 s)"],
            "a finite drain time past the SLO"
        );
        assert!(
            a.gauges().is_active(Alert::SymbolsNearLimit),
            "symbols never shrink"
        );
    }

    #[test]
    fn bridge_call_slow_starts_past_the_threshold_and_clears_when_calls_return() {
        let mut a = Alerts::new(limits()); // 5 s
        let quiet = CountersSnapshot::default();
        let calls = |count: u64, oldest_us: u64| {
            let mut s = CountersSnapshot::default();
            s.orders.gateway.bridge_calls_in_progress = count;
            s.orders.gateway.bridge_call_oldest_age_us = oldest_us;
            s
        };
        let mut eval = |now: &CountersSnapshot| {
            a.evaluate(&AlertInputs {
                now,
                before: &quiet,
                secs: 1.0,
                subscribers: &[],
            })
        };
        let slow = |active: bool, detail: &str| {
            vec![Transition {
                alert: Alert::BridgeCallSlow,
                active,
                detail: detail.to_string(),
            }]
        };
        assert!(eval(&calls(2, 4_900_000)).is_empty(), "under the threshold");
        assert!(
            eval(&calls(2, 5_000_000)).is_empty(),
            "at the threshold: not past it"
        );
        assert_eq!(
            eval(&calls(2, 12_345_678)),
            slow(
                true,
                "a bridge call has been in progress 12.3 s (2 workers in bridge calls)"
            )
        );
        assert!(
            eval(&calls(1, 60_000_000)).is_empty(),
            "still stuck: started once, not again"
        );
        assert_eq!(
            eval(&calls(0, 0)),
            slow(false, "no bridge call in progress")
        );
        assert!(
            eval(&calls(3, 1_000_000)).is_empty(),
            "short calls after the stuck one returned: stays clear"
        );
        assert_eq!(
            eval(&calls(1, 5_000_001)),
            slow(
                true,
                "a bridge call has been in progress 5.0 s (1 worker in a bridge call)"
            )
        );
        assert_eq!(
            eval(&calls(1, 100)),
            slow(
                false,
                "a bridge call has been in progress 0.0 s (1 worker in a bridge call)"
            ),
            "the slow call returned and a new one started: clears"
        );
    }

    #[test]
    fn names_are_unique_and_in_gauge_order() {
        for (i, a) in Alert::ALL.iter().enumerate() {
            assert_eq!(*a as usize, i, "{}", a.as_str());
        }
        let mut names: Vec<&str> = Alert::ALL.iter().map(|a| a.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Alert::COUNT);
        assert!(names.contains(&"bridge_call_slow"));
    }
}
