//! Per-symbol latest-value slots and the dirty queue: the conflation point
//! between the feed and the publisher.
//!
//! One slot per symbol holds the newest [`SlotValue`] and a "queued for
//! publishing" flag. The first write after a take pushes the symbol id onto
//! the dirty queue; later writes only overwrite (that is the conflation). The
//! publisher pops an id, clears the flag, then reads the newest value.
//!
//! Topology: one-to-one. Single writer: the feed thread ([`SlotWriter`]);
//! single reader: the publisher thread ([`SlotReader`]). Both are created
//! together by [`slots`] and neither is `Clone`, so the roles are enforced by
//! construction.
//!
//! Invariants:
//! - an id is in the dirty queue at most once: it is pushed only on the
//!   flag's false→true transition, and the flag goes back to false only after
//!   the id was popped. The queue's capacity is the number of symbols, so a
//!   push never fails.
//! - the value is read through a seqlock built of atomics (Boehm, "Can seqlocks
//!   get along with programming language memory models?", MSPC 2012): the
//!   writer never waits; a reader that overlaps a write retries.
//! - a write that lands after the reader cleared the flag re-queues the id, so
//!   no update is ever stranded; the reader may then see the same value twice,
//!   which is why [`SlotValue::seq`] lets the publisher skip an unchanged
//!   symbol.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;

use crate::model::decimal::Decimal;
use crate::model::tick::{Quote, SlotValue};
use crate::symbols::SymbolId;

const WORDS: usize = 9;

/// One symbol's slot. Padded to cache lines so two symbols never share one.
#[derive(Debug)]
struct Slot {
    /// Seqlock version: odd while a write is in progress. Written only by the writer.
    version: AtomicU64,
    /// The value, one atomic word per field (see `encode`/`decode`).
    words: [AtomicU64; WORDS],
    /// True from the write that queued the id until the reader pops it.
    queued: AtomicBool,
}

impl Slot {
    fn new() -> Self {
        Slot {
            version: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            queued: AtomicBool::new(false),
        }
    }
}

#[derive(Debug)]
struct Shared {
    slots: Box<[CachePadded<Slot>]>,
    dirty: ArrayQueue<SymbolId>,
}

/// Creates `capacity` empty slots and the two ends that use them.
///
/// # Panics
/// If `capacity` is zero.
pub fn slots(capacity: usize) -> (SlotWriter, SlotReader) {
    assert!(capacity > 0, "slot capacity must be positive");
    let shared = Arc::new(Shared {
        slots: (0..capacity)
            .map(|_| CachePadded::new(Slot::new()))
            .collect(),
        dirty: ArrayQueue::new(capacity),
    });
    (
        SlotWriter {
            shared: Arc::clone(&shared),
        },
        SlotReader { shared },
    )
}

/// The feed thread's end: writes the newest value of a symbol.
#[derive(Debug)]
pub struct SlotWriter {
    shared: Arc<Shared>,
}

impl SlotWriter {
    /// Ids waiting for the publisher (a gauge; racy by nature).
    pub fn dirty_len(&self) -> usize {
        self.shared.dirty.len()
    }
}

/// The publisher thread's end: pops dirty ids and takes their newest value.
#[derive(Debug)]
pub struct SlotReader {
    shared: Arc<Shared>,
}

fn encode(v: &SlotValue) -> [u64; WORDS] {
    let q = &v.quote;
    let scales = u64::from_le_bytes([
        q.bid.scale,
        q.ask.scale,
        q.bid_qty.scale,
        q.ask_qty.scale,
        0,
        0,
        0,
        0,
    ]);
    [
        q.ts_ns,
        q.bid.mantissa,
        q.ask.mantissa,
        q.bid_qty.mantissa,
        q.ask_qty.mantissa,
        scales,
        v.seq,
        v.recv_wall_ns,
        v.recv_mono_ns,
    ]
}

fn decode(w: &[u64; WORDS]) -> SlotValue {
    let s = w[5].to_le_bytes();
    SlotValue {
        quote: Quote {
            ts_ns: w[0],
            bid: Decimal::new(w[1], s[0]),
            ask: Decimal::new(w[2], s[1]),
            bid_qty: Decimal::new(w[3], s[2]),
            ask_qty: Decimal::new(w[4], s[3]),
        },
        seq: w[6],
        recv_wall_ns: w[7],
        recv_mono_ns: w[8],
    }
}

impl SlotWriter {
    /// Stores `value` as the newest value of `id`.
    ///
    /// Returns `true` when this write queued the id for publishing (the
    /// publisher should be woken once per batch of such writes), `false`
    /// when it conflated into a value not yet taken.
    ///
    /// Wait-free; no allocation.
    ///
    /// # Panics
    /// If `id` is not below the capacity.
    #[inline]
    pub fn write(&mut self, id: SymbolId, value: &SlotValue) -> bool {
        let slot = &self.shared.slots[id as usize];
        let words = encode(value);
        let v = slot.version.load(Ordering::Relaxed);
        debug_assert!(
            v.is_multiple_of(2),
            "single writer: slot {id} written concurrently"
        );
        slot.version.store(v.wrapping_add(1), Ordering::Relaxed);
        // Release fence: a reader that sees any word below also sees the odd
        // version (pairs with the reader's Acquire fence).
        fence(Ordering::Release);
        for (cell, w) in slot.words.iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        // Release pairs with the reader's Acquire load of `version`.
        slot.version.store(v.wrapping_add(2), Ordering::Release);
        // AcqRel: the value stores above happen-before the reader that pops the
        // id and clears the flag.
        if !slot.queued.swap(true, Ordering::AcqRel) {
            let pushed = self.shared.dirty.push(id);
            debug_assert!(pushed.is_ok(), "dirty queue holds each id at most once");
            true
        } else {
            false
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.shared.slots.len()
    }
}

impl SlotReader {
    /// Pops the next symbol whose value changed since it was last taken.
    #[inline]
    pub fn pop_dirty(&mut self) -> Option<SymbolId> {
        self.shared.dirty.pop()
    }

    /// Number of ids waiting in the dirty queue (a gauge; racy by nature).
    pub fn dirty_len(&self) -> usize {
        self.shared.dirty.len()
    }

    /// Takes the newest value of a popped id: clears its queued flag first, so
    /// a write that lands after this call queues the id again.
    #[inline]
    pub fn take(&mut self, id: SymbolId) -> SlotValue {
        let slot = &self.shared.slots[id as usize];
        // AcqRel pairs with the writer's swap: we see every value store that
        // preceded the write which queued this id.
        slot.queued.swap(false, Ordering::AcqRel);
        self.read(id)
    }

    /// Reads the newest value of `id` without touching its queued flag.
    #[inline]
    pub fn read(&self, id: SymbolId) -> SlotValue {
        let slot = &self.shared.slots[id as usize];
        loop {
            let v1 = slot.version.load(Ordering::Acquire);
            if v1 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut words = [0u64; WORDS];
            for (w, cell) in words.iter_mut().zip(slot.words.iter()) {
                *w = cell.load(Ordering::Relaxed);
            }
            fence(Ordering::Acquire);
            if slot.version.load(Ordering::Relaxed) == v1 {
                return decode(&words);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(seq: u64) -> SlotValue {
        SlotValue {
            quote: Quote {
                ts_ns: seq * 10,
                bid: Decimal::new(seq, 5),
                ask: Decimal::new(seq + 1, 5),
                bid_qty: Decimal::new(seq + 2, 0),
                ask_qty: Decimal::new(seq + 3, 2),
            },
            seq,
            recv_wall_ns: seq * 7,
            recv_mono_ns: seq * 3,
        }
    }

    #[test]
    fn round_trips_every_field() {
        let v = SlotValue {
            quote: Quote {
                ts_ns: u64::MAX,
                bid: Decimal::new(u64::MAX, 18),
                ask: Decimal::new(1, 0),
                bid_qty: Decimal::new(0, 7),
                ask_qty: Decimal::new(42, 1),
            },
            seq: 9,
            recv_wall_ns: 5,
            recv_mono_ns: 6,
        };
        assert_eq!(decode(&encode(&v)), v);
    }

    #[test]
    fn latest_wins() {
        let (mut w, mut r) = slots(4);
        assert!(w.write(2, &value(1)));
        assert!(!w.write(2, &value(2)), "second write conflates");
        assert!(!w.write(2, &value(3)));
        assert_eq!(r.pop_dirty(), Some(2));
        assert_eq!(r.take(2), value(3));
        assert_eq!(r.pop_dirty(), None);
    }

    #[test]
    fn at_most_once_in_dirty_queue() {
        let (mut w, mut r) = slots(3);
        for round in 0..100 {
            for id in 0..3 {
                w.write(id, &value(round));
            }
        }
        assert_eq!(r.dirty_len(), 3);
        let mut seen: Vec<_> = std::iter::from_fn(|| r.pop_dirty()).collect();
        seen.sort();
        assert_eq!(seen, vec![0, 1, 2]);
    }

    #[test]
    fn write_after_take_requeues() {
        let (mut w, mut r) = slots(1);
        w.write(0, &value(1));
        let id = r.pop_dirty().unwrap();
        assert_eq!(r.take(id), value(1));
        assert!(w.write(0, &value(2)), "taken slot is queued again");
        assert_eq!(r.pop_dirty(), Some(0));
        assert_eq!(r.take(0), value(2));
    }

    /// Stress: a writer thread rewrites slots as fast as it can while the
    /// reader takes them. The reader must never see a torn value (all words are
    /// derived from one seq), seqs per slot must never go backwards, and the
    /// final value of every slot must be reached.
    #[test]
    fn concurrent_reader_never_sees_torn_or_older_values() {
        const SLOTS: u32 = 8;
        const WRITES: u64 = 200_000;
        let (mut w, mut r) = slots(SLOTS as usize);
        let writer = std::thread::spawn(move || {
            for seq in 1..=WRITES {
                w.write((seq % SLOTS as u64) as u32, &value(seq));
            }
        });
        let mut last = [0u64; SLOTS as usize];
        let finals: Vec<u64> = (0..SLOTS as u64)
            .map(|s| (1..=WRITES).rev().find(|q| q % SLOTS as u64 == s).unwrap())
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while last.iter().zip(&finals).any(|(l, f)| l != f) {
            assert!(
                std::time::Instant::now() < deadline,
                "reader never caught up"
            );
            match r.pop_dirty() {
                Some(id) => {
                    let v = r.take(id);
                    assert_eq!(v, value(v.seq), "torn read");
                    assert!(v.seq >= last[id as usize], "older after newer");
                    last[id as usize] = v.seq;
                }
                None => std::thread::yield_now(),
            }
        }
        writer.join().unwrap();
        // A write that raced with the last take may have re-queued its id;
        // whatever is left can only be the same final value again.
        while let Some(id) = r.pop_dirty() {
            assert_eq!(r.take(id).seq, finals[id as usize]);
        }
    }

    mod proptests {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Write(u32),
            Take,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![(0u32..6).prop_map(Op::Write), Just(Op::Take)]
        }

        proptest! {
            /// Against a model: the dirty queue holds each id at most once,
            /// a take always returns the newest value written, and every id
            /// written since its last take is eventually popped.
            #[test]
            fn slots_match_the_latest_value_model(ops in proptest::collection::vec(op(), 0..200)) {
                let (mut w, mut r) = slots(6);
                let mut latest = [0u64; 6];
                let mut queued = [false; 6];
                let mut seq = 0u64;
                for op in ops {
                    match op {
                        Op::Write(id) => {
                            seq += 1;
                            let newly = w.write(id, &value(seq));
                            prop_assert_eq!(newly, !queued[id as usize]);
                            queued[id as usize] = true;
                            latest[id as usize] = seq;
                        }
                        Op::Take => match r.pop_dirty() {
                            Some(id) => {
                                prop_assert!(queued[id as usize]);
                                queued[id as usize] = false;
                                prop_assert_eq!(r.take(id), value(latest[id as usize]));
                            }
                            None => prop_assert!(queued.iter().all(|q| !q)),
                        },
                    }
                    prop_assert_eq!(r.dirty_len(), queued.iter().filter(|q| **q).count());
                }
            }
        }
    }
}
