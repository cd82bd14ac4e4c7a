//! Which market data an edge's clients want, as the NATS thread needs it.
//!
//! The publisher's routes already count subscribers per channel and per
//! pattern; they tell the [`InterestBoard`] when a channel or pattern gains
//! its first subscriber and loses its last (one call each, in
//! `publish/routes.rs`). The NATS thread takes an [`InterestView`] of the
//! board whenever its generation moved, and from it derives the NATS
//! subjects to hold, refcounted: several patterns share the one-token
//! wildcard, a channel and a glob-free pattern share a subject
//! ([`super::subjects::interest_subject`]). A subject is subscribed while
//! its count is positive and unsubscribed when it drops to zero.
//!
//! Bounds: the board holds at most what the routes hold (`--max-conns` ×
//! `--max-subscriptions` names). Locking: a short mutex taken on
//! (P)SUBSCRIBE / (P)UNSUBSCRIBE and by the NATS thread when notified,
//! never per tick.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::subjects::interest_subject;
use crate::protocol::glob::glob_match;

#[derive(Debug, Default)]
struct Names {
    channels: HashSet<Box<[u8]>>,
    patterns: HashSet<Box<[u8]>>,
    generation: u64,
}

/// The channels and patterns with at least one subscriber, shared by the
/// publisher (writer) and the NATS thread (reader).
#[derive(Debug)]
pub(crate) struct InterestBoard {
    names: Mutex<Names>,
    wake: Arc<Notify>,
}

impl InterestBoard {
    /// An empty board that wakes `wake` on every change.
    pub(crate) fn new(wake: Arc<Notify>) -> Self {
        InterestBoard {
            names: Mutex::new(Names::default()),
            wake,
        }
    }

    /// `name` (a channel, or a pattern when `pattern`) got its first subscriber.
    pub(crate) fn gained(&self, name: &[u8], pattern: bool) {
        let mut n = self.names.lock();
        let set = if pattern {
            &mut n.patterns
        } else {
            &mut n.channels
        };
        set.insert(name.into());
        n.generation += 1;
        drop(n);
        self.wake.notify_one();
    }

    /// `name` lost its last subscriber.
    pub(crate) fn lost(&self, name: &[u8], pattern: bool) {
        let mut n = self.names.lock();
        let set = if pattern {
            &mut n.patterns
        } else {
            &mut n.channels
        };
        set.remove(name);
        n.generation += 1;
        drop(n);
        self.wake.notify_one();
    }

    /// A copy of the board when it changed since `generation`.
    pub(crate) fn view_since(&self, generation: u64) -> Option<InterestView> {
        let n = self.names.lock();
        (n.generation != generation).then(|| InterestView {
            generation: n.generation,
            channels: n.channels.iter().map(|c| c.to_vec()).collect(),
            patterns: n.patterns.iter().map(|p| p.to_vec()).collect(),
        })
    }
}

/// One generation of the board, owned by the NATS thread.
#[derive(Debug, Default, Clone)]
pub(crate) struct InterestView {
    /// The board's generation this copies.
    pub generation: u64,
    channels: HashSet<Vec<u8>>,
    patterns: Vec<Vec<u8>>,
}

impl InterestView {
    /// True when some client wants `symbol` (the local filter behind a wildcard).
    pub(crate) fn wants(&self, symbol: &[u8]) -> bool {
        self.channels.contains(symbol) || self.patterns.iter().any(|p| glob_match(p, symbol))
    }

    /// The NATS subjects this interest needs, each with how many channels
    /// and patterns map to it.
    pub(crate) fn subjects(&self, prefix: &str) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        let names = self
            .channels
            .iter()
            .map(|c| (c, false))
            .chain(self.patterns.iter().map(|p| (p, true)));
        for (name, pattern) in names {
            *out.entry(interest_subject(prefix, name, pattern))
                .or_insert(0) += 1;
        }
        out
    }

    /// The channels wanted by name (seeded on their first interest).
    pub(crate) fn channels(&self) -> impl Iterator<Item = &[u8]> {
        self.channels.iter().map(|c| &c[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_refcounted_and_the_local_filter_is_the_glob() {
        let b = InterestBoard::new(Arc::new(Notify::new()));
        assert!(b.view_since(0).is_none(), "nothing changed yet");
        b.gained(b"EURUSD", false);
        b.gained(b"EURUSD", true);
        b.gained(b"GBP*", true);
        b.gained(b"JPY?", true);
        let v = b.view_since(0).expect("changed");
        let s = v.subjects("t");
        assert_eq!(s.get("t.md.EURUSD"), Some(&2));
        assert_eq!(s.get("t.md.*"), Some(&2));
        assert_eq!(s.len(), 2);
        assert!(v.wants(b"EURUSD") && v.wants(b"GBPUSD") && v.wants(b"JPYX"));
        assert!(!v.wants(b"USDCHF") && !v.wants(b"JPYXX"));
        b.lost(b"GBP*", true);
        b.lost(b"JPY?", true);
        let v2 = b.view_since(v.generation).expect("changed again");
        assert!(!v2.subjects("t").contains_key("t.md.*"));
        assert!(!v2.wants(b"GBPUSD"));
        assert!(b.view_since(v2.generation).is_none());
    }
}
