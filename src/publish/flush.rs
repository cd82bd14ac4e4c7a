//! Subscriber output toward the sockets: the flush list, the non-blocking
//! write of each queued buffer (each `write` call timed in the socket-write
//! stage), closing sessions whose last answer is written or whose peer is
//! gone, and the sessions as [`Outlets`] of the fan-out (a session asked to
//! make room writes what it holds, if its socket is not known to be full).
//!
//! Single owner: the publisher thread.

use slab::Slab;

use crate::metrics::counters::{bump, Counters};
use crate::metrics::{Stage, StageRecorder};
use crate::publish::fanout::{Outlet, Outlets};
use crate::publish::outbuf::SubscriberBuffer;
use crate::publish::publisher::Publisher;
use crate::publish::routes::SubKey;
use crate::publish::session::{Session, WriteState};
use crate::publish::work_list::WorkList;
use crate::sys::clock::MonoClock;

impl Publisher {
    /// A writable event for `key`: its socket takes bytes again.
    pub(super) fn writable(&mut self, key: usize) {
        if let Some(s) = self.sessions.get_mut(key) {
            s.writable();
            self.flush_list.push(&mut s.flush_mark, key);
        }
    }

    /// Puts `key` on the flush list (once).
    pub(super) fn queue_flush(&mut self, key: usize) {
        if let Some(s) = self.sessions.get_mut(key) {
            self.flush_list.push(&mut s.flush_mark, key);
        }
    }

    /// Writes every queued buffer; returns how many sessions wrote something.
    pub(super) fn flush(&mut self) -> usize {
        let mut wrote = 0;
        let mut i = 0;
        while i < self.flush_list.len() {
            let key = self.flush_list.key(i);
            i += 1;
            let Some(sess) = self.sessions.get_mut(key) else {
                continue;
            };
            WorkList::leave(&mut sess.flush_mark);
            if sess.state().is_failed() {
                self.close(key);
                continue;
            }
            if sess.write_state() == WriteState::Blocked || sess.buf.buffered() == 0 {
                if sess.state().is_closing() && sess.buf.buffered() == 0 {
                    self.close(key);
                }
                continue;
            }
            match write_session(sess, &self.clock, &mut self.recorder, &self.counters) {
                Ok(n) => {
                    if n > 0 {
                        wrote += 1;
                    }
                    if sess.state().is_closing() && sess.buf.buffered() == 0 {
                        self.close(key);
                    }
                }
                Err(e) => {
                    log::debug!("subscriber {}: write failed: {e}; closing", sess.peer);
                    self.close(key);
                }
            }
        }
        self.flush_list.clear();
        if !self.batch_recv.is_empty() {
            let end = self.clock.now_ns();
            for &r in &self.batch_recv {
                self.recorder.record_span(Stage::EngineE2e, r, end);
            }
            self.batch_recv.clear();
        }
        wrote
    }
}

/// Writes a session's buffer without blocking, recording each `write` call
/// in the socket-write stage. Returns the bytes written.
fn write_session(
    sess: &mut Session,
    clock: &MonoClock,
    recorder: &mut StageRecorder,
    counters: &Counters,
) -> std::io::Result<usize> {
    let mut t = clock.now_ns();
    let (n, blocked) = sess.buf.write_to(&mut sess.stream, |_| {
        let now = clock.now_ns();
        recorder.record_span(Stage::SocketWrite, t, now);
        t = now;
    })?;
    sess.wrote(blocked);
    bump(&counters.publish.bytes_written, n as u64);
    Ok(n)
}

/// The sessions as the fan-out's outlets, for one update.
#[derive(Debug)]
pub(super) struct SessionOutlets<'a> {
    pub(super) sessions: &'a mut Slab<Session>,
    pub(super) flush_list: &'a mut WorkList,
    pub(super) attention: &'a mut WorkList,
    pub(super) clock: &'a MonoClock,
    pub(super) recorder: &'a mut StageRecorder,
    pub(super) counters: &'a Counters,
}

/// One session as an outlet.
#[derive(Debug)]
pub(super) struct SessionOutlet<'s, 'a> {
    key: SubKey,
    sess: &'s mut Session,
    flush_list: &'s mut WorkList,
    attention: &'s mut WorkList,
    clock: &'a MonoClock,
    recorder: &'s mut StageRecorder,
    counters: &'a Counters,
}

impl<'a> Outlets for SessionOutlets<'a> {
    type Outlet<'s>
        = SessionOutlet<'s, 'a>
    where
        Self: 's;

    #[inline]
    fn outlet(&mut self, sub: SubKey) -> SessionOutlet<'_, 'a> {
        SessionOutlet {
            key: sub,
            sess: &mut self.sessions[sub],
            flush_list: self.flush_list,
            attention: self.attention,
            clock: self.clock,
            recorder: self.recorder,
            counters: self.counters,
        }
    }
}

impl Outlet for SessionOutlet<'_, '_> {
    #[inline]
    fn buffer(&mut self) -> &mut SubscriberBuffer {
        &mut self.sess.buf
    }

    fn make_room(&mut self) {
        let s = &mut *self.sess;
        if s.write_state() == WriteState::Blocked || s.state().is_failed() {
            return;
        }
        if write_session(s, self.clock, self.recorder, self.counters).is_err() {
            s.fail();
            self.flush_list.push(&mut s.flush_mark, self.key);
        }
    }

    #[inline]
    fn has_output(&mut self) {
        self.flush_list.push(&mut self.sess.flush_mark, self.key);
    }

    fn became_slow(&mut self) {
        self.attention.push(&mut self.sess.attention_mark, self.key);
    }
}
