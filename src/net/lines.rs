//! Splitting one TCP connection's byte stream into bounded lines: the line
//! framing of the feed and the order gateway, written once below both.
//!
//! This module owns the per-connection receive buffer of a line protocol and
//! the rule that a line has a maximum length. A connection is untrusted: a
//! peer that never sends a newline must not make the engine buffer without
//! bound, and one overlong line must not poison the lines after it. So:
//!
//! * the buffer (a [`BytesMut`] of fixed length) is allocated once, in
//!   [`LineReader::new`], and never grows;
//!   nothing is allocated per read or per line;
//! * a line longer than the limit is reported once, as soon as the limit is
//!   exceeded ([`LineEvent::TooLong`]), then skipped up to its newline, and
//!   the reader resynchronises on the line after it;
//! * the events depend only on the bytes of the stream, never on how the
//!   stream was cut into reads (property-tested).
//!
//! Typical use in a non-blocking event loop:
//!
//! ```
//! use tickfan::net::lines::{LineEvent, LineReader};
//!
//! let mut reader = LineReader::new(256, 64 * 1024);
//! let mut socket: &[u8] = b"1,EURUSD,1.1,1.2,1,1\r\nts_ns,partial";
//! loop {
//!     match reader.read_from(&mut socket) {
//!         Ok(0) => break, // EOF
//!         Ok(_) => {}
//!         Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break, // wait for readiness
//!         Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
//!         Err(e) => panic!("{e}"),
//!     }
//!     while let Some(event) = reader.next_line() {
//!         match event {
//!             LineEvent::Line(line) => assert_eq!(line, b"1,EURUSD,1.1,1.2,1,1\r"),
//!             LineEvent::TooLong { .. } => unreachable!(),
//!         }
//!     }
//! }
//! assert_eq!(reader.take_partial(), Some(&b"ts_ns,partial"[..]));
//! ```

use std::io;

use bytes::BytesMut;

/// Default longest accepted line, in bytes, excluding the `'\n'`.
pub(crate) const DEFAULT_MAX_LINE_LEN: usize = 256;

/// Default number of bytes asked for in one `read()`.
pub(crate) const DEFAULT_READ_CHUNK: usize = 64 * 1024;

/// One thing the reader found in the buffered bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEvent<'a> {
    /// A complete line, without its `'\n'`. A `'\r'` before the newline is
    /// kept (the parser strips it). At most `max_line_len` bytes.
    Line(&'a [u8]),
    /// A line longer than `max_line_len`. Emitted once per overlong line, as
    /// soon as its `max_line_len + 1`-th byte is seen without a newline
    /// before it. The reader then discards the rest of that line up to and
    /// including its `'\n'` and carries on with the next line.
    TooLong {
        /// The first `max_line_len` bytes of the line (for the dead-letter
        /// record).
        prefix: &'a [u8],
        /// How many bytes of the line had been seen when it was found too
        /// long: always `max_line_len + 1`, the line is at least this long.
        /// (Its full length is not known until its newline, which may never
        /// come, and reporting however many bytes happened to be buffered
        /// would make the events depend on how the stream was cut into
        /// reads.)
        len_so_far: usize,
    },
}

/// A fixed-size, reusable line splitter for one connection.
///
/// Call [`read_from`](Self::read_from) when the socket is readable, then
/// [`next_line`](Self::next_line) until it returns `None`, and repeat. At EOF
/// call [`take_partial`](Self::take_partial) for an unterminated last line.
///
/// Invariants:
///
/// * the buffer holds exactly [`capacity`](Self::capacity) =
///   `max_line_len + read_chunk` bytes, allocated in [`new`](Self::new), and
///   never grows;
/// * `start <= scanned <= end <= capacity`; `buf[start..end]` are the bytes
///   not handed out yet, and `buf[start..scanned]` holds no `'\n'`;
/// * once `next_line` has returned `None`, at most `max_line_len` bytes are
///   kept (a partial line that may still end in time), so the next read
///   always has room for a full `read_chunk`;
/// * while `discarding`, the bytes up to the next `'\n'` belong to a line
///   already reported as [`LineEvent::TooLong`] and are dropped.
#[derive(Debug)]
pub struct LineReader {
    /// Fixed length `capacity`, used as a plain slice (never resized).
    buf: BytesMut,
    max_line_len: usize,
    read_chunk: usize,
    start: usize,
    scanned: usize,
    end: usize,
    discarding: bool,
}

impl Default for LineReader {
    /// [`DEFAULT_MAX_LINE_LEN`] and [`DEFAULT_READ_CHUNK`].
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE_LEN, DEFAULT_READ_CHUNK)
    }
}

impl LineReader {
    /// Allocates the reader's buffer once: `max_line_len + read_chunk` bytes.
    ///
    /// `max_line_len` is the longest accepted line excluding the `'\n'` (a
    /// `'\r'` before it counts; default [`DEFAULT_MAX_LINE_LEN`]);
    /// `read_chunk` is how many bytes one [`read_from`](Self::read_from) asks
    /// for (e.g. 64 KiB).
    ///
    /// # Panics
    ///
    /// If `read_chunk` is zero (a read of zero bytes cannot be told from EOF)
    /// or the sum overflows `usize`.
    pub fn new(max_line_len: usize, read_chunk: usize) -> Self {
        assert!(read_chunk > 0, "LineReader: read_chunk must be at least 1");
        let capacity = max_line_len
            .checked_add(read_chunk)
            .expect("LineReader: max_line_len + read_chunk overflows usize");
        LineReader {
            buf: BytesMut::zeroed(capacity),
            max_line_len,
            read_chunk,
            start: 0,
            scanned: 0,
            end: 0,
            discarding: false,
        }
    }

    /// Does one `read()` of at most `read_chunk` bytes into the free space,
    /// first moving the kept partial line to the front of the buffer if the
    /// free space at the end is smaller than `read_chunk`.
    ///
    /// Returns the number of bytes read; `Ok(0)` means EOF. Call
    /// [`next_line`](Self::next_line) until it returns `None` before reading
    /// again.
    ///
    /// # Errors
    ///
    /// * any error of `r.read()`, passed through untouched (`WouldBlock` and
    ///   `Interrupted` included); the buffered bytes are unchanged;
    /// * [`io::ErrorKind::OutOfMemory`] if the buffer has no free space at
    ///   all, which happens only when the caller did not drain
    ///   [`next_line`](Self::next_line) (so a full buffer is never mistaken
    ///   for EOF);
    /// * [`io::ErrorKind::InvalidData`] if `r` claims to have read more bytes
    ///   than it was given room for (a broken `Read` implementation).
    pub fn read_from<R: io::Read>(&mut self, r: &mut R) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.scanned = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < self.read_chunk && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.scanned -= self.start;
            self.end -= self.start;
            self.start = 0;
        }
        let room = (self.buf.len() - self.end).min(self.read_chunk);
        if room == 0 {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "LineReader is full: drain next_line() before reading again",
            ));
        }
        let n = r.read(&mut self.buf[self.end..self.end + room])?;
        if n > room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "Read::read returned more bytes than the buffer it was given",
            ));
        }
        self.end += n;
        Ok(n)
    }

    /// The next complete event from the buffered bytes, or `None` when more
    /// bytes are needed.
    ///
    /// Lines of at most `max_line_len` bytes come out as [`LineEvent::Line`];
    /// longer ones as one [`LineEvent::TooLong`] each (see there). Never
    /// allocates.
    pub fn next_line(&mut self) -> Option<LineEvent<'_>> {
        let mut c = self.cursor();
        let ev = c.step(&self.buf, self.max_line_len);
        self.start = c.start;
        self.scanned = c.scanned;
        self.end = c.end;
        self.discarding = c.discarding;
        ev
    }

    /// The events [`next_line`](Self::next_line) would return now, without
    /// consuming them: a look ahead over the buffered bytes (e.g. to find the
    /// newest line per key before handling any). Same code as `next_line`,
    /// so the two sequences are identical by construction. Never allocates.
    ///
    /// To consume what a walk covered in one step, pass its
    /// [`position`](LineEvents::position) to [`seek`](Self::seek).
    pub fn events(&self) -> LineEvents<'_> {
        LineEvents {
            buf: &self.buf,
            max_line_len: self.max_line_len,
            cur: self.cursor(),
        }
    }

    /// Consumes everything up to `pos`, as if [`next_line`](Self::next_line)
    /// had been called until it reached it.
    ///
    /// `pos` must come from [`events`](Self::events) of this reader with no
    /// [`read_from`](Self::read_from), `next_line`, `seek` or `clear` in
    /// between (checked in debug builds: the buffered bytes must match).
    pub fn seek(&mut self, pos: LinePosition) {
        let c = pos.0;
        debug_assert!(
            c.end == self.end && c.start >= self.start,
            "LineReader::seek: a position from another state of this reader"
        );
        self.start = c.start;
        self.scanned = c.scanned;
        self.end = c.end;
        self.discarding = c.discarding;
    }

    fn cursor(&self) -> Cursor {
        Cursor {
            start: self.start,
            scanned: self.scanned,
            end: self.end,
            discarding: self.discarding,
        }
    }

    /// After EOF: the leftover partial line (bytes after the last `'\n'`), if
    /// any, and resets the reader so it can serve a new connection.
    ///
    /// Returns `None` when nothing is left, or when the leftover is the tail
    /// of a line already reported as [`LineEvent::TooLong`]. The partial
    /// line is at most `max_line_len` bytes once [`next_line`](Self::next_line)
    /// has been drained (call that first: otherwise complete lines still
    /// buffered come out here too).
    pub fn take_partial(&mut self) -> Option<&[u8]> {
        let (start, end, discarding) = (self.start, self.end, self.discarding);
        self.clear();
        if discarding || start == end {
            None
        } else {
            Some(&self.buf[start..end])
        }
    }

    /// Forgets all buffered bytes and any overlong line in progress, keeping
    /// the allocation (for reuse on a new connection).
    pub fn clear(&mut self) {
        self.start = 0;
        self.scanned = 0;
        self.end = 0;
        self.discarding = false;
    }

    /// Size of the buffer in bytes: `max_line_len + read_chunk`, fixed.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Longest accepted line in bytes, excluding the `'\n'`.
    pub fn max_line_len(&self) -> usize {
        self.max_line_len
    }

    /// Bytes asked for by one [`read_from`](Self::read_from).
    pub fn read_chunk(&self) -> usize {
        self.read_chunk
    }

    /// Bytes buffered and not yet handed out (a partial line once
    /// [`next_line`](Self::next_line) has been drained).
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }
}

/// A place in a [`LineReader`]'s buffer, from
/// [`LineEvents::position`], for [`LineReader::seek`].
#[derive(Debug, Clone, Copy)]
pub struct LinePosition(Cursor);

/// The reader's scanning state; the [`LineReader`] invariants hold for it.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    start: usize,
    scanned: usize,
    end: usize,
    discarding: bool,
}

impl Cursor {
    /// One step of [`LineReader::next_line`] over `buf`.
    fn step<'a>(&mut self, buf: &'a [u8], max_line_len: usize) -> Option<LineEvent<'a>> {
        loop {
            let found = memchr::memchr(b'\n', &buf[self.scanned..self.end]);
            let Some(offset) = found else {
                return self.no_newline(buf, max_line_len);
            };
            let newline = self.scanned + offset;
            let line_start = self.start;
            self.start = newline + 1;
            self.scanned = self.start;
            if self.discarding {
                // The tail of a line already reported as too long.
                self.discarding = false;
                continue;
            }
            let line = &buf[line_start..newline];
            return Some(if line.len() > max_line_len {
                too_long(buf, line_start, max_line_len)
            } else {
                LineEvent::Line(line)
            });
        }
    }

    /// No `'\n'` in the buffered bytes: drop them if discarding, report the
    /// line if it already exceeds the limit, otherwise wait for more.
    fn no_newline<'a>(&mut self, buf: &'a [u8], max_line_len: usize) -> Option<LineEvent<'a>> {
        let line_start = self.start;
        self.scanned = self.end;
        if self.discarding {
            self.start = self.end;
            return None;
        }
        if self.end - line_start > max_line_len {
            self.start = self.end;
            self.discarding = true;
            return Some(too_long(buf, line_start, max_line_len));
        }
        None
    }
}

fn too_long(buf: &[u8], line_start: usize, max_line_len: usize) -> LineEvent<'_> {
    LineEvent::TooLong {
        prefix: &buf[line_start..line_start + max_line_len],
        len_so_far: max_line_len + 1,
    }
}

/// A look ahead over a [`LineReader`]'s buffered events
/// ([`LineReader::events`]); a clone walks again from where it was taken.
#[derive(Debug, Clone)]
pub struct LineEvents<'a> {
    buf: &'a [u8],
    max_line_len: usize,
    cur: Cursor,
}

impl LineEvents<'_> {
    /// Where this walk stands: after the last event it returned.
    pub fn position(&self) -> LinePosition {
        LinePosition(self.cur)
    }
}

impl<'a> Iterator for LineEvents<'a> {
    type Item = LineEvent<'a>;

    fn next(&mut self) -> Option<LineEvent<'a>> {
        self.cur.step(self.buf, self.max_line_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{ErrorKind, Read};

    /// An owned event, for comparing sequences.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) enum Ev {
        Line(Vec<u8>),
        TooLong(Vec<u8>, usize),
    }

    pub(super) fn own(ev: LineEvent<'_>) -> Ev {
        match ev {
            LineEvent::Line(l) => Ev::Line(l.to_vec()),
            LineEvent::TooLong { prefix, len_so_far } => Ev::TooLong(prefix.to_vec(), len_so_far),
        }
    }

    /// A `Read` that hands out `data` in pieces of the given sizes (cycled);
    /// a size of 0 stands for a `WouldBlock` (or, one time in three, an
    /// `Interrupted`), followed by a 1-byte read.
    pub(super) struct Chunked<'a> {
        pub data: &'a [u8],
        pub sizes: Vec<usize>,
        pub i: usize,
        pub failed: bool,
    }

    impl Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let size = self.sizes[self.i % self.sizes.len()];
            self.i += 1;
            // Never two errors in a row, so the stream always makes progress.
            let just_failed = std::mem::take(&mut self.failed);
            if size == 0 && !self.data.is_empty() && !just_failed {
                self.failed = true;
                let kind = if self.i.is_multiple_of(3) {
                    ErrorKind::Interrupted
                } else {
                    ErrorKind::WouldBlock
                };
                return Err(kind.into());
            }
            let n = size.max(1).min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// Runs a reader over a source to EOF the way the event loop does.
    pub(super) fn drive(
        reader: &mut LineReader,
        src: &mut impl Read,
    ) -> (Vec<Ev>, Option<Vec<u8>>) {
        let mut events = Vec::new();
        loop {
            match reader.read_from(src) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(e) => panic!("unexpected error {e}"),
            }
            while let Some(ev) = reader.next_line() {
                events.push(own(ev));
            }
            assert!(reader.buffered() <= reader.max_line_len());
        }
        let partial = reader.take_partial().map(<[u8]>::to_vec);
        (events, partial)
    }

    /// What the events must be, computed from the whole stream at once.
    pub(super) fn model(data: &[u8], max: usize) -> (Vec<Ev>, Option<Vec<u8>>) {
        let mut events = Vec::new();
        let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        let last = pieces.pop().expect("split yields at least one piece");
        let judge = |p: &[u8]| {
            if p.len() > max {
                Ev::TooLong(p[..max].to_vec(), max + 1)
            } else {
                Ev::Line(p.to_vec())
            }
        };
        events.extend(pieces.into_iter().map(judge));
        let partial = if last.len() > max {
            events.push(judge(last));
            None
        } else if last.is_empty() {
            None
        } else {
            Some(last.to_vec())
        };
        (events, partial)
    }

    fn lines(v: &[&[u8]]) -> Vec<Ev> {
        v.iter().map(|l| Ev::Line(l.to_vec())).collect()
    }

    fn run(data: &[u8], max: usize, chunk: usize, sizes: Vec<usize>) -> (Vec<Ev>, Option<Vec<u8>>) {
        let mut r = LineReader::new(max, chunk);
        let cap = r.capacity();
        let out = drive(
            &mut r,
            &mut Chunked {
                data,
                sizes,
                i: 0,
                failed: false,
            },
        );
        assert_eq!(r.capacity(), cap);
        out
    }

    #[test]
    fn splits_lines_and_keeps_cr() {
        let data = b"a,b\r\n\nccc\nlast";
        let (ev, partial) = run(data, 8, 64, vec![64]);
        assert_eq!(ev, lines(&[b"a,b\r", b"", b"ccc"]));
        assert_eq!(partial.as_deref(), Some(&b"last"[..]));
        assert_eq!(run(data, 8, 3, vec![1, 2, 0, 5]), (ev, partial));
    }

    #[test]
    fn max_line_len_is_inclusive() {
        let data = b"12345678\n123456789\nok\n";
        let want = vec![
            Ev::Line(b"12345678".to_vec()),
            Ev::TooLong(b"12345678".to_vec(), 9),
            Ev::Line(b"ok".to_vec()),
        ];
        for chunk in [1, 2, 7, 8, 9, 10, 64] {
            assert_eq!(
                run(data, 8, chunk, vec![chunk]),
                (want.clone(), None),
                "chunk {chunk}"
            );
        }
        // A '\r' counts toward the limit.
        let (ev, _) = run(b"12345678\r\n", 8, 64, vec![64]);
        assert_eq!(ev, vec![Ev::TooLong(b"12345678".to_vec(), 9)]);
    }

    #[test]
    fn too_long_is_reported_before_its_newline_arrives() {
        let mut r = LineReader::new(4, 16);
        let mut src: &[u8] = b"abcdefgh";
        assert_eq!(r.read_from(&mut src).unwrap(), 8);
        assert_eq!(
            r.next_line().map(own),
            Some(Ev::TooLong(b"abcd".to_vec(), 5))
        );
        assert_eq!(r.next_line(), None);
        assert_eq!(r.buffered(), 0);
        let mut src: &[u8] = b"ijkl\nnext\n";
        r.read_from(&mut src).unwrap();
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"next")));
        assert_eq!(r.next_line(), None);
        assert_eq!(r.take_partial(), None);
    }

    #[test]
    fn ten_megabyte_line_gives_one_too_long_and_no_growth() {
        let mut data = vec![b'x'; 10 * 1024 * 1024];
        data.extend_from_slice(b"\n1,EURUSD,1.1,1.2,1,1\r\n");
        data.extend(std::iter::repeat_n(b'y', 1024 * 1024)); // unterminated at EOF
        let mut r = LineReader::default();
        let cap = r.capacity();
        assert_eq!(cap, DEFAULT_MAX_LINE_LEN + DEFAULT_READ_CHUNK);
        let buf_ptr = r.buf.as_ptr();
        let (ev, partial) = drive(&mut r, &mut &data[..]);
        assert_eq!(
            ev,
            vec![
                Ev::TooLong(vec![b'x'; DEFAULT_MAX_LINE_LEN], DEFAULT_MAX_LINE_LEN + 1),
                Ev::Line(b"1,EURUSD,1.1,1.2,1,1\r".to_vec()),
                Ev::TooLong(vec![b'y'; DEFAULT_MAX_LINE_LEN], DEFAULT_MAX_LINE_LEN + 1),
            ]
        );
        assert_eq!(partial, None);
        assert_eq!(r.capacity(), cap);
        assert_eq!(r.buf.as_ptr(), buf_ptr);
    }

    #[test]
    fn partial_line_at_eof_and_reuse() {
        let mut r = LineReader::new(16, 4);
        let (ev, partial) = drive(&mut r, &mut &b"one\ntwo"[..]);
        assert_eq!(ev, lines(&[b"one"]));
        assert_eq!(partial.as_deref(), Some(&b"two"[..]));
        assert_eq!(r.take_partial(), None);
        // Reused for another connection.
        let (ev, partial) = drive(&mut r, &mut &b"three\n"[..]);
        assert_eq!((ev, partial), (lines(&[b"three"]), None));
    }

    #[test]
    fn clear_forgets_an_overlong_line_in_progress() {
        let mut r = LineReader::new(2, 8);
        r.read_from(&mut &b"abcdef"[..]).unwrap();
        assert!(matches!(r.next_line(), Some(LineEvent::TooLong { .. })));
        r.clear();
        r.read_from(&mut &b"ok\n"[..]).unwrap();
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"ok")));
    }

    #[test]
    fn read_errors_pass_through_untouched() {
        struct Fails(ErrorKind);
        impl Read for Fails {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(self.0.into())
            }
        }
        let mut r = LineReader::new(8, 8);
        r.read_from(&mut &b"ab\ncd"[..]).unwrap();
        for kind in [
            ErrorKind::WouldBlock,
            ErrorKind::Interrupted,
            ErrorKind::ConnectionReset,
        ] {
            assert_eq!(r.read_from(&mut Fails(kind)).unwrap_err().kind(), kind);
        }
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"ab")));
        assert_eq!(r.next_line(), None);
        assert_eq!(r.take_partial(), Some(&b"cd"[..]));
    }

    #[test]
    fn undrained_full_buffer_is_an_error_not_eof() {
        let mut r = LineReader::new(2, 2);
        let mut src: &[u8] = b"a\nb\nc\nd\n";
        assert_eq!(r.read_from(&mut src).unwrap(), 2);
        assert_eq!(r.read_from(&mut src).unwrap(), 2);
        let e = r.read_from(&mut src).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::OutOfMemory);
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"a")));
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"b")));
        assert_eq!(r.next_line(), None);
        assert_eq!(r.read_from(&mut src).unwrap(), 2);
        assert_eq!(r.next_line(), Some(LineEvent::Line(b"c")));
    }

    #[test]
    fn a_reader_claiming_too_many_bytes_is_refused() {
        struct Liar;
        impl Read for Liar {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                Ok(buf.len() + 1)
            }
        }
        let mut r = LineReader::new(4, 4);
        assert_eq!(
            r.read_from(&mut Liar).unwrap_err().kind(),
            ErrorKind::InvalidData
        );
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn zero_max_line_len_accepts_only_empty_lines() {
        let (ev, partial) = run(b"\nx\n\n", 0, 3, vec![2]);
        assert_eq!(
            ev,
            vec![Ev::Line(vec![]), Ev::TooLong(vec![], 1), Ev::Line(vec![])]
        );
        assert_eq!(partial, None);
    }

    #[test]
    #[should_panic(expected = "read_chunk")]
    fn zero_read_chunk_panics() {
        let _ = LineReader::new(8, 0);
    }
}

#[cfg(test)]
mod proptests {
    use super::tests::{drive, model, own, Chunked, Ev};
    use super::*;
    use proptest::prelude::*;
    use std::io::Read;

    /// Streams rich in newlines, '\r' and lines near a small limit.
    fn stream() -> impl Strategy<Value = Vec<u8>> {
        let byte =
            prop_oneof![4 => Just(b'\n'), 1 => Just(b'\r'), 10 => b'a'..=b'e', 1 => any::<u8>()];
        proptest::collection::vec(byte, 0..400)
    }

    proptest! {
        #[test]
        fn any_split_gives_the_model_events(
            data in stream(),
            max in 0usize..12,
            chunk in 1usize..20,
            sizes in proptest::collection::vec(0usize..25, 1..8),
        ) {
            let mut r = LineReader::new(max, chunk);
            let cap = r.capacity();
            let got = drive(&mut r, &mut Chunked { data: &data, sizes, i: 0, failed: false });
            prop_assert_eq!(got, model(&data, max));
            prop_assert_eq!(r.capacity(), cap);
        }

        #[test]
        fn events_look_ahead_then_seek_equals_next_line(
            data in stream(),
            max in 0usize..12,
            chunk in 1usize..20,
            sizes in proptest::collection::vec(0usize..25, 1..8),
        ) {
            // Two readers over the same reads: one consumes with next_line,
            // the other looks ahead with events() (twice) and seeks.
            let (mut a, mut b) = (LineReader::new(max, chunk), LineReader::new(max, chunk));
            let mut src = Chunked { data: &data, sizes, i: 0, failed: false };
            let mut scratch = vec![0u8; chunk];
            loop {
                let n = match src.read(&mut scratch) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(_) => continue,
                };
                let mut piece = &scratch[..n];
                while !piece.is_empty() {
                    let k = a.read_from(&mut piece).unwrap();
                    let mut copy = &scratch[n - piece.len() - k..n - piece.len()];
                    prop_assert_eq!(b.read_from(&mut copy).unwrap(), k);
                    let want: Vec<Ev> = std::iter::from_fn(|| a.next_line().map(own)).collect();
                    let mut walk = b.events();
                    let first: Vec<Ev> = walk.clone().map(own).collect();
                    let got: Vec<Ev> = walk.by_ref().map(own).collect();
                    prop_assert_eq!(&first, &want);
                    prop_assert_eq!(&got, &want);
                    let pos = walk.position();
                    b.seek(pos);
                    prop_assert_eq!(b.buffered(), a.buffered());
                    prop_assert!(b.next_line().is_none());
                }
            }
            prop_assert_eq!(
                a.take_partial().map(<[u8]>::to_vec),
                b.take_partial().map(<[u8]>::to_vec)
            );
        }

        #[test]
        fn long_lines_any_split(
            lens in proptest::collection::vec(0usize..200, 0..20),
            unterminated in any::<bool>(),
            chunk in 1usize..100,
            sizes in proptest::collection::vec(0usize..120, 1..6),
        ) {
            let mut data = Vec::new();
            for (i, len) in lens.iter().enumerate() {
                data.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, *len));
                data.push(b'\n');
            }
            if unterminated {
                data.pop();
            }
            let mut r = LineReader::new(64, chunk);
            let got = drive(&mut r, &mut Chunked { data: &data, sizes, i: 0, failed: false });
            prop_assert_eq!(got, model(&data, 64));
        }
    }
}
