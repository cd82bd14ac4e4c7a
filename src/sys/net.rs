//! Socket idioms written once: accepting from a non-blocking listener,
//! waiting on a poller, parsing a listen address.
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
pub(crate) fn accept_one(listener: &TcpListener) -> Accepted {
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
pub(crate) enum Polled {
    /// `events` holds this turn's events (possibly none, on a timeout).
    Ready,
    /// A signal interrupted the wait: go round again.
    Interrupted,
    /// The poller failed; the loop should end (logged here).
    Failed,
}

/// Waits for events with `timeout`, the one way every event loop does.
pub(crate) fn poll_events(
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

/// Parses a `HOST:PORT` flag value into one socket address: an IP literal
/// (`127.0.0.1:9102`, `[::1]:9102`) as is, a host name (`localhost:9102`)
/// through the system resolver. Of the addresses it returns, the first IPv4
/// one is taken when there is one: the engine's listeners default to
/// `127.0.0.1`, and a resolver that lists `::1` first for `localhost` would
/// otherwise send the tools to a port nobody listens on.
///
/// # Errors
/// A one-line reason, for clap to print: no port, a bad port, or a name the
/// resolver does not know.
pub fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!(
            "`{s}` is not HOST:PORT (e.g. 127.0.0.1:9102 or localhost:9102)"
        ));
    };
    if host.is_empty() {
        return Err(format!("`{s}` has no host (e.g. 127.0.0.1:{port})"));
    }
    if port.parse::<u16>().is_err() {
        return Err(format!("`{port}` is not a port number (0-65535)"));
    }
    let addrs: Vec<SocketAddr> = s
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve `{host}`: {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("`{host}` resolves to no address"))
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

    #[test]
    fn literal_and_localhost_resolve_to_loopback() {
        assert_eq!(
            parse_socket_addr("127.0.0.1:9102").unwrap(),
            "127.0.0.1:9102".parse().unwrap()
        );
        assert_eq!(
            parse_socket_addr("[::1]:9102").unwrap(),
            "[::1]:9102".parse().unwrap()
        );
        let a = parse_socket_addr("localhost:9102").unwrap();
        assert!(a.ip().is_loopback(), "{a}");
        assert_eq!(a.port(), 9102);
    }

    #[test]
    fn bad_forms_say_why() {
        assert!(parse_socket_addr("localhost")
            .unwrap_err()
            .contains("HOST:PORT"));
        assert!(parse_socket_addr(":9102").unwrap_err().contains("no host"));
        assert!(parse_socket_addr("localhost:http")
            .unwrap_err()
            .contains("not a port"));
        assert!(parse_socket_addr("localhost:70000")
            .unwrap_err()
            .contains("not a port"));
    }
}
