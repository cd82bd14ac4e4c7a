//! One subscriber connection: its socket, its input buffer, its
//! subscriptions, and its bounded output buffer (see [`super::outbuf`]).
//!
//! Single owner: the publisher thread.

use std::io::{ErrorKind, Read};
use std::ops::Range;

use indexmap::IndexSet;
use mio::net::TcpStream;

use crate::metrics::report::SubscriberStats;
use crate::protocol::resp::framing::Proto;
use crate::publish::outbuf::SubscriberBuffer;

/// Bytes of the input buffer: one command must fit in it.
pub const INBUF_LEN: usize = 64 * 1024;

/// Result of reading the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Read this many bytes; there may be more.
    Data(usize),
    /// Nothing more to read now.
    WouldBlock,
    /// The input buffer is full (commands must be consumed first).
    BufferFull,
    /// The peer closed its sending side.
    Eof,
}

/// A subscriber connection.
#[derive(Debug)]
pub struct Session {
    /// Engine-assigned number (1-based, never reused).
    pub id: u64,
    /// The socket.
    pub stream: TcpStream,
    /// Peer address as text.
    pub peer: String,
    /// Input bytes; `..in_len` are unconsumed.
    pub(crate) inbuf: Box<[u8]>,
    pub(crate) in_len: usize,
    /// Argument ranges of the command being handled (reused).
    pub args: Vec<Range<usize>>,
    /// Output buffer and slow-subscriber state.
    pub buf: SubscriberBuffer,
    /// Subscribed channels, in subscription order.
    pub channels: IndexSet<Box<[u8]>>,
    /// Subscribed patterns, in subscription order.
    pub patterns: IndexSet<Box<[u8]>>,
    /// The peer will send nothing more.
    pub read_eof: bool,
    /// Close once the output buffer is written (after QUIT or a fatal protocol error).
    pub closing: bool,
    /// The last write hit `WouldBlock`; wait for a writable event.
    pub write_blocked: bool,
    /// A write failed: the peer is gone; close at the next flush.
    pub failed: bool,
    /// On the publisher's flush list.
    pub queued_for_flush: bool,
    /// On the publisher's attention list (pending symbols or held-back input).
    pub on_attention: bool,
    /// Passed `AUTH` (true from the start when no token is configured).
    pub authed: bool,
    /// The protocol it speaks: RESP2 until `HELLO 3`, again after `HELLO 2` or `RESET`.
    pub proto: Proto,
    /// `CLIENT SETNAME` / `HELLO … SETNAME` (validated: printable, no spaces).
    pub name: Option<Box<[u8]>>,
    /// `CLIENT SETINFO LIB-NAME` / `LIB-VER` (validated like the name).
    pub lib_name: Option<Box<[u8]>>,
    /// See [`Session::lib_name`].
    pub lib_ver: Option<Box<[u8]>>,
    /// `SELECT`ed database (0–15): accepted and shown, pub/sub ignores it as Redis does.
    pub db: u8,
    /// When it was accepted, monotonic ns (for `CLIENT INFO age=`).
    pub created_ns: u64,
    /// When its last command ran, monotonic ns (for `CLIENT INFO idle=`).
    pub last_cmd_ns: u64,
}

impl Session {
    /// A session for a freshly accepted socket.
    pub fn new(
        id: u64,
        stream: TcpStream,
        peer: String,
        hwm: usize,
        max_symbols: usize,
        authed: bool,
        now_ns: u64,
    ) -> Self {
        Session {
            id,
            stream,
            peer,
            inbuf: vec![0u8; INBUF_LEN].into_boxed_slice(),
            in_len: 0,
            args: Vec::with_capacity(16),
            buf: SubscriberBuffer::new(hwm, max_symbols),
            channels: IndexSet::new(),
            patterns: IndexSet::new(),
            read_eof: false,
            closing: false,
            write_blocked: false,
            failed: false,
            queued_for_flush: false,
            on_attention: false,
            authed,
            proto: Proto::Resp2,
            name: None,
            lib_name: None,
            lib_ver: None,
            db: 0,
            created_ns: now_ns,
            last_cmd_ns: now_ns,
        }
    }

    /// Channels plus patterns: the count Redis reports in subscribe replies.
    pub fn subscription_count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Where command replies are appended.
    pub fn out(&mut self) -> &mut Vec<u8> {
        self.buf.replies()
    }

    /// Reads from the socket into the input buffer.
    ///
    /// # Errors
    /// A socket error other than `WouldBlock`/`Interrupted`.
    pub fn read_some(&mut self) -> std::io::Result<ReadOutcome> {
        if self.in_len == self.inbuf.len() {
            return Ok(ReadOutcome::BufferFull);
        }
        loop {
            match self.stream.read(&mut self.inbuf[self.in_len..]) {
                Ok(0) => {
                    self.read_eof = true;
                    return Ok(ReadOutcome::Eof);
                }
                Ok(n) => {
                    self.in_len += n;
                    return Ok(ReadOutcome::Data(n));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(ReadOutcome::WouldBlock),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Drops `n` bytes of handled input from the front.
    pub fn consume_input(&mut self, n: usize) {
        let n = n.min(self.in_len);
        self.inbuf.copy_within(n..self.in_len, 0);
        self.in_len -= n;
    }

    /// The figures reports show, as of `now_ns`.
    pub fn stats(&self, now_ns: u64) -> SubscriberStats {
        let b = &self.buf.stats;
        SubscriberStats {
            id: self.id,
            peer: self.peer.clone(),
            client_name: self
                .name
                .as_deref()
                .map(|n| String::from_utf8_lossy(n).into_owned()),
            connected: true,
            subscriptions: self.subscription_count() as u64,
            frames: b.frames,
            bytes_written: b.bytes_written,
            conflations: b.conflations,
            slow_episodes: b.slow_episodes,
            buffered_bytes: self.buf.buffered() as u64,
            max_buffered_bytes: b.max_buffered,
            pending_symbols: self.buf.pending_len() as u64,
            staleness_us: self
                .buf
                .oldest_pending_ns()
                .map_or(0, |t| now_ns.saturating_sub(t) / 1_000),
        }
    }
}
