//! A minimal blocking RESP2/RESP3 client codec for the tools and the tests
//! (the client side of what [`crate::protocol::resp`] and its RESP3
//! [`framing`](crate::protocol::resp::framing) serve):
//! reads one reply frame at a time, parsed ([`read_frame`]) or as its exact
//! bytes ([`read_raw_frame`], for byte-for-byte comparisons), and encodes
//! commands. Not used by the engine itself: the engine reads requests, with
//! its one RESP reader, [`crate::protocol::resp::parse_command`]; this
//! reads the other direction (replies, RESP3 types included).

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::resp::framing::{self, Proto};
    use crate::protocol::resp::{self, SubscriptionKind};

    fn frames(mut bytes: &[u8]) -> Vec<Frame> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(read_frame(&mut bytes).unwrap());
        }
        out
    }

    fn bulk(b: &[u8]) -> Frame {
        Frame::Bulk(Some(b.to_vec()))
    }

    #[test]
    fn reads_what_the_resp2_encoder_writes() {
        let mut wire = Vec::new();
        resp::append_simple_string(&mut wire, b"OK");
        resp::append_error(&mut wire, b"ERR boom");
        resp::append_integer(&mut wire, -42);
        resp::append_bulk(&mut wire, b"a\r\nb");
        resp::append_null_bulk(&mut wire);
        resp::append_subscription_reply(&mut wire, SubscriptionKind::Subscribe, Some(b"EURUSD"), 1);
        resp::append_ping_reply(&mut wire, None, true);
        assert_eq!(
            frames(&wire),
            [
                Frame::Simple(b"OK".to_vec()),
                Frame::Error(b"ERR boom".to_vec()),
                Frame::Integer(-42),
                bulk(b"a\r\nb"),
                Frame::Bulk(None),
                Frame::Array(vec![bulk(b"subscribe"), bulk(b"EURUSD"), Frame::Integer(1)]),
                Frame::Array(vec![bulk(b"pong"), bulk(b"")]),
            ]
        );
        // `*-1` is a null too.
        assert_eq!(frames(b"*-1\r\n"), [Frame::Bulk(None)]);
    }

    #[test]
    fn reads_what_the_resp3_framing_writes() {
        let mut wire = Vec::new();
        framing::append_subscription_reply(
            &mut wire,
            Proto::Resp3,
            SubscriptionKind::Unsubscribe,
            None,
            0,
        );
        framing::append_map_header(&mut wire, Proto::Resp3, 1);
        resp::append_bulk(&mut wire, b"proto");
        resp::append_integer(&mut wire, 3);
        framing::append_verbatim_txt(&mut wire, Proto::Resp3, b"id=1");
        framing::append_null(&mut wire, Proto::Resp3);
        wire.extend_from_slice(
            b"~2\r\n#t\r\n#f\r\n,1.5\r\n(12345678901234567890\r\n!5\r\nERR x\r\n",
        );
        assert_eq!(
            frames(&wire),
            [
                Frame::Push(vec![bulk(b"unsubscribe"), Frame::Null, Frame::Integer(0)]),
                Frame::Map(vec![(bulk(b"proto"), Frame::Integer(3))]),
                Frame::Verbatim(b"txt".to_vec(), b"id=1".to_vec()),
                Frame::Null,
                Frame::Set(vec![Frame::Boolean(true), Frame::Boolean(false)]),
                Frame::Number(b"1.5".to_vec()),
                Frame::Number(b"12345678901234567890".to_vec()),
                Frame::Error(b"ERR x".to_vec()),
            ]
        );
    }

    #[test]
    fn messages_in_both_protocols() {
        let mut tail = Vec::new();
        resp::append_message_tail(&mut tail, b"EURUSD", b"1,EURUSD,1.1,1.2,1,1,7,9");
        for proto in [Proto::Resp2, Proto::Resp3] {
            let frame = [framing::message_prefix(proto), &tail].concat();
            let f = read_frame(&mut &frame[..]).unwrap();
            assert_eq!(
                as_message(&f),
                Some((&b"EURUSD"[..], &b"1,EURUSD,1.1,1.2,1,1,7,9"[..])),
                "{proto:?}"
            );
            let mut pframe = Vec::new();
            framing::append_pmessage_prefix(&mut pframe, proto, b"EUR*");
            pframe.extend_from_slice(&tail);
            let f = read_frame(&mut &pframe[..]).unwrap();
            assert_eq!(
                as_message(&f),
                Some((&b"EURUSD"[..], &b"1,EURUSD,1.1,1.2,1,1,7,9"[..])),
                "{proto:?}"
            );
        }
        // A confirmation is not a message.
        let mut conf = Vec::new();
        resp::append_subscription_reply(&mut conf, SubscriptionKind::Subscribe, Some(b"x"), 1);
        assert_eq!(as_message(&read_frame(&mut &conf[..]).unwrap()), None);
        assert_eq!(as_message(&Frame::Integer(1)), None);
    }

    #[test]
    fn raw_frames_are_the_exact_bytes_one_frame_at_a_time() {
        let first = b">3\r\n$7\r\nmessage\r\n$1\r\na\r\n$3\r\nx\ry\r\n";
        let second = b"%1\r\n+k\r\n=8\r\ntxt:abcd\r\n";
        let stream = [&first[..], second, b":1\r\n"].concat();
        let mut r = &stream[..];
        assert_eq!(read_raw_frame(&mut r).unwrap(), first);
        assert_eq!(read_raw_frame(&mut r).unwrap(), second);
        assert_eq!(read_frame(&mut r).unwrap(), Frame::Integer(1));
        assert_eq!(
            read_frame(&mut r).unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn rejects_bytes_that_are_not_resp() {
        for bad in [&b"?1\r\n"[..], b"\r\n", b":x\r\n", b"=2\r\nab\r\n"] {
            assert_eq!(
                read_frame(&mut &bad[..]).unwrap_err().kind(),
                std::io::ErrorKind::InvalidData,
                "{bad:?}"
            );
        }
        // A bulk cut short is an unexpected end, not a frame.
        assert_eq!(
            read_frame(&mut &b"$5\r\nab"[..]).unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }

    #[test]
    fn commands_are_what_the_server_parses() {
        let wire = command(&[b"SUBSCRIBE", b"EUR USD", b""]);
        assert_eq!(
            wire,
            b"*3\r\n$9\r\nSUBSCRIBE\r\n$7\r\nEUR USD\r\n$0\r\n\r\n"
        );
        let mut args = Vec::new();
        assert_eq!(
            resp::parse_command(&wire, &mut args, &resp::Limits::default()),
            resp::Parsed::Command {
                consumed: wire.len()
            }
        );
        let got: Vec<&[u8]> = args.iter().map(|r| &wire[r.clone()]).collect();
        assert_eq!(got, [&b"SUBSCRIBE"[..], b"EUR USD", b""]);
    }
}
