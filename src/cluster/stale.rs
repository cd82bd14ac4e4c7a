//! Stale flags: which symbols' values may be old, so that a subscriber
//! never mistakes an old value for a live one.
//!
//! A symbol turns **stale** when
//! - its source is silent: no update for `--stale-after` (every role; off
//!   without the flag), reason `silent`; or
//! - an edge lost its backbone link: every symbol it knows, reason
//!   `backbone_lost`;
//!
//! and **live** again when a new value of it is published (reason
//! `update`) or, on an edge, when the re-seed after the link returned
//! confirms the value it holds is still the newest (reason `confirmed`).
//!
//! The publisher owns the [`StaleBoard`] (it sees every update it takes)
//! and tells subscribers of the reserved channel [`STALE_CHANNEL`] each
//! change, as one message `stale,<symbol>,<reason>` or
//! `live,<symbol>,<reason>` (see docs/scale-out.md); `/metrics` shows
//! `tickfan_symbols_stale` and `tickfan_symbols_silent`, and the alert
//! `feed_silent` is active while a symbol is silent.
//!
//! An edge's NATS thread reaches the board only through the
//! [`StaleLink`]: a generation bumped on each lost link and a bounded
//! queue of re-seed confirmations (capacity `--max-symbols`; a full queue
//! drops the confirmation, and the symbol turns live on its next update).
//!
//! Bounds: two entries per symbol, notices pending at most one per symbol
//! per scan. No allocation per update.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;

use crate::symbols::SymbolId;

/// The reserved channel the stale and live notices go to.
pub const STALE_CHANNEL: &[u8] = b"__tickfan.stale";

/// Why a symbol's state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// No update for `--stale-after`.
    Silent,
    /// The edge lost its backbone link.
    BackboneLost,
    /// A new value was published.
    Update,
    /// The re-seed confirmed the value held.
    Confirmed,
}

impl Why {
    /// Its word in a notice.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Why::Silent => "silent",
            Why::BackboneLost => "backbone_lost",
            Why::Update => "update",
            Why::Confirmed => "confirmed",
        }
    }
}

/// An edge's NATS thread → the publisher's board.
#[derive(Debug)]
pub(crate) struct StaleLink {
    lost: AtomicU64,
    /// When the last loss happened (engine clock): values taken later are
    /// not flagged (they came over the new link).
    lost_at_ns: AtomicU64,
    confirmed: ArrayQueue<SymbolId>,
}

impl StaleLink {
    /// A link for `capacity` symbols.
    pub(crate) fn new(capacity: usize) -> Self {
        StaleLink {
            lost: AtomicU64::new(0),
            lost_at_ns: AtomicU64::new(0),
            confirmed: ArrayQueue::new(capacity),
        }
    }

    /// The backbone link was lost at `now_ns` (engine clock): every symbol
    /// whose value was taken before then is stale.
    pub(crate) fn lost(&self, now_ns: u64) {
        self.lost_at_ns.store(now_ns, Ordering::Relaxed);
        // Release: the time is visible to whoever sees the new generation.
        self.lost.fetch_add(1, Ordering::Release);
    }

    /// A re-seed confirmed `id`'s value.
    pub(crate) fn confirm(&self, id: SymbolId) {
        let _ = self.confirmed.push(id);
    }
}

/// One state change to tell subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Notice {
    /// The symbol.
    pub id: SymbolId,
    /// True: turned stale; false: live again.
    pub stale: bool,
    /// Why.
    pub why: Why,
}

/// The publisher's view of stale symbols.
#[derive(Debug)]
pub(crate) struct StaleBoard {
    after_ns: u64,
    link: Option<std::sync::Arc<StaleLink>>,
    seen_lost: u64,
    /// Per symbol: when its last value was taken (engine clock; 0 = never).
    last_ns: Vec<u64>,
    /// Per symbol: why it is stale, if it is.
    state: Vec<Option<Why>>,
    stale: usize,
    silent: usize,
    notices: Vec<Notice>,
    next_scan_ns: u64,
}

/// How often the board looks for silence and for the edge's link events.
const SCAN_NS: u64 = 50_000_000;

impl StaleBoard {
    /// A board for `capacity` symbols; `after_ns` 0 turns silence off.
    pub(crate) fn new(
        capacity: usize,
        after_ns: u64,
        link: Option<std::sync::Arc<StaleLink>>,
    ) -> Self {
        StaleBoard {
            after_ns,
            link,
            seen_lost: 0,
            last_ns: vec![0; capacity],
            state: vec![None; capacity],
            stale: 0,
            silent: 0,
            notices: Vec::with_capacity(capacity),
            next_scan_ns: 0,
        }
    }

    /// True once per scan period (never when the board is off).
    pub(crate) fn due(&mut self, now_ns: u64) -> bool {
        if self.is_off() || now_ns < self.next_scan_ns {
            return false;
        }
        self.next_scan_ns = now_ns + SCAN_NS;
        true
    }

    /// True when nothing can ever turn stale (a single node without the flag).
    pub(crate) fn is_off(&self) -> bool {
        self.after_ns == 0 && self.link.is_none()
    }

    /// The publisher took a new value of `id` at `now_ns`. No allocation.
    #[inline]
    pub(crate) fn updated(&mut self, id: SymbolId, now_ns: u64) {
        let i = id as usize;
        self.last_ns[i] = now_ns.max(1);
        if self.state[i].is_some() {
            self.set_live(id, Why::Update);
        }
    }

    fn set_live(&mut self, id: SymbolId, why: Why) {
        if let Some(was) = self.state[id as usize].take() {
            self.stale -= 1;
            if was == Why::Silent {
                self.silent -= 1;
            }
            self.notices.push(Notice {
                id,
                stale: false,
                why,
            });
        }
    }

    fn set_stale(&mut self, id: SymbolId, why: Why) {
        let s = &mut self.state[id as usize];
        if s.is_none() {
            *s = Some(why);
            self.stale += 1;
            if why == Why::Silent {
                self.silent += 1;
            }
            self.notices.push(Notice {
                id,
                stale: true,
                why,
            });
        }
    }

    /// Looks for changes among the first `known` symbols at `now_ns`.
    pub(crate) fn scan(&mut self, known: usize, now_ns: u64) {
        if let Some(link) = self.link.clone() {
            let lost = link.lost.load(Ordering::Acquire);
            if lost != self.seen_lost {
                self.seen_lost = lost;
                let at = link.lost_at_ns.load(Ordering::Relaxed);
                for id in 0..known as SymbolId {
                    let last = self.last_ns[id as usize];
                    if last > 0 && last <= at {
                        self.set_stale(id, Why::BackboneLost);
                    }
                }
            }
            while let Some(id) = link.confirmed.pop() {
                if (id as usize) < known {
                    self.set_live(id, Why::Confirmed);
                }
            }
        }
        if self.after_ns > 0 {
            for id in 0..known as SymbolId {
                let last = self.last_ns[id as usize];
                if last > 0 && now_ns.saturating_sub(last) >= self.after_ns {
                    self.set_stale(id, Why::Silent);
                }
            }
        }
    }

    /// The changes since the last call.
    pub(crate) fn take_notices(&mut self) -> std::vec::Drain<'_, Notice> {
        self.notices.drain(..)
    }

    /// Symbols stale now, and how many of them are silent.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.stale, self.silent)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn silence_turns_stale_and_an_update_turns_live_once_each() {
        let mut b = StaleBoard::new(4, 100, None);
        b.updated(0, 10);
        b.updated(1, 50);
        b.scan(2, 120);
        let n: Vec<_> = b.take_notices().collect();
        assert_eq!(
            n,
            vec![Notice {
                id: 0,
                stale: true,
                why: Why::Silent
            }]
        );
        b.scan(2, 130);
        assert_eq!(b.take_notices().count(), 0, "told once");
        assert_eq!(b.counts(), (1, 1));
        b.updated(0, 140);
        let n: Vec<_> = b.take_notices().collect();
        assert_eq!(
            n,
            vec![Notice {
                id: 0,
                stale: false,
                why: Why::Update
            }]
        );
        assert_eq!(b.counts(), (0, 0));
    }

    #[test]
    fn a_lost_link_flags_every_known_symbol_and_a_confirmation_clears_one() {
        let link = Arc::new(StaleLink::new(4));
        let mut b = StaleBoard::new(4, 0, Some(Arc::clone(&link)));
        assert!(!b.is_off());
        b.updated(0, 1);
        b.updated(1, 1);
        b.scan(3, 2);
        assert_eq!(b.take_notices().count(), 0);
        link.lost(2);
        b.updated(2, 3); // over the new link, before the scan: not stale
        b.scan(3, 3);
        let n: Vec<_> = b.take_notices().map(|n| (n.id, n.stale, n.why)).collect();
        assert_eq!(
            n,
            vec![(0, true, Why::BackboneLost), (1, true, Why::BackboneLost)]
        );
        link.confirm(1);
        b.scan(3, 4);
        let n: Vec<_> = b.take_notices().map(|n| (n.id, n.stale, n.why)).collect();
        assert_eq!(n, vec![(1, false, Why::Confirmed)]);
        assert_eq!(b.counts(), (1, 0));
        let mut off = StaleBoard::new(1, 0, None);
        assert!(off.is_off() && !off.due(1));
        assert!(b.due(10) && !b.due(11) && b.due(10 + SCAN_NS));
    }
}
