//! Per-account ordering (`NEW … acct=<account>`): the table of active
//! (account, symbol) keys and the followers parked behind each key's head.
//!
//! ```text
//!   NEW … acct=A (symbol S) ─▶ key "A S" ─┬─ no head, none parked ─▶ lane queue (becomes the head)
//!                                         └─ else ─▶ parked in the key's FIFO (ACKed, QUEUED)
//!   the head ends (DONE / DEAD / EXPIRED / CANCELED) ─▶ the key's next follower ─▶ lane queue
//! ```
//!
//! Invariant: of one key, at most one order (the *head*) is past the
//! gateway — in a lane queue, at a worker or a bridge, or waiting for a
//! retry — and the followers leave the gateway in admission order, each
//! only once the one before it has had its terminal reply. So one key's
//! orders reach the bridges in admission order and never two at once,
//! retries included. The workers know nothing of keys: a lane never holds
//! a blocked order, so no worker ever waits for one and other keys (and
//! orders without `acct=`) are never held up (`docs/decisions.md`).
//!
//! A parked follower is cancellable (`CANCEL`, `?cancel=queued`): its
//! `DONE … CANCELED` is a terminal like any other; [`AcctKeys::ended`]
//! drops it from its key's FIFO and the key's order continues.
//!
//! Bounds: at most `--acct-keys` keys with an order not ended (a `NEW` of
//! a new key past it: `REJECT <id> SYSTEM_BUSY acct_keys_full`; recovered
//! orders are always taken back); parked followers count in their lane's
//! queue room, so the lane's capacity bounds them. Memory: about 200 bytes
//! per active key (the key string ≤ 57 bytes in an `Arc`, its map entry,
//! the empty FIFO) plus about 80 bytes per order of a key not ended (its
//! id → key entry); a parked follower is the order itself, as if queued.
//!
//! Single writer: the gateway thread owns the table (no lock). An order
//! without `acct=` costs one branch where the gateway asks whether it has
//! a key, and one on each terminal event while the table is empty.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::model::lane::Lane;
use crate::order::msg::order::Order;

use super::codec::{parse_request, Request};

/// The ordering key of an order with `acct=`: `"<acct> <symbol>"` (neither
/// holds a space, so the pair is unambiguous).
pub(crate) fn key(acct: &str, symbol: &str) -> Arc<str> {
    format!("{acct} {symbol}").into()
}

/// The key of a `NEW` line kept in the journal (recovery), if it has `acct=`.
pub(crate) fn key_of_raw(raw: &str) -> Option<Arc<str>> {
    match parse_request(raw.as_bytes()) {
        Ok(Request::New(o)) => o.acct.map(|a| key(a, o.symbol)),
        _ => None,
    }
}

/// The table is at its limit and the order's key is not in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("acct_keys_full: {0} account/symbol keys active (--acct-keys)")]
pub(crate) struct KeysFull(pub usize);

/// One active key.
#[derive(Debug, Default)]
struct KeyState {
    /// Orders of the key reserved and not ended (head, parked, and those
    /// still held for their journal sync).
    live: u32,
    /// The one order of the key past the gateway, if any.
    head: Option<Arc<str>>,
    /// Followers, in admission order (ACKed, not offered).
    parked: VecDeque<Order>,
}

/// The active keys (see the module docs). Owned by the gateway thread.
#[derive(Debug)]
pub(crate) struct AcctKeys {
    /// Most keys with an order not ended.
    limit: usize,
    keys: HashMap<Arc<str>, KeyState>,
    /// Order id → its key, for every reserved order not ended.
    by_id: HashMap<Arc<str>, Arc<str>>,
    /// Keys whose head ended while followers were parked: their next
    /// follower is to be offered ([`AcctKeys::next_ready`]).
    ready: VecDeque<Arc<str>>,
    /// Parked followers per lane (by [`Lane::index`]).
    parked_per_lane: [usize; 2],
}

impl AcctKeys {
    /// An empty table of at most `limit` keys.
    pub(crate) fn new(limit: usize) -> Self {
        AcctKeys {
            limit,
            keys: HashMap::new(),
            by_id: HashMap::new(),
            ready: VecDeque::new(),
            parked_per_lane: [0; 2],
        }
    }

    /// No order of any key is live (the fast path for orders without `acct=`).
    pub(crate) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Active keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Followers parked in `lane`.
    pub(crate) fn parked_in(&self, lane: Lane) -> usize {
        self.parked_per_lane[lane.index()]
    }

    /// Followers parked in all.
    pub(crate) fn parked(&self) -> usize {
        self.parked_per_lane.iter().sum()
    }

    /// Counts order `id` in its `key` (creating the key). `force`: taken
    /// past the limit (recovered orders). Reserving an id twice is a no-op.
    ///
    /// # Errors
    /// [`KeysFull`] when `key` is new and the table holds `limit` keys.
    pub(crate) fn reserve(
        &mut self,
        id: &Arc<str>,
        key: &Arc<str>,
        force: bool,
    ) -> Result<(), KeysFull> {
        if self.by_id.contains_key(id) {
            return Ok(());
        }
        if !force && self.keys.len() >= self.limit && !self.keys.contains_key(key) {
            return Err(KeysFull(self.limit));
        }
        self.keys.entry(Arc::clone(key)).or_default().live += 1;
        self.by_id.insert(Arc::clone(id), Arc::clone(key));
        Ok(())
    }

    /// Must an order of `key` wait (a head is out, or followers wait before it)?
    pub(crate) fn must_park(&self, key: &str) -> bool {
        self.keys
            .get(key)
            .is_some_and(|st| st.head.is_some() || !st.parked.is_empty())
    }

    /// Parks a reserved order (its lane set) behind its key's head.
    pub(crate) fn park(&mut self, order: Order) {
        let Some(st) = order.acct_key.as_ref().and_then(|k| self.keys.get_mut(k)) else {
            debug_assert!(false, "parked an order without a reserved key");
            return;
        };
        self.parked_per_lane[order.lane.index()] += 1;
        st.parked.push_back(order);
    }

    /// The reserved order `id` of `key` was offered to its lane: the key's head.
    pub(crate) fn sent(&mut self, key: &str, id: &Arc<str>) {
        if let Some(st) = self.keys.get_mut(key) {
            debug_assert!(st.head.is_none(), "two heads of one key");
            st.head = Some(Arc::clone(id));
        }
    }

    /// Order `id` ended (its terminal reply, or refused before its `ACK`).
    /// A head frees its key's next follower; a parked follower (cancelled)
    /// leaves its FIFO and is returned, to be dropped. No-op for an id
    /// without a key.
    pub(crate) fn ended(&mut self, id: &str) -> Option<Order> {
        let key = self.by_id.remove(id)?;
        let st = self.keys.get_mut(&key)?;
        st.live -= 1;
        let mut dropped = None;
        if st.head.as_deref() == Some(id) {
            st.head = None;
            if !st.parked.is_empty() {
                self.ready.push_back(Arc::clone(&key));
            }
        } else if let Some(at) = st.parked.iter().position(|o| &*o.id == id) {
            let o = st.parked.remove(at)?;
            self.parked_per_lane[o.lane.index()] -= 1;
            dropped = Some(o);
        }
        if st.live == 0 {
            debug_assert!(st.parked.is_empty() && st.head.is_none());
            self.keys.remove(&key);
        }
        dropped
    }

    /// The next follower to offer: the front of a key whose head ended.
    /// Offered, it must be [`AcctKeys::sent`]; refused (lane full),
    /// [`AcctKeys::put_back`].
    pub(crate) fn next_ready(&mut self) -> Option<Order> {
        while let Some(key) = self.ready.pop_front() {
            let Some(st) = self.keys.get_mut(&key) else {
                continue;
            };
            if st.head.is_some() {
                continue;
            }
            if let Some(o) = st.parked.pop_front() {
                self.parked_per_lane[o.lane.index()] -= 1;
                return Some(o);
            }
        }
        None
    }

    /// Puts back a follower [`AcctKeys::next_ready`] gave (its lane was
    /// full): first of its key again, first to be offered next time.
    pub(crate) fn put_back(&mut self, order: Order) {
        let Some(key) = order.acct_key.clone() else {
            return;
        };
        let Some(st) = self.keys.get_mut(&key) else {
            return;
        };
        self.parked_per_lane[order.lane.index()] += 1;
        st.parked.push_front(order);
        self.ready.push_front(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::order::msg::admission::tests::order as lane_order;

    fn order(seq: u64, acct: &str, symbol: &str) -> Order {
        let mut o = lane_order(seq, 0);
        o.id = format!("o{seq}").into();
        o.symbol = symbol.into();
        o.acct_key = Some(key(acct, symbol));
        o
    }

    /// Reserves and routes `o` as the gateway does: `Some` when it is to be offered.
    fn admit(t: &mut AcctKeys, o: Order) -> Option<Order> {
        let k = o.acct_key.clone().unwrap();
        t.reserve(&o.id, &k, false).unwrap();
        if t.must_park(&k) {
            t.park(o);
            return None;
        }
        t.sent(&k, &o.id);
        Some(o)
    }

    #[test]
    fn one_head_per_key_followers_leave_in_admission_order() {
        let mut t = AcctKeys::new(8);
        let first = admit(&mut t, order(1, "a", "X")).expect("head");
        assert!(admit(&mut t, order(2, "a", "X")).is_none());
        assert!(admit(&mut t, order(3, "a", "X")).is_none());
        let other = admit(&mut t, order(4, "b", "X")).expect("another account");
        let other_sym = admit(&mut t, order(5, "a", "Y")).expect("another symbol");
        assert_eq!((t.len(), t.parked(), t.parked_in(Lane::Small)), (3, 2, 2));
        assert!(t.next_ready().is_none(), "the head is out");
        assert!(t.ended(&first.id).is_none());
        let second = t.next_ready().expect("released");
        assert_eq!(&*second.id, "o2");
        assert!(t.next_ready().is_none(), "one at a time");
        t.sent(second.acct_key.as_deref().unwrap(), &second.id);
        t.ended(&second.id);
        let third = t.next_ready().expect("released");
        assert_eq!(&*third.id, "o3");
        t.sent(third.acct_key.as_deref().unwrap(), &third.id);
        for id in [&third.id, &other.id, &other_sym.id] {
            t.ended(id);
        }
        assert!(t.is_empty() && t.parked() == 0);
        assert_eq!(t.len(), 0, "no key left");
    }

    #[test]
    fn a_cancelled_follower_leaves_its_place_and_the_key_goes_on() {
        let mut t = AcctKeys::new(8);
        let head = admit(&mut t, order(1, "a", "X")).unwrap();
        assert!(admit(&mut t, order(2, "a", "X")).is_none());
        assert!(admit(&mut t, order(3, "a", "X")).is_none());
        let dropped = t.ended("o2").expect("the parked follower");
        assert_eq!(&*dropped.id, "o2");
        assert_eq!(t.parked(), 1);
        t.ended(&head.id);
        assert_eq!(&*t.next_ready().unwrap().id, "o3");
    }

    #[test]
    fn a_full_table_refuses_new_keys_only_and_frees_an_ended_one() {
        let mut t = AcctKeys::new(2);
        let a = admit(&mut t, order(1, "a", "X")).unwrap();
        admit(&mut t, order(2, "b", "X")).unwrap();
        let k = key("c", "X");
        assert_eq!(t.reserve(&"o3".into(), &k, false), Err(KeysFull(2)));
        assert!(admit(&mut t, order(4, "a", "X")).is_none(), "a known key");
        assert_eq!(t.reserve(&"o5".into(), &k, true), Ok(()), "recovered");
        assert_eq!(t.len(), 3);
        t.ended("o5");
        t.ended(&a.id);
        let next = t.next_ready().unwrap();
        t.sent("a X", &next.id);
        t.ended(&next.id);
        assert_eq!(t.reserve(&"o6".into(), &k, false), Ok(()), "a freed");
    }

    #[test]
    fn a_follower_put_back_is_offered_first_next_time() {
        let mut t = AcctKeys::new(8);
        let head = admit(&mut t, order(1, "a", "X")).unwrap();
        assert!(admit(&mut t, order(2, "a", "X")).is_none());
        assert!(admit(&mut t, order(3, "a", "X")).is_none());
        t.ended(&head.id);
        let o = t.next_ready().unwrap();
        t.put_back(o);
        assert_eq!(t.parked(), 2);
        assert_eq!(&*t.next_ready().unwrap().id, "o2");
    }

    #[test]
    fn keys_come_back_from_the_journals_raw_line() {
        assert_eq!(
            key_of_raw("NEW o1 EURUSD BUY 1 acct=f-1").as_deref(),
            Some("f-1 EURUSD")
        );
        assert_eq!(key_of_raw("NEW o1 EURUSD BUY 1 ttl=1s"), None);
        assert_eq!(key_of_raw("garbage"), None);
    }
}
