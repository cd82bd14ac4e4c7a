//! A minimal blocking RESP2/RESP3 client codec for the tools and the tests
//! (the client side of what [`crate::protocol::resp`] and its RESP3
//! [`framing`](crate::protocol::resp::framing) serve):
//! reads one reply frame at a time, parsed ([`read_frame`]) or as its exact
//! bytes ([`read_raw_frame`], for byte-for-byte comparisons), and encodes
//! commands. Not used by the engine itself.

use std::io::BufRead;

/// One reply frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `+text`
    Simple(Vec<u8>),
    /// `-text` (and RESP3 `!` blob errors)
    Error(Vec<u8>),
    /// `:n`
    Integer(i64),
    /// `$n` bulk, `None` for `$-1`
    Bulk(Option<Vec<u8>>),
    /// `*n`
    Array(Vec<Frame>),
    /// RESP3 `_` (null)
    Null,
    /// RESP3 `>n` (push: pub/sub confirmations and messages)
    Push(Vec<Frame>),
    /// RESP3 `%n` (map), as key/value pairs in order
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n` (set)
    Set(Vec<Frame>),
    /// RESP3 `=n` verbatim string: (format, text), e.g. (`txt`, …)
    Verbatim(Vec<u8>, Vec<u8>),
    /// RESP3 `#t` / `#f`
    Boolean(bool),
    /// RESP3 `,` double and `(` big number, as their text
    Number(Vec<u8>),
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// Reads one line into `line` (without its CR LF), recording its bytes in `raw`.
fn read_line<R: BufRead>(r: &mut R, line: &mut Vec<u8>, raw: &mut Vec<u8>) -> std::io::Result<()> {
    line.clear();
    if r.read_until(b'\n', line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    raw.extend_from_slice(line);
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(())
}

fn int(b: &[u8]) -> std::io::Result<i64> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad integer"))
}

/// Reads one frame.
///
/// # Errors
/// End of stream, an I/O error, or bytes that are not RESP.
pub fn read_frame<R: BufRead>(r: &mut R) -> std::io::Result<Frame> {
    read_into(r, &mut Vec::new())
}

/// Reads one frame and returns its exact bytes (for byte-for-byte comparisons).
///
/// # Errors
/// As [`read_frame`].
pub fn read_raw_frame<R: BufRead>(r: &mut R) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    read_into(r, &mut raw)?;
    Ok(raw)
}

fn read_into<R: BufRead>(r: &mut R, raw: &mut Vec<u8>) -> std::io::Result<Frame> {
    let mut line = Vec::with_capacity(64);
    read_line(r, &mut line, raw)?;
    let (&kind, rest) = line.split_first().ok_or_else(|| bad("empty line"))?;
    let items = |r: &mut R, raw: &mut Vec<u8>, n: i64| -> std::io::Result<Vec<Frame>> {
        let mut items = Vec::with_capacity(n.clamp(0, 1024) as usize);
        for _ in 0..n.max(0) {
            items.push(read_into(r, raw)?);
        }
        Ok(items)
    };
    Ok(match kind {
        b'+' => Frame::Simple(rest.to_vec()),
        b'-' => Frame::Error(rest.to_vec()),
        b':' => Frame::Integer(int(rest)?),
        b'$' | b'=' | b'!' => {
            let n = int(rest)?;
            if n < 0 {
                return Ok(Frame::Bulk(None));
            }
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf)?;
            raw.extend_from_slice(&buf);
            buf.truncate(n as usize);
            match kind {
                b'$' => Frame::Bulk(Some(buf)),
                b'!' => Frame::Error(buf),
                _ => {
                    if buf.len() < 4 || buf[3] != b':' {
                        return Err(bad("verbatim string without a format"));
                    }
                    let text = buf.split_off(4);
                    buf.truncate(3);
                    Frame::Verbatim(buf, text)
                }
            }
        }
        b'*' => {
            let n = int(rest)?;
            if n < 0 {
                Frame::Bulk(None)
            } else {
                Frame::Array(items(r, raw, n)?)
            }
        }
        b'>' => Frame::Push(items(r, raw, int(rest)?)?),
        b'~' => Frame::Set(items(r, raw, int(rest)?)?),
        b'%' => {
            let flat = items(r, raw, int(rest)? * 2)?;
            let mut pairs = Vec::with_capacity(flat.len() / 2);
            let mut it = flat.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                pairs.push((k, v));
            }
            Frame::Map(pairs)
        }
        b'_' => Frame::Null,
        b'#' => Frame::Boolean(rest == b"t"),
        b',' | b'(' => Frame::Number(rest.to_vec()),
        _ => return Err(bad("unknown frame type")),
    })
}

/// A data message: (channel, payload), for `message` and `pmessage` frames
/// (RESP2 arrays or RESP3 pushes).
pub fn as_message(f: &Frame) -> Option<(&[u8], &[u8])> {
    let (Frame::Array(items) | Frame::Push(items)) = f else {
        return None;
    };
    let bulk = |i: usize| match items.get(i) {
        Some(Frame::Bulk(Some(b))) => Some(&b[..]),
        _ => None,
    };
    match (bulk(0)?, items.len()) {
        (b"message", 3) => Some((bulk(1)?, bulk(2)?)),
        (b"pmessage", 4) => Some((bulk(2)?, bulk(3)?)),
        _ => None,
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}
