//! Subscribers coming in: the accept loop with the connection limit and its
//! refusal line, admission (registration, socket options, a session with an
//! id that is never reused), and the authentication deadline queue that
//! closes a subscriber that did not `AUTH` in time.
//!
//! Single owner: the publisher thread.

use std::collections::VecDeque;
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Interest, Token};

use crate::metrics::counters::{bump, set};
use crate::protocol::resp;
use crate::publish::publisher::Publisher;
use crate::publish::session::Session;
use crate::sys::net::{accept_one, Accepted};

/// Subscribers waiting to authenticate: (deadline, key, session id), in
/// deadline order (deadlines are now + a fixed timeout, so pushes arrive in
/// order). Bounded by the sessions accepted within one timeout.
#[derive(Debug, Default)]
pub(crate) struct PendingAuth {
    queue: VecDeque<(u64, usize, u64)>,
}

impl Publisher {
    /// Accepts every waiting connection.
    pub(super) fn accept_all(&mut self) {
        loop {
            match accept_one(&self.listener) {
                Accepted::Conn(stream, peer) => self.admit(stream, peer),
                Accepted::Drained => return,
                Accepted::Failed(e) => {
                    log::warn!("subscriber accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn admit(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        let p = &self.counters.publish;
        if self.sessions.len() >= self.settings.max_conns {
            bump(&p.subscribers_refused, 1);
            let _ = std::io::Write::write(&mut stream, b"-ERR max number of clients reached\r\n");
            log::warn!(
                "subscriber from {peer} refused: limit of {} reached",
                self.settings.max_conns
            );
            return;
        }
        let entry = self.sessions.vacant_entry();
        let key = entry.key();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            log::warn!("subscriber from {peer}: register failed: {e}");
            return;
        }
        let _ = stream.set_nodelay(true);
        if self.settings.sndbuf > 0 {
            // What sits in the kernel can no longer be conflated: keep it small.
            let _ = socket2::SockRef::from(&stream).set_send_buffer_size(self.settings.sndbuf);
        }
        let id = self.next_session_id;
        self.next_session_id += 1;
        let authed = self.settings.token.is_none();
        if !authed {
            let deadline = self.clock.now_ns() + self.settings.auth_timeout_ns;
            self.pending_auth.queue.push_back((deadline, key, id));
        }
        entry.insert(Session::new(
            id,
            stream,
            peer.to_string(),
            self.settings.hwm,
            self.table.capacity(),
            authed,
            self.clock.now_ns(),
        ));
        bump(&p.subscribers_accepted, 1);
        set(&p.subscribers_open, self.sessions.len() as u64);
    }

    /// Closes subscribers whose authentication deadline passed.
    pub(super) fn expire_unauthenticated(&mut self, now_ns: u64) {
        while let Some(&(deadline, key, id)) = self.pending_auth.queue.front() {
            if deadline > now_ns {
                return;
            }
            self.pending_auth.queue.pop_front();
            let Some(sess) = self.sessions.get_mut(key) else {
                continue;
            };
            if sess.id == id && sess.state().awaits_auth() {
                resp::append_error(sess.out(), b"ERR authentication timeout");
                sess.close_after_flush();
                log::warn!(
                    "subscriber {}: no AUTH within the timeout; closing",
                    sess.peer
                );
                bump(&self.counters.publish.auth_failures, 1);
                self.queue_flush(key);
            }
        }
        self.flush();
    }
}
