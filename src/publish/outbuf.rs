//! A subscriber's bounded output buffer and its own conflation state.
//!
//! Slow-subscriber policy: a data frame that would take the buffer past its
//! limit is not appended; its symbol is marked pending instead. The limit
//! is the high-water mark, or, once the subscriber is paced, what its
//! commit budget leaves after the kernel's bytes
//! ([`super::commit_budget`], `--sub-max-lag`).
//! While a symbol is pending, every later update of it is only counted. When
//! the buffer drains, the publisher sends the latest value of each pending
//! symbol, oldest mark first. So a slow subscriber never receives an older
//! value after a newer one, and its memory is bounded by the mark (plus one
//! command's replies), a bitset of `max_symbols` bits and, from its first
//! slow episode on, a list of `max_symbols` entries (16 bytes each).
//!
//! The bytes live in the connection kit's [`WriteBuf`] (one `BytesMut`,
//! `hwm + REPLY_ROOM` allocated once, the written prefix reclaimed in
//! place), so steady traffic, partial writes included, neither allocates
//! nor grows it; the policy above is this file's own.
//!
//! Single owner: the publisher thread. No socket here, so the policy is
//! tested and benchmarked on its own.

use std::collections::VecDeque;
use std::io::Write;

use bytes::BytesMut;

use crate::net::{Flushed, WriteBuf};
use crate::publish::commit_budget::CommitBudget;
use crate::symbols::SymbolId;

/// What an offered data frame became.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Appended to the output buffer.
    Appended,
    /// Not appended: the symbol is (now) pending for this subscriber.
    Conflated {
        /// This offer started a slow episode.
        entered_slow: bool,
    },
}

/// Figures of one buffer since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BufferStats {
    /// Data frames appended.
    pub frames: u64,
    /// Updates not appended because the buffer was past the mark.
    pub conflations: u64,
    /// Times the buffer crossed the mark.
    pub slow_episodes: u64,
    /// Most bytes ever waiting.
    pub max_buffered: u64,
    /// Bytes handed to the socket.
    pub bytes_written: u64,
}

/// The buffer.
///
/// `repr(C)` in this order: what every offer reads and writes (the bytes,
/// the pending bits, the figures, then the budget, whose own first fields
/// are the pacing flag and the mark) sits in the struct's first two cache
/// lines, where the compiler's order may put them hundreds of bytes in
/// (the fan-out's cost per subscriber, `benches/publish_fanout.rs`).
#[derive(Debug)]
#[repr(C)]
pub struct SubscriberBuffer {
    /// The bytes waiting to be written; its mark is this buffer's mark.
    out: WriteBuf,
    /// Bit `id` set ⇔ `id` is in `pending`.
    pending_bits: Vec<u64>,
    /// Figures.
    pub stats: BufferStats,
    /// Bytes committed (engine + kernel) bounded by time at the drain rate.
    pub budget: CommitBudget,
    /// Pending ids with the monotonic ns they were marked, oldest first.
    /// Empty until the first slow episode, then `max_symbols` capacity.
    pending: VecDeque<(SymbolId, u64)>,
    max_symbols: usize,
}

impl SubscriberBuffer {
    /// Extra room over the mark reserved up front for command replies.
    pub const REPLY_ROOM: usize = 4096;

    /// An empty buffer with high-water mark `hwm` for ids below `max_symbols`.
    pub fn new(hwm: usize, max_symbols: usize) -> Self {
        SubscriberBuffer {
            out: WriteBuf::new(hwm + Self::REPLY_ROOM, hwm),
            pending_bits: vec![0; max_symbols.div_ceil(64)],
            pending: VecDeque::new(),
            max_symbols,
            budget: CommitBudget::new(0, hwm),
            stats: BufferStats::default(),
        }
    }

    /// Paces this subscriber by `--sub-max-lag` (`max_lag_ns`; 0 = never).
    pub fn set_max_lag(&mut self, max_lag_ns: u64) {
        self.budget = CommitBudget::new(max_lag_ns, self.hwm());
    }

    /// Bytes the buffer may hold now: the mark, or less while paced.
    #[inline]
    pub fn limit(&self) -> usize {
        self.budget
            .engine_limit(self.stats.bytes_written, self.buffered())
    }

    /// The high-water mark.
    #[inline]
    pub fn hwm(&self) -> usize {
        self.out.hwm()
    }

    /// Bytes waiting to be written.
    #[inline]
    pub fn buffered(&self) -> usize {
        self.out.pending()
    }

    /// The buffer, for appending command replies (never refused: replies are
    /// bounded by the command that asked for them).
    pub fn replies(&mut self) -> &mut BytesMut {
        self.out.room_for(1024)
    }

    /// Records the current level in `max_buffered` (after replies were appended).
    pub fn note_level(&mut self) {
        let b = self.buffered() as u64;
        if b > self.stats.max_buffered {
            self.stats.max_buffered = b;
        }
    }

    /// Offers a data frame (`prefix` + `tail`) of symbol `id`.
    #[inline]
    pub fn offer(&mut self, id: SymbolId, prefix: &[u8], tail: &[u8], now_ns: u64) -> Offer {
        if self.is_pending(id) {
            self.conflate_pending();
            return Offer::Conflated {
                entered_slow: false,
            };
        }
        self.offer_fresh(id, prefix, tail, now_ns)
    }

    /// A newer value of a symbol already pending replaces the older one in
    /// place (its latest value goes out with the marks): counted.
    #[inline]
    pub fn conflate_pending(&mut self) {
        self.stats.conflations += 1;
    }

    /// [`offer`](Self::offer) for a symbol the caller knows is not pending.
    #[inline]
    pub fn offer_fresh(&mut self, id: SymbolId, prefix: &[u8], tail: &[u8], now_ns: u64) -> Offer {
        debug_assert!(!self.is_pending(id));
        if self.buffered() + prefix.len() + tail.len() > self.limit() {
            let entered_slow = self.pending.is_empty();
            self.mark_pending(id, now_ns);
            self.stats.conflations += 1;
            if entered_slow {
                self.stats.slow_episodes += 1;
            }
            return Offer::Conflated { entered_slow };
        }
        self.append_frame(prefix, tail);
        Offer::Appended
    }

    /// Appends a frame without the mark check (the caller sends a pending
    /// symbol's latest value and checked the room itself). Always inlined:
    /// it is the fan-out's per-subscriber step, and as a call it costs as
    /// much as its two copies (`benches/publish_fanout.rs`).
    #[inline(always)]
    pub fn append_frame(&mut self, prefix: &[u8], tail: &[u8]) {
        let out = self.out.room_for(prefix.len() + tail.len());
        out.extend_from_slice(prefix);
        out.extend_from_slice(tail);
        self.stats.frames += 1;
        self.note_level();
        self.budget
            .note_commit(self.buffered(), self.stats.bytes_written);
    }

    /// Marks `id` pending without appending a frame and without starting a
    /// slow episode: a throttle ([`super::throttle`]) held it back, and the
    /// refill sends its latest value once its window opens.
    pub fn hold(&mut self, id: SymbolId, now_ns: u64) {
        if !self.is_pending(id) {
            self.mark_pending(id, now_ns);
        }
    }

    /// True when `id` waits to be sent as a latest value.
    #[inline]
    pub fn is_pending(&self, id: SymbolId) -> bool {
        let i = id as usize;
        self.pending_bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    fn mark_pending(&mut self, id: SymbolId, now_ns: u64) {
        let i = id as usize;
        if let Some(w) = self.pending_bits.get_mut(i / 64) {
            if self.pending.capacity() == 0 {
                // First slow episode: take the whole bound at once, so a slow
                // subscriber's memory never grows after this.
                self.pending.reserve_exact(self.max_symbols);
            }
            *w |= 1 << (i % 64);
            self.pending.push_back((id, now_ns));
        }
    }

    /// Number of pending symbols.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// When the oldest pending symbol was marked (monotonic ns).
    pub fn oldest_pending_ns(&self) -> Option<u64> {
        self.pending.front().map(|p| p.1)
    }

    /// The oldest pending symbol, left in place.
    pub fn peek_pending(&self) -> Option<SymbolId> {
        self.pending.front().map(|p| p.0)
    }

    /// The pending marks: (id, marked at ns), oldest first.
    pub fn pending_marks(&self) -> &VecDeque<(SymbolId, u64)> {
        &self.pending
    }

    /// Takes the pending symbol at index `i` of [`Self::pending_marks`].
    pub fn take_pending(&mut self, i: usize) -> Option<SymbolId> {
        let (id, _) = self.pending.remove(i)?;
        let i = id as usize;
        self.pending_bits[i / 64] &= !(1 << (i % 64));
        Some(id)
    }

    /// Takes the oldest pending symbol.
    pub fn pop_pending(&mut self) -> Option<SymbolId> {
        let (id, _) = self.pending.pop_front()?;
        let i = id as usize;
        self.pending_bits[i / 64] &= !(1 << (i % 64));
        Some(id)
    }

    /// Writes as much as `w` takes without blocking. Calls `on_write` after
    /// each successful `write`. Returns the bytes written and whether the
    /// writer would block.
    ///
    /// # Errors
    /// A write error other than `WouldBlock`/`Interrupted` (the peer is gone).
    pub fn write_to<W: Write>(
        &mut self,
        w: &mut W,
        on_write: impl FnMut(usize),
    ) -> std::io::Result<(usize, bool)> {
        let (total, flushed) = self.out.write_counted(w, on_write)?;
        self.stats.bytes_written += total as u64;
        Ok((total, flushed == Flushed::Blocked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::ScriptedWriter;

    #[test]
    fn past_the_mark_symbols_go_pending_once() {
        let mut b = SubscriberBuffer::new(30, 8);
        assert_eq!(b.offer(1, b"P", b"0123456789", 0), Offer::Appended);
        assert_eq!(b.offer(2, b"P", b"0123456789", 0), Offer::Appended);
        assert_eq!(
            b.offer(3, b"P", b"0123456789", 5),
            Offer::Conflated { entered_slow: true }
        );
        assert_eq!(
            b.offer(3, b"P", b"0123456789", 6),
            Offer::Conflated {
                entered_slow: false
            }
        );
        assert_eq!(
            b.offer(4, b"P", b"0123456789", 7),
            Offer::Conflated {
                entered_slow: false
            }
        );
        assert_eq!(b.buffered(), 22);
        assert_eq!((b.pending_len(), b.oldest_pending_ns()), (2, Some(5)));
        assert_eq!(b.stats.conflations, 3);
        assert_eq!(b.stats.slow_episodes, 1);
        assert_eq!(b.pop_pending(), Some(3));
        assert_eq!(b.pop_pending(), Some(4));
        assert!(!b.is_pending(3));
        assert_eq!(b.pop_pending(), None);
    }

    #[test]
    fn a_paced_buffer_conflates_past_its_budget_not_its_mark() {
        let ms = 1_000_000;
        let mut b = SubscriberBuffer::new(64 * 1024, 8);
        b.set_max_lag(50 * ms);
        let frame = [b'x'; 500];
        assert_eq!(b.offer(0, b"", &frame, 0), Offer::Appended);
        // A write blocked with 1,000 bytes still in the kernel: paced, the
        // budget is the floor, so about one more frame fits.
        b.budget.start(0, 0, 1000, None);
        assert_eq!(b.limit(), crate::publish::commit_budget::FLOOR - 1000);
        assert_eq!(b.offer(1, b"", &frame, 1), Offer::Appended);
        assert_eq!(
            b.offer(2, b"", &frame, 2),
            Offer::Conflated { entered_slow: true }
        );
        assert!(b.budget.max_excess() == 0);
        assert!(b.buffered() + 1000 <= crate::publish::commit_budget::FLOOR);
    }

    #[test]
    fn a_pending_symbol_is_never_appended_directly() {
        // Once pending, later values must wait for the refill so that an older
        // value can never follow a newer one.
        let mut b = SubscriberBuffer::new(12, 8);
        b.offer(0, b"", b"aaaaaaaaaa", 0);
        assert!(matches!(
            b.offer(1, b"", b"v1v1v1", 0),
            Offer::Conflated { .. }
        ));
        let mut sink = ScriptedWriter::with_room(100);
        b.write_to(&mut sink, |_| {}).unwrap();
        assert_eq!(b.buffered(), 0);
        assert!(matches!(
            b.offer(1, b"", b"v2v2v2", 0),
            Offer::Conflated { .. }
        ));
    }

    #[test]
    fn partial_writes_keep_order_and_reclaim_space() {
        let mut b = SubscriberBuffer::new(64, 8);
        b.offer(0, b"<", b"first>", 0);
        b.offer(1, b"<", b"second>", 0);
        let mut sink = ScriptedWriter::with_room(5);
        let (n, blocked) = b.write_to(&mut sink, |_| {}).unwrap();
        assert_eq!((n, blocked), (5, true));
        sink.room = 100;
        b.offer(2, b"<", b"third>", 0);
        b.write_to(&mut sink, |_| {}).unwrap();
        assert_eq!(sink.got, b"<first><second><third>");
        assert_eq!(b.stats.bytes_written, 22);
        assert_eq!(b.buffered(), 0);
    }

    #[test]
    fn memory_stays_bounded_while_nothing_is_written() {
        let mut b = SubscriberBuffer::new(1000, 100);
        let cap = b.out.capacity();
        for i in 0..100_000u32 {
            b.offer(
                i % 100,
                b"*3\r\n",
                b"0123456789012345678901234567890123456789",
                0,
            );
        }
        assert!(b.buffered() <= 1000);
        assert_eq!(b.out.capacity(), cap, "no growth");
        assert!(b.pending_len() <= 100);
    }

    #[test]
    fn offer_and_partial_write_cycles_keep_the_capacity() {
        let hwm = 2000;
        let mut b = SubscriberBuffer::new(hwm, 64);
        let cap = b.out.capacity();
        assert_eq!(cap, hwm + SubscriberBuffer::REPLY_ROOM);
        let mut sink = ScriptedWriter::with_room(0);
        let mut expected = Vec::new();
        let mut written = 0u64;
        for i in 0..20_000u32 {
            // Four offers per cycle, more than the socket takes on average.
            for k in 0..4 {
                let id = (i * 4 + k) % 64;
                let tail = vec![b'a' + (id % 26) as u8; 30 + (i as usize * 7 + k as usize) % 90];
                if !b.is_pending(id) && b.buffered() + 1 + tail.len() <= hwm {
                    expected.push(b'<');
                    expected.extend_from_slice(&tail);
                }
                b.offer(id, b"<", &tail, 0);
            }
            if i % 5 == 0 {
                // A reply now and then, as commands add them.
                b.replies().extend_from_slice(b"+OK\r\n");
                expected.extend_from_slice(b"+OK\r\n");
            }
            // The socket takes a varying part, sometimes nothing.
            sink.room = (i as usize * 131) % 400;
            let (n, _) = b.write_to(&mut sink, |_| {}).unwrap();
            written += n as u64;
            while let Some(id) = b.pop_pending() {
                // Drop the conflated symbols: this test is about the bytes.
                let _ = id;
            }
            assert_eq!(b.out.capacity(), cap, "cycle {i}");
        }
        sink.room = usize::MAX;
        let (n, blocked) = b.write_to(&mut sink, |_| {}).unwrap();
        written += n as u64;
        assert!(!blocked);
        assert_eq!(sink.got, expected);
        assert_eq!(b.stats.bytes_written, written);
        assert!(b.stats.conflations > 0, "the mark was reached");
    }
}
