//! Counters and gauges of the order path.
//!
//! Three groups, each with one writer thread:
//! * [`OrderCounters`]: the order gateway. Every reply passes through it, so
//!   it counts admissions, rejects and every terminal outcome (done, dead,
//!   expired) in one place, and `accepted = done + dead + expired +
//!   in flight` holds at every snapshot taken while it is idle.
//! * [`RetryCounters`]: the retry timer thread.
//! * [`FillCounters`]: the fill thread (sequencer, positions, chunks).

use std::fmt;
use std::sync::atomic::AtomicU64;

use crate::model::lane::Lane;
use crate::model::order_reasons::{DeadReason, DoneStatus, InvalidReason, RejectReason};

use super::table::counter_group;

/// Retries counted by number: 1, 2, … up to `RETRY_BUCKETS` (the last also
/// counts every later retry).
pub(crate) const RETRY_BUCKETS: usize = 8;

counter_group! {
    /// Written by the order gateway thread only.
    ///
    /// More than 15 fields: one per figure of the gateway, its single
    /// writer (groups are split by writer thread, not by size).
    pub struct OrderCounters => GatewaySnapshot {
        /// Order connections accepted.
        connections_accepted: Counter, Count;
        /// Order connections refused (over the per-port limit).
        connections_refused: Counter, Count;
        /// Gauge: order connections open now.
        connections_open: Gauge, Count =>
            "tickfan_order_connections", "Order connections open.";
        /// Orders accepted (`ACK`).
        accepted: Counter, Count =>
            "tickfan_orders_accepted_total", "Orders accepted into the queue.";
        /// `FILL` replies.
        fills: Counter, Count => "tickfan_order_fills_total", "FILL replies sent.";
        /// Bridge attempts of ended orders.
        attempts: Counter, Count;
        /// `REPLAY`s admitted.
        replays: Counter, Count =>
            "tickfan_order_replays_total", "Dead-lettered orders replayed.";
        /// Replies whose client had disconnected (the order still ran to its end).
        replies_to_closed_connections: Counter, Count => "tickfan_orders_replies_to_closed_total",
            "Replies for orders whose connection had closed (the order ran to its end; STATUS tells it).";
        /// Gauge: orders in the lane queues, both lanes together.
        queue_depth: Gauge, Count =>
            "tickfan_order_queue_depth", "Orders waiting for a worker.";
        /// Gauge: age of the oldest queued order, µs.
        queue_oldest_age_us: Gauge, Micros => "tickfan_order_queue_oldest_age_seconds",
            "Age of the oldest order waiting for a worker.";
        /// Gauge: accepted orders without a terminal reply yet.
        in_flight: Gauge, Count =>
            "tickfan_orders_in_flight", "Accepted orders not yet ended.";
        /// Gauge: client order ids remembered for duplicate detection.
        dedup_ids: Gauge, Count;
        /// Connections refused for a wrong, missing or late token (in
        /// `tickfan_auth_failures_total{port}` with the other ports).
        auth_failures: Counter, Count;
        /// Orders refused over `--max-order-rate` (also counted as `SYSTEM_BUSY`).
        rate_limited: Counter, Count => "tickfan_orders_rate_limited_total",
            "Orders refused over the per-connection rate (part of SYSTEM_BUSY).";
        /// Gauge: workers inside a bridge call now (both lanes).
        bridge_calls_in_progress: Gauge, Count => "tickfan_bridge_calls_in_progress",
            "Order workers inside a bridge call now (waiting for a venue's answer).";
        /// Gauge: how long the oldest bridge call in progress has run on the
        /// engine clock, µs (0 when none).
        bridge_call_oldest_age_us: Gauge, Micros => "tickfan_bridge_call_oldest_age_seconds",
            "How long the oldest bridge call in progress has been waiting for its venue (engine clock; 0 when none).";
        /// Gauge: bytes of order journal on disk and pending (0 with `--no-journal`).
        journal_bytes: Gauge, Bytes => "tickfan_journal_bytes",
            "Bytes of order journal on disk and pending (0 with --no-journal); journal_full starts at 80 % of tickfan_journal_max_bytes.";
        /// Gauge: `--journal-max-bytes` (0 with `--no-journal`).
        journal_max_bytes: Gauge, Bytes => "tickfan_journal_max_bytes",
            "--journal-max-bytes (0 with --no-journal); at it new orders get SYSTEM_BUSY journal_full.";
        /// Gauge: 1 while the journal's disk is full (new orders refused
        /// `SYSTEM_BUSY journal_full` until a probe finds room).
        journal_disk_full: Gauge, Flag => "tickfan_journal_disk_full",
            "1 while the order journal's disk is full: new orders get SYSTEM_BUSY journal_full until a probe (every 1 s) finds room.";
        /// Gauge: 1 once a journal write or sync failed for good
        /// (`SYSTEM_BUSY journal_error` until a restart).
        journal_failed: Gauge, Flag => "tickfan_journal_failed",
            "1 once an order journal write or sync failed for good (not a full disk): new orders get SYSTEM_BUSY journal_error until a restart.";
        /// Times the journal's disk was found full.
        journal_disk_full_episodes: Counter, Count => "tickfan_journal_disk_full_episodes_total",
            "Times the order journal's disk was found full.";
        /// Orders refused `SYSTEM_BUSY journal_full` (the journal at
        /// `--journal-max-bytes`, or its disk full; also counted as `SYSTEM_BUSY`).
        journal_full_rejects: Counter, Count => "tickfan_orders_journal_full_total",
            "Orders refused SYSTEM_BUSY journal_full: the journal at --journal-max-bytes or its disk full (also counted as SYSTEM_BUSY).";
        /// Gauge: 1 while the order kill switch is on (`POST /orders/halt`).
        halted: Gauge, Flag => "tickfan_orders_halted",
            "1 while the order kill switch is on (POST /orders/halt): every NEW is refused, queued orders are held.";
        /// `NEW`s refused `SYSTEM_BUSY halted` (also counted as `SYSTEM_BUSY`).
        halted_rejects: Counter, Count => "tickfan_orders_halted_rejects_total",
            "NEW orders refused SYSTEM_BUSY halted (also counted as SYSTEM_BUSY).";
        /// Orders cancelled (`CANCEL`, or `POST /orders/halt?cancel=queued`).
        cancelled: Counter, Count => "tickfan_orders_cancelled_total",
            "Orders cancelled before they reached a bridge (CANCEL, or POST /orders/halt?cancel=queued).";
    }
    extra {
        /// Replies `REJECT`, by [`RejectReason::index`] (`EXPIRED` counts accepted
        /// orders that expired): `tickfan_orders_rejected_total{reason}`, and
        /// `tickfan_orders_expired_total`, `tickfan_orders_duplicates_total`.
        rejected: [AtomicU64; RejectReason::COUNT],
        /// `INVALID` rejects by [`InvalidReason::index`].
        invalid: [AtomicU64; InvalidReason::COUNT],
        /// `DONE` by [`DoneStatus::index`]: `tickfan_orders_done_total{status}`.
        done: [AtomicU64; DoneStatus::COUNT],
        /// `DEAD` by [`DeadReason::index`]: `tickfan_orders_dead_lettered_total{reason}`.
        dead: [AtomicU64; DeadReason::COUNT],
        /// Gauge: orders queued per lane, by [`Lane::index`]:
        /// `tickfan_order_lane_depth{lane}`.
        lane_depth: [AtomicU64; 2],
        /// Gauge: age of the oldest queued order per lane, µs:
        /// `tickfan_order_lane_oldest_age_seconds{lane}`.
        lane_oldest_age_us: [AtomicU64; 2],
    }
}

counter_group! {
    /// Written by the fill thread only (`order::fills::fill_thread`). The
    /// first four are `tickfan_fills_total{outcome}` ([`FILL_OUTCOMES`]).
    pub struct FillCounters => FillSnapshot {
        /// Venue fills applied in fill-number order (by arrival or by the timer).
        applied: Counter, Count;
        /// Venue fills that arrived early and were held.
        held: Counter, Count;
        /// Venue fills ignored: duplicates, or older than the next expected one.
        stale: Counter, Count;
        /// Early fills refused at a hold bound (a later fill still brings the position up to date).
        refused: Counter, Count;
        /// Gaps skipped by the gap timer.
        gaps_skipped: Counter, Count =>
            "tickfan_fill_gaps_skipped_total", "Fill gaps skipped by the gap timer.";
        /// Fill numbers never received (skipped over).
        fills_missing: Counter, Count =>
            "tickfan_fills_missing_total", "Fill numbers never received (skipped over).";
        /// Gap-timer ticks.
        ticks: Counter, Count;
        /// Gauge: early fills held now.
        held_now: Gauge, Count => "tickfan_fills_held", "Early fills held now.";
        /// Large orders split into chunks.
        large_orders: Counter, Count;
        /// Chunks sent.
        chunks: Counter, Count =>
            "tickfan_order_chunks_total", "Chunks sent for large orders.";
        /// Chunks that ended without executing (dead or expired).
        chunks_failed: Counter, Count;
        /// Gauge: orders whose fills are being sequenced now.
        open: Gauge, Count;
    }
}

/// Reads one figure of a [`FillSnapshot`].
pub(crate) type FillField = fn(&FillSnapshot) -> u64;

/// `tickfan_fills_total{outcome}`: the sequencer's four outcomes, one
/// labelled family over four fields of [`FillSnapshot`].
pub(crate) const FILL_OUTCOMES: [(&str, FillField); 4] = [
    ("applied", |s| s.applied),
    ("held", |s| s.held),
    ("stale", |s| s.stale),
    ("refused", |s| s.refused),
];

counter_group! {
    /// Written by the retry timer thread only, but for the two lease counters
    /// (written by the workers: see each).
    pub struct RetryCounters => RetrySnapshot {
        /// Orders that were due for a retry but past their deadline.
        expired_when_due: Counter, Count;
        /// Gauge: orders waiting in the delay queue.
        depth: Gauge, Count =>
            "tickfan_order_retry_queue_depth", "Orders waiting for a retry.";
        /// Gauge: µs until the next retry is due (0 when none).
        next_due_in_us: Gauge, Micros;
        /// Bridge calls abandoned when their lease expired (written by the
        /// order workers, `fetch_add`; `order::lanes::lease`).
        lease_expired: Counter, Count => "tickfan_orders_lease_expired_total",
            "Bridge calls abandoned when their lease (--bridge-lease) expired; the order is retried on the next bridge.";
        /// Answers that came with a retired fencing token and were discarded
        /// (written by the workers and their call threads, `fetch_add`).
        late_answers_discarded: Counter, Count => "tickfan_orders_late_answers_discarded_total",
            "Venue answers that arrived with a retired fencing token and were discarded (never applied).";
    }
    extra {
        /// Retries handed back to the workers, by retry number (index 0 = retry 1):
        /// `tickfan_order_retries_total{retry}`.
        fired: [AtomicU64; RETRY_BUCKETS],
    }
}

/// A point-in-time copy of the order path's three groups: each group's
/// snapshot as the counter table declares it (`gateway`, `retry`,
/// `sequencing`), plus the labelled figures (by reason, by lane, by retry
/// number) and the totals derived from them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrderSnapshot {
    /// The gateway's figures, as declared in [`OrderCounters`].
    pub gateway: GatewaySnapshot,
    /// The retry timer's figures, as declared in [`RetryCounters`].
    pub retry: RetrySnapshot,
    /// The fill thread's figures, as declared in [`FillCounters`].
    pub sequencing: FillSnapshot,
    /// Rejected orders by reason name (every reason listed).
    pub rejected: Vec<(String, u64)>,
    /// Invalid lines by reason name (reasons seen only).
    pub invalid: Vec<(String, u64)>,
    /// Orders done by status name.
    pub done: Vec<(String, u64)>,
    /// Orders dead-lettered by reason name.
    pub dead: Vec<(String, u64)>,
    /// Sum of `done`.
    pub done_total: u64,
    /// Sum of `dead`.
    pub dead_total: u64,
    /// Rejected as expired (one of `rejected`).
    pub expired: u64,
    /// Rejected as duplicates (one of `rejected`).
    pub duplicates: u64,
    /// Rejected `SYSTEM_BUSY` (one of `rejected`).
    pub busy: u64,
    /// Retries fired, by retry number (1st, 2nd, …).
    pub retries: Vec<u64>,
    /// Orders waiting in the small and the large lane.
    pub lane_depth: (u64, u64),
    /// Age of the oldest order waiting in the small and the large lane.
    pub lane_oldest_age_us: (u64, u64),
}

fn get(c: &AtomicU64) -> u64 {
    c.load(std::sync::atomic::Ordering::Relaxed)
}

fn named<const N: usize>(names: [&str; N], vals: &[AtomicU64; N]) -> Vec<(String, u64)> {
    names
        .iter()
        .zip(vals.iter())
        .map(|(n, v)| (n.to_string(), get(v)))
        .collect()
}

impl OrderSnapshot {
    /// Copies the three groups.
    pub fn take(o: &OrderCounters, r: &RetryCounters, f: &FillCounters) -> Self {
        let rejected = named(RejectReason::ALL.map(RejectReason::as_str), &o.rejected);
        let done = named(DoneStatus::ALL.map(DoneStatus::as_str), &o.done);
        let dead = named(DeadReason::ALL.map(DeadReason::as_str), &o.dead);
        let mut invalid = named(InvalidReason::ALL.map(InvalidReason::as_str), &o.invalid);
        invalid.retain(|(_, n)| *n > 0);
        OrderSnapshot {
            done_total: done.iter().map(|(_, n)| n).sum(),
            dead_total: dead.iter().map(|(_, n)| n).sum(),
            expired: get(&o.rejected[RejectReason::Expired.index()]),
            duplicates: get(&o.rejected[RejectReason::Duplicate.index()]),
            busy: get(&o.rejected[RejectReason::SystemBusy.index()]),
            rejected,
            invalid,
            done,
            dead,
            retries: r.fired.iter().map(get).collect(),
            lane_depth: (
                get(&o.lane_depth[Lane::Small.index()]),
                get(&o.lane_depth[Lane::Large.index()]),
            ),
            lane_oldest_age_us: (
                get(&o.lane_oldest_age_us[Lane::Small.index()]),
                get(&o.lane_oldest_age_us[Lane::Large.index()]),
            ),
            gateway: o.values(),
            retry: r.values(),
            sequencing: f.values(),
        }
    }

    /// True when the order port saw nothing.
    pub fn is_idle(&self) -> bool {
        self.gateway.accepted == 0 && self.rejected.iter().all(|(_, n)| *n == 0)
    }

    /// The periodic report line for the interval since `last` (`secs` long),
    /// or `None` when the order port has seen nothing at all.
    pub fn interval_line(&self, last: &OrderSnapshot, secs: f64) -> Option<String> {
        if self.is_idle() {
            return None;
        }
        let secs = secs.max(1e-9);
        let retries: u64 = self.retries.iter().sum::<u64>() - last.retries.iter().sum::<u64>();
        Some(format!(
            "          orders accepted {:>7.0}/s busy {} done {} dead {} expired {} retries {} | queue small {} oldest {:.1}ms large {} oldest {:.1}ms | retry queue {} in flight {} | at bridges {} oldest {:.1}ms | fills held {} gaps skipped {}",
            (self.gateway.accepted - last.gateway.accepted) as f64 / secs,
            self.busy - last.busy,
            self.done_total - last.done_total,
            self.dead_total - last.dead_total,
            self.expired - last.expired,
            retries,
            self.lane_depth.0,
            self.lane_oldest_age_us.0 as f64 / 1_000.0,
            self.lane_depth.1,
            self.lane_oldest_age_us.1 as f64 / 1_000.0,
            self.retry.depth,
            self.gateway.in_flight,
            self.gateway.bridge_calls_in_progress,
            self.gateway.bridge_call_oldest_age_us as f64 / 1_000.0,
            self.sequencing.held_now,
            self.sequencing.gaps_skipped - last.sequencing.gaps_skipped,
        ) + if self.gateway.halted == 1 { " | HALTED" } else { "" })
    }
}

impl fmt::Display for OrderSnapshot {
    /// The order lines of the final report.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |v: &[(String, u64)]| {
            v.iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "orders accepted {} = done {} + dead-lettered {} + expired {} + in flight {}   (connections {} refused {} auth failures {})",
            self.gateway.accepted,
            self.done_total,
            self.dead_total,
            self.expired,
            self.gateway.in_flight,
            self.gateway.connections_accepted,
            self.gateway.connections_refused,
            self.gateway.auth_failures
        )?;
        writeln!(
            f,
            "orders rejected: {}   (rate limited {})",
            join(&self.rejected),
            self.gateway.rate_limited
        )?;
        if !self.invalid.is_empty() {
            writeln!(f, "invalid by reason: {}", join(&self.invalid))?;
        }
        writeln!(
            f,
            "orders done: {}   dead-lettered: {}",
            join(&self.done),
            join(&self.dead)
        )?;
        let retries: Vec<String> = self
            .retries
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| format!("#{} {n}", i + 1))
            .collect();
        writeln!(
            f,
            "retries by number: {}   (expired when due {})  leases expired {} (late answers discarded {})  fills {}  bridge attempts {}  replays {}  replies to closed connections {}",
            if retries.is_empty() { "none".to_string() } else { retries.join(", ") },
            self.retry.expired_when_due,
            self.retry.lease_expired,
            self.retry.late_answers_discarded,
            self.gateway.fills,
            self.gateway.attempts,
            self.gateway.replays,
            self.gateway.replies_to_closed_connections
        )?;
        let q = &self.sequencing;
        writeln!(
            f,
            "fill sequencing: applied {} held {} stale/duplicate {} refused {} gaps skipped {} fills missing {}   large orders {} in {} chunks ({} failed)",
            q.applied,
            q.held,
            q.stale,
            q.refused,
            q.gaps_skipped,
            q.fills_missing,
            q.large_orders,
            q.chunks,
            q.chunks_failed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_line_shows_rates_queues_and_calls_at_bridges() {
        let last = OrderSnapshot {
            gateway: GatewaySnapshot {
                accepted: 100,
                ..GatewaySnapshot::default()
            },
            retries: vec![1, 0],
            ..OrderSnapshot::default()
        };
        assert!(last.interval_line(&last, 1.0).is_some());
        assert_eq!(OrderSnapshot::default().interval_line(&last, 1.0), None);
        let now = OrderSnapshot {
            gateway: GatewaySnapshot {
                accepted: 300,
                in_flight: 3,
                bridge_calls_in_progress: 2,
                bridge_call_oldest_age_us: 1_430,
                ..GatewaySnapshot::default()
            },
            retries: vec![4, 1],
            ..last.clone()
        };
        let line = now.interval_line(&last, 2.0).expect("orders seen");
        for part in [
            "orders accepted     100/s",
            "retries 4",
            "in flight 3",
            "at bridges 2 oldest 1.4ms",
        ] {
            assert!(line.contains(part), "{part:?} in {line}");
        }
    }
}
