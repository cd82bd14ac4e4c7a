//! Test doubles for the kit's unit tests and for the buffers built on it:
//! loopback sockets and a writer whose room a test scripts.

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;

/// A connected loopback pair: the accepted side as a non-blocking mio
/// socket, the peer address it saw, and the (blocking) client side.
pub(crate) fn loopback_pair() -> (mio::net::TcpStream, SocketAddr, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, peer) = l.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (mio::net::TcpStream::from_std(server), peer, client)
}

/// Reads one line (up to and including `'\n'`, or to EOF) from a blocking socket.
pub(crate) fn read_line_blocking(mut s: &std::net::TcpStream) -> String {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while s.read(&mut b).unwrap() == 1 {
        line.push(b[0]);
        if b[0] == b'\n' {
            break;
        }
    }
    String::from_utf8(line).unwrap()
}

/// A socket stand-in a test scripts: each `write` takes at most `per_call`
/// bytes and, in all, `room` bytes (then it would block until the test
/// gives it room again); `interrupt_once` fails the next call with
/// `Interrupted`. What it took is in `got`, in order.
#[derive(Debug)]
pub(crate) struct ScriptedWriter {
    pub(crate) got: Vec<u8>,
    pub(crate) room: usize,
    pub(crate) per_call: usize,
    pub(crate) interrupt_once: bool,
}

impl ScriptedWriter {
    /// Takes up to `room` bytes, in as few calls as the caller makes.
    pub(crate) fn with_room(room: usize) -> Self {
        ScriptedWriter {
            got: Vec::new(),
            room,
            per_call: usize::MAX,
            interrupt_once: false,
        }
    }
}

impl Write for ScriptedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if std::mem::take(&mut self.interrupt_once) {
            return Err(ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.room).min(self.per_call);
        if n == 0 && !buf.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        self.room -= n;
        self.got.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
