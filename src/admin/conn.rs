//! One admin connection's life: read a request under its bounds, wait for
//! its answer, write it, let the client close.
//!
//! ```text
//!  accept ─▶ Reading ──complete──▶ Handling ──answer──▶ Writing ──flushed──▶ Draining ─▶ closed
//!              │  over a bound / deadline: the error's answer ──▲                 (EOF or deadline)
//!              └─ peer closed ─▶ closed
//! ```
//!
//! The socket is non-blocking and owned by the admin event loop; a
//! connection never blocks a thread, so a client that stalls anywhere only
//! holds its own slot until its deadline. Time is passed in (`now`), so
//! the deadlines are tested without waiting.
//!
//! # Invariants
//! - Reading: at most `head_max` + one read chunk bytes are buffered; the
//!   body is counted and dropped, never stored.
//! - Every phase but Handling has a deadline; Handling always ends because
//!   the workers answer every request they take.

use std::io::{ErrorKind, Read, Write};
use std::time::Instant;

use super::http::{parse_head, Limits, Request, RequestError, Response};

/// Bytes read per `read` call.
const CHUNK: usize = 4 * 1024;
/// Reads per readable event while draining, so a client that floods after
/// its answer cannot hold the event loop.
const DRAIN_READS: usize = 16;

/// The pure part of reading a request: bytes in, a request out.
#[derive(Debug, Default)]
pub(crate) struct RequestReader {
    /// Bytes of an incomplete head.
    head: Vec<u8>,
    /// The request once its head is complete, and the body bytes still to come.
    body: Option<(Request, usize)>,
}

impl RequestReader {
    /// Takes the next bytes from the client; `Ok(Some)` once the head and
    /// the whole announced body have arrived.
    ///
    /// # Errors
    /// When the head breaks a bound or is not HTTP/1.x.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        limits: &Limits,
    ) -> Result<Option<Request>, RequestError> {
        match &mut self.body {
            Some((_, left)) => *left = left.saturating_sub(bytes.len()),
            None => {
                self.head.extend_from_slice(bytes);
                let Some(h) = parse_head(&self.head, limits)? else {
                    return Ok(None);
                };
                let extra = self.head.len() - h.head_len;
                self.body = Some((h.request, h.body_len.saturating_sub(extra)));
                self.head = Vec::new();
            }
        }
        if matches!(self.body, Some((_, 0))) {
            Ok(self.body.take().map(|(r, _)| r))
        } else {
            Ok(None)
        }
    }
}

/// What the event loop does next with a connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing until the next event.
    Idle,
    /// A complete request: hand it to a worker.
    Dispatch(Request),
    /// The request is refused: answer with this.
    Refuse(Response),
    /// The answer is written: half-close the socket, then drain.
    Flushed,
    /// Close the connection.
    Close,
}

#[derive(Debug)]
enum Phase {
    Reading(RequestReader),
    Handling,
    Writing { out: Vec<u8>, at: usize },
    Draining,
}

/// One connection of the admin endpoint.
#[derive(Debug)]
pub(crate) struct Conn<S> {
    stream: S,
    /// Unique for the server's life (slab slots are reused; ids are not),
    /// so a late answer never reaches the wrong client.
    id: u64,
    phase: Phase,
    deadline: Option<Instant>,
}

impl<S: Read + Write> Conn<S> {
    /// A connection just accepted at `now`.
    pub(crate) fn new(stream: S, id: u64, now: Instant, limits: &Limits) -> Self {
        Conn {
            stream,
            id,
            phase: Phase::Reading(RequestReader::default()),
            deadline: Some(now + limits.read_timeout),
        }
    }

    /// Its id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The socket, to half-close it.
    pub(crate) fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The socket, to deregister and close it.
    pub(crate) fn into_stream(self) -> S {
        self.stream
    }

    /// When it times out, if it can.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The socket is readable (or the peer closed).
    pub(crate) fn readable(&mut self, limits: &Limits) -> Next {
        match self.phase {
            Phase::Reading(_) => self.read_request(limits),
            Phase::Draining => self.drain(),
            // The request is in; what else arrives waits (or is drained later).
            Phase::Handling | Phase::Writing { .. } => Next::Idle,
        }
    }

    /// The socket is writable.
    pub(crate) fn writable(&mut self) -> Next {
        match self.phase {
            Phase::Writing { .. } => self.write(),
            _ => Next::Idle,
        }
    }

    /// Starts writing `answer` (at most `write_timeout` from `now`).
    pub(crate) fn answer(&mut self, answer: Vec<u8>, now: Instant, limits: &Limits) -> Next {
        self.phase = Phase::Writing { out: answer, at: 0 };
        self.deadline = Some(now + limits.write_timeout);
        self.write()
    }

    /// Checks the deadline at `now`.
    pub(crate) fn expire(&mut self, now: Instant, limits: &Limits) -> Next {
        if self.deadline.is_none_or(|d| now < d) {
            return Next::Idle;
        }
        match self.phase {
            Phase::Reading(_) => {
                Next::Refuse(RequestError::Timeout(limits.read_timeout).response())
            }
            Phase::Handling => Next::Idle,
            Phase::Writing { .. } | Phase::Draining => Next::Close,
        }
    }

    fn read_request(&mut self, limits: &Limits) -> Next {
        let mut chunk = [0u8; CHUNK];
        loop {
            let n = match self.stream.read(&mut chunk) {
                Ok(0) => return Next::Close,
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Next::Close,
            };
            let Phase::Reading(reader) = &mut self.phase else {
                return Next::Idle;
            };
            match reader.feed(&chunk[..n], limits) {
                Ok(None) => {}
                Ok(Some(req)) => {
                    self.phase = Phase::Handling;
                    self.deadline = None;
                    return Next::Dispatch(req);
                }
                Err(e) => {
                    self.phase = Phase::Handling;
                    return Next::Refuse(e.response());
                }
            }
        }
    }

    fn write(&mut self) -> Next {
        let Phase::Writing { out, at } = &mut self.phase else {
            return Next::Idle;
        };
        while *at < out.len() {
            match self.stream.write(&out[*at..]) {
                Ok(0) => return Next::Close,
                Ok(n) => *at += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        // A TLS stream may hold the last record: the answer is written
        // when the socket has it all.
        match self.stream.flush() {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Idle,
            Err(_) => return Next::Close,
        }
        self.phase = Phase::Draining;
        Next::Flushed
    }

    fn drain(&mut self) -> Next {
        let mut chunk = [0u8; CHUNK];
        for _ in 0..DRAIN_READS {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Next::Close,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Next::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Next::Close,
            }
        }
        Next::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::time::Duration;

    /// A scripted socket: reads return the queued chunks, then `WouldBlock`
    /// (or EOF once `closed`); writes take at most `room` bytes.
    #[derive(Default)]
    struct Script {
        input: VecDeque<Vec<u8>>,
        closed: bool,
        written: Vec<u8>,
        room: usize,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.input.pop_front() {
                Some(c) => {
                    buf[..c.len()].copy_from_slice(&c);
                    Ok(c.len())
                }
                None if self.closed => Ok(0),
                None => Err(ErrorKind::WouldBlock.into()),
            }
        }
    }

    impl Write for Script {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.room);
            if n == 0 {
                return Err(ErrorKind::WouldBlock.into());
            }
            self.room -= n;
            self.written.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn conn(chunks: &[&str], now: Instant) -> Conn<Script> {
        let s = Script {
            input: chunks.iter().map(|c| c.as_bytes().to_vec()).collect(),
            ..Script::default()
        };
        Conn::new(s, 1, now, &Limits::default())
    }

    #[test]
    fn a_request_in_pieces_with_its_body_then_the_answer_then_close() {
        let l = Limits::default();
        let t0 = Instant::now();
        let mut c = conn(
            &[
                "POST /dlq/rep",
                "lay HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
            ],
            t0,
        );
        assert_eq!(c.readable(&l), Next::Idle, "body not all in yet");
        c.stream.input.push_back(b"cde".to_vec());
        let Next::Dispatch(req) = c.readable(&l) else {
            panic!("complete")
        };
        assert_eq!(req.path(), "/dlq/replay");
        assert_eq!(c.deadline(), None, "no deadline while a worker answers");
        assert_eq!(c.expire(t0 + Duration::from_secs(3600), &l), Next::Idle);
        c.stream.room = 10;
        let answer = b"HTTP/1.1 200 OK\r\n\r\nok".to_vec();
        assert_eq!(
            c.answer(answer.clone(), t0, &l),
            Next::Idle,
            "partial write"
        );
        c.stream.room = 100;
        assert_eq!(c.writable(), Next::Flushed);
        assert_eq!(c.stream.written, answer);
        c.stream.closed = true;
        assert_eq!(c.readable(&l), Next::Close);
    }

    #[test]
    fn a_half_sent_request_line_gets_408_at_its_deadline() {
        let l = Limits::default();
        let t0 = Instant::now();
        let mut c = conn(&["GET /heal"], t0);
        assert_eq!(c.readable(&l), Next::Idle);
        assert_eq!(
            c.expire(t0 + l.read_timeout - Duration::from_millis(1), &l),
            Next::Idle
        );
        match c.expire(t0 + l.read_timeout, &l) {
            Next::Refuse(r) => assert_eq!(r.status, 408),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_huge_body_is_refused_before_it_is_read() {
        let l = Limits::default();
        let mut c = conn(
            &["POST /dlq/replay HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"],
            Instant::now(),
        );
        match c.readable(&l) {
            Next::Refuse(r) => assert_eq!(r.status, 413),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_endless_head_is_refused_at_its_bound() {
        let l = Limits::default();
        let t0 = Instant::now();
        let mut c = conn(&["GET / HTTP/1.1\r\n"], t0);
        assert_eq!(c.readable(&l), Next::Idle);
        let mut got = None;
        for _ in 0..100 {
            c.stream
                .input
                .push_back(b"X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(20));
            match c.readable(&l) {
                Next::Idle => {}
                other => {
                    got = Some(other);
                    break;
                }
            }
        }
        match got {
            Some(Next::Refuse(r)) => assert!(r.status == 431, "{}", r.status),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_client_that_never_reads_its_answer_is_closed_at_the_write_deadline() {
        let l = Limits::default();
        let t0 = Instant::now();
        let mut c = conn(&["GET /metrics HTTP/1.1\r\n\r\n"], t0);
        assert!(matches!(c.readable(&l), Next::Dispatch(_)));
        assert_eq!(c.answer(vec![b'x'; 100], t0, &l), Next::Idle);
        assert_eq!(c.writable(), Next::Idle);
        assert_eq!(c.expire(t0 + l.write_timeout, &l), Next::Close);
    }
}
