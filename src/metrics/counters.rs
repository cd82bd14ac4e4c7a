//! The fixed registry of counters and gauges: the feed's and the
//! publisher's groups (declared with [`counter_group!`], see
//! [`super::table`]), and [`Counters`], which holds every group.
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
use super::table::counter_group;

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

counter_group! {
    /// Counters written by the feed thread.
    pub struct FeedCounters => FeedSnapshot {
        /// Feed connections accepted.
        connections_accepted: Counter, Count;
        /// Feed connections refused (over the per-port limit).
        connections_refused: Counter, Count;
        /// Gauge: feed connections open now.
        connections_open: Gauge, Count => "tickfan_feed_connections", "Feed connections open.";
        /// Bytes read from feed sockets.
        bytes_read: Counter, Bytes => "tickfan_feed_bytes_total", "Bytes read from feeds.";
        /// Header, comment and blank lines skipped (not ticks).
        lines_skipped: Counter, Count =>
            "tickfan_lines_skipped_total", "Header, comment and blank feed lines.";
        /// Ticks that parsed and validated and were written to their slot.
        ticks_valid: Counter, Count => "tickfan_ticks_valid_total",
            "Ticks that parsed, validated and were written to their slot.";
        /// Tick lines superseded by a newer line of their symbol in the same
        /// feed read while the feed was behind: conflated at the feed, not
        /// parsed (see `feed::conflate`).
        ticks_conflated: Counter, Count => "tickfan_feed_conflated_total",
            "Tick lines superseded by a newer line of their symbol in the same feed read (not parsed).";
        /// Crossed or locked quotes (bid >= ask) seen; they pass through.
        crossed_quotes: Counter, Count =>
            "tickfan_crossed_quotes_total", "Crossed or locked quotes passed through.";
        /// Dead letters that could not be handed to the DLQ thread (its queue was
        /// full); the poison counters still count them.
        dlq_handoff_dropped: Counter, Count => "tickfan_dlq_handoff_dropped_total",
            "Dead letters the feed could not hand to the DLQ thread (still counted as poison).";
        /// Gauge: symbols interned.
        symbols: Gauge, Count => "tickfan_symbols", "Symbols interned.";
        /// Feeds refused for a wrong, missing or late token (in
        /// `tickfan_auth_failures_total{port}` with the other ports).
        auth_failures: Counter, Count;
    }
    extra {
        /// Poison lines, by [`PoisonReason::index`] (`tickfan_poison_total{reason}`).
        poison: [AtomicU64; PoisonReason::COUNT],
    }
}

counter_group! {
    /// Counters written by the publisher thread.
    ///
    /// More than 15 fields: one per figure of the publisher, its single
    /// writer (groups are split by writer thread, not by size).
    pub struct PublishCounters => PublishSnapshot {
        /// Updates taken from the slots and published (one per distinct value).
        published: Counter, Count =>
            "tickfan_published_total", "Updates taken from the slots and published.";
        /// Updates the publisher never took (the sequence gaps it saw):
        /// overwritten in their slot, or conflated at the feed. So
        /// `published + conflated = ticks_valid + ticks_conflated` once drained.
        conflated: Counter, Count => "tickfan_conflated_total",
            "Updates never published: overwritten in their slot, or conflated at the feed (sequence gaps).";
        /// Frames appended to subscriber buffers.
        frames: Counter, Count => "tickfan_frames_total", "Frames appended to subscriber buffers.";
        /// Bytes written to subscriber sockets.
        bytes_written: Counter, Bytes =>
            "tickfan_subscriber_bytes_total", "Bytes written to subscribers.";
        /// Subscriber connections accepted.
        subscribers_accepted: Counter, Count;
        /// Subscriber connections refused (over the per-port limit; in
        /// `tickfan_connections_refused_total` with the feed's).
        subscribers_refused: Counter, Count;
        /// Gauge: subscribers connected now.
        subscribers_open: Gauge, Count => "tickfan_subscribers", "Subscribers connected.";
        /// Updates a slow subscriber did not get appended (its buffer was past the
        /// high-water mark) and will receive as a later latest value instead.
        subscriber_conflations: Counter, Count => "tickfan_subscriber_conflations_total",
            "Updates a slow subscriber will get as a later latest value instead.";
        /// Times a subscriber crossed its high-water mark (entered slow mode).
        slow_episodes: Counter, Count => "tickfan_slow_episodes_total",
            "Times a subscriber crossed its high-water mark.";
        /// Commands received from subscribers.
        commands: Counter, Count => "tickfan_commands_total", "Subscriber commands received.";
        /// Commands answered with an error (unknown, malformed, wrong arity).
        command_errors: Counter, Count => "tickfan_command_errors_total",
            "Subscriber commands answered with an error.";
        /// Gauge: bytes buffered for all subscribers now.
        buffered_bytes: Gauge, Bytes =>
            "tickfan_buffered_bytes", "Bytes buffered for all subscribers.";
        /// Gauge: symbol ids waiting in the dirty queue (set once per publisher turn).
        dirty_depth: Gauge, Count =>
            "tickfan_dirty_queue_depth", "Symbols waiting for the publisher.";
        /// Subscribers refused for a wrong or late token (in
        /// `tickfan_auth_failures_total{port}` with the other ports).
        auth_failures: Counter, Count;
        /// Subscriptions refused over the per-client limit.
        subscriptions_refused: Counter, Count => "tickfan_subscriptions_refused_total",
            "Subscriptions refused over the per-client limit.";
        /// Times a subscriber's throttle (`TICKFAN.THROTTLE`) held a symbol
        /// back: it gets the symbol's latest value when the window opens (the
        /// updates in between count as `subscriber_conflations`).
        throttled: Counter, Count => "tickfan_subscriber_throttled_total",
            "Times a subscriber's TICKFAN.THROTTLE held a symbol back until its window opens.";
        /// Frames replayed from the history ring by `TICKFAN.SINCE`.
        since_frames: Counter, Count => "tickfan_since_frames_total",
            "Frames replayed from the history ring by TICKFAN.SINCE.";
    }
}

counter_group! {
    /// The dead-letter thread's one counter.
    pub struct DlqCounters => DlqSnapshot {
        /// Dead letters stored.
        stored: Counter, Count => "tickfan_dlq_stored_total", "Dead letters stored.";
    }
}

/// Every counter of one engine.
#[derive(Debug, Default)]
pub struct Counters {
    /// Single writer: the feed thread.
    pub feed: CachePadded<FeedCounters>,
    /// Single writer: the publisher thread.
    pub publish: CachePadded<PublishCounters>,
    /// Single writer: the DLQ thread.
    pub dlq: CachePadded<DlqCounters>,
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

/// A point-in-time copy of every counter, for reports: each group's
/// snapshot as the counter table declares it ([`super::table`]), plus the
/// figures derived from them or labelled (poison by reason).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CountersSnapshot {
    /// The feed thread's figures, as declared in [`FeedCounters`].
    pub feed: FeedSnapshot,
    /// The publisher's figures, as declared in [`PublishCounters`].
    pub publish: PublishSnapshot,
    /// The DLQ thread's figures, as declared in [`DlqCounters`].
    pub dlq: DlqSnapshot,
    /// Ticks received: valid + poison + conflated at the feed.
    pub ticks_received: u64,
    /// Poison ticks in total.
    pub poison_total: u64,
    /// Poison ticks by reason name (every reason listed, zeros included).
    pub poison: Vec<(String, u64)>,
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
        let feed = self.feed.values();
        let poison: Vec<(String, u64)> = PoisonReason::ALL
            .iter()
            .map(|r| (r.as_str().to_string(), get(&self.feed.poison[r.index()])))
            .collect();
        let poison_total = poison.iter().map(|(_, n)| n).sum();
        CountersSnapshot {
            ticks_received: feed.ticks_valid + poison_total + feed.ticks_conflated,
            poison_total,
            poison,
            feed,
            publish: self.publish.values(),
            dlq: self.dlq.values(),
            orders: OrderSnapshot::take(&self.orders, &self.retry, &self.fills),
            capacity: CapacitySnapshot::take(&self.capacity),
            cluster: self.cluster.snapshot(),
            tls: self.tls.snapshot(),
        }
    }

    /// Stores `next`, `next + 1`, … into every figure of every table
    /// group (tests: each figure tells where it went).
    #[cfg(test)]
    pub(crate) fn fill_distinct(&self, next: &mut u64) {
        self.feed.fill_distinct(next);
        self.publish.fill_distinct(next);
        self.dlq.fill_distinct(next);
        self.orders.fill_distinct(next);
        self.retry.fill_distinct(next);
        self.fills.fill_distinct(next);
        self.cluster.fill_distinct(next);
        for p in crate::tls::TlsPortName::ALL {
            self.tls.port(p).fill_distinct(next);
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
        assert_eq!(
            (s.ticks_received, s.feed.ticks_valid, s.poison_total),
            (8, 5, 3)
        );
        assert_eq!(c.poison(PoisonReason::BadNumber), 2);
        assert_eq!(s.poison.len(), PoisonReason::COUNT);
    }

    /// The JSON report names each figure as the table does: every table
    /// entry is at `counters.<group>.<field>`, holding its own value (each
    /// atomic holds a different number), so no second spelling can drift.
    #[test]
    fn the_report_json_holds_every_table_figure_under_its_group() {
        use super::super::order_counters::{FillCounters, OrderCounters, RetryCounters};
        use super::super::table::Desc;
        let c = Counters::default();
        c.fill_distinct(&mut 1);
        let s = c.snapshot();
        let json = serde_json::to_value(&s).expect("serialises");
        fn check<S>(table: &[Desc<S>], snap: &S, at: &serde_json::Value, seen: &mut Vec<u64>) {
            for d in table {
                let v = (d.get)(snap);
                assert_eq!(at[d.field].as_u64(), Some(v), "{} in {at}", d.field);
                assert!(!seen.contains(&v), "{} shares its value", d.field);
                seen.push(v);
            }
        }
        let mut seen = Vec::new();
        let counters = &json;
        check(FeedCounters::TABLE, &s.feed, &counters["feed"], &mut seen);
        check(
            PublishCounters::TABLE,
            &s.publish,
            &counters["publish"],
            &mut seen,
        );
        check(DlqCounters::TABLE, &s.dlq, &counters["dlq"], &mut seen);
        let orders = &counters["orders"];
        check(
            OrderCounters::TABLE,
            &s.orders.gateway,
            &orders["gateway"],
            &mut seen,
        );
        check(
            RetryCounters::TABLE,
            &s.orders.retry,
            &orders["retry"],
            &mut seen,
        );
        check(
            FillCounters::TABLE,
            &s.orders.sequencing,
            &orders["sequencing"],
            &mut seen,
        );
        let plain = FeedCounters::TABLE.len()
            + PublishCounters::TABLE.len()
            + DlqCounters::TABLE.len()
            + OrderCounters::TABLE.len()
            + RetryCounters::TABLE.len()
            + FillCounters::TABLE.len();
        assert_eq!(seen.len(), plain);
        // Beside the groups, only labelled and derived figures: a copy of
        // a table figure under another name would show up here.
        let keys = |v: &serde_json::Value| -> Vec<String> {
            let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(counters),
            [
                "capacity",
                "cluster",
                "dlq",
                "feed",
                "orders",
                "poison",
                "poison_total",
                "publish",
                "ticks_received",
                "tls"
            ]
        );
        assert_eq!(
            keys(orders),
            [
                "busy",
                "dead",
                "dead_total",
                "done",
                "done_total",
                "duplicates",
                "expired",
                "gateway",
                "invalid",
                "lane_depth",
                "lane_oldest_age_us",
                "rejected",
                "retries",
                "retry",
                "sequencing"
            ]
        );
        // A group's object holds its table's figures and nothing else.
        assert_eq!(
            counters["feed"].as_object().map(|m| m.len()),
            Some(FeedCounters::TABLE.len())
        );
        assert_eq!(
            counters["publish"].as_object().map(|m| m.len()),
            Some(PublishCounters::TABLE.len())
        );
    }
}
