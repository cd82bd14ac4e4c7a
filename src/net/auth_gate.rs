//! The authentication gate of a port: the token, the queue of deadlines of
//! connections that have not authenticated yet, and the `AUTH <token>`
//! first-line step of the line protocols (feed, orders).
//!
//! Every connection of a port gets the same timeout, so deadlines are
//! appended in order and the queue stays sorted: expiry pops from the front
//! and costs nothing while no deadline has passed. An entry names a
//! [`ConnId`], so a deadline whose connection has closed (and whose slab key
//! a later connection took) is skipped, never applied to the newcomer.
//! The publisher's RESP `AUTH` command stays in its command handling; the
//! deadlines are the same for all three ports.
//!
//! Time is injected: every call takes `now_ns` from the loop's clock.
//!
//! Single owner: the event loop thread of the port.

use std::collections::VecDeque;

use crate::auth::{check_line, Token as AuthToken, LINE_INVALID};

use super::conns::ConnId;
use super::lines::{LineEvent, LineReader};

/// What the first line of a line-protocol connection decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthStep {
    /// No complete line yet: read more.
    NeedMore,
    /// The token matched: answer [`crate::auth::LINE_OK`] and go on.
    Passed,
    /// Refused: send this line and close.
    Refused(&'static [u8]),
}

/// A port's token and its pending authentication deadlines.
#[derive(Debug)]
pub(crate) struct AuthGate {
    token: Option<AuthToken>,
    timeout_ns: u64,
    /// (deadline, connection), in deadline order.
    pending: VecDeque<(u64, ConnId)>,
}

impl AuthGate {
    /// A gate for `token` (`None`: every connection starts authenticated)
    /// closing connections that have not authenticated `timeout_ns` after
    /// their accept.
    pub(crate) fn new(token: Option<AuthToken>, timeout_ns: u64) -> Self {
        AuthGate {
            token,
            timeout_ns,
            pending: VecDeque::new(),
        }
    }

    /// True when connections must authenticate (a token is configured).
    #[inline]
    pub(crate) fn required(&self) -> bool {
        self.token.is_some()
    }

    /// The token, for a protocol that checks it itself (RESP `AUTH`).
    pub(crate) fn token(&self) -> Option<&AuthToken> {
        self.token.as_ref()
    }

    /// Starts the clock of a new connection (does nothing without a token).
    pub(crate) fn arm(&mut self, id: ConnId, now_ns: u64) {
        if self.required() {
            self.pending.push_back((now_ns + self.timeout_ns, id));
        }
    }

    /// The next connection whose deadline is at or before `now_ns`, removed
    /// from the queue. The caller closes it if it is still open
    /// ([`super::Conns::get_live`]) and still not authenticated.
    pub(crate) fn next_expired(&mut self, now_ns: u64) -> Option<ConnId> {
        match self.pending.front() {
            Some(&(deadline, id)) if deadline <= now_ns => {
                self.pending.pop_front();
                Some(id)
            }
            _ => None,
        }
    }

    /// Deadlines still queued (including those of closed connections).
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Checks the first line buffered in `reader` against the token
    /// (`AUTH <token>`; see [`crate::auth::check_line`]). An overlong first
    /// line is refused as an invalid token.
    ///
    /// # Panics
    /// Without a token (call only while [`required`](Self::required)).
    pub(crate) fn first_line(&self, reader: &mut LineReader) -> AuthStep {
        let Some(token) = &self.token else {
            unreachable!("an AUTH step without a token")
        };
        match reader.next_line() {
            None => AuthStep::NeedMore,
            Some(LineEvent::Line(line)) => match check_line(token, line).refusal() {
                None => AuthStep::Passed,
                Some(reply) => AuthStep::Refused(reply),
            },
            Some(LineEvent::TooLong { .. }) => AuthStep::Refused(LINE_INVALID),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{LINE_INVALID, LINE_REQUIRED};
    use crate::net::test_util::loopback_pair;
    use crate::net::Conns;
    use mio::{Interest, Poll};

    #[test]
    fn deadlines_expire_in_order_at_the_injected_time() {
        let mut gate = AuthGate::new(Some(AuthToken::new(b"t")), 1_000);
        let (a, b) = (ConnId::from_u64(1), ConnId::from_u64(2));
        gate.arm(a, 10);
        gate.arm(b, 500);
        assert_eq!(gate.next_expired(1_009), None);
        assert_eq!(gate.next_expired(1_010), Some(a));
        assert_eq!(gate.next_expired(1_010), None);
        assert_eq!(gate.next_expired(5_000), Some(b));
        assert_eq!(gate.pending_len(), 0);
    }

    #[test]
    fn without_a_token_nothing_is_armed() {
        let mut gate = AuthGate::new(None, 0);
        assert!(!gate.required());
        gate.arm(ConnId::from_u64(1), 0);
        assert_eq!(gate.next_expired(u64::MAX), None);
    }

    #[test]
    fn an_expired_deadline_never_reaches_a_later_connection_on_its_key() {
        let poll = Poll::new().unwrap();
        let mut conns: Conns<()> = Conns::with_capacity(1);
        let mut gate = AuthGate::new(Some(AuthToken::new(b"t")), 100);
        let (s, peer, _c1) = loopback_pair();
        let old = conns
            .insert(
                poll.registry(),
                s.into(),
                peer,
                Interest::READABLE,
                false,
                |_| (),
            )
            .unwrap();
        gate.arm(old, 0);
        conns.remove(poll.registry(), old.key());
        let (s, peer, _c2) = loopback_pair();
        let new = conns
            .insert(
                poll.registry(),
                s.into(),
                peer,
                Interest::READABLE,
                false,
                |_| (),
            )
            .unwrap();
        gate.arm(new, 50);
        assert_eq!(new.key(), old.key());
        let first = gate.next_expired(100).unwrap();
        assert!(
            conns.get_live(first).is_none(),
            "old deadline hit the newcomer"
        );
        assert_eq!(gate.next_expired(100), None);
        let second = gate.next_expired(150).unwrap();
        assert!(conns.get_live(second).is_some());
    }

    #[test]
    fn first_line_passes_refuses_or_waits() {
        let gate = AuthGate::new(Some(AuthToken::new(b"s3cret")), 0);
        let step = |bytes: &[u8]| {
            let mut r = LineReader::new(16, 64);
            r.read_from(&mut &bytes[..]).unwrap();
            gate.first_line(&mut r)
        };
        assert_eq!(step(b"AUTH s3cret\r\n"), AuthStep::Passed);
        assert_eq!(step(b"AUTH s3cr"), AuthStep::NeedMore);
        assert_eq!(step(b"AUTH wrong\n"), AuthStep::Refused(LINE_INVALID));
        assert_eq!(step(b"PING\n"), AuthStep::Refused(LINE_REQUIRED));
        assert_eq!(
            step(b"AUTH 0123456789abcdef"),
            AuthStep::Refused(LINE_INVALID)
        );
    }
}
