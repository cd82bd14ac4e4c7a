//! Idempotency: the client order ids seen recently, so a repeated id is
//! rejected as `DUPLICATE` and never executed twice.
//!
//! Retention (documented in the README): an id is remembered for
//! `retention` after it was accepted, and never forgotten while its order is
//! still in flight (an in-flight id reaching the end of its window gets a
//! new window). At most `capacity` ids are held; when that many ids are
//! inside their window a new order is refused with `SYSTEM_BUSY`
//! (`dedup_full`) rather than risk executing an id twice.
//!
//! A dead-lettered order's id may be replayed (`REPLAY`), once per dead
//! letter; otherwise a dead id is a duplicate like any other.
//!
//! Single writer and reader: the gateway thread. FIFO expiry: a queue of
//! `(accepted_at, id)` in acceptance order plus a map; O(1) amortised.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Where an id's order is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdState {
    /// Accepted, no terminal reply yet.
    Live,
    /// Ended with `DONE` or `REJECT EXPIRED`.
    Done,
    /// Dead-lettered (replayable).
    Dead,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    state: IdState,
    since_ns: u64,
}

/// Why an id cannot be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Seen within the retention: `since_ns` is when it was accepted.
    Duplicate {
        /// Acceptance time of the earlier order (engine clock).
        since_ns: u64,
        /// Its state.
        state: IdState,
    },
    /// `capacity` ids are all inside their window.
    Full,
}

/// The recent ids. Invariant: `map.len() <= capacity`; every map entry has
/// an entry in `fifo` with the same `since_ns`.
#[derive(Debug)]
pub struct Dedup {
    map: HashMap<Arc<str>, Entry>,
    fifo: VecDeque<(u64, Arc<str>)>,
    retention_ns: u64,
    capacity: usize,
}

impl Dedup {
    /// Remembers ids for `retention_ns`, at most `capacity` of them.
    pub fn new(retention_ns: u64, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Dedup {
            map: HashMap::with_capacity(capacity.min(1 << 16)),
            fifo: VecDeque::with_capacity(capacity.min(1 << 16)),
            retention_ns,
            capacity,
        }
    }

    /// Forgets ids whose window ended at `now_ns` (in-flight ones get a new window).
    pub fn expire(&mut self, now_ns: u64) {
        while let Some((since, _)) = self.fifo.front() {
            if since.saturating_add(self.retention_ns) > now_ns {
                break;
            }
            let (since, id) = self.fifo.pop_front().expect("front exists");
            match self.map.get_mut(&id) {
                Some(e) if e.since_ns == since => {
                    if e.state == IdState::Live {
                        e.since_ns = now_ns;
                        self.fifo.push_back((now_ns, id));
                    } else {
                        self.map.remove(&id);
                    }
                }
                _ => {} // superseded by a later entry of the same id
            }
        }
    }

    /// May a new order with `id` be accepted at `now_ns`? `replay` also
    /// accepts a dead id.
    ///
    /// # Errors
    /// [`Refusal`] saying why not.
    pub fn check(&mut self, id: &str, now_ns: u64, replay: bool) -> Result<(), Refusal> {
        self.expire(now_ns);
        if let Some(e) = self.map.get(id) {
            if !(replay && e.state == IdState::Dead) {
                return Err(Refusal::Duplicate {
                    since_ns: e.since_ns,
                    state: e.state,
                });
            }
            return Ok(());
        }
        if self.map.len() >= self.capacity {
            return Err(Refusal::Full);
        }
        Ok(())
    }

    /// Records `id` as accepted (live) at `now_ns`; call after a successful [`check`](Self::check).
    pub fn insert(&mut self, id: Arc<str>, now_ns: u64) {
        self.fifo.push_back((now_ns, Arc::clone(&id)));
        self.map.insert(
            id,
            Entry {
                state: IdState::Live,
                since_ns: now_ns,
            },
        );
    }

    /// Moves `id` to `state` (a terminal reply went out).
    pub fn mark(&mut self, id: &str, state: IdState) {
        if let Some(e) = self.map.get_mut(id) {
            e.state = state;
        }
    }

    /// The state of `id`, if remembered.
    pub fn state(&self, id: &str) -> Option<IdState> {
        self.map.get(id).map(|e| e.state)
    }

    /// Ids remembered now.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_within_retention_then_forgotten() {
        let mut d = Dedup::new(100, 10);
        d.check("a", 0, false).unwrap();
        d.insert("a".into(), 0);
        assert!(matches!(
            d.check("a", 50, false),
            Err(Refusal::Duplicate { since_ns: 0, .. })
        ));
        d.mark("a", IdState::Done);
        assert!(d.check("a", 99, false).is_err());
        d.check("a", 100, false).unwrap();
        assert!(d.is_empty());
    }

    #[test]
    fn in_flight_ids_are_never_forgotten() {
        let mut d = Dedup::new(100, 10);
        d.insert("a".into(), 0);
        assert!(d.check("a", 1_000, false).is_err(), "still live");
        d.mark("a", IdState::Done);
        assert!(d.check("a", 1_099, false).is_err(), "new window from 1000");
        d.check("a", 1_100, false).unwrap();
    }

    #[test]
    fn full_refuses_rather_than_forgets() {
        let mut d = Dedup::new(100, 2);
        d.insert("a".into(), 0);
        d.insert("b".into(), 1);
        assert_eq!(d.check("c", 2, false), Err(Refusal::Full));
        d.mark("a", IdState::Done);
        d.check("c", 100, false).unwrap();
    }

    #[test]
    fn dead_ids_replay_once() {
        let mut d = Dedup::new(100, 10);
        d.insert("a".into(), 0);
        d.mark("a", IdState::Dead);
        assert!(d.check("a", 1, false).is_err());
        d.check("a", 1, true).unwrap();
        d.insert("a".into(), 1);
        assert_eq!(d.state("a"), Some(IdState::Live));
        assert!(
            d.check("a", 2, true).is_err(),
            "live again: no second replay"
        );
        d.mark("a", IdState::Done);
        // The superseded fifo entry (since 0) must not remove the new one.
        assert!(d.check("a", 100, false).is_err());
        d.check("a", 101, false).unwrap();
    }
}
