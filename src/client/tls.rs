//! The client side of TLS, for the tools (`tickfan subscribe --tls-ca`)
//! and the tests: a rustls client configuration trusting a CA file, and a
//! non-blocking client stream for mio event loops.
//!
//! [`ClientStream`] has the server stream's contract (`net/stream.rs`):
//! `read` returns plaintext rustls already holds before it reads the
//! socket, and `WouldBlock` only when the socket would block, so an
//! edge-triggered loop that reads until `WouldBlock` misses nothing; one
//! that stops earlier (a throttled reader) must come back without an event.
//! The handshake is done blocking, before the stream goes non-blocking
//! ([`ClientStream::connect_blocking`]).

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream as StdTcpStream;
use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A client configuration trusting the certificates in `ca` (PEM), with
/// the client certificate and key of `identity` (PEM files) for a server
/// that asks for one (mutual TLS).
///
/// # Errors
/// A file that cannot be read or holds no certificate (or key), as one line.
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in certs(ca)? {
        roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
    }
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("{}: no private key: {e}", key.display()))?;
            builder
                .with_client_auth_cert(certs(cert)?, key)
                .map_err(|e| format!("{}: {e}", cert.display()))?
        }
    };
    Ok(Arc::new(config))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificates from {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// The name the server's certificate must carry for `addr`: its IP
/// address (a certificate for `127.0.0.1` lists it as an IP SAN).
pub fn server_name(addr: std::net::SocketAddr) -> ServerName<'static> {
    ServerName::IpAddress(addr.ip().into())
}

/// A client connection: plaintext, or TLS over a mio socket.
#[derive(Debug)]
pub enum ClientStream {
    /// Plaintext.
    Plain(mio::net::TcpStream),
    /// TLS (rustls).
    Tls(Box<TlsClient>),
}

/// Ciphertext read from the socket per `read` call: rustls' own
/// `read_tls` takes at most 4 KiB per call (a syscall each); a reader of
/// 50,000 messages per second per connection wants fewer.
const SOCKET_READ: usize = 64 * 1024;

/// The TLS side of a [`ClientStream`].
#[derive(Debug)]
pub struct TlsClient {
    conn: ClientConnection,
    sock: mio::net::TcpStream,
    /// Ciphertext read from the socket and not yet given to rustls:
    /// `rx[at..len]`.
    rx: Box<[u8]>,
    at: usize,
    len: usize,
    eof: bool,
}

impl TlsClient {
    /// Gives rustls more ciphertext: from `rx`, else one socket read.
    /// `Ok(false)` at the socket's end; `WouldBlock` when it has nothing.
    fn feed(&mut self) -> io::Result<bool> {
        if self.at == self.len {
            let n = loop {
                match self.sock.read(&mut self.rx) {
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    other => break other?,
                }
            };
            if n == 0 {
                return Ok(false);
            }
            (self.at, self.len) = (0, n);
        }
        let n = self.conn.read_tls(&mut &self.rx[self.at..self.len])?;
        if n == 0 {
            // rustls has no room although its records were processed: a
            // record larger than TLS allows.
            return Err(io::Error::other("TLS: a record over the size limit"));
        }
        self.at += n;
        Ok(true)
    }
}

impl ClientStream {
    /// Runs the TLS handshake on a connected blocking socket, then calls
    /// `setup` with a blocking TLS stream (send `AUTH`, `SUBSCRIBE`…; read
    /// replies), then makes the socket non-blocking for a mio loop.
    ///
    /// # Errors
    /// The handshake fails (the server's certificate is not trusted, the
    /// server wants a client certificate…), or `setup` or the socket does.
    pub fn connect_blocking<T>(
        mut sock: StdTcpStream,
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        setup: impl FnOnce(&StdTcpStream, &mut dyn ReadWrite) -> io::Result<T>,
    ) -> io::Result<(ClientStream, T)> {
        let mut conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        let raw = sock.try_clone()?;
        let out = {
            let mut tls = rustls::Stream::new(&mut conn, &mut sock);
            let out = setup(&raw, &mut tls)?;
            tls.flush()?;
            out
        };
        while conn.wants_write() {
            conn.write_tls(&mut sock)?;
        }
        sock.set_nonblocking(true)?;
        Ok((
            ClientStream::Tls(Box::new(TlsClient {
                conn,
                sock: mio::net::TcpStream::from_std(sock),
                rx: vec![0u8; SOCKET_READ].into_boxed_slice(),
                at: 0,
                len: 0,
                eof: false,
            })),
            out,
        ))
    }

    /// The TCP socket.
    pub fn tcp(&self) -> &mio::net::TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(t) => &t.sock,
        }
    }

    /// The TCP socket, to register it with a poller.
    pub fn tcp_mut(&mut self) -> &mut mio::net::TcpStream {
        match self {
            ClientStream::Plain(s) => s,
            ClientStream::Tls(t) => &mut t.sock,
        }
    }
}

/// `Read + Write`, as one object type.
pub trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

impl Read for ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            ClientStream::Plain(s) => return s.read(buf),
            ClientStream::Tls(t) => t,
        };
        loop {
            match t.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if t.eof {
                return Ok(0);
            }
            if !t.feed()? {
                t.eof = true;
            }
            t.conn.process_new_packets().map_err(io::Error::other)?;
            // Key updates and alerts the server asked for (rare; small).
            while t.conn.wants_write() {
                match t.conn.write_tls(&mut t.sock) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

impl Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            ClientStream::Plain(s) => s.write(buf),
            ClientStream::Tls(t) => {
                let n = t.conn.writer().write(buf)?;
                t.flush_tls()?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            ClientStream::Plain(s) => s.flush(),
            ClientStream::Tls(t) => t.flush_tls(),
        }
    }
}

impl TlsClient {
    fn flush_tls(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }
}
