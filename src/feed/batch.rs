//! The feed thread's per-read work, apart from the sockets: every line of
//! one read batch turned into a slot write, a dead letter, or (when the
//! read found the feed behind) a line conflated at the feed.
//!
//! Owned by the feed thread (`ingest.rs` drives it; a line reader is
//! borrowed while a batch runs). Per tick: one parse, one hash lookup, one
//! slot write; the clock is read twice per batch, not per tick; nothing is
//! allocated in steady state.
//!
//! Accounting: every tick line is exactly one of applied (`ticks_valid`),
//! poison (by reason), or conflated at the feed (`ticks_conflated`, see
//! [`super::conflate`]); the symbol's update sequence number advances by
//! one for each applied or conflated line, so a subscriber's sequence
//! gaps show feed conflation as they show slot conflation.

use std::sync::Arc;

use mio::Waker;

use crate::dlq::{DeadLetter, DlqSender};
use crate::feed::conflate::{symbol_field, FeedConflater};
use crate::feed::parse::{parse_line, Line};
use crate::metrics::counters::{bump, set, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::model::poison::PoisonReason;
use crate::model::tick::SlotValue;
use crate::net::{LineEvent, LineReader, LoopCtx};
use crate::slots::SlotWriter;
use crate::symbols::SymbolInterner;
use crate::sys::clock::{wall_ns, MonoClock};

/// The per-line work, apart from the sockets (so a line reader can be
/// borrowed while it runs).
#[derive(Debug)]
pub(super) struct Ingest {
    interner: SymbolInterner,
    pub(super) slots: SlotWriter,
    /// Valid ticks per symbol id so far: the update sequence number.
    seqs: Vec<u64>,
    pub(super) counters: Arc<Counters>,
    dlq: DlqSender,
    clock: MonoClock,
    /// Woken once per read batch that queued an update (none when the
    /// feed runs as the publisher's guest, `net::GuestLoop`).
    pub(super) publisher: Option<Arc<Waker>>,
    /// Per symbol: 1 + the key of the connection that wrote it last (0 = none).
    writer_of: Vec<u32>,
    stale: Option<Arc<crate::stale::StaleLink>>,
    /// Plans the reads that find the feed behind (one plan at a time:
    /// batches are handled one after the other).
    conflater: FeedConflater,
}

/// What one read batch did.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Batch {
    /// Ticks applied to their slot.
    pub(super) ticks: u64,
    /// Lines superseded by a newer line of their symbol (not parsed).
    pub(super) superseded: u64,
    /// A slot write queued its symbol for the publisher.
    pub(super) queued: bool,
}

/// Where and when a read batch's lines arrived.
#[derive(Debug, Clone, Copy)]
struct Arrival<'a> {
    key: usize,
    peer: &'a str,
    recv_wall: u64,
    recv_mono: u64,
}

impl Ingest {
    /// The per-read state for up to `slots.capacity()` symbols and reads
    /// of up to `max_lines` lines (the line reader's capacity in bytes);
    /// counters and clock are the feed loop's (`ctx`).
    pub(super) fn new(
        ctx: &LoopCtx,
        interner: SymbolInterner,
        slots: SlotWriter,
        dlq: DlqSender,
        publisher: Arc<Waker>,
        stale: Option<Arc<crate::stale::StaleLink>>,
        max_lines: usize,
    ) -> Self {
        let max_symbols = slots.capacity();
        Ingest {
            interner,
            slots,
            seqs: vec![0; max_symbols],
            counters: Arc::clone(&ctx.counters),
            dlq,
            clock: ctx.clock,
            publisher: Some(publisher),
            writer_of: vec![0; max_symbols],
            stale,
            conflater: FeedConflater::new(max_symbols, max_lines),
        }
    }
}

impl Ingest {
    /// Connection `key` closed: the symbols it wrote last lose their
    /// source (flagged stale when `--stale-after` is on).
    pub(super) fn orphan(&mut self, key: usize) {
        let Some(link) = &self.stale else {
            return;
        };
        let now = self.clock.now_ns();
        let tag = key as u32 + 1;
        for (id, w) in self.writer_of.iter_mut().enumerate() {
            if *w == tag {
                *w = 0;
                link.source_closed(id as crate::symbols::SymbolId, now);
            }
        }
    }

    /// Processes every complete line buffered in `reader`. With `behind`
    /// (the read filled its whole chunk: more is waiting in the socket),
    /// the lines are first planned so that only the newest line per known
    /// symbol is parsed (see [`super::conflate`]).
    pub(super) fn batch(
        &mut self,
        key: usize,
        reader: &mut LineReader,
        behind: bool,
        peer: &str,
        recorder: &mut StageRecorder,
    ) -> Batch {
        let recv_wall = wall_ns();
        let t0 = self.clock.now_ns();
        let mut b = Batch::default();
        if behind {
            let interner = &self.interner;
            self.conflater.plan(reader.events(), |s| interner.get(s));
        } else {
            self.conflater.clear();
        }
        let at = Arrival {
            key,
            peer,
            recv_wall,
            recv_mono: t0,
        };
        let mut walk = reader.events();
        let mut ord = 0usize;
        for ev in walk.by_ref() {
            match ev {
                LineEvent::Line(line) => {
                    let k = ord;
                    ord += 1;
                    if self.conflater.is_superseded(k) {
                        b.superseded += 1;
                    } else {
                        self.line(&at, line, Some(k), &mut b);
                    }
                }
                LineEvent::TooLong { prefix, len_so_far } => {
                    self.poison(peer, PoisonReason::LineTooLong, prefix, len_so_far)
                }
            }
        }
        if self.conflater.has_fallback() {
            self.fallback(&at, reader, &mut b);
        }
        reader.seek(walk.position());
        let f = &self.counters.feed;
        if b.superseded > 0 {
            bump(&f.ticks_conflated, b.superseded);
        }
        if b.ticks > 0 {
            bump(&f.ticks_valid, b.ticks);
            set(&f.symbols, self.interner.table().len() as u64);
            // Per line taken off the socket, superseded ones included: the
            // figure stays comparable with and without a plan.
            recorder.record_span_n(
                Stage::FeedParse,
                t0,
                self.clock.now_ns(),
                b.ticks + b.superseded,
            );
        }
        b
    }

    /// One line handled on its own: parsed, then applied or poisoned.
    /// `ord` is its ordinal in a planned read (`None` in the fallback pass,
    /// where every line stands for itself).
    #[inline]
    fn line(&mut self, at: &Arrival<'_>, line: &[u8], ord: Option<usize>, b: &mut Batch) {
        match parse_line(line) {
            Ok(Line::Tick { symbol, quote }) => match self.interner.intern(symbol) {
                Ok(id) => {
                    let n = ord.map_or(1, |k| self.conflater.lines_for(id, k));
                    let seq = &mut self.seqs[id as usize];
                    *seq += n;
                    let value = SlotValue {
                        quote,
                        seq: *seq,
                        recv_wall_ns: at.recv_wall,
                        recv_mono_ns: at.recv_mono,
                    };
                    b.queued |= self.slots.write(id, &value);
                    self.writer_of[id as usize] = at.key as u32 + 1;
                    b.ticks += 1;
                    if quote.bid.cmp_value(&quote.ask) != std::cmp::Ordering::Less {
                        bump(&self.counters.feed.crossed_quotes, 1);
                    }
                }
                Err(_) => {
                    let len = line.len();
                    self.poison(at.peer, PoisonReason::SymbolLimit, line, len)
                }
            },
            Ok(Line::Skip) => bump(&self.counters.feed.lines_skipped, 1),
            Err(reason) => {
                if let Some(k) = ord {
                    self.newest_failed(line, k);
                }
                let len = line.len();
                self.poison(at.peer, reason, line, len)
            }
        }
    }

    /// The newest line of a symbol in a planned read did not parse: if it
    /// superseded older lines, mark the symbol for the fallback pass.
    #[cold]
    fn newest_failed(&mut self, line: &[u8], ord: usize) {
        if let Some(id) = symbol_field(line).and_then(|s| self.interner.get(s)) {
            self.conflater.needs_fallback(id, ord);
        }
    }

    /// The fallback pass: the superseded lines of symbols whose newest line
    /// failed are handled one by one, oldest first, as without a plan, so
    /// the slot holds the newest *valid* tick and each bad line is poison.
    #[cold]
    fn fallback(&mut self, at: &Arrival<'_>, reader: &LineReader, b: &mut Batch) {
        let mut ord = 0usize;
        for ev in reader.events() {
            let LineEvent::Line(line) = ev else {
                continue;
            };
            let k = ord;
            ord += 1;
            if !self.conflater.is_superseded(k) {
                continue;
            }
            let again = symbol_field(line)
                .and_then(|s| self.interner.get(s))
                .is_some_and(|id| self.conflater.is_fallback(id));
            if again {
                b.superseded -= 1;
                self.line(at, line, None, b);
            }
        }
    }

    /// Counts a poison line and hands it to the DLQ (never blocks).
    #[cold]
    pub(super) fn poison(&mut self, peer: &str, reason: PoisonReason, raw: &[u8], raw_len: usize) {
        let f = &self.counters.feed;
        bump(&f.poison[reason.index()], 1);
        let rec = DeadLetter::refused("feed", peer, reason.as_str(), raw, raw_len, wall_ns());
        if self.dlq.try_send(rec).is_err() {
            bump(&f.dlq_handoff_dropped, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::{Dlq, DlqConfig};
    use crate::metrics::recorder::RecorderLink;
    use crate::slots::{slots, SlotReader};
    use crate::symbols::SymbolId;

    /// An `Ingest` over real slots, counters and DLQ, fed from byte slices.
    struct Rig {
        ingest: Ingest,
        reader: LineReader,
        slots: SlotReader,
        recorder: StageRecorder,
        _dlq: Dlq,
        _poll: mio::Poll,
    }

    impl Rig {
        fn new() -> Rig {
            let counters = Arc::new(Counters::default());
            let cfg = DlqConfig {
                capacity: 64,
                file: None,
                max_bytes: 1 << 20,
                handoff_capacity: 4096,
            };
            let (dlq, dlq_tx) = Dlq::start(&cfg, Arc::clone(&counters), &Arc::default()).unwrap();
            let poll = mio::Poll::new().unwrap();
            let waker = Arc::new(Waker::new(poll.registry(), mio::Token(0)).unwrap());
            let (interner, _table) = SymbolInterner::new(16);
            let (writer, reader) = slots(16);
            let (link, _rx, _pool) = RecorderLink::new(1_000_000_000, 16);
            let reader_cap = 64 + 64 * 1024;
            let mut ingest = Ingest {
                interner,
                slots: writer,
                seqs: vec![0; 16],
                counters,
                dlq: dlq_tx,
                clock: MonoClock::new(),
                publisher: Some(waker),
                writer_of: vec![0; 16],
                stale: None,
                conflater: FeedConflater::new(16, reader_cap),
            };
            ingest.interner.intern(b"A").unwrap();
            ingest.interner.intern(b"B").unwrap();
            Rig {
                ingest,
                reader: LineReader::new(64, 64 * 1024),
                slots: reader,
                recorder: StageRecorder::new(&[Stage::FeedParse], link),
                _dlq: dlq,
                _poll: poll,
            }
        }

        /// One read of `text`, handled as a batch (`behind`: planned).
        fn read(&mut self, text: &str, behind: bool) -> Batch {
            self.reader.read_from(&mut text.as_bytes()).unwrap();
            self.ingest
                .batch(0, &mut self.reader, behind, "test", &mut self.recorder)
        }

        /// (ts_ns, seq) of symbol `id`'s slot.
        fn slot(&self, id: SymbolId) -> (u64, u64) {
            let v = self.slots.read(id);
            (v.quote.ts_ns, v.seq)
        }

        fn counts(&self) -> (u64, u64, u64) {
            let s = self.ingest.counters.snapshot();
            (s.feed.ticks_valid, s.feed.ticks_conflated, s.poison_total)
        }
    }

    fn lines(sym: &str, ts: std::ops::Range<u64>) -> String {
        ts.map(|t| format!("{t},{sym},1.1,1.2,5,5\n")).collect()
    }

    #[test]
    fn a_read_behind_applies_the_newest_and_counts_the_rest_as_conflated() {
        let mut r = Rig::new();
        let text = lines("A", 1..101) + &lines("B", 1..3);
        let b = r.read(&text, true);
        assert_eq!((b.ticks, b.superseded), (2, 100));
        assert_eq!(r.counts(), (2, 100, 0));
        assert_eq!(r.ingest.counters.snapshot().ticks_received, 102);
        assert_eq!(r.slot(0), (100, 100), "newest value, seq counts all 100");
        assert_eq!(r.slot(1), (2, 2));
        // The same read, not behind: every line applied, nothing conflated.
        let b = r.read(&lines("A", 101..111), false);
        assert_eq!((b.ticks, b.superseded), (10, 0));
        assert_eq!(r.slot(0), (110, 110));
        assert_eq!(r.counts(), (12, 100, 0));
    }

    #[test]
    fn a_malformed_line_in_the_middle_is_still_counted() {
        let mut r = Rig::new();
        // No symbol field to read: poison, whatever the plan.
        let text = lines("A", 1..50) + "garbage\n" + &lines("A", 50..100);
        r.read(&text, true);
        assert_eq!(r.counts(), (1, 98, 1));
        assert_eq!(r.ingest.counters.poison(PoisonReason::WrongFieldCount), 1);
        assert_eq!(r.slot(0), (99, 99));
        // A bad number under a known symbol, superseded: conflated, as
        // documented (its value would have been overwritten anyway).
        let text = lines("A", 100..110) + "110,A,-1,1.2,5,5\n" + &lines("A", 111..120);
        r.read(&text, true);
        assert_eq!(r.counts(), (2, 98 + 19, 1));
        assert_eq!(r.slot(0), (119, 119));
        // Not behind: the same bad line is poison.
        r.read(&text, false);
        assert_eq!(r.ingest.counters.poison(PoisonReason::NonPositivePrice), 1);
    }

    #[test]
    fn a_failing_newest_line_falls_back_to_the_newest_valid_one() {
        let mut r = Rig::new();
        let text = lines("A", 1..5) + "5,A,1.1,x,5,5\n" + "6,A,bad\n" + &lines("B", 1..4);
        let b = r.read(&text, true);
        // A: the newest line fails → its older lines are handled one by
        // one: 4 applied (seq exact), the bad one before it poison too.
        assert_eq!(r.slot(0), (4, 4));
        assert_eq!(r.slot(1), (3, 3), "B conflated as usual");
        assert_eq!((b.ticks, b.superseded), (5, 2));
        assert_eq!(r.counts(), (5, 2, 2));
        assert_eq!(r.ingest.counters.snapshot().ticks_received, 9);
    }

    #[test]
    fn new_symbols_are_taken_line_by_line() {
        let mut r = Rig::new();
        let b = r.read(&(lines("NEW", 1..4) + &lines("A", 1..4)), true);
        assert_eq!((b.ticks, b.superseded), (4, 2));
        let id = r.ingest.interner.get(b"NEW").unwrap();
        assert_eq!(r.slot(id), (3, 3));
        assert_eq!(r.slot(0), (3, 3));
    }

    #[test]
    fn overlong_lines_and_skipped_lines_count_as_before() {
        let mut r = Rig::new();
        let long = format!("9,A,{}\n", "1".repeat(100));
        let text = lines("A", 1..3) + &long + "# note\nts_ns,symbol\n" + &lines("A", 3..5);
        r.read(&text, true);
        assert_eq!(r.counts(), (1, 3, 1));
        assert_eq!(r.ingest.counters.poison(PoisonReason::LineTooLong), 1);
        assert_eq!(r.ingest.counters.snapshot().feed.lines_skipped, 2);
        assert_eq!(r.slot(0), (4, 4));
        assert_eq!(r.reader.buffered(), 0, "the batch consumed the read");
    }
}
