//! The accept step of every TCP port: the per-port connection limit, its
//! refusal line, the socket options, and the connection counters.
//!
//! A port refuses past its limit instead of queueing: the refused peer gets
//! one line (the port's own wording, e.g. `ERR too many feed connections`)
//! and a close, and `refused` counts it. An accepted socket gets
//! `TCP_NODELAY` and, when the port asks for one, a kernel send buffer size
//! (`SO_SNDBUF`, via socket2: this file is the one place connections touch
//! socket2). An accept that fails (e.g. out of file descriptors) is logged;
//! the listener stays registered and open connections keep being served.
//!
//! Single owner: the event loop thread of the port.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use mio::net::TcpListener;
use mio::{Interest, Registry, Token};

use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::{bump, set};
use crate::model::warning::WarnKind;
use crate::sys::net::{accept_one, Accepted};

use super::conns::{ConnId, Conns};
use super::stream::{Stream, TlsPort};

/// The poll token of a port's listener (the waker takes `usize::MAX`).
pub(crate) const LISTENER: Token = Token(usize::MAX - 1);

/// How one port accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortPolicy {
    /// Most simultaneous connections; the next one is refused.
    pub max_conns: usize,
    /// Written to a refused peer before its socket is dropped.
    pub refusal: &'static [u8],
    /// Log a warning per refusal (`{peer_label} from {peer} refused: limit
    /// of {max_conns} reached`).
    pub log_refusals: bool,
    /// Kernel send buffer per accepted socket (0 = OS auto-tuning).
    pub sndbuf: usize,
    /// What the poller reports for each accepted socket.
    pub interest: Interest,
    /// The port's name in `"{name} accept failed: …"`.
    pub name: &'static str,
    /// A connection's name in per-peer lines (`"{peer_label} from {peer}: …"`).
    pub peer_label: &'static str,
}

/// The counters an accept step keeps (the port's own counter fields).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnCounters<'a> {
    /// Bumped per accepted connection.
    pub accepted: &'a AtomicU64,
    /// Bumped per connection refused at the limit.
    pub refused: &'a AtomicU64,
    /// Set to the open connections after each accept (`None`: the handler
    /// publishes the gauge itself).
    pub open: Option<&'a AtomicU64>,
}

/// A port's listener under its policy. It can be closed early (the order
/// gateway stops taking connections at shutdown) and then accepts nothing.
#[derive(Debug)]
pub(crate) struct Listener {
    inner: Option<TcpListener>,
    local: SocketAddr,
    policy: PortPolicy,
    /// The port's TLS, if it speaks TLS: every accepted socket becomes a
    /// TLS [`Stream`].
    tls: Option<Arc<TlsPort>>,
}

impl Listener {
    /// Registers a bound listener under [`LISTENER`].
    ///
    /// # Errors
    /// When the listener cannot be registered or has no local address.
    pub(crate) fn register(
        registry: &Registry,
        mut listener: TcpListener,
        policy: PortPolicy,
    ) -> std::io::Result<Self> {
        registry.register(&mut listener, LISTENER, Interest::READABLE)?;
        let local = listener.local_addr()?;
        Ok(Listener {
            inner: Some(listener),
            local,
            policy,
            tls: None,
        })
    }

    /// The same listener, its connections speaking TLS when `tls` is set.
    pub(crate) fn with_tls(mut self, tls: Option<Arc<TlsPort>>) -> Self {
        self.tls = tls;
        self
    }

    /// The address the listener was bound to.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// True until [`close`](Self::close).
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.inner.is_some()
    }

    /// Deregisters and closes the listener: no connection is accepted after.
    pub(crate) fn close(&mut self, registry: &Registry) {
        if let Some(mut l) = self.inner.take() {
            let _ = registry.deregister(&mut l);
        }
    }

    /// Accepts every waiting connection into `conns`, refusing those over
    /// the limit. `admitted` builds the handler's state of each new
    /// connection from its id (and is where a handler arms an auth deadline
    /// or queues a first read). Returns how many were admitted.
    pub(crate) fn accept_all<S>(
        &mut self,
        registry: &Registry,
        conns: &mut Conns<S>,
        counters: ConnCounters<'_>,
        authed: bool,
        mut admitted: impl FnMut(ConnId) -> S,
    ) -> usize {
        let p = self.policy;
        let mut n = 0;
        loop {
            let Some(listener) = self.inner.as_ref() else {
                return n;
            };
            let (mut stream, peer) = match accept_one(listener) {
                Accepted::Conn(stream, peer) => (stream, peer),
                Accepted::Drained => return n,
                Accepted::Failed(e) => {
                    warn_repeating!(WarnKind::AcceptFailed, "{} accept failed: {e}", p.name);
                    return n;
                }
            };
            if conns.len() >= p.max_conns {
                bump(counters.refused, 1);
                // A TLS client could not read a plaintext line: it sees the close.
                if self.tls.is_none() {
                    let _ = stream.write(p.refusal);
                }
                if p.log_refusals {
                    warn_repeating!(
                        WarnKind::ConnectionRefused,
                        "{} from {peer} refused: limit of {} reached",
                        p.peer_label,
                        p.max_conns
                    );
                }
                continue;
            }
            let _ = stream.set_nodelay(true);
            if p.sndbuf > 0 {
                // What sits in the kernel can no longer be conflated: keep it small.
                let _ = socket2::SockRef::from(&stream).set_send_buffer_size(p.sndbuf);
            }
            let Some(stream) = Stream::accepted(stream, self.tls.as_ref(), p.peer_label, peer)
            else {
                continue;
            };
            if let Err(e) = conns.insert(registry, stream, peer, p.interest, authed, &mut admitted)
            {
                warn_repeating!(
                    WarnKind::RegisterFailed,
                    "{} from {peer}: register failed: {e}",
                    p.peer_label
                );
                continue;
            }
            n += 1;
            bump(counters.accepted, 1);
            if let Some(open) = counters.open {
                set(open, conns.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::read_line_blocking;
    use mio::{Events, Poll};
    use std::sync::atomic::Ordering;

    fn policy(max_conns: usize) -> PortPolicy {
        PortPolicy {
            max_conns,
            refusal: b"ERR full\n",
            log_refusals: true,
            sndbuf: 4096,
            interest: Interest::READABLE,
            name: "test",
            peer_label: "test connection",
        }
    }

    /// Polls until the listener has accepted or refused `want` connections.
    fn accept_until(
        poll: &mut Poll,
        l: &mut Listener,
        conns: &mut Conns<u8>,
        c: ConnCounters<'_>,
        want: u64,
    ) {
        let mut events = Events::with_capacity(8);
        while c.accepted.load(Ordering::Relaxed) + c.refused.load(Ordering::Relaxed) < want {
            poll.poll(&mut events, None).unwrap();
            l.accept_all(poll.registry(), conns, c, true, |_| 0);
        }
    }

    #[test]
    fn refuses_past_the_limit_with_its_line_and_counts() {
        let mut poll = Poll::new().unwrap();
        let bound = mio::net::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut l = Listener::register(poll.registry(), bound, policy(1)).unwrap();
        let (acc, ref_, open) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let c = ConnCounters {
            accepted: &acc,
            refused: &ref_,
            open: Some(&open),
        };
        let mut conns = Conns::with_capacity(1);
        let _first = std::net::TcpStream::connect(l.local_addr()).unwrap();
        accept_until(&mut poll, &mut l, &mut conns, c, 1);
        let second = std::net::TcpStream::connect(l.local_addr()).unwrap();
        accept_until(&mut poll, &mut l, &mut conns, c, 2);
        assert_eq!(read_line_blocking(&second), "ERR full\n");
        assert_eq!(
            (acc.load(Ordering::Relaxed), ref_.load(Ordering::Relaxed)),
            (1, 1)
        );
        assert_eq!(open.load(Ordering::Relaxed), 1);
        assert_eq!(conns.len(), 1);
        let (key, conn) = conns.iter().next().unwrap();
        assert_eq!(conn.id.key(), key);
        assert!(conn.stream.tcp().nodelay().unwrap());

        // A closed listener accepts nothing more.
        l.close(poll.registry());
        assert!(!l.is_open());
        assert_eq!(l.accept_all(poll.registry(), &mut conns, c, true, |_| 0), 0);
    }
}
