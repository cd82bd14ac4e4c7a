//! Idempotency: the client order ids seen recently, so a repeated id is
//! rejected as `DUPLICATE` and never executed twice.
//!
//! Retention (documented in the README): an id is remembered for
//! `retention` after it was accepted, and never forgotten while its order is
//! still in flight; an order that ends after its window gets a new window
//! from its end. At most `capacity` ids are held; when that many ids are
//! inside their window a new order is refused with `SYSTEM_BUSY`
//! (`dedup_full`) rather than risk executing an id twice.
//!
//! A dead-lettered order's id may be replayed (`REPLAY`), once per dead
//! letter; otherwise a dead id is a duplicate like any other.
//!
//! Memory: a fixed open-addressing table (linear probing, at most half
//! full) of 48-byte slots holding a keyed 128-bit fingerprint of the id,
//! never the id itself, and the order's `STATUS` (`status.rs`). It is allocated and written once at start, so the
//! store's resident memory is its configured bound from the first second
//! and never grows or faults in pages on the order path. A false duplicate
//! needs two ids with equal 128-bit SipHash fingerprints under a per-process
//! random key (about 2^-88 for a million ids): refusing an order is the safe
//! side of that coin.
//!
//! Expiry is exact on lookup (an entry past its window counts as absent);
//! space is reclaimed by a hand that sweeps a few slots per check, and by a
//! full sweep before `Full` is answered, so `Full` means full.
//!
//! Single writer and reader: the gateway thread.

use std::hash::{BuildHasher, RandomState};

use super::status::OrderStatus;

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

impl IdState {
    const fn bits(self) -> u64 {
        match self {
            IdState::Live => 1,
            IdState::Done => 2,
            IdState::Dead => 3,
        }
    }
}

/// Why an id cannot be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Seen within the retention: `since_ns` is when its window began.
    Duplicate {
        /// Start of the id's window: its acceptance, or the end of an order
        /// that outlived its first window (engine clock).
        since_ns: u64,
        /// Its state.
        state: IdState,
    },
    /// `capacity` ids are all inside their window.
    Full,
}

/// One table slot: a fingerprint, `since_ns << 2 | state` (0 = empty) and
/// the order's `STATUS` ([`super::status`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    fp: [u64; 2],
    meta: u64,
    status: OrderStatus,
}

impl Slot {
    /// Written into every slot at start. Non-zero words so the fill cannot
    /// become a lazily zeroed allocation: every page is resident from start.
    const EMPTY: Slot = Slot {
        fp: [u64::MAX; 2],
        meta: 0,
        status: OrderStatus::EMPTY,
    };
    /// Largest `since_ns` a slot holds (2^62 ns is 146 years of engine clock).
    const MAX_SINCE: u64 = (1 << 62) - 1;

    fn is_empty(&self) -> bool {
        self.meta == 0
    }

    fn new(fp: [u64; 2], state: IdState, since_ns: u64, status: OrderStatus) -> Slot {
        Slot {
            fp,
            meta: since_ns.min(Self::MAX_SINCE) << 2 | state.bits(),
            status,
        }
    }

    fn since_ns(&self) -> u64 {
        self.meta >> 2
    }

    fn state(&self) -> IdState {
        match self.meta & 3 {
            1 => IdState::Live,
            2 => IdState::Done,
            _ => IdState::Dead,
        }
    }

    /// May this entry be forgotten at `now_ns`? Never while live.
    fn expired(&self, now_ns: u64, retention_ns: u64) -> bool {
        !self.is_empty()
            && self.state() != IdState::Live
            && self.since_ns().saturating_add(retention_ns) <= now_ns
    }
}

/// Slots examined by the hand on each [`Dedup::check`]. With the table at
/// most half full this reclaims expired slots faster than one order per
/// check can fill them.
const SWEEP_PER_CHECK: usize = 8;

/// The recent ids. Invariants: `held <= capacity <= slots.len() / 2`; every
/// held entry is reachable from its home slot without crossing an empty one.
#[derive(Debug)]
pub struct Dedup {
    slots: Box<[Slot]>,
    mask: usize,
    held: usize,
    capacity: usize,
    retention_ns: u64,
    /// Next slot the incremental sweep looks at.
    hand: usize,
    /// No held entry can expire before this (engine clock): a full sweep
    /// earlier would free nothing, so `Full` is answered without one.
    next_expiry_ns: u64,
    /// When the last full sweep ran; they are at least `retention / 256`
    /// apart, so a store held at its bound by overload costs the gateway
    /// one table scan per ~1 s (default retention), not one per order.
    last_full_sweep_ns: Option<u64>,
    /// Full sweeps run (tests check their spacing).
    full_sweeps: u64,
    keys: [RandomState; 2],
}

impl Dedup {
    /// Remembers ids for `retention_ns`, at most `capacity` of them.
    /// Allocates and writes the whole table now (48 bytes × the power of
    /// two at or above 2 × `capacity`).
    pub fn new(retention_ns: u64, capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let len = (capacity * 2).next_power_of_two().max(8);
        Dedup {
            slots: vec![Slot::EMPTY; len].into_boxed_slice(),
            mask: len - 1,
            held: 0,
            capacity,
            retention_ns,
            hand: 0,
            next_expiry_ns: u64::MAX,
            last_full_sweep_ns: None,
            full_sweeps: 0,
            keys: [RandomState::new(), RandomState::new()],
        }
    }

    /// Bytes the table holds (all resident from [`new`](Self::new)).
    pub fn reserved_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }

    /// May a new order with `id` be accepted at `now_ns`? `replay` also
    /// accepts a dead id.
    ///
    /// # Errors
    /// [`Refusal`] saying why not.
    pub fn check(&mut self, id: &str, now_ns: u64, replay: bool) -> Result<(), Refusal> {
        self.sweep(SWEEP_PER_CHECK, now_ns);
        let fp = self.fingerprint(id);
        if let Some(i) = self.find(fp) {
            let s = self.slots[i];
            if s.expired(now_ns, self.retention_ns) {
                return Ok(()); // `insert` reuses the slot
            }
            if replay && s.state() == IdState::Dead {
                return Ok(());
            }
            return Err(Refusal::Duplicate {
                since_ns: s.since_ns(),
                state: s.state(),
            });
        }
        if self.held >= self.capacity && self.full_sweep_due(now_ns) {
            self.last_full_sweep_ns = Some(now_ns);
            self.full_sweeps += 1;
            self.sweep(self.slots.len(), now_ns);
        }
        if self.held >= self.capacity {
            return Err(Refusal::Full);
        }
        Ok(())
    }

    /// Records `id` as accepted (live) at `now_ns`; call after a successful
    /// [`check`](Self::check), which guarantees room.
    pub fn insert(&mut self, id: &str, now_ns: u64) {
        let fp = self.fingerprint(id);
        let slot = Slot::new(fp, IdState::Live, now_ns, OrderStatus::EMPTY);
        let mut i = fp[0] as usize & self.mask;
        loop {
            let s = &mut self.slots[i];
            if s.is_empty() {
                assert!(self.held < self.capacity, "dedup insert without check");
                *s = slot;
                self.held += 1;
                return;
            }
            if s.fp == fp {
                *s = slot;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Moves `id` to `state` at `now_ns` (a terminal reply went out). An
    /// order that outlived its window is remembered for a further retention
    /// from now.
    pub fn mark(&mut self, id: &str, state: IdState, now_ns: u64) {
        let Some(i) = self.find(self.fingerprint(id)) else {
            return;
        };
        let s = self.slots[i];
        let since = if s.since_ns().saturating_add(self.retention_ns) <= now_ns {
            now_ns
        } else {
            s.since_ns()
        };
        self.slots[i] = Slot::new(s.fp, state, since, s.status);
        if state != IdState::Live {
            let expiry = since.saturating_add(self.retention_ns);
            self.next_expiry_ns = self.next_expiry_ns.min(expiry);
        }
    }

    /// Forgets `id` at once (its order was refused after all, never
    /// `ACK`ed: the id may be sent again).
    pub fn forget(&mut self, id: &str) {
        if let Some(i) = self.find(self.fingerprint(id)) {
            self.remove_at(i);
        }
    }

    /// The state of `id` at `now_ns`, if remembered.
    pub fn state(&self, id: &str, now_ns: u64) -> Option<IdState> {
        let s = self.slots[self.find(self.fingerprint(id))?];
        (!s.expired(now_ns, self.retention_ns)).then(|| s.state())
    }

    /// The `STATUS` of `id` at `now_ns`, if remembered (exactly as long as
    /// [`state`](Self::state) answers).
    pub fn status(&self, id: &str, now_ns: u64) -> Option<OrderStatus> {
        let s = self.slots[self.find(self.fingerprint(id))?];
        (!s.expired(now_ns, self.retention_ns)).then_some(s.status)
    }

    /// The `STATUS` of `id` to update (an event of a live order; an
    /// [`insert`](Self::insert) starts it at [`OrderStatus::EMPTY`]).
    pub fn track(&mut self, id: &str) -> Option<&mut OrderStatus> {
        let i = self.find(self.fingerprint(id))?;
        Some(&mut self.slots[i].status)
    }

    /// Ids held now: those inside their window plus expired ones the sweep
    /// has not reached yet.
    pub fn len(&self) -> usize {
        self.held
    }

    /// True when no id is held.
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    fn full_sweep_due(&self, now_ns: u64) -> bool {
        let spaced = self
            .last_full_sweep_ns
            .is_none_or(|t| now_ns >= t.saturating_add(self.retention_ns / 256));
        spaced && now_ns >= self.next_expiry_ns
    }

    fn fingerprint(&self, id: &str) -> [u64; 2] {
        [self.keys[0].hash_one(id), self.keys[1].hash_one(id)]
    }

    fn find(&self, fp: [u64; 2]) -> Option<usize> {
        let mut i = fp[0] as usize & self.mask;
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return None;
            }
            if s.fp == fp {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Looks at `n` slots from the hand, forgetting expired entries. A
    /// sweep of the whole table also recomputes `next_expiry_ns`.
    fn sweep(&mut self, n: usize, now_ns: u64) {
        if self.held == 0 {
            return;
        }
        let full = n >= self.slots.len();
        let mut next = u64::MAX;
        for _ in 0..n {
            // A removal shifts a later entry into the hand's slot: look again.
            while self.slots[self.hand].expired(now_ns, self.retention_ns) {
                self.remove_at(self.hand);
            }
            let s = self.slots[self.hand];
            if !s.is_empty() && s.state() != IdState::Live {
                next = next.min(s.since_ns().saturating_add(self.retention_ns));
            }
            self.hand = (self.hand + 1) & self.mask;
        }
        if full {
            self.next_expiry_ns = next;
        }
    }

    /// Empties slot `hole`, shifting later entries of the same probe run
    /// back so every entry stays reachable (no tombstones).
    fn remove_at(&mut self, mut hole: usize) {
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s.is_empty() {
                break;
            }
            let home = s.fp[0] as usize & self.mask;
            // `s` may fill the hole if its home is not strictly between
            // the hole and `j` (cyclically).
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = Slot::EMPTY;
        self.held -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn duplicates_within_retention_then_forgotten() {
        let mut d = Dedup::new(100, 10);
        d.check("a", 0, false).unwrap();
        d.insert("a", 0);
        assert!(matches!(
            d.check("a", 50, false),
            Err(Refusal::Duplicate { since_ns: 0, .. })
        ));
        d.mark("a", IdState::Done, 60);
        assert!(d.check("a", 99, false).is_err());
        d.check("a", 100, false).unwrap();
        assert_eq!(d.state("a", 100), None);
    }

    #[test]
    fn a_forgotten_id_is_free_at_once_and_its_neighbours_stay_found() {
        let mut d = Dedup::new(1_000, 64);
        let ids: Vec<String> = (0..40).map(|i| format!("id{i}")).collect();
        for id in &ids {
            d.check(id, 0, false).unwrap();
            d.insert(id, 0);
        }
        d.forget("id7");
        d.forget("never-seen");
        assert_eq!(d.len(), 39);
        assert_eq!(d.state("id7", 1), None);
        d.check("id7", 1, false).unwrap();
        for id in ids.iter().filter(|i| *i != "id7") {
            assert_eq!(d.state(id, 1), Some(IdState::Live), "{id}");
        }
    }

    #[test]
    fn in_flight_ids_are_never_forgotten() {
        let mut d = Dedup::new(100, 10);
        d.insert("a", 0);
        assert!(d.check("a", 1_000, false).is_err(), "still live");
        d.mark("a", IdState::Done, 1_000);
        assert!(d.check("a", 1_099, false).is_err(), "new window from 1000");
        d.check("a", 1_100, false).unwrap();
    }

    #[test]
    fn full_refuses_rather_than_forgets() {
        let mut d = Dedup::new(100, 2);
        d.insert("a", 0);
        d.insert("b", 1);
        assert_eq!(d.check("c", 2, false), Err(Refusal::Full));
        d.mark("a", IdState::Done, 2);
        assert_eq!(
            d.check("c", 99, false),
            Err(Refusal::Full),
            "a still in window"
        );
        d.check("c", 100, false).unwrap();
        d.insert("c", 100);
        assert_eq!(d.len(), 2);
        assert_eq!(d.state("a", 100), None);
    }

    #[test]
    fn dead_ids_replay_once() {
        let mut d = Dedup::new(100, 10);
        d.insert("a", 0);
        d.mark("a", IdState::Dead, 0);
        assert!(d.check("a", 1, false).is_err());
        d.check("a", 1, true).unwrap();
        d.insert("a", 1);
        assert_eq!(d.state("a", 1), Some(IdState::Live));
        assert!(
            d.check("a", 2, true).is_err(),
            "live again: no second replay"
        );
        assert_eq!(d.len(), 1, "one id, one slot");
        d.mark("a", IdState::Done, 2);
        assert!(d.check("a", 100, false).is_err(), "window from the replay");
        d.check("a", 101, false).unwrap();
    }

    #[test]
    fn the_table_never_grows_and_turns_over_at_its_bound() {
        // 50 ids per retention window into a store of 64: steady churn for
        // 200 windows never needs more than the table made at start.
        let mut d = Dedup::new(1_000, 64);
        let bytes = d.reserved_bytes();
        assert_eq!(bytes, 128 * 48);
        let mut now = 0;
        for n in 0..10_000u64 {
            now += 20;
            let id = format!("id-{n}");
            d.check(&id, now, false).unwrap();
            d.insert(&id, now);
            d.mark(&id, IdState::Done, now + 5);
            assert!(d.len() <= 64);
        }
        assert_eq!(d.reserved_bytes(), bytes);
        assert!(d.check("id-9999", now + 10, false).is_err());
        assert!(d.check("id-9990", now + 10, false).unwrap_err() != Refusal::Full);
    }

    #[test]
    fn full_sweeps_are_spaced_under_overload() {
        // Retention 25_600 ns, so full sweeps are at least 100 ns apart;
        // an order every ns into a store of 64 ids, each ending at once:
        // the store is at its bound nearly all the time.
        const RET: u64 = 25_600;
        let mut d = Dedup::new(RET, 64);
        let (mut sweeps_at, mut accepted) = (Vec::new(), 0);
        for t in 0..100 * RET {
            let id = format!("id-{t}");
            let before = d.full_sweeps;
            if d.check(&id, t, false).is_ok() {
                d.insert(&id, t);
                d.mark(&id, IdState::Done, t);
                accepted += 1;
            }
            if d.full_sweeps > before {
                sweeps_at.push(t);
            }
        }
        assert!(sweeps_at.len() > 10, "{sweeps_at:?}");
        let gaps: Vec<u64> = sweeps_at.windows(2).map(|w| w[1] - w[0]).collect();
        let closest = gaps.iter().min().copied();
        assert!(
            closest >= Some(RET / 256),
            "full sweeps {closest:?} ns apart"
        );
        // Still turning over: about capacity ids per retention.
        assert!(accepted >= 64 * 99, "{accepted}");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Check { id: u8, replay: bool },
        Mark { id: u8, dead: bool },
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..24, any::<bool>()).prop_map(|(id, replay)| Op::Check { id, replay }),
            3 => (0u8..24, any::<bool>()).prop_map(|(id, dead)| Op::Mark { id, dead }),
            2 => (0u64..60).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// The table answers exactly like a map of id → (state, since) with
        /// the documented semantics, through sweeps, shifts and wrap-around
        /// (small capacity, so the hand laps the table often).
        #[test]
        fn matches_a_map_model(ops in prop::collection::vec(op(), 1..400), cap in 1usize..12) {
            const RET: u64 = 100;
            let mut d = Dedup::new(RET, cap);
            let mut model: HashMap<u8, (IdState, u64)> = HashMap::new();
            let mut now = 0u64;
            let live = |m: &HashMap<u8, (IdState, u64)>, id: u8, now: u64| {
                m.get(&id).copied().filter(|&(st, since)| st == IdState::Live || since + RET > now)
            };
            for op in ops {
                match op {
                    Op::Advance(dt) => now += dt,
                    Op::Check { id, replay } => {
                        let key = format!("order-{id}");
                        let got = d.check(&key, now, replay);
                        let want = match live(&model, id, now) {
                            Some((IdState::Dead, _)) if replay => Ok(()),
                            Some((state, since_ns)) => Err(Refusal::Duplicate { since_ns, state }),
                            None => {
                                let held = model.keys().filter(|&&k| live(&model, k, now).is_some()).count();
                                if held >= cap { Err(Refusal::Full) } else { Ok(()) }
                            }
                        };
                        prop_assert_eq!(got, want);
                        if got.is_ok() {
                            d.insert(&key, now);
                            model.insert(id, (IdState::Live, now));
                        }
                    }
                    Op::Mark { id, dead } => {
                        let state = if dead { IdState::Dead } else { IdState::Done };
                        if let Some((IdState::Live, since)) = live(&model, id, now) {
                            d.mark(&format!("order-{id}"), state, now);
                            let since = if since + RET <= now { now } else { since };
                            model.insert(id, (state, since));
                        }
                    }
                }
                for id in 0..24u8 {
                    prop_assert_eq!(d.state(&format!("order-{id}"), now), live(&model, id, now).map(|e| e.0));
                }
                prop_assert!(d.len() <= cap);
            }
        }
    }
}
