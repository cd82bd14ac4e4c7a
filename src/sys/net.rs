//! Socket idioms written once: accepting from a non-blocking listener.
//!
//! mio sockets are non-blocking: `WouldBlock` means "nothing more now",
//! `Interrupted` means "try again". Every event loop needs the same handling.

use std::io::ErrorKind;
use std::net::SocketAddr;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Poll};

/// What one accept attempt produced.
#[derive(Debug)]
pub enum Accepted {
    /// A new connection.
    Conn(TcpStream, SocketAddr),
    /// No connection is waiting: stop accepting until the next event.
    Drained,
    /// The OS refused (e.g. out of file descriptors); the listener stays
    /// registered and open connections keep being served.
    Failed(std::io::Error),
}

/// Accepts one connection, retrying on `Interrupted`.
pub fn accept_one(listener: &TcpListener) -> Accepted {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => return Accepted::Conn(stream, peer),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Accepted::Drained,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Accepted::Failed(e),
        }
    }
}

/// What one wait in an event loop produced.
#[derive(Debug)]
pub enum Polled {
    /// `events` holds this turn's events (possibly none, on a timeout).
    Ready,
    /// A signal interrupted the wait: go round again.
    Interrupted,
    /// The poller failed; the loop should end (logged here).
    Failed,
}

/// Waits for events with `timeout`, the one way every event loop does.
pub fn poll_events(
    poll: &mut Poll,
    events: &mut Events,
    timeout: Option<std::time::Duration>,
    what: &str,
) -> Polled {
    match poll.poll(events, timeout) {
        Ok(()) => Polled::Ready,
        Err(e) if e.kind() == ErrorKind::Interrupted => Polled::Interrupted,
        Err(e) => {
            log::error!("{what} poll failed: {e}");
            Polled::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_then_a_connection() {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(matches!(accept_one(&l), Accepted::Drained));
        let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // Non-blocking accept: poll until the connection is visible.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            match accept_one(&l) {
                Accepted::Conn(_, peer) => {
                    assert!(peer.ip().is_loopback());
                    break;
                }
                Accepted::Drained => assert!(std::time::Instant::now() < end),
                Accepted::Failed(e) => panic!("{e}"),
            }
        }
    }
}
