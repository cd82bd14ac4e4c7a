//! One connection's byte stream, plaintext or TLS: what every port's
//! handler reads and writes, so a handler is the same code on a TLS port.
//!
//! ```text
//!  handler ── Read/Write ──▶ Stream::Plain(TcpStream)
//!                         └─▶ Stream::Tls: first byte 0x16? ─no─▶ the port's plaintext
//!                              │ yes                              error line, close
//!                              ▼
//!                 rustls::ServerConnection ⇄ TcpStream (non-blocking, mio)
//! ```
//!
//! # Contracts (the TLS side)
//!
//! * **Read** returns plaintext rustls already decrypted first; only when it
//!   holds none does it read the socket (`read_tls` → `process_new_packets`,
//!   writing the handshake's answers). `WouldBlock` means the *socket*
//!   would block: rustls holds no plaintext and the socket was read dry,
//!   so mio's edge-triggered readiness will report the next bytes. A
//!   handler that stops before `WouldBlock` must come back on its own
//!   (the kit's `turns.again(key)`, the publisher's attention list), as it
//!   already must for bytes left in a plaintext socket.
//! * **Write** first pushes out what rustls still holds for the socket;
//!   only when that is empty does it encrypt at most [`TLS_CHUNK`] bytes
//!   and push them. So rustls never holds more than one chunk of
//!   ciphertext, `Ok(n)` means `n` bytes are the connection's (sent, or
//!   encrypted and queued), and `WouldBlock` means the socket would block
//!   (a writable event follows).
//! * **Flush** pushes what rustls holds; `WouldBlock` while some is left.
//!   [`super::WriteBuf`] flushes after its last write, so "all written"
//!   includes the TLS layer; a writable event should flush (handlers do:
//!   a connection whose buffer is empty may still hold ciphertext).
//! * **Bounds**: rustls' send buffers are limited to [`TLS_BUFFER_LIMIT`];
//!   its receive side to one record of plaintext (rustls' own bound). A
//!   peer that never finishes its handshake gets at most that much output
//!   buffered, then its writes fail (`WriteZero`) and it is closed.
//! * **Raw socket**: [`Stream::tcp`] and `AsFd` give the TCP socket, for
//!   `SIOCOUTQ`, `TCP_INFO` and `TCP_NOTSENT_LOWAT` (the pacing of
//!   `publish/flush.rs`): under TLS they count ciphertext, about 22 bytes
//!   more per record than the plaintext the handler wrote.
//!
//! Plaintext on a TLS port: the first byte a client sends on TLS is a
//! handshake record (`0x16`). Anything else gets the port's plaintext
//! error line (RESP `-ERR`, an order `REJECT`, an HTTP 400), is counted
//! (`plaintext_refused`, warning `tls_plaintext`) and the read fails, so
//! the handler closes the connection as after any read error.
//!
//! Single owner: the event loop thread of the port.

use std::io::{self, ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;

use mio::event::Source;
use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use rustls::{ServerConfig, ServerConnection};

use crate::logging::repeat::warn_repeating;
use crate::metrics::counters::bump;
use crate::metrics::tls_counters::PortTlsCounters;
use crate::metrics::Counters;
use crate::model::warning::WarnKind;
use crate::tls::TlsPortName;

/// Most plaintext encrypted per `write` (one TLS record's worth).
pub(crate) const TLS_CHUNK: usize = 16 * 1024;
/// Limit of rustls' send buffers per connection (plaintext before the
/// handshake ends; ciphertext after).
pub(crate) const TLS_BUFFER_LIMIT: usize = 32 * 1024;
/// The TLS record type of a handshake: every TLS client's first byte.
const HANDSHAKE_RECORD: u8 = 0x16;
/// Plaintext read and dropped before the refusal line is written, so the
/// close that follows is a FIN the client reads after the line, not a
/// reset that can discard it.
const REFUSAL_DRAIN: usize = 16 * 1024;

/// A port's TLS: its server configuration, its plaintext refusal line, its
/// counters. Shared by the port's connections (one `Arc` clone each).
pub(crate) struct TlsPort {
    server: Arc<ServerConfig>,
    which: TlsPortName,
    refusal: &'static [u8],
    label: &'static str,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for TlsPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPort")
            .field("which", &self.which)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl TlsPort {
    /// `port`'s TLS with `server`; a plaintext peer reads `refusal`; log
    /// lines name a connection `peer_label`.
    pub(crate) fn new(
        server: Arc<ServerConfig>,
        port: TlsPortName,
        refusal: &'static [u8],
        peer_label: &'static str,
        counters: Arc<Counters>,
    ) -> Arc<TlsPort> {
        Arc::new(TlsPort {
            server,
            which: port,
            refusal,
            label: peer_label,
            counters,
        })
    }

    fn counters(&self) -> &PortTlsCounters {
        self.counters.tls.port(self.which)
    }
}

/// A connection's stream.
#[derive(Debug)]
pub(crate) enum Stream {
    /// A plaintext port.
    Plain(TcpStream),
    /// A TLS port.
    Tls(Box<TlsStream>),
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Self {
        Stream::Plain(s)
    }
}

impl Stream {
    /// The stream for a socket a port accepted from `peer`: plain, or TLS
    /// when the port has it. `None` (warned, counted as a repeating
    /// warning) when TLS cannot start; the caller drops the socket.
    pub(crate) fn accepted(
        sock: TcpStream,
        tls: Option<&Arc<TlsPort>>,
        label: &str,
        peer: std::net::SocketAddr,
    ) -> Option<Stream> {
        let Some(tls) = tls else {
            return Some(Stream::Plain(sock));
        };
        match Stream::tls(sock, tls) {
            Ok(s) => Some(s),
            Err(e) => {
                warn_repeating!(
                    WarnKind::TlsHandshakeFailed,
                    "{label} from {peer}: cannot start TLS: {e}"
                );
                None
            }
        }
    }

    /// A TLS server stream over an accepted socket.
    ///
    /// # Errors
    /// When rustls refuses the configuration (it was checked at start, so
    /// in practice never).
    pub(crate) fn tls(sock: TcpStream, port: &Arc<TlsPort>) -> Result<Stream, rustls::Error> {
        let mut conn = ServerConnection::new(Arc::clone(&port.server))?;
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Ok(Stream::Tls(Box::new(TlsStream {
            sock,
            conn,
            port: Arc::clone(port),
            phase: Phase::FirstByte,
            eof: false,
            notified: false,
            tx: Vec::with_capacity(TLS_CHUNK + 1024),
            tx_at: 0,
        })))
    }

    /// The TCP socket (socket options, `SIOCOUTQ`, `TCP_INFO`).
    #[inline]
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &t.sock,
        }
    }

    /// True while the TLS layer holds bytes the socket has not taken (a
    /// writable event should [`flush`](Write::flush)); always false for
    /// plaintext.
    #[inline]
    pub(crate) fn pending_tls(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => {
                t.phase == Phase::Tls && (t.tx_at < t.tx.len() || t.conn.wants_write())
            }
        }
    }

    /// Ciphertext encrypted and not yet taken by the socket: bytes the
    /// connection committed beyond the kernel's send queue (0 for
    /// plaintext). The pacing adds it to `SIOCOUTQ`.
    #[inline]
    pub(crate) fn pending_tls_bytes(&self) -> usize {
        match self {
            Stream::Plain(_) => 0,
            Stream::Tls(t) => t.tx.len() - t.tx_at,
        }
    }

    /// Half-closes the sending side (after a TLS `close_notify`, best effort).
    pub(crate) fn shutdown_write(&mut self) {
        if let Stream::Tls(t) = self {
            t.close_notify();
        }
        let _ = self.tcp().shutdown(Shutdown::Write);
    }
}

impl Read for Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.flush(),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.tcp().as_fd()
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.register(r, t, i),
            Stream::Tls(x) => x.sock.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.reregister(r, t, i),
            Stream::Tls(x) => x.sock.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.deregister(r),
            Stream::Tls(x) => x.sock.deregister(r),
        }
    }
}

/// Where a TLS connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing read yet: the first byte decides TLS or refusal.
    FirstByte,
    /// A TLS session (handshaking or established).
    Tls,
    /// Refused (plaintext, or a failed handshake): every read and write fails.
    Refused,
}

/// The TLS side of a [`Stream`].
pub(crate) struct TlsStream {
    sock: TcpStream,
    conn: ServerConnection,
    port: Arc<TlsPort>,
    phase: Phase,
    /// The socket read its end (`read_tls` returned 0).
    eof: bool,
    /// `close_notify` was queued (sent once; reads go on, to the peer's end).
    notified: bool,
    /// Ciphertext taken from rustls and not yet by the socket: `tx[tx_at..]`.
    /// At most one record's worth after the handshake (a write encrypts
    /// only once it is empty), so its length is what the connection holds
    /// beyond the kernel ([`Stream::pending_tls_bytes`]). Its capacity is
    /// kept: no allocation once it has held a record.
    tx: Vec<u8>,
    tx_at: usize,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("sock", &self.sock)
            .field("phase", &self.phase)
            .field("eof", &self.eof)
            .finish_non_exhaustive()
    }
}

fn refused() -> io::Error {
    io::Error::new(ErrorKind::ConnectionRefused, "plaintext on a TLS port")
}

impl TlsStream {
    /// Writes the ciphertext waiting in `tx`, then what rustls holds (moved
    /// into `tx` first); `Ok(true)` once both are empty, `Ok(false)` when
    /// the socket would block first.
    fn push(&mut self) -> io::Result<bool> {
        loop {
            while self.tx_at < self.tx.len() {
                match self.sock.write(&self.tx[self.tx_at..]) {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(n) => self.tx_at += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.tx.clear();
            self.tx_at = 0;
            if !self.conn.wants_write() {
                return Ok(true);
            }
            // Into our buffer (a Vec takes everything), then the socket.
            self.conn.write_tls(&mut self.tx)?;
        }
    }

    /// Looks at the first byte without taking it: `Ok(true)` for a TLS
    /// handshake, `Ok(false)` at EOF; a plaintext peer is answered here.
    fn first_byte(&mut self) -> io::Result<bool> {
        let mut b = [0u8; 1];
        let n = loop {
            match self.sock.peek(&mut b) {
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                other => break other?,
            }
        };
        if n == 0 {
            return Ok(false);
        }
        if b[0] == HANDSHAKE_RECORD {
            self.phase = Phase::Tls;
            return Ok(true);
        }
        self.phase = Phase::Refused;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN {
            match self.sock.read(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
        let _ = self.sock.write(self.port.refusal);
        let _ = self.sock.shutdown(Shutdown::Write);
        bump(&self.port.counters().plaintext_refused, 1);
        let peer = self.sock.peer_addr().map(|a| a.to_string());
        warn_repeating!(
            WarnKind::TlsPlaintext,
            "{} from {}: plaintext on a TLS port; refused",
            self.port.label,
            peer.as_deref().unwrap_or("?")
        );
        Err(refused())
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.phase {
            Phase::Tls => {}
            Phase::FirstByte => {
                if !self.first_byte()? {
                    return Ok(0);
                }
            }
            Phase::Refused => return Err(refused()),
        }
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The peer closed without `close_notify` (most clients do):
                // an end of input like any other.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.eof {
                return Ok(0);
            }
            match self.conn.read_tls(&mut self.sock) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.push()?;
                    return Err(e);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let handshaking = self.conn.is_handshaking();
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued an alert saying why: send it, then fail.
                let _ = self.push();
                self.phase = Phase::Refused;
                if handshaking {
                    bump(&self.port.counters().handshake_failures, 1);
                    let peer = self.sock.peer_addr().map(|a| a.to_string());
                    warn_repeating!(
                        WarnKind::TlsHandshakeFailed,
                        "{} from {}: TLS handshake failed: {e}",
                        self.port.label,
                        peer.as_deref().unwrap_or("?")
                    );
                }
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
            if handshaking && !self.conn.is_handshaking() {
                bump(&self.port.counters().handshakes, 1);
            }
            // The handshake's answers (or tickets, alerts); what the socket
            // does not take now goes on the next flush.
            self.push()?;
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.phase == Phase::Refused {
            return Err(refused());
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if !self.push()? {
            return Err(ErrorKind::WouldBlock.into());
        }
        // Before the handshake ends rustls keeps plaintext (up to its
        // limit; 0 past it, which the caller treats as a failed write).
        let n = self.conn.writer().write(&buf[..buf.len().min(TLS_CHUNK)])?;
        if n > 0 && self.phase == Phase::Tls {
            self.push()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.phase != Phase::Tls || self.push()? {
            Ok(())
        } else {
            Err(ErrorKind::WouldBlock.into())
        }
    }

    /// Queues `close_notify` and pushes what the socket takes now.
    fn close_notify(&mut self) {
        if self.phase == Phase::Tls && !self.conn.is_handshaking() && !self.notified {
            self.notified = true;
            self.conn.send_close_notify();
            let _ = self.push();
        }
    }
}

impl Drop for TlsStream {
    /// A closed TLS connection tells its peer (`close_notify`, one
    /// non-blocking write at most).
    fn drop(&mut self) {
        self.close_notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::test_util::loopback_pair;
    use std::io::{BufRead, BufReader};

    /// A CA-signed server config for `localhost`/127.0.0.1 and a client
    /// config trusting that CA.
    fn configs() -> (Arc<ServerConfig>, Arc<rustls::ClientConfig>) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.der().clone()).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        (Arc::new(server), Arc::new(client))
    }

    fn port(server: Arc<ServerConfig>, counters: &Arc<Counters>) -> Arc<TlsPort> {
        TlsPort::new(
            server,
            TlsPortName::Subscribers,
            b"-ERR this port requires TLS\r\n",
            "subscriber",
            Arc::clone(counters),
        )
    }

    /// Drives the server side (non-blocking) until `done`, answering
    /// nothing: reads into `got`.
    fn serve_until(s: &mut Stream, got: &mut Vec<u8>, mut done: impl FnMut(&[u8]) -> bool) {
        let mut buf = [0u8; 1024];
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done(got) {
            assert!(std::time::Instant::now() < end, "timed out; got {got:?}");
            match s.read(&mut buf) {
                Ok(0) => panic!("EOF"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn a_tls_client_is_served_and_a_large_answer_arrives_whole() {
        let (server, client) = configs();
        let counters = Arc::new(Counters::default());
        let p = port(server, &counters);
        let (sock, _peer, client_sock) = loopback_pair();
        let mut s = Stream::tls(sock, &p).unwrap();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(client, name).unwrap();
        client_sock.set_nonblocking(false).unwrap();
        // The client on its own thread (blocking): sends a line, reads 1 MiB.
        let t = std::thread::spawn(move || {
            let mut tls = rustls::StreamOwned::new(conn, client_sock);
            tls.write_all(b"PING\r\n").unwrap();
            let mut got = vec![0u8; 1 << 20];
            tls.read_exact(&mut got).unwrap();
            got
        });
        let mut got = Vec::new();
        serve_until(&mut s, &mut got, |g| g.ends_with(b"\r\n"));
        assert_eq!(got, b"PING\r\n");
        // 1 MiB through a non-blocking socket: partial writes, WouldBlock,
        // and the flush that pushes the last chunk.
        let answer: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        let mut out = crate::net::WriteBuf::new(1 << 20, 2 << 20);
        out.append(&answer);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while out.write_to(&mut s).unwrap() == crate::net::Flushed::Blocked || s.pending_tls() {
            // What the TLS layer holds beyond the kernel: one record at most.
            assert!(
                s.pending_tls_bytes() <= TLS_CHUNK + 64,
                "{}",
                s.pending_tls_bytes()
            );
            assert!(std::time::Instant::now() < end);
            std::thread::yield_now();
        }
        assert_eq!(t.join().unwrap(), answer);
        let c = counters.tls.port(TlsPortName::Subscribers);
        assert_eq!(c.handshakes.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn plaintext_gets_the_ports_line_and_is_counted() {
        let (server, _) = configs();
        let counters = Arc::new(Counters::default());
        let p = port(server, &counters);
        let (sock, _peer, mut client) = loopback_pair();
        let mut s = Stream::tls(sock, &p).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(
            s.read(&mut buf).unwrap_err().kind(),
            ErrorKind::WouldBlock,
            "nothing sent yet"
        );
        client.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        client.set_nonblocking(false).unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let e = loop {
            match s.read(&mut buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    assert!(std::time::Instant::now() < end);
                    std::thread::yield_now();
                }
                other => break other.unwrap_err(),
            }
        };
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let mut line = String::new();
        BufReader::new(&client).read_line(&mut line).unwrap();
        assert_eq!(line, "-ERR this port requires TLS\r\n");
        let c = counters.tls.port(TlsPortName::Subscribers);
        assert_eq!(
            c.plaintext_refused
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert!(s.write(b"x").is_err());
    }
}
