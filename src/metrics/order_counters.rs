//! Counters and gauges of the order path.
//!
//! Two groups, each with one writer thread:
//! * [`OrderCounters`]: the order gateway. Every reply passes through it, so
//!   it counts admissions, rejects and every terminal outcome (done, dead,
//!   expired) in one place, and `accepted = done + dead + expired +
//!   in flight` holds at every snapshot taken while it is idle.
//! * [`RetryCounters`]: the retry timer thread.

use std::fmt;
use std::sync::atomic::AtomicU64;

use crate::order::protocol::{DeadReason, DoneStatus, InvalidReason, RejectReason};

/// Retries counted by number: 1, 2, … up to `RETRY_BUCKETS` (the last also
/// counts every later retry).
pub const RETRY_BUCKETS: usize = 8;

/// Written by the order gateway thread only.
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
    pub undeliverable: AtomicU64,
    /// Gauge: orders in the main queue.
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
}

/// Written by the retry timer thread only.
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
}

/// A copy of the order counters, for reports.
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
    /// Replays admitted.
    pub replays: u64,
    /// Replies to clients already gone.
    pub undeliverable: u64,
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
    /// Connections refused for a wrong, missing or late token.
    pub auth_failures: u64,
    /// `SYSTEM_BUSY rate_limited` rejects (part of `busy`).
    pub rate_limited: u64,
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
    /// Copies both groups.
    pub fn take(o: &OrderCounters, r: &RetryCounters) -> Self {
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
            replays: get(&o.replays),
            undeliverable: get(&o.undeliverable),
            queue_depth: get(&o.queue_depth),
            queue_oldest_age_us: get(&o.queue_oldest_age_us),
            retry_depth: get(&r.depth),
            in_flight: get(&o.in_flight),
            dedup_ids: get(&o.dedup_ids),
            auth_failures: get(&o.auth_failures),
            rate_limited: get(&o.rate_limited),
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
            "          orders accepted {:>7.0}/s busy {} done {} dead {} expired {} retries {} | queue {} oldest {:.1}ms retry queue {} in flight {}",
            (self.accepted - last.accepted) as f64 / secs,
            self.busy - last.busy,
            self.done_total - last.done_total,
            self.dead_total - last.dead_total,
            self.expired - last.expired,
            retries,
            self.queue_depth,
            self.queue_oldest_age_us as f64 / 1_000.0,
            self.retry_depth,
            self.in_flight,
        ))
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
            "retries by number: {}   (expired when due {})  fills {}  bridge attempts {}  replays {}  undeliverable replies {}",
            if retries.is_empty() { "none".to_string() } else { retries.join(", ") },
            self.retry_expired,
            self.fills,
            self.attempts,
            self.replays,
            self.undeliverable
        )
    }
}
