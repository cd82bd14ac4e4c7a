//! The NATS backbone's families in `/metrics` (`tickfan_cluster_*` and
//! `tickfan_symbols_stale`), rendered from [`ClusterSnapshot`]. Every role
//! shows them (zeros on a single node), so dashboards and the rules in
//! `deploy/` need no role switch.

use super::exposition::Exposition;
use crate::metrics::cluster_counters::ClusterSnapshot;

/// Appends the backbone's families.
pub(crate) fn render(o: &mut Exposition, c: &ClusterSnapshot) {
    let counters: [(&str, &str, u64); 9] = [
        (
            "tickfan_cluster_published_total",
            "Conflated updates an ingest published on <prefix>.md.<symbol>.",
            c.published,
        ),
        (
            "tickfan_cluster_outbox_conflated_total",
            "Updates an ingest's backbone outbox overwrote before they were sent (never blocks the publisher).",
            c.out_conflated,
        ),
        (
            "tickfan_cluster_snapshots_served_total",
            "Snapshot requests an ingest answered (a value or none).",
            c.snapshots_served,
        ),
        (
            "tickfan_cluster_applied_total",
            "Backbone updates and snapshots an edge wrote into its slots.",
            c.applied,
        ),
        (
            "tickfan_cluster_seeds_total",
            "Snapshot requests an edge sent for cold or re-seeded symbols.",
            c.seeds,
        ),
        (
            "tickfan_cluster_reseeds_total",
            "Re-seeds of every wanted symbol after a reconnect or a slow-consumer event.",
            c.reseeds,
        ),
        (
            "tickfan_cluster_slow_consumer_events_total",
            "Slow-consumer events reported by the NATS client library.",
            c.slow_consumer_events,
        ),
        (
            "tickfan_cluster_disconnects_total",
            "Times the link to the NATS cluster was lost.",
            c.disconnects,
        ),
        (
            "tickfan_cluster_epoch_changes_total",
            "Updates applied from another source epoch than the symbol's previous one (ingest failover).",
            c.epoch_changes,
        ),
    ];
    for (name, help, v) in counters {
        o.one(name, "counter", help, v);
    }
    o.head(
        "tickfan_cluster_dropped_total",
        "counter",
        "Backbone input dropped before the slots, by reason.",
    );
    for (reason, n) in &c.dropped {
        o.labelled("tickfan_cluster_dropped_total", &[("reason", reason)], n);
    }
    o.one(
        "tickfan_cluster_connected",
        "gauge",
        "1 while connected to a NATS server (always 0 on a single node).",
        c.connected,
    );
    o.one(
        "tickfan_cluster_subjects",
        "gauge",
        "NATS subscriptions held for market data.",
        c.subjects,
    );
    o.one(
        "tickfan_symbols_stale",
        "gauge",
        "Symbols whose value may be old: backbone lost, or their source silent for --stale-after.",
        c.symbols_stale,
    );
    o.one(
        "tickfan_symbols_silent",
        "gauge",
        "Symbols whose source sent nothing for --stale-after (alert feed_silent).",
        c.symbols_silent,
    );
}
