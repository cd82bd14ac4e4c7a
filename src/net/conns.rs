//! The open connections of one port: a slab of sockets, each with an id
//! that survives slab reuse.
//!
//! A slab key is reused as soon as its connection closes, but messages about
//! a connection (an order's replies, an authentication deadline) can outlive
//! it. So every connection gets a [`ConnId`]: its slab key plus a generation
//! counted per accept. [`Conns::get_live`] finds a connection only when both
//! match, so a later client on the same key never receives an earlier
//! client's replies, and an old deadline never closes a newer connection.
//!
//! The slab also registers each socket with the loop's poller under
//! `Token(key)`, and deregisters it on [`Conns::remove`]: a socket is in the
//! poller exactly while it is in the slab.
//!
//! Single owner: the event loop thread of the port.

use std::net::SocketAddr;
use std::sync::Arc;

use mio::{Interest, Registry, Token};
use slab::Slab;

use super::stream::Stream;

/// The id of one connection, never reused while the engine runs (in
/// practice: a generation wraps after 2³² accepts on one port).
///
/// Layout: the generation in the high 32 bits, the slab key in the low 32
/// bits: one `u64`, `Copy`, so it travels as it is (e.g. in the order
/// path's orders and events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ConnId(u64);

impl ConnId {
    fn new(generation: u32, key: usize) -> Self {
        debug_assert!(key <= u32::MAX as usize, "slab key {key} over 32 bits");
        ConnId((u64::from(generation) << 32) | (key as u64 & 0xffff_ffff))
    }

    /// The slab key (and poll token) the connection had.
    #[inline]
    pub(crate) fn key(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    /// The accept count of the port when this connection was accepted: 1
    /// for the first, counting only connections admitted (so it can serve
    /// as a sequential client id, e.g. in reports), wrapping after 2³².
    #[cfg(test)]
    #[inline]
    pub(crate) fn serial(self) -> u64 {
        self.0 >> 32
    }

    /// The id of a raw layout (high 32 bits generation, low 32 key): ids no
    /// accept made (the order path's recovered orders) and tests.
    #[inline]
    pub(crate) fn from_u64(raw: u64) -> Self {
        ConnId(raw)
    }
}

/// One open connection: the kit's part (socket, id, peer, auth state) and
/// the handler's part (`state`).
#[derive(Debug)]
pub(crate) struct Conn<S> {
    /// The non-blocking socket (plaintext or TLS), registered under
    /// `Token(id.key())`; [`Stream::tcp`] is the TCP socket itself.
    pub stream: Stream,
    /// This connection's id.
    pub id: ConnId,
    /// The peer address as text, for log lines and dead letters (allocated
    /// once per connection, shared without copying).
    pub peer: Arc<str>,
    /// False until the `AUTH` step passed (true from the start without a
    /// token). Written by the handler, read by the deadline expiry.
    pub authed: bool,
    /// What the handler keeps per connection.
    pub state: S,
}

/// The slab of a port's connections.
#[derive(Debug)]
pub(crate) struct Conns<S> {
    slab: Slab<Conn<S>>,
    /// Counted per successful accept; part of every [`ConnId`].
    generation: u32,
}

impl<S> Conns<S> {
    /// An empty slab with room for `capacity` connections before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Conns {
            slab: Slab::with_capacity(capacity),
            generation: 0,
        }
    }

    /// Open connections.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Registers `stream` with `registry` under the next free key and keeps
    /// it; `state` builds the handler's part from the new id.
    ///
    /// # Errors
    /// When the poller refuses the socket; nothing is kept then.
    pub(crate) fn insert(
        &mut self,
        registry: &Registry,
        mut stream: Stream,
        peer: SocketAddr,
        interest: Interest,
        authed: bool,
        state: impl FnOnce(ConnId) -> S,
    ) -> std::io::Result<ConnId> {
        let entry = self.slab.vacant_entry();
        let key = entry.key();
        registry.register(&mut stream, Token(key), interest)?;
        self.generation = self.generation.wrapping_add(1);
        let id = ConnId::new(self.generation, key);
        entry.insert(Conn {
            stream,
            id,
            peer: Arc::from(peer.to_string()),
            authed,
            state: state(id),
        });
        Ok(id)
    }

    /// The connection under `key`, whichever it is.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: usize) -> Option<&mut Conn<S>> {
        self.slab.get_mut(key)
    }

    /// The connection under `key`, whichever it is.
    #[inline]
    pub(crate) fn get(&self, key: usize) -> Option<&Conn<S>> {
        self.slab.get(key)
    }

    /// The connection `id`, if it is still open (not a later one on its key).
    #[inline]
    pub(crate) fn get_live(&mut self, id: ConnId) -> Option<&mut Conn<S>> {
        self.slab.get_mut(id.key()).filter(|c| c.id == id)
    }

    /// Deregisters and removes the connection under `key`; `None` when the
    /// key is free.
    pub(crate) fn remove(&mut self, registry: &Registry, key: usize) -> Option<Conn<S>> {
        if !self.slab.contains(key) {
            return None;
        }
        let mut c = self.slab.remove(key);
        let _ = registry.deregister(&mut c.stream);
        Some(c)
    }

    /// The keys of every open connection, in slab order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = usize> + '_ {
        self.slab.iter().map(|(k, _)| k)
    }

    /// Every open connection, in slab order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Conn<S>)> + '_ {
        self.slab.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::loopback_pair;
    use mio::Poll;

    #[test]
    fn an_id_survives_slab_reuse() {
        let poll = Poll::new().unwrap();
        let mut conns: Conns<u32> = Conns::with_capacity(2);
        let (a, peer_a, _ca) = loopback_pair();
        let first = conns
            .insert(
                poll.registry(),
                a.into(),
                peer_a,
                Interest::READABLE,
                true,
                |_| 1,
            )
            .unwrap();
        assert_eq!(conns.get_live(first).map(|c| c.state), Some(1));
        let gone = conns.remove(poll.registry(), first.key()).unwrap();
        assert_eq!(gone.id, first);
        assert!(conns.remove(poll.registry(), first.key()).is_none());

        let (b, peer_b, _cb) = loopback_pair();
        let second = conns
            .insert(
                poll.registry(),
                b.into(),
                peer_b,
                Interest::READABLE,
                false,
                |id| id.key() as u32 + 10,
            )
            .unwrap();
        // Same slot, new id: the first connection's id finds nothing.
        assert_eq!(second.key(), first.key());
        assert_ne!(second, first);
        assert!(conns.get_live(first).is_none());
        let c = conns.get_live(second).unwrap();
        assert_eq!((c.state, c.authed), (second.key() as u32 + 10, false));
        assert_eq!((first.serial(), second.serial()), (1, 2));
        assert_eq!(conns.len(), 1);
    }
}
