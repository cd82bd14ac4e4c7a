//! Counters and gauges of the NATS backbone (`src/cluster/`): what an
//! ingest published and served, what an edge received, dropped (by
//! reason) and re-seeded, and the link's state.
//!
//! Writers: the `tickfan-nats` thread writes every field but
//! `out_conflated` (the ingest's outbox conflates on the publisher's side)
//! and the stale gauges, which only the publisher thread writes. Readers load `Relaxed`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::table::counter_group;

/// Why an update or a snapshot from the backbone was dropped before it
/// reached the slots (and so any subscriber).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackboneDrop {
    /// The payload is not `ts,symbol,bid,ask,bid_qty,ask_qty,seq,recv_ns`
    /// or the snapshot reply is not `snap …` / `none …`.
    Malformed,
    /// An update without the `Tickfan-Epoch` header (not from an ingest).
    MissingEpoch,
    /// The payload's symbol is not the subject's (or the request's).
    WrongSymbol,
    /// Older than the value the edge holds (e.g. the slower half of an A/B pair).
    SeqFromPast,
    /// The same sequence number again (the other half of an A/B pair).
    Duplicate,
    /// A new symbol past `--max-symbols`.
    SymbolLimit,
    /// A symbol no client of this edge wants (a wildcard's local filter).
    Unwanted,
}

impl BackboneDrop {
    /// Number of reasons.
    pub const COUNT: usize = 7;
    /// Every reason, in index order.
    pub const ALL: [BackboneDrop; Self::COUNT] = [
        BackboneDrop::Malformed,
        BackboneDrop::MissingEpoch,
        BackboneDrop::WrongSymbol,
        BackboneDrop::SeqFromPast,
        BackboneDrop::Duplicate,
        BackboneDrop::SymbolLimit,
        BackboneDrop::Unwanted,
    ];

    /// The reason's label in `/metrics` and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            BackboneDrop::Malformed => "malformed",
            BackboneDrop::MissingEpoch => "missing_epoch",
            BackboneDrop::WrongSymbol => "wrong_symbol",
            BackboneDrop::SeqFromPast => "seq_from_past",
            BackboneDrop::Duplicate => "duplicate",
            BackboneDrop::SymbolLimit => "symbol_limit",
            BackboneDrop::Unwanted => "unwanted",
        }
    }

    /// Index into [`ClusterCounters::dropped`].
    pub fn index(self) -> usize {
        self as usize
    }
}

counter_group! {
    /// The backbone's counters (writers: see the module doc).
    pub struct ClusterCounters => ClusterSnapshot {
        /// Updates an ingest published on `<prefix>.md.<symbol>`.
        published: Counter, Count => "tickfan_cluster_published_total",
            "Conflated updates an ingest published on <prefix>.md.<symbol>.";
        /// Updates an ingest's outbox overwrote before the NATS thread sent
        /// them (publisher thread).
        out_conflated: Counter, Count => "tickfan_cluster_outbox_conflated_total",
            "Updates an ingest's backbone outbox overwrote before they were sent (never blocks the publisher).";
        /// Snapshot requests an ingest answered (with a value or `none`).
        snapshots_served: Counter, Count => "tickfan_cluster_snapshots_served_total",
            "Snapshot requests an ingest answered (a value or none).";
        /// Updates and snapshots an edge wrote into its slots.
        applied: Counter, Count => "tickfan_cluster_applied_total",
            "Backbone updates and snapshots an edge wrote into its slots.";
        /// Snapshot requests an edge sent (cold symbols and re-seeds).
        seeds: Counter, Count => "tickfan_cluster_seeds_total",
            "Snapshot requests an edge sent for cold or re-seeded symbols.";
        /// Re-seeds of every wanted symbol (after a reconnect or a slow-consumer event).
        reseeds: Counter, Count => "tickfan_cluster_reseeds_total",
            "Re-seeds of every wanted symbol after a reconnect or a slow-consumer event.";
        /// Slow-consumer events the client library reported.
        slow_consumer_events: Counter, Count => "tickfan_cluster_slow_consumer_events_total",
            "Slow-consumer events reported by the NATS client library.";
        /// Times the link to the NATS cluster was lost.
        disconnects: Counter, Count => "tickfan_cluster_disconnects_total",
            "Times the link to the NATS cluster was lost.";
        /// Updates that came from another source epoch than the symbol's last one.
        epoch_changes: Counter, Count => "tickfan_cluster_epoch_changes_total",
            "Updates applied from another source epoch than the symbol's previous one (ingest failover).";
        /// 1 while connected to a NATS server (gauge).
        connected: Gauge, Flag => "tickfan_cluster_connected",
            "1 while connected to a NATS server (always 0 on a single node).";
        /// Symbols flagged stale now (gauge; publisher thread).
        symbols_stale: Gauge, Count => "tickfan_symbols_stale",
            "Symbols whose value may be old: backbone lost, or their source silent for --stale-after.";
        /// Of those, symbols whose source is silent for `--stale-after` (gauge; publisher thread).
        symbols_silent: Gauge, Count => "tickfan_symbols_silent",
            "Symbols whose source sent nothing for --stale-after (alert feed_silent).";
        /// NATS subscriptions held for market data now (gauge).
        subjects: Gauge, Count => "tickfan_cluster_subjects",
            "NATS subscriptions held for market data.";
    }
    copied {
        /// Dropped backbone input, by [`BackboneDrop`]; in the snapshot as
        /// `(reason, count)` for every reason (`tickfan_cluster_dropped_total{reason}`).
        dropped: [AtomicU64; BackboneDrop::COUNT] => Vec<(String, u64)> = |c: &ClusterCounters| {
            BackboneDrop::ALL
                .iter()
                .map(|r| (r.as_str().to_string(), c.dropped(*r)))
                .collect()
        },
    }
}

impl ClusterCounters {
    /// Copies every field.
    pub fn snapshot(&self) -> ClusterSnapshot {
        self.values()
    }

    /// Dropped input of one reason.
    pub fn dropped(&self, r: BackboneDrop) -> u64 {
        self.dropped[r.index()].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_index_and_label() {
        for (i, r) in BackboneDrop::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let c = ClusterCounters::default();
        c.dropped[BackboneDrop::WrongSymbol.index()].store(2, Ordering::Relaxed);
        let s = c.snapshot();
        assert!(s.dropped.contains(&("wrong_symbol".to_string(), 2)));
        assert_eq!(c.dropped(BackboneDrop::WrongSymbol), 2);
    }
}
