//! Counters and gauges of the NATS backbone (`src/cluster/`): what an
//! ingest published and served, what an edge received, dropped (by
//! reason) and re-seeded, and the link's state.
//!
//! Writers: the `tickfan-nats` thread writes every field but
//! `out_conflated` (the ingest's outbox conflates on the publisher's side)
//! and the stale gauges, which only the publisher thread writes. Readers load `Relaxed`.

use std::sync::atomic::{AtomicU64, Ordering};

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

/// The backbone's counters.
#[derive(Debug, Default)]
pub struct ClusterCounters {
    /// Updates an ingest published on `<prefix>.md.<symbol>`.
    pub published: AtomicU64,
    /// Updates an ingest's outbox overwrote before the NATS thread sent
    /// them (publisher thread).
    pub out_conflated: AtomicU64,
    /// Snapshot requests an ingest answered (with a value or `none`).
    pub snapshots_served: AtomicU64,
    /// Updates and snapshots an edge wrote into its slots.
    pub applied: AtomicU64,
    /// Dropped backbone input, by [`BackboneDrop`].
    pub dropped: [AtomicU64; BackboneDrop::COUNT],
    /// Snapshot requests an edge sent (cold symbols and re-seeds).
    pub seeds: AtomicU64,
    /// Re-seeds of every wanted symbol (after a reconnect or a slow-consumer event).
    pub reseeds: AtomicU64,
    /// Slow-consumer events the client library reported.
    pub slow_consumer_events: AtomicU64,
    /// Times the link to the NATS cluster was lost.
    pub disconnects: AtomicU64,
    /// Updates that came from another source epoch than the symbol's last one.
    pub epoch_changes: AtomicU64,
    /// 1 while connected to a NATS server (gauge).
    pub connected: AtomicU64,
    /// Symbols flagged stale now (gauge; publisher thread).
    pub symbols_stale: AtomicU64,
    /// Of those, symbols whose source is silent for `--stale-after` (gauge; publisher thread).
    pub symbols_silent: AtomicU64,
    /// NATS subscriptions held for market data now (gauge).
    pub subjects: AtomicU64,
}

/// A copy of [`ClusterCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ClusterSnapshot {
    /// See [`ClusterCounters::published`].
    pub published: u64,
    /// See [`ClusterCounters::out_conflated`].
    pub out_conflated: u64,
    /// See [`ClusterCounters::snapshots_served`].
    pub snapshots_served: u64,
    /// See [`ClusterCounters::applied`].
    pub applied: u64,
    /// `(reason, count)` for every [`BackboneDrop`].
    pub dropped: Vec<(String, u64)>,
    /// See [`ClusterCounters::seeds`].
    pub seeds: u64,
    /// See [`ClusterCounters::reseeds`].
    pub reseeds: u64,
    /// See [`ClusterCounters::slow_consumer_events`].
    pub slow_consumer_events: u64,
    /// See [`ClusterCounters::disconnects`].
    pub disconnects: u64,
    /// See [`ClusterCounters::epoch_changes`].
    pub epoch_changes: u64,
    /// See [`ClusterCounters::connected`].
    pub connected: u64,
    /// See [`ClusterCounters::symbols_stale`].
    pub symbols_stale: u64,
    /// See [`ClusterCounters::symbols_silent`].
    pub symbols_silent: u64,
    /// See [`ClusterCounters::subjects`].
    pub subjects: u64,
}

impl ClusterCounters {
    /// Copies every field.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClusterSnapshot {
            published: g(&self.published),
            out_conflated: g(&self.out_conflated),
            snapshots_served: g(&self.snapshots_served),
            applied: g(&self.applied),
            dropped: BackboneDrop::ALL
                .iter()
                .map(|r| (r.as_str().to_string(), g(&self.dropped[r.index()])))
                .collect(),
            seeds: g(&self.seeds),
            reseeds: g(&self.reseeds),
            slow_consumer_events: g(&self.slow_consumer_events),
            disconnects: g(&self.disconnects),
            epoch_changes: g(&self.epoch_changes),
            connected: g(&self.connected),
            symbols_stale: g(&self.symbols_stale),
            symbols_silent: g(&self.symbols_silent),
            subjects: g(&self.subjects),
        }
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
