//! The per-symbol history ring behind `TICKFAN.SINCE`: the last
//! `--history-depth` updates the publisher took of each symbol, kept as
//! their encoded RESP tails (the part of a `message` frame every
//! subscriber shares), so a reconnecting client gets exactly the frames a
//! subscriber got, prefix for its protocol added.
//!
//! ```text
//!  bytes: [ sym 0: slot 0 | slot 1 | … | slot N-1 ][ sym 1: … ] …   (N = depth, SLOT bytes each)
//!  seqs:  [ sym 0: seq₀ … seq_{N-1} ][ sym 1: … ] …                 (0 = empty)
//!  next[sym]: slot the next update of sym overwrites (oldest held once full)
//!  floor[sym]: seq of the newest update evicted (0 = none): SINCE s is
//!              served iff s ≥ floor, otherwise the gap is older than the ring
//! ```
//!
//! - **Bounded, allocated at start.** `depth × max_symbols` slots of
//!   [`SLOT`] bytes (the longest tail a 24-byte symbol can have), reserved
//!   zeroed when the publisher starts (the OS makes pages resident as
//!   symbols fill them); [`bytes_for`] is the figure `--history-depth`
//!   is validated against. Recording copies one tail: no allocation.
//! - **Exact.** The ring holds the updates the publisher *took* (the feed's
//!   conflation skips some sequence numbers; those were never sent to
//!   anyone). Recorded in the same step as the fan-out, on the single
//!   publisher thread, so a replay up to the newest entry followed by the
//!   live deliveries has neither a gap nor a duplicate.
//!
//! Single owner: the publisher thread.

use crate::feed::parse::MAX_SYMBOL_LEN;
use crate::protocol::encode::max_payload_len;
use crate::symbols::SymbolId;

/// Bytes of one slot: the longest encoded tail of any update.
pub(crate) const SLOT: usize = tail_max();

const fn tail_max() -> usize {
    // `$<n>\r\n<channel>\r\n$<m>\r\n<payload>\r\n` with n ≤ 24, m < 1000.
    (1 + 2 + 2 + MAX_SYMBOL_LEN + 2) + (1 + 3 + 2 + max_payload_len(MAX_SYMBOL_LEN) + 2)
}

/// Bytes the ring takes for `depth` updates of each of `max_symbols` symbols.
pub(crate) fn bytes_for(depth: usize, max_symbols: usize) -> u64 {
    (depth as u64) * (max_symbols as u64) * (SLOT as u64 + 10)
}

/// Why `TICKFAN.SINCE` cannot replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SinceError {
    /// Updates after the asked sequence were evicted: the client fetches a
    /// snapshot (`SUBSCRIBE`) instead.
    #[error("TICKFAN gap: oldest held seq is {oldest}; fetch a snapshot")]
    Gap {
        /// Oldest sequence number still held for the symbol.
        oldest: u64,
    },
    /// No history is kept (`--history-depth 0`) and the client is behind.
    #[error("TICKFAN gap: no history is kept (--history-depth 0); fetch a snapshot")]
    Off,
}

/// The ring.
#[derive(Debug)]
pub(crate) struct History {
    depth: usize,
    /// `depth` slots of [`SLOT`] bytes per symbol.
    bytes: Vec<u8>,
    /// Per slot: the length of its tail.
    lens: Vec<u16>,
    /// Per slot: the sequence number of its update (0 = empty).
    seqs: Vec<u64>,
    /// Per symbol: the slot the next update overwrites.
    next: Vec<u32>,
    /// Per symbol: the newest evicted sequence number (0 = none evicted).
    floor: Vec<u64>,
}

impl History {
    /// A ring of `depth` updates per symbol for `max_symbols` symbols
    /// (`depth` 0: nothing kept, nothing allocated).
    pub(crate) fn new(depth: usize, max_symbols: usize) -> Self {
        let (slots, syms) = if depth == 0 {
            (0, 0)
        } else {
            (depth * max_symbols, max_symbols)
        };
        History {
            depth,
            bytes: vec![0; slots * SLOT],
            lens: vec![0; slots],
            seqs: vec![0; slots],
            next: vec![0; syms],
            floor: vec![0; syms],
        }
    }

    /// Keeps update `seq` of `id`, encoded as `tail`, evicting the oldest.
    #[inline]
    pub(crate) fn record(&mut self, id: SymbolId, seq: u64, tail: &[u8]) {
        if self.depth == 0 {
            return;
        }
        let s = id as usize;
        let Some(next) = self.next.get_mut(s) else {
            return;
        };
        let slot = s * self.depth + *next as usize;
        *next = ((*next as usize + 1) % self.depth) as u32;
        let evicted = self.seqs[slot];
        if evicted != 0 {
            self.floor[s] = evicted;
        }
        if tail.len() > SLOT {
            // Cannot happen for a parsed tick (SLOT is the longest tail);
            // if it did, the update is not held and counts as evicted.
            debug_assert!(false, "tail of {} bytes over the slot", tail.len());
            self.seqs[slot] = 0;
            self.floor[s] = seq;
            return;
        }
        self.bytes[slot * SLOT..slot * SLOT + tail.len()].copy_from_slice(tail);
        self.lens[slot] = tail.len() as u16;
        self.seqs[slot] = seq;
    }

    /// Calls `each` with the held updates of `id` after `after`, oldest
    /// first: every update the publisher took since `after`, given that
    /// `after` is at most the newest taken (the caller checks).
    ///
    /// # Errors
    /// [`SinceError::Gap`] when updates after `after` were evicted;
    /// [`SinceError::Off`] when no history is kept and `after` is not the
    /// newest (`latest`).
    pub(crate) fn since(
        &self,
        id: SymbolId,
        after: u64,
        latest: u64,
        mut each: impl FnMut(u64, &[u8]),
    ) -> Result<(), SinceError> {
        if self.depth == 0 {
            return if after >= latest {
                Ok(())
            } else {
                Err(SinceError::Off)
            };
        }
        let s = id as usize;
        if after < self.floor[s] {
            let oldest = self.held(s).map(|(q, _)| q).next().unwrap_or(latest);
            return Err(SinceError::Gap { oldest });
        }
        for (seq, tail) in self.held(s).filter(|&(q, _)| q > after) {
            each(seq, tail);
        }
        Ok(())
    }

    /// The held updates of symbol `s`, oldest first.
    fn held(&self, s: usize) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        let base = s * self.depth;
        let start = self.next[s] as usize;
        (0..self.depth)
            .map(move |k| base + (start + k) % self.depth)
            .filter(|&slot| self.seqs[slot] != 0)
            .map(|slot| {
                let at = slot * SLOT;
                (
                    self.seqs[slot],
                    &self.bytes[at..at + self.lens[slot] as usize],
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::message_tail_len;

    fn replay(h: &History, id: SymbolId, after: u64, latest: u64) -> Result<Vec<u64>, SinceError> {
        let mut got = Vec::new();
        h.since(id, after, latest, |q, tail| {
            assert_eq!(tail, format!("t{q}").as_bytes());
            got.push(q);
        })?;
        Ok(got)
    }

    #[test]
    fn replays_what_was_taken_after_the_seq_in_order() {
        let mut h = History::new(4, 3);
        for q in [1u64, 2, 5, 6] {
            h.record(1, q, format!("t{q}").as_bytes());
        }
        assert_eq!(replay(&h, 1, 0, 6), Ok(vec![1, 2, 5, 6]));
        assert_eq!(replay(&h, 1, 2, 6), Ok(vec![5, 6]));
        assert_eq!(
            replay(&h, 1, 3, 6),
            Ok(vec![5, 6]),
            "3 and 4 were conflated"
        );
        assert_eq!(replay(&h, 1, 6, 6), Ok(vec![]));
        assert_eq!(replay(&h, 0, 0, 0), Ok(vec![]), "other symbols untouched");
    }

    #[test]
    fn a_gap_older_than_the_ring_names_the_oldest_held() {
        let mut h = History::new(3, 2);
        for q in 1..=10u64 {
            h.record(0, q, format!("t{q}").as_bytes());
        }
        assert_eq!(replay(&h, 0, 7, 10), Ok(vec![8, 9, 10]));
        assert_eq!(replay(&h, 0, 6, 10), Err(SinceError::Gap { oldest: 8 }));
        assert_eq!(replay(&h, 0, 0, 10), Err(SinceError::Gap { oldest: 8 }));
    }

    #[test]
    fn without_depth_only_the_newest_is_served() {
        let mut h = History::new(0, 100);
        h.record(3, 9, b"t9");
        assert!(h.bytes.is_empty() && h.floor.is_empty());
        assert_eq!(replay(&h, 3, 9, 9), Ok(vec![]));
        assert_eq!(replay(&h, 3, 8, 9), Err(SinceError::Off));
    }

    #[test]
    fn the_slot_holds_the_longest_tail() {
        let payload = max_payload_len(MAX_SYMBOL_LEN);
        assert!(SLOT >= message_tail_len(MAX_SYMBOL_LEN, payload));
        assert_eq!(bytes_for(2, 10), 20 * (SLOT as u64 + 10));
    }
}
