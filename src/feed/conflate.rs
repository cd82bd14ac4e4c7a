//! Conflation at the feed: when a read finds the feed thread behind, only
//! the newest line of each symbol in that read is parsed and applied.
//!
//! Why: a sender that outruns the feed thread fills the kernel's socket
//! buffers, a FIFO of megabytes the engine cannot conflate; every tick
//! then waits behind all of them (perf/RESULTS.md, scenario (c)). The
//! slots would overwrite all but the newest value of a symbol anyway, so
//! parsing the older lines of a symbol in the same read is work with no
//! effect on what subscribers get. Skipping it lets the feed drain its
//! socket faster than the sender fills it.
//!
//! This module is the pure decision (no sockets, no slots): a *plan* over
//! the lines of one read says which lines are *superseded*. The feed loop
//! (`ingest.rs`) skips those, counts them, and parses the rest as before.
//!
//! Rules (the contract the feed relies on):
//!
//! * a line takes part only if it could be a tick of a symbol the engine
//!   already knows: not a comment (`#`) or header (`ts_ns,`), and its
//!   second comma-separated field is an interned symbol. Everything else
//!   (new symbols, lines without a symbol field, overlong lines) is handled
//!   line by line, in order, exactly as without a plan;
//! * of the lines that take part, all but the newest of each symbol are
//!   superseded. Lines of one symbol are never reordered; lines of
//!   different symbols never had an order guarantee past the slots;
//! * a superseded line is not parsed. So a *malformed* superseded line is
//!   counted as conflated, not as poison: its content would have been
//!   overwritten by the newer line in any case. (The feed falls back to
//!   the exact path when the newest line itself fails: see
//!   `FeedConflater::needs_fallback`.)
//!
//! Bounded: every table is allocated in [`FeedConflater::new`] (one mark
//! per symbol, one bit per possible line of a read); planning never
//! allocates. Single owner: the feed thread.

use crate::net::LineEvent;
use crate::symbols::SymbolId;

/// The plan's record for one symbol in the read being planned.
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    /// The plan this mark belongs to (`FeedConflater::plan_no`); a mark
    /// of an older plan counts as absent.
    plan: u32,
    /// Ordinal (among the read's [`LineEvent::Line`]s) of the symbol's
    /// newest line.
    last: u32,
    /// How many of the read's lines are this symbol's (≥ 1).
    lines: u32,
    /// The newest line failed to parse: the older ones get the exact path.
    fallback: bool,
}

/// The plan of one read and the tables it is made in.
#[derive(Debug)]
pub struct FeedConflater {
    /// Indexed by symbol id; valid where `plan == plan_no`.
    marks: Vec<Mark>,
    /// Bit `k` set: the read's line `k` is superseded. Only the words the
    /// current plan covered are meaningful (`words_used`).
    superseded: Vec<u64>,
    words_used: usize,
    /// Number of the current plan; 0 = no plan (nothing superseded).
    plan_no: u32,
    /// The last plan number handed out (marks of it may exist).
    plans: u32,
    /// Symbols whose newest line failed to parse in this read.
    fallback: Vec<SymbolId>,
}

/// The symbol field of `line` if the line could be a tick (see the module
/// rules): the bytes between its first and second comma, 1 to
/// [`MAX_SYMBOL_LEN`](super::parse::MAX_SYMBOL_LEN) long.
#[inline]
pub(crate) fn symbol_field(line: &[u8]) -> Option<&[u8]> {
    if line.first() == Some(&b'#') || line.starts_with(b"ts_ns,") {
        return None;
    }
    let first = memchr::memchr(b',', line)?;
    let rest = &line[first + 1..];
    let len = memchr::memchr(b',', rest)?;
    (1..=super::parse::MAX_SYMBOL_LEN)
        .contains(&len)
        .then(|| &rest[..len])
}

impl FeedConflater {
    /// Tables for ids `0..max_symbols` and reads of up to `max_lines` lines
    /// (a reader's capacity in bytes is enough: a line takes a byte at least).
    pub fn new(max_symbols: usize, max_lines: usize) -> Self {
        FeedConflater {
            marks: vec![Mark::default(); max_symbols],
            superseded: vec![0; max_lines.div_ceil(64)],
            words_used: 0,
            plan_no: 0,
            plans: 0,
            fallback: Vec::with_capacity(max_symbols),
        }
    }

    /// No plan: every line is handled on its own (the feed is keeping up).
    pub(crate) fn clear(&mut self) {
        self.plan_no = 0;
        self.words_used = 0;
        self.fallback.clear();
    }

    /// Plans one read: `events` are its events in order (from
    /// [`LineReader::events`](crate::net::LineReader::events)), `id_of`
    /// looks a symbol up without interning. Returns how many lines are
    /// superseded.
    pub fn plan<'a>(
        &mut self,
        events: impl Iterator<Item = LineEvent<'a>>,
        mut id_of: impl FnMut(&[u8]) -> Option<u32>,
    ) -> u64 {
        self.clear();
        self.plan_no = self.next_plan_no();
        let mut superseded = 0u64;
        let mut k = 0usize;
        for ev in events {
            let LineEvent::Line(line) = ev else {
                continue;
            };
            let ord = k;
            k += 1;
            let word = ord / 64;
            if word >= self.superseded.len() {
                debug_assert!(false, "FeedConflater: more lines than planned for");
                break;
            }
            if word == self.words_used {
                self.superseded[word] = 0;
                self.words_used += 1;
            }
            let Some(id) = symbol_field(line).and_then(&mut id_of) else {
                continue;
            };
            let m = &mut self.marks[id as usize];
            if m.plan == self.plan_no {
                let prev = m.last as usize;
                self.superseded[prev / 64] |= 1 << (prev % 64);
                superseded += 1;
                m.last = ord as u32;
                m.lines += 1;
            } else {
                *m = Mark {
                    plan: self.plan_no,
                    last: ord as u32,
                    lines: 1,
                    fallback: false,
                };
            }
        }
        superseded
    }

    /// The next plan number, never 0; on wrap-around every mark is reset
    /// so no mark of an old plan can pass for a new one.
    fn next_plan_no(&mut self) -> u32 {
        let mut n = self.plans.wrapping_add(1);
        if n == 0 {
            self.marks.iter_mut().for_each(|m| *m = Mark::default());
            n = 1;
        }
        self.plans = n;
        n
    }

    /// Is the current read's line `ord` superseded?
    #[inline]
    pub fn is_superseded(&self, ord: usize) -> bool {
        let word = ord / 64;
        self.plan_no != 0
            && word < self.words_used
            && self.superseded[word] & (1 << (ord % 64)) != 0
    }

    /// How many lines of the current read line `ord` of symbol `id` stands
    /// for: itself and the lines it superseded (1 without a plan).
    #[inline]
    pub fn lines_for(&self, id: u32, ord: usize) -> u64 {
        match self.marks.get(id as usize) {
            Some(m) if self.plan_no != 0 && m.plan == self.plan_no && m.last as usize == ord => {
                u64::from(m.lines)
            }
            _ => 1,
        }
    }

    /// Line `ord` of symbol `id` did not parse. If it superseded older
    /// lines of its symbol, those must not be lost: the symbol is put on
    /// the fallback list (its superseded lines are then handled one by
    /// one, see [`is_fallback`](Self::is_fallback)) and `true` returned.
    pub(crate) fn needs_fallback(&mut self, id: SymbolId, ord: usize) -> bool {
        let plan = self.plan_no;
        match self.marks.get_mut(id as usize) {
            Some(m) if plan != 0 && m.plan == plan && m.last as usize == ord && m.lines > 1 => {
                if !m.fallback {
                    m.fallback = true;
                    self.fallback.push(id);
                }
                true
            }
            _ => false,
        }
    }

    /// Did the newest line of `id` fail in this read (so its superseded
    /// lines are to be handled one by one)?
    #[inline]
    pub(crate) fn is_fallback(&self, id: SymbolId) -> bool {
        self.marks
            .get(id as usize)
            .is_some_and(|m| self.plan_no != 0 && m.plan == self.plan_no && m.fallback)
    }

    /// Any symbol needing the fallback in this read?
    #[inline]
    pub(crate) fn has_fallback(&self) -> bool {
        !self.fallback.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::LineReader;

    /// Plans `text` (whole lines) with `known` as the interned symbols
    /// (id = index); returns the conflater and the superseded ordinals.
    fn plan(text: &str, known: &[&str]) -> (FeedConflater, Vec<usize>, u64) {
        let mut c = FeedConflater::new(known.len().max(1), 4096);
        let mut r = LineReader::new(64, 4096);
        r.read_from(&mut text.as_bytes()).unwrap();
        let id_of = |s: &[u8]| {
            known
                .iter()
                .position(|k| k.as_bytes() == s)
                .map(|i| i as u32)
        };
        let n = c.plan(r.events(), id_of);
        let lines = r
            .events()
            .filter(|e| matches!(e, LineEvent::Line(_)))
            .count();
        let sup = (0..lines).filter(|&k| c.is_superseded(k)).collect();
        (c, sup, n)
    }

    #[test]
    fn many_lines_of_one_symbol_keep_the_newest() {
        let text: String = (0..100).map(|i| format!("{i},EURUSD,1,2,0,0\n")).collect();
        let (c, sup, n) = plan(&text, &["EURUSD"]);
        assert_eq!(sup, (0..99).collect::<Vec<_>>());
        assert_eq!(n, 99);
        assert_eq!(c.lines_for(0, 99), 100, "the newest stands for all 100");
        assert_eq!(c.lines_for(0, 98), 1, "not the newest");
    }

    #[test]
    fn interleaved_symbols_each_keep_their_newest() {
        let text = "1,A,1,2,0,0\n2,B,1,2,0,0\n3,A,1,2,0,0\n4,C,1,2,0,0\n5,B,1,2,0,0\n";
        let (c, sup, n) = plan(text, &["A", "B", "C"]);
        assert_eq!((sup, n), (vec![0, 1], 2));
        assert_eq!(
            (c.lines_for(0, 2), c.lines_for(1, 4), c.lines_for(2, 3)),
            (2, 2, 1)
        );
    }

    #[test]
    fn only_lines_of_known_symbols_take_part() {
        // New symbol, comment, header, no symbol field, empty symbol, a
        // symbol too long: handled one by one, never superseded, and they
        // supersede nothing.
        let long = "S".repeat(25);
        let text = format!(
            "1,NEW,1,2,0,0\n2,NEW,1,2,0,0\n#,A,x\nts_ns,A,bid\ngarbage\n3,,1,2,0,0\n4,{long},1\n5,A,1,2,0,0\n"
        );
        let (_, sup, n) = plan(&text, &["A", &long]);
        assert_eq!((sup, n), (vec![], 0));
    }

    #[test]
    fn malformed_lines_of_a_known_symbol_take_part() {
        // The symbol field is all a plan reads: a bad number does not stop
        // a line from being superseded (the module's documented rule).
        let text = "1,A,1,2,0,0\n2,A,bad,2,0,0\n3,A,1,2,0,0\n";
        let (_, sup, _) = plan(text, &["A"]);
        assert_eq!(sup, vec![0, 1]);
    }

    #[test]
    fn overlong_lines_take_no_ordinal() {
        let long = format!("1,A,{}\n", "9".repeat(100));
        let text = format!("1,A,1,2,0,0\n{long}2,A,1,2,0,0\n");
        let (c, sup, _) = plan(&text, &["A"]);
        assert_eq!(sup, vec![0], "ordinal 1 is the line after the overlong one");
        assert_eq!(c.lines_for(0, 1), 2);
    }

    #[test]
    fn no_plan_supersedes_nothing_and_plans_do_not_leak() {
        let text: String = (0..200).map(|i| format!("{i},A,1,2,0,0\n")).collect();
        let (mut c, sup, _) = plan(&text, &["A"]);
        assert_eq!(sup.len(), 199);
        c.clear();
        assert!(!(0..200).any(|k| c.is_superseded(k)));
        assert_eq!(c.lines_for(0, 199), 1);
        // A second, shorter plan: nothing of the first one shows through.
        let mut r = LineReader::new(64, 4096);
        r.read_from(&mut &b"1,A,1,2,0,0\n2,B,1,2,0,0\n"[..])
            .unwrap();
        c.plan(r.events(), |s| (s == b"A").then_some(0));
        assert!(!(0..200).any(|k| c.is_superseded(k)));
        assert_eq!(c.lines_for(0, 0), 1);
    }

    #[test]
    fn fallback_only_for_a_newest_line_that_superseded_others() {
        let text = "1,A,1,2,0,0\n2,A,1,2,0,0\n3,B,1,2,0,0\n";
        let (mut c, _, _) = plan(text, &["A", "B"]);
        assert!(!c.needs_fallback(0, 0), "not the newest");
        assert!(!c.needs_fallback(1, 2), "superseded nothing");
        assert!(!c.has_fallback());
        assert!(c.needs_fallback(0, 1));
        assert!(c.needs_fallback(0, 1), "asked twice, listed once");
        assert_eq!(c.fallback, vec![0]);
        assert!(c.is_fallback(0) && !c.is_fallback(1) && c.has_fallback());
        c.clear();
        assert!(!c.is_fallback(0) && !c.has_fallback());
    }

    #[test]
    fn plan_numbers_wrap_without_reviving_old_marks() {
        let text = "1,A,1,2,0,0\n2,A,1,2,0,0\n";
        let (mut c, _, _) = plan(text, &["A"]);
        // The mark of A is from plan 1; jump to the last number before the
        // wrap, so the next plan is 0 → reset → 1 again.
        c.plans = u32::MAX;
        let mut r = LineReader::new(64, 4096);
        r.read_from(&mut &b"3,B,1,2,0,0\n"[..]).unwrap();
        c.plan(r.events(), |s| (s == b"A").then_some(0));
        assert_eq!(c.plan_no, 1);
        assert_eq!(c.lines_for(0, 1), 1, "A's mark from the old plan 1 is gone");
    }

    #[test]
    fn symbol_field_reads_the_second_field() {
        assert_eq!(symbol_field(b"1,EURUSD,1,2,0,0"), Some(&b"EURUSD"[..]));
        assert_eq!(symbol_field(b"1,EURUSD"), None);
        assert_eq!(symbol_field(b"#1,A,1"), None);
        assert_eq!(symbol_field(b"ts_ns,symbol,bid"), None);
        assert_eq!(symbol_field(b"1,,2"), None);
    }
}
