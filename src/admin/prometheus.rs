//! Rendering of the engine's figures in the Prometheus text exposition
//! format (version 0.0.4): `# HELP` and `# TYPE` lines, then samples.
//!
//! Names follow Prometheus conventions: `tickfan_` prefix, `_total` for
//! counters, base units (seconds, bytes). Label values are escaped.

use std::fmt::Write;

use crate::metrics::alerts::{Alert, AlertGauges};
use crate::metrics::report::{StageSummary, SubscriberStats};
use crate::metrics::CountersSnapshot;

/// Everything one scrape shows.
#[derive(Debug, Clone)]
pub struct Scrape<'a> {
    /// Every counter.
    pub counters: &'a CountersSnapshot,
    /// Stage latency summaries (µs inside; rendered in seconds).
    pub stages: &'a [StageSummary],
    /// Per-subscriber figures.
    pub subscribers: &'a [SubscriberStats],
    /// Dead letters in memory now.
    pub dlq_size: u64,
    /// Alert states.
    pub alerts: &'a AlertGauges,
    /// Seconds since start.
    pub uptime_s: f64,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
        self.head(name, kind, help);
        let _ = writeln!(self.0, "{name} {v}");
    }

    fn labelled(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(self.0, "{name}{{{}}} {v}", l.join(","));
    }
}

/// Renders one scrape.
pub fn render(s: &Scrape<'_>) -> String {
    let c = s.counters;
    let mut o = Out(String::with_capacity(8 * 1024));
    o.one(
        "tickfan_uptime_seconds",
        "gauge",
        "Seconds since the engine started.",
        s.uptime_s,
    );
    o.one(
        "tickfan_ticks_received_total",
        "counter",
        "Feed lines that were ticks: valid plus poison.",
        c.ticks_received,
    );
    o.one(
        "tickfan_ticks_valid_total",
        "counter",
        "Ticks that parsed, validated and were written to their slot.",
        c.ticks_valid,
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
        "Updates overwritten in their slot before being published.",
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

    o.head(
        "tickfan_subscriber_backlog_bytes",
        "gauge",
        "Bytes waiting in one subscriber's buffer.",
    );
    for sub in s.subscribers.iter().filter(|x| x.connected) {
        o.labelled(
            "tickfan_subscriber_backlog_bytes",
            &[("id", &sub.id.to_string())],
            sub.buffered_bytes,
        );
    }
    o.head(
        "tickfan_subscriber_pending_symbols",
        "gauge",
        "Symbols one slow subscriber will receive as latest values.",
    );
    for sub in s.subscribers.iter().filter(|x| x.connected) {
        o.labelled(
            "tickfan_subscriber_pending_symbols",
            &[("id", &sub.id.to_string())],
            sub.pending_symbols,
        );
    }
    o.head(
        "tickfan_subscriber_staleness_seconds",
        "gauge",
        "Age of one subscriber's oldest pending symbol.",
    );
    for sub in s.subscribers.iter().filter(|x| x.connected) {
        o.labelled(
            "tickfan_subscriber_staleness_seconds",
            &[("id", &sub.id.to_string())],
            sub.staleness_us as f64 / 1e6,
        );
    }

    o.head(
        "tickfan_stage_latency_seconds",
        "summary",
        "Latency of each engine stage since start.",
    );
    for st in s.stages {
        for (q, v) in [
            ("0.5", st.pct.p50_us),
            ("0.9", st.pct.p90_us),
            ("0.99", st.pct.p99_us),
            ("0.999", st.pct.p999_us),
            ("1", st.pct.max_us),
        ] {
            o.labelled(
                "tickfan_stage_latency_seconds",
                &[("stage", st.stage), ("quantile", q)],
                v / 1e6,
            );
        }
        o.labelled(
            "tickfan_stage_latency_seconds_sum",
            &[("stage", st.stage)],
            st.pct.mean_us * st.pct.count as f64 / 1e6,
        );
        o.labelled(
            "tickfan_stage_latency_seconds_count",
            &[("stage", st.stage)],
            st.pct.count,
        );
    }
    o.0
}
