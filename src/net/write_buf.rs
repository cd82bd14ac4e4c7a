//! A connection's bounded output buffer and the non-blocking write of it.
//!
//! Replies are appended here and written when the socket takes them. The
//! buffer has a high-water mark: past it, [`WriteBuf::over_mark`] tells the
//! handler to stop reading that connection (a peer that sends without
//! reading must not make the engine buffer without bound); once a write
//! brings it under half the mark ([`WriteBuf::under_low_water`]) reading
//! resumes. So the bytes held are at most the mark plus what the requests
//! already accepted will still answer.
//!
//! The bytes live in one [`BytesMut`]: a write advances past what the
//! socket took, and the space is reclaimed in place when the buffer
//! empties, so steady traffic allocates nothing.
//!
//! Single owner: the event loop thread of the connection.

use std::io::{ErrorKind, Write};

use bytes::{Buf, BytesMut};

/// What a [`WriteBuf::write_to`] left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Every byte was written.
    All,
    /// The socket would block with bytes still waiting (wait for writable).
    Blocked,
}

/// The buffer.
#[derive(Debug)]
pub struct WriteBuf {
    /// The bytes not written yet.
    out: BytesMut,
    hwm: usize,
}

impl WriteBuf {
    /// An empty buffer with `initial` bytes of room and high-water mark `hwm`.
    pub fn new(initial: usize, hwm: usize) -> Self {
        WriteBuf {
            out: BytesMut::with_capacity(initial),
            hwm,
        }
    }

    /// Bytes waiting to be written.
    #[inline]
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// The high-water mark.
    pub fn hwm(&self) -> usize {
        self.hwm
    }

    /// True past the mark: stop reading this connection.
    #[inline]
    pub fn over_mark(&self) -> bool {
        self.pending() > self.hwm
    }

    /// True under half the mark: a connection paused by
    /// [`over_mark`](Self::over_mark) may be read again.
    #[inline]
    pub fn under_low_water(&self) -> bool {
        self.pending() < self.hwm / 2
    }

    /// Appends bytes (never refused: the caller bounds what it appends by
    /// not reading past the mark).
    #[inline]
    pub fn append(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// The buffer itself, for encoders that append in place.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut BytesMut {
        &mut self.out
    }

    /// Writes as much as the socket takes without blocking, retrying on
    /// `Interrupted`.
    ///
    /// # Errors
    /// Any other write error, or `WriteZero` when the socket took nothing;
    /// the connection should be closed.
    pub fn write_to<W: Write>(&mut self, w: &mut W) -> std::io::Result<Flushed> {
        while !self.out.is_empty() {
            match w.write(&self.out) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.out.advance(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(Flushed::Blocked),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        Ok(Flushed::All)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::loopback_pair;
    use std::io::Read;

    /// Takes at most `room` bytes in total, then would block.
    struct Slow {
        taken: Vec<u8>,
        room: usize,
        interrupt_once: bool,
    }

    impl Write for Slow {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if std::mem::take(&mut self.interrupt_once) {
                return Err(ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.room).min(3);
            if n == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            self.room -= n;
            self.taken.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_keep_order_and_the_mark_pauses_and_resumes() {
        let mut b = WriteBuf::new(16, 8);
        b.append(b"0123456789");
        assert!(b.over_mark());
        let mut w = Slow {
            taken: Vec::new(),
            room: 7,
            interrupt_once: true,
        };
        assert_eq!(b.write_to(&mut w).unwrap(), Flushed::Blocked);
        assert_eq!(b.pending(), 3);
        assert!(!b.over_mark() && b.under_low_water());
        b.append(b"ab");
        w.room = 100;
        assert_eq!(b.write_to(&mut w).unwrap(), Flushed::All);
        assert_eq!(w.taken, b"0123456789ab");
        assert_eq!(b.pending(), 0);
    }

    #[test]
    fn steady_traffic_reuses_the_buffer() {
        let mut b = WriteBuf::new(64, 1 << 10);
        let mut sink = Vec::new();
        b.append(&[b'x'; 48]);
        b.write_to(&mut sink).unwrap();
        let cap = b.bytes_mut().capacity();
        for _ in 0..1000 {
            b.append(&[b'y'; 48]);
            assert_eq!(b.write_to(&mut sink).unwrap(), Flushed::All);
        }
        assert_eq!(b.bytes_mut().capacity(), cap);
        assert_eq!(sink.len(), 48 * 1001);
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
