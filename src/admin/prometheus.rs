//! Rendering of the engine's figures in the Prometheus text exposition
//! format (version 0.0.4): `# HELP` and `# TYPE` lines, then samples.
//!
//! Names follow Prometheus conventions (what `promtool check metrics`
//! lints): `tickfan_` prefix, `_total` only on counters, base units in the
//! name (`_seconds`, `_bytes`). Stage latencies are histograms in seconds
//! ([`super::latency_buckets`]); the standard `process_*` figures are named
//! as Prometheus's client libraries name them; per-subscriber series are
//! bounded ([`super::subscriber_series`]).

use super::counters::{AdminCounters, STATUS_CODES};
use super::exposition::Exposition;
use super::latency_buckets::{LatencyBuckets, BUCKETS};
use super::subscriber_series;
use crate::metrics::alerts::{Alert, AlertGauges};
use crate::metrics::capacity_counters::{CapacitySnapshot, LaneCapacity};
use crate::metrics::report::SubscriberStats;
use crate::metrics::tls_counters::{PortTlsSnapshot, TlsSnapshot};
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

/// Renders one scrape.
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
    o.one(
        "tickfan_ticks_received_total",
        "counter",
        "Feed lines that were ticks: valid plus poison plus conflated at the feed.",
        c.ticks_received,
    );
    o.one(
        "tickfan_ticks_valid_total",
        "counter",
        "Ticks that parsed, validated and were written to their slot.",
        c.ticks_valid,
    );
    o.one(
        "tickfan_feed_conflated_total",
        "counter",
        "Tick lines superseded by a newer line of their symbol in the same feed read (not parsed).",
        c.feed_conflated,
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
        "tickfan_lines_skipped_total",
        "counter",
        "Header, comment and blank feed lines.",
        c.lines_skipped,
    );
    o.one(
        "tickfan_crossed_quotes_total",
        "counter",
        "Crossed or locked quotes passed through.",
        c.crossed_quotes,
    );
    o.one(
        "tickfan_feed_bytes_total",
        "counter",
        "Bytes read from feeds.",
        c.feed_bytes,
    );
    o.one(
        "tickfan_published_total",
        "counter",
        "Updates taken from the slots and published.",
        c.published,
    );
    o.one(
        "tickfan_conflated_total",
        "counter",
        "Updates never published: overwritten in their slot, or conflated at the feed (sequence gaps).",
        c.conflated,
    );
    o.one(
        "tickfan_frames_total",
        "counter",
        "Frames appended to subscriber buffers.",
        c.frames,
    );
    o.one(
        "tickfan_subscriber_bytes_total",
        "counter",
        "Bytes written to subscribers.",
        c.subscriber_bytes,
    );
    o.one(
        "tickfan_subscriber_conflations_total",
        "counter",
        "Updates a slow subscriber will get as a later latest value instead.",
        c.subscriber_conflations,
    );
    o.one(
        "tickfan_subscriber_throttled_total",
        "counter",
        "Times a subscriber's TICKFAN.THROTTLE held a symbol back until its window opens.",
        c.throttled,
    );
    o.one(
        "tickfan_since_frames_total",
        "counter",
        "Frames replayed from the history ring by TICKFAN.SINCE.",
        c.since_frames,
    );
    o.one(
        "tickfan_slow_episodes_total",
        "counter",
        "Times a subscriber crossed its high-water mark.",
        c.slow_episodes,
    );
    o.one(
        "tickfan_commands_total",
        "counter",
        "Subscriber commands received.",
        c.commands.0,
    );
    o.one(
        "tickfan_command_errors_total",
        "counter",
        "Subscriber commands answered with an error.",
        c.commands.1,
    );
    o.one(
        "tickfan_connections_refused_total",
        "counter",
        "Connections refused over the per-port limit (feed and subscriber).",
        c.feed_connections.1 + c.subscriber_connections.1,
    );
    o.head(
        "tickfan_auth_failures_total",
        "counter",
        "Connections refused for a wrong, missing or late token, by port.",
    );
    o.labelled(
        "tickfan_auth_failures_total",
        &[("port", "feed")],
        c.auth_failures.0,
    );
    o.labelled(
        "tickfan_auth_failures_total",
        &[("port", "subscriber")],
        c.auth_failures.1,
    );
    o.labelled(
        "tickfan_auth_failures_total",
        &[("port", "order")],
        c.orders.auth_failures,
    );
    tls(&mut o, &c.tls);
    o.one(
        "tickfan_subscriptions_refused_total",
        "counter",
        "Subscriptions refused over the per-client limit.",
        c.subscriptions_refused,
    );
    o.one(
        "tickfan_orders_rate_limited_total",
        "counter",
        "Orders refused over the per-connection rate (part of SYSTEM_BUSY).",
        c.orders.rate_limited,
    );
    o.one(
        "tickfan_dlq_stored_total",
        "counter",
        "Dead letters stored.",
        c.dlq.0,
    );
    o.one(
        "tickfan_dlq_handoff_dropped_total",
        "counter",
        "Dead letters the feed could not hand to the DLQ thread (still counted as poison).",
        c.dlq.1,
    );
    o.one(
        "tickfan_feed_connections",
        "gauge",
        "Feed connections open.",
        c.feed_connections.2,
    );
    o.one(
        "tickfan_subscribers",
        "gauge",
        "Subscribers connected.",
        c.subscriber_connections.2,
    );
    o.one("tickfan_symbols", "gauge", "Symbols interned.", c.symbols);
    o.one(
        "tickfan_buffered_bytes",
        "gauge",
        "Bytes buffered for all subscribers.",
        c.buffered_bytes,
    );
    o.one(
        "tickfan_dlq_size",
        "gauge",
        "Dead letters held in memory.",
        s.dlq_size,
    );
    o.one(
        "tickfan_dirty_queue_depth",
        "gauge",
        "Symbols waiting for the publisher.",
        c.dirty_depth,
    );
    o.head(
        "tickfan_alert",
        "gauge",
        "1 while an alert is active (raised before a bound is reached).",
    );
    for a in Alert::ALL {
        o.labelled(
            "tickfan_alert",
            &[("name", a.as_str())],
            u64::from(s.alerts.is_active(a)),
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
            s.alerts.starts(a),
        );
    }

    let ord = &c.orders;
    o.one(
        "tickfan_orders_accepted_total",
        "counter",
        "Orders accepted into the queue.",
        ord.accepted,
    );
    o.head(
        "tickfan_orders_rejected_total",
        "counter",
        "Orders rejected at once, by reason.",
    );
    for (reason, n) in &ord.rejected {
        o.labelled("tickfan_orders_rejected_total", &[("reason", reason)], n);
    }
    o.head(
        "tickfan_orders_done_total",
        "counter",
        "Orders ended with DONE, by status.",
    );
    for (status, n) in &ord.done {
        o.labelled("tickfan_orders_done_total", &[("status", status)], n);
    }
    o.head(
        "tickfan_orders_dead_lettered_total",
        "counter",
        "Orders dead-lettered, by reason.",
    );
    for (reason, n) in &ord.dead {
        o.labelled(
            "tickfan_orders_dead_lettered_total",
            &[("reason", reason)],
            n,
        );
    }
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
    o.one(
        "tickfan_orders_lease_expired_total",
        "counter",
        "Bridge calls abandoned when their lease (--bridge-lease) expired; the order is retried on the next bridge.",
        ord.lease_expired,
    );
    o.one(
        "tickfan_orders_late_answers_discarded_total",
        "counter",
        "Venue answers that arrived with a retired fencing token and were discarded (never applied).",
        ord.late_answers_discarded,
    );
    o.one(
        "tickfan_order_fills_total",
        "counter",
        "FILL replies sent.",
        ord.fills,
    );
    o.one(
        "tickfan_order_replays_total",
        "counter",
        "Dead-lettered orders replayed.",
        ord.replays,
    );
    o.one(
        "tickfan_orders_replies_to_closed_total",
        "counter",
        "Replies for orders whose connection had closed (the order ran to its end; STATUS tells it).",
        ord.replies_to_closed_connections,
    );
    o.one(
        "tickfan_orders_halted",
        "gauge",
        "1 while the order kill switch is on (POST /orders/halt): every NEW is refused, queued orders are held.",
        ord.halted,
    );
    o.one(
        "tickfan_orders_halted_rejects_total",
        "counter",
        "NEW orders refused SYSTEM_BUSY halted (also counted as SYSTEM_BUSY).",
        ord.halted_rejects,
    );
    o.one(
        "tickfan_orders_cancelled_total",
        "counter",
        "Orders cancelled before they reached a bridge (CANCEL, or POST /orders/halt?cancel=queued).",
        ord.cancelled,
    );
    o.one(
        "tickfan_order_queue_depth",
        "gauge",
        "Orders waiting for a worker.",
        ord.queue_depth,
    );
    o.one(
        "tickfan_order_queue_oldest_age_seconds",
        "gauge",
        "Age of the oldest order waiting for a worker.",
        ord.queue_oldest_age_us as f64 / 1e6,
    );
    o.one(
        "tickfan_order_retry_queue_depth",
        "gauge",
        "Orders waiting for a retry.",
        ord.retry_depth,
    );
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
    capacity(&mut o, &c.capacity);
    o.one(
        "tickfan_bridge_calls_in_progress",
        "gauge",
        "Order workers inside a bridge call now (waiting for a venue's answer).",
        ord.bridge_calls_in_progress,
    );
    o.one(
        "tickfan_bridge_call_oldest_age_seconds",
        "gauge",
        "How long the oldest bridge call in progress has been waiting for its venue (engine clock; 0 when none).",
        ord.bridge_call_oldest_age_us as f64 / 1e6,
    );
    o.one(
        "tickfan_journal_bytes",
        "gauge",
        "Bytes of order journal on disk and pending (0 with --no-journal); journal_full starts at 80 % of tickfan_journal_max_bytes.",
        ord.journal_bytes,
    );
    o.one(
        "tickfan_journal_max_bytes",
        "gauge",
        "--journal-max-bytes (0 with --no-journal); at it new orders get SYSTEM_BUSY journal_full.",
        ord.journal_max_bytes,
    );
    o.one(
        "tickfan_journal_disk_full",
        "gauge",
        "1 while the order journal's disk is full: new orders get SYSTEM_BUSY journal_full until a probe (every 1 s) finds room.",
        ord.journal_disk_full,
    );
    o.one(
        "tickfan_journal_disk_full_episodes_total",
        "counter",
        "Times the order journal's disk was found full.",
        ord.journal_disk_full_episodes,
    );
    o.one(
        "tickfan_journal_failed",
        "gauge",
        "1 once an order journal write or sync failed for good (not a full disk): new orders get SYSTEM_BUSY journal_error until a restart.",
        ord.journal_failed,
    );
    o.one(
        "tickfan_orders_journal_full_total",
        "counter",
        "Orders refused SYSTEM_BUSY journal_full: the journal at --journal-max-bytes or its disk full (also counted as SYSTEM_BUSY).",
        ord.journal_full_rejects,
    );
    let sq = &ord.sequencing;
    o.head(
        "tickfan_fills_total",
        "counter",
        "Venue fills by what the sequencer did with them.",
    );
    for (what, n) in [
        ("applied", sq.applied),
        ("held", sq.held),
        ("stale", sq.stale),
        ("refused", sq.refused),
    ] {
        o.labelled("tickfan_fills_total", &[("outcome", what)], n);
    }
    o.one(
        "tickfan_fill_gaps_skipped_total",
        "counter",
        "Fill gaps skipped by the gap timer.",
        sq.gaps_skipped,
    );
    o.one(
        "tickfan_fills_missing_total",
        "counter",
        "Fill numbers never received (skipped over).",
        sq.fills_missing,
    );
    o.one(
        "tickfan_fills_held",
        "gauge",
        "Early fills held now.",
        sq.held_now,
    );
    o.one(
        "tickfan_order_chunks_total",
        "counter",
        "Chunks sent for large orders.",
        sq.chunks,
    );
    o.one(
        "tickfan_orders_in_flight",
        "gauge",
        "Accepted orders not yet ended.",
        ord.in_flight,
    );
    o.one(
        "tickfan_order_connections",
        "gauge",
        "Order connections open.",
        ord.connections.2,
    );

    subscriber_series::render(&mut o, s.subscribers);
    stages(&mut o, s.stages);
    super::cluster_series::render(&mut o, &c.cluster);
    super::warning_series::render(&mut o, &s.warnings);
    admin(&mut o, s.admin);
    o.finish()
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
    type Field = fn(&PortTlsSnapshot) -> u64;
    let families: [(&str, &str, Field); 3] = [
        (
            "tickfan_tls_handshakes_total",
            "TLS handshakes completed, by port.",
            |p| p.handshakes,
        ),
        (
            "tickfan_tls_handshake_failures_total",
            "TLS handshakes failed (no common version or cipher, a missing or untrusted client certificate, a corrupt record), by port.",
            |p| p.handshake_failures,
        ),
        (
            "tickfan_tls_plaintext_refused_total",
            "Connections that spoke plaintext to a TLS port, answered with the port's error and closed, by port.",
            |p| p.plaintext_refused,
        ),
    ];
    for (name, help, field) in families {
        o.head(name, "counter", help);
        for p in &t.ports {
            o.labelled(name, &[("port", p.port.as_str())], field(p));
        }
    }
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
