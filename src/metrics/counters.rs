//! The fixed registry of counters and gauges.
//!
//! Every counter has exactly one writer thread (named on each group), so an
//! increment is a relaxed load and store, not a locked read-modify-write.
//! Readers (reporter, tests, admin) load with `Relaxed`: counters are
//! statistics, never used to synchronise data. Groups with different writers
//! live on different cache lines.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::model::poison::PoisonReason;

use super::capacity_counters::{CapacityCounters, CapacitySnapshot};

use super::cluster_counters::{ClusterCounters, ClusterSnapshot};
use super::order_counters::{FillCounters, OrderCounters, OrderSnapshot, RetryCounters};
use super::tls_counters::{TlsCounters, TlsSnapshot};

/// Adds `n` to a counter that only the calling thread writes.
#[inline]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// Sets a gauge that only the calling thread writes.
#[inline]
pub(crate) fn set(c: &AtomicU64, v: u64) {
    c.store(v, Ordering::Relaxed);
}

#[inline]
fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Counters written by the feed thread.
#[derive(Debug, Default)]
pub struct FeedCounters {
    /// Feed connections accepted.
    pub connections_accepted: AtomicU64,
    /// Feed connections refused (over the per-port limit).
    pub connections_refused: AtomicU64,
    /// Gauge: feed connections open now.
    pub connections_open: AtomicU64,
    /// Bytes read from feed sockets.
    pub bytes_read: AtomicU64,
    /// Header, comment and blank lines skipped (not ticks).
    pub lines_skipped: AtomicU64,
    /// Ticks that parsed and validated and were written to their slot.
    pub ticks_valid: AtomicU64,
    /// Tick lines superseded by a newer line of their symbol in the same
    /// feed read while the feed was behind: conflated at the feed, not
    /// parsed (see `feed::conflate`).
    pub ticks_conflated: AtomicU64,
    /// Poison lines, by [`PoisonReason::index`].
    pub poison: [AtomicU64; PoisonReason::COUNT],
    /// Crossed or locked quotes (bid >= ask) seen; they pass through.
    pub crossed_quotes: AtomicU64,
    /// Dead letters that could not be handed to the DLQ thread (its queue was
    /// full); the poison counters above still count them.
    pub dlq_handoff_dropped: AtomicU64,
    /// Gauge: symbols interned.
    pub symbols: AtomicU64,
    /// Feeds refused for a wrong, missing or late token.
    pub auth_failures: AtomicU64,
}

/// Counters written by the publisher thread.
///
/// One atomic per counter the publisher writes (a flat table read by
/// [`Counters::snapshot`]), so over 15 fields.
#[derive(Debug, Default)]
pub struct PublishCounters {
    /// Updates taken from the slots and published (one per distinct value).
    pub published: AtomicU64,
    /// Updates the publisher never took (the sequence gaps it saw):
    /// overwritten in their slot, or conflated at the feed. So
    /// `published + conflated = ticks_valid + ticks_conflated` once drained.
    pub conflated: AtomicU64,
    /// Frames appended to subscriber buffers.
    pub frames: AtomicU64,
    /// Bytes written to subscriber sockets.
    pub bytes_written: AtomicU64,
    /// Subscriber connections accepted.
    pub subscribers_accepted: AtomicU64,
    /// Subscriber connections refused (over the per-port limit).
    pub subscribers_refused: AtomicU64,
    /// Gauge: subscribers connected now.
    pub subscribers_open: AtomicU64,
    /// Updates a slow subscriber did not get appended (its buffer was past the
    /// high-water mark) and will receive as a later latest value instead.
    pub subscriber_conflations: AtomicU64,
    /// Times a subscriber crossed its high-water mark (entered slow mode).
    pub slow_episodes: AtomicU64,
    /// Commands received from subscribers.
    pub commands: AtomicU64,
    /// Commands answered with an error (unknown, malformed, wrong arity).
    pub command_errors: AtomicU64,
    /// Gauge: bytes buffered for all subscribers now.
    pub buffered_bytes: AtomicU64,
    /// Gauge: symbol ids waiting in the dirty queue (set once per publisher turn).
    pub dirty_depth: AtomicU64,
    /// Subscribers refused for a wrong or late token.
    pub auth_failures: AtomicU64,
    /// Subscriptions refused over the per-client limit.
    pub subscriptions_refused: AtomicU64,
    /// Times a subscriber's throttle (`TICKFAN.THROTTLE`) held a symbol
    /// back: it gets the symbol's latest value when the window opens (the
    /// updates in between count as `subscriber_conflations`).
    pub throttled: AtomicU64,
    /// Frames replayed from the history ring by `TICKFAN.SINCE`.
    pub since_frames: AtomicU64,
}

/// Every counter of one engine.
#[derive(Debug, Default)]
pub struct Counters {
    /// Single writer: the feed thread.
    pub feed: CachePadded<FeedCounters>,
    /// Single writer: the publisher thread.
    pub publish: CachePadded<PublishCounters>,
    /// Single writer: the DLQ thread. Dead letters stored.
    pub dlq_stored: CachePadded<AtomicU64>,
    /// Single writer: the order gateway thread.
    pub orders: CachePadded<OrderCounters>,
    /// Single writer: the retry timer thread.
    pub retry: CachePadded<RetryCounters>,
    /// Single writer: the order fill thread.
    pub fills: CachePadded<FillCounters>,
    /// Single writer: the order path's scaler thread (workers, capacity view).
    pub capacity: CachePadded<CapacityCounters>,

    /// The NATS backbone (ingest and edge roles).
    pub cluster: CachePadded<ClusterCounters>,
    /// TLS on the subscriber, order and admin ports (each port's group
    /// written by that port's thread).
    pub tls: TlsCounters,
}

/// A point-in-time copy of every counter, for reports.
///
/// One field per counter (the per-side groups nested), so over 15 fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CountersSnapshot {
    /// Ticks received: valid + poison + conflated at the feed.
    pub ticks_received: u64,
    /// Valid ticks.
    pub ticks_valid: u64,
    /// Tick lines conflated at the feed (superseded in their read, not parsed).
    pub feed_conflated: u64,
    /// Poison ticks in total.
    pub poison_total: u64,
    /// Poison ticks by reason name (every reason listed, zeros included).
    pub poison: Vec<(String, u64)>,
    /// Header/comment/blank lines skipped.
    pub lines_skipped: u64,
    /// Crossed or locked quotes passed through.
    pub crossed_quotes: u64,
    /// Bytes read from feeds.
    pub feed_bytes: u64,
    /// Feed connections accepted / refused / open.
    pub feed_connections: (u64, u64, u64),
    /// Symbols interned.
    pub symbols: u64,
    /// Updates published.
    pub published: u64,
    /// Updates never published (sequence gaps): conflated in the slots or at the feed.
    pub conflated: u64,
    /// Frames appended to subscriber buffers.
    pub frames: u64,
    /// Bytes written to subscribers.
    pub subscriber_bytes: u64,
    /// Subscriber connections accepted / refused / open.
    pub subscriber_connections: (u64, u64, u64),
    /// Per-subscriber conflations, all subscribers.
    pub subscriber_conflations: u64,
    /// Slow-mode episodes, all subscribers.
    pub slow_episodes: u64,
    /// Subscriber commands / errors.
    pub commands: (u64, u64),
    /// Bytes buffered for subscribers now.
    pub buffered_bytes: u64,
    /// Symbols waiting in the dirty queue.
    pub dirty_depth: u64,
    /// Connections refused for a wrong, missing or late token (feed, subscriber).
    pub auth_failures: (u64, u64),
    /// Subscriptions refused over the per-client limit.
    pub subscriptions_refused: u64,
    /// Symbols held back by subscribers' throttles.
    pub throttled: u64,
    /// Frames replayed by `TICKFAN.SINCE`.
    pub since_frames: u64,
    /// Dead letters stored / dropped at hand-off.
    pub dlq: (u64, u64),
    /// The order path.
    pub orders: OrderSnapshot,
    /// The order lanes' workers and capacity view.
    pub capacity: CapacitySnapshot,

    /// The NATS backbone.
    pub cluster: ClusterSnapshot,
    /// TLS per port.
    pub tls: TlsSnapshot,
}

impl Counters {
    /// Copies every counter.
    pub fn snapshot(&self) -> CountersSnapshot {
        let f = &*self.feed;
        let p = &*self.publish;
        let poison: Vec<(String, u64)> = PoisonReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), get(&f.poison[r.index()])))
            .collect();
        let poison_total = poison.iter().map(|(_, n)| n).sum();
        let valid = get(&f.ticks_valid);
        let feed_conflated = get(&f.ticks_conflated);
        CountersSnapshot {
            ticks_received: valid + poison_total + feed_conflated,
            ticks_valid: valid,
            feed_conflated,
            poison_total,
            poison,
            lines_skipped: get(&f.lines_skipped),
            crossed_quotes: get(&f.crossed_quotes),
            feed_bytes: get(&f.bytes_read),
            feed_connections: (
                get(&f.connections_accepted),
                get(&f.connections_refused),
                get(&f.connections_open),
            ),
            symbols: get(&f.symbols),
            published: get(&p.published),
            conflated: get(&p.conflated),
            frames: get(&p.frames),
            subscriber_bytes: get(&p.bytes_written),
            subscriber_connections: (
                get(&p.subscribers_accepted),
                get(&p.subscribers_refused),
                get(&p.subscribers_open),
            ),
            subscriber_conflations: get(&p.subscriber_conflations),
            slow_episodes: get(&p.slow_episodes),
            commands: (get(&p.commands), get(&p.command_errors)),
            buffered_bytes: get(&p.buffered_bytes),
            dirty_depth: get(&p.dirty_depth),
            auth_failures: (get(&f.auth_failures), get(&p.auth_failures)),
            subscriptions_refused: get(&p.subscriptions_refused),
            throttled: get(&p.throttled),
            since_frames: get(&p.since_frames),
            dlq: (get(&self.dlq_stored), get(&f.dlq_handoff_dropped)),
            orders: OrderSnapshot::take(&self.orders, &self.retry, &self.fills),
            capacity: CapacitySnapshot::take(&self.capacity),

            cluster: self.cluster.snapshot(),
            tls: self.tls.snapshot(),
        }
    }

    /// Poison count for one reason.
    pub fn poison(&self, reason: PoisonReason) -> u64 {
        get(&self.feed.poison[reason.index()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_is_valid_plus_poison() {
        let c = Counters::default();
        bump(&c.feed.ticks_valid, 5);
        bump(&c.feed.poison[PoisonReason::BadNumber.index()], 2);
        bump(&c.feed.poison[PoisonReason::LineTooLong.index()], 1);
        let s = c.snapshot();
        assert_eq!((s.ticks_received, s.ticks_valid, s.poison_total), (8, 5, 3));
        assert_eq!(c.poison(PoisonReason::BadNumber), 2);
        assert_eq!(s.poison.len(), PoisonReason::COUNT);
    }
}
