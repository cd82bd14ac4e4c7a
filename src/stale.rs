//! Stale flags: which symbols' values may be old, so that a subscriber
//! never mistakes an old value for a live one.
//!
//! A symbol turns **stale** when
//! - its source is silent: no update for `--stale-after` (every role; off
//!   without the flag), reason `silent`;
//! - the feed connection that wrote it last closed (with `--stale-after`),
//!   reason `feed_closed`; or
//! - an edge lost its backbone link: every symbol it knows, reason
//!   `backbone_lost`;
//!
//! and **live** again when a new value of it is published (reason
//! `update`; for `feed_closed` and `backbone_lost`, a value received after
//! the event, not the closed source's or the old link's last one) or, on an edge, when the re-seed after the link returned
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
//! A room beside the stages, not in one: the feed (a closed source), the
//! backbone (a lost link) and the publisher (the board) all write to it.
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
    /// The feed connection that wrote it last closed.
    FeedClosed,
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
            Why::FeedClosed => "feed_closed",
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
    /// Symbols whose feed connection closed, with when.
    closed: ArrayQueue<(SymbolId, u64)>,
}

impl StaleLink {
    /// A link for `capacity` symbols.
    pub(crate) fn new(capacity: usize) -> Self {
        StaleLink {
            lost: AtomicU64::new(0),
            lost_at_ns: AtomicU64::new(0),
            confirmed: ArrayQueue::new(capacity),
            closed: ArrayQueue::new(capacity),
        }
    }

    /// The feed connection that wrote `id` last closed at `at_ns` (feed
    /// thread). A full queue drops it: the symbol is then flagged by silence.
    pub(crate) fn source_closed(&self, id: SymbolId, at_ns: u64) {
        let _ = self.closed.push((id, at_ns));
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
    /// Per symbol: only a value received after this clears its flag.
    since: Vec<u64>,
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
            since: vec![0; capacity],
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

    /// The publisher took a new value of `id` at `now_ns`, received at
    /// `recv_ns` (same clock). No allocation.
    #[inline]
    pub(crate) fn updated(&mut self, id: SymbolId, now_ns: u64, recv_ns: u64) {
        let i = id as usize;
        self.last_ns[i] = now_ns.max(1);
        if self.state[i].is_some() && recv_ns > self.since[i] {
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

    fn set_stale(&mut self, id: SymbolId, why: Why, since_ns: u64) {
        let s = &mut self.state[id as usize];
        if s.is_none() {
            self.since[id as usize] = since_ns;
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
                        self.set_stale(id, Why::BackboneLost, at);
                    }
                }
            }
            while let Some(id) = link.confirmed.pop() {
                if (id as usize) < known {
                    self.set_live(id, Why::Confirmed);
                }
            }
            while let Some((id, at)) = link.closed.pop() {
                if (id as usize) < known {
                    self.set_stale(id, Why::FeedClosed, at);
                }
            }
        }
        if self.after_ns > 0 {
            for id in 0..known as SymbolId {
                let last = self.last_ns[id as usize];
                if last > 0 && now_ns.saturating_sub(last) >= self.after_ns {
                    self.set_stale(id, Why::Silent, 0);
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
        b.updated(0, 10, 10);
        b.updated(1, 50, 50);
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
        b.updated(0, 140, 140);
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
    fn a_closed_source_flags_its_symbols_and_only_a_later_value_clears_them() {
        let link = Arc::new(StaleLink::new(4));
        let mut b = StaleBoard::new(4, 1_000, Some(Arc::clone(&link)));
        b.updated(0, 10, 9);
        link.source_closed(0, 20);
        b.scan(1, 21);
        let n: Vec<_> = b.take_notices().map(|n| (n.stale, n.why)).collect();
        assert_eq!(n, vec![(true, Why::FeedClosed)]);
        b.updated(0, 22, 15); // the closed source's last value, taken late
        assert_eq!(b.take_notices().count(), 0);
        b.updated(0, 30, 25); // from a new source
        let n: Vec<_> = b.take_notices().map(|n| (n.stale, n.why)).collect();
        assert_eq!(n, vec![(false, Why::Update)]);
    }

    #[test]
    fn a_lost_link_flags_every_known_symbol_and_a_confirmation_clears_one() {
        let link = Arc::new(StaleLink::new(4));
        let mut b = StaleBoard::new(4, 0, Some(Arc::clone(&link)));
        assert!(!b.is_off());
        b.updated(0, 1, 1);
        b.updated(1, 1, 1);
        b.scan(3, 2);
        assert_eq!(b.take_notices().count(), 0);
        link.lost(2);
        b.updated(2, 3, 3); // over the new link, before the scan: not stale
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
