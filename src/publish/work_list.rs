//! A list of subscriber keys to visit this turn, each at most once: the
//! publisher's flush list (sessions with output to write) and its attention
//! list (slow sessions and sessions whose input is held back).
//!
//! The membership mark lives in the session ([`Mark`]) so a push is one
//! check, no search; only the list sets or clears it. A key may stay on a
//! list after its session closed and the slab reused it: a visit then finds
//! a session with nothing to do, which both users tolerate.
//!
//! Single owner: the publisher thread. Bounded: a key is pushed only while
//! its mark is clear, so a list holds at most one entry per session pushed
//! since its last visit (plus stale keys of closed sessions, at most one per
//! close).

use crate::publish::routes::SubKey;

/// "This session is on the list"; set and cleared only by [`WorkList`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Mark(bool);

impl Mark {
    /// On the list.
    pub fn is_set(self) -> bool {
        self.0
    }
}

/// The list.
#[derive(Debug)]
pub struct WorkList {
    keys: Vec<SubKey>,
}

impl WorkList {
    /// An empty list with room for `cap` keys.
    pub fn with_capacity(cap: usize) -> Self {
        WorkList {
            keys: Vec::with_capacity(cap),
        }
    }

    /// Puts `key` on the list unless its `mark` says it is on it already.
    #[inline]
    pub fn push(&mut self, mark: &mut Mark, key: SubKey) {
        if !mark.0 {
            mark.0 = true;
            self.keys.push(key);
        }
    }

    /// The session behind `mark` was visited and left the list (its key is
    /// removed by [`WorkList::swap_remove`] or [`WorkList::clear`]).
    #[inline]
    pub fn leave(mark: &mut Mark) {
        mark.0 = false;
    }

    /// Keys on the list.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when nothing is on the list.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The `i`-th key.
    pub fn key(&self, i: usize) -> SubKey {
        self.keys[i]
    }

    /// Removes the `i`-th key (the last takes its place).
    pub fn swap_remove(&mut self, i: usize) {
        self.keys.swap_remove(i);
    }

    /// Empties the list (the marks were cleared by the visits).
    pub fn clear(&mut self) {
        self.keys.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_key_is_listed_once_until_it_leaves() {
        let mut list = WorkList::with_capacity(4);
        let (mut a, mut b) = (Mark::default(), Mark::default());
        list.push(&mut a, 1);
        list.push(&mut a, 1);
        list.push(&mut b, 2);
        assert_eq!(list.len(), 2);
        assert!(a.is_set() && b.is_set());
        WorkList::leave(&mut a);
        list.swap_remove(0);
        assert_eq!((list.len(), list.key(0)), (1, 2));
        list.push(&mut a, 1);
        assert_eq!(list.len(), 2);
        WorkList::leave(&mut a);
        WorkList::leave(&mut b);
        list.clear();
        assert!(list.is_empty() && !a.is_set());
    }
}
