//! A connection's bounded output buffer and the non-blocking write of it.
//!
//! Replies are appended here and written when the socket takes them. The
//! buffer has a high-water mark: past it, [`WriteBuf::over_mark`] tells the
//! handler to stop reading that connection (a peer that sends without
//! reading must not make the engine buffer without bound); once a write
//! brings it under half the mark ([`WriteBuf::under_low_water`]) reading
//! resumes. So the bytes held are at most the mark plus what the requests
//! already accepted will still answer. The publisher's conflating
//! subscriber buffer (`publish/outbuf.rs`) keeps its bytes here too, with
//! its own policy on top.
//!
//! The bytes live in one [`BytesMut`], allocated once with the capacity
//! the owner asks for. A write moves an offset past what the socket took
//! instead of `advance`-ing the `BytesMut`: its `reserve` reclaims a
//! consumed prefix in place only when that prefix is at least as long as
//! what is still unwritten (bytes' `BytesMut::reserve` docs), and grows the
//! allocation otherwise. Here the buffer empties to its start when
//! everything is written, and an append that would not fit the capacity
//! first moves the unwritten bytes to the front ([`WriteBuf::room_for`]),
//! so steady traffic, partial writes included, neither allocates nor grows.
//!
//! Single owner: the event loop thread of the connection.

use std::io::{ErrorKind, Write};

use bytes::BytesMut;

/// What a [`WriteBuf::write_to`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flushed {
    /// Every byte was written.
    All,
    /// The socket would block with bytes still waiting (wait for writable).
    Blocked,
}

/// The buffer.
#[derive(Debug)]
pub(crate) struct WriteBuf {
    /// `out[pos..]` waits to be written; `out[..pos]` was written.
    out: BytesMut,
    /// Bytes of `out` already written; `pos <= out.len()`, and `0` whenever
    /// nothing waits.
    pos: usize,
    hwm: usize,
}

impl WriteBuf {
    /// An empty buffer with `initial` bytes of room and high-water mark `hwm`.
    pub(crate) fn new(initial: usize, hwm: usize) -> Self {
        WriteBuf {
            out: BytesMut::with_capacity(initial),
            pos: 0,
            hwm,
        }
    }

    /// Bytes waiting to be written.
    #[inline]
    pub(crate) fn pending(&self) -> usize {
        self.out.len() - self.pos
    }

    /// The high-water mark.
    #[inline]
    pub(crate) fn hwm(&self) -> usize {
        self.hwm
    }

    /// Bytes the buffer holds without allocating (written prefix included).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.out.capacity()
    }

    /// True past the mark: stop reading this connection.
    #[inline]
    pub(crate) fn over_mark(&self) -> bool {
        self.pending() > self.hwm
    }

    /// True under half the mark: a connection paused by
    /// [`over_mark`](Self::over_mark) may be read again.
    #[inline]
    pub(crate) fn under_low_water(&self) -> bool {
        self.pending() < self.hwm / 2
    }

    /// Appends bytes (never refused: the caller bounds what it appends by
    /// not reading past the mark).
    #[inline]
    pub(crate) fn append(&mut self, bytes: &[u8]) {
        self.room_for(bytes.len()).extend_from_slice(bytes);
    }

    /// The buffer, for encoders that append in place, after making room for
    /// `extra` bytes by reclaiming the written prefix when they would not
    /// fit otherwise. Only append to it: the bytes before its end belong to
    /// this buffer. An encoder that writes more than `extra` still works
    /// (the `BytesMut` grows), so pass the most one append can take.
    #[inline]
    pub(crate) fn room_for(&mut self, extra: usize) -> &mut BytesMut {
        if self.pos > 0 {
            if self.pos == self.out.len() {
                self.out.clear();
                self.pos = 0;
            } else if self.out.len() + extra > self.out.capacity() {
                let len = self.out.len();
                self.out.copy_within(self.pos..len, 0);
                self.out.truncate(len - self.pos);
                self.pos = 0;
            }
        }
        &mut self.out
    }

    /// Writes as much as the socket takes without blocking, retrying on
    /// `Interrupted`; once everything is written, flushes `w` (a TLS stream
    /// pushes its last record), so [`Flushed::All`] means the socket holds it.
    ///
    /// # Errors
    /// Any other write error, or `WriteZero` when the socket took nothing;
    /// the connection should be closed.
    #[inline]
    pub(crate) fn write_to<W: Write>(&mut self, w: &mut W) -> std::io::Result<Flushed> {
        self.write_counted(w, |_| {}).map(|(_, flushed)| flushed)
    }

    /// [`write_to`](Self::write_to), calling `on_write(n)` after each
    /// successful `write` of `n` bytes; also returns the bytes written.
    ///
    /// # Errors
    /// As [`write_to`](Self::write_to); the bytes written before the error
    /// are not reported.
    pub(crate) fn write_counted<W: Write>(
        &mut self,
        w: &mut W,
        mut on_write: impl FnMut(usize),
    ) -> std::io::Result<(usize, Flushed)> {
        let mut total = 0;
        let mut flushed = Flushed::All;
        while self.pos < self.out.len() {
            match w.write(&self.out[self.pos..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.pos += n;
                    total += n;
                    on_write(n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    flushed = Flushed::Blocked;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.pos == self.out.len() {
            self.out.clear();
            self.pos = 0;
            // A TLS stream may still hold the last record: "all written"
            // includes it (a plain socket's flush does nothing).
            if flushed == Flushed::All {
                loop {
                    match w.flush() {
                        Ok(()) => break,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            flushed = Flushed::Blocked;
                            break;
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok((total, flushed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::{loopback_pair, ScriptedWriter};
    use std::io::Read;

    #[test]
    fn partial_writes_keep_order_and_the_mark_pauses_and_resumes() {
        let mut b = WriteBuf::new(16, 8);
        b.append(b"0123456789");
        assert!(b.over_mark());
        let mut w = ScriptedWriter {
            per_call: 3,
            interrupt_once: true,
            ..ScriptedWriter::with_room(7)
        };
        assert_eq!(b.write_to(&mut w).unwrap(), Flushed::Blocked);
        assert_eq!(b.pending(), 3);
        assert!(!b.over_mark() && b.under_low_water());
        b.append(b"ab");
        w.room = 100;
        assert_eq!(b.write_to(&mut w).unwrap(), Flushed::All);
        assert_eq!(w.got, b"0123456789ab");
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn steady_traffic_reuses_the_buffer() {
        let mut b = WriteBuf::new(64, 1 << 10);
        let mut sink = Vec::new();
        b.append(&[b'x'; 48]);
        b.write_to(&mut sink).unwrap();
        let cap = b.capacity();
        for _ in 0..1000 {
            b.append(&[b'y'; 48]);
            assert_eq!(b.write_to(&mut sink).unwrap(), Flushed::All);
        }
        assert_eq!(b.capacity(), cap);
        assert_eq!(sink.len(), 48 * 1001);
    }

    #[test]
    fn partial_writes_reclaim_the_written_prefix_in_place() {
        // A written prefix shorter than what still waits: `BytesMut::reserve`
        // alone would grow here (it reclaims only a prefix at least as long
        // as the rest); `room_for` moves the rest to the front instead.
        let mut b = WriteBuf::new(100, 80);
        b.append(&[b'a'; 90]);
        let mut w = ScriptedWriter::with_room(10);
        assert_eq!(
            b.write_counted(&mut w, |_| {}).unwrap(),
            (10, Flushed::Blocked)
        );
        let cap = b.capacity();
        b.append(&[b'b'; 20]);
        assert_eq!(b.capacity(), cap);
        assert_eq!(b.pending(), 100);
        w.room = 1000;
        assert_eq!(b.write_to(&mut w).unwrap(), Flushed::All);
        assert_eq!(b.pending(), 0);
        assert_eq!(w.got, [&[b'a'; 90][..], &[b'b'; 20]].concat());
    }

    #[test]
    fn many_cycles_with_partial_writes_keep_the_capacity() {
        let hwm = 1000;
        let mut b = WriteBuf::new(hwm + 100, hwm);
        let cap = b.capacity();
        let mut w = ScriptedWriter::with_room(0);
        let mut sent = Vec::new();
        let mut calls = Vec::new();
        for i in 0..20_000usize {
            // Fill up to the mark with frames of varying size, as a
            // subscriber's offers do, then let the socket take a varying part.
            let frame = vec![b'0' + (i % 10) as u8; 1 + i % 97];
            while b.pending() + frame.len() <= hwm {
                b.append(&frame);
                sent.extend_from_slice(&frame);
            }
            w.room = 1 + (i * 37) % 700;
            let (n, _) = b.write_counted(&mut w, |n| calls.push(n)).unwrap();
            assert_eq!(n, calls.drain(..).sum::<usize>());
            assert_eq!(b.capacity(), cap, "cycle {i}");
        }
        w.room = usize::MAX;
        b.write_to(&mut w).unwrap();
        assert_eq!(w.got, sent);
    }

    #[test]
    fn a_peer_that_does_not_read_blocks_the_socket_not_the_loop() {
        let (mut server, _peer, mut client) = loopback_pair();
        let mut b = WriteBuf::new(1024, 1 << 20);
        let chunk = vec![b'z'; 64 * 1024];
        // Fill the kernel buffers: the write must stop at WouldBlock.
        let mut appended = 0usize;
        loop {
            b.append(&chunk);
            appended += chunk.len();
            if b.write_to(&mut server).unwrap() == Flushed::Blocked {
                break;
            }
            assert!(appended < 256 << 20, "the socket never blocked");
        }
        let left = b.pending();
        assert!(left > 0);
        // The peer reads everything; the rest then goes out in order.
        client.set_nonblocking(false).unwrap();
        let mut got = vec![0u8; appended - left];
        client.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&c| c == b'z'));
        while b.write_to(&mut server).unwrap() == Flushed::Blocked {
            let mut sink = vec![0u8; 64 * 1024];
            let n = client.read(&mut sink).unwrap();
            assert!(n > 0);
        }
        assert_eq!(b.pending(), 0);
    }
}
