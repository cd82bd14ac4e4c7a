//! Who receives what: the subscription registry of the publisher.
//!
//! Subscribers subscribe by channel name (the symbol) or by glob pattern,
//! possibly before the symbol is ever seen. The registry turns that into one
//! precomputed delivery list per symbol id, so publishing an update is a walk
//! over a slice. Lists change only on (un)subscribe, disconnect and the
//! discovery of a new symbol — never per tick.
//!
//! Each delivery carries the frame start for its subscriber's protocol
//! (`*3`/`*4` in RESP2, `>3`/`>4` in RESP3); the rest of the frame is the
//! update's shared tail, so a RESP3 subscriber costs nothing extra per tick.
//! A protocol switch (`HELLO 2|3`) rewrites that subscriber's deliveries once.
//!
//! Each list is kept sorted by subscriber key (stable: a subscriber's own
//! deliveries keep their order), so one subscriber's deliveries of a
//! symbol are found by binary search ([`Routes::deliveries_to`]): a paced
//! subscriber's refill looks them up per frame, and a scan of the whole
//! list cost O(subscribers) a frame — with 500 paced subscribers of
//! `PSUBSCRIBE *`, 29 % of the publisher's time.
//!
//! Single owner: the publisher thread.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::cluster::interest::InterestBoard;
use crate::protocol::glob::glob_match;
use crate::protocol::resp::framing::{self, Proto};
use crate::symbols::SymbolId;

/// Subscriber key (the publisher's slab index).
pub(crate) type SubKey = usize;

/// One frame to build for one subscriber: `prefix` + the update's shared tail.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The subscriber.
    pub sub: SubKey,
    /// `*3 message` for a channel subscription, `*4 pmessage <pattern>` for
    /// a pattern (`>3` / `>4` for a RESP3 subscriber).
    pub prefix: Arc<[u8]>,
    /// The pattern, for a pattern delivery.
    pub pattern: Option<Arc<[u8]>>,
}

#[derive(Debug)]
struct PatternEntry {
    pattern: Arc<[u8]>,
    /// `pmessage` frame start in RESP2 and in RESP3.
    prefix: [Arc<[u8]>; 2],
    subs: Vec<SubKey>,
}

impl PatternEntry {
    fn prefix(&self, proto: Proto) -> &Arc<[u8]> {
        &self.prefix[(proto == Proto::Resp3) as usize]
    }
}

/// Inserts `d` after every delivery of a key up to its own: the list stays
/// sorted by key, and a subscriber's deliveries in the order they came.
fn insert_by_sub(list: &mut Vec<Delivery>, d: Delivery) {
    let at = list.partition_point(|x| x.sub <= d.sub);
    list.insert(at, d);
}

/// The registry.
#[derive(Debug)]
pub struct Routes {
    /// Delivery list per known symbol id.
    by_symbol: Vec<Vec<Delivery>>,
    /// Known symbol names, by id.
    names: Vec<Arc<[u8]>>,
    /// Known symbol ids, by name.
    ids: HashMap<Arc<[u8]>, SymbolId>,
    /// Channel name → subscribers (known symbol or not).
    channels: HashMap<Box<[u8]>, Vec<SubKey>>,
    /// Pattern → its subscribers.
    patterns: HashMap<Box<[u8]>, PatternEntry>,
    /// `message` frame start in RESP2 and in RESP3.
    message_prefix: [Arc<[u8]>; 2],
    /// Subscribers speaking RESP3 (all others speak RESP2).
    resp3: HashSet<SubKey>,
    /// An edge's backbone interest: told of each channel's and pattern's
    /// first and last subscriber.
    interest: Option<Arc<InterestBoard>>,
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl Routes {
    /// An empty registry.
    pub fn new() -> Self {
        Routes {
            by_symbol: Vec::new(),
            names: Vec::new(),
            ids: HashMap::new(),
            channels: HashMap::new(),
            patterns: HashMap::new(),
            message_prefix: [
                Arc::from(framing::message_prefix(Proto::Resp2)),
                Arc::from(framing::message_prefix(Proto::Resp3)),
            ],
            resp3: HashSet::new(),
            interest: None,
        }
    }

    /// An empty registry that tells `interest` (an edge's) what is wanted.
    pub(crate) fn with_interest(interest: Option<Arc<InterestBoard>>) -> Self {
        Routes {
            interest,
            ..Routes::new()
        }
    }

    fn proto(&self, sub: SubKey) -> Proto {
        if self.resp3.contains(&sub) {
            Proto::Resp3
        } else {
            Proto::Resp2
        }
    }

    fn channel_prefix(&self, sub: SubKey) -> Arc<[u8]> {
        Arc::clone(&self.message_prefix[(self.proto(sub) == Proto::Resp3) as usize])
    }

    /// Sets the protocol `sub`'s frames are built for and rewrites the
    /// prefixes of its existing deliveries (rare: `HELLO` while subscribed).
    pub fn set_proto(&mut self, sub: SubKey, proto: Proto) {
        if self.proto(sub) == proto {
            return;
        }
        match proto {
            Proto::Resp3 => self.resp3.insert(sub),
            Proto::Resp2 => self.resp3.remove(&sub),
        };
        let channel = self.channel_prefix(sub);
        for list in &mut self.by_symbol {
            for d in list.iter_mut().filter(|d| d.sub == sub) {
                d.prefix = match &d.pattern {
                    None => Arc::clone(&channel),
                    Some(p) => match self.patterns.get(&**p) {
                        Some(e) => Arc::clone(e.prefix(proto)),
                        None => continue,
                    },
                };
            }
        }
    }

    /// Forgets a closed subscriber's protocol (its key may be reused); the
    /// caller has removed its subscriptions.
    pub fn forget(&mut self, sub: SubKey) {
        self.resp3.remove(&sub);
    }

    /// The subscribers of `channel` with their `message` frame start.
    pub(crate) fn channel_subscribers(&self, channel: &[u8]) -> Vec<(SubKey, Arc<[u8]>)> {
        self.channels.get(channel).map_or_else(Vec::new, |subs| {
            subs.iter().map(|&s| (s, self.channel_prefix(s))).collect()
        })
    }

    /// Number of known symbols.
    pub fn known_symbols(&self) -> usize {
        self.names.len()
    }

    /// Name of a known symbol.
    pub fn name(&self, id: SymbolId) -> &[u8] {
        &self.names[id as usize]
    }

    /// Id of a known symbol.
    pub fn id(&self, name: &[u8]) -> Option<SymbolId> {
        self.ids.get(name).copied()
    }

    /// Deliveries for an update of `id`, by subscriber key.
    #[inline]
    pub fn deliveries(&self, id: SymbolId) -> &[Delivery] {
        &self.by_symbol[id as usize]
    }

    /// Subscriber `sub`'s deliveries for an update of `id` (a channel and
    /// patterns may each match), found by binary search.
    #[inline]
    pub fn deliveries_to(&self, id: SymbolId, sub: SubKey) -> &[Delivery] {
        let list = &self.by_symbol[id as usize];
        &list[list.partition_point(|d| d.sub < sub)..list.partition_point(|d| d.sub <= sub)]
    }

    /// Registers the next symbol id (ids arrive densely, in order) and routes
    /// existing channel and pattern subscriptions to it.
    pub fn add_symbol(&mut self, id: SymbolId, name: &[u8]) {
        debug_assert_eq!(id as usize, self.names.len(), "symbol ids are dense");
        let name: Arc<[u8]> = Arc::from(name);
        let mut list = Vec::new();
        if let Some(subs) = self.channels.get(&*name) {
            for &sub in subs {
                list.push(Delivery {
                    sub,
                    prefix: self.channel_prefix(sub),
                    pattern: None,
                });
            }
        }
        for p in self.patterns.values() {
            if glob_match(&p.pattern, &name) {
                for &sub in &p.subs {
                    list.push(Delivery {
                        sub,
                        prefix: Arc::clone(p.prefix(self.proto(sub))),
                        pattern: Some(Arc::clone(&p.pattern)),
                    });
                }
            }
        }
        list.sort_by_key(|d| d.sub);
        self.ids.insert(Arc::clone(&name), id);
        self.names.push(name);
        self.by_symbol.push(list);
    }

    /// Subscribes `sub` to a channel. Returns the symbol id when it is known
    /// (for the snapshot). The caller guarantees `sub` was not subscribed to it.
    pub fn subscribe(&mut self, sub: SubKey, channel: &[u8]) -> Option<SymbolId> {
        let subs = self.channels.entry(channel.into()).or_default();
        subs.push(sub);
        if let (1, Some(i)) = (subs.len(), &self.interest) {
            i.gained(channel, false);
        }
        let id = self.id(channel)?;
        let prefix = self.channel_prefix(sub);
        insert_by_sub(
            &mut self.by_symbol[id as usize],
            Delivery {
                sub,
                prefix,
                pattern: None,
            },
        );
        Some(id)
    }

    /// Removes a channel subscription.
    pub fn unsubscribe(&mut self, sub: SubKey, channel: &[u8]) {
        if let Some(subs) = self.channels.get_mut(channel) {
            subs.retain(|&s| s != sub);
            if subs.is_empty() {
                self.channels.remove(channel);
                if let Some(i) = &self.interest {
                    i.lost(channel, false);
                }
            }
        }
        if let Some(id) = self.id(channel) {
            self.by_symbol[id as usize].retain(|d| !(d.sub == sub && d.pattern.is_none()));
        }
    }

    /// Subscribes `sub` to a pattern; pushes every known matching id onto
    /// `matched` (for the snapshot) and returns the frame start of its
    /// deliveries. The caller guarantees `sub` was not subscribed to it.
    pub fn psubscribe(
        &mut self,
        sub: SubKey,
        pattern: &[u8],
        matched: &mut Vec<SymbolId>,
    ) -> Arc<[u8]> {
        let proto = self.proto(sub);
        let entry = self.patterns.entry(pattern.into()).or_insert_with(|| {
            let build = |proto| {
                let mut prefix = Vec::with_capacity(pattern.len() + 32);
                framing::append_pmessage_prefix(&mut prefix, proto, pattern);
                Arc::from(prefix)
            };
            PatternEntry {
                pattern: Arc::from(pattern),
                prefix: [build(Proto::Resp2), build(Proto::Resp3)],
                subs: Vec::new(),
            }
        });
        entry.subs.push(sub);
        if let (1, Some(i)) = (entry.subs.len(), &self.interest) {
            i.gained(pattern, true);
        }
        let (pat, prefix) = (Arc::clone(&entry.pattern), Arc::clone(entry.prefix(proto)));
        for (id, name) in self.names.iter().enumerate() {
            if glob_match(&pat, name) {
                insert_by_sub(
                    &mut self.by_symbol[id],
                    Delivery {
                        sub,
                        prefix: Arc::clone(&prefix),
                        pattern: Some(Arc::clone(&pat)),
                    },
                );
                matched.push(id as SymbolId);
            }
        }
        prefix
    }

    /// Removes a pattern subscription.
    pub fn punsubscribe(&mut self, sub: SubKey, pattern: &[u8]) {
        let Some(entry) = self.patterns.get_mut(pattern) else {
            return;
        };
        entry.subs.retain(|&s| s != sub);
        let pat = Arc::clone(&entry.pattern);
        if entry.subs.is_empty() {
            self.patterns.remove(pattern);
            if let Some(i) = &self.interest {
                i.lost(pattern, true);
            }
        }
        for (id, name) in self.names.iter().enumerate() {
            if glob_match(&pat, name) {
                self.by_symbol[id]
                    .retain(|d| !(d.sub == sub && d.pattern.as_deref() == Some(&*pat)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp;

    fn subs_of(r: &Routes, id: SymbolId) -> Vec<(SubKey, bool)> {
        r.deliveries(id)
            .iter()
            .map(|d| (d.sub, d.pattern.is_some()))
            .collect()
    }

    #[test]
    fn subscription_before_and_after_the_symbol_exists() {
        let mut r = Routes::new();
        assert_eq!(r.subscribe(1, b"EURUSD"), None);
        r.add_symbol(0, b"EURUSD");
        r.add_symbol(1, b"GBPUSD");
        assert_eq!(subs_of(&r, 0), vec![(1, false)]);
        assert_eq!(r.subscribe(2, b"GBPUSD"), Some(1));
        assert_eq!(subs_of(&r, 1), vec![(2, false)]);
        r.unsubscribe(1, b"EURUSD");
        assert!(r.deliveries(0).is_empty());
    }

    #[test]
    fn patterns_route_to_matching_symbols_old_and_new() {
        let mut r = Routes::new();
        r.add_symbol(0, b"EURUSD");
        r.add_symbol(1, b"USDJPY");
        let mut m = Vec::new();
        r.psubscribe(7, b"EUR*", &mut m);
        assert_eq!(m, vec![0]);
        r.add_symbol(2, b"EURGBP");
        assert_eq!(subs_of(&r, 2), vec![(7, true)]);
        assert!(r.deliveries(1).is_empty());
        r.subscribe(7, b"EURUSD");
        assert_eq!(subs_of(&r, 0), vec![(7, true), (7, false)]);
        r.punsubscribe(7, b"EUR*");
        assert_eq!(subs_of(&r, 0), vec![(7, false)]);
        assert!(r.deliveries(2).is_empty());
        let mut prefix = Vec::new();
        resp::append_pmessage_prefix(&mut prefix, b"EUR*");
        m.clear();
        r.psubscribe(8, b"EUR*", &mut m);
        assert_eq!(&*r.deliveries(2)[0].prefix, &prefix[..]);
    }

    #[test]
    fn a_resp3_subscriber_gets_push_prefixes_before_and_after_switching() {
        let mut r = Routes::new();
        r.add_symbol(0, b"EURUSD");
        let mut m = Vec::new();
        r.subscribe(1, b"EURUSD");
        r.psubscribe(1, b"EUR*", &mut m);
        r.subscribe(2, b"EURUSD");
        r.set_proto(1, Proto::Resp3);
        let firsts = |r: &Routes| -> Vec<(SubKey, u8)> {
            r.deliveries(0)
                .iter()
                .map(|d| (d.sub, d.prefix[0]))
                .collect()
        };
        assert_eq!(firsts(&r), vec![(1, b'>'), (1, b'>'), (2, b'*')]);
        r.subscribe(1, b"EURGBP");
        r.add_symbol(1, b"EURGBP");
        assert!(r.deliveries(1).iter().all(|d| d.prefix[0] == b'>'));
        r.set_proto(1, Proto::Resp2);
        assert_eq!(firsts(&r), vec![(1, b'*'), (1, b'*'), (2, b'*')]);
        r.set_proto(3, Proto::Resp3);
        r.forget(3);
        r.subscribe(3, b"EURUSD");
        assert_eq!(r.deliveries(0)[3].prefix[0], b'*');
    }

    #[test]
    fn every_list_stays_sorted_by_key_and_a_key_s_deliveries_are_found_by_search() {
        let names: [&[u8]; 4] = [b"EURUSD", b"EURGBP", b"USDJPY", b"EURCHF"];
        let pats: [&[u8]; 3] = [b"EUR*", b"*", b"USD*"];
        let mut r = Routes::new();
        r.add_symbol(0, names[0]);
        let (mut known, mut m) = (1usize, Vec::new());
        let mut subs: HashSet<(SubKey, usize, bool)> = HashSet::new();
        // A fixed walk of subscribes, pattern subscribes, removals and new
        // symbols over keys 0..9 in no particular order.
        let mut x = 7u64;
        for _ in 0..600 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (sub, what, which) = ((x >> 33) as usize % 9, (x >> 45) % 5, (x >> 50) as usize);
            match what {
                0 if subs.insert((sub, which % 4, false)) => {
                    r.subscribe(sub, names[which % 4]);
                }
                1 if subs.insert((sub, which % 3, true)) => {
                    r.psubscribe(sub, pats[which % 3], &mut m);
                }
                2 if subs.remove(&(sub, which % 4, false)) => r.unsubscribe(sub, names[which % 4]),
                3 if subs.remove(&(sub, which % 3, true)) => r.punsubscribe(sub, pats[which % 3]),
                4 if known < names.len() => {
                    r.add_symbol(known as SymbolId, names[known]);
                    known += 1;
                }
                _ => {}
            }
            for id in 0..known as SymbolId {
                let list = r.deliveries(id);
                assert!(list.windows(2).all(|w| w[0].sub <= w[1].sub), "{list:?}");
                for sub in 0..9 {
                    let found: Vec<_> = r
                        .deliveries_to(id, sub)
                        .iter()
                        .map(|d| d.pattern.clone())
                        .collect();
                    let scanned: Vec<_> = list
                        .iter()
                        .filter(|d| d.sub == sub)
                        .map(|d| d.pattern.clone())
                        .collect();
                    assert_eq!(found, scanned);
                }
            }
        }
        assert!(!subs.is_empty(), "the walk subscribed something");
    }
}
