//! Loopback sockets for the kit's unit tests.

use std::io::Read;
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
