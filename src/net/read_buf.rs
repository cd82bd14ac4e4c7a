//! A connection's bounded input buffer for framed protocols (RESP): read
//! into it, hand the buffered bytes to a parser, consume what the parser
//! took.
//!
//! Line protocols use [`super::LineReader`] instead, which also enforces a
//! line length. Here the framing is the parser's: the buffer only bounds
//! the input (a frame larger than the buffer is
//! [`ReadOutcome::BufferFull`], for the protocol to answer and close) and
//! keeps the unparsed tail at the front. Allocated once, never grows.
//!
//! Single owner: the event loop thread of the connection.

use std::io::{ErrorKind, Read};

use bytes::BytesMut;

/// What one [`ReadBuf::read_from`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadOutcome {
    /// This many bytes were appended.
    Data(usize),
    /// Nothing to read now.
    WouldBlock,
    /// The buffer is full of unconsumed bytes: a frame larger than it.
    BufferFull,
    /// The peer closed its sending side.
    Eof,
}

/// The buffer.
#[derive(Debug)]
pub(crate) struct ReadBuf {
    /// Fixed length; `buf[..len]` holds unconsumed bytes.
    buf: BytesMut,
    len: usize,
}

impl Default for ReadBuf {
    /// [`ReadBuf::empty`].
    fn default() -> Self {
        ReadBuf::empty()
    }
}

impl ReadBuf {
    /// A buffer of `capacity` bytes, allocated now.
    ///
    /// # Panics
    /// If `capacity` is zero.
    pub(crate) fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "ReadBuf: capacity must be at least 1");
        ReadBuf {
            buf: BytesMut::zeroed(capacity),
            len: 0,
        }
    }

    /// A placeholder of no capacity that allocates nothing: what
    /// `std::mem::take` leaves while a parser reads the real buffer and its
    /// handler borrows the buffer's owner. Every read of it is
    /// [`ReadOutcome::BufferFull`].
    pub(crate) fn empty() -> Self {
        ReadBuf {
            buf: BytesMut::new(),
            len: 0,
        }
    }

    /// Reads once into the free space, retrying on `Interrupted`.
    ///
    /// # Errors
    /// Any read error other than `WouldBlock` and `Interrupted`.
    pub(crate) fn read_from<R: Read>(&mut self, r: &mut R) -> std::io::Result<ReadOutcome> {
        if self.len == self.buf.len() {
            return Ok(ReadOutcome::BufferFull);
        }
        loop {
            match r.read(&mut self.buf[self.len..]) {
                Ok(0) => return Ok(ReadOutcome::Eof),
                Ok(n) => {
                    let n = n.min(self.buf.len() - self.len);
                    self.len += n;
                    return Ok(ReadOutcome::Data(n));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The bytes read and not consumed yet.
    #[inline]
    pub(crate) fn filled(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Drops the first `n` buffered bytes (a parsed frame), keeping the rest
    /// at the front.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
    }

    /// The buffer's size.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::loopback_pair;
    use std::io::Write;

    #[test]
    fn frames_hand_off_and_the_bound_holds() {
        let mut b = ReadBuf::new(8);
        let mut src: &[u8] = b"*1\r\n$4\r\nPING\r\n";
        assert_eq!(b.read_from(&mut src).unwrap(), ReadOutcome::Data(8));
        assert_eq!(b.read_from(&mut src).unwrap(), ReadOutcome::BufferFull);
        assert_eq!(b.filled(), b"*1\r\n$4\r\n");
        b.consume(4);
        assert_eq!(b.filled(), b"$4\r\n");
        assert_eq!(b.read_from(&mut src).unwrap(), ReadOutcome::Data(4));
        assert_eq!(b.filled(), b"$4\r\nPING");
        b.consume(100);
        assert_eq!(b.read_from(&mut src).unwrap(), ReadOutcome::Data(2));
        assert_eq!(b.read_from(&mut src).unwrap(), ReadOutcome::Eof);
        assert_eq!(b.capacity(), 8);
    }

    #[test]
    fn the_empty_placeholder_holds_nothing_and_takes_nothing() {
        let mut b = ReadBuf::default();
        assert_eq!(b.capacity(), 0);
        assert_eq!(
            b.read_from(&mut &b"PING"[..]).unwrap(),
            ReadOutcome::BufferFull
        );
        assert!(b.filled().is_empty());
        let mut real = ReadBuf::new(8);
        real.read_from(&mut &b"PING"[..]).unwrap();
        let taken = std::mem::take(&mut real);
        assert_eq!((taken.filled(), real.capacity()), (&b"PING"[..], 0));
    }

    #[test]
    fn reads_a_socket_until_it_would_block() {
        let (mut server, _peer, mut client) = loopback_pair();
        let mut b = ReadBuf::new(64);
        assert_eq!(b.read_from(&mut server).unwrap(), ReadOutcome::WouldBlock);
        client.write_all(b"PING\r\n").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        // Blocking until the bytes and then the EOF arrive, without a sleep:
        // the peer has shut down, so every read ends.
        let mut seen = Vec::new();
        loop {
            match b.read_from(&mut server).unwrap() {
                ReadOutcome::Data(_) => seen.extend_from_slice(b.filled()),
                ReadOutcome::Eof => break,
                ReadOutcome::WouldBlock => std::thread::yield_now(),
                ReadOutcome::BufferFull => unreachable!(),
            }
            let n = b.filled().len();
            b.consume(n);
        }
        assert_eq!(seen, b"PING\r\n");
    }
}
