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

/// Retries counted by number: 1, 2, … up to `RETRY_BUCKETS` (the last also
/// counts every later retry).
pub(crate) const RETRY_BUCKETS: usize = 8;

/// Written by the order gateway thread only.
///
/// One atomic per order-path counter: a flat table, so over 15 fields.
#[derive(Debug, Default)]
pub struct OrderCounters {
    /// Order connections accepted.
    pub connections_accepted: AtomicU64,
    /// Order connections refused (over the per-port limit).
    pub connections_refused: AtomicU64,
    /// Gauge: order connections open now.
    pub connections_open: AtomicU64,
    /// Orders accepted (`ACK`).
    pub accepted: AtomicU64,
    /// Replies `REJECT`, by [`RejectReason::index`] (`EXPIRED` counts accepted orders that expired).
    pub rejected: [AtomicU64; RejectReason::COUNT],
    /// `INVALID` rejects by [`InvalidReason::index`].
    pub invalid: [AtomicU64; InvalidReason::COUNT],
    /// `DONE` by [`DoneStatus::index`].
    pub done: [AtomicU64; DoneStatus::COUNT],
    /// `DEAD` by [`DeadReason::index`].
    pub dead: [AtomicU64; DeadReason::COUNT],
    /// `FILL` replies.
    pub fills: AtomicU64,
    /// Bridge attempts of ended orders.
    pub attempts: AtomicU64,
    /// `REPLAY`s admitted.
    pub replays: AtomicU64,
    /// Replies whose client had disconnected (the order still ran to its end).
    pub replies_to_closed_connections: AtomicU64,
    /// Gauge: orders in the lane queues, both lanes together.
    pub queue_depth: AtomicU64,
    /// Gauge: age of the oldest queued order, µs.
    pub queue_oldest_age_us: AtomicU64,
    /// Gauge: accepted orders without a terminal reply yet.
    pub in_flight: AtomicU64,
    /// Gauge: client order ids remembered for duplicate detection.
    pub dedup_ids: AtomicU64,
    /// Connections refused for a wrong, missing or late token.
    pub auth_failures: AtomicU64,
    /// Orders refused over `--max-order-rate` (also counted as `SYSTEM_BUSY`).
    pub rate_limited: AtomicU64,
    /// Gauge: orders queued per lane, by [`Lane::index`].
    pub lane_depth: [AtomicU64; 2],
    /// Gauge: age of the oldest queued order per lane, µs.
    pub lane_oldest_age_us: [AtomicU64; 2],
    /// Gauge: workers inside a bridge call now (both lanes).
    pub bridge_calls_in_progress: AtomicU64,
    /// Gauge: how long the oldest bridge call in progress has run on the
    /// engine clock, µs (0 when none).
    pub bridge_call_oldest_age_us: AtomicU64,
    /// Gauge: bytes of order journal on disk and pending (0 with `--no-journal`).
    pub journal_bytes: AtomicU64,
    /// Gauge: `--journal-max-bytes` (0 with `--no-journal`).
    pub journal_max_bytes: AtomicU64,
    /// Gauge: 1 while the journal's disk is full (new orders refused
    /// `SYSTEM_BUSY journal_full` until a probe finds room).
    pub journal_disk_full: AtomicU64,
    /// Gauge: 1 once a journal write or sync failed for good
    /// (`SYSTEM_BUSY journal_error` until a restart).
    pub journal_failed: AtomicU64,
    /// Times the journal's disk was found full.
    pub journal_disk_full_episodes: AtomicU64,
    /// Orders refused `SYSTEM_BUSY journal_full` (the journal at
    /// `--journal-max-bytes`, or its disk full; also counted as `SYSTEM_BUSY`).
    pub journal_full_rejects: AtomicU64,
    /// Gauge: 1 while the order kill switch is on (`POST /orders/halt`).
    pub halted: AtomicU64,
    /// `NEW`s refused `SYSTEM_BUSY halted` (also counted as `SYSTEM_BUSY`).
    pub halted_rejects: AtomicU64,
    /// Orders cancelled (`CANCEL`, or `POST /orders/halt?cancel=queued`).
    pub cancelled: AtomicU64,
}

/// Written by the fill thread only (`order::fills::fill_thread`).
#[derive(Debug, Default)]
pub struct FillCounters {
    /// Venue fills applied in fill-number order (by arrival or by the timer).
    pub applied: AtomicU64,
    /// Venue fills that arrived early and were held.
    pub held: AtomicU64,
    /// Venue fills ignored: duplicates, or older than the next expected one.
    pub stale: AtomicU64,
    /// Early fills refused at a hold bound (a later fill still brings the position up to date).
    pub refused: AtomicU64,
    /// Gaps skipped by the gap timer.
    pub gaps_skipped: AtomicU64,
    /// Fill numbers never received (skipped over).
    pub fills_missing: AtomicU64,
    /// Gap-timer ticks.
    pub ticks: AtomicU64,
    /// Gauge: early fills held now.
    pub held_now: AtomicU64,
    /// Large orders split into chunks.
    pub large_orders: AtomicU64,
    /// Chunks sent.
    pub chunks: AtomicU64,
    /// Chunks that ended without executing (dead or expired).
    pub chunks_failed: AtomicU64,
    /// Gauge: orders whose fills are being sequenced now.
    pub open: AtomicU64,
}

/// A copy of the fill counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct FillSnapshot {
    /// See [`FillCounters::applied`].
    pub applied: u64,
    /// See [`FillCounters::held`].
    pub held: u64,
    /// See [`FillCounters::stale`].
    pub stale: u64,
    /// See [`FillCounters::refused`].
    pub refused: u64,
    /// See [`FillCounters::gaps_skipped`].
    pub gaps_skipped: u64,
    /// See [`FillCounters::fills_missing`].
    pub fills_missing: u64,
    /// See [`FillCounters::ticks`].
    pub ticks: u64,
    /// See [`FillCounters::held_now`].
    pub held_now: u64,
    /// See [`FillCounters::large_orders`].
    pub large_orders: u64,
    /// See [`FillCounters::chunks`].
    pub chunks: u64,
    /// See [`FillCounters::chunks_failed`].
    pub chunks_failed: u64,
    /// See [`FillCounters::open`].
    pub open: u64,
}

impl FillSnapshot {
    /// Copies the group.
    pub fn take(f: &FillCounters) -> Self {
        FillSnapshot {
            applied: get(&f.applied),
            held: get(&f.held),
            stale: get(&f.stale),
            refused: get(&f.refused),
            gaps_skipped: get(&f.gaps_skipped),
            fills_missing: get(&f.fills_missing),
            ticks: get(&f.ticks),
            held_now: get(&f.held_now),
            large_orders: get(&f.large_orders),
            chunks: get(&f.chunks),
            chunks_failed: get(&f.chunks_failed),
            open: get(&f.open),
        }
    }
}

/// Written by the retry timer thread only, but for the two lease counters
/// (written by the workers: see each).
#[derive(Debug, Default)]
pub struct RetryCounters {
    /// Retries handed back to the workers, by retry number (index 0 = retry 1).
    pub fired: [AtomicU64; RETRY_BUCKETS],
    /// Orders that were due for a retry but past their deadline.
    pub expired_when_due: AtomicU64,
    /// Gauge: orders waiting in the delay queue.
    pub depth: AtomicU64,
    /// Gauge: µs until the next retry is due (0 when none).
    pub next_due_in_us: AtomicU64,
    /// Bridge calls abandoned when their lease expired (written by the
    /// order workers, `fetch_add`; `order::venue (the lease)`).
    pub lease_expired: AtomicU64,
    /// Answers that came with a retired fencing token and were discarded
    /// (written by the workers and their call threads, `fetch_add`).
    pub late_answers_discarded: AtomicU64,
}

/// A copy of the order counters, for reports.
///
/// One field per counter of [`OrderCounters`], so over 15 fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrderSnapshot {
    /// Connections accepted / refused / open.
    pub connections: (u64, u64, u64),
    /// Orders accepted.
    pub accepted: u64,
    /// Rejects by reason name (SYSTEM_BUSY, INVALID, DUPLICATE, EXPIRED).
    pub rejected: Vec<(String, u64)>,
    /// `INVALID` rejects by detail reason (non-zero only).
    pub invalid: Vec<(String, u64)>,
    /// `DONE` by status (FILLED, PARTIAL, FAILED).
    pub done: Vec<(String, u64)>,
    /// `DEAD` by reason.
    pub dead: Vec<(String, u64)>,
    /// Done in total.
    pub done_total: u64,
    /// Dead-lettered in total.
    pub dead_total: u64,
    /// Expired after acceptance.
    pub expired: u64,
    /// Duplicates rejected.
    pub duplicates: u64,
    /// SYSTEM_BUSY rejects.
    pub busy: u64,
    /// Fills sent.
    pub fills: u64,
    /// Bridge attempts of ended orders.
    pub attempts: u64,
    /// Retries fired by retry number (1-based; the last bucket counts later ones too).
    pub retries: Vec<u64>,
    /// Orders expired when their retry came due.
    pub retry_expired: u64,
    /// Bridge calls abandoned at their lease's expiry.
    pub lease_expired: u64,
    /// Late answers (retired fencing token) discarded.
    pub late_answers_discarded: u64,
    /// Replays admitted.
    pub replays: u64,
    /// Replies to clients already gone.
    pub replies_to_closed_connections: u64,
    /// Main queue depth now.
    pub queue_depth: u64,
    /// Oldest queued order's age now, µs.
    pub queue_oldest_age_us: u64,
    /// Delay queue depth now.
    pub retry_depth: u64,
    /// Accepted orders not yet ended.
    pub in_flight: u64,
    /// Ids remembered.
    pub dedup_ids: u64,
    /// Queue depth now per lane (small, large).
    pub lane_depth: (u64, u64),
    /// Oldest queued order's age now per lane (small, large), µs.
    pub lane_oldest_age_us: (u64, u64),
    /// Workers inside a bridge call now.
    pub bridge_calls_in_progress: u64,
    /// Age of the oldest bridge call in progress now (engine clock), µs; 0 when none.
    pub bridge_call_oldest_age_us: u64,
    /// Order journal bytes now (0 with `--no-journal`).
    pub journal_bytes: u64,
    /// `--journal-max-bytes` (0 with `--no-journal`).
    pub journal_max_bytes: u64,
    /// 1 while the journal's disk is full.
    pub journal_disk_full: u64,
    /// 1 once the journal failed for good.
    pub journal_failed: u64,
    /// Times the journal's disk was found full.
    pub journal_disk_full_episodes: u64,
    /// `SYSTEM_BUSY journal_full` rejects (part of `busy`).
    pub journal_full_rejects: u64,
    /// Fill sequencing, positions and chunks.
    pub sequencing: FillSnapshot,
    /// Connections refused for a wrong, missing or late token.
    pub auth_failures: u64,
    /// `SYSTEM_BUSY rate_limited` rejects (part of `busy`).
    pub rate_limited: u64,
    /// 1 while the order kill switch is on.
    pub halted: u64,
    /// `SYSTEM_BUSY halted` rejects (part of `busy`).
    pub halted_rejects: u64,
    /// Orders cancelled.
    pub cancelled: u64,
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
            connections: (
                get(&o.connections_accepted),
                get(&o.connections_refused),
                get(&o.connections_open),
            ),
            accepted: get(&o.accepted),
            done_total: done.iter().map(|(_, n)| n).sum(),
            dead_total: dead.iter().map(|(_, n)| n).sum(),
            expired: get(&o.rejected[RejectReason::Expired.index()]),
            duplicates: get(&o.rejected[RejectReason::Duplicate.index()]),
            busy: get(&o.rejected[RejectReason::SystemBusy.index()]),
            rejected,
            invalid,
            done,
            dead,
            fills: get(&o.fills),
            attempts: get(&o.attempts),
            retries: r.fired.iter().map(get).collect(),
            retry_expired: get(&r.expired_when_due),
            lease_expired: get(&r.lease_expired),
            late_answers_discarded: get(&r.late_answers_discarded),
            replays: get(&o.replays),
            replies_to_closed_connections: get(&o.replies_to_closed_connections),
            queue_depth: get(&o.queue_depth),
            queue_oldest_age_us: get(&o.queue_oldest_age_us),
            retry_depth: get(&r.depth),
            in_flight: get(&o.in_flight),
            dedup_ids: get(&o.dedup_ids),
            lane_depth: (
                get(&o.lane_depth[Lane::Small.index()]),
                get(&o.lane_depth[Lane::Large.index()]),
            ),
            lane_oldest_age_us: (
                get(&o.lane_oldest_age_us[Lane::Small.index()]),
                get(&o.lane_oldest_age_us[Lane::Large.index()]),
            ),
            bridge_calls_in_progress: get(&o.bridge_calls_in_progress),
            bridge_call_oldest_age_us: get(&o.bridge_call_oldest_age_us),
            journal_bytes: get(&o.journal_bytes),
            journal_max_bytes: get(&o.journal_max_bytes),
            journal_disk_full: get(&o.journal_disk_full),
            journal_failed: get(&o.journal_failed),
            journal_disk_full_episodes: get(&o.journal_disk_full_episodes),
            journal_full_rejects: get(&o.journal_full_rejects),
            sequencing: FillSnapshot::take(f),
            auth_failures: get(&o.auth_failures),
            rate_limited: get(&o.rate_limited),
            halted: get(&o.halted),
            halted_rejects: get(&o.halted_rejects),
            cancelled: get(&o.cancelled),
        }
    }

    /// True when the order port saw nothing.
    pub fn is_idle(&self) -> bool {
        self.accepted == 0 && self.rejected.iter().all(|(_, n)| *n == 0)
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
            (self.accepted - last.accepted) as f64 / secs,
            self.busy - last.busy,
            self.done_total - last.done_total,
            self.dead_total - last.dead_total,
            self.expired - last.expired,
            retries,
            self.lane_depth.0,
            self.lane_oldest_age_us.0 as f64 / 1_000.0,
            self.lane_depth.1,
            self.lane_oldest_age_us.1 as f64 / 1_000.0,
            self.retry_depth,
            self.in_flight,
            self.bridge_calls_in_progress,
            self.bridge_call_oldest_age_us as f64 / 1_000.0,
            self.sequencing.held_now,
            self.sequencing.gaps_skipped - last.sequencing.gaps_skipped,
        ) + if self.halted == 1 { " | HALTED" } else { "" })
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
            self.accepted,
            self.done_total,
            self.dead_total,
            self.expired,
            self.in_flight,
            self.connections.0,
            self.connections.1,
            self.auth_failures
        )?;
        writeln!(
            f,
            "orders rejected: {}   (rate limited {})",
            join(&self.rejected),
            self.rate_limited
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
            self.retry_expired,
            self.lease_expired,
            self.late_answers_discarded,
            self.fills,
            self.attempts,
            self.replays,
            self.replies_to_closed_connections
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
            accepted: 100,
            retries: vec![1, 0],
            ..OrderSnapshot::default()
        };
        assert!(last.interval_line(&last, 1.0).is_some());
        assert_eq!(OrderSnapshot::default().interval_line(&last, 1.0), None);
        let now = OrderSnapshot {
            accepted: 300,
            retries: vec![4, 1],
            in_flight: 3,
            bridge_calls_in_progress: 2,
            bridge_call_oldest_age_us: 1_430,
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
