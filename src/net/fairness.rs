//! Fair reading between the connections of a port: the ready and turn lists.
//!
//! A handler reads a connection at most a fixed number of times per loop
//! turn (its `READS_PER_TURN`), then, if the socket may still hold bytes,
//! puts it back with [`TurnLists::again`]. The next turn serves every
//! connection the poller reported *and* every connection put back, each
//! once, so one flooding peer cannot starve the others; and a turn with
//! connections put back does not wait in the poller
//! ([`TurnLists::has_ready`]).
//!
//! Both lists keep their capacity: a turn allocates nothing once they have
//! grown to the number of connections.
//!
//! Single owner: the event loop thread of the port.

/// The connections to serve this turn and the ones to serve next turn.
#[derive(Debug, Default)]
pub(crate) struct TurnLists {
    /// Serve next turn without waiting for an event.
    ready: Vec<usize>,
    /// This turn's connections (swapped with `ready`).
    turn: Vec<usize>,
    /// Next index of `turn` to hand out.
    cursor: usize,
}

impl TurnLists {
    /// Empty lists with room for `capacity` connections each.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        TurnLists {
            ready: Vec::with_capacity(capacity),
            turn: Vec::with_capacity(capacity),
            cursor: 0,
        }
    }

    /// True when some connection waits to be served without an event (the
    /// loop then polls with a zero timeout).
    #[inline]
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Starts a turn: what was put back becomes this turn's list.
    pub(crate) fn begin(&mut self) {
        debug_assert!(self.turn.is_empty(), "a turn was not ended");
        std::mem::swap(&mut self.ready, &mut self.turn);
        self.cursor = 0;
    }

    /// Adds a connection the poller reported to this turn (once per turn).
    pub(crate) fn reported(&mut self, key: usize) {
        if !self.turn.contains(&key) {
            self.turn.push(key);
        }
    }

    /// The next connection of this turn, in order.
    #[inline]
    pub(crate) fn next_in_turn(&mut self) -> Option<usize> {
        let key = *self.turn.get(self.cursor)?;
        self.cursor += 1;
        Some(key)
    }

    /// Ends the turn.
    pub(crate) fn end(&mut self) {
        self.turn.clear();
        self.cursor = 0;
    }

    /// Serves `key` next turn (it may still be readable, or is new).
    #[inline]
    pub(crate) fn again(&mut self, key: usize) {
        self.ready.push(key);
    }

    /// Forgets every connection put back (e.g. the port stops reading).
    pub(crate) fn clear_ready(&mut self) {
        self.ready.clear();
    }
}

/// A list of connections to visit later (to flush, or to revisit once
/// their output drained), each at most once: membership is a flag the
/// handler keeps in the connection, so marking is O(1).
///
/// A key may be reused by a new connection while it is still listed; a
/// visit must tolerate finding nothing to do (or no connection at all).
#[derive(Debug, Default)]
pub(crate) struct KeyList {
    keys: Vec<usize>,
}

impl KeyList {
    /// An empty list with room for `capacity` keys.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        KeyList {
            keys: Vec::with_capacity(capacity),
        }
    }

    /// Lists `key` unless its flag says it is listed already; sets the flag.
    #[inline]
    pub(crate) fn mark(&mut self, listed: &mut bool, key: usize) {
        if !*listed {
            *listed = true;
            self.keys.push(key);
        }
    }

    /// Takes the listed keys to visit them (the caller clears each flag);
    /// give the vector back with [`restore`](Self::restore) to keep its
    /// capacity.
    pub(crate) fn take(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.keys)
    }

    /// Gives back a vector from [`take`](Self::take), emptied; keys marked
    /// meanwhile are kept.
    pub(crate) fn restore(&mut self, mut taken: Vec<usize>) {
        taken.clear();
        taken.append(&mut self.keys);
        self.keys = taken;
    }

    /// Listed keys.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The `i`-th listed key, for a visit that walks the list in place so
    /// that a key marked during the walk is visited in the same walk (the
    /// publisher's attention list).
    ///
    /// # Panics
    /// When `i >= len()`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> usize {
        self.keys[i]
    }

    /// Unlists the `i`-th key (the last takes its place); the caller clears
    /// its flag.
    ///
    /// # Panics
    /// When `i >= len()`.
    pub(crate) fn swap_remove(&mut self, i: usize) -> usize {
        self.keys.swap_remove(i)
    }

    /// True when nothing is listed.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flooding_connection_waits_its_turn() {
        let mut t = TurnLists::with_capacity(4);
        // Turn 1: the poller reports 1 and 2; 1 is still readable after its reads.
        t.begin();
        t.reported(1);
        t.reported(2);
        t.reported(1);
        let mut served = Vec::new();
        while let Some(k) = t.next_in_turn() {
            served.push(k);
            if k == 1 {
                t.again(1);
            }
        }
        t.end();
        assert_eq!(served, [1, 2]);
        assert!(t.has_ready());
        // Turn 2: 1 comes back without an event, once, beside a new report of 3.
        t.begin();
        assert!(!t.has_ready());
        t.reported(3);
        t.reported(1);
        let served: Vec<usize> = std::iter::from_fn(|| t.next_in_turn()).collect();
        t.end();
        assert_eq!(served, [1, 3]);
        assert!(!t.has_ready());
    }

    #[test]
    fn cleared_ready_is_not_served() {
        let mut t = TurnLists::default();
        t.again(5);
        t.clear_ready();
        t.begin();
        assert_eq!(t.next_in_turn(), None);
    }

    #[test]
    fn a_key_is_listed_once_until_visited() {
        let mut l = KeyList::with_capacity(2);
        let (mut a, mut b) = (false, false);
        l.mark(&mut a, 7);
        l.mark(&mut a, 7);
        l.mark(&mut b, 9);
        assert_eq!(l.len(), 2);
        let taken = l.take();
        assert_eq!(taken, [7, 9]);
        assert!(l.is_empty());
        // A visit clears the flag; a mark during the visit is kept.
        a = false;
        l.mark(&mut a, 7);
        let cap = taken.capacity();
        l.restore(taken);
        assert_eq!(l.take(), [7]);
        assert!(cap >= 2);
    }

    #[test]
    fn a_walk_in_place_sees_keys_marked_during_it() {
        let mut l = KeyList::with_capacity(4);
        let mut flags = [false; 4];
        l.mark(&mut flags[1], 1);
        l.mark(&mut flags[2], 2);
        let mut seen = Vec::new();
        // Index 0 each time: the visit unlists the key it reads.
        while !l.is_empty() {
            let i = 0;
            let k = l.key(i);
            seen.push(k);
            flags[k] = false;
            assert_eq!(l.swap_remove(i), k);
            if k == 1 {
                l.mark(&mut flags[3], 3);
            }
        }
        assert_eq!(seen, [1, 2, 3]);
        assert!(l.is_empty());
    }
}
