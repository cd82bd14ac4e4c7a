//! Per-subscriber figures for reports and the admin endpoint: refreshed by
//! the publisher every stats interval into a shared list (the only lock on
//! the publish side, taken once per interval, never per update), with the
//! last closed subscribers kept so a report still shows them.
//!
//! Single writer: the publisher thread. Readers: the admin endpoint and the
//! final report, through the shared list.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::metrics::report::SubscriberStats;

/// Closed subscribers kept for the final report.
const CLOSED_STATS_KEPT: usize = 64;

/// The shared list and what the publisher keeps for it.
#[derive(Debug)]
pub(crate) struct StatsBoard {
    pub(super) shared: Arc<Mutex<Vec<SubscriberStats>>>,
    /// The last closed subscribers, oldest first, at most `CLOSED_STATS_KEPT`.
    pub(super) closed: VecDeque<SubscriberStats>,
    /// When the next refresh is due, monotonic ns.
    next_ns: u64,
}

impl StatsBoard {
    /// A board that publishes into `shared`; the first refresh is due at once.
    pub(crate) fn new(shared: Arc<Mutex<Vec<SubscriberStats>>>) -> Self {
        StatsBoard {
            shared,
            closed: VecDeque::with_capacity(CLOSED_STATS_KEPT),
            next_ns: 0,
        }
    }

    /// Time left until the next refresh.
    pub(crate) fn ns_until_due(&self, now_ns: u64) -> u64 {
        self.next_ns.saturating_sub(now_ns)
    }

    /// A refresh is due.
    pub(crate) fn due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_ns
    }

    /// Schedules the next refresh `interval_ns` after `now_ns`.
    pub(crate) fn next_due(&mut self, now_ns: u64, interval_ns: u64) {
        self.next_ns = now_ns + interval_ns;
    }

    /// Keeps the final figures of a closed subscriber (dropping the oldest kept).
    pub(crate) fn closed(&mut self, mut st: SubscriberStats) {
        st.connected = false;
        st.subscriptions = 0;
        st.buffered_bytes = 0;
        st.pending_symbols = 0;
        if self.closed.len() == CLOSED_STATS_KEPT {
            self.closed.pop_front();
        }
        self.closed.push_back(st);
    }
}
