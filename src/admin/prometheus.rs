//! Rendering of the engine's figures in the Prometheus text exposition
//! format (version 0.0.4): `# HELP` and `# TYPE` lines, then samples.
//!
//! Names follow Prometheus conventions (what `promtool check metrics`
//! lints): `tickfan_` prefix, `_total` only on counters, base units in the
//! name (`_seconds`, `_bytes`). Stage latencies are histograms in seconds
//! ([`super::latency_buckets`]); the standard `process_*` figures are named
//! as Prometheus's client libraries name them; per-subscriber series are
//! bounded ([`super::subscriber_series`]).
//!
//! A group declared with `counter_group!` ([`crate::metrics::table`]) is
//! rendered from its table; what is written here by hand are the families
//! with labels or with values derived from several figures.

use super::counters::{AdminCounters, STATUS_CODES};
use super::exposition::Exposition;
use super::latency_buckets::{LatencyBuckets, BUCKETS};
use super::subscriber_series;
use crate::metrics::alerts::{Alert, AlertGauges};
use crate::metrics::capacity_counters::{CapacitySnapshot, LaneCapacity};
use crate::metrics::counters::{DlqCounters, FeedCounters, PublishCounters};
use crate::metrics::order_counters::{
    FillCounters, OrderCounters, OrderSnapshot, RetryCounters, FILL_OUTCOMES,
};
use crate::metrics::report::SubscriberStats;
use crate::metrics::tls_counters::{PortTlsCounters, TlsSnapshot};
use crate::metrics::{CountersSnapshot, Stage};
use crate::model::lane::Lane;
use crate::model::warning::WarnKind;
use crate::sys::process::ProcessStats;

/// Everything one scrape shows.
#[derive(Debug, Clone)]
pub(crate) struct Scrape<'a> {
    /// Every counter.
    pub counters: &'a CountersSnapshot,
    /// Each stage's latency histogram since start.
    pub stages: &'a [(Stage, LatencyBuckets)],
    /// Per-subscriber figures.
    pub subscribers: &'a [SubscriberStats],
    /// Dead letters in memory now.
    pub dlq_size: u64,
    /// Alert states.
    pub alerts: &'a AlertGauges,
    /// Seconds since start.
    pub uptime_s: f64,
    /// This process's figures, when they could be read.
    pub process: Option<ProcessStats>,
    /// The admin endpoint's own counters.
    pub admin: &'a AdminCounters,
    /// Repeating warnings by kind (by `WarnKind::index`), this process.
    pub warnings: [u64; WarnKind::COUNT],
}

/// Renders one scrape: each group's figures from its counter table
/// ([`crate::metrics::table`]), then the families with labels or derived
/// values, each by a small function of its own.
pub(crate) fn render(s: &Scrape<'_>) -> String {
    let c = s.counters;
    let mut o = Exposition::with_capacity(32 * 1024);
    build_and_process(&mut o, s.process);
    o.one(
        "tickfan_uptime_seconds",
        "gauge",
        "Seconds since the engine started.",
        s.uptime_s,
    );
    o.table(FeedCounters::TABLE, &c.feed);
    o.table(PublishCounters::TABLE, &c.publish);
    engine(&mut o, s);
    tls(&mut o, &c.tls);
    alerts(&mut o, s.alerts);
    orders(&mut o, &c.orders);
    capacity(&mut o, &c.capacity);
    subscriber_series::render(&mut o, s.subscribers);
    stages(&mut o, s.stages);
    super::cluster_series::render(&mut o, &c.cluster);
    super::warning_series::render(&mut o, &s.warnings);
    admin(&mut o, s.admin);
    o.finish()
}

/// The feed's and publisher's families that are not one field of one
/// group: sums, labels across groups, the DLQ.
fn engine(o: &mut Exposition, s: &Scrape<'_>) {
    let c = s.counters;
    o.one(
        "tickfan_ticks_received_total",
        "counter",
        "Feed lines that were ticks: valid plus poison plus conflated at the feed.",
        c.ticks_received,
    );
    o.head(
        "tickfan_poison_total",
        "counter",
        "Poison ticks dead-lettered, by reason.",
    );
    for (reason, n) in &c.poison {
        o.labelled("tickfan_poison_total", &[("reason", reason)], n);
    }
    o.one(
        "tickfan_connections_refused_total",
        "counter",
        "Connections refused over the per-port limit (feed and subscriber).",
        c.feed.connections_refused + c.publish.subscribers_refused,
    );
    const AUTH: &str = "tickfan_auth_failures_total";
    o.head(
        AUTH,
        "counter",
        "Connections refused for a wrong, missing or late token, by port.",
    );
    o.labelled(AUTH, &[("port", "feed")], c.feed.auth_failures);
    o.labelled(AUTH, &[("port", "subscriber")], c.publish.auth_failures);
    o.labelled(AUTH, &[("port", "order")], c.orders.gateway.auth_failures);
    o.table(DlqCounters::TABLE, &c.dlq);
    o.one(
        "tickfan_dlq_size",
        "gauge",
        "Dead letters held in memory.",
        s.dlq_size,
    );
}

/// `tickfan_alert{name}` and `tickfan_alert_starts_total{name}`.
fn alerts(o: &mut Exposition, alerts: &AlertGauges) {
    o.head(
        "tickfan_alert",
        "gauge",
        "1 while an alert is active (raised before a bound is reached).",
    );
    for a in Alert::ALL {
        o.labelled(
            "tickfan_alert",
            &[("name", a.as_str())],
            u64::from(alerts.is_active(a)),
        );
    }
    o.head(
        "tickfan_alert_starts_total",
        "counter",
        "Times an alert started (one that started and cleared between two scrapes shows here).",
    );
    for a in Alert::ALL {
        o.labelled(
            "tickfan_alert_starts_total",
            &[("name", a.as_str())],
            alerts.starts(a),
        );
    }
}

/// The order path: the gateway's, the retry timer's and the fill thread's
/// tables, then the families by reason, status, retry number and lane.
fn orders(o: &mut Exposition, ord: &OrderSnapshot) {
    o.table(OrderCounters::TABLE, &ord.gateway);
    o.table(RetryCounters::TABLE, &ord.retry);
    o.table(FillCounters::TABLE, &ord.sequencing);
    let by = |o: &mut Exposition, name: &str, help: &str, label: &str, v: &[(String, u64)]| {
        o.head(name, "counter", help);
        for (l, n) in v {
            o.labelled(name, &[(label, l)], n);
        }
    };
    by(
        o,
        "tickfan_orders_rejected_total",
        "Orders rejected at once, by reason.",
        "reason",
        &ord.rejected,
    );
    by(
        o,
        "tickfan_orders_done_total",
        "Orders ended with DONE, by status.",
        "status",
        &ord.done,
    );
    by(
        o,
        "tickfan_orders_dead_lettered_total",
        "Orders dead-lettered, by reason.",
        "reason",
        &ord.dead,
    );
    o.one(
        "tickfan_orders_expired_total",
        "counter",
        "Orders past their time to live (rejected EXPIRED).",
        ord.expired,
    );
    o.one(
        "tickfan_orders_duplicates_total",
        "counter",
        "Orders rejected as duplicates.",
        ord.duplicates,
    );
    o.head(
        "tickfan_order_retries_total",
        "counter",
        "Retries fired, by attempt number (the last bucket counts later ones too).",
    );
    for (i, n) in ord.retries.iter().enumerate() {
        o.labelled(
            "tickfan_order_retries_total",
            &[("retry", &(i + 1).to_string())],
            n,
        );
    }
    order_lanes(o, ord);
    o.head(
        "tickfan_fills_total",
        "counter",
        "Venue fills by what the sequencer did with them.",
    );
    for (what, get) in FILL_OUTCOMES {
        o.labelled(
            "tickfan_fills_total",
            &[("outcome", what)],
            get(&ord.sequencing),
        );
    }
}

/// The order queue per lane: depth and oldest age.
fn order_lanes(o: &mut Exposition, ord: &OrderSnapshot) {
    o.head(
        "tickfan_order_lane_depth",
        "gauge",
        "Orders waiting for a worker, per lane.",
    );
    o.labelled(
        "tickfan_order_lane_depth",
        &[("lane", "small")],
        ord.lane_depth.0,
    );
    o.labelled(
        "tickfan_order_lane_depth",
        &[("lane", "large")],
        ord.lane_depth.1,
    );
    o.head(
        "tickfan_order_lane_oldest_age_seconds",
        "gauge",
        "Age of the oldest order waiting in each lane.",
    );
    o.labelled(
        "tickfan_order_lane_oldest_age_seconds",
        &[("lane", "small")],
        ord.lane_oldest_age_us.0 as f64 / 1e6,
    );
    o.labelled(
        "tickfan_order_lane_oldest_age_seconds",
        &[("lane", "large")],
        ord.lane_oldest_age_us.1 as f64 / 1e6,
    );
}

/// The order lanes' workers and capacity view (`order::lanes::pool`).
fn capacity(o: &mut Exposition, cap: &CapacitySnapshot) {
    let lanes = |o: &mut Exposition,
                 name: &str,
                 kind: &str,
                 help: &str,
                 v: &dyn Fn(&LaneCapacity) -> String| {
        o.head(name, kind, help);
        for l in Lane::ALL {
            o.labelled(name, &[("lane", l.as_str())], v(&cap.lanes[l.index()]));
        }
    };
    lanes(
        o,
        "tickfan_order_workers",
        "gauge",
        "Order worker threads of each lane now (between its --order-workers-min and -max).",
        &|c| c.workers.to_string(),
    );
    lanes(
        o,
        "tickfan_order_workers_busy",
        "gauge",
        "Order workers of each lane holding an order now.",
        &|c| c.busy.to_string(),
    );
    o.head(
        "tickfan_order_worker_scale_total",
        "counter",
        "Order workers added (up) and retired (down), per lane.",
    );
    for l in Lane::ALL {
        let c = &cap.lanes[l.index()];
        for (dir, n) in [("up", c.scale_steps.0), ("down", c.scale_steps.1)] {
            o.labelled(
                "tickfan_order_worker_scale_total",
                &[("lane", l.as_str()), ("direction", dir)],
                n,
            );
        }
    }
    lanes(
        o,
        "tickfan_order_lane_arrival_rate",
        "gauge",
        "Orders admitted per second into each lane (moving average).",
        &|c| c.arrival_per_s.to_string(),
    );
    lanes(o, "tickfan_order_lane_service_rate", "gauge", "Orders each lane completes per second with every worker busy (moving average of completions per busy worker-second, times the workers).", &|c| c.service_per_s.to_string());
    lanes(
        o,
        "tickfan_order_lane_utilisation_ratio",
        "gauge",
        "Busy workers over workers per lane (moving average).",
        &|c| c.utilisation.to_string(),
    );
    lanes(o, "tickfan_order_lane_drain_seconds", "gauge", "Projected time to drain each lane's queue: depth / (service - arrival); +Inf when not draining.", &|c| c.drain_s.map_or("+Inf".to_string(), |s| s.to_string()));
    o.one(
        "tickfan_order_slo_seconds",
        "gauge",
        "--order-slo: the completion-time target the drain time is held against (order_drain_over_slo).",
        cap.slo_s,
    );
}

/// `tickfan_build_info` and the standard `process_*` families.
fn build_and_process(o: &mut Exposition, p: Option<ProcessStats>) {
    o.head(
        "tickfan_build_info",
        "gauge",
        "Always 1; the labels say which build is running.",
    );
    o.labelled(
        "tickfan_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    let Some(p) = p else { return };
    o.one(
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
        p.cpu_seconds,
    );
    o.one(
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
        p.resident_bytes,
    );
    o.one(
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
        p.virtual_bytes,
    );
    o.one(
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
        p.open_fds,
    );
    if let Some(max) = p.max_fds {
        o.one(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max,
        );
    }
    o.one(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        p.start_time_seconds,
    );
    o.one(
        "process_threads",
        "gauge",
        "Number of OS threads in the process.",
        p.threads,
    );
}

/// One histogram per stage, labelled `stage`.
fn stages(o: &mut Exposition, stages: &[(Stage, LatencyBuckets)]) {
    const NAME: &str = "tickfan_stage_latency_seconds";
    o.head(
        NAME,
        "histogram",
        "Latency of each engine stage since start (HDR percentiles: /report).",
    );
    for (stage, b) in stages {
        let st = stage.as_str();
        for ((_, le), n) in BUCKETS.iter().zip(b.cumulative) {
            o.labelled(
                "tickfan_stage_latency_seconds_bucket",
                &[("stage", st), ("le", le)],
                n,
            );
        }
        o.labelled(
            "tickfan_stage_latency_seconds_bucket",
            &[("stage", st), ("le", "+Inf")],
            b.count,
        );
        o.labelled(
            "tickfan_stage_latency_seconds_sum",
            &[("stage", st)],
            b.sum_seconds(),
        );
        o.labelled(
            "tickfan_stage_latency_seconds_count",
            &[("stage", st)],
            b.count,
        );
    }
}

/// TLS per port (every port listed, zeros included: TLS off shows zeros).
fn tls(o: &mut Exposition, t: &TlsSnapshot) {
    let ports = t.ports.each_ref().map(|p| (p.port.as_str(), &p.figures));
    o.table_by(PortTlsCounters::TABLE, "port", &ports);
}

/// The admin endpoint's own figures.
fn admin(o: &mut Exposition, a: &AdminCounters) {
    o.head(
        "tickfan_admin_responses_total",
        "counter",
        "Answers of the admin endpoint, by HTTP status code.",
    );
    for code in STATUS_CODES {
        o.labelled(
            "tickfan_admin_responses_total",
            &[("code", &code.to_string())],
            a.answers(code),
        );
    }
    o.one(
        "tickfan_admin_connections_refused_total",
        "counter",
        "Admin connections closed at once because the connection bound was reached.",
        a.refused_total(),
    );
    o.one(
        "tickfan_admin_connections",
        "gauge",
        "Admin connections open.",
        a.open(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::cluster_counters::ClusterCounters;
    use crate::metrics::table::{Desc, Kind, Unit};
    use crate::metrics::Counters;

    /// Every counter of every table group set to a value of its own.
    fn filled() -> CountersSnapshot {
        let c = Counters::default();
        c.fill_distinct(&mut 1000);
        c.snapshot()
    }

    fn text(c: &CountersSnapshot) -> String {
        let stages: Vec<(Stage, LatencyBuckets)> = Stage::ALL
            .iter()
            .map(|s| (*s, LatencyBuckets::default()))
            .collect();
        render(&Scrape {
            counters: c,
            stages: &stages,
            subscribers: &[],
            dlq_size: 7,
            alerts: &AlertGauges::default(),
            uptime_s: 1.5,
            process: None,
            admin: &AdminCounters::default(),
            warnings: [3; WarnKind::COUNT],
        })
    }

    /// What `promtool check metrics` asks of the format: each family's
    /// `# HELP` and `# TYPE` once, before its samples, and its samples
    /// together (a histogram's are `_bucket`, `_sum` and `_count`).
    #[test]
    fn every_family_is_contiguous_with_help_and_type_once() {
        let text = text(&filled());
        let mut seen: Vec<&str> = Vec::new();
        let mut lines = text.lines();
        let mut family = "";
        while let Some(line) = lines.next() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(!seen.contains(&name), "{name}: a second HELP");
                seen.push(name);
                let ty = lines.next().unwrap_or_default();
                assert!(
                    ty.starts_with(&format!("# TYPE {name} ")),
                    "{ty} after {line}"
                );
                family = name;
                continue;
            }
            let name = line.split(['{', ' ']).next().unwrap();
            let of_histogram = ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family));
            assert!(name == family || of_histogram, "{line} in family {family}");
        }
        assert!(seen.len() > 100, "{} families", seen.len());
    }

    fn check<S>(table: &[Desc<S>], s: &S, text: &str, names: &mut Vec<&'static str>) {
        for d in table {
            let Some(f) = d.family else { continue };
            assert!(!names.contains(&f.name), "{} in two tables", f.name);
            names.push(f.name);
            let kind = d.kind.as_str();
            for want in [
                format!("# HELP {} {}", f.name, f.help),
                format!("# TYPE {} {kind}", f.name),
                format!("{} {}", f.name, d.exposed(s)),
            ] {
                let n = text.lines().filter(|l| *l == want).count();
                assert_eq!(n, 1, "{want:?} in /metrics");
            }
            assert_eq!(
                d.kind == Kind::Counter,
                f.name.ends_with("_total"),
                "{}",
                f.name
            );
            if d.unit == Unit::Micros {
                assert!(f.name.ends_with("_seconds"), "{}", f.name);
            }
            if d.unit == Unit::Bytes {
                assert!(f.name.contains("_bytes"), "{}", f.name);
            }
        }
    }

    /// Each table entry with a family is one family in `/metrics` with its
    /// help, its type and its own figure (every figure is distinct).
    #[test]
    fn every_table_figure_is_one_family_with_its_own_value() {
        let c = filled();
        let text = text(&c);
        let mut names = Vec::new();
        check(FeedCounters::TABLE, &c.feed, &text, &mut names);
        check(PublishCounters::TABLE, &c.publish, &text, &mut names);
        check(DlqCounters::TABLE, &c.dlq, &text, &mut names);
        check(OrderCounters::TABLE, &c.orders.gateway, &text, &mut names);
        check(RetryCounters::TABLE, &c.orders.retry, &text, &mut names);
        check(FillCounters::TABLE, &c.orders.sequencing, &text, &mut names);
        check(ClusterCounters::TABLE, &c.cluster, &text, &mut names);
        assert!(names.len() > 50, "{} table families", names.len());
        for d in PortTlsCounters::TABLE {
            let f = d.family.expect("every TLS figure is in /metrics");
            for p in &c.tls.ports {
                let v = d.exposed(&p.figures);
                let want = format!("{}{{port=\"{}\"}} {v}", f.name, p.port.as_str());
                assert!(text.lines().any(|l| l == want), "{want}");
            }
        }
        assert!(text.contains("tickfan_poison_total{reason=\"bad_number\"}"));
        assert!(text.contains("tickfan_auth_failures_total{port=\"order\"}"));
    }
}
