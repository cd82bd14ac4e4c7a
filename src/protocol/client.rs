//! A minimal blocking RESP2 client codec for the tools and the tests (the
//! client side of what [`super::resp`] serves): reads one reply frame at a
//! time and encodes commands. Not used by the engine itself.

use std::io::BufRead;

/// One reply frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// `+text`
    Simple(Vec<u8>),
    /// `-text`
    Error(Vec<u8>),
    /// `:n`
    Integer(i64),
    /// `$n` bulk, `None` for `$-1`
    Bulk(Option<Vec<u8>>),
    /// `*n`
    Array(Vec<Frame>),
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

fn read_line<R: BufRead>(r: &mut R, line: &mut Vec<u8>) -> std::io::Result<()> {
    line.clear();
    if r.read_until(b'\n', line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
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
    let mut line = Vec::with_capacity(64);
    read_line(r, &mut line)?;
    let (&kind, rest) = line.split_first().ok_or_else(|| bad("empty line"))?;
    Ok(match kind {
        b'+' => Frame::Simple(rest.to_vec()),
        b'-' => Frame::Error(rest.to_vec()),
        b':' => Frame::Integer(int(rest)?),
        b'$' => {
            let n = int(rest)?;
            if n < 0 {
                Frame::Bulk(None)
            } else {
                let mut buf = vec![0; n as usize + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(n as usize);
                Frame::Bulk(Some(buf))
            }
        }
        b'*' => {
            let n = int(rest)?;
            let mut items = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n.max(0) {
                items.push(read_frame(r)?);
            }
            Frame::Array(items)
        }
        _ => return Err(bad("unknown frame type")),
    })
}

/// A data message: (channel, payload), for `message` and `pmessage` frames.
pub fn as_message(f: &Frame) -> Option<(&[u8], &[u8])> {
    let Frame::Array(items) = f else { return None };
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
