//! The client side of `--token-file`: the tools read the token with the
//! engine's own loader ([`Token::from_file`]) and present it once per
//! connection, before anything else, then wait for the server's answer.
//!
//! ```text
//!  feed / order port (lines):   AUTH <token>\n          ◀── OK\n   | ERR …\n, closed
//!  subscriber port (RESP):      *2 AUTH <token>         ◀── +OK    | -WRONGPASS …, closed
//! ```
//!
//! The handshake is blocking and happens before the connection's stream of
//! ticks, commands or orders starts, so nothing can be interleaved with the
//! answer: the answer is read a byte at a time (once per connection; no
//! read-ahead), and the caller's reader starts exactly after it. A refusal
//! is a runtime failure (exit 1) whose message is the server's line; the
//! token itself never appears in a message.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use tickfan::auth::{Token, LINE_OK};
use tickfan::client::resp::{command, read_frame, Frame};

use tickfan::error::Failure;

/// How long to wait for the answer to `AUTH`. The engine answers at once;
/// this only bounds a server that does not speak the protocol (e.g. a feed
/// port without `--token-file` takes the line as a tick and never answers).
pub const AUTH_REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest answer line read before giving up on a server.
const MAX_ANSWER: u64 = 1024;

/// Reads the token of `--token-file`, if given.
///
/// # Errors
/// [`Failure::Usage`] (exit 2) naming the flag when the file cannot be
/// read, is empty or holds whitespace.
pub fn load(path: Option<&Path>) -> Result<Option<Token>, Failure> {
    path.map(|p| Token::from_file(p).map_err(|e| Failure::Usage(format!("--token-file: {e}"))))
        .transpose()
}

/// What the server said to `AUTH`, when it was not the expected success.
fn refused(port: &str, stream: &TcpStream, answer: &str) -> Failure {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    Failure::Runtime(format!("{port} {peer} refused the token: {answer}"))
}

fn io_failure(port: &str, stream: &TcpStream, e: &std::io::Error) -> Failure {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "?".into(), |a| a.to_string());
    let why = match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => format!(
            "no answer to AUTH within {} s (is the server running with --token-file?)",
            AUTH_REPLY_TIMEOUT.as_secs()
        ),
        std::io::ErrorKind::UnexpectedEof => "closed the connection without answering AUTH".into(),
        _ => format!("authentication failed: {e}"),
    };
    Failure::Runtime(format!("{port} {peer}: {why}"))
}

/// Runs `f` with [`AUTH_REPLY_TIMEOUT`] as the read timeout, then puts the
/// stream back to blocking reads without a timeout.
fn with_timeout<T>(
    stream: &TcpStream,
    f: impl FnOnce() -> std::io::Result<T>,
) -> std::io::Result<T> {
    stream.set_read_timeout(Some(AUTH_REPLY_TIMEOUT))?;
    let r = f();
    stream.set_read_timeout(None)?;
    r
}

/// Line protocols (feed, orders): sends `AUTH <token>\n` and reads one
/// answer line. `port` names the port in messages (`feed port`).
///
/// # Errors
/// [`Failure::Runtime`] with the server's line (`ERR invalid token`), or
/// when the server closes, does not answer in time, or the socket fails.
pub fn line_handshake(stream: &TcpStream, token: &Token, port: &str) -> Result<(), Failure> {
    let mut hello = Vec::with_capacity(token.expose().len() + 6);
    hello.extend_from_slice(b"AUTH ");
    hello.extend_from_slice(token.expose());
    hello.push(b'\n');
    let mut answer = Vec::with_capacity(64);
    with_timeout(stream, || {
        (&*stream).write_all(&hello)?;
        // Capacity 1: one byte per read, so nothing after the line is taken.
        let mut r = BufReader::with_capacity(1, stream).take(MAX_ANSWER);
        if r.read_until(b'\n', &mut answer)? == 0 || answer.last() != Some(&b'\n') {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    })
    .map_err(|e| io_failure(port, stream, &e))?;
    if answer == LINE_OK || answer == b"OK\r\n" {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&answer);
    Err(refused(port, stream, text.trim_end()))
}

/// RESP (subscriber port, Redis): sends `AUTH <token>` and reads one reply
/// frame, which must be `+OK`.
///
/// # Errors
/// [`Failure::Runtime`] with the server's error (`WRONGPASS …`), or when
/// the server closes, does not answer in time, or the socket fails.
pub fn resp_handshake(stream: &TcpStream, token: &Token, port: &str) -> Result<(), Failure> {
    resp_handshake_on(stream, &mut &*stream, token, port)
}

/// [`resp_handshake`] over `io` (a TLS stream on the socket `stream`,
/// whose read timeout bounds the wait).
///
/// # Errors
/// As [`resp_handshake`].
pub fn resp_handshake_on<S: Read + Write + ?Sized>(
    stream: &TcpStream,
    io: &mut S,
    token: &Token,
    port: &str,
) -> Result<(), Failure> {
    let hello = command(&[b"AUTH", token.expose()]);
    let frame = with_timeout(stream, || {
        io.write_all(&hello)?;
        io.flush()?;
        // Capacity 1: one byte per read, so nothing after the frame is taken.
        read_frame(&mut BufReader::with_capacity(1, io))
    })
    .map_err(|e| io_failure(port, stream, &e))?;
    match frame {
        Frame::Simple(s) if s == b"OK" => Ok(()),
        Frame::Error(e) => Err(refused(port, stream, &String::from_utf8_lossy(&e))),
        other => Err(refused(
            port,
            stream,
            &format!("unexpected reply {other:?}"),
        )),
    }
}
