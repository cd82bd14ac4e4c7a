//! Which pending symbol a slow (or paced) subscriber is sent next
//! (`--sub-pending-order`). Its pending marks are conflated symbols whose
//! latest value it has not had; the bytes its budget leaves go to one of
//! them at a time, and the choice moves freshness:
//!
//! - **`fifo`**: oldest mark first. Every pending symbol is refreshed once
//!   per round, hot or cold alike.
//! - **`sqrt-rate`**: the largest `age × √updates`, where `age` is the time
//!   since the mark and `updates` the symbol's valid updates so far (its
//!   rate, up to a common factor). Refresh rates then tend to be
//!   proportional to the square root of each symbol's update rate — the
//!   classic rule for least average staleness: hot symbols come round more
//!   often, cold ones less, and none starves (its age keeps growing).
//!
//! Which one is the default is decided by freshness p99 in
//! `perf/freshness.sh` (perf/RESULTS.md, "Freshness").
//!
//! Pure: the marks, the update counts and the time are passed in. `fifo`
//! is O(1); `sqrt-rate` scans the marks (at most `max_symbols`) per frame
//! sent, no allocation.

use std::collections::VecDeque;

use crate::symbols::SymbolId;

/// The rule (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PendingOrder {
    /// Oldest mark first.
    #[default]
    Fifo,
    /// Largest age × √(updates so far).
    SqrtRate,
}

/// Index in `marks` ((id, marked at ns), oldest first) of the symbol to
/// send next at `now_ns`; `updates[id]` = the symbol's updates so far.
pub fn pick(
    order: PendingOrder,
    marks: &VecDeque<(SymbolId, u64)>,
    updates: &[u64],
    now_ns: u64,
) -> Option<usize> {
    if marks.is_empty() {
        return None;
    }
    match order {
        PendingOrder::Fifo => Some(0),
        PendingOrder::SqrtRate => {
            let mut best = (0usize, -1.0f64);
            for (i, &(id, at)) in marks.iter().enumerate() {
                let n = updates.get(id as usize).copied().unwrap_or(0);
                // +1 ns: a mark made this instant still ranks by its rate.
                let score = (now_ns.saturating_sub(at) + 1) as f64 * ((n + 1) as f64).sqrt();
                if score > best.1 {
                    best = (i, score);
                }
            }
            Some(best.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_takes_the_oldest_mark() {
        let marks: VecDeque<_> = [(3, 10), (1, 20), (2, 30)].into_iter().collect();
        assert_eq!(pick(PendingOrder::Fifo, &marks, &[], 100), Some(0));
        assert_eq!(pick(PendingOrder::Fifo, &VecDeque::new(), &[], 100), None);
    }

    #[test]
    fn sqrt_rate_weighs_age_by_the_root_of_the_update_count() {
        // Symbol 0: 10,000 updates, marked 10 ns ago; symbol 1: 100
        // updates, marked 90 ns ago. Scores 11·100 = 1100 vs 91·10 = 910.
        let updates = [10_000 - 1, 100 - 1];
        let marks: VecDeque<_> = [(1, 10), (0, 90)].into_iter().collect();
        assert_eq!(pick(PendingOrder::SqrtRate, &marks, &updates, 100), Some(1));
        // Later the cold one's age wins: it never starves.
        let marks: VecDeque<_> = [(1, 10), (0, 990)].into_iter().collect();
        assert_eq!(
            pick(PendingOrder::SqrtRate, &marks, &updates, 1000),
            Some(0)
        );
    }
}
