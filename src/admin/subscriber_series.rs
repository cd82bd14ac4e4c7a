//! Per-subscriber series with bounded cardinality.
//!
//! A subscriber's connection id is never reused, so a series labelled by id
//! is a new time series at every reconnect: a client in a reconnect loop
//! would grow Prometheus's index without limit. `/metrics` therefore shows
//! the [`SUBSCRIBER_SERIES_MAX`] subscribers with the largest backlogs,
//! labelled by their **rank** (`rank="1"` is the largest backlog), plus
//! aggregates over every subscriber. The series set is fixed by the
//! constant, whatever the clients do; which connection holds a rank is in
//! `/report` (`subscribers`, with ids, peers and the same figures).
//!
//! # Invariants
//! - At most [`SUBSCRIBER_SERIES_MAX`] samples per per-rank family; ranks
//!   are `1..=n` with no gap, `n` = connected subscribers capped at the max.
//! - The ranking is total (backlog bytes, then staleness, both descending,
//!   then id ascending), so a scrape is deterministic.

use super::exposition::Exposition;
use crate::metrics::report::SubscriberStats;

/// How many subscribers get per-rank series in `/metrics`.
pub const SUBSCRIBER_SERIES_MAX: usize = 10;

/// The connected subscribers with the largest backlogs, largest first, at most `n`.
pub(crate) fn largest_backlogs(subs: &[SubscriberStats], n: usize) -> Vec<&SubscriberStats> {
    let mut connected: Vec<&SubscriberStats> = subs.iter().filter(|s| s.connected).collect();
    connected.sort_by(|a, b| {
        b.buffered_bytes
            .cmp(&a.buffered_bytes)
            .then(b.staleness_us.cmp(&a.staleness_us))
            .then(a.id.cmp(&b.id))
    });
    connected.truncate(n);
    connected
}

/// Renders the per-rank families and the aggregates.
pub fn render(o: &mut Exposition, subs: &[SubscriberStats]) {
    let top = largest_backlogs(subs, SUBSCRIBER_SERIES_MAX);
    let ranks: Vec<String> = (1..=top.len()).map(|r| r.to_string()).collect();
    type Figure = fn(&SubscriberStats) -> f64;
    let families: [(&str, &str, Figure); 3] = [
        (
            "tickfan_subscriber_backlog_bytes",
            "Bytes waiting in the buffer of the subscriber at this rank (rank 1: the largest backlog; see /report for who it is).",
            |s| s.buffered_bytes as f64,
        ),
        (
            "tickfan_subscriber_pending_symbols",
            "Symbols the subscriber at this backlog rank will receive as latest values.",
            |s| s.pending_symbols as f64,
        ),
        (
            "tickfan_subscriber_staleness_seconds",
            "Age of the oldest pending symbol of the subscriber at this backlog rank.",
            |s| s.staleness_us as f64 / 1e6,
        ),
    ];
    for (name, help, figure) in families {
        o.head(name, "gauge", help);
        for (s, rank) in top.iter().zip(&ranks) {
            o.labelled(name, &[("rank", rank)], figure(s));
        }
    }
    let connected = || subs.iter().filter(|s| s.connected);
    o.one(
        "tickfan_subscribers_lagging",
        "gauge",
        "Connected subscribers with symbols pending (past their high-water mark or draining).",
        connected().filter(|s| s.pending_symbols > 0).count(),
    );
    o.one(
        "tickfan_subscribers_pending_symbols",
        "gauge",
        "Symbols pending over every connected subscriber.",
        connected().map(|s| s.pending_symbols).sum::<u64>(),
    );
    o.one(
        "tickfan_subscribers_max_staleness_seconds",
        "gauge",
        "Age of the oldest pending symbol over every connected subscriber.",
        connected().map(|s| s.staleness_us).max().unwrap_or(0) as f64 / 1e6,
    );
    o.one(
        "tickfan_subscriber_series_limit",
        "gauge",
        "Most subscribers shown per rank in the per-subscriber families.",
        SUBSCRIBER_SERIES_MAX,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(id: u64, backlog: u64, stale: u64, connected: bool) -> SubscriberStats {
        SubscriberStats {
            id,
            connected,
            buffered_bytes: backlog,
            staleness_us: stale,
            pending_symbols: u64::from(stale > 0),
            ..SubscriberStats::default()
        }
    }

    #[test]
    fn largest_backlog_first_ties_by_staleness_then_id_closed_ones_left_out() {
        let subs = [
            sub(1, 10, 0, true),
            sub(2, 500, 0, true),
            sub(3, 10, 7, true),
            sub(4, 9_999, 9, false),
            sub(5, 10, 0, true),
        ];
        let ids: Vec<u64> = largest_backlogs(&subs, 10).iter().map(|s| s.id).collect();
        assert_eq!(ids, [2, 3, 1, 5]);
        let ids: Vec<u64> = largest_backlogs(&subs, 2).iter().map(|s| s.id).collect();
        assert_eq!(ids, [2, 3]);
    }

    #[test]
    fn many_subscribers_give_at_most_the_limit_per_family() {
        let subs: Vec<SubscriberStats> = (1..=1_000).map(|i| sub(i, i * 3, i, true)).collect();
        let mut o = Exposition::default();
        render(&mut o, &subs);
        let text = o.finish();
        let backlog: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("tickfan_subscriber_backlog_bytes{"))
            .collect();
        assert_eq!(backlog.len(), SUBSCRIBER_SERIES_MAX);
        assert_eq!(
            backlog[0],
            "tickfan_subscriber_backlog_bytes{rank=\"1\"} 3000"
        );
        assert!(text.contains("tickfan_subscribers_lagging 1000\n"));
        assert!(text.contains("tickfan_subscribers_max_staleness_seconds 0.001\n"));
    }
}
